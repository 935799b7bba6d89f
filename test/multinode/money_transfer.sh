#!/usr/bin/env bash
# Money transfers under concurrency: 8 pgbench clients move money between
# accounts on different shards and nodes, each transfer an explicit
# transaction of two router UPDATEs and an INSERT into a ledger (two-phase
# commit whenever the two accounts live on different nodes).  After each
# run: the total is unchanged, every account's balance equals its initial
# balance plus what the ledger says it received minus what it paid (so no
# transaction was applied in part), the ledger has one row per transaction
# pgbench counted, and no prepared transaction is left on any node.
#  1. ordered: each transfer updates the lower account id first (what
#     careful applications do), with prepared statements: no client error,
#     no deadlock;
#  2. unordered: the payer first.  Transfers in opposite directions then
#     deadlock -- on one node (PostgreSQL's detector) or across nodes
#     (shardext's distributed deadlock detection); both end the victim with
#     SQLSTATE 40P01, which pgbench retries (--max-tries=0).  Any other
#     error aborts a pgbench client and fails the test.
source "$(dirname "$0")/lib/common.sh"
TMP=$(mktemp -d /tmp/money_transfer.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
PGBENCH="$BINDIR/pgbench"
ACCOUNTS=12
INITIAL=1000
SECONDS_PER_RUN=${MONEY_TRANSFER_SECONDS:-12}
LOG="$SHARDEXT_CLUSTER_DIR/coordinator.log"

coord "DROP TABLE IF EXISTS mt_accounts, mt_ledger;
	   CREATE TABLE mt_accounts (id int PRIMARY KEY, balance bigint NOT NULL);
	   SELECT create_distributed_table('mt_accounts', 'id', shard_count => 8);
	   CREATE TABLE mt_ledger (payer int NOT NULL, payee int NOT NULL, amount int NOT NULL);
	   SELECT create_distributed_table('mt_ledger', 'payer', colocate_with => 'mt_accounts');
	   INSERT INTO mt_accounts SELECT g, $INITIAL FROM generate_series(1, $ACCOUNTS) g;" >/dev/null
expect_eq "accounts on both workers" 2 \
	"$(coord "SELECT count(DISTINCT (SELECT node_id FROM shardext.shards
			  WHERE shard_id = shardext_shard_for_value('mt_accounts', id::text))) FROM mt_accounts")"

# the payer, a different payee, an amount; both scripts move the same money
cat >"$TMP/head.sql" <<PGB
\\set payer random(1, $ACCOUNTS)
\\set payee 1 + (:payer + random(0, $((ACCOUNTS - 2)))) % $ACCOUNTS
\\set amount random(1, 100)
PGB
cat "$TMP/head.sql" - >"$TMP/ordered.sql" <<'PGB'
\set first least(:payer, :payee)
\set second greatest(:payer, :payee)
BEGIN;
UPDATE mt_accounts SET balance = balance + CASE WHEN id = :payer THEN -1 ELSE 1 END * :amount WHERE id = :first;
UPDATE mt_accounts SET balance = balance + CASE WHEN id = :payer THEN -1 ELSE 1 END * :amount WHERE id = :second;
INSERT INTO mt_ledger VALUES (:payer, :payee, :amount);
END;
PGB
cat "$TMP/head.sql" - >"$TMP/unordered.sql" <<'PGB'
BEGIN;
UPDATE mt_accounts SET balance = balance - :amount WHERE id = :payer;
UPDATE mt_accounts SET balance = balance + :amount WHERE id = :payee;
INSERT INTO mt_ledger VALUES (:payer, :payee, :amount);
END;
PGB

# check_books RUN PGBENCH_OUTPUT: the invariants after a run
check_books() {
	local run=$1 out=$2 processed books
	processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
	[ -n "$processed" ] && [ "$processed" -gt 0 ] || { cat "$out"; fail "$run: pgbench processed nothing"; }
	grep -q "aborted" "$out" && { cat "$out"; fail "$run: a pgbench client aborted on an error"; }
	# total | ledger rows | accounts whose balance disagrees with the ledger | transfers across nodes
	books=$(psql_at "$COORDINATOR_PORT" <<SQL
CREATE TEMP TABLE l AS SELECT * FROM mt_ledger;
CREATE TEMP TABLE a AS SELECT * FROM mt_accounts;
CREATE TEMP TABLE n AS SELECT id, (SELECT node_id FROM shardext.shards
	WHERE shard_id = shardext_shard_for_value('mt_accounts', id::text)) AS node FROM a;
SELECT (SELECT sum(balance) FROM a),
	   (SELECT count(*) FROM l),
	   (SELECT count(*) FROM a WHERE balance <> $INITIAL
			+ coalesce((SELECT sum(amount) FROM l WHERE payee = a.id), 0)
			- coalesce((SELECT sum(amount) FROM l WHERE payer = a.id), 0)),
	   (SELECT count(*) FROM l JOIN n p ON p.id = l.payer JOIN n q ON q.id = l.payee
		WHERE p.node <> q.node);
SQL
)
	IFS='|' read -r total rows wrong across <<<"$books"
	expect_eq "$run: total balance unchanged" $((ACCOUNTS * INITIAL)) "$total"
	expect_eq "$run: one ledger row per transaction pgbench counted" "$processed" "$rows"
	expect_eq "$run: every balance = initial + received - paid" 0 "$wrong"
	echo "$run: $processed transfers, $across of them across nodes (two-phase commit)"
	[ "$across" -gt 0 ] || fail "$run: no transfer between nodes"
	coord "SELECT shardext_recover_prepared_transactions()" >/dev/null
	expect_eq "$run: no prepared transactions on the workers" "0|0" \
		"$(worker1 "SELECT count(*) FROM pg_prepared_xacts")|$(worker2 "SELECT count(*) FROM pg_prepared_xacts")"
	expect_eq "$run: commit records cleaned up" 0 "$(coord "SELECT count(*) FROM shardext.transaction")"
}

reset_books() {
	coord "UPDATE mt_accounts SET balance = $INITIAL; TRUNCATE mt_ledger" >/dev/null
}

# --- 1. ordered updates, prepared statements: nothing may fail
reset_books
"$PGBENCH" -n -M prepared -c 8 -j 2 -T "$SECONDS_PER_RUN" -f "$TMP/ordered.sql" \
	-h 127.0.0.1 -p "$COORDINATOR_PORT" -U postgres "$DB" >"$TMP/ordered.out" 2>&1
rc=$?
grep -E "^(number of|tps|latency)" "$TMP/ordered.out"
[ $rc = 0 ] || { cat "$TMP/ordered.out"; fail "ordered: pgbench failed (exit $rc)"; }
grep -q "^number of failed transactions: 0 " "$TMP/ordered.out" || fail "ordered: transactions failed"
check_books ordered "$TMP/ordered.out"

# --- 2. unordered updates: only deadlocks, which are retried
reset_books
log_start=$(stat -c %s "$LOG")
"$PGBENCH" -n -c 8 -j 2 -T "$SECONDS_PER_RUN" --max-tries=0 --failures-detailed \
	-f "$TMP/unordered.sql" -h 127.0.0.1 -p "$COORDINATOR_PORT" -U postgres "$DB" \
	>"$TMP/unordered.out" 2>&1
rc=$?
grep -E "^(number of|total number|tps|latency)" "$TMP/unordered.out"
[ $rc = 0 ] || { cat "$TMP/unordered.out"; fail "unordered: pgbench failed (exit $rc)"; }
grep -q "^number of failed transactions: 0 " "$TMP/unordered.out" ||
	fail "unordered: transactions failed although deadlocks are retried"
check_books unordered "$TMP/unordered.out"
# errors of the sessions of this database (the log also has other databases')
errors=$(tail -c +"$((log_start + 1))" "$LOG" | grep -E "@$DB ERROR:" |
	grep -vE "ERROR:  (canceling the transaction to resolve a distributed deadlock|deadlock detected)$" || true)
[ -z "$errors" ] || fail "unordered: errors other than deadlocks: $errors"
distributed=$(tail -c +"$((log_start + 1))" "$LOG" | grep -c "@$DB ERROR:  canceling the transaction to resolve a distributed deadlock" || true)
local_=$(tail -c +"$((log_start + 1))" "$LOG" | grep -c "@$DB ERROR:  deadlock detected" || true)
retries=$(sed -n 's/^total number of retries: \([0-9]*\).*/\1/p' "$TMP/unordered.out")
echo "unordered: $distributed distributed deadlocks (shardext), $local_ single-node deadlocks (PostgreSQL), $retries retries"
[ "$distributed" -gt 0 ] || fail "unordered: no distributed deadlock happened, the test proves nothing"
# pgbench counts the retries of transactions that completed; a victim whose
# retry was still running when the time was up is not counted
[ "$retries" -ge 1 ] && [ "$retries" -le $((distributed + local_)) ] ||
	fail "unordered: $retries retries for $((distributed + local_)) deadlocks"
echo "ok - unordered: only deadlocks, all of them retried"

coord "DROP TABLE mt_accounts, mt_ledger" >/dev/null
