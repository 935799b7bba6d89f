--
-- colocation: tables with the same shard count and distribution column
-- type share hash ranges and nodes
--
CREATE TABLE merchants (merchant_id int PRIMARY KEY, name text);
SELECT create_distributed_table('merchants', 'merchant_id', colocate_with => 'orders');
CREATE TABLE payments (merchant_id int, payment_id bigint);
SELECT create_distributed_table('payments', 'merchant_id');	-- default: joins the group
CREATE TABLE loners (merchant_id int);
SELECT create_distributed_table('loners', 'merchant_id', colocate_with => 'none');
CREATE TABLE wide (merchant_id int);
SELECT create_distributed_table('wide', 'merchant_id', shard_count => 8);

SELECT t.logicalrelid, t.colocationid = o.colocationid AS with_orders
FROM shardext.tables t, shardext.tables o
WHERE o.logicalrelid = 'orders'::regclass
  AND t.logicalrelid IN ('merchants'::regclass, 'payments'::regclass, 'loners'::regclass, 'wide'::regclass)
ORDER BY 1;

-- same hash ranges on the same nodes, shard by shard
SELECT count(*) AS ranges, bool_and(o.node_id = m.node_id) AS same_nodes
FROM shardext.shards o JOIN shardext.shards m USING (hash_min, hash_max)
WHERE o.logicalrelid = 'orders'::regclass AND m.logicalrelid = 'merchants'::regclass;

-- a value lands in shards of the same range in every co-located table
SELECT bool_and(so.hash_min = sm.hash_min) AS colocated_values
FROM generate_series(1, 200) v
JOIN shardext.shards so ON so.shard_id = shardext_shard_for_value('orders', v::text)
JOIN shardext.shards sm ON sm.shard_id = shardext_shard_for_value('merchants', v::text);

-- incompatible requests are refused and leave nothing behind
CREATE TABLE by_bigint (merchant_id bigint);
SELECT create_distributed_table('by_bigint', 'merchant_id', colocate_with => 'orders');
SELECT create_distributed_table('merchants_2', 'merchant_id', colocate_with => 'orders');
CREATE TABLE merchants_2 (merchant_id int);
SELECT create_distributed_table('merchants_2', 'merchant_id', colocate_with => 'orders', shard_count => 8);
SELECT create_distributed_table('merchants_2', 'merchant_id', colocate_with => 'no_such_table');
SELECT create_distributed_table('merchants_2', 'merchant_id', colocate_with => 'countries');
CREATE TABLE plain_local (merchant_id int);
SELECT create_distributed_table('merchants_2', 'merchant_id', colocate_with => 'plain_local');
SELECT count(*) AS leftovers FROM shardext.shards
WHERE logicalrelid IN ('by_bigint'::regclass, 'merchants_2'::regclass);
-- a matching explicit shard count is fine
SELECT create_distributed_table('merchants_2', 'merchant_id', colocate_with => 'orders', shard_count => 32);
DROP TABLE by_bigint, plain_local;
