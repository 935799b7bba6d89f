#!/usr/bin/env bash
# scripts/bench.d/shard_move.sh: moving a shard of MOVE_BENCH_ROWS rows
# (default 1M) to the other worker while pgbench writes to the table
# (MOVE_BENCH_CLIENTS clients, default 8: single-row inserts and updates by
# key, half each, each its own transaction), side by side:
#
#   local table        the same load on a plain table (no move): the baseline
#   shardext online    shardext_move_shard(..., 'online')
#   shardext blocking  shardext_move_shard(..., 'block_writes') (moving it back)
#   postgres_fdw       the built-in alternative: a hash-partitioned table with
#                      a postgres_fdw partition per worker; its partition moves
#                      the way PostgreSQL allows: lock the table against writes
#                      (foreign tables cannot be locked alone), copy the
#                      partition to a new foreign table on the other worker,
#                      detach the old one and attach the new one, in one
#                      transaction
#
# For each: the move's total time; how long the move held writes paused (its
# own DEBUG1 report of each pause, with times; for postgres_fdw the whole
# move); the longest latency of a write that was in flight during a pause
# (the stall the clients saw) and of any write during the move, next to the
# longest one before the move (this machine's own tail); the throughput
# before, during and after; the number of failed client transactions.  Each
# pgbench run lasts MOVE_BENCH_BEFORE (5 s) + MOVE_BENCH_BUDGET (30 s, the time
# allowed to the move) + MOVE_BENCH_AFTER (5 s).
#
# Runs against the local cluster of scripts/cluster (SHARDEXT_PORT, default
# 9700; workers at +1 and +2), in databases shardext_bench_moves and
# shardext_bench_moves_local, which it creates; takes about four minutes.
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PORT=${SHARDEXT_PORT:-9700}
BINDIR=$("$PG_CONFIG" --bindir)
DB=shardext_bench_moves
LOCALDB=shardext_bench_moves_local
ROWS=${MOVE_BENCH_ROWS:-1000000}
CLIENTS=${MOVE_BENCH_CLIENTS:-8}
BEFORE=${MOVE_BENCH_BEFORE:-5}
AFTER=${MOVE_BENCH_AFTER:-5}
BUDGET=${MOVE_BENCH_BUDGET:-30}
W1=$((PORT + 1))
W2=$((PORT + 2))
PSQL="$BINDIR/psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres"
WORK=$(mktemp -d)
chmod 777 "$WORK"
trap 'rm -rf "$WORK"' EXIT

# a fresh database on every node
for port in $PORT $W1 $W2; do
	for db in $DB $LOCALDB; do
		$PSQL -p "$port" -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" 2>/dev/null || true
	done
done
$PSQL -p "$PORT" -d postgres -c "CREATE DATABASE $DB" -c "CREATE DATABASE $LOCALDB"
$PSQL -p "$PORT" -d "$DB" <<SQL >/dev/null
SET client_min_messages TO warning;
CREATE EXTENSION shardext;
CREATE EXTENSION postgres_fdw;
SELECT shardext_add_node('127.0.0.1', $W1);
SELECT shardext_add_node('127.0.0.1', $W2);
SQL

COLUMNS="id bigint PRIMARY KEY, counter int NOT NULL, payload text"
FILL="SELECT g, 0, md5(g::text) || md5((g * 7)::text) FROM generate_series(1, $((2 * ROWS))) g"

cat >"$WORK/insert.sql" <<EOF
\set id random($((10 * ROWS)), 9000000000000000000)
INSERT INTO TABLE (id, counter, payload) VALUES (:id, 0, 'bench');
EOF
cat >"$WORK/update.sql" <<EOF
\set k random(1, $((2 * ROWS)))
UPDATE TABLE SET counter = counter + 1 WHERE id = :k;
EOF

# run_load NAME DB TABLE SECONDS: pgbench in the background, logging each transaction
run_load() {
	local name=$1 db=$2 table=$3 seconds=$4
	sed "s/TABLE/$table/" "$WORK/insert.sql" >"$WORK/$name-insert.sql"
	sed "s/TABLE/$table/" "$WORK/update.sql" >"$WORK/$name-update.sql"
	(cd "$WORK" && exec "$BINDIR/pgbench" -h 127.0.0.1 -p "$PORT" -U postgres -n -c "$CLIENTS" -j 2 \
		-T "$seconds" -l --log-prefix="$name" -f "$name-insert.sql" -f "$name-update.sql" "$db" \
		>"$WORK/$name.out" 2>&1) &
	LOAD_PID=$!
}

# report NAME MOVE_START MOVE_END PAUSES: one result line from the
# per-transaction logs (times in epoch microseconds; MOVE_START empty: no
# move; PAUSES: "start-end ..." windows in which the move held writes)
report() {
	local name=$1 start=$2 end=$3 pauses=$4
	local failed
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$WORK/$name.out" | head -1)
	[ -n "$failed" ] || failed="aborted"
	cat "$WORK/$name".[0-9]* | awk -v start="$start" -v end="$end" -v name="$name" \
		-v failed="$failed" -v pauses="$pauses" '
	BEGIN {
		np = split(pauses, p, " ")
		for (i = 1; i <= np; i++) {
			split(p[i], b, "-"); ps[i] = b[1]; pe[i] = b[2]
			paused += (b[2] - b[1]); if (b[2] - b[1] > longest_pause) longest_pause = b[2] - b[1]
		}
	}
	{
		done_us = $5 * 1000000 + $6; lat = $3; begin_us = done_us - lat
		if (first == 0 || begin_us < first) first = begin_us
		if (done_us > last) last = done_us
		for (i = 1; i <= np; i++)
			if (begin_us < pe[i] && done_us > ps[i] && lat > max_paused) max_paused = lat
		if (start == "") { n_before++; if (lat > max_before) max_before = lat; next }
		if (done_us < start) { n_before++; if (lat > max_before) max_before = lat }
		else if (begin_us > end) { n_after++; if (lat > max_after) max_after = lat }
		else { n_during++; if (lat > max_during) max_during = lat }
	}
	END {
		if (start == "") {
			printf "  %-10s %7s %14s %11s %11s %11.1f ms %7.0f %7s %7s %6s\n", name, "-", "-", "-", "-",
				max_before / 1000, n_before / ((last - first) / 1e6), "-", "-", failed
			exit
		}
		printf "  %-10s %6.1fs %5.0f ms/%-2d %8.1f ms %8.1f ms %11.1f ms %7.0f %7.0f %7.0f %6s\n", name,
			(end - start) / 1e6, longest_pause / 1000, np, max_paused / 1000, max_during / 1000,
			max_before / 1000, n_before / ((start - first) / 1e6), n_during / ((end - start) / 1e6),
			n_after / ((last - end) / 1e6), failed
	}'
}

now_us() { date +%s%6N; }

echo "shard move benchmark: a shard of $ROWS rows moves to the other worker under $CLIENTS"
echo "pgbench clients (single-row inserts and updates by key, each its own transaction)"
echo
echo "loading $((2 * ROWS)) rows into each table..."

# the baseline: a plain local table, no move
$PSQL -p "$PORT" -d "$LOCALDB" -c "CREATE TABLE bench_move ($COLUMNS)" -c "INSERT INTO bench_move $FILL" \
	-c "VACUUM ANALYZE bench_move"

# shardext: two shards, one per worker, so one shard holds half the rows
$PSQL -p "$PORT" -d "$DB" -c "CREATE TABLE bench_move ($COLUMNS)" -c "INSERT INTO bench_move $FILL" \
	-c "SET client_min_messages = warning" \
	-c "SELECT create_distributed_table('bench_move', 'id', shard_count => 2)" >/dev/null
SHARD=$($PSQL -p "$PORT" -d "$DB" -c "SELECT shard_id FROM shardext.shards WHERE node_port = $W1")
SHARD_ROWS=$($PSQL -p "$PORT" -d "$DB" -c "SELECT result FROM shardext_run_on_shards('bench_move', 'SELECT count(*) FROM %s') WHERE shard_id = $SHARD")
SHARD_SIZE=$($PSQL -p "$PORT" -d "$DB" -c "SELECT pg_size_pretty(result::bigint) FROM shardext_run_on_shards('bench_move', 'SELECT pg_total_relation_size(''%s'')') WHERE shard_id = $SHARD")
$PSQL -p "$PORT" -d "$DB" -c "SELECT shardext_run_on_shards('bench_move', 'VACUUM ANALYZE %s')" >/dev/null

# postgres_fdw: the same rows in two foreign partitions, one per worker (the
# partitioned table itself can have no primary key: the worker tables do)
for port in $W1 $W2; do
	$PSQL -p "$port" -d "$DB" -c "CREATE TABLE bench_fdw_part_0 ($COLUMNS)" \
		-c "CREATE TABLE bench_fdw_part_1 ($COLUMNS)"
done
$PSQL -p "$PORT" -d "$DB" <<SQL
CREATE SERVER bench_w1 FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '127.0.0.1', port '$W1', dbname '$DB', batch_size '1000');
CREATE SERVER bench_w2 FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '127.0.0.1', port '$W2', dbname '$DB', batch_size '1000');
CREATE USER MAPPING FOR CURRENT_USER SERVER bench_w1 OPTIONS (user 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER bench_w2 OPTIONS (user 'postgres');
CREATE TABLE bench_fdw (id bigint NOT NULL, counter int NOT NULL, payload text) PARTITION BY HASH (id);
CREATE FOREIGN TABLE bench_fdw_0 PARTITION OF bench_fdw FOR VALUES WITH (MODULUS 2, REMAINDER 0)
	SERVER bench_w1 OPTIONS (table_name 'bench_fdw_part_0');
CREATE FOREIGN TABLE bench_fdw_1 PARTITION OF bench_fdw FOR VALUES WITH (MODULUS 2, REMAINDER 1)
	SERVER bench_w2 OPTIONS (table_name 'bench_fdw_part_1');
SQL
# (hash partitioning hashes alike everywhere: a partitioned table of the same
# key on the worker tells which rows belong to which partition)
for part in 0 1; do
	port=$([ $part = 0 ] && echo "$W1" || echo "$W2")
	$PSQL -p "$port" -d "$DB" -c "CREATE TABLE bench_hash_key (id bigint) PARTITION BY HASH (id)" \
		-c "INSERT INTO bench_fdw_part_$part SELECT * FROM ($FILL) r(id, counter, payload)
			WHERE satisfies_hash_partition('bench_hash_key'::regclass, 2, $part, id::bigint)" \
		-c "VACUUM ANALYZE bench_fdw_part_$part"
done
echo "the moved shard: $SHARD_ROWS rows, $SHARD_SIZE"
echo

# move_under_load NAME SQL...: pgbench for BEFORE + move + AFTER seconds; the
# move's SQL runs after BEFORE seconds
move_under_load() {
	local name=$1 db=$2 table=$3
	shift 3
	run_load "$name" "$db" "$table" $((BEFORE + BUDGET + AFTER))
	sleep "$BEFORE"
	MOVE_START=$(now_us)
	$PSQL -p "$PORT" -d "$db" "$@" >"$WORK/$name-move.out" 2>&1 ||
		{ echo "$name: the move failed:"; cat "$WORK/$name-move.out"; }
	MOVE_END=$(now_us)
	wait "$LOAD_PID" || true
	# the move's own report of the windows in which it held writes
	PAUSES=$(sed -n 's/^DETAIL:  From \([0-9]*\) to \([0-9]*\) (Unix time.*/\1-\2/p' "$WORK/$name-move.out" | tr '\n' ' ')
	if [ -z "$PAUSES" ]; then PAUSES="$MOVE_START-$MOVE_END"; fi
}

run_load local "$LOCALDB" bench_move $((BEFORE + AFTER))
wait "$LOAD_PID" || true

move_under_load online "$DB" bench_move -c "SET client_min_messages = debug1" \
	-c "SELECT shardext_move_shard($SHARD, (SELECT node_id FROM shardext.nodes WHERE node_port = $W2))"
ONLINE=("$MOVE_START" "$MOVE_END" "$PAUSES")

move_under_load blocking "$DB" bench_move -c "SET client_min_messages = debug1" \
	-c "SELECT shardext_move_shard($SHARD, (SELECT node_id FROM shardext.nodes WHERE node_port = $W1), 'block_writes')"
BLOCKING=("$MOVE_START" "$MOVE_END" "$PAUSES")

$PSQL -p "$W2" -d "$DB" -c "CREATE TABLE bench_fdw_part_0_moved ($COLUMNS)"
move_under_load fdw "$DB" bench_fdw <<SQL
BEGIN;
LOCK TABLE bench_fdw IN EXCLUSIVE MODE;
CREATE FOREIGN TABLE bench_fdw_0_moved (id bigint NOT NULL, counter int NOT NULL, payload text)
	SERVER bench_w2 OPTIONS (table_name 'bench_fdw_part_0_moved');
INSERT INTO bench_fdw_0_moved SELECT * FROM bench_fdw_0;
ALTER TABLE bench_fdw DETACH PARTITION bench_fdw_0;
ALTER TABLE bench_fdw ATTACH PARTITION bench_fdw_0_moved FOR VALUES WITH (MODULUS 2, REMAINDER 0);
COMMIT;
SQL
FDW=("$MOVE_START" "$MOVE_END" "$PAUSES")

printf "  %-10s %7s %14s %11s %11s %14s %7s %7s %7s %6s\n" "" "move" "writes paused" "longest" "longest" "longest write" "tps" "tps" "tps" "failed"
printf "  %-10s %7s %14s %11s %11s %14s %7s %7s %7s %6s\n" "" "time" "longest/count" "met pause" "in move" "before move" "before" "during" "after" "txns"
report local "" "" ""
report online "${ONLINE[@]}"
report blocking "${BLOCKING[@]}"
report fdw "${FDW[@]}"
echo
echo "  writes paused: the longest time the move held writes, and how often (fdw: the whole move)"
echo "  longest met pause: the longest write that was in flight during such a pause"
echo "  longest in move / before move: the longest write while the move ran / before it started"
echo "  local: a plain table under the same load, no move (its longest write and tps)"

for port in $PORT $W1 $W2; do
	for db in $DB $LOCALDB; do
		$PSQL -p "$port" -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" 2>/dev/null || true
	done
done
