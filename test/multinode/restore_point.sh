#!/usr/bin/env bash
# Cluster-wide restore points and restoring a whole cluster to one (issue
# 24), on a cluster of its own (a coordinator and two workers on
# port+30..32, WAL archiving on every node):
#  1. bad input: no name, a name too long, a caller who is no
#     administrator, a node down: clear errors, and no point anywhere;
#  2. base backups of every node; money transfers run; a restore point is
#     created while they run (twice, the second by the maintenance daemon's
#     shardext.restore_point_interval); the transfers go on;
#  3. every node is restored from its base backup and the WAL archive to
#     that name, into new data directories on new ports (port+40..42),
#     while the original cluster keeps running: the coordinator first
#     without shardext to repoint the catalog at the new hosts, then with it
#     and shardext_update_node() to accept the restored servers (a new
#     timeline);
#  4. the restored cluster runs: its ledger has no half transfer, every
#     transfer committed before the point and none begun after it, nothing
#     stays prepared, and it takes new writes -- none of which reaches the
#     original cluster.
TEST_DB=restore_point
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/failover.sh"
RP_DIR="$SHARDEXT_CLUSTER_DIR-rp"
RP_PORT=$((SHARDEXT_PORT + 30))
NEW_PORT=$((SHARDEXT_PORT + 40))
ORIGINAL_COORDINATOR=$COORDINATOR_PORT
COORDINATOR_PORT=$RP_PORT
WORKER_1_PORT=$((RP_PORT + 1))
WORKER_2_PORT=$((RP_PORT + 2))
RP_CONF="${SHARDEXT_EXTRA_CONF:-fsync = off};shared_buffers = 32MB;max_connections = 100;max_prepared_transactions = 100"
RP_CONF="$RP_CONF;archive_mode = on;archive_command = 'mkdir -p ../archive/\$(basename \"\$PWD\") && cp %p ../archive/\$(basename \"\$PWD\")/%f'"

rpcluster() {
	SHARDEXT_CLUSTER_DIR=$RP_DIR SHARDEXT_PORT=$RP_PORT SHARDEXT_EXTRA_CONF="$RP_CONF" \
		"$ROOT/scripts/cluster" "$@"
}
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
new_server() {	# name: the restored copy's pg_ctl
	as_postgres "$BINDIR/pg_ctl" -D "$RP_DIR/restored/$1" -l "$RP_DIR/restored/$1.log" -w -t 120 "${@:2}"
}
cleanup() {
	[ -n "${TRANSFERS_PID:-}" ] && kill "$TRANSFERS_PID" 2>/dev/null
	for name in coordinator worker1 worker2; do
		[ -d "$RP_DIR/restored/$name" ] && new_server "$name" -m immediate stop >/dev/null 2>&1
	done
	rpcluster destroy >/dev/null 2>&1
	psql_at "$ORIGINAL_COORDINATOR" -d postgres -c "DROP ROLE IF EXISTS rp_nobody" >/dev/null 2>&1
	[ -n "${TMP:-}" ] && rm -rf "$TMP"
}
trap cleanup EXIT
cleanup
TMP=$(mktemp -d /tmp/restore_point.XXXXXX)
chmod 777 "$TMP"

rpcluster start 2 >/dev/null || fail "could not start the restore point cluster"
bank_database "$TEST_DB"
FIRST=$(accounts_on "$WORKER_1_PORT")
SECOND=$(accounts_on "$WORKER_2_PORT")
[ -n "$FIRST" ] && [ -n "$SECOND" ] || fail "accounts on both workers"

# --- 1. bad input --------------------------------------------------------------
points_named() {	# name: how many nodes have a restore point of that name in their WAL
	local port n=0
	for port in $COORDINATOR_PORT $WORKER_1_PORT $WORKER_2_PORT; do
		psql_at "$port" -d postgres -c "SELECT pg_switch_wal()" >/dev/null
		if grep -rqa -- "$1" "$RP_DIR/$(case $port in $COORDINATOR_PORT) echo coordinator ;; $WORKER_1_PORT) echo worker1 ;; *) echo worker2 ;; esac)/pg_wal" 2>/dev/null; then
			n=$((n + 1))
		fi
	done
	echo "$n"
}
expect_error_like "a restore point needs a name" "a restore point needs a name" \
	coord "SELECT * FROM shardext_create_restore_point('')"
expect_error_like "a name too long is refused" "restore point name is too long" \
	coord "SELECT * FROM shardext_create_restore_point(repeat('x', 64))"
coord "CREATE ROLE rp_nobody LOGIN" >/dev/null
expect_error_like "a caller who is no administrator is refused" "permission denied for function shardext_create_restore_point" \
	psql_at "$COORDINATOR_PORT" -U rp_nobody -c "SELECT * FROM shardext_create_restore_point('not_admin')"
rpcluster stop-node worker2 immediate
expect_error_like "a restore point with a node down is refused" "cannot create a restore point while node [0-9]+ \(127.0.0.1:$WORKER_2_PORT\) cannot be reached" \
	coord "SELECT * FROM shardext_create_restore_point('node_down')"
rpcluster start-node worker2
expect_eq "and no node has that point" 0 "$(points_named node_down)"

# --- 2. base backups, transfers, restore points --------------------------------
mkdir -p "$RP_DIR/backup"
chown postgres: "$RP_DIR/backup" 2>/dev/null
for pair in "coordinator $RP_PORT" "worker1 $((RP_PORT + 1))" "worker2 $((RP_PORT + 2))"; do
	set -- $pair
	name=$1
	port=$2
	as_postgres "$BINDIR/pg_basebackup" -h 127.0.0.1 -p "$port" -U postgres -D "$RP_DIR/backup/$name" \
		-X stream -c fast >/dev/null || fail "base backup of $name failed"
done
echo "ok - base backups of every node"
start_transfers "$TMP/rp" 4 "$FIRST" "$SECOND"
wait_until "transfers run" 30 "SELECT count(*) > 300 FROM $BANK_LEDGER"
rp_started=$(date +%s.%N)
out=$(coord "SELECT node_id || ' ' || lsn FROM shardext_create_restore_point('shardext test point')") ||
	fail "shardext_create_restore_point failed: $out"
rp_ended=$(date +%s.%N)
expect_eq "one restore point per node, the coordinator as node 0" "0|3" \
	"$(awk 'NR == 1 {first = $1} END {print first "|" NR}' <<<"$out")"
echo "ok - the restore point took $(awk -v a="$rp_started" -v b="$rp_ended" 'BEGIN {printf "%d", (b - a) * 1000}') ms under transfers"
declare -A RP_LSN
while read -r id lsn; do RP_LSN[$id]=$lsn; done <<<"$out"
# the daemon's periodic points, while transfers go on
psql_at "$COORDINATOR_PORT" -d postgres -c "ALTER SYSTEM SET shardext.restore_point_interval = 2" \
	-c "SELECT pg_reload_conf()" >/dev/null
from=$(log_lines "$RP_DIR/coordinator.log")
wait_for_log "$RP_DIR/coordinator.log" "shardext: created restore point \"shardext_[0-9]{8}_[0-9]{6}\" on 3 nodes" 30 "$from"
psql_at "$COORDINATOR_PORT" -d postgres -c "ALTER SYSTEM RESET shardext.restore_point_interval" \
	-c "SELECT pg_reload_conf()" >/dev/null
echo "ok - the maintenance daemon creates restore points every shardext.restore_point_interval"
count=$(coord "SELECT count(*) FROM $BANK_LEDGER")
wait_until "transfers go on after the point" 30 "SELECT count(*) > $count + 200 FROM $BANK_LEDGER"
stop_transfers "$TMP/rp"
check_books "the original cluster" "$TMP/rp"
# every node's WAL up to its point reaches its archive
for port in $COORDINATOR_PORT $WORKER_1_PORT $WORKER_2_PORT; do
	psql_at "$port" -d postgres -c "SELECT pg_switch_wal()" >/dev/null
done
for pair in "0 $COORDINATOR_PORT" "1 $WORKER_1_PORT" "2 $WORKER_2_PORT"; do
	set -- $pair
	id=$1
	[ "$id" = 0 ] || id=$(node_id_of_port "$2")
	wait_until "node $id archived its restore point" 60 \
		"SELECT last_archived_wal >= pg_walfile_name('${RP_LSN[$id]}') FROM pg_stat_archiver" "$2"
done
echo "ok - every node archived the WAL of its restore point"

# --- 3. restore every node to the point, on new ports --------------------------
restore_node() {	# name, new port, extra settings (';'-separated)
	local name=$1 port=$2 dir="$RP_DIR/restored/$1"
	mkdir -p "$RP_DIR/restored"
	chown postgres: "$RP_DIR/restored" 2>/dev/null
	cp -a "$RP_DIR/backup/$name" "$dir"
	touch "$dir/recovery.signal"
	{
		echo "port = $port"
		echo "archive_mode = off"
		echo "restore_command = 'cp $RP_DIR/archive/$name/%f %p'"
		echo "recovery_target_name = 'shardext test point'"
		echo "recovery_target_action = 'promote'"
		echo "${3:-}" | tr ';' '\n'
	} >>"$dir/postgresql.auto.conf"
	chown -R postgres: "$dir"
	new_server "$name" start >/dev/null || fail "the restored $name did not start: $(tail -5 "$dir.log" 2>/dev/null)"
	wait_for "the restored $name reaches the restore point" 60 promoted "$port"
}
promoted() { [ "$(psql_at "$1" -d postgres -c "SELECT NOT pg_is_in_recovery()" 2>/dev/null)" = t ]; }
restore_node worker1 $((NEW_PORT + 1))
restore_node worker2 $((NEW_PORT + 2))
# the coordinator first without shardext: its catalog still names the
# original workers, which run; nothing may reach them from here
restore_node coordinator "$NEW_PORT" "shared_preload_libraries = ''"
echo "ok - every node was restored to the point and promoted"
new_coord() { psql_at "$NEW_PORT" -c "$1"; }
for pair in "1 $WORKER_1_PORT" "2 $WORKER_2_PORT"; do
	set -- $pair
	new_coord "UPDATE shardext.node SET port = $((NEW_PORT + $1)) WHERE port = $2" >/dev/null
done
sed -i "/^shared_preload_libraries = ''$/d" "$RP_DIR/restored/coordinator/postgresql.auto.conf"
new_server coordinator restart >/dev/null || fail "the restored coordinator did not restart"
expect_error_like "until it is accepted, the restored cluster's coordinator refuses the restored workers (a new timeline)" \
	"not the one node [0-9]+ runs on" new_coord "SELECT count(*) FROM $BANK_LEDGER"
for port in $((NEW_PORT + 1)) $((NEW_PORT + 2)); do
	new_coord "SELECT shardext_update_node((SELECT nodeid FROM shardext.node WHERE port = $port), '127.0.0.1', $port)" >/dev/null ||
		fail "could not accept the restored server on $port"
done
echo "ok - shardext_update_node() accepted the restored workers"

# --- 4. the restored cluster --------------------------------------------------
COORDINATOR_PORT=$NEW_PORT
WORKER_1_PORT=$((NEW_PORT + 1))
WORKER_2_PORT=$((NEW_PORT + 2))
wait_until "nothing stays prepared on restored worker 1" 30 \
	"SELECT count(*) = 0 FROM pg_prepared_xacts WHERE database = '$TEST_DB'" "$WORKER_1_PORT"
wait_until "nor on restored worker 2" 30 \
	"SELECT count(*) = 0 FROM pg_prepared_xacts WHERE database = '$TEST_DB'" "$WORKER_2_PORT"
echo "ok - nothing stays prepared in the restored cluster"
expect_eq "restored: the total is unchanged" "$((BANK_ACCOUNT_COUNT * BANK_INITIAL))" \
	"$(coord "SELECT sum(balance) FROM $BANK_ACCOUNTS")"
expect_eq "restored: every balance matches the ledger (no half transfer)" 0 \
	"$(coord "SELECT count(*) FROM $BANK_ACCOUNTS a WHERE a.balance <> $BANK_INITIAL
		- coalesce((SELECT sum(amount) FROM $BANK_LEDGER WHERE payer = a.id), 0)
		+ coalesce((SELECT sum(amount) FROM $BANK_LEDGER WHERE payee = a.id), 0)")"
before=$(cat "$TMP"/rp.* | awk -v t="$rp_started" '$2 == "OK" && $1 < t {print $3}' | paste -sd,)
after=$(cat "$TMP"/rp.* | awk -v t="$rp_ended" '$2 == "OK" && $4 > t {print $3}' | paste -sd,)
[ -n "$before" ] && [ -n "$after" ] || fail "transfers before and after the point"
expect_eq "restored: every transfer committed before the point is there ($(tr ',' '\n' <<<"$before" | wc -l))" 0 \
	"$(coord "SELECT count(*) FROM unnest('{$before}'::bigint[]) i WHERE NOT EXISTS (SELECT FROM $BANK_LEDGER l WHERE l.id = i)")"
expect_eq "restored: no transfer begun after the point is there ($(tr ',' '\n' <<<"$after" | wc -l))" 0 \
	"$(coord "SELECT count(*) FROM $BANK_LEDGER WHERE id = ANY ('{$after}'::bigint[])")"
echo "note - $(coord "SELECT count(*) FROM $BANK_LEDGER") transfers in the restored ledger"
original_total=$(psql_at "$RP_PORT" -c "SELECT count(*) FROM $BANK_LEDGER")
coord "INSERT INTO $BANK_LEDGER VALUES (1, 1, 2, 0), (2, $(cut -d, -f1 <<<"$SECOND"), 1, 0)" >/dev/null ||
	fail "the restored cluster takes no writes"
expect_eq "the restored cluster takes writes" 2 "$(coord "SELECT count(*) FROM $BANK_LEDGER WHERE id IN (1, 2)")"
expect_eq "which never reach the original cluster" "$original_total|0" \
	"$(psql_at "$RP_PORT" -c "SELECT count(*) || '|' || count(*) FILTER (WHERE id IN (1, 2)) FROM $BANK_LEDGER")"
