-- shardext 1.1 -> 1.2.
--
-- A fresh CREATE EXTENSION of 1.2 runs shardext--1.0.sql, then
-- shardext--1.0--1.1.sql, then this file (there is deliberately no
-- shardext--1.2.sql), so a fresh install and an upgraded one end up with
-- the same objects by construction.  1.0 and 1.1 are released: their
-- scripts never change again.  Each section below belongs to one feature;
-- keep new objects in the section of theirs, and keep the script the same
-- for every PostgreSQL major version.
\echo Use "ALTER EXTENSION shardext UPDATE TO '1.2'" to load this file. \quit

-- ==== change data capture (issue 25) ====

-- Publications made by shardext_create_publication().  The coordinator
-- keeps one row per publication; every worker keeps the same rows, which
-- tell shardext's output plugins (pgoutput and test_decoding wrappers, see
-- cdc_decoder.c) that a consumer of that publication gets the changes of
-- shards as changes of their distributed tables.  The output plugins read
-- the worker's rows while decoding, hence user_catalog_table.
CREATE TABLE shardext.cdc_publication (
	pubname name NOT NULL PRIMARY KEY,
	all_tables bool NOT NULL,		-- tables distributed later join it
	create_slot bool NOT NULL		-- a logical slot of its name on every node
) WITH (user_catalog_table = true);

-- on the coordinator: the tables of a publication made for named tables
CREATE TABLE shardext.cdc_publication_table (
	pubname name NOT NULL REFERENCES shardext.cdc_publication ON DELETE CASCADE,
	relid regclass NOT NULL REFERENCES shardext.dist_table ON DELETE CASCADE,
	PRIMARY KEY (pubname, relid)
);
CREATE INDEX cdc_publication_table_relid_idx ON shardext.cdc_publication_table (relid);

-- On a worker: the stand-in of each distributed or reference table that is
-- in a publication, an empty table with the table's schema, name, columns
-- and replica identity.  The node's publications contain the stand-ins, so
-- subscribers see the table's name; the output plugins decode each change
-- of a shard as a change of its stand-in.  Reference table changes are
-- streamed by one node only (emits).
CREATE TABLE shardext.cdc_table (
	standin regclass NOT NULL PRIMARY KEY,
	table_id oid NOT NULL UNIQUE,	-- the distributed table's OID on the coordinator
	method "char" NOT NULL CHECK (method IN ('h', 'r')),
	emits bool NOT NULL
) WITH (user_catalog_table = true);

SELECT pg_catalog.pg_extension_config_dump('shardext.cdc_publication', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.cdc_publication_table', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.cdc_table', '');
GRANT SELECT ON shardext.cdc_publication, shardext.cdc_publication_table, shardext.cdc_table
	TO PUBLIC;

CREATE FUNCTION pg_catalog.shardext_create_publication(name text, tables regclass[] DEFAULT NULL,
													   create_slot boolean DEFAULT false)
	RETURNS void
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'shardext_create_publication';
COMMENT ON FUNCTION pg_catalog.shardext_create_publication(text, regclass[], boolean)
	IS 'publish the changes of distributed and reference tables (all, or those named) on every node, optionally with a logical replication slot of that name on each';
REVOKE ALL ON FUNCTION pg_catalog.shardext_create_publication(text, regclass[], boolean)
	FROM PUBLIC;

CREATE FUNCTION pg_catalog.shardext_drop_publication(name text)
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_drop_publication';
COMMENT ON FUNCTION pg_catalog.shardext_drop_publication(text)
	IS 'drop a publication made by shardext_create_publication, and its slots, on every node';
REVOKE ALL ON FUNCTION pg_catalog.shardext_drop_publication(text) FROM PUBLIC;

CREATE FUNCTION shardext.cdc_slot_status(OUT node_id int, OUT node_host text, OUT node_port int,
										 OUT slot_name name, OUT plugin name, OUT active bool,
										 OUT confirmed_flush_lsn pg_lsn, OUT bytes_behind bigint)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_cdc_slot_status';
COMMENT ON FUNCTION shardext.cdc_slot_status()
	IS 'the logical replication slots of change data capture consumers on every node';

CREATE VIEW shardext.cdc_slots AS
	SELECT * FROM shardext.cdc_slot_status();
COMMENT ON VIEW shardext.cdc_slots
	IS 'per node: the logical slots of change data capture consumers, their plugin, confirmed position and how far behind they are (a node without consumers has a row without slot)';
REVOKE ALL ON shardext.cdc_slots FROM PUBLIC;
REVOKE ALL ON FUNCTION shardext.cdc_slot_status() FROM PUBLIC;

-- called by the coordinator on each worker, in its transaction
CREATE FUNCTION shardext.cdc_worker_add_publication(pubname name, all_tables bool,
													create_slot bool)
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_cdc_worker_add_publication';
COMMENT ON FUNCTION shardext.cdc_worker_add_publication(name, bool, bool)
	IS 'on a worker: create a (still empty) publication of change data capture';

CREATE FUNCTION shardext.cdc_worker_drop_publication(pubname name)
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_cdc_worker_drop_publication';
COMMENT ON FUNCTION shardext.cdc_worker_drop_publication(name)
	IS 'on a worker: drop a publication of change data capture and the stand-ins no publication needs';

CREATE FUNCTION shardext.cdc_worker_publish(standin regclass, table_id oid, method "char",
											emits bool, publications name[])
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_cdc_worker_publish';
COMMENT ON FUNCTION shardext.cdc_worker_publish(regclass, oid, "char", bool, name[])
	IS 'on a worker: record a table''s stand-in and add it to publications of change data capture';

CREATE FUNCTION shardext.cdc_worker_unpublish(table_id oid)
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_cdc_worker_unpublish';
COMMENT ON FUNCTION shardext.cdc_worker_unpublish(oid)
	IS 'on a worker: drop the stand-in of a table (it leaves every publication)';

CREATE FUNCTION shardext.cdc_worker_set_emitter(emits bool)
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_cdc_worker_set_emitter';
COMMENT ON FUNCTION shardext.cdc_worker_set_emitter(bool)
	IS 'on a worker: whether this node streams the changes of reference tables';

REVOKE ALL ON FUNCTION shardext.cdc_worker_add_publication(name, bool, bool),
	shardext.cdc_worker_drop_publication(name),
	shardext.cdc_worker_set_emitter(bool) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pg_catalog.shardext_create_publication(text, regclass[], boolean),
	pg_catalog.shardext_drop_publication(text),
	shardext.cdc_slot_status(),
	shardext.cdc_worker_add_publication(name, bool, bool),
	shardext.cdc_worker_drop_publication(name),
	shardext.cdc_worker_set_emitter(bool) TO shardext_admin;
GRANT SELECT ON shardext.cdc_slots TO shardext_admin;
