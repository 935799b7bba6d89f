-- pgTAP: shardext's catalog, views and function signatures
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(47);

SELECT has_schema('shardext');
SELECT has_table('shardext', 'node', 'nodes catalog');
SELECT has_table('shardext', 'colocation', 'colocation groups catalog');
SELECT has_table('shardext', 'dist_table', 'distributed tables catalog');
SELECT has_table('shardext', 'shard', 'shards catalog');
SELECT has_table('shardext', 'placement', 'placements catalog');
SELECT has_table('shardext', 'transaction', 'two-phase commit records');

SELECT columns_are('shardext', 'node', ARRAY['nodeid', 'host', 'port', 'weight', 'active', 'primary_nodeid',
										   'system_identifier', 'timeline', 'needs_rebuild']);
SELECT col_type_is('shardext', 'shard', 'hash_min', 'integer', 'hash_min is int4');
SELECT col_type_is('shardext', 'shard', 'hash_max', 'integer', 'hash_max is int4');
SELECT col_type_is('shardext', 'shard', 'shardid', 'bigint', 'shard ids are bigint');
SELECT col_type_is('shardext', 'dist_table', 'logicalrelid', 'regclass', 'logicalrelid is regclass');
SELECT col_is_pk('shardext', 'placement', ARRAY['shardid', 'nodeid'], 'one placement per shard and node');
SELECT fk_ok('shardext', 'placement', 'nodeid', 'shardext', 'node', 'nodeid');

-- extension-owned and dumped by pg_dump as configuration
SELECT is((SELECT count(*)::int FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
		   WHERE e.extname = 'shardext' AND d.classid = 'pg_class'::regclass AND d.deptype = 'e'
		   AND d.objid IN ('shardext.node'::regclass, 'shardext.shard'::regclass,
						   'shardext.placement'::regclass, 'shardext.dist_table'::regclass,
						   'shardext.colocation'::regclass)),
		  5, 'catalog tables belong to the extension');
SELECT ok((SELECT extconfig @> ARRAY['shardext.node'::regclass::oid, 'shardext.shard'::regclass::oid,
									 'shardext.placement'::regclass::oid,
									 'shardext.dist_table'::regclass::oid,
									 'shardext.colocation'::regclass::oid]
		   FROM pg_extension WHERE extname = 'shardext'),
		  'catalog tables are extension configuration (pg_dump keeps their rows)');

-- user-facing views
SELECT has_view('shardext', 'shards', 'view shardext.shards');
SELECT has_view('shardext', 'nodes', 'view shardext.nodes');
SELECT col_type_is('shardext', 'shards', 'logicalrelid', 'regclass', 'shards.logicalrelid');
SELECT col_type_is('shardext', 'shards', 'shard_id', 'bigint', 'shards.shard_id');
SELECT col_type_is('shardext', 'shards', 'shard_name', 'text', 'shards.shard_name');
SELECT col_type_is('shardext', 'shards', 'hash_min', 'integer', 'shards.hash_min');
SELECT col_type_is('shardext', 'shards', 'hash_max', 'integer', 'shards.hash_max');
SELECT col_type_is('shardext', 'shards', 'node_id', 'integer', 'shards.node_id');
SELECT col_type_is('shardext', 'shards', 'node_host', 'text', 'shards.node_host');
SELECT col_type_is('shardext', 'shards', 'node_port', 'integer', 'shards.node_port');

-- functions, callable unqualified, with the documented signatures
SELECT has_function('pg_catalog', 'create_distributed_table',
					ARRAY['regclass', 'text', 'text', 'text', 'integer']);
SELECT function_returns('pg_catalog', 'create_distributed_table',
						ARRAY['regclass', 'text', 'text', 'text', 'integer'], 'void');
SELECT has_function('pg_catalog', 'create_reference_table', ARRAY['regclass']);
SELECT has_function('pg_catalog', 'undistribute_table', ARRAY['regclass']);
SELECT has_function('pg_catalog', 'shardext_add_node', ARRAY['text', 'integer', 'double precision']);
SELECT function_returns('pg_catalog', 'shardext_add_node',
						ARRAY['text', 'integer', 'double precision'], 'integer');
SELECT has_function('pg_catalog', 'shardext_remove_node', ARRAY['text', 'integer']);
SELECT has_function('pg_catalog', 'shardext_shard_for_value', ARRAY['regclass', 'text']);
SELECT function_returns('pg_catalog', 'shardext_shard_for_value', ARRAY['regclass', 'text'], 'bigint');

-- argument names match Citus, so scripts written for Citus run unchanged
SELECT is((SELECT proargnames FROM pg_proc WHERE proname = 'create_distributed_table'),
		  ARRAY['table_name', 'distribution_column', 'distribution_type', 'colocate_with', 'shard_count'],
		  'create_distributed_table argument names');
SELECT is((SELECT pg_get_function_arguments(oid) FROM pg_proc WHERE proname = 'create_distributed_table'),
		  'table_name regclass, distribution_column text, distribution_type text DEFAULT ''hash''::text, colocate_with text DEFAULT ''default''::text, shard_count integer DEFAULT NULL::integer',
		  'create_distributed_table defaults');
SELECT is((SELECT pg_get_function_arguments(oid) FROM pg_proc WHERE proname = 'shardext_add_node'),
		  'host text, port integer, weight double precision DEFAULT 1.0',
		  'shardext_add_node defaults');

-- every shardext function is documented
SELECT is((SELECT count(*)::int FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid
		   JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'shardext'
		   WHERE obj_description(p.oid, 'pg_proc') IS NULL), 0,
		  'every function has a COMMENT');

-- node management is for superusers only
SELECT ok(NOT has_function_privilege('public', 'shardext_add_node(text,int,float8)', 'EXECUTE'),
		  'PUBLIC cannot add nodes');
SELECT ok(NOT has_function_privilege('public', 'shardext_remove_node(text,int)', 'EXECUTE'),
		  'PUBLIC cannot remove nodes');
SELECT ok(NOT has_function_privilege('public', 'shardext_run_on_nodes(text)', 'EXECUTE'),
		  'PUBLIC cannot run commands on nodes');

-- GUCs exist with their defaults
SELECT is(current_setting('shardext.shard_count'), '32', 'default shard count');
SELECT is(current_setting('shardext.connect_timeout'), '5s', 'default connect timeout');
SELECT ok(current_setting('shardext.max_connections_per_node')::int > 0, 'connection cap');
SELECT throws_ok($$SET shardext.no_such_setting = 1$$, '42602', NULL,
				 'the shardext. prefix is reserved: misspelt settings are errors');
SELECT throws_ok($$SET shardext.shard_count = 0$$, '22023', NULL, 'shard_count must be positive');

SELECT * FROM finish();
ROLLBACK;
