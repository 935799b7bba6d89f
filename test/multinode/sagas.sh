#!/usr/bin/env bash
# Sagas under crashes: money transfers between accounts on different nodes,
# each a saga of two steps -- a debit (with a check that the balance stays
# covered) and a credit (refused for closed accounts) -- that write a
# ledger row with the transfer's id next to the account, and whose
# compensations credit back / debit back (with a ledger row of their own).
#  1. a crash of the coordinator at each step boundary (test-only fault
#     points: before and after each step, before and after the
#     compensation), and a lost answer of a node: after the restart, the
#     maintenance daemon finishes each saga, with every step and
#     compensation applied exactly once;
#  1b. a constraint violation at step 3 of 4 compensates steps 2 and 1, in
#     that order; a compensation that keeps failing leaves the saga failed,
#     needing attention, in shardext.sagas and the server log;
#  2. load: 6 clients transfer money, payer and payee each one of 5 hot
#     accounts half of the time and any account otherwise, while
#     workers and the coordinator are killed at random moments and some
#     transfers crash the coordinator at a step boundary;
# then, once every node is back: every saga is completed or compensated,
# the total is unchanged, every balance is its initial value plus its
# ledger rows, and the ledger holds each step of a completed transfer
# exactly once (debit and credit), each compensated one none or a debit
# with its undo.
source "$(dirname "$0")/lib/common.sh"
TMP=$(mktemp -d /tmp/sagas.XXXXXX)
trap 'cluster start-node coordinator >/dev/null 2>&1; cluster start-node worker1 >/dev/null 2>&1;
	  cluster start-node worker2 >/dev/null 2>&1; rm -rf "$TMP"' EXIT
PGBENCH="$BINDIR/pgbench"
ACCOUNTS=40
INITIAL=1000
LOAD_SECONDS=${SAGAS_LOAD_SECONDS:-30}

wait_for_port() {	# PORT: the server accepts connections
	wait_for "the server on port $1 comes back" 30 sql_is "$1" "SELECT true"
}
wait_for_sagas() {	# every saga ended (the daemon finishes what sessions left)
	local left
	poll 60 sql_is "$COORDINATOR_PORT" "SELECT count(*) FROM shardext.saga WHERE state IN ('queued', 'running', 'compensating')" 0 &&
		return 0
	left=$(coord "SELECT count(*) FROM shardext.saga WHERE state IN ('queued', 'running', 'compensating')" 2>/dev/null)
	coord "SELECT saga_id, name, state, current_step, attempts, error FROM shardext.sagas
		   WHERE state NOT IN ('completed', 'compensated')" >&2
	fail "sagas did not end within 60 s: $left left"
}

coord "DROP TABLE IF EXISTS sg_accounts, sg_ledger;
	   DELETE FROM shardext.saga;
	   CREATE TABLE sg_accounts (id int PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0),
								 closed bool NOT NULL DEFAULT false);
	   SELECT create_distributed_table('sg_accounts', 'id', shard_count => 8);
	   CREATE TABLE sg_ledger (id int NOT NULL, tid bigint NOT NULL, delta bigint NOT NULL, kind text NOT NULL);
	   SELECT create_distributed_table('sg_ledger', 'id', colocate_with => 'sg_accounts');
	   INSERT INTO sg_accounts SELECT g, $INITIAL, g % 10 = 0 FROM generate_series(1, $ACCOUNTS) g;" >/dev/null ||
	fail "setup"
for w in worker1 worker2; do $w "DELETE FROM shardext.saga_step_record" >/dev/null; done
# the transfer: failures (insufficient funds, a closed account) are compensated and
# reported as the SQLSTATE; fault (test only) makes the coordinator crash at a step
# boundary or lose a node's answer
coord "CREATE OR REPLACE FUNCTION sg_transfer(payer int, payee int, amount int, tid bigint,
										   fault text DEFAULT 'none', fault_step int DEFAULT 0)
	RETURNS text LANGUAGE plpgsql AS \$f\$
BEGIN
	PERFORM set_config('shardext.saga_test_fault', fault, true),
			set_config('shardext.saga_test_fault_step', fault_step::text, true);
	PERFORM shardext_run_saga('xfer:' || tid, ARRAY[
		shardext_saga_step('UPDATE sg_accounts SET balance = balance - \$2 WHERE id = \$1;
							INSERT INTO sg_ledger VALUES (\$1, \$3, -\$2::bigint, ''debit'')',
						   'UPDATE sg_accounts SET balance = balance + \$2 WHERE id = \$1;
							INSERT INTO sg_ledger VALUES (\$1, \$3, \$2, ''undo debit'')',
						   ARRAY[payer::text, amount::text, tid::text],
						   check_query => 'SELECT balance >= 0 FROM sg_accounts WHERE id = \$1'),
		shardext_saga_step('UPDATE sg_accounts SET balance = balance + \$2 WHERE id = \$1 AND NOT closed;
							INSERT INTO sg_ledger VALUES (\$1, \$3, \$2, ''credit'')',
						   'UPDATE sg_accounts SET balance = balance - \$2 WHERE id = \$1;
							INSERT INTO sg_ledger VALUES (\$1, \$3, -\$2::bigint, ''undo credit'')',
						   ARRAY[payee::text, amount::text, tid::text], expect_rows => 1)]);
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END \$f\$" >/dev/null || fail "transfer function"
# a payer and payee pair on different nodes, and a closed payee on the payer's node's peer
read -r A B CLOSED <<<"$(coord "WITH n AS (SELECT id, closed, (SELECT node_id FROM shardext.shards
		WHERE shard_id = shardext_shard_for_value('sg_accounts', id::text)) AS node FROM sg_accounts)
	SELECT (SELECT min(id) FROM n WHERE node = (SELECT min(node) FROM n) AND NOT closed),
		   (SELECT min(id) FROM n WHERE node <> (SELECT min(node) FROM n) AND NOT closed),
		   (SELECT min(id) FROM n WHERE node <> (SELECT min(node) FROM n) AND closed)" | tr '|' ' ')"
[ -n "$A" ] && [ -n "$B" ] && [ -n "$CLOSED" ] || fail "accounts on both nodes"

# check_books WHAT: the invariants, once every saga ended
check_books() {
	local what=$1 books
	books=$(psql_at "$COORDINATOR_PORT" <<SQL
CREATE TEMP TABLE l AS SELECT * FROM sg_ledger;
CREATE TEMP TABLE a AS SELECT * FROM sg_accounts;
CREATE TEMP TABLE s AS SELECT substr(name, 6)::bigint AS tid, state FROM shardext.saga WHERE name LIKE 'xfer:%';
SELECT (SELECT sum(balance) FROM a),
	   (SELECT count(*) FROM a WHERE balance <> $INITIAL + coalesce((SELECT sum(delta) FROM l WHERE l.id = a.id), 0)),
	   (SELECT count(*) FROM s WHERE state NOT IN ('completed', 'compensated')),
	   (SELECT count(*) FROM s WHERE state = 'completed' AND
			(SELECT array_agg(kind ORDER BY kind) FROM l WHERE l.tid = s.tid) IS DISTINCT FROM '{credit,debit}'),
	   (SELECT count(*) FROM s WHERE state = 'compensated' AND
			coalesce((SELECT array_agg(kind ORDER BY kind) FROM l WHERE l.tid = s.tid), '{}')
			NOT IN ('{}', '{debit,"undo debit"}')),
	   (SELECT count(*) FROM l WHERE NOT EXISTS (SELECT 1 FROM s WHERE s.tid = l.tid)),
	   (SELECT count(*) FILTER (WHERE state = 'completed') || ' completed, ' ||
			   count(*) FILTER (WHERE state = 'compensated') || ' compensated' FROM s);
SQL
)
	IFS='|' read -r total wrong unfinished badcompleted badcompensated orphans summary <<<"$books"
	expect_eq "$what: total balance unchanged" $((ACCOUNTS * INITIAL)) "$total"
	expect_eq "$what: every balance = initial + its ledger rows" 0 "$wrong"
	expect_eq "$what: every saga completed or compensated" 0 "$unfinished"
	expect_eq "$what: each completed transfer's debit and credit exactly once" 0 "$badcompleted"
	expect_eq "$what: each compensated transfer undone exactly once (or never applied)" 0 "$badcompensated"
	expect_eq "$what: no ledger row without its saga" 0 "$orphans"
	echo "$what: $summary"
}

# --- 1. a crash at each step boundary, and a lost answer
tid=0
crash_transfer() {	# FAULT STEP PAYEE EXPECTED_STATE
	local fault=$1 step=$2 payee=$3 expected=$4
	tid=$((tid + 1))
	coord "SELECT sg_transfer($A, $payee, 10, $tid, '$fault', $step)" >/dev/null 2>&1
	wait_for_port "$COORDINATOR_PORT"
	wait_for_sagas
	expect_eq "$fault at step $step: the daemon finished the saga" "$expected" \
		"$(coord "SELECT state FROM shardext.sagas WHERE name = 'xfer:$tid'")"
}
crash_transfer crash_before_step 1 "$B" completed
crash_transfer crash_after_step 1 "$B" completed
crash_transfer crash_before_step 2 "$B" completed
crash_transfer crash_after_step 2 "$B" completed
crash_transfer crash_before_compensation 1 "$CLOSED" compensated
crash_transfer crash_after_compensation 1 "$CLOSED" compensated
tid=$((tid + 1))
expect_eq "a lost answer: the node is asked, the transfer completes in the session" ok \
	"$(coord "SELECT sg_transfer($A, $B, 10, $tid, 'lose_step_answer', 2)")"
expect_eq "a lost answer: the step applied once, found on its second attempt" "completed|2" \
	"$(coord "SELECT state, steps->1->>'attempts' FROM shardext.sagas WHERE name = 'xfer:$tid'")"
expect_eq "insufficient funds: the debit's check fails, nothing to undo" 23514 \
	"$(coord "SELECT sg_transfer($A, $B, 100000, $((tid + 1)))")"
expect_eq "a closed account: the credit fails, the debit is compensated" 21000 \
	"$(coord "SELECT sg_transfer($A, $CLOSED, 10, $((tid + 2)))")"
tid=$((tid + 2))
expect_eq "the crashed sessions' sagas were resumed from a crash (an attempt after a fence)" 1 \
	"$(coord "SELECT (count(*) >= 4)::int FROM shardext.saga_action WHERE attempt > 1")"
check_books "boundaries"

# --- 1b. a constraint violation at step 3 of 4 compensates steps 2 and 1, in that
# order; a compensation that keeps failing leaves the saga needing attention
step4() {	# ACCOUNT AMOUNT: a step that moves AMOUNT out of ACCOUNT (no ledger: it is undone)
	echo "shardext_saga_step('UPDATE sg_accounts SET balance = balance - \$2 WHERE id = \$1',
		'UPDATE sg_accounts SET balance = balance + \$2 WHERE id = \$1', ARRAY['$1', '$2'])"
}
err=$(coord "SELECT shardext_run_saga('four steps', ARRAY[$(step4 "$A" 1), $(step4 "$B" 1),
	$(step4 "$A" 1000000), $(step4 "$B" 1)])" 2>&1)
grep -q 'failed and was compensated' <<<"$err" || fail "step 3 of 4: $err"
expect_eq "step 3 of 4: steps 2 and 1 were compensated, in that order" "2,1" \
	"$(coord "SELECT string_agg(step::text, ',' ORDER BY finished_at) FROM shardext.saga_action
			  WHERE saga_id = (SELECT saga_id FROM shardext.saga WHERE name = 'four steps')
				AND compensation AND status = 'applied'")"
log_start=$(stat -c %s "$SHARDEXT_CLUSTER_DIR/coordinator.log")
coord "SET shardext.saga_max_retries = 1;
	   SELECT shardext_run_saga('stuck', ARRAY[
		shardext_saga_step('UPDATE sg_accounts SET balance = balance + 1 WHERE id = \$1',
						   'UPDATE sg_accounts SET balance = balance - 1000000 WHERE id = \$1', ARRAY['$A']),
		shardext_saga_step('UPDATE sg_accounts SET balance = balance - 1000000 WHERE id = \$1', NULL,
						   ARRAY['$B'])])" >/dev/null 2>&1
expect_eq "a failing compensation: the saga needs attention, with the error" "failed|t|t" \
	"$(coord "SELECT state, needs_attention, error LIKE 'compensation of step 1: %' FROM shardext.sagas
			  WHERE name = 'stuck'")"
tail -c +"$((log_start + 1))" "$SHARDEXT_CLUSTER_DIR/coordinator.log" | grep -q 'needs attention' ||
	fail "a failing compensation: not in the server log"
echo "ok - a failing compensation: in the server log"
coord "UPDATE sg_accounts SET balance = balance - 1 WHERE id = $A;
	   SELECT shardext_abandon_saga(saga_id) FROM shardext.saga WHERE name = 'stuck'" >/dev/null
check_books "failures"

# --- 2. load with hot accounts while nodes are killed at random moments
cat >"$TMP/transfer.sql" <<PGB
\\set hot_payer random(0, 1)
\\set hot_payee random(0, 1)
\\set payer 1 + random(0, $((ACCOUNTS - 1))) * (1 - :hot_payer) + random(0, 4) * :hot_payer
\\set payee 1 + random(0, $((ACCOUNTS - 1))) * (1 - :hot_payee) + random(0, 4) * :hot_payee
\\set amount random(1, 200)
\\set tid random(1000000, 9000000000000000)
\\set f random(0, 999)
SELECT sg_transfer(:payer, :payee, :amount, :tid,
	CASE WHEN :f < 2 THEN 'crash_after_step' WHEN :f < 4 THEN 'crash_before_step'
		 WHEN :f < 5 THEN 'crash_before_compensation' WHEN :f < 30 THEN 'lose_step_answer'
		 ELSE 'none' END, 1 + :f % 2);
PGB
end=$((SECONDS + LOAD_SECONDS))
# clients: pgbench ends when the coordinator goes away; start it again until the time is up
(
	while [ $SECONDS -lt $end ]; do
		"$PGBENCH" -n -c 6 -j 2 -T $((end - SECONDS)) -f "$TMP/transfer.sql" \
			-h 127.0.0.1 -p "$COORDINATOR_PORT" -U postgres "$DB" >>"$TMP/pgbench.out" 2>&1
		# until the coordinator is back (it may stay down past the end: no fail)
		poll $((end - SECONDS > 0 ? end - SECONDS : 0)) sql_is "$COORDINATOR_PORT" "SELECT true"
	done
) &
clients=$!
# kills: a worker or the coordinator, stopped at once and started again
kills=0
while [ $((SECONDS + 3)) -lt $end ]; do
	# a random time between kills: when a fault hits is what this varies
	sleep "0.$((RANDOM % 9 + 1))$((RANDOM % 10))"
	case $((RANDOM % 3)) in
		0) node=coordinator port=$COORDINATOR_PORT ;;
		1) node=worker1 port=$WORKER_1_PORT ;;
		2) node=worker2 port=$WORKER_2_PORT ;;
	esac
	cluster stop-node "$node" immediate >/dev/null 2>&1
	sleep "0.$((RANDOM % 5))"	# a random downtime: what it varies is under test
	cluster start-node "$node" >/dev/null 2>&1 || fail "could not start $node again"
	wait_for_port "$port"
	kills=$((kills + 1))
done
wait "$clients"
for port in $COORDINATOR_PORT $WORKER_1_PORT $WORKER_2_PORT; do wait_for_port "$port"; done
wait_for_sagas
echo "load: $kills nodes killed, $(grep -c '^transaction type' "$TMP/pgbench.out") client runs"
expect_eq "load: no saga needs attention" 0 "$(coord "SELECT count(*) FROM shardext.sagas WHERE needs_attention")"
expect_eq "load: sagas were resumed after a fence (crashes hit steps in flight)" t \
	"$(coord "SELECT count(*) > 0 FROM shardext.saga_action WHERE attempt > 1")"
expect_eq "load: transfers completed and were compensated" t \
	"$(coord "SELECT count(*) FILTER (WHERE state = 'completed') > 10 AND
					 count(*) FILTER (WHERE state = 'compensated') > 0 FROM shardext.saga")"
check_books "load"
# the nodes' step records agree with the coordinator's log: one per applied action
records=$(psql_at "$COORDINATOR_PORT" <<'SQL'
CREATE TEMP TABLE r AS
SELECT split_part(x, ':', 1)::bigint AS saga_id, split_part(x, ':', 2)::int AS step,
	   split_part(x, ':', 3)::bool AS compensation
FROM shardext_run_on_nodes($$SELECT string_agg(saga_id || ':' || step || ':' || compensation, ',')
							FROM shardext.saga_step_record WHERE applied$$) n,
	 unnest(string_to_array(n.result, ',')) x;
SELECT (SELECT count(*) FROM shardext.saga_action a WHERE a.status = 'applied' AND
			(SELECT count(*) FROM r WHERE (r.saga_id, r.step, r.compensation) =
										  (a.saga_id, a.step, a.compensation)) <> 1) +
	   (SELECT count(*) FROM r WHERE NOT EXISTS (SELECT 1 FROM shardext.saga_action a
			WHERE (r.saga_id, r.step, r.compensation) = (a.saga_id, a.step, a.compensation)
			  AND a.status = 'applied'));
SQL
)
expect_eq "step records: one per applied step or compensation, on its node" 0 "$records"

# the daemon ran sagas that crashed sessions left; once none is due it keeps
# no step connection, each of which would hold a slot of its node's pool
daemon_step_connections() {
	local pid port
	pid=$(coord "SELECT pid FROM pg_stat_activity
		WHERE backend_type = 'shardext maintenance daemon' AND datname = current_database()")
	[ -n "$pid" ] || return 1
	for port in $WORKER_1_PORT $WORKER_2_PORT; do
		psql_at "$port" -d postgres -c "SELECT count(*) FROM pg_stat_activity
			WHERE application_name LIKE 'shardext\_%\_$pid'"
	done | awk '{ s += $1 } END { exit s != 0 }'
}
wait_for "once no saga is due, the daemon keeps no connection to the workers" 15 daemon_step_connections
echo "ok - once no saga is due, the daemon keeps no connection to the workers"

[ -n "${SAGAS_KEEP:-}" ] && { cat "$TMP/pgbench.out"; exit 0; }
coord "DROP FUNCTION sg_transfer; DROP TABLE sg_accounts, sg_ledger; DELETE FROM shardext.saga" >/dev/null
for w in worker1 worker2; do $w "DELETE FROM shardext.saga_step_record" >/dev/null; done
