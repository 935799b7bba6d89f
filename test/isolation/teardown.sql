-- test/isolation/teardown.sql: undoes setup.sql after the isolation specs
SET client_min_messages = warning;
DO $$
BEGIN
	IF to_regprocedure('pg_catalog.pg_isolation_test_session_is_blocked_builtin(integer, integer[])') IS NOT NULL THEN
		DROP FUNCTION IF EXISTS pg_catalog.pg_isolation_test_session_is_blocked(integer, integer[]);
		ALTER FUNCTION pg_catalog.pg_isolation_test_session_is_blocked_builtin(integer, integer[])
			RENAME TO pg_isolation_test_session_is_blocked;
	END IF;
END $$;
DROP FUNCTION IF EXISTS shardext_test_hold(text), shardext_test_release(text),
	shardext_test_waiting(text), node_query(text);
