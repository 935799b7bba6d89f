#!/usr/bin/env bash
# scripts/bench.d/connections.sh: what connections cost, side by side with
# a plain local table.
#
#   cold     cold sessions: a new session running one point select, or one
#            count(*) over CONN_BENCH_ROWS rows (default 1M), on a local
#            table and on a shardext table (32 shards): a fresh psql process
#            per query (as a user at a terminal would), median of
#            CONN_BENCH_COLD_RUNS runs (default 25) taken in turns; and
#            pgbench -C (a new connection per transaction, no process start)
#            for CONN_BENCH_SECONDS (default 10).  Ratios to local.
#   clients  many clients: workers restarted with max_connections = 60 (the
#            coordinator keeps 300), the mix of point selects (6), point
#            updates (3) and multi-shard aggregates (1) over 10,000 rows with
#            50 and with 200 pgbench clients, CONN_BENCH_MIX_SECONDS each
#            (default 20), CONN_BENCH_ROUNDS rounds in turns (default 2),
#            best of each; failed transactions and waits for the shared
#            pool.  The workers get their settings back afterwards.
#   select   pgbench -S -M prepared (4 clients, CONN_BENCH_SECONDS) on
#            pgbench_accounts (scale 10) distributed by aid.  With
#            CONN_BENCH_BASELINE_PG_CONFIG (the pg_config of a PostgreSQL
#            installation with another shardext build, e.g. main's), the
#            cluster is restarted with that installation and with this one
#            in turns, CONN_BENCH_ROUNDS times, and both are reported.
#
# CONN_BENCH_PARTS (default "cold clients select") selects the parts.  Runs
# against the local cluster (SHARDEXT_PORT, default 9700; workers at +1 and
# +2; SHARDEXT_CLUSTER_DIR and PG_CONFIG as for scripts/cluster) in
# database shardext_bench_conn, dropped at the end.  The machine this runs
# on may be shared: compare ratios within one run.
set -euo pipefail
cd "$(dirname "$0")/../.."

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PORT=${SHARDEXT_PORT:-9700}
W1=$((PORT + 1))
W2=$((PORT + 2))
DB=shardext_bench_conn
ROWS=${CONN_BENCH_ROWS:-1000000}
COLD_RUNS=${CONN_BENCH_COLD_RUNS:-25}
SECONDS_=${CONN_BENCH_SECONDS:-10}
MIX_SECONDS=${CONN_BENCH_MIX_SECONDS:-20}
ROUNDS=${CONN_BENCH_ROUNDS:-2}
BASELINE=${CONN_BENCH_BASELINE_PG_CONFIG:-}
PARTS=" ${CONN_BENCH_PARTS:-cold clients select} "
TMP=$(mktemp -d)
chmod 755 "$TMP"

bindir() { "${1:-$PG_CONFIG}" --bindir; }
BINDIR=$(bindir)
psql_() { "$BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres "$@"; }
coord() { psql_ -p "$PORT" -d "$DB" -c "$1"; }

restart_cluster() {	# pg_config
	PG_CONFIG=$1 scripts/cluster stop >/dev/null
	PG_CONFIG=$1 scripts/cluster start >/dev/null
}
set_worker_connections() {	# value|default
	local w
	for w in $W1 $W2; do
		if [ "$1" = default ]; then
			psql_ -p "$w" -d postgres -c "ALTER SYSTEM RESET max_connections"
		else
			psql_ -p "$w" -d postgres -c "ALTER SYSTEM SET max_connections = $1"
		fi
	done
	restart_cluster "$PG_CONFIG"
}
cleanup() {
	rm -rf "$TMP"
	for port in $PORT $W1 $W2; do
		psql_ -p "$port" -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" 2>/dev/null || true
	done
}
trap cleanup EXIT
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for port in $PORT $W1 $W2; do
	psql_ -p "$port" -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
done
psql_ -p "$PORT" -d "$DB" <<SQL
SET client_min_messages TO warning;
CREATE EXTENSION shardext;
SELECT shardext_add_node('127.0.0.1', $W1);
SELECT shardext_add_node('127.0.0.1', $W2);
SQL

# --- cold sessions
if [[ "$PARTS" == *" cold "* ]]; then
	echo "cold sessions: $ROWS rows, local and distributed ..."
	psql_ -p "$PORT" -d "$DB" <<SQL
SET client_min_messages TO warning;
CREATE TABLE cold_local (id int PRIMARY KEY, v int NOT NULL, filler text);
INSERT INTO cold_local SELECT g, g % 1000, 'row ' || g FROM generate_series(1, $ROWS) g;
VACUUM ANALYZE cold_local;
CREATE TABLE cold_dist (LIKE cold_local INCLUDING ALL);
INSERT INTO cold_dist SELECT * FROM cold_local;
SELECT create_distributed_table('cold_dist', 'id');
SELECT count(*) FROM shardext_run_on_shards('cold_dist', 'VACUUM ANALYZE %s');
SQL
	# warm the caches of the tables' pages
	coord "SELECT count(*) FROM cold_local" >/dev/null
	coord "SELECT count(*) FROM cold_dist" >/dev/null

	declare -A COLD
	for run in $(seq 1 "$COLD_RUNS"); do
		id=$((RANDOM * 30 % ROWS + 1))
		for t in cold_local cold_dist; do
			for q in "point:SELECT v FROM $t WHERE id = $id" "count:SELECT count(*) FROM $t"; do
				start=$(date +%s%N)
				psql_ -p "$PORT" -d "$DB" -c "${q#*:}" >/dev/null
				echo $((($(date +%s%N) - start) / 1000)) >>"$TMP/${q%%:*}_$t"
			done
		done
	done
	for q in point count; do
		for t in cold_local cold_dist; do
			COLD[${q}_$t]=$(median <"$TMP/${q}_$t")
		done
	done

	printf '\\set id random(1, %d)\nSELECT v FROM cold_local WHERE id = :id;\n' "$ROWS" >"$TMP/pl.sql"
	printf '\\set id random(1, %d)\nSELECT v FROM cold_dist WHERE id = :id;\n' "$ROWS" >"$TMP/pd.sql"
	printf 'SELECT count(*) FROM cold_local;\n' >"$TMP/cl.sql"
	printf 'SELECT count(*) FROM cold_dist;\n' >"$TMP/cd.sql"
	for f in pl pd cl cd; do
		tps=$("$BINDIR/pgbench" -n -C -c 1 -T "$SECONDS_" -f "$TMP/$f.sql" -h 127.0.0.1 -p "$PORT" \
			-U postgres "$DB" 2>&1 | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
		COLD[pgbench_$f]=$(awk -v t="$tps" 'BEGIN { printf "%.2f", 1000 / t }')
	done

	echo
	echo "cold sessions (a new session per query; medians of $COLD_RUNS fresh psql runs, and pgbench -C for ${SECONDS_}s)"
	printf '%-44s %12s %12s %10s\n' "" "local" "shardext" "ratio"
	printf '%-44s %9.1f ms %9.1f ms %10s\n' "psql: point select" \
		"$(awk -v v="${COLD[point_cold_local]}" 'BEGIN { print v / 1000 }')" \
		"$(awk -v v="${COLD[point_cold_dist]}" 'BEGIN { print v / 1000 }')" \
		"$(ratio "${COLD[point_cold_dist]}" "${COLD[point_cold_local]}")"
	printf '%-44s %9.1f ms %9.1f ms %10s\n' "psql: count(*) over $ROWS rows" \
		"$(awk -v v="${COLD[count_cold_local]}" 'BEGIN { print v / 1000 }')" \
		"$(awk -v v="${COLD[count_cold_dist]}" 'BEGIN { print v / 1000 }')" \
		"$(ratio "${COLD[count_cold_dist]}" "${COLD[count_cold_local]}")"
	printf '%-44s %9.2f ms %9.2f ms %10s\n' "pgbench -C: connection + point select" \
		"${COLD[pgbench_pl]}" "${COLD[pgbench_pd]}" "$(ratio "${COLD[pgbench_pd]}" "${COLD[pgbench_pl]}")"
	printf '%-44s %9.2f ms %9.2f ms %10s\n' "pgbench -C: connection + count(*)" \
		"${COLD[pgbench_cl]}" "${COLD[pgbench_cd]}" "$(ratio "${COLD[pgbench_cd]}" "${COLD[pgbench_cl]}")"
	echo
fi

# --- many clients
if [[ "$PARTS" == *" clients "* ]]; then
	echo "many clients: workers with max_connections = 60 ..."
	coord "CREATE TABLE mix_t (id int PRIMARY KEY, v int NOT NULL);
		INSERT INTO mix_t SELECT g, 0 FROM generate_series(1, 10000) g;
		SELECT create_distributed_table('mix_t', 'id');" >/dev/null
	printf '\\set id random(1, 10000)\nSELECT v FROM mix_t WHERE id = :id;\n' >"$TMP/select.sql"
	printf '\\set id random(1, 10000)\nUPDATE mix_t SET v = v + 1 WHERE id = :id;\n' >"$TMP/update.sql"
	printf 'SELECT count(*), sum(v) FROM mix_t;\n' >"$TMP/agg.sql"
	set_worker_connections 60
	trap 'set_worker_connections default; cleanup' EXIT
	declare -A MIX_TPS MIX_FAILED
	waits_before=$(coord "SELECT coalesce(sum(waits), 0) FROM shardext.connection_stats WHERE node_id IS NOT NULL" 2>/dev/null || echo 0)
	for round in $(seq 1 "$ROUNDS"); do
		for clients in 50 200; do
			out=$("$BINDIR/pgbench" -n -c $clients -j 4 -T "$MIX_SECONDS" -f "$TMP/select.sql@6" \
				-f "$TMP/update.sql@3" -f "$TMP/agg.sql@1" -h 127.0.0.1 -p "$PORT" -U postgres "$DB" 2>&1) || true
			tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
			failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
			aborted=$(grep -c "aborted in command" <<<"$out" || true)
			echo "  round $round, $clients clients: ${tps:-0} tps, ${failed:-?} failed, $aborted clients aborted"
			if [ -z "${MIX_TPS[$clients]:-}" ] || awk -v a="${tps:-0}" -v b="${MIX_TPS[$clients]}" 'BEGIN { exit !(a > b) }'; then
				MIX_TPS[$clients]=${tps:-0}
			fi
			MIX_FAILED[$clients]=$(( ${MIX_FAILED[$clients]:-0} + ${failed:-0} + aborted ))
		done
	done
	waits=$(coord "SELECT coalesce(sum(waits), 0) - $waits_before FROM shardext.connection_stats WHERE node_id IS NOT NULL" 2>/dev/null || echo "-")
	limit=$(coord "SELECT min(max_connections) FROM shardext.connection_stats WHERE node_id IS NOT NULL" 2>/dev/null || echo "-")
	set_worker_connections default
	trap cleanup EXIT
	echo
	echo "the mix (6 point selects : 3 point updates : 1 aggregate), workers with 60 connection slots, best of $ROUNDS runs of ${MIX_SECONDS}s"
	printf '%-14s %12s %10s\n' "clients" "tps" "failed"
	for clients in 50 200; do
		printf '%-14s %12.0f %10s\n' "$clients" "${MIX_TPS[$clients]}" "${MIX_FAILED[$clients]}"
	done
	echo "200 / 50 clients: $(ratio "${MIX_TPS[200]}" "${MIX_TPS[50]}"); shared pool limit per worker $limit; sessions waited for a connection $waits times"
	echo
fi

# --- pgbench -S, this build (and a baseline build)
# Throughput on a shared machine swings with other load, so the servers'
# CPU time per transaction is measured too: the CPU of the backends (of the
# coordinator and of both workers) that ended during the run, which their
# postmasters collect (cutime + cstime in /proc/<postmaster>/stat).
server_cpu_ticks() {
	local total=0 node pid
	for node in coordinator worker1 worker2; do
		pid=$(head -1 "$CLUSTER_DIR/$node/postmaster.pid")
		total=$((total + $(awk '{ print $16 + $17 }' "/proc/$pid/stat")))
	done
	echo "$total"
}
if [[ "$PARTS" == *" select "* ]]; then
	CLUSTER_DIR=${SHARDEXT_CLUSTER_DIR:-/var/tmp/shardext-cluster}
	echo "pgbench -S on scale 10, pgbench_accounts distributed ..."
	"$BINDIR/pgbench" -i -q -s 10 -h 127.0.0.1 -p "$PORT" -U postgres "$DB" >/dev/null 2>&1
	coord "SELECT create_distributed_table('pgbench_accounts', 'aid')" >/dev/null
	declare -A SEL CPU
	builds=("$PG_CONFIG")
	[ -n "$BASELINE" ] && builds=("$BASELINE" "$PG_CONFIG")
	ticks_per_second=$(getconf CLK_TCK)
	for round in $(seq 1 "$ROUNDS"); do
		for build in "${builds[@]}"; do
			restart_cluster "$build"
			before=$(server_cpu_ticks)
			out=$("$(bindir "$build")/pgbench" -n -S -M prepared -c 4 -j 4 -T "$SECONDS_" -h 127.0.0.1 \
				-p "$PORT" -U postgres "$DB" 2>&1)
			sleep 1
			after=$(server_cpu_ticks)
			tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
			txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
			cpu=$(awk -v t=$((after - before)) -v hz="$ticks_per_second" -v n="$txns" \
				'BEGIN { printf "%.1f", t / hz * 1000000 / n }')
			echo "  round $round, $build: $tps tps, $cpu us of server CPU per transaction"
			if [ -z "${SEL[$build]:-}" ] || awk -v a="$tps" -v b="${SEL[$build]}" 'BEGIN { exit !(a > b) }'; then
				SEL[$build]=$tps
			fi
			if [ -z "${CPU[$build]:-}" ] || awk -v a="$cpu" -v b="${CPU[$build]}" 'BEGIN { exit !(a < b) }'; then
				CPU[$build]=$cpu
			fi
		done
	done
	[ -n "$BASELINE" ] && restart_cluster "$PG_CONFIG"
	echo
	echo "pgbench -S -M prepared, 4 clients, best of $ROUNDS runs of ${SECONDS_}s (and the least server CPU per transaction)"
	for build in "${builds[@]}"; do
		printf '%-60s %10.0f tps %8s us CPU/transaction\n' "$build" "${SEL[$build]}" "${CPU[$build]}"
	done
	if [ -n "$BASELINE" ]; then
		echo "this build / baseline: $(ratio "${SEL[$PG_CONFIG]}" "${SEL[$BASELINE]}") tps," \
			"$(ratio "${CPU[$PG_CONFIG]}" "${CPU[$BASELINE]}") CPU per transaction"
	fi
fi
