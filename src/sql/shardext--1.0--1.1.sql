-- shardext 1.0 -> 1.1.
--
-- A fresh CREATE EXTENSION of 1.1 runs shardext--1.0.sql and then this file
-- (there is deliberately no shardext--1.1.sql), so a fresh install and an
-- upgraded one end up with the same objects by construction.  Each section
-- below belongs to one feature; keep new objects in the section of theirs.
\echo Use "ALTER EXTENSION shardext UPDATE TO '1.1'" to load this file. \quit

-- ==== operability (issue 15) ====

-- Administrators need not be superusers: members of shardext_admin may
-- call the administrative functions (which check the membership too).
-- Roles belong to the whole server, not to the extension: the role stays
-- when the extension is dropped, and is shared by every database.
DO $shardext$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'shardext_admin') THEN
		CREATE ROLE shardext_admin NOLOGIN;
	END IF;
END
$shardext$;

GRANT EXECUTE ON FUNCTION
	pg_catalog.shardext_add_node(text, int, float8),
	pg_catalog.shardext_remove_node(text, int),
	pg_catalog.shardext_set_node_weight(text, int, float8),
	shardext.worker_register(text, int),
	shardext.worker_unregister(text),
	pg_catalog.shardext_run_on_nodes(text),
	pg_catalog.shardext_run_on_shards(regclass, text),
	pg_catalog.shardext_recover_prepared_transactions(),
	pg_catalog.shardext_stat_shards_reset(),
	pg_catalog.shardext_move_shard(bigint, int, text),
	pg_catalog.shardext_split_shard(bigint, int),
	pg_catalog.shardext_rebalance(text, text),
	pg_catalog.shardext_drain_node(text, int, text),
	pg_catalog.shardext_cleanup(),
	pg_catalog.shardext_cancel_rebalance(),
	shardext.move_lock_shards(bigint[]),
	shardext.move_commit_placements(bigint),
	shardext.worker_free_disk_bytes()
	TO shardext_admin;

-- a move records its steps over a connection of its own, as the caller
GRANT INSERT, UPDATE, DELETE ON shardext.move, shardext.cleanup_record TO shardext_admin;
GRANT USAGE ON SEQUENCE shardext.move_move_id_seq, shardext.cleanup_record_record_id_seq
	TO shardext_admin;
GRANT SELECT, INSERT, DELETE ON shardext.move_marker, shardext.move_marker_applied
	TO shardext_admin;

-- Names of shards and of their indexes that must be clipped to 63 bytes
-- carry a hash of the whole name since 1.1, so that two long names stay
-- two names.  Shards created before (ids below first_hashed_shard_id) keep
-- the names 1.0 gave them; without a row, every shard has 1.1's names.
CREATE TABLE shardext.shard_naming (
	only_row bool NOT NULL DEFAULT true PRIMARY KEY CHECK (only_row),
	first_hashed_shard_id bigint NOT NULL
);
INSERT INTO shardext.shard_naming (first_hashed_shard_id)
	SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END
	FROM shardext.shard_shardid_seq
	WHERE is_called;
SELECT pg_catalog.pg_extension_config_dump('shardext.shard_naming', '');
GRANT SELECT ON shardext.shard_naming TO PUBLIC;
COMMENT ON TABLE shardext.shard_naming
	IS 'from which shard id on clipped shard and index names carry a hash';

-- what every node of the cluster needs, checked on each
CREATE FUNCTION pg_catalog.shardext_check_cluster(OUT node_id int, OUT node_host text,
												  OUT node_port int, OUT check_name text,
												  OUT status text, OUT detail text)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_check_cluster';
COMMENT ON FUNCTION pg_catalog.shardext_check_cluster()
	IS 'check the configuration of the coordinator and every node: versions, prepared transactions, replication, worker processes, roles, clocks';

-- ==== global secondary indexes (issue 11) ====
-- A global index of a distributed table is a hidden distributed table in
-- schema shardext_gidx (the index table), distributed by the first indexed
-- column: one row per distinct (indexed values, distribution value) of the
-- base table's rows whose indexed values are all non-NULL, with the number
-- of such rows for an index that is not unique.  shardext writes it in the
-- same distributed transaction as the base table.

CREATE SCHEMA shardext_gidx;
-- a table's owner creates its global indexes (and their shards, as the
-- caller, on the nodes, whose extension script makes this schema too); the
-- schema is on no search_path, and shardext refuses writes and DDL to index
-- tables that do not come from itself
GRANT USAGE, CREATE ON SCHEMA shardext_gidx TO PUBLIC;
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
