#!/usr/bin/env bash
# Hot tenants under a real skewed load: pgbench clients send half of their
# statements to one tenant and spread the rest uniformly over 200 others.
#  - shardext.stat_tenants, sampling as by default, ranks the hot tenant
#    first, with a share within 3 points of the truth computed from
#    pgbench's own per-script counts;
#  - counting every statement, 100,000 more distinct tenants leave the
#    shared memory of the counters as it was, the number of entries within
#    shardext.stat_tenants_limit, and the hot tenant on top with its true
#    count within the bounds shown (Space-Saving keeps every tenant above N/K);
#  - after a third worker joins, the by_load plan lowers the hottest node's
#    share of the statements;
#  - isolating the hot tenant onto the third worker while clients write
#    (each write recorded in a ledger on the coordinator in the same
#    transaction) fails no client transaction, loses no committed row, and
#    leaves nothing behind; by_load then leaves the isolated shard alone.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/moves.sh"
cleanup() {
	moves_drop_database
	cluster stop-node worker3 >/dev/null 2>&1
	"$BINDIR/psql" -X -q -h 127.0.0.1 -U postgres -p "$COORDINATOR_PORT" -d postgres \
		-c "ALTER SYSTEM RESET shardext.stat_tenants_period" \
		-c "ALTER SYSTEM RESET shardext.stat_tenants_sample_rate" -c "SELECT pg_reload_conf()" \
		>/dev/null 2>&1
	rm -f "$WORK"/*
	rmdir "$WORK"
}
[ -n "${KEEP:-}" ] || trap cleanup EXIT
WORK=$(mktemp -d)
chmod 777 "$WORK"
HOT=42

# one period for the whole test
"$BINDIR/psql" -X -q -h 127.0.0.1 -U postgres -p "$COORDINATOR_PORT" -d postgres \
	-c "ALTER SYSTEM SET shardext.stat_tenants_period = '1h'" -c "SELECT pg_reload_conf()" >/dev/null ||
	fail "set the period"

moves_database hot_tenants
coord "CREATE TABLE tenant_rows (tenant_id int NOT NULL, id bigint NOT NULL, counter int NOT NULL,
		   PRIMARY KEY (tenant_id, id));
	   INSERT INTO tenant_rows SELECT t, g, 0 FROM generate_series(1, 250) t, generate_series(1, 4) g;
	   CREATE TABLE tenant_events (tenant_id int NOT NULL, id bigint NOT NULL);
	   SET client_min_messages = warning;
	   SELECT create_distributed_table('tenant_rows', 'tenant_id', shard_count => 8);
	   SELECT create_distributed_table('tenant_events', 'tenant_id', colocate_with => 'tenant_rows');
	   CREATE TABLE ledger_rows (tenant_id int NOT NULL, id bigint NOT NULL, PRIMARY KEY (tenant_id, id));
	   CREATE TABLE ledger_counts (tenant_id int NOT NULL, id bigint NOT NULL, n int NOT NULL,
		   PRIMARY KEY (tenant_id, id));
	   INSERT INTO ledger_counts SELECT t, g, 0 FROM generate_series(1, 250) t, generate_series(1, 4) g;" \
	>/dev/null || fail "setup"

cat >"$WORK/hot_read.sql" <<EOF
\set id random(1, 4)
SELECT counter FROM tenant_rows WHERE tenant_id = $HOT AND id = :id;
EOF
cat >"$WORK/uniform_read.sql" <<'EOF'
\set t random(43, 242)
\set id random(1, 4)
SELECT counter FROM tenant_rows WHERE tenant_id = :t AND id = :id;
EOF
# writes: a new row and a counter, each with its ledger row in the same transaction
cat >"$WORK/hot_write.sql" <<EOF
\set id random(1000, 9000000000000000000)
\set k random(1, 4)
BEGIN;
INSERT INTO tenant_rows (tenant_id, id, counter) VALUES ($HOT, :id, 0);
INSERT INTO tenant_events (tenant_id, id) VALUES ($HOT, :id);
INSERT INTO ledger_rows (tenant_id, id) VALUES ($HOT, :id);
UPDATE tenant_rows SET counter = counter + 1 WHERE tenant_id = $HOT AND id = :k;
UPDATE ledger_counts SET n = n + 1 WHERE tenant_id = $HOT AND id = :k;
END;
EOF
sed -e 's/^\\set k random(1, 4)$/\\set k random(1, 4)\n\\set t random(43, 242)/' \
	-e "s/\b$HOT\b/:t/g" "$WORK/hot_write.sql" >"$WORK/uniform_write.sql"

# run_pgbench OUT ARGS...: pgbench through the coordinator
run_pgbench() {
	local out=$1
	shift
	"$BINDIR/pgbench" -h 127.0.0.1 -p "$COORDINATOR_PORT" -U postgres -n "$@" "$DB" >"$out" 2>&1
}
# script_count OUT N: transactions of the N-th script in a pgbench output
script_count() {
	grep -E '^ - [0-9]+ transactions' "$1" | sed -n "$2p" | awk '{print $2}'
}
expect_no_failures() {
	grep -q "number of failed transactions: 0 " "$2" || fail "$1: failed transactions: $(cat "$2")"
	echo "ok - $1: no failed client transaction ($(grep -o 'actually processed: [0-9]*' "$2"))"
}

# set_rate RATE: shardext.stat_tenants_sample_rate for new sessions
set_rate() {
	"$BINDIR/psql" -X -q -h 127.0.0.1 -U postgres -p "$COORDINATOR_PORT" -d postgres \
		-c "ALTER SYSTEM SET shardext.stat_tenants_sample_rate = $1" -c "SELECT pg_reload_conf()" \
		>/dev/null || fail "set the sample rate"
	# new sessions (pgbench's) start with the new rate once the postmaster reloaded
	wait_for "the sample rate $1 is taken up" 10 \
		sql_is "$COORDINATOR_PORT" "SHOW shardext.stat_tenants_sample_rate" "$1"
}

# 1. the hot tenant is found, with its share, sampling one statement in ten
set_rate 0.1
coord "SELECT shardext_stat_tenants_reset(), shardext_stat_shards_reset()" >/dev/null
run_pgbench "$WORK/skew.out" -M prepared -c 4 -j 2 -T 6 \
	-f "$WORK/hot_read.sql@1" -f "$WORK/uniform_read.sql@1" || fail "pgbench: $(cat "$WORK/skew.out")"
expect_no_failures "skewed reads" "$WORK/skew.out"
hot=$(script_count "$WORK/skew.out" 1)
uniform=$(script_count "$WORK/skew.out" 2)
truth=$(awk -v h="$hot" -v u="$uniform" 'BEGIN { printf "%.2f", 100 * h / (h + u) }')
expect_eq "stat_tenants: the hot tenant first" "$HOT" \
	"$(coord "SELECT tenant_value FROM shardext.stat_tenants WHERE table_name = 'tenant_rows'::regclass
		ORDER BY statements DESC LIMIT 1")"
measured=$(coord "SELECT share_percent FROM shardext.stat_tenants WHERE tenant_value = '$HOT'")
expect_eq "stat_tenants: share $measured% within 3 points of the truth, $truth%" "t" \
	"$(coord "SELECT abs($measured - $truth) <= 3")"
counted=$(coord "SELECT period_total FROM shardext.stat_tenants_counters() LIMIT 1")
expect_eq "stat_tenants: statements estimated from the sample ($counted for $hot + $uniform)" "t" \
	"$(coord "SELECT abs($counted - $hot - $uniform) <= 8 + ($hot + $uniform) / 20")"
expect_eq "stat_tenants: the hot tenant's shard and node" "t" \
	"$(coord "SELECT t.shard_id = shardext_shard_for_value('tenant_rows', '$HOT') AND t.node_id = s.node_id
		FROM shardext.stat_tenants t JOIN shardext.shards s USING (shard_id) WHERE t.tenant_value = '$HOT'")"

# 2. counting every statement, then 100,000 more tenants: fixed memory
set_rate 1
coord "SELECT shardext_stat_tenants_reset()" >/dev/null
run_pgbench "$WORK/skew1.out" -M prepared -c 4 -j 2 -T 3 \
	-f "$WORK/hot_read.sql@1" -f "$WORK/uniform_read.sql@1" || fail "pgbench: $(cat "$WORK/skew1.out")"
hot=$(script_count "$WORK/skew1.out" 1)
uniform=$(script_count "$WORK/skew1.out" 2)
counted=$(coord "SELECT period_total FROM shardext.stat_tenants_counters() LIMIT 1")
expect_eq "stat_tenants at rate 1: every statement counted ($counted of $hot + $uniform)" "t" \
	"$(coord "SELECT abs($counted - $hot - $uniform) <= 8 + ($hot + $uniform) / 1000")"
LIMIT=$(coord "SHOW shardext.stat_tenants_limit")
shmem() {
	coord "SELECT sum(size) || '/' || count(*) FROM pg_shmem_allocations"
}
SHMEM_BEFORE=$(shmem)
cat >"$WORK/many.sql" <<'EOF'
\set t random(1000000, 2000000000)
SELECT counter FROM tenant_rows WHERE tenant_id = :t AND id = 1;
EOF
run_pgbench "$WORK/many.out" -M prepared -c 4 -j 2 -t 25000 -f "$WORK/many.sql" ||
	fail "pgbench: $(cat "$WORK/many.out")"
expect_eq "100,000 tenants: shared memory as it was" "$SHMEM_BEFORE" "$(shmem)"
expect_eq "100,000 tenants: at most shardext.stat_tenants_limit ($LIMIT) entries" "t" \
	"$(coord "SELECT count(*) <= $LIMIT AND count(*) > $LIMIT / 2 FROM shardext.stat_tenants_counters()")"
expect_eq "100,000 tenants: the hot tenant still first" "$HOT" \
	"$(coord "SELECT tenant_value FROM shardext.stat_tenants ORDER BY statements DESC LIMIT 1")"
expect_eq "100,000 tenants: the hot tenant's true count ($hot) within its bounds" "t" \
	"$(coord "SELECT statements <= $hot + 8 + $hot / 1000 AND statements + count_error >= $hot - 8
		FROM shardext.stat_tenants WHERE tenant_value = '$HOT'")"

# 3. a third worker; by_load lowers the hottest node's share
if [ -d "$SHARDEXT_CLUSTER_DIR/worker3" ]; then cluster start-node worker3; else cluster add-worker >/dev/null; fi
psql_at "$COORDINATOR_PORT" -c "SET client_min_messages = warning" \
	-c "SELECT shardext_add_node('127.0.0.1', $WORKER_3_PORT)" >/dev/null || fail "add worker 3"
W3=$(node_id_of_port "$WORKER_3_PORT")
coord "SELECT shardext_stat_shards_reset()" >/dev/null
run_pgbench "$WORK/skew2.out" -M prepared -c 4 -j 2 -T 3 \
	-f "$WORK/hot_read.sql@1" -f "$WORK/uniform_read.sql@1" || fail "pgbench: $(cat "$WORK/skew2.out")"
"$ROOT/scripts/rebalance" --plan --strategy by_load -- -h 127.0.0.1 -p "$COORDINATOR_PORT" \
	-U postgres -d "$DB" >"$WORK/plan.out" 2>&1 || fail "scripts/rebalance --plan: $(cat "$WORK/plan.out")"
grep -q "Rebalance plan (by_load, online)" "$WORK/plan.out" || fail "no plan shown: $(cat "$WORK/plan.out")"
grep -Eq "^ +1 \| tenant_rows +\| $HOT " "$WORK/plan.out" || fail "hot tenant not in the report: $(cat "$WORK/plan.out")"
expect_eq "by_load: the hottest node's share goes down" "t" \
	"$(coord "WITH p AS (SELECT * FROM shardext_rebalance_plan('by_load')),
		before AS (SELECT node_id, statements::float8 AS load FROM shardext_hot_shard_report(0)
				   WHERE kind = 'node'),
		after AS (SELECT b.node_id, b.load
				   - coalesce((SELECT sum(shard_group_load) FROM p WHERE source_node_id = b.node_id), 0)
				   + coalesce((SELECT sum(shard_group_load) FROM p WHERE target_node_id = b.node_id), 0) AS load
				  FROM before b)
		SELECT (SELECT max(load) FROM after) < (SELECT max(load) FROM before)
		   AND (SELECT count(*) FROM p) > 0")"

# 4. isolate the hot tenant onto worker 3 while clients write
rows_before=$(coord "SELECT count(*) FROM ledger_rows")
run_pgbench "$WORK/write.out" -c 6 -j 2 -T 10 \
	-f "$WORK/hot_write.sql@1" -f "$WORK/uniform_write.sql@1" &
LOAD_PID=$!
wait_sql "the write load commits" 30 "$COORDINATOR_PORT" "SELECT count(*) > $rows_before FROM ledger_rows"
psql_at "$COORDINATOR_PORT" -c "SET client_min_messages = warning" \
	-c "SELECT shardext_isolate_tenant('tenant_rows', '$HOT', $W3)" >"$WORK/isolate.out" 2>&1 ||
	fail "isolate: $(cat "$WORK/isolate.out")"
wait "$LOAD_PID" || fail "write load: $(cat "$WORK/write.out")"
expect_no_failures "isolation under writes" "$WORK/write.out"
ISOLATED=$(tail -1 "$WORK/isolate.out")
expect_eq "isolation: the tenant's shard holds one hash value, on worker 3, for both tables" \
	"$WORKER_3_PORT|$WORKER_3_PORT|t" \
	"$(coord "SELECT string_agg(node_port::text, '|' ORDER BY logicalrelid::text) || '|' ||
		CASE WHEN bool_and(hash_min = hash_max) THEN 't' ELSE 'f' END FROM shardext.shards WHERE hash_min =
		(SELECT hash_min FROM shardext.shards WHERE shard_id = $ISOLATED)")"
expect_eq "isolation: it is the tenant's shard" "$ISOLATED" \
	"$(coord "SELECT shardext_shard_for_value('tenant_rows', '$HOT')")"
expect_eq "isolation: rows match the ledger" \
	"$(coord "SELECT count(*) || ':' || sum(id::numeric) FROM ledger_rows")" \
	"$(coord "SELECT count(*) || ':' || sum(id::numeric) FROM tenant_rows WHERE id >= 1000")"
expect_eq "isolation: rows without a key match the ledger" \
	"$(coord "SELECT count(*) || ':' || sum(id::numeric) FROM ledger_rows")" \
	"$(coord "SELECT count(*) || ':' || sum(id::numeric) FROM tenant_events")"
expect_eq "isolation: counters match the ledger" \
	"$(coord "SELECT md5(string_agg(tenant_id || '/' || id || ':' || n, ',' ORDER BY tenant_id, id)) FROM ledger_counts")" \
	"$(coord "SELECT md5(string_agg(tenant_id || '/' || id || ':' || counter, ',' ORDER BY tenant_id, id))
		FROM tenant_rows WHERE id < 1000")"
expect_eq "isolation: the hot tenant's rows are all on worker 3" \
	"$(coord "SELECT count(*) FROM tenant_rows WHERE tenant_id = $HOT")" \
	"$(psql_at "$WORKER_3_PORT" -c "SELECT count(*) FROM $(coord "SELECT shard_name FROM shardext.shards WHERE shard_id = $ISOLATED")")"
expect_no_leftovers "isolation"

# 5. by_load leaves the isolated tenant where it was put
coord "SELECT shardext_stat_shards_reset()" >/dev/null
run_pgbench "$WORK/skew3.out" -M prepared -c 4 -j 2 -T 3 \
	-f "$WORK/hot_read.sql@1" -f "$WORK/uniform_read.sql@1" || fail "pgbench: $(cat "$WORK/skew3.out")"
expect_eq "by_load after isolation: the isolated shard stays" "0" \
	"$(coord "SELECT count(*) FROM shardext_rebalance_plan('by_load') p JOIN shardext.shards s
		USING (shard_id) WHERE s.hash_min = s.hash_max")"
expect_eq "by_load after isolation: the isolated group counts on worker 3" "t" \
	"$(coord "SELECT share_percent > 30 FROM shardext_hot_shard_report(0)
		WHERE kind = 'node' AND node_port = $WORKER_3_PORT")"
