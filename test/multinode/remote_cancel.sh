#!/usr/bin/env bash
# Cancelling the remote part of a statement (src/connection/remote_cancel.c),
# as a non-superuser table owner with odd identifiers.  A statement that
# waits on a worker for a lock and is ended by statement_timeout returns
# within seconds and leaves nothing waiting on the worker -- the cancel
# reached the worker's backend (a closed connection would not end its lock
# wait) -- and no warning that a cancel could not be sent:
#  1. a router query outside a transaction block (the executor cancels it);
#  2. a multi-shard query (every connection is cancelled);
#  3. a query in a transaction block (the abort cancels it).
# With libpq 15 and 16 the cancel is pg_cancel_backend() over a second
# connection as the same role, with libpq 17 and later libpq's non-blocking
# cancel request; the test holds for both.
source "$(dirname "$0")/lib/common.sh"

ROLE='"Cäncel Üser"'
TABLE='"Cancel ""Me"" Täble"'
locker=""
cleanup() {
	[ -n "$locker" ] && kill "$locker" 2>/dev/null
	coord "DROP TABLE IF EXISTS $TABLE" >/dev/null 2>&1
	for port in $COORDINATOR_PORT $WORKER_1_PORT $WORKER_2_PORT; do
		psql_at "$port" -c "SET client_min_messages = warning" -c "DROP OWNED BY $ROLE" \
			-c "DROP ROLE IF EXISTS $ROLE" >/dev/null 2>&1
	done
}
trap cleanup EXIT

for port in $COORDINATOR_PORT $WORKER_1_PORT $WORKER_2_PORT; do
	psql_at "$port" -c "SET client_min_messages = warning" -c "DROP ROLE IF EXISTS $ROLE" \
		-c "CREATE ROLE $ROLE LOGIN NOSUPERUSER" -c "GRANT CREATE, USAGE ON SCHEMA public TO $ROLE" \
		>/dev/null || fail "could not create the role on port $port"
done
coord "DROP TABLE IF EXISTS $TABLE;
	CREATE TABLE $TABLE (\"Kéy\" int PRIMARY KEY, \"vàl\" int NOT NULL);
	SELECT create_distributed_table('$TABLE', 'Kéy', shard_count => 4);
	ALTER TABLE $TABLE OWNER TO $ROLE;" >/dev/null
as_role() { psql_at "$COORDINATOR_PORT" -U "Cäncel Üser" "$@"; }
as_role -c "INSERT INTO $TABLE SELECT g, g FROM generate_series(1, 100) g" >/dev/null ||
	fail "the owner could not write its table"

# the shard of key 7, locked on its worker by a session that holds the lock
# until told to commit (a coprocess: the test reads "locked" once it has it)
shard=$(coord "SELECT shard_name FROM shardext.shards WHERE shard_id = shardext_shard_for_value('$TABLE', '7')")
port=$(coord "SELECT node_port FROM shardext.shards WHERE shard_id = shardext_shard_for_value('$TABLE', '7')")
coproc LOCKER { exec "$BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres \
	-p "$port" -d "$DB" 2>&1; }
locker=$LOCKER_PID
printf '%s\n' "BEGIN;" "LOCK TABLE $shard IN ACCESS EXCLUSIVE MODE;" '\echo locked' >&"${LOCKER[1]}"
read -t 30 -r answer <&"${LOCKER[0]}"
[ "$answer" = locked ] || fail "the shard was not locked on its worker: $answer"

remote_waiters() {
	psql_at "$port" -c "SELECT count(*) FROM pg_stat_activity
		WHERE application_name LIKE 'shardext\\_%' AND wait_event_type = 'Lock'"
}
# cancelled WHAT SQL...: runs the SQL as the owner with statement_timeout 1s
cancelled() {
	local what=$1 start elapsed_ms out
	shift
	start=$(date +%s%N)
	out=$(as_role -c "SET statement_timeout = '1s'" "$@" 2>&1)
	elapsed_ms=$((($(date +%s%N) - start) / 1000000))
	grep -q "canceling statement due to statement timeout" <<<"$out" ||
		fail "$what: not ended by statement_timeout: $out"
	grep -q "could not send cancel request" <<<"$out" && fail "$what: $out"
	[ "$elapsed_ms" -lt 5000 ] || fail "$what took $elapsed_ms ms"
	expect_eq "$what: nothing waits on the worker any more ($elapsed_ms ms)" 0 "$(remote_waiters)"
}

cancelled "a router query" -c "SELECT \"vàl\" FROM $TABLE WHERE \"Kéy\" = 7"
cancelled "a multi-shard query" -c "SELECT sum(\"vàl\") FROM $TABLE"
cancelled "a query in a transaction block" -c "BEGIN" \
	-c "UPDATE $TABLE SET \"vàl\" = 0 WHERE \"Kéy\" <> 7" -c "SELECT \"vàl\" FROM $TABLE WHERE \"Kéy\" = 7"

printf '%s\n' "COMMIT;" '\q' >&"${LOCKER[1]}"
wait "$locker"
locker=""
expect_eq "the rolled-back update changed nothing, and the owner reads again" "5050" \
	"$(as_role -c "SELECT sum(\"vàl\") FROM $TABLE")"
