--
-- lateral_outer_joins: LATERAL subqueries that refer to the outer row, on
-- the nullable side of outer joins, computed columns of subqueries there
-- (PlaceHolderVars) and whole-row references (issue 20).  Each query shows
-- PostgreSQL's answer, and lat_check compares it, for four placements of
-- the tables, with the same query on local copies: the distributed rows
-- EXCEPT ALL the local ones and the other way round must be empty.
--
-- Placements: lat_d  int8_tbl and int8_tbl2 hash by q1 (co-located),
--                    int4_tbl hash by f1, int2_tbl reference (the issue's);
--             lat_r  every table a reference table;
--             lat_x  int8_tbl reference, int4_tbl and int2_tbl hash with
--                    other shard counts, int8_tbl2 hash by q2;
--             lat_y  int8_tbl hash by q2, int8_tbl2 hash by q1 (not
--                    co-located), int4_tbl hash, int2_tbl reference;
--             lat_l  local tables (the expected answers).
-- "Odd Tbl" (odd identifiers, a text column) and a local table loc are in
-- every placement.  A table owner without superuser runs the queries.
--
SET client_min_messages TO warning;
DROP ROLE IF EXISTS lat_owner;
CREATE ROLE lat_owner LOGIN NOSUPERUSER;
SELECT node_id > 0 AS worker, success FROM shardext_run_on_nodes($cmd$
	DO $d$ BEGIN DROP ROLE IF EXISTS lat_owner; CREATE ROLE lat_owner LOGIN NOSUPERUSER; END $d$
	$cmd$) ORDER BY node_id;
DO $$
DECLARE
	s text;
BEGIN
	FOREACH s IN ARRAY ARRAY['lat_d', 'lat_r', 'lat_x', 'lat_y', 'lat_l'] LOOP
		EXECUTE format('CREATE SCHEMA %I AUTHORIZATION lat_owner', s);
		PERFORM shardext_run_on_nodes(format('CREATE SCHEMA %I AUTHORIZATION lat_owner', s));
	END LOOP;
END $$;
-- the test's functions
CREATE SCHEMA lat_fn AUTHORIZATION lat_owner;
RESET client_min_messages;

SET ROLE lat_owner;
SET search_path TO lat_fn;
CREATE FUNCTION lat_tables(s text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('CREATE TABLE %I.int8_tbl (q1 int8, q2 int8)', s);
	EXECUTE format('INSERT INTO %I.int8_tbl VALUES (123, 456), (123, 4567890123456789),
		(4567890123456789, 123), (4567890123456789, 4567890123456789),
		(4567890123456789, -4567890123456789)', s);
	EXECUTE format('CREATE TABLE %I.int8_tbl2 AS SELECT q1, q2 FROM %I.int8_tbl', s, s);
	EXECUTE format('INSERT INTO %I.int8_tbl2 VALUES (456, 123), (-123, 456)', s);
	EXECUTE format('CREATE TABLE %I.int4_tbl (f1 int4)', s);
	EXECUTE format('INSERT INTO %I.int4_tbl VALUES (0), (123456), (-123456), (2147483647), (-2147483647)', s);
	EXECUTE format('CREATE TABLE %I.int2_tbl (f1 int2)', s);
	EXECUTE format('INSERT INTO %I.int2_tbl VALUES (0), (1234), (-1234), (32767), (-32767)', s);
	EXECUTE format('CREATE TABLE %I."Odd Tbl" ("Key" int8, "va""l" int8, "Text" text)', s);
	EXECUTE format('INSERT INTO %I."Odd Tbl" SELECT g %% 5, g, CASE WHEN g %% 4 = 0 THEN NULL ELSE ''t'' || g %% 3 END
		FROM generate_series(1, 12) g', s);
	EXECUTE format('CREATE TABLE %I.loc (k int8, v int8)', s);
	EXECUTE format('INSERT INTO %I.loc VALUES (123, 1), (456, 2), (4567890123456789, 3), (NULL, 4)', s);
END $$;
SELECT lat_tables(s) FROM unnest(ARRAY['lat_d', 'lat_r', 'lat_x', 'lat_y', 'lat_l']) s;
SET client_min_messages TO warning;
SELECT create_distributed_table('lat_d.int8_tbl', 'q1', shard_count => 4);
SELECT create_distributed_table('lat_d.int8_tbl2', 'q1', colocate_with => 'lat_d.int8_tbl');
SELECT create_distributed_table('lat_d.int4_tbl', 'f1', shard_count => 4);
SELECT create_reference_table('lat_d.int2_tbl');
SELECT create_distributed_table('lat_d."Odd Tbl"', 'Key', shard_count => 4);
SELECT create_reference_table('lat_r.' || t) FROM unnest(ARRAY['int8_tbl', 'int8_tbl2', 'int4_tbl', 'int2_tbl', '"Odd Tbl"']) t;
SELECT create_reference_table('lat_x.int8_tbl');
SELECT create_distributed_table('lat_x.int8_tbl2', 'q2', shard_count => 3);
SELECT create_distributed_table('lat_x.int4_tbl', 'f1', shard_count => 3);
SELECT create_distributed_table('lat_x.int2_tbl', 'f1', shard_count => 5);
SELECT create_distributed_table('lat_x."Odd Tbl"', 'va"l', shard_count => 3);
SELECT create_distributed_table('lat_y.int8_tbl', 'q2', shard_count => 4);
SELECT create_distributed_table('lat_y.int8_tbl2', 'q1', shard_count => 3);
SELECT create_distributed_table('lat_y.int4_tbl', 'f1', shard_count => 4);
SELECT create_reference_table('lat_y.int2_tbl');
SELECT create_reference_table('lat_y."Odd Tbl"');
RESET client_min_messages;

-- lat_rows: the rows of a query run with the search_path of a placement, as text
CREATE FUNCTION lat_rows(query text, placement text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	rec record;
	saved text := current_setting('search_path');
BEGIN
	PERFORM set_config('search_path', placement || ', public', true);
	FOR rec IN EXECUTE query LOOP
		RETURN NEXT rec::text;
	END LOOP;
	PERFORM set_config('search_path', saved, true);
END $$;
-- lat_check: per placement, how many rows the query returns on it, and how
-- many of the local answer's rows are missing from them and are extra
CREATE FUNCTION lat_check(query text)
RETURNS TABLE (placement text, "rows" bigint, missing bigint, extra bigint) LANGUAGE plpgsql AS $$
DECLARE
	want text[] := ARRAY(SELECT lat_fn.lat_rows(query, 'lat_l'));
	got text[];
BEGIN
	FOREACH placement IN ARRAY ARRAY['lat_d', 'lat_r', 'lat_x', 'lat_y'] LOOP
		got := ARRAY(SELECT lat_fn.lat_rows(query, placement));
		"rows" := cardinality(got);
		missing := (SELECT count(*) FROM (SELECT unnest(want) EXCEPT ALL SELECT unnest(got)) m);
		extra := (SELECT count(*) FROM (SELECT unnest(got) EXCEPT ALL SELECT unnest(want)) e);
		RETURN NEXT;
	END LOOP;
END $$;
-- lat_explain: the plan's nodes, target lists and remote SQL (not the
-- workers' plans, whose details vary); PostgreSQL 19 names subplans
-- "SubPlan expr_1" where earlier versions say "SubPlan 1"
CREATE FUNCTION lat_explain(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || query LOOP
		IF line ~ '^ *(->  )?(Nested Loop|Custom Scan|Result|Aggregate|SubPlan|Output:|Tasks:|Remote SQL:|Distributed Scan:)' THEN
			RETURN NEXT regexp_replace(line, 'SubPlan expr_([0-9]+)', 'SubPlan \1', 'g');
		END IF;
	END LOOP;
END $$;
SET search_path TO lat_d, lat_fn, public;

-- 1. the LATERAL column x is a.q2 (it came back as b.q2: the scan of b
--    declared a.q2 in its target list without fetching it)
select * from int8_tbl a left join lateral (select *, a.q2 as x from int8_tbl b) ss on a.q2 = ss.q1
order by 1, 2, 3, 4, 5;
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral (select *, a.q2 as x from int8_tbl b) ss on a.q2 = ss.q1$$);
select * from int8_tbl a left join lateral (select *, coalesce(a.q2, 42) as x from int8_tbl b) ss on a.q2 = ss.q1
order by 1, 2, 3, 4, 5;
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral (select *, coalesce(a.q2, 42) as x from int8_tbl b) ss on a.q2 = ss.q1$$);
-- the simplest form (aq came back as b.q1); with an inner join or a
-- correlated scalar subquery it was right
select * from int8_tbl a left join lateral (select a.q1 as aq, b.q2 from int8_tbl b where b.q1 = a.q2) s on true
order by 1, 2, 3, 4;
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral (select a.q1 as aq, b.q2 from int8_tbl b where b.q1 = a.q2) s on true$$);
SELECT * FROM lat_check($$select * from int8_tbl a join lateral (select a.q1 as aq, b.q2 from int8_tbl b where b.q1 = a.q2) s on true$$);
SELECT * FROM lat_check($$select a.*, (select max(b.q2) + a.q1 - a.q1 from int8_tbl b where b.q1 = a.q2) from int8_tbl a$$);
-- the scan of b runs once per row of a, with a's value as a parameter; its
-- target list reads the fetched columns and that parameter
SELECT lat_explain($$select * from int8_tbl a left join lateral (select *, a.q2 as x from int8_tbl b) ss on a.q2 = ss.q1$$);

-- 2. a LATERAL subquery joining two scans, referring to the outer row, on
--    the nullable side ("variable not found in subplan target lists")
select * from int8_tbl a left join lateral
  (select b.q1 as bq1, c.q1 as cq1, least(a.q1, b.q1, c.q1) from int8_tbl b cross join int8_tbl c) ss
  on a.q2 = ss.bq1
order by 1, 2, 3, 4, 5;
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral
  (select b.q1 as bq1, c.q1 as cq1, least(a.q1, b.q1, c.q1) from int8_tbl b cross join int8_tbl c) ss
  on a.q2 = ss.bq1$$);
-- more of the same shape: an inner and a full join in the subquery, the
-- outer row in its WHERE and target list
select * from int8_tbl a left join lateral
  (select b.q1, c.q2, a.q2 as aq2 from int8_tbl b join int8_tbl c on b.q2 = c.q1 where b.q1 = a.q2) s on true
order by 1, 2, 3, 4, 5;
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral
  (select b.q1, c.q2, a.q2 as aq2 from int8_tbl b join int8_tbl c on b.q2 = c.q1 where b.q1 = a.q2) s on true$$);
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral
  (select b.q1, c.q2, a.q2 as aq2 from int8_tbl b full join int8_tbl2 c on b.q2 = c.q1) s on s.q1 = a.q2$$);

-- 3. a whole-row reference to the outer row in the subquery (an error:
--    "table row type and query-specified row type do not match")
select * from int4_tbl i left join lateral (select coalesce(i) from int2_tbl j where i.f1 = j.f1) k on true
order by 1;
SELECT * FROM lat_check($$select * from int4_tbl i left join lateral (select coalesce(i) from int2_tbl j where i.f1 = j.f1) k on true$$);
SELECT * FROM lat_check($$select a.q1, s.* from int8_tbl a left join lateral (select a, b from int8_tbl2 b where b.q1 = a.q1) s on true$$);
SELECT * FROM lat_check($$select * from int4_tbl i left join lateral (select row_to_json(i)::text as js from int2_tbl j where j.f1 < 0) s on true$$);
SELECT * FROM lat_check($$select a.q1, (ss.b).q2, ss.x from int8_tbl a left join lateral (select b, coalesce(a) as x from int8_tbl b) ss on a.q2 = (ss.b).q1$$);

-- 4. the class: outer references in ORDER BY / LIMIT and aggregates of the
--    subquery, non-co-located tables, LATERAL inside and beside outer joins
--    of every kind, a computed column on the nullable side (PlaceHolderVar),
--    local tables, odd identifiers
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral
  (select b.q1, a.q2 as x from int8_tbl2 b order by b.q1 + a.q1 desc nulls last, 2 limit 2) s on true$$);
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral
  (select count(*), max(b.q2 + a.q1), a.q2 from int8_tbl2 b where b.q1 = a.q2) s on true$$);
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral
  (select a.q2 as x, b.* from int8_tbl2 b where b.q1 = a.q1) s on true$$);
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral
  (select i.f1, j.f1 as jf, a.q2 as aq from int4_tbl i full join int2_tbl j on j.f1 = i.f1) s on s.f1 = a.q1$$);
SELECT * FROM lat_check($$select * from (int8_tbl a left join lateral
  (select a.q1 + b.q2 as x from int8_tbl2 b where b.q1 = a.q2) s on true) full join int4_tbl i on i.f1 = s.x$$);
SELECT * FROM lat_check($$select * from int2_tbl j right join (int8_tbl a cross join lateral
  (select a.q1 as aq, b.q2 from int8_tbl2 b where b.q1 = a.q2) s) on j.f1 = s.q2 % 1000$$);
SELECT * FROM lat_check($$select * from int8_tbl c left join (int8_tbl a left join
  (select q1, coalesce(q2, 42) as x from int8_tbl2 b) ss1 on a.q2 = ss1.q1 cross join lateral
  (select q1, coalesce(ss1.x, q2) as y from int8_tbl d) ss2) on c.q2 = ss2.q1, lateral (select ss2.y offset 0) ss3$$);
SELECT * FROM lat_check($$select * from int8_tbl a left join (select b.q1, 42 as k, b from int8_tbl2 b) s on s.q1 = a.q2
  where s.k is null or s.b is not null$$);
SELECT * FROM lat_check($$select * from int8_tbl a full join (select *, coalesce(b.q2, 0) + 1 as z from int8_tbl2 b) s on a.q1 = s.q2$$);
SELECT * FROM lat_check($$select * from loc l left join lateral
  (select l.k as lk, l as lr, b.q2 from int8_tbl b where b.q1 = l.k) s on true$$);
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral
  (select l.v, a.q1 as aq from loc l where l.k = a.q2) s on true$$);
-- locking the local table's rows: the distributed table inside the LATERAL
-- subquery is read like one of the top level (its rows are copied)
SELECT * FROM lat_check($$select * from loc l left join lateral
  (select b.q2, l.v as lv from int8_tbl b where b.q1 = l.k) s on true for update of l$$);
SELECT * FROM lat_check($$select o."Key", s.* from "Odd Tbl" o left join lateral
  (select o."va""l" as "Outer ""val""", p."Text" || o."Text" as "t t" from "Odd Tbl" p where p."Key" = o."va""l" % 5) s on true$$);

-- 5. more of the class: nested LATERAL subqueries referring to the
--    outermost row, LATERAL VALUES and functions, a UNION in the subquery,
--    the whole row of a null-extended subquery in WHERE and aggregates, a
--    single shard's rows, generic plans and DML reading a LATERAL join
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral (select * from int8_tbl b left join lateral
  (select a.q1 as aq, b.q2 as bq, c.q1 from int8_tbl2 c where c.q1 = b.q2) s2 on true where b.q1 = a.q2) s on true$$);
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral (select b.q1, s2.* from int8_tbl b left join lateral
  (select a.q2 + b.q1 as z, a from int4_tbl i where i.f1 < b.q1) s2 on true where b.q2 = a.q1) s on true$$);
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral (select b.q1, ss.z from int8_tbl2 b,
  lateral (select a.q1 + b.q2 as z, c.f1 from int2_tbl c where c.f1 = 0) ss where b.q1 = a.q2) s on true$$);
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral (values (a.q1), (a.q2)) v(x) on v.x > 200$$);
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral
  (select a.q1, g from generate_series(1, 2) g, int8_tbl2 b where b.q1 = a.q2 + g - g) s on true$$);
SELECT * FROM lat_check($$select * from int8_tbl a cross join lateral
  (select a.q2 as x, b.q1 from int8_tbl2 b where b.q2 = a.q1 union select a.q1, 0) s$$);
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral
  (select a.q1 as x, b.q2 from int8_tbl2 b where b.q1 = a.q2) s on true where s is null$$);
SELECT * FROM lat_check($$select count(s), count(s.*), count(s.x), count(s.x) filter (where s is not null) from int8_tbl a
  left join lateral (select a.q1 as x, b.q2 from int8_tbl2 b where b.q1 = a.q2) s on true$$);
SELECT * FROM lat_check($$select * from int8_tbl a left join lateral
  (select a as ar, coalesce(a.q2, 1) as c, b.q2 from int8_tbl2 b where b.q1 = a.q1 and b.q1 = 123) s on true where a.q1 = 123$$);
-- a whole-row reference, in a LATERAL subquery, to one of two co-located
-- tables joined on their distribution columns (an internal error "cache
-- lookup failed for attribute 0" when they were grouped for a repartition
-- join)
SET shardext.repartition_join_min_rows TO 0;
SELECT * FROM lat_check($$select a.q1, s.* from int8_tbl a join int8_tbl2 b on a.q1 = b.q1 join lateral
  (select b as br, c.f1 from int4_tbl c where c.f1 = 0 and b is not null) s on true$$);
RESET shardext.repartition_join_min_rows;
-- generic plans: the statement prepared on each placement's tables
SET plan_cache_mode TO force_generic_plan;
CREATE FUNCTION lat_prepared() RETURNS TABLE (placement text, "rows" bigint, missing bigint, extra bigint) LANGUAGE plpgsql AS $$
BEGIN
	FOREACH placement IN ARRAY ARRAY['lat_l', 'lat_d', 'lat_r', 'lat_x', 'lat_y'] LOOP
		PERFORM set_config('search_path', placement || ', public', true);
		EXECUTE format('PREPARE %I(int8) AS select * from int8_tbl a left join lateral
			(select a.q2 as x, b.q2, coalesce(a.q1, $1) c from int8_tbl2 b where b.q1 = a.q2 and b.q2 <> $1) s on true',
			'p_' || placement);
	END LOOP;
	FOREACH placement IN ARRAY ARRAY['lat_d', 'lat_r', 'lat_x', 'lat_y'] LOOP
		"rows" := (SELECT count(*) FROM lat_fn.lat_rows(format('execute %I(456)', 'p_' || placement), placement));
		missing := (SELECT count(*) FROM (SELECT lat_fn.lat_rows('execute p_lat_l(456)', 'lat_l')
					EXCEPT ALL SELECT lat_fn.lat_rows(format('execute %I(456)', 'p_' || placement), placement)) m);
		extra := (SELECT count(*) FROM (SELECT lat_fn.lat_rows(format('execute %I(456)', 'p_' || placement), placement)
				  EXCEPT ALL SELECT lat_fn.lat_rows('execute p_lat_l(456)', 'lat_l')) e);
		RETURN NEXT;
	END LOOP;
END $$;
SELECT * FROM lat_prepared();
DEALLOCATE ALL;
RESET plan_cache_mode;
-- DML whose FROM / USING has a LATERAL join, compared by its RETURNING
-- rows (each rolled back)
BEGIN;
SELECT * FROM lat_check($$update loc set v = s.x from int8_tbl a left join lateral
  (select a.q2 + b.q2 as x from int8_tbl2 b where b.q1 = a.q2 order by 1 limit 1) s on true
  where loc.k = a.q1 and s.x is not null returning loc.*, a.q2, s.x$$);
ROLLBACK;
BEGIN;
SELECT * FROM lat_check($$delete from int8_tbl2 b using int8_tbl a left join lateral
  (select a.q2 as x from int4_tbl i where i.f1 = 0) s on true
  where b.q1 = a.q2 and s.x is not null returning b.*, s.x$$);
ROLLBACK;
BEGIN;
SELECT * FROM lat_check($$insert into int8_tbl2 select a.q1 + 1, coalesce(s.x, 7) from int8_tbl a left join lateral
  (select a.q1 as x, b.q2 from int8_tbl2 b where b.q1 = a.q2) s on true returning *$$);
ROLLBACK;

-- a scan rescanned for each outer row without a change to its remote query
-- replays the rows of its last run, and a run its reader stopped early (a
-- LIMIT, here growing and shrinking from row to row) goes on where it stopped
SELECT * FROM lat_check($$select a.q1, a.q2, s.c from int8_tbl a cross join lateral
  (select count(*) as c from (select 1 from int8_tbl2 b limit abs(a.q2 % 5)) x) s$$);
SELECT * FROM lat_check($$select a.*, s.* from int8_tbl a left join lateral
  (select a.q2 as aq2, b.q1 from int8_tbl2 b order by a.q1, 2 desc limit 2) s on true$$);

-- a correlated subquery whose text value is a parameter of the inner scan:
-- EXPLAIN shows its SQL (it read a value that did not exist yet)
SELECT lat_explain($$select (select count(*) from "Odd Tbl" b where b."Text" = a."Text") from "Odd Tbl" a$$);
SELECT * FROM lat_check($$select (select count(*) from "Odd Tbl" b where b."Text" = a."Text") from "Odd Tbl" a$$);

RESET ROLE;
RESET search_path;
SET client_min_messages TO warning;
DROP SCHEMA lat_d, lat_r, lat_x, lat_y, lat_l, lat_fn CASCADE;
SELECT bool_and(success) FROM shardext_run_on_nodes('DROP SCHEMA IF EXISTS lat_d, lat_r, lat_x, lat_y, lat_l CASCADE');
DROP ROLE lat_owner;
SELECT bool_and(success) FROM shardext_run_on_nodes('DROP ROLE IF EXISTS lat_owner');
