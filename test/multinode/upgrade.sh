#!/usr/bin/env bash
# Upgrading a cluster from the released shardext 1.0 to this version:
#
# 1. the 1.0 library is built from git history (commit RELEASE_COMMIT, tag
#    v1.0) into a private copy of the PostgreSQL installation, so that the
#    suite's own build stays untouched; a coordinator and two workers run
#    it; distributed and reference tables are created (one with a 63-byte
#    name, which 1.0 clips without a hash) and a shard is moved;
# 2. this tree's library, built as for production (without the test-only
#    settings, which the test checks are absent), replaces it; after the
#    restart, before ALTER EXTENSION UPDATE, distributed tables give a clear
#    error and local ones work;
# 3. ALTER EXTENSION shardext UPDATE on the coordinator and the workers
#    (shardext_check_cluster reports the workers still at 1.0 in between);
#    then queries, writes, a move and new tables work, the old shards keep
#    their names;
# 4. the upgraded database's extension objects and catalog tables, dumped
#    (pg_dump --schema-only --binary-upgrade, which dumps extension members),
#    equal those of a fresh CREATE EXTENSION; and shardext_add_node refuses
#    a node whose extension is still 1.0, or that has no prepared
#    transactions.
#
# The released 1.0 builds only against PostgreSQL 15.  On every version,
# first, this tree's library takes the SQL upgrade path on the suite's
# coordinator: CREATE EXTENSION shardext VERSION '1.0' (and '1.1'), then
# ALTER EXTENSION shardext UPDATE, give the same extension as a fresh
# CREATE EXTENSION (the dump comparison of step 4); steps 1 to 4 follow on
# PostgreSQL 15 only.
source "$(dirname "$0")/lib/common.sh"
source "$ROOT/scripts/lib/pg.sh"

RELEASE_COMMIT=6d8126dbaa5c0fd78765a751ad6765df6e726618
# the version this tree builds (default_version of shardext.control)
CUR=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$ROOT/shardext.control")
WORK="$SHARDEXT_CLUSTER_DIR/upgrade"
COORD=$((SHARDEXT_PORT + 20))
W1=$((COORD + 1))
W2=$((COORD + 2))
export PGCONNECT_TIMEOUT=10

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
private_cluster() {
	PG_CONFIG="$PRIVATE_PG_CONFIG" SHARDEXT_CLUSTER_DIR="$WORK/cluster" SHARDEXT_PORT=$COORD \
		SHARDEXT_EXTRA_CONF="fsync = off;shared_buffers = 32MB" "$ROOT/scripts/cluster" "$@"
}
cleanup() {
	[ -n "${PRIVATE_PG_CONFIG:-}" ] && private_cluster stop >/dev/null 2>&1
	# SHARDEXT_KEEP_UPGRADE_DIR=1 keeps the builds, dumps and logs to look at
	[ -n "${SHARDEXT_KEEP_UPGRADE_DIR:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
# on the private cluster (its own binaries)
pq() {
	local port=$1 db=$2
	shift 2
	"$PRIVATE_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -p "$port" -d "$db" "$@"
}

# dump BINDIR PORT DB: the extension members as pg_upgrade dumps them (OIDs
# differ between databases)
dump() {
	"$1/pg_dump" -h 127.0.0.1 -p "$2" -U postgres --schema-only --binary-upgrade \
		--exclude-schema=app "$3" |
		grep -v -E '^-- (Dumped|Started|Completed)|binary_upgrade_set_next_|^\\(un)?restrict |pg_catalog.setval\(' |
		sed -E -e 's/[0-9]{4,}/N/g' -e "s/(relfrozenxid|relminmxid) = '[0-9]+'/\1 = 'N'/g"
}

# same_as_fresh WHAT FRESH UPGRADED: the dumps must be equal
same_as_fresh() {
	grep -q "ALTER EXTENSION shardext ADD TABLE shardext.dist_table" "$2" ||
		fail "the dump does not list the extension's objects"
	if ! diff -u "$2" "$3" >"$3.diff"; then
		cat "$3.diff" >&2
		fail "$1 differs from a fresh install (diff above: - fresh, + upgraded)"
	fi
	echo "ok - $1 equals a fresh install ($(grep -c 'ALTER EXTENSION shardext ADD' "$2") objects)"
}

# --- the SQL upgrade path with this tree's library, on every version ---
rm -rf "$WORK"
mkdir -p "$WORK"
for db in upgrade_fresh upgrade_from_1_0 upgrade_from_1_1; do
	DB=postgres psql_at "$COORDINATOR_PORT" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" \
		-c "CREATE DATABASE $db" || fail "creating database $db"
done
DB=upgrade_fresh psql_at "$COORDINATOR_PORT" -c "CREATE EXTENSION shardext" ||
	fail "CREATE EXTENSION shardext"
dump "$BINDIR" "$COORDINATOR_PORT" upgrade_fresh >"$WORK/fresh-$CUR.sql" ||
	fail "pg_dump of the fresh database"
for from in 1.0 1.1; do
	db=upgrade_from_${from/./_}
	DB=$db psql_at "$COORDINATOR_PORT" -c "CREATE EXTENSION shardext VERSION '$from'" ||
		fail "CREATE EXTENSION shardext VERSION '$from'"
	DB=$db psql_at "$COORDINATOR_PORT" -c "ALTER EXTENSION shardext UPDATE" ||
		fail "ALTER EXTENSION shardext UPDATE from $from"
	expect_eq "PostgreSQL $(pg_major): $from updated to $CUR" "$CUR" \
		"$(DB=$db psql_at "$COORDINATOR_PORT" -c "SELECT extversion FROM pg_extension WHERE extname = 'shardext'")"
	dump "$BINDIR" "$COORDINATOR_PORT" "$db" >"$WORK/from-$from.sql" || fail "pg_dump of $db"
	same_as_fresh "PostgreSQL $(pg_major): shardext $from updated to $CUR" "$WORK/fresh-$CUR.sql" \
		"$WORK/from-$from.sql"
done
for db in upgrade_fresh upgrade_from_1_0 upgrade_from_1_1; do
	DB=postgres psql_at "$COORDINATOR_PORT" -c "DROP DATABASE $db WITH (FORCE)" || fail "dropping $db"
done
if [ "$(pg_major)" != 15 ]; then
	echo "ok - the upgrade of a running 1.0 cluster is checked on PostgreSQL 15 (1.0 builds only there)"
	exit 0
fi

# --- the release's source, from history ---
if ! git -C "$ROOT" cat-file -e "$RELEASE_COMMIT^{commit}" 2>/dev/null; then
	fail "commit $RELEASE_COMMIT (shardext 1.0, tag v1.0) is not in this clone's history" \
		"(a shallow clone?): run 'git fetch --unshallow' (or 'git fetch origin tag v1.0')"
fi
rm -rf "$WORK"
mkdir -p "$WORK/src-1.0" "$WORK/build"
git -C "$ROOT" archive "$RELEASE_COMMIT" | tar -x -C "$WORK/src-1.0" || fail "git archive of 1.0"

# --- a private copy of the PostgreSQL installation (Debian layout) ---
bindir=$("$PG_CONFIG" --bindir)
prefix=${bindir%/usr/lib/postgresql/15/bin}
[ "$prefix" != "$bindir" ] || fail "expected a Debian layout (.../usr/lib/postgresql/15/bin), not $bindir"
mkdir -p "$WORK/pg/usr/lib/postgresql" "$WORK/pg/usr/share/postgresql" "$WORK/pg/usr/include"
cp -a "$prefix/usr/lib/postgresql/15" "$WORK/pg/usr/lib/postgresql/" &&
	cp -a "$prefix/usr/share/postgresql/15" "$WORK/pg/usr/share/postgresql/" &&
	cp -a "$prefix/usr/include/postgresql" "$WORK/pg/usr/include/" || fail "copy of PostgreSQL"
rm -f "$WORK"/pg/usr/lib/postgresql/15/lib/shardext.so "$WORK"/pg/usr/share/postgresql/15/extension/shardext*
PRIVATE_PG_CONFIG="$WORK/pg/usr/lib/postgresql/15/bin/pg_config"
PRIVATE_BINDIR=$("$PRIVATE_PG_CONFIG" --bindir)
[ "$PRIVATE_BINDIR" = "$WORK/pg/usr/lib/postgresql/15/bin" ] || fail "the private installation is not relocatable"

# --- 1.0 ---
t0=$(date +%s)
build_unoptimized "$WORK/src-1.0" "$PRIVATE_PG_CONFIG" "$WORK/build-1.0.log" || fail "building shardext 1.0"
echo "ok - shardext 1.0 built from $RELEASE_COMMIT ($(($(date +%s) - t0)) s)"
# the frozen 1.0 script is the one the release built
expect_eq "src/sql/shardext--1.0.sql is the released 1.0 script" "" \
	"$(diff <(sed -n '/^-- 00_catalog.sql$/,$p' "$WORK/src-1.0/src/sql/shardext--1.0.sql") \
		<(sed -n '/^-- 00_catalog.sql$/,$p' "$ROOT/src/sql/shardext--1.0.sql"))"
if [ "$(id -u)" = 0 ]; then mkdir -p "$WORK/cluster" && chown postgres: "$WORK/cluster"; fi
private_cluster start 2 >/dev/null || fail "starting the 1.0 cluster"

pq $COORD postgres -c "CREATE DATABASE upg"
pq $COORD upg -c "CREATE EXTENSION shardext" -c "SET client_min_messages = warning" \
	-c "SELECT shardext_add_node('127.0.0.1', $W1)" \
	-c "SELECT shardext_add_node('127.0.0.1', $W2)" >/dev/null || fail "1.0 cluster setup"
expect_eq "the 1.0 extension" "1.0" "$(pq $COORD upg -c "SELECT extversion FROM pg_extension WHERE extname = 'shardext'")"
LONG='Eine Tabelle mit einem sehr langen Namen, den 1.0 abschneiden m'
LONG2='Eine Tabelle mit einem sehr langen Namen, den 1.1 abschneiden m'
pq $COORD upg >/dev/null <<SQL || fail "1.0 tables"
SET client_min_messages = warning;
CREATE SCHEMA app;
CREATE TABLE app.accounts (id bigint PRIMARY KEY, balance numeric NOT NULL);
CREATE TABLE app.history (account_id bigint, amount numeric);
CREATE TABLE app.kinds (code text PRIMARY KEY, label text);
CREATE TABLE app."$LONG" (id bigint, note text);
INSERT INTO app.accounts SELECT g, 100 FROM generate_series(1, 200) g;
INSERT INTO app.history SELECT g % 200 + 1, 1 FROM generate_series(1, 400) g;
INSERT INTO app.kinds VALUES ('a', 'alpha'), ('b', 'beta');
INSERT INTO app."$LONG" SELECT g, 'note ' || g FROM generate_series(1, 50) g;
SELECT create_distributed_table('app.accounts', 'id', shard_count => 4);
SELECT create_distributed_table('app.history', 'account_id', colocate_with => 'app.accounts');
SELECT create_reference_table('app.kinds');
SELECT create_distributed_table('app."$LONG"', 'id', shard_count => 2);
SELECT shardext_move_shard(s.shard_id, (SELECT node_id FROM shardext.nodes WHERE node_id <> s.node_id LIMIT 1))
FROM (SELECT shard_id, node_id FROM shardext.shards WHERE logicalrelid = 'app.accounts'::regclass
	  ORDER BY hash_min LIMIT 1) s;
SQL
state_query="SELECT (SELECT count(*) || ':' || sum(balance) FROM app.accounts) || ' ' ||
	(SELECT count(*) FROM app.history) || ' ' || (SELECT count(*) FROM app.kinds) || ' ' ||
	(SELECT count(*) FROM app.\"$LONG\")"
before=$(pq $COORD upg -c "$state_query")
expect_eq "1.0: rows" "200:20000 400 2 50" "$before"
long_shards_before=$(pq $COORD upg -c "SELECT string_agg(shard_name, ',' ORDER BY shard_id) FROM shardext.shards
	WHERE logicalrelid = 'app.\"$LONG\"'::regclass")
private_cluster stop >/dev/null

# --- this version, built as for production, from a copy of the source
# files (the suite's own objects are a test build) ---
t0=$(date +%s)
copy_source "$WORK/build" || fail "copying the source"
build_unoptimized "$WORK/build" "$PRIVATE_PG_CONFIG" "$WORK/build.log" || fail "building this version"
echo "ok - this version built for production ($(($(date +%s) - t0)) s)"
so="$WORK/pg/usr/lib/postgresql/15/lib/shardext.so"
expect_eq "no test-only settings or code in the production library" "" \
	"$(grep -a -o -E 'test_fault|move_test_pause|snowflake_clock_offset|InjectTestFault|MoveTestPause|test_pause_points|TestPausePoint|test_session_is_blocked' "$so" | sort -u)"
private_cluster start 2 >/dev/null || fail "starting with the new library"
expect_eq "the production build has no test settings" "" \
	"$(pq $COORD upg -c "SELECT current_setting(name, true) FROM unnest(ARRAY['shardext.test_fault',
		'shardext.move_test_pause_phase', 'shardext.snowflake_clock_offset',
		'shardext.test_pause_points']) name" | tr -d '\n')"
expect_eq "library $CUR, catalog still 1.0" "$CUR 1.0" \
	"$(pq $COORD upg -c "SELECT current_setting('shardext.version') || ' ' || extversion
		FROM pg_extension WHERE extname = 'shardext'")"

# --- before ALTER EXTENSION UPDATE: a clear error, no crash ---
expect_error_like "distributed tables before the update" \
	"shardext library version $CUR does not match the installed extension version 1.0" \
	pq $COORD upg -c "SELECT count(*) FROM app.accounts"
expect_error_like "... with a hint" "HINT:  Run ALTER EXTENSION shardext UPDATE" \
	pq $COORD upg -c "SELECT count(*) FROM app.accounts"
expect_error_like "shardext functions before the update" "ALTER EXTENSION shardext UPDATE" \
	pq $COORD upg -c "SELECT shardext_add_node('127.0.0.1', $W2)"
expect_eq "local tables before the update" "3" \
	"$(pq $COORD upg -c "CREATE TEMP TABLE t AS SELECT 1 AS x UNION ALL SELECT 2 UNION ALL SELECT 3" \
		-c "SELECT count(*) FROM t")"
expect_eq "the coordinator is up" "1" "$(pq $COORD postgres -c "SELECT 1")"
wait_for "the maintenance daemon logs that it waits for the update" 20 \
	grep -q 'shardext maintenance of database "upg" waits for ALTER EXTENSION shardext UPDATE' \
	"$WORK/cluster/coordinator.log"
expect_eq "the maintenance daemon waits for the update, and says so once" "1" \
	"$(grep -c 'shardext maintenance of database "upg" waits for ALTER EXTENSION' "$WORK/cluster/coordinator.log")"

# --- the update ---
pq $COORD upg -c "ALTER EXTENSION shardext UPDATE" || fail "ALTER EXTENSION shardext UPDATE"
expect_eq "workers still at 1.0 are reported" "2" \
	"$(pq $COORD upg -c "SELECT count(*) FROM shardext_check_cluster()
		WHERE check_name = 'shardext_extension' AND status = 'error' AND detail LIKE '%shardext 1.0,%'")"
for port in $W1 $W2; do
	pq $port upg -c "ALTER EXTENSION shardext UPDATE" || fail "ALTER EXTENSION shardext UPDATE on a worker"
done
expect_eq "every node at $CUR" "$CUR $CUR $CUR" \
	"$(for port in $COORD $W1 $W2; do pq $port upg -c "SELECT extversion FROM pg_extension WHERE extname = 'shardext'"; done | tr '\n' ' ' | sed 's/ $//')"
expect_eq "shardext_check_cluster: no errors" "" \
	"$(pq $COORD upg -c "SELECT node_id || ' ' || check_name || ': ' || detail FROM shardext_check_cluster() WHERE status = 'error'")"

# --- everything works after the update ---
expect_eq "the rows after the update" "$before" "$(pq $COORD upg -c "$state_query")"
expect_eq "1.0 shards keep their names" "$long_shards_before" \
	"$(pq $COORD upg -c "SELECT string_agg(shard_name, ',' ORDER BY shard_id) FROM shardext.shards
		WHERE logicalrelid = 'app.\"$LONG\"'::regclass")"
pq $COORD upg >/dev/null <<SQL || fail "writes and a move after the update"
SET client_min_messages = warning;
BEGIN;
UPDATE app.accounts SET balance = balance - 10 WHERE id = 1;
UPDATE app.accounts SET balance = balance + 10 WHERE id = 2;
INSERT INTO app.history VALUES (1, -10), (2, 10);
COMMIT;
INSERT INTO app."$LONG" VALUES (51, 'after');
UPDATE app.kinds SET label = 'ALPHA' WHERE code = 'a';
SELECT shardext_move_shard(s.shard_id, (SELECT node_id FROM shardext.nodes WHERE node_id <> s.node_id LIMIT 1))
FROM (SELECT shard_id, node_id FROM shardext.shards WHERE logicalrelid = 'app.accounts'::regclass
	  ORDER BY hash_min DESC LIMIT 1) s;
SELECT shardext_move_shard(s.shard_id, (SELECT node_id FROM shardext.nodes WHERE node_id <> s.node_id LIMIT 1))
FROM (SELECT shard_id, node_id FROM shardext.shards WHERE logicalrelid = 'app."$LONG"'::regclass
	  ORDER BY hash_min LIMIT 1) s;
CREATE TABLE app."$LONG2" (id bigint PRIMARY KEY);
SELECT create_distributed_table('app."$LONG2"', 'id', shard_count => 2);
INSERT INTO app."$LONG2" SELECT g FROM generate_series(1, 10) g;
SQL
expect_eq "the rows after writes and moves" "200:20000 402 2 51" "$(pq $COORD upg -c "$state_query")"
expect_eq "a new long-named table has hashed shard names" "t" \
	"$(pq $COORD upg -c "SELECT bool_and(shard_name ~ '_[0-9a-f]{8}_[0-9]+\"\$') AND count(*) = 2
		FROM shardext.shards WHERE logicalrelid = 'app.\"$LONG2\"'::regclass")"
expect_eq "its rows" "10" "$(pq $COORD upg -c "SELECT count(*) FROM app.\"$LONG2\"")"

# --- the upgraded extension equals a fresh install ---
pq $COORD postgres -c "CREATE DATABASE fresh"
pq $COORD fresh -c "CREATE EXTENSION shardext" || fail "CREATE EXTENSION in a fresh database"
dump "$PRIVATE_BINDIR" $COORD upg >"$WORK/upgraded.sql" || fail "pg_dump of the upgraded database"
dump "$PRIVATE_BINDIR" $COORD fresh >"$WORK/fresh.sql" || fail "pg_dump of the fresh database"
same_as_fresh "the upgraded extension" "$WORK/fresh.sql" "$WORK/upgraded.sql"

# --- mixed versions and missing settings are refused when adding a node ---
pq $W1 postgres -c "CREATE DATABASE fresh"
pq $W1 fresh -c "CREATE EXTENSION shardext VERSION '1.0'" || fail "1.0 extension with the $CUR library"
expect_error_like "a node whose extension is 1.0 is refused" \
	"cannot add node 127.0.0.1:$W1: extension shardext is at version 1.0 on the node, $CUR on the coordinator" \
	pq $COORD fresh -c "SELECT shardext_add_node('127.0.0.1', $W1)"
expect_eq "nothing recorded" "0" "$(pq $COORD fresh -c "SELECT count(*) FROM shardext.node")"
pq $W1 fresh -c "ALTER EXTENSION shardext UPDATE"
pq $W2 postgres -c "ALTER SYSTEM SET max_prepared_transactions = 0"
private_cluster stop-node worker2 >/dev/null && private_cluster start-node worker2 >/dev/null
expect_error_like "a node without prepared transactions is refused" \
	"cannot add node 127.0.0.1:$W2: max_prepared_transactions is 0 on the node" \
	pq $COORD fresh -c "SELECT shardext_add_node('127.0.0.1', $W2)"
expect_eq "shardext_check_cluster reports it on a registered node too" "error" \
	"$(pq $COORD upg -c "SELECT status FROM shardext_check_cluster()
		WHERE node_port = $W2 AND check_name = 'max_prepared_transactions'")"
pq $W2 postgres -c "ALTER SYSTEM SET max_prepared_transactions = 50"
private_cluster stop-node worker2 >/dev/null && private_cluster start-node worker2 >/dev/null
out=$(pq $COORD fresh -c "SELECT shardext_add_node('127.0.0.1', $W1) > 0" \
	-c "SELECT shardext_add_node('127.0.0.1', $W2) > 0" 2>&1) || fail "adding the fixed nodes: $out"
grep -q "WARNING:  node 127.0.0.1:$W2: max_prepared_transactions is below max_connections" <<<"$out" ||
	fail "no warning for a low max_prepared_transactions: $out"
echo "ok - fixed nodes are added, with a warning for what is still low"
