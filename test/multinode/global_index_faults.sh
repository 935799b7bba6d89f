#!/usr/bin/env bash
# Global indexes under real failures (the races without failures are
# isolation specs: global_index_unique, global_index_update_delete,
# global_index_prepared, global_index_move, global_index_build):
#  2. a worker is stopped between PREPARE and COMMIT PREPARED of a
#     transaction that wrote rows and index entries on both workers (it
#     waits at the pause point "after prepare" meanwhile): the transaction
#     commits, recovery commits the worker's part once it is back;
#  3. the coordinator dies after PREPARE (recovery rolls everything back) and
#     after its local commit (recovery commits everything);
#  4. rows whose last writer committed on their worker but is still prepared
#     on the worker of their index entries (COMMIT PREPARED reaches the
#     nodes one after the other; here worker 2 stops in between and recovery
#     is held off): an UPDATE of their indexed columns and a DELETE see the
#     new values and wait for that writer before they remove its entries,
#     which would otherwise stay behind once recovery commits it;
#  5. a single-row INSERT (autocommit) whose row and index entry are on
#     different workers prepares each part together with its statement
#     (with shardext.last_participant_commit off):
#     b. the coordinator dies while it waits for another session's entry,
#        its row prepared: recovery rolls the row back;
#     d. the coordinator dies after PREPARE / after its local commit;
#     e. EXPLAIN ANALYZE of such an insert works (it prepares at commit).
# After each, shardext_check_global_index finds no mismatch.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/moves.sh"
# (a failure in 4. leaves a prepared transaction that only recovery resolves)
trap 'sessions_end; cluster start-node coordinator >/dev/null 2>&1; cluster start-node worker2 >/dev/null 2>&1
	reset_recovery_interval; coord "SELECT shardext_recover_prepared_transactions()" >/dev/null 2>&1
	moves_drop_database; rm -rf "$WORK"' EXIT
WORK=$(mktemp -d)
chmod 777 "$WORK"

moves_database gidx_faults
coord "SET client_min_messages = warning;
	   CREATE TABLE users (id bigint PRIMARY KEY, email text, tag int);
	   SELECT create_distributed_table('users', 'id', shard_count => 8);
	   INSERT INTO users SELECT g, 'u' || g || '@x', g % 5 FROM generate_series(1, 200) g;
	   SELECT shardext_create_global_index('users', 'email', true);
	   SELECT shardext_create_global_index('users', 'tag');" >/dev/null || fail "setup"

checks() {	# WHAT: both indexes exact
	expect_eq "$1: unique index exact" "0" "$(coord "SELECT shardext_check_global_index('users_email_gidx')")"
	expect_eq "$1: non-unique index exact" "0" "$(coord "SELECT shardext_check_global_index('users_tag_gidx')")"
}
# an id whose row is on worker 1
ID_A=$(coord "SELECT g FROM generate_series(1000, 2000) g WHERE (SELECT node_port FROM shardext.shards
	WHERE shard_id = shardext_shard_for_value('users', g::text)) = $WORKER_1_PORT LIMIT 1")
# waiters_on PORT N: at least N backends of that node wait for a lock
waiters_on() {
	sql_is "$1" "SELECT count(*) >= ${2:-1} FROM pg_stat_activity WHERE wait_event_type = 'Lock'
		AND datname = current_database()"
}
wait_for_waiter() { wait_for "${2:-1} session(s) wait on node $1" 30 waiters_on "$1" "${2:-1}"; }
reset_recovery_interval() {
	coord "ALTER SYSTEM RESET shardext.recovery_interval" >/dev/null 2>&1
	coord "SELECT pg_reload_conf()" >/dev/null 2>&1
}

# the transaction of the failure tests: rows and index entries on both workers
fault_transaction() {	# FAULT FIRST_ID (FAULT: a test_fault, or a pause point)
	local setting="shardext.test_fault"
	[ "$1" = "after prepare" ] && setting="shardext.test_pause_points"
	psql_at "$COORDINATOR_PORT" -c "SET $setting = '$1'" -c "BEGIN" \
		-c "INSERT INTO users SELECT g, 'f' || g || '@x', g % 5 FROM generate_series($2, $2 + 19) g" \
		-c "UPDATE users SET email = 'moved' || id::text || '@x' WHERE id BETWEEN 1 AND 10 AND email LIKE 'u%'" \
		-c "DELETE FROM users WHERE id BETWEEN 11 AND 15" \
		-c "COMMIT" 2>&1
}
prepared_on_workers() {
	echo $(($(worker1 "SELECT count(*) FROM pg_prepared_xacts") + $(worker2 "SELECT count(*) FROM pg_prepared_xacts")))
}
no_prepared() { [ "$(prepared_on_workers)" = 0 ]; }
wait_for_no_prepared() { wait_for "prepared transactions resolved ($(prepared_on_workers) left)" 60 no_prepared; }

# 2. worker 2 stops between PREPARE and COMMIT PREPARED
pause_hold "after prepare"
fault_transaction "after prepare" 5000 >"$WORK/fault.out" 2>&1 &
FAULT_PID=$!
wait_for_pause "after prepare"
cluster stop-node worker2 immediate
pause_release
wait "$FAULT_PID" || fail "the transaction failed though every node prepared: $(cat "$WORK/fault.out")"
cluster start-node worker2
wait_for_no_prepared
expect_eq "worker stopped after PREPARE: every row committed" "20|10|0" \
	"$(coord "SELECT (SELECT count(*) FROM users WHERE id BETWEEN 5000 AND 5019) || '|' ||
		(SELECT count(*) FROM users WHERE email LIKE 'moved%') || '|' ||
		(SELECT count(*) FROM users WHERE id BETWEEN 11 AND 15)")"
checks "worker stopped between PREPARE and COMMIT PREPARED"

# 3a. the coordinator dies after PREPARE: everything rolls back
out=$(fault_transaction crash_after_prepare 6000) && fail "the crashing transaction succeeded: $out"
wait_coordinator
cluster stop-node coordinator immediate
cluster start-node coordinator
wait_coordinator
wait_for_no_prepared
expect_eq "coordinator died after PREPARE: nothing of it" "0" \
	"$(coord "SELECT count(*) FROM users WHERE id BETWEEN 6000 AND 6019")"
checks "coordinator died after PREPARE"

# 3b. the coordinator dies after its local commit: everything commits
coord "UPDATE users SET email = 'u' || id::text || '@x' WHERE email LIKE 'moved%'" >/dev/null
coord "INSERT INTO users SELECT g, 'u' || g || '@x', g % 5 FROM generate_series(11, 15) g" >/dev/null
out=$(fault_transaction crash_after_local_commit 7000) && fail "the crashing transaction succeeded: $out"
wait_coordinator
wait_for_no_prepared
expect_eq "coordinator died after its commit: all of it" "20|10|0" \
	"$(coord "SELECT (SELECT count(*) FROM users WHERE id BETWEEN 7000 AND 7019) || '|' ||
		(SELECT count(*) FROM users WHERE email LIKE 'moved%') || '|' ||
		(SELECT count(*) FROM users WHERE id BETWEEN 11 AND 15)")"
checks "coordinator died after its local commit"
expect_eq "lookups by the index find the recovered rows" "7007" \
	"$(coord "SELECT id FROM users WHERE email = 'f7007@x'")"

# 4. writers whose commit reached the row's node but not the index shard's
on_worker() {	# TABLE PORT CANDIDATES: the first candidate whose shard is on PORT
	coord "SELECT v FROM unnest(ARRAY[$3]) v WHERE (SELECT node_port FROM shardext.shards
		WHERE shard_id = shardext_shard_for_value('$1', v::text)) = $2 LIMIT 1"
}
ID_C=$(coord "SELECT g FROM generate_series(8000, 9000) g WHERE (SELECT node_port FROM shardext.shards
	WHERE shard_id = shardext_shard_for_value('users', g::text)) = $WORKER_1_PORT ORDER BY g LIMIT 1")
ID_D=$(coord "SELECT g FROM generate_series($ID_C + 1, 9000) g WHERE (SELECT node_port FROM shardext.shards
	WHERE shard_id = shardext_shard_for_value('users', g::text)) = $WORKER_1_PORT ORDER BY g LIMIT 1")
EMAIL_C=$(on_worker shardext_gidx.users_email_gidx "$WORKER_2_PORT" \
	"$(seq -s, -f "'c%g@x'" 1 50)")
EMAIL_D=$(on_worker shardext_gidx.users_email_gidx "$WORKER_2_PORT" \
	"$(seq -s, -f "'d%g@x'" 1 50)")
TAG=$(on_worker shardext_gidx.users_tag_gidx "$WORKER_2_PORT" "$(seq -s, 100 150)")
[ -n "$ID_D" ] && [ -n "$EMAIL_C" ] && [ -n "$EMAIL_D" ] && [ -n "$TAG" ] ||
	fail "no rows and values with the placements this case needs"
coord "INSERT INTO users VALUES ($ID_C, 'c@x', 1), ($ID_D, 'd@x', 1)" >/dev/null
coord "ALTER SYSTEM SET shardext.recovery_interval = -1" >/dev/null
coord "SELECT pg_reload_conf()" >/dev/null
pause_hold "after prepare"
psql_at "$COORDINATOR_PORT" -c "SET shardext.test_pause_points = 'after prepare'" \
	-c "UPDATE users SET email = CASE id WHEN $ID_C THEN '$EMAIL_C' ELSE '$EMAIL_D' END, tag = $TAG
		WHERE id IN ($ID_C, $ID_D)" >"$WORK/fault.out" 2>&1 &
FAULT_PID=$!
wait_for_pause "after prepare"
cluster stop-node worker2 immediate
pause_release
wait "$FAULT_PID" || fail "the transaction failed though every node prepared: $(cat "$WORK/fault.out")"
cluster start-node worker2
expect_eq "the writer is committed on worker 1, prepared on worker 2" "2|1" \
	"$(coord "SELECT count(*) FROM users WHERE id IN ($ID_C, $ID_D) AND tag = $TAG")|$(worker2 \
		"SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'shardext%'")"
psql_at "$COORDINATOR_PORT" -c "UPDATE users SET email = 'c2@x', tag = 2 WHERE id = $ID_C" \
	>"$WORK/update.out" 2>&1 &
UPDATE_PID=$!
psql_at "$COORDINATOR_PORT" -c "DELETE FROM users WHERE id = $ID_D" >"$WORK/delete.out" 2>&1 &
DELETE_PID=$!
wait_for_waiter "$WORKER_2_PORT" 2
kill -0 "$UPDATE_PID" 2>/dev/null && kill -0 "$DELETE_PID" 2>/dev/null ||
	fail "the UPDATE and DELETE did not wait: $(cat "$WORK/update.out" "$WORK/delete.out")"
echo "ok - an UPDATE and a DELETE wait for the writer prepared on the index shard's node"
coord "SELECT shardext_recover_prepared_transactions()" >/dev/null
wait "$UPDATE_PID" || fail "the UPDATE failed: $(cat "$WORK/update.out")"
wait "$DELETE_PID" || fail "the DELETE failed: $(cat "$WORK/delete.out")"
reset_recovery_interval
expect_eq "the UPDATE and the DELETE went through" "c2@x|2|0" \
	"$(coord "SELECT (SELECT email || '|' || tag FROM users WHERE id = $ID_C) || '|' ||
		(SELECT count(*) FROM users WHERE id = $ID_D)")"
checks "rows read before their writer committed on the index shard's node"
expect_eq "lookups by the old values find nothing" "0" \
	"$(coord "SELECT count(*) FROM users WHERE email IN ('$EMAIL_C', '$EMAIL_D')")"

# 5. autocommit INSERTs prepare with their statements (see SendTask)
ID_E=$(coord "SELECT g FROM generate_series(1000, 2000) g WHERE g <> $ID_A AND (SELECT node_port FROM
	shardext.shards WHERE shard_id = shardext_shard_for_value('users', g::text)) = $WORKER_1_PORT LIMIT 1")
# emails whose index shard is on worker 2 (rows ID_A and ID_E are on worker 1)
email_on_worker2() {	# N: the Nth such email
	coord "SELECT 'w2_' || g || '@x' FROM generate_series(1, 2000) g WHERE (SELECT node_port FROM shardext.shards
		WHERE shard_id = shardext_shard_for_value('shardext_gidx.users_email_gidx', 'w2_' || g || '@x'))
		= $WORKER_2_PORT ORDER BY g OFFSET $1 LIMIT 1"
}
prepared_on() { psql_at "$1" -c "SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'shardext%'"; }

# 5b. the coordinator dies while the insert waits with its row prepared
E2=$(email_on_worker2 1)
session_start first
session_run first "BEGIN; INSERT INTO users VALUES ($ID_A, '$E2', 1);"
PGOPTIONS="-c shardext.last_participant_commit=off" \
	psql_at "$COORDINATOR_PORT" -c "INSERT INTO users VALUES ($ID_E, '$E2', 3)" >"$WORK/second.out" 2>&1 &
SECOND_PID=$!
wait_for_waiter "$WORKER_2_PORT"
expect_eq "the waiting insert's row is prepared" "1" "$(prepared_on "$WORKER_1_PORT")"
cluster stop-node coordinator immediate
session_end first
wait "$SECOND_PID" 2>/dev/null
cluster start-node coordinator
wait_coordinator
wait_for_no_prepared
expect_eq "coordinator died during the statement: neither row" "0" \
	"$(coord "SELECT count(*) FROM users WHERE id IN ($ID_A, $ID_E) OR email = '$E2'")"
checks "coordinator died while an autocommit insert waited with its row prepared"

# 5d. the coordinator dies after PREPARE / after its local commit
E4=$(email_on_worker2 3)
out=$(psql_at "$COORDINATOR_PORT" -c "SET shardext.test_fault = 'crash_after_prepare'" \
	-c "INSERT INTO users VALUES ($ID_E, '$E4', 3)" 2>&1) && fail "the crashing insert succeeded: $out"
wait_coordinator
wait_for_no_prepared
expect_eq "coordinator died after an autocommit PREPARE: nothing of it" "0" \
	"$(coord "SELECT count(*) FROM users WHERE id = $ID_E OR email = '$E4'")"
checks "coordinator died after an autocommit insert's PREPARE"
out=$(psql_at "$COORDINATOR_PORT" -c "SET shardext.test_fault = 'crash_after_local_commit'" \
	-c "INSERT INTO users VALUES ($ID_E, '$E4', 3)" 2>&1) && fail "the crashing insert succeeded: $out"
wait_coordinator
wait_for_no_prepared
expect_eq "coordinator died after an autocommit insert's commit: all of it" "$ID_E" \
	"$(coord "SELECT id FROM users WHERE email = '$E4'")"
checks "coordinator died after an autocommit insert's local commit"

# 5e. EXPLAIN ANALYZE of such an insert asks the nodes for plans afterwards:
# it does not prepare with the statement, and works
coord "DELETE FROM users WHERE id = $ID_E" >/dev/null
E5=$(email_on_worker2 4)
coord "EXPLAIN (ANALYZE, COSTS off, TIMING off, SUMMARY off) INSERT INTO users VALUES ($ID_E, '$E5', 3)" \
	>"$WORK/explain.out" 2>&1 || fail "EXPLAIN ANALYZE of a cross-node insert failed: $(cat "$WORK/explain.out")"
expect_eq "EXPLAIN ANALYZE inserted the row" "$ID_E" "$(coord "SELECT id FROM users WHERE email = '$E5'")"
checks "EXPLAIN ANALYZE of an autocommit insert on two nodes"
