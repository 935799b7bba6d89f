--
-- snowflake_parallel: snowflake_id() is parallel safe, and parallel workers
-- draw from the same generator as the leader.  PostgreSQL 16 and later
-- plan count(DISTINCT) over a sorted Gather Merge (snowflake_parallel_1.out).
--
-- parallel safe: parallel workers draw from the same generator as the leader
CREATE TABLE sf_parallel AS SELECT generate_series(1, 100000) AS n;
ANALYZE sf_parallel;
BEGIN;
SET LOCAL parallel_setup_cost = 0;
SET LOCAL parallel_tuple_cost = 0;
SET LOCAL min_parallel_table_scan_size = 0;
SET LOCAL max_parallel_workers_per_gather = 2;
SET LOCAL parallel_leader_participation = off;
EXPLAIN (VERBOSE, COSTS OFF)
SELECT count(DISTINCT id), count(*) FROM (SELECT snowflake_id() AS id FROM sf_parallel) s;
SELECT count(DISTINCT id), count(*) FROM (SELECT snowflake_id() AS id FROM sf_parallel) s;
COMMIT;
DROP TABLE sf_parallel;
