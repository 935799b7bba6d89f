--
-- repartition_joins: joins of distributed tables that are not co-located on
-- the join key run on the workers (issue 26).  Every query runs on
-- distributed tables (rj.*) and on local copies with the same rows
-- (rj_l.*); the results must be equal.  EXPLAIN shows the strategy: a
-- single repartition (one side moves into the other's shards), a dual
-- repartition (both move into new partitions), a broadcast (a small side
-- copied to every node) or the coordinator (tiny inputs, or the feature
-- off).  The tables belong to a role without superuser.
--
SET client_min_messages TO warning;
DROP ROLE IF EXISTS rj_owner;
DROP ROLE IF EXISTS rj_reader;
CREATE ROLE rj_owner LOGIN NOSUPERUSER;
CREATE ROLE rj_reader LOGIN NOSUPERUSER;
SELECT bool_and(success) AS roles_on_workers FROM shardext_run_on_nodes($cmd$
	DO $d$ BEGIN
	  DROP ROLE IF EXISTS rj_owner; DROP ROLE IF EXISTS rj_reader;
	  CREATE ROLE rj_owner LOGIN NOSUPERUSER; CREATE ROLE rj_reader LOGIN NOSUPERUSER;
	END $d$ $cmd$);
CREATE SCHEMA rj AUTHORIZATION rj_owner;
CREATE SCHEMA rj_l AUTHORIZATION rj_owner;
SELECT bool_and(success) AS schemas_on_workers FROM shardext_run_on_nodes(
	'CREATE SCHEMA rj AUTHORIZATION rj_owner');
RESET client_min_messages;

SET ROLE rj_owner;
SET search_path TO rj, public;
-- orders by merchant, shipments by order, returns by their own id: three layouts
CREATE TABLE orders (id bigint, merchant_id int, customer_id int, amount numeric(10,2),
					 status text, created date);
CREATE TABLE merchants (merchant_id int, name text, country text);
CREATE TABLE shipments (id bigint, order_id bigint NOT NULL, carrier text, weight int);
CREATE TABLE returns (id int, order_ref bigint, reason text);
CREATE TABLE carriers (name text, fee int);
CREATE TABLE countries (code text, label text);
CREATE TABLE "Odd ""Table""" ("Mixed Col" bigint, "select" text);

INSERT INTO orders
SELECT g, g % 23, CASE WHEN g % 13 = 0 THEN NULL ELSE g % 50 END, (g * 7 % 1000) / 10.0,
	   (ARRAY['new', 'paid', 'shipped'])[g % 3 + 1], date '2026-01-01' + g % 40
FROM generate_series(1, 600) g;
INSERT INTO orders SELECT g, 1, 7, 1.5, 'new', date '2026-02-01' FROM generate_series(601, 700) g;
INSERT INTO merchants SELECT g, 'm' || g, (ARRAY['DE', 'FR', 'NL', NULL])[g % 4 + 1]
FROM generate_series(0, 25) g;
INSERT INTO shipments SELECT g, (g * 5) % 750 + 1, (ARRAY['ups', 'dhl', 'post', 'van'])[g % 4 + 1],
	   g % 30 FROM generate_series(1, 900) g;
INSERT INTO shipments SELECT 1000 + g, 42, 'dhl', 1 FROM generate_series(1, 40) g;
INSERT INTO returns SELECT g, CASE WHEN g % 9 = 0 THEN NULL ELSE g * 3 END,
	   (ARRAY['broken', 'late', NULL])[g % 3 + 1] FROM generate_series(1, 200) g;
INSERT INTO carriers VALUES ('ups', 5), ('dhl', 7), ('post', 3), ('bike', 1);
INSERT INTO countries VALUES ('DE', 'Germany'), ('FR', 'France'), ('NL', 'Netherlands');
INSERT INTO "Odd ""Table""" SELECT g * 2, 'it''s ' || g FROM generate_series(1, 300) g;

-- the local twins
CREATE TABLE rj_l.orders AS SELECT * FROM orders;
CREATE TABLE rj_l.merchants AS SELECT * FROM merchants;
CREATE TABLE rj_l.shipments AS SELECT * FROM shipments;
CREATE TABLE rj_l.returns AS SELECT * FROM returns;
CREATE TABLE rj_l.carriers AS SELECT * FROM carriers;
CREATE TABLE rj_l.countries AS SELECT * FROM countries;
CREATE TABLE rj_l."Odd ""Table""" AS SELECT * FROM "Odd ""Table""";

SET client_min_messages TO warning;
SELECT create_distributed_table('orders', 'merchant_id', shard_count => 8);
SELECT create_distributed_table('merchants', 'merchant_id', colocate_with => 'orders');
SELECT create_distributed_table('shipments', 'order_id', shard_count => 6);
SELECT create_distributed_table('returns', 'id', shard_count => 5);
SELECT create_distributed_table('carriers', 'name', shard_count => 3);
SELECT create_reference_table('countries');
SELECT create_distributed_table('"Odd ""Table"""', 'select', shard_count => 4);
RESET client_min_messages;

-- compare(query): 'ok', or what differs from the same query on the local twins
CREATE FUNCTION compare(query text) RETURNS text LANGUAGE plpgsql AS $fn$
DECLARE
	ordered bool := query ~* 'order by [^)]*$';
	dist text[] := '{}';
	loc text[] := '{}';
	r record;
BEGIN
	PERFORM set_config('search_path', 'rj, public', true);
	BEGIN
		FOR r IN EXECUTE query LOOP
			dist := dist || r::text;
		END LOOP;
	EXCEPTION WHEN OTHERS THEN
		RETURN 'error: ' || SQLERRM;
	END;
	PERFORM set_config('search_path', 'rj_l, public', true);
	FOR r IN EXECUTE query LOOP
		loc := loc || r::text;
	END LOOP;
	PERFORM set_config('search_path', 'rj, public', true);
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

-- strategy(query): how the join runs, from EXPLAIN
CREATE FUNCTION strategy(query text) RETURNS SETOF text LANGUAGE plpgsql AS $fn$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
		IF line ~ '(Join Strategy|Partitions:|Moved:|Map SQL|Task Count|Remote SQL|rows pulled)' THEN
			RETURN NEXT btrim(line);
		END IF;
		EXIT WHEN line ~ 'Remote SQL';
	END LOOP;
END
$fn$;

-- pulled(query): the scans whose rows the coordinator pulls, and whether a
-- join is repartitioned (which side the coordinator's join reads first
-- depends on the planner's estimates of the empty shells)
CREATE FUNCTION explain_lines(query text) RETURNS SETOF text LANGUAGE plpgsql AS $fn$
BEGIN
	RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || query;
END
$fn$;
CREATE FUNCTION pulled(query text, OUT pulled_scans bigint, OUT repartitioned boolean)
LANGUAGE sql AS $fn$
	SELECT count(*) FILTER (WHERE l ~ 'rows pulled'), coalesce(bool_or(l ~ 'Join Strategy'), false)
	FROM explain_lines(query) AS e(l)
$fn$;

-- the tests' inputs are tiny: repartition them anyway, in 4 partitions
SET shardext.repartition_join_min_rows = 0;
SET shardext.repartition_join_partitions = 4;
SET shardext.broadcast_join_max_rows = 0;

-- single repartition: orders move into the shards of shipments (by order id)
SELECT * FROM strategy($$SELECT o.status, count(*), sum(s.weight) FROM orders o
	JOIN shipments s ON s.order_id = o.id GROUP BY o.status$$);
SELECT compare($$SELECT o.status, count(*), sum(s.weight) FROM orders o
	JOIN shipments s ON s.order_id = o.id GROUP BY o.status$$);
-- dual repartition: returns.order_ref is nobody's distribution column
SELECT * FROM strategy($$SELECT r.reason, count(*) FROM orders o JOIN returns r
	ON r.order_ref = o.id GROUP BY r.reason$$);
SELECT compare($$SELECT r.reason, count(*) FROM orders o JOIN returns r
	ON r.order_ref = o.id GROUP BY r.reason$$);
-- grouped by the join key: the partitions aggregate, the coordinator only merges
SELECT * FROM strategy($$SELECT o.id, count(*) FROM orders o JOIN returns r
	ON r.order_ref = o.id GROUP BY o.id ORDER BY 2 DESC, 1 LIMIT 5$$);
SELECT compare($$SELECT o.id, count(*) FROM orders o JOIN returns r
	ON r.order_ref = o.id GROUP BY o.id ORDER BY 2 DESC, 1 LIMIT 5$$);
-- an implicit cast (int = bigint) and a key that is an expression
SELECT compare($$SELECT count(*), sum(r.id) FROM returns r JOIN shipments s ON s.order_id = r.id$$);
SELECT * FROM strategy($$SELECT count(*) FROM returns r JOIN orders o ON o.id = r.order_ref + 3$$);
SELECT compare($$SELECT count(*) FROM returns r JOIN orders o ON o.id = r.order_ref + 3$$);
-- text keys, several conditions, a self join on a non-distribution column
SELECT compare($$SELECT c.name, count(*) FROM shipments s JOIN carriers c ON c.name = s.carrier
	AND c.fee > s.weight % 5 GROUP BY 1$$);
SELECT compare($$SELECT count(*), count(DISTINCT a.id) FROM orders a JOIN orders b
	ON a.customer_id = b.customer_id AND a.id < b.id$$);
SELECT compare($$SELECT t."select", count(*) FROM "Odd ""Table""" t JOIN orders o
	ON o.id = t."Mixed Col" GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 3$$);

-- every kind of join, with NULL keys on both sides
SELECT compare($$SELECT o.id, r.id FROM orders o LEFT JOIN returns r ON r.order_ref = o.id
	WHERE o.amount > 90$$);
SELECT compare($$SELECT o.id, r.id FROM orders o RIGHT JOIN returns r ON r.order_ref = o.id$$);
SELECT compare($$SELECT o.id, r.id, r.reason FROM orders o FULL JOIN returns r
	ON r.order_ref = o.id AND r.reason IS NOT NULL$$);
SELECT compare($$SELECT count(*) FROM orders o WHERE EXISTS
	(SELECT 1 FROM returns r WHERE r.order_ref = o.id AND r.reason = 'late')$$);
SELECT compare($$SELECT count(*) FROM orders o WHERE NOT EXISTS
	(SELECT 1 FROM returns r WHERE r.order_ref = o.id)$$);
SELECT compare($$SELECT count(*) FROM orders o WHERE o.id IN (SELECT r.order_ref FROM returns r)$$);
-- NOT IN: no row when the subquery has a NULL, every row when it has none
SELECT * FROM strategy($$SELECT count(*) FROM orders o WHERE o.id NOT IN
	(SELECT r.order_ref FROM returns r)$$);
SELECT compare($$SELECT count(*) FROM orders o WHERE o.id NOT IN (SELECT r.order_ref FROM returns r)$$);
SELECT compare($$SELECT count(*) FROM orders o WHERE o.id NOT IN
	(SELECT r.order_ref FROM returns r WHERE r.order_ref IS NOT NULL)$$);
SELECT compare($$SELECT count(*) FROM orders o WHERE o.customer_id NOT IN
	(SELECT r.id FROM returns r WHERE r.id < 0)$$);
SELECT compare($$SELECT count(*) FROM orders o WHERE o.customer_id NOT IN
	(SELECT r.id FROM returns r WHERE r.reason = 'late')$$);
SELECT compare($$SELECT count(*) FROM orders o WHERE o.customer_id NOT IN
	(SELECT r.order_ref FROM returns r WHERE 1 > 2)$$);

-- three and more tables: co-located, reference and repartitioned pairs
SELECT * FROM strategy($$SELECT c.label, count(*) FROM orders o
	JOIN merchants m ON m.merchant_id = o.merchant_id
	JOIN countries c ON c.code = m.country
	JOIN returns r ON r.order_ref = o.id GROUP BY 1$$);
SET shardext.broadcast_join_max_rows = 100000;
SELECT * FROM strategy($$SELECT c.label, count(*) FROM orders o
	JOIN merchants m ON m.merchant_id = o.merchant_id
	JOIN countries c ON c.code = m.country
	JOIN returns r ON r.order_ref = o.id GROUP BY 1$$);
SELECT compare($$SELECT c.label, count(*) FROM orders o
	JOIN merchants m ON m.merchant_id = o.merchant_id
	JOIN countries c ON c.code = m.country
	JOIN returns r ON r.order_ref = o.id GROUP BY 1$$);
SELECT compare($$SELECT o.id, s.id, r.id FROM orders o JOIN shipments s ON s.order_id = o.id
	LEFT JOIN returns r ON r.order_ref = s.order_id WHERE s.weight < 3$$);
SELECT compare($$SELECT m.name, count(s.id) FROM merchants m LEFT JOIN orders o
	ON o.merchant_id = m.merchant_id LEFT JOIN shipments s ON s.order_id = o.id GROUP BY 1$$);
SET shardext.broadcast_join_max_rows = 0;

-- under subqueries and CTEs, and with the rest of the query on the coordinator
SELECT compare($$WITH big AS (SELECT o.id, o.amount FROM orders o JOIN shipments s
	ON s.order_id = o.id WHERE s.weight > 20) SELECT count(*), max(amount) FROM big$$);
SELECT compare($$SELECT x.carrier, count(*) FROM (SELECT s.carrier, o.status FROM shipments s
	JOIN orders o ON o.id = s.order_id) x JOIN carriers c ON c.name = x.carrier
	GROUP BY 1$$);
SELECT compare($$SELECT * FROM (SELECT o.status, count(*) AS n FROM orders o
	JOIN returns r ON r.order_ref = o.id GROUP BY 1) x WHERE n > 5$$);
-- a subquery (or view) of co-located tables moves as one, or stays when
-- joined on its distribution column
CREATE VIEW order_merchants AS SELECT o.id, o.amount, m.country FROM orders o
	JOIN merchants m ON m.merchant_id = o.merchant_id;
CREATE VIEW rj_l.order_merchants AS SELECT o.id, o.amount, m.country FROM rj_l.orders o
	JOIN rj_l.merchants m ON m.merchant_id = o.merchant_id;
SELECT * FROM strategy($$SELECT om.country, count(*) FROM (SELECT o.id, o.amount, m.country
	FROM orders o JOIN merchants m ON m.merchant_id = o.merchant_id) om
	JOIN returns r ON r.order_ref = om.id GROUP BY 1$$);
SELECT compare($$SELECT om.country, count(*) FROM order_merchants om
	JOIN returns r ON r.order_ref = om.id GROUP BY 1$$);
SELECT * FROM strategy($$SELECT count(*) FROM (SELECT merchant_id, sum(amount) AS total FROM orders
	GROUP BY merchant_id) t JOIN returns r ON r.id = t.merchant_id$$);
SELECT compare($$SELECT count(*), sum(t.total) FROM (SELECT merchant_id, sum(amount) AS total
	FROM orders GROUP BY merchant_id) t JOIN returns r ON r.id = t.merchant_id$$);

-- aggregates, DISTINCT, ORDER BY / LIMIT and window functions over the join
SELECT compare($$SELECT avg(o.amount), count(DISTINCT s.carrier), min(s.weight),
	string_agg(DISTINCT s.carrier, ',') FROM orders o JOIN shipments s ON s.order_id = o.id$$);
SELECT compare($$SELECT DISTINCT s.carrier FROM orders o JOIN shipments s ON s.order_id = o.id
	WHERE o.status = 'paid'$$);
SELECT compare($$SELECT o.id, s.weight FROM orders o JOIN shipments s ON s.order_id = o.id
	ORDER BY s.weight DESC, o.id, s.id LIMIT 7 OFFSET 2$$);
SELECT compare($$SELECT o.id, rank() OVER (PARTITION BY o.id ORDER BY s.weight) FROM orders o
	JOIN shipments s ON s.order_id = o.id WHERE o.id < 50$$);

-- filters go below the repartitioning: only matching rows move
SELECT * FROM strategy($$SELECT count(*) FROM orders o LEFT JOIN returns r
	ON r.order_ref = o.id AND r.reason = 'late' WHERE o.status = 'new'$$);
SELECT compare($$SELECT count(*) FROM orders o LEFT JOIN returns r
	ON r.order_ref = o.id AND r.reason = 'late' WHERE o.status = 'new'$$);
-- parameters of prepared statements reach the filters, also in generic plans
PREPARE late(text, int) AS SELECT count(*) FROM orders o JOIN returns r
	ON r.order_ref = o.id WHERE r.reason = $1 AND o.id > $2;
EXECUTE late('late', 10);
EXECUTE late('late', 10);
EXECUTE late('late', 10);
EXECUTE late('late', 10);
EXECUTE late('late', 10);
EXECUTE late('broken', 100);
SET search_path TO rj_l, public;
SELECT count(*) FROM orders o JOIN returns r ON r.order_ref = o.id WHERE r.reason = 'broken' AND o.id > 100;
SET search_path TO rj, public;

-- broadcast: a small table is copied to every node, the large one stays
SET shardext.broadcast_join_max_rows = 100000;
SELECT * FROM strategy($$SELECT c.fee, count(*) FROM shipments s JOIN carriers c
	ON c.fee = s.weight GROUP BY 1$$);
SELECT compare($$SELECT c.fee, count(*) FROM shipments s JOIN carriers c
	ON c.fee = s.weight GROUP BY 1$$);
-- a preserved side of an outer join is never copied
SELECT * FROM strategy($$SELECT count(*) FROM carriers c LEFT JOIN shipments s ON s.weight = c.fee$$);
SELECT compare($$SELECT count(*) FROM carriers c LEFT JOIN shipments s ON s.weight = c.fee$$);
SET shardext.broadcast_join_max_rows = 0;

-- EXPLAIN ANALYZE shows what moved
CREATE FUNCTION moved(query text) RETURNS SETOF text LANGUAGE plpgsql AS $fn$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || query LOOP
		IF line ~ '(Join Strategy|Rows Mapped)' THEN
			RETURN NEXT btrim(line);
		ELSIF line ~ 'Bytes Moved' THEN
			RETURN NEXT 'bytes moved between workers: ' ||
				(substring(line FROM '[0-9]+')::bigint > 0)::text;
		END IF;
	END LOOP;
END
$fn$;
SELECT * FROM moved($$SELECT count(*) FROM orders o JOIN returns r ON r.order_ref = o.id$$);

-- a transaction's joins see its own writes, on every side
BEGIN;
INSERT INTO returns VALUES (1000, 699, 'mine');
UPDATE orders SET status = 'returned' WHERE id = 699;
SELECT o.status, r.reason FROM orders o JOIN returns r ON r.order_ref = o.id WHERE r.id = 1000;
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM orders o JOIN returns r ON r.order_ref = o.id;
DELETE FROM returns WHERE id < 20;
SELECT count(*) FROM orders o JOIN returns r ON r.order_ref = o.id;
ROLLBACK;

-- the rows moved count against shardext.max_intermediate_result_size
SET shardext.max_intermediate_result_size = '1kB';
SELECT count(*) FROM orders o JOIN returns r ON r.order_ref = o.id;
RESET shardext.max_intermediate_result_size;

-- tiny inputs, or the setting off: the coordinator joins pulled rows
RESET shardext.repartition_join_min_rows;
SELECT * FROM pulled($$SELECT count(*) FROM orders o JOIN returns r ON r.order_ref = o.id$$);
SET shardext.repartition_join_min_rows = 0;
SET shardext.enable_repartition_joins = off;
SELECT * FROM pulled($$SELECT count(*) FROM orders o JOIN returns r ON r.order_ref = o.id$$);
SELECT compare($$SELECT count(*) FROM orders o JOIN returns r ON r.order_ref = o.id$$);
RESET shardext.enable_repartition_joins;

-- privileges hold: a reader without SELECT on returns is refused
GRANT USAGE ON SCHEMA rj TO rj_reader;
GRANT SELECT ON orders TO rj_reader;
SET ROLE rj_reader;
SELECT count(*) FROM orders o JOIN returns r ON r.order_ref = o.id;
SET ROLE rj_owner;

-- nothing is left behind on the nodes
RESET ROLE;
SELECT node_port > 0 AS node, result AS leftovers FROM shardext_run_on_nodes($$
	SELECT count(*) FROM pg_ls_dir('base/pgsql_tmp', true, false) AS d
	WHERE d LIKE 'pgsql_tmp_shardext_%'$$) ORDER BY node_port;

SET client_min_messages TO warning;
DROP SCHEMA rj CASCADE;
DROP SCHEMA rj_l CASCADE;
SELECT bool_and(success) FROM shardext_run_on_nodes('DROP SCHEMA IF EXISTS rj CASCADE');
DROP ROLE rj_owner;
DROP ROLE rj_reader;
SELECT bool_and(success) FROM shardext_run_on_nodes(
	'DROP ROLE IF EXISTS rj_owner; DROP ROLE IF EXISTS rj_reader');
RESET client_min_messages;
RESET ALL;
