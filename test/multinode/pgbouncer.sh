#!/usr/bin/env bash
# The coordinator behind pgbouncer in transaction pooling mode: 200 pgbench
# clients (simple protocol, and the extended protocol with unnamed
# statements) run the mix of point selects, point updates and multi-shard
# aggregates through 20 server connections: no failed transaction, the
# coordinator runs at most 20 client backends, and their connections to
# the workers stay cached (no waiting for the shared pool).  Multi-statement
# transactions keep their server connection; SET LOCAL works inside them.
source "$(dirname "$0")/lib/common.sh"
source "$ROOT/scripts/lib/pg.sh"
# libpq 19 opens with a "grease" protocol version (3.9999) unless told the
# highest version to ask for, and pgbouncer 1.18 (Debian 12) rejects it: the
# clients of this test ask for protocol 3.0, which pgbouncer speaks
if [ "$(pg_major)" -ge 18 ]; then export PGMAXPROTOCOLVERSION=3.0; fi

PGBOUNCER=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
[ -x "$PGBOUNCER" ] || fail "pgbouncer is not installed (scripts/setup installs the Debian package)"
PGBENCH="$BINDIR/pgbench"
port=$((SHARDEXT_PORT + 30))
TMP=$(mktemp -d)
chmod 755 "$TMP"

as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
	[ -f "$TMP/pgbouncer.pid" ] && kill "$(cat "$TMP/pgbouncer.pid")" 2>/dev/null
	coord "DROP TABLE IF EXISTS pb_t" >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT

cat >"$TMP/userlist.txt" <<CONF
"postgres" ""
CONF
cat >"$TMP/pgbouncer.ini" <<CONF
[databases]
$DB = host=127.0.0.1 port=$COORDINATOR_PORT dbname=$DB

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $TMP/userlist.txt
pool_mode = transaction
default_pool_size = 20
max_client_conn = 500
ignore_startup_parameters = extra_float_digits
logfile = $TMP/pgbouncer.log
pidfile = $TMP/pgbouncer.pid
CONF
[ "$(id -u)" = 0 ] && chown -R postgres: "$TMP"
as_postgres "$PGBOUNCER" -d "$TMP/pgbouncer.ini" || fail "pgbouncer did not start"
wait_for "pgbouncer accepts connections" 5 sql_is "$port" "SELECT 1" 1
bouncer() { "$BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d "$DB" "$@"; }
expect_eq "pgbouncer answers" "1" "$(bouncer -c "SELECT 1")"

coord "DROP TABLE IF EXISTS pb_t;
	CREATE TABLE pb_t (id int PRIMARY KEY, v int NOT NULL);
	INSERT INTO pb_t SELECT g, 0 FROM generate_series(1, 10000) g;
	SELECT create_distributed_table('pb_t', 'id');" >/dev/null

cat >"$TMP/select.sql" <<'SQL'
\set id random(1, 10000)
SELECT v FROM pb_t WHERE id = :id;
SQL
cat >"$TMP/update.sql" <<'SQL'
\set id random(1, 10000)
UPDATE pb_t SET v = v + 1 WHERE id = :id;
SQL
cat >"$TMP/agg.sql" <<'SQL'
SELECT count(*), sum(v) FROM pb_t;
SQL
cat >"$TMP/transfer.sql" <<'SQL'
\set a random(1, 10000)
\set b random(1, 10000)
BEGIN;
SET LOCAL shardext.executor_slow_start_interval = '1s';
UPDATE pb_t SET v = v - 1 WHERE id = :a;
UPDATE pb_t SET v = v + 1 WHERE id = :b;
COMMIT;
SQL

run_through_bouncer() {	# protocol seconds
	local out rc
	out=$("$PGBENCH" -n -M "$1" -c 200 -j 4 -T "$2" -f "$TMP/select.sql@6" -f "$TMP/update.sql@3" \
		-f "$TMP/agg.sql@1" -f "$TMP/transfer.sql@1" -h 127.0.0.1 -p "$port" -U postgres "$DB" 2>&1)
	rc=$?
	if [ $rc != 0 ] || grep -q "aborted" <<<"$out"; then
		grep -v "^ - \|^SQL script\|^progress" <<<"$out" | head -30 >&2
		fail "pgbench -M $1 through pgbouncer: a client failed (rc $rc)"
	fi
	tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
}

backends() {
	coord "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'
		   AND datname = current_database() AND pid <> pg_backend_pid()"
}
waits_before=$(coord "SELECT coalesce(sum(waits), 0) FROM shardext.connection_stats WHERE node_id IS NOT NULL")
# (sampled every 0.5 s: the samples watch the count over time)
( for _ in $(seq 1 40); do backends; sleep 0.5; done >"$TMP/backends" ) &
watcher=$!
run_through_bouncer simple 10
echo "simple protocol, 200 clients through 20 server connections: $tps tps"
expect_eq "simple protocol: no failed transaction" "0" "${failed:-0}"
run_through_bouncer extended 5
echo "extended protocol (unnamed statements): $tps tps"
expect_eq "extended protocol: no failed transaction" "0" "${failed:-0}"
wait $watcher
most=$(sort -n "$TMP/backends" | tail -1)
[ "$most" -le 21 ] || fail "the coordinator ran $most client backends behind a pool of 20"
echo "ok - at most $most coordinator backends for 200 clients"
expect_eq "their worker connections stay cached: no session waited for the shared pool" "0" \
	"$(coord "SELECT coalesce(sum(waits), 0) - $waits_before FROM shardext.connection_stats WHERE node_id IS NOT NULL")"

# a transaction keeps its server connection: what it wrote it reads back
expect_eq "a multi-statement transaction through pgbouncer" "5" \
	"$(bouncer -c "BEGIN" -c "UPDATE pb_t SET v = 5 WHERE id = 1" -c "SELECT v FROM pb_t WHERE id = 1" \
		-c "COMMIT" | tail -1)"
