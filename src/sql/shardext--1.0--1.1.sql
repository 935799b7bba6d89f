-- shardext 1.0 -> 1.1.
--
-- A fresh CREATE EXTENSION of 1.1 runs shardext--1.0.sql and then this file
-- (there is deliberately no shardext--1.1.sql), so a fresh install and an
-- upgraded one end up with the same objects by construction.  Each section
-- below belongs to one feature; keep new objects in the section of theirs.
\echo Use "ALTER EXTENSION shardext UPDATE TO '1.1'" to load this file. \quit

-- ==== many clients: shared connection pool (issue 12) ====

-- connections to each node address held by all sessions of this coordinator
CREATE FUNCTION shardext.connection_stats_counters(OUT node_host text, OUT node_port int,
												   OUT connections int, OUT waiting int,
												   OUT max_connections int, OUT waits bigint,
												   OUT wait_timeouts bigint,
												   OUT session_connections int)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_connection_stats';
COMMENT ON FUNCTION shardext.connection_stats_counters()
	IS 'per-node connection counts of the shared pool, kept in shared memory';

CREATE VIEW shardext.connection_stats AS
	SELECT n.nodeid AS node_id, c.node_host, c.node_port, c.connections, c.waiting,
		   c.max_connections, c.waits, c.wait_timeouts, c.session_connections
	FROM shardext.connection_stats_counters() c
	LEFT JOIN shardext.node n ON n.host = c.node_host AND n.port = c.node_port
	ORDER BY n.nodeid, c.node_host, c.node_port;
COMMENT ON VIEW shardext.connection_stats IS 'connections to each node held by all sessions of this coordinator (all databases) and by this session, sessions waiting for one, and the limit (shardext.max_shared_pool_size)';
GRANT SELECT ON shardext.connection_stats TO PUBLIC;
