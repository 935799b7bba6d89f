#!/usr/bin/env bash
# Concurrent writers on the same keys: four pgbench clients run INSERT ...
# ON CONFLICT DO UPDATE (one row, and rows of two shards), MERGE pushed down
# to a shard and MERGE through the coordinator, each adding 1 to a row, on
# a distributed table; then the same clients (same seed, so the same
# statements) on a local table.  No update may be lost, no transaction may
# fail, and the final rows must be the same.
source "$(dirname "$0")/lib/common.sh"
work=$(mktemp -d)
chmod 755 "$work"
cleanup() {
	coord "DROP TABLE IF EXISTS cu_dist, cu_local; DROP FUNCTION IF EXISTS cu_plus(int)" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
coord "DROP TABLE IF EXISTS cu_dist, cu_local; DROP FUNCTION IF EXISTS cu_plus(int)" >/dev/null 2>&1

coord "CREATE TABLE cu_dist (k int PRIMARY KEY, v int NOT NULL);
	   SELECT create_distributed_table('cu_dist', 'k', shard_count => 4);
	   CREATE TABLE cu_local (k int PRIMARY KEY, v int NOT NULL);
	   INSERT INTO cu_dist SELECT g, 0 FROM generate_series(1, 20) g;
	   INSERT INTO cu_local SELECT g, 0 FROM generate_series(1, 20) g;
	   CREATE FUNCTION cu_plus(int) RETURNS int LANGUAGE sql AS 'SELECT \$1 + 1'" >/dev/null

# keys 1..20 exist (MERGE always matches); the upserts also insert 21..30
cat >"$work/upsert.sql" <<'SQL'
\set k random(1, 30)
INSERT INTO TBL (k, v) VALUES (:k, 1) ON CONFLICT (k) DO UPDATE SET v = TBL.v + 1;
SQL
cat >"$work/upsert_two.sql" <<'SQL'
\set a random(1, 15)
\set b random(16, 30)
INSERT INTO TBL AS t (k, v) VALUES (:a, 1), (:b, 1) ON CONFLICT ON CONSTRAINT TBL_pkey DO UPDATE SET v = t.v + 1;
SQL
cat >"$work/merge.sql" <<'SQL'
\set k random(1, 20)
MERGE INTO TBL t USING (VALUES (:k)) s(k) ON t.k = s.k
	WHEN MATCHED THEN UPDATE SET v = t.v + 1 WHEN NOT MATCHED THEN INSERT VALUES (s.k, 1);
SQL
cat >"$work/merge_coordinator.sql" <<'SQL'
\set a random(1, 10)
\set b random(11, 20)
MERGE INTO TBL t USING (VALUES (:a), (:b)) s(k) ON t.k = s.k
	WHEN MATCHED THEN UPDATE SET v = cu_plus(t.v);
SQL

run_clients() {	# table
	local table=$1 scripts=()
	for f in upsert upsert_two merge merge_coordinator; do
		sed "s/TBL/$table/g" "$work/$f.sql" >"$work/$table.$f.sql"
		scripts+=(-f "$work/$table.$f.sql")
	done
	chmod 644 "$work"/*.sql
	timeout 300 "$BINDIR/pgbench" -n -h 127.0.0.1 -p "$COORDINATOR_PORT" -U postgres -c 4 -j 4 \
		-t 150 --random-seed=20241201 --max-tries=20 "${scripts[@]}" "$DB" 2>&1
}

out=$(run_clients cu_dist) || fail "pgbench on the distributed table failed: $out"
echo "$out" | grep -E "^number of (transactions actually processed|failed)"
expect_eq "no transaction failed on the distributed table" "0" \
	"$(echo "$out" | sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p')"
out=$(run_clients cu_local) || fail "pgbench on the local table failed: $out"
expect_eq "no transaction failed on the local table" "0" \
	"$(echo "$out" | sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p')"

# every client statement added 1 to one row (2 for the two-row ones)
expect_eq "no update was lost" "$(coord "SELECT sum(v) FROM cu_local")" \
	"$(coord "SELECT sum(v) FROM cu_dist")"
expect_eq "the distributed table ends up as the local one" \
	"$(coord "SELECT string_agg(k || ':' || v, ' ' ORDER BY k) FROM cu_local")" \
	"$(coord "SELECT string_agg(k || ':' || v, ' ' ORDER BY k) FROM cu_dist")"
