#!/usr/bin/env bash
# scripts/bench.d/global_index.sh: a global unique index on email of users
# distributed by id (BENCH_ROWS rows, 32 shards), side by side with the
# same table without the index and with a plain local table that has a
# unique index on email:
#   - point lookups by email (pgbench -M prepared): through the global
#     index (one lookup in the index shard, then the one base shard) against
#     the scatter to every shard of the table without it (target: >= 5x);
#     both tables have a plain index on email in each shard;
#   - single-row INSERTs of new users: with the index (its entry is written
#     in the same transaction) against without (target: >= 0.5x);
#   - UPDATEs of a user's email by id: with the index (the row is read and
#     locked, updated by ctid, its old entry claimed and deleted, the new one
#     inserted) against without;
#   - the time to build the index over the rows (writes through the
#     coordinator wait meanwhile, reads go on).
# Each pair is measured in turns, BENCH_ROUNDS times, best round counts.
# (postgres_fdw partitions have no global unique index; a lookup by email
# there is a scatter like shardext's without the index.)
#
# Environment: SHARDEXT_PORT (coordinator; workers on the next two ports),
# PG_CONFIG, BENCH_ROWS (default 1000000), BENCH_SECONDS per run (default 5),
# BENCH_ROUNDS (default 2), BENCH_CLIENTS (default 4).
set -euo pipefail
source "$(dirname "$0")/lib/env.sh"
ROWS=${BENCH_ROWS:-1000000}
SECONDS_PER_RUN=${BENCH_SECONDS:-5}
ROUNDS=${BENCH_ROUNDS:-2}
CLIENTS=${BENCH_CLIENTS:-4}
DB=bench_gindex
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "setting up $ROWS users three ways (local, shardext without and with the global index) ..."
for port in $PORT $W1 $W2; do
	$PSQL -p $port -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
done
$PSQL -p $PORT -d $DB <<SQL
SET client_min_messages TO warning;
CREATE EXTENSION shardext;
SELECT shardext_add_node('127.0.0.1', $W1);
SELECT shardext_add_node('127.0.0.1', $W2);
CREATE TABLE gi_local (id bigint PRIMARY KEY, email text NOT NULL UNIQUE, name text);
INSERT INTO gi_local SELECT g, 'user' || g || '@example.com', 'name ' || g FROM generate_series(1, $ROWS) g;
VACUUM ANALYZE gi_local;
-- each shard has its own index on email: the scatter searches 32 indexes,
-- the routed query one
CREATE TABLE gi_scatter (id bigint PRIMARY KEY, email text NOT NULL, name text);
CREATE INDEX ON gi_scatter (email);
SELECT create_distributed_table('gi_scatter', 'id', shard_count => 32);
INSERT INTO gi_scatter SELECT * FROM gi_local;
CREATE TABLE gi_indexed (id bigint PRIMARY KEY, email text NOT NULL, name text);
CREATE INDEX ON gi_indexed (email);
SELECT create_distributed_table('gi_indexed', 'id', shard_count => 32);
INSERT INTO gi_indexed SELECT * FROM gi_local;
SQL
for port in $W1 $W2; do $PSQL -p $port -d $DB -c "VACUUM ANALYZE"; done

start=$(date +%s.%N)
$PSQL -p $PORT -d $DB -c "SELECT shardext_create_global_index('gi_indexed', 'email', true)" >/dev/null
BUILD=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
for port in $W1 $W2; do $PSQL -p $port -d $DB -c "VACUUM ANALYZE"; done
echo "index built over $ROWS rows in $BUILD s;" \
	"mismatches: $($PSQL -p $PORT -d $DB -c "SELECT shardext_check_global_index('gi_indexed_email_gidx')")"

run_pgbench() {	# script clients seconds: prints "tps latency_ms"
	local out tps lat
	out=$("$PGBENCH" -n -M prepared -c "$2" -j "$2" -T "$3" -f "$1" -h 127.0.0.1 -p $PORT -U postgres $DB 2>&1) ||
		{ echo "$out" >&2; exit 1; }
	grep -q "number of failed transactions: 0 " <<<"$out" || { echo "$out" >&2; exit 1; }
	tps=$(echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
	lat=$(echo "$out" | sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p')
	echo "$tps $lat"
}

declare -A TPS LAT
for t in gi_local gi_scatter gi_indexed; do
	cat >"$TMP/lookup_$t.sql" <<PGB
\set k random(1, $ROWS)
SELECT id, name FROM $t WHERE email = 'user' || :k || '@example.com';
PGB
	cat >"$TMP/insert_$t.sql" <<PGB
\set id random(10000000000, 9000000000000000000)
INSERT INTO $t VALUES (:id, 'new' || :id || '@example.com', 'new user');
PGB
	# each id has emails of its own: no two ids ever trade values
	cat >"$TMP/update_$t.sql" <<PGB
\set k random(1, $ROWS)
\set n random(1, 1000000000)
UPDATE $t SET email = 'user' || :k || '-' || :n || '@example.com' WHERE id = :k;
PGB
done
record() {	# key tps latency: keeps the best round
	if [ -z "${TPS[$1]:-}" ] || awk -v a="$2" -v b="${TPS[$1]}" 'BEGIN { exit !(a > b) }'; then
		TPS[$1]=$2
		LAT[$1]=$3
	fi
}
for round in $(seq 1 "$ROUNDS"); do
	echo "round $round of $ROUNDS ..."
	for test in lookup insert update; do
		for t in gi_local gi_scatter gi_indexed; do
			read -r tps lat < <(run_pgbench "$TMP/${test}_$t.sql" "$CLIENTS" "$SECONDS_PER_RUN")
			record "${test}_$t" "$tps" "$lat"
		done
	done
done
echo "mismatches after the inserts and updates: $($PSQL -p $PORT -d $DB -c "SELECT shardext_check_global_index('gi_indexed_email_gidx')")"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
echo
echo "$ROWS users, 32 shards on 2 workers; $CLIENTS clients; best of $ROUNDS runs of ${SECONDS_PER_RUN}s"
printf '%-30s %14s %16s %16s %16s %16s\n' "test" "local" "shardext no gidx" "shardext gidx" "gidx/no gidx" "gidx/local"
for test in lookup insert update; do
	name="lookup by email"
	[ $test = insert ] && name="insert a new user"
	[ $test = update ] && name="update a user's email"
	printf '%-30s %10.0f tps %12.0f tps %12.0f tps %16s %16s\n' "$name" \
		"${TPS[${test}_gi_local]}" "${TPS[${test}_gi_scatter]}" "${TPS[${test}_gi_indexed]}" \
		"$(ratio "${TPS[${test}_gi_indexed]}" "${TPS[${test}_gi_scatter]}")" \
		"$(ratio "${TPS[${test}_gi_indexed]}" "${TPS[${test}_gi_local]}")"
	printf '%-30s %11.3f ms %13.3f ms %13.3f ms\n' "  latency" \
		"${LAT[${test}_gi_local]}" "${LAT[${test}_gi_scatter]}" "${LAT[${test}_gi_indexed]}"
done
echo "building the global index over $ROWS rows: $BUILD s (writes wait, reads go on)"

for port in $PORT $W1 $W2; do
	$PSQL -p $port -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
done
