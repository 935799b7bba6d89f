#!/usr/bin/env bash
# A standby coordinator (issue 24): replica0, a synchronous streaming standby
# of the coordinator (scripts/cluster add-replica coordinator), without
# hot_standby_feedback.
#  1. while a standby it serves reads of distributed tables (router and
#     multi-shard), and refuses writes, DDL, COPY, snowflake ids and the
#     administrative functions, changing nothing;
#  2. a two-phase commit whose coordinator dies right after its commit
#     record (test fault crash_after_local_commit), and money transfers
#     through the coordinator; the coordinator is killed, the standby
#     promoted (pg_promote, as an operator or an external tool would);
#  3. the promoted coordinator finishes the logged decision (the crashed
#     transaction is committed on both workers), resolves everything else
#     that was left prepared, its maintenance daemon runs, transfers resume
#     through it, the books balance, and snowflake ids issued after the
#     promotion all come after those issued before (unique).
TEST_DB=coordinator_failover
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/failover.sh"
S_PORT=$((SHARDEXT_PORT + 10))
export SHARDEXT_REPLICA_CONF="hot_standby_feedback = off"

standby() { psql_at "$S_PORT" -c "$1"; }
has_lines() { [ "$(cat "$1" 2>/dev/null | wc -l)" -ge "$2" ]; }	# file count
wait_for_lines() { wait_for "$1 gets $2 lines" "$3" has_lines "$1" "$2"; }	# file count seconds
cleanup() {
	[ -n "${TRANSFERS_PID:-}" ] && kill "$TRANSFERS_PID" 2>/dev/null
	[ -n "${IDS_PID:-}" ] && kill "$IDS_PID" 2>/dev/null
	# the promoted standby must not outlive the test: its daemons would
	# resolve the old coordinator's prepared transactions as its own
	cluster drop-replica coordinator >/dev/null 2>&1
	cluster start-node coordinator >/dev/null 2>&1
	psql_at "$COORDINATOR_PORT" -d postgres -c "ALTER SYSTEM RESET synchronous_standby_names" \
		-c "SELECT pg_reload_conf()" >/dev/null 2>&1
	drop_test_database "$WORKER_1_PORT" "$WORKER_2_PORT"
	[ -n "${TMP:-}" ] && rm -rf "$TMP"
}
trap cleanup EXIT
cleanup
TMP=$(mktemp -d /tmp/coordinator_failover.XXXXXX)
chmod 777 "$TMP"

bank_database "$TEST_DB"
FIRST=$(accounts_on "$WORKER_1_PORT")
SECOND=$(accounts_on "$WORKER_2_PORT")
coord "CREATE TABLE snowflakes (id bigint PRIMARY KEY, coordinator text NOT NULL);
	SELECT create_distributed_table('snowflakes', 'id', shard_count => 2)" >/dev/null
cluster add-replica coordinator >/dev/null || fail "could not make a standby of the coordinator"
psql_at "$COORDINATOR_PORT" -d postgres -c "ALTER SYSTEM SET synchronous_standby_names = 'replica0'" \
	-c "SELECT pg_reload_conf()" >/dev/null
wait_until "the standby is synchronous" 30 \
	"SELECT count(*) = 1 FROM pg_stat_replication WHERE application_name = 'replica0' AND sync_state = 'sync'"
wait_until "the standby has the bank" 30 "SELECT count(*) = $BANK_ACCOUNT_COUNT FROM $BANK_ACCOUNTS" "$S_PORT"

# --- 1. a standby coordinator reads, and refuses every change --------------
expect_eq "the standby coordinator reads a distributed table (multi-shard)" \
	"$((BANK_ACCOUNT_COUNT * BANK_INITIAL))" "$(standby "SELECT sum(balance) FROM $BANK_ACCOUNTS")"
expect_eq "and by key (router), as the table's owner" "$BANK_INITIAL" \
	"$(psql_at "$S_PORT" -U "$BANK_USER" -c "SELECT balance FROM $BANK_ACCOUNTS WHERE id = ${SECOND%%,*}")"
expect_error_like "writes are refused" "read-only transaction|from a standby coordinator" \
	psql_at "$S_PORT" -U "$BANK_USER" -c "UPDATE $BANK_ACCOUNTS SET balance = 0 WHERE id = 1"
expect_error_like "multi-shard writes are refused" "read-only transaction|from a standby coordinator" \
	psql_at "$S_PORT" -U "$BANK_USER" -c "DELETE FROM $BANK_LEDGER"
expect_error_like "COPY into a distributed table is refused" "read-only transaction|from a standby coordinator" \
	psql_at "$S_PORT" -c "COPY $BANK_LEDGER FROM PROGRAM 'echo 1,1,2,3' WITH (FORMAT csv)"
expect_error_like "DDL is refused" "read-only transaction|from a standby coordinator" \
	psql_at "$S_PORT" -c "ALTER TABLE $BANK_ACCOUNTS ADD COLUMN extra int"
expect_error_like "snowflake ids are refused" "cannot generate snowflake ids during recovery" \
	standby "SELECT snowflake_id()"
expect_error_like "administrative functions are refused" "cannot run shardext_recover_prepared_transactions\(\) on a standby coordinator" \
	standby "SELECT shardext_recover_prepared_transactions()"
expect_error_like "and so are restore points" "on a standby coordinator" \
	standby "SELECT * FROM shardext_create_restore_point('standby')"
expect_eq "nothing changed" "$((BANK_ACCOUNT_COUNT * BANK_INITIAL))|0" \
	"$(coord "SELECT sum(balance) || '|' || (SELECT count(*) FROM $BANK_LEDGER) FROM $BANK_ACCOUNTS")"
for port in $WORKER_1_PORT $WORKER_2_PORT; do
	expect_eq "no shard on $port got the column" 0 \
		"$(psql_at "$port" -c "SELECT count(*) FROM pg_attribute WHERE attname = 'extra' AND NOT attisdropped")"
done

# --- 2. load, a logged decision, the coordinator killed, the standby promoted
ids_loop() {	# port coordinator-name: snowflake ids into a file, until killed
	while true; do
		psql_at "$1" -c "SELECT snowflake_id() FROM generate_series(1, 500)" >>"$TMP/ids.$2" 2>/dev/null
	done
}
ids_loop "$COORDINATOR_PORT" old &
IDS_PID=$!
start_transfers "$TMP/coord" 4 "$FIRST" "$SECOND" "$COORDINATOR_PORT $S_PORT"
wait_until "transfers run" 60 "SELECT count(*) > 200 FROM $BANK_LEDGER"
wait_for_lines "$TMP/ids.old" 2000 20
# the full two-phase commit (commit records), and the backend dies right
# after the local commit: the decision is logged, no COMMIT PREPARED sent
a1=${FIRST%%,*}
a2=${SECOND%%,*}
psql_at "$COORDINATOR_PORT" -c "SET shardext.last_participant_commit = off" \
	-c "SET shardext.test_fault = 'crash_after_local_commit'" \
	-c "BEGIN" -c "UPDATE $BANK_ACCOUNTS SET balance = balance - 7 WHERE id = $a1" \
	-c "UPDATE $BANK_ACCOUNTS SET balance = balance + 7 WHERE id = $a2" \
	-c "INSERT INTO $BANK_LEDGER VALUES (42, $a1, $a2, 7)" -c "COMMIT" >/dev/null 2>&1
kill "$IDS_PID" 2>/dev/null
wait "$IDS_PID" 2>/dev/null
IDS_PID=
cluster stop-node coordinator immediate
# (the old coordinator, restarting after its backend's crash, may have
# resolved it already when it was stopped)
decided=$(psql_at "$WORKER_1_PORT" -c "SELECT count(*) FROM pg_prepared_xacts
	WHERE database = '$TEST_DB' AND gid IN (SELECT gid FROM pg_prepared_xacts)")
echo "note - $decided transactions prepared on worker 1 when the coordinator was killed"
promoted_at=$(date +%s%N)
expect_eq "the operator promotes the standby" t "$(psql_at "$S_PORT" -d postgres -c "SELECT pg_promote()")"

# --- 3. the cluster goes on through the promoted coordinator --------------
coord() { psql_at "$S_PORT" -c "$1"; }
wait_until "the maintenance daemon runs on the new coordinator" 30 \
	"SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'shardext maintenance daemon' AND datname = current_database()" "$S_PORT"
wait_until "the logged decision is carried out" 30 "SELECT count(*) = 1 FROM $BANK_LEDGER WHERE id = 42" "$S_PORT"
echo "ok - the crashed transaction's decision was carried out: $(coord "SELECT balance FROM $BANK_ACCOUNTS WHERE id = $a2")"
wait_until "nothing stays prepared on worker 1" 30 \
	"SELECT count(*) = 0 FROM pg_prepared_xacts WHERE database = '$TEST_DB'" "$WORKER_1_PORT"
wait_until "nor on worker 2" 30 \
	"SELECT count(*) = 0 FROM pg_prepared_xacts WHERE database = '$TEST_DB'" "$WORKER_2_PORT"
echo "ok - nothing stays prepared"
count=$(coord "SELECT count(*) FROM $BANK_LEDGER")
wait_until "transfers resume through the new coordinator" 30 "SELECT count(*) > $count + 100 FROM $BANK_LEDGER" "$S_PORT"
echo "ok - transfers resumed $(( ($(date +%s%N) - promoted_at) / 1000000 )) ms after the promotion (at most)"
ids_loop "$S_PORT" new &
IDS_PID=$!
wait_for_lines "$TMP/ids.new" 2000 20
kill "$IDS_PID" 2>/dev/null
wait "$IDS_PID" 2>/dev/null
IDS_PID=
stop_transfers "$TMP/coord"
check_books "coordinator failover" "$TMP/coord" "$S_PORT"
expect_eq "the decided transaction is in the ledger once" 1 "$(coord "SELECT count(*) FROM $BANK_LEDGER WHERE id = 42")"
old_count=$(sort -u "$TMP/ids.old" | grep -c .)
new_count=$(sort -u "$TMP/ids.new" | grep -c .)
[ "$old_count" -gt 1000 ] && [ "$new_count" -gt 1000 ] || fail "too few snowflake ids ($old_count, $new_count)"
expect_eq "snowflake ids of both coordinators are unique ($old_count before, $new_count after)" "" \
	"$(cat "$TMP/ids.old" "$TMP/ids.new" | grep . | sort | uniq -d | head -3)"
expect_eq "every id after the promotion comes after every id before it" t \
	"$(coord "SELECT $(sort -n "$TMP/ids.new" | grep . | head -1) > $(sort -n "$TMP/ids.old" | grep . | tail -1)")"
