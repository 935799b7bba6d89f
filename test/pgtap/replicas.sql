-- Contracts of the read replica functions and settings: signatures, and an
-- error with the right SQLSTATE for every bad input, with nothing recorded.
-- (test/multinode/replicas.sh runs against real streaming standbys.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(42);

SELECT node_host AS w1_host, node_port AS w1_port, node_id AS w1_id
FROM shardext.nodes WHERE role = 'primary' ORDER BY node_id LIMIT 1 \gset
SELECT node_host AS w2_host, node_port AS w2_port
FROM shardext.nodes WHERE role = 'primary' ORDER BY node_id OFFSET 1 LIMIT 1 \gset
SELECT current_setting('port') AS coord_port \gset
SELECT count(*) AS nodes_before FROM shardext.node \gset

SELECT has_function('pg_catalog', 'shardext_add_replica', ARRAY['text', 'integer', 'text', 'integer']);
SELECT has_function('pg_catalog', 'shardext_remove_replica', ARRAY['text', 'integer']);
SELECT has_function('pg_catalog', 'shardext_promote_replica', ARRAY['text', 'integer', 'integer']);
SELECT has_function('pg_catalog', 'shardext_update_node', ARRAY['integer', 'text', 'integer']);
SELECT has_function('pg_catalog', 'shardext_causal_token', ARRAY[]::text[]);
SELECT has_view('shardext', 'stat_replicas', 'view shardext.stat_replicas');
SELECT has_column('shardext', 'nodes', 'role', 'shardext.nodes shows the role');
SELECT has_column('shardext', 'nodes', 'primary_node_id', 'shardext.nodes shows a replica''s primary');
SELECT has_column('shardext', 'nodes', 'replay_lag', 'shardext.nodes shows the replay lag');
SELECT is((SELECT count(*)::int FROM shardext.nodes WHERE role = 'primary'), :nodes_before,
		  'without replicas every node is a primary');

-- bad input: a clear error, nothing recorded
SELECT throws_ok(format('SELECT shardext_add_replica(%L, %s, %L, %s)',
						'127.0.0.1', :coord_port, :'w1_host', :w1_port),
				 '55000', NULL, 'a server that is not a standby is refused');
SELECT throws_ok(format('SELECT shardext_add_replica(%L, 1, %L, %s)', '127.0.0.1', :'w1_host', :w1_port),
				 '08001', NULL, 'an unreachable server is refused');
SELECT throws_ok(format('SELECT shardext_add_replica(%L, %s, %L, 1)', '127.0.0.1', :coord_port, '127.0.0.1'),
				 '42704', NULL, 'an unregistered primary is refused');
SELECT throws_ok(format('SELECT shardext_add_replica(%L, %s, %L, %s)',
						:'w2_host', :w2_port, :'w1_host', :w1_port),
				 '42710', NULL, 'a worker node cannot become a replica');
SELECT throws_ok(format('SELECT shardext_add_replica(%L, 0, %L, %s)', '127.0.0.1', :'w1_host', :w1_port),
				 '22023', NULL, 'a port out of range is refused');
SELECT throws_ok(format('SELECT shardext_remove_replica(%L, %s)', :'w1_host', :w1_port),
				 '42809', NULL, 'a worker node is not removed as a replica');
SELECT throws_ok($$SELECT shardext_remove_replica('127.0.0.1', 1)$$,
				 '42704', NULL, 'removing an unknown replica fails');
SELECT throws_ok(format('SELECT shardext_promote_replica(%L, %s)', :'w1_host', :w1_port),
				 '42809', NULL, 'promoting a primary is refused');
SELECT throws_ok($$SELECT shardext_promote_replica('127.0.0.1', 1)$$,
				 '42704', NULL, 'promoting an unknown node fails');
SELECT throws_ok(format('SELECT shardext_promote_replica(%L, %s, 0)', :'w1_host', :w1_port),
				 '22023', NULL, 'wait_seconds must be positive');
SELECT throws_ok($$SELECT shardext_update_node(9999, '127.0.0.1', 1)$$,
				 '42704', NULL, 'updating an unknown node fails');
SELECT throws_ok(format('SELECT shardext_update_node(%s, %L, %s)', :w1_id, '127.0.0.1', :coord_port),
				 '22023', NULL, 'a node cannot be pointed at a server without its data');
SELECT throws_ok(format('SELECT shardext_update_node(%s, %L, %s)', :w1_id, :'w2_host', :w2_port),
				 '42710', NULL, 'a node cannot be pointed at another node');
SELECT throws_ok(format('SELECT shardext_update_node(%s, %L, 1)', :w1_id, '127.0.0.1'),
				 '08001', NULL, 'a node cannot be pointed at an unreachable server');
SELECT throws_ok(format('SELECT shardext_update_node(%s, %L, 70000)', :w1_id, '127.0.0.1'),
				 '22023', NULL, 'update_node checks the port');
SELECT is((SELECT count(*)::int FROM shardext.node), :nodes_before, 'nothing was recorded');
SELECT is((SELECT node_port FROM shardext.nodes WHERE node_id = :w1_id), :w1_port,
		  'the node kept its address');

-- causal tokens
SELECT shardext_causal_token() AS token \gset
SELECT ok(:'token' ~ ('^v1\.' || (SELECT system_identifier FROM pg_control_system()) || '\.' ||
					  (SELECT oid FROM pg_database WHERE datname = current_database()) ||
					  '\.[^.]+\.[0-9a-f]{32}$'),
		  'a token names this coordinator database and is signed');
SELECT lives_ok(format('SET shardext.read_after = %L', :'token'), 'a token of this coordinator is accepted');
SELECT is(current_setting('shardext.read_after'), :'token', 'the token is the setting');
SELECT lives_ok($$RESET shardext.read_after$$, 'the token can be cleared');
SELECT throws_ok($$SET shardext.read_after = 'nonsense'$$, '22023', NULL, 'a malformed token is refused');
SELECT throws_ok(format('SET shardext.read_after = %L', regexp_replace(:'token', '^v1\.[0-9]+', 'v1.42')),
				 '22023', NULL, 'a token of another cluster is refused');
SELECT throws_ok(format('SET shardext.read_after = %L',
						regexp_replace(:'token', '\.[^.]+\.([0-9a-f]{32})$', '.1:FFFFFFFF.\1')),
				 '22023', NULL, 'a token with changed positions is refused');
SELECT throws_ok(format('SET shardext.read_after = %L',
						left(:'token', -1) || CASE WHEN right(:'token', 1) = '0' THEN '1' ELSE '0' END),
				 '22023', NULL, 'a token with a changed signature is refused');
SELECT throws_ok(format('SET shardext.read_after = %L', 'v1.1.2.3:abc.' || repeat('0', 32)),
				 '22023', NULL, 'a forged token is refused');
SELECT is(current_setting('shardext.read_after'), '', 'refused tokens leave the setting alone');

-- settings
SELECT throws_ok($$SET shardext.read_your_writes = 'sometimes'$$, '22023', NULL,
				 'read_your_writes takes lsn, time or off');
SELECT throws_ok($$SET shardext.max_replica_lag = -1$$, '22023', NULL,
				 'max_replica_lag cannot be negative');
SELECT lives_ok($$SET LOCAL shardext.replica_reads = on$$, 'replica_reads is a user setting');

-- administration is for superusers
CREATE ROLE tap_replica_user;
SET LOCAL ROLE tap_replica_user;
SELECT throws_ok(format('SELECT shardext_add_replica(%L, %s, %L, %s)',
						'127.0.0.1', :coord_port, :'w1_host', :w1_port),
				 '42501', NULL, 'only superusers add replicas');
SELECT ok(shardext_causal_token() IS NOT NULL, 'every user can take a causal token');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
