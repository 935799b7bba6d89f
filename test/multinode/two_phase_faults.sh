#!/usr/bin/env bash
# Two-phase commit under real failures:
#  1. the coordinator backend dies after the local commit, before COMMIT
#     PREPARED (shardext.test_fault): the server restarts, the maintenance
#     daemon commits the prepared transactions, every node has the rows;
#  2. it dies after PREPARE, before the local commit, and the coordinator is
#     stopped and started: recovery rolls the prepared transactions back;
#  3. a worker is stopped (immediate) in the middle of a multi-node
#     transaction: the next statement fails naming the node, everything rolls
#     back, no prepared transaction is left, the session goes on;
#  4. last-participant commit: when the decider's answer is lost (the
#     coordinator drops the connection, or the decider's backend dies right
#     after its commit), the client hears that the outcome is not known, and
#     recovery resolves the prepared part as the decider did.  (How many
#     parts prepare, and recovery against a transaction that is committing,
#     are the isolation spec recovery_prepared.)
# 1-3 each with COPY and with plain DML (multi-shard and router UPDATE,
# INSERT, DELETE in one transaction that writes on both workers).
source "$(dirname "$0")/lib/common.sh"
trap 'cluster start-node coordinator >/dev/null 2>&1; cluster start-node worker2 >/dev/null 2>&1' EXIT

prepared_on_workers() {
	echo $(($(worker1 "SELECT count(*) FROM pg_prepared_xacts") + $(worker2 "SELECT count(*) FROM pg_prepared_xacts")))
}
no_prepared() { [ "$(prepared_on_workers)" = 0 ]; }
wait_for_no_prepared() { wait_for "prepared transactions resolved ($(prepared_on_workers) left)" 30 no_prepared; }
rows() {
	coord "SELECT coalesce(sum(result::int), 0) FROM shardext_run_on_shards('tpc_t', 'SELECT count(*) FROM %s')"
}
# rows with value V on each worker: "<worker 1>|<worker 2>"
rows_with_value_per_node() {
	coord "SELECT string_agg(coalesce(n, 0)::text, '|' ORDER BY node_id) FROM (
		SELECT node_id, sum(result::int) n FROM shardext_run_on_shards('tpc_t',
			'SELECT count(*) FROM %s WHERE v = ''$1''') GROUP BY node_id) s"
}
# expect_on_both_workers VALUE N WHAT: N rows have VALUE, on both workers
expect_on_both_workers() {
	local per_node on1 on2
	per_node=$(rows_with_value_per_node "$1")
	IFS='|' read -r on1 on2 <<<"$per_node"
	[ "$((on1 + on2))" = "$2" ] && [ "$on1" -gt 0 ] && [ "$on2" -gt 0 ] ||
		fail "$3: not on both workers in full: $per_node ($2 rows expected)"
	echo "ok - $3 ($per_node)"
}
# the DML transaction of the crash tests: it writes on both workers
dml_transaction() {	# fault value
	psql_at "$COORDINATOR_PORT" -c "SET shardext.test_fault = '$1'" -c "BEGIN" \
		-c "UPDATE tpc_t SET v = '$2' WHERE id <= 50" \
		-c "UPDATE tpc_t SET v = '$2' WHERE id = 77" \
		-c "INSERT INTO tpc_t VALUES (1001, '$2'), (1002, '$2'), (1003, '$2')" \
		-c "DELETE FROM tpc_t WHERE id BETWEEN 90 AND 100" \
		-c "COMMIT" 2>&1
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
wait_coordinator
[ "$(prepared_on_workers)" != 0 ] || echo "note: resolved before we looked"
wait_for_no_prepared
expect_eq "committed rows on the workers after recovery" "100" "$(rows)"
expect_eq "both workers got rows" "2" \
	"$(coord "SELECT count(*) FROM shardext_run_on_nodes('SELECT count(*) FROM pg_class WHERE relname ~ ''^tpc_t_[0-9]+\$''') WHERE result::int > 0")"
expect_eq "commit records cleaned up" "0" "$(coord "SELECT count(*) FROM shardext.transaction")"

# 1b. the same with DML
out=$(dml_transaction crash_after_local_commit "dml committed") &&
	fail "the crashing DML transaction succeeded: $out"
grep -Eq "server closed the connection|terminated" <<<"$out" || fail "no crash: $out"
wait_coordinator
wait_for_no_prepared
expect_on_both_workers "dml committed" 54 "committed DML on both workers after recovery"
expect_eq "its DELETE too" "92" "$(rows)"
expect_eq "commit records cleaned up after the DML" "0" "$(coord "SELECT count(*) FROM shardext.transaction")"

# 2. crash between PREPARE and the local commit, then a coordinator restart
out=$(psql_at "$COORDINATOR_PORT" -c "SET shardext.test_fault = 'crash_after_prepare'" \
	-c "COPY tpc_t FROM PROGRAM 'seq 101 200 | sed \"s/\$/\tlost/\"'" 2>&1) &&
	fail "the crashing COPY succeeded: $out"
wait_coordinator
cluster stop-node coordinator immediate
cluster start-node coordinator
wait_coordinator
wait_for_no_prepared
expect_eq "rows of the uncommitted transaction rolled back" "92" "$(rows)"
expect_eq "recovery has nothing left" "0" "$(coord "SELECT shardext_recover_prepared_transactions()")"

# 2b. the same with DML
out=$(dml_transaction crash_after_prepare "dml lost") && fail "the crashing DML transaction succeeded: $out"
wait_coordinator
cluster stop-node coordinator immediate
cluster start-node coordinator
wait_coordinator
wait_for_no_prepared
expect_eq "nothing of the uncommitted DML on either worker" "0|0" "$(rows_with_value_per_node "dml lost")"
expect_eq "the committed DML is untouched" "54" \
	"$(coord "SELECT sum(result::int) FROM shardext_run_on_shards('tpc_t', 'SELECT count(*) FROM %s WHERE v = ''dml committed''')")"
expect_eq "rows unchanged by the lost DML" "92" "$(rows)"

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
expect_eq "rows unchanged" "92" "$(rows)"

# 3b. a worker stops in the middle of a multi-shard DML transaction
out=$(psql_at "$COORDINATOR_PORT" 2>&1 <<SQL
\set ON_ERROR_STOP 0
BEGIN;
UPDATE tpc_t SET v = 'in flight' WHERE id <= 60;
INSERT INTO tpc_t VALUES (2001, 'in flight'), (2002, 'in flight'), (2003, 'in flight');
\! "$ROOT/scripts/cluster" stop-node worker2 immediate
UPDATE tpc_t SET v = 'in flight' WHERE id > 60;
COMMIT;
SELECT 'session usable', count(*) FROM shardext.nodes;
SQL
)
grep -Eq "127.0.0.1:$WORKER_2_PORT" <<<"$out" || fail "the DML error does not name worker 2: $out"
grep -q "session usable|2" <<<"$out" || fail "the session did not go on after the DML: $out"
echo "ok - multi-shard DML failed naming the stopped worker, session usable"
expect_eq "no prepared transactions on worker 1 after the DML" "0" "$(worker1 "SELECT count(*) FROM pg_prepared_xacts")"
cluster start-node worker2
expect_eq "nothing of the failed DML on any worker" "0|0" "$(rows_with_value_per_node "in flight")"
expect_eq "worker 2 back, no prepared transactions there after the DML" "0" \
	"$(worker2 "SELECT count(*) FROM pg_prepared_xacts")"
expect_eq "rows unchanged after the failed DML" "92" "$(rows)"

# 4. last-participant commit
decisions() {
	echo $(($(worker1 "SELECT count(*) FROM shardext.commit_decision") +
		$(worker2 "SELECT count(*) FROM shardext.commit_decision")))
}

# 4b. the decider's answer is lost after it committed
out=$(psql_at "$COORDINATOR_PORT" -c "SET shardext.test_fault = 'lose_decider_answer'" -c "BEGIN" \
	-c "UPDATE tpc_t SET v = 'in doubt' WHERE id <= 50" -c "COMMIT" 2>&1) &&
	fail "the transaction without an answer succeeded: $out"
grep -q "is not known yet" <<<"$out" || fail "no word of the unknown outcome: $out"
echo "ok - the client hears that the outcome is not known yet"
coord "SELECT shardext_recover_prepared_transactions()" >/dev/null
wait_for_no_prepared
expect_on_both_workers "in doubt" 50 "recovery committed the prepared part as the decider did"
expect_eq "rows after the in-doubt transaction" "92" "$(rows)"

# 4c. the deciding worker's backend dies right after its commit, before it
# answers (its server restarts): the connection breaks, the outcome is in
# doubt, and recovery commits the other worker's prepared part
for port in $WORKER_1_PORT $WORKER_2_PORT; do
	psql_at "$port" -c "ALTER DATABASE $DB SET shardext.test_fault = 'exit_after_decision'"
done
out=$(psql_at "$COORDINATOR_PORT" -c "BEGIN" -c "UPDATE tpc_t SET v = 'decider died' WHERE id <= 50" \
	-c "COMMIT" 2>&1) && fail "the transaction whose decider died succeeded: $out"
grep -q "is not known yet" <<<"$out" || fail "no word of the unknown outcome after the decider died: $out"
echo "ok - the decider's backend died after its commit: the client hears that the outcome is not known"
for port in $WORKER_1_PORT $WORKER_2_PORT; do
	wait_node "$port"
	psql_at "$port" -c "ALTER DATABASE $DB RESET shardext.test_fault"
done
coord "SELECT shardext_recover_prepared_transactions()" >/dev/null
wait_for_no_prepared
expect_on_both_workers "decider died" 50 "recovery committed the prepared part as the dead decider had"
coord "SELECT shardext_recover_prepared_transactions()" >/dev/null
expect_eq "recovery forgot the decisions at last" "0" "$(decisions)"
coord "DROP TABLE tpc_t"
