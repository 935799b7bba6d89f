#!/usr/bin/env bash
# pgbench -i into distributed pgbench tables: pgbench creates the tables
# (-I dt), they are distributed, then pgbench loads them (-I gvp: TRUNCATE
# and COPY ... FREEZE in one transaction, VACUUM, primary keys) at scale 10
# -- the README's recipe -- and a short TPC-B run works on them.
source "$(dirname "$0")/lib/common.sh"
cleanup() { coord "DROP SCHEMA IF EXISTS pgbinit CASCADE" >/dev/null 2>&1; }
trap cleanup EXIT
cleanup
coord "CREATE SCHEMA pgbinit" >/dev/null
# pgbench's tables live in schema pgbinit
pgb() {
	PGOPTIONS="-c search_path=pgbinit" timeout 300 "$BINDIR/pgbench" -h 127.0.0.1 \
		-p "$COORDINATOR_PORT" -U postgres "$@" "$DB" 2>&1
}

out=$(pgb -i -I dt -s 10) || fail "pgbench -i -I dt: $out"
coord "SELECT create_distributed_table('pgbinit.pgbench_accounts', 'aid');
	   SELECT create_distributed_table('pgbinit.pgbench_history', 'aid',
	                                   colocate_with => 'pgbinit.pgbench_accounts');
	   SELECT create_distributed_table('pgbinit.pgbench_branches', 'bid');
	   SELECT create_distributed_table('pgbinit.pgbench_tellers', 'tid')" >/dev/null
out=$(pgb -i -I gvp -s 10) || fail "pgbench -i -I gvp: $out"
echo "$out" | grep -E "^done"
expect_eq "the accounts are loaded" "1000000 10" \
	"$(coord "SELECT count(*), count(DISTINCT bid) FROM pgbinit.pgbench_accounts" | tr '|' ' ')"
expect_eq "the tables stay distributed, with their keys" "4 3" \
	"$(coord "SELECT count(*), count(*) FILTER (WHERE EXISTS (SELECT 1 FROM pg_index i
	          WHERE i.indrelid = t.logicalrelid AND i.indisprimary))
	          FROM shardext.tables t WHERE t.logicalrelid::text LIKE 'pgbinit.%'" | tr '|' ' ')"
# loading again (TRUNCATE + COPY FREEZE of the existing tables) works too
out=$(pgb -i -I g -s 10) || fail "pgbench -i -I g: $out"
out=$(pgb -n -c 2 -j 2 -t 50) || fail "pgbench TPC-B: $out"
expect_eq "TPC-B transactions on the distributed tables" "100/100" \
	"$(echo "$out" | sed -nE 's/^number of transactions actually processed: ([0-9/]+).*/\1/p')"
expect_eq "every transaction left its history row" "100" \
	"$(coord "SELECT count(*) FROM pgbinit.pgbench_history")"
