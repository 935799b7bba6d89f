#!/usr/bin/env bash
# CREATE EXTENSION shardext on a server that does not preload the library
# fails with an error that says how to fix it.
source "$(dirname "$0")/lib/common.sh"

port=$((SHARDEXT_PORT + 9))
dir="$SHARDEXT_CLUSTER_DIR/no_preload"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() { as_pg "$BINDIR/pg_ctl" -D "$dir" -m immediate stop >/dev/null 2>&1; rm -rf "$dir"; }
trap cleanup EXIT

rm -rf "$dir"
as_pg "$BINDIR/initdb" -D "$dir" --auth=trust -U postgres >/dev/null || fail "initdb"
as_pg "$BINDIR/pg_ctl" -D "$dir" -o "-p $port -k $SHARDEXT_CLUSTER_DIR/sockets -c listen_addresses=127.0.0.1" \
	-l "$dir.log" -w start >/dev/null || fail "start server without preload"

out=$(DB=postgres psql_at "$port" -c "CREATE EXTENSION shardext" 2>&1)
grep -q "shardext must be loaded via shared_preload_libraries" <<<"$out" ||
	fail "unexpected message: $out"
grep -q "HINT:  Add shardext to shared_preload_libraries" <<<"$out" || fail "no hint: $out"
echo "ok - CREATE EXTENSION without preload: clear error and hint"
expect_eq "nothing was installed" "0" \
	"$(DB=postgres psql_at "$port" -c "SELECT count(*) FROM pg_extension WHERE extname = 'shardext'")"
