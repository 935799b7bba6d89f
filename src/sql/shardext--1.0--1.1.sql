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
-- ==== read replicas (issue 10) ====
-- A replica is a physical streaming standby of a worker: a row of
-- shardext.node with primary_nodeid set (the node it replicates), so that
-- it has a node id of its own and connections to it go through the same
-- connection cache.  Replicas never hold placements: placement logic only
-- sees primaries.
ALTER TABLE shardext.node ADD COLUMN primary_nodeid int REFERENCES shardext.node (nodeid);
ALTER TABLE shardext.node ADD CONSTRAINT node_primary_not_self CHECK (primary_nodeid <> nodeid);
CREATE INDEX node_primary_nodeid_idx ON shardext.node (primary_nodeid);

-- The key that makes causal tokens (shardext_causal_token()) tamper-evident.
-- It never leaves the coordinator: not readable by PUBLIC, and not dumped
-- (a restored database gets a new key; old tokens then fail to validate).
CREATE TABLE shardext.token_secret (
	only_row bool NOT NULL DEFAULT true PRIMARY KEY CHECK (only_row),
	secret bytea NOT NULL
);
INSERT INTO shardext.token_secret (secret)
	SELECT decode(replace(pg_catalog.gen_random_uuid()::text || pg_catalog.gen_random_uuid()::text,
						  '-', ''), 'hex');
REVOKE ALL ON shardext.token_secret FROM PUBLIC;

CREATE FUNCTION pg_catalog.shardext_add_replica(host text, port int,
												primary_host text, primary_port int)
	RETURNS int
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_add_replica';
COMMENT ON FUNCTION pg_catalog.shardext_add_replica(text, int, text, int)
	IS 'register a streaming standby of a worker as a read replica and return its node id';
REVOKE ALL ON FUNCTION pg_catalog.shardext_add_replica(text, int, text, int) FROM PUBLIC;

CREATE FUNCTION pg_catalog.shardext_remove_replica(host text, port int)
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_remove_replica';
COMMENT ON FUNCTION pg_catalog.shardext_remove_replica(text, int)
	IS 'unregister a read replica';
REVOKE ALL ON FUNCTION pg_catalog.shardext_remove_replica(text, int) FROM PUBLIC;

CREATE FUNCTION pg_catalog.shardext_promote_replica(host text, port int,
													wait_seconds int DEFAULT 60)
	RETURNS int
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_promote_replica';
COMMENT ON FUNCTION pg_catalog.shardext_promote_replica(text, int, int)
	IS 'promote a read replica and make it the primary of its node; returns the node id';
REVOKE ALL ON FUNCTION pg_catalog.shardext_promote_replica(text, int, int) FROM PUBLIC;

CREATE FUNCTION pg_catalog.shardext_update_node(node_id int, host text, port int)
	RETURNS void
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_update_node';
COMMENT ON FUNCTION pg_catalog.shardext_update_node(int, text, int)
	IS 'point a node at another server (after a promotion done by an external tool)';
REVOKE ALL ON FUNCTION pg_catalog.shardext_update_node(int, text, int) FROM PUBLIC;

CREATE FUNCTION pg_catalog.shardext_causal_token()
	RETURNS text
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_causal_token';
COMMENT ON FUNCTION pg_catalog.shardext_causal_token()
	IS 'a token covering this session''s writes; SET shardext.read_after to it makes another session see them';

-- runs on a replica, ahead of a read that must see a given LSN
CREATE PROCEDURE shardext.wait_for_replay_lsn(target_lsn pg_lsn, timeout_ms int)
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'shardext_wait_for_replay_lsn';
COMMENT ON PROCEDURE shardext.wait_for_replay_lsn(pg_lsn, int)
	IS 'wait until this standby has replayed target_lsn, or fail after timeout_ms';

CREATE FUNCTION shardext.replica_status(OUT node_id int, OUT primary_node_id int,
										OUT healthy bool, OUT replay_lsn pg_lsn,
										OUT replay_lag interval, OUT last_poll timestamptz,
										OUT replica_reads bigint, OUT fallbacks bigint,
										OUT primary_reads bigint)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_replica_status';
COMMENT ON FUNCTION shardext.replica_status()
	IS 'what the maintenance daemon last saw of each node with replicas, and read counters';

CREATE OR REPLACE VIEW shardext.nodes AS
	SELECT n.nodeid AS node_id, n.host AS node_host, n.port AS node_port,
		   n.weight, n.active,
		   (SELECT count(*) FROM shardext.placement p WHERE p.nodeid = n.nodeid) AS placement_count,
		   CASE WHEN n.primary_nodeid IS NULL THEN 'primary' ELSE 'replica' END AS role,
		   n.primary_nodeid AS primary_node_id,
		   s.replay_lag
	FROM shardext.node n
	LEFT JOIN shardext.replica_status() s
		   ON s.node_id = n.nodeid AND n.primary_nodeid IS NOT NULL
	ORDER BY n.nodeid;
COMMENT ON VIEW shardext.nodes IS 'worker nodes and their replicas: role, how many shard placements each holds, replay lag';

CREATE VIEW shardext.stat_replicas AS
	SELECT n.nodeid AS node_id, n.host AS node_host, n.port AS node_port,
		   n.primary_nodeid AS primary_node_id, n.active,
		   coalesce(s.healthy, false) AS healthy, s.replay_lsn, s.replay_lag, s.last_poll,
		   coalesce(s.replica_reads, 0) AS replica_reads,
		   coalesce(s.fallbacks, 0) AS fallbacks,
		   coalesce(p.primary_reads, 0) AS primary_reads
	FROM shardext.node n
	LEFT JOIN shardext.replica_status() s ON s.node_id = n.nodeid
	LEFT JOIN shardext.replica_status() p ON p.node_id = n.primary_nodeid
	WHERE n.primary_nodeid IS NOT NULL
	ORDER BY n.primary_nodeid, n.nodeid;
COMMENT ON VIEW shardext.stat_replicas IS 'read replicas: health, replay position and lag, reads they served and reads that fell back to the primary';
GRANT SELECT ON shardext.stat_replicas TO PUBLIC;

GRANT EXECUTE ON FUNCTION
	pg_catalog.shardext_add_replica(text, int, text, int),
	pg_catalog.shardext_remove_replica(text, int),
	pg_catalog.shardext_promote_replica(text, int, int),
	pg_catalog.shardext_update_node(int, text, int)
	TO shardext_admin;
