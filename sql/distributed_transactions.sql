--
-- distributed_transactions: remote transactions follow the local one
--
CREATE TABLE ledger (id int PRIMARY KEY, note text);
SELECT create_distributed_table('ledger', 'id', shard_count => 4);
CREATE FUNCTION ledger_rows() RETURNS bigint LANGUAGE sql AS
	$$SELECT sum(result::bigint) FROM shardext_run_on_shards('ledger', 'SELECT count(*) FROM %s')$$;

-- rows of a transaction are visible to its later statements, and only
-- to them until it commits
BEGIN;
COPY ledger FROM STDIN;
1	one
2	two
\.
COPY ledger TO STDOUT;
SELECT ledger_rows() AS committed_rows;
COMMIT;
SELECT ledger_rows() AS committed_rows;

-- ROLLBACK undoes everything on every node; so does an error
BEGIN;
COPY ledger FROM STDIN;
3	three
\.
ALTER TABLE ledger ADD COLUMN extra int;
ROLLBACK;
SELECT ledger_rows() AS rows_after_rollback,
	   (SELECT sum(result::int) FROM shardext_run_on_shards('ledger',
		$$SELECT count(*) FROM pg_attribute WHERE attrelid = '%s'::regclass AND attname = 'extra'$$))
		AS shards_with_column;
BEGIN;
COPY ledger FROM STDIN;
4	four
\.
COPY ledger FROM STDIN;
1	duplicate
\.
COMMIT;
SELECT ledger_rows() AS rows_after_error;

-- savepoints: ROLLBACK TO undoes the remote work since the savepoint,
-- RELEASE keeps it, nested ones too
BEGIN;
COPY ledger FROM STDIN;
10	kept
\.
SAVEPOINT a;
COPY ledger FROM STDIN;
11	undone
\.
ROLLBACK TO SAVEPOINT a;
SAVEPOINT b;
COPY ledger FROM STDIN;
12	kept too
\.
SAVEPOINT c;
ALTER TABLE ledger ADD COLUMN undone int;
COPY ledger (id, note) FROM STDIN;
13	undone too
\.
ROLLBACK TO SAVEPOINT c;
RELEASE SAVEPOINT b;
-- an error inside a savepoint can be rolled back, and the transaction goes on
SAVEPOINT d;
COPY ledger FROM STDIN;
10	duplicate
\.
ROLLBACK TO SAVEPOINT d;
COPY ledger FROM STDIN;
14	after the error
\.
COMMIT;
COPY ledger TO STDOUT;
SELECT sum(result::int) AS shards_with_undone_column FROM shardext_run_on_shards('ledger',
	$$SELECT count(*) FROM pg_attribute WHERE attrelid = '%s'::regclass AND attname = 'undone'$$);

-- PL/pgSQL exception blocks are subtransactions too
DO $$
BEGIN
	BEGIN
		COPY ledger FROM PROGRAM 'printf "20\tin block\n10\tduplicate\n"';
	EXCEPTION WHEN unique_violation THEN
		RAISE NOTICE 'caught: %', SQLERRM;
	END;
	COPY ledger FROM PROGRAM 'printf "21\tafter block\n"';
END
$$;
SELECT ledger_rows() AS rows_after_block;

-- a transaction that wrote on several nodes commits in two phases; its
-- commit records are cleaned up by recovery, which has nothing left to do
-- (the maintenance daemon's recovery runs every few seconds too, so the
-- records are looked at right after a write that touches every shard)
SELECT count(DISTINCT node_id) > 1 AS several_nodes FROM shardext.shards
WHERE logicalrelid = 'ledger'::regclass;
UPDATE ledger SET note = note;
SELECT count(*) > 0 AS has_commit_records FROM shardext.transaction;
SELECT shardext_recover_prepared_transactions() AS resolved;
SELECT count(*) AS commit_records FROM shardext.transaction;
SELECT sum(result::int) AS prepared_on_nodes FROM shardext_run_on_nodes(
	'SELECT count(*) FROM pg_prepared_xacts');

-- shardext.multi_node_commit = 'reject' refuses a second node before writing it
SET shardext.multi_node_commit TO 'reject';
COPY ledger FROM PROGRAM 'seq 100 150 | sed "s/$/\tmany nodes/"';
SELECT ledger_rows() AS rows_after_reject;
-- writes on one node are fine
BEGIN;
COPY ledger FROM PROGRAM 'printf "%s\tsame shard\n" 44';
COPY ledger FROM PROGRAM 'printf "%s\tsame shard\n" 41';
ROLLBACK;
SET shardext.multi_node_commit TO 'sometimes';
RESET shardext.multi_node_commit;

-- PREPARE TRANSACTION cannot include distributed work
BEGIN;
COPY ledger FROM STDIN;
50	prepared
\.
PREPARE TRANSACTION 'shardext_test';
SELECT ledger_rows() AS rows_after_prepare_refused;

DROP TABLE ledger;
DROP FUNCTION ledger_rows;
