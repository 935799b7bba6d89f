#!/usr/bin/env bash
# Repartition joins under failures (issue 26): what an exchange wrote on the
# workers never stays behind, and the error says what happened.  The query
# waits at the pause point "repartition after map" (its map tasks wrote
# their rows on both workers) while:
#  1. it is cancelled (pg_cancel_backend);
#  2. its statement_timeout passes;
#  3. worker 2 is killed: the query fails naming the node; once worker 2 is
#     back, no node holds the exchange's files (worker 2's went with its
#     restart, worker 1's the maintenance daemon removed);
#  4. the coordinator crashes: after its restart the maintenance daemon
#     removes what the crashed query left on the workers;
# and afterwards the same join gives the right answer again.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/moves.sh"
trap 'sessions_end; cluster start-node coordinator >/dev/null 2>&1; cluster start-node worker2 >/dev/null 2>&1;
	moves_drop_database' EXIT

moves_database repartition_faults
coord "SET client_min_messages = warning;
	   CREATE TABLE a (k int, x int, v int);
	   CREATE TABLE c (k int, y int, w int);
	   SELECT create_distributed_table('a', 'k', shard_count => 6);
	   SELECT create_distributed_table('c', 'k', shard_count => 5);
	   INSERT INTO a SELECT g, g % 97, g FROM generate_series(1, 3000) g;
	   INSERT INTO c SELECT g, g % 89, g FROM generate_series(1, 2000) g;" >/dev/null || fail "setup"
EXPECTED=$(coord "SELECT count(*) FROM (SELECT g % 97 AS x FROM generate_series(1, 3000) g) a
	JOIN (SELECT g % 89 AS y FROM generate_series(1, 2000) g) c ON a.x = c.y")
SETTINGS="SET shardext.repartition_join_min_rows = 0; SET shardext.broadcast_join_max_rows = 0;"
JOIN="SELECT count(*) FROM a JOIN c ON a.x = c.y;"

# exchange_files PORT: how many exchange directories the node holds
exchange_files() {
	psql_at "$1" -c "SELECT count(*) FROM pg_ls_dir('base/pgsql_tmp', true, false) AS d
		WHERE d LIKE 'pgsql_tmp_shardext_%'"
}
files_on_both() { [ "$(exchange_files "$WORKER_1_PORT")" -gt 0 ] && [ "$(exchange_files "$WORKER_2_PORT")" -gt 0 ]; }
no_files() { [ "$(exchange_files "$WORKER_1_PORT")" = 0 ] && [ "$(exchange_files "$WORKER_2_PORT")" = 0 ]; }
ended_with() { grep -q "$1" "$SESSION_DIR/$2.out"; }

# start_paused NAME [SETTING]: a session runs the join and stops after its map phase
start_paused() {
	pause_hold "repartition after map"
	session_start "$1"
	session_send "$1" "$SETTINGS ${2:-} SET shardext.test_pause_points = 'repartition after map'; $JOIN"
	wait_for_pause "repartition after map"
	wait_for "the map tasks wrote on both workers" 30 files_on_both
}

expect_eq "the join is right to begin with" "$EXPECTED" "$(psql_at "$COORDINATOR_PORT" -c "$SETTINGS" -c "$JOIN")"
expect_eq "no files after a join" "0 0" "$(exchange_files "$WORKER_1_PORT") $(exchange_files "$WORKER_2_PORT")"

# 1. cancelled during the exchange
start_paused cancelled
coord "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'test_cancelled'" >/dev/null
wait_for "the cancelled query ended" 30 ended_with "canceling statement due to user request" cancelled
pause_release
session_end cancelled
wait_for "no files on the workers after the cancel" 60 no_files
echo "ok - a cancelled exchange leaves nothing"

# 2. statement_timeout during the exchange
start_paused timed_out "SET statement_timeout = '3s';"
wait_for "the query ran out of time" 30 ended_with "canceling statement due to statement timeout" timed_out
pause_release
session_end timed_out
wait_for "no files on the workers after the timeout" 60 no_files
echo "ok - an exchange past statement_timeout leaves nothing"

# 3. worker 2 killed after the map phase
start_paused killed
cluster stop-node worker2 immediate
pause_release
wait_for "the query failed" 60 ended_with "ERROR" killed
grep -q "127.0.0.1:$WORKER_2_PORT\|port $WORKER_2_PORT" "$SESSION_DIR/killed.out" ||
	fail "the error does not name worker 2: $(session_output killed)"
session_end killed
cluster start-node worker2
wait_node "$WORKER_2_PORT"
wait_for "no files on either worker once worker 2 is back" 60 no_files
echo "ok - a killed worker: a clear error, nothing left behind"

# 4. the coordinator crashes during the exchange
start_paused crashed
cluster stop-node coordinator immediate
# the sessions' psql ended with the coordinator: writing to them must not stop the test
trap '' PIPE
session_end crashed >/dev/null 2>&1
pause_release >/dev/null 2>&1
trap - PIPE
files_on_both || fail "the crashed exchange's files should still be there"
cluster start-node coordinator
wait_coordinator
wait_for "the restarted coordinator's daemon removed the crashed exchange's files" 60 no_files
echo "ok - after a coordinator crash the daemon removes the leftovers"

# 5. and the join works as before
expect_eq "the join is right afterwards" "$EXPECTED" "$(psql_at "$COORDINATOR_PORT" -c "$SETTINGS" -c "$JOIN")"
expect_eq "no files after the last join" "0 0" "$(exchange_files "$WORKER_1_PORT") $(exchange_files "$WORKER_2_PORT")"
