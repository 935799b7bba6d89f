#!/usr/bin/env bash
# snowflake_concurrency.sh: snowflake ids under concurrency and across
# restarts of a real server.
#
#   1. 8 sessions on the coordinator generate 200,000 ids each at the same
#      time: all 1.6 million are distinct and carry node id 0.
#   2. worker1 restarts cleanly with its clock set 20 s back: the last
#      millisecond is saved at shutdown, and ids after the restart are all
#      larger than the last id before it (within a tolerance of 1 min); with
#      the default tolerance of 100 ms the step back is an error instead.
#   3. worker1 crashes (a backend killed with SIGKILL, so shared memory is
#      rebuilt without the shutdown save): ids continue above the last one,
#      from the reservation kept on disk while ids were issued.
#
# Run by scripts/test after the pg_regress suite; uses COORDINATOR_PORT,
# WORKER_1_PORT, PG_CONFIG, SHARDEXT_CLUSTER_DIR, SHARDEXT_PORT.  Loopback
# only, every client bounded by a timeout.  Exits non-zero saying what
# differed.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
cd "$(dirname "$0")/../.."

PSQL="$("$PG_CONFIG" --bindir)/psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d regression"
COORD="timeout 120 $PSQL -p $COORDINATOR_PORT"
W1="timeout 120 $PSQL -p $WORKER_1_PORT"
STATE_FILE="$SHARDEXT_CLUSTER_DIR/worker1/shardext_snowflake.state"

# the clock settings must not outlive the test, whatever happens
cleanup() {
	scripts/cluster start-node worker1 >/dev/null 2>&1
	$W1 -c "ALTER SYSTEM RESET shardext.snowflake_clock_offset" \
		-c "ALTER SYSTEM RESET shardext.snowflake_max_clock_skew" \
		-c "SELECT pg_reload_conf()" >/dev/null ||
		echo "WARNING: could not reset the snowflake settings of worker1" >&2
	$COORD -c "DROP TABLE IF EXISTS sf_concurrency" >/dev/null 2>&1
}
trap 'sessions_end; cleanup' EXIT

reserved_ms() {
	sed -n 's/^reserved_until_ms \([0-9]*\)$/\1/p' "$STATE_FILE"
}

echo "--- 1. uniqueness across 8 concurrent sessions"
$COORD -c "SET client_min_messages TO warning" -c "DROP TABLE IF EXISTS sf_concurrency" \
	-c "CREATE UNLOGGED TABLE sf_concurrency (session int, id bigint)" || fail "cannot create table"
pids=()
for s in 1 2 3 4 5 6 7 8; do
	$COORD -c "INSERT INTO sf_concurrency SELECT $s, snowflake_id() FROM generate_series(1, 200000)" &
	pids+=($!)
done
for p in "${pids[@]}"; do
	wait "$p" || fail "a generating session failed"
done
read -r total distinct nodes overlaps < <($COORD -F ' ' -c "
	SELECT count(*), count(DISTINCT id),
		   string_agg(DISTINCT ((snowflake_parse(id)).node_id)::text, ','),
		   (SELECT count(*) FROM
			  (SELECT session, min(id) lo, max(id) hi FROM sf_concurrency GROUP BY session) a
			  JOIN (SELECT session, min(id) lo, max(id) hi FROM sf_concurrency GROUP BY session) b
			  ON a.session < b.session AND a.lo < b.hi AND b.lo < a.hi)
	FROM sf_concurrency")
echo "ids: $total, distinct: $distinct, node ids: $nodes, overlapping session pairs: $overlaps"
[ "$total" = 1600000 ] || fail "expected 1600000 ids, got $total"
[ "$distinct" = "$total" ] || fail "$((total - distinct)) duplicate ids among $total"
[ "$nodes" = 0 ] || fail "coordinator ids carry node ids $nodes, expected 0"

echo "--- 2. clean restart of worker1 with the clock 20 s behind"
last=$($W1 -c "SELECT max(snowflake_id()) FROM generate_series(1, 10000)") || fail "no ids on worker1"
$W1 -c "ALTER SYSTEM SET shardext.snowflake_clock_offset = '-20s'" \
	-c "ALTER SYSTEM SET shardext.snowflake_max_clock_skew = '1min'" >/dev/null ||
	fail "cannot set the clock offset"
scripts/cluster stop-node worker1 || fail "cannot stop worker1"
saved=$(reserved_ms)
echo "last id before restart: $last (ms $((last >> 22))), saved at shutdown: ms $saved"
[ "$saved" = $((last >> 22)) ] ||
	fail "shutdown saved ms '$saved', expected the last id's ms $((last >> 22))"
scripts/cluster start-node worker1 || fail "cannot start worker1"
[ "$($W1 -c "SHOW shardext.snowflake_clock_offset")" = "-20000" ] || fail "clock offset not in effect"
first=$($W1 -c "SELECT min(snowflake_id()) FROM generate_series(1, 10000)") ||
	fail "no ids on worker1 after the restart"
echo "first id after restart: $first"
((first > last)) || fail "id $first after the restart is not above the last id $last before it"
out=$($W1 -c "SET shardext.snowflake_max_clock_skew = '100ms'" -c "SELECT snowflake_id()" 2>&1) &&
	fail "the clock 20 s behind was accepted with a tolerance of 100 ms: $out"
echo "with 100 ms tolerance: $out"
[[ "$out" == *"system clock is behind the last snowflake id"* ]] ||
	fail "unexpected error with 100 ms tolerance: $out"

echo "--- 3. crash restart of worker1"
last=$($W1 -c "SELECT max(snowflake_id()) FROM generate_series(1, 10000)") || fail "no ids on worker1"
reserved=$(reserved_ms)
echo "last id before the crash: $last (ms $((last >> 22))), reserved on disk: ms $reserved"
((reserved >= last >> 22)) || fail "reservation on disk (ms $reserved) is below issued ms $((last >> 22))"
# two idle sessions: one's backend is killed, the other ends with the reset
session_start victim "$WORKER_1_PORT"
session_start witness "$WORKER_1_PORT"
session_run victim "SELECT 1 \\g /dev/null"
session_run witness "SELECT 1 \\g /dev/null"
victim=$(session_backend victim "$WORKER_1_PORT")
[ -n "$victim" ] || fail "could not find the backend to kill"
kill -KILL "$victim" || fail "cannot kill backend $victim"
session_end victim >/dev/null 2>&1
session_end witness >/dev/null 2>&1
wait_node "$WORKER_1_PORT"
first=$($W1 -c "SELECT min(snowflake_id()) FROM generate_series(1, 10000)") ||
	fail "no ids on worker1 after the crash"
echo "first id after the crash: $first"
((first > last)) || fail "id $first after the crash is not above the last id $last before it"

echo "snowflake ids stayed unique across sessions, a clean restart and a crash"
