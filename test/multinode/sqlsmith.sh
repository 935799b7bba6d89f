#!/usr/bin/env bash
# A crash-free pass of sqlsmith (Debian's package; skipped when it is not
# installed) against the distributed, reference and local tables sqlfuzz.py
# creates: random queries through the coordinator, as a role that may only
# read those tables (and with a statement timeout), must not crash or
# restart any server, nor fail with an internal error (SQLSTATE class XX,
# found in the coordinator's log, where the role's errors carry their
# SQLSTATE) that the same statement on local tables does not also meet
# (test/fuzz/internal_errors.py).  SQLSMITH_QUERIES sets the number of
# queries.
source "$(dirname "$0")/lib/common.sh"
if ! command -v sqlsmith >/dev/null; then
	echo "ok - sqlsmith is not installed: skipped"
	exit 0
fi
queries=${SQLSMITH_QUERIES:-1500}
seed=${SQLSMITH_SEED:-$RANDOM}
cleanup() {
	coord "DROP SCHEMA IF EXISTS fzd CASCADE; DROP SCHEMA IF EXISTS fzl CASCADE" >/dev/null 2>&1
	for port in $COORDINATOR_PORT $WORKER_1_PORT $WORKER_2_PORT; do
		psql_at "$port" -c "DROP OWNED BY sqlsmith_reader" -c "DROP ROLE IF EXISTS sqlsmith_reader" \
			>/dev/null 2>&1
	done
}
trap cleanup EXIT

start_times() {
	for port in $COORDINATOR_PORT $WORKER_1_PORT $WORKER_2_PORT; do
		psql_at "$port" -c "SELECT pg_postmaster_start_time()" || echo "down:$port"
	done
}
before=$(start_times)

python3 "$ROOT/test/fuzz/sqlfuzz.py" --port "$COORDINATOR_PORT" --dbname "$DB" --seed "$seed" \
	--queries 0 --keep >/dev/null || fail "could not create the sqlfuzz tables"
# roles are not propagated: the reader exists on every node (remote work runs as it)
for port in $WORKER_1_PORT $WORKER_2_PORT $COORDINATOR_PORT; do
	psql_at "$port" -c "DROP ROLE IF EXISTS sqlsmith_reader" -c "CREATE ROLE sqlsmith_reader LOGIN" \
		-c "GRANT USAGE ON SCHEMA fzd, fzl TO sqlsmith_reader" >/dev/null 2>&1 ||
		psql_at "$port" -c "CREATE ROLE sqlsmith_reader LOGIN" >/dev/null 2>&1
done
coord "ALTER ROLE sqlsmith_reader SET statement_timeout = '5s'" >/dev/null
# the server log shows the SQLSTATE of the role's errors ("ERROR:  XX000: ...")
coord "ALTER ROLE sqlsmith_reader SET log_error_verbosity = verbose" >/dev/null
log_file="$SHARDEXT_CLUSTER_DIR/coordinator.log"
log_start=$(($(stat -c %s "$log_file" 2>/dev/null || echo 0) + 1))
for table in $(coord "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables WHERE schemaname IN ('fzd', 'fzl')"); do
	coord "GRANT SELECT ON $table TO sqlsmith_reader" >/dev/null
done

echo "sqlsmith seed $seed, $queries queries"
log=$(mktemp)
timeout 600 sqlsmith --target="host=127.0.0.1 port=$COORDINATOR_PORT dbname=$DB user=sqlsmith_reader" \
	--seed="$seed" --max-queries="$queries" --exclude-catalog --verbose >"$log" 2>&1
rc=$?
grep -E "^queries:|^[0-9]+	ERROR:  (XX|.*shardext|.*distributed|.*shard)" "$log" | head -20
after=$(start_times)
if [ "$before" != "$after" ]; then
	tail -40 "$log"
	fail "a server crashed or restarted during sqlsmith (seed $seed): before '$before', after '$after'"
fi
if grep -Eq "connection to server .* (lost|terminated)|server closed the connection" "$log"; then
	tail -40 "$log"
	fail "sqlsmith lost its connection (seed $seed)"
fi
rm -f "$log"
[ "$rc" = 0 ] || [ "$rc" = 124 ] || fail "sqlsmith exited with $rc"
python3 "$ROOT/test/fuzz/internal_errors.py" --log "$log_file" --offset "$log_start" \
	--role sqlsmith_reader --port "$COORDINATOR_PORT" --dbname "$DB" ||
	fail "sqlsmith's queries met internal errors of shardext (seed $seed)"
echo "ok - $queries sqlsmith queries, no server crashed"
