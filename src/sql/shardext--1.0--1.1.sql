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

-- the rebalance plan also shows each move's effect on the load of its
-- nodes, in the strategy's unit (shard groups of the colocation group,
-- bytes, or statements for 'by_load')
DROP FUNCTION pg_catalog.shardext_rebalance_plan(text);
CREATE FUNCTION pg_catalog.shardext_rebalance_plan(strategy text DEFAULT 'by_shard_count',
												   OUT shard_id bigint,
												   OUT source_node_id int,
												   OUT source_node_port int,
												   OUT target_node_id int,
												   OUT target_node_port int,
												   OUT table_name regclass,
												   OUT colocated_shards int,
												   OUT shard_group_bytes bigint,
												   OUT shard_group_load float8,
												   OUT source_load_before float8,
												   OUT source_load_after float8,
												   OUT target_load_before float8,
												   OUT target_load_after float8)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_rebalance_plan';
COMMENT ON FUNCTION pg_catalog.shardext_rebalance_plan(text)
	IS 'the shard moves that would balance shard groups (by_shard_count), bytes (by_disk_size) or statements (by_load) across active nodes by weight, with each move''s effect on the load of its nodes';

-- administrators (see the operability section) isolate tenants and reset their statistics
GRANT EXECUTE ON FUNCTION
	pg_catalog.shardext_isolate_tenant(regclass, text, int, text),
	pg_catalog.shardext_stat_tenants_reset()
	TO shardext_admin;

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

-- ==== hot shard report (issue 13; after the read replicas, whose column it reads) ====
-- skew at a glance: each node's share of the statements routed to shards
-- (shardext.stat_shards) next to the share its weight asks for, then the
-- busiest shards and the busiest tenants (shardext.stat_tenants)
CREATE FUNCTION pg_catalog.shardext_hot_shard_report(top int DEFAULT 5,
													 OUT kind text, OUT rank int,
													 OUT node_id int, OUT node_port int,
													 OUT shard_id bigint, OUT table_name regclass,
													 OUT tenant_value text, OUT statements bigint,
													 OUT share_percent numeric,
													 OUT weight_share_percent numeric)
	RETURNS SETOF record
	LANGUAGE sql STABLE
	AS $$
	WITH s AS (SELECT st.shard_id, st.table_name, st.node_id, st.queries
			   FROM shardext.stat_shards st),
	total AS (SELECT nullif(sum(s.queries), 0) AS n FROM s),
	workers AS (SELECT * FROM shardext.node n WHERE n.primary_nodeid IS NULL),
	weights AS (SELECT sum(n.weight) AS w FROM workers n WHERE n.active),
	per_node AS (
		SELECT n.nodeid, n.port, n.active, n.weight, coalesce(sum(s.queries), 0)::bigint AS q
		FROM workers n LEFT JOIN s ON s.node_id = n.nodeid
		GROUP BY n.nodeid, n.port, n.active, n.weight),
	nodes AS (
		SELECT 'node'::text AS kind,
			   (row_number() OVER (ORDER BY p.q DESC, p.nodeid))::int AS rank,
			   p.nodeid, p.port, NULL::bigint AS shard_id, NULL::regclass AS table_name,
			   NULL::text AS tenant_value, p.q,
			   round(100.0 * p.q / total.n, 2) AS share,
			   CASE WHEN p.active THEN round((100.0 * p.weight / weights.w)::numeric, 2) END AS fair
		FROM per_node p, total, weights),
	shards AS (
		SELECT 'shard'::text, (row_number() OVER (ORDER BY s.queries DESC, s.shard_id))::int,
			   s.node_id, n.port, s.shard_id, s.table_name, NULL::text, s.queries,
			   round(100.0 * s.queries / total.n, 2), NULL::numeric
		FROM s CROSS JOIN total LEFT JOIN shardext.node n ON n.nodeid = s.node_id
		ORDER BY s.queries DESC, s.shard_id LIMIT greatest(top, 0)),
	tenants AS (
		SELECT 'tenant'::text, (row_number() OVER (ORDER BY t.statements DESC, t.hash_value))::int,
			   t.node_id, t.node_port, t.shard_id, t.table_name, t.tenant_value, t.statements,
			   t.share_percent, NULL::numeric
		FROM shardext.stat_tenants t WHERE t.statements > 0
		ORDER BY t.statements DESC, t.hash_value LIMIT greatest(top, 0))
	SELECT * FROM (SELECT * FROM nodes UNION ALL SELECT * FROM shards
				   UNION ALL SELECT * FROM tenants) r
	ORDER BY CASE r.kind WHEN 'node' THEN 1 WHEN 'shard' THEN 2 ELSE 3 END, r.rank
	$$;
COMMENT ON FUNCTION pg_catalog.shardext_hot_shard_report(int)
	IS 'share of statements per node (against the share its weight asks for), with the busiest shards and tenants';


-- ==== last-participant commit of multi-node writes (issue 11) ====

-- On a worker: the commit decisions of distributed transactions that this
-- node committed in one phase as their last participant (remote_xact.c).
-- The decider's own transaction inserts (coordinator, incarnation, xid,
-- owner, true), so the row exists exactly when that transaction committed;
-- recovery resolving the other nodes' prepared transactions inserts a
-- tombstone (committed = false) where none is, which also keeps a commit
-- that is still on its way from ever succeeding.  A coordinator
-- transaction is named by its xid and the incarnation of the coordinator
-- (an xid can come again after a crash).  Rows are keyed by the role that
-- ran the transaction: nobody can decide for another role's transactions.
CREATE TABLE shardext.commit_decision (
	coordinator text NOT NULL,		-- the gid prefix of the coordinator database
	incarnation bigint NOT NULL,	-- when the coordinator's shared memory was set up
	xid bigint NOT NULL,			-- the coordinator transaction's full xid
	owner name NOT NULL,
	committed bool NOT NULL,
	PRIMARY KEY (coordinator, incarnation, xid, owner)
);
SELECT pg_catalog.pg_extension_config_dump('shardext.commit_decision', '');
GRANT SELECT ON shardext.commit_decision TO PUBLIC;

CREATE FUNCTION shardext.record_commit_decision(coordinator text, incarnation bigint, xid bigint)
	RETURNS void LANGUAGE C STRICT VOLATILE
	AS 'MODULE_PATHNAME', 'shardext_record_commit_decision';
COMMENT ON FUNCTION shardext.record_commit_decision(text, bigint, bigint)
	IS 'on a worker: record, in the caller''s transaction, that a distributed transaction commits with it';

CREATE FUNCTION shardext.resolve_commit_decision(coordinator text, incarnation bigint, xid bigint,
												 owner name)
	RETURNS bool LANGUAGE plpgsql STRICT VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	-- waits for a decider that is still inserting; blocks it if it has not yet
	INSERT INTO shardext.commit_decision VALUES (coordinator, incarnation, xid, owner, false)
		ON CONFLICT DO NOTHING;
	RETURN (SELECT d.committed FROM shardext.commit_decision d
			WHERE d.coordinator = resolve_commit_decision.coordinator
			  AND d.incarnation = resolve_commit_decision.incarnation
			  AND d.xid = resolve_commit_decision.xid AND d.owner = resolve_commit_decision.owner);
END
$$;
COMMENT ON FUNCTION shardext.resolve_commit_decision(text, bigint, bigint, name)
	IS 'on a worker, for recovery: whether a distributed transaction committed here as its last participant (fixes it as aborted if not)';
REVOKE ALL ON FUNCTION shardext.resolve_commit_decision(text, bigint, bigint, name) FROM PUBLIC;

CREATE FUNCTION shardext.forget_commit_decisions(coordinator text, incarnation bigint,
												 below_xid bigint)
	RETURNS bigint LANGUAGE sql STRICT VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
	WITH gone AS (DELETE FROM shardext.commit_decision d
				  WHERE d.coordinator = $1
					AND (d.incarnation < $2 OR (d.incarnation = $2 AND d.xid < $3))
				  RETURNING 1)
	SELECT count(*) FROM gone
	$$;
COMMENT ON FUNCTION shardext.forget_commit_decisions(text, bigint, bigint)
	IS 'on a worker, for recovery: delete the commit decisions no prepared transaction needs any more';
REVOKE ALL ON FUNCTION shardext.forget_commit_decisions(text, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION shardext.resolve_commit_decision(text, bigint, bigint, name),
	shardext.forget_commit_decisions(text, bigint, bigint) TO shardext_admin;
