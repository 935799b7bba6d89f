-- Contracts of self-healing (issue 24): automatic failover settings, fencing
-- (identities in the catalog, the reported setting), node health, restore
-- points -- signatures, defaults, and an error with the right SQLSTATE for
-- every bad input, with nothing changed.  (test/multinode/failover_*.sh,
-- coordinator_failover.sh and restore_point.sh run against real servers.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(27);

SELECT has_function('pg_catalog', 'shardext_create_restore_point', ARRAY['text']);
SELECT has_function('shardext', 'node_health', ARRAY[]::text[]);
SELECT is((SELECT count(*)::int FROM pg_proc p
		   WHERE p.oid IN ('pg_catalog.shardext_create_restore_point(text)'::regprocedure,
						   'shardext.node_health()'::regprocedure)
			 AND obj_description(p.oid, 'pg_proc') IS NOT NULL), 2,
		  'every function of the feature has a comment');
SELECT ok(NOT has_function_privilege('public', 'pg_catalog.shardext_create_restore_point(text)', 'EXECUTE'),
		  'restore points are not for everybody');
SELECT ok(has_function_privilege('shardext_admin', 'pg_catalog.shardext_create_restore_point(text)', 'EXECUTE'),
		  'members of shardext_admin create restore points');

-- settings and their defaults
SELECT is(current_setting('shardext.auto_failover'), 'off', 'automatic failover is opt-in');
SELECT is(current_setting('shardext.health_check_interval'), '1s', 'probes every second');
SELECT is(current_setting('shardext.failover_timeout'), '10s', 'fails over after 10 s');
SELECT is(current_setting('shardext.failover_max_lag'), '0', 'only synchronous replicas by default');
SELECT is(current_setting('shardext.restore_point_interval'), '0', 'no periodic restore points by default');
SELECT throws_ok('SET shardext.auto_failover = on', '55P02', NULL,
				 'automatic failover is set in the server''s configuration');
SELECT throws_ok('SET shardext.server_identity = ''1/1''', '55P02', NULL,
				 'a server''s identity cannot be set');
SELECT matches(current_setting('shardext.server_identity'),
			   '^' || (SELECT system_identifier FROM pg_control_system()) || '/[0-9]+$',
			   'a server reports its system identifier and timeline');

-- fencing: the catalog records each primary's identity, shardext.nodes the health
SELECT columns_are('shardext', 'node', ARRAY['nodeid', 'host', 'port', 'weight', 'active',
											 'primary_nodeid', 'system_identifier', 'timeline',
											 'needs_rebuild']);
SELECT is((SELECT count(*)::int FROM shardext.node
		   WHERE primary_nodeid IS NULL AND (system_identifier IS NULL OR timeline IS NULL)), 0,
		  'every primary''s identity is recorded');
SELECT is((SELECT count(*)::int FROM shardext.node WHERE needs_rebuild), 0,
		  'no node needs a rebuild');
SELECT has_column('shardext', 'nodes', 'health', 'shardext.nodes shows the health');
SELECT has_column('shardext', 'nodes', 'health_since', 'and since when');
SELECT has_column('shardext', 'nodes', 'health_detail', 'and what the probes found');
SELECT has_column('shardext', 'nodes', 'needs_rebuild', 'and old primaries that need a rebuild');
SELECT is((SELECT count(*)::int FROM shardext_check_cluster()
		   WHERE check_name = 'fencing' AND status = 'ok'),
		  (SELECT count(*)::int FROM shardext.node WHERE primary_nodeid IS NULL),
		  'shardext_check_cluster() finds every primary''s server the recorded one');

-- restore points: bad input
SELECT throws_ok('SELECT * FROM shardext_create_restore_point('''')', '22023', NULL,
				 'a restore point needs a name');
SELECT throws_ok(format('SELECT * FROM shardext_create_restore_point(%L)', repeat('x', 64)),
				 '22023', NULL, 'a name of 64 bytes is too long');
SELECT is((SELECT count(*)::int FROM shardext_create_restore_point(NULL)), 0,
		  'a NULL name creates nothing (the function is strict)');
CREATE ROLE shardext_tap_nobody;
SET LOCAL ROLE shardext_tap_nobody;
SELECT throws_ok('SELECT * FROM shardext_create_restore_point(''tap'')', '42501', NULL,
				 'a role that is no administrator cannot create restore points');
SELECT throws_ok('SELECT shardext_update_node(1, ''127.0.0.1'', 1)', '42501', NULL,
				 'nor repoint nodes');
RESET ROLE;
SELECT is((SELECT count(*)::int FROM shardext_create_restore_point('tap point')),
		  (SELECT count(*)::int + 1 FROM shardext.node WHERE primary_nodeid IS NULL),
		  'an administrator creates one restore point per node, the coordinator included');

SELECT * FROM finish();
ROLLBACK;
