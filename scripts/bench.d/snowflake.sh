#!/usr/bin/env bash
# scripts/bench.d/snowflake.sh: how fast snowflake_id() is, next to nextval()
# of a sequence and gen_random_uuid(), and what time-ordered keys do for a
# B-tree index compared with random UUIDs.
#
#   1. ids/s of SELECT count(f()) FROM generate_series(1, N), in one session
#      and in 4 concurrent sessions, for each generator
#   2. 1M rows inserted into a table with a primary key of each kind:
#      time, index size, WAL written
#
# Runs against the coordinator of the local cluster (SHARDEXT_PORT, default
# 9700; PG_CONFIG as for scripts/cluster), in database shardext_bench
# (SHARDEXT_BENCH_DB), which it creates with the extension if missing.
# Sizes: SNOWFLAKE_BENCH_IDS (default 3M ids per run), SNOWFLAKE_BENCH_ROWS
# (default 1M rows).  Takes about a minute.
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PORT=${SHARDEXT_PORT:-9700}
DB=${SHARDEXT_BENCH_DB:-shardext_bench}
IDS=${SNOWFLAKE_BENCH_IDS:-3000000}
ROWS=${SNOWFLAKE_BENCH_ROWS:-1000000}
SESSIONS=4
PSQL="$("$PG_CONFIG" --bindir)/psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -p $PORT"

if [ "$($PSQL -d postgres -c "SELECT count(*) FROM pg_database WHERE datname = '$DB'")" = 0 ]; then
	$PSQL -d postgres -c "CREATE DATABASE $DB"
fi
$PSQL -d "$DB" <<'SQL'
SET client_min_messages TO warning;
CREATE EXTENSION IF NOT EXISTS shardext;
DROP SEQUENCE IF EXISTS bench_seq;
CREATE SEQUENCE bench_seq;
-- runs a statement and returns when it started and finished (epoch seconds)
CREATE OR REPLACE FUNCTION bench_time(statement text, OUT started float8, OUT finished float8)
LANGUAGE plpgsql AS $$
BEGIN
	started := extract(epoch FROM clock_timestamp());
	EXECUTE statement;
	finished := extract(epoch FROM clock_timestamp());
END
$$;
SQL

# generation rate of one expression: ids/s in one session, then in
# $SESSIONS sessions at once (all ids over the span from first start to last end)
rate() {
	local expr=$1 single multi out
	out=$($PSQL -d "$DB" -F ' ' -c "SET work_mem = '256MB'" \
		-c "SELECT * FROM bench_time(\$q\$SELECT count($expr) FROM generate_series(1, $IDS)\$q\$)")
	single=$(echo "$out" | awk -v n="$IDS" '{ printf "%.0f", n / ($2 - $1) }')
	local per=$((IDS / SESSIONS)) pids=() tmp
	tmp=$(mktemp -d)
	for s in $(seq 1 $SESSIONS); do
		$PSQL -d "$DB" -F ' ' -c "SET work_mem = '256MB'" \
			-c "SELECT * FROM bench_time(\$q\$SELECT count($expr) FROM generate_series(1, $per)\$q\$)" \
			>"$tmp/$s" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	multi=$(cat "$tmp"/* | awk -v n="$((per * SESSIONS))" '
		NR == 1 || $1 < lo { lo = $1 } NR == 1 || $2 > hi { hi = $2 }
		END { printf "%.0f", n / (hi - lo) }')
	rm -rf "$tmp"
	echo "$single $multi"
}

# inserts $ROWS rows keyed by an expression: seconds, index bytes, WAL bytes
insert_keys() {
	local type=$1 expr=$2
	$PSQL -d "$DB" -F ' ' <<SQL
SET client_min_messages TO warning;
DROP TABLE IF EXISTS bench_keys;
CREATE TABLE bench_keys (id $type PRIMARY KEY, payload int NOT NULL);
CHECKPOINT;
SELECT pg_current_wal_lsn() AS wal_before \gset
SELECT finished - started,
	   pg_relation_size('bench_keys_pkey'),
	   pg_wal_lsn_diff(pg_current_wal_lsn(), :'wal_before')
FROM bench_time(\$q\$INSERT INTO bench_keys SELECT $expr, n FROM generate_series(1, $ROWS) n\$q\$);
DROP TABLE bench_keys;
SQL
}

mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1048576 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
rate_fmt() { awk -v r="$1" 'BEGIN { printf "%.2f M/s", r / 1000000 }'; }

echo "snowflake_id() vs nextval() vs gen_random_uuid(): $IDS ids per run, $SESSIONS concurrent sessions"
read -r base_1 base_n < <(rate "1")
read -r sf_1 sf_n < <(rate "snowflake_id()")
read -r seq_1 seq_n < <(rate "nextval('bench_seq')")
read -r uuid_1 uuid_n < <(rate "gen_random_uuid()")
printf '%-22s %14s %14s\n' "generator" "1 session" "$SESSIONS sessions"
printf '%-22s %14s %14s\n' "snowflake_id()" "$(rate_fmt "$sf_1")" "$(rate_fmt "$sf_n")"
printf '%-22s %14s %14s\n' "nextval(sequence)" "$(rate_fmt "$seq_1")" "$(rate_fmt "$seq_n")"
printf '%-22s %14s %14s\n' "gen_random_uuid()" "$(rate_fmt "$uuid_1")" "$(rate_fmt "$uuid_n")"
printf '%-22s %14s %14s\n' "(loop, no generator)" "$(rate_fmt "$base_1")" "$(rate_fmt "$base_n")"
printf '%-22s %14s %14s\n' "snowflake / nextval" "$(ratio "$sf_1" "$seq_1")" "$(ratio "$sf_n" "$seq_n")"
printf '%-22s %14s %14s\n' "snowflake / uuid" "$(ratio "$sf_1" "$uuid_1")" "$(ratio "$sf_n" "$uuid_n")"
per_ms=$($PSQL -d "$DB" -c "SET work_mem = '256MB'" -c "
	SELECT round(count(*)::numeric / count(DISTINCT id >> 22))
	FROM (SELECT snowflake_id() AS id FROM generate_series(1, $IDS)) s")
echo "(a node issues at most 4096 snowflake ids per millisecond, 4.1 M/s; one session"
echo " filled $per_ms per millisecond: the loop runs at the id format's limit, not the function's)"
echo

echo "insert $ROWS rows into a table with a B-tree primary key"
read -r sf_s sf_idx sf_wal < <(insert_keys bigint "snowflake_id()")
read -r seq_s seq_idx seq_wal < <(insert_keys bigint "nextval('bench_seq')")
read -r uuid_s uuid_idx uuid_wal < <(insert_keys uuid "gen_random_uuid()")
printf '%-22s %10s %12s %12s\n' "key" "time" "index size" "WAL"
printf '%-22s %9.2fs %12s %12s\n' "snowflake_id() bigint" "$sf_s" "$(mb "$sf_idx")" "$(mb "$sf_wal")"
printf '%-22s %9.2fs %12s %12s\n' "nextval() bigint" "$seq_s" "$(mb "$seq_idx")" "$(mb "$seq_wal")"
printf '%-22s %9.2fs %12s %12s\n' "gen_random_uuid() uuid" "$uuid_s" "$(mb "$uuid_idx")" "$(mb "$uuid_wal")"
printf '%-22s %10s %12s %12s\n' "uuid / snowflake" "$(ratio "$uuid_s" "$sf_s")" \
	"$(ratio "$uuid_idx" "$sf_idx")" "$(ratio "$uuid_wal" "$sf_wal")"

$PSQL -d "$DB" -c "DROP SEQUENCE bench_seq" -c "DROP FUNCTION bench_time(text)"
