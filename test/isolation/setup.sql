-- test/isolation/setup.sql: what the isolation specs need in the test
-- database, run by scripts/test before them (teardown.sql undoes it).  It
-- needs the test build of shardext (make SHARDEXT_TEST_BUILD=1): the C
-- function exists only there, as do the pause points.
SET client_min_messages = warning;

-- settings that specs change and reset in their teardown (an aborted spec
-- skips its teardown)
ALTER SYSTEM RESET shardext.distributed_deadlock_timeout;
SELECT pg_reload_conf() \g /dev/null

-- isolationtester asks pg_catalog.pg_isolation_test_session_is_blocked(pid,
-- pids) whether a step waits.  shardext's version also answers true when
-- the session waits for a lock on a node (or on a session shardext opened
-- to the coordinator) held by another session of the test, or by a prepared
-- transaction; otherwise it answers as PostgreSQL's (which it calls).  The
-- built-in function is renamed (fmgr calls built-ins by oid, whatever
-- pg_proc says) and shardext's takes its name.
DO $$
BEGIN
	IF to_regprocedure('pg_catalog.pg_isolation_test_session_is_blocked_builtin(integer, integer[])') IS NULL THEN
		ALTER FUNCTION pg_catalog.pg_isolation_test_session_is_blocked(integer, integer[])
			RENAME TO pg_isolation_test_session_is_blocked_builtin;
	END IF;
END $$;
CREATE OR REPLACE FUNCTION pg_catalog.pg_isolation_test_session_is_blocked(integer, integer[])
	RETURNS boolean LANGUAGE c STRICT PARALLEL SAFE
	AS '$libdir/shardext', 'shardext_test_session_is_blocked';

-- pause points (src/include/shardext/test_pause.h): a session with
-- SET shardext.test_pause_points = 'NAME' waits at the point NAME while
-- another session holds it
CREATE OR REPLACE FUNCTION shardext_test_hold(point text) RETURNS void
	LANGUAGE sql AS $$ SELECT pg_advisory_lock(1398297680, hashtext(point COLLATE "C")) $$;
CREATE OR REPLACE FUNCTION shardext_test_release(point text) RETURNS boolean
	LANGUAGE sql AS $$ SELECT pg_advisory_unlock(1398297680, hashtext(point COLLATE "C")) $$;
-- how many sessions wait at the point
CREATE OR REPLACE FUNCTION shardext_test_waiting(point text) RETURNS bigint
	LANGUAGE sql AS $$
	SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
	   AND classid = 1398297680 AND objid = hashtext(point COLLATE "C")::oid AND objsubid = 2 $$;

-- node_query(sql): the first value of sql's result on each worker, in
-- node order, separated by '|' (ports vary between runs, so they are left out)
CREATE OR REPLACE FUNCTION node_query(command text) RETURNS text
	LANGUAGE sql AS $$
	SELECT string_agg(CASE WHEN success THEN coalesce(result, 'NULL') ELSE 'error: ' || result END,
					  '|' ORDER BY node_id)
	FROM shardext_run_on_nodes(command) $$;

-- on the workers too
SELECT node_query('ALTER SYSTEM RESET deadlock_timeout'), node_query('SELECT pg_reload_conf()') \g /dev/null
