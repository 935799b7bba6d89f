#!/usr/bin/env bash
# Shard moves under a write load through the coordinator: pgbench clients
# insert rows and update counters of a distributed table (and of a
# co-located table without a primary key), and record each write in ledger
# tables on the coordinator in the same transaction.  While they run: an
# online move, a split in place, a split onto the other node, a move with
# writes blocked onto a third worker, a rebalance after adding that worker
# (with scripts/rebalance), a drain of it.  After each: no client
# transaction failed, the tables hold exactly what the ledger says was
# committed, and the nodes hold nothing the moves created.  Also: an online
# move from a node without wal_level = logical is refused, nothing changed.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/moves.sh"
trap 'cluster stop-node worker3 >/dev/null 2>&1; moves_drop_database; rm -f "$WORK"/*; rmdir "$WORK"' EXIT
WORK=$(mktemp -d)
chmod 777 "$WORK"

moves_database move_load
coord "CREATE TABLE load_rows (id bigint PRIMARY KEY, counter int NOT NULL, note text);
	   INSERT INTO load_rows SELECT g, 0, 'seed' FROM generate_series(1, 2000) g;
	   CREATE TABLE load_items (row_id bigint NOT NULL, qty int);
	   SET client_min_messages = warning;
	   SELECT create_distributed_table('load_rows', 'id', shard_count => 4);
	   SELECT create_distributed_table('load_items', 'row_id', colocate_with => 'load_rows');
	   CREATE TABLE ledger_rows (id bigint PRIMARY KEY);
	   CREATE TABLE ledger_counts (id bigint PRIMARY KEY, n int NOT NULL);
	   INSERT INTO ledger_counts SELECT g, 0 FROM generate_series(1, 2000) g;" >/dev/null ||
	fail "setup"
cat >"$WORK/load.sql" <<'EOF'
\set id random(1000000, 9000000000000000000)
\set k random(1, 2000)
BEGIN;
INSERT INTO load_rows (id, counter, note) VALUES (:id, 0, 'load');
INSERT INTO load_items (row_id, qty) VALUES (:id, 1);
INSERT INTO ledger_rows (id) VALUES (:id);
UPDATE load_rows SET counter = counter + 1 WHERE id = :k;
UPDATE ledger_counts SET n = n + 1 WHERE id = :k;
END;
EOF

# start_load SECONDS: pgbench through the coordinator, in the background
start_load() {
	local before
	before=$(coord "SELECT count(*) FROM ledger_rows")
	"$BINDIR/pgbench" -h 127.0.0.1 -p "$COORDINATOR_PORT" -U postgres -n -c 6 -j 2 \
		-T "$1" -f "$WORK/load.sql" "$DB" >"$WORK/pgbench.out" 2>&1 &
	LOAD_PID=$!
	wait_sql "the load commits" 30 "$COORDINATOR_PORT" "SELECT count(*) > $before FROM ledger_rows"
}

# finish_load WHAT: wait for pgbench; no client may have failed
finish_load() {
	wait "$LOAD_PID" || fail "$1: pgbench failed: $(cat "$WORK/pgbench.out")"
	grep -q "number of failed transactions: 0 " "$WORK/pgbench.out" ||
		fail "$1: failed transactions: $(cat "$WORK/pgbench.out")"
	echo "ok - $1: no failed client transaction ($(grep -o 'actually processed: [0-9]*' "$WORK/pgbench.out"))"
}

# check_ledger WHAT: every committed row is there, nothing else, counters right
check_ledger() {
	expect_eq "$1: rows match the ledger" \
		"$(coord "SELECT count(*) || ':' || coalesce(sum(id::numeric), 0) FROM ledger_rows")" \
		"$(coord "SELECT count(*) || ':' || coalesce(sum(id::numeric), 0) FROM load_rows WHERE id >= 1000000")"
	expect_eq "$1: rows without a key match the ledger" \
		"$(coord "SELECT count(*) || ':' || coalesce(sum(id::numeric), 0) FROM ledger_rows")" \
		"$(coord "SELECT count(*) || ':' || coalesce(sum(row_id::numeric), 0) FROM load_items")"
	expect_eq "$1: counters match the ledger" \
		"$(coord "SELECT md5(string_agg(id || ':' || n, ',' ORDER BY id)) FROM ledger_counts")" \
		"$(coord "SELECT md5(string_agg(id || ':' || counter, ',' ORDER BY id)) FROM load_rows WHERE id < 1000000")"
	expect_eq "$1: every row in the shard its hash belongs to" "t|t" \
		"$(coord "SELECT string_agg(CASE WHEN ok THEN 't' ELSE 'f' END, '|' ORDER BY t) FROM (
			SELECT t, coalesce(bool_and(split_part(r.result, ',', 1)::int >= s.hash_min
							   AND split_part(r.result, ',', 2)::int <= s.hash_max), true) AS ok
			FROM (VALUES ('load_rows', 'id'), ('load_items', 'row_id')) v(t, c),
				 LATERAL shardext_run_on_shards(t::regclass,
					format('SELECT min(shardext.worker_hash_value(%s)) || '','' || max(shardext.worker_hash_value(%s)) FROM %%s', c, c)) r
			JOIN shardext.shards s USING (shard_id) GROUP BY t) x")"
	expect_no_leftovers "$1"
}

# run_under_load WHAT SQL: SQL (a move) while the load runs
run_under_load() {
	local what=$1 sql=$2
	start_load 6
	psql_at "$COORDINATOR_PORT" -c "SET client_min_messages = warning" -c "$sql" >"$WORK/move.out" 2>&1 ||
		fail "$what: $(cat "$WORK/move.out")"
	finish_load "$what"
	check_ledger "$what"
}

W1=$(node_id_of_port "$WORKER_1_PORT")
W2=$(node_id_of_port "$WORKER_2_PORT")
SHARD=$(coord "SELECT shard_id FROM shardext.shards WHERE logicalrelid = 'load_rows'::regclass
	AND node_port = $WORKER_1_PORT ORDER BY hash_min LIMIT 1")

run_under_load "online move" "SELECT shardext_move_shard($SHARD, $W2)"
expect_eq "online move: shard and its co-located shard on worker 2" "$WORKER_2_PORT|$WORKER_2_PORT" \
	"$(coord "SELECT string_agg(node_port::text, '|') FROM shardext.shards WHERE hash_min =
		(SELECT hash_min FROM shardext.shards WHERE shard_id = $SHARD)")"

run_under_load "split in place" "SELECT shardext_split_shard($SHARD)"
UPPER=$(coord "SELECT shard_id FROM shardext.shards WHERE logicalrelid = 'load_rows'::regclass
	AND hash_min > (SELECT min(hash_min) FROM shardext.shards WHERE logicalrelid = 'load_rows'::regclass
		AND node_port = $WORKER_2_PORT) AND node_port = $WORKER_2_PORT ORDER BY hash_min LIMIT 1")
run_under_load "split onto worker 1" "SELECT shardext_split_shard($UPPER, $W1)"
expect_eq "splits: shards per table" "6|6" \
	"$(coord "SELECT string_agg(shards::text, '|' ORDER BY logicalrelid::text) FROM shardext.tables")"

# a third worker, first with wal_level = replica
if [ -d "$SHARDEXT_CLUSTER_DIR/worker3" ]; then cluster start-node worker3; else cluster add-worker >/dev/null; fi
psql_at "$WORKER_3_PORT" -d postgres -c "ALTER SYSTEM SET wal_level = replica" >/dev/null
cluster stop-node worker3 && cluster start-node worker3
psql_at "$COORDINATOR_PORT" -c "SET client_min_messages = warning" \
	-c "SELECT shardext_add_node('127.0.0.1', $WORKER_3_PORT)" >/dev/null || fail "add worker 3"
W3=$(node_id_of_port "$WORKER_3_PORT")
SHARD=$(coord "SELECT shard_id FROM shardext.shards WHERE logicalrelid = 'load_rows'::regclass
	AND node_port = $WORKER_2_PORT ORDER BY hash_min LIMIT 1")
run_under_load "move onto worker 3 with writes blocked" \
	"SELECT shardext_move_shard($SHARD, $W3, 'block_writes')"
expect_error_like "online move from a node without logical wal_level" \
	"wal_level on node 127.0.0.1:$WORKER_3_PORT is \"replica\"; online shard moves need \"logical\"" \
	coord "SELECT shardext_move_shard($SHARD, $W1)"
expect_eq "refused move: shard stays on worker 3" "$WORKER_3_PORT" "$(port_of_shard "$SHARD")"
expect_no_leftovers "refused move"
psql_at "$WORKER_3_PORT" -d postgres -c "ALTER SYSTEM RESET wal_level" >/dev/null
cluster stop-node worker3 && cluster start-node worker3

# rebalance with the psql script: it moves shard groups onto worker 3 only
expect_eq "plan: only moves onto worker 3" "$WORKER_3_PORT" \
	"$(coord "SELECT string_agg(DISTINCT target_node_port::text, ',') FROM shardext_rebalance_plan()")"
expect_eq "plan: nothing moves off worker 3" "0" \
	"$(coord "SELECT count(*) FROM shardext_rebalance_plan() WHERE source_node_port = $WORKER_3_PORT")"
start_load 8
"$ROOT/scripts/rebalance" --yes -- -h 127.0.0.1 -p "$COORDINATOR_PORT" -U postgres -d "$DB" \
	>"$WORK/rebalance.out" 2>&1 || fail "scripts/rebalance: $(cat "$WORK/rebalance.out")"
finish_load "rebalance"
check_ledger "rebalance"
grep -q "Rebalance plan (by_shard_count, online)" "$WORK/rebalance.out" || fail "no plan shown: $(cat "$WORK/rebalance.out")"
grep -q "Rebalance done." "$WORK/rebalance.out" || fail "rebalance not done: $(cat "$WORK/rebalance.out")"
expect_eq "rebalance: each node holds 2 of the 6 shard groups of the tables" "2|2|2" \
	"$(coord "SELECT string_agg(n::text, '|') FROM (SELECT count(*) AS n FROM shardext.shards
		WHERE logicalrelid = 'load_rows'::regclass GROUP BY node_port ORDER BY node_port) s")"
expect_eq "rebalance: balanced now" "0" "$(coord "SELECT count(*) FROM shardext_rebalance_plan()")"

run_under_load "drain worker 3" "SELECT shardext_drain_node('127.0.0.1', $WORKER_3_PORT)"
expect_eq "drain: worker 3 holds nothing" "0" \
	"$(coord "SELECT count(*) FROM shardext.shards WHERE node_port = $WORKER_3_PORT")"
psql_at "$COORDINATOR_PORT" -c "SELECT shardext_remove_node('127.0.0.1', $WORKER_3_PORT)" >/dev/null ||
	fail "remove the drained worker"
cluster stop-node worker3
