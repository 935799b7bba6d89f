#!/usr/bin/env bash
# A major-version upgrade of a whole cluster with pg_upgrade on every node
# (issue 21, item 5), as the README's "Upgrading PostgreSQL (pg_upgrade)"
# tells an operator to do it.
#
# Versions: the cluster is upgraded TO the version the suite runs
# (PG_CONFIG, scripts/test --pg N), FROM the version SHARDEXT_UPGRADE_FROM
# names (a major version, found as scripts/lib/pg.sh finds --pg N, or the
# path of a pg_config), by default:
#     16, 17, 18 <- 15        19 <- 17
# On 15 (nothing older is supported) the test is skipped, and so it is when
# the default old version is not installed (not when SHARDEXT_UPGRADE_FROM
# names one: then it fails).
#
# On a cluster of its own (a coordinator and two workers on port+60..62,
# in $SHARDEXT_CLUSTER_DIR-pgupgrade; pg_upgrade's servers use port+70, 71):
#  1. a private copy of the old installation gets shardext built from this
#     tree (a copy of it: objects of two majors never mix; the suite's own
#     installation stays untouched); the new version is the suite's;
#  2. on the old version: distributed tables owned by a non-superuser (a
#     colocated pair, odd identifiers), a reference table, a global index,
#     snowflake ids; checksums of every table;
#  3. prepared transactions (one of another application, one in doubt of
#     shardext's): shardext_check_pg_upgrade() reports them, pg_upgrade
#     --check refuses the worker; the operator resolves them and the check
#     passes;
#  4. every node is stopped and upgraded by pg_upgrade (the coordinator by
#     copy, the workers by --link) into a new data directory initialised
#     as the old one (locale, encoding, data checksums), with its
#     configuration and shardext's snowflake state carried over;
#  5. on the new version: connections to the workers are refused until
#     shardext_finish_pg_upgrade() (new system identifiers); then every row
#     and checksum, the catalog, router and multi-shard queries, joins,
#     two-phase writes, snowflake ids, the global index and a shard move.
source "$(dirname "$0")/lib/common.sh"
source "$ROOT/scripts/lib/pg.sh"

NEW_MAJOR=$(pg_major)
NEW_CONFIG=$PG_CONFIG
NEW_BINDIR=$BINDIR
if [ -n "${SHARDEXT_UPGRADE_FROM:-}" ]; then
	if [ -x "$SHARDEXT_UPGRADE_FROM" ]; then
		OLD_SOURCE_CONFIG=$SHARDEXT_UPGRADE_FROM
	else
		OLD_SOURCE_CONFIG=$(pg_find "$SHARDEXT_UPGRADE_FROM") ||
			fail "SHARDEXT_UPGRADE_FROM=$SHARDEXT_UPGRADE_FROM: PostgreSQL $SHARDEXT_UPGRADE_FROM not found"
	fi
else
	case "$NEW_MAJOR" in
		16 | 17 | 18) from=15 ;;
		19) from=17 ;;
		*)
			echo "ok - skipped: no older major version than $NEW_MAJOR to upgrade from"
			exit 0
			;;
	esac
	if ! OLD_SOURCE_CONFIG=$(pg_find "$from"); then
		echo "ok - skipped: PostgreSQL $from (to upgrade from) is not installed (see scripts/lib/pg.sh)"
		exit 0
	fi
fi
OLD_MAJOR=$("$OLD_SOURCE_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
[ "$OLD_MAJOR" -lt "$NEW_MAJOR" ] || fail "cannot upgrade from PostgreSQL $OLD_MAJOR to $NEW_MAJOR"
echo "# upgrading from PostgreSQL $OLD_MAJOR to $NEW_MAJOR"

WORK="$SHARDEXT_CLUSTER_DIR-pgupgrade"
PORT=$((SHARDEXT_PORT + 60))
W1=$((PORT + 1))
W2=$((PORT + 2))
UPGRADE_OLD_PORT=$((PORT + 10))
UPGRADE_NEW_PORT=$((PORT + 11))
NODES="coordinator worker1 worker2"
CONF="fsync = off;shared_buffers = 32MB;max_connections = 100;max_prepared_transactions = 100"
CONF="$CONF;shardext.connect_timeout = 5000"
DB="Upgrade db"
OWNER=upg_owner
SCHEMA='"Up""grade"'
export PGCONNECT_TIMEOUT=10

# the old cluster's maintenance daemon leaves prepared transactions to the
# test (step 3), which resolves them as the operator does
old_cluster() {
	PG_CONFIG="$OLD_CONFIG" SHARDEXT_CLUSTER_DIR="$WORK/old" SHARDEXT_PORT=$PORT \
		SHARDEXT_EXTRA_CONF="$CONF;shardext.recovery_interval = -1" "$ROOT/scripts/cluster" "$@"
}
new_cluster() {
	PG_CONFIG="$NEW_CONFIG" SHARDEXT_CLUSTER_DIR="$WORK/new" SHARDEXT_PORT=$PORT \
		SHARDEXT_EXTRA_CONF="$CONF" "$ROOT/scripts/cluster" "$@"
}
cleanup() {
	[ -n "${OLD_CONFIG:-}" ] && old_cluster stop >/dev/null 2>&1
	[ -d "$WORK/new" ] && new_cluster stop >/dev/null 2>&1
	# SHARDEXT_KEEP_UPGRADE_DIR=1 keeps the installations, clusters and logs
	[ -n "${SHARDEXT_KEEP_UPGRADE_DIR:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
# q PORT SQL...: on the cluster's database, as the superuser (bindir: BIN)
BIN=$NEW_BINDIR
q() {
	local port=$1
	shift
	"$BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -p "$port" -d "$DB" "$@"
}
# as_owner SQL...: on the coordinator, as the tables' owner
as_owner() {
	"$BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U "$OWNER" -p "$PORT" -d "$DB" "$@"
}

# copy_installation PG_CONFIG DIR: a private copy of a relocatable
# installation (Debian's layout or an unpacked archive's) without shardext;
# prints the copy's pg_config
copy_installation() {
	local config=$1 dir=$2 bindir major prefix copy
	bindir=$("$config" --bindir)
	major=$("$config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
	mkdir -p "$dir"
	if [[ "$bindir" == */usr/lib/postgresql/$major/bin ]]; then
		prefix=${bindir%/usr/lib/postgresql/$major/bin}
		mkdir -p "$dir/usr/lib/postgresql" "$dir/usr/share/postgresql" "$dir/usr/include"
		cp -a "$prefix/usr/lib/postgresql/$major" "$dir/usr/lib/postgresql/" &&
			cp -a "$prefix/usr/share/postgresql/$major" "$dir/usr/share/postgresql/" &&
			cp -a "$prefix/usr/include/postgresql" "$dir/usr/include/" || return 1
		copy="$dir/usr/lib/postgresql/$major/bin/pg_config"
	else
		prefix=$(dirname "$bindir")
		cp -a "$prefix/." "$dir/" || return 1
		copy="$dir/bin/pg_config"
	fi
	[ "$("$copy" --bindir)" = "$(dirname "$copy")" ] || return 1
	rm -rf "$("$copy" --pkglibdir)"/shardext* "$("$copy" --sharedir)"/extension/shardext*
	echo "$copy"
}

# --- 1. the installations ------------------------------------------------------
# SHARDEXT_KEEP_UPGRADE_DIR=1 keeps $WORK; then SHARDEXT_UPGRADE_REUSE_BUILD=1
# takes its old installation as it is (while working on the test)
if [ -n "${SHARDEXT_UPGRADE_REUSE_BUILD:-}" ] && [ -d "$WORK/old-pg" ]; then
	OLD_CONFIG=$(find "$WORK/old-pg" -path '*/bin/pg_config' | head -1)
	old_cluster stop >/dev/null 2>&1
	new_cluster stop >/dev/null 2>&1
	rm -rf "$WORK/old" "$WORK/new" "$WORK/run"
	mkdir -p "$WORK/run"
	echo "ok - shardext for PostgreSQL $OLD_MAJOR: the build of an earlier run"
else
	rm -rf "$WORK"
	mkdir -p "$WORK/src" "$WORK/run"
	t0=$(date +%s)
	OLD_CONFIG=$(copy_installation "$OLD_SOURCE_CONFIG" "$WORK/old-pg") ||
		fail "a private copy of PostgreSQL $OLD_MAJOR ($OLD_SOURCE_CONFIG) in $WORK/old-pg"
	copy_source "$WORK/src" || fail "copying the source"
	build_unoptimized "$WORK/src" "$OLD_CONFIG" "$WORK/build.log" ||
		fail "building shardext for PostgreSQL $OLD_MAJOR"
	echo "ok - shardext built for PostgreSQL $OLD_MAJOR in a private copy of it ($(($(date +%s) - t0)) s)"
fi
OLD_BINDIR=$("$OLD_CONFIG" --bindir)
if [ "$(id -u)" = 0 ]; then chown postgres: "$WORK" "$WORK/run"; fi

# --- 2. the old cluster and its data -------------------------------------------
BIN=$OLD_BINDIR
old_cluster start 2 >/dev/null || fail "starting the PostgreSQL $OLD_MAJOR cluster"
for port in $PORT $W1 $W2; do
	DB=postgres q "$port" -c "CREATE ROLE $OWNER LOGIN" || fail "role on $port"
done
DB=postgres q $PORT -c "CREATE DATABASE \"$DB\"" || fail "creating the database"
q $PORT -c "SET client_min_messages = warning" -c "CREATE EXTENSION shardext" \
	-c "SELECT shardext_add_node('127.0.0.1', $W1)" -c "SELECT shardext_add_node('127.0.0.1', $W2)" \
	-c "CREATE SCHEMA $SCHEMA AUTHORIZATION $OWNER" >/dev/null || fail "shardext on the old cluster"
for port in $PORT $W1 $W2; do
	q "$port" -c "GRANT CREATE ON DATABASE \"$DB\" TO $OWNER" || fail "grant on $port"
done
as_owner >/dev/null <<SQL || fail "tables and data on PostgreSQL $OLD_MAJOR"
SET client_min_messages = warning;
SET search_path = $SCHEMA;
CREATE TABLE "Accounts" (id bigint PRIMARY KEY, "Owner Name" text NOT NULL, balance numeric NOT NULL,
	email text);
CREATE TABLE history (id bigint DEFAULT snowflake_id(), account_id bigint NOT NULL, amount numeric,
	at timestamptz, PRIMARY KEY (account_id, id));
CREATE TABLE kinds (code text PRIMARY KEY, label text NOT NULL);
SELECT create_distributed_table('"Accounts"', 'id', shard_count => 8);
SELECT create_distributed_table('history', 'account_id', colocate_with => '"Accounts"');
SELECT create_reference_table('kinds');
INSERT INTO kinds VALUES ('a', 'alpha'), ('b', 'beta'), ('c', 'gamma');
INSERT INTO "Accounts" SELECT g, 'owner ' || g, 1000 + g % 17, 'user' || g || '@example.com'
	FROM generate_series(1, 2000) g;
INSERT INTO history (account_id, amount, at)
	SELECT g % 2000 + 1, (g % 50) - 25, timestamptz '2026-01-01' + g * interval '1 minute'
	FROM generate_series(1, 6000) g;
SELECT shardext_create_global_index('"Accounts"', 'email', is_unique => true);
SQL

# state: counts and checksums of every table, in a stable order
STATE="SET search_path = $SCHEMA;
SELECT 'accounts ' || count(*) || ' ' || sum(balance) || ' ' ||
	md5(string_agg(id || '|' || \"Owner Name\" || '|' || balance || '|' || email, ',' ORDER BY id))
	FROM \"Accounts\";
SELECT 'history ' || count(*) || ' ' || sum(amount) || ' ' ||
	md5(string_agg(id || '|' || account_id || '|' || amount || '|' || at, ',' ORDER BY account_id, id))
	FROM history;
SELECT 'kinds ' || md5(string_agg(code || label, ',' ORDER BY code)) FROM kinds;"
CATALOG="SELECT string_agg(logicalrelid::regclass || ':' || shard_id || ':' || node_id || ':' || shard_name,
	',' ORDER BY shard_id) FROM shardext.shards;
SELECT string_agg(node_id || ':' || node_port, ',' ORDER BY node_id) FROM shardext.nodes;
SELECT string_agg(index_name || ':' || is_unique, ',') FROM shardext.global_indexes;"
before=$(as_owner -c "$STATE")
catalog_before=$(q $PORT -c "$CATALOG")
[ "$(grep -c . <<<"$before")" = 3 ] || fail "the state of the old cluster: $before"
max_id_before=$(as_owner -c "SELECT max(id) FROM $SCHEMA.history")
node_id_w1=$(q $PORT -c "SELECT node_id FROM shardext.nodes WHERE node_port = $W1")
expect_eq "PostgreSQL $OLD_MAJOR: worker 1 issues snowflake ids as node $node_id_w1" "$node_id_w1" \
	"$(q $W1 -c "SELECT snowflake_node_id()")"
expect_eq "PostgreSQL $OLD_MAJOR: 2000 accounts, 6000 history rows" "2000 6000" \
	"$(as_owner -c "SELECT (SELECT count(*) FROM $SCHEMA.\"Accounts\") || ' ' || (SELECT count(*) FROM $SCHEMA.history)")"

# --- 3. prepared transactions block the upgrade --------------------------------
prefix=$(q $PORT -c "SELECT 'shardext_' || system_identifier || '_' ||
	(SELECT oid FROM pg_database WHERE datname = current_database()) || '_' FROM pg_control_system()")
q $W1 -c "BEGIN" -c "CREATE TABLE other_application (x int)" \
	-c "PREPARE TRANSACTION 'another_application'" || fail "a prepared transaction of another application"
# a two-phase commit of shardext whose coordinator transaction (xid 3)
# ended without a commit record: in doubt until recovery rolls it back
q $W2 -c "BEGIN" -c "CREATE TABLE in_doubt (x int)" -c "PREPARE TRANSACTION '${prefix}3_1'" ||
	fail "an in-doubt transaction of shardext"
checks() { q $PORT -c "SELECT node_port || ' ' || check_name || ' ' || status FROM shardext_check_pg_upgrade()
	WHERE status <> 'ok' ORDER BY node_id, check_name"; }
expect_eq "shardext_check_pg_upgrade reports commit records and prepared transactions" \
	"$PORT two_phase_commit_records error
$W1 prepared_transactions error
$W2 prepared_transactions error" "$(checks)"
expect_eq "... and says which are shardext's" "1 prepared transactions are pending (1 of them shardext's two-phase commits)" \
	"$(q $PORT -c "SELECT split_part(detail, ';', 1) FROM shardext_check_pg_upgrade()
		WHERE node_port = $W2 AND check_name = 'prepared_transactions'")"
mkdir -p "$WORK/new/sockets"
if [ "$(id -u)" = 0 ]; then chown postgres: "$WORK/new" "$WORK/new/sockets"; fi
# new_initdb NODE: a new data directory, initialised as the old one
new_initdb() {
	local checksums=() version
	version=$("$OLD_BINDIR/pg_controldata" "$WORK/old/$1" | sed -n 's/^Data page checksum version: *//p')
	if [ "$version" != 0 ]; then
		checksums=(--data-checksums)
	elif [ "$NEW_MAJOR" -ge 18 ]; then
		checksums=(--no-data-checksums)
	fi
	as_pg "$NEW_BINDIR/initdb" -D "$WORK/new/$1" --auth=trust --username=postgres \
		--encoding=UTF8 --locale=C.UTF-8 "${checksums[@]}" >/dev/null || return 1
	# the old server's configuration: postgresql.conf includes shardext_cluster.conf
	as_pg cp "$WORK/old/$1/shardext_cluster.conf" "$WORK/new/$1/" &&
		printf "\ninclude_if_exists 'shardext_cluster.conf'\n" | as_pg tee -a "$WORK/new/$1/postgresql.conf" >/dev/null
}
# upgrade NODE [pg_upgrade options]: pg_upgrade of one node's data directory
upgrade() {
	local node=$1
	shift
	(cd "$WORK/run" && as_pg "$NEW_BINDIR/pg_upgrade" -b "$OLD_BINDIR" -B "$NEW_BINDIR" \
		-d "$WORK/old/$node" -D "$WORK/new/$node" -U postgres -s "$WORK/run" \
		-p $UPGRADE_OLD_PORT -P $UPGRADE_NEW_PORT "$@")
}
for node in $NODES; do new_initdb "$node" || fail "initdb of the new $node"; done
out=$(cd "$WORK/run" && as_pg "$NEW_BINDIR/pg_upgrade" --check -b "$OLD_BINDIR" -B "$NEW_BINDIR" \
	-d "$WORK/old/worker1" -D "$WORK/new/worker1" -U postgres -s "$WORK/old/sockets" \
	-p $W1 -P $UPGRADE_NEW_PORT 2>&1)
if [ $? = 0 ] || ! grep -q "prepared transactions" <<<"$out"; then
	fail "pg_upgrade --check should refuse worker 1's prepared transaction: $out"
fi
echo "ok - pg_upgrade --check refuses worker 1 (prepared transactions)"
q $W1 -c "ROLLBACK PREPARED 'another_application'"
expect_eq "shardext's recovery resolves its own" "1" \
	"$(q $PORT -c "SELECT shardext_recover_prepared_transactions()")"
expect_eq "shardext_check_pg_upgrade passes" "" "$(checks)"
expect_error_like "... for administrators only" "permission denied for function shardext_check_pg_upgrade" \
	as_owner -c "SELECT * FROM shardext_check_pg_upgrade()"
expect_eq "the rolled back transactions left nothing" "0 0" \
	"$(q $W1 -c "SELECT count(*) FROM pg_class WHERE relname = 'other_application'") $(q $W2 -c "SELECT count(*) FROM pg_class WHERE relname = 'in_doubt'")"

# --- 4. pg_upgrade of every node -----------------------------------------------
# Debian's PostgreSQL 15.20 (a security release of November 2026) gives
# every column an option pg_attver that servers older than that release
# reject, as the test builds of 16 to 19 (branch points) do: pg_upgrade's
# restore would fail on the first table.  When the new server rejects it,
# the option is taken off the old cluster's relations (it is not a setting
# of shardext's or of this cluster's: released servers of the same date
# carry it over).
WITH_ATTVER="WHERE attrelid >= 16384 AND attoptions::text LIKE '%pg_attver=%'"
if [ "$(q $PORT -c "SELECT count(*) > 0 FROM pg_catalog.pg_attribute $WITH_ATTVER")" = t ] &&
	! DB=postgres psql_at "$COORDINATOR_PORT" -c "CREATE TEMP TABLE attver (x int)" \
		-c "ALTER TABLE attver ALTER COLUMN x SET (pg_attver = 1)" >/dev/null 2>&1; then
	for port in $PORT $W1 $W2; do
		for db in postgres "$DB"; do
			DB=$db q "$port" -c "UPDATE pg_catalog.pg_attribute SET attoptions = nullif(ARRAY(
				SELECT o FROM unnest(attoptions) o WHERE o NOT LIKE 'pg_attver=%'), '{}')
				$WITH_ATTVER" >/dev/null || fail "taking pg_attver off the columns of $db on $port"
		done
	done
	echo "# PostgreSQL $NEW_MAJOR does not know PostgreSQL ${OLD_MAJOR}'s column option pg_attver: taken off"
fi
old_cluster stop >/dev/null || fail "stopping the old cluster"
t0=$(date +%s)
upgrade coordinator >"$WORK/upgrade-coordinator.log" 2>&1 ||
	{ tail -30 "$WORK/upgrade-coordinator.log" >&2; fail "pg_upgrade of the coordinator"; }
for node in worker1 worker2; do
	upgrade "$node" --link >"$WORK/upgrade-$node.log" 2>&1 ||
		{ tail -30 "$WORK/upgrade-$node.log" >&2; fail "pg_upgrade --link of $node"; }
done
echo "ok - pg_upgrade of the coordinator (copy) and the workers (--link) ($(($(date +%s) - t0)) s)"
for node in $NODES; do
	as_pg cp "$WORK/old/$node/shardext_snowflake.state" "$WORK/new/$node/" ||
		fail "carrying the snowflake state of $node over"
done
# --link: the old workers' data directories must not start again
OLD_CONFIG=
BIN=$NEW_BINDIR
new_cluster start 2 >/dev/null || fail "starting the PostgreSQL $NEW_MAJOR cluster"
expect_eq "every node runs PostgreSQL $NEW_MAJOR" "$NEW_MAJOR $NEW_MAJOR $NEW_MAJOR" \
	"$(for port in $PORT $W1 $W2; do q "$port" -c "SELECT current_setting('server_version_num')::int / 10000"; done | tr '\n' ' ' | sed 's/ $//')"

# --- 5. the upgraded cluster ----------------------------------------------------
expect_eq "worker 1 kept its snowflake node id" "$node_id_w1" "$(q $W1 -c "SELECT snowflake_node_id()")"
expect_error_like "before shardext_finish_pg_upgrade, the new servers are refused" \
	"server at 127.0.0.1:($W1|$W2) is not the one node [0-9]+ runs on" \
	as_owner -c "SELECT count(*) FROM $SCHEMA.\"Accounts\""
q $PORT -c "ALTER EXTENSION shardext UPDATE" 2>/dev/null || fail "ALTER EXTENSION shardext UPDATE"
expect_error_like "shardext_finish_pg_upgrade is for administrators" \
	"permission denied for function shardext_finish_pg_upgrade" \
	as_owner -c "SELECT * FROM shardext_finish_pg_upgrade()"
expect_eq "shardext_finish_pg_upgrade registers both workers anew" "2" \
	"$(q $PORT -c "SELECT count(*) FROM shardext_finish_pg_upgrade() WHERE detail LIKE '%(was %'")"
expect_eq "... and a second run finds nothing to do" "0" \
	"$(q $PORT -c "SELECT count(*) FROM shardext_finish_pg_upgrade() WHERE detail LIKE '%(was %'")"
expect_eq "shardext_check_cluster: no errors" "" \
	"$(q $PORT -c "SELECT node_port || ' ' || check_name || ': ' || detail FROM shardext_check_cluster() WHERE status = 'error'")"
expect_eq "every row and checksum" "$before" "$(as_owner -c "$STATE")"
expect_eq "the catalog: shards, placements, nodes, global index" "$catalog_before" "$(q $PORT -c "$CATALOG")"
expect_eq "a router query" "owner 42|1008" \
	"$(as_owner -c "SELECT \"Owner Name\", balance FROM $SCHEMA.\"Accounts\" WHERE id = 42")"
expect_eq "a lookup through the global index" "7" \
	"$(as_owner -c "SELECT id FROM $SCHEMA.\"Accounts\" WHERE email = 'user7@example.com'")"
expect_eq "a multi-shard aggregate" "$(as_owner -c "SELECT sum(amount) FROM $SCHEMA.history")" \
	"$(as_owner -c "SELECT sum(s) FROM (SELECT account_id, sum(amount) s FROM $SCHEMA.history GROUP BY account_id) x")"
expect_eq "a colocated join with a reference table" "6000" \
	"$(as_owner -c "SELECT count(*) FROM $SCHEMA.\"Accounts\" a
		JOIN $SCHEMA.history h ON h.account_id = a.id JOIN $SCHEMA.kinds k ON k.code = 'a'")"
balance=$(as_owner -c "SELECT sum(balance) FROM $SCHEMA.\"Accounts\"")
as_owner >/dev/null <<SQL || fail "two-phase writes on PostgreSQL $NEW_MAJOR"
SET search_path = $SCHEMA;
BEGIN;
UPDATE "Accounts" SET balance = balance - 500 WHERE id = 1;
UPDATE "Accounts" SET balance = balance + 500 WHERE id = 2;
UPDATE "Accounts" SET balance = balance - 1 WHERE id BETWEEN 3 AND 100;
UPDATE "Accounts" SET balance = balance + 98 WHERE id = 101;
INSERT INTO history (account_id, amount) VALUES (1, -500), (2, 500);
COMMIT;
DELETE FROM history WHERE account_id = 2000;
INSERT INTO "Accounts" VALUES (2001, 'new owner', 5, 'user2001@example.com');
UPDATE kinds SET label = 'ALPHA' WHERE code = 'a';
SQL
expect_eq "the writes: balances, history, reference table" "2001 $((balance + 5)) 5999 ALPHA" \
	"$(as_owner -c "SELECT (SELECT count(*) || ' ' || sum(balance) FROM $SCHEMA.\"Accounts\") || ' ' ||
		(SELECT count(*) FROM $SCHEMA.history) || ' ' || (SELECT label FROM $SCHEMA.kinds WHERE code = 'a')")"
expect_eq "nothing stays prepared" "0 0 0" \
	"$(for port in $PORT $W1 $W2; do q "$port" -c "SELECT count(*) FROM pg_prepared_xacts"; done | tr '\n' ' ' | sed 's/ $//')"
expect_error_like "the unique global index holds" "duplicate key value" \
	as_owner -c "INSERT INTO $SCHEMA.\"Accounts\" VALUES (3000, 'dup', 0, 'user7@example.com')"
expect_eq "new snowflake ids follow the old ones" "t" \
	"$(as_owner -c "SELECT min(id) > $max_id_before FROM $SCHEMA.history WHERE at IS NULL")"
before_move=$(as_owner -c "$STATE")
shard=$(q $PORT -c "SELECT shard_id || ' ' || (SELECT node_id FROM shardext.nodes n WHERE n.node_id <> s.node_id LIMIT 1)
	FROM shardext.shards s WHERE logicalrelid = '$SCHEMA.\"Accounts\"'::regclass ORDER BY shard_id LIMIT 1")
q $PORT -c "SET client_min_messages = warning" -c "SELECT shardext_move_shard(${shard% *}, ${shard#* })" >/dev/null ||
	fail "moving shard ${shard% *}"
expect_eq "the shard moved" "${shard#* }" "$(q $PORT -c "SELECT node_id FROM shardext.shards WHERE shard_id = ${shard% *}")"
expect_eq "every row and checksum after the move" "$before_move" "$(as_owner -c "$STATE")"
expect_eq "the global index after the move" "0" \
	"$(q $PORT -c "SELECT shardext_check_global_index(index_name) FROM shardext.global_indexes")"
