-- pgTAP: contracts of the global index functions: shardext_create_global_index,
-- shardext_drop_global_index and shardext_check_global_index, the catalog
-- and view they maintain, and throws_ok for every bad input (each in a
-- subtransaction, whose remote work must be undone with it).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(40);

CREATE TABLE tap_g (id bigint PRIMARY KEY, email text, tenant int, ref text, p point, j jsonb);
SELECT create_distributed_table('tap_g', 'id', shard_count => 4);
CREATE TABLE tap_g_ref (code text PRIMARY KEY, name text);
SELECT create_reference_table('tap_g_ref');
CREATE TABLE tap_g_local (id int, email text);
INSERT INTO tap_g SELECT g, 'e' || g, g % 3, 'r' || (g % 7), NULL, NULL FROM generate_series(1, 30) g;

-- the functions exist with their documented signatures
SELECT has_function('pg_catalog', 'shardext_create_global_index',
					ARRAY['regclass', 'text', 'boolean', 'text'], 'create function');
SELECT function_returns('pg_catalog', 'shardext_create_global_index',
						ARRAY['regclass', 'text', 'boolean', 'text'], 'text', 'it returns the name');
SELECT has_function('pg_catalog', 'shardext_drop_global_index', ARRAY['text'], 'drop function');
SELECT function_returns('pg_catalog', 'shardext_check_global_index', ARRAY['text'], 'bigint',
						'check returns the number of mismatches');
SELECT has_table('shardext', 'global_index', 'catalog table');
SELECT has_view('shardext', 'global_indexes', 'view');
SELECT has_schema('shardext_gidx', 'schema of the index tables');

-- bad input
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g_nope', 'email')$$, '42P01', NULL,
				 'unknown table');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g', 'nope')$$, '42703', NULL,
				 'unknown column');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g', '"Email"')$$, '42703', NULL,
				 'quoted spelling is case sensitive');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g', '')$$, '22023', NULL,
				 'empty column list');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g', 'email,')$$, '22023', NULL,
				 'malformed column list');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g', 'email, email')$$, '42701', NULL,
				 'a column twice');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g', 'id')$$, '0A000', NULL,
				 'the distribution column');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g', 'email, id')$$, '0A000', NULL,
				 'the distribution column among others');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g', 'p')$$, '42883', NULL,
				 'a type without hash and btree support');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g', 'email, p')$$, '42883', NULL,
				 'a later column without btree support');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g_ref', 'name')$$, '0A000', NULL,
				 'reference table');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g_local', 'email')$$, '55000', NULL,
				 'local table');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g', NULL)$$, '22004', NULL,
				 'NULL columns');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g', 'email', NULL)$$, '22004', NULL,
				 'NULL is_unique');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g', 'email', false, '')$$, '42602',
				 NULL, 'empty name');
SELECT throws_ok($$SELECT shardext_drop_global_index('tap_g_nope')$$, '42704', NULL,
				 'dropping an unknown index');
SELECT throws_ok($$SELECT shardext_check_global_index('tap_g_nope')$$, '42704', NULL,
				 'checking an unknown index');

-- what works
SELECT is(shardext_create_global_index('tap_g', 'email', true), 'tap_g_email_gidx',
		  'a unique index gets a name made from table and column');
SELECT is(shardext_create_global_index('tap_g', 'tenant, ref', false, 'tap_g_tenant_ref'),
		  'tap_g_tenant_ref', 'a two-column index takes the name given');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g', 'ref', false, 'tap_g_tenant_ref')$$,
				 '42710', NULL, 'a name that is taken');
SELECT results_eq($$SELECT index_name, columns, is_unique, shards::int FROM shardext.global_indexes
					 WHERE table_name = 'tap_g'::regclass ORDER BY 1$$,
				  $$VALUES ('tap_g_email_gidx', 'email', true, 4), ('tap_g_tenant_ref', 'tenant, ref', false, 4)$$,
				  'the view lists both');
SELECT is(shardext_check_global_index('tap_g_email_gidx'), 0::bigint, 'unique index exact');
SELECT is(shardext_check_global_index('tap_g_tenant_ref'), 0::bigint, 'two-column index exact');
SELECT throws_ok($$SELECT shardext_create_global_index('shardext_gidx.tap_g_email_gidx', 'id')$$,
				 '42809', NULL, 'an index table cannot be indexed');
SELECT throws_ok($$INSERT INTO shardext_gidx.tap_g_email_gidx VALUES ('x', 1)$$, '42809', NULL,
				 'an index table cannot be written');
SELECT throws_ok($$INSERT INTO tap_g (id, email) VALUES (100, 'e1')$$, '23505',
				 'duplicate key value violates unique constraint "tap_g_email_gidx"',
				 'a duplicate is a unique violation of the global index');
SELECT throws_ok($$INSERT INTO tap_g (id, email) VALUES (101, 'e101') ON CONFLICT (email) DO UPDATE SET ref = 'x'$$,
				 '0A000', NULL, 'ON CONFLICT DO UPDATE on a global index');
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g', 'ref', true)$$, '23505', NULL,
				 'unique index over duplicates');
SELECT is((SELECT count(*)::int FROM pg_class WHERE relname = 'tap_g_ref_gidx'), 0,
		  'and nothing of it is left');

-- a non-owner may not create or drop
CREATE ROLE tap_g_stranger;
SET LOCAL ROLE tap_g_stranger;
SELECT throws_ok($$SELECT shardext_create_global_index('tap_g', 'ref')$$, '42501', NULL,
				 'a role that does not own the table cannot create');
SELECT throws_ok($$SELECT shardext_drop_global_index('tap_g_email_gidx')$$, '42501', NULL,
				 'nor drop');
RESET ROLE;

SELECT lives_ok($$SELECT shardext_drop_global_index('tap_g_email_gidx')$$, 'dropping works');
SELECT is((SELECT count(*)::int FROM shardext.global_indexes WHERE table_name = 'tap_g'::regclass), 1,
		  'one index left');

SELECT * FROM finish();
ROLLBACK;
