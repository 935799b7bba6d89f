#!/usr/bin/env bash
# Interrupted shard moves and splits, each held at the pause point of a
# phase ("move: <phase>") while it is interrupted: cancelled at each phase
# (also while writes are paused for the cutover), the target's apply
# process killed, the target or the source stopped, the coordinator
# crashed.  After each,
# the source is authoritative and intact (same rows, same checksum), the
# nodes hold nothing the move created (once cleanup ran: right away, or by
# the maintenance daemon after a crash), and a retry succeeds.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/moves.sh"
trap 'sessions_end; cluster start-node worker1 >/dev/null 2>&1; cluster start-node worker2 >/dev/null 2>&1; cluster start-node coordinator >/dev/null 2>&1; moves_drop_database' EXIT

moves_database move_faults
coord "CREATE TABLE accounts (id bigint PRIMARY KEY, balance int NOT NULL, owner text);
	   CREATE INDEX accounts_owner_idx ON accounts (owner);
	   INSERT INTO accounts SELECT g, g % 1000, 'owner ' || (g % 97) FROM generate_series(1, 40000) g;
	   CREATE TABLE ledger (account_id bigint, amount int);
	   INSERT INTO ledger SELECT g % 40000 + 1, g FROM generate_series(1, 20000) g;
	   SET client_min_messages = warning;
	   SELECT create_distributed_table('accounts', 'id', shard_count => 4);
	   SELECT create_distributed_table('ledger', 'account_id', colocate_with => 'accounts');" >/dev/null
SHARD=$(coord "SELECT shard_id FROM shardext.shards WHERE logicalrelid = 'accounts'::regclass
	AND node_port = $WORKER_1_PORT ORDER BY hash_min LIMIT 1")
ACCOUNTS=$(table_state accounts)
LEDGER=$(table_state ledger)
W1=$(node_id_of_port "$WORKER_1_PORT")
W2=$(node_id_of_port "$WORKER_2_PORT")
LOG=$(mktemp)
expect_no_leftovers "before any move"

# the source holds the shard and every row, the move failed or was cancelled
check_source_kept() {
	local what=$1 source_port=$2
	expect_eq "$what: shard still on its source" "$source_port" "$(port_of_shard "$SHARD")"
	expect_eq "$what: rows of accounts intact" "$ACCOUNTS" "$(table_state accounts)"
	expect_eq "$what: rows of ledger intact" "$LEDGER" "$(table_state ledger)"
}

# cancel the move in each phase, while it is paused there
for phase in copying "building indexes" "catching up" verifying "cutting over" "writes paused"; do
	start_paused_move "$LOG" "$phase" "SELECT shardext_move_shard($SHARD, $W2)"
	coord "SELECT shardext_cancel_rebalance()" >/dev/null
	wait "$MOVE_PID" && fail "cancel at $phase: the move succeeded"
	pause_release
	grep -q "canceling statement due to user request" "$LOG" || fail "cancel at $phase: $(cat "$LOG")"
	check_source_kept "cancel at $phase" "$WORKER_1_PORT"
	expect_eq "cancel at $phase: recorded" "cancelled" \
		"$(coord "SELECT status FROM shardext.move ORDER BY move_id DESC LIMIT 1")"
	expect_no_leftovers "cancel at $phase"
done
# writes are not left paused: a cutover lock is free again
expect_eq "no cutover lock held" "0" \
	"$(coord "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 10 AND mode = 'ExclusiveLock'")"

# kill the target's apply worker while the move catches up: it restarts
# and the move completes
start_paused_move "$LOG" "catching up" "SELECT shardext_move_shard($SHARD, $W2)"
# the apply worker starts asynchronously: wait for it (bounded)
wait_sql "the move's apply worker runs" 10 "$WORKER_2_PORT" \
	"SELECT count(*) > 0 FROM pg_stat_subscription WHERE subname LIKE 'shardext_move_%' AND pid IS NOT NULL"
expect_eq "apply worker killed" "t" \
	"$(worker2 "SELECT bool_or(pg_terminate_backend(pid)) FROM pg_stat_subscription WHERE subname LIKE 'shardext_move_%' AND pid IS NOT NULL")"
pause_release
wait "$MOVE_PID" || fail "move after the apply worker was killed: $(cat "$LOG")"
expect_eq "apply killed: shard moved" "$WORKER_2_PORT" "$(port_of_shard "$SHARD")"
expect_eq "apply killed: rows of accounts" "$ACCOUNTS" "$(table_state accounts)"
expect_eq "apply killed: rows of ledger" "$LEDGER" "$(table_state ledger)"
expect_no_leftovers "apply killed"

# stop the target (worker 1 now) while the move catches up
start_paused_move "$LOG" "catching up" "SELECT shardext_move_shard($SHARD, $W1)"
cluster stop-node worker1 immediate
pause_release
wait "$MOVE_PID" && fail "the move succeeded with its target down"
grep -q "9981\|$WORKER_1_PORT" "$LOG" || fail "target stopped: the error does not name the node: $(cat "$LOG")"
cluster start-node worker1
check_source_kept "target stopped" "$WORKER_2_PORT"
coord "SELECT shardext_cleanup()" >/dev/null
expect_no_leftovers "target stopped, then cleanup"
psql_at "$COORDINATOR_PORT" -c "SET client_min_messages = warning" -c "SELECT shardext_move_shard($SHARD, $W1)" >/dev/null ||
	fail "retry after the target came back"
expect_eq "target stopped: retry moved the shard" "$WORKER_1_PORT" "$(port_of_shard "$SHARD")"
expect_eq "target stopped: rows after the retry" "$ACCOUNTS" "$(table_state accounts)"

# stop the source (worker 1) while the move copies
start_paused_move "$LOG" copying "SELECT shardext_move_shard($SHARD, $W2)"
cluster stop-node worker1 immediate
pause_release
wait "$MOVE_PID" && fail "the move succeeded with its source down"
cluster start-node worker1
check_source_kept "source stopped" "$WORKER_1_PORT"
coord "SELECT shardext_cleanup()" >/dev/null
expect_no_leftovers "source stopped, then cleanup"

# crash the coordinator while the move catches up: the maintenance daemon
# cleans up after the restart, without being asked
start_paused_move "$LOG" "catching up" "SELECT shardext_move_shard($SHARD, $W2)"
cluster stop-node coordinator immediate
wait "$MOVE_PID"
pause_release >/dev/null 2>&1
cluster start-node coordinator
check_source_kept "coordinator crashed" "$WORKER_1_PORT"
no_leftovers() { [ -z "$(moves_leftovers)" ]; }
wait_for "the maintenance daemon cleans up after the crash" 30 no_leftovers
expect_no_leftovers "coordinator crashed, maintenance daemon"
expect_eq "coordinator crashed: recorded as failed" "failed" \
	"$(coord "SELECT status FROM shardext.move ORDER BY move_id DESC LIMIT 1")"

# a cancel after the switch: the move is done, cleanup finishes later
start_paused_move "$LOG" "cleaning up" "SELECT shardext_move_shard($SHARD, $W2)"
coord "SELECT pg_cancel_backend($(move_backend_pid))" >/dev/null
wait "$MOVE_PID" || fail "a cancel after the switch failed the move: $(cat "$LOG")"
pause_release
grep -q "cleaning up after it failed" "$LOG" || fail "no warning about the cleanup: $(cat "$LOG")"
expect_eq "cancel after the switch: shard moved" "$WORKER_2_PORT" "$(port_of_shard "$SHARD")"
expect_eq "cancel after the switch: rows" "$ACCOUNTS" "$(table_state accounts)"
coord "SELECT shardext_cleanup()" >/dev/null
expect_no_leftovers "cancel after the switch, then cleanup"

# a split cancelled while it catches up; then it succeeds
start_paused_move "$LOG" "catching up" "SELECT shardext_split_shard($SHARD)"
coord "SELECT shardext_cancel_rebalance()" >/dev/null
wait "$MOVE_PID" && fail "the split succeeded although cancelled"
pause_release
check_source_kept "split cancelled" "$WORKER_2_PORT"
expect_eq "split cancelled: shard count" "4" \
	"$(coord "SELECT count(*) FROM shardext.shards WHERE logicalrelid = 'accounts'::regclass")"
expect_no_leftovers "split cancelled"
psql_at "$COORDINATOR_PORT" -c "SET client_min_messages = warning" -c "SELECT shardext_split_shard($SHARD, $W1)" >/dev/null ||
	fail "split retry"
expect_eq "split retry: shard count" "5" \
	"$(coord "SELECT count(*) FROM shardext.shards WHERE logicalrelid = 'accounts'::regclass")"
expect_eq "split retry: rows of accounts" "$ACCOUNTS" "$(table_state accounts)"
expect_eq "split retry: rows of ledger" "$LEDGER" "$(table_state ledger)"
expect_no_leftovers "split retry"
rm -f "$LOG"
