#!/usr/bin/env bash
# scripts/bench.d/single_box.sh: shardext against plain PostgreSQL on the
# same machine, for the workloads of issue 23 (how close a coordinator and
# two workers on one box come to a single server):
#
#   select      pgbench -S, simple protocol and -M prepared
#   tpcb        pgbench's TPC-B-like transaction, simple protocol (and
#               -M prepared), all four tables distributed: accounts and
#               history by aid (co-located), branches by bid, tellers by tid
#   aggregate   SELECT count(*), sum(abalance), avg(abalance) over the 1M
#               accounts (warm, median of SINGLE_BOX_AGG_RUNS, default 7),
#               the runs in one session (the coordinator keeps its
#               connections to the workers) and each in a new session
#   group by    SELECT bid, count(*), sum(abalance) ... GROUP BY bid, likewise
#   copy        COPY of SINGLE_BOX_COPY_ROWS (default 2M) CSV rows of 5
#               columns from a server file into 32 shards, rows/s
#   cpu         the CPU per statement (from /proc) of the coordinator's
#               backend and of the worker backends it uses, for pgbench -S
#               with one client (simple and prepared) and a TPC-B
#               transaction, next to the local backend's
#
# pgbench scale 10 (1M accounts), 32 shards, SINGLE_BOX_CLIENTS clients
# (default 8), SINGLE_BOX_SECONDS per run (default 20); every workload runs
# local and distributed in turns, SINGLE_BOX_ROUNDS rounds (default 2), and
# each round's ratio is printed.  SINGLE_BOX_PARTS (default "select tpcb
# aggregate copy cpu") selects the parts.  Databases shardext_bench_box
# (distributed) and shardext_bench_box_local (plain tables) on the cluster
# of scripts/cluster; recreated at the start, dropped at the end.  The
# machine may be shared: the CPU per statement stays put under load, the
# throughput ratios do not; note the load average printed with the results.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench.d/lib/env.sh

CLIENTS=${SINGLE_BOX_CLIENTS:-8}
SECONDS_=${SINGLE_BOX_SECONDS:-20}
ROUNDS=${SINGLE_BOX_ROUNDS:-2}
AGG_RUNS=${SINGLE_BOX_AGG_RUNS:-7}
COPY_ROWS=${SINGLE_BOX_COPY_ROWS:-2000000}
CPU_STATEMENTS=${SINGLE_BOX_CPU_STATEMENTS:-5000}
PARTS=" ${SINGLE_BOX_PARTS:-select tpcb aggregate copy cpu} "
DB=shardext_bench_box
LOCALDB=shardext_bench_box_local
TMP=$(mktemp -d)
chmod 755 "$TMP"
DATA=/tmp/shardext_bench_box_$PORT.csv
HZ=$(getconf CLK_TCK)
trap 'rm -rf "$TMP" "$DATA"' EXIT

coord() { $PSQL -p "$PORT" -d "$1" -c "$2"; }
load() { awk '{ print $1, $2, $3 }' /proc/loadavg; }
echo "load average at start: $(load)"

echo "setting up pgbench scale 10 twice (local, distributed with 32 shards) ..."
for port in $PORT $W1 $W2; do
	$PSQL -p "$port" -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
done
$PSQL -p "$PORT" -d postgres -c "DROP DATABASE IF EXISTS $LOCALDB WITH (FORCE)" -c "CREATE DATABASE $LOCALDB"
coord "$DB" "SET client_min_messages TO warning; CREATE EXTENSION shardext;
	SELECT shardext_add_node('127.0.0.1', $W1); SELECT shardext_add_node('127.0.0.1', $W2)" >/dev/null
"$PGBENCH" -i -q -s 10 -h 127.0.0.1 -p "$PORT" -U postgres "$LOCALDB" >/dev/null 2>&1
"$PGBENCH" -i -q -s 10 -h 127.0.0.1 -p "$PORT" -U postgres "$DB" >/dev/null 2>&1
coord "$DB" "SET client_min_messages TO warning;
	SELECT create_distributed_table('pgbench_accounts', 'aid', shard_count => 32);
	SELECT create_distributed_table('pgbench_history', 'aid', colocate_with => 'pgbench_accounts');
	SELECT create_distributed_table('pgbench_branches', 'bid', shard_count => 32, colocate_with => 'none');
	SELECT create_distributed_table('pgbench_tellers', 'tid', colocate_with => 'pgbench_branches');
	SELECT shardext_run_on_shards('pgbench_accounts', 'VACUUM ANALYZE %s')" >/dev/null
for db in $DB $LOCALDB; do
	[ "$(coord "$db" "SELECT count(*), sum(abalance) FROM pgbench_accounts")" = "1000000|0" ] ||
		{ echo "$db: pgbench_accounts is not as expected" >&2; exit 1; }
done

# tps of a pgbench run: pgbench args...
tps() {
	local out
	out=$("$PGBENCH" -n -c "$CLIENTS" -j 2 -T "$SECONDS_" -h 127.0.0.1 -p "$PORT" -U postgres "$@" 2>&1) ||
		{ echo "$out" | tail -20 >&2; exit 1; }
	sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# milliseconds a statement takes, as psql's \timing reports it (warm: run once before)
timed() {	# db sql
	$PSQL -p "$PORT" -d "$1" -c '\timing on' -c "$2" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1
}
# the median of AGG_RUNS runs of a statement in one session, after one more
# (the session keeps its connections to the workers from one to the next)
timed_in_session() {	# db sql
	{ echo '\timing on'; for i in $(seq 0 "$AGG_RUNS"); do echo "$2;"; done; } |
		$PSQL -p "$PORT" -d "$1" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -n +2 | median
}
RESULTS=""
result() { RESULTS+="$(printf '%-48s %s' "$1" "$2")"$'\n'; echo "  $1: $2"; }

throughput() {	# label, pgbench args (without the database)
	local label=$1 line="" l d
	shift
	for round in $(seq 1 "$ROUNDS"); do
		l=$(tps "$@" "$LOCALDB")
		d=$(tps "$@" "$DB")
		line+="$(printf '%.0f / %.0f tps = %sx; ' "$d" "$l" "$(ratio "$d" "$l")")"
	done
	result "$label" "${line%; } (load $(load))"
}

if [[ "$PARTS" == *" select "* ]]; then
	echo "pgbench -S, $CLIENTS clients, ${SECONDS_}s per run ..."
	throughput "pgbench -S (simple), shardext / local" -S -M simple
	throughput "pgbench -S -M prepared, shardext / local" -S -M prepared
fi
if [[ "$PARTS" == *" tpcb "* ]]; then
	echo "pgbench TPC-B, $CLIENTS clients, ${SECONDS_}s per run ..."
	throughput "TPC-B (simple), shardext / local" -M simple --max-tries=0
	throughput "TPC-B -M prepared, shardext / local" -M prepared --max-tries=0
fi

# aggregates: in one session (as an application's pooled connection runs
# them: the workers' connections stay open) and as the first statement of a
# new session each (they are opened for it)
if [[ "$PARTS" == *" aggregate "* ]]; then
	echo "aggregates over 1M rows, median of $AGG_RUNS ..."
	for query in "SELECT count(*), sum(abalance), avg(abalance) FROM pgbench_accounts" \
		"SELECT bid, count(*), sum(abalance) FROM pgbench_accounts GROUP BY bid"; do
		case $query in *GROUP*) label="GROUP BY bid over 1M rows" ;;
			*) label="count/sum/avg over 1M rows" ;; esac
		for mode in session new; do
			line=""
			for round in $(seq 1 "$ROUNDS"); do
				if [ $mode = session ]; then
					l=$(timed_in_session "$LOCALDB" "$query")
					d=$(timed_in_session "$DB" "$query")
				else
					timed "$LOCALDB" "$query" >/dev/null
					timed "$DB" "$query" >/dev/null
					l=$(for i in $(seq 1 "$AGG_RUNS"); do timed "$LOCALDB" "$query"; done | median)
					d=$(for i in $(seq 1 "$AGG_RUNS"); do timed "$DB" "$query"; done | median)
				fi
				line+="$(printf '%.1f / %.1f ms = %sx time; ' "$d" "$l" "$(ratio "$d" "$l")")"
			done
			if [ $mode = session ]; then suffix="in one session"; else suffix="new session each"; fi
			result "$label ($suffix), shardext / local" "${line%; } (load $(load))"
		done
	done
fi

if [[ "$PARTS" == *" copy "* ]]; then
	echo "COPY of $COPY_ROWS rows ..."
	COLUMNS="id bigint, payload text, category int, created timestamp, amount float8"
	coord "$DB" "COPY (SELECT g, md5(g::text), g % 1000, timestamp '2024-01-01' + g * interval '1 second',
		g / 7.0 FROM generate_series(1, $COPY_ROWS) g) TO '$DATA' WITH (FORMAT csv)" >/dev/null
	chmod a+r "$DATA" 2>/dev/null || true
	coord "$LOCALDB" "CREATE TABLE box_copy ($COLUMNS)" >/dev/null
	coord "$DB" "SET client_min_messages TO warning; CREATE TABLE box_copy ($COLUMNS);
		SELECT create_distributed_table('box_copy', 'id', shard_count => 32)" >/dev/null
	line=""
	for round in $(seq 1 "$ROUNDS"); do
		coord "$LOCALDB" "TRUNCATE box_copy" >/dev/null
		l=$(timed "$LOCALDB" "COPY box_copy FROM '$DATA' WITH (FORMAT csv)")
		coord "$DB" "TRUNCATE box_copy" >/dev/null
		d=$(timed "$DB" "COPY box_copy FROM '$DATA' WITH (FORMAT csv)")
		[ "$(coord "$DB" "SELECT count(*) FROM box_copy")" = "$COPY_ROWS" ] ||
			{ echo "distributed COPY lost rows" >&2; exit 1; }
		line+="$(awk -v l="$l" -v d="$d" -v n="$COPY_ROWS" \
			'BEGIN { printf "%.0f / %.0f rows/s = %.2fx; ", n / d * 1000, n / l * 1000, l / d }')"
	done
	result "COPY $COPY_ROWS rows, shardext / local rows/s" "${line%; } (load $(load))"
fi

# CPU per transaction of the pgbench session's backend and of the worker
# backends its coordinator backend uses: pgbench records their pids and CPU
# ticks (/proc) after a warm-up and again at the end of the run, with a
# script of its own (pgbench's \shell runs /bin/sh, which does not pass on
# exported bash functions)
cat >"$TMP/backend_ticks.sh" <<SH
# backend_ticks.sh file: "kind pid ticks" lines of the pgbench session's backends
cpid=\$($PSQL -p $PORT -d postgres -c "SELECT pid FROM pg_stat_activity
	WHERE application_name = 'pgbench' AND backend_type = 'client backend'")
echo "c \$cpid \$(awk '{ print \$14 + \$15 }' /proc/\$cpid/stat)" >"\$1"
for port in $W1 $W2; do
	for wpid in \$($PSQL -p \$port -d postgres -c "SELECT pid FROM pg_stat_activity
		WHERE application_name LIKE 'shardext\\_%\\_\$cpid'"); do
		echo "w \$wpid \$(awk '{ print \$14 + \$15 }' /proc/\$wpid/stat)" >>"\$1"
	done
done
SH
cpu_per_transaction() {	# db script protocol -> "coordinator_us workers_us"
	local warm=500 last=$((500 + CPU_STATEMENTS))
	{
		echo '\set n :n + 1'
		echo "\\if :n = $warm"
		echo "\\shell bash $TMP/backend_ticks.sh $TMP/ticks_before"
		echo '\endif'
		cat "$2"
		echo "\\if :n = $last"
		echo "\\shell bash $TMP/backend_ticks.sh $TMP/ticks_after"
		echo '\endif'
	} >"$TMP/cpu_script.sql"
	"$PGBENCH" -n -c 1 -t "$last" -D n=0 -M "$3" \
		-f "$TMP/cpu_script.sql" -h 127.0.0.1 -p "$PORT" -U postgres "$1" >/dev/null 2>&1 ||
		{ echo "pgbench failed on $1" >&2; exit 1; }
	awk -v hz="$HZ" -v n=$((last - warm)) '
		FNR == NR { before[$2] = $3; next }
		{ d = ($2 in before) ? $3 - before[$2] : 0; sum[$1] += d }
		END { printf "%.0f %.0f", sum["c"] * 1e6 / hz / n, sum["w"] * 1e6 / hz / n }' \
		"$TMP/ticks_before" "$TMP/ticks_after"
}
if [[ "$PARTS" == *" cpu "* ]]; then
	echo "CPU per transaction, one client, $CPU_STATEMENTS transactions after 500 ..."
	printf '\\set aid random(1, 1000000)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n' >"$TMP/select.sql"
	cat >"$TMP/tpcb.sql" <<'SQL'
\set aid random(1, 1000000)
\set bid random(1, 10)
\set tid random(1, 100)
\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
SQL
	for workload in "select simple" "select prepared" "tpcb simple"; do
		read -r script protocol <<<"$workload"
		read -r lc _ <<<"$(cpu_per_transaction "$LOCALDB" "$TMP/$script.sql" "$protocol")"
		read -r dc dw <<<"$(cpu_per_transaction "$DB" "$TMP/$script.sql" "$protocol")"
		result "CPU per $script ($protocol): local | coordinator + workers" \
			"$lc us | $dc + $dw us = $((dc + dw)) us ($(ratio $((dc + dw)) "$lc")x local)"
	done
fi

echo
echo "scale 10, 32 shards, $CLIENTS clients, ${SECONDS_}s runs, $ROUNDS rounds in turns; load average now $(load)"
printf '%s' "$RESULTS"
for port in $PORT $W1 $W2; do
	$PSQL -p "$port" -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
done
$PSQL -p "$PORT" -d postgres -c "DROP DATABASE IF EXISTS $LOCALDB WITH (FORCE)"
