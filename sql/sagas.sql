--
-- sagas: business transactions over several nodes as local steps with
-- compensations (shardext_run_saga, shardext_start_saga, shardext.sagas,
-- shardext_retry_saga, shardext_abandon_saga), run by a table owner who is
-- not a superuser, on tables with odd names; bad definitions are refused
-- before anything runs.
--
SET client_min_messages TO warning;
DROP ROLE IF EXISTS saga_owner;
DROP ROLE IF EXISTS saga_other;
DROP ROLE IF EXISTS saga_admin;
CREATE ROLE saga_owner LOGIN NOSUPERUSER;
CREATE ROLE saga_other LOGIN NOSUPERUSER;
CREATE ROLE saga_admin LOGIN NOSUPERUSER IN ROLE shardext_admin;
SELECT node_id > 0 AS worker, success FROM shardext_run_on_nodes($cmd$
	DO $d$ BEGIN
	  DROP ROLE IF EXISTS saga_owner; DROP ROLE IF EXISTS saga_other; DROP ROLE IF EXISTS saga_admin;
	  CREATE ROLE saga_owner LOGIN NOSUPERUSER; CREATE ROLE saga_other LOGIN NOSUPERUSER;
	  CREATE ROLE saga_admin LOGIN NOSUPERUSER IN ROLE shardext_admin;
	END $d$ $cmd$) ORDER BY node_id;
CREATE SCHEMA "Saga Bank" AUTHORIZATION saga_owner;
SELECT bool_and(success) AS schemas_on_workers FROM shardext_run_on_nodes(
	'CREATE SCHEMA "Saga Bank" AUTHORIZATION saga_owner');
RESET client_min_messages;

SET ROLE saga_owner;
SET search_path TO "Saga Bank", public;
-- accounts, with a pending column that marks money on its way (a semantic
-- lock that other transactions can see), and a ledger co-located with them
CREATE TABLE "Accounts" ("Id" int PRIMARY KEY, "Balance" numeric NOT NULL CHECK ("Balance" >= 0),
						 pending numeric NOT NULL DEFAULT 0);
SELECT create_distributed_table('"Accounts"', 'Id', shard_count => 4);
CREATE TABLE "Ledger" ("Id" int, step int, what text, seq bigserial);
SELECT create_distributed_table('"Ledger"', 'Id', colocate_with => '"Accounts"');
INSERT INTO "Accounts" SELECT g, 100 FROM generate_series(1, 20) g;
-- four accounts: a and c on one node, b and d on the other
SELECT min("Id") FILTER (WHERE node = first_node) AS a,
	   min("Id") FILTER (WHERE node <> first_node) AS b,
	   max("Id") FILTER (WHERE node = first_node) AS c,
	   max("Id") FILTER (WHERE node <> first_node) AS d
FROM (SELECT "Id", (SELECT node_id FROM shardext.shards
					WHERE shard_id = shardext_shard_for_value('"Accounts"', "Id"::text)) AS node,
			 (SELECT min(node_id) FROM shardext.nodes) AS first_node
	  FROM "Accounts") n \gset

-- a transfer of 30 from a to b: debit (with a check that the balance stays
-- covered) and credit, each undone by its compensation
SELECT shardext_run_saga('transfer', ARRAY[
	shardext_saga_step('UPDATE "Accounts" SET "Balance" = "Balance" - $2 WHERE "Id" = $1',
					   'UPDATE "Accounts" SET "Balance" = "Balance" + $2 WHERE "Id" = $1',
					   ARRAY[:'a', '30'], check_query => 'SELECT "Balance" >= 0 FROM "Accounts" WHERE "Id" = $1'),
	shardext_saga_step('UPDATE "Accounts" SET "Balance" = "Balance" + $2 WHERE "Id" = $1',
					   'UPDATE "Accounts" SET "Balance" = "Balance" - $2 WHERE "Id" = $1',
					   ARRAY[:'b', '30'], expect_rows => 1)]) AS saga_id \gset
SELECT "Id" = :a AS is_a, "Balance" FROM "Accounts" WHERE "Id" IN (:a, :b) ORDER BY "Id" = :a DESC;
SELECT name, owner, state, needs_attention, step_count, current_step, failure, error
FROM shardext.sagas WHERE saga_id = :saga_id;
SELECT s->>'step' AS step, s->>'status' AS status, (s->>'node_id')::int > 0 AS has_node,
	   s->>'attempts' AS attempts, s->>'compensation' AS compensation
FROM shardext.sagas, jsonb_array_elements(steps) s WHERE saga_id = :saga_id;
-- every step is recorded once on its node, by its role
RESET ROLE;
SELECT node_id > 0 AS worker, result FROM shardext_run_on_nodes(format(
	'SELECT string_agg(step || %L || compensation || %L || owner || %L || attempt, %L ORDER BY step)
	 FROM shardext.saga_step_record WHERE saga_id = %s', ':', ':', ':', ',', :saga_id))
ORDER BY node_id;
SET ROLE saga_owner;

-- insufficient funds: the check fails the debit, nothing to undo
SELECT shardext_run_saga('too much', ARRAY[
	shardext_saga_step('UPDATE "Accounts" SET pending = pending + $2 WHERE "Id" = $1 AND "Balance" - pending >= $2',
					   'UPDATE "Accounts" SET pending = pending - $2 WHERE "Id" = $1',
					   ARRAY[:'a', '1000'], expect_rows => 1),
	shardext_saga_step('UPDATE "Accounts" SET "Balance" = "Balance" + $2 WHERE "Id" = $1',
					   'UPDATE "Accounts" SET "Balance" = "Balance" - $2 WHERE "Id" = $1',
					   ARRAY[:'b', '1000'])]);
SELECT state, failure, failure_sqlstate FROM shardext.sagas WHERE name = 'too much';

-- a constraint violation at step 3 of 4: steps 2 and 1 are compensated, in
-- that order (the ledger shows what ran where, in order)
SELECT shardext_run_saga('four steps', ARRAY[
	shardext_saga_step('UPDATE "Accounts" SET "Balance" = "Balance" - 1 WHERE "Id" = $1; INSERT INTO "Ledger" ("Id", step, what) VALUES ($1, 1, ''do'')',
					   'UPDATE "Accounts" SET "Balance" = "Balance" + 1 WHERE "Id" = $1; INSERT INTO "Ledger" ("Id", step, what) VALUES ($1, 1, ''undo'')',
					   ARRAY[:'a']),
	shardext_saga_step('UPDATE "Accounts" SET "Balance" = "Balance" - 1 WHERE "Id" = $1; INSERT INTO "Ledger" ("Id", step, what) VALUES ($1, 2, ''do'')',
					   'UPDATE "Accounts" SET "Balance" = "Balance" + 1 WHERE "Id" = $1; INSERT INTO "Ledger" ("Id", step, what) VALUES ($1, 2, ''undo'')',
					   ARRAY[:'b']),
	shardext_saga_step('UPDATE "Accounts" SET "Balance" = "Balance" - 1000 WHERE "Id" = $1',
					   'UPDATE "Accounts" SET "Balance" = "Balance" + 1000 WHERE "Id" = $1',
					   ARRAY[:'c']),
	shardext_saga_step('UPDATE "Accounts" SET "Balance" = "Balance" + 1 WHERE "Id" = $1', NULL,
					   ARRAY[:'d'])]);
SELECT step, what FROM "Ledger" ORDER BY seq;
SELECT s->>'step' AS step, s->>'status' AS status, s->>'compensation' AS compensation
FROM shardext.sagas, jsonb_array_elements(steps) s WHERE name = 'four steps';
SELECT (SELECT (s->>'compensation_ended_at')::timestamptz FROM jsonb_array_elements(steps) s
		WHERE s->>'step' = '2') <
	   (SELECT (s->>'compensation_ended_at')::timestamptz FROM jsonb_array_elements(steps) s
		WHERE s->>'step' = '1') AS step_2_undone_first,
	   state, failure
FROM shardext.sagas WHERE name = 'four steps';
SELECT sum("Balance") AS total, sum(pending) AS pending FROM "Accounts";

-- a compensation that keeps failing: the saga needs attention, with the error
SET shardext.saga_max_retries = 1;
SELECT shardext_run_saga('stuck', ARRAY[
	shardext_saga_step('UPDATE "Accounts" SET pending = pending + 5 WHERE "Id" = $1',
					   'UPDATE "Accounts" SET "Balance" = "Balance" - 1000 WHERE "Id" = $1',
					   ARRAY[:'a']),
	shardext_saga_step('UPDATE "Accounts" SET "Balance" = "Balance" - 1000 WHERE "Id" = $1', NULL,
					   ARRAY[:'b'])]);
RESET shardext.saga_max_retries;
SELECT saga_id AS stuck_id FROM shardext.sagas WHERE name = 'stuck' \gset
SELECT state, needs_attention, current_step, attempts, failure, error
FROM shardext.sagas WHERE name = 'stuck';
-- its owner fixes the compensation's data and retries it
SELECT shardext_retry_saga(:stuck_id);
ALTER TABLE "Accounts" DROP CONSTRAINT "Accounts_Balance_check";
SELECT shardext_retry_saga(:stuck_id);
SELECT state, needs_attention FROM shardext.sagas WHERE saga_id = :stuck_id;
SELECT shardext_retry_saga(:stuck_id);
SELECT shardext_abandon_saga(:stuck_id);
UPDATE "Accounts" SET "Balance" = "Balance" + 1000, pending = pending - 5 WHERE "Id" = :a;
ALTER TABLE "Accounts" ADD CHECK ("Balance" >= 0);

-- bad definitions are refused before anything runs or is recorded
SELECT shardext_run_saga('none', ARRAY[]::shardext.saga_step[]);
SELECT shardext_run_saga('null step', ARRAY[NULL::shardext.saga_step]);
SELECT shardext_run_saga('no statement', ARRAY[shardext_saga_step(NULL, 'SELECT 1')]);
SELECT shardext_run_saga('no compensation', ARRAY[
	shardext_saga_step('UPDATE "Accounts" SET "Balance" = "Balance" - 1 WHERE "Id" = $1', NULL, ARRAY[:'a']),
	shardext_saga_step('UPDATE "Accounts" SET "Balance" = "Balance" + 1 WHERE "Id" = $1', NULL, ARRAY[:'b'])]);
SELECT shardext_run_saga('blank compensation', ARRAY[
	shardext_saga_step('UPDATE "Accounts" SET "Balance" = "Balance" - 1 WHERE "Id" = $1', '  ', ARRAY[:'a']),
	shardext_saga_step('UPDATE "Accounts" SET "Balance" = "Balance" + 1 WHERE "Id" = $1', NULL, ARRAY[:'b'])]);
SELECT shardext_run_saga('two nodes', ARRAY[shardext_saga_step(
	'UPDATE "Accounts" SET "Balance" = "Balance" - 1 WHERE "Id" IN ($1, $2)',
	'UPDATE "Accounts" SET "Balance" = "Balance" + 1 WHERE "Id" IN ($1, $2)', ARRAY[:'a', :'b'])]);
-- (node ids depend on the tests before: terse)
\set VERBOSITY terse
SELECT shardext_run_saga('two nodes', ARRAY[shardext_saga_step(
	'UPDATE "Accounts" SET "Balance" = "Balance" - 1 WHERE "Id" = $1; UPDATE "Accounts" SET "Balance" = "Balance" + 1 WHERE "Id" = $2',
	'SELECT 1', ARRAY[:'a', :'b'])]);
SELECT shardext_run_saga('compensation elsewhere', ARRAY[shardext_saga_step(
	'UPDATE "Accounts" SET "Balance" = "Balance" - 1 WHERE "Id" = $1',
	'UPDATE "Accounts" SET "Balance" = "Balance" + 1 WHERE "Id" = $2', ARRAY[:'a', :'b'])]);
SELECT shardext_run_saga('check elsewhere', ARRAY[shardext_saga_step(
	'UPDATE "Accounts" SET "Balance" = "Balance" - 1 WHERE "Id" = $1',
	'UPDATE "Accounts" SET "Balance" = "Balance" + 1 WHERE "Id" = $1', ARRAY[:'a', :'b'],
	check_query => 'SELECT "Balance" >= 0 FROM "Accounts" WHERE "Id" = $2')]);
\set VERBOSITY default
SELECT shardext_run_saga('all shards', ARRAY[shardext_saga_step(
	'UPDATE "Accounts" SET "Balance" = 0', 'UPDATE "Accounts" SET "Balance" = 100')]);
SELECT shardext_run_saga('no table', ARRAY[shardext_saga_step('SELECT 1', 'SELECT 2')]);
SELECT shardext_run_saga('ddl', ARRAY[shardext_saga_step(
	'ALTER TABLE "Accounts" ADD COLUMN x int', 'ALTER TABLE "Accounts" DROP COLUMN x')]);
SELECT shardext_run_saga('missing parameter', ARRAY[shardext_saga_step(
	'UPDATE "Accounts" SET "Balance" = "Balance" - 1 WHERE "Id" = $1',
	'UPDATE "Accounts" SET "Balance" = "Balance" + 1 WHERE "Id" = $1')]);
SELECT shardext_run_saga('bad parameter', ARRAY[shardext_saga_step(
	'UPDATE "Accounts" SET "Balance" = "Balance" - 1 WHERE "Id" = $1',
	'UPDATE "Accounts" SET "Balance" = "Balance" + 1 WHERE "Id" = $1', ARRAY['one'])]);
SELECT shardext_run_saga('not a boolean', ARRAY[shardext_saga_step(
	'UPDATE "Accounts" SET "Balance" = "Balance" - 1 WHERE "Id" = $1',
	'UPDATE "Accounts" SET "Balance" = "Balance" + 1 WHERE "Id" = $1', ARRAY[:'a'],
	check_query => 'SELECT "Balance" FROM "Accounts" WHERE "Id" = $1')]);
SELECT shardext_run_saga('negative rows', ARRAY[shardext_saga_step(
	'UPDATE "Accounts" SET "Balance" = "Balance" - 1 WHERE "Id" = $1',
	'UPDATE "Accounts" SET "Balance" = "Balance" + 1 WHERE "Id" = $1', ARRAY[:'a'], expect_rows => -1)]);
SELECT shardext_run_saga('syntax', ARRAY[shardext_saga_step(
	'UPDATE "Accounts" SET WHERE', 'UPDATE "Accounts" SET "Balance" = 1 WHERE "Id" = 1')]);
BEGIN;
UPDATE "Accounts" SET pending = 0 WHERE "Id" = :a;
SELECT shardext_run_saga('after a write', ARRAY[shardext_saga_step(
	'UPDATE "Accounts" SET "Balance" = "Balance" - 1 WHERE "Id" = $1',
	'UPDATE "Accounts" SET "Balance" = "Balance" + 1 WHERE "Id" = $1', ARRAY[:'a'])]);
ROLLBACK;
-- nothing ran, nothing was recorded (the four sagas are those above)
SELECT count(*) AS sagas FROM shardext.sagas;
SELECT sum("Balance") AS total, sum(pending) AS pending FROM "Accounts";

-- a queued saga runs once its transaction commits (and never when it
-- rolls back); the maintenance daemon runs it as its owner
BEGIN;
SELECT shardext_start_saga('rolled back', ARRAY[shardext_saga_step(
	'UPDATE "Accounts" SET "Balance" = "Balance" - 1 WHERE "Id" = $1', NULL, ARRAY[:'a'])]) > 0 AS queued;
ROLLBACK;
BEGIN;
SELECT shardext_start_saga('queued transfer', ARRAY[
	shardext_saga_step('UPDATE "Accounts" SET "Balance" = "Balance" - $2 WHERE "Id" = $1',
					   'UPDATE "Accounts" SET "Balance" = "Balance" + $2 WHERE "Id" = $1', ARRAY[:'c', '7']),
	shardext_saga_step('UPDATE "Accounts" SET "Balance" = "Balance" + $2 WHERE "Id" = $1', NULL,
					   ARRAY[:'d', '7'])]) AS queued_id \gset
SELECT state FROM shardext.sagas WHERE saga_id = :queued_id;
COMMIT;
DO $$
BEGIN
	FOR i IN 1 .. 600 LOOP
		EXIT WHEN (SELECT state FROM shardext.sagas WHERE name = 'queued transfer') = 'completed';
		PERFORM pg_sleep(0.05);
	END LOOP;
END $$;
SELECT name, owner, state FROM shardext.sagas WHERE name IN ('queued transfer', 'rolled back');
SELECT "Id" = :c AS is_c, "Balance" FROM "Accounts" WHERE "Id" IN (:c, :d) ORDER BY "Id" = :c DESC;
SELECT shardext_retry_saga(:queued_id);

-- others see none of these sagas, and may not retry or abandon them; they
-- cannot run steps on tables they may not write either
RESET ROLE;
GRANT USAGE ON SCHEMA "Saga Bank" TO saga_other, saga_admin;
GRANT SELECT ON "Saga Bank"."Accounts" TO saga_other;
SET ROLE saga_other;
SELECT count(*) AS visible FROM shardext.sagas;
SELECT shardext_retry_saga(:stuck_id);
SELECT shardext_abandon_saga(:queued_id);
SELECT shardext_run_saga('not mine', ARRAY[shardext_saga_step(
	'UPDATE "Saga Bank"."Accounts" SET "Balance" = 0 WHERE "Id" = $1', NULL, ARRAY[:'a'])]);
-- administrators see them all
SET ROLE saga_admin;
SELECT name, owner, state FROM shardext.sagas ORDER BY saga_id;
RESET ROLE;

SET client_min_messages TO warning;
DROP SCHEMA "Saga Bank" CASCADE;
SELECT bool_and(success) FROM shardext_run_on_nodes('DROP SCHEMA "Saga Bank" CASCADE');
DELETE FROM shardext.saga;
DROP ROLE saga_owner;
DROP ROLE saga_other;
DROP ROLE saga_admin;
SELECT bool_and(success) FROM shardext_run_on_nodes(
	'DELETE FROM shardext.saga_step_record; DROP ROLE saga_owner; DROP ROLE saga_other; DROP ROLE saga_admin');
