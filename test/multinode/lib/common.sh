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
