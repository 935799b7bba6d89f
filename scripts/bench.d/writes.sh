#!/usr/bin/env bash
# scripts/bench.d/writes.sh: write throughput of distributed tables next to
# a plain local table and the built-in alternative (a hash-partitioned table
# whose partitions are postgres_fdw foreign tables on the same workers).
#
#   1. COPY of WRITES_BENCH_ROWS (default 1M) CSV rows from a server file:
#      local table, shardext table with 32 shards, and (with fewer rows,
#      WRITES_BENCH_FDW_ROWS, default 20k, because it inserts row by row)
#      postgres_fdw partitions; rows/s and ratios to local.
#   2. pgbench's TPC-B-like transaction (WRITES_BENCH_SECONDS per
#      configuration, default 30 s, in WRITES_BENCH_ROUNDS alternating runs,
#      default 3, so that load from elsewhere hits every configuration alike;
#      WRITES_BENCH_CLIENTS, default 8) on scale 10: local tables; shardext
#      with pgbench_accounts and pgbench_history distributed by aid
#      (co-located) and pgbench_branches and pgbench_tellers distributed by
#      their own keys; and postgres_fdw with each table hash-partitioned into
#      8 foreign partitions on the workers (parallel_commit on).  Reference
#      tables would make every transaction write each branch and teller row
#      on every node (two-phase commit always, and the hot branch rows locked
#      everywhere); distributed by their keys a quarter of the transactions
#      stay on one node and each update is one round trip.  Deadlocks and
#      serialization failures are retried and counted.
#
# WRITES_BENCH_PARTS (default "copy tpcb") selects the parts.  Runs against
# the coordinator of the local cluster (SHARDEXT_PORT, default 9700; workers
# at +1 and +2; PG_CONFIG as for scripts/cluster) in databases
# shardext_bench_writes (shardext), shardext_bench_local (plain tables) and
# shardext_bench_fdw (postgres_fdw, also on the workers); creates them if
# missing.  Takes about four minutes.
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PORT=${SHARDEXT_PORT:-9700}
BINDIR=$("$PG_CONFIG" --bindir)
DB=shardext_bench_writes
LOCALDB=shardext_bench_local
FDWDB=shardext_bench_fdw
ROWS=${WRITES_BENCH_ROWS:-1000000}
FDW_ROWS=${WRITES_BENCH_FDW_ROWS:-20000}
SECONDS_=${WRITES_BENCH_SECONDS:-30}
CLIENTS=${WRITES_BENCH_CLIENTS:-8}
# pgbench protocol for TPC-B: simple (pgbench's default) or prepared
PROTOCOL=${WRITES_BENCH_PROTOCOL:-simple}
PARTS=" ${WRITES_BENCH_PARTS:-copy tpcb} "
PSQL="$BINDIR/psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -p $PORT"
W1=$((PORT + 1))
W2=$((PORT + 2))
DATA=/tmp/shardext_bench_writes_$PORT.csv
FDW_DATA=/tmp/shardext_bench_writes_fdw_$PORT.csv

for db in $DB $LOCALDB $FDWDB; do
	if [ "$($PSQL -d postgres -c "SELECT count(*) FROM pg_database WHERE datname = '$db'")" = 0 ]; then
		$PSQL -d postgres -c "CREATE DATABASE $db"
	fi
done
for wport in $W1 $W2; do
	if [ "$($PSQL -p "$wport" -d postgres -c "SELECT count(*) FROM pg_database WHERE datname = '$FDWDB'")" = 0 ]; then
		$PSQL -p "$wport" -d postgres -c "CREATE DATABASE $FDWDB"
	fi
done
$PSQL -d "$DB" <<SQL >/dev/null
SET client_min_messages TO warning;
CREATE EXTENSION IF NOT EXISTS shardext;
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
SELECT shardext_add_node('127.0.0.1', $W1);
SELECT shardext_add_node('127.0.0.1', $W2);
SQL

if [[ "$PARTS" == *" copy "* ]]; then
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
fi
[[ "$PARTS" == *" tpcb "* ]] || exit 0

# --- pgbench TPC-B -----------------------------------------------------------
PGBENCH="$BINDIR/pgbench -h 127.0.0.1 -U postgres -p $PORT"
# tps and failure counts of a run: "<tps> <failed> <retried>"; deadlocks and
# serialization failures are retried (postgres_fdw's REPEATABLE READ remote
# transactions have many on the hot branch rows)
tpcb() {	# database, seconds, extra args
	local db=$1 seconds=$2 out
	shift 2
	out=$($PGBENCH -n -M "$PROTOCOL" -c "$CLIENTS" -j 2 -T "$seconds" --max-tries=0 "$@" "$db" 2>&1) ||
		{ echo "pgbench failed on $db:" >&2; echo "$out" | tail -20 >&2; return 1; }
	echo "$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out") \
$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out") \
$(sed -n 's/^number of transactions retried: \([0-9]*\).*/\1/p' <<<"$out")"
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

# postgres_fdw: the four tables hash-partitioned into 8 foreign partitions
# each, alternating between the workers (parallel_commit on); the workers
# fill their partitions themselves
$PSQL -d "$FDWDB" <<SQL
SET client_min_messages TO warning;
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
DROP TABLE IF EXISTS pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history CASCADE;
DROP SERVER IF EXISTS bench_w1 CASCADE;
DROP SERVER IF EXISTS bench_w2 CASCADE;
CREATE SERVER bench_w1 FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '127.0.0.1', port '$W1', dbname '$FDWDB', parallel_commit 'true');
CREATE SERVER bench_w2 FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '127.0.0.1', port '$W2', dbname '$FDWDB', parallel_commit 'true');
CREATE USER MAPPING FOR CURRENT_USER SERVER bench_w1 OPTIONS (user 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER bench_w2 OPTIONS (user 'postgres');
SQL
TPCB_TABLES="pgbench_accounts:aid:aid int NOT NULL, bid int, abalance int, filler char(84)
pgbench_branches:bid:bid int NOT NULL, bbalance int, filler char(88)
pgbench_tellers:tid:tid int NOT NULL, bid int, tbalance int, filler char(84)
pgbench_history:aid:tid int, bid int, aid int, delta int, mtime timestamp, filler char(22)"
while IFS=: read -r table key columns; do
	$PSQL -d "$FDWDB" -c "CREATE TABLE $table ($columns) PARTITION BY HASH ($key)"
	for i in 0 1 2 3 4 5 6 7; do
		server=bench_w$((i % 2 + 1))
		$PSQL -d "$FDWDB" -c "CREATE FOREIGN TABLE ${table}_$i PARTITION OF $table
			FOR VALUES WITH (MODULUS 8, REMAINDER $i) SERVER $server OPTIONS (table_name '${table}_$i')"
	done
done <<<"$TPCB_TABLES"
for w in 1 2; do
	wport=$((PORT + w))
	wpsql="$BINDIR/psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -p $wport -d $FDWDB"
	while IFS=: read -r table key columns; do
		$wpsql -c "SET client_min_messages TO warning" -c "DROP TABLE IF EXISTS ${table}_shape CASCADE" \
			-c "CREATE TABLE ${table}_shape ($columns) PARTITION BY HASH ($key)"
		for i in 0 1 2 3 4 5 6 7; do
			[ $((i % 2 + 1)) = "$w" ] || continue
			pk=", PRIMARY KEY ($key)"
			[ "$table" = pgbench_history ] && pk=""
			$wpsql -c "SET client_min_messages TO warning" -c "DROP TABLE IF EXISTS ${table}_$i" \
				-c "CREATE TABLE ${table}_$i ($columns$pk)"
		done
	done <<<"$TPCB_TABLES"
	for i in 0 1 2 3 4 5 6 7; do
		[ $((i % 2 + 1)) = "$w" ] || continue
		$wpsql <<SQL
INSERT INTO pgbench_branches_$i SELECT b, 0, '' FROM generate_series(1, 10) b
	WHERE satisfies_hash_partition('pgbench_branches_shape'::regclass, 8, $i, b);
INSERT INTO pgbench_tellers_$i SELECT t, (t - 1) / 10 + 1, 0, '' FROM generate_series(1, 100) t
	WHERE satisfies_hash_partition('pgbench_tellers_shape'::regclass, 8, $i, t);
INSERT INTO pgbench_accounts_$i SELECT a, (a - 1) / 100000 + 1, 0, '' FROM generate_series(1, 1000000) a
	WHERE satisfies_hash_partition('pgbench_accounts_shape'::regclass, 8, $i, a);
VACUUM ANALYZE pgbench_branches_$i, pgbench_tellers_$i, pgbench_accounts_$i, pgbench_history_$i;
SQL
	done
done
fdw_accounts=$($PSQL -d "$FDWDB" -c "SELECT count(*) FROM pgbench_accounts")
[ "$fdw_accounts" = 1000000 ] || { echo "postgres_fdw accounts: $fdw_accounts rows, not 1000000" >&2; exit 1; }

if ! $PSQL -d "$DB" -c "SELECT abalance FROM pgbench_accounts WHERE aid = 1" >/dev/null 2>&1; then
	echo "pgbench TPC-B: skipped, the distributed planner cannot run queries on distributed tables yet"
	exit 0
fi
# the runs alternate (local, shardext, postgres_fdw, local, ...) so that
# load from elsewhere on the machine hits all three alike; medians reported
ROUNDS=${WRITES_BENCH_ROUNDS:-3}
ROUND_SECONDS=$((SECONDS_ / ROUNDS > 5 ? SECONDS_ / ROUNDS : 5))
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
local_all="" dist_all="" fdw_all="" local_retried=0 dist_retried=0 fdw_retried=0
for round in $(seq 1 "$ROUNDS"); do
	for kind in local dist fdw; do
		case $kind in
			local) db=$LOCALDB ;;
			dist) db=$DB ;;
			fdw) db=$FDWDB ;;
		esac
		read -r tps failed retried <<<"$(tpcb "$db" "$ROUND_SECONDS")"
		[ -n "$tps" ] || exit 1
		eval "${kind}_all=\"\${${kind}_all} $tps\""
		eval "${kind}_retried=\$((${kind}_retried + ${retried:-0}))"
	done
done
local_tps=$(median <<<"$local_all")
dist_tps=$(median <<<"$dist_all")
fdw_tps=$(median <<<"$fdw_all")
awk -v l="$local_tps" -v d="$dist_tps" -v f="$fdw_tps" -v c="$CLIENTS" -v s="$ROUND_SECONDS" -v r="$ROUNDS" \
	-v la="$local_all" -v da="$dist_all" -v fa="$fdw_all" \
	-v lr="$local_retried" -v dr="$dist_retried" -v fr="$fdw_retried" 'BEGIN {
	printf "pgbench TPC-B-like, scale 10, %d clients, median of %d alternating runs of %d s\n", c, r, s;
	printf "(retried: deadlocks and serialization failures, summed over the runs)\n";
	printf "  %-34s %8.0f tps              %6d retried  runs:%s\n", "local tables", l, lr, la;
	printf "  %-34s %8.0f tps  %.2fx local  %6d retried  runs:%s\n", "shardext (all four distributed)", d, d / l, dr, da;
	printf "  %-34s %8.0f tps  %.2fx local  %6d retried  runs:%s\n", "postgres_fdw, 8 partitions each", f, f / l, fr, fa;
}'
