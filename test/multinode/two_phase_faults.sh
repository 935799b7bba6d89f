#!/usr/bin/env bash
# Two-phase commit under real failures:
#  1. the coordinator backend dies after the local commit, before COMMIT
#     PREPARED (shardext.test_fault): the server restarts, the maintenance
#     daemon commits the prepared transactions, every node has the rows;
#  2. it dies after PREPARE, before the local commit, and the coordinator is
#     stopped and started: recovery rolls the prepared transactions back;
#  3. a worker is stopped (immediate) in the middle of a multi-node
#     transaction: the next statement fails naming the node, everything rolls
#     back, no prepared transaction is left, the session goes on.
source "$(dirname "$0")/lib/common.sh"
trap 'cluster start-node coordinator >/dev/null 2>&1; cluster start-node worker2 >/dev/null 2>&1' EXIT

wait_for_coordinator() {
	for _ in $(seq 1 60); do
		if coord "SELECT 1" >/dev/null 2>&1; then return 0; fi
		sleep 0.5
	done
	fail "coordinator did not come back"
}
prepared_on_workers() {
	echo $(($(worker1 "SELECT count(*) FROM pg_prepared_xacts") + $(worker2 "SELECT count(*) FROM pg_prepared_xacts")))
}
wait_for_no_prepared() {
	for _ in $(seq 1 60); do
		[ "$(prepared_on_workers)" = 0 ] && return 0
		sleep 0.5
	done
	fail "prepared transactions were not resolved within 30 s: $(prepared_on_workers) left"
}
rows() {
	coord "SELECT coalesce(sum(result::int), 0) FROM shardext_run_on_shards('tpc_t', 'SELECT count(*) FROM %s')"
}

coord "DROP TABLE IF EXISTS tpc_t; CREATE TABLE tpc_t (id int PRIMARY KEY, v text);
	   SELECT create_distributed_table('tpc_t', 'id', shard_count => 8);" >/dev/null
expect_eq "shards on both workers" "2" \
	"$(coord "SELECT count(DISTINCT node_id) FROM shardext.shards WHERE logicalrelid = 'tpc_t'::regclass")"

# 1. crash between the local commit and COMMIT PREPARED
out=$(psql_at "$COORDINATOR_PORT" -c "SET shardext.test_fault = 'crash_after_local_commit'" \
	-c "COPY tpc_t FROM PROGRAM 'seq 1 100 | sed \"s/\$/\tcommitted/\"'" 2>&1) &&
	fail "the crashing COPY succeeded: $out"
grep -Eq "server closed the connection|terminated" <<<"$out" || fail "no crash: $out"
wait_for_coordinator
[ "$(prepared_on_workers)" != 0 ] || echo "note: resolved before we looked"
wait_for_no_prepared
expect_eq "committed rows on the workers after recovery" "100" "$(rows)"
expect_eq "both workers got rows" "2" \
	"$(coord "SELECT count(*) FROM shardext_run_on_nodes('SELECT count(*) FROM pg_class WHERE relname ~ ''^tpc_t_[0-9]+\$''') WHERE result::int > 0")"
expect_eq "commit records cleaned up" "0" "$(coord "SELECT count(*) FROM shardext.transaction")"

# 2. crash between PREPARE and the local commit, then a coordinator restart
out=$(psql_at "$COORDINATOR_PORT" -c "SET shardext.test_fault = 'crash_after_prepare'" \
	-c "COPY tpc_t FROM PROGRAM 'seq 101 200 | sed \"s/\$/\tlost/\"'" 2>&1) &&
	fail "the crashing COPY succeeded: $out"
wait_for_coordinator
cluster stop-node coordinator immediate
cluster start-node coordinator
wait_for_coordinator
wait_for_no_prepared
expect_eq "rows of the uncommitted transaction rolled back" "100" "$(rows)"
expect_eq "recovery has nothing left" "0" "$(coord "SELECT shardext_recover_prepared_transactions()")"

# 3. a worker stops in the middle of a multi-node transaction
out=$(psql_at "$COORDINATOR_PORT" 2>&1 <<SQL
\set ON_ERROR_STOP 0
BEGIN;
COPY tpc_t FROM PROGRAM 'seq 201 300 | sed "s/\$/\tin flight/"';
\! "$ROOT/scripts/cluster" stop-node worker2 immediate
COPY tpc_t FROM PROGRAM 'seq 301 400 | sed "s/\$/\tin flight/"';
COMMIT;
SELECT 'session usable', count(*) FROM shardext.nodes;
SQL
)
grep -Eq "127.0.0.1:$WORKER_2_PORT" <<<"$out" || fail "the error does not name worker 2: $out"
grep -q "session usable|2" <<<"$out" || fail "the session did not go on: $out"
echo "ok - statement failed naming the stopped worker, session usable"
expect_eq "no prepared transactions on worker 1" "0" "$(worker1 "SELECT count(*) FROM pg_prepared_xacts")"
cluster start-node worker2
expect_eq "nothing of the failed transaction on any worker" "0" \
	"$(coord "SELECT sum(result::int) FROM shardext_run_on_shards('tpc_t', 'SELECT count(*) FROM %s WHERE v = ''in flight''')")"
expect_eq "worker 2 back, no prepared transactions there" "0" "$(worker2 "SELECT count(*) FROM pg_prepared_xacts")"
expect_eq "rows unchanged" "100" "$(rows)"
coord "DROP TABLE tpc_t"
