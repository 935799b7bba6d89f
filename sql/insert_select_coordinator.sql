--
-- insert_select_coordinator: INSERT ... SELECT that goes through the
-- coordinator (rows re-routed by hash), in several batches; RETURNING of
-- rows that went to several shards comes back in the order of the rows
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

-- RETURNING hands rows back in the order they were given, as PostgreSQL
-- does (ORMs match generated ids to the objects they inserted by position)
DELETE FROM isc;
INSERT INTO isc (k, v) VALUES (5, 'r1'), (6, 'r2'), (7, 'r3'), (5, 'r4'), (8, 'r5'), (900, 'r6')
RETURNING k, v;
DO $$
DECLARE
	r			record;
	n			int := 0;
BEGIN
	FOR r IN INSERT INTO isc (id, k, v)
		SELECT g, (g * 7919) % 1000, 'o' || g FROM generate_series(1, 25000) g ORDER BY g
		RETURNING id, v
	LOOP
		n := n + 1;
		IF r.id <> n OR r.v <> 'o' || n THEN
			RAISE EXCEPTION 'row % came back as (%, %)', n, r.id, r.v;
		END IF;
	END LOOP;
	RAISE NOTICE '% rows came back in the order they were inserted', n;
END $$;
-- rows skipped by ON CONFLICT DO NOTHING return nothing
CREATE UNIQUE INDEX isc_k_id ON isc (k, id);
INSERT INTO isc (id, k, v) VALUES (-1, 1, 'n1'), (-2, 2, 'n2'), (-3, 3, 'n3'), (1, 919, 'dup')
ON CONFLICT DO NOTHING RETURNING id, k, v;
INSERT INTO isc (id, k, v) VALUES (-4, 4, 'n4'), (1, 919, 'dup'), (-5, 5, 'n5')
ON CONFLICT (k, id) DO UPDATE SET v = 'updated' RETURNING id, k, v;

DROP TABLE isc;
RESET work_mem;
