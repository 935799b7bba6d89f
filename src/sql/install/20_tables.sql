-- Distributed and reference tables

CREATE FUNCTION pg_catalog.create_distributed_table(table_name regclass,
													distribution_column text,
													distribution_type text DEFAULT 'hash',
													colocate_with text DEFAULT 'default',
													shard_count int DEFAULT NULL)
	RETURNS void
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'create_distributed_table';
COMMENT ON FUNCTION pg_catalog.create_distributed_table(regclass, text, text, text, int)
	IS 'hash-distribute a table into shards on the worker nodes';

CREATE FUNCTION pg_catalog.create_reference_table(table_name regclass)
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'create_reference_table';
COMMENT ON FUNCTION pg_catalog.create_reference_table(regclass)
	IS 'replicate a table to every worker node';

CREATE FUNCTION pg_catalog.undistribute_table(table_name regclass)
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'undistribute_table';
COMMENT ON FUNCTION pg_catalog.undistribute_table(regclass)
	IS 'turn a distributed or reference table back into a local table, rows and all';

CREATE FUNCTION pg_catalog.shardext_shard_for_value(table_name regclass, value text)
	RETURNS bigint
	LANGUAGE C STRICT STABLE
	AS 'MODULE_PATHNAME', 'shardext_shard_for_value';
COMMENT ON FUNCTION pg_catalog.shardext_shard_for_value(regclass, text)
	IS 'shard id that holds the given distribution column value';

CREATE FUNCTION shardext.shard_name(table_name regclass, shard_id bigint)
	RETURNS text
	LANGUAGE C STRICT STABLE
	AS 'MODULE_PATHNAME', 'shardext_shard_name';
COMMENT ON FUNCTION shardext.shard_name(regclass, bigint)
	IS 'schema-qualified name of a shard table on its worker';

CREATE FUNCTION shardext.drop_trigger()
	RETURNS event_trigger
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'shardext_drop_trigger';
COMMENT ON FUNCTION shardext.drop_trigger()
	IS 'drops the shards of distributed tables that are dropped';

CREATE EVENT TRIGGER shardext_drop_trigger ON sql_drop
	EXECUTE FUNCTION shardext.drop_trigger();

CREATE VIEW shardext.tables AS
	SELECT d.logicalrelid,
		   CASE d.method WHEN 'h' THEN 'hash' ELSE 'reference' END AS method,
		   a.attname AS distribution_column,
		   d.colocationid,
		   c.shard_count,
		   (SELECT count(*) FROM shardext.shard s WHERE s.logicalrelid = d.logicalrelid) AS shards
	FROM shardext.dist_table d
	JOIN shardext.colocation c USING (colocationid)
	LEFT JOIN pg_catalog.pg_attribute a
		   ON a.attrelid = d.logicalrelid AND a.attnum = d.dist_attnum
	ORDER BY d.logicalrelid::text;
COMMENT ON VIEW shardext.tables IS 'distributed and reference tables';
GRANT SELECT ON shardext.tables TO PUBLIC;

CREATE VIEW shardext.shards AS
	SELECT s.logicalrelid,
		   s.shardid AS shard_id,
		   shardext.shard_name(s.logicalrelid, s.shardid) AS shard_name,
		   s.hash_min, s.hash_max,
		   p.nodeid AS node_id,
		   n.host AS node_host,
		   n.port AS node_port,
		   CASE d.method WHEN 'h' THEN 'hash' ELSE 'reference' END AS method,
		   d.colocationid
	FROM shardext.shard s
	JOIN shardext.dist_table d USING (logicalrelid)
	JOIN shardext.placement p USING (shardid)
	JOIN shardext.node n USING (nodeid)
	ORDER BY s.logicalrelid::text, s.hash_min NULLS FIRST, s.shardid, p.nodeid;
COMMENT ON VIEW shardext.shards IS 'one row per shard placement: which node holds which hash range';
GRANT SELECT ON shardext.shards TO PUBLIC;
