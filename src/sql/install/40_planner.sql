-- Distributed planner and executor: the combine step's helpers and the
-- per-shard statistics.

-- placeholder for the rows of a distributed query's shard tasks in the
-- coordinator's combine plan; the planner replaces it, it never runs
CREATE FUNCTION shardext.distributed_result()
	RETURNS SETOF record
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'shardext_distributed_result';
COMMENT ON FUNCTION shardext.distributed_result()
	IS 'placeholder for the shard rows of a distributed query (never called)';

-- combine functions for partial aggregates computed on the shards
CREATE AGGREGATE shardext.sum_counts(int8) (
	SFUNC = pg_catalog.int8pl, STYPE = int8, INITCOND = '0',
	COMBINEFUNC = pg_catalog.int8pl, PARALLEL = SAFE
);
COMMENT ON AGGREGATE shardext.sum_counts(int8)
	IS 'adds per-shard counts (0 for no rows, like count)';

CREATE AGGREGATE shardext.sum_int8(int8) (
	SFUNC = pg_catalog.int8pl, STYPE = int8,
	COMBINEFUNC = pg_catalog.int8pl, PARALLEL = SAFE
);
COMMENT ON AGGREGATE shardext.sum_int8(int8)
	IS 'adds per-shard int8 sums (NULL for no rows, like sum)';

CREATE AGGREGATE shardext.array_cat_agg(anycompatiblearray) (
	SFUNC = pg_catalog.array_cat, STYPE = anycompatiblearray
);
COMMENT ON AGGREGATE shardext.array_cat_agg(anycompatiblearray)
	IS 'concatenates per-shard array_agg results';

CREATE AGGREGATE shardext.jsonb_cat_agg(jsonb) (
	SFUNC = pg_catalog.jsonb_concat, STYPE = jsonb
);
COMMENT ON AGGREGATE shardext.jsonb_cat_agg(jsonb)
	IS 'concatenates per-shard jsonb_agg results';

-- statements routed to each shard since the last reset
CREATE FUNCTION shardext.stat_shards_counters(OUT shard_id bigint, OUT queries bigint,
											  OUT since timestamptz)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_stat_shards';
COMMENT ON FUNCTION shardext.stat_shards_counters()
	IS 'per-shard statement counters kept in shared memory';

CREATE VIEW shardext.stat_shards AS
	SELECT c.shard_id, s.logicalrelid AS table_name, p.nodeid AS node_id,
		   n.host AS node_host, n.port AS node_port, c.queries, c.since
	FROM shardext.stat_shards_counters() c
	JOIN shardext.shard s ON s.shardid = c.shard_id
	LEFT JOIN LATERAL (SELECT min(nodeid) AS nodeid FROM shardext.placement pl
					   WHERE pl.shardid = c.shard_id) p ON true
	LEFT JOIN shardext.node n ON n.nodeid = p.nodeid
	ORDER BY c.queries DESC, c.shard_id;
COMMENT ON VIEW shardext.stat_shards IS 'statements routed to each shard since the last reset: hot shards first';
GRANT SELECT ON shardext.stat_shards TO PUBLIC;

CREATE FUNCTION pg_catalog.shardext_stat_shards_reset()
	RETURNS void
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'shardext_stat_shards_reset';
COMMENT ON FUNCTION pg_catalog.shardext_stat_shards_reset()
	IS 'sets the per-shard statement counters of shardext.stat_shards to zero';
REVOKE ALL ON FUNCTION pg_catalog.shardext_stat_shards_reset() FROM PUBLIC;

-- placeholder for the rows of a separately planned part (subquery, CTE,
-- set operation branch) of a query; the planner replaces it
CREATE FUNCTION shardext.distributed_subplan(part int)
	RETURNS SETOF record
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_distributed_result';
COMMENT ON FUNCTION shardext.distributed_subplan(int)
	IS 'placeholder for the rows of a separately planned part of a distributed query (never called)';
