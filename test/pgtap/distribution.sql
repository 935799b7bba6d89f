-- pgTAP: create_distributed_table / create_reference_table / undistribute_table
-- contracts; every bad input raises the right SQLSTATE and leaves nothing behind.
-- Everything here runs in one transaction that is rolled back at the end, which
-- also checks that shard creation on the workers follows the local rollback.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(37);

CREATE TABLE tap_orders (id bigint, merchant_id int, amount numeric, PRIMARY KEY (merchant_id, id));
INSERT INTO tap_orders SELECT g, g % 10, g FROM generate_series(1, 1000) g;

-- bad input, each with its SQLSTATE
SELECT throws_ok($$SELECT create_distributed_table('tap_orders', 'nope')$$, '42703', NULL,
				 'unknown column');
SELECT throws_ok($$SELECT create_distributed_table('tap_no_such', 'id')$$, '42P01', NULL,
				 'unknown table');
SELECT throws_ok($$SELECT create_distributed_table('tap_orders', 'merchant_id', 'range')$$, '22023',
				 'distribution type "range" is not supported', 'only hash distribution');
SELECT throws_ok($$SELECT create_distributed_table('tap_orders', 'merchant_id', shard_count => 0)$$,
				 '22023', NULL, 'shard_count must be positive');
SELECT throws_ok($$SELECT create_distributed_table('tap_orders', 'amount')$$, '0A000', NULL,
				 'primary key must include the distribution column');
CREATE TABLE tap_points (id int, p point);
SELECT throws_ok($$SELECT create_distributed_table('tap_points', 'p')$$, '42883', NULL,
				 'a type without hash opclass');
CREATE TABLE tap_parted (id int) PARTITION BY RANGE (id);
SELECT throws_ok($$SELECT create_distributed_table('tap_parted', 'id')$$, '0A000', NULL,
				 'partitioned table');
CREATE TEMP TABLE tap_temp (id int);
SELECT throws_ok($$SELECT create_distributed_table('tap_temp', 'id')$$, '0A000', NULL,
				 'temporary table');
CREATE TABLE tap_parent (id int);
CREATE TABLE tap_child () INHERITS (tap_parent);
SELECT throws_ok($$SELECT create_distributed_table('tap_child', 'id')$$, '0A000', NULL,
				 'inheritance');
CREATE VIEW tap_view AS SELECT 1 AS id;
SELECT throws_ok($$SELECT create_distributed_table('tap_view', 'id')$$, '42809', NULL, 'view');
SELECT throws_ok($$SELECT create_distributed_table('tap_orders', 'merchant_id', colocate_with => 'tap_points')$$,
				 '22023', NULL, 'colocate with a local table');
SELECT throws_ok($$SELECT undistribute_table('tap_orders')$$, '55000', NULL,
				 'undistribute a local table');
SELECT throws_ok($$SELECT shardext_shard_for_value('tap_orders', '1')$$, '22023', NULL,
				 'shard_for_value on a local table');
SELECT throws_ok($$SELECT shardext_add_node('127.0.0.1', 1)$$, '08001', NULL,
				 'unreachable node');
SELECT throws_ok($$SELECT shardext_add_node('127.0.0.1', 0)$$, '22023', NULL, 'bad port');
SELECT throws_ok($$SELECT shardext_remove_node('127.0.0.1', 1)$$, '42704', NULL, 'unknown node');
SELECT is((SELECT count(*)::int FROM shardext.dist_table
		   WHERE logicalrelid::text LIKE 'tap\_%'), 0, 'failed calls recorded nothing');

-- a successful distribution
SELECT lives_ok($$SELECT create_distributed_table('tap_orders', 'merchant_id', shard_count => 8)$$,
				'distribute tap_orders');
SELECT is((SELECT count(*)::int FROM shardext.shards WHERE logicalrelid = 'tap_orders'::regclass), 8,
		  'eight shards, one placement each');
SELECT is((SELECT min(hash_min) FROM shardext.shards WHERE logicalrelid = 'tap_orders'::regclass),
		  -2147483648, 'first range starts at the int4 minimum');
SELECT is((SELECT max(hash_max) FROM shardext.shards WHERE logicalrelid = 'tap_orders'::regclass),
		  2147483647, 'last range ends at the int4 maximum');
SELECT is((SELECT sum(hash_max::numeric - hash_min + 1) FROM shardext.shards
		   WHERE logicalrelid = 'tap_orders'::regclass), 4294967296::numeric,
		  'ranges cover the int4 space exactly once');
SELECT is(pg_relation_size('tap_orders'), 0::bigint, 'local table emptied');
SELECT throws_ok($$SELECT create_distributed_table('tap_orders', 'merchant_id')$$, '55000', NULL,
				 'already distributed');
SELECT results_eq(
	$$SELECT shardext_shard_for_value('tap_orders', v::text) FROM generate_series(1, 5) v$$,
	$$SELECT s.shard_id FROM generate_series(1, 5) v
	  JOIN shardext.shards s ON s.logicalrelid = 'tap_orders'::regclass
	   AND hashint4(v) BETWEEN s.hash_min AND s.hash_max ORDER BY v$$,
	'shard_for_value follows the hash ranges');
SELECT throws_ok($$SELECT shardext_shard_for_value('tap_orders', 'x')$$, '22P02', NULL,
				 'value of the wrong type');

-- weights: a weight-2 node gets twice the shards of a weight-1 node
SELECT is((SELECT count(*)::int FROM shardext.shards s JOIN shardext.nodes n USING (node_id)
		   WHERE s.logicalrelid = 'tap_orders'::regclass AND n.weight = 2), 5,
		  'the weight-2 node holds 5 of 8 shards');

-- co-location
CREATE TABLE tap_merchants (merchant_id int PRIMARY KEY);
SELECT lives_ok($$SELECT create_distributed_table('tap_merchants', 'merchant_id', colocate_with => 'tap_orders')$$,
				'colocate with tap_orders');
SELECT is((SELECT colocationid FROM shardext.tables WHERE logicalrelid = 'tap_merchants'::regclass),
		  (SELECT colocationid FROM shardext.tables WHERE logicalrelid = 'tap_orders'::regclass),
		  'same colocation group');
SELECT is((SELECT count(*)::int FROM shardext.shards a JOIN shardext.shards b USING (hash_min, hash_max, node_id)
		   WHERE a.logicalrelid = 'tap_orders'::regclass AND b.logicalrelid = 'tap_merchants'::regclass),
		  8, 'same ranges on the same nodes');
CREATE TABLE tap_bigint (merchant_id bigint);
SELECT throws_ok($$SELECT create_distributed_table('tap_bigint', 'merchant_id', colocate_with => 'tap_orders')$$,
				 '42804', NULL, 'colocation needs the same column type');

-- reference tables
CREATE TABLE tap_ref (code text PRIMARY KEY);
INSERT INTO tap_ref VALUES ('a'), ('b');
SELECT lives_ok($$SELECT create_reference_table('tap_ref')$$, 'reference table');
SELECT is((SELECT count(*)::int FROM shardext.shards WHERE logicalrelid = 'tap_ref'::regclass),
		  (SELECT count(*)::int FROM shardext.nodes), 'a placement on every node');
SELECT is((SELECT count(DISTINCT shard_id)::int FROM shardext.shards WHERE logicalrelid = 'tap_ref'::regclass),
		  1, 'one shard');

-- undistribute brings the rows back
SELECT lives_ok($$SELECT undistribute_table('tap_orders')$$, 'undistribute');
SELECT is((SELECT count(*)::int FROM tap_orders), 1000, 'every row is back');
SELECT is((SELECT sum(amount) FROM tap_orders), 500500::numeric, 'with its values');

SELECT * FROM finish();
ROLLBACK;
