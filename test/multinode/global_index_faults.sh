#!/usr/bin/env bash
# Global indexes under concurrency and real failures:
#  1. two sessions insert the same email into rows of different shards: the
#     second waits on the index shard until the first commits, then fails
#     with the unique violation of the global index; when the first rolls
#     back, the second goes in; ON CONFLICT (email) DO NOTHING waits too;
#  2. a worker is stopped between PREPARE and COMMIT PREPARED of a
#     transaction that wrote rows and index entries on both workers: the
#     transaction commits, recovery commits the worker's part once it is
#     back;
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
#     (a-c with shardext.last_participant_commit off; with it on, one part
#     commits last without PREPARE, f):
#     a. while its entry waits for another session's, its row is already
#        prepared; when the other commits, it fails with the unique violation
#        and its prepared row is rolled back at once;
#     b. the coordinator dies while it waits: recovery rolls the row back;
#     c. a deadlock through its prepared row (the other session then wants
#        that row) is found by the distributed deadlock detector;
#     d. the coordinator dies after PREPARE / after its local commit;
#     e. EXPLAIN ANALYZE of such an insert works (it prepares at commit);
#     f. with last-participant commit, one part is written unprepared while
#        the entry waits, and the unique violation rolls back both.
# After each, shardext_check_global_index finds no mismatch.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/moves.sh"
# (a failure in 4. leaves a prepared transaction that only recovery resolves)
trap 'cluster start-node coordinator >/dev/null 2>&1; cluster start-node worker2 >/dev/null 2>&1
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
# two ids whose rows are on different workers
ID_A=$(coord "SELECT g FROM generate_series(1000, 2000) g WHERE (SELECT node_port FROM shardext.shards
	WHERE shard_id = shardext_shard_for_value('users', g::text)) = $WORKER_1_PORT LIMIT 1")
ID_B=$(coord "SELECT g FROM generate_series(1000, 2000) g WHERE (SELECT node_port FROM shardext.shards
	WHERE shard_id = shardext_shard_for_value('users', g::text)) = $WORKER_2_PORT LIMIT 1")
# the node of the index shard of an email
index_port() {
	coord "SELECT node_port FROM shardext.shards WHERE shard_id =
		shardext_shard_for_value('shardext_gidx.users_email_gidx', '$1')"
}
# wait_for_waiter PORT [N]: N (1) backends of that node wait for a lock (30 s at most)
wait_for_waiter() {
	for _ in $(seq 1 300); do
		[ "$(psql_at "$1" -c "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND datname = current_database()")" -ge "${2:-1}" ] && return 0
		sleep 0.1
	done
	fail "fewer than ${2:-1} sessions waited on node $1"
}
reset_recovery_interval() {
	coord "ALTER SYSTEM RESET shardext.recovery_interval" >/dev/null 2>&1
	coord "SELECT pg_reload_conf()" >/dev/null 2>&1
}
# first_session EMAIL END: BEGIN, insert ID_A with EMAIL, hold 30 s at most
# until $WORK/release appears, then END (COMMIT or ROLLBACK)
first_session() {
	rm -f "$WORK/release"
	psql_at "$COORDINATOR_PORT" >"$WORK/first.out" 2>&1 <<SQL &
BEGIN;
INSERT INTO users VALUES ($ID_A, '$1', 1);
SELECT 'inserted';
DO \$\$ BEGIN FOR i IN 1..300 LOOP
	EXIT WHEN (pg_stat_file('$WORK/release', true)).size IS NOT NULL; PERFORM pg_sleep(0.1); END LOOP; END \$\$;
$2;
SQL
	FIRST_PID=$!
	for _ in $(seq 1 300); do
		grep -q inserted "$WORK/first.out" && return 0
		grep -q ERROR "$WORK/first.out" && break
		sleep 0.1
	done
	fail "the first session did not insert: $(cat "$WORK/first.out")"
}
# second_session SQL: run SQL in the background, output in $WORK/second.out
second_session() {
	psql_at "$COORDINATOR_PORT" -c "$1" >"$WORK/second.out" 2>&1 &
	SECOND_PID=$!
}
# release_first_expect_violation: the first session ends, the waiting second
# one then fails with the unique violation of the global index
release_first_expect_violation() {
	touch "$WORK/release"
	wait "$FIRST_PID" || fail "first session: $(cat "$WORK/first.out")"
	wait "$SECOND_PID" && fail "the second insert of the same email succeeded"
	grep -q 'duplicate key value violates unique constraint "users_email_gidx"' "$WORK/second.out" ||
		fail "not the unique violation of the global index: $(cat "$WORK/second.out")"
}

# 1a. the first commits: the second waited and fails like a local unique index
first_session "same@x" COMMIT
second_session "INSERT INTO users VALUES ($ID_B, 'same@x', 2)"
wait_for_waiter "$(index_port same@x)"
kill -0 "$SECOND_PID" 2>/dev/null || fail "the second insert did not wait: $(cat "$WORK/second.out")"
release_first_expect_violation
grep -q 'Key (email)=(same@x) already exists.' "$WORK/second.out" ||
	fail "no DETAIL naming the key: $(cat "$WORK/second.out")"
echo "ok - the second insert waited, then failed with the global index's unique violation"
expect_eq "only the first row" "$ID_A" "$(coord "SELECT string_agg(id::text, ',') FROM users WHERE email = 'same@x'")"
checks "concurrent inserts, first committed"

# 1b. the first rolls back: the second waited and goes in
coord "DELETE FROM users WHERE id = $ID_A" >/dev/null
first_session "other@x" ROLLBACK
second_session "INSERT INTO users VALUES ($ID_B, 'other@x', 2)"
wait_for_waiter "$(index_port other@x)"
touch "$WORK/release"
wait "$FIRST_PID" || fail "first session: $(cat "$WORK/first.out")"
wait "$SECOND_PID" || fail "the second insert failed after the first rolled back: $(cat "$WORK/second.out")"
expect_eq "the second row went in" "$ID_B" "$(coord "SELECT string_agg(id::text, ',') FROM users WHERE email = 'other@x'")"
checks "concurrent inserts, first rolled back"

# 1c. ON CONFLICT (email) DO NOTHING waits as well, then inserts nothing
coord "DELETE FROM users WHERE id IN ($ID_A, $ID_B)" >/dev/null
first_session "third@x" COMMIT
second_session "INSERT INTO users VALUES ($ID_B, 'third@x', 2) ON CONFLICT (email) DO NOTHING RETURNING id"
wait_for_waiter "$(index_port third@x)"
touch "$WORK/release"
wait "$FIRST_PID" || fail "first session: $(cat "$WORK/first.out")"
wait "$SECOND_PID" || fail "ON CONFLICT DO NOTHING failed: $(cat "$WORK/second.out")"
[ -z "$(cat "$WORK/second.out")" ] || fail "ON CONFLICT DO NOTHING inserted: $(cat "$WORK/second.out")"
expect_eq "ON CONFLICT (email) DO NOTHING waited, then skipped the row" "$ID_A" \
	"$(coord "SELECT string_agg(id::text, ',') FROM users WHERE email = 'third@x'")"
checks "ON CONFLICT DO NOTHING under concurrency"

# the transaction of the failure tests: rows and index entries on both workers
fault_transaction() {	# FAULT FIRST_ID
	psql_at "$COORDINATOR_PORT" -c "SET shardext.test_fault = '$1'" -c "BEGIN" \
		-c "INSERT INTO users SELECT g, 'f' || g || '@x', g % 5 FROM generate_series($2, $2 + 19) g" \
		-c "UPDATE users SET email = 'moved' || id::text || '@x' WHERE id BETWEEN 1 AND 10 AND email LIKE 'u%'" \
		-c "DELETE FROM users WHERE id BETWEEN 11 AND 15" \
		-c "COMMIT" 2>&1
}
prepared_on_workers() {
	echo $(($(worker1 "SELECT count(*) FROM pg_prepared_xacts") + $(worker2 "SELECT count(*) FROM pg_prepared_xacts")))
}
wait_for_no_prepared() {
	for _ in $(seq 1 120); do
		[ "$(prepared_on_workers)" = 0 ] && return 0
		sleep 0.5
	done
	fail "prepared transactions were not resolved within 60 s: $(prepared_on_workers) left"
}
wait_for_coordinator() {
	for _ in $(seq 1 120); do
		coord "SELECT 1" >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	fail "coordinator did not come back"
}

# wait_for_prepare_on_worker2: the paused writer (output in $WORK/fault.out)
# has prepared on worker 2
wait_for_prepare_on_worker2() {
	local _
	for _ in $(seq 1 100); do
		[ "$(worker2 "SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'shardext%'")" -ge 1 ] && return 0
		sleep 0.1
	done
	fail "no PREPARE on worker 2: $(cat "$WORK/fault.out")"
}

# 2. worker 2 stops between PREPARE and COMMIT PREPARED
fault_transaction pause_after_prepare 5000 >"$WORK/fault.out" 2>&1 &
FAULT_PID=$!
wait_for_prepare_on_worker2
cluster stop-node worker2 immediate
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
wait_for_coordinator
cluster stop-node coordinator immediate
cluster start-node coordinator
wait_for_coordinator
wait_for_no_prepared
expect_eq "coordinator died after PREPARE: nothing of it" "0" \
	"$(coord "SELECT count(*) FROM users WHERE id BETWEEN 6000 AND 6019")"
checks "coordinator died after PREPARE"

# 3b. the coordinator dies after its local commit: everything commits
coord "UPDATE users SET email = 'u' || id::text || '@x' WHERE email LIKE 'moved%'" >/dev/null
coord "INSERT INTO users SELECT g, 'u' || g || '@x', g % 5 FROM generate_series(11, 15) g" >/dev/null
out=$(fault_transaction crash_after_local_commit 7000) && fail "the crashing transaction succeeded: $out"
wait_for_coordinator
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
psql_at "$COORDINATOR_PORT" -c "SET shardext.test_fault = 'pause_after_prepare'" \
	-c "UPDATE users SET email = CASE id WHEN $ID_C THEN '$EMAIL_C' ELSE '$EMAIL_D' END, tag = $TAG
		WHERE id IN ($ID_C, $ID_D)" >"$WORK/fault.out" 2>&1 &
FAULT_PID=$!
wait_for_prepare_on_worker2
cluster stop-node worker2 immediate
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
coord "DELETE FROM users WHERE id IN ($ID_A, $ID_B, $ID_E)" >/dev/null

# 5a. the row is prepared while the entry waits; the unique violation rolls it back
E1=$(email_on_worker2 0)
first_session "$E1" COMMIT
PGOPTIONS="-c shardext.last_participant_commit=off" second_session "INSERT INTO users VALUES ($ID_E, '$E1', 3)"
wait_for_waiter "$WORKER_2_PORT"
expect_eq "the waiting insert's row is prepared already" "1" "$(prepared_on "$WORKER_1_PORT")"
release_first_expect_violation
grep -q WARNING "$WORK/second.out" && fail "warnings after the unique violation: $(cat "$WORK/second.out")"
expect_eq "its prepared row is rolled back at once" "0|0" \
	"$(prepared_on "$WORKER_1_PORT")|$(prepared_on "$WORKER_2_PORT")"
expect_eq "only the first row has the email" "$ID_A" \
	"$(coord "SELECT string_agg(id::text, ',') FROM users WHERE email = '$E1'")"
expect_eq "no row $ID_E" "0" "$(coord "SELECT count(*) FROM users WHERE id = $ID_E")"
checks "autocommit insert prepared with its statement, then a unique violation"

# 5b. the coordinator dies while the insert waits with its row prepared
coord "DELETE FROM users WHERE id = $ID_A" >/dev/null
E2=$(email_on_worker2 1)
first_session "$E2" COMMIT
PGOPTIONS="-c shardext.last_participant_commit=off" second_session "INSERT INTO users VALUES ($ID_E, '$E2', 3)"
wait_for_waiter "$WORKER_2_PORT"
expect_eq "the waiting insert's row is prepared" "1" "$(prepared_on "$WORKER_1_PORT")"
cluster stop-node coordinator immediate
wait "$FIRST_PID" 2>/dev/null
wait "$SECOND_PID" 2>/dev/null
cluster start-node coordinator
wait_for_coordinator
wait_for_no_prepared
expect_eq "coordinator died during the statement: neither row" "0" \
	"$(coord "SELECT count(*) FROM users WHERE id IN ($ID_A, $ID_E) OR email = '$E2'")"
checks "coordinator died while an autocommit insert waited with its row prepared"

# 5c. a distributed deadlock through the prepared row: the other session holds
# the email, then inserts the row id; the detector cancels the younger one
E3=$(email_on_worker2 2)
rm -f "$WORK/release"
psql_at "$COORDINATOR_PORT" >"$WORK/first.out" 2>&1 <<SQL &
BEGIN;
INSERT INTO users VALUES ($ID_B, '$E3', 1);
SELECT 'inserted';
DO \$\$ BEGIN FOR i IN 1..300 LOOP
	EXIT WHEN (pg_stat_file('$WORK/release', true)).size IS NOT NULL; PERFORM pg_sleep(0.1); END LOOP; END \$\$;
INSERT INTO users VALUES ($ID_E, 'other_$E3', 1);
COMMIT;
SQL
FIRST_PID=$!
for _ in $(seq 1 300); do grep -q inserted "$WORK/first.out" && break; sleep 0.1; done
grep -q inserted "$WORK/first.out" || fail "the first session did not insert: $(cat "$WORK/first.out")"
# (bounded: an undetected deadlock would hold it forever)
PGOPTIONS="-c statement_timeout=60000 -c shardext.last_participant_commit=off" \
	second_session "INSERT INTO users VALUES ($ID_E, '$E3', 3)"
wait_for_waiter "$WORKER_2_PORT"
touch "$WORK/release"
wait "$SECOND_PID" && fail "both inserts of row $ID_E succeeded: $(cat "$WORK/second.out")"
grep -q "canceling the transaction to resolve a distributed deadlock" "$WORK/second.out" ||
	fail "not the distributed deadlock: $(cat "$WORK/second.out")"
wait "$FIRST_PID" || fail "the other transaction failed: $(cat "$WORK/first.out")"
grep -q "ERROR" "$WORK/first.out" && fail "the other transaction failed: $(cat "$WORK/first.out")"
echo "ok - the deadlock through a prepared row was found and resolved"
expect_eq "the other transaction's rows" "$ID_B:$E3,$ID_E:other_$E3" \
	"$(coord "SELECT string_agg(id || ':' || email, ',' ORDER BY id) FROM users WHERE id IN ($ID_B, $ID_E)")"
expect_eq "nothing left prepared" "0|0" "$(prepared_on "$WORKER_1_PORT")|$(prepared_on "$WORKER_2_PORT")"
checks "distributed deadlock through a prepared row"

# 5d. the coordinator dies after PREPARE / after its local commit
coord "DELETE FROM users WHERE id IN ($ID_B, $ID_E)" >/dev/null
E4=$(email_on_worker2 3)
out=$(psql_at "$COORDINATOR_PORT" -c "SET shardext.test_fault = 'crash_after_prepare'" \
	-c "INSERT INTO users VALUES ($ID_E, '$E4', 3)" 2>&1) && fail "the crashing insert succeeded: $out"
wait_for_coordinator
wait_for_no_prepared
expect_eq "coordinator died after an autocommit PREPARE: nothing of it" "0" \
	"$(coord "SELECT count(*) FROM users WHERE id = $ID_E OR email = '$E4'")"
checks "coordinator died after an autocommit insert's PREPARE"
out=$(psql_at "$COORDINATOR_PORT" -c "SET shardext.test_fault = 'crash_after_local_commit'" \
	-c "INSERT INTO users VALUES ($ID_E, '$E4', 3)" 2>&1) && fail "the crashing insert succeeded: $out"
wait_for_coordinator
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

# 5f. last-participant commit (the default): one part of the waiting insert
# is prepared at most, and the unique violation leaves nothing of it
coord "DELETE FROM users WHERE id IN ($ID_A, $ID_E)" >/dev/null
E6=$(email_on_worker2 5)
first_session "$E6" COMMIT
second_session "INSERT INTO users VALUES ($ID_E, '$E6', 3)"
wait_for_waiter "$WORKER_2_PORT"
n=$(($(prepared_on "$WORKER_1_PORT") + $(prepared_on "$WORKER_2_PORT")))
[ "$n" -le 1 ] || fail "both parts of the waiting insert are prepared ($n)"
echo "ok - $n part(s) of the waiting insert prepared"
release_first_expect_violation
expect_eq "nothing of it is left prepared" "0|0" \
	"$(prepared_on "$WORKER_1_PORT")|$(prepared_on "$WORKER_2_PORT")"
expect_eq "no row $ID_E after the violation" "0" "$(coord "SELECT count(*) FROM users WHERE id = $ID_E")"
checks "last-participant commit of an autocommit insert, then a unique violation"
