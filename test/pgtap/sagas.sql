-- pgTAP: contracts of sagas: the SQL API, each bad definition refused with
-- its SQLSTATE before anything runs, the step records on a node (claim,
-- fence), the checks a step's transaction runs, and who may do what.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(47);

CREATE TABLE tap_saga (id int PRIMARY KEY, balance int NOT NULL CHECK (balance >= 0));
SELECT create_distributed_table('tap_saga', 'id', shard_count => 4);
INSERT INTO tap_saga SELECT g, 100 FROM generate_series(1, 20) g;
CREATE TABLE tap_saga_ref (id int PRIMARY KEY);
SELECT create_reference_table('tap_saga_ref');
CREATE TABLE tap_saga_local (id int);
-- two accounts on different nodes
CREATE TEMP TABLE tap_saga_pair AS
SELECT min(id) FILTER (WHERE node = first) AS a, min(id) FILTER (WHERE node <> first) AS b
FROM (SELECT id, (SELECT node_id FROM shardext.shards
				  WHERE shard_id = shardext_shard_for_value('tap_saga', id::text)) AS node,
			 (SELECT min(node_id) FROM shardext.nodes) AS first FROM tap_saga) n;
CREATE FUNCTION pg_temp.step(statement text, compensation text, VARIADIC params text[] DEFAULT '{}')
	RETURNS shardext.saga_step LANGUAGE sql
	AS $$ SELECT shardext_saga_step(statement, compensation, params) $$;
CREATE FUNCTION pg_temp.debit(account int) RETURNS shardext.saga_step LANGUAGE sql
	AS $$ SELECT shardext_saga_step('UPDATE tap_saga SET balance = balance - 1 WHERE id = $1',
									'UPDATE tap_saga SET balance = balance + 1 WHERE id = $1',
									ARRAY[account::text]) $$;

-- the API
SELECT has_type('shardext', 'saga_step', 'the step type');
SELECT has_function('pg_catalog', 'shardext_saga_step',
					ARRAY['text', 'text', 'text[]', 'text', 'bigint'], 'the step constructor');
SELECT has_function('pg_catalog', 'shardext_run_saga', ARRAY['text', 'shardext.saga_step[]'],
					'shardext_run_saga');
SELECT has_function('pg_catalog', 'shardext_start_saga', ARRAY['text', 'shardext.saga_step[]'],
					'shardext_start_saga');
SELECT has_function('pg_catalog', 'shardext_retry_saga', ARRAY['bigint'], 'shardext_retry_saga');
SELECT has_function('pg_catalog', 'shardext_abandon_saga', ARRAY['bigint'],
					'shardext_abandon_saga');
SELECT has_view('shardext', 'sagas', 'the view of sagas');
SELECT columns_are('shardext', 'sagas',
				   ARRAY['saga_id', 'name', 'owner', 'state', 'needs_attention', 'step_count',
						 'current_step', 'steps', 'failure', 'failure_sqlstate', 'error',
						 'attempts', 'next_attempt_at', 'runner_pid', 'created_at', 'updated_at',
						 'finished_at'], 'its columns');
SELECT is((SELECT count(*)::int FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		   WHERE p.proname LIKE '%saga%'
			 AND obj_description(p.oid, 'pg_proc') IS NULL), 0,
		  'every saga function has a comment');
SELECT is(current_setting('shardext.saga_max_retries'), '10', 'ten retries by default');
SELECT throws_ok($$SET shardext.saga_max_retries = -1$$, '22023', NULL, 'no negative retries');
SELECT throws_ok($$SET shardext.saga_retention = '1h'$$, '55P02', NULL,
				 'saga_retention is set in the configuration');

-- bad definitions, refused before anything runs
SELECT throws_ok($$SELECT shardext_run_saga('t', '{}')$$, '22023', NULL, 'an empty saga');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[NULL::shardext.saga_step])$$, '22004', NULL,
				 'a NULL step');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[shardext_saga_step(NULL, 'x')])$$, '22023',
				 NULL, 'a step without a statement');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[
					 shardext_saga_step('UPDATE tap_saga SET balance = 0 WHERE id = 1'),
					 pg_temp.debit(2)])$$, '22023', 'saga step 1 has no compensation',
				 'a missing compensation');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[pg_temp.step(
					 'UPDATE tap_saga SET balance = balance - 1 WHERE id IN ($1, $2)',
					 'UPDATE tap_saga SET balance = balance + 1 WHERE id IN ($1, $2)',
					 a::text, b::text)]) FROM tap_saga_pair$$, '0A000', NULL,
				 'a statement that touches two nodes');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[pg_temp.step(
					 'UPDATE tap_saga SET balance = balance - 1 WHERE id = $1; UPDATE tap_saga SET balance = balance + 1 WHERE id = $2',
					 'UPDATE tap_saga SET balance = balance + 1 WHERE id = $1',
					 a::text, b::text)]) FROM tap_saga_pair$$, '0A000', NULL,
				 'a statement list on two nodes');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[pg_temp.step(
					 'UPDATE tap_saga SET balance = balance - 1 WHERE id = $1',
					 'UPDATE tap_saga SET balance = balance + 1 WHERE id = $2',
					 a::text, b::text)]) FROM tap_saga_pair$$, '0A000', NULL,
				 'a compensation on another node');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[shardext_saga_step(
					 'UPDATE tap_saga SET balance = balance - 1 WHERE id = $1',
					 'UPDATE tap_saga SET balance = balance + 1 WHERE id = $1', ARRAY[a::text, b::text],
					 check_query => 'SELECT balance >= 0 FROM tap_saga WHERE id = $2')])
				  FROM tap_saga_pair$$, '0A000', NULL, 'a check on another node');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[pg_temp.step(
					 'UPDATE tap_saga SET balance = 0', 'UPDATE tap_saga SET balance = 100')])$$,
				 '0A000', NULL, 'a statement on every shard');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[pg_temp.step(
					 'INSERT INTO tap_saga_ref VALUES (1)', 'DELETE FROM tap_saga_ref WHERE id = 1')])$$,
				 '0A000', NULL, 'a write to a reference table (a copy on every node)');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[pg_temp.step(
					 'INSERT INTO tap_saga_local VALUES (1)', 'DELETE FROM tap_saga_local')])$$,
				 '0A000', NULL, 'a local table');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[pg_temp.step('SELECT 1', 'SELECT 2')])$$,
				 '0A000', NULL, 'a statement without a table');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[pg_temp.step(
					 'TRUNCATE tap_saga', 'SELECT 1')])$$, '0A000', NULL, 'a utility statement');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[pg_temp.step(
					 'WITH d AS (DELETE FROM tap_saga WHERE id = 1 RETURNING *) SELECT * FROM d',
					 'SELECT 1')])$$, '0A000', NULL, 'a data-modifying WITH');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[pg_temp.step(
					 'UPDATE tap_saga SET balance = 0 WHERE id = $1', 'SELECT 1')])$$, '42P02', NULL,
				 'a parameter the step does not give');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[pg_temp.step(
					 'UPDATE tap_saga SET balance = 0 WHERE id = $1', 'SELECT 1', 'x')])$$, '22P02',
				 NULL, 'a parameter of the wrong type');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[shardext_saga_step(
					 'UPDATE tap_saga SET balance = 0 WHERE id = 1', 'UPDATE tap_saga SET balance = 100 WHERE id = 1',
					 check_query => 'SELECT balance FROM tap_saga WHERE id = 1')])$$, '0A000', NULL,
				 'a check that is no boolean');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[shardext_saga_step(
					 'UPDATE tap_saga SET balance = 0 WHERE id = 1', 'UPDATE tap_saga SET balance = 100 WHERE id = 1',
					 expect_rows => -1)])$$, '22023', NULL, 'negative expect_rows');
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[pg_temp.step(
					 'UPDATE tap_saga SET balance = 0 WHERE id = NULL', 'SELECT 1')])$$, '0A000', NULL,
				 'a statement that touches no shard');
SELECT throws_ok($$SELECT shardext_start_saga('t', ARRAY[pg_temp.step(
					 'UPDATE tap_saga SET balance = 0', 'SELECT 1')])$$, '0A000', NULL,
				 'shardext_start_saga checks the same');
UPDATE tap_saga SET balance = balance WHERE id = 1;
SELECT throws_ok($$SELECT shardext_run_saga('t', ARRAY[pg_temp.debit(1)])$$, '25001', NULL,
				 'a good saga does not run in a transaction that wrote on nodes');
SELECT is((SELECT sum(balance)::int FROM tap_saga), 2000, 'nothing ran');
SELECT is((SELECT count(*)::int FROM shardext.saga), 0, 'nothing was recorded');

-- queued in the transaction, and gone with it
SELECT ok(shardext_start_saga('tap queued', ARRAY[pg_temp.debit(1)]) > 0, 'a saga is queued');
SELECT is((SELECT state FROM shardext.sagas WHERE name = 'tap queued'), 'queued',
		  'as queued until the transaction commits');
SELECT throws_ok($$SELECT shardext_retry_saga(-1)$$, '42704', NULL, 'an unknown saga');

-- the node side: a step applies once; a fence stops earlier attempts
SELECT lives_ok($$SELECT shardext.saga_claim_step('tap_', 1, 1, false, 1)$$, 'a step is claimed');
SELECT throws_ok($$SELECT shardext.saga_claim_step('tap_', 1, 1, false, 2)$$, '23505', NULL,
				 'a second attempt finds it applied');
SELECT is(shardext.saga_fence_step('tap_', 1, 1, false, 3), true, 'recovery reads it as applied');
SELECT is(shardext.saga_fence_step('tap_', 1, 2, false, 3), false,
		  'a step that never came is fenced');
SELECT throws_ok($$SELECT shardext.saga_claim_step('tap_', 1, 2, false, 2)$$, '55P03', NULL,
				 'an attempt from before the fence fails');
SELECT lives_ok($$SELECT shardext.saga_claim_step('tap_', 1, 2, false, 3)$$,
				'the attempt after the fence applies');
SELECT throws_ok($$SELECT shardext.saga_check(false)$$, '23514', NULL, 'a failed check');
SELECT throws_ok($$SELECT shardext.saga_expect_rows(0, 1)$$, '21000', NULL,
				 'a statement that changed other rows than expected');
SELECT ok(NOT has_function_privilege('public', 'shardext.saga_forget_steps(text,bigint[])',
									 'EXECUTE'), 'forgetting step records is for administrators');

SELECT * FROM finish();
ROLLBACK;
