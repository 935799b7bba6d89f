--
-- metadata_cache: a change made by another session is seen at this
-- session's next statement, without reconnecting
--
CREATE TABLE cache_t (id int);
SELECT shardext_shard_for_value('cache_t', '1');	-- not distributed yet
\setenv SHARDEXT_TEST_DB :DBNAME
\! "$PSQL_BIN" -X -q -h 127.0.0.1 -p "$COORDINATOR_PORT" -d "$SHARDEXT_TEST_DB" -c "SELECT create_distributed_table('cache_t', 'id', shard_count => 4)" >/dev/null
SELECT shardext_shard_for_value('cache_t', '1') IS NOT NULL AS now_distributed;
SELECT shards FROM shardext.tables WHERE logicalrelid = 'cache_t'::regclass;
\! "$PSQL_BIN" -X -q -h 127.0.0.1 -p "$COORDINATOR_PORT" -d "$SHARDEXT_TEST_DB" -c "SELECT undistribute_table('cache_t')" >/dev/null
SELECT shardext_shard_for_value('cache_t', '1');	-- local again
\! "$PSQL_BIN" -X -q -h 127.0.0.1 -p "$COORDINATOR_PORT" -d "$SHARDEXT_TEST_DB" -c "SELECT create_distributed_table('cache_t', 'id', shard_count => 8)" >/dev/null
SELECT count(DISTINCT shardext_shard_for_value('cache_t', g::text)) AS shards_seen
FROM generate_series(1, 1000) g;
DROP TABLE cache_t;
