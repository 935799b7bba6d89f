-- shardext 1.0 -> 1.1.
--
-- A fresh CREATE EXTENSION of 1.1 runs shardext--1.0.sql and then this file
-- (there is deliberately no shardext--1.1.sql), so a fresh install and an
-- upgraded one end up with the same objects by construction.  Each section
-- below belongs to one feature; keep new objects in the section of theirs.
\echo Use "ALTER EXTENSION shardext UPDATE TO '1.1'" to load this file. \quit

-- ==== global secondary indexes (issue 11) ====
-- A global index of a distributed table is a hidden distributed table in
-- schema shardext_gidx (the index table), distributed by the first indexed
-- column: one row per distinct (indexed values, distribution value) of the
-- base table's rows whose indexed values are all non-NULL, with the number
-- of such rows for an index that is not unique.  shardext writes it in the
-- same distributed transaction as the base table.

CREATE SCHEMA shardext_gidx;
GRANT USAGE ON SCHEMA shardext_gidx TO PUBLIC;
COMMENT ON SCHEMA shardext_gidx IS 'index tables of shardext global indexes (written by shardext only)';

CREATE TABLE shardext.global_index (
	indexrelid regclass NOT NULL PRIMARY KEY
		REFERENCES shardext.dist_table ON DELETE CASCADE,	-- the index table
	index_name text NOT NULL UNIQUE,
	baserelid regclass NOT NULL REFERENCES shardext.dist_table ON DELETE CASCADE,
	columns int2[] NOT NULL,			-- attribute numbers in the base table
	is_unique bool NOT NULL
);
CREATE INDEX global_index_baserelid_idx ON shardext.global_index (baserelid);
SELECT pg_catalog.pg_extension_config_dump('shardext.global_index', '');
GRANT SELECT ON shardext.global_index TO PUBLIC;

CREATE FUNCTION pg_catalog.shardext_create_global_index(table_name regclass, columns text,
														is_unique boolean DEFAULT false,
														index_name text DEFAULT NULL)
	RETURNS text
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'shardext_create_global_index';
COMMENT ON FUNCTION pg_catalog.shardext_create_global_index(regclass, text, boolean, text)
	IS 'create a global (cluster-wide, optionally unique) index on columns of a distributed table; returns its name';

CREATE FUNCTION pg_catalog.shardext_drop_global_index(index_name text)
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_drop_global_index';
COMMENT ON FUNCTION pg_catalog.shardext_drop_global_index(text)
	IS 'drop a global index and its index table';

CREATE FUNCTION pg_catalog.shardext_check_global_index(index_name text)
	RETURNS bigint
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_check_global_index';
COMMENT ON FUNCTION pg_catalog.shardext_check_global_index(text)
	IS 'compare a global index with its table both ways; returns the number of missing plus dangling entries';

CREATE VIEW shardext.global_indexes AS
	SELECT g.index_name,
		   g.baserelid AS table_name,
		   (SELECT string_agg(quote_ident(a.attname::text) COLLATE "default", ', ' ORDER BY k.ord)
			FROM unnest(g.columns) WITH ORDINALITY AS k(attnum, ord)
			JOIN pg_catalog.pg_attribute a
			  ON a.attrelid = g.baserelid AND a.attnum = k.attnum) AS columns,
		   g.is_unique,
		   g.indexrelid AS index_table,
		   (SELECT count(*) FROM shardext.shard s WHERE s.logicalrelid = g.indexrelid) AS shards
	FROM shardext.global_index g
	ORDER BY g.baserelid::text, g.index_name;
COMMENT ON VIEW shardext.global_indexes IS 'global indexes of distributed tables: columns, uniqueness and the hidden index table';
GRANT SELECT ON shardext.global_indexes TO PUBLIC;
