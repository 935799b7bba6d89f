#!/usr/bin/env bash
# Nodes of another major version of PostgreSQL than the coordinator's are
# refused, with an error naming both versions, and nothing is registered:
# as a worker (shardext_add_node), as a read replica (shardext_add_replica)
# and as a node's new address (shardext_update_node).  The other server is
# a real one of the nearest other major version installed (Debian's
# /usr/lib/postgresql/N, or ${SHARDEXT_PG_ROOT:-/opt/pg}/N).
source "$(dirname "$0")/lib/common.sh"
source "$ROOT/scripts/lib/pg.sh"

ours=$(pg_major)
other=
for v in $((ours + 1)) $((ours - 1)) 15 16 17 18 19; do
	if [ "$v" != "$ours" ] && otherConfig=$(pg_find "$v"); then
		other=$v
		break
	fi
done
if [ -z "$other" ]; then
	echo "ok - skipped: no PostgreSQL of another major version than $ours is installed"
	exit 0
fi
OTHER_BINDIR=$("$otherConfig" --bindir)

port=$((SHARDEXT_PORT + 19))
dir="$SHARDEXT_CLUSTER_DIR/mixed_versions"
trap 'stop_plain_server "$OTHER_BINDIR" "$dir"' EXIT
start_plain_server "$OTHER_BINDIR" "$dir" "$port"
expect_eq "the other server runs PostgreSQL $other" "$other" \
	"$(DB=postgres psql_at "$port" -c "SHOW server_version_num" | cut -c1-2)"

message="node 127.0.0.1:$port runs PostgreSQL $other, the coordinator PostgreSQL $ours"
nodes_before=$(coord "SELECT count(*) FROM shardext.nodes")

expect_error_like "a worker of PostgreSQL $other is refused" "$message" \
	coord "SELECT shardext_add_node('127.0.0.1', $port)"
expect_error_like "a read replica of PostgreSQL $other is refused" "$message" \
	coord "SELECT shardext_add_replica('127.0.0.1', $port, '127.0.0.1', $WORKER_1_PORT)"
worker1_id=$(coord "SELECT node_id FROM shardext.nodes WHERE node_port = $WORKER_1_PORT")
expect_error_like "moving a node to a PostgreSQL $other server is refused" "$message" \
	coord "SELECT shardext_update_node($worker1_id, '127.0.0.1', $port)"

expect_eq "nothing was registered" "$nodes_before" "$(coord "SELECT count(*) FROM shardext.nodes")"
expect_eq "worker 1 keeps its address" "$WORKER_1_PORT" \
	"$(coord "SELECT node_port FROM shardext.nodes WHERE node_id = $worker1_id")"
expect_eq "worker 1 passes the version check" "ok" \
	"$(coord "SELECT status FROM shardext_check_cluster()
	          WHERE node_id = $worker1_id AND check_name = 'postgresql_version'")"
