-- pgTAP: contracts of the distributed planner: statements it refuses (with
-- SQLSTATE 0A000 and nothing left behind), the placeholder functions, the
-- statistics view, and that what it accepts gives the local answer.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(24);

CREATE TABLE tap_p (id int PRIMARY KEY, k int, v text);
SELECT create_distributed_table('tap_p', 'id', shard_count => 4);
CREATE TABLE tap_p_other (id int, w int);
SELECT create_distributed_table('tap_p_other', 'id', shard_count => 3, colocate_with => 'none');
CREATE TABLE tap_p_ref (k int PRIMARY KEY, name text);
SELECT create_reference_table('tap_p_ref');
INSERT INTO tap_p SELECT g, g % 5, 'v' || g FROM generate_series(1, 50) g;
INSERT INTO tap_p_ref VALUES (0, 'zero'), (1, 'one');

-- refused statements
SELECT throws_ok($$UPDATE tap_p SET id = id + 1 WHERE id = 3$$, '0A000', NULL,
				 'UPDATE of the distribution column');
SELECT throws_ok($$MERGE INTO tap_p p USING tap_p_other o ON p.id = o.id WHEN MATCHED THEN UPDATE SET id = 0$$,
				 '0A000', NULL, 'MERGE changing the distribution column');
SELECT throws_ok($$UPDATE tap_p_ref SET name = random()::text$$, '0A000', NULL,
				 'UPDATE of a reference table with a volatile function');
SELECT throws_ok($$SELECT * FROM tap_p WHERE k = 1 FOR UPDATE$$, '0A000', NULL,
				 'SELECT FOR UPDATE over several shards');
SELECT lives_ok($$SELECT * FROM tap_p WHERE id = 1 FOR UPDATE$$, 'SELECT FOR UPDATE of one shard');
SELECT throws_ok($$WITH d AS (DELETE FROM tap_p RETURNING *) SELECT count(*) FROM d$$, '0A000',
				 NULL, 'data-modifying CTE');
SELECT throws_ok($$UPDATE tap_p_ref r SET name = 'x' FROM tap_p p WHERE p.k = r.k$$, '0A000',
				 NULL, 'UPDATE of a reference table joined with a distributed table');
SELECT throws_ok($$MERGE INTO tap_p_ref r USING tap_p p ON p.k = r.k WHEN MATCHED THEN UPDATE SET name = r.name || random()$$,
				 '0A000', NULL, 'MERGE into a reference table with volatile values of its rows');
SELECT throws_ok($$INSERT INTO tap_p VALUES (NULL, 1, 'x')$$, '23502', NULL,
				 'INSERT without a distribution value');
SELECT throws_ok($$MERGE INTO tap_p p USING (VALUES (5), (5)) s(id) ON p.id = s.id WHEN MATCHED THEN DELETE$$,
				 '21000', NULL, 'MERGE matching a row twice');
SELECT throws_ok($$SELECT * FROM shardext.distributed_result() AS r(a int)$$, '0A000', NULL,
				 'the combine placeholder cannot be called');
SELECT is((SELECT count(*) FROM tap_p), 50::bigint, 'refused statements changed nothing');

-- accepted statements give the local answer
SELECT is((SELECT sum(id) FROM tap_p WHERE k = 2), 245::bigint, 'multi-shard aggregate');
SELECT is((SELECT v FROM tap_p WHERE id = 7), 'v7', 'router read');
SELECT is((SELECT count(*) FROM tap_p p JOIN tap_p_other o USING (id)), 0::bigint,
		  'join of tables that are not co-located');
SELECT is((SELECT string_agg(r.name, ',' ORDER BY p.id) FROM tap_p p JOIN tap_p_ref r USING (k)
		   WHERE p.id IN (5, 6)), 'zero,one', 'join with a reference table');
UPDATE tap_p SET v = upper(v) WHERE k = 1;
SELECT is((SELECT count(*) FROM tap_p WHERE v LIKE 'V%'), 10::bigint, 'multi-shard UPDATE');
INSERT INTO tap_p_other SELECT id, k FROM tap_p WHERE k = 4;
SELECT is((SELECT sum(w) FROM tap_p_other), 40::bigint, 'INSERT ... SELECT between groups');

-- what the shards cannot do alone runs through the coordinator
UPDATE tap_p SET v = v || (random() * 0)::int WHERE k = 3;
SELECT is((SELECT count(*) FROM tap_p WHERE v LIKE 'v%0' AND k = 3), 10::bigint,
		  'UPDATE with a volatile function');
UPDATE tap_p p SET k = p.k FROM tap_p_other o WHERE o.id = p.id;
MERGE INTO tap_p p USING tap_p_other o ON p.id = o.id WHEN MATCHED THEN DELETE;
SELECT is((SELECT count(*) FROM tap_p), 40::bigint, 'MERGE from a table that is not co-located');
SELECT lives_ok($$INSERT INTO tap_p VALUES ((SELECT max(id) + 100 FROM tap_p_other), 1, 'x')$$,
				'INSERT ... VALUES with a subquery');

-- the statistics view counts routed statements per shard
SELECT shardext_stat_shards_reset();
SELECT v FROM tap_p WHERE id = 11;
SELECT v FROM tap_p WHERE id = 11;
SELECT is((SELECT sum(queries) FROM shardext.stat_shards WHERE table_name = 'tap_p'::regclass),
		  2::numeric, 'two routed statements counted');
SELECT is((SELECT count(*) FROM shardext.stat_shards WHERE table_name = 'tap_p'::regclass),
		  1::bigint, 'on one shard');
SELECT has_function('pg_catalog', 'shardext_stat_shards_reset', 'reset function exists');

SELECT * FROM finish();
ROLLBACK;
