-- Node management

CREATE FUNCTION pg_catalog.shardext_add_node(host text, port int, weight float8 DEFAULT 1.0)
	RETURNS int
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_add_node';
COMMENT ON FUNCTION pg_catalog.shardext_add_node(text, int, float8)
	IS 'register a worker node and return its node id';
REVOKE ALL ON FUNCTION pg_catalog.shardext_add_node(text, int, float8) FROM PUBLIC;

CREATE FUNCTION pg_catalog.shardext_remove_node(host text, port int)
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_remove_node';
COMMENT ON FUNCTION pg_catalog.shardext_remove_node(text, int)
	IS 'unregister a worker node that holds no shard placements';
REVOKE ALL ON FUNCTION pg_catalog.shardext_remove_node(text, int) FROM PUBLIC;

CREATE FUNCTION pg_catalog.shardext_set_node_weight(host text, port int, weight float8)
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_set_node_weight';
COMMENT ON FUNCTION pg_catalog.shardext_set_node_weight(text, int, float8)
	IS 'change the share of new shards a node receives';
REVOKE ALL ON FUNCTION pg_catalog.shardext_set_node_weight(text, int, float8) FROM PUBLIC;

-- called by a coordinator on a worker when the worker is added
CREATE FUNCTION shardext.worker_register(coordinator_id text, node_id int)
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_worker_register';
COMMENT ON FUNCTION shardext.worker_register(text, int)
	IS 'record on a worker which coordinator database it serves';
REVOKE ALL ON FUNCTION shardext.worker_register(text, int) FROM PUBLIC;

CREATE VIEW shardext.nodes AS
	SELECT n.nodeid AS node_id, n.host AS node_host, n.port AS node_port,
		   n.weight, n.active,
		   (SELECT count(*) FROM shardext.placement p WHERE p.nodeid = n.nodeid) AS placement_count
	FROM shardext.node n
	ORDER BY n.nodeid;
COMMENT ON VIEW shardext.nodes IS 'worker nodes and how many shard placements each holds';
GRANT SELECT ON shardext.nodes TO PUBLIC;

-- called by a coordinator on a worker when the worker is removed
CREATE FUNCTION shardext.worker_unregister(coordinator_id text)
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_worker_unregister';
COMMENT ON FUNCTION shardext.worker_unregister(text)
	IS 'forget on a worker the coordinator database it served';
REVOKE ALL ON FUNCTION shardext.worker_unregister(text) FROM PUBLIC;

CREATE FUNCTION pg_catalog.shardext_run_on_nodes(command text,
												 OUT node_id int, OUT node_host text,
												 OUT node_port int, OUT success bool,
												 OUT result text)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_run_on_nodes';
COMMENT ON FUNCTION pg_catalog.shardext_run_on_nodes(text)
	IS 'run a command on every registered node, in its own transaction, and return each result';
REVOKE ALL ON FUNCTION pg_catalog.shardext_run_on_nodes(text) FROM PUBLIC;

CREATE FUNCTION pg_catalog.shardext_run_on_shards(table_name regclass, command text,
												  OUT shard_id bigint, OUT node_id int,
												  OUT success bool, OUT result text)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_run_on_shards';
COMMENT ON FUNCTION pg_catalog.shardext_run_on_shards(regclass, text)
	IS 'run a command on every shard placement of a table, %s standing for the shard name';
REVOKE ALL ON FUNCTION pg_catalog.shardext_run_on_shards(regclass, text) FROM PUBLIC;
