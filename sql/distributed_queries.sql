--
-- distributed_queries: a differential test.  Every query of the battery
-- runs on distributed tables (d_*) and on local copies of the same rows
-- (l_*); the results must be equal (in order, for queries with a total
-- ORDER BY; as multisets otherwise).  The battery runs twice: with
-- pushdown, and with every query pulled to the coordinator.
--
SET client_min_messages TO warning;
CREATE SCHEMA diff;
SET search_path TO diff, public;

CREATE TABLE d_orders (
	id bigint NOT NULL,
	customer_id int NOT NULL,
	amount numeric(10,2),
	qty int,
	status text,
	note text,
	created date,
	flag bool,
	score float8,
	PRIMARY KEY (customer_id, id)
);
CREATE TABLE d_items (
	order_id bigint,
	customer_id int,
	sku text,
	price numeric,
	n int
);
CREATE TABLE d_ref (status text PRIMARY KEY, label text, weight int);
CREATE TABLE d_other (k int, customer_id int, v text);
CREATE TABLE "d_Odd Table" ("Mixed Col" int, "quote""col" text, "select" int);

INSERT INTO d_orders
SELECT g, g % 37, (g * 7 % 1000) / 10.0, g % 5,
	   (ARRAY['new', 'paid', 'shipped', 'void'])[g % 4 + 1],
	   CASE WHEN g % 11 = 0 THEN NULL ELSE 'it''s "note" ' || g END,
	   date '2026-01-01' + (g % 90), g % 3 = 0, (g % 17) * 0.25
FROM generate_series(1, 2000) g;
INSERT INTO d_items
SELECT g / 3 + 1, ((g / 3 + 1) % 37), 'sku-' || (g % 13), (g % 50) + 0.5, g % 4
FROM generate_series(0, 4500) g;
INSERT INTO d_ref VALUES ('new', 'New', 1), ('paid', 'Paid', 2), ('shipped', 'Shipped', 3);
INSERT INTO d_other SELECT g, g % 37, 'v' || g FROM generate_series(1, 300) g;
INSERT INTO "d_Odd Table" SELECT g, 'q''' || g, g % 7 FROM generate_series(1, 100) g;

-- local copies with the same rows
CREATE TABLE l_orders AS SELECT * FROM d_orders;
CREATE TABLE l_items AS SELECT * FROM d_items;
CREATE TABLE l_ref AS SELECT * FROM d_ref;
CREATE TABLE l_other AS SELECT * FROM d_other;
CREATE TABLE "l_Odd Table" AS SELECT * FROM "d_Odd Table";

SELECT create_distributed_table('d_orders', 'customer_id');
SELECT create_distributed_table('d_items', 'customer_id', colocate_with => 'd_orders');
SELECT create_reference_table('d_ref');
SELECT create_distributed_table('d_other', 'k', shard_count => 8);
SELECT create_distributed_table('"d_Odd Table"', 'Mixed Col');
RESET client_min_messages;

-- compare(query): 'ok', or what differs between the two runs
CREATE FUNCTION compare(query text) RETURNS text LANGUAGE plpgsql AS $fn$
DECLARE
	local_query text := regexp_replace(query, '(\m|")d_', '\1l_', 'g');
	ordered bool := query ~* 'order by [^)]*$';
	dist text[] := '{}';
	loc text[] := '{}';
	r record;
BEGIN
	BEGIN
		FOR r IN EXECUTE query LOOP
			dist := dist || r::text;
		END LOOP;
	EXCEPTION WHEN OTHERS THEN
		RETURN 'error: ' || SQLERRM;
	END;
	FOR r IN EXECUTE local_query LOOP
		loc := loc || r::text;
	END LOOP;
	IF NOT ordered THEN
		dist := ARRAY(SELECT x FROM unnest(dist) x ORDER BY x);
		loc := ARRAY(SELECT x FROM unnest(loc) x ORDER BY x);
	END IF;
	IF dist IS NOT DISTINCT FROM loc THEN
		RETURN 'ok';
	END IF;
	RETURN format('DIFFERENT: %s rows vs %s rows; first distributed: %s; first local: %s',
				  cardinality(dist), cardinality(loc), dist[1], loc[1]);
END
$fn$;

CREATE TABLE battery (n serial, query text);
INSERT INTO battery (query) VALUES
-- router queries
('SELECT * FROM d_orders WHERE customer_id = 5 ORDER BY id'),
('SELECT id, amount FROM d_orders WHERE customer_id = 5 AND id = 5'),
('SELECT count(*), sum(amount), avg(qty) FROM d_orders WHERE customer_id = 7'),
('SELECT status, count(*) FROM d_orders WHERE customer_id = 3 GROUP BY status ORDER BY status'),
('SELECT * FROM d_orders WHERE customer_id = 9 ORDER BY amount DESC, id LIMIT 4 OFFSET 2'),
('SELECT o.id, i.sku FROM d_orders o JOIN d_items i ON i.order_id = o.id AND i.customer_id = o.customer_id WHERE o.customer_id = 4 ORDER BY 1, 2'),
('SELECT o.id, r.label FROM d_orders o LEFT JOIN d_ref r ON r.status = o.status WHERE o.customer_id = 2 ORDER BY 1'),
('SELECT id FROM d_orders WHERE customer_id = 6 AND id IN (SELECT order_id FROM d_items WHERE customer_id = 6 AND n = 2) ORDER BY 1'),
('SELECT id FROM d_orders o WHERE customer_id = 8 AND EXISTS (SELECT 1 FROM d_items i WHERE i.customer_id = o.customer_id AND i.order_id = o.id AND i.price > 30) ORDER BY 1'),
('SELECT id, row_number() OVER (ORDER BY amount, id) FROM d_orders WHERE customer_id = 10 ORDER BY 1'),
('SELECT DISTINCT status FROM d_orders WHERE customer_id = 11'),
('SELECT * FROM d_orders WHERE customer_id = 12 AND note IS NULL'),
('SELECT id FROM d_orders WHERE customer_id = 13 AND note LIKE ''%"note" 1%'' ORDER BY id'),
('SELECT * FROM d_orders WHERE customer_id IN (1, 38) ORDER BY id'),
('SELECT * FROM d_orders WHERE customer_id = ANY (ARRAY[2, 3, 4]) AND qty = 1 ORDER BY id'),
('SELECT * FROM d_orders WHERE customer_id = NULL'),
('SELECT count(*) FROM d_orders WHERE customer_id = -1'),
('SELECT * FROM d_orders WHERE customer_id = 5::bigint AND id < 300 ORDER BY id'),
-- multi-shard aggregates
('SELECT count(*) FROM d_orders'),
('SELECT count(*), count(note), count(DISTINCT status), sum(amount), sum(qty), avg(amount), avg(qty), min(created), max(note) FROM d_orders'),
('SELECT avg(id), sum(id), avg(score), sum(score) FROM d_orders WHERE score < 1'),
('SELECT bool_and(flag), bool_or(flag), every(qty < 5) FROM d_orders'),
('SELECT stddev(amount), variance(amount), stddev_pop(qty), var_samp(qty) FROM d_orders'),
('SELECT string_agg(status, '','' ORDER BY id) FROM d_orders WHERE id < 30'),
('SELECT sum(cardinality(a)), max(cardinality(a)) FROM (SELECT array_agg(id) a FROM d_orders GROUP BY status) s'),
('SELECT cardinality(array_agg(id)), min(x) FROM (SELECT unnest(array_agg(id)) x, 1 id FROM d_orders WHERE qty = 1) s'),
('SELECT status, array_agg(id ORDER BY id) FROM d_orders WHERE id < 40 GROUP BY status'),
('SELECT json_agg(id ORDER BY id) FROM d_orders WHERE id < 20'),
('SELECT status, jsonb_agg(qty) IS NOT NULL FROM d_orders GROUP BY status'),
('SELECT count(*) FILTER (WHERE qty > 2), sum(amount) FILTER (WHERE flag) FROM d_orders'),
('SELECT sum(amount) FROM d_orders WHERE false'),
('SELECT json_array_length(json_agg(id)), json_typeof(json_agg(note)) FROM d_orders'),
('SELECT count(DISTINCT qty), sum(DISTINCT qty), avg(amount), count(*) FROM d_orders WHERE id > 100'),
('SELECT status, count(DISTINCT created), max(amount) FROM d_orders GROUP BY status HAVING count(DISTINCT created) > 80 ORDER BY 1'),
('SELECT stddev(id), var_pop(amount), stddev_pop(amount), variance(qty), stddev_samp(qty::numeric / 3) FROM d_orders'),
('SELECT status, stddev(amount), var_samp(id) FROM d_orders GROUP BY status ORDER BY 1'),
('SELECT stddev(amount), variance(qty) FROM d_orders WHERE id = 5'),
('SELECT stddev(amount), var_pop(qty) FROM d_orders WHERE id < 3'),
('SELECT count(*), sum(qty), avg(qty), max(id) FROM d_orders WHERE id < 0'),
('SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) FROM d_orders'),
-- grouping
('SELECT customer_id, count(*), sum(amount) FROM d_orders GROUP BY customer_id ORDER BY customer_id'),
('SELECT customer_id, count(DISTINCT status) FROM d_orders GROUP BY 1 HAVING count(*) > 54 ORDER BY 1'),
('SELECT status, count(*), avg(amount), min(id), max(score) FROM d_orders GROUP BY status ORDER BY status'),
('SELECT status, qty, count(*) FROM d_orders GROUP BY status, qty HAVING sum(amount) > 1000 ORDER BY 1, 2'),
('SELECT qty % 2 AS parity, count(*) FROM d_orders GROUP BY qty % 2 ORDER BY 1'),
('SELECT created, count(*) FROM d_orders GROUP BY created ORDER BY count(*) DESC, created LIMIT 5'),
('SELECT status, count(DISTINCT customer_id) FROM d_orders GROUP BY status ORDER BY 1'),
('SELECT count(*) FROM (SELECT customer_id FROM d_orders GROUP BY customer_id HAVING avg(qty) > 1.9) s'),
('SELECT status, sum(qty) + 1, max(amount) - min(amount) FROM d_orders GROUP BY status HAVING count(*) > 10 ORDER BY 1'),
('SELECT flag, count(*) FROM d_orders GROUP BY ROLLUP (flag) ORDER BY 1'),
-- ORDER BY / LIMIT / DISTINCT
('SELECT id, amount FROM d_orders ORDER BY amount DESC, id LIMIT 10'),
('SELECT id FROM d_orders ORDER BY id LIMIT 5 OFFSET 100'),
('SELECT id, note FROM d_orders ORDER BY note NULLS FIRST, id LIMIT 7'),
('SELECT DISTINCT status FROM d_orders'),
('SELECT DISTINCT qty, status FROM d_orders ORDER BY 1, 2'),
('SELECT DISTINCT ON (customer_id) customer_id, id FROM d_orders ORDER BY customer_id, id'),
('SELECT DISTINCT ON (status) status, id FROM d_orders ORDER BY status, id DESC'),
('SELECT id FROM d_orders WHERE qty = 3 ORDER BY id DESC LIMIT 3'),
('SELECT count(*) FROM (SELECT id FROM d_orders LIMIT 17) s'),
-- window functions
('SELECT customer_id, id, rank() OVER (PARTITION BY customer_id ORDER BY amount, id) FROM d_orders WHERE id < 200 ORDER BY 1, 2'),
('SELECT id, sum(amount) OVER (PARTITION BY customer_id) FROM d_orders WHERE id < 100 ORDER BY id'),
('SELECT id, row_number() OVER (ORDER BY id) FROM d_orders WHERE id < 50 ORDER BY id'),
('SELECT status, id, lag(id) OVER (PARTITION BY status ORDER BY id) FROM d_orders WHERE id < 60 ORDER BY 1, 2'),
-- co-located and reference joins
('SELECT o.id, count(*) FROM d_orders o JOIN d_items i ON i.customer_id = o.customer_id AND i.order_id = o.id GROUP BY o.id ORDER BY o.id LIMIT 20'),
('SELECT count(*), sum(i.price) FROM d_orders o JOIN d_items i USING (customer_id) WHERE i.order_id = o.id'),
('SELECT o.status, r.label, count(*) FROM d_orders o JOIN d_ref r ON r.status = o.status GROUP BY 1, 2 ORDER BY 1'),
('SELECT o.status, r.label, count(*) FROM d_orders o LEFT JOIN d_ref r ON r.status = o.status GROUP BY 1, 2 ORDER BY 1'),
('SELECT r.status, count(o.id) FROM d_ref r LEFT JOIN d_orders o ON o.status = r.status GROUP BY 1 ORDER BY 1'),
('SELECT count(*) FROM d_orders o FULL JOIN d_items i ON i.customer_id = o.customer_id AND i.order_id = o.id'),
('SELECT count(*) FROM d_orders o LEFT JOIN d_items i ON i.customer_id = o.customer_id AND i.order_id = o.id WHERE i.sku IS NULL'),
('SELECT o.id, i.sku FROM d_orders o, d_items i WHERE o.customer_id = i.customer_id AND o.id = i.order_id AND i.n = 3 ORDER BY 1, 2 LIMIT 15'),
('SELECT count(*) FROM d_orders o JOIN d_items i ON i.order_id = o.id'),
('SELECT count(*) FROM d_orders o JOIN d_other x ON x.customer_id = o.customer_id WHERE o.id < 100'),
('SELECT o.customer_id, count(*) FROM d_orders o JOIN d_items i ON o.customer_id = i.customer_id AND o.id = i.order_id JOIN d_ref r ON r.status = o.status GROUP BY 1 ORDER BY 1'),
-- subqueries
('SELECT count(*) FROM d_orders WHERE status IN (SELECT status FROM d_ref WHERE weight > 1)'),
('SELECT count(*) FROM d_orders o WHERE EXISTS (SELECT 1 FROM d_items i WHERE i.customer_id = o.customer_id AND i.order_id = o.id AND i.n = 0)'),
('SELECT count(*) FROM d_orders o WHERE NOT EXISTS (SELECT 1 FROM d_items i WHERE i.customer_id = o.customer_id AND i.order_id = o.id)'),
('SELECT count(*) FROM d_orders WHERE id IN (SELECT order_id FROM d_items WHERE price > 40)'),
('SELECT count(*) FROM d_orders WHERE customer_id IN (SELECT customer_id FROM d_items WHERE n = 1 AND order_id < 300)'),
('SELECT count(*) FROM d_orders WHERE customer_id NOT IN (SELECT customer_id FROM d_items WHERE n = 3 AND price > 45)'),
('SELECT count(*) FROM d_orders o WHERE EXISTS (SELECT 1 FROM d_items i WHERE i.customer_id = o.customer_id AND i.price > 49 LIMIT 1)'),
('SELECT count(*) FROM d_orders o WHERE EXISTS (SELECT 1 FROM d_items i WHERE i.customer_id = o.customer_id HAVING count(*) > 122)'),
('SELECT o.customer_id, count(*) FROM d_orders o WHERE o.qty = 2 OR NOT EXISTS (SELECT 1 FROM d_items i WHERE i.customer_id = o.customer_id AND i.order_id = o.id AND i.n = 1) GROUP BY 1 ORDER BY 1'),
('SELECT count(*) FROM d_orders WHERE amount > (SELECT avg(amount) FROM d_orders)'),
('SELECT id, (SELECT label FROM d_ref r WHERE r.status = o.status) FROM d_orders o WHERE id < 25 ORDER BY id'),
('SELECT s.customer_id, s.total FROM (SELECT customer_id, sum(amount) AS total FROM d_orders GROUP BY customer_id) s WHERE s.total > 1800 ORDER BY 1'),
('SELECT max(c) FROM (SELECT status, count(*) c FROM d_orders GROUP BY status) s'),
('SELECT o.id, l.n FROM d_orders o, LATERAL (SELECT count(*) n FROM d_items i WHERE i.customer_id = o.customer_id AND i.order_id = o.id) l WHERE o.id < 30 ORDER BY 1'),
('WITH t AS (SELECT customer_id, count(*) c FROM d_orders GROUP BY 1) SELECT c, count(*) FROM t GROUP BY c ORDER BY c'),
('WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT n, (SELECT count(*) FROM d_orders WHERE qty = n) FROM r ORDER BY n'),
('SELECT count(*) FROM d_orders WHERE id NOT IN (SELECT order_id FROM d_items WHERE order_id IS NOT NULL)'),
('SELECT s.status, s.c, r.label FROM (SELECT status, count(*) c FROM d_orders GROUP BY status) s LEFT JOIN d_ref r USING (status) ORDER BY 1'),
('SELECT * FROM (SELECT customer_id, max(amount) m FROM d_orders GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 5) a JOIN (SELECT customer_id, count(*) FROM d_items GROUP BY 1) b USING (customer_id) ORDER BY 1'),
('WITH a AS (SELECT customer_id, sum(qty) q FROM d_orders GROUP BY 1), b AS (SELECT customer_id, sum(n) n FROM d_items GROUP BY 1) SELECT count(*), sum(a.q), sum(b.n) FROM a JOIN b USING (customer_id)'),
('WITH t AS (SELECT status, avg(amount) a FROM d_orders GROUP BY 1) SELECT t1.status, t2.status FROM t t1, t t2 WHERE t1.a < t2.a ORDER BY 1, 2'),
('SELECT count(*) FROM d_orders o WHERE o.customer_id IN (SELECT customer_id FROM d_items GROUP BY customer_id HAVING count(*) > 120)'),
('SELECT x.id, x.r FROM (SELECT id, rank() OVER (ORDER BY amount DESC, id) r FROM d_orders) x WHERE x.r <= 5 ORDER BY 2'),
-- subqueries in FROM that run shard by shard (pushed down) and that do not
('SELECT o.customer_id, count(*), max(s.n) FROM d_orders o JOIN (SELECT customer_id, count(*) n FROM d_items GROUP BY customer_id) s ON s.customer_id = o.customer_id GROUP BY 1 ORDER BY 1'),
('SELECT count(*), sum(s.amount) FROM (SELECT customer_id, amount FROM d_orders WHERE qty > 1) s JOIN d_items i ON i.customer_id = s.customer_id WHERE i.n = 2'),
('SELECT t.c, count(*) FROM (SELECT DISTINCT customer_id, status FROM d_orders) s JOIN (SELECT customer_id, sum(n) c FROM d_items GROUP BY 1) t USING (customer_id) GROUP BY 1 ORDER BY 1'),
('SELECT count(*) FROM (SELECT DISTINCT status FROM d_orders) s'),
('SELECT count(*), sum(c) FROM (SELECT status, count(*) c FROM d_orders GROUP BY status) s JOIN d_items i ON i.sku = s.status'),
('SELECT s.status, s.c FROM (SELECT status, count(*) c FROM d_orders GROUP BY status) s JOIN (SELECT status FROM d_ref) r USING (status) ORDER BY 1'),
('SELECT count(*) FROM (SELECT customer_id, sum(qty) q FROM d_orders GROUP BY 1) a JOIN (SELECT customer_id, sum(n) n FROM d_items GROUP BY 1) b ON a.customer_id = b.customer_id AND a.q > b.n'),
('SELECT count(*) FROM (SELECT customer_id, id FROM d_orders) a JOIN (SELECT customer_id, order_id FROM d_items) b ON a.id = b.order_id'),
('SELECT a.customer_id, a.r FROM (SELECT customer_id, rank() OVER (PARTITION BY customer_id ORDER BY amount DESC, id) r FROM d_orders) a JOIN d_items i USING (customer_id) WHERE a.r = 1 AND i.n = 3 ORDER BY 1, 2 LIMIT 12'),
('SELECT a.r, count(*) FROM (SELECT customer_id, rank() OVER (ORDER BY amount DESC, id) r FROM d_orders) a JOIN d_items i USING (customer_id) WHERE a.r < 4 GROUP BY 1 ORDER BY 1'),
('SELECT o.status, r.label, count(*) FROM d_orders o LEFT JOIN (SELECT status, label FROM d_ref WHERE weight > 1) r ON r.status = o.status GROUP BY 1, 2 ORDER BY 1'),
('SELECT count(*) FROM (SELECT status, label FROM d_ref) r LEFT JOIN (SELECT customer_id, status FROM d_orders) o ON o.status = r.status'),
('SELECT x.customer_id, x.m FROM (SELECT y.customer_id, max(y.t) m FROM (SELECT customer_id, id, amount * qty t FROM d_orders) y GROUP BY 1) x ORDER BY 2 DESC, 1 LIMIT 5'),
('SELECT count(*) FROM (SELECT customer_id AS c, count(*) FROM d_orders GROUP BY customer_id HAVING count(*) > 50) s JOIN d_orders o ON o.customer_id = s.c'),
('SELECT count(*) FROM (SELECT customer_id::bigint AS c FROM d_orders) s JOIN d_items i ON i.customer_id = s.c'),
('SELECT count(*), sum(x) FROM (SELECT customer_id, qty x FROM d_orders UNION ALL SELECT customer_id, n FROM d_items) u'),
('SELECT u.customer_id, count(*) FROM (SELECT customer_id FROM d_orders UNION ALL SELECT customer_id FROM d_items WHERE n > 1) u GROUP BY 1 ORDER BY 1'),
('SELECT count(*) FROM (SELECT customer_id, status FROM d_orders UNION SELECT customer_id, sku FROM d_items) u'),
('SELECT count(*) FROM (SELECT status FROM d_orders UNION SELECT sku FROM d_items) u'),
('SELECT count(*), sum(w) FROM (SELECT weight w FROM d_ref UNION ALL SELECT qty FROM d_orders) u'),
('SELECT count(*) FROM (SELECT customer_id, id FROM d_orders UNION ALL SELECT customer_id, order_id FROM d_items) u JOIN d_orders o ON o.customer_id = u.customer_id WHERE o.id < 100'),
('SELECT count(*) FROM (SELECT customer_id FROM d_orders UNION ALL SELECT k FROM d_other) u'),
('SELECT count(*), sum(a), sum(b) FROM (SELECT customer_id a, id b FROM d_orders UNION ALL SELECT order_id::int, customer_id FROM d_items) u'),
('SELECT count(*) FROM (SELECT customer_id FROM d_orders INTERSECT SELECT customer_id FROM d_items) u'),
('SELECT u.c, count(*) FROM (SELECT customer_id c FROM d_orders UNION ALL (SELECT customer_id FROM d_items UNION SELECT customer_id FROM d_orders WHERE qty = 0)) u GROUP BY 1 HAVING count(*) > 100 ORDER BY 1'),
('WITH t AS (SELECT customer_id, sum(n) s FROM d_items GROUP BY 1) SELECT o.customer_id, count(*), max(t.s) FROM d_orders o JOIN t USING (customer_id) GROUP BY 1 ORDER BY 1 LIMIT 7'),
('WITH t AS MATERIALIZED (SELECT customer_id, sum(n) s FROM d_items GROUP BY 1) SELECT count(*), sum(t.s) FROM d_orders o JOIN t USING (customer_id)'),
('WITH t AS (SELECT customer_id, sum(n) s FROM d_items GROUP BY 1) SELECT count(*) FROM t a JOIN t b ON a.customer_id = b.customer_id + 1'),
('WITH t AS (SELECT status, count(*) c FROM d_orders GROUP BY 1), u AS (SELECT customer_id, status FROM d_orders WHERE qty = 2) SELECT u.status, count(*), max(t.c) FROM u JOIN t USING (status) GROUP BY 1 ORDER BY 1'),
('WITH t AS (SELECT customer_id, id FROM d_orders WHERE qty = 1), v AS (SELECT customer_id FROM t WHERE id % 2 = 0) SELECT count(*) FROM v JOIN d_items i USING (customer_id)'),
('WITH t AS (SELECT customer_id, sum(qty) q FROM d_orders GROUP BY 1) SELECT count(*) FROM d_items i WHERE i.n < (SELECT max(q) / 100 FROM t WHERE t.customer_id = i.customer_id)'),
('WITH t AS (SELECT customer_id, sum(qty) q FROM d_orders GROUP BY 1) SELECT s.customer_id, s.q FROM (SELECT * FROM t WHERE q > 150) s JOIN (SELECT DISTINCT customer_id FROM d_items) d USING (customer_id) ORDER BY 1'),
('SELECT o.customer_id, o.id, (SELECT max(i.price) FROM d_items i WHERE i.customer_id = o.customer_id AND i.order_id = o.id) FROM d_orders o WHERE o.id % 97 = 0 ORDER BY 2'),
('SELECT count(*) FROM d_orders o WHERE o.amount > (SELECT avg(price) FROM d_items i WHERE i.customer_id = o.customer_id)'),
('SELECT count(*) FROM d_orders o WHERE o.amount > (SELECT avg(price) FROM d_items i WHERE i.order_id = o.id)'),
('SELECT s.customer_id FROM (SELECT customer_id, sum(qty) q FROM d_orders GROUP BY 1) s WHERE EXISTS (SELECT 1 FROM d_items i WHERE i.customer_id = s.customer_id AND i.n = 3 AND i.price > 49) ORDER BY 1'),
('SELECT * FROM (SELECT customer_id, sum(qty) q FROM d_orders GROUP BY 1) s WHERE s.customer_id = 5'),
('SELECT o.id, s.q FROM d_orders o LEFT JOIN (SELECT customer_id, sum(n) q FROM d_items GROUP BY 1) s ON s.customer_id = o.customer_id WHERE s.customer_id IN (3, 4) AND o.id < 300 ORDER BY 1'),
('SELECT count(*) FROM (SELECT customer_id FROM d_orders UNION ALL SELECT customer_id FROM d_items) u WHERE u.customer_id = ANY (''{1,2,36}'')'),
('SELECT r.rn, count(*) FROM d_orders o JOIN (SELECT status, row_number() OVER (ORDER BY weight) rn FROM d_ref) r USING (status) GROUP BY 1 ORDER BY 1'),
('SELECT count(*) FROM d_orders o WHERE o.status = (SELECT status FROM d_ref ORDER BY weight DESC LIMIT 1)'),
('SELECT o.id, r.s FROM d_orders o CROSS JOIN (SELECT string_agg(status, '','' ORDER BY status) s FROM d_ref) r WHERE o.id < 5 ORDER BY 1'),
-- set operations
('(SELECT id FROM d_orders ORDER BY id LIMIT 3) UNION ALL (SELECT order_id FROM d_items ORDER BY order_id DESC LIMIT 2)'),
('SELECT customer_id, count(*) FROM d_orders WHERE customer_id = 3 GROUP BY 1 UNION ALL SELECT customer_id, count(*) FROM d_items WHERE customer_id = 3 GROUP BY 1'),
('SELECT status, count(*) FROM d_orders GROUP BY status EXCEPT SELECT status, 500 FROM d_ref ORDER BY 1'),
('SELECT id FROM d_orders WHERE customer_id = 1 UNION SELECT id FROM d_orders WHERE customer_id = 2 ORDER BY 1'),
('SELECT status FROM d_orders UNION ALL SELECT status FROM d_ref'),
('SELECT customer_id FROM d_orders INTERSECT SELECT customer_id FROM d_items'),
('SELECT qty FROM d_orders EXCEPT SELECT n FROM d_items'),
-- expressions, identifiers, types
('SELECT id, upper(note), length(note), amount * 2, amount::int, created + 1, extract(month FROM created) FROM d_orders WHERE id < 15 ORDER BY id'),
('SELECT id FROM d_orders WHERE created > date ''2026-03-01'' AND note ILIKE ''%note%'' AND score BETWEEN 1 AND 2 ORDER BY id LIMIT 10'),
('SELECT id, CASE WHEN qty > 2 THEN ''big'' WHEN qty = 0 THEN ''none'' ELSE ''small'' END, coalesce(note, ''-''), nullif(qty, 0), greatest(qty, 2) FROM d_orders WHERE id < 20 ORDER BY id'),
('SELECT count(*) FROM d_orders WHERE created < now()::date + 1000'),
('SELECT count(*) FROM d_orders WHERE status = ANY (''{new,void}''::text[]) AND id % 2 = 0'),
('SELECT "Mixed Col", "quote""col", "select" FROM "d_Odd Table" WHERE "Mixed Col" = 42'),
('SELECT "select", count(*), max("quote""col") FROM "d_Odd Table" GROUP BY "select" ORDER BY 1'),
('SELECT t."Mixed Col" FROM "d_Odd Table" t WHERE t."quote""col" = ''q''''7'''),
('SELECT id, note FROM d_orders WHERE note = ''it''''s "note" 5'''),
('SELECT count(*) FROM d_orders WHERE random() < 2'),
('SELECT id, to_char(created, ''YYYY/MM/DD'') FROM d_orders WHERE customer_id = 3 ORDER BY id LIMIT 3'),
('SELECT generate_series(1, 2) AS g, count(*) FROM d_orders GROUP BY 1 ORDER BY 1');

SELECT n, compare(query) FROM battery ORDER BY n;

-- the same queries, every distributed table pulled to the coordinator
SET shardext.enable_pushdown TO off;
SELECT n, compare(query) FROM battery ORDER BY n;
RESET shardext.enable_pushdown;

-- which of the subqueries in FROM run shard by shard: a subquery whose
-- rows each belong to one shard (grouped or DISTINCT by the distribution
-- column, or not grouped), joined on the distribution column
CREATE FUNCTION pushed_down(query text) RETURNS bool LANGUAGE plpgsql AS $fn$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
		IF line ~ '(rows pulled|Subquery Scan on distributed_subplan)' THEN
			RETURN false;
		END IF;
	END LOOP;
	RETURN true;
END
$fn$;
SELECT n, pushed_down(query), query FROM battery
WHERE n BETWEEN (SELECT n FROM battery WHERE query ~ 'max\(s.n\) FROM d_orders o JOIN')
	AND (SELECT n FROM battery WHERE query ~ 'CROSS JOIN \(SELECT string_agg')
ORDER BY n;

-- how many queries the battery has (at least 80)
SELECT count(*) >= 80 AS enough_queries FROM battery;
