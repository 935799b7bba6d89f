-- shardext 1.0, as released (commit 6d8126d).  Never edit this file: every change
-- after 1.0 goes into an upgrade script (shardext--1.0--1.1.sql, ...).
\echo Use "CREATE EXTENSION shardext" to load this file. \quit

-- 00_catalog.sql
-- Catalog tables of shardext.  They live in schema shardext, belong to the
-- extension, and those that hold user data are dumped by pg_dump as
-- extension configuration.

CREATE SCHEMA shardext;
GRANT USAGE ON SCHEMA shardext TO PUBLIC;

-- worker nodes known to this coordinator database
CREATE SEQUENCE shardext.node_nodeid_seq MINVALUE 1 MAXVALUE 1023 NO CYCLE;
CREATE TABLE shardext.node (
	nodeid int NOT NULL DEFAULT nextval('shardext.node_nodeid_seq') PRIMARY KEY,
	host text NOT NULL,
	port int NOT NULL CHECK (port BETWEEN 1 AND 65535),
	weight float8 NOT NULL DEFAULT 1.0 CHECK (weight > 0 AND weight <= 1000),
	active bool NOT NULL DEFAULT true,
	UNIQUE (host, port)
);
ALTER SEQUENCE shardext.node_nodeid_seq OWNED BY shardext.node.nodeid;

-- groups of tables whose shards share hash ranges and nodes
CREATE SEQUENCE shardext.colocation_colocationid_seq MINVALUE 1;
CREATE TABLE shardext.colocation (
	colocationid int NOT NULL DEFAULT nextval('shardext.colocation_colocationid_seq') PRIMARY KEY,
	shard_count int NOT NULL CHECK (shard_count > 0),
	dist_type regtype,			-- NULL for the reference table group
	dist_collation oid NOT NULL DEFAULT 0
);
ALTER SEQUENCE shardext.colocation_colocationid_seq OWNED BY shardext.colocation.colocationid;

-- distributed and reference tables
CREATE TABLE shardext.dist_table (
	logicalrelid regclass NOT NULL PRIMARY KEY,
	method "char" NOT NULL CHECK (method IN ('h', 'r')),
	dist_attnum int2,			-- NULL for reference tables
	colocationid int NOT NULL REFERENCES shardext.colocation,
	CHECK ((method = 'h') = (dist_attnum IS NOT NULL))
);
CREATE INDEX dist_table_colocationid_idx ON shardext.dist_table (colocationid);

-- shards: hash ranges [hash_min, hash_max], both inclusive; NULL for reference
CREATE SEQUENCE shardext.shard_shardid_seq MINVALUE 1 START 102008;
CREATE TABLE shardext.shard (
	shardid bigint NOT NULL PRIMARY KEY,
	logicalrelid regclass NOT NULL REFERENCES shardext.dist_table ON DELETE CASCADE,
	hash_min int4,
	hash_max int4,
	CHECK ((hash_min IS NULL) = (hash_max IS NULL)),
	CHECK (hash_min <= hash_max)
);
CREATE INDEX shard_logicalrelid_idx ON shardext.shard (logicalrelid);
ALTER SEQUENCE shardext.shard_shardid_seq OWNED BY shardext.shard.shardid;

-- where each shard lives
CREATE TABLE shardext.placement (
	shardid bigint NOT NULL REFERENCES shardext.shard ON DELETE CASCADE,
	nodeid int NOT NULL REFERENCES shardext.node,
	PRIMARY KEY (shardid, nodeid)
);
CREATE INDEX placement_nodeid_idx ON shardext.placement (nodeid);

-- commit records of two-phase commits (one row per prepared remote transaction)
CREATE TABLE shardext.transaction (
	gid text NOT NULL PRIMARY KEY,
	nodeid int NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);

-- on a worker: which coordinator database this database serves
CREATE TABLE shardext.local_identity (
	only_row bool NOT NULL DEFAULT true PRIMARY KEY CHECK (only_row),
	coordinator_id text NOT NULL,
	node_id int NOT NULL
);

SELECT pg_catalog.pg_extension_config_dump('shardext.node', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.node_nodeid_seq', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.colocation', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.colocation_colocationid_seq', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.dist_table', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.shard', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.shard_shardid_seq', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.placement', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.transaction', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.local_identity', '');

GRANT SELECT ON ALL TABLES IN SCHEMA shardext TO PUBLIC;

-- 10_nodes.sql
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

-- 20_tables.sql
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

-- 30_transactions.sql
-- Distributed transactions: recovery of in-doubt two-phase commits

CREATE FUNCTION pg_catalog.shardext_recover_prepared_transactions()
	RETURNS int
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_recover_prepared_transactions';
COMMENT ON FUNCTION pg_catalog.shardext_recover_prepared_transactions()
	IS 'commit or roll back the prepared transactions this coordinator left on the nodes; returns how many';
REVOKE ALL ON FUNCTION pg_catalog.shardext_recover_prepared_transactions() FROM PUBLIC;

-- 40_planner.sql
-- Distributed planner and executor: the combine step's helpers and the
-- per-shard statistics.

-- placeholder for the rows of a distributed query's shard tasks in the
-- coordinator's combine plan; the planner replaces it, it never runs
CREATE FUNCTION shardext.distributed_result()
	RETURNS SETOF record
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'shardext_distributed_result';
COMMENT ON FUNCTION shardext.distributed_result()
	IS 'placeholder for the shard rows of a distributed query (never called)';

-- combine functions for partial aggregates computed on the shards
CREATE AGGREGATE shardext.sum_counts(int8) (
	SFUNC = pg_catalog.int8pl, STYPE = int8, INITCOND = '0',
	COMBINEFUNC = pg_catalog.int8pl, PARALLEL = SAFE
);
COMMENT ON AGGREGATE shardext.sum_counts(int8)
	IS 'adds per-shard counts (0 for no rows, like count)';

CREATE AGGREGATE shardext.sum_int8(int8) (
	SFUNC = pg_catalog.int8pl, STYPE = int8,
	COMBINEFUNC = pg_catalog.int8pl, PARALLEL = SAFE
);
COMMENT ON AGGREGATE shardext.sum_int8(int8)
	IS 'adds per-shard int8 sums (NULL for no rows, like sum)';

CREATE AGGREGATE shardext.array_cat_agg(anycompatiblearray) (
	SFUNC = pg_catalog.array_cat, STYPE = anycompatiblearray
);
COMMENT ON AGGREGATE shardext.array_cat_agg(anycompatiblearray)
	IS 'concatenates per-shard array_agg results';

CREATE AGGREGATE shardext.jsonb_cat_agg(jsonb) (
	SFUNC = pg_catalog.jsonb_concat, STYPE = jsonb
);
COMMENT ON AGGREGATE shardext.jsonb_cat_agg(jsonb)
	IS 'concatenates per-shard jsonb_agg results';

-- statements routed to each shard since the last reset
CREATE FUNCTION shardext.stat_shards_counters(OUT shard_id bigint, OUT queries bigint,
											  OUT since timestamptz)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_stat_shards';
COMMENT ON FUNCTION shardext.stat_shards_counters()
	IS 'per-shard statement counters kept in shared memory';

CREATE VIEW shardext.stat_shards AS
	SELECT c.shard_id, s.logicalrelid AS table_name, p.nodeid AS node_id,
		   n.host AS node_host, n.port AS node_port, c.queries, c.since
	FROM shardext.stat_shards_counters() c
	JOIN shardext.shard s ON s.shardid = c.shard_id
	LEFT JOIN LATERAL (SELECT min(nodeid) AS nodeid FROM shardext.placement pl
					   WHERE pl.shardid = c.shard_id) p ON true
	LEFT JOIN shardext.node n ON n.nodeid = p.nodeid
	ORDER BY c.queries DESC, c.shard_id;
COMMENT ON VIEW shardext.stat_shards IS 'statements routed to each shard since the last reset: hot shards first';
GRANT SELECT ON shardext.stat_shards TO PUBLIC;

CREATE FUNCTION pg_catalog.shardext_stat_shards_reset()
	RETURNS void
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'shardext_stat_shards_reset';
COMMENT ON FUNCTION pg_catalog.shardext_stat_shards_reset()
	IS 'sets the per-shard statement counters of shardext.stat_shards to zero';
REVOKE ALL ON FUNCTION pg_catalog.shardext_stat_shards_reset() FROM PUBLIC;

-- placeholder for the rows of a separately planned part (subquery, CTE,
-- set operation branch) of a query; the planner replaces it
CREATE FUNCTION shardext.distributed_subplan(part int)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_distributed_result';
COMMENT ON FUNCTION shardext.distributed_subplan(int)
	IS 'placeholder for the rows of a separately planned part of a distributed query (never called)';

-- json_agg results of the shards, concatenated into one JSON array with
-- json_agg's own formatting ("[a, b]")
CREATE FUNCTION shardext.json_cat_step(state text, part json)
	RETURNS text
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$ SELECT CASE WHEN part IS NULL THEN state
					  WHEN state IS NULL THEN part::text
					  ELSE left(state, -1) || ', ' || substr(part::text, 2) END $$;
COMMENT ON FUNCTION shardext.json_cat_step(text, json)
	IS 'adds one shard''s json_agg result to the concatenation';
CREATE FUNCTION shardext.json_cat_final(state text)
	RETURNS json
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$ SELECT state::json $$;
COMMENT ON FUNCTION shardext.json_cat_final(text)
	IS 'the concatenated json_agg result';
CREATE AGGREGATE shardext.json_cat_agg(json) (
	SFUNC = shardext.json_cat_step, STYPE = text, FINALFUNC = shardext.json_cat_final
);
COMMENT ON AGGREGATE shardext.json_cat_agg(json)
	IS 'concatenates per-shard json_agg results';

-- variance and standard deviation from per-shard count, sum and sum of
-- squares (exact numerics), with the arithmetic of PostgreSQL's own
-- numeric_stddev_internal: (N * sum(x^2) - sum(x)^2) / (N * (N - 1)), or
-- N * N for the population forms, 0 when the numerator is not positive
CREATE FUNCTION shardext.combine_variance(n int8, s numeric, q numeric,
										  sample bool, root bool)
	RETURNS numeric
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$
	SELECT CASE WHEN v IS NULL OR NOT root OR v = 0 THEN v
				ELSE round(sqrt(v + ('0.' || repeat('0', scale(v) + 20) || '1')::numeric
								- ('0.' || repeat('0', scale(v) + 20) || '1')::numeric),
						   scale(v)) END
	FROM (SELECT CASE
			WHEN n IS NULL OR n = 0 OR (sample AND n = 1) THEN NULL
			WHEN n::numeric * q - s * s <= 0 THEN 0::numeric
			ELSE (n::numeric * q - s * s) /
				 (n::numeric * (CASE WHEN sample THEN n - 1 ELSE n END))
			END AS v) x
	$$;
COMMENT ON FUNCTION shardext.combine_variance(int8, numeric, numeric, bool, bool)
	IS 'variance or standard deviation from per-shard count, sum and sum of squares';

-- 50_moves.sql
-- Shard moves, splits and the rebalancer.
--
-- A move or split is a long operation that runs over its own connections to
-- the nodes and records every step in shardext.move and
-- shardext.cleanup_record, written by autonomous transactions (a loopback
-- connection to this database), so that whatever interrupts it -- a cancel,
-- an error, a crash of the coordinator or of a node -- leaves a record of
-- what to remove.  shardext_cleanup() removes it.

-- one row per shard move or split (a rebalance is a job of several moves)
CREATE TABLE shardext.move (
	move_id bigserial PRIMARY KEY,
	job_id bigint NOT NULL,
	operation text NOT NULL CHECK (operation IN ('move', 'split')),
	mode text NOT NULL CHECK (mode IN ('online', 'block_writes')),
	relid oid NOT NULL,				-- first table of the colocation group
	shard_ids bigint[] NOT NULL,	-- the shard group, in shard id order
	source_node_id int NOT NULL,
	target_node_id int NOT NULL,
	split_point int4,				-- splits: last hash value of the lower half
	new_shard_ids bigint[],			-- splits: lower halves, then upper halves
	status text NOT NULL DEFAULT 'pending'
		CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled')),
	phase text,
	owner_pid int,
	owner_start timestamptz,
	total_bytes bigint,
	rows_copied bigint NOT NULL DEFAULT 0,
	bytes_copied bigint NOT NULL DEFAULT 0,
	replication_lag_bytes bigint,
	created_at timestamptz NOT NULL DEFAULT now(),
	started_at timestamptz,
	phase_started_at timestamptz,
	finished_at timestamptz,
	error text
);
CREATE INDEX move_job_id_idx ON shardext.move (job_id);

-- what a move or split created and must remove: 'always' once it ended,
-- 'on_failure' if it did not commit, 'deferred' once no transaction older
-- than the record runs on the coordinator (the source of a finished move)
CREATE TABLE shardext.cleanup_record (
	record_id bigserial PRIMARY KEY,
	move_id bigint NOT NULL,
	node_id int NOT NULL,
	object_type text NOT NULL
		CHECK (object_type IN ('subscription', 'replication_slot', 'publication',
							   'marker', 'replica_identity', 'table')),
	object_name text NOT NULL,		-- quoted, qualified where it applies
	shard_id bigint,				-- tables: the shard whose table it is
	restore text,					-- replica identities: the setting to restore
	policy text NOT NULL CHECK (policy IN ('always', 'on_failure', 'deferred')),
	created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX cleanup_record_move_id_idx ON shardext.cleanup_record (move_id);

GRANT SELECT ON shardext.move, shardext.cleanup_record TO PUBLIC;

-- On every node: a row inserted on the source while writes are paused and
-- replicated to the target tells that the target has applied everything
-- before it.  Splits replicate it into move_marker_applied instead, because
-- their target may be the source node itself.
CREATE TABLE shardext.move_marker (
	move_id bigint NOT NULL,
	seq int NOT NULL,
	PRIMARY KEY (move_id, seq)
);
CREATE TABLE shardext.move_marker_applied (
	move_id bigint NOT NULL,
	seq int NOT NULL,
	PRIMARY KEY (move_id, seq)
);

CREATE FUNCTION pg_catalog.shardext_move_shard(shard_id bigint, target_node_id int,
											   mode text DEFAULT 'online')
	RETURNS void
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'shardext_move_shard';
COMMENT ON FUNCTION pg_catalog.shardext_move_shard(bigint, int, text)
	IS 'move a shard and the shards co-located with it to another node, online or blocking writes';
REVOKE ALL ON FUNCTION pg_catalog.shardext_move_shard(bigint, int, text) FROM PUBLIC;

CREATE FUNCTION pg_catalog.shardext_split_shard(shard_id bigint, target_node_id int DEFAULT NULL)
	RETURNS bigint[]
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'shardext_split_shard';
COMMENT ON FUNCTION pg_catalog.shardext_split_shard(bigint, int)
	IS 'split the hash range of a shard and its co-located shards in two, online; returns the new shard ids of the table';
REVOKE ALL ON FUNCTION pg_catalog.shardext_split_shard(bigint, int) FROM PUBLIC;

CREATE FUNCTION pg_catalog.shardext_rebalance_plan(strategy text DEFAULT 'by_shard_count',
												   OUT shard_id bigint,
												   OUT source_node_id int,
												   OUT source_node_port int,
												   OUT target_node_id int,
												   OUT target_node_port int,
												   OUT table_name regclass,
												   OUT colocated_shards int,
												   OUT shard_group_bytes bigint)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_rebalance_plan';
COMMENT ON FUNCTION pg_catalog.shardext_rebalance_plan(text)
	IS 'the shard moves that would balance shard groups (by_shard_count) or bytes (by_disk_size) across active nodes by weight';

CREATE FUNCTION pg_catalog.shardext_rebalance(strategy text DEFAULT 'by_shard_count',
											  mode text DEFAULT 'online')
	RETURNS int
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_rebalance';
COMMENT ON FUNCTION pg_catalog.shardext_rebalance(text, text)
	IS 'execute the rebalance plan move by move; returns the number of moves made';
REVOKE ALL ON FUNCTION pg_catalog.shardext_rebalance(text, text) FROM PUBLIC;

CREATE FUNCTION pg_catalog.shardext_drain_node(host text, port int, mode text DEFAULT 'online')
	RETURNS int
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_drain_node';
COMMENT ON FUNCTION pg_catalog.shardext_drain_node(text, int, text)
	IS 'move every shard off a node so that it can be removed; returns the number of moves made';
REVOKE ALL ON FUNCTION pg_catalog.shardext_drain_node(text, int, text) FROM PUBLIC;

CREATE FUNCTION pg_catalog.shardext_cleanup()
	RETURNS int
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_cleanup';
COMMENT ON FUNCTION pg_catalog.shardext_cleanup()
	IS 'remove what interrupted or finished moves and splits left on the nodes; returns the number of objects removed';
REVOKE ALL ON FUNCTION pg_catalog.shardext_cleanup() FROM PUBLIC;

CREATE FUNCTION pg_catalog.shardext_cancel_rebalance()
	RETURNS int
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_cancel_rebalance';
COMMENT ON FUNCTION pg_catalog.shardext_cancel_rebalance()
	IS 'cancel the running moves, splits and rebalances of this database; returns how many sessions were signalled';
REVOKE ALL ON FUNCTION pg_catalog.shardext_cancel_rebalance() FROM PUBLIC;

-- called over the loopback connection of a move, in the transaction that
-- holds the cutover locks
CREATE FUNCTION shardext.move_lock_shards(shard_ids bigint[])
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_move_lock_shards';
COMMENT ON FUNCTION shardext.move_lock_shards(bigint[])
	IS 'take the cutover locks of a shard group (blocks writes through the coordinator)';
REVOKE ALL ON FUNCTION shardext.move_lock_shards(bigint[]) FROM PUBLIC;

CREATE FUNCTION shardext.move_commit_placements(move_id bigint)
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_move_commit_placements';
COMMENT ON FUNCTION shardext.move_commit_placements(bigint)
	IS 'switch the catalog of a shard group to the result of a move or split';
REVOKE ALL ON FUNCTION shardext.move_commit_placements(bigint) FROM PUBLIC;

CREATE FUNCTION shardext.backend_is_alive(pid int, backend_start timestamptz)
	RETURNS bool
	LANGUAGE C STRICT VOLATILE
	AS 'MODULE_PATHNAME', 'shardext_backend_is_alive';
COMMENT ON FUNCTION shardext.backend_is_alive(int, timestamptz)
	IS 'whether the server process that started at backend_start still runs';

-- run on the nodes
CREATE FUNCTION shardext.worker_free_disk_bytes()
	RETURNS bigint
	LANGUAGE C STRICT VOLATILE
	AS 'MODULE_PATHNAME', 'shardext_worker_free_disk_bytes';
COMMENT ON FUNCTION shardext.worker_free_disk_bytes()
	IS 'bytes available to the server on the file system of its data directory';
REVOKE ALL ON FUNCTION shardext.worker_free_disk_bytes() FROM PUBLIC;

CREATE FUNCTION shardext.worker_hash_value(anyelement)
	RETURNS int4
	LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'shardext_worker_hash_value';
COMMENT ON FUNCTION shardext.worker_hash_value(anyelement)
	IS 'the hash shardext uses to place a distribution column value (the type''s standard hash, with the input collation)';

CREATE VIEW shardext.rebalance_progress AS
	SELECT m.job_id, m.move_id, m.operation,
		   m.shard_ids[1] AS shard_id,
		   m.relid::regclass AS table_name,
		   cardinality(m.shard_ids) AS colocated_shards,
		   m.source_node_id, sn.host AS source_host, sn.port AS source_port,
		   m.target_node_id, tn.host AS target_host, tn.port AS target_port,
		   m.mode, m.status, m.phase,
		   m.rows_copied, m.bytes_copied, m.total_bytes,
		   m.replication_lag_bytes,
		   m.started_at, m.phase_started_at,
		   m.owner_pid AS pid
	FROM shardext.move m
	LEFT JOIN shardext.node sn ON sn.nodeid = m.source_node_id
	LEFT JOIN shardext.node tn ON tn.nodeid = m.target_node_id
	WHERE EXISTS (SELECT 1 FROM shardext.move j
				  WHERE j.job_id = m.job_id AND j.status IN ('pending', 'running')
					AND shardext.backend_is_alive(j.owner_pid, j.owner_start))
	ORDER BY m.job_id, m.move_id;
COMMENT ON VIEW shardext.rebalance_progress
	IS 'the moves and splits running now, with the rest of their rebalance: phase, rows and bytes copied, replication lag';
GRANT SELECT ON shardext.rebalance_progress TO PUBLIC;

-- 50_snowflake.sql
-- Snowflake ids: time-ordered bigint ids, unique across the nodes of a cluster

-- Parallel safe: parallel workers draw from the same shared-memory state as
-- their leader, so their ids are unique too; it writes no database state.
CREATE FUNCTION pg_catalog.snowflake_id()
	RETURNS bigint
	LANGUAGE C VOLATILE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'snowflake_id';
COMMENT ON FUNCTION pg_catalog.snowflake_id()
	IS 'generate a unique, time-ordered bigint id (41 bits ms, 10 bits node, 12 bits sequence)';

CREATE FUNCTION pg_catalog.snowflake_node_id()
	RETURNS int
	LANGUAGE C VOLATILE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'snowflake_node_id';
COMMENT ON FUNCTION pg_catalog.snowflake_node_id()
	IS 'node id that snowflake_id() puts into the ids of this server';

CREATE FUNCTION pg_catalog.snowflake_parse(id bigint,
										   OUT created_at timestamptz,
										   OUT node_id int,
										   OUT sequence int)
	RETURNS record
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'snowflake_parse';
COMMENT ON FUNCTION pg_catalog.snowflake_parse(bigint)
	IS 'split a snowflake id into creation time (ms precision), node id and sequence number';

CREATE FUNCTION pg_catalog.snowflake_from_time(ts timestamptz)
	RETURNS bigint
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'snowflake_from_time';
COMMENT ON FUNCTION pg_catalog.snowflake_from_time(timestamptz)
	IS 'smallest snowflake id of the millisecond of a time, for time-range filters on id columns';
