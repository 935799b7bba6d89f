-- shardext 1.0 -> 1.1.
--
-- A fresh CREATE EXTENSION of 1.1 runs shardext--1.0.sql and then this file
-- (there is deliberately no shardext--1.1.sql), so a fresh install and an
-- upgraded one end up with the same objects by construction.  Each section
-- below belongs to one feature; keep new objects in the section of theirs.
\echo Use "ALTER EXTENSION shardext UPDATE TO '1.1'" to load this file. \quit

-- ==== hot tenants: tenant statistics, tenant isolation, load-aware rebalancing (issue 13) ====

-- the tenants (distribution column values) tracked by the top-K counters
CREATE FUNCTION shardext.stat_tenants_counters(OUT colocation_id int, OUT table_name regclass,
											   OUT hash_value int4, OUT tenant_value text,
											   OUT read_count bigint, OUT write_count bigint,
											   OUT count_error bigint, OUT elapsed_ms float8,
											   OUT prev_read_count bigint, OUT prev_write_count bigint,
											   OUT prev_count_error bigint, OUT prev_elapsed_ms float8,
											   OUT period_total bigint, OUT prev_period_total bigint,
											   OUT period_start timestamptz)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_stat_tenants';
COMMENT ON FUNCTION shardext.stat_tenants_counters()
	IS 'per-tenant statement counters (Space-Saving top-K) kept in shared memory';

CREATE VIEW shardext.stat_tenants AS
	SELECT c.colocation_id, c.table_name, c.tenant_value, c.hash_value,
		   s.shardid AS shard_id, p.nodeid AS node_id, n.host AS node_host, n.port AS node_port,
		   c.read_count, c.write_count, c.read_count + c.write_count AS statements,
		   c.count_error,
		   round(100.0 * (c.read_count + c.write_count) / nullif(c.period_total, 0), 2)
			   AS share_percent,
		   round(c.elapsed_ms::numeric, 3) AS elapsed_ms,
		   c.prev_read_count, c.prev_write_count,
		   c.prev_read_count + c.prev_write_count AS prev_statements,
		   c.prev_count_error,
		   round(100.0 * (c.prev_read_count + c.prev_write_count) / nullif(c.prev_period_total, 0), 2)
			   AS prev_share_percent,
		   round(c.prev_elapsed_ms::numeric, 3) AS prev_elapsed_ms,
		   c.period_start
	FROM shardext.stat_tenants_counters() c
	LEFT JOIN shardext.shard s ON s.logicalrelid = c.table_name
		 AND c.hash_value BETWEEN s.hash_min AND s.hash_max
	LEFT JOIN LATERAL (SELECT min(nodeid) AS nodeid FROM shardext.placement pl
					   WHERE pl.shardid = s.shardid) p ON true
	LEFT JOIN shardext.node n ON n.nodeid = p.nodeid
	ORDER BY statements DESC, prev_statements DESC, c.colocation_id, c.hash_value;
COMMENT ON VIEW shardext.stat_tenants
	IS 'the busiest distribution column values (tenants) of single-shard statements, this period and the previous one';
GRANT SELECT ON shardext.stat_tenants TO PUBLIC;

CREATE FUNCTION pg_catalog.shardext_stat_tenants_reset()
	RETURNS void
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'shardext_stat_tenants_reset';
COMMENT ON FUNCTION pg_catalog.shardext_stat_tenants_reset()
	IS 'forgets every tenant of shardext.stat_tenants and starts a new period';
REVOKE ALL ON FUNCTION pg_catalog.shardext_stat_tenants_reset() FROM PUBLIC;

-- splits that isolate a tenant cut a range in up to three pieces: the last
-- hash value of each piece but the last (split_point stays the first one)
ALTER TABLE shardext.move ADD COLUMN split_points int4[];

CREATE FUNCTION pg_catalog.shardext_isolate_tenant(table_name regclass, tenant_value text,
												   target_node_id int DEFAULT NULL,
												   mode text DEFAULT 'online')
	RETURNS bigint
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'shardext_isolate_tenant';
COMMENT ON FUNCTION pg_catalog.shardext_isolate_tenant(regclass, text, int, text)
	IS 'give a distribution column value a shard of its own (split online, with its co-located shards), optionally moved to another node; returns the new shard id';
REVOKE ALL ON FUNCTION pg_catalog.shardext_isolate_tenant(regclass, text, int, text) FROM PUBLIC;
