--
-- snowflake: snowflake_id() and its helpers, on the coordinator and on the
-- two workers registered by add_nodes.  Ids, node ids and ports vary
-- between runs, so only facts about them are printed.  PostgreSQL 17 and
-- later print the units of a setting's valid range (snowflake_1.out).
--
\getenv worker_1_port WORKER_1_PORT
\getenv worker_2_port WORKER_2_PORT
\set coordinator_port :PORT
SET timezone TO 'UTC';

-- a node id override left behind by an interrupted run would spoil the results
ALTER SYSTEM RESET shardext.node_id;
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);

-- ids are positive, unique and strictly increasing within a session
-- (20000 ids use up the 4096 sequence numbers of several milliseconds)
CREATE TEMP TABLE sf_ids AS
	SELECT n, snowflake_id() AS id FROM generate_series(1, 20000) n;
SELECT bool_and(id > 0) AS positive, count(DISTINCT id) = 20000 AS distinct_ids FROM sf_ids;
SELECT bool_and(id > previous) AS increasing
FROM (SELECT id, lag(id) OVER (ORDER BY n) AS previous FROM sf_ids) s
WHERE previous IS NOT NULL;

-- parse: the coordinator is node 0, the times are those of the inserts
SELECT bool_and(p.node_id = 0) AS coordinator_node,
	   bool_and(p.created_at BETWEEN now() - interval '1 minute' AND now()) AS created_recently,
	   bool_and(p.sequence BETWEEN 0 AND 4095) AS sequence_in_range,
	   count(DISTINCT p.created_at) > 1 AS several_milliseconds
FROM sf_ids, snowflake_parse(id) p;
-- parse and from_time round trip
SELECT bool_and(snowflake_from_time(p.created_at) | (p.node_id::bigint << 12) | p.sequence = id)
	   AS round_trip
FROM sf_ids, snowflake_parse(id) p;
SELECT * FROM snowflake_parse(0);
SELECT * FROM snowflake_parse(4194304::bigint * 1000 + 4096 * 7 + 42);
SELECT * FROM snowflake_parse(9223372036854775807);
SELECT snowflake_parse(NULL) IS NULL AS strict;

-- from_time: the smallest id of the millisecond a time falls in
SELECT snowflake_from_time('2024-01-01 00:00:00+00') AS epoch,
	   snowflake_from_time('2024-01-01 00:00:00.000999+00') AS still_epoch,
	   snowflake_from_time('2024-01-01 00:00:00.001+00') AS one_ms,
	   snowflake_from_time('2024-01-01 01:00:00+01') AS same_instant,
	   snowflake_from_time('2093-09-06 15:47:35.551999+00') AS last_ms;
-- so it filters id columns by time
SELECT count(*) AS last_hour FROM sf_ids WHERE id >= snowflake_from_time(now() - interval '1 hour');
SELECT count(*) AS before FROM sf_ids WHERE id < snowflake_from_time(now() - interval '1 hour');
SELECT count(*) AS future FROM sf_ids WHERE id >= snowflake_from_time(now() + interval '1 minute');

-- bad input
SELECT snowflake_parse(-1);
SELECT snowflake_parse(-9223372036854775808);
SELECT snowflake_from_time('2023-12-31 23:59:59.999999+00');
SELECT snowflake_from_time('2093-09-06 15:47:35.552+00');
SELECT snowflake_from_time('infinity');
SELECT snowflake_from_time('-infinity');

-- a clock that steps back within shardext.snowflake_max_clock_skew: ids go on
-- from the last one (borrowing milliseconds), never repeating or decreasing
SHOW shardext.snowflake_max_clock_skew;
SELECT snowflake_id() AS before_id \gset
BEGIN;
SET LOCAL shardext.snowflake_max_clock_skew = '2s';
SET LOCAL shardext.snowflake_clock_offset = '-1s';
CREATE TEMP TABLE sf_back AS
	SELECT n, snowflake_id() AS id FROM generate_series(1, 10000) n;
COMMIT;
SELECT bool_and(id > :before_id) AS after_last, count(DISTINCT id) = 10000 AS distinct_ids
FROM sf_back;
SELECT bool_and(id > previous) AS increasing
FROM (SELECT id, lag(id) OVER (ORDER BY n) AS previous FROM sf_back) s
WHERE previous IS NOT NULL;

-- beyond the bound snowflake_id() fails (the detail says by how many ms)
SELECT max(id) AS before_id FROM sf_back \gset
SET shardext.snowflake_clock_offset = '-10s';
\set VERBOSITY terse
SELECT snowflake_id();
\set VERBOSITY default
RESET shardext.snowflake_clock_offset;
SELECT snowflake_id() > :before_id AS recovers;

-- the clock can only be moved back, and only by superusers
SET shardext.snowflake_clock_offset = '1ms';
SET shardext.snowflake_max_clock_skew = -1;
CREATE ROLE sf_user;
SET ROLE sf_user;
SET shardext.snowflake_clock_offset = '-1s';
SET shardext.snowflake_max_clock_skew = '1h';
SELECT snowflake_id() > :before_id AS anyone_can_generate;
RESET ROLE;
DROP ROLE sf_user;

-- each node has its own node id: 0 on the coordinator, the registered node id
-- on a worker; ids of different nodes never collide
SELECT snowflake_node_id() = 0 AS coordinator_is_zero;
SELECT string_agg(snowflake_id()::text, ',') AS coordinator_ids
FROM generate_series(1, 5000) \gset
\c - - - :worker_1_port
SET timezone TO 'UTC';
SELECT snowflake_node_id() = node_id AS registered_id FROM shardext.local_identity;
SELECT snowflake_node_id() AS worker_1_node \gset
SELECT string_agg(snowflake_id()::text, ',') AS worker_1_ids
FROM generate_series(1, 5000) \gset
\c - - - :worker_2_port
SET timezone TO 'UTC';
SELECT snowflake_node_id() = node_id AS registered_id FROM shardext.local_identity;
SELECT snowflake_node_id() AS worker_2_node \gset
SELECT string_agg(snowflake_id()::text, ',') AS worker_2_ids
FROM generate_series(1, 5000) \gset
\c - - - :coordinator_port
SET timezone TO 'UTC';
SELECT bool_and(node_id = CASE node_port WHEN :worker_1_port THEN :worker_1_node
										 WHEN :worker_2_port THEN :worker_2_node END)
	   AS same_as_catalog,
	   :worker_1_node <> :worker_2_node AS workers_differ,
	   :worker_1_node > 0 AND :worker_2_node > 0 AS not_coordinator
FROM shardext.nodes;
WITH ids AS (
	SELECT unnest(string_to_array(:'coordinator_ids', ',')::bigint[]) AS id, 0 AS node
	UNION ALL
	SELECT unnest(string_to_array(:'worker_1_ids', ',')::bigint[]), :worker_1_node
	UNION ALL
	SELECT unnest(string_to_array(:'worker_2_ids', ',')::bigint[]), :worker_2_node
)
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids,
	   bool_and((snowflake_parse(id)).node_id = node) AS node_in_id
FROM ids;

-- shardext.node_id overrides the node id; it is a server setting, 0..1023
SET shardext.node_id = 5;
ALTER SYSTEM SET shardext.node_id = 1024;
ALTER SYSTEM SET shardext.node_id = -2;
ALTER SYSTEM SET shardext.node_id = 1000;
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
SELECT snowflake_node_id() AS node_id, (snowflake_parse(snowflake_id())).node_id AS in_id;
ALTER SYSTEM RESET shardext.node_id;
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
SELECT snowflake_node_id() AS node_id, (snowflake_parse(snowflake_id())).node_id AS in_id;

-- as a column default
CREATE TABLE sf_orders (
	id bigint PRIMARY KEY DEFAULT snowflake_id(),
	item text NOT NULL
);
INSERT INTO sf_orders (item) SELECT 'item ' || n FROM generate_series(1, 5000) n;
INSERT INTO sf_orders (item) VALUES ('one more') RETURNING id > 0 AS has_id;
SELECT count(*) AS orders, count(DISTINCT id) AS distinct_ids FROM sf_orders;
-- insertion order is id order, so the newest rows are the largest ids
SELECT bool_and(id > previous) AS increasing
FROM (SELECT id, lag(id) OVER (ORDER BY ctid) AS previous FROM sf_orders) s
WHERE previous IS NOT NULL;
SELECT item FROM sf_orders ORDER BY id DESC LIMIT 2;
SELECT count(*) AS last_hour FROM sf_orders
WHERE id >= snowflake_from_time(now() - interval '1 hour');
DROP TABLE sf_orders;

-- on a distributed table every shard gets the default, so rows get the node
-- id of whichever node runs the insert
CREATE TABLE sf_events (
	id bigint PRIMARY KEY DEFAULT snowflake_id(),
	payload text
);
SELECT create_distributed_table('sf_events', 'id');
\c - - - :worker_1_port
SELECT count(*) > 0 AS shards_have_default
FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid
WHERE c.relname LIKE 'sf\_events\_%' AND pg_get_expr(d.adbin, d.adrelid) = 'snowflake_id()';
\c - - - :coordinator_port
DROP TABLE sf_events;
