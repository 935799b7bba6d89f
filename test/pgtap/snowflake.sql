-- pgTAP: contracts of the snowflake id functions (run on the coordinator of
-- the test cluster, after the pg_regress suite registered its workers)
BEGIN;
SET LOCAL timezone TO 'UTC';
SELECT plan(43);

-- the functions, their signatures and properties
SELECT has_function('pg_catalog', 'snowflake_id', ARRAY[]::name[]);
SELECT function_returns('pg_catalog', 'snowflake_id', ARRAY[]::name[], 'bigint');
SELECT volatility_is('pg_catalog', 'snowflake_id', ARRAY[]::name[], 'volatile');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'pg_catalog.snowflake_id()'::regprocedure),
		  's'::"char", 'snowflake_id() is parallel safe (parallel workers share the generator)');
SELECT has_function('pg_catalog', 'snowflake_node_id', ARRAY[]::name[]);
SELECT function_returns('pg_catalog', 'snowflake_node_id', ARRAY[]::name[], 'integer');
SELECT has_function('pg_catalog', 'snowflake_parse', ARRAY['bigint']);
SELECT volatility_is('pg_catalog', 'snowflake_parse', ARRAY['bigint'], 'immutable');
SELECT is_strict('pg_catalog', 'snowflake_parse', ARRAY['bigint']);
SELECT is((SELECT proargnames FROM pg_proc
		   WHERE oid = 'pg_catalog.snowflake_parse(bigint)'::regprocedure),
		  ARRAY['id', 'created_at', 'node_id', 'sequence'],
		  'snowflake_parse() returns created_at, node_id and sequence');
SELECT has_function('pg_catalog', 'snowflake_from_time', ARRAY['timestamp with time zone']);
SELECT function_returns('pg_catalog', 'snowflake_from_time',
						ARRAY['timestamp with time zone'], 'bigint');
SELECT volatility_is('pg_catalog', 'snowflake_from_time',
					 ARRAY['timestamp with time zone'], 'immutable');
SELECT is_strict('pg_catalog', 'snowflake_from_time', ARRAY['timestamp with time zone']);
SELECT is((SELECT count(*)::int FROM pg_proc
		   WHERE proname LIKE 'snowflake\_%' AND obj_description(oid, 'pg_proc') IS NULL),
		  0, 'every snowflake function has a comment');

-- ids
SELECT cmp_ok(snowflake_id(), '>', 0::bigint, 'ids are positive');
SELECT ok((SELECT bool_and(id > previous)
		   FROM (SELECT id, lag(id) OVER (ORDER BY n) AS previous
				 FROM (SELECT n, snowflake_id() AS id FROM generate_series(1, 10000) n) g) s
		   WHERE previous IS NOT NULL),
		  'ids increase strictly');
SELECT is(snowflake_node_id(), 0, 'the coordinator is node 0');
SELECT is((snowflake_parse(snowflake_id())).node_id, snowflake_node_id(), 'ids carry the node id');
SELECT ok((SELECT created_at BETWEEN now() AND clock_timestamp()
		   FROM snowflake_parse(snowflake_id())),
		  'ids carry the time they were made');

-- parse and from_time
SELECT results_eq($$SELECT * FROM snowflake_parse(4194304::bigint * 1000 + 4096 * 7 + 42)$$,
				  $$VALUES ('2024-01-01 00:00:01+00'::timestamptz, 7, 42)$$,
				  'snowflake_parse() takes an id apart');
SELECT results_eq($$SELECT * FROM snowflake_parse(9223372036854775807)$$,
				  $$VALUES ('2093-09-06 15:47:35.551+00'::timestamptz, 1023, 4095)$$,
				  'the largest id is the last millisecond, node 1023, sequence 4095');
SELECT is(snowflake_from_time('2024-01-01 00:00:00+00'), 0::bigint, 'the epoch is id 0');
SELECT is(snowflake_from_time('2024-01-01 00:00:00.000999+00'), 0::bigint,
		  'from_time rounds down to the millisecond');
SELECT is(snowflake_from_time('2024-01-01 00:00:00.001+00'), 4194304::bigint,
		  'one millisecond is 2^22');
SELECT is(snowflake_from_time('2093-09-06 15:47:35.551+00'), 9223372036850581504,
		  'the last millisecond');
SELECT ok((SELECT snowflake_from_time(created_at) <= id
				  AND id < snowflake_from_time(created_at + interval '1 ms')
		   FROM (SELECT id, (snowflake_parse(id)).created_at
				 FROM (SELECT snowflake_id() AS id) i) p),
		  'an id lies between from_time of its millisecond and of the next');

-- bad input
SELECT throws_ok('SELECT snowflake_parse(-1)', '22003',
				 'snowflake id -1 is out of range', 'negative ids are refused');
SELECT throws_ok('SELECT snowflake_parse(-9223372036854775808)', '22003',
				 'snowflake id -9223372036854775808 is out of range', 'the smallest bigint is refused');
SELECT throws_ok($$SELECT snowflake_from_time('2023-12-31 23:59:59.999999+00')$$, '22008',
				 'timestamp out of range for snowflake ids', 'times before the epoch are refused');
SELECT throws_ok($$SELECT snowflake_from_time('2093-09-06 15:47:35.552+00')$$, '22008',
				 'timestamp out of range for snowflake ids', 'times beyond 41 bits are refused');
SELECT throws_ok($$SELECT snowflake_from_time('infinity')$$, '22008',
				 'timestamp out of range for snowflake ids', 'infinity is refused');
SELECT throws_ok($$SELECT snowflake_from_time('-infinity')$$, '22008',
				 'timestamp out of range for snowflake ids', '-infinity is refused');

-- settings
SELECT throws_ok('SET shardext.node_id = 5', '55P02',
				 'parameter "shardext.node_id" cannot be changed now',
				 'the node id is a server setting');
SELECT throws_ok($$SET shardext.snowflake_clock_offset = '1ms'$$, '22023', NULL,
				 'the test clock offset only moves the clock back');
SELECT throws_ok($$SET shardext.snowflake_clock_offset = '-2d'$$, '22023', NULL,
				 'the test clock offset is at most a day');
SELECT throws_ok('SET shardext.snowflake_max_clock_skew = -1', '22023', NULL,
				 'the tolerated clock skew is not negative');

-- a clock step back beyond shardext.snowflake_max_clock_skew is an error,
-- within it ids go on increasing
SELECT snowflake_id() AS last_id \gset
SET LOCAL shardext.snowflake_clock_offset = '-30min';
SELECT throws_ok('SELECT snowflake_id()', '55000',
				 'system clock is behind the last snowflake id by more than shardext.snowflake_max_clock_skew',
				 'a clock half an hour behind is refused');
SET LOCAL shardext.snowflake_max_clock_skew = '1h';
SELECT cmp_ok(snowflake_id(), '>', :last_id::bigint,
			  'with a larger tolerance ids continue after the last one');
RESET shardext.snowflake_max_clock_skew;
RESET shardext.snowflake_clock_offset;
SELECT cmp_ok(snowflake_id(), '>', :last_id::bigint, 'ids continue when the clock is back');

-- registration checks the node id before changing anything
SELECT throws_ok($$SELECT shardext.worker_register('test', 0)$$, '22023',
				 'node id 0 is out of range', 'node id 0 belongs to coordinators');
SELECT throws_ok($$SELECT shardext.worker_register('test', 1024)$$, '22023',
				 'node id 1024 is out of range', 'node ids have 10 bits');
SELECT is(snowflake_node_id(), 0, 'a refused registration leaves the node id alone');

SELECT * FROM finish();
ROLLBACK;
