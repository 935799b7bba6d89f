#!/usr/bin/env bash
# scripts/bench.d/tenants.sh: the cost of tenant statistics and the effect of
# isolating a hot tenant.
#
#  1. pgbench -S (point selects by key, -M prepared) on a distributed
#     pgbench_accounts, with shardext.stat_tenants_sample_rate 0 (off), 1
#     (every statement) and 0.1, in alternating runs, BENCH_ROUNDS rounds;
#     prints each round, the median tps of each setting and the overhead
#     against off (median, and the spread over the rounds).  A plain local
#     pgbench_accounts is measured once for scale.
#  2. a skewed mix (half of the transactions for one tenant, the rest spread
#     over 1000 tenants; each transaction updates a counter and reads it
#     back) on a table of two workers, a third one registered and empty:
#     throughput with the hot tenant in an ordinary shard, then after
#     shardext_isolate_tenant() put it on the third worker, BENCH_ROUNDS runs
#     each.
#
# Environment: SHARDEXT_PORT (coordinator; workers on the next ports; a third
# worker is added with scripts/cluster add-worker and stopped at the end),
# PG_CONFIG, BENCH_SCALE (pgbench scale, default 10), BENCH_SECONDS per run
# (default 8), BENCH_ROUNDS (default 5), BENCH_CLIENTS (default 4); BENCH_SKIP_MIX=1
# runs part 1 only.
set -euo pipefail
source "$(dirname "$0")/lib/env.sh"
cd "$(dirname "$0")/../.."
W3=$((PORT + 3))
SCALE=${BENCH_SCALE:-10}
SECONDS_PER_RUN=${BENCH_SECONDS:-8}
ROUNDS=${BENCH_ROUNDS:-5}
CLIENTS=${BENCH_CLIENTS:-4}
DB=bench_tenants
TMP=$(mktemp -d)
cleanup() {
	$PSQL -p "$PORT" -d postgres -c "ALTER SYSTEM RESET shardext.stat_tenants_sample_rate" \
		-c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
	for port in $PORT $W1 $W2 $W3; do
		$PSQL -p $port -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
	done
	scripts/cluster stop-node worker3 >/dev/null 2>&1 || true
	rm -rf "$TMP"
}
trap cleanup EXIT

# tps OUT: the tps of a pgbench output
tps() { sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$1" | head -1; }
# median N...: the median of numbers
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f%%", 100 * (a / b - 1) }'; }
set_rate() {
	$PSQL -p "$PORT" -d postgres -c "ALTER SYSTEM SET shardext.stat_tenants_sample_rate = $1" \
		-c "SELECT pg_reload_conf()" >/dev/null
	sleep 0.2
}

if [ -d "${SHARDEXT_CLUSTER_DIR:-/var/tmp/shardext}/worker3" ]; then
	scripts/cluster start-node worker3 >/dev/null
else
	scripts/cluster add-worker >/dev/null
fi
for port in $PORT $W1 $W2 $W3; do
	$PSQL -p $port -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
done
echo "setting up pgbench scale $SCALE (local) and a distributed pgbench_accounts ..."
"$PGBENCH" -i -q -s "$SCALE" -h 127.0.0.1 -p "$PORT" -U postgres "$DB" >"$TMP/init.out" 2>&1
$PSQL -p "$PORT" -d "$DB" <<SQL
SET client_min_messages TO warning;
CREATE EXTENSION shardext;
SELECT shardext_add_node('127.0.0.1', $W1);
SELECT shardext_add_node('127.0.0.1', $W2);
CREATE SCHEMA local_copy;
CREATE TABLE local_copy.pgbench_accounts (LIKE pgbench_accounts INCLUDING ALL);
INSERT INTO local_copy.pgbench_accounts SELECT * FROM pgbench_accounts;
VACUUM ANALYZE local_copy.pgbench_accounts;
SELECT create_distributed_table('pgbench_accounts', 'aid');
SELECT shardext_run_on_shards('pgbench_accounts', 'VACUUM ANALYZE %s');
SQL

run_select() {	# OUT [search_path]
	PGOPTIONS="${2:+-c search_path=$2}" "$PGBENCH" -n -S -M prepared -c "$CLIENTS" -j 2 \
		-T "$SECONDS_PER_RUN" -h 127.0.0.1 -p "$PORT" -U postgres "$DB" >"$1" 2>&1
}
# cpu_and_statements: CPU ns of the coordinator's pgbench backends, and the
# statements routed to pgbench_accounts' shards so far
cpu_and_statements() {
	local pids ns=0 pid
	pids=$($PSQL -p "$PORT" -d "$DB" -c "SELECT pid FROM pg_stat_activity
		WHERE datname = '$DB' AND application_name = 'pgbench'")
	for pid in $pids; do
		ns=$((ns + $(cut -d' ' -f1 "/proc/$pid/schedstat" 2>/dev/null || echo 0)))
	done
	echo "$ns $($PSQL -p "$PORT" -d "$DB" -c "SELECT coalesce(sum(queries), 0) FROM shardext.stat_shards
		WHERE table_name = 'pgbench_accounts'::regclass")"
}
# measure OUT: a pgbench -S run; prints the tps and the coordinator's CPU
# microseconds per statement, taken between 1 s after the start and 1 s
# before the end (the same backends throughout)
measure() {
	local a b
	run_select "$1" &
	local bench=$!
	sleep 1
	a=$(cpu_and_statements)
	sleep $((SECONDS_PER_RUN - 2))
	b=$(cpu_and_statements)
	wait $bench
	awk -v t="$(tps "$1")" -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ");
		printf "%s %.2f\n", t, (y[1] - x[1]) / 1000 / (y[2] - x[2]) }'
}

echo
echo "1. pgbench -S -M prepared, $CLIENTS clients, ${SECONDS_PER_RUN}s runs, $ROUNDS rounds (2 shared cores)"
echo "   (tps, and CPU time of the coordinator's backends per statement, read from /proc)"
run_select "$TMP/local.out" local_copy,public
local_tps=$(tps "$TMP/local.out")
off=() on=() tenth=() off_cpu=() on_cpu=() tenth_cpu=() on_ratio=() tenth_ratio=()
for round in $(seq 1 "$ROUNDS"); do
	# the order of the three turns around from round to round
	for turn in 0 1 2; do
		case $(((round + turn) % 3)) in
			0) set_rate 0; read -r a ac < <(measure "$TMP/off.out") ;;
			1) set_rate 1; read -r b bc < <(measure "$TMP/on.out") ;;
			2) set_rate 0.1; read -r c cc < <(measure "$TMP/tenth.out") ;;
		esac
	done
	off+=("$a"); on+=("$b"); tenth+=("$c")
	off_cpu+=("$ac"); on_cpu+=("$bc"); tenth_cpu+=("$cc")
	on_ratio+=("$(awk -v a="$bc" -v b="$ac" 'BEGIN { printf "%.4f", a / b }')")
	tenth_ratio+=("$(awk -v a="$cc" -v b="$ac" 'BEGIN { printf "%.4f", a / b }')")
	printf '  round %d: off %6.0f tps %6.2f us | rate 1 %6.0f tps %6.2f us (%s) | rate 0.1 %6.0f tps %6.2f us (%s)\n' \
		"$round" "$a" "$ac" "$b" "$bc" "$(ratio "$bc" "$ac")" "$c" "$cc" "$(ratio "$cc" "$ac")"
done
set_rate 1
printf '  local table (one run, for scale): %.0f tps\n' "$local_tps"
printf '  median tps: off %.0f, rate 1 %.0f (%s), rate 0.1 %.0f (%s)\n' \
	"$(median "${off[@]}")" "$(median "${on[@]}")" "$(ratio "$(median "${on[@]}")" "$(median "${off[@]}")")" \
	"$(median "${tenth[@]}")" "$(ratio "$(median "${tenth[@]}")" "$(median "${off[@]}")")"
printf '  median coordinator CPU per statement: off %.2f us, rate 1 %.2f us, rate 0.1 %.2f us\n' \
	"$(median "${off_cpu[@]}")" "$(median "${on_cpu[@]}")" "$(median "${tenth_cpu[@]}")"
printf '  CPU per statement against off, per round: rate 1 median %s (range %s .. %s); rate 0.1 median %s (range %s .. %s)\n' \
	"$(ratio "$(median "${on_ratio[@]}")" 1)" \
	"$(ratio "$(printf '%s\n' "${on_ratio[@]}" | sort -g | head -1)" 1)" \
	"$(ratio "$(printf '%s\n' "${on_ratio[@]}" | sort -g | tail -1)" 1)" \
	"$(ratio "$(median "${tenth_ratio[@]}")" 1)" \
	"$(ratio "$(printf '%s\n' "${tenth_ratio[@]}" | sort -g | head -1)" 1)" \
	"$(ratio "$(printf '%s\n' "${tenth_ratio[@]}" | sort -g | tail -1)" 1)"

# the share of the coordinator backends' CPU spent counting tenants, from
# a profile: a ratio within one run, so load from elsewhere hardly moves it
if command -v perf >/dev/null 2>&1; then
	for rate in 1 0.1; do
		set_rate "$rate"
		run_select "$TMP/perf.out" &
		bench=$!
		sleep 1
		pids=$($PSQL -p "$PORT" -d "$DB" -c "SELECT string_agg(pid::text, ',') FROM pg_stat_activity
			WHERE datname = '$DB' AND application_name = 'pgbench'")
		# perf ends with status 143 when its timer ends
		perf record -q -F 1999 -g -p "$pids" -o "$TMP/perf.data" -- sleep $((SECONDS_PER_RUN - 2)) \
			>/dev/null 2>&1 || true
		wait $bench
		share=$(perf report -i "$TMP/perf.data" --children --sort symbol -g none 2>/dev/null |
			awk '$4 ~ /^(TenantSampleBegin|TenantSampleEnd|TenantStatsSampleNext)$/ { sub("%", "", $1); s += $1 }
				 END { printf "%.2f", s }')
		printf '  profile (perf, rate %s, %.0f tps): %s%% of the coordinator backends'"'"' CPU is in tenant statistics\n' \
			"$rate" "$(tps "$TMP/perf.out")" "$share"
	done
	set_rate 1
fi

[ -z "${BENCH_SKIP_MIX:-}" ] || exit 0

# 2. the skewed mix, before and after isolating the hot tenant on worker 3
$PSQL -p "$PORT" -d "$DB" <<SQL
SET client_min_messages TO warning;
CREATE TABLE tenant_counters (tenant_id int, id int, counter bigint NOT NULL DEFAULT 0,
							  PRIMARY KEY (tenant_id, id));
INSERT INTO tenant_counters SELECT t, g, 0 FROM generate_series(1, 1001) t, generate_series(1, 50) g;
SELECT create_distributed_table('tenant_counters', 'tenant_id', shard_count => 12);
SELECT shardext_add_node('127.0.0.1', $W3);
SQL
cat >"$TMP/hot.sql" <<'EOF'
\set id random(1, 50)
UPDATE tenant_counters SET counter = counter + 1 WHERE tenant_id = 1001 AND id = :id;
SELECT counter FROM tenant_counters WHERE tenant_id = 1001 AND id = :id;
EOF
cat >"$TMP/uniform.sql" <<'EOF'
\set t random(1, 1000)
\set id random(1, 50)
UPDATE tenant_counters SET counter = counter + 1 WHERE tenant_id = :t AND id = :id;
SELECT counter FROM tenant_counters WHERE tenant_id = :t AND id = :id;
EOF
run_mix() {
	"$PGBENCH" -n -M prepared -c "$CLIENTS" -j 2 -T "$SECONDS_PER_RUN" -h 127.0.0.1 -p "$PORT" \
		-U postgres -f "$TMP/hot.sql@1" -f "$TMP/uniform.sql@1" "$DB" >"$1" 2>&1
}
node_of_hot() {
	$PSQL -p "$PORT" -d "$DB" -c "SELECT node_port FROM shardext.shards
		WHERE shard_id = shardext_shard_for_value('tenant_counters', '1001')"
}
echo
echo "2. skewed mix (50% one tenant, 50% over 1000 tenants; UPDATE + SELECT), $CLIENTS clients;"
echo "   12 shards on workers 1 and 2, worker 3 empty until the hot tenant is isolated there"
before=() after=()
for round in $(seq 1 "$ROUNDS"); do run_mix "$TMP/before.out"; before+=("$(tps "$TMP/before.out")"); done
echo "  before: hot tenant in a shard of 1/12 of the hash space on port $(node_of_hot): ${before[*]} tps"
$PSQL -p "$PORT" -d "$DB" -c "SET client_min_messages TO warning" \
	-c "SELECT shardext_isolate_tenant('tenant_counters', '1001',
		(SELECT node_id FROM shardext.nodes WHERE node_port = $W3))" \
	-c "SELECT shardext_stat_shards_reset()" >/dev/null
for round in $(seq 1 "$ROUNDS"); do run_mix "$TMP/after.out"; after+=("$(tps "$TMP/after.out")"); done
echo "  after: hot tenant isolated on port $(node_of_hot): ${after[*]} tps"
printf '  median: before %.0f tps, after %.0f tps (%s)\n' "$(median "${before[@]}")" \
	"$(median "${after[@]}")" "$(ratio "$(median "${after[@]}")" "$(median "${before[@]}")")"
$PSQL -p "$PORT" -d "$DB" -c "SELECT 'node load after: ' || string_agg(node_port || ' ' ||
	coalesce(share_percent, 0) || '%', ', ' ORDER BY node_port) FROM shardext_hot_shard_report(0)
	WHERE kind = 'node'"
