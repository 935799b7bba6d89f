#!/usr/bin/env bash
# CREATE EXTENSION shardext on a server that does not preload the library
# fails with an error that says how to fix it.
source "$(dirname "$0")/lib/common.sh"

port=$((SHARDEXT_PORT + 9))
dir="$SHARDEXT_CLUSTER_DIR/no_preload"
trap 'stop_plain_server "$BINDIR" "$dir"' EXIT
start_plain_server "$BINDIR" "$dir" "$port"

out=$(DB=postgres psql_at "$port" -c "CREATE EXTENSION shardext" 2>&1)
grep -q "shardext must be loaded via shared_preload_libraries" <<<"$out" ||
	fail "unexpected message: $out"
grep -q "HINT:  Add shardext to shared_preload_libraries" <<<"$out" || fail "no hint: $out"
echo "ok - CREATE EXTENSION without preload: clear error and hint"
expect_eq "nothing was installed" "0" \
	"$(DB=postgres psql_at "$port" -c "SELECT count(*) FROM pg_extension WHERE extname = 'shardext'")"
