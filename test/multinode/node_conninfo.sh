#!/usr/bin/env bash
# shardext.node_conninfo with ten options reaches the nodes with all of
# them: the workers get TLS (self-signed certificates, ssl = on), and
# connections from the coordinator use it at the protocol version
# ssl_max_protocol_version (the ninth) asks for, and sslmode=require (the
# tenth) refuses a worker without TLS; two more options that cannot work
# (a root certificate that does not exist) make connections fail, so no
# option is dropped (options past the eighth used to be).  A
# bad keyword in postgresql.conf is refused at reload and the last good
# value stays.
source "$(dirname "$0")/lib/common.sh"
TMP=$(mktemp -d)

as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
	coord "ALTER SYSTEM RESET shardext.node_conninfo" >/dev/null 2>&1
	coord "SELECT pg_reload_conf()" >/dev/null 2>&1
	for w in 1 2; do
		psql_at $((SHARDEXT_PORT + w)) -c "ALTER SYSTEM RESET ssl" >/dev/null 2>&1
		psql_at $((SHARDEXT_PORT + w)) -c "SELECT pg_reload_conf()" >/dev/null 2>&1
	done
	sed -i '/^shardext.node_conninfo = /d' "$SHARDEXT_CLUSTER_DIR/coordinator/postgresql.conf"
	coord "SELECT pg_reload_conf()" >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT

# reload_conninfo VALUE: wait until new sessions see VALUE
reload_conninfo() {
	coord "SELECT pg_reload_conf()" >/dev/null
	wait_for "new sessions see shardext.node_conninfo = '$1'" 5 \
		sql_is "$COORDINATOR_PORT" "SHOW shardext.node_conninfo" "$1"
}

# TLS on both workers, with a self-signed certificate in each data directory
for w in 1 2; do
	data="$SHARDEXT_CLUSTER_DIR/worker$w"
	if [ ! -f "$data/server.crt" ]; then
		openssl req -new -x509 -days 3650 -nodes -subj "/CN=127.0.0.1" \
			-keyout "$TMP/server.key" -out "$TMP/server.crt" >/dev/null 2>&1 || fail "openssl"
		install -m 600 "$TMP/server.key" "$data/server.key"
		install -m 644 "$TMP/server.crt" "$data/server.crt"
		[ "$(id -u)" = 0 ] && chown postgres: "$data/server.key" "$data/server.crt"
	fi
	psql_at $((SHARDEXT_PORT + w)) -c "ALTER SYSTEM SET ssl = on" >/dev/null
	psql_at $((SHARDEXT_PORT + w)) -c "SELECT pg_reload_conf()" >/dev/null
	wait_for "worker $w accepts TLS" 5 sql_is $((SHARDEXT_PORT + w)) "SHOW ssl" on
done
expect_eq "the workers accept TLS" "on|on" \
	"$(psql_at "$WORKER_1_PORT" -c "SHOW ssl")|$(psql_at "$WORKER_2_PORT" -c "SHOW ssl")"

coord "DROP TABLE IF EXISTS ci_t; CREATE TABLE ci_t (id int PRIMARY KEY);
	SELECT create_distributed_table('ci_t', 'id', shard_count => 4);
	INSERT INTO ci_t SELECT generate_series(1, 100)" >/dev/null

# ten options, sslmode last (it used to be dropped past the eighth)
ten="keepalives=1 keepalives_idle=30 keepalives_interval=10 keepalives_count=3 \
tcp_user_timeout=60000 connect_timeout=10 gssencmode=disable target_session_attrs=any \
ssl_max_protocol_version=TLSv1.2 sslmode=require"
expect_eq "ten options" "10" "$(wc -w <<<"$ten")"
coord "ALTER SYSTEM SET shardext.node_conninfo = '$ten'" >/dev/null
reload_conninfo "$ten"

# tls_of_session: a session's connections to the nodes, as the nodes see
# them (those it keeps, how many depends on the pool, and the one
# shardext_run_on_nodes opens to ask): per node, whether there are any, and
# the TLS state of all of them
tls_of_session() {
	psql_at "$COORDINATOR_PORT" -c "SELECT count(*) FROM ci_t" \
		-c "SELECT string_agg(r.result, ' ' ORDER BY r.node_id) FROM shardext_run_on_nodes(
			format('SELECT (count(*) > 0) || '':'' || string_agg(DISTINCT s.ssl || ''/'' || coalesce(s.version, ''-''), '','')
					FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
					WHERE a.application_name = %L',
				   'shardext_' || (SELECT system_identifier FROM pg_control_system()) || '_' ||
				   (SELECT oid FROM pg_database WHERE datname = current_database()) || '_' ||
				   pg_backend_pid())) r" | tail -1
}
expect_eq "connections to both nodes use TLS 1.2 (sslmode and ssl_max_protocol_version honoured)" \
	"true:true/TLSv1.2 true:true/TLSv1.2" "$(tls_of_session)"
expect_eq "queries work over them" "100" "$(coord "SELECT count(*) FROM ci_t")"

# two more options (the eleventh and twelfth) that cannot work: connections fail, naming why
coord "ALTER SYSTEM SET shardext.node_conninfo = '$ten sslmode=verify-full sslrootcert=$TMP/no-such-root.crt'" >/dev/null
reload_conninfo "$ten sslmode=verify-full sslrootcert=$TMP/no-such-root.crt"
expect_error_like "the twelfth option is used too" "no-such-root.crt" \
	psql_at "$COORDINATOR_PORT" -c "SELECT count(*) FROM ci_t"

# a bad keyword in postgresql.conf: the reload refuses it, the last good value stays
coord "ALTER SYSTEM RESET shardext.node_conninfo" >/dev/null
echo "shardext.node_conninfo = '$ten'" >>"$SHARDEXT_CLUSTER_DIR/coordinator/postgresql.conf"
reload_conninfo "$ten"
log="$SHARDEXT_CLUSTER_DIR/coordinator.log"
logged() {
	tail -c +$((logsize + 1)) "$log" >"$TMP/newlog"
	grep -q 'invalid value for parameter "shardext.node_conninfo"' "$TMP/newlog"
}
logsize=$(stat -c %s "$log")
echo "shardext.node_conninfo = 'no_such_option=1'" >>"$SHARDEXT_CLUSTER_DIR/coordinator/postgresql.conf"
coord "SELECT pg_reload_conf()" >/dev/null
wait_for "the refused value is reported in the log" 5 logged
expect_eq "the refused value does not replace the good one" "$ten" \
	"$(psql_at "$COORDINATOR_PORT" -c "SHOW shardext.node_conninfo")"
echo "ok - the refused value is reported in the log"
expect_eq "connections keep working with the good value" "true:true/TLSv1.2 true:true/TLSv1.2" "$(tls_of_session)"

# sslmode=require itself: a worker without TLS is refused
psql_at "$WORKER_2_PORT" -c "ALTER SYSTEM RESET ssl" >/dev/null
psql_at "$WORKER_2_PORT" -c "SELECT pg_reload_conf()" >/dev/null
wait_for "worker 2 without TLS" 5 sql_is "$WORKER_2_PORT" "SHOW ssl" off
expect_error_like "a node without TLS is refused (sslmode=require)" "SSL was required" \
	psql_at "$COORDINATOR_PORT" -c "SELECT count(*) FROM ci_t"
coord "ALTER SYSTEM RESET shardext.node_conninfo" >/dev/null
sed -i '/^shardext.node_conninfo = /d' "$SHARDEXT_CLUSTER_DIR/coordinator/postgresql.conf"
reload_conninfo ""
coord "DROP TABLE ci_t" >/dev/null
