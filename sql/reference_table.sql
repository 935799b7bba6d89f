--
-- reference_table: a full copy of a table on every node
--
\getenv coordinator_port COORDINATOR_PORT
\getenv worker_1_port WORKER_1_PORT
\getenv worker_2_port WORKER_2_PORT

CREATE TABLE countries (code text PRIMARY KEY, name text NOT NULL);
INSERT INTO countries VALUES ('de', 'Germany'), ('fr', 'France'), ('jp', 'Japan');
SELECT create_reference_table('countries');

-- one shard without a hash range, one placement per node
SELECT method, distribution_column IS NULL AS no_column, shard_count, shards
FROM shardext.tables WHERE logicalrelid = 'countries'::regclass;
SELECT count(*) AS placements, count(DISTINCT shard_id) AS shards,
	   count(DISTINCT node_id) AS nodes,
	   bool_and(hash_min IS NULL AND hash_max IS NULL) AS no_range
FROM shardext.shards WHERE logicalrelid = 'countries'::regclass;

-- every value maps to the single shard
SELECT shardext_shard_for_value('countries', 'xx') =
	   (SELECT DISTINCT shard_id FROM shardext.shards WHERE logicalrelid = 'countries'::regclass)
	   AS single_shard;

-- the local table is an empty shell; each worker holds every row
SELECT pg_relation_size('countries') AS local_bytes;
SELECT node_id, success, result FROM shardext_run_on_nodes(
	(SELECT format('SELECT string_agg(code, '','' ORDER BY code) FROM %s', shard_name)
	 FROM shardext.shards WHERE logicalrelid = 'countries'::regclass LIMIT 1))
ORDER BY node_id;
\c - - - :worker_1_port
SELECT count(*) AS shard_tables FROM pg_class WHERE relname ~ '^countries_[0-9]+$' AND relkind = 'r';

-- a node that is removed loses its copy; a node that is added gets one
\c - - - :coordinator_port
SELECT shardext_remove_node('127.0.0.1', :worker_2_port);
SELECT count(*) AS placements FROM shardext.shards WHERE logicalrelid = 'countries'::regclass;
\c - - - :worker_2_port
SELECT count(*) AS copies_left FROM pg_class WHERE relname ~ '^countries_[0-9]+$';
\c - - - :coordinator_port

-- the last copy of a reference table cannot be removed
SELECT shardext_remove_node('127.0.0.1', :worker_1_port);
SELECT count(*) AS nodes FROM shardext.nodes;

SELECT shardext_add_node('127.0.0.1', :worker_2_port, weight => 2.0) > 0 AS added;
SELECT count(*) AS placements FROM shardext.shards WHERE logicalrelid = 'countries'::regclass;
\c - - - :worker_2_port
CREATE FUNCTION pg_temp.copied_rows(t regclass) RETURNS text LANGUAGE plpgsql
	AS $$DECLARE r text;
	BEGIN
		EXECUTE format('SELECT string_agg(code || ''='' || name, '','' ORDER BY code) FROM %s', t)
			INTO r;
		RETURN r;
	END$$;
SELECT pg_temp.copied_rows(oid) AS copied_rows
FROM pg_class WHERE relname ~ '^countries_[0-9]+$' AND relkind = 'r';
\c - - - :coordinator_port

-- an empty reference table works too
CREATE TABLE currencies (code text PRIMARY KEY);
SELECT create_reference_table('currencies');
SELECT count(*) AS placements FROM shardext.shards WHERE logicalrelid = 'currencies'::regclass;

-- reference tables cannot be distributed twice
SELECT create_reference_table('currencies');
SELECT create_distributed_table('currencies', 'code');
