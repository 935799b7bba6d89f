-- pgTAP: the shared connection pool's view and the connection settings
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(18);

SELECT has_view('shardext', 'connection_stats', 'view shardext.connection_stats');
SELECT columns_are('shardext', 'connection_stats',
				   ARRAY['node_id', 'node_host', 'node_port', 'connections', 'waiting',
						 'max_connections', 'waits', 'wait_timeouts', 'session_connections']);
SELECT col_type_is('shardext', 'connection_stats', 'waits', 'bigint', 'waits is bigint');
SELECT ok(has_table_privilege('public', 'shardext.connection_stats', 'SELECT'),
		  'everybody may read the connection counts');
SELECT ok(obj_description('shardext.connection_stats_counters()'::regprocedure, 'pg_proc') IS NOT NULL,
		  'the counters function has a comment');

-- a statement on the nodes leaves this session one connection per node
SELECT lives_ok($$SELECT count(*) FROM shardext_run_on_nodes('SELECT 1')$$, 'run_on_nodes runs');
SELECT is((SELECT count(*)::int FROM shardext.connection_stats c JOIN shardext.nodes n
		   ON n.node_port = c.node_port WHERE c.max_connections > 0),
		  (SELECT count(*)::int FROM shardext.nodes), 'every node has a limit');
SELECT is((SELECT coalesce(sum(session_connections), 0)::int FROM shardext.connection_stats),
		  0, 'run_on_nodes closed its connections');

-- bad settings are refused
SELECT throws_ok($$SET shardext.max_connections_per_node = 0$$, '22023', NULL,
				 'max_connections_per_node must be positive');
SELECT throws_ok($$SET shardext.max_connections_per_node = 65$$, '22023', NULL,
				 'max_connections_per_node has an upper bound');
SELECT throws_ok($$SET shardext.max_cached_connections_per_node = -1$$, '22023', NULL,
				 'max_cached_connections_per_node must not be negative');
SELECT throws_ok($$SET shardext.connection_wait_timeout = -1$$, '22023', NULL,
				 'connection_wait_timeout must not be negative');
SELECT throws_ok($$SET shardext.executor_slow_start_interval = -1$$, '22023', NULL,
				 'executor_slow_start_interval must not be negative');
SELECT throws_ok($$SET shardext.max_shared_pool_size = 10$$, '55P02', NULL,
				 'max_shared_pool_size is set in the server configuration');
SELECT throws_ok($$SET shardext.node_conninfo = 'sslmode=require'$$, '55P02', NULL,
				 'node_conninfo is set in the server configuration');

-- ordinary users may not change what bounds everybody's connections
CREATE ROLE pgtap_pool_user;
SET LOCAL ROLE pgtap_pool_user;
SELECT throws_ok($$SET shardext.max_connections_per_node = 8$$, '42501', NULL,
				 'only superusers change max_connections_per_node');
SELECT throws_ok($$SET shardext.max_cached_connections_per_node = 8$$, '42501', NULL,
				 'only superusers change max_cached_connections_per_node');
SELECT lives_ok($$SET shardext.connection_wait_timeout = '5s'$$,
				'anybody may wait less for a connection');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
