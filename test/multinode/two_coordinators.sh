#!/usr/bin/env bash
# Two coordinator databases using the same workers keep their shards apart:
# each uses the worker database of its own name.  A worker database serving
# one coordinator refuses another.
source "$(dirname "$0")/lib/common.sh"
other=regression_other
cleanup() {
	DB=postgres psql_at "$COORDINATOR_PORT" -c "DROP DATABASE IF EXISTS $other WITH (FORCE)" >/dev/null 2>&1
	DB=postgres psql_at "$WORKER_1_PORT" -c "DROP DATABASE IF EXISTS $other WITH (FORCE)" >/dev/null 2>&1
	DB=postgres psql_at "$WORKER_2_PORT" -c "DROP DATABASE IF EXISTS $other WITH (FORCE)" >/dev/null 2>&1
}
trap cleanup EXIT
cleanup

DB=postgres psql_at "$COORDINATOR_PORT" -c "CREATE DATABASE $other"
DB=$other psql_at "$COORDINATOR_PORT" -c "SET client_min_messages = warning" -c "CREATE EXTENSION shardext" \
	-c "SELECT shardext_add_node('127.0.0.1', $WORKER_1_PORT)" \
	-c "SELECT shardext_add_node('127.0.0.1', $WORKER_2_PORT)" >/dev/null ||
	fail "second coordinator database could not add the workers"

# the same table name in both coordinator databases
coord "CREATE TABLE twin (id int, who text); INSERT INTO twin SELECT g, 'first' FROM generate_series(1, 100) g;
	   SELECT create_distributed_table('twin', 'id', shard_count => 4)" >/dev/null
DB=$other psql_at "$COORDINATOR_PORT" -c "CREATE TABLE twin (id int, who text);
	INSERT INTO twin SELECT g, 'second' FROM generate_series(1, 30) g;
	SELECT create_distributed_table('twin', 'id', shard_count => 4)" >/dev/null

expect_eq "first database's shards hold its rows" "100 first" \
	"$(coord "SELECT sum(split_part(result, ' ', 1)::int) || ' ' || min(split_part(result, ' ', 2))
			  FROM shardext_run_on_shards('twin', 'SELECT count(*) || '' '' || coalesce(min(who), ''first'') FROM %s')")"
expect_eq "second database's shards hold its rows" "30 second" \
	"$(DB=$other psql_at "$COORDINATOR_PORT" -c "SELECT sum(split_part(result, ' ', 1)::int) || ' ' || min(split_part(result, ' ', 2))
			  FROM shardext_run_on_shards('twin', 'SELECT count(*) || '' '' || coalesce(min(who), ''second'') FROM %s')")"
expect_eq "worker 1 has a database per coordinator database" "1" \
	"$(DB=postgres psql_at "$WORKER_1_PORT" -c "SELECT count(*) FROM pg_database WHERE datname = '$other'")"
expect_eq "each worker database knows its own coordinator" "2" \
	"$( (psql_at "$WORKER_1_PORT" -c "SELECT coordinator_id FROM shardext.local_identity";
		DB=$other psql_at "$WORKER_1_PORT" -c "SELECT coordinator_id FROM shardext.local_identity") | sort -u | wc -l)"

# dropping in one database leaves the other alone
DB=$other psql_at "$COORDINATOR_PORT" -c "DROP TABLE twin" >/dev/null
expect_eq "first database's shards survive" "100" \
	"$(coord "SELECT sum(result::int) FROM shardext_run_on_shards('twin', 'SELECT count(*) FROM %s')")"
coord "DROP TABLE twin" >/dev/null
