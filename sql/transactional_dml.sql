--
-- transactional_dml: INSERT/UPDATE/DELETE on distributed and reference
-- tables inside transactions: read-your-own-writes, ROLLBACK, savepoints,
-- PL/pgSQL exception blocks, multi_node_commit = 'reject', reference table
-- placements, isolation levels.  What the workers hold is read directly
-- from the shards (shardext_run_on_shards uses connections of its own, so
-- it sees what is committed).
--
SET client_min_messages TO warning;
CREATE SCHEMA txdml;
SET search_path TO txdml, public;
CREATE TABLE acct (id int PRIMARY KEY, owner text, balance bigint NOT NULL);
SELECT create_distributed_table('acct', 'id', shard_count => 4);
CREATE TABLE rates (code text PRIMARY KEY, rate numeric NOT NULL);
SELECT create_reference_table('rates');
INSERT INTO acct SELECT g, 'owner ' || g, 100 FROM generate_series(1, 20) g;
INSERT INTO rates VALUES ('CHF', 1);
RESET client_min_messages;

-- committed rows and balance per node (1st, 2nd), read from the shards themselves
CREATE FUNCTION acct_on_nodes() RETURNS TABLE (node bigint, row_count bigint, balance numeric)
LANGUAGE sql AS $$
	SELECT dense_rank() OVER (ORDER BY node_id), sum(split_part(result, ':', 1)::bigint),
		   sum(split_part(result, ':', 2)::numeric)
	FROM shardext_run_on_shards('txdml.acct', 'SELECT count(*) || '':'' || coalesce(sum(balance), 0) FROM %s')
	GROUP BY node_id ORDER BY node_id
$$;
CREATE FUNCTION rates_on_nodes() RETURNS TABLE (node bigint, rates text)
LANGUAGE sql AS $$
	SELECT dense_rank() OVER (ORDER BY node_id), result
	FROM shardext_run_on_shards('txdml.rates', $q$SELECT coalesce(string_agg(code || '=' || rate, ',' ORDER BY code), '(none)') FROM %s$q$)
	ORDER BY node_id
$$;
-- the node that holds an account
CREATE FUNCTION node_of(id int) RETURNS int LANGUAGE sql AS $$
	SELECT node_id FROM shardext.shards WHERE shard_id = shardext_shard_for_value('txdml.acct', id::text)
$$;
SELECT count(DISTINCT node_of(id)) AS nodes_with_accounts FROM generate_series(1, 20) id;
-- two accounts on the first node, one on the second
SELECT min(id) AS a1, max(id) AS a2 FROM generate_series(1, 20) id
WHERE node_of(id) = (SELECT min(node_id) FROM shardext.nodes) \gset
SELECT min(id) AS b1 FROM generate_series(1, 20) id
WHERE node_of(id) = (SELECT max(node_id) FROM shardext.nodes) \gset
SELECT * FROM acct_on_nodes();

--
-- a transaction reads its own writes, router and multi-shard, and nobody
-- else sees them before COMMIT
--
BEGIN;
UPDATE acct SET balance = balance - 10 WHERE id = :a1;
UPDATE acct SET balance = balance + 10 WHERE id = :b1;
SELECT balance FROM acct WHERE id = :a1;
SELECT id = :b1 AS is_b1, balance FROM acct WHERE id IN (:a1, :b1) ORDER BY balance;
UPDATE acct SET balance = balance + 1;
SELECT balance FROM acct WHERE id = :b1;
INSERT INTO acct VALUES (21, 'late', 5), (22, 'later', 6);
SELECT count(*), sum(balance) FROM acct;
DELETE FROM acct WHERE id = 22 RETURNING owner, balance;
UPDATE acct SET owner = 'renamed' WHERE id >= 21 RETURNING id, owner;
SELECT sum(balance) AS committed_balance FROM acct_on_nodes();
COMMIT;
SELECT * FROM acct_on_nodes();
SELECT count(*), sum(balance) FROM acct;

--
-- ROLLBACK undoes router and multi-shard writes on every node
--
BEGIN;
UPDATE acct SET balance = 0 WHERE id = :a1;
UPDATE acct SET balance = balance * 2;
INSERT INTO acct VALUES (30, 'gone', 1);
DELETE FROM acct WHERE id = :b1;
SELECT count(*), sum(balance) FROM acct;
ROLLBACK;
SELECT * FROM acct_on_nodes();
-- an error does the same
BEGIN;
UPDATE acct SET balance = balance + 1000;
INSERT INTO acct VALUES (:a2, 'duplicate', 0);
COMMIT;
SELECT * FROM acct_on_nodes();

--
-- savepoints: ROLLBACK TO undoes what the nodes did since the savepoint
--
BEGIN;
UPDATE acct SET balance = balance + 1000 WHERE id = :a1;
SAVEPOINT s1;
UPDATE acct SET balance = balance + 1000 WHERE id = :b1;
UPDATE acct SET balance = balance + 1;
SAVEPOINT s2;
DELETE FROM acct WHERE id = :a2;
SELECT count(*) AS rows_in_s2 FROM acct;
ROLLBACK TO SAVEPOINT s2;
SELECT count(*) AS rows_after_rollback_to_s2 FROM acct;
ROLLBACK TO SAVEPOINT s1;
SELECT id = :a1 AS is_a1, balance FROM acct WHERE id IN (:a1, :b1) ORDER BY id = :a1;
-- an error inside a savepoint is rolled back and the transaction goes on
SAVEPOINT s3;
INSERT INTO acct VALUES (:b1, 'duplicate', 0);
ROLLBACK TO SAVEPOINT s3;
UPDATE acct SET balance = balance + 5 WHERE id = :b1;
SAVEPOINT s4;
UPDATE acct SET balance = balance + 7 WHERE id = :a2;
RELEASE SAVEPOINT s4;
COMMIT;
-- a1 +1000, b1 +5, a2 +7
SELECT * FROM acct_on_nodes();
-- the first remote work of a transaction inside a savepoint
BEGIN;
SAVEPOINT first;
UPDATE acct SET balance = balance + 1000 WHERE id = :b1;
ROLLBACK TO SAVEPOINT first;
UPDATE acct SET balance = balance + 3 WHERE id = :b1;
COMMIT;
SELECT balance FROM acct WHERE id = :b1;

--
-- prepared statements, across the switch to a generic plan (whose remote
-- statements have parameters)
--
PREPARE move(int, bigint) AS UPDATE acct SET balance = balance + $2 WHERE id = $1;
BEGIN;
EXECUTE move(:a1, 1);
EXECUTE move(:b1, 1);
EXECUTE move(:a1, 1);
EXECUTE move(:b1, 1);
EXECUTE move(:a1, 1);
EXECUTE move(:b1, 1);
EXECUTE move(:a1, 1);
EXECUTE move(:b1, 1);
ROLLBACK;
SELECT * FROM acct_on_nodes();
BEGIN;
EXECUTE move(:b1, -2);
EXECUTE move(:a1, 2);
COMMIT;
SELECT * FROM acct_on_nodes();
DEALLOCATE move;

--
-- PL/pgSQL exception blocks are subtransactions too
--
CREATE FUNCTION transfer(src int, dst int, amount bigint) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE acct SET balance = balance - amount WHERE id = src;
	UPDATE acct SET balance = balance + amount WHERE id = dst;
	IF (SELECT balance FROM acct WHERE id = src) < 0 THEN
		RAISE EXCEPTION 'account % cannot pay %', src, amount;
	END IF;
	RETURN 'moved ' || amount;
EXCEPTION WHEN raise_exception THEN
	RETURN 'refused: ' || SQLERRM;
END
$$;
SELECT transfer(:a2, :b1, 50) AS first, transfer(:a2, :b1, 5000) AS second;
SELECT id = :a2 AS is_a2, balance FROM acct WHERE id IN (:a2, :b1) ORDER BY id = :a2;
DO $$
DECLARE
	caught int := 0;
BEGIN
	FOR i IN 1..3 LOOP
		BEGIN
			UPDATE txdml.acct SET balance = balance + 100 WHERE id = i;
			INSERT INTO txdml.acct VALUES (i + 1, 'duplicate', 0);
		EXCEPTION WHEN unique_violation THEN
			caught := caught + 1;
		END;
	END LOOP;
	RAISE NOTICE 'caught % unique violations', caught;
	UPDATE txdml.acct SET balance = balance + 1 WHERE id = 1;
END
$$;
-- only the last update stayed
SELECT id, balance FROM acct WHERE id <= 3 ORDER BY id;
SELECT * FROM acct_on_nodes();

--
-- shardext.multi_node_commit = 'reject': writes on one node work, a write
-- on a second node fails before it is sent, and the transaction rolls back
--
SET shardext.multi_node_commit TO 'reject';
BEGIN;
UPDATE acct SET balance = balance - 1 WHERE id = :a1;
UPDATE acct SET balance = balance + 1 WHERE id = :a2;
COMMIT;
BEGIN;
UPDATE acct SET balance = balance - 1000 WHERE id = :a1;
UPDATE acct SET balance = balance + 1000 WHERE id = :b1;
COMMIT;
SELECT * FROM acct_on_nodes();
-- a refused write inside a savepoint can be rolled back, the rest commits
BEGIN;
UPDATE acct SET balance = balance - 2 WHERE id = :a1;
SAVEPOINT s;
UPDATE acct SET balance = balance + 2 WHERE id = :b1;
ROLLBACK TO SAVEPOINT s;
UPDATE acct SET balance = balance + 2 WHERE id = :a2;
COMMIT;
SELECT id = :a1 AS is_a1, balance FROM acct WHERE id IN (:a1, :a2) ORDER BY id = :a1;
-- a single statement that writes on both nodes is refused as well
UPDATE acct SET balance = balance + 1;
-- so is any write to a reference table: it has a placement on every node
INSERT INTO rates VALUES ('EUR', 0.9);
-- reads on any number of nodes are fine
SELECT count(*) FROM acct;
RESET shardext.multi_node_commit;
SELECT * FROM acct_on_nodes();
SELECT * FROM rates_on_nodes();

--
-- reference tables: a write reaches every placement at COMMIT, none at ROLLBACK
--
BEGIN;
INSERT INTO rates VALUES ('EUR', 0.9), ('USD', 1.1);
UPDATE rates SET rate = 1.05 WHERE code = 'CHF';
SELECT * FROM rates ORDER BY code;
SELECT * FROM rates_on_nodes();
COMMIT;
SELECT * FROM rates_on_nodes();
BEGIN;
DELETE FROM rates WHERE code = 'EUR';
INSERT INTO rates VALUES ('JPY', 0.006);
SELECT * FROM rates ORDER BY code;
ROLLBACK;
SELECT * FROM rates_on_nodes();
-- a reference table and a distributed table in one transaction
BEGIN;
UPDATE rates SET rate = 2 WHERE code = 'USD';
UPDATE acct SET balance = balance * 2 WHERE id = :b1;
SAVEPOINT s;
DELETE FROM rates;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT * FROM rates_on_nodes();

--
-- isolation levels follow the coordinator's: REPEATABLE READ keeps the
-- snapshot a node gave the transaction at its first statement there
--
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT sum(balance) AS total FROM acct \gset
-- committed meanwhile by another session (connections of its own)
SELECT count(*) FROM shardext_run_on_shards('txdml.acct',
	'UPDATE %s SET balance = balance + 100000 WHERE id = ' || :a1) WHERE result = 'UPDATE 1';
SELECT sum(balance) = :total AS same_total, count(*) FROM acct;
SELECT balance < 100000 AS old_balance FROM acct WHERE id = :a1;
-- writing a row changed since the snapshot is a serialization failure
UPDATE acct SET balance = balance + 1 WHERE id = :a1;
ROLLBACK;
BEGIN;
SELECT balance > 100000 AS new_balance FROM acct WHERE id = :a1;
COMMIT;
-- READ COMMITTED takes a new snapshot per statement
BEGIN;
SELECT sum(balance) AS total FROM acct \gset
SELECT count(*) FROM shardext_run_on_shards('txdml.acct',
	'UPDATE %s SET balance = balance - 100000 WHERE id = ' || :a1) WHERE result = 'UPDATE 1';
SELECT :total - sum(balance) AS seen_change FROM acct;
COMMIT;

DROP SCHEMA txdml CASCADE;
