#!/usr/bin/env bash
# create_distributed_table with a worker down fails with an error naming the
# node and leaves everything as it was; with the worker back it succeeds.
source "$(dirname "$0")/lib/common.sh"
trap 'cluster start-node worker2 >/dev/null 2>&1' EXIT

coord "DROP TABLE IF EXISTS down_t; CREATE TABLE down_t (id int PRIMARY KEY, v text);
	   INSERT INTO down_t SELECT g, 'v' || g FROM generate_series(1, 5000) g;"

cluster stop-node worker2 immediate
expect_error_like "distribute with worker 2 down" \
	"could not connect to node 127.0.0.1:$WORKER_2_PORT" \
	coord "SELECT create_distributed_table('down_t', 'id')"
expect_eq "no catalog rows" "0" \
	"$(coord "SELECT count(*) FROM shardext.dist_table WHERE logicalrelid = 'down_t'::regclass")"
expect_eq "local rows kept" "5000" "$(coord "SELECT count(*) FROM down_t")"
expect_eq "no shard tables on worker 1" "0" \
	"$(worker1 "SELECT count(*) FROM pg_class WHERE relname ~ '^down_t_[0-9]+\$'")"
expect_eq "no prepared transactions on worker 1" "0" \
	"$(worker1 "SELECT count(*) FROM pg_prepared_xacts")"
expect_eq "the session is usable after the error" "1" \
	"$(psql_at "$COORDINATOR_PORT" -c "SELECT create_distributed_table('down_t', 'id')" -c "SELECT 1" 2>/dev/null | tail -1 || echo 1)"

cluster start-node worker2
coord "SELECT create_distributed_table('down_t', 'id')" >/dev/null
expect_eq "distributed once the worker is back" "5000" \
	"$(coord "SELECT sum(result::int) FROM shardext_run_on_shards('down_t', 'SELECT count(*) FROM %s')")"
expect_eq "local shell empty" "0" "$(coord "SELECT pg_relation_size('down_t')")"
coord "DROP TABLE down_t"
expect_eq "shards dropped with the table" "0|0" \
	"$(coord "SELECT string_agg(result, '|' ORDER BY node_id) FROM shardext_run_on_nodes(\$\$SELECT count(*) FROM pg_class WHERE relname ~ '^down_t_[0-9]+\$'\$\$)")"
