-- Contracts of the shard move, split, rebalance and cleanup functions:
-- signatures, privileges, and an error with the right SQLSTATE for every
-- bad input (these run in the test's transaction block, where a valid move
-- is refused: a move commits on its own).
BEGIN;
SELECT plan(41);

SELECT has_function('pg_catalog', 'shardext_move_shard', ARRAY['bigint', 'integer', 'text']);
SELECT has_function('pg_catalog', 'shardext_split_shard', ARRAY['bigint', 'integer']);
SELECT has_function('pg_catalog', 'shardext_rebalance_plan', ARRAY['text']);
SELECT has_function('pg_catalog', 'shardext_rebalance', ARRAY['text', 'text']);
SELECT has_function('pg_catalog', 'shardext_drain_node', ARRAY['text', 'integer', 'text']);
SELECT has_function('pg_catalog', 'shardext_cleanup', ARRAY[]::text[]);
SELECT has_function('pg_catalog', 'shardext_cancel_rebalance', ARRAY[]::text[]);
SELECT has_view('shardext', 'rebalance_progress', 'the progress view exists');
SELECT columns_are('shardext', 'rebalance_progress',
	ARRAY['job_id', 'move_id', 'operation', 'shard_id', 'table_name', 'colocated_shards',
		  'source_node_id', 'source_host', 'source_port', 'target_node_id', 'target_host',
		  'target_port', 'mode', 'status', 'phase', 'rows_copied', 'bytes_copied',
		  'total_bytes', 'replication_lag_bytes', 'started_at', 'phase_started_at', 'pid']);
SELECT is((SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		   WHERE p.proname IN ('shardext_move_shard', 'shardext_split_shard', 'shardext_rebalance',
							   'shardext_drain_node', 'shardext_cleanup', 'shardext_rebalance_plan',
							   'shardext_cancel_rebalance')
			 AND obj_description(p.oid, 'pg_proc') IS NOT NULL), 7::bigint,
		  'every operation has a comment');
SELECT ok(NOT has_function_privilege('public', 'shardext_move_shard(bigint, int, text)', 'EXECUTE'),
		  'PUBLIC cannot move shards');
SELECT ok(NOT has_function_privilege('public', 'shardext_cleanup()', 'EXECUTE'),
		  'PUBLIC cannot run cleanup');

-- a table of our own, with one shard on each worker
SET LOCAL client_min_messages TO warning;
CREATE TABLE tap_moves (id bigint PRIMARY KEY, v text);
SELECT create_distributed_table('tap_moves', 'id', shard_count => 2);
CREATE TABLE tap_reference (id int PRIMARY KEY);
SELECT create_reference_table('tap_reference');
RESET client_min_messages;
SELECT shard_id AS tap_shard, node_id AS tap_node FROM shardext.shards
WHERE logicalrelid = 'tap_moves'::regclass ORDER BY hash_min LIMIT 1 \gset
SELECT node_id AS other_node FROM shardext.nodes WHERE node_id <> :tap_node ORDER BY node_id LIMIT 1 \gset
SELECT shard_id AS reference_shard FROM shardext.shards
WHERE logicalrelid = 'tap_reference'::regclass LIMIT 1 \gset

SELECT throws_ok('SELECT shardext_move_shard(-1, ' || :other_node || ')', '42704',
				 'shard -1 does not exist', 'unknown shard');
SELECT throws_ok('SELECT shardext_move_shard(' || :tap_shard || ', 9999)', '42704',
				 'node with id 9999 does not exist', 'unknown node');
SELECT throws_ok('SELECT shardext_move_shard(' || :tap_shard || ', 0)', '42704', NULL, 'node 0');
SELECT throws_ok('SELECT shardext_move_shard(' || :tap_shard || ', ' || :tap_node || ')', '22023',
				 NULL, 'the node the shard is on');
SELECT throws_ok('SELECT shardext_move_shard(' || :tap_shard || ', ' || :other_node || ', ''fast'')',
				 '22023', 'invalid shard move mode "fast"', 'unknown mode');
SELECT throws_ok('SELECT shardext_move_shard(NULL, 1)', '22004', NULL, 'NULL shard');
SELECT throws_ok('SELECT shardext_move_shard(1, NULL)', '22004', NULL, 'NULL node');
SELECT throws_ok('SELECT shardext_move_shard(1, 1, NULL)', '22004', NULL, 'NULL mode');
SELECT throws_ok('SELECT shardext_move_shard(' || :reference_shard || ', ' || :other_node || ')',
				 '0A000', NULL, 'reference table shard');
SELECT throws_ok('SELECT shardext_move_shard(' || :tap_shard || ', ' || :other_node || ')',
				 '25001', 'shardext_move_shard() cannot run inside a transaction block',
				 'a valid move inside a transaction block');
SELECT throws_ok('SELECT shardext_move_shard(' || :tap_shard || ', ' || :other_node
				 || ', ''block_writes'')', '25001', NULL, 'block_writes inside a transaction block');
SELECT throws_ok('SELECT shardext_split_shard(NULL)', '22004', NULL, 'split: NULL shard');
SELECT throws_ok('SELECT shardext_split_shard(-1)', '42704', NULL, 'split: unknown shard');
SELECT throws_ok('SELECT shardext_split_shard(' || :tap_shard || ', 9999)', '42704', NULL,
				 'split: unknown node');
SELECT throws_ok('SELECT shardext_split_shard(' || :reference_shard || ')', '0A000', NULL,
				 'split: reference table shard');
SELECT throws_ok('SELECT shardext_split_shard(' || :tap_shard || ')', '25001', NULL,
				 'split inside a transaction block');
SELECT throws_ok($$SELECT shardext_rebalance('by_mood')$$, '22023',
				 'invalid rebalance strategy "by_mood"', 'rebalance: unknown strategy');
SELECT throws_ok($$SELECT shardext_rebalance('by_shard_count', 'quick')$$, '22023', NULL,
				 'rebalance: unknown mode');
SELECT throws_ok($$SELECT * FROM shardext_rebalance_plan('by_mood')$$, '22023', NULL,
				 'plan: unknown strategy');
SELECT throws_ok('SELECT shardext_rebalance()', '25001', NULL, 'rebalance inside a transaction block');
SELECT throws_ok($$SELECT shardext_drain_node('127.0.0.1', 1)$$, '42704',
				 'node 127.0.0.1:1 is not registered', 'drain: unknown node');
SELECT throws_ok($$SELECT shardext_drain_node(node_host, node_port, 'nope') FROM shardext.nodes LIMIT 1$$,
				 '22023', NULL, 'drain: unknown mode');

-- the helpers the nodes run
SELECT is(shardext.worker_hash_value(42::bigint), hashint8(42), 'bigint values hash like hashint8');
SELECT is(shardext.worker_hash_value('shard'::text), hashtext('shard'), 'text values hash like hashtext');
SELECT is((SELECT shardext_shard_for_value('tap_moves', '7')),
		  (SELECT shard_id FROM shardext.shards WHERE logicalrelid = 'tap_moves'::regclass
		   AND shardext.worker_hash_value(7::bigint) BETWEEN hash_min AND hash_max),
		  'the node hash places values like the coordinator');
SELECT ok(shardext.worker_free_disk_bytes() > 0, 'free disk space is known');
SELECT ok(shardext.backend_is_alive(pg_backend_pid(),
		  (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid())),
		  'this backend is alive');
SELECT ok(NOT shardext.backend_is_alive(pg_backend_pid(), '2000-01-01'), 'a backend that started elsewhen is not');
SELECT ok(NOT shardext.backend_is_alive(-1, now()), 'no such process');

SELECT * FROM finish();
ROLLBACK;
