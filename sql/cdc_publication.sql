--
-- cdc_publication: what shardext_create_publication() makes on the nodes
-- (a publication with the stand-ins of its tables, one node streaming
-- reference tables), how stand-ins follow DDL, tables distributed later,
-- dropped tables, and shardext_drop_publication().  The consumers
-- themselves are in test/multinode/cdc.sh.
--
SET client_min_messages TO warning;
CREATE TABLE cdc_orders (id bigint, merchant_id int, amount numeric,
						 PRIMARY KEY (merchant_id, id));
SELECT create_distributed_table('cdc_orders', 'merchant_id', shard_count => 4);
CREATE TABLE "CDC Countries" (code text PRIMARY KEY, name text);
SELECT create_reference_table('"CDC Countries"');
CREATE TABLE cdc_nokey (a int, b text);
SELECT create_distributed_table('cdc_nokey', 'a', shard_count => 2);
RESET client_min_messages;
-- a table without a key gets a warning
SELECT shardext_create_publication('cdc_named', ARRAY['cdc_orders', '"CDC Countries"', 'cdc_nokey']::regclass[]);
-- every node: the publication lists the tables' names; the stand-ins and who streams the reference table
SELECT row_number() OVER (ORDER BY node_id) AS node, result FROM shardext_run_on_nodes($$
	SELECT string_agg(schemaname || '.' || tablename, ', ' ORDER BY tablename)
	FROM pg_publication_tables WHERE pubname = 'cdc_named'$$) ORDER BY node_id;
SELECT row_number() OVER (ORDER BY node_id) AS node, result FROM shardext_run_on_nodes($$
	SELECT string_agg(c.relname || ':' || t.method::text || ':' || t.emits || ':' || pg_get_userbyid(c.relowner),
					  ', ' ORDER BY c.relname)
	FROM shardext.cdc_table t JOIN pg_class c ON c.oid = t.standin$$) ORDER BY node_id;
SELECT row_number() OVER (ORDER BY node_id) AS node, result FROM shardext_run_on_nodes($$
	SELECT count(*) FROM public.cdc_orders$$) ORDER BY node_id;
SELECT row_number() OVER (ORDER BY node_id) AS node, result FROM shardext_run_on_nodes($$
	SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i
	WHERE i.indrelid = 'public.cdc_orders'::regclass AND i.indisprimary$$) ORDER BY node_id;
-- DDL: the stand-ins follow their table
ALTER TABLE cdc_orders ADD COLUMN note text;
ALTER TABLE cdc_orders DROP COLUMN amount;
SELECT DISTINCT result FROM shardext_run_on_nodes($$
	SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
	FROM pg_attribute WHERE attrelid = 'public.cdc_orders'::regclass AND attnum > 0
	  AND NOT attisdropped$$);
ALTER TABLE cdc_orders RENAME TO cdc_orders_renamed;
SELECT DISTINCT result FROM shardext_run_on_nodes($$
	SELECT string_agg(tablename, ', ' ORDER BY tablename)
	FROM pg_publication_tables WHERE pubname = 'cdc_named'$$);
-- a publication for all tables (of this database: only the cdc_ ones are shown);
-- a table distributed later joins it (not the named one)
SET client_min_messages TO error;
SELECT shardext_create_publication('cdc_all');
SET client_min_messages TO warning;
CREATE TABLE cdc_later (id bigint PRIMARY KEY);
SELECT create_distributed_table('cdc_later', 'id', shard_count => 2);
RESET client_min_messages;
SELECT DISTINCT result FROM shardext_run_on_nodes($$
	SELECT string_agg(pubname || ':' || tablename, ', ' ORDER BY pubname, tablename)
	FROM pg_publication_tables WHERE pubname LIKE 'cdc\_%' AND tablename ILIKE 'cdc%'$$);
SELECT pubname, all_tables, create_slot FROM shardext.cdc_publication ORDER BY 1;
-- a dropped or undistributed table leaves
DROP TABLE cdc_nokey;
SELECT undistribute_table('cdc_later');
SELECT DISTINCT result FROM shardext_run_on_nodes($$
	SELECT string_agg(c.relname, ', ' ORDER BY c.relname)
	FROM shardext.cdc_table t JOIN pg_class c ON c.oid = t.standin WHERE c.relname ILIKE 'cdc%'$$);
-- the view lists each node (without consumers here)
SELECT row_number() OVER (ORDER BY node_id) AS node, slot_name, plugin FROM shardext.cdc_slots;
-- dropping: the publications, then the stand-ins nothing needs any more
SELECT shardext_drop_publication('cdc_all');
SELECT DISTINCT result FROM shardext_run_on_nodes($$
	SELECT string_agg(pubname, ', ') FROM pg_publication$$);
SELECT shardext_drop_publication('cdc_named');
SELECT shardext_drop_publication('cdc_named');
SELECT DISTINCT result FROM shardext_run_on_nodes($$
	SELECT (SELECT count(*) FROM pg_publication) || ' ' || (SELECT count(*) FROM shardext.cdc_table)
		   || ' ' || (to_regclass('public.cdc_orders_renamed') IS NULL)$$);
SELECT count(*) FROM shardext.cdc_publication;
SET client_min_messages TO warning;
DROP TABLE cdc_orders_renamed, "CDC Countries", cdc_later;
