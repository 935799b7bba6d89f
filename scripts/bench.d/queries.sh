#!/usr/bin/env bash
# scripts/bench.d/queries.sh: query throughput and latency, side by side, of
#   - a plain local table on the coordinator,
#   - a shardext distributed table (shards on the workers),
#   - a hash-partitioned table whose partitions are postgres_fdw foreign
#     tables on the same workers (the built-in alternative),
# for point selects by key (pgbench -M prepared), point updates by key,
# and a multi-shard aggregate (count/sum/avg over all rows).
#
# The three are measured in turns, BENCH_ROUNDS times, and the best round
# of each counts, so that load from elsewhere on the machine disturbs the
# comparison as little as possible.
#
# Environment: SHARDEXT_PORT (coordinator; workers on the next two ports),
# PG_CONFIG, BENCH_ROWS (default 1000000), BENCH_SECONDS per run (default 5),
# BENCH_ROUNDS (default 3), BENCH_CLIENTS (default 4).
set -euo pipefail
source "$(dirname "$0")/lib/env.sh"
ROWS=${BENCH_ROWS:-1000000}
SECONDS_PER_RUN=${BENCH_SECONDS:-5}
ROUNDS=${BENCH_ROUNDS:-3}
CLIENTS=${BENCH_CLIENTS:-4}
DB=bench_queries
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "setting up $ROWS rows three ways (local, shardext, postgres_fdw) ..."
for port in $PORT $W1 $W2; do
	$PSQL -p $port -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
done

# postgres_fdw: 8 hash partitions, alternating between the two workers
for port in $W1 $W2; do
	for p in 0 1 2 3 4 5 6 7; do
		echo "CREATE TABLE bench_fdw_p$p (id int PRIMARY KEY, v int NOT NULL, filler text);"
	done | $PSQL -p $port -d $DB
done

$PSQL -p $PORT -d $DB <<SQL
SET client_min_messages TO warning;
CREATE EXTENSION shardext;
SELECT shardext_add_node('127.0.0.1', $W1);
SELECT shardext_add_node('127.0.0.1', $W2);

CREATE TABLE bench_local (id int PRIMARY KEY, v int NOT NULL, filler text);
INSERT INTO bench_local SELECT g, g % 1000, 'row ' || g FROM generate_series(1, $ROWS) g;
VACUUM ANALYZE bench_local;

CREATE TABLE bench_dist (id int PRIMARY KEY, v int NOT NULL, filler text);
INSERT INTO bench_dist SELECT * FROM bench_local;
SELECT create_distributed_table('bench_dist', 'id');
SELECT shardext_run_on_shards('bench_dist', 'VACUUM ANALYZE %s');

CREATE EXTENSION postgres_fdw;
CREATE SERVER w1 FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '127.0.0.1', port '$W1', dbname '$DB', async_capable 'true', batch_size '1000');
CREATE SERVER w2 FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '127.0.0.1', port '$W2', dbname '$DB', async_capable 'true', batch_size '1000');
CREATE USER MAPPING FOR CURRENT_USER SERVER w1;
CREATE USER MAPPING FOR CURRENT_USER SERVER w2;
CREATE TABLE bench_fdw (id int NOT NULL, v int NOT NULL, filler text) PARTITION BY HASH (id);
DO \$\$
BEGIN
	FOR p IN 0..7 LOOP
		EXECUTE format('CREATE FOREIGN TABLE bench_fdw_p%s PARTITION OF bench_fdw
						FOR VALUES WITH (MODULUS 8, REMAINDER %s) SERVER %s
						OPTIONS (table_name %L, use_remote_estimate %L)',
					   p, p, CASE WHEN p % 2 = 0 THEN 'w1' ELSE 'w2' END,
					   'bench_fdw_p' || p, 'false');
	END LOOP;
END
\$\$;
INSERT INTO bench_fdw SELECT * FROM bench_local;
SQL
for port in $W1 $W2; do $PSQL -p $port -d $DB -c "VACUUM ANALYZE"; done
$PSQL -p $PORT -d $DB -c "ANALYZE bench_fdw"

# check that the three hold the same rows
for t in bench_local bench_dist bench_fdw; do
	echo "$t: $($PSQL -p $PORT -d $DB -c "SELECT count(*), sum(v), sum(id::bigint) FROM $t")"
done

# runs a pgbench script, prints "tps latency_ms"
run_pgbench() {	# script clients seconds
	local out
	out=$("$PGBENCH" -n -M prepared -c "$2" -j "$2" -T "$3" -f "$1" -h 127.0.0.1 -p $PORT -U postgres $DB 2>&1) ||
		{ echo "$out" >&2; exit 1; }
	local tps lat
	tps=$(echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
	lat=$(echo "$out" | sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p')
	echo "$tps $lat"
}

declare -A TPS LAT
for t in bench_local bench_dist bench_fdw; do
	cat >"$TMP/select_$t.sql" <<PGB
\set id random(1, $ROWS)
SELECT v FROM $t WHERE id = :id;
PGB
	cat >"$TMP/update_$t.sql" <<PGB
\set id random(1, $ROWS)
UPDATE $t SET v = v + 1 WHERE id = :id;
PGB
	cat >"$TMP/agg_$t.sql" <<PGB
SELECT count(*), sum(v), avg(v) FROM $t;
PGB
done

# keeps the best round: highest tps (and its latency)
record() {	# key tps latency
	if [ -z "${TPS[$1]:-}" ] || awk -v a="$2" -v b="${TPS[$1]}" 'BEGIN { exit !(a > b) }'; then
		TPS[$1]=$2
		LAT[$1]=$3
	fi
}
for round in $(seq 1 "$ROUNDS"); do
	echo "round $round of $ROUNDS ..."
	for test in select update agg; do
		clients=$CLIENTS
		[ $test = agg ] && clients=1
		for t in bench_local bench_dist bench_fdw; do
			read -r tps lat < <(run_pgbench "$TMP/${test}_$t.sql" "$clients" "$SECONDS_PER_RUN")
			record "${test}_$t" "$tps" "$lat"
		done
	done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }

echo
echo "$ROWS rows; $CLIENTS clients for point queries, 1 client for the aggregate; best of $ROUNDS runs of ${SECONDS_PER_RUN}s"
printf '%-34s %14s %14s %14s %16s %16s\n' "test" "local" "shardext" "postgres_fdw" "shardext/local" "shardext/fdw"
for test in select update; do
	name="point ${test}s by key (-M prepared)"
	printf '%-34s %10.0f tps %10.0f tps %10.0f tps %16s %16s\n' "$name" \
		"${TPS[${test}_bench_local]}" "${TPS[${test}_bench_dist]}" "${TPS[${test}_bench_fdw]}" \
		"$(ratio "${TPS[${test}_bench_dist]}" "${TPS[${test}_bench_local]}")" \
		"$(ratio "${TPS[${test}_bench_dist]}" "${TPS[${test}_bench_fdw]}")"
	printf '%-34s %11.3f ms %11.3f ms %11.3f ms\n' "  latency" \
		"${LAT[${test}_bench_local]}" "${LAT[${test}_bench_dist]}" "${LAT[${test}_bench_fdw]}"
done
printf '%-34s %11.1f ms %11.1f ms %11.1f ms %16s %16s\n' "count/sum/avg over all rows" \
	"${LAT[agg_bench_local]}" "${LAT[agg_bench_dist]}" "${LAT[agg_bench_fdw]}" \
	"$(ratio "${LAT[agg_bench_dist]}" "${LAT[agg_bench_local]}")" \
	"$(ratio "${LAT[agg_bench_dist]}" "${LAT[agg_bench_fdw]}")"
echo "(for the aggregate the ratios are of times: lower is better)"

for port in $PORT $W1 $W2; do
	$PSQL -p $port -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
done
