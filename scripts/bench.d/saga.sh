#!/usr/bin/env bash
# scripts/bench.d/saga.sh: the same money transfer between two accounts on
# different nodes, as one distributed transaction (two-phase commit) and as
# a saga (shardext_run_saga: debit, then credit, each committed on its node
# at once, with compensations), side by side.
#
# Workloads (BENCH_CLIENTS clients, default 16, pgbench -M prepared):
#   uniform  payer and payee drawn from BENCH_ACCOUNTS accounts (default
#            10000) on each node;
#   hot      payer and payee among 10 hot accounts (5 on each node).
# The transaction updates the two rows in id order (so that two transfers
# never deadlock: what a careful application does); the saga debits first
# and credits second (each step locks one row only).  Both keep the balance
# non-negative with a CHECK constraint.  For each workload the two are run
# in turns, BENCH_ROUNDS rounds (default 2) of BENCH_SECONDS (default 15)
# each; printed: throughput (tps) and p99 latency (from pgbench's per
# transaction log) of each run, their means over the rounds and the
# ratios saga / 2PC.  The machine's load average is printed before and after.
#
# Environment: SHARDEXT_PORT (coordinator; workers on the next two ports),
# PG_CONFIG.  Uses (and drops at the end) database bench_saga.
set -euo pipefail
source "$(dirname "$0")/lib/env.sh"
cd "$(dirname "$0")/../.."
ACCOUNTS=${BENCH_ACCOUNTS:-10000}
SECONDS_PER_RUN=${BENCH_SECONDS:-15}
ROUNDS=${BENCH_ROUNDS:-2}
CLIENTS=${BENCH_CLIENTS:-16}
DB=bench_saga
TMP=$(mktemp -d)
chmod 777 "$TMP"
drop_databases() {
	for port in $PORT $W1 $W2; do
		$PSQL -p $port -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
	done
}
trap 'drop_databases; rm -rf "$TMP"' EXIT

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
drop_databases
$PSQL -p "$PORT" -d postgres -c "CREATE DATABASE $DB"
$PSQL -p "$PORT" -d "$DB" >/dev/null <<SQL
SET client_min_messages TO warning;
CREATE EXTENSION shardext;
SELECT shardext_add_node('127.0.0.1', $W1);
SELECT shardext_add_node('127.0.0.1', $W2);
CREATE TABLE bench_accounts (id int PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0));
SELECT create_distributed_table('bench_accounts', 'id', shard_count => 32);
INSERT INTO bench_accounts SELECT g, 1000000000 FROM generate_series(1, 4 * $ACCOUNTS) g;
-- pairs of accounts on different nodes: pair i is (a, b), a on the first node
CREATE TABLE bench_pairs (i int PRIMARY KEY, a int NOT NULL, b int NOT NULL);
WITH n AS (SELECT id, (SELECT node_id FROM shardext.shards
					   WHERE shard_id = shardext_shard_for_value('bench_accounts', id::text)) AS node
		   FROM bench_accounts),
	 a AS (SELECT id, row_number() OVER (ORDER BY id) AS i FROM n WHERE node = (SELECT min(node) FROM n)),
	 b AS (SELECT id, row_number() OVER (ORDER BY id) AS i FROM n WHERE node <> (SELECT min(node) FROM n))
INSERT INTO bench_pairs SELECT a.i, a.id, b.id FROM a JOIN b USING (i) WHERE a.i <= $ACCOUNTS;
VACUUM ANALYZE bench_pairs;
SQL
pairs=$($PSQL -p "$PORT" -d "$DB" -c "SELECT count(*) FROM bench_pairs")
[ "$pairs" = "$ACCOUNTS" ] || { echo "only $pairs pairs of accounts on two nodes" >&2; exit 1; }

# the head of both scripts: a pair (uniform: any; hot: one of 5 pairs, so 10
# accounts), a direction and an amount
head_script() {	# PAIRS
	cat <<PGB
\\set i random(1, $1)
\\set j random(1, $1)
\\set amount random(1, 100)
\\set dir random(0, 1)
SELECT a AS x, (SELECT b FROM bench_pairs WHERE i = :j) AS y FROM bench_pairs WHERE i = :i \\gset
\\set payer :dir * :x + (1 - :dir) * :y
\\set payee :dir * :y + (1 - :dir) * :x
PGB
}
for load in uniform hot; do
	n=$ACCOUNTS
	[ $load = hot ] && n=5
	{ head_script $n; cat <<'PGB'
\set first least(:payer, :payee)
\set second greatest(:payer, :payee)
BEGIN;
UPDATE bench_accounts SET balance = balance + CASE WHEN id = :payer THEN -1 ELSE 1 END * :amount WHERE id = :first;
UPDATE bench_accounts SET balance = balance + CASE WHEN id = :payer THEN -1 ELSE 1 END * :amount WHERE id = :second;
END;
PGB
	} >"$TMP/$load-2pc.sql"
	{ head_script $n; cat <<'PGB'
SELECT shardext_run_saga('transfer', ARRAY[
	shardext_saga_step('UPDATE bench_accounts SET balance = balance - $2 WHERE id = $1',
					   'UPDATE bench_accounts SET balance = balance + $2 WHERE id = $1',
					   ARRAY[:payer, :amount]::text[]),
	shardext_saga_step('UPDATE bench_accounts SET balance = balance + $2 WHERE id = $1',
					   'UPDATE bench_accounts SET balance = balance - $2 WHERE id = $1',
					   ARRAY[:payee, :amount]::text[])]);
PGB
	} >"$TMP/$load-saga.sql"
done

# run LOAD KIND: one run; prints "tps p99_ms failed"
run() {
	local load=$1 kind=$2 out="$TMP/$1-$2.out"
	rm -f "$TMP"/log.*
	# the history of sagas and their records start empty each time
	$PSQL -p "$PORT" -d "$DB" -c "DELETE FROM shardext.saga" >/dev/null
	for port in $W1 $W2; do
		$PSQL -p $port -d "$DB" -c "DELETE FROM shardext.saga_step_record" >/dev/null
	done
	$PSQL -p "$PORT" -d "$DB" -c "CHECKPOINT" >/dev/null
	(cd "$TMP" && "$PGBENCH" -n -M prepared -c "$CLIENTS" -j 4 -T "$SECONDS_PER_RUN" \
		--max-tries=10 -l --log-prefix=log -f "$load-$kind.sql" \
		-h 127.0.0.1 -p "$PORT" -U postgres "$DB" >"$out" 2>&1) ||
		{ cat "$out" >&2; exit 1; }
	local tps failed p99
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$out" | head -1)
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out")
	p99=$(cat "$TMP"/log.* | awk '$3 ~ /^[0-9]+$/ { print $3 }' | sort -n |
		awk '{ v[NR] = $1 } END { i = int(NR * 0.99); if (i < 1) i = 1; printf "%.2f", v[i] / 1000 }')
	echo "$tps $p99 ${failed:-0}"
}

printf '%-8s %-6s %5s | %10s %9s %7s\n' workload kind round tps "p99 ms" failed
for load in uniform hot; do
	total_2pc=0 total_saga=0 p99s_2pc="" p99s_saga=""
	for round in $(seq 1 "$ROUNDS"); do
		for kind in 2pc saga; do
			read -r tps p99 failed <<<"$(run $load $kind)"
			printf '%-8s %-6s %5s | %10.0f %9s %7s\n' $load $kind "$round" "$tps" "$p99" "$failed"
			if [ $kind = 2pc ]; then
				total_2pc=$(awk -v a="$total_2pc" -v b="$tps" 'BEGIN { print a + b }')
				p99s_2pc="$p99s_2pc $p99"
			else
				total_saga=$(awk -v a="$total_saga" -v b="$tps" 'BEGIN { print a + b }')
				p99s_saga="$p99s_saga $p99"
			fi
		done
	done
	# p99 of the rounds: their mean
	p2=$(printf '%s\n' $p99s_2pc | awk '{ s += $1 } END { print s / NR }')
	ps=$(printf '%s\n' $p99s_saga | awk '{ s += $1 } END { print s / NR }')
	awk -v l=$load -v t2="$total_2pc" -v ts="$total_saga" -v r="$ROUNDS" -v p2="$p2" -v ps="$ps" 'BEGIN {
		printf "%-8s 2PC %.0f tps, p99 %.2f ms | saga %.0f tps, p99 %.2f ms | saga/2PC: throughput %.2fx, p99 %.2fx\n",
			l, t2 / r, p2, ts / r, ps, ts / t2, ps / p2 }' | tee -a "$TMP/summary"
done
echo
cat "$TMP/summary"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
