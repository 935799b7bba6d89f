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

# --- waiting for a condition, instead of sleeping ---------------------------

# poll SECONDS COMMAND...: run COMMAND until it succeeds, every 0.1 s, for
# SECONDS at most; fails (status 1) when it never did
poll() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.1
	done
}
# copy_source DIR: this tree's files (tracked and new, not ignored) into DIR
copy_source() {
	(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar -c) |
		tar -x -C "$1"
}
# build_unoptimized SRC PG_CONFIG LOG: builds and installs the extension in
# SRC for that installation, unoptimized (-O0 -g0: the upgrade tests test
# upgrades, not the code, and such a build takes a third of the time),
# into LOG; on failure shows its end
build_unoptimized() {
	{ nice make -s -C "$1" PG_CONFIG="$2" with_llvm=no COPT="-O0 -g0" -j"$(nproc)" &&
		make -s -C "$1" PG_CONFIG="$2" with_llvm=no COPT="-O0 -g0" install; } >"$3" 2>&1 ||
		{ tail -20 "$3" >&2; return 1; }
}
# wait_for WHAT SECONDS COMMAND...: poll, and fail the test naming WHAT
# when COMMAND never succeeded
wait_for() {
	local what=$1 seconds=$2
	shift 2
	poll "$seconds" "$@" || fail "$what: not within $seconds s"
}
# sql_is PORT SQL [VALUE]: SQL returns VALUE (t) on PORT (quietly; for wait_for)
sql_is() { [ "$(psql_at "$1" -c "$2" 2>/dev/null)" = "${3-t}" ]; }
# wait_sql WHAT SECONDS PORT SQL: wait until SQL returns t on PORT
wait_sql() { wait_for "$1" "$2" sql_is "$3" "$4"; }
# wait_coordinator / wait_node PORT: the server accepts queries again (60 s)
wait_node() { wait_for "node $1 is back" 60 sql_is "$1" "SELECT true"; }
# The PostgreSQL 18 that CI tests with (18beta1) starts no background worker
# again after a crash restart (upstream fixed it in b5d084c5353): there
# wait_coordinator restarts a coordinator that went through one cleanly, so
# that its maintenance daemon runs again, as it does on every release
COORD_LOG_SEEN=$(stat -c %s "$SHARDEXT_CLUSTER_DIR/coordinator.log" 2>/dev/null || echo 0)
wait_coordinator() {
	local log="$SHARDEXT_CLUSTER_DIR/coordinator.log"
	wait_node "$COORDINATOR_PORT"
	if "$PG_CONFIG" --version | grep -q '18beta1' &&
		tail -c +$((COORD_LOG_SEEN + 1)) "$log" 2>/dev/null |
		grep -q "all server processes terminated; reinitializing"; then
		echo "note - the coordinator went through a crash restart: restarted (18beta1)"
		cluster stop-node coordinator >/dev/null 2>&1
		cluster start-node coordinator >/dev/null
		wait_node "$COORDINATOR_PORT"
	fi
	COORD_LOG_SEEN=$(stat -c %s "$log" 2>/dev/null || echo 0)
}
# port_open PORT: something accepts TCP connections on 127.0.0.1:PORT
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# --- sessions that stay open between the steps of a test --------------------

# session_start NAME [PORT]: a psql session in the background (application
# name test_NAME) that runs what session_send writes to it; its output
# (unaligned, with errors) goes to $SESSION_DIR/NAME.out
declare -A SESSION_FD SESSION_PID
SESSION_DIR=""
session_start() {
	local name=$1 port=${2:-$COORDINATOR_PORT} fd
	[ -n "$SESSION_DIR" ] || SESSION_DIR=$(mktemp -d)
	rm -f "$SESSION_DIR/$name.in" "$SESSION_DIR/$name.out"
	mkfifo "$SESSION_DIR/$name.in"
	PGAPPNAME="test_$name" "$BINDIR/psql" -X -q -At -h 127.0.0.1 -U postgres -p "$port" -d "$DB" \
		<"$SESSION_DIR/$name.in" >"$SESSION_DIR/$name.out" 2>&1 &
	SESSION_PID[$name]=$!
	exec {fd}>"$SESSION_DIR/$name.in"
	SESSION_FD[$name]=$fd
}
# session_send NAME SQL: the session runs SQL (a statement or a psql command)
session_send() { echo "$2" >&"${SESSION_FD[$1]}"; }
# session_run NAME SQL: ... and wait (60 s at most) until it has run it
session_run() {
	local marker="step $RANDOM$RANDOM done"
	session_send "$1" "$2"
	session_send "$1" "\\echo $marker"
	wait_for "session $1 ran: $2" 60 grep -q "^$marker\$" "$SESSION_DIR/$1.out"
}
# session_output NAME: what the session printed so far
session_output() { cat "$SESSION_DIR/$1.out"; }
# session_end NAME: end the session (\q: background processes started since
# hold its input open too) and wait for it (its status)
session_end() {
	local fd=${SESSION_FD[$1]:-}
	[ -n "$fd" ] || return 0
	echo '\q' >&"$fd" 2>/dev/null
	exec {fd}>&-
	unset "SESSION_FD[$1]"
	wait "${SESSION_PID[$1]}"
}
# session_backend NAME [PORT]: the pid of the session's backend
session_backend() {
	psql_at "${2:-$COORDINATOR_PORT}" -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'test_$1'"
}
# sessions_end: end every session (for an EXIT trap)
sessions_end() {
	local name
	for name in "${!SESSION_FD[@]}"; do session_end "$name" >/dev/null 2>&1; done
	[ -n "$SESSION_DIR" ] && rm -rf "$SESSION_DIR"
}

# --- pause points (src/include/shardext/test_pause.h) ------------------------

# pause_key NAME: the advisory lock key of the pause point NAME
pause_key() { echo "1398297680, hashtext('$1' COLLATE \"C\")"; }
# pause_hold NAME: a session (pause) holds the point NAME: a backend with
# shardext.test_pause_points = 'NAME' waits there until pause_release
pause_hold() {
	session_start pause
	session_run pause "SELECT pg_advisory_lock($(pause_key "$1")) \\g /dev/null"
}
# pause_reached NAME: a backend waits at the point NAME
pause_reached() {
	sql_is "$COORDINATOR_PORT" "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory'
		AND NOT granted AND classid = 1398297680 AND objid = hashtext('$1' COLLATE \"C\")::oid"
}
# wait_for_pause NAME: wait (60 s at most) until a backend waits at NAME
wait_for_pause() { wait_for "a backend waits at pause point '$1'" 60 pause_reached "$1"; }
# pause_release: the held point lets its backend go on
pause_release() { session_end pause; }
