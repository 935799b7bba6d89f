--
-- create_distributed_table: hash-distribute tables with existing rows
--
\getenv coordinator_port COORDINATOR_PORT
\getenv worker_1_port WORKER_1_PORT
\getenv worker_2_port WORKER_2_PORT

-- a table with rows, a multi-column primary key, a partial index on a
-- column whose name needs quoting, a CHECK, defaults and a storage option
CREATE TABLE orders (
	id bigint,
	merchant_id int,
	amount numeric DEFAULT 0 CHECK (amount >= 0),
	"Note Text" text,
	created date DEFAULT '2026-01-01',
	PRIMARY KEY (merchant_id, id)
) WITH (fillfactor = 90);
CREATE INDEX orders_note_idx ON orders ("Note Text") WHERE "Note Text" IS NOT NULL;
INSERT INTO orders (id, merchant_id, amount, "Note Text")
	SELECT g, g % 100, g, 'note ' || g FROM generate_series(1, 10000) g;
SELECT create_distributed_table('orders', 'merchant_id');

-- 32 shards (shardext.shard_count) covering the int4 space without gap or overlap
SELECT method, distribution_column, shard_count, shards
FROM shardext.tables WHERE logicalrelid = 'orders'::regclass;
SELECT min(hash_min) AS first_min, max(hash_max) AS last_max,
	   bool_and(prev_max IS NULL OR hash_min = prev_max + 1) AS contiguous,
	   count(DISTINCT hash_max - hash_min) AS distinct_widths
FROM (SELECT hash_min, hash_max, lag(hash_max) OVER (ORDER BY hash_min) AS prev_max
	  FROM shardext.shards WHERE logicalrelid = 'orders'::regclass) s;

-- one placement per shard; the weight-2 worker holds about twice as many
SELECT node_port = :worker_2_port AS on_weight_2_node, count(*) AS shards
FROM shardext.shards WHERE logicalrelid = 'orders'::regclass GROUP BY 1 ORDER BY 1;

-- shard names are schema-qualified <table>_<shard id>
SELECT bool_and(shard_name = 'public.orders_' || shard_id) AS names_ok
FROM shardext.shards WHERE logicalrelid = 'orders'::regclass;

-- the local table is now an empty shell
SELECT pg_relation_size('orders') AS local_bytes;

-- the rows are on the workers, each in the shard its merchant_id hashes to
\c - - - :worker_1_port
CREATE FUNCTION pg_temp.row_count(t regclass) RETURNS bigint LANGUAGE plpgsql
	AS $$DECLARE n bigint; BEGIN EXECUTE format('SELECT count(*) FROM %s', t) INTO n; RETURN n; END$$;
CREATE TEMP TABLE shard_rows AS
	SELECT c.relname, pg_temp.row_count(c.oid) AS n
	FROM pg_class c WHERE c.relname ~ '^orders_[0-9]+$' AND c.relkind = 'r';
SELECT count(*) AS shard_tables, sum(n) AS worker_1_rows FROM shard_rows;
\c - - - :worker_2_port
CREATE FUNCTION pg_temp.row_count(t regclass) RETURNS bigint LANGUAGE plpgsql
	AS $$DECLARE n bigint; BEGIN EXECUTE format('SELECT count(*) FROM %s', t) INTO n; RETURN n; END$$;
CREATE TEMP TABLE shard_rows AS
	SELECT c.relname, pg_temp.row_count(c.oid) AS n
	FROM pg_class c WHERE c.relname ~ '^orders_[0-9]+$' AND c.relkind = 'r';
SELECT count(*) AS shard_tables, sum(n) AS worker_2_rows FROM shard_rows;

-- each shard has the columns, defaults, constraints, indexes and options
SELECT count(*) FILTER (WHERE contype = 'p') AS primary_keys,
	   count(*) FILTER (WHERE contype = 'c' AND conname = 'orders_amount_check') AS checks
FROM pg_constraint WHERE conrelid::regclass::text ~ '^orders_[0-9]+$';
SELECT count(*) AS partial_indexes FROM pg_indexes
WHERE tablename ~ '^orders_[0-9]+$' AND indexdef LIKE '%("Note Text") WHERE ("Note Text" IS NOT NULL)';
SELECT DISTINCT reloptions FROM pg_class WHERE relname ~ '^orders_[0-9]+$' AND relkind = 'r';
SELECT DISTINCT a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull,
	   pg_get_expr(d.adbin, d.adrelid) AS default_value
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.relname ~ '^orders_[0-9]+$' AND c.relkind = 'r' AND a.attnum > 0
ORDER BY 1;

-- every row sits in the shard shardext_shard_for_value() names
\c - - - :coordinator_port
SELECT sum(result::int) AS rows_of_merchant_42 FROM shardext_run_on_nodes(
	(SELECT format('SELECT count(*) FROM %s WHERE merchant_id = 42', shard_name)
	 FROM shardext.shards WHERE shard_id = shardext_shard_for_value('orders', '42')))
WHERE success;
SELECT count(*) AS shards_checked,
	   count(*) FILTER (WHERE split_part(r.result, ',', 1)::int < s.hash_min
						   OR split_part(r.result, ',', 2)::int > s.hash_max) AS misplaced
FROM shardext_run_on_shards('orders',
	'SELECT min(hashint4(merchant_id)) || '','' || max(hashint4(merchant_id)) FROM %s') r
JOIN shardext.shards s USING (shard_id, node_id)
WHERE r.success AND r.result IS NOT NULL;
SELECT sum(result::int) AS total_rows
FROM shardext_run_on_shards('orders', 'SELECT count(*) FROM %s');

-- shardext_shard_for_value agrees with the hash ranges
SELECT bool_and(hashint4(v) BETWEEN s.hash_min AND s.hash_max) AS consistent
FROM generate_series(-500, 500) v
JOIN shardext.shards s ON s.shard_id = shardext_shard_for_value('orders', v::text);
SELECT shardext_shard_for_value('orders', 'not a number');
SELECT shardext_shard_for_value('countries_missing', '1');

-- explicit shard count
CREATE TABLE events (tenant_id int, seq int, payload jsonb);
SELECT create_distributed_table('events', 'tenant_id', shard_count => 64);
SELECT shard_count, shards FROM shardext.tables WHERE logicalrelid = 'events'::regclass;

-- distribution quality: bigint keys 1..200000 over 32 shards, within 5% of the mean
CREATE TABLE quality (id bigint);
SELECT create_distributed_table('quality', 'id');
SELECT count(*) AS shards_hit,
	   max(abs(n - 200000 / 32.0)) / (200000 / 32.0) < 0.05 AS within_5_percent
FROM (SELECT shardext_shard_for_value('quality', g::text) AS shard, count(*) AS n
	  FROM generate_series(1, 200000) g GROUP BY 1) s;

-- other distribution column types hash with their own hash functions
CREATE TABLE by_text (k text COLLATE "C", v int);
CREATE TABLE by_uuid (k uuid, v int);
CREATE TABLE by_numeric (k numeric, v int);
CREATE TABLE by_date (k date, v int);
INSERT INTO by_text VALUES ('alpha', 1), ('beta', 2), ('Gamma', 3);
INSERT INTO by_uuid VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 1);
INSERT INTO by_numeric VALUES (1.5, 1), (2.50, 2);
INSERT INTO by_date VALUES ('2026-11-30', 1);
SELECT create_distributed_table('by_text', 'k');
SELECT create_distributed_table('by_uuid', 'k');
SELECT create_distributed_table('by_numeric', 'k');
SELECT create_distributed_table('by_date', 'k');
SELECT logicalrelid, distribution_column, shards FROM shardext.tables
WHERE logicalrelid::text LIKE 'by\_%' ORDER BY 1;
-- equal values of different scale hash alike
SELECT shardext_shard_for_value('by_numeric', '2.5') = shardext_shard_for_value('by_numeric', '2.50') AS numeric_scale_ok;
SELECT shardext_shard_for_value('by_text', 'alpha') = (
	SELECT shard_id FROM shardext.shards WHERE logicalrelid = 'by_text'::regclass
	AND hashtext('alpha') BETWEEN hash_min AND hash_max) AS text_hash_ok;

-- names that need quoting, in another schema
CREATE SCHEMA "Odd Schema";
CREATE TABLE "Odd Schema"."My ""Table""" ("Key Col" int PRIMARY KEY, "vAlue" text);
INSERT INTO "Odd Schema"."My ""Table""" VALUES (1, 'one'), (2, 'two');
SELECT create_distributed_table('"Odd Schema"."My ""Table"""', 'Key Col', shard_count => 4);
SELECT shard_name FROM shardext.shards
WHERE logicalrelid = '"Odd Schema"."My ""Table"""'::regclass ORDER BY hash_min LIMIT 1;
SELECT count(*) AS shards, sum(result::int) AS odd_rows
FROM shardext_run_on_shards('"Odd Schema"."My ""Table"""', 'SELECT count(*) FROM %s');
