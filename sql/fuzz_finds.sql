--
-- fuzz_finds: what the randomized differential test (test/fuzz/sqlfuzz.py)
-- found, each compared with the same query on local tables.
--
CREATE SCHEMA ff_d;
CREATE SCHEMA ff_l;
CREATE FUNCTION ff_tables(s text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('CREATE TABLE %I.a (k int, v int, t text)', s);
	EXECUTE format('CREATE TABLE %I.u (k int PRIMARY KEY, v int, t text)', s);
	EXECUTE format('CREATE TABLE %I.e (k int, v int)', s);
	EXECUTE format('INSERT INTO %I.a SELECT g %% 7, g, CASE WHEN g %% 3 = 0 THEN NULL ELSE ''t'' || g %% 4 END FROM generate_series(1, 40) g', s);
	EXECUTE format('INSERT INTO %I.u SELECT g, g %% 5, ''u'' || g %% 3 FROM generate_series(1, 20) g', s);
END $$;
SELECT ff_tables('ff_d'), ff_tables('ff_l');
SELECT create_distributed_table('ff_d.a', 'k', shard_count => 4);
SELECT create_distributed_table('ff_d.u', 'k', colocate_with => 'ff_d.a');
SELECT create_distributed_table('ff_d.e', 'k', colocate_with => 'ff_d.a');
-- same_result runs a query (as a statement of its own) on both schemas and
-- compares the rows (as a multiset)
CREATE FUNCTION ff_rows(query text, schema text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
	rec record;
	rows text[] := '{}';
BEGIN
	PERFORM set_config('search_path', schema || ', public', true);
	FOR rec IN EXECUTE query LOOP
		rows := rows || rec::text;
	END LOOP;
	PERFORM set_config('search_path', 'public', true);
	RETURN (SELECT coalesce(array_agg(x ORDER BY x), '{}') FROM unnest(rows) x);
END $$;
CREATE FUNCTION same_result(query text) RETURNS TABLE (rows bigint, same boolean) LANGUAGE sql AS $$
	SELECT coalesce(array_length(ff_rows(query, 'ff_d'), 1), 0)::bigint,
	       ff_rows(query, 'ff_d') = ff_rows(query, 'ff_l')
$$;
SET search_path = ff_d, public;

-- a constant in ORDER BY / GROUP BY was sent as a bare "false", which the
-- workers read as a (refused) constant instead of a column reference
SELECT false AS c1, true AS c2 FROM u RIGHT JOIN e ON u.k = e.k WHERE u.t IS NOT NULL ORDER BY 1 DESC NULLS LAST, 2 LIMIT 5;
SELECT false AS c1, count(*) FROM a GROUP BY 1;
SELECT * FROM same_result($$SELECT false AS c1, count(*) FROM a GROUP BY 1, a.k ORDER BY 1$$);

-- a subquery in the SELECT list and in ORDER BY of a DISTINCT query was
-- printed twice with different aliases, so the workers did not see it as
-- the same expression
SELECT * FROM same_result($$SELECT DISTINCT NOT EXISTS (SELECT 1 FROM u WHERE u.k = a.k AND u.v = 2) AS c1, a.t
	FROM a ORDER BY 1, 2 LIMIT 12 OFFSET 1$$);
SELECT * FROM same_result($$SELECT (SELECT max(v) FROM u WHERE u.k = a.k) AS m, count(*) FROM a GROUP BY 1$$);

-- grouping (or DISTINCT, or partitioning) by a distribution column that an
-- outer join null-extends mixes shards: those NULLs are one group
SELECT * FROM same_result($$SELECT DISTINCT e.k, count(*) FROM e FULL JOIN u ON e.k = u.k GROUP BY e.k$$);
SELECT * FROM same_result($$SELECT DISTINCT e.k FROM u LEFT JOIN e ON e.k = u.k$$);
SELECT * FROM same_result($$SELECT e.k, count(*) OVER (PARTITION BY e.k) FROM u LEFT JOIN e ON e.k = u.k$$);
SELECT * FROM same_result($$SELECT s.k, count(*) FROM (SELECT e.k FROM u LEFT JOIN e ON e.k = u.k) s GROUP BY s.k$$);

-- DISTINCT over a window function computed by the shards: their DISTINCT
-- also covered the window's helper columns, so LIMIT could cut rows the
-- result needs
SELECT * FROM same_result($$SELECT DISTINCT rank() OVER (PARTITION BY u.k ORDER BY u.v) AS c1, (u.k % 4) IN (2, 3) AS c2
	FROM u ORDER BY 1 NULLS FIRST, 2 LIMIT 2$$);

-- no shard can match "distribution column = NULL", but an aggregate
-- without GROUP BY still returns its row
SELECT * FROM same_result($$SELECT string_agg(u.t, ',' ORDER BY u.t), sum(u.v), count(*) FROM u JOIN e ON u.k = e.k
	WHERE e.k IN (NULL::int) AND e.k = ANY (ARRAY[18, NULL::int])$$);
SELECT count(*), max(v) FROM a WHERE k = NULL;

-- anonymous records cannot be read back from the workers: computed on the coordinator
SELECT * FROM same_result($$SELECT k, row(k, v) FROM a WHERE k = 1$$);
SELECT * FROM same_result($$SELECT k, row(k, v) AS r FROM u ORDER BY k LIMIT 3$$);

-- a MERGE from a VALUES list over several shards (without WHEN NOT MATCHED)
-- ran on the first value's shard only
BEGIN;
MERGE INTO ff_d.u t USING (VALUES (2, 1), (9, 2), (19, 3)) s(k, v) ON t.k = s.k
	WHEN MATCHED AND t.t < t.t THEN UPDATE SET v = 0 WHEN MATCHED THEN DELETE;
MERGE INTO ff_l.u t USING (VALUES (2, 1), (9, 2), (19, 3)) s(k, v) ON t.k = s.k
	WHEN MATCHED AND t.t < t.t THEN UPDATE SET v = 0 WHEN MATCHED THEN DELETE;
SELECT * FROM same_result('SELECT * FROM u');
ROLLBACK;

-- a MERGE into a reference table from a distributed source, with a CASE
-- on a source column: the CASE's placeholder stays with its CASE
CREATE TABLE ff_d.r (k int, w int);
CREATE TABLE ff_l.r (k int, w int);
SELECT create_reference_table('ff_d.r');
INSERT INTO ff_d.r SELECT g, g FROM generate_series(1, 10) g;
INSERT INTO ff_l.r SELECT g, g FROM generate_series(1, 10) g;
BEGIN;
MERGE INTO ff_d.r t USING (SELECT k, max(v) AS v FROM ff_d.a GROUP BY k) s ON t.k = s.k + 1
	WHEN MATCHED AND 10 = ANY (ARRAY[0, 19]) THEN UPDATE SET w = 0
	WHEN MATCHED THEN UPDATE SET w = CASE s.k WHEN NULL::int THEN 56 WHEN 3 THEN -3 ELSE NULLIF(t.w, -5) END
	WHEN NOT MATCHED THEN INSERT (k, w) VALUES (s.k + 1, s.v);
MERGE INTO ff_l.r t USING (SELECT k, max(v) AS v FROM ff_l.a GROUP BY k) s ON t.k = s.k + 1
	WHEN MATCHED AND 10 = ANY (ARRAY[0, 19]) THEN UPDATE SET w = 0
	WHEN MATCHED THEN UPDATE SET w = CASE s.k WHEN NULL::int THEN 56 WHEN 3 THEN -3 ELSE NULLIF(t.w, -5) END
	WHEN NOT MATCHED THEN INSERT (k, w) VALUES (s.k + 1, s.v);
SELECT * FROM same_result('SELECT * FROM r');
ROLLBACK;

-- a MERGE whose source reads the target itself is not "a source on every node"
RESET search_path;
BEGIN;
MERGE INTO ff_d.a t USING (SELECT k, sum(v) AS v FROM ff_d.a GROUP BY k) s ON t.k = s.k + 1
	WHEN MATCHED AND t.v < 10 THEN UPDATE SET v = s.v WHEN MATCHED THEN DELETE;
MERGE INTO ff_l.a t USING (SELECT k, sum(v) AS v FROM ff_l.a GROUP BY k) s ON t.k = s.k + 1
	WHEN MATCHED AND t.v < 10 THEN UPDATE SET v = s.v WHEN MATCHED THEN DELETE;
SELECT * FROM same_result('SELECT * FROM a');
ROLLBACK;

SET client_min_messages TO warning;
DROP SCHEMA ff_d CASCADE;
DROP SCHEMA ff_l CASCADE;
DROP FUNCTION ff_tables(text);
DROP FUNCTION same_result(text);
DROP FUNCTION ff_rows(text, text);
RESET client_min_messages;
