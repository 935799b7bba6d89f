-- Contracts of the hot tenant functions: tenant statistics, tenant
-- isolation, the by_load rebalance plan and the hot shard report:
-- signatures, privileges, settings, and an error with the right SQLSTATE
-- for every bad input.
BEGIN;
SELECT plan(33);

SELECT has_function('pg_catalog', 'shardext_isolate_tenant',
					ARRAY['regclass', 'text', 'integer', 'text']);
SELECT function_returns('pg_catalog', 'shardext_isolate_tenant',
						ARRAY['regclass', 'text', 'integer', 'text'], 'bigint');
SELECT has_function('pg_catalog', 'shardext_stat_tenants_reset', ARRAY[]::text[]);
SELECT has_function('pg_catalog', 'shardext_hot_shard_report', ARRAY['integer']);
SELECT has_function('pg_catalog', 'shardext_rebalance_plan', ARRAY['text']);
SELECT has_view('shardext', 'stat_tenants', 'the tenant statistics view exists');
SELECT columns_are('shardext', 'stat_tenants',
	ARRAY['colocation_id', 'table_name', 'tenant_value', 'hash_value', 'shard_id', 'node_id',
		  'node_host', 'node_port', 'read_count', 'write_count', 'statements', 'count_error',
		  'share_percent', 'elapsed_ms', 'prev_read_count', 'prev_write_count',
		  'prev_statements', 'prev_count_error', 'prev_share_percent', 'prev_elapsed_ms',
		  'period_start']);
SELECT has_column('shardext', 'move', 'split_points', 'moves record where splits cut');
SELECT is((SELECT array_agg(p.parameter_name::text ORDER BY p.ordinal_position)
		   FROM information_schema.parameters p
		   JOIN information_schema.routines r USING (specific_schema, specific_name)
		   WHERE r.routine_name = 'shardext_rebalance_plan' AND p.parameter_mode = 'OUT'),
		  ARRAY['shard_id', 'source_node_id', 'source_node_port', 'target_node_id',
				'target_node_port', 'table_name', 'colocated_shards', 'shard_group_bytes',
				'shard_group_load', 'source_load_before', 'source_load_after',
				'target_load_before', 'target_load_after'],
		  'the plan shows the load before and after each move');
SELECT is((SELECT count(*) FROM pg_proc p
		   WHERE p.proname IN ('shardext_isolate_tenant', 'shardext_stat_tenants_reset',
							   'shardext_hot_shard_report', 'stat_tenants_counters')
			 AND obj_description(p.oid, 'pg_proc') IS NOT NULL), 4::bigint,
		  'every function has a comment');
SELECT ok(NOT has_function_privilege('public',
		  'shardext_isolate_tenant(regclass, text, int, text)', 'EXECUTE'),
		  'PUBLIC cannot isolate tenants');
SELECT ok(NOT has_function_privilege('public', 'shardext_stat_tenants_reset()', 'EXECUTE'),
		  'PUBLIC cannot reset tenant statistics');
SELECT ok(has_table_privilege('public', 'shardext.stat_tenants', 'SELECT'),
		  'PUBLIC can read tenant statistics');

-- the settings
SELECT is((SELECT context FROM pg_settings WHERE name = 'shardext.stat_tenants_limit'),
		  'postmaster', 'the limit sizes shared memory');
SELECT is((SELECT context FROM pg_settings WHERE name = 'shardext.stat_tenants_period'),
		  'sighup', 'one period for every session');
SELECT is((SELECT unit FROM pg_settings WHERE name = 'shardext.stat_tenants_period'),
		  's', 'the period is in seconds');
SELECT is((SELECT context FROM pg_settings WHERE name = 'shardext.stat_tenants_sample_rate'),
		  'superuser', 'the sample rate is a superuser setting');
SELECT throws_ok($$SET shardext.stat_tenants_sample_rate = 2$$, '22023', NULL,
				 'a sample rate above 1 is refused');
SELECT is((SELECT setting FROM pg_settings WHERE name = 'shardext.rebalance_isolated_tenants'),
		  'off', 'isolated tenants stay by default');

-- tables of our own
SET LOCAL client_min_messages TO warning;
CREATE TABLE tap_tenants (tenant_id bigint, id int, PRIMARY KEY (tenant_id, id));
SELECT create_distributed_table('tap_tenants', 'tenant_id', shard_count => 2);
CREATE TABLE tap_tenant_lookup (id int PRIMARY KEY);
SELECT create_reference_table('tap_tenant_lookup');
CREATE TABLE tap_tenant_local (id int);
RESET client_min_messages;

SELECT throws_ok($$SELECT shardext_isolate_tenant('tap_tenants', 'not a number')$$, '22P02',
				 NULL, 'a value that is not of the distribution column type is refused');
SELECT throws_ok($$SELECT shardext_isolate_tenant('tap_tenants', '99999999999999999999')$$,
				 '22003', NULL, 'a value out of the type''s range is refused');
SELECT throws_ok($$SELECT shardext_isolate_tenant('tap_tenant_lookup', '1')$$, '0A000',
				 'cannot isolate a tenant of reference table "tap_tenant_lookup"',
				 'reference tables have no tenants');
SELECT throws_ok($$SELECT shardext_isolate_tenant('tap_tenant_local', '1')$$, '42P16',
				 'table "tap_tenant_local" is not distributed', 'local tables are refused');
SELECT throws_ok($$SELECT shardext_isolate_tenant(0, '1')$$, '42P01', NULL,
				 'a table that does not exist is refused');
SELECT throws_ok($$SELECT shardext_isolate_tenant('tap_tenants', NULL)$$, '22004', NULL,
				 'a NULL value is refused');
SELECT throws_ok($$SELECT shardext_isolate_tenant('tap_tenants', '1', NULL, NULL)$$, '22004',
				 NULL, 'a NULL mode is refused');
SELECT throws_ok($$SELECT shardext_isolate_tenant('tap_tenants', '1', NULL, 'fast')$$, '22023',
				 'invalid shard move mode "fast"', 'an unknown mode is refused');
SELECT throws_ok($$SELECT shardext_isolate_tenant('tap_tenants', '1', 1000)$$, '42704',
				 'node with id 1000 does not exist', 'an unknown node is refused');
SELECT throws_ok($$SELECT shardext_isolate_tenant('tap_tenants', '1', -1)$$, '42704', NULL,
				 'a negative node id is refused');
SELECT throws_ok($$SELECT shardext_isolate_tenant('tap_tenants', '1')$$, '25001', NULL,
				 'isolation commits on its own: refused in a transaction block');
SELECT throws_ok($$SELECT * FROM shardext_rebalance_plan('by_tenant')$$, '22023', NULL,
				 'an unknown strategy is refused');

-- a non-owner may neither call it nor, when allowed to call, isolate
CREATE ROLE tap_tenant_intruder;
SET LOCAL ROLE tap_tenant_intruder;
SELECT throws_ok($$SELECT shardext_isolate_tenant('tap_tenants', '1')$$, '42501', NULL,
				 'a role without EXECUTE cannot isolate');
RESET ROLE;
GRANT EXECUTE ON FUNCTION shardext_isolate_tenant(regclass, text, int, text)
	TO tap_tenant_intruder;
SET LOCAL ROLE tap_tenant_intruder;
SELECT throws_ok($$SELECT shardext_isolate_tenant('tap_tenants', '1')$$, '42501', NULL,
				 'a role that does not own the table cannot isolate its tenants');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
