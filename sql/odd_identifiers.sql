--
-- odd_identifiers: every operation on tables, columns, indexes, constraints,
-- schemas and a database whose names have quotes, spaces, upper case,
-- non-ASCII characters and the full 63 bytes.
--
-- It runs in a database of its own (with an odd name too), so that the
-- moves and the rebalance concern only its tables.  Each operation has a
-- section; a feature that adds an operation adds a section of its own
-- before "undistribute and drop" (and its objects to the checks there).
--
\getenv worker_1_port WORKER_1_PORT
\getenv worker_2_port WORKER_2_PORT
\getenv coordinator_port COORDINATOR_PORT
\set regress_db :DBNAME
-- what an interrupted earlier run may have left
\c :regress_db - - :worker_1_port
SET client_min_messages TO warning;
DROP DATABASE IF EXISTS "Odd ""DB"" ü" WITH (FORCE);
\c :regress_db - - :worker_2_port
SET client_min_messages TO warning;
DROP DATABASE IF EXISTS "Odd ""DB"" ü" WITH (FORCE);
\c :regress_db - - :coordinator_port
SET client_min_messages TO warning;
DROP DATABASE IF EXISTS "Odd ""DB"" ü" WITH (FORCE);
CREATE DATABASE "Odd ""DB"" ü";
\c "Odd ""DB"" ü"
SET client_min_messages TO warning;
CREATE EXTENSION shardext;
SELECT shardext_add_node('127.0.0.1', :worker_1_port) > 0 AS worker_1_added;
SELECT shardext_add_node('127.0.0.1', :worker_2_port, weight => 2) > 0 AS worker_2_added;
RESET client_min_messages;
SELECT current_database();

-- shard names as the catalog has them, shard ids replaced by N
CREATE FUNCTION pg_temp.shard_names(t regclass) RETURNS SETOF text LANGUAGE sql AS $$
	SELECT DISTINCT replace(shard_name, shard_id::text, 'N') FROM shardext.shards
	WHERE logicalrelid = t ORDER BY 1 $$;
-- rows in the shards, read on the nodes
CREATE FUNCTION pg_temp.shard_rows(t regclass) RETURNS bigint LANGUAGE sql AS $$
	SELECT sum(result::bigint) FROM shardext_run_on_shards(t, 'SELECT count(*) FROM %s') $$;

-- ==== distribute: create_distributed_table, create_reference_table ====
CREATE SCHEMA "Sch ""ema"" Ü";
SET search_path TO "Sch ""ema"" Ü", public;
CREATE TABLE "Ref Täble" ("Code ""Ü""" text PRIMARY KEY, "Label" text);
INSERT INTO "Ref Täble" VALUES ('a', 'Alpha'), ('b', 'Beta'), ('ü', 'Umlaut');
SELECT create_reference_table('"Ref Täble"');
-- the table of the issue: a quote in the name
CREATE TABLE "Sup ""er" ("Key ""Col""" bigint PRIMARY KEY, "Amount €" numeric,
						 "select" text, "Ünïcödé" text DEFAULT 'ü');
INSERT INTO "Sup ""er" SELECT g, g * 1.5, 'row ' || g, 'é' || g FROM generate_series(1, 40) g;
SELECT create_distributed_table('"Sup ""er"', 'Key "Col"', shard_count => 4);
-- two names of 63 bytes that differ only at the end, with primary keys
-- (whose names PostgreSQL clips too)
CREATE TABLE "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A"
	("Key ""Col""" bigint PRIMARY KEY, "Ref Code" text);
CREATE TABLE "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager B"
	("Key ""Col""" bigint PRIMARY KEY, note text);
INSERT INTO "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A"
	SELECT g, CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END FROM generate_series(1, 40) g;
INSERT INTO "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager B"
	SELECT g, 'B ' || g FROM generate_series(1, 40) g;
SELECT create_distributed_table('"Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A"',
								'Key "Col"', colocate_with => '"Sup ""er"');
SELECT create_distributed_table('"Überlange Tabelle mit sehr langem Namen für Zeilen im Lager B"',
								'Key "Col"', colocate_with => '"Sup ""er"');
SELECT logicalrelid, method, distribution_column, shards FROM shardext.tables ORDER BY 1;
-- long names are clipped with a hash, so the two tables and their
-- primary keys have four different shard names
SELECT pg_temp.shard_names('"Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A"');
SELECT pg_temp.shard_names('"Überlange Tabelle mit sehr langem Namen für Zeilen im Lager B"');
SELECT pg_temp.shard_names('"Sup ""er"');
SELECT DISTINCT result AS shard_indexes FROM shardext_run_on_shards(
	'"Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A"',
	$$SELECT string_agg(regexp_replace(c.relname, '_[0-9]+$', '_N'), ', ' ORDER BY c.relname)
	  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = '%s'::regclass$$);
SELECT pg_temp.shard_rows('"Sup ""er"') AS sup_rows,
	   pg_temp.shard_rows('"Ref Täble"') / 2 AS ref_rows_per_node;

-- ==== queries and DML ====
SELECT "Key ""Col""", "Amount €", "select", "Ünïcödé" FROM "Sup ""er" WHERE "Key ""Col""" = 7;
SELECT count(*), sum("Amount €") FROM "Sup ""er";
SELECT s."Key ""Col""", r."Label"
FROM "Sup ""er" s
JOIN "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A" a USING ("Key ""Col""")
JOIN "Ref Täble" r ON r."Code ""Ü""" = a."Ref Code"
WHERE s."Key ""Col""" IN (3, 4) ORDER BY 1;
SELECT a."Ref Code", count(*) FROM "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A" a
JOIN "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager B" b USING ("Key ""Col""")
GROUP BY 1 ORDER BY 1;
UPDATE "Sup ""er" SET "select" = 'updated' WHERE "Key ""Col""" = 7;
UPDATE "Sup ""er" SET "Amount €" = "Amount €" + 1 WHERE "Key ""Col""" > 30;
DELETE FROM "Sup ""er" WHERE "Key ""Col""" = 40;
INSERT INTO "Sup ""er" ("Key ""Col""", "Amount €") VALUES (41, 1), (42, 2) RETURNING *;
INSERT INTO "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager B"
	SELECT "Key ""Col""" + 100, "select" FROM "Sup ""er" WHERE "Key ""Col""" <= 3;
UPDATE "Ref Täble" SET "Label" = 'Ümlaut' WHERE "Code ""Ü""" = 'ü';
SELECT "select", "Ünïcödé" FROM "Sup ""er" WHERE "Key ""Col""" IN (7, 41) ORDER BY "Key ""Col""";
SELECT count(*) AS b_rows FROM "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager B";
SELECT * FROM "Ref Täble" ORDER BY 1;

-- ==== COPY ====
COPY "Sup ""er" ("Key ""Col""", "Amount €", "select", "Ünïcödé") FROM STDIN WITH (FORMAT csv, HEADER);
Key "Col",Amount €,select,Ünïcödé
50,5.5,"copied, with comma",ö
51,6.5,"copied ""quoted""",ß
\.
COPY "Ref Täble" FROM STDIN;
c	Ça
\.
COPY (SELECT "Key ""Col""", "select", "Ünïcödé" FROM "Sup ""er" WHERE "Key ""Col""" >= 50 ORDER BY 1)
	TO STDOUT WITH (FORMAT csv, HEADER);
COPY "Ref Täble" TO STDOUT;
SELECT pg_temp.shard_rows('"Sup ""er"') AS sup_rows;

-- ==== DDL ====
ALTER TABLE "Sup ""er" ADD COLUMN "New ""Col"" ß" int DEFAULT 3;
ALTER TABLE "Sup ""er" RENAME COLUMN "select" TO "Größe ""x""";
ALTER TABLE "Sup ""er" ADD CONSTRAINT "Check ""positive"" ✓" CHECK ("Amount €" >= 0);
ALTER TABLE "Sup ""er" ADD CONSTRAINT "Unique ""key"" ü" UNIQUE ("Key ""Col""", "Ünïcödé");
ALTER TABLE "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A"
	ADD CONSTRAINT "Ref ""FK"" ü" FOREIGN KEY ("Ref Code") REFERENCES "Ref Täble" ("Code ""Ü""");
CREATE INDEX "Idx ""quoted"" ü" ON "Sup ""er" ("Größe ""x""");
CREATE INDEX "Index über die Spalte mit dem sehr langen Namen Nummer eins ok"
	ON "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager B" (note);
CREATE INDEX "Index über die Spalte mit dem sehr langen Namen Nummer zwei ok"
	ON "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager B" (lower(note));
ALTER INDEX "Idx ""quoted"" ü" RENAME TO "Idx ""renamed"" ü";
COMMENT ON TABLE "Sup ""er" IS 'a table with a "quote"';
COMMENT ON COLUMN "Sup ""er"."Amount €" IS 'in €';
GRANT SELECT ON "Sup ""er" TO PUBLIC;
CREATE INDEX CONCURRENTLY "Conc ""idx"" ü" ON "Sup ""er" ("Amount €");
DROP INDEX CONCURRENTLY "Conc ""idx"" ü";
ANALYZE "Sup ""er" ("Amount €");
VACUUM "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager B";
REINDEX TABLE "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager B";
-- the shards follow, indexes and constraints under their clipped names too
SELECT DISTINCT result AS sup_shard FROM shardext_run_on_shards('"Sup ""er"',
	$$SELECT (SELECT string_agg(attname, ', ' ORDER BY attnum) FROM pg_attribute
			  WHERE attrelid = '%s'::regclass AND attnum > 0 AND NOT attisdropped) || ' / ' ||
			 (SELECT string_agg(regexp_replace(conname, '_[0-9]+$', '_N'), ', ' ORDER BY conname)
			  FROM pg_constraint WHERE conrelid = '%s'::regclass AND contype <> 'n') || ' / ' ||
			 obj_description('%s'::regclass, 'pg_class') || ' / ' ||
			 col_description('%s'::regclass, 2)$$);
-- PostgreSQL 18 names NOT NULL constraints: the shards' have the table's names
SELECT DISTINCT result AS same_not_null_names FROM shardext_run_on_shards('"Sup ""er"',
	format($$SELECT coalesce(array_agg(conname::text ORDER BY conname), '{}') = %L::text[]
			 FROM pg_constraint WHERE conrelid = '%%s'::regclass AND contype = 'n'$$,
		   (SELECT coalesce(array_agg(conname::text ORDER BY conname), '{}')
			FROM pg_constraint WHERE conrelid = '"Sup ""er"'::regclass AND contype = 'n')));
SELECT DISTINCT result AS b_shard_indexes FROM shardext_run_on_shards(
	'"Überlange Tabelle mit sehr langem Namen für Zeilen im Lager B"',
	$$SELECT string_agg(regexp_replace(c.relname, '_[0-9]+$', '_N'), ', ' ORDER BY c.relname)
	  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = '%s'::regclass$$);
-- the foreign key works on the shards
INSERT INTO "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A" VALUES (99, 'zz');
-- renames and a new schema of odd names, long ones included
CREATE SCHEMA "Zweites ""Schema"" ß";
ALTER TABLE "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager B"
	RENAME TO "Umbenannte Tabelle mit einem sehr langen Namen voller Zeiche ä";
ALTER TABLE "Umbenannte Tabelle mit einem sehr langen Namen voller Zeiche ä"
	SET SCHEMA "Zweites ""Schema"" ß";
SELECT pg_temp.shard_names('"Zweites ""Schema"" ß"."Umbenannte Tabelle mit einem sehr langen Namen voller Zeiche ä"');
SELECT count(*) AS renamed_rows
FROM "Zweites ""Schema"" ß"."Umbenannte Tabelle mit einem sehr langen Namen voller Zeiche ä";
TRUNCATE "Zweites ""Schema"" ß"."Umbenannte Tabelle mit einem sehr langen Namen voller Zeiche ä";
SELECT pg_temp.shard_rows('"Zweites ""Schema"" ß"."Umbenannte Tabelle mit einem sehr langen Namen voller Zeiche ä"')
	AS rows_after_truncate;
INSERT INTO "Zweites ""Schema"" ß"."Umbenannte Tabelle mit einem sehr langen Namen voller Zeiche ä"
	SELECT g, 'again ' || g FROM generate_series(1, 10) g;

-- ==== move, split, rebalance ====
SELECT sum(pg_temp.shard_rows(t)) AS rows_before
FROM unnest(ARRAY['"Sup ""er"'::regclass,
				  '"Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A"',
				  '"Zweites ""Schema"" ß"."Umbenannte Tabelle mit einem sehr langen Namen voller Zeiche ä"']) t;
SELECT shard_id AS first_shard, node_id AS first_node FROM shardext.shards
WHERE logicalrelid = '"Sup ""er"'::regclass ORDER BY hash_min LIMIT 1 \gset
SELECT node_id AS other_node FROM shardext.nodes WHERE node_id <> :first_node \gset
SET client_min_messages TO warning;
SELECT shardext_move_shard(:first_shard, :other_node);
RESET client_min_messages;
SELECT DISTINCT node_id = :other_node AS moved_with_colocated FROM shardext.shards
WHERE hash_min = (SELECT hash_min FROM shardext.shards WHERE shard_id = :first_shard);
SET client_min_messages TO warning;
SELECT cardinality(shardext_split_shard(:first_shard)) AS new_shards;
RESET client_min_messages;
SELECT logicalrelid, shards FROM shardext.tables WHERE method = 'hash' ORDER BY 1;
SELECT pg_temp.shard_names('"Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A"');
-- the node that received the moved and the split shards gets a lower
-- weight: the rebalancer moves shard groups away from it
SELECT count(*) AS reweighted FROM (
	SELECT shardext_set_node_weight(node_host, node_port,
									CASE node_id WHEN :other_node THEN 1 ELSE 3 END)
	FROM shardext.nodes) w;
SET client_min_messages TO warning;
SELECT shardext_rebalance() > 0 AS moved;
RESET client_min_messages;
SELECT count(*) AS moves_left FROM shardext_rebalance_plan();
SELECT sum(pg_temp.shard_rows(t)) AS rows_after
FROM unnest(ARRAY['"Sup ""er"'::regclass,
				  '"Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A"',
				  '"Zweites ""Schema"" ß"."Umbenannte Tabelle mit einem sehr langen Namen voller Zeiche ä"']) t;
SELECT count(*), sum("Amount €") FROM "Sup ""er";
SELECT shardext_cleanup() >= 0 AS cleaned;
SELECT node_id > 0 AS worker, result AS left_behind FROM shardext_run_on_nodes(
	$$SELECT (SELECT count(*) FROM pg_replication_slots WHERE database = current_database()) +
			 (SELECT count(*) FROM pg_publication) + (SELECT count(*) FROM pg_subscription)$$)
ORDER BY node_id;

-- ==== global indexes ====
SELECT shardext_create_global_index('"Sup ""er"', '"Größe ""x""", "Ünïcödé"', true,
									'Glob "idx" ü') AS global_index;
SELECT index_name, table_name, columns, is_unique FROM shardext.global_indexes;
SELECT "Key ""Col""" FROM "Sup ""er" WHERE "Größe ""x""" = 'row 3' AND "Ünïcödé" = 'é3';
INSERT INTO "Sup ""er" VALUES (1001, 1, 'row 3', 'é3');
UPDATE "Sup ""er" SET "Größe ""x""" = 'row 3 bis' WHERE "Key ""Col""" = 3;
-- the index table's shards move and split like any others
SELECT shard_id AS index_shard, node_id AS index_node FROM shardext.shards
WHERE logicalrelid = 'shardext_gidx."Glob ""idx"" ü"'::regclass ORDER BY hash_min LIMIT 1 \gset
SELECT node_id AS index_target FROM shardext.nodes WHERE node_id <> :index_node \gset
SET client_min_messages TO warning;
SELECT shardext_move_shard(:index_shard, :index_target);
SELECT cardinality(shardext_split_shard(:index_shard)) AS new_index_shards;
RESET client_min_messages;
SELECT pg_temp.shard_names('shardext_gidx."Glob ""idx"" ü"');
SELECT "Key ""Col""" FROM "Sup ""er" WHERE "Größe ""x""" = 'row 3 bis' AND "Ünïcödé" = 'é3';
SELECT shardext_check_global_index('Glob "idx" ü') AS index_differences;
SELECT shardext_drop_global_index('Glob "idx" ü');
SELECT count(*) AS global_indexes_left FROM shardext.global_index;

-- ==== tenant isolation ====
SELECT shardext_isolate_tenant('"Sup ""er"', '41') > 0 AS isolated;
SELECT hash_min = hash_max AS own_shard FROM shardext.shards
WHERE shard_id = shardext_shard_for_value('"Sup ""er"', '41');
SELECT count(DISTINCT shard_id) AS colocated_shards_of_41 FROM shardext.shards
WHERE logicalrelid IN ('"Sup ""er"'::regclass,
					   '"Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A"'::regclass)
  AND shardext.worker_hash_value(41::bigint) BETWEEN hash_min AND hash_max;
SELECT "Größe ""x""" FROM "Sup ""er" WHERE "Key ""Col""" = 41;
SELECT count(*), sum("Amount €") FROM "Sup ""er";

-- ==== undistribute and drop ====
SELECT undistribute_table('"Sup ""er"');
SELECT count(*), sum("Amount €") FROM "Sup ""er";
SELECT create_distributed_table('"Sup ""er"', 'Key "Col"', shard_count => 2);
ALTER TABLE "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A" DROP CONSTRAINT "Ref ""FK"" ü";
SELECT undistribute_table('"Ref Täble"');
SELECT count(*) AS ref_rows_back FROM "Ref Täble";
SELECT undistribute_table('"Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A"');
SELECT count(*) AS long_rows_back FROM "Überlange Tabelle mit sehr langem Namen für Zeilen im Lager A";
DROP TABLE "Sup ""er";
DROP SCHEMA "Zweites ""Schema"" ß" CASCADE;
SELECT count(*) AS catalog_rows FROM shardext.dist_table;
SELECT node_id > 0 AS worker, result AS shard_tables_left FROM shardext_run_on_nodes(
	$$SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	  WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast', 'shardext')
		AND c.relkind = 'r'$$)
ORDER BY node_id;

\c :regress_db - - :coordinator_port
SET client_min_messages TO warning;
DROP DATABASE "Odd ""DB"" ü" WITH (FORCE);
\c :regress_db - - :worker_1_port
SET client_min_messages TO warning;
DROP DATABASE "Odd ""DB"" ü" WITH (FORCE);
\c :regress_db - - :worker_2_port
SET client_min_messages TO warning;
DROP DATABASE "Odd ""DB"" ü" WITH (FORCE);
\c :regress_db - - :coordinator_port
