# Shared helpers for the multinode tests (sourced, not run).  scripts/test
# exports PG_CONFIG, COORDINATOR_PORT, WORKER_n_PORT, SHARDEXT_CLUSTER_DIR and
# SHARDEXT_PORT; the regression database already has the workers registered.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
BINDIR=$("$PG_CONFIG" --bindir)
DB=${TEST_DB:-regression}

# psql_at PORT SQL... : run SQL, print unaligned tuples only, stop on error
psql_at() {
	local port=$1
	shift
	"$BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -p "$port" -d "$DB" "$@"
}
coord() { psql_at "$COORDINATOR_PORT" -c "$1"; }
worker1() { psql_at "$WORKER_1_PORT" -c "$1"; }
worker2() { psql_at "$WORKER_2_PORT" -c "$1"; }

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# expect_eq WHAT EXPECTED ACTUAL
expect_eq() {
	if [ "$2" != "$3" ]; then
		fail "$1: expected '$2', got '$3'"
	fi
	echo "ok - $1"
}

# expect_error_like WHAT PATTERN COMMAND...: the command must fail with a
# message matching PATTERN (grep -E)
expect_error_like() {
	local what=$1 pattern=$2 out
	shift 2
	if out=$("$@" 2>&1); then
		fail "$what: expected an error, got success: $out"
	fi
	grep -Eq "$pattern" <<<"$out" || fail "$what: error did not match /$pattern/: $out"
	echo "ok - $what"
}

cluster() { "$ROOT/scripts/cluster" "$@"; }

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# start_plain_server BINDIR DIR PORT: a new server of that installation in
# DIR on PORT (127.0.0.1), without shardext; stop_plain_server BINDIR DIR
# stops it and removes it
start_plain_server() {
	local bindir=$1 dir=$2 port=$3
	rm -rf "$dir"
	as_pg "$bindir/initdb" -D "$dir" --auth=trust -U postgres >/dev/null || fail "initdb in $dir"
	as_pg "$bindir/pg_ctl" -D "$dir" \
		-o "-p $port -k $SHARDEXT_CLUSTER_DIR/sockets -c listen_addresses=127.0.0.1" \
		-l "$dir.log" -w start >/dev/null || fail "starting the server of $dir"
}
stop_plain_server() {
	as_pg "$1/pg_ctl" -D "$2" -m immediate stop >/dev/null 2>&1
	rm -rf "$2" "$2.log"
}
