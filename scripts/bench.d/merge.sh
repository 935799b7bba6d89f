#!/usr/bin/env bash
# scripts/bench.d/merge.sh: the SQL of issue 14, side by side on a plain
# local table and on shardext distributed tables:
#   - a bulk MERGE of BENCH_SOURCE_ROWS source rows (half matching) into a
#     table of BENCH_ROWS rows: from a co-located source (pushed down to the
#     shards) and from a source that is not co-located (through the
#     coordinator);
#   - a bulk UPDATE with a user-defined function of the rows' columns
#     (through the coordinator, by ctid) and the same UPDATE shippable
#     (pushed down);
#   - point upserts by key with pgbench -M prepared: MERGE and INSERT ...
#     ON CONFLICT ON CONSTRAINT;
#   - pgbench -i -s 10 (TRUNCATE + COPY FREEZE, VACUUM, primary keys).
# postgres_fdw cannot run MERGE or ON CONFLICT DO UPDATE on foreign tables
# (PostgreSQL 15), so it has no column here.
#
# Each bulk statement runs in a transaction that is rolled back, BENCH_ROUNDS
# times per system in turns; the best time counts.
#
# Environment: SHARDEXT_PORT (coordinator; workers on the next two ports),
# PG_CONFIG, BENCH_ROWS (default 1000000), BENCH_SOURCE_ROWS (default 100000),
# BENCH_SECONDS per pgbench run (default 5), BENCH_ROUNDS (default 3),
# BENCH_CLIENTS (default 4).
set -euo pipefail
source "$(dirname "$0")/lib/env.sh"
ROWS=${BENCH_ROWS:-1000000}
SOURCE_ROWS=${BENCH_SOURCE_ROWS:-100000}
SECONDS_PER_RUN=${BENCH_SECONDS:-5}
ROUNDS=${BENCH_ROUNDS:-3}
CLIENTS=${BENCH_CLIENTS:-4}
DB=bench_merge
TMP=$(mktemp -d)
chmod 755 "$TMP"
trap 'rm -rf "$TMP"' EXIT

echo "setting up $ROWS target rows and $SOURCE_ROWS source rows, local and distributed ..."
for port in $PORT $W1 $W2; do
	$PSQL -p $port -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
done
$PSQL -p $PORT -d $DB <<SQL
SET client_min_messages TO warning;
CREATE EXTENSION shardext;
SELECT shardext_add_node('127.0.0.1', $W1);
SELECT shardext_add_node('127.0.0.1', $W2);
CREATE FUNCTION bump(int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT \$1 + 1';
CREATE TABLE t_local (id int PRIMARY KEY, v int NOT NULL, note text);
CREATE TABLE s_local (id int, v int);
CREATE TABLE t_dist (id int PRIMARY KEY, v int NOT NULL, note text);
CREATE TABLE s_colo (id int, v int);
CREATE TABLE s_other (id int, v int);
INSERT INTO t_local SELECT g, 0, 'row ' || g FROM generate_series(1, $ROWS) g;
INSERT INTO s_local SELECT g * 2 + $ROWS / 2 - $SOURCE_ROWS, g FROM generate_series(1, $SOURCE_ROWS) g;
SELECT create_distributed_table('t_dist', 'id');
SELECT create_distributed_table('s_colo', 'id', colocate_with => 't_dist');
SELECT create_distributed_table('s_other', 'id', shard_count => 16);
INSERT INTO t_dist SELECT * FROM t_local;
INSERT INTO s_colo SELECT * FROM s_local;
INSERT INTO s_other SELECT * FROM s_local;
VACUUM ANALYZE t_local, s_local, t_dist, s_colo, s_other;
SQL

# best_ms SQL: best time of ROUNDS runs of SQL in a rolled-back transaction
best_ms() {
	local best=""
	for _ in $(seq "$ROUNDS"); do
		local ms
		ms=$($PSQL -p $PORT -d $DB -c "BEGIN" -c '\timing on' -c "$1" -c "ROLLBACK" 2>&1 |
			sed -nE 's/^Time: ([0-9.]+) ms.*/\1/p' | head -1)
		if [ -z "$best" ] || awk "BEGIN{exit !($ms < $best)}"; then best=$ms; fi
	done
	echo "$best"
}
ratio() { awk "BEGIN{printf \"%.2fx\", $1 / $2}"; }

MERGE_L="MERGE INTO t_local t USING s_local s ON t.id = s.id
	WHEN MATCHED THEN UPDATE SET v = t.v + s.v WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v, 'new')"
MERGE_C="MERGE INTO t_dist t USING s_colo s ON t.id = s.id
	WHEN MATCHED THEN UPDATE SET v = t.v + s.v WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v, 'new')"
MERGE_O="MERGE INTO t_dist t USING s_other s ON t.id = s.id
	WHEN MATCHED THEN UPDATE SET v = t.v + s.v WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v, 'new')"
UPDATE_FN_L="UPDATE t_local SET v = bump(v) WHERE id % 10 = 0"
UPDATE_FN_D="UPDATE t_dist SET v = bump(v) WHERE id % 10 = 0"
UPDATE_D="UPDATE t_dist SET v = v + 1 WHERE id % 10 = 0"

echo "bulk statements (best of $ROUNDS, rolled back):"
local_merge=$(best_ms "$MERGE_L")
colo_merge=$(best_ms "$MERGE_C")
other_merge=$(best_ms "$MERGE_O")
printf "  MERGE of %d rows   local %8.1f ms | co-located source (pushed down) %8.1f ms (%s) | other source (coordinator) %8.1f ms (%s)\n" \
	"$SOURCE_ROWS" "$local_merge" "$colo_merge" "$(ratio "$colo_merge" "$local_merge")" \
	"$other_merge" "$(ratio "$other_merge" "$local_merge")"
local_update=$(best_ms "$UPDATE_FN_L")
fn_update=$(best_ms "$UPDATE_FN_D")
pushed_update=$(best_ms "$UPDATE_D")
printf "  UPDATE of %d rows  local (function) %8.1f ms | function (coordinator, by ctid) %8.1f ms (%s) | shippable (pushed down) %8.1f ms (%s)\n" \
	"$((ROWS / 10))" "$local_update" "$fn_update" "$(ratio "$fn_update" "$local_update")" \
	"$pushed_update" "$(ratio "$pushed_update" "$local_update")"

# point upserts
for table in t_local t_dist; do
	cat >"$TMP/merge_$table.sql" <<SQL
\set id random(1, $((ROWS * 11 / 10)))
MERGE INTO $table t USING (VALUES (:id::int)) s(id) ON t.id = s.id
	WHEN MATCHED THEN UPDATE SET v = t.v + 1 WHEN NOT MATCHED THEN INSERT VALUES (s.id, 1, 'new');
SQL
	cat >"$TMP/upsert_$table.sql" <<SQL
\set id random(1, $((ROWS * 11 / 10)))
INSERT INTO $table VALUES (:id::int, 1, 'new') ON CONFLICT ON CONSTRAINT ${table}_pkey DO UPDATE SET v = $table.v + 1;
SQL
done
chmod 644 "$TMP"/*.sql
tps() {	# script
	local best=0
	for _ in $(seq "$ROUNDS"); do
		local t
		t=$("$PGBENCH" -n -h 127.0.0.1 -p $PORT -U postgres -M prepared -c "$CLIENTS" -j "$CLIENTS" \
			-T "$SECONDS_PER_RUN" -f "$1" $DB 2>&1 | sed -nE 's/^tps = ([0-9.]+).*/\1/p')
		if awk "BEGIN{exit !($t > $best)}"; then best=$t; fi
	done
	echo "$best"
}
echo "point upserts by key ($CLIENTS clients, -M prepared, best of $ROUNDS x ${SECONDS_PER_RUN}s):"
for kind in merge upsert; do
	l=$(tps "$TMP/${kind}_t_local.sql")
	d=$(tps "$TMP/${kind}_t_dist.sql")
	printf "  %-28s local %8.0f tps | shardext %8.0f tps (%s)\n" \
		"$([ $kind = merge ] && echo "MERGE ... VALUES (:id::int)" || echo "ON CONFLICT ON CONSTRAINT")" \
		"$l" "$d" "$(ratio "$d" "$l")"
done

# pgbench -i -s 10 into local and into distributed tables
echo "pgbench -i -s 10 (generate with COPY FREEZE, vacuum, primary keys):"
for schema in pgb_local pgb_dist; do
	$PSQL -p $PORT -d $DB -c "DROP SCHEMA IF EXISTS $schema CASCADE" -c "CREATE SCHEMA $schema"
	PGOPTIONS="-c search_path=$schema" "$PGBENCH" -i -I dt -s 10 -h 127.0.0.1 -p $PORT -U postgres $DB >/dev/null 2>&1
done
$PSQL -p $PORT -d $DB <<SQL >/dev/null
SELECT create_distributed_table('pgb_dist.pgbench_accounts', 'aid');
SELECT create_distributed_table('pgb_dist.pgbench_history', 'aid', colocate_with => 'pgb_dist.pgbench_accounts');
SELECT create_distributed_table('pgb_dist.pgbench_branches', 'bid');
SELECT create_distributed_table('pgb_dist.pgbench_tellers', 'tid');
SQL
for schema in pgb_local pgb_dist; do
	PGOPTIONS="-c search_path=$schema" "$PGBENCH" -i -I gvp -s 10 -h 127.0.0.1 -p $PORT -U postgres $DB 2>&1 |
		sed -nE "s/^done in (.*)/  $schema: \1/p"
done
