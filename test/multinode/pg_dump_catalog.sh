#!/usr/bin/env bash
# pg_dump keeps shardext's metadata: the catalog tables are extension
# configuration, so their rows are in the dump.
source "$(dirname "$0")/lib/common.sh"
coord "DROP TABLE IF EXISTS dumped; CREATE TABLE dumped (id int); SELECT create_distributed_table('dumped', 'id', shard_count => 4)" >/dev/null
dump=$("$BINDIR/pg_dump" -h 127.0.0.1 -p "$COORDINATOR_PORT" -U postgres -d "$DB" --exclude-table-data="public.*" 2>&1) || fail "pg_dump: $dump"
for t in node colocation dist_table shard placement; do
	grep -q "^COPY shardext\.$t " <<<"$dump" || fail "dump has no data for shardext.$t; pg_dump said: $(echo "$dump" | grep -iE "error|warning" | head -5)"
done
echo "ok - catalog rows are dumped"
nodes=$(echo "$dump" | sed -n '/^COPY shardext.node /,/^\\\./p' | grep -c "127.0.0.1")
expect_eq "both nodes in the dump" "2" "$nodes"
coord "DROP TABLE dumped" >/dev/null
