#!/usr/bin/env bash
# scripts/bench.d/failover.sh: self-healing (issue 24), in one run:
#   1. automatic failover: the time from a worker's death (pg_ctl stop -m
#      immediate) to the first money transfer that commits again, with
#      shardext.auto_failover on, failover_timeout 10 s, a synchronous
#      standby without hot_standby_feedback and 4 clients moving money
#      between accounts on both workers; BENCH_FAILOVERS rounds (default 5),
#      each with a fresh standby, and their median (target: at most
#      failover_timeout + 2 s);
#   2. consistent restore points: pgbench's TPC-B (accounts, tellers,
#      branches and history distributed, so most transactions commit with
#      two-phase commit) for BENCH_SECONDS (default 60) without and with
#      shardext_create_restore_point() every 10 s, alternating, twice each;
#      the throughput dip (target: at most 5%) and how long each restore
#      point took.  A local pgbench run gives the scale.
# The machine is shared: the load average is printed before and after.
#
# Environment: SHARDEXT_PORT (coordinator; workers on the next two ports,
# the standby of worker 1 on port+11), SHARDEXT_CLUSTER_DIR, PG_CONFIG,
# BENCH_FAILOVERS, BENCH_SECONDS, BENCH_SCALE (default 10), BENCH_CLIENTS
# (default 8), BENCH_PARTS (default "1 2": which of the two to run).
set -euo pipefail
source "$(dirname "$0")/lib/env.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CLUSTER="$ROOT/scripts/cluster"
R1=$((PORT + 11))
ROUNDS=${BENCH_FAILOVERS:-5}
SECONDS_PER_RUN=${BENCH_SECONDS:-60}
SCALE=${BENCH_SCALE:-10}
CLIENTS=${BENCH_CLIENTS:-8}
DB=bench_failover
PARTS=${BENCH_PARTS:-1 2}
LOG="${SHARDEXT_CLUSTER_DIR:-/var/tmp/shardext-cluster}/coordinator.log"
TMP=$(mktemp -d)
chmod 777 "$TMP"

coord() { $PSQL -p "$PORT" -d "$DB" -c "$1"; }
set_coordinator() {	# name value ('' resets)
	if [ -z "$2" ]; then
		$PSQL -p "$PORT" -d postgres -c "ALTER SYSTEM RESET $1" -c "SELECT pg_reload_conf()" >/dev/null
	else
		$PSQL -p "$PORT" -d postgres -c "ALTER SYSTEM SET $1 = '$2'" -c "SELECT pg_reload_conf()" >/dev/null
	fi
}
set_sync() { $PSQL -p "$W1" -d postgres -c "ALTER SYSTEM SET synchronous_standby_names = '$1'" -c "SELECT pg_reload_conf()" >/dev/null; }
cleanup() {
	set_coordinator shardext.auto_failover '' 2>/dev/null || true
	"$CLUSTER" start-node worker1 >/dev/null 2>&1 || true
	set_sync '' 2>/dev/null || true
	"$CLUSTER" drop-replica worker1 >/dev/null 2>&1 || true
	for port in $PORT $W1 $W2; do
		$PSQL -p $port -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
tps() { sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$1" | head -1; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f%%", 100 * (a / b - 1) }'; }
wait_for() {	# seconds port sql: until sql returns t
	for _ in $(seq 1 $(($1 * 10))); do
		[ "$($PSQL -p "$2" -d "$DB" -c "$3" 2>/dev/null)" = t ] && return 0
		sleep 0.1
	done
	echo "timed out waiting for: $3" >&2
	return 1
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# --- 1. automatic failover ----------------------------------------------------
# fresh_bank: the bank database on the coordinator and both workers, worker 1
# with a new synchronous standby, registered; prints the accounts of each worker
fresh_bank() {
	"$CLUSTER" start-node worker1 >/dev/null
	set_sync ''
	"$CLUSTER" drop-replica worker1 >/dev/null
	for port in $PORT $W1 $W2; do
		$PSQL -p $port -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB" >/dev/null
	done
	$PSQL -p "$PORT" -d "$DB" >/dev/null <<SQL
SET client_min_messages TO warning;
CREATE EXTENSION shardext;
SELECT shardext_add_node('127.0.0.1', $W1);
SELECT shardext_add_node('127.0.0.1', $W2);
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
SELECT create_distributed_table('accounts', 'id', shard_count => 4);
INSERT INTO accounts SELECT g, 1000 FROM generate_series(1, 40) g;
CREATE TABLE ledger (id bigint PRIMARY KEY, payer int, payee int, amount int);
SELECT create_distributed_table('ledger', 'id', shard_count => 4);
SQL
	SHARDEXT_REPLICA_CONF="hot_standby_feedback = off" "$CLUSTER" add-replica worker1 >/dev/null
	set_sync replica1
	coord "SELECT shardext_add_replica('127.0.0.1', $R1, '127.0.0.1', $W1)" >/dev/null
	wait_for 30 "$W1" "SELECT count(*) = 1 FROM pg_stat_replication WHERE sync_state = 'sync'"
	wait_for 20 "$PORT" "SELECT count(*) = 2 FROM shardext.nodes WHERE role = 'primary' AND health = 'up'"
}
accounts_on() {
	coord "SELECT string_agg(a.id::text, ',') FROM accounts a JOIN shardext.shards s
		ON s.shard_id = shardext_shard_for_value('accounts', a.id::text) WHERE s.node_port = $1"
}
if [[ " $PARTS " == *" 1 "* ]]; then
set_coordinator shardext.auto_failover on
echo
echo "1. automatic failover: a worker killed under 4 transfer clients, time to the first transfer"
echo "   that commits again (failover_timeout 10 s, synchronous standby, $ROUNDS rounds)"
gaps=()
for round in $(seq 1 "$ROUNDS"); do
	fresh_bank
	rm -f "$TMP"/t.*
	python3 "$ROOT/test/multinode/lib/transfers.py" --ports "$PORT" --dbname "$DB" --clients 4 \
		--seconds 120 --first "$(accounts_on "$W1")" --second "$(accounts_on "$W2")" \
		--log "$TMP/t" --stop-file "$TMP/stop" &
	clients=$!
	wait_for 20 "$PORT" "SELECT count(*) > 100 FROM ledger"
	from=$(wc -l <"$LOG")
	killed=$(date +%s.%N)
	"$CLUSTER" stop-node worker1 immediate
	wait_for 40 "$PORT" "SELECT node_port = $R1 FROM shardext.nodes WHERE node_id = 1"
	count=$(coord "SELECT count(*) FROM ledger")
	wait_for 20 "$PORT" "SELECT count(*) > $count + 20 FROM ledger"
	touch "$TMP/stop"
	wait "$clients"
	rm -f "$TMP/stop"
	first=$(cat "$TMP"/t.* | awk -v t="$killed" '$2 == "OK" && $1 > t + 0.5 {print $1}' | sort -n | head -1)
	gap=$(awk -v a="$first" -v b="$killed" 'BEGIN {printf "%.2f", a - b}')
	took=$(tail -n +"$from" "$LOG" | sed -n 's/.*failed over from .* in \([0-9]*\) ms, \([0-9]*\) ms after it was last reached.*/promotion \1 ms, \2 ms after the last answered probe/p' | tail -1)
	gaps+=("$gap")
	printf '  round %d: writes again %s s after the kill (%s)\n' "$round" "$gap" "$took"
done
printf '  median: %s s (target: at most 12 s)\n' "$(median "${gaps[@]}")"
set_coordinator shardext.auto_failover ''
"$CLUSTER" start-node worker1 >/dev/null
set_sync ''
"$CLUSTER" drop-replica worker1 >/dev/null
fi

# --- 2. restore points under TPC-B ------------------------------------------
if [[ " $PARTS " == *" 2 "* ]]; then
echo
echo "2. pgbench TPC-B (scale $SCALE, $CLIENTS clients, ${SECONDS_PER_RUN} s runs) without and with"
echo "   shardext_create_restore_point() every 10 s"
for port in $PORT $W1 $W2; do
	$PSQL -p $port -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB" >/dev/null
done
"$PGBENCH" -i -q -s "$SCALE" -h 127.0.0.1 -p "$PORT" -U postgres "$DB" >"$TMP/init.out" 2>&1
"$PGBENCH" -n -c "$CLIENTS" -j 2 -T 20 -h 127.0.0.1 -p "$PORT" -U postgres "$DB" >"$TMP/local.out" 2>&1
$PSQL -p "$PORT" -d "$DB" >/dev/null <<SQL
SET client_min_messages TO warning;
CREATE EXTENSION shardext;
SELECT shardext_add_node('127.0.0.1', $W1);
SELECT shardext_add_node('127.0.0.1', $W2);
SELECT create_distributed_table('pgbench_accounts', 'aid');
SELECT create_distributed_table('pgbench_tellers', 'tid');
SELECT create_distributed_table('pgbench_branches', 'bid');
SELECT create_distributed_table('pgbench_history', 'aid');
SELECT shardext_run_on_shards('pgbench_accounts', 'VACUUM ANALYZE %s');
SQL
run_tpcb() {	# out [with restore points]
	"$PGBENCH" -n -c "$CLIENTS" -j 2 -T "$SECONDS_PER_RUN" -h 127.0.0.1 -p "$PORT" -U postgres \
		"$DB" >"$1" 2>&1 &
	local bench=$! n=0
	if [ -n "${2:-}" ]; then
		while kill -0 "$bench" 2>/dev/null; do
			sleep 10
			kill -0 "$bench" 2>/dev/null || break
			n=$((n + 1))
			s=$(date +%s%N)
			$PSQL -p "$PORT" -d "$DB" -c "SET client_min_messages = debug1" \
				-c "SELECT count(*) FROM shardext_create_restore_point('bench_$n')" 2>&1 >/dev/null |
				sed -n 's/.*held back for \([0-9]*\) us.*/\1/p' >>"$TMP/gate_us"
			echo $((($(date +%s%N) - s) / 1000000)) >>"$TMP/rp_ms"
		done
	fi
	wait "$bench"
}
without=() with=()
for round in 1 2; do
	run_tpcb "$TMP/without.out"
	run_tpcb "$TMP/with.out" points
	a=$(tps "$TMP/without.out")
	b=$(tps "$TMP/with.out")
	without+=("$a")
	with+=("$b")
	printf '  round %d: without %.0f tps, with restore points %.0f tps (%s)\n' "$round" "$a" "$b" "$(ratio "$b" "$a")"
done
printf '  mean: without %.0f tps, with %.0f tps: %s (target: at most -5%%)\n' \
	"$(printf '%s\n' "${without[@]}" | awk '{s += $1} END {print s / NR}')" \
	"$(printf '%s\n' "${with[@]}" | awk '{s += $1} END {print s / NR}')" \
	"$(ratio "$(printf '%s\n' "${with[@]}" | awk '{s += $1} END {print s / NR}')" \
		"$(printf '%s\n' "${without[@]}" | awk '{s += $1} END {print s / NR}')")"
printf '  restore points: %d, median %s ms, longest %s ms; commit decisions held back for %s ms (median), %s ms (longest)\n' \
	"$(wc -l <"$TMP/rp_ms")" "$(median $(cat "$TMP/rp_ms"))" "$(sort -n "$TMP/rp_ms" | tail -1)" \
	"$(awk '{print $1 / 1000}' "$TMP/gate_us" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')" \
	"$(awk '{print $1 / 1000}' "$TMP/gate_us" | sort -g | tail -1)"
printf '  a local pgbench_* (20 s, for scale): %.0f tps\n' "$(tps "$TMP/local.out")"
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
