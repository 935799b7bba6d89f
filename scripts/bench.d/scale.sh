#!/usr/bin/env bash
# scripts/bench.d/scale.sh: what operations cost as the cluster grows, on
# one machine: a coordinator with 2 workers, then with 32 workers (servers
# with small shared_buffers and max_connections), each with a table of
# 4,096 shards and one of 32 shards (SCALE_BENCH_ROWS rows each, default
# 100,000), and for each:
#
#   create       create_distributed_table of the (empty) table
#   router       a point select by key (one psql session, simple protocol,
#                SCALE_BENCH_STATEMENTS statements, default 3000, after a
#                warm-up that touches every shard): latency (psql's own time
#                included), and the coordinator backend's CPU per statement
#                (from /proc)
#   count        SELECT count(*) over the table (median of 5)
#   add column   ALTER TABLE ... ADD COLUMN
#   rebalance    shardext_rebalance_plan() after one more worker was added
#   recovery     one round of shardext_recover_prepared_transactions()
#   daemon       the maintenance daemon's CPU per second while idle (it
#                looks for distributed deadlocks every second)
#   cache        the shardext metadata cache of a backend that used both
#                tables (pg_backend_memory_contexts)
#
# It runs its own cluster (SCALE_CLUSTER_DIR, default
# ${SHARDEXT_CLUSTER_DIR}-scale, on SHARDEXT_PORT and the 33 ports after
# it), so it stops the cluster of scripts/cluster first and starts it again
# at the end.  SCALE_BENCH_WORKERS (default "2 32") selects the sizes.
# Expect 10-20 minutes, most of it for making the 34 servers the first time
# (SCALE_BENCH_KEEP=1 keeps them for the next run).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench.d/lib/env.sh

SIZES=${SCALE_BENCH_WORKERS:-2 32}
ROWS=${SCALE_BENCH_ROWS:-100000}
STATEMENTS=${SCALE_BENCH_STATEMENTS:-3000}
SCALE_DIR=${SCALE_CLUSTER_DIR:-${SHARDEXT_CLUSTER_DIR:-/var/tmp/shardext-cluster}-scale}
MAX_WORKERS=0
for n in $SIZES; do [ "$n" -gt "$MAX_WORKERS" ] && MAX_WORKERS=$n; done
TMP=$(mktemp -d)
chmod 755 "$TMP"
HZ=$(getconf CLK_TCK)

scale_cluster() {	# scripts/cluster arguments, against the scale cluster
	SHARDEXT_CLUSTER_DIR=$SCALE_DIR \
		SHARDEXT_EXTRA_CONF="shared_buffers = 16MB;max_connections = 60;max_prepared_transactions = 60;max_wal_senders = 4;max_replication_slots = 4;autovacuum = off;log_min_messages = error" \
		scripts/cluster "$@"
}
finish() {
	scale_cluster stop >/dev/null 2>&1 || true
	[ "${SCALE_BENCH_KEEP:-0}" = 1 ] || rm -rf "$SCALE_DIR"
	rm -rf "$TMP"
	scripts/cluster start >/dev/null
}

scripts/cluster stop >/dev/null
trap finish EXIT
echo "starting a coordinator and $((MAX_WORKERS + 1)) workers in $SCALE_DIR ..."
scale_cluster start "$((MAX_WORKERS + 1))" >/dev/null

q() { $PSQL -p "$PORT" -d "$DB" -c "$1"; }
# milliseconds a statement takes, as psql's \timing reports it
timed() {	# sql
	$PSQL -p "$PORT" -d "$DB" -c '\timing on' -c "$1" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
pid_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# a point select by key on a table, in one psql session: after a warm-up
# that reads about 8 keys per shard (a backend's first statement on a shard
# fills caches on the coordinator and the worker), STATEMENTS point selects
# by random key; prints "<latency ms> <coordinator CPU us>" per statement,
# the backend's CPU read from /proc before and after
point_selects() {	# table shards
	{
		echo "SELECT pg_backend_pid() AS bpid \\gset"
		echo "\\setenv BPID :bpid"
		awk -v n="$(( ROWS < 8 * $2 ? ROWS : 8 * $2 ))" -v t="$1" 'BEGIN { for (i = 1; i <= n; i++)
			printf "SELECT v FROM %s WHERE id = %d;\n", t, i }'
		echo "\\! echo \$(awk '{ print \$14 + \$15 }' /proc/\$BPID/stat) \$(date +%s%N) > $TMP/before"
		awk -v n="$STATEMENTS" -v rows="$ROWS" -v t="$1" 'BEGIN { srand(2); for (i = 0; i < n; i++)
			printf "SELECT v FROM %s WHERE id = %d;\n", t, 1 + int(rand() * rows) }'
		echo "\\! echo \$(awk '{ print \$14 + \$15 }' /proc/\$BPID/stat) \$(date +%s%N) > $TMP/after"
	} >"$TMP/point.sql"
	$PSQL -p "$PORT" -d "$DB" -f "$TMP/point.sql" >/dev/null
	read -r t0 w0 <"$TMP/before"
	read -r t1 w1 <"$TMP/after"
	awk -v t=$((t1 - t0)) -v w=$((w1 - w0)) -v hz="$HZ" -v s="$STATEMENTS" \
		'BEGIN { printf "%.3f %.0f\n", w / 1e6 / s, t * 1e6 / hz / s }'
}

declare -A R
for n in $SIZES; do
	DB=scale_$n
	echo "== $n workers"
	for w in $(seq 0 "$((MAX_WORKERS + 1))"); do
		$PSQL -p $((PORT + w)) -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
	done
	q "SET client_min_messages TO warning; CREATE EXTENSION shardext" >/dev/null
	for w in $(seq 1 "$n"); do
		q "SELECT shardext_add_node('127.0.0.1', $((PORT + w)))" >/dev/null
	done

	for shards in 4096 32; do
		t=t$shards
		q "CREATE TABLE $t (id bigint PRIMARY KEY, v int NOT NULL, pad text)" >/dev/null
		R[create,$n,$shards]=$(timed "SELECT create_distributed_table('$t', 'id', shard_count => $shards, colocate_with => 'none')")
		q "INSERT INTO $t SELECT g, g % 1000, 'row ' || g FROM generate_series(1, $ROWS) g" >/dev/null
		q "SELECT shardext_run_on_shards('$t', 'ANALYZE %s')" >/dev/null

		read -r "R[latency,$n,$shards]" "R[cpu,$n,$shards]" < <(point_selects "$t" "$shards")

		R[count,$n,$shards]=$(for i in 1 2 3 4 5; do timed "SELECT count(*) FROM $t"; done | median)
		R[alter,$n,$shards]=$(timed "ALTER TABLE $t ADD COLUMN extra int")
	done

	# a backend's metadata cache once it used both tables
	R[cache,$n]=$($PSQL -p "$PORT" -d "$DB" -c "SELECT v FROM t4096 WHERE id = 1" \
		-c "SELECT v FROM t32 WHERE id = 1" \
		-c "SELECT sum(total_bytes) FROM pg_backend_memory_contexts
			WHERE name LIKE 'shardext%' AND name NOT LIKE 'shardext%connection%'" | tail -1)

	R[recovery,$n]=$(for i in 1 2 3; do timed "SELECT shardext_recover_prepared_transactions()"; done | median)

	daemon=$(q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'shardext maintenance daemon'
		AND datname = current_database()")
	if [ -n "$daemon" ]; then
		d0=$(pid_ticks "$daemon")
		sleep 20
		d1=$(pid_ticks "$daemon")
		R[daemon,$n]=$(awk -v t=$((d1 - d0)) -v hz="$HZ" 'BEGIN { printf "%.1f", t * 1000 / hz / 20 }')
	else
		R[daemon,$n]="-"
	fi

	# one more worker, and the plan that fills it
	q "SELECT shardext_add_node('127.0.0.1', $((PORT + MAX_WORKERS + 1)))" >/dev/null
	R[rebalance,$n]=$(timed "SELECT count(*) FROM shardext_rebalance_plan()")
	R[moves,$n]=$(q "SELECT count(*) FROM shardext_rebalance_plan()")
	q "DROP TABLE t4096, t32" >/dev/null
done

echo
echo "$ROWS rows per table; router: $STATEMENTS point selects in one psql session after a warm-up"
printf '%-44s' "measure"
for n in $SIZES; do printf '%22s' "$n workers"; done
echo
row() {	# label key unit
	printf '%-44s' "$1"
	for n in $SIZES; do printf '%19s %-2s' "${R[$2,$n]:--}" "$3"; done
	echo
}
row2() {	# label key shards unit
	printf '%-44s' "$1"
	for n in $SIZES; do printf '%19s %-2s' "${R[$2,$n,$3]:--}" "$4"; done
	echo
}
for shards in 4096 32; do
	row2 "create_distributed_table, $shards shards" create $shards ms
	row2 "point select latency, $shards shards" latency $shards ms
	row2 "  coordinator CPU per point select" cpu $shards us
	row2 "count(*), $shards shards" count $shards ms
	row2 "ALTER TABLE ADD COLUMN, $shards shards" alter $shards ms
done
row "rebalance plan after adding a worker" rebalance ms
row "  moves it plans" moves ""
row "recovery round" recovery ms
row "maintenance daemon CPU when idle, per second" daemon ms
row "metadata cache of a backend (both tables)" cache B
