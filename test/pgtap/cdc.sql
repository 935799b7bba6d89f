-- Contracts of change data capture: signatures, comments, privileges, the
-- view, and an error with the right SQLSTATE for every bad input (in the
-- test's transaction block, where a call that creates slots is refused;
-- sql/cdc_publication.sql checks what publications create on the nodes).
BEGIN;
SELECT plan(25);

SELECT has_function('pg_catalog', 'shardext_create_publication', ARRAY['text', 'regclass[]', 'boolean']);
SELECT has_function('pg_catalog', 'shardext_drop_publication', ARRAY['text']);
SELECT has_view('shardext', 'cdc_slots', 'the slot view exists');
SELECT columns_are('shardext', 'cdc_slots',
	ARRAY['node_id', 'node_host', 'node_port', 'slot_name', 'plugin', 'active',
		  'confirmed_flush_lsn', 'bytes_behind']);
SELECT is((SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		   WHERE (p.proname IN ('shardext_create_publication', 'shardext_drop_publication')
				  OR (n.nspname = 'shardext' AND p.proname LIKE 'cdc\_%'))
			 AND obj_description(p.oid, 'pg_proc') IS NOT NULL), 8::bigint,
		  'every function of change data capture has a comment');
SELECT ok(NOT has_function_privilege('public', 'shardext_create_publication(text, regclass[], boolean)',
									 'EXECUTE'), 'PUBLIC cannot create publications');
SELECT ok(NOT has_function_privilege('public', 'shardext_drop_publication(text)', 'EXECUTE'),
		  'PUBLIC cannot drop publications');
SELECT ok(NOT has_table_privilege('public', 'shardext.cdc_slots', 'SELECT'),
		  'PUBLIC cannot read the slots of every node');
SELECT ok(has_function_privilege('shardext_admin', 'shardext_create_publication(text, regclass[], boolean)',
								 'EXECUTE'), 'administrators can create publications');
SELECT is((SELECT array_agg(c.relname::text ORDER BY c.relname) FROM pg_class c
		   WHERE c.relnamespace = 'shardext'::regnamespace
			 AND c.reloptions @> ARRAY['user_catalog_table=true']),
		  ARRAY['cdc_publication', 'cdc_table'], 'decoding reads user catalog tables only');

SET LOCAL client_min_messages TO warning;
CREATE TABLE tap_cdc (id bigint PRIMARY KEY, v text);
SELECT create_distributed_table('tap_cdc', 'id', shard_count => 2);
CREATE TABLE tap_cdc_reference (id int PRIMARY KEY);
SELECT create_reference_table('tap_cdc_reference');
CREATE UNLOGGED TABLE tap_cdc_unlogged (id bigint PRIMARY KEY);
SELECT create_distributed_table('tap_cdc_unlogged', 'id', shard_count => 2);
CREATE TABLE tap_cdc_local (id int);
RESET client_min_messages;

-- bad input
SELECT throws_ok('SELECT shardext_create_publication(NULL)', '22004', NULL, 'NULL name');
SELECT throws_ok('SELECT shardext_create_publication('''')', '42602', NULL, 'empty name');
SELECT throws_ok('SELECT shardext_create_publication(repeat(''x'', 64))', '42602', NULL,
				 'name too long');
SELECT throws_ok('SELECT shardext_create_publication(''tap_pub'', ARRAY[''tap_cdc_local''::regclass])',
				 '42809', '"tap_cdc_local" is not a distributed or reference table', 'local table');
SELECT throws_ok('SELECT shardext_create_publication(''tap_pub'', ARRAY[]::regclass[])',
				 '22023', 'a publication needs at least one table', 'no tables');
SELECT throws_ok('SELECT shardext_create_publication(''tap_pub'', ARRAY[NULL::regclass])',
				 '22004', NULL, 'NULL table');
SELECT throws_ok('SELECT shardext_create_publication(''tap_pub'', ARRAY[''tap_cdc_unlogged''::regclass])',
				 '0A000', 'cannot publish unlogged table "tap_cdc_unlogged"', 'unlogged table');
SELECT throws_ok('SELECT shardext_create_publication(''tap_pub'', create_slot => true)', '25001',
				 NULL, 'slots are not created inside a transaction block');
SELECT throws_ok('SELECT shardext_drop_publication(''tap_nonesuch'')', '42704',
				 'publication "tap_nonesuch" does not exist', 'unknown publication');

-- a publication of two tables: a stand-in of each on every node
SELECT lives_ok('SELECT shardext_create_publication(''tap_pub'', ARRAY[''tap_cdc''::regclass,
				 ''tap_cdc_reference''::regclass, ''tap_cdc''::regclass])', 'publication of named tables');
SELECT throws_ok('SELECT shardext_create_publication(''tap_pub'')', '42710',
				 'publication "tap_pub" already exists', 'a name already used');
SELECT is((SELECT array_agg(relid::text ORDER BY relid::text) FROM shardext.cdc_publication_table
		   WHERE pubname = 'tap_pub'), ARRAY['tap_cdc', 'tap_cdc_reference'], 'the named tables, once');
SELECT is((SELECT all_tables::text || ',' || create_slot::text FROM shardext.cdc_publication
		   WHERE pubname = 'tap_pub'), 'false,false', 'the publication is recorded');
SELECT lives_ok('SELECT shardext_drop_publication(''tap_pub'')', 'drop a publication');
SELECT is((SELECT count(*) FROM shardext.cdc_publication_table), 0::bigint, 'its tables are forgotten');

SELECT * FROM finish();
ROLLBACK;
