#!/usr/bin/env bash
# Many clients against workers with few connection slots: workers with
# max_connections = 60, the coordinator with 300.  200 pgbench clients run a
# mix of point selects, point updates and multi-shard aggregates through the
# shared per-node connection pool (shardext.max_shared_pool_size, derived
# from the workers' max_connections): no client fails, throughput stays
# within 20% of the same mix with 50 clients, no worker ever holds more
# connections from the coordinator than the pool allows, and afterwards the
# shared count is back to what sessions keep cached (the connections of a
# multi-shard query while the pool can spare them).
source "$(dirname "$0")/lib/common.sh"

PGBENCH="$BINDIR/pgbench"
TMP=$(mktemp -d)
chmod 755 "$TMP"
sampler=""

set_worker_connections() {	# value|default
	local w
	for w in 1 2; do
		if [ "$1" = default ]; then
			psql_at $((SHARDEXT_PORT + w)) -c "ALTER SYSTEM RESET max_connections" >/dev/null
		else
			psql_at $((SHARDEXT_PORT + w)) -c "ALTER SYSTEM SET max_connections = $1" >/dev/null
		fi
		cluster stop-node "worker$w" >/dev/null
		cluster start-node "worker$w" >/dev/null
	done
}
cleanup() {
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null
	set_worker_connections default
	coord "DROP TABLE IF EXISTS mc_t" >/dev/null 2>&1
	rm -rf "$TMP"
}
trap 'sessions_end; cleanup' EXIT

set_worker_connections 60
expect_eq "workers have 60 connection slots" "60|60" \
	"$(psql_at "$WORKER_1_PORT" -c "SHOW max_connections")|$(psql_at "$WORKER_2_PORT" -c "SHOW max_connections")"

coord "DROP TABLE IF EXISTS mc_t;
	CREATE TABLE mc_t (id int PRIMARY KEY, v int NOT NULL);
	INSERT INTO mc_t SELECT g, 0 FROM generate_series(1, 10000) g;
	SELECT create_distributed_table('mc_t', 'id');" >/dev/null

cat >"$TMP/select.sql" <<'SQL'
\set id random(1, 10000)
SELECT v FROM mc_t WHERE id = :id;
SQL
cat >"$TMP/update.sql" <<'SQL'
\set id random(1, 10000)
UPDATE mc_t SET v = v + 1 WHERE id = :id;
SQL
cat >"$TMP/agg.sql" <<'SQL'
SELECT count(*), sum(v) FROM mc_t;
SQL

# run_mix CLIENTS SECONDS: sets tps and failed; fails the test if a client aborted
run_mix() {
	local out rc
	out=$("$PGBENCH" -n -c "$1" -j 4 -T "$2" -f "$TMP/select.sql@6" -f "$TMP/update.sql@3" \
		-f "$TMP/agg.sql@1" -h 127.0.0.1 -p "$COORDINATOR_PORT" -U postgres "$DB" 2>&1)
	rc=$?
	if [ $rc != 0 ] || grep -q "aborted" <<<"$out"; then
		grep -v "^ - \|^SQL script\|^progress" <<<"$out" | head -30 >&2
		fail "pgbench with $1 clients: a client failed (rc $rc)"
	fi
	tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
}

# the most connections each worker had from coordinator sessions, sampled
# (the maintenance daemons' own connections are counted but never wait, so
# they are left out)
daemons=$(coord "SELECT coalesce(string_agg(quote_literal('shardext_' || s.system_identifier || '_'
		|| a.datid || '_' || a.pid), ','), '''''')
	FROM pg_stat_activity a, pg_control_system() s
	WHERE a.backend_type = 'shardext maintenance daemon'")
sample_connections() {
	while :; do
		for port in $WORKER_1_PORT $WORKER_2_PORT; do
			psql_at "$port" -c "SELECT count(*) FROM pg_stat_activity
				WHERE application_name LIKE 'shardext\_%' AND application_name NOT IN ($daemons)
				AND backend_type = 'client backend'" 2>/dev/null | sed "s/^/$port /"
		done
		sleep 0.3	# the sampling interval: the samples watch the counts over time
	done >"$TMP/samples"
}

run_mix 50 8
tps50=$tps failed50=$failed
echo "50 clients: $tps50 tps, $failed50 failed"
expect_eq "50 clients: no failed transaction" "0" "${failed50:-0}"

waits_before=$(coord "SELECT coalesce(sum(waits), 0) FROM shardext.connection_stats WHERE node_id IS NOT NULL")
sample_connections &
sampler=$!
run_mix 200 15
tps200=$tps failed200=$failed
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null
sampler=""
echo "200 clients: $tps200 tps, $failed200 failed"
expect_eq "200 clients: no failed transaction" "0" "${failed200:-0}"

limit=$(coord "SELECT min(max_connections) FROM shardext.connection_stats WHERE node_id IS NOT NULL")
echo "pool limit per worker: $limit"
[ "$limit" -le 57 ] || fail "the automatic pool size $limit does not fit the workers' 57 usable slots"
most=$(awk '{ if ($2 > m) m = $2 } END { print m + 0 }' "$TMP/samples")
echo "most connections a worker had from coordinator sessions: $most"
[ "$most" -le "$limit" ] || fail "a worker had $most connections, more than the pool's $limit"
waits=$(coord "SELECT coalesce(sum(waits), 0) - $waits_before FROM shardext.connection_stats WHERE node_id IS NOT NULL")
[ "$waits" -gt 0 ] || fail "no session ever waited for a connection: the pool did not limit anything"
echo "ok - at most $most connections per worker (limit $limit); sessions waited $waits times"
expect_eq "no wait timed out" "0" \
	"$(coord "SELECT coalesce(sum(wait_timeouts), 0) FROM shardext.connection_stats WHERE node_id IS NOT NULL")"

# the throughput drifts while the runs update the table (and the machine
# may be shared): each 200-client run is compared with the mean of the
# 50-client runs right before and right after it, which cancels a steady
# drift; when the ratio misses, another 200-client run follows, compared
# with the last 50-client run and a new one (up to two more), and the best
# ratio counts
bracket() {	# RUN: a 50-client run after 200-client run RUN; sets tps50 and ratio
	run_mix 50 8
	echo "50 clients: $tps tps, $failed failed"
	expect_eq "50 clients, after run $1: no failed transaction" "0" "${failed:-0}"
	ratio=$(awk -v a="$tps200" -v b="$tps50" -v c="$tps" -v r="${ratio:-0}" \
		'BEGIN { x = 2 * a / (b + c); printf "%.2f", (x > r ? x : r) }')
	tps50=$tps
}
ratio=
bracket 1
for attempt in 2 3; do
	awk -v r="$ratio" 'BEGIN { exit !(r < 0.8) }' || break
	echo "ratio $ratio so far; measuring 200 clients again (run $attempt)"
	run_mix 200 15
	tps200=$tps
	echo "200 clients: $tps tps, $failed failed"
	expect_eq "200 clients, run $attempt: no failed transaction" "0" "${failed:-0}"
	bracket "$attempt"
done
awk -v r="$ratio" 'BEGIN { exit !(r >= 0.8) }' ||
	fail "200 clients: less than 80% of the throughput of 50 clients in every run (best ${ratio}x)"
echo "ok - 200 clients: ${ratio}x the 50-client throughput"

# the count goes back to what sessions keep: nothing once they are gone ...
count_now() {
	coord "SELECT coalesce(sum(connections), 0) FROM shardext.connection_stats WHERE node_id IS NOT NULL"
}
count_is() { [ "$(count_now 2>/dev/null)" = "$1" ]; }
wait_for "all sessions gone: no connection counted" 15 count_is 0
echo "ok - all sessions gone: no connection counted"

# ... and, with the pool nearly empty, a session that ran a multi-shard
# query keeps the connections it used: one per node
# (shardext.max_cached_connections_per_node) and more, up to
# shardext.max_connections_per_node (4), while the pool can spare them
cached_per_node() {
	cached=$(psql_at "$COORDINATOR_PORT" -c "SET shardext.executor_slow_start_interval = 0" \
		-c "SELECT count(*) FROM mc_t" \
		-c "SELECT bool_and(session_connections BETWEEN 1 AND 4) AND max(session_connections) > 1
			FROM shardext.connection_stats WHERE node_id IS NOT NULL" | tail -1)
	[ "$cached" = "t" ]
}
wait_for "a session keeps the connections of its multi-shard query while the pool can spare them" 10 cached_per_node
echo "ok - a session keeps the connections of its multi-shard query while the pool can spare them"
expect_eq "rows all there" "10000" "$(coord "SELECT count(*) FROM mc_t")"

# a session that ends with FATAL (pg_terminate_backend) gives its slots back
holder() {	# an idle session that keeps its cached connections
	session_start holder
	session_run holder "SELECT count(*) FROM mc_t \\g /dev/null"
	pid=$(session_backend holder)
	[ -n "$pid" ] || fail "the holding session did not start"
}
count_between() { local n; n=$(count_now 2>/dev/null); [ -n "$n" ] && [ "$n" -ge "$1" ] && [ "$n" -le "$2" ]; }
holder
wait_for "the idle session holds its connections, at least one per node" 5 count_between 2 8
echo "ok - the idle session holds its connections, at least one per node"
coord "SELECT pg_terminate_backend($pid)" >/dev/null
session_end holder 2>/dev/null
wait_for "a terminated session's slots are given back" 5 count_is 0
echo "ok - a terminated session's slots are given back"

# a crashed backend: the postmaster resets shared memory, and with it the counts
holder
kill -9 "$pid"
session_end holder 2>/dev/null
wait_coordinator
wait_for "after a backend crash, no slot is left counted" 10 count_is 0
expect_eq "after a backend crash, no slot is left counted" "0" "$(count_now)"
