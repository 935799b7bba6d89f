-- test/isolation/teardown.sql: undoes setup.sql after the isolation specs
SET client_min_messages = warning;

-- settings that specs change and reset in their teardown (an aborted spec
-- skips its teardown)
ALTER SYSTEM RESET shardext.distributed_deadlock_timeout;
SELECT pg_reload_conf() \g /dev/null
DO $$
BEGIN
	IF to_regprocedure('pg_catalog.pg_isolation_test_session_is_blocked_builtin(integer, integer[])') IS NOT NULL THEN
		DROP FUNCTION IF EXISTS pg_catalog.pg_isolation_test_session_is_blocked(integer, integer[]);
		ALTER FUNCTION pg_catalog.pg_isolation_test_session_is_blocked_builtin(integer, integer[])
			RENAME TO pg_isolation_test_session_is_blocked;
	END IF;
END $$;
SELECT node_query('ALTER SYSTEM RESET deadlock_timeout'), node_query('SELECT pg_reload_conf()') \g /dev/null
DROP FUNCTION IF EXISTS shardext_test_hold(text), shardext_test_release(text),
	shardext_test_waiting(text), node_query(text);
