--
-- insert_select_coordinator: INSERT ... SELECT that goes through the
-- coordinator (rows re-routed by hash), in several batches
--
SET work_mem = '64kB';		-- make the rows the statement reads spill to disk
CREATE TABLE isc (id bigint, k int CHECK (k >= 0), v text);
SELECT create_distributed_table('isc', 'k', shard_count => 8);

-- many batches from a set-returning function
INSERT INTO isc SELECT g, g % 1000, repeat('x', 20) FROM generate_series(1, 30000) g;
SELECT count(*), count(DISTINCT id), sum(k) FROM isc;

-- reading the target while writing it: the SELECT sees the table as it was
-- before the statement, so the new rows are not read again
INSERT INTO isc SELECT id + 100000, (k + 1) % 1000, v FROM isc WHERE id % 2 = 0;
SELECT count(*) AS rows_after, count(*) FILTER (WHERE id > 100000) AS copied FROM isc;
INSERT INTO isc SELECT id, k, v FROM isc;
SELECT count(*) AS doubled FROM isc;

-- a row that fails in a late batch leaves no row of the statement behind
SELECT count(*) AS before_failure FROM isc;
INSERT INTO isc SELECT g, CASE WHEN g = 29000 THEN -1 ELSE g % 1000 END, 'late'
FROM generate_series(1, 30000) g;
SELECT count(*) AS after_failure, count(*) FILTER (WHERE v = 'late') AS late_rows FROM isc;

-- the same in an explicit transaction, rolled back
BEGIN;
INSERT INTO isc SELECT g, g % 1000, 'tx' FROM generate_series(1, 20000) g;
SELECT count(*) FILTER (WHERE v = 'tx') AS in_transaction FROM isc;
ROLLBACK;
SELECT count(*) FILTER (WHERE v = 'tx') AS after_rollback FROM isc;

DROP TABLE isc;
RESET work_mem;
