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

-- ==== self-healing: failover, fencing, restore points (issue 24) ====
-- Fencing (src/connection/fencing.c): the system identifier and timeline of
-- the server each worker's primary runs on, recorded when it is added or
-- takes the node over and checked by every new connection, so that an old
-- primary that a failover replaced never receives another write; and the
-- mark of that old primary's record, which stays until it is a standby of
-- the node again.
ALTER TABLE shardext.node ADD COLUMN system_identifier bigint;
ALTER TABLE shardext.node ADD COLUMN timeline int;
ALTER TABLE shardext.node ADD COLUMN needs_rebuild bool NOT NULL DEFAULT false;

-- what the maintenance daemon's probes last saw of each node (node_health.c)
CREATE FUNCTION shardext.node_health(OUT node_id int, OUT health text,
									 OUT health_since timestamptz, OUT last_probe timestamptz,
									 OUT detail text)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_node_health';
COMMENT ON FUNCTION shardext.node_health()
	IS 'what the maintenance daemon''s probes last saw of each node: up, slow, unreachable, fenced';

CREATE OR REPLACE VIEW shardext.nodes AS
	SELECT n.nodeid AS node_id, n.host AS node_host, n.port AS node_port,
		   n.weight, n.active,
		   (SELECT count(*) FROM shardext.placement p WHERE p.nodeid = n.nodeid) AS placement_count,
		   CASE WHEN n.primary_nodeid IS NULL THEN 'primary' ELSE 'replica' END AS role,
		   n.primary_nodeid AS primary_node_id,
		   s.replay_lag,
		   h.health, h.health_since, h.detail AS health_detail,
		   n.needs_rebuild
	FROM shardext.node n
	LEFT JOIN shardext.replica_status() s
		   ON s.node_id = n.nodeid AND n.primary_nodeid IS NOT NULL
	LEFT JOIN shardext.node_health() h ON h.node_id = n.nodeid
	ORDER BY n.nodeid;
COMMENT ON VIEW shardext.nodes IS 'worker nodes and their replicas: role, how many shard placements each holds, replay lag, health as the maintenance daemon''s probes saw it, old primaries that need a rebuild';

-- A restore point on every node at one moment of the cluster: commit
-- decisions of distributed transactions are held back while the points
-- are created, so that restoring every node to that name gives a cluster
-- where each distributed transaction is there on all its nodes or on none.
CREATE FUNCTION pg_catalog.shardext_create_restore_point(name text, OUT node_id int,
														 OUT node_host text, OUT node_port int,
														 OUT lsn pg_lsn)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_create_restore_point';
COMMENT ON FUNCTION pg_catalog.shardext_create_restore_point(text)
	IS 'create a consistent restore point of that name on the coordinator (node 0) and every worker; returns each one''s LSN';
REVOKE ALL ON FUNCTION pg_catalog.shardext_create_restore_point(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pg_catalog.shardext_create_restore_point(text) TO shardext_admin;
