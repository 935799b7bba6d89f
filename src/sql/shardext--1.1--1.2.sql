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

-- ==== corrections to what 1.1 said ====

-- since 1.1 the reset forgets this database's tenants; the period of the
-- counters (shared by every database of the server) goes on
COMMENT ON FUNCTION pg_catalog.shardext_stat_tenants_reset()
	IS 'forgets this database''s tenants of shardext.stat_tenants (the current period goes on)';

-- ==== sagas (issue 27) ====
--
-- A saga is a business transaction over several nodes made of local steps:
-- each step commits at once on its node, and each has a compensating
-- statement that undoes it when a later step fails (see README, "Sagas").
-- The coordinator keeps each saga and its progress in shardext.saga and
-- shardext.saga_action, written before and after every step in
-- transactions of their own (over a loopback connection as the saga's
-- owner, through the shardext.saga_note_* functions, which write only the
-- caller's sagas); every node keeps, in shardext.saga_step_record, one row per
-- step or compensation applied there, committed in the same local
-- transaction as the step itself, so that no step applies twice.

-- one step: a statement (or a ';'-separated list) routed to one node, its
-- parameters, the statement that undoes it there, and optional checks
CREATE TYPE shardext.saga_step AS (
	statement text,			-- runs in one local transaction on the step's node
	params text[],			-- values of $1, $2, ...: typed as the statements use them
	compensation text,		-- undoes the statement, on the same node, same parameters
	check_query text,		-- optional: one boolean, read after the statement; not true fails the step
	expect_rows bigint		-- optional: rows each statement must change (or return)
);
COMMENT ON TYPE shardext.saga_step IS 'a step of a saga: statement, parameters, compensation, optional checks';

CREATE FUNCTION pg_catalog.shardext_saga_step(statement text, compensation text DEFAULT NULL,
											  params text[] DEFAULT NULL,
											  check_query text DEFAULT NULL,
											  expect_rows bigint DEFAULT NULL)
	RETURNS shardext.saga_step LANGUAGE sql IMMUTABLE
	AS $$ SELECT ROW($1, $3, $2, $4, $5)::shardext.saga_step $$;
COMMENT ON FUNCTION pg_catalog.shardext_saga_step(text, text, text[], text, bigint)
	IS 'makes a saga step from its statement, compensation, parameters and optional checks';

CREATE TABLE shardext.saga (
	saga_id bigserial PRIMARY KEY,
	name text NOT NULL,
	owner oid NOT NULL,				-- the role that started it; steps run as this role
	steps shardext.saga_step[] NOT NULL,
	step_nodes int[] NOT NULL,		-- the node of each step when the saga was defined
	settings text[] NOT NULL,		-- search_path, DateStyle, IntervalStyle, TimeZone of the definer
	state text NOT NULL CHECK (state IN ('queued', 'running', 'completed', 'compensating',
										 'compensated', 'failed', 'abandoned')),
	current_step int NOT NULL DEFAULT 0,	-- the step being applied or compensated
	attempts int NOT NULL DEFAULT 0,		-- attempts at the current step or compensation
	next_attempt_at timestamptz,			-- a retry waits until then
	runner_pid int,							-- the session or daemon that last ran it
	failure text,							-- why it compensates: the error of the failed step
	failure_sqlstate text,
	error text,								-- the last error (of a retry or a compensation)
	created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	finished_at timestamptz
);
-- (no partial index: the log writes the table directly, see saga_log.c)
CREATE INDEX saga_state_idx ON shardext.saga (state);
SELECT pg_catalog.pg_extension_config_dump('shardext.saga', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.saga_saga_id_seq', '');

-- a step or compensation that was started: where, which attempt, how it ended
CREATE TABLE shardext.saga_action (
	saga_id bigint NOT NULL REFERENCES shardext.saga ON DELETE CASCADE,
	step int NOT NULL,
	compensation bool NOT NULL,
	node_id int NOT NULL,
	attempt int NOT NULL,
	status text NOT NULL CHECK (status IN ('started', 'applied', 'failed')),
	error text,
	started_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	finished_at timestamptz,
	PRIMARY KEY (saga_id, step, compensation)
);
SELECT pg_catalog.pg_extension_config_dump('shardext.saga_action', '');

-- on every node: the steps and compensations applied there, each committed
-- with the step; a row with applied = false is a fence that recovery wrote:
-- attempts below its attempt can no longer apply
CREATE TABLE shardext.saga_step_record (
	coordinator text NOT NULL,		-- the coordinator database (prefix of its gids)
	saga_id bigint NOT NULL,
	step int NOT NULL,
	compensation bool NOT NULL,
	owner name NOT NULL,			-- the role that ran it: no role can block another's
	attempt int NOT NULL,
	applied bool NOT NULL,
	recorded_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (coordinator, saga_id, step, compensation, owner)
);
SELECT pg_catalog.pg_extension_config_dump('shardext.saga_step_record', '');
GRANT SELECT ON shardext.saga_step_record TO PUBLIC;

CREATE FUNCTION shardext.saga_claim_step(coordinator text, saga_id bigint, step int,
										 compensation bool, attempt int)
	RETURNS void LANGUAGE plpgsql STRICT VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	done bool;
BEGIN
	-- waits for an earlier attempt that is still running, and blocks later ones
	INSERT INTO shardext.saga_step_record AS r
		VALUES (coordinator, saga_id, step, compensation, session_user, attempt, true)
		ON CONFLICT ON CONSTRAINT saga_step_record_pkey DO UPDATE
			SET applied = true, attempt = excluded.attempt, recorded_at = excluded.recorded_at
			WHERE NOT r.applied AND r.attempt <= excluded.attempt
		RETURNING true INTO done;
	IF done IS NULL THEN
		SELECT r.applied INTO done FROM shardext.saga_step_record r
		 WHERE r.coordinator = saga_claim_step.coordinator AND r.saga_id = saga_claim_step.saga_id
		   AND r.step = saga_claim_step.step AND r.compensation = saga_claim_step.compensation
		   AND r.owner = session_user;
		IF done THEN
			RAISE unique_violation USING MESSAGE = 'saga step was already applied';
		END IF;
		RAISE lock_not_available USING MESSAGE = 'saga step attempt was fenced by recovery';
	END IF;
END
$$;
COMMENT ON FUNCTION shardext.saga_claim_step(text, bigint, int, bool, int)
	IS 'on a node: record, in the caller''s transaction, that a saga step applies here (fails if it did already)';

CREATE FUNCTION shardext.saga_fence_step(coordinator text, saga_id bigint, step int,
										 compensation bool, attempt int)
	RETURNS bool LANGUAGE plpgsql STRICT VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	done bool;
BEGIN
	-- waits for an attempt that is still running; stops those not yet started
	INSERT INTO shardext.saga_step_record AS r
		VALUES (coordinator, saga_id, step, compensation, session_user, attempt, false)
		ON CONFLICT ON CONSTRAINT saga_step_record_pkey DO UPDATE
			SET attempt = greatest(r.attempt, excluded.attempt)
			WHERE NOT r.applied;
	SELECT r.applied INTO done FROM shardext.saga_step_record r
	 WHERE r.coordinator = saga_fence_step.coordinator AND r.saga_id = saga_fence_step.saga_id
	   AND r.step = saga_fence_step.step AND r.compensation = saga_fence_step.compensation
	   AND r.owner = session_user;
	RETURN done;
END
$$;
COMMENT ON FUNCTION shardext.saga_fence_step(text, bigint, int, bool, int)
	IS 'on a node, for recovery: whether a saga step applied here; if not, attempts below this one never will';

CREATE FUNCTION shardext.saga_forget_steps(coordinator text, saga_ids bigint[])
	RETURNS bigint LANGUAGE sql STRICT VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
	WITH gone AS (DELETE FROM shardext.saga_step_record r
				  WHERE r.coordinator = $1 AND r.saga_id = ANY ($2) RETURNING 1)
	SELECT count(*) FROM gone
	$$;
COMMENT ON FUNCTION shardext.saga_forget_steps(text, bigint[])
	IS 'on a node, for the maintenance daemon: delete the step records of sagas that ended long ago';
REVOKE ALL ON FUNCTION shardext.saga_forget_steps(text, bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION shardext.saga_forget_steps(text, bigint[]) TO shardext_admin;

-- on a node, inside a step's transaction: a failed check fails the step
CREATE FUNCTION shardext.saga_check(passed bool)
	RETURNS void LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF passed IS NOT TRUE THEN
		RAISE check_violation USING MESSAGE = 'saga step check failed',
			DETAIL = format('The check query of the step returned %s.',
							coalesce(passed::text, 'no row or NULL'));
	END IF;
END
$$;
COMMENT ON FUNCTION shardext.saga_check(bool)
	IS 'on a node: fails the saga step whose check query did not return true';

CREATE FUNCTION shardext.saga_expect_rows(actual bigint, expected bigint)
	RETURNS void LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF actual <> expected THEN
		RAISE cardinality_violation
			USING MESSAGE = format('saga step changed %s rows, expected %s', actual, expected);
	END IF;
END
$$;
COMMENT ON FUNCTION shardext.saga_expect_rows(bigint, bigint)
	IS 'on a node: fails the saga step whose statement did not change the expected number of rows';

-- the coordinator's log, written by the runner over a loopback connection
-- as the saga's owner: the functions write only sagas of the calling role
CREATE FUNCTION shardext.saga_note_start(saga_id bigint, name text, steps shardext.saga_step[],
										 step_nodes int[], settings text[], state text,
										 runner_pid int)
	RETURNS void LANGUAGE C STRICT VOLATILE
	AS 'MODULE_PATHNAME', 'shardext_saga_note_start';
COMMENT ON FUNCTION shardext.saga_note_start(bigint, text, shardext.saga_step[], int[], text[], text, int)
	IS 'for the saga runner: record a new saga of the calling role';

CREATE FUNCTION shardext.saga_note_action(saga_id bigint, state text, step int,
										  compensation bool, node_id int, attempt int,
										  status text, error text, runner_pid int)
	RETURNS void LANGUAGE C VOLATILE
	AS 'MODULE_PATHNAME', 'shardext_saga_note_action';
COMMENT ON FUNCTION shardext.saga_note_action(bigint, text, int, bool, int, int, text, text, int)
	IS 'for the saga runner: record that a step or compensation of a saga started or ended';

CREATE FUNCTION shardext.saga_note_state(saga_id bigint, state text, current_step int,
										 attempts int, next_attempt_at timestamptz,
										 runner_pid int, failure text, failure_sqlstate text,
										 error text)
	RETURNS void LANGUAGE C VOLATILE
	AS 'MODULE_PATHNAME', 'shardext_saga_note_state';
COMMENT ON FUNCTION shardext.saga_note_state(bigint, text, int, int, timestamptz, int, text, text, text)
	IS 'for the saga runner: record the state of a saga';

CREATE FUNCTION pg_catalog.shardext_run_saga(name text, steps shardext.saga_step[])
	RETURNS bigint LANGUAGE C STRICT VOLATILE
	AS 'MODULE_PATHNAME', 'shardext_run_saga';
COMMENT ON FUNCTION pg_catalog.shardext_run_saga(text, shardext.saga_step[])
	IS 'runs a saga now, step by step, compensating on failure; returns its id or raises the failure';

CREATE FUNCTION pg_catalog.shardext_start_saga(name text, steps shardext.saga_step[])
	RETURNS bigint LANGUAGE C STRICT VOLATILE
	AS 'MODULE_PATHNAME', 'shardext_start_saga';
COMMENT ON FUNCTION pg_catalog.shardext_start_saga(text, shardext.saga_step[])
	IS 'queues a saga for the maintenance daemon once this transaction commits; returns its id';

CREATE FUNCTION pg_catalog.shardext_retry_saga(saga_id bigint)
	RETURNS text LANGUAGE C STRICT VOLATILE
	AS 'MODULE_PATHNAME', 'shardext_retry_saga';
COMMENT ON FUNCTION pg_catalog.shardext_retry_saga(bigint)
	IS 'runs a saga that needs attention again from where it stopped; returns its new state';

CREATE FUNCTION pg_catalog.shardext_abandon_saga(saga_id bigint)
	RETURNS void LANGUAGE C STRICT VOLATILE
	AS 'MODULE_PATHNAME', 'shardext_abandon_saga';
COMMENT ON FUNCTION pg_catalog.shardext_abandon_saga(bigint)
	IS 'gives up a saga that needs attention (or a queued one): nothing more runs for it';

-- what its owner and administrators may see of each saga
CREATE VIEW shardext.sagas WITH (security_barrier) AS
	SELECT s.saga_id, s.name, s.owner::regrole AS owner, s.state,
		   s.state = 'failed' OR (s.state IN ('running', 'compensating') AND s.error IS NOT NULL
								  AND s.attempts > coalesce(pg_catalog.current_setting('shardext.saga_max_retries',
																		   true)::int, 10))
			   AS needs_attention,
		   pg_catalog.cardinality(s.steps) AS step_count, s.current_step,
		   (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
					'step', st.n, 'node_id', s.step_nodes[st.n], 'statement', st.statement,
					'status', coalesce(f.status, 'pending'), 'attempts', f.attempt,
					'error', f.error, 'ended_at', f.finished_at,
					'compensation', CASE c.status WHEN 'applied' THEN 'compensated'
												  ELSE c.status END,
					'compensation_attempts', c.attempt,
					'compensation_error', c.error, 'compensation_ended_at', c.finished_at)
				ORDER BY st.n)
			  FROM pg_catalog.unnest(s.steps) WITH ORDINALITY
				   AS st(statement, params, compensation, check_query, expect_rows, n)
			  LEFT JOIN shardext.saga_action f
				ON f.saga_id = s.saga_id AND f.step = st.n AND NOT f.compensation
			  LEFT JOIN shardext.saga_action c
				ON c.saga_id = s.saga_id AND c.step = st.n AND c.compensation) AS steps,
		   s.failure, s.failure_sqlstate, s.error, s.attempts, s.next_attempt_at, s.runner_pid,
		   s.created_at, s.updated_at, s.finished_at
	FROM shardext.saga s
	WHERE pg_catalog.pg_has_role(s.owner, 'USAGE')
	   OR pg_catalog.pg_has_role('shardext_admin', 'USAGE');
COMMENT ON VIEW shardext.sagas IS 'sagas of the current user (of everybody, for administrators): state, steps, errors';
GRANT SELECT ON shardext.sagas TO PUBLIC;

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

-- ==== repartition joins (issue 26) ====
--
-- Joins of distributed tables that are not co-located on the join key run
-- on the workers: the coordinator calls these functions on the nodes, as
-- the user who runs the query (see README, "Repartition joins").  The rows
-- in between are files of the node's temporary directory, one directory
-- per exchange and user; only the caller's own are read or removed.

CREATE FUNCTION shardext.repartition_map(exchange text, unit int, tag text, query text,
										 param_types text[], param_values text[],
										 key_count int, layout int, partition_count int,
										 boundaries int4[], limit_bytes bigint)
	RETURNS bigint[] LANGUAGE C STRICT VOLATILE
	AS 'MODULE_PATHNAME', 'shardext_repartition_map';
COMMENT ON FUNCTION shardext.repartition_map(text, int, text, text, text[], text[], int, int,
											 int, int4[], bigint)
	IS 'on a worker: runs a query and writes its rows, partitioned by a hash of its last columns, for a repartition join';

CREATE FUNCTION shardext.repartition_blocks(exchange text, unit int, partitions int4[])
	RETURNS SETOF bytea LANGUAGE C STRICT VOLATILE
	AS 'MODULE_PATHNAME', 'shardext_repartition_blocks';
COMMENT ON FUNCTION shardext.repartition_blocks(text, int, int4[])
	IS 'on a worker: the partitioned rows of a repartition join written here, as other nodes fetch them';

CREATE FUNCTION shardext.repartition_fetch(exchange text, unit int, tag text, host text, port int,
										   partitions int4[], column_types text[])
	RETURNS bigint LANGUAGE C STRICT VOLATILE
	AS 'MODULE_PATHNAME', 'shardext_repartition_fetch';
COMMENT ON FUNCTION shardext.repartition_fetch(text, int, text, text, int, int4[], text[])
	IS 'on a worker: pulls the rows of some partitions of a repartition join from another node';

CREATE FUNCTION shardext.repartition_read_support(internal)
	RETURNS internal LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_repartition_read_support';
COMMENT ON FUNCTION shardext.repartition_read_support(internal)
	IS 'planner support of shardext.repartition_read: its rows are those the coordinator expects';

CREATE FUNCTION shardext.repartition_read(exchange text, unit int, partition int, expected_rows bigint)
	RETURNS SETOF record LANGUAGE C STRICT VOLATILE ROWS 10000
	SUPPORT shardext.repartition_read_support
	AS 'MODULE_PATHNAME', 'shardext_repartition_read';
COMMENT ON FUNCTION shardext.repartition_read(text, int, int, bigint)
	IS 'on a worker: the rows of one partition of a repartition join';

CREATE FUNCTION shardext.repartition_flag(unit int, kind int)
	RETURNS boolean LANGUAGE C STRICT STABLE
	AS 'MODULE_PATHNAME', 'shardext_repartition_flag';
COMMENT ON FUNCTION shardext.repartition_flag(int, int)
	IS 'on the coordinator: what the map phase of a repartition join found (for NOT IN), evaluated before the partition queries run';

CREATE FUNCTION shardext.repartition_cleanup(exchange text)
	RETURNS boolean LANGUAGE C STRICT VOLATILE
	AS 'MODULE_PATHNAME', 'shardext_repartition_cleanup';
COMMENT ON FUNCTION shardext.repartition_cleanup(text)
	IS 'on a worker: removes the caller''s rows of a repartition join';

CREATE FUNCTION shardext.repartition_sweep(prefix text, incarnation text, keep_from bigint)
	RETURNS int LANGUAGE C STRICT VOLATILE
	AS 'MODULE_PATHNAME', 'shardext_repartition_sweep';
COMMENT ON FUNCTION shardext.repartition_sweep(text, text, bigint)
	IS 'on a worker, for the maintenance daemon: removes repartition join rows no running query of a coordinator uses';
REVOKE ALL ON FUNCTION shardext.repartition_sweep(text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION shardext.repartition_sweep(text, text, bigint) TO shardext_admin;

-- ==== major-version upgrades of a cluster with pg_upgrade (issue 21) ====

CREATE FUNCTION pg_catalog.shardext_check_pg_upgrade(OUT node_id int, OUT node_host text,
													 OUT node_port int, OUT check_name text,
													 OUT status text, OUT detail text)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_check_pg_upgrade';
COMMENT ON FUNCTION pg_catalog.shardext_check_pg_upgrade()
	IS 'before pg_upgrade of the nodes: what is pending on each (prepared transactions, commit records, moves, sagas, logical slots, read replicas)';

CREATE FUNCTION pg_catalog.shardext_finish_pg_upgrade(OUT node_id int, OUT node_host text,
													  OUT node_port int, OUT detail text)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_finish_pg_upgrade';
COMMENT ON FUNCTION pg_catalog.shardext_finish_pg_upgrade()
	IS 'after pg_upgrade of every node: register the workers with the coordinator''s new system identifier and record theirs';

REVOKE ALL ON FUNCTION pg_catalog.shardext_check_pg_upgrade(),
	pg_catalog.shardext_finish_pg_upgrade() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pg_catalog.shardext_check_pg_upgrade(),
	pg_catalog.shardext_finish_pg_upgrade() TO shardext_admin;
