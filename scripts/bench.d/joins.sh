#!/usr/bin/env bash
# scripts/bench.d/joins.sh: joins of distributed tables that are not
# co-located on the join key (issue 26), side by side:
#   - the same tables as plain local tables on the coordinator,
#   - shardext with shardext.enable_repartition_joins off (the coordinator
#     pulls the rows and joins them),
#   - shardext with repartition joins (the workers move rows between them
#     and join partition by partition),
#   - the built-in alternative: hash-partitioned tables whose partitions are
#     postgres_fdw foreign tables on the same workers (8 each, partitioned
#     by the same columns as the distributed tables, async_capable): it
#     joins what it cannot push down on the coordinator.
# The tables: orders distributed by merchant_id, shipments by order_id,
# payments by their own id (BENCH_JOIN_ROWS rows each, 32 shards).
#   Q1  aggregate over a join on a non-distribution column of orders
#       (orders move into the shards of shipments: single repartition)
#   Q2  left join with a selective filter (1% of orders; the same layout)
#   Q3  aggregate over a join on a column that distributes neither side
#       (orders and payments both move: dual repartition)
# Each query runs BENCH_ROUNDS times per way, in turns; the best time counts.
# The ratios printed: repartition/local, coordinator/repartition and
# fdw/repartition.  Then the coordinator's peak memory (VmHWM of its backend, as ps would
# show its RSS) for Q1-Q3 over repartition joins as the tables grow through
# BENCH_JOIN_GROWTH rows (default 500000 1000000 2000000 4000000).
#
# Environment: SHARDEXT_PORT (coordinator; workers on the next two ports),
# PG_CONFIG, BENCH_JOIN_ROWS (default 2000000), BENCH_ROUNDS (default 3),
# BENCH_JOIN_GROWTH.
set -euo pipefail
source "$(dirname "$0")/lib/env.sh"
ROWS=${BENCH_JOIN_ROWS:-2000000}
ROUNDS=${BENCH_ROUNDS:-3}
GROWTH=${BENCH_JOIN_GROWTH:-500000 1000000 2000000 4000000}
DB=bench_joins
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "machine: $(nproc) cores, $(uptime | sed 's/.*load average/load average/')"
for port in $PORT $W1 $W2; do
	$PSQL -p "$port" -d postgres -c "SET client_min_messages = warning" \
		-c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
done
$PSQL -p "$PORT" -d $DB >/dev/null <<SQL
SET client_min_messages TO warning;
CREATE EXTENSION shardext;
SELECT shardext_add_node('127.0.0.1', $W1);
SELECT shardext_add_node('127.0.0.1', $W2);
CREATE EXTENSION postgres_fdw;
CREATE SERVER w1 FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '127.0.0.1', port '$W1', dbname '$DB', async_capable 'true',
			 batch_size '10000', fetch_size '10000');
CREATE SERVER w2 FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '127.0.0.1', port '$W2', dbname '$DB', async_capable 'true',
			 batch_size '10000', fetch_size '10000');
CREATE USER MAPPING FOR CURRENT_USER SERVER w1;
CREATE USER MAPPING FOR CURRENT_USER SERVER w2;
SQL

# load ROWS: local tables l_*, distributed d_* with the same rows
load() {
	local rows=$1
	$PSQL -p "$PORT" -d $DB >/dev/null <<SQL
SET client_min_messages TO warning;
DROP TABLE IF EXISTS l_orders, l_shipments, l_payments, d_orders, d_shipments, d_payments;
CREATE TABLE l_orders AS
	SELECT g::bigint AS id, (g % 5000)::int AS merchant_id, (g * 7 % 100000)::int AS customer_id,
		   (g % 997)::int AS amount, date '2020-01-01' + (g % 1000)::int AS created
	FROM generate_series(1, $rows) g;
CREATE TABLE l_shipments AS
	SELECT g::bigint AS id, ((g::bigint * 48271) % $rows + 1)::bigint AS order_id,
		   (g % 12)::int AS carrier, (g % 50)::int AS weight
	FROM generate_series(1, $rows) g;
CREATE TABLE l_payments AS
	SELECT g::bigint AS id, ((g::bigint * 16807) % $rows + 1)::bigint AS order_id,
		   (g % 4)::int AS method, (g % 300)::int AS total
	FROM generate_series(1, $rows) g;
CREATE TABLE d_orders AS SELECT * FROM l_orders;
CREATE TABLE d_shipments AS SELECT * FROM l_shipments;
CREATE TABLE d_payments AS SELECT * FROM l_payments;
SELECT create_distributed_table('d_orders', 'merchant_id', shard_count => 32);
SELECT create_distributed_table('d_shipments', 'order_id', shard_count => 32);
SELECT create_distributed_table('d_payments', 'id', shard_count => 32);
SELECT shardext_run_on_shards(t, 'VACUUM ANALYZE %s') FROM unnest(ARRAY['d_orders', 'd_shipments', 'd_payments']) t;
VACUUM ANALYZE l_orders, l_shipments, l_payments;
SQL
}

# load_fdw: f_* partitioned by the columns that distribute d_*, 8 foreign
# partitions each alternating between the workers, with the rows of l_*
load_fdw() {
	local t key p columns
	echo "SET client_min_messages TO warning;" > "$TMP/fdw_parts.sql"
	for t in orders shipments payments; do
		columns=$(table_columns "$t")
		for p in 0 1 2 3 4 5 6 7; do
			echo "DROP TABLE IF EXISTS f_${t}_$p; CREATE TABLE f_${t}_$p ($columns);"
		done
	done >> "$TMP/fdw_parts.sql"
	for port in $W1 $W2; do $PSQL -p "$port" -d $DB -f "$TMP/fdw_parts.sql" >/dev/null; done
	for t in orders shipments payments; do
		case $t in orders) key=merchant_id ;; shipments) key=order_id ;; payments) key=id ;; esac
		{
			echo "SET client_min_messages TO warning;"
			echo "DROP TABLE IF EXISTS f_$t;"
			echo "CREATE TABLE f_$t (LIKE l_$t) PARTITION BY HASH ($key);"
			for p in 0 1 2 3 4 5 6 7; do
				echo "CREATE FOREIGN TABLE f_${t}_$p PARTITION OF f_$t
					FOR VALUES WITH (MODULUS 8, REMAINDER $p) SERVER w$((p % 2 + 1))
					OPTIONS (table_name 'f_${t}_$p');"
			done
			echo "INSERT INTO f_$t SELECT * FROM l_$t;"
		} | $PSQL -p "$PORT" -d $DB >/dev/null
	done
	for port in $W1 $W2; do $PSQL -p "$port" -d $DB -c "VACUUM ANALYZE" >/dev/null; done
	$PSQL -p "$PORT" -d $DB -c "ANALYZE f_orders, f_shipments, f_payments" >/dev/null
}

# the column definitions of l_$1 (for the workers' partitions)
table_columns() {
	$PSQL -p "$PORT" -d $DB -c "SELECT string_agg(quote_ident(attname) || ' ' ||
		format_type(atttypid, atttypmod), ', ' ORDER BY attnum) FROM pg_attribute
		WHERE attrelid = 'l_$1'::regclass AND attnum > 0 AND NOT attisdropped"
}

# the queries, over tables with prefix $1
q1() { echo "SELECT s.carrier, count(*), sum(o.amount), avg(s.weight) FROM ${1}orders o
	JOIN ${1}shipments s ON s.order_id = o.id GROUP BY s.carrier"; }
q2() { echo "SELECT count(*), count(s.id), sum(s.weight) FROM ${1}orders o
	LEFT JOIN ${1}shipments s ON s.order_id = o.id WHERE o.created < date '2020-01-11'"; }
q3() { echo "SELECT p.method, count(*), sum(p.total + o.amount) FROM ${1}orders o
	JOIN ${1}payments p ON p.order_id = o.id GROUP BY p.method"; }

# timed SETTINGS QUERY: milliseconds of one run (a fresh session, warm caches)
timed() {
	$PSQL -p "$PORT" -d $DB -c "$1" -c '\timing on' -c "$2" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'
}

echo "loading $ROWS rows per table ..."
load "$ROWS"
load_fdw
declare -A BEST
for q in q1 q2 q3; do
	# the answers agree, and warm-up
	a=$($PSQL -p "$PORT" -d $DB -c "$($q l_) ORDER BY 1" | md5sum)
	b=$($PSQL -p "$PORT" -d $DB -c "SET shardext.enable_repartition_joins = off" -c "$($q d_) ORDER BY 1" | md5sum)
	c=$($PSQL -p "$PORT" -d $DB -c "$($q d_) ORDER BY 1" | md5sum)
	f=$($PSQL -p "$PORT" -d $DB -c "$($q f_) ORDER BY 1" | md5sum)
	if [ "$a" != "$b" ] || [ "$a" != "$c" ] || [ "$a" != "$f" ]; then
		echo "$q: the answers differ" >&2
		exit 1
	fi
	strategy=$($PSQL -p "$PORT" -d $DB -c "EXPLAIN $($q d_)" | grep -m1 "Join Strategy" | sed 's/^ *//')
	echo "$q: ${strategy:-no repartition join}"
done
for round in $(seq 1 "$ROUNDS"); do
	echo "round $round of $ROUNDS ..."
	for q in q1 q2 q3; do
		for way in local coordinator repartition fdw; do
			case $way in
				local) ms=$(timed "SELECT 1" "$($q l_)") ;;
				coordinator) ms=$(timed "SET shardext.enable_repartition_joins = off" "$($q d_)") ;;
				repartition) ms=$(timed "SELECT 1" "$($q d_)") ;;
				fdw) ms=$(timed "SELECT 1" "$($q f_)") ;;
			esac
			key="$q $way"
			if [ -z "${BEST[$key]:-}" ] || awk -v a="$ms" -v b="${BEST[$key]}" 'BEGIN { exit !(a < b) }'; then
				BEST[$key]=$ms
			fi
		done
	done
done

echo
echo "best of $ROUNDS, $ROWS rows per table, ms ($(uptime | sed 's/.*load average/load average/'))"
printf "%-4s %9s %12s %12s %9s %18s %24s %17s\n" query local coordinator repartition fdw \
	"repartition/local" "coordinator/repartition" "fdw/repartition"
for q in q1 q2 q3; do
	l=${BEST["$q local"]}
	c=${BEST["$q coordinator"]}
	r=${BEST["$q repartition"]}
	f=${BEST["$q fdw"]}
	printf "%-4s %9.0f %12.0f %12.0f %9.0f %17.2fx %23.2fx %16.2fx\n" "$q" "$l" "$c" "$r" "$f" \
		"$(awk -v a="$r" -v b="$l" 'BEGIN { print a / b }')" \
		"$(awk -v a="$c" -v b="$r" 'BEGIN { print a / b }')" \
		"$(awk -v a="$f" -v b="$r" 'BEGIN { print a / b }')"
done

# the coordinator's peak memory as the tables grow
echo
echo "coordinator backend peak memory (VmHWM, kB) over repartition joins, by rows per table:"
printf "%10s %10s %10s %10s\n" rows q1 q2 q3
for rows in $GROWTH; do
	load "$rows"
	line=$(printf "%10s" "$rows")
	for q in q1 q2 q3; do
		# a fresh session: the query, then its backend's peak (the last line)
		kb=$($PSQL -p "$PORT" -d $DB -c "$($q d_)" \
			-c "SELECT (regexp_match(pg_read_file('/proc/self/status'), 'VmHWM:\s+(\d+)'))[1]" | tail -1)
		line="$line $(printf "%10s" "$kb")"
	done
	echo "$line"
done
echo "(machine: $(uptime | sed 's/.*load average/load average/'))"
