#!/usr/bin/env bash
# SELECT ... FOR UPDATE / SHARE on rows of one shard: the locks are taken on
# the worker inside the coordinator's transaction and held until it ends, so
# other sessions wait for them (or skip them, or fail with NOWAIT); a lock
# taken outside a transaction block ends with its statement.
source "$(dirname "$0")/lib/common.sh"
cleanup() { coord "DROP TABLE IF EXISTS row_locks" >/dev/null 2>&1; }
trap cleanup EXIT
cleanup

coord "CREATE TABLE row_locks (k int PRIMARY KEY, v int);
	   SELECT create_distributed_table('row_locks', 'k', shard_count => 4);
	   INSERT INTO row_locks SELECT g, 0 FROM generate_series(1, 20) g" >/dev/null

# session A holds a lock on k = 1 for a few seconds
psql_at "$COORDINATOR_PORT" -c "BEGIN" \
	-c "SELECT v FROM row_locks WHERE k = 1 FOR UPDATE" \
	-c "SELECT pg_sleep(4)" -c "COMMIT" >/dev/null 2>&1 &
holder=$!
sleep 1

expect_error_like "NOWAIT on the locked row fails at once" "could not obtain lock on row" \
	coord "SELECT v FROM row_locks WHERE k = 1 FOR UPDATE NOWAIT"
expect_eq "SKIP LOCKED skips the locked row" "0" \
	"$(coord "SELECT count(*) FROM (SELECT k FROM row_locks WHERE k = 1 FOR UPDATE SKIP LOCKED) s")"
expect_error_like "a write to the locked row waits for the lock" "statement timeout" \
	psql_at "$COORDINATOR_PORT" -c "SET statement_timeout = '700ms'" \
	-c "UPDATE row_locks SET v = v + 1 WHERE k = 1"
expect_error_like "FOR SHARE of the locked row waits too" "statement timeout" \
	psql_at "$COORDINATOR_PORT" -c "SET statement_timeout = '700ms'" \
	-c "SELECT v FROM row_locks WHERE k = 1 FOR SHARE"
expect_eq "another row is free" "1" \
	"$(psql_at "$COORDINATOR_PORT" -c "SET statement_timeout = '700ms'" \
		-c "UPDATE row_locks SET v = v + 1 WHERE k = 2 RETURNING v")"
wait "$holder"
expect_eq "after the holder commits, the row can be written" "1" \
	"$(coord "UPDATE row_locks SET v = v + 1 WHERE k = 1 RETURNING v")"

# outside a transaction block the lock lasts one statement
coord "SELECT v FROM row_locks WHERE k = 3 FOR UPDATE" >/dev/null
expect_eq "a lock of a single statement is gone after it" "1" \
	"$(psql_at "$COORDINATOR_PORT" -c "SET statement_timeout = '700ms'" \
		-c "UPDATE row_locks SET v = v + 1 WHERE k = 3 RETURNING v")"

# a lock taken in a transaction that then rolls back is released
psql_at "$COORDINATOR_PORT" -c "BEGIN" -c "SELECT v FROM row_locks WHERE k = 4 FOR UPDATE" \
	-c "ROLLBACK" >/dev/null
expect_eq "a rolled-back transaction's lock is released" "1" \
	"$(psql_at "$COORDINATOR_PORT" -c "SET statement_timeout = '700ms'" \
		-c "UPDATE row_locks SET v = v + 1 WHERE k = 4 RETURNING v")"

# a lock taken in a subquery is held by the transaction as well
psql_at "$COORDINATOR_PORT" -c "BEGIN" \
	-c "SELECT v FROM (SELECT v FROM row_locks WHERE k = 5 FOR UPDATE) s" \
	-c "SELECT pg_sleep(3)" -c "COMMIT" >/dev/null 2>&1 &
holder=$!
sleep 1
expect_error_like "a lock taken in a subquery lasts until the transaction ends" \
	"could not obtain lock on row" \
	coord "SELECT v FROM row_locks WHERE k = 5 FOR UPDATE NOWAIT"
wait "$holder"
