#!/usr/bin/env bash
# scripts/bench.d/cdc.sh: change data capture.
#
#   1. Decoding: changes per second that a worker's logical decoding turns
#      into pgoutput messages, through shardext's wrapper (a shard of a
#      published distributed table, decoded as the table) and through plain
#      pgoutput (a local table of the same columns in an ordinary
#      publication, slot plugin pgoutput by its full path), on the same worker:
#      CDC_BENCH_ROWS (default 100k) rows inserted and then updated in
#      transactions of 1,000 rows, decoded with
#      pg_logical_slot_get_binary_changes(); CDC_BENCH_ROUNDS (default 3)
#      alternating rounds, the best of each; ratio wrapper / plain.
#   2. Writes: pgbench inserts and updates through the coordinator
#      (CDC_BENCH_CLIENTS, default 8, for CDC_BENCH_SECONDS, default 20 s per
#      run, alternating) on a distributed table, without a publication and
#      with one whose slots a plain PostgreSQL subscriber (started here,
#      subscribed to every worker) consumes; the cost is 1 - with / without.
#      For reference, the same on a plain local table of the coordinator
#      with an ordinary publication consumed by the same subscriber (what
#      logical replication costs on this machine without shardext).
#
# Runs against the local cluster (SHARDEXT_PORT, default 9700; workers at +1
# and +2) in database shardext_bench_cdc, which it makes anew; the
# subscriber runs on port SHARDEXT_PORT + 41.  The workers need the
# cluster's dynamic_library_path (scripts/cluster sets it).
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PORT=${SHARDEXT_PORT:-9700}
CLUSTER_DIR=${SHARDEXT_CLUSTER_DIR:-/var/tmp/shardext-cluster}
BINDIR=$("$PG_CONFIG" --bindir)
# the real pgoutput: by its full path, since "$libdir/pgoutput" is looked up
# along dynamic_library_path from PostgreSQL 18 on (and finds the wrapper)
PLAIN_PGOUTPUT="$("$PG_CONFIG" --pkglibdir)/pgoutput"
DB=shardext_bench_cdc
ROWS=${CDC_BENCH_ROWS:-100000}
ROUNDS=${CDC_BENCH_ROUNDS:-3}
CLIENTS=${CDC_BENCH_CLIENTS:-8}
SECONDS_=${CDC_BENCH_SECONDS:-20}
W1=$((PORT + 1))
W2=$((PORT + 2))
SUB_PORT=$((PORT + 41))
SUB_DIR="$CLUSTER_DIR/bench_cdc_subscriber"
PSQL="$BINDIR/psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres"
WORK=$(mktemp -d)
chmod 777 "$WORK"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

drop_everything() {
	$PSQL -p "$SUB_PORT" -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
	as_pg "$BINDIR/pg_ctl" -D "$SUB_DIR" -m fast stop >/dev/null 2>&1 || true
	rm -rf "$SUB_DIR"
	for port in $W1 $W2 $PORT; do
		$PSQL -p "$port" -d postgres \
			-c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '$DB' AND NOT active" \
			-c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
	done
}
trap 'drop_everything; rm -rf "$WORK"' EXIT
drop_everything

echo "machine: $(nproc) cores; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
$PSQL -p "$PORT" -d postgres -c "CREATE DATABASE $DB"
$PSQL -p "$PORT" -d $DB -c "SET client_min_messages = warning" -c "CREATE EXTENSION shardext" \
	-c "SELECT shardext_add_node('127.0.0.1', $W1)" -c "SELECT shardext_add_node('127.0.0.1', $W2)" \
	-c "CREATE TABLE t (id bigint PRIMARY KEY, n int NOT NULL, v text)" \
	-c "SELECT create_distributed_table('t', 'id', shard_count => 4)" >/dev/null
$PSQL -p "$PORT" -d $DB -c "SELECT shardext_create_publication('bench_cdc', create_slot => true)" >/dev/null
SHARD=$($PSQL -p "$PORT" -d $DB -c "SELECT shard_name FROM shardext.shards WHERE node_port = $W1 LIMIT 1")
$PSQL -p "$W1" -d $DB -c "CREATE TABLE loc (id bigint PRIMARY KEY, n int NOT NULL, v text)" \
	-c "CREATE PUBLICATION bench_local FOR TABLE loc" >/dev/null

# ---- 1. decoding
# servers that restrict output plugins (output_plugin_libraries) must let the plain one in
ALLOW_PLAIN="DO \$\$ BEGIN IF current_setting('output_plugin_libraries', true) IS NOT NULL THEN
	PERFORM set_config('output_plugin_libraries', current_setting('output_plugin_libraries') || ', $PLAIN_PGOUTPUT', false);
	END IF; END \$\$"
# decode_round SLOT PLUGIN TABLE PUBLICATION: seconds to decode ROWS inserts and ROWS updates
decode_round() {
	local slot=$1 plugin=$2 table=$3 pub=$4 start end changes
	$PSQL -p "$W1" -d $DB -c "$ALLOW_PLAIN" \
		-c "SELECT pg_create_logical_replication_slot('$slot', '$plugin')" >/dev/null
	for ((i = 0; i < ROWS; i += 1000)); do
		echo "INSERT INTO $table SELECT g, 0, 'row ' || g FROM generate_series($i, $((i + 999))) g;"
	done | $PSQL -p "$W1" -d $DB
	for ((i = 0; i < ROWS; i += 1000)); do
		echo "UPDATE $table SET n = n + 1 WHERE id BETWEEN $i AND $((i + 999));"
	done | $PSQL -p "$W1" -d $DB
	start=$(date +%s.%N)
	changes=$($PSQL -p "$W1" -d $DB -c "$ALLOW_PLAIN" -c "SELECT count(*) FILTER (WHERE get_byte(data, 0) IN (73, 85))
		FROM pg_logical_slot_get_binary_changes('$slot', NULL, NULL,
			'proto_version', '1', 'publication_names', '$pub')")
	end=$(date +%s.%N)
	$PSQL -p "$W1" -d $DB -c "SELECT pg_drop_replication_slot('$slot')" -c "TRUNCATE $table" >/dev/null
	[ "$changes" = $((2 * ROWS)) ] || { echo "decoded $changes changes of $table, not $((2 * ROWS))" >&2; exit 1; }
	echo "$start $end" | awk -v n="$changes" '{printf "%.0f", n / ($2 - $1)}'
}
best_wrap=0
best_plain=0
for ((r = 1; r <= ROUNDS; r++)); do
	wrap=$(decode_round bench_wrap pgoutput "$SHARD" bench_cdc)
	plain=$(decode_round bench_plain "$PLAIN_PGOUTPUT" loc bench_local)
	echo "round $r: wrapper $wrap changes/s, plain pgoutput $plain changes/s"
	[ "$wrap" -gt "$best_wrap" ] && best_wrap=$wrap
	[ "$plain" -gt "$best_plain" ] && best_plain=$plain
done
echo "decoding: wrapper (shard as its table) $best_wrap changes/s, plain pgoutput (local table) $best_plain changes/s, ratio $(awk -v a="$best_wrap" -v b="$best_plain" 'BEGIN {printf "%.2f", a / b}')x (target >= 0.8x)"
$PSQL -p "$W1" -d $DB -c "DROP PUBLICATION bench_local" -c "DROP TABLE loc" >/dev/null

# ---- 2. write throughput without and with a consumed publication
as_pg "$BINDIR/initdb" -D "$SUB_DIR" --auth=trust --username=postgres >/dev/null
as_pg "$BINDIR/pg_ctl" -D "$SUB_DIR" -l "$SUB_DIR/server.log" -w -o \
	"-p $SUB_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories='$SUB_DIR'" start >/dev/null
$PSQL -p "$SUB_PORT" -d postgres -c "CREATE DATABASE $DB"
$PSQL -p "$SUB_PORT" -d $DB -c "CREATE TABLE t (id bigint PRIMARY KEY, n int NOT NULL, v text)"
$PSQL -p "$PORT" -d $DB -c "SELECT shardext_drop_publication('bench_cdc')" -c "TRUNCATE t" \
	-c "INSERT INTO t SELECT g, 0, 'seed' FROM generate_series(1, 10000) g" >/dev/null
cat >"$WORK/write.sql" <<'EOF'
\set k random(1, 10000)
\set id random(20000, 9000000000000000000)
INSERT INTO t VALUES (:id, 0, 'new');
UPDATE t SET n = n + 1 WHERE id = :k;
EOF
write_run() {
	"$BINDIR/pgbench" -h 127.0.0.1 -p "$PORT" -U postgres -n -c "$CLIENTS" -j 2 -T "$SECONDS_" \
		-f "$WORK/write.sql" $DB 2>/dev/null | awk '/^tps/ {printf "%.0f", $3}'
}
publish() {
	$PSQL -p "$PORT" -d $DB -c "SELECT shardext_create_publication('bench_cdc', create_slot => true)" >/dev/null
	$PSQL -p "$SUB_PORT" -d $DB -c "TRUNCATE t"
	for wport in $W1 $W2; do
		$PSQL -p "$SUB_PORT" -d $DB -c "CREATE SUBSCRIPTION bench_$wport CONNECTION
			'host=127.0.0.1 port=$wport dbname=$DB user=postgres' PUBLICATION bench_cdc
			WITH (create_slot = false, slot_name = 'bench_cdc', copy_data = false)"
	done
}
unpublish() {
	for wport in $W1 $W2; do
		$PSQL -p "$SUB_PORT" -d $DB -c "ALTER SUBSCRIPTION bench_$wport DISABLE" \
			-c "ALTER SUBSCRIPTION bench_$wport SET (slot_name = NONE)" -c "DROP SUBSCRIPTION bench_$wport"
	done
	for _ in $(seq 1 100); do
		[ "$($PSQL -p "$PORT" -d $DB -c "SELECT count(*) FROM shardext.cdc_slots WHERE active")" = 0 ] && break
		sleep 0.1
	done
	$PSQL -p "$PORT" -d $DB -c "SELECT shardext_drop_publication('bench_cdc')" >/dev/null
}
best_without=0
best_with=0
for ((r = 1; r <= ROUNDS - 1; r++)); do
	without=$(write_run)
	publish
	with=$(write_run)
	behind=$($PSQL -p "$PORT" -d $DB -c "SELECT coalesce(max(bytes_behind), 0) FROM shardext.cdc_slots")
	unpublish
	echo "round $r: without a publication $without tps, with a consumed publication $with tps (subscriber $behind bytes behind at the end)"
	[ "$without" -gt "$best_without" ] && best_without=$without
	[ "$with" -gt "$best_with" ] && best_with=$with
done
echo "writes: $best_without tps without, $best_with tps with a consumed publication, cost $(awk -v a="$best_with" -v b="$best_without" 'BEGIN {printf "%.1f", (1 - a / b) * 100}')% (target <= 10%)"

# the same with a plain local table and an ordinary publication
$PSQL -p "$PORT" -d $DB -c "CREATE TABLE loc (id bigint PRIMARY KEY, n int NOT NULL, v text)" \
	-c "INSERT INTO loc SELECT g, 0, 'seed' FROM generate_series(1, 10000) g"
$PSQL -p "$SUB_PORT" -d $DB -c "CREATE TABLE loc (id bigint PRIMARY KEY, n int NOT NULL, v text)"
sed 's/INTO t /INTO loc /; s/UPDATE t /UPDATE loc /' "$WORK/write.sql" >"$WORK/write_local.sql"
local_run() {
	"$BINDIR/pgbench" -h 127.0.0.1 -p "$PORT" -U postgres -n -c "$CLIENTS" -j 2 -T "$SECONDS_" \
		-f "$WORK/write_local.sql" $DB 2>/dev/null | awk '/^tps/ {printf "%.0f", $3}'
}
best_lwithout=0
best_lwith=0
for ((r = 1; r <= ROUNDS - 1; r++)); do
	without=$(local_run)
	$PSQL -p "$PORT" -d $DB -c "CREATE PUBLICATION bench_plain FOR TABLE loc"
	$PSQL -p "$SUB_PORT" -d $DB -c "TRUNCATE loc" -c "CREATE SUBSCRIPTION bench_plain CONNECTION
		'host=127.0.0.1 port=$PORT dbname=$DB user=postgres' PUBLICATION bench_plain WITH (copy_data = false)"
	with=$(local_run)
	$PSQL -p "$SUB_PORT" -d $DB -c "DROP SUBSCRIPTION bench_plain"
	$PSQL -p "$PORT" -d $DB -c "DROP PUBLICATION bench_plain"
	echo "round $r, local table: without a publication $without tps, with a consumed publication $with tps"
	[ "$without" -gt "$best_lwithout" ] && best_lwithout=$without
	[ "$with" -gt "$best_lwith" ] && best_lwith=$with
done
echo "writes, plain local table for reference: $best_lwithout tps without, $best_lwith tps with, cost $(awk -v a="$best_lwith" -v b="$best_lwithout" 'BEGIN {printf "%.1f", (1 - a / b) * 100}')%"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
