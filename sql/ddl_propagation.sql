--
-- ddl_propagation: schema changes of distributed tables reach every shard
--
CREATE TABLE regions (code text PRIMARY KEY, name text);
SELECT create_reference_table('regions');
CREATE TABLE shops (id int PRIMARY KEY, region text, name text);
SELECT create_distributed_table('shops', 'id', shard_count => 4);

-- shape of one shard: columns, constraints, indexes (names without shard ids)
CREATE FUNCTION shard_shape(t regclass, OUT columns text, OUT constraints text,
							OUT indexes text, OUT same_on_all bool)
LANGUAGE sql AS $$
	WITH shapes AS (
		SELECT result FROM shardext_run_on_shards(t, $q$SELECT concat_ws(' | ',
			(SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod) ||
					CASE WHEN attnotnull THEN ' not null' ELSE '' END ||
					coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), ''), ', ' ORDER BY attnum)
			 FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
			 WHERE a.attrelid = '%s'::regclass AND attnum > 0 AND NOT attisdropped),
			(SELECT string_agg(regexp_replace(conname, '_[0-9]+$', '') || ': ' ||
					regexp_replace(pg_get_constraintdef(oid), '_[0-9]+\(', '('), ', ' ORDER BY conname)
			 FROM pg_constraint WHERE conrelid = '%s'::regclass AND contype <> 'n'),
			(SELECT string_agg(regexp_replace(indexrelid::regclass::text, '_[0-9]+$', ''), ', ' ORDER BY indexrelid)
			 FROM pg_index WHERE indrelid = '%s'::regclass),
			-- PostgreSQL 18's named NOT NULL constraints: the same names on every shard
			(SELECT string_agg(conname, ', ' ORDER BY conname)
			 FROM pg_constraint WHERE conrelid = '%s'::regclass AND contype = 'n'))$q$))
	SELECT split_part(min(result), ' | ', 1), split_part(min(result), ' | ', 2),
		   split_part(min(result), ' | ', 3), count(DISTINCT result) = 1
	FROM shapes
$$;

-- columns, defaults, NOT NULL, CHECK
ALTER TABLE shops ADD COLUMN opened date DEFAULT '2020-01-01', ADD COLUMN staff int NOT NULL DEFAULT 1;
ALTER TABLE shops ADD CONSTRAINT staff_positive CHECK (staff > 0);
ALTER TABLE shops ALTER COLUMN name SET NOT NULL, ALTER COLUMN opened DROP DEFAULT;
ALTER TABLE shops ALTER COLUMN name TYPE varchar(40) USING upper(name);
SELECT * FROM shard_shape('shops');
-- indexes, unique constraints including the distribution column, foreign keys
CREATE INDEX shops_name_idx ON shops (name);
CREATE INDEX ON shops (lower(name));
ALTER TABLE shops ADD CONSTRAINT shops_id_name_key UNIQUE (id, name);
ALTER TABLE shops ADD FOREIGN KEY (region) REFERENCES regions (code);
SELECT * FROM shard_shape('shops');
-- co-located foreign key on the distribution column
CREATE TABLE sales (shop_id int, amount numeric);
SELECT create_distributed_table('sales', 'shop_id', colocate_with => 'shops');
ALTER TABLE sales ADD CONSTRAINT sales_shop_fk FOREIGN KEY (shop_id) REFERENCES shops (id);
SELECT constraints FROM shard_shape('sales');
-- tables in foreign keys cannot be undistributed (the checks would see empty tables)
SELECT undistribute_table('sales');
SELECT undistribute_table('shops');
-- the foreign key works on the workers: no shop, no sale
COPY sales FROM STDIN;
99	1.50
\.
-- renames of columns, constraints, indexes and the table
ALTER TABLE shops RENAME COLUMN staff TO employees;
ALTER TABLE shops RENAME CONSTRAINT staff_positive TO employees_positive;
ALTER INDEX shops_name_idx RENAME TO shops_by_name;
ALTER TABLE shops RENAME TO stores;
SELECT * FROM shard_shape('stores');
SELECT count(*) AS shards_named_stores FROM shardext.shards
WHERE logicalrelid = 'stores'::regclass AND shard_name LIKE 'public.stores\_%';
-- drops
DROP INDEX shops_by_name;
ALTER TABLE stores DROP CONSTRAINT employees_positive, DROP COLUMN opened;
SELECT * FROM shard_shape('stores');
-- SET SCHEMA moves the shards too
CREATE SCHEMA archive;
ALTER TABLE sales SET SCHEMA archive;
SELECT count(*) AS moved_shards FROM shardext_run_on_shards('archive.sales',
	'SELECT 1 FROM %s') WHERE success;
-- COMMENT and GRANT reach the shards
COMMENT ON TABLE stores IS 'all our stores';
COMMENT ON COLUMN stores.name IS 'shop sign';
CREATE ROLE ddl_reader;
\getenv worker_1_port WORKER_1_PORT
\getenv worker_2_port WORKER_2_PORT
SELECT count(*) FROM shardext_run_on_nodes('CREATE ROLE ddl_reader') WHERE success;
GRANT SELECT ON stores TO ddl_reader;
SELECT DISTINCT result FROM shardext_run_on_shards('stores',
	$$SELECT obj_description('%s'::regclass) || ' / ' ||
	 col_description('%s'::regclass, 3) || ' / ' ||
	 has_table_privilege('ddl_reader', '%s', 'SELECT')$$);
REVOKE SELECT ON stores FROM ddl_reader;
SELECT DISTINCT result FROM shardext_run_on_shards('stores',
	$$SELECT has_table_privilege('ddl_reader', '%s', 'SELECT')$$);
-- TRUNCATE: several tables at once, and CASCADE along foreign keys
COPY regions FROM STDIN;
eu	Europe
\.
COPY stores (id, region, name) FROM STDIN;
1	eu	one
2	eu	two
\.
COPY archive.sales FROM STDIN;
1	10
2	20
\.
TRUNCATE regions;
TRUNCATE regions CASCADE;
SELECT (SELECT sum(result::int) FROM shardext_run_on_shards('stores', 'SELECT count(*) FROM %s')) AS stores,
	   (SELECT sum(result::int) FROM shardext_run_on_shards('archive.sales', 'SELECT count(*) FROM %s')) AS sales;

-- a failing DDL changes nothing anywhere
COPY stores (id, region, name) FROM STDIN;
1	\N	one
1	\N	one
\.
COPY stores (id, region, name) FROM STDIN;
1	\N	one
2	\N	one
\.
ALTER TABLE stores ADD CONSTRAINT stores_name_key UNIQUE (id, name), ADD CONSTRAINT one_name CHECK (name <> 'one');
SELECT constraints FROM shard_shape('stores');

-- refused, with the reason
ALTER TABLE stores ADD CONSTRAINT name_unique UNIQUE (name);
CREATE UNIQUE INDEX ON stores (name);
ALTER TABLE stores ALTER COLUMN id TYPE bigint;
ALTER TABLE stores DROP COLUMN id;
CREATE TABLE notes (id int PRIMARY KEY, body text);
ALTER TABLE stores ADD COLUMN note_id int REFERENCES notes (id);
CREATE TABLE loose (shop int REFERENCES stores (id));
CREATE TABLE others (id int PRIMARY KEY, x int);
SELECT create_distributed_table('others', 'id', colocate_with => 'none');
ALTER TABLE stores ADD COLUMN other_id int REFERENCES others (id);
ALTER TABLE regions ADD COLUMN store_id int REFERENCES stores (id);
ALTER TABLE stores ENABLE ROW LEVEL SECURITY;
ALTER SCHEMA archive RENAME TO old_archive;

-- CREATE / DROP INDEX CONCURRENTLY: the shards' indexes are built and
-- dropped concurrently too (writes go on), one shard at a time per node
CREATE INDEX CONCURRENTLY stores_lower_name ON stores (lower(name));
CREATE INDEX CONCURRENTLY IF NOT EXISTS stores_lower_name ON stores (lower(name));
SELECT indexes, same_on_all FROM shard_shape('stores');
BEGIN;
CREATE INDEX CONCURRENTLY stores_in_block ON stores (name);
ROLLBACK;
DROP INDEX CONCURRENTLY stores_lower_name;
SELECT indexes, same_on_all FROM shard_shape('stores');
-- a build that fails on a shard leaves that shard's index INVALID, as
-- PostgreSQL does; DROP INDEX removes the index everywhere
CREATE TABLE cic (id int, v int);
SELECT create_distributed_table('cic', 'id', shard_count => 4);
INSERT INTO cic SELECT g, g FROM generate_series(1, 100) g;
INSERT INTO cic VALUES (7, 0);
CREATE UNIQUE INDEX CONCURRENTLY cic_id ON cic (id);
SELECT count(*) FILTER (WHERE result = 'false') AS invalid, count(*) FILTER (WHERE result = 'true') > 0 AS some_valid
FROM shardext_run_on_shards('cic', $$SELECT coalesce(bool_and(indisvalid)::text, 'none') FROM pg_index WHERE indrelid = '%s'::regclass$$);
DROP INDEX cic_id;
SELECT DISTINCT result AS after_drop
FROM shardext_run_on_shards('cic', $$SELECT coalesce(bool_and(indisvalid)::text, 'none') FROM pg_index WHERE indrelid = '%s'::regclass$$);
DELETE FROM cic WHERE v = 0;
CREATE UNIQUE INDEX CONCURRENTLY cic_id ON cic (id);
SELECT DISTINCT result AS after_retry
FROM shardext_run_on_shards('cic', $$SELECT coalesce(bool_and(indisvalid)::text, 'none') FROM pg_index WHERE indrelid = '%s'::regclass$$);
DROP TABLE cic;

-- VACUUM, ANALYZE and REINDEX of a distributed table reach its shards,
-- with their options and columns
CREATE TABLE vac (id int, v int, "Odd Col" text);
SELECT create_distributed_table('vac', 'id', shard_count => 4);
INSERT INTO vac SELECT g, g, 'x' FROM generate_series(1, 1000) g;
DELETE FROM vac WHERE id % 2 = 0;
VACUUM (ANALYZE, VERBOSE false, INDEX_CLEANUP 'on', PARALLEL 1) vac (v, "Odd Col");
-- (last_vacuum and last_analyze are written by the commands themselves;
-- dead tuple counts are not compared: a worker backend may report the
-- DELETE's dead tuples to the statistics after the VACUUM ran)
SELECT DISTINCT result AS "vacuumed analyzed"
FROM shardext_run_on_shards('vac', $$SELECT (last_vacuum IS NOT NULL) || ' ' || (last_analyze IS NOT NULL) FROM pg_stat_user_tables WHERE relid = '%s'::regclass$$);
BEGIN;
ANALYZE vac (v);
VACUUM vac;
ROLLBACK;
VACUUM FULL vac;
-- REINDEX TABLE / INDEX [CONCURRENTLY] rebuilds the shards' indexes
CREATE INDEX vac_v ON vac (v);
CREATE TEMP TABLE vac_files AS SELECT result FROM shardext_run_on_shards('vac',
	$$SELECT string_agg(relfilenode::text, ',') FROM pg_class WHERE oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = '%s'::regclass)$$);
REINDEX (VERBOSE false) TABLE CONCURRENTLY vac;
SELECT count(*) AS shards_not_rebuilt FROM shardext_run_on_shards('vac',
	$$SELECT string_agg(relfilenode::text, ',') FROM pg_class WHERE oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = '%s'::regclass)$$)
WHERE result IN (SELECT result FROM vac_files);
REINDEX INDEX vac_v;
BEGIN;
REINDEX TABLE CONCURRENTLY vac;
ROLLBACK;
DROP TABLE vac, vac_files;

DROP TABLE archive.sales, stores, regions, notes, others;
DROP SCHEMA archive;
DROP FUNCTION shard_shape;
DROP ROLE ddl_reader;
SELECT count(*) FROM shardext_run_on_nodes('DROP ROLE ddl_reader') WHERE success;
