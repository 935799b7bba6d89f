-- pgTAP: contracts of distributed writes: DDL propagation refusals, COPY
-- refusals, the transaction GUCs and recovery.  throws_ok runs each bad
-- statement in a subtransaction, so this also checks that a rolled back
-- subtransaction undoes its remote work while the transaction goes on.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(35);

CREATE TABLE tap_w_ref (code text PRIMARY KEY);
SELECT create_reference_table('tap_w_ref');
CREATE TABLE tap_w (id int PRIMARY KEY, code text, n int);
SELECT create_distributed_table('tap_w', 'id', shard_count => 4);
CREATE TABLE tap_w_other (id int PRIMARY KEY);
SELECT create_distributed_table('tap_w_other', 'id', shard_count => 4, colocate_with => 'none');
CREATE TABLE tap_w_local (id int PRIMARY KEY);

-- DDL shards cannot follow
SELECT throws_ok($$ALTER TABLE tap_w ADD CONSTRAINT tap_w_n_key UNIQUE (n)$$, '0A000', NULL,
				 'unique constraint without the distribution column');
SELECT throws_ok($$CREATE UNIQUE INDEX ON tap_w (code)$$, '0A000', NULL,
				 'unique index without the distribution column');
SELECT throws_ok($$ALTER TABLE tap_w ALTER COLUMN id TYPE bigint$$, '0A000', NULL,
				 'type change of the distribution column');
SELECT throws_ok($$ALTER TABLE tap_w DROP COLUMN id$$, '0A000', NULL,
				 'drop of the distribution column');
SELECT throws_ok($$ALTER TABLE tap_w ADD FOREIGN KEY (n) REFERENCES tap_w_local (id)$$, '0A000',
				 NULL, 'foreign key to a local table');
SELECT throws_ok($$ALTER TABLE tap_w ADD FOREIGN KEY (id) REFERENCES tap_w_other (id)$$, '0A000',
				 NULL, 'foreign key to a table that is not co-located');
SELECT throws_ok($$ALTER TABLE tap_w_local ADD FOREIGN KEY (id) REFERENCES tap_w (id)$$, '0A000',
				 NULL, 'foreign key from a local table');
SELECT throws_ok($$ALTER TABLE tap_w_ref ADD COLUMN w int REFERENCES tap_w (id)$$, '0A000',
				 NULL, 'foreign key from a reference table to a distributed one');
SELECT throws_ok($$CREATE INDEX CONCURRENTLY ON tap_w (code)$$, '25001', NULL,
				 'CREATE INDEX CONCURRENTLY inside a transaction block, as on a local table');
SELECT throws_ok($$ALTER TABLE tap_w ENABLE ROW LEVEL SECURITY$$, '0A000', NULL,
				 'an ALTER TABLE subcommand that is not propagated');
SELECT throws_ok($$COPY tap_w FROM STDIN WITH (FREEZE)$$, '0A000', NULL, 'COPY FREEZE');

-- what works, inside this transaction
SELECT lives_ok($$ALTER TABLE tap_w ADD FOREIGN KEY (code) REFERENCES tap_w_ref (code)$$,
				'foreign key to a reference table');
SELECT lives_ok($$ALTER TABLE tap_w ADD COLUMN m int DEFAULT 3 NOT NULL$$, 'add a column');
SELECT lives_ok($$CREATE INDEX tap_w_code_idx ON tap_w (code)$$, 'create an index');

-- GUCs and functions
SELECT throws_ok($$SET shardext.multi_node_commit = 'maybe'$$, '22023', NULL,
				 'multi_node_commit takes 2pc or reject');
SELECT lives_ok($$SET LOCAL shardext.multi_node_commit = 'reject'$$, 'reject can be set');
SELECT is(current_setting('shardext.multi_node_commit'), 'reject', 'and is in effect');
SELECT throws_ok($$SET shardext.recovery_interval = 1000$$, '55P02', NULL,
				 'recovery_interval is set in the configuration');
SELECT is(shardext_recover_prepared_transactions(), 0, 'nothing to recover');
SELECT throws_ok($$SET shardext.distributed_deadlock_timeout = 500$$, '55P02', NULL,
				 'distributed_deadlock_timeout is set in the configuration');
SELECT is(current_setting('shardext.distributed_deadlock_timeout'), '1s',
		  'distributed deadlock detection runs every second by default');
-- the nodes' backends tell whose transaction they run: the deadlock detector
-- maps them to this backend by application_name
SELECT is((SELECT array_agg(DISTINCT result) FROM shardext_run_on_nodes(
			'SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()')),
		  ARRAY[format('shardext_%s_%s_%s', (SELECT system_identifier FROM pg_control_system()),
					   (SELECT oid FROM pg_database WHERE datname = current_database()),
					   pg_backend_pid())],
		  'connections to the nodes carry the coordinator backend in application_name');
-- the daemon starts a moment after CREATE EXTENSION commits (add_nodes):
-- wait for it, 30 s at most (pg_stat_activity is read once a transaction
-- unless its snapshot is cleared)
DO $$
BEGIN
	FOR i IN 1..300 LOOP
		PERFORM pg_stat_clear_snapshot();
		EXIT WHEN EXISTS (SELECT FROM pg_stat_activity
						  WHERE backend_type = 'shardext maintenance daemon'
						  AND datname = current_database());
		PERFORM pg_sleep(0.1);
	END LOOP;
	PERFORM pg_stat_clear_snapshot();
END
$$;
SELECT is((SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'shardext maintenance daemon'
		   AND datname = current_database()), 1::bigint,
		  'the maintenance daemon of this database runs (it searches for deadlocks)');
SET LOCAL ROLE pg_monitor;
SELECT throws_ok($$SELECT shardext_recover_prepared_transactions()$$, '42501', NULL,
				 'recovery is for superusers');
RESET ROLE;

-- last-participant commit: the decisions a deciding node keeps
SELECT is(current_setting('shardext.last_participant_commit'), 'on',
		  'last-participant commit is on by default');
SELECT ok(has_function_privilege('pg_monitor', 'shardext.record_commit_decision(text,bigint,bigint)',
								 'EXECUTE'), 'any role can record the decision of its transaction');
SELECT ok(NOT has_table_privilege('pg_monitor', 'shardext.commit_decision', 'INSERT'),
		  'but nobody can write decisions directly');
SELECT ok(NOT has_function_privilege('pg_monitor',
									 'shardext.resolve_commit_decision(text,bigint,bigint,name)',
									 'EXECUTE')
		  AND NOT has_function_privilege('pg_monitor',
										 'shardext.forget_commit_decisions(text,bigint,bigint)',
										 'EXECUTE'), 'resolving and forgetting are for recovery');
SELECT lives_ok($$SELECT shardext.record_commit_decision('tap_', 1, 42)$$, 'record a decision');
SELECT is((SELECT owner::text || ':' || committed FROM shardext.commit_decision
		   WHERE coordinator = 'tap_'), current_user || ':true', 'it is the caller''s commit');
SELECT throws_ok($$SELECT shardext.record_commit_decision('tap_', 1, 42)$$, '23505', NULL,
				 'one decision per transaction');
SELECT is(shardext.resolve_commit_decision('tap_', 1, 42, current_user), true,
		  'recovery reads a recorded decision as committed');
SELECT is(shardext.resolve_commit_decision('tap_', 1, 43, current_user), false,
		  'and fixes a transaction without one as aborted');
SELECT throws_ok($$SELECT shardext.record_commit_decision('tap_', 1, 43)$$, '23505', NULL,
				 'a decider that comes after recovery fails, so its transaction aborts');
SELECT is(shardext.forget_commit_decisions('tap_', 1, 43) || ':' ||
		  shardext.forget_commit_decisions('tap_', 2, 0), '1:1',
		  'decisions below an xid go, then those of an earlier incarnation');

SELECT * FROM finish();
ROLLBACK;
