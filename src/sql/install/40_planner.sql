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

-- json_agg results of the shards, concatenated into one JSON array with
-- json_agg's own formatting ("[a, b]")
CREATE FUNCTION shardext.json_cat_step(state text, part json)
	RETURNS text
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$ SELECT CASE WHEN part IS NULL THEN state
					  WHEN state IS NULL THEN part::text
					  ELSE left(state, -1) || ', ' || substr(part::text, 2) END $$;
COMMENT ON FUNCTION shardext.json_cat_step(text, json)
	IS 'adds one shard''s json_agg result to the concatenation';
CREATE FUNCTION shardext.json_cat_final(state text)
	RETURNS json
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$ SELECT state::json $$;
COMMENT ON FUNCTION shardext.json_cat_final(text)
	IS 'the concatenated json_agg result';
CREATE AGGREGATE shardext.json_cat_agg(json) (
	SFUNC = shardext.json_cat_step, STYPE = text, FINALFUNC = shardext.json_cat_final
);
COMMENT ON AGGREGATE shardext.json_cat_agg(json)
	IS 'concatenates per-shard json_agg results';

-- variance and standard deviation from per-shard count, sum and sum of
-- squares (exact numerics), with the arithmetic of PostgreSQL's own
-- numeric_stddev_internal: (N * sum(x^2) - sum(x)^2) / (N * (N - 1)), or
-- N * N for the population forms, 0 when the numerator is not positive
CREATE FUNCTION shardext.combine_variance(n int8, s numeric, q numeric,
										  sample bool, root bool)
	RETURNS numeric
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$
	SELECT CASE WHEN v IS NULL OR NOT root OR v = 0 THEN v
				ELSE round(sqrt(v + ('0.' || repeat('0', scale(v) + 20) || '1')::numeric
								- ('0.' || repeat('0', scale(v) + 20) || '1')::numeric),
						   scale(v)) END
	FROM (SELECT CASE
			WHEN n IS NULL OR n = 0 OR (sample AND n = 1) THEN NULL
			WHEN n::numeric * q - s * s <= 0 THEN 0::numeric
			ELSE (n::numeric * q - s * s) /
				 (n::numeric * (CASE WHEN sample THEN n - 1 ELSE n END))
			END AS v) x
	$$;
COMMENT ON FUNCTION shardext.combine_variance(int8, numeric, numeric, bool, bool)
	IS 'variance or standard deviation from per-shard count, sum and sum of squares';
