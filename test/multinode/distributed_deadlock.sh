#!/usr/bin/env bash
# Distributed deadlock detection with real sessions:
#  1. two transactions update the same two rows, on different nodes, in
#     opposite order: no server sees a cycle; the maintenance daemon cancels
#     one transaction (40P01, the detail names both nodes) within a couple
#     of seconds, the other commits;
#  2. a ring of three transactions over both nodes: exactly one is
#     cancelled;
#  3. the same two rows on one node: the worker's own detector resolves it,
#     shardext does not cancel a second transaction;
#  4. one transaction waits for a lock on the coordinator, the other for a
#     row on a node: the one that waits for the node is cancelled, although
#     it is the older one (the other waits where no flag is checked);
#  5. with shardext.distributed_deadlock_timeout = -1 nothing is detected:
#     only statement_timeout ends the deadlock.
source "$(dirname "$0")/lib/common.sh"
TMP=$(mktemp -d /tmp/distributed_deadlock.XXXXXX)
trap 'rm -rf "$TMP"; coord "ALTER SYSTEM RESET shardext.distributed_deadlock_timeout" >/dev/null 2>&1; coord "SELECT pg_reload_conf()" >/dev/null 2>&1' EXIT

coord "DROP TABLE IF EXISTS dl_rows, dl_local;
	   CREATE TABLE dl_rows (k int PRIMARY KEY, v int NOT NULL);
	   SELECT create_distributed_table('dl_rows', 'k', shard_count => 8);
	   INSERT INTO dl_rows SELECT g, 0 FROM generate_series(1, 40) g;
	   CREATE TABLE dl_local (id int);" >/dev/null

# keys on the first and on the second worker
key_on() {	# port [n-th]
	coord "SELECT k FROM generate_series(1, 40) k
		   WHERE (SELECT node_port FROM shardext.shards
				  WHERE shard_id = shardext_shard_for_value('dl_rows', k::text)) = $1
		   ORDER BY k OFFSET ${2:-0} LIMIT 1"
}
K1=$(key_on "$WORKER_1_PORT")
K3=$(key_on "$WORKER_1_PORT" 1)
K2=$(key_on "$WORKER_2_PORT")
[ -n "$K1" ] && [ -n "$K2" ] && [ -n "$K3" ] || fail "no keys on both workers"

# the daemon of this database must be running (it starts with the extension)
for _ in $(seq 1 50); do
	[ "$(coord "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'shardext maintenance daemon'
				AND datname = current_database()")" = 1 ] && break
	sleep 0.2
done

# session NAME SQL...: one psql session running the statements in order, in
# the background; output (with SQLSTATEs) in $TMP/NAME
session() {
	local name=$1
	shift
	local args=(-c '\set VERBOSITY verbose')
	for sql in "$@"; do args+=(-c "$sql"); done
	timeout 60 "$BINDIR/psql" -X -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres \
		-p "$COORDINATOR_PORT" -d "$DB" "${args[@]}" >"$TMP/$name" 2>&1 &
}
committed() { grep -q '^COMMIT$' "$TMP/$1"; }
cancelled() { grep -q '40P01: canceling the transaction to resolve a distributed deadlock' "$TMP/$1"; }
reset_rows() { coord "UPDATE dl_rows SET v = 0" >/dev/null; }

# --- 1. two transactions, two nodes, opposite order
reset_rows
start=$(date +%s%N)
session a "BEGIN" "UPDATE dl_rows SET v = v + 1 WHERE k = $K1" "SELECT pg_sleep(1)" \
	"UPDATE dl_rows SET v = v + 1 WHERE k = $K2" "COMMIT"
session b "BEGIN" "UPDATE dl_rows SET v = v + 10 WHERE k = $K2" "SELECT pg_sleep(1)" \
	"UPDATE dl_rows SET v = v + 10 WHERE k = $K1" "COMMIT"
wait
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
cat "$TMP/a" "$TMP/b"
if cancelled a && committed b; then winner=10
elif cancelled b && committed a; then winner=1
else fail "expected one transaction cancelled and one committed"; fi
grep -h -A1 '40P01' "$TMP/a" "$TMP/b" | grep -q "on node 127.0.0.1:$WORKER_1_PORT" &&
	grep -h -A1 '40P01' "$TMP/a" "$TMP/b" | grep -q "on node 127.0.0.1:$WORKER_2_PORT" ||
	fail "the detail does not name both nodes"
[ "$elapsed_ms" -lt 6000 ] || fail "the deadlock took ${elapsed_ms} ms to resolve"
echo "ok - distributed deadlock resolved in ${elapsed_ms} ms (1 s of it sleeping)"
expect_eq "only the committed transaction's updates remain" "$winner|$winner" \
	"$(coord "SELECT string_agg(v::text, '|') FROM dl_rows WHERE k IN ($K1, $K2)")"

# --- 2. a ring of three transactions
reset_rows
session a "BEGIN" "UPDATE dl_rows SET v = v + 1 WHERE k = $K1" "SELECT pg_sleep(1)" \
	"UPDATE dl_rows SET v = v + 1 WHERE k = $K2" "COMMIT"
session b "BEGIN" "UPDATE dl_rows SET v = v + 1 WHERE k = $K2" "SELECT pg_sleep(1)" \
	"UPDATE dl_rows SET v = v + 1 WHERE k = $K3" "COMMIT"
session c "BEGIN" "UPDATE dl_rows SET v = v + 1 WHERE k = $K3" "SELECT pg_sleep(1)" \
	"UPDATE dl_rows SET v = v + 1 WHERE k = $K1" "COMMIT"
wait
cancelled_count=0
for s in a b c; do
	if cancelled $s; then cancelled_count=$((cancelled_count + 1))
	elif ! committed $s; then cat "$TMP/$s"; fail "session $s neither committed nor was cancelled"; fi
done
expect_eq "one transaction of the ring cancelled" 1 "$cancelled_count"
expect_eq "the two others committed all their updates" 4 \
	"$(coord "SELECT sum(v) FROM dl_rows WHERE k IN ($K1, $K2, $K3)")"

# --- 3. both rows on one node: the worker's detector, not ours
reset_rows
session a "BEGIN" "UPDATE dl_rows SET v = v + 1 WHERE k = $K1" "SELECT pg_sleep(1)" \
	"UPDATE dl_rows SET v = v + 1 WHERE k = $K3" "COMMIT"
session b "BEGIN" "UPDATE dl_rows SET v = v + 1 WHERE k = $K3" "SELECT pg_sleep(1)" \
	"UPDATE dl_rows SET v = v + 1 WHERE k = $K1" "COMMIT"
wait
cat "$TMP/a" "$TMP/b" | grep -E 'ERROR|COMMIT'
expect_eq "the worker's deadlock detector cancelled one" 1 \
	"$(cat "$TMP/a" "$TMP/b" | grep -c '40P01: deadlock detected')"
expect_eq "shardext cancelled none" 0 \
	"$(cat "$TMP/a" "$TMP/b" | grep -c 'distributed deadlock')"
expect_eq "the other committed" 1 "$(cat "$TMP/a" "$TMP/b" | grep -c '^COMMIT$')"

# --- 4. a lock on the coordinator and a row on a node
reset_rows
session old "BEGIN" "LOCK TABLE dl_local IN EXCLUSIVE MODE" "SELECT pg_sleep(1)" \
	"UPDATE dl_rows SET v = v + 1 WHERE k = $K1" "COMMIT"
sleep 0.3
session young "BEGIN" "UPDATE dl_rows SET v = v + 1 WHERE k = $K1" "SELECT pg_sleep(1)" \
	"LOCK TABLE dl_local IN EXCLUSIVE MODE" "COMMIT"
wait
cat "$TMP/old" "$TMP/young" | grep -E 'ERROR|COMMIT'
cancelled old || fail "the transaction that waits for the node was not cancelled"
committed young || fail "the transaction that waits on the coordinator did not commit"
echo "ok - the transaction waiting for a node was cancelled, the one waiting on the coordinator committed"

# --- 5. detection off: the deadlock stays until statement_timeout
coord "ALTER SYSTEM SET shardext.distributed_deadlock_timeout = -1" >/dev/null
coord "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
reset_rows
start=$(date +%s%N)
session a "SET statement_timeout = '3s'" "BEGIN" "UPDATE dl_rows SET v = v + 1 WHERE k = $K1" \
	"SELECT pg_sleep(1)" "UPDATE dl_rows SET v = v + 1 WHERE k = $K2" "COMMIT"
session b "SET statement_timeout = '3s'" "BEGIN" "UPDATE dl_rows SET v = v + 1 WHERE k = $K2" \
	"SELECT pg_sleep(1)" "UPDATE dl_rows SET v = v + 1 WHERE k = $K1" "COMMIT"
wait
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
cat "$TMP/a" "$TMP/b" | grep -E 'ERROR|COMMIT'
expect_eq "nothing cancelled by the detector when it is off" 0 \
	"$(cat "$TMP/a" "$TMP/b" | grep -c 'distributed deadlock')"
[ "$(cat "$TMP/a" "$TMP/b" | grep -c 'canceling statement due to statement timeout')" -ge 1 ] ||
	fail "statement_timeout did not end the deadlock"
[ "$elapsed_ms" -ge 3500 ] || fail "the deadlock ended after ${elapsed_ms} ms, before statement_timeout"
echo "ok - with detection off only statement_timeout ended it (${elapsed_ms} ms)"
coord "ALTER SYSTEM RESET shardext.distributed_deadlock_timeout" >/dev/null
coord "SELECT pg_reload_conf()" >/dev/null

expect_eq "no prepared transactions left" "0|0" \
	"$(worker1 "SELECT count(*) FROM pg_prepared_xacts")|$(worker2 "SELECT count(*) FROM pg_prepared_xacts")"
coord "DROP TABLE dl_rows, dl_local" >/dev/null
