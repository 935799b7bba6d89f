#!/usr/bin/env bash
# scripts/bench.d/lib/versions.sh: shardext's speed relative to local
# PostgreSQL, compared between major versions of PostgreSQL in one run
# (scripts/bench --versions 15,18 [queries] [writes]).
#
# For each version it builds and installs shardext (production build), then
# starts a cluster of its own: SHARDEXT_PORT + 20 * i for the i-th version
# (workers on the next ports) in "$SHARDEXT_CLUSTER_DIR-pgN".  It runs the
# benchmarks in turns, the versions alternating (15 18, 18 15, 15 18 ... so
# that load from elsewhere on the machine, and its drift, hit every version
# alike), each benchmark once per version and turn.  Each run measures
# shardext next to a local table of the same server, so every line is a ratio
# to local PostgreSQL of the same version; the table at the end gives each
# version's ratio (the mean over the turns, and each turn's) and each
# version's ratio divided by the first version's.  All ratios are speeds
# (higher is better; for the aggregate and COPY, local time / shardext time).
#
# Benchmarks: queries (point select and point update by key, pgbench
# -M prepared, and a multi-shard count/sum/avg) and writes (COPY, pgbench
# TPC-B).  Environment:
#   PGN                    pg_config of version N (as the helpers' sandboxes
#                          export), else that of scripts/lib/pg.sh's pg_find N
#   BENCH_VERSIONS_TURNS   turns (default 2)
#   BENCH_VERSIONS_BUILD   0: do not build and install (default 1)
#   BENCH_VERSIONS_LOG     directory for each run's output (default: a
#                          temporary one, removed at the end)
#   BENCH_VERSIONS_STOP    1: stop the clusters at the end (default 0)
#   the benchmarks' own knobs, with smaller defaults here: BENCH_ROWS (200000),
#   BENCH_SECONDS (5), BENCH_ROUNDS (1), BENCH_CLIENTS (4), WRITES_BENCH_ROWS
#   (200000), WRITES_BENCH_FDW_ROWS (5000), WRITES_BENCH_SECONDS (10),
#   WRITES_BENCH_ROUNDS (1).
set -euo pipefail
cd "$(dirname "$0")/../../.."
. scripts/lib/pg.sh

if [ $# -lt 1 ]; then
	echo "usage: scripts/bench --versions 15,18 [queries] [writes]" >&2
	exit 2
fi
IFS=, read -r -a VERSIONS <<<"$1"
shift
NAMES=("$@")
[ ${#NAMES[@]} -gt 0 ] || NAMES=(queries writes)
for name in "${NAMES[@]}"; do
	case $name in
		queries | writes) ;;
		*) echo "scripts/bench --versions: no version comparison for \"$name\" (queries, writes)" >&2; exit 2 ;;
	esac
done

BASE_PORT=${SHARDEXT_PORT:-9700}
BASE_DIR=${SHARDEXT_CLUSTER_DIR:-/var/tmp/shardext-cluster}
TURNS=${BENCH_VERSIONS_TURNS:-2}
export BENCH_ROWS=${BENCH_ROWS:-200000} BENCH_SECONDS=${BENCH_SECONDS:-5} \
	BENCH_ROUNDS=${BENCH_ROUNDS:-1} BENCH_CLIENTS=${BENCH_CLIENTS:-4} \
	WRITES_BENCH_ROWS=${WRITES_BENCH_ROWS:-200000} WRITES_BENCH_FDW_ROWS=${WRITES_BENCH_FDW_ROWS:-5000} \
	WRITES_BENCH_SECONDS=${WRITES_BENCH_SECONDS:-10} WRITES_BENCH_ROUNDS=${WRITES_BENCH_ROUNDS:-1}
if [ -n "${BENCH_VERSIONS_LOG:-}" ]; then
	LOG=$BENCH_VERSIONS_LOG
	mkdir -p "$LOG"
else
	LOG=$(mktemp -d)
	trap 'rm -rf "$LOG"' EXIT
fi

declare -A CONFIG PORT DIR
i=0
for v in "${VERSIONS[@]}"; do
	var="PG$v"
	if [ -n "${!var:-}" ]; then
		CONFIG[$v]=${!var}
	elif ! CONFIG[$v]=$(pg_find "$v"); then
		echo "PostgreSQL $v not found (set PG$v to its pg_config)" >&2
		exit 2
	fi
	PORT[$v]=$((BASE_PORT + 20 * i))
	DIR[$v]=$BASE_DIR-pg$v
	i=$((i + 1))
done

# runs a command with version $1's PostgreSQL, ports and cluster
with_version() {	# version command ...
	local v=$1
	shift
	(
		export PG_CONFIG=${CONFIG[$v]} SHARDEXT_PORT=${PORT[$v]} SHARDEXT_CLUSTER_DIR=${DIR[$v]}
		unset SHARDEXT_TEST_BUILD
		pg_use_libdir
		"$@"
	)
}

# the Makefile rebuilds every object when PG_CONFIG changes, so one version
# after the other
if [ "${BENCH_VERSIONS_BUILD:-1}" != 0 ]; then
	for v in "${VERSIONS[@]}"; do
		echo "building and installing shardext for PostgreSQL $v ($("${CONFIG[$v]}" --version)) ..."
		with_version "$v" make -s -j2 PG_CONFIG="${CONFIG[$v]}" >"$LOG/build-$v.log" 2>&1 &&
			with_version "$v" make -s PG_CONFIG="${CONFIG[$v]}" install >>"$LOG/build-$v.log" 2>&1 ||
			{ tail -30 "$LOG/build-$v.log" >&2; exit 1; }
	done
fi
# a running server keeps the shardext.so it started with: restart it after
# an install
for v in "${VERSIONS[@]}"; do
	echo "PostgreSQL $v: cluster on ports ${PORT[$v]}.., ${DIR[$v]}"
	if [ "${BENCH_VERSIONS_BUILD:-1}" != 0 ]; then
		with_version "$v" scripts/cluster stop >/dev/null
	fi
	with_version "$v" scripts/cluster start >/dev/null
done

# measurements of one run's output: "key ratio" lines, ratio = shardext
# speed / local speed
measure_queries() {
	awk '
		/^point selects by key/ { printf "select %.4f\n", $9 / $7 }
		/^point updates by key/ { printf "update %.4f\n", $9 / $7 }
		/^count\/sum\/avg over all rows/ { printf "aggregate %.4f\n", $5 / $7 }'
}
measure_writes() {
	awk '
		/^  local table / { copy_local = $5 }
		/^  shardext, 32 shards/ { printf "copy %.4f\n", $6 / copy_local }
		/^  local tables / { tpcb_local = $3 }
		/^  shardext \(all four distributed\)/ { printf "tpcb %.4f\n", $5 / tpcb_local }'
}

echo "turns: $TURNS; machine: $(nproc) cores; $(uptime | sed 's/.*load/load/')"
for turn in $(seq 1 "$TURNS"); do
	order=("${VERSIONS[@]}")
	if [ $((turn % 2)) = 0 ]; then	# every other turn in reverse order
		order=()
		for ((k = ${#VERSIONS[@]} - 1; k >= 0; k--)); do order+=("${VERSIONS[$k]}"); done
	fi
	for name in "${NAMES[@]}"; do
		for v in "${order[@]}"; do
			out="$LOG/$name-$v-$turn.log"
			echo "turn $turn: $name on PostgreSQL $v ($(uptime | sed 's/.*load/load/'))"
			with_version "$v" bash "scripts/bench.d/$name.sh" >"$out" 2>&1 ||
				{ echo "$name on PostgreSQL $v failed:" >&2; tail -30 "$out" >&2; exit 1; }
			"measure_$name" <"$out" | sed "s/^/$v $turn /" >>"$LOG/measurements"
		done
	done
done
echo "end: $(uptime | sed 's/.*load/load/')"

# table: per measurement, each version's mean ratio (the turns'), and each
# version's mean ratio over the first version's
first=${VERSIONS[0]}
echo
echo "shardext speed / local PostgreSQL speed of the same version (higher is better),"
echo "mean of $TURNS alternating turns (each turn's in brackets); last columns: ratio / PostgreSQL $first's"
awk -v versions="${VERSIONS[*]}" -v first="$first" '
	BEGIN {
		nv = split(versions, vs, " ");
		label["select"] = "point select by key (router)";
		label["update"] = "point update by key (router)";
		label["aggregate"] = "multi-shard count/sum/avg";
		label["copy"] = "COPY (CSV, 32 shards)";
		label["tpcb"] = "pgbench TPC-B";
	}
	{
		key = $3; v = $1;
		if (!(key in seen)) { seen[key] = 1; keys[++nk] = key; }
		sum[key, v] += $4; n[key, v]++;
		runs[key, v] = runs[key, v] (runs[key, v] == "" ? "" : " ") sprintf("%.2f", $4);
	}
	END {
		printf "%-30s", "measurement";
		for (j = 1; j <= nv; j++) printf " %-22s", vs[j] " / local";
		for (j = 2; j <= nv; j++) printf " %9s", vs[j] " / " first;
		printf "\n";
		for (k = 1; k <= nk; k++) {
			key = keys[k];
			printf "%-30s", label[key];
			for (j = 1; j <= nv; j++) {
				m[j] = n[key, vs[j]] ? sum[key, vs[j]] / n[key, vs[j]] : 0;
				printf " %-22s", sprintf("%.3f (%s)", m[j], runs[key, vs[j]]);
			}
			for (j = 2; j <= nv; j++)
				printf " %9s", (m[1] > 0 ? sprintf("%.2f", m[j] / m[1]) : "-");
			printf "\n";
		}
	}' "$LOG/measurements"

if [ "${BENCH_VERSIONS_STOP:-0}" = 1 ]; then
	for v in "${VERSIONS[@]}"; do with_version "$v" scripts/cluster stop >/dev/null; done
fi
