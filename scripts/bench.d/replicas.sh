#!/usr/bin/env bash
# scripts/bench.d/replicas.sh: read replicas, on one cluster with a streaming
# standby per worker (made by scripts/cluster add-replica if missing, with no
# apply delay), in one run:
#   - point selects by key (pgbench -M prepared) with shardext.replica_reads
#     off (primaries) and on (replicas; read_your_writes = lsn and off):
#     throughput, latency, and the overhead of routing;
#   - point updates by key with and without replicas registered (the commit
#     LSN rides along with every write to a node that has replicas);
#   - a 90/10 read/write mix with read_your_writes = lsn (replica_wait_timeout
#     20 ms and 0) and = time: the share of reads the replicas served;
#   - the CPU the maintenance daemon spends polling the nodes.
# There is no built-in alternative to compare with (postgres_fdw has no read
# routing); replicas and primaries share the machine's 2 cores.
#
# The machine is shared, so timings move a lot between runs: the point select
# and update runs alternate (off, on, off, on ...) and the overhead is the
# median of the per-round ratios; the coordinator's own CPU per statement
# (from /proc, one psql session running 20,000 statements) is reported too,
# as it depends less on the load.
#
# Environment: SHARDEXT_PORT (coordinator; workers on the next two ports,
# standbys on port+11 and port+12), PG_CONFIG, BENCH_ROWS (default 100000),
# BENCH_SECONDS per run (default 3), BENCH_ROUNDS (default 7), BENCH_CLIENTS
# (default 4).
set -euo pipefail
source "$(dirname "$0")/lib/env.sh"
R1=$((PORT + 11))
R2=$((PORT + 12))
ROWS=${BENCH_ROWS:-100000}
SECONDS_PER_RUN=${BENCH_SECONDS:-3}
ROUNDS=${BENCH_ROUNDS:-7}
CLIENTS=${BENCH_CLIENTS:-4}
DB=bench_replicas
CLUSTER="$(dirname "$0")/../cluster"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# standbys without apply delay
for i in 1 2; do
	port=$((PORT + 10 + i))
	delay=$($PSQL -p $port -d postgres -c "SHOW recovery_min_apply_delay" 2>/dev/null || echo missing)
	if [ "$delay" != 0 ]; then
		echo "making a standby of worker $i (was: $delay) ..."
		"$CLUSTER" drop-replica "worker$i" >/dev/null
		SHARDEXT_REPLICA_CONF="" "$CLUSTER" add-replica "worker$i" >/dev/null
	fi
done

echo "setting up $ROWS rows ..."
for port in $PORT $W1 $W2; do
	$PSQL -p $port -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
done
$PSQL -p $PORT -d $DB <<SQL
SET client_min_messages TO warning;
CREATE EXTENSION shardext;
SELECT shardext_add_node('127.0.0.1', $W1);
SELECT shardext_add_node('127.0.0.1', $W2);
CREATE TABLE bench_kv (id int PRIMARY KEY, v int NOT NULL, filler text);
SELECT create_distributed_table('bench_kv', 'id');
INSERT INTO bench_kv SELECT g, 0, 'row ' || g FROM generate_series(1, $ROWS) g;
SELECT shardext_run_on_shards('bench_kv', 'VACUUM ANALYZE %s');
SQL

add_replicas() {
	$PSQL -p $PORT -d $DB -c "SELECT shardext_add_replica('127.0.0.1', $R1, '127.0.0.1', $W1)" \
		-c "SELECT shardext_add_replica('127.0.0.1', $R2, '127.0.0.1', $W2)" >/dev/null
	for _ in $(seq 1 100); do
		[ "$($PSQL -p $PORT -d $DB -c "SELECT count(*) FROM shardext.stat_replicas WHERE healthy AND replay_lag < '1s'")" = 2 ] && return 0
		sleep 0.2
	done
	echo "the replicas did not become healthy" >&2
	exit 1
}
remove_replicas() {
	$PSQL -p $PORT -d $DB -c "SELECT shardext_remove_replica('127.0.0.1', $R1)" \
		-c "SELECT shardext_remove_replica('127.0.0.1', $R2)" >/dev/null
}
add_replicas

cat >"$TMP/select.sql" <<PGB
\set id random(1, $ROWS)
SELECT v FROM bench_kv WHERE id = :id;
PGB
cat >"$TMP/update.sql" <<PGB
\set id random(1, $ROWS)
UPDATE bench_kv SET v = v + 1 WHERE id = :id;
PGB
cat >"$TMP/mix.sql" <<PGB
\set id random(1, $ROWS)
\set r random(1, 10)
\if :r <= 9
SELECT v FROM bench_kv WHERE id = :id;
\else
UPDATE bench_kv SET v = v + 1 WHERE id = :id;
\endif
PGB

# runs a pgbench script with settings, prints "tps latency_ms"
run_pgbench() {	# script settings
	local out
	out=$(PGOPTIONS="$2" "$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$SECONDS_PER_RUN" \
		-f "$1" -h 127.0.0.1 -p $PORT -U postgres $DB 2>&1) || { echo "$out" >&2; exit 1; }
	echo "$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out") $(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' <<<"$out")"
}
counters() {	# "replica_reads fallbacks primary_reads" summed over the replicas
	$PSQL -p $PORT -d $DB -F ' ' -c "SELECT sum(replica_reads), sum(fallbacks),
		(SELECT coalesce(sum(primary_reads), 0) FROM shardext.replica_status() WHERE primary_node_id IS NULL)
		FROM shardext.stat_replicas"
}

declare -A TPS LAT SHARE RATIOS
record() {	# key tps latency
	if [ -z "${TPS[$1]:-}" ] || awk -v a="$2" -v b="${TPS[$1]}" 'BEGIN { exit !(a > b) }'; then
		TPS[$1]=$2
		LAT[$1]=$3
	fi
}
# keeps the latency ratio of one round: key latency base_latency
ratio_of_round() { RATIOS[$1]="${RATIOS[$1]:-} $(awk -v a="$2" -v b="$3" 'BEGIN { printf "%.4f", a / b }')"; }
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# coordinator CPU per statement: one psql session runs the statements of a file
cpu_per_statement() {	# settings statement_template(with %d) count
	local fifo="$TMP/fifo" done="$TMP/done" pid t0 t1
	rm -f "$fifo" "$done"; mkfifo "$fifo"
	PGAPPNAME=bench_cpu PGOPTIONS="$1" $PSQL -p $PORT -d $DB <"$fifo" >/dev/null &
	local client=$!
	exec 3>"$fifo"
	echo "SELECT 1;" >&3
	for _ in $(seq 1 50); do
		pid=$($PSQL -p $PORT -d $DB -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'bench_cpu'")
		[ -n "$pid" ] && break
		sleep 0.1
	done
	t0=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
	awk -v n="$3" -v rows="$ROWS" -v t="$2" 'BEGIN { srand(1); for (i = 0; i < n; i++) printf t "\n", 1 + int(rand() * rows) }' >&3
	echo "SELECT 1 \\g $done" >&3
	while [ ! -s "$done" ]; do sleep 0.1; done
	t1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
	exec 3>&-
	wait "$client"
	awk -v d=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v n="$3" 'BEGIN { printf "%.1f", 1e6 * d / hz / n }'
}
OFF="-c shardext.replica_reads=off"
ON_LSN="-c shardext.replica_reads=on -c shardext.read_your_writes=lsn"
ON_OFF="-c shardext.replica_reads=on -c shardext.read_your_writes=off"
for round in $(seq 1 "$ROUNDS"); do
	echo "round $round of $ROUNDS ..."
	read -r tps lat0 < <(run_pgbench "$TMP/select.sql" "$OFF"); record select_off "$tps" "$lat0"
	read -r tps lat < <(run_pgbench "$TMP/select.sql" "$ON_LSN"); record select_lsn "$tps" "$lat"
	ratio_of_round select_lsn "$lat" "$lat0"
	read -r tps lat < <(run_pgbench "$TMP/select.sql" "$ON_OFF"); record select_norw "$tps" "$lat"
	ratio_of_round select_norw "$lat" "$lat0"
	if [ "$round" -le 3 ]; then
		read -r tps lat1 < <(run_pgbench "$TMP/update.sql" "$OFF"); record update_replicas "$tps" "$lat1"
		remove_replicas
		read -r tps lat0 < <(run_pgbench "$TMP/update.sql" "$OFF"); record update_none "$tps" "$lat0"
		ratio_of_round update_replicas "$lat1" "$lat0"
		add_replicas
	fi
done
echo "coordinator CPU per statement ..."
CPU_OFF=$(cpu_per_statement "$OFF" "SELECT v FROM bench_kv WHERE id = %d;" 20000)
CPU_LSN=$(cpu_per_statement "$ON_LSN" "SELECT v FROM bench_kv WHERE id = %d;" 20000)
CPU_UPD_R=$(cpu_per_statement "$OFF" "UPDATE bench_kv SET v = v + 1 WHERE id = %d;" 5000)
remove_replicas
CPU_UPD=$(cpu_per_statement "$OFF" "UPDATE bench_kv SET v = v + 1 WHERE id = %d;" 5000)
add_replicas

# the mixes: the share of reads served by replicas
for mix in "lsn 20ms|-c shardext.replica_reads=on -c shardext.read_your_writes=lsn -c shardext.replica_wait_timeout=20" \
		   "lsn 0|-c shardext.replica_reads=on -c shardext.read_your_writes=lsn -c shardext.replica_wait_timeout=0" \
		   "time 5s|-c shardext.replica_reads=on -c shardext.read_your_writes=time" \
		   "off|-c shardext.replica_reads=off"; do
	name=${mix%%|*}
	read -r r0 f0 p0 < <(counters)
	read -r tps lat < <(run_pgbench "$TMP/mix.sql" "${mix#*|}")
	read -r r1 f1 p1 < <(counters)
	TPS["mix $name"]=$tps
	LAT["mix $name"]=$lat
	SHARE["mix $name"]=$(awk -v r=$((r1 - r0)) -v f=$((f1 - f0)) -v p=$((p1 - p0)) -v t="$tps" -v s="$SECONDS_PER_RUN" \
		'BEGIN { reads = t * s * 0.9; printf "%.1f%% (%d replica, %d fell back, %d primary)", 100 * r / reads, r, f, p }')
done

# the daemon's polling: CPU per second of wall time
pid=$($PSQL -p $PORT -d $DB -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'shardext maintenance daemon' AND datname = '$DB'")
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
t0=$(ticks "$pid"); sleep 10; t1=$(ticks "$pid")
hz=$(getconf CLK_TCK)
daemon_ms=$(awk -v d=$((t1 - t0)) -v hz="$hz" 'BEGIN { printf "%.1f", 1000 * d / hz / 10 }')

pct() { awk -v r="$1" 'BEGIN { printf "%+.1f%%", 100 * (r - 1) }'; }
echo
echo "$ROWS rows, $CLIENTS clients, -M prepared; best of $ROUNDS runs of ${SECONDS_PER_RUN}s, the median of the"
echo "per-round latency ratios (updates: 3 rounds; mixes: one run)"
printf '%-56s %8s %10s %11s %12s\n' "" "tps" "latency" "vs primary" "coord. CPU"
printf '%-56s %8.0f %7.3f ms %11s %9s us\n' "point select, replica_reads off (primaries)" \
	"${TPS[select_off]}" "${LAT[select_off]}" "" "$CPU_OFF"
printf '%-56s %8.0f %7.3f ms %11s %9s us\n' "point select, replica_reads on, read_your_writes lsn" \
	"${TPS[select_lsn]}" "${LAT[select_lsn]}" "$(pct "$(median "${RATIOS[select_lsn]}")")" "$CPU_LSN"
printf '%-56s %8.0f %7.3f ms %11s\n' "point select, replica_reads on, read_your_writes off" \
	"${TPS[select_norw]}" "${LAT[select_norw]}" "$(pct "$(median "${RATIOS[select_norw]}")")"
printf '%-56s %8.0f %7.3f ms %11s %9s us\n' "point update, no replicas" \
	"${TPS[update_none]}" "${LAT[update_none]}" "" "$CPU_UPD"
printf '%-56s %8.0f %7.3f ms %11s %9s us\n' "point update, replicas registered (commit LSN fetched)" \
	"${TPS[update_replicas]}" "${LAT[update_replicas]}" "$(pct "$(median "${RATIOS[update_replicas]}")")" "$CPU_UPD_R"
for name in "lsn 20ms" "lsn 0" "time 5s" "off"; do
	printf '%-56s %8.0f %7.3f ms   reads on replicas: %s\n' "90/10 mix, read_your_writes $name" \
		"${TPS["mix $name"]}" "${LAT["mix $name"]}" "${SHARE["mix $name"]}"
done
echo "maintenance daemon polling 2 primaries + 2 replicas every 100 ms: $daemon_ms ms CPU per second"

for port in $PORT $W1 $W2; do
	$PSQL -p $port -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
done
