--
-- merge: MERGE into distributed and reference tables gives the rows and the
-- row counts MERGE gives on local tables: pushed down to the shards when
-- the source is co-located (or reference tables and constants where that is
-- correct), otherwise through the coordinator.
--
SET client_min_messages TO warning;
DROP SCHEMA IF EXISTS merge_d CASCADE;
DROP SCHEMA IF EXISTS merge_l CASCADE;
RESET client_min_messages;
CREATE SCHEMA merge_d;
CREATE SCHEMA merge_l;

-- the same tables twice: distributed in merge_d, local in merge_l
CREATE FUNCTION make_merge_tables(s text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('CREATE TABLE %I.target (k int PRIMARY KEY, v int, note text)', s);
	EXECUTE format('CREATE TABLE %I.seqtarget (k int PRIMARY KEY, seq serial)', s);
	EXECUTE format('CREATE TABLE %I.colo (k int, v int)', s);
	EXECUTE format('CREATE TABLE %I.other (k int, v int)', s);
	EXECUTE format('CREATE TABLE %I.ref (k int, v int)', s);
	EXECUTE format('CREATE TABLE %I.rtarget (k int PRIMARY KEY, v int)', s);
	EXECUTE format('INSERT INTO %I.target (k, v, note) SELECT g, g, ''orig'' FROM generate_series(1, 10) g', s);
	EXECUTE format('INSERT INTO %I.colo SELECT g, g * 10 FROM generate_series(5, 15) g', s);
	EXECUTE format('INSERT INTO %I.other SELECT g, g * 100 FROM generate_series(8, 13) g', s);
	EXECUTE format('INSERT INTO %I.ref SELECT g, g * 1000 FROM generate_series(9, 12) g', s);
	EXECUTE format('INSERT INTO %I.rtarget SELECT g, g FROM generate_series(1, 5) g', s);
END $$;
SELECT make_merge_tables('merge_d'), make_merge_tables('merge_l');
SELECT create_distributed_table('merge_d.target', 'k', shard_count => 4);
SELECT create_distributed_table('merge_d.colo', 'k', colocate_with => 'merge_d.target');
SELECT create_distributed_table('merge_d.other', 'k', shard_count => 3);
SELECT create_reference_table('merge_d.ref');
SELECT create_reference_table('merge_d.rtarget');
SELECT create_distributed_table('merge_d.seqtarget', 'k', colocate_with => 'merge_d.target');

-- the Custom Scan / Task Count / Remote SQL lines of a statement's EXPLAIN
CREATE FUNCTION merge_tasks(stmt text) RETURNS SETOF text LANGUAGE plpgsql AS $fn$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || stmt LOOP
		IF line ~ '(Task Count|Remote SQL|Custom Scan|Write Method)' THEN
			RETURN NEXT line;
		END IF;
		EXIT WHEN line ~ '(Remote SQL|Write Method)';
	END LOOP;
END
$fn$;

-- run_both runs a statement on the distributed tables and on the local
-- ones, and returns both row counts and whether table t ends up the same
CREATE FUNCTION run_both(stmt text, t text DEFAULT 'target')
RETURNS TABLE (distributed bigint, local bigint, same_rows boolean) LANGUAGE plpgsql AS $$
DECLARE
	d_rows text;
	l_rows text;
BEGIN
	PERFORM set_config('search_path', 'merge_d, public', true);
	EXECUTE stmt;
	GET DIAGNOSTICS distributed = ROW_COUNT;
	PERFORM set_config('search_path', 'merge_l, public', true);
	EXECUTE stmt;
	GET DIAGNOSTICS local = ROW_COUNT;
	EXECUTE format('SELECT string_agg(x::text, '' '' ORDER BY x::text) FROM merge_d.%I x', t) INTO d_rows;
	EXECUTE format('SELECT string_agg(x::text, '' '' ORDER BY x::text) FROM merge_l.%I x', t) INTO l_rows;
	same_rows := d_rows IS NOT DISTINCT FROM l_rows;
	PERFORM set_config('search_path', 'public', true);
	RETURN NEXT;
END $$;

-- co-located source joined on the distribution column: one MERGE per shard
SET search_path = merge_d, public;
SELECT * FROM merge_tasks($$MERGE INTO target t USING colo s ON t.k = s.k
	WHEN MATCHED AND s.v > 80 THEN UPDATE SET v = s.v, note = 'upd'
	WHEN MATCHED THEN DELETE
	WHEN NOT MATCHED THEN INSERT (k, v, note) VALUES (s.k, s.v, 'ins')$$);
RESET search_path;
SELECT * FROM run_both($$MERGE INTO target t USING colo s ON t.k = s.k
	WHEN MATCHED AND s.v > 80 THEN UPDATE SET v = s.v, note = 'upd'
	WHEN MATCHED THEN DELETE
	WHEN NOT MATCHED THEN INSERT (k, v, note) VALUES (s.k, s.v, 'ins')$$);

-- every kind of WHEN clause, with DO NOTHING
SELECT * FROM run_both($$MERGE INTO target t USING colo s ON t.k = s.k
	WHEN MATCHED AND t.note = 'ins' THEN DO NOTHING
	WHEN MATCHED THEN UPDATE SET v = t.v + 1
	WHEN NOT MATCHED AND s.k > 100 THEN INSERT (k, v) VALUES (s.k, s.v)
	WHEN NOT MATCHED THEN DO NOTHING$$);

-- a reference table source without WHEN NOT MATCHED runs on every shard
SELECT * FROM run_both($$MERGE INTO target t USING ref s ON t.k = s.k
	WHEN MATCHED THEN UPDATE SET v = t.v + s.v$$);

-- with WHEN NOT MATCHED it runs through the coordinator (a reference row
-- would be inserted by every shard that has no match)
SELECT * FROM run_both($$MERGE INTO target t USING ref s ON t.k = s.k
	WHEN MATCHED THEN UPDATE SET note = 'ref'
	WHEN NOT MATCHED THEN INSERT (k, v, note) VALUES (s.k + 20, s.v, 'from ref')$$);

-- a constant VALUES list on one shard goes to that shard
SET search_path = merge_d, public;
SELECT * FROM merge_tasks($$MERGE INTO target t USING (VALUES (3, 33)) s(k, v) ON t.k = s.k
	WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v)$$);
RESET search_path;
SELECT * FROM run_both($$MERGE INTO target t USING (VALUES (3, 33)) s(k, v) ON t.k = s.k
	WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v)$$);
-- ... and one spanning shards through the coordinator
SELECT * FROM run_both($$MERGE INTO target t USING (VALUES (3, 1), (4, 2), (40, 3), (41, 4)) s(k, v)
	ON t.k = s.k
	WHEN MATCHED THEN UPDATE SET v = t.v + s.v WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v)$$);

-- a non-co-located source, a local source, a source that reads the target,
-- a join condition not on the distribution column, subqueries and volatile
-- functions in the clauses: through the coordinator
SET search_path = merge_d, public;
SELECT * FROM merge_tasks($$MERGE INTO target t USING other s ON t.k = s.k
	WHEN MATCHED THEN UPDATE SET v = s.v$$);
RESET search_path;
SELECT * FROM run_both($$MERGE INTO target t USING other s ON t.k = s.k
	WHEN MATCHED AND s.v > 1200 THEN DELETE
	WHEN MATCHED THEN UPDATE SET note = 'other'
	WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v)$$);
CREATE TABLE merge_source_local (k int, v int);
INSERT INTO merge_source_local VALUES (1, 7), (2, 8), (60, 9);
SELECT * FROM run_both($$MERGE INTO target t USING public.merge_source_local s ON t.k = s.k
	WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v)$$);
SELECT * FROM run_both($$MERGE INTO target t
	USING (SELECT k, sum(v) AS v FROM target GROUP BY k) s ON t.k = s.k + 1
	WHEN MATCHED AND s.v > 5 THEN UPDATE SET v = s.v$$);
SELECT * FROM run_both($$MERGE INTO target t USING colo s ON t.v = s.k
	WHEN MATCHED THEN UPDATE SET note = 'by v'$$);
SELECT * FROM run_both($$MERGE INTO target t USING colo s ON t.k = s.k
	WHEN MATCHED AND t.v < (SELECT avg(v) FROM other) THEN UPDATE SET v = (SELECT max(v) FROM ref)
	WHEN NOT MATCHED THEN INSERT (k, v, note) VALUES (s.k, (SELECT count(*) FROM other WHERE other.k < s.k), 'sub')$$);
-- a sequence default is evaluated once per inserted row (on the coordinator),
-- as in PostgreSQL: no value is skipped for rows that matched
INSERT INTO merge_d.seqtarget (k) VALUES (96), (98);
MERGE INTO merge_d.seqtarget t USING (SELECT g AS k FROM generate_series(95, 99) g) s ON t.k = s.k
	WHEN NOT MATCHED THEN INSERT (k) VALUES (s.k);
SELECT count(*), count(DISTINCT seq), max(seq) - min(seq) + 1 AS span FROM merge_d.seqtarget;

-- a target row matched twice is PostgreSQL's cardinality violation, on
-- both routes
MERGE INTO merge_d.target t USING (SELECT k FROM merge_d.colo UNION ALL SELECT k FROM merge_d.colo) s
	ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = 0;
MERGE INTO merge_d.target t USING (VALUES (5), (5)) s(k) ON t.k = s.k
	WHEN MATCHED THEN UPDATE SET v = 0;
MERGE INTO merge_d.target t USING (VALUES (5), (6), (5)) s(k) ON t.k = s.k
	WHEN MATCHED THEN DELETE;
-- matched twice, but changed once: no error
SELECT * FROM run_both($$MERGE INTO target t USING (VALUES (6, 1), (6, 2)) s(k, a) ON t.k = s.k
	WHEN MATCHED AND s.a = 1 THEN DO NOTHING WHEN MATCHED THEN UPDATE SET v = 66$$);

-- the distribution column cannot change
MERGE INTO merge_d.target t USING merge_d.other s ON t.k = s.k WHEN MATCHED THEN UPDATE SET k = 0;
MERGE INTO merge_d.target t USING merge_d.colo s ON t.k = s.k WHEN MATCHED THEN UPDATE SET k = t.k;

-- reference table targets: runs on every copy from reference tables and constants
SELECT * FROM run_both($$MERGE INTO rtarget t USING ref s ON t.k = s.k - 8
	WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES (s.k, 0)$$, 'rtarget');
SELECT * FROM run_both($$MERGE INTO rtarget t USING (VALUES (1), (2), (70)) s(k) ON t.k = s.k
	WHEN MATCHED AND t.v > 1000 THEN DELETE
	WHEN NOT MATCHED THEN INSERT VALUES (s.k, -1)$$, 'rtarget');
SELECT node_id > 0 AS node, result FROM shardext_run_on_shards('merge_d.rtarget',
	'SELECT string_agg(k || ''='' || v, '','' ORDER BY k) FROM %s');
-- from a source of distributed or local tables, or with volatile values: the
-- coordinator computes the source rows once and every copy merges them
SET search_path = merge_d, public;
SELECT * FROM merge_tasks($$MERGE INTO rtarget t USING colo s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = s.v$$);
RESET search_path;
SELECT * FROM run_both($$MERGE INTO rtarget t USING colo s ON t.k = s.k
	WHEN MATCHED AND s.v > 100 THEN DELETE
	WHEN MATCHED THEN UPDATE SET v = t.v + s.v
	WHEN NOT MATCHED AND s.k < 13 THEN INSERT VALUES (s.k, s.v)$$, 'rtarget');
SELECT * FROM run_both($$MERGE INTO rtarget t USING public.merge_source_local s ON t.k = s.k + 2
	WHEN MATCHED THEN UPDATE SET v = s.v + (SELECT count(*) FROM other)$$, 'rtarget');
MERGE INTO merge_d.rtarget t USING merge_d.ref s ON t.k = s.k - 8 WHEN MATCHED THEN UPDATE SET v = (random() * 1000)::int;
SELECT count(DISTINCT result) AS copies_alike FROM shardext_run_on_shards('merge_d.rtarget',
	'SELECT string_agg(k || ''='' || v, '','' ORDER BY k) FROM %s');
MERGE INTO merge_d.rtarget t USING (SELECT 5 AS k UNION ALL SELECT k FROM merge_d.colo WHERE k = 5) s
	ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = 0;
-- ... but a user-defined function of the target's columns cannot run on the copies
CREATE FUNCTION merge_twice(int) RETURNS int LANGUAGE sql AS 'SELECT $1 * 2';
MERGE INTO merge_d.rtarget t USING merge_d.colo s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = merge_twice(t.v);
DROP FUNCTION merge_twice(int);

-- prepared statements route each execution by its parameters
PREPARE m(int, int) AS MERGE INTO merge_d.target t USING (VALUES ($1, $2)) s(k, v) ON t.k = s.k
	WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v);
EXECUTE m(200, 1); EXECUTE m(201, 2); EXECUTE m(200, 3); EXECUTE m(202, 4); EXECUTE m(203, 5); EXECUTE m(200, 6);
SELECT k, v FROM merge_d.target WHERE k >= 200 ORDER BY k;
DEALLOCATE m;

-- in a transaction, the MERGE's changes are seen and rolled back with it
BEGIN;
MERGE INTO merge_d.target t USING merge_d.other s ON t.k = s.k WHEN MATCHED THEN DELETE;
SELECT count(*) FROM merge_d.target t JOIN merge_d.other s ON t.k = s.k;
ROLLBACK;
SELECT count(*) FROM merge_d.target t JOIN merge_d.other s ON t.k = s.k;

SET client_min_messages TO warning;
DROP SCHEMA merge_d CASCADE;
DROP SCHEMA merge_l CASCADE;
DROP TABLE merge_source_local;
DROP FUNCTION make_merge_tables(text);
DROP FUNCTION run_both(text, text);
DROP FUNCTION merge_tasks(text);
RESET client_min_messages;
