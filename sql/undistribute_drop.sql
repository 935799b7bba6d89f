--
-- undistribute_drop: turning tables back into local ones, and dropping
-- distributed tables, leave no shard behind
--
-- undistribute brings every row back and drops the shards
SELECT undistribute_table('orders');
SELECT count(*) AS rows_back, sum(amount) AS amount_back, count(DISTINCT merchant_id) AS merchants
FROM orders;
SELECT count(*) AS catalog_rows FROM shardext.shards WHERE logicalrelid = 'orders'::regclass;
SELECT node_id, result AS orders_shards_left FROM shardext_run_on_nodes(
	$$SELECT count(*) FROM pg_class WHERE relname ~ '^orders_[0-9]+$'$$) ORDER BY node_id;
-- the local table keeps its constraints and indexes and works as before
INSERT INTO orders (id, merchant_id, amount) VALUES (10001, 1, -5);
SELECT count(*) AS index_count FROM pg_indexes WHERE tablename = 'orders';
-- and can be distributed again
SELECT create_distributed_table('orders', 'merchant_id');
SELECT sum(result::int) AS rows_in_shards FROM shardext_run_on_shards('orders', 'SELECT count(*) FROM %s');

-- reference tables too
SELECT undistribute_table('countries');
SELECT string_agg(code, ',' ORDER BY code) AS codes FROM countries;
SELECT node_id, result AS countries_copies_left FROM shardext_run_on_nodes(
	$$SELECT count(*) FROM pg_class WHERE relname ~ '^countries_[0-9]+$'$$) ORDER BY node_id;

-- bad input
SELECT undistribute_table('countries');
SELECT undistribute_table('no_such_table');

-- DROP TABLE drops the shards on the workers, in the same transaction
BEGIN;
DROP TABLE events;
SELECT count(*) AS catalog_rows FROM shardext.dist_table WHERE logicalrelid::text = 'events';
ROLLBACK;
SELECT count(*) AS events_still_distributed FROM shardext.tables WHERE logicalrelid = 'events'::regclass;
SELECT node_id, result AS events_shards FROM shardext_run_on_nodes(
	$$SELECT count(*) FROM pg_class WHERE relname ~ '^events_[0-9]+$'$$) ORDER BY node_id;
DROP TABLE events, quality;
SELECT node_id, result AS events_shards FROM shardext_run_on_nodes(
	$$SELECT count(*) FROM pg_class WHERE relname ~ '^(events|quality)_[0-9]+$'$$) ORDER BY node_id;
SELECT count(*) AS catalog_rows FROM shardext.shard s
WHERE NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = s.logicalrelid);

-- DROP SCHEMA ... CASCADE drops the shards of the tables in it
DROP SCHEMA "Odd Schema" CASCADE;
SELECT node_id, result AS odd_shards FROM shardext_run_on_nodes(
	$$SELECT count(*) FROM pg_class WHERE relname LIKE 'My "Table"%'$$) ORDER BY node_id;

-- DROP EXTENSION is refused while distributed tables exist
DROP EXTENSION shardext;
SELECT count(*) > 0 AS still_installed FROM pg_extension WHERE extname = 'shardext';
