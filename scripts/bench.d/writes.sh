#!/usr/bin/env bash
# scripts/bench.d/writes.sh: write throughput of distributed tables next to
# a plain local table and the built-in alternative (a hash-partitioned table
# whose partitions are postgres_fdw foreign tables on the same workers).
#
#   1. COPY of WRITES_BENCH_ROWS (default 1M) CSV rows from a server file:
#      local table, shardext table with 32 shards, and (with fewer rows,
#      WRITES_BENCH_FDW_ROWS, default 20k, because it inserts row by row)
#      postgres_fdw partitions; rows/s and ratios to local.
#   2. pgbench's TPC-B-like transaction (WRITES_BENCH_SECONDS, default 30 s,
#      WRITES_BENCH_CLIENTS, default 8) on scale 10: local tables, and
#      shardext with pgbench_accounts and pgbench_history distributed by aid
#      (co-located) and pgbench_branches and pgbench_tellers distributed by
#      their own keys.  Reference tables would make every transaction write
#      each branch and teller row on every node (two-phase commit always, and
#      the hot branch rows locked everywhere); distributed by their keys a
#      quarter of the transactions stay on one node and each update is one
#      round trip.  Needs the distributed planner (router queries); without
#      it this part says so and is skipped.
#
# Runs against the coordinator of the local cluster (SHARDEXT_PORT, default
# 9700; workers at +1 and +2; PG_CONFIG as for scripts/cluster) in databases
# shardext_bench_writes (shardext) and shardext_bench_local (plain tables);
# creates them if missing.  Takes two to three minutes.
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PORT=${SHARDEXT_PORT:-9700}
BINDIR=$("$PG_CONFIG" --bindir)
DB=shardext_bench_writes
LOCALDB=shardext_bench_local
ROWS=${WRITES_BENCH_ROWS:-1000000}
FDW_ROWS=${WRITES_BENCH_FDW_ROWS:-20000}
SECONDS_=${WRITES_BENCH_SECONDS:-30}
CLIENTS=${WRITES_BENCH_CLIENTS:-8}
PSQL="$BINDIR/psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -p $PORT"
W1=$((PORT + 1))
W2=$((PORT + 2))
DATA=/tmp/shardext_bench_writes_$PORT.csv
FDW_DATA=/tmp/shardext_bench_writes_fdw_$PORT.csv

for db in $DB $LOCALDB; do
	if [ "$($PSQL -d postgres -c "SELECT count(*) FROM pg_database WHERE datname = '$db'")" = 0 ]; then
		$PSQL -d postgres -c "CREATE DATABASE $db"
	fi
done
$PSQL -d "$DB" <<SQL
SET client_min_messages TO warning;
CREATE EXTENSION IF NOT EXISTS shardext;
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
SELECT shardext_add_node('127.0.0.1', $W1);
SELECT shardext_add_node('127.0.0.1', $W2);
SQL

# the input: id, a random-looking text, a small int, a timestamp, a float
$PSQL -d "$DB" -c "COPY (SELECT g, md5(g::text), g % 1000, timestamp '2024-01-01' + g * interval '1 second', g / 7.0
	FROM generate_series(1, $ROWS) g) TO '$DATA' WITH (FORMAT csv)"
$PSQL -d "$DB" -c "COPY (SELECT g, md5(g::text), g % 1000, timestamp '2024-01-01' + g * interval '1 second', g / 7.0
	FROM generate_series(1, $FDW_ROWS) g) TO '$FDW_DATA' WITH (FORMAT csv)"
chmod a+r "$DATA" "$FDW_DATA" 2>/dev/null || true

COLUMNS="id bigint, payload text, category int, created timestamp, amount float8"

# seconds COPY takes, as measured by the server
copy_seconds() {	# table file
	$PSQL -d "$DB" -c "\\timing on" -c "COPY $1 FROM '$2' WITH (FORMAT csv)" 2>&1 |
		sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | awk '{ printf "%.3f", $1 / 1000 }'
}

$PSQL -d "$DB" <<SQL
SET client_min_messages TO warning;
DROP TABLE IF EXISTS bench_copy_local, bench_copy_dist, bench_copy_fdw CASCADE;
CREATE TABLE bench_copy_local ($COLUMNS);
CREATE TABLE bench_copy_dist ($COLUMNS);
SELECT create_distributed_table('bench_copy_dist', 'id', shard_count => 32);
SQL

# postgres_fdw: a hash-partitioned table with 4 foreign partitions per worker
$PSQL -d "$DB" <<SQL
SET client_min_messages TO warning;
DROP SERVER IF EXISTS bench_w1 CASCADE;
DROP SERVER IF EXISTS bench_w2 CASCADE;
CREATE SERVER bench_w1 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', port '$W1', dbname '$DB');
CREATE SERVER bench_w2 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', port '$W2', dbname '$DB');
CREATE USER MAPPING FOR CURRENT_USER SERVER bench_w1 OPTIONS (user 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER bench_w2 OPTIONS (user 'postgres');
CREATE TABLE bench_copy_fdw ($COLUMNS) PARTITION BY HASH (id);
DO \$\$
BEGIN
	FOR i IN 0..7 LOOP
		EXECUTE format('CREATE FOREIGN TABLE bench_copy_fdw_%s PARTITION OF bench_copy_fdw
			FOR VALUES WITH (MODULUS 8, REMAINDER %s) SERVER %s OPTIONS (table_name %L)',
			i, i, CASE WHEN i % 2 = 0 THEN 'bench_w1' ELSE 'bench_w2' END, 'bench_copy_fdw_part_' || i);
	END LOOP;
END
\$\$;
SQL
for port in $W1 $W2; do
	$BINDIR/psql -X -q -At -h 127.0.0.1 -U postgres -p $port -d "$DB" \
		-c "SET client_min_messages TO warning" -c "DO \$\$
BEGIN
	FOR i IN 0..7 LOOP
		EXECUTE format('DROP TABLE IF EXISTS bench_copy_fdw_part_%s', i);
		EXECUTE format('CREATE TABLE bench_copy_fdw_part_%s ($COLUMNS)', i);
	END LOOP;
END
\$\$"
done

local_s=$(copy_seconds bench_copy_local "$DATA")
dist_s=$(copy_seconds bench_copy_dist "$DATA")
fdw_s=$(copy_seconds bench_copy_fdw "$FDW_DATA")
loaded=$($PSQL -d "$DB" -c "SELECT sum(result::bigint) FROM shardext_run_on_shards('bench_copy_dist', 'SELECT count(*) FROM %s')")
[ "$loaded" = "$ROWS" ] || { echo "distributed COPY loaded $loaded rows, not $ROWS" >&2; exit 1; }

awk -v rows="$ROWS" -v frows="$FDW_ROWS" -v l="$local_s" -v d="$dist_s" -v f="$fdw_s" 'BEGIN {
	lr = rows / l; dr = rows / d; fr = frows / f;
	printf "COPY %d CSV rows (5 columns)\n", rows;
	printf "  %-34s %8.2f s %10.0f rows/s\n", "local table", l, lr;
	printf "  %-34s %8.2f s %10.0f rows/s  %.2fx local\n", "shardext, 32 shards", d, dr, dr / lr;
	printf "  %-34s %8.2f s %10.0f rows/s  %.2fx local (%d rows)\n", "postgres_fdw, 8 partitions", f, fr, fr / lr, frows;
}'
$PSQL -d "$DB" -c "DROP TABLE bench_copy_local, bench_copy_dist, bench_copy_fdw CASCADE"
rm -f "$DATA" "$FDW_DATA"

# --- pgbench TPC-B -----------------------------------------------------------
PGBENCH="$BINDIR/pgbench -h 127.0.0.1 -U postgres -p $PORT"
tps() {	# database, extra args
	local db=$1
	shift
	$PGBENCH -n -c "$CLIENTS" -j 2 -T "$SECONDS_" "$@" "$db" 2>&1 |
		sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}

$PGBENCH -i -q -s 10 "$LOCALDB" >/dev/null 2>&1
$PSQL -d "$DB" -c "SET client_min_messages TO warning" \
	-c "DROP TABLE IF EXISTS pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history"
$PGBENCH -i -q -s 10 "$DB" >/dev/null 2>&1
$PSQL -d "$DB" <<'SQL' >/dev/null
SET client_min_messages TO warning;
SELECT create_distributed_table('pgbench_accounts', 'aid', shard_count => 32);
SELECT create_distributed_table('pgbench_history', 'aid', colocate_with => 'pgbench_accounts');
SELECT create_distributed_table('pgbench_branches', 'bid', shard_count => 32, colocate_with => 'none');
SELECT create_distributed_table('pgbench_tellers', 'tid', colocate_with => 'pgbench_branches');
SQL

if ! $PSQL -d "$DB" -c "SELECT abalance FROM pgbench_accounts WHERE aid = 1" >/dev/null 2>&1; then
	echo "pgbench TPC-B: skipped, the distributed planner cannot run queries on distributed tables yet"
	exit 0
fi
local_tps=$(tps "$LOCALDB")
dist_tps=$(tps "$DB")
awk -v l="$local_tps" -v d="$dist_tps" -v c="$CLIENTS" -v s="$SECONDS_" 'BEGIN {
	printf "pgbench TPC-B-like, scale 10, %d clients, %d s\n", c, s;
	printf "  %-34s %10.0f tps\n", "local tables", l;
	printf "  %-34s %10.0f tps  %.2fx local\n", "shardext (all four distributed)", d, d / l;
}'
