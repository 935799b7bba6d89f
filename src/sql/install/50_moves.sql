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
