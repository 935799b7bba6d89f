#!/usr/bin/env bash
# Fencing across a network partition (issue 24): the coordinator reaches
# worker 2 through a TCP proxy (tcp_proxy.py), worker 2 has a synchronous
# standby (without hot_standby_feedback) that the coordinator reaches
# directly, shardext.auto_failover is on, and money transfers run.
#  1. the proxy stops (the path to worker 2 is cut, worker 2 keeps running):
#     the daemon fails worker 2 over to its standby; the books balance and
#     nothing stays prepared on the new primary;
#  2. the proxy comes back: the old primary, reachable again and still
#     accepting writes, is reported (shardext.nodes: fenced;
#     shardext_check_cluster: fencing error) and not used -- its data does
#     not change while transfers go on;
#  3. an address that reaches the old primary (a virtual IP that moved back,
#     simulated with a second proxy and a catalog edit) is refused at
#     connection time, SQLSTATE 08004, for reads and writes;
#  4. shardext_update_node() of a standby, and promoting the old primary's
#     record, are refused.
TEST_DB=failover_partition
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/failover.sh"
R2_PORT=$((SHARDEXT_PORT + 12))
PROXY_PORT=$((SHARDEXT_PORT + 20))
PROXY2_PORT=$((SHARDEXT_PORT + 21))
CLOG="$SHARDEXT_CLUSTER_DIR/coordinator.log"
export SHARDEXT_REPLICA_CONF="hot_standby_feedback = off"
PROXY_PID=
PROXY2_PID=

start_proxy() {	# listen port, target port: sets LAST_PROXY_PID
	python3 "$ROOT/test/multinode/lib/tcp_proxy.py" "$1" "$2" &
	LAST_PROXY_PID=$!
	wait_for "the proxy on $1 forwards to $2" 5 "$BINDIR/pg_isready" -q -h 127.0.0.1 -p "$1"
}
cleanup() {
	[ -n "${TRANSFERS_PID:-}" ] && kill "$TRANSFERS_PID" 2>/dev/null
	[ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null
	[ -n "$PROXY2_PID" ] && kill "$PROXY2_PID" 2>/dev/null
	psql_at "$COORDINATOR_PORT" -d postgres -c "ALTER SYSTEM RESET shardext.auto_failover" \
		-c "SELECT pg_reload_conf()" >/dev/null 2>&1
	cluster start-node worker2 >/dev/null 2>&1
	psql_at "$WORKER_2_PORT" -d postgres -c "ALTER SYSTEM RESET synchronous_standby_names" \
		-c "SELECT pg_reload_conf()" >/dev/null 2>&1
	cluster drop-replica worker2 >/dev/null 2>&1
	drop_test_database "$WORKER_1_PORT" "$WORKER_2_PORT"
	[ -n "${TMP:-}" ] && rm -rf "$TMP"
}
trap cleanup EXIT
cleanup
TMP=$(mktemp -d /tmp/failover_partition.XXXXXX)

start_proxy "$PROXY_PORT" "$WORKER_2_PORT"
PROXY_PID=$LAST_PROXY_PID
bank_database "$TEST_DB" "$WORKER_1_PORT" "$PROXY_PORT"
W2_ID=$(node_id_of_port "$PROXY_PORT")
FIRST=$(accounts_on "$WORKER_1_PORT")
SECOND=$(accounts_on "$PROXY_PORT")
[ -n "$FIRST" ] && [ -n "$SECOND" ] || fail "accounts on both workers"
cluster add-replica worker2 >/dev/null || fail "could not make a standby of worker 2"
psql_at "$WORKER_2_PORT" -d postgres -c "ALTER SYSTEM SET synchronous_standby_names = 'replica2'" \
	-c "SELECT pg_reload_conf()" >/dev/null
R2_ID=$(coord "SELECT shardext_add_replica('127.0.0.1', $R2_PORT, '127.0.0.1', $PROXY_PORT)")
wait_until "replica 2 is a synchronous standby" 30 \
	"SELECT count(*) = 1 FROM pg_stat_replication WHERE application_name = 'replica2' AND sync_state = 'sync'" \
	"$WORKER_2_PORT"
psql_at "$COORDINATOR_PORT" -d postgres -c "ALTER SYSTEM SET shardext.auto_failover = on" \
	-c "SELECT pg_reload_conf()" >/dev/null
wait_for_setting "$COORDINATOR_PORT" shardext.auto_failover on
wait_until "the daemon probes the workers" 20 \
	"SELECT count(*) = 2 FROM shardext.nodes WHERE role = 'primary' AND health = 'up'"

# --- 1. the path to worker 2 is cut: failover ------------------------------
start_transfers "$TMP/cut" 4 "$FIRST" "$SECOND"
wait_until "transfers run" 60 "SELECT count(*) > 200 FROM $BANK_LEDGER"
from=$(log_lines "$CLOG")
kill "$PROXY_PID"
wait "$PROXY_PID" 2>/dev/null
PROXY_PID=
expect_eq "worker 2 itself keeps running" f "$(psql_at "$WORKER_2_PORT" -c "SELECT pg_is_in_recovery()")"
wait_until "node $W2_ID runs on its replica" 30 "SELECT node_port = $R2_PORT FROM shardext.nodes WHERE node_id = $W2_ID"
wait_for_log "$CLOG" "shardext: node $W2_ID failed over from 127.0.0.1:$PROXY_PORT to 127.0.0.1:$R2_PORT" 10 "$from"
echo "ok - the daemon failed the cut-off worker over to its standby"
wait_until "transfers resume" 30 \
	"SELECT count(*) > 100 FROM $BANK_LEDGER WHERE id % 1000000000 > $(coord "SELECT coalesce(max(id % 1000000000), 0) FROM $BANK_LEDGER")"

# --- 2. the path comes back: the old primary is reported, not used ---------
old_rows() {	# every table of the old primary's copy of the bank: rows and a checksum
	local counts
	counts=$(psql_at "$WORKER_2_PORT" -c "SELECT string_agg(format('SELECT %L || ''='' || count(*) || '':''
			|| coalesce(sum(hashtext(t::text)), 0) AS r FROM %s t', c.relname, c.oid::regclass),
			' UNION ALL ' ORDER BY c.relname)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind = 'r'")
	[ -n "$counts" ] || return 0
	psql_at "$WORKER_2_PORT" -c "SELECT string_agg(r, ',' ORDER BY r COLLATE \"C\") FROM ($counts) s"
}
start_proxy "$PROXY_PORT" "$WORKER_2_PORT"
PROXY_PID=$LAST_PROXY_PID
before=$(old_rows)
[ "$(tr ',' '\n' <<<"$before" | grep -c '=[1-9][0-9]*:')" -ge 4 ] ||
	fail "the old primary's shards could not be read: $before"
wait_until "the daemon reports the old primary as fenced" 20 \
	"SELECT health = 'fenced' AND health_detail LIKE '%old primary%accepts writes%' FROM shardext.nodes WHERE node_id = $R2_ID"
echo "ok - shardext.nodes reports the old primary: $(coord "SELECT health || ': ' || health_detail FROM shardext.nodes WHERE node_id = $R2_ID")"
expect_eq "shardext_check_cluster() says it needs a rebuild" "error" \
	"$(coord "SELECT status FROM shardext_check_cluster() WHERE node_id = $R2_ID AND check_name = 'fencing'")"
# transfers go on: a few hundred more, on both nodes of the bank
count=$(coord "SELECT count(*) FROM $BANK_LEDGER")
wait_until "transfers go on" 30 "SELECT count(*) > $count + 300 FROM $BANK_LEDGER"
stop_transfers "$TMP/cut"
after=$(old_rows)
expect_eq "the old primary's data did not change while transfers went on" "$before" "$after"
check_books "partition" "$TMP/cut"
wait_until "nothing stays prepared on the new primary" 30 \
	"SELECT count(*) = 0 FROM pg_prepared_xacts WHERE database = '$TEST_DB'" "$R2_PORT"
echo "ok - nothing stays prepared on the new primary"

# --- 3. an address that reaches the old primary is refused -----------------
start_proxy "$PROXY2_PORT" "$WORKER_2_PORT"
PROXY2_PID=$LAST_PROXY_PID
psql_at "$COORDINATOR_PORT" -c "UPDATE shardext.node SET port = $PROXY2_PORT WHERE nodeid = $W2_ID" >/dev/null
account2=${SECOND%%,*}
out=$(psql_at "$COORDINATOR_PORT" -v VERBOSITY=verbose -c "SELECT balance FROM $BANK_ACCOUNTS WHERE id = $account2" 2>&1)
grep -q "08004" <<<"$out" && grep -q "It is an old primary that a failover replaced" <<<"$out" ||
	fail "a read through an address that reaches the old primary was not refused: $out"
echo "ok - a read through an address that reaches the old primary is refused (08004)"
out=$(psql_at "$COORDINATOR_PORT" -U "$BANK_USER" -v VERBOSITY=verbose \
	-c "UPDATE $BANK_ACCOUNTS SET balance = balance + 1 WHERE id = $account2" 2>&1)
grep -q "08004" <<<"$out" || fail "a write through an address that reaches the old primary was not refused: $out"
echo "ok - so is a write"
psql_at "$COORDINATOR_PORT" -c "UPDATE shardext.node SET port = $R2_PORT WHERE nodeid = $W2_ID" >/dev/null
expect_eq "the old primary's data is still unchanged" "$before" "$(old_rows)"
check_books "after the refused write" "$TMP/cut"

# --- 4. bad input ----------------------------------------------------------
expect_error_like "promoting the old primary's record is refused" "is an old primary of node $W2_ID that a failover replaced" \
	coord "SELECT shardext_promote_replica('127.0.0.1', $PROXY_PORT)"
expect_error_like "pointing the node at the old primary is refused" "is an old primary of node $W2_ID" \
	coord "SELECT shardext_update_node($W2_ID, '127.0.0.1', $PROXY2_PORT)"
expect_eq "node $W2_ID still runs on the promoted standby" "$R2_PORT" \
	"$(coord "SELECT node_port FROM shardext.nodes WHERE node_id = $W2_ID")"
