#!/usr/bin/env bash
# Nodes that hang must not hang the coordinator:
#  1. a registered node that accepts TCP connections but never answers:
#     shardext_run_on_nodes, shardext_recover_prepared_transactions and
#     shardext_remove_node end within shardext.connect_timeout (reporting
#     the node) and are cancellable by statement_timeout;
#  2. with that node registered, the maintenance daemon still resolves
#     in-doubt prepared transactions and distributed deadlocks on the other
#     nodes;
#  3. a worker backend that stops answering in the middle of a query
#     (SIGSTOP): statement_timeout and pg_cancel_backend end the statement
#     within a few seconds, the session goes on;
#  4. a worker whose postmaster is stopped too: the cancel request itself
#     is bounded, the statement still ends.
source "$(dirname "$0")/lib/common.sh"
TMP=$(mktemp -d)
chmod 755 "$TMP"
port=$((SHARDEXT_PORT + 20))
fake=""
canceller=""

# a listener that accepts and then stays silent
perl -MIO::Socket::INET -e '
	my $s = IO::Socket::INET->new(Listen => 50, LocalAddr => "127.0.0.1:'"$port"'", ReuseAddr => 1)
		or die "listen: $!";
	my @held;
	local $SIG{ALRM} = sub { exit 0 };
	alarm 300;
	while (my $c = $s->accept) { push @held, $c; }' &
listener=$!
# resume_stopped: every process the test stopped (SIGSTOP) goes on; the
# stopping script notes them in $TMP/stopped before it stops them
resume_stopped() {
	local pids
	pids=$(cat "$TMP/stopped" 2>/dev/null)
	[ -z "$pids" ] || kill -CONT $pids 2>/dev/null
	rm -f "$TMP/stopped"
}
# the cleanup first resumes what was stopped (the SQL below would wait for
# a stopped backend or postmaster forever), and its own statements are
# bounded: whatever the test left behind, it ends
cleanup() {
	resume_stopped
	[ -z "$canceller" ] || kill "$canceller" 2>/dev/null
	sessions_end
	kill $listener 2>/dev/null
	export PGOPTIONS="-c statement_timeout=30s"
	[ -n "$fake" ] && coord "DELETE FROM shardext.node WHERE nodeid = $fake" >/dev/null 2>&1
	coord "ALTER SYSTEM RESET shardext.connect_timeout" >/dev/null 2>&1
	coord "ALTER SYSTEM RESET shardext.recovery_interval" >/dev/null 2>&1
	coord "SELECT pg_reload_conf()" >/dev/null 2>&1
	coord "DROP TABLE IF EXISTS hn_rows" >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT
wait_for "the silent listener listens" 10 port_open "$port"

# timed CMD...: runs CMD, sets out (stdout and stderr) and elapsed_ms
timed() {
	local start
	start=$(date +%s%N)
	out=$("$@" 2>&1)
	elapsed_ms=$((($(date +%s%N) - start) / 1000000))
}
within() {	# what limit_ms
	[ "$elapsed_ms" -lt "$2" ] || fail "$1 took $elapsed_ms ms (limit $2 ms): $out"
	echo "ok - $1 ($elapsed_ms ms)"
}
expect_in_out() {	# what pattern
	grep -Eq "$2" <<<"$out" || fail "$1: output did not match /$2/: $out"
}

coord "DROP TABLE IF EXISTS hn_rows;
	CREATE TABLE hn_rows (k int PRIMARY KEY, v int NOT NULL);
	SELECT create_distributed_table('hn_rows', 'k', shard_count => 8);
	INSERT INTO hn_rows SELECT g, 0 FROM generate_series(1, 40) g;" >/dev/null

# no periodic recovery by the daemon until part 2: a round of it that met the
# silent node would hold the lock recovery takes on shardext.transaction for
# its own connect_timeout (5 s), and the timed recovery call below would wait
# for it (CI saw 5.2 s once)
coord "ALTER SYSTEM SET shardext.recovery_interval = -1" >/dev/null
coord "SELECT pg_reload_conf()" >/dev/null
# the silent node, registered as a node (shardext_add_node would refuse it)
fake=$(coord "INSERT INTO shardext.node (host, port) VALUES ('127.0.0.1', $port) RETURNING nodeid")

# --- 1. admin functions with the silent node
timed psql_at "$COORDINATOR_PORT" -c "SET shardext.connect_timeout = 1500" \
	-c "SELECT node_id = $fake, success, result FROM shardext_run_on_nodes('SELECT 1') ORDER BY node_id"
expect_eq "run_on_nodes: the good nodes answer, the silent one fails" \
	"f|t|1 f|t|1 t|f|could not connect to node 127.0.0.1:$port" "$(echo $out)"
within "run_on_nodes ends within connect_timeout" 5000

timed psql_at "$COORDINATOR_PORT" -c "SET shardext.connect_timeout = 60000" -c "SET statement_timeout = 800" \
	-c "SELECT count(*) FROM shardext_run_on_nodes('SELECT 1')"
expect_in_out "run_on_nodes is cancellable" "canceling statement due to statement timeout"
within "statement_timeout cancels run_on_nodes" 4000

prefix=$(coord "SELECT 'shardext_' || system_identifier || '_' ||
	(SELECT oid FROM pg_database WHERE datname = current_database()) || '_' FROM pg_control_system()")
# an in-doubt prepared transaction of a coordinator transaction that never committed
worker1 "BEGIN; CREATE TABLE hn_probe_1 (); PREPARE TRANSACTION '${prefix}999999999001_1'" >/dev/null
timed psql_at "$COORDINATOR_PORT" -c "SET shardext.connect_timeout = 1500" \
	-c "SELECT shardext_recover_prepared_transactions()"
expect_in_out "recovery warns about the silent node" \
	"could not connect to node 127.0.0.1:$port to recover prepared transactions"
expect_eq "recovery resolves the good nodes' transactions" "1" "$(tail -1 <<<"$out")"
within "recovery ends within connect_timeout" 5000
expect_eq "the prepared transaction is gone" "0" \
	"$(worker1 "SELECT count(*) FROM pg_prepared_xacts WHERE gid = '${prefix}999999999001_1'")"

timed psql_at "$COORDINATOR_PORT" -c "SET shardext.connect_timeout = 60000" -c "SET statement_timeout = 800" \
	-c "SELECT shardext_recover_prepared_transactions()"
expect_in_out "recovery is cancellable" "canceling statement due to statement timeout"
within "statement_timeout cancels recovery" 4000

timed psql_at "$COORDINATOR_PORT" -c "SET shardext.connect_timeout = 60000" -c "SET statement_timeout = 800" \
	-c "SELECT shardext_remove_node('127.0.0.1', $port)"
expect_in_out "remove_node is cancellable" "canceling statement due to statement timeout"
within "statement_timeout cancels remove_node" 4000
expect_eq "the cancelled removal changed nothing" "1" \
	"$(coord "SELECT count(*) FROM shardext.node WHERE nodeid = $fake")"

# --- 2. the maintenance daemon with the silent node registered
coord "ALTER SYSTEM SET shardext.connect_timeout = 1500" >/dev/null
coord "ALTER SYSTEM SET shardext.recovery_interval = '1s'" >/dev/null
coord "SELECT pg_reload_conf()" >/dev/null
worker2 "BEGIN; CREATE TABLE hn_probe_2 (); PREPARE TRANSACTION '${prefix}999999999002_1'" >/dev/null
wait_sql "the daemon recovers on the good nodes" 30 "$WORKER_2_PORT" \
	"SELECT count(*) = 0 FROM pg_prepared_xacts WHERE gid = '${prefix}999999999002_1'"
echo "ok - the daemon recovers on the good nodes"

key_on() {	# port
	coord "SELECT k FROM generate_series(1, 40) k
		   WHERE (SELECT node_port FROM shardext.shards
				  WHERE shard_id = shardext_shard_for_value('hn_rows', k::text)) = $1
		   ORDER BY k LIMIT 1"
}
K1=$(key_on "$WORKER_1_PORT")
K2=$(key_on "$WORKER_2_PORT")
# the deadlock: a holds K1 and waits for K2 (on worker 2), b holds K2 and asks for K1
start=$(date +%s%N)
session_start a
session_start b
session_run a "BEGIN; UPDATE hn_rows SET v = v + 1 WHERE k = $K1;"
session_run b "BEGIN; UPDATE hn_rows SET v = v + 10 WHERE k = $K2;"
session_send a "UPDATE hn_rows SET v = v + 1 WHERE k = $K2; COMMIT;"
wait_sql "a waits for K2 on worker 2" 30 "$WORKER_2_PORT" \
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
session_send b "UPDATE hn_rows SET v = v + 10 WHERE k = $K1; COMMIT;"
session_end a
session_end b
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
out=$(session_output a; session_output b)
expect_in_out "one transaction of the deadlock is cancelled" "canceling the transaction to resolve a distributed deadlock"
expect_eq "the other commits" "t" \
	"$(coord "SELECT (SELECT array_agg(v ORDER BY k) FROM hn_rows WHERE k IN ($K1, $K2))
		IN ('{1,1}', '{10,10}')")"
within "the daemon resolves a distributed deadlock with the silent node registered" 15000

# --- 3. a worker backend that stops answering in the middle of a query
# stop.sh, run by the session of run_stopped: notes the session's backend
# (coord_pid), then stops its connections' backends on worker 2
cat >"$TMP/stop.sh" <<SH
#!/usr/bin/env bash
echo "\$COORD_PID" >"$TMP/coord_pid"
pid=\$("$BINDIR/psql" -X -At -h 127.0.0.1 -U postgres -p $WORKER_2_PORT -d $DB \
	-c "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'shardext\\\\_%\\\\_\$COORD_PID'")
echo "\$pid" >"$TMP/stopped_pid"
echo \$pid >>"$TMP/stopped"
kill -STOP \$pid
SH
chmod +x "$TMP/stop.sh"
# run_stopped CANCEL-SQL: a session whose worker 2 backend stops, then the
# query; a statement that nothing cancels ends after 60 s (and fails the
# test), and psql itself after 120 s
run_stopped() {
	rm -f "$TMP/t0" "$TMP/t1" "$TMP/coord_pid" "$TMP/stopped_pid"
	PGOPTIONS="-c statement_timeout=60s" timeout 120 \
		"$BINDIR/psql" -X -At -h 127.0.0.1 -U postgres -p "$COORDINATOR_PORT" -d "$DB" <<SQL 2>&1
SELECT count(*) FROM hn_rows;
SELECT pg_backend_pid() AS coord_pid \gset
\setenv COORD_PID :coord_pid
\! $TMP/stop.sh
$1
\! date +%s%N >$TMP/t0
SELECT count(*) FROM hn_rows;
\! date +%s%N >$TMP/t1
\! kill -CONT \$(cat $TMP/stopped_pid)
RESET statement_timeout;
SELECT count(*) FROM hn_rows;
SQL
}
out=$(run_stopped "SET statement_timeout = '1s';")
resume_stopped
elapsed_ms=$((($(cat "$TMP/t1") - $(cat "$TMP/t0")) / 1000000))
expect_in_out "a stopped worker backend: statement_timeout" "canceling statement due to statement timeout"
within "statement_timeout ends a query whose worker backend stopped" 10000
expect_eq "the session goes on afterwards" "40" "$(tail -1 <<<"$out")"

# the same with pg_cancel_backend from another session, once the second
# query waits for the stopped backend: the first query of run_stopped has the
# same text and waits on its nodes too, so the canceller starts only after
# the files of the previous run are gone and then watches the session's
# backend from t0 on
rm -f "$TMP/t0" "$TMP/t1" "$TMP/coord_pid"
(
	wait_for "the query started" 30 test -s "$TMP/t0"
	coord_pid=$(cat "$TMP/coord_pid")
	wait_sql "the query waits for the stopped worker backend" 30 "$COORDINATOR_PORT" \
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = $coord_pid
			AND query = 'SELECT count(*) FROM hn_rows;' AND state = 'active' AND wait_event_type = 'Extension'"
	expect_eq "the query is cancelled" "t" "$(coord "SELECT pg_cancel_backend($coord_pid)")" >/dev/null
) &
canceller=$!
out=$(run_stopped "")
wait $canceller || fail "the canceller failed (see above); the query printed: $out"
canceller=""
resume_stopped
elapsed_ms=$((($(cat "$TMP/t1") - $(cat "$TMP/t0")) / 1000000))
expect_in_out "a stopped worker backend: pg_cancel_backend" "canceling statement due to user request"
within "pg_cancel_backend ends a query whose worker backend stopped" 12000
expect_eq "the session goes on after the cancel" "40" "$(tail -1 <<<"$out")"

# --- 4. the worker's postmaster stopped as well: the cancel request is bounded too
postmaster=$(head -1 "$SHARDEXT_CLUSTER_DIR/worker2/postmaster.pid")
cat >>"$TMP/stop.sh" <<SH
echo $postmaster >>"$TMP/stopped"
kill -STOP $postmaster
SH
out=$(run_stopped "SET statement_timeout = '1s'; SET shardext.connect_timeout = 1500;" | sed 's/^/  /')
resume_stopped
elapsed_ms=$((($(cat "$TMP/t1") - $(cat "$TMP/t0")) / 1000000))
expect_in_out "a stopped worker: statement_timeout" "canceling statement due to statement timeout"
within "statement_timeout ends a query on a stopped worker" 12000

# --- the silent node goes away within connect_timeout
timed psql_at "$COORDINATOR_PORT" -c "SET shardext.connect_timeout = 1500" \
	-c "SELECT shardext_remove_node('127.0.0.1', $port)"
within "remove_node of the silent node ends within connect_timeout" 5000
expect_eq "the silent node is removed" "0" "$(coord "SELECT count(*) FROM shardext.node WHERE nodeid = $fake")"
fake=""
