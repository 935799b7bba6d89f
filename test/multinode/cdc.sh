#!/usr/bin/env bash
# Change data capture with real consumers.  A plain PostgreSQL server
# started here (no shardext) subscribes with CREATE SUBSCRIPTION to the
# publication of shardext_create_publication() on every worker, and
# pg_recvlogical-style test_decoding slots read every worker (its initial
# copy reads the shards of each worker).  Under a
# write load through the coordinator (inserts, updates, deletes, transactions
# over several nodes with a reference table), a shard moves, one splits, a
# third worker joins (its NOTICE, its slot) and the cluster is rebalanced.
# Afterwards the subscriber's tables equal the distributed tables row for
# row, its log has no error, test_decoding shows the tables' names and never
# a shard's, and the decoded changes count exactly the writes (nothing of
# the moves, a reference table's change once).  First, bad input: a node
# without the plugins on dynamic_library_path, a name already used on a
# node, no free slot, a node without wal_level = logical: clear errors,
# nothing created anywhere.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/moves.sh"
SUB_PORT=$((SHARDEXT_PORT + 40))
SUB_DIR="$SHARDEXT_CLUSTER_DIR/cdc_subscriber"
WORK=$(mktemp -d)
chmod 777 "$WORK"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
	as_pg "$BINDIR/pg_ctl" -D "$SUB_DIR" -m immediate stop >/dev/null 2>&1
	rm -rf "$SUB_DIR"
	psql_at "$WORKER_3_PORT" -d postgres -c "ALTER SYSTEM RESET wal_level" >/dev/null 2>&1
	moves_drop_database
	cluster stop-node worker3 >/dev/null 2>&1
	rm -f "$WORK"/*
	rmdir "$WORK"
}
trap cleanup EXIT
sub() { "$BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -p "$SUB_PORT" -d postgres -c "$1"; }

# nothing_on_workers WHAT PUBLICATION: no publication, slot or stand-in anywhere
nothing_on_workers() {
	local port
	for port in $WORKER_1_PORT $WORKER_2_PORT; do
		expect_eq "$1: nothing created on $port" "0|0|0" \
			"$(psql_at "$port" -c "SELECT (SELECT count(*) FROM pg_publication WHERE pubname = '$2') || '|' ||
				(SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$2') || '|' ||
				(SELECT count(*) FROM shardext.cdc_table)")"
	done
	expect_eq "$1: nothing recorded" "0" \
		"$(coord "SELECT count(*) FROM shardext.cdc_publication WHERE pubname = '$2'")"
}

moves_database cdc_load
coord "DO \$\$ BEGIN CREATE ROLE cdc_owner LOGIN; EXCEPTION WHEN duplicate_object THEN ALTER ROLE cdc_owner LOGIN; END \$\$" >/dev/null
for port in $WORKER_1_PORT $WORKER_2_PORT; do
	psql_at "$port" -c "DO \$\$ BEGIN CREATE ROLE cdc_owner LOGIN; EXCEPTION WHEN duplicate_object THEN ALTER ROLE cdc_owner LOGIN; END \$\$" \
		-c "GRANT CREATE ON SCHEMA public TO cdc_owner" -c "GRANT CREATE ON DATABASE $DB TO cdc_owner" >/dev/null
done
coord "CREATE SCHEMA \"Sales Dept\" AUTHORIZATION cdc_owner;
	   GRANT CREATE ON SCHEMA public TO cdc_owner;
	   SET ROLE cdc_owner;
	   CREATE TABLE orders (id bigint, merchant_id int, amount numeric, note text,
							PRIMARY KEY (merchant_id, id));
	   CREATE TABLE \"Sales Dept\".\"Order Lines\" (merchant_id int, line_id bigint, qty int,
							PRIMARY KEY (merchant_id, line_id));
	   CREATE TABLE countries (code text PRIMARY KEY, hits int NOT NULL);
	   SET client_min_messages = warning;
	   SELECT create_distributed_table('orders', 'merchant_id', shard_count => 4);
	   SELECT create_distributed_table('\"Sales Dept\".\"Order Lines\"', 'merchant_id',
									   colocate_with => 'orders');
	   SELECT create_reference_table('countries');
	   RESET ROLE;
	   CREATE SEQUENCE order_ids;
	   CREATE TABLE ledger (op text NOT NULL);" >/dev/null || fail "setup"

# ---- bad input: clear errors, nothing created anywhere
psql_at "$WORKER_2_PORT" -d postgres -c "ALTER SYSTEM SET dynamic_library_path = '\$libdir'" \
	-c "SELECT pg_reload_conf()" >/dev/null
expect_error_like "a node without the wrapper plugins" \
	"dynamic_library_path on node 127.0.0.1:$WORKER_2_PORT does not begin with shardext's output plugins" \
	coord "SELECT shardext_create_publication('cdc_all', create_slot => true)"
nothing_on_workers "no plugins" cdc_all
psql_at "$WORKER_2_PORT" -d postgres -c "ALTER SYSTEM RESET dynamic_library_path" \
	-c "SELECT pg_reload_conf()" >/dev/null

worker2 "CREATE PUBLICATION cdc_all" >/dev/null
expect_error_like "a name already used on a node" \
	"publication \"cdc_all\" already exists on node 127.0.0.1:$WORKER_2_PORT" \
	coord "SELECT shardext_create_publication('cdc_all')"
worker2 "DROP PUBLICATION cdc_all" >/dev/null
nothing_on_workers "name used" cdc_all

FREE=$(worker2 "SELECT current_setting('max_replication_slots')::int - count(*) FROM pg_replication_slots")
worker2 "SELECT pg_create_physical_replication_slot('cdc_filler_' || g) FROM generate_series(1, $FREE) g" >/dev/null
expect_error_like "no free replication slot" "node 127.0.0.1:$WORKER_2_PORT has 0 free replication slots, 1 needed" \
	coord "SELECT shardext_create_publication('cdc_all', create_slot => true)"
worker2 "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'cdc_filler_%'" >/dev/null
nothing_on_workers "no free slot" cdc_all

expect_error_like "a local table" "\"ledger\" is not a distributed or reference table" \
	coord "SELECT shardext_create_publication('cdc_all', ARRAY['ledger'::regclass])"
nothing_on_workers "local table" cdc_all

# ---- the publication, a subscriber, test_decoding slots
coord "SELECT shardext_create_publication('cdc_all', create_slot => true)" >/dev/null || fail "create publication"
expect_eq "a slot on every worker" "cdc_all|pgoutput,cdc_all|pgoutput" \
	"$(coord "SELECT string_agg(slot_name || '|' || plugin, ',' ORDER BY node_id) FROM shardext.cdc_slots")"
for port in $WORKER_1_PORT $WORKER_2_PORT; do
	psql_at "$port" -c "SELECT pg_create_logical_replication_slot('cdc_td', 'test_decoding')" >/dev/null
done

rm -rf "$SUB_DIR"
as_pg "$BINDIR/initdb" -D "$SUB_DIR" --auth=trust --username=postgres >/dev/null || fail "initdb subscriber"
as_pg "$BINDIR/pg_ctl" -D "$SUB_DIR" -l "$SUB_DIR/server.log" -w -o \
	"-p $SUB_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories='$SUB_DIR' -c wal_retrieve_retry_interval=200ms -c max_logical_replication_workers=8" \
	start >/dev/null || fail "start subscriber"
sub "CREATE SCHEMA \"Sales Dept\";
	 CREATE TABLE orders (id bigint, merchant_id int, amount numeric, note text, PRIMARY KEY (merchant_id, id));
	 CREATE TABLE \"Sales Dept\".\"Order Lines\" (merchant_id int, line_id bigint, qty int,
												  PRIMARY KEY (merchant_id, line_id));
	 CREATE TABLE countries (code text PRIMARY KEY, hits int NOT NULL);" || fail "subscriber tables"
coord "INSERT INTO orders SELECT g, g, 0, 'seed' FROM generate_series(1, 200) g;
	   INSERT INTO ledger SELECT 'insert' FROM generate_series(1, 200);
	   INSERT INTO countries VALUES ('de', 0), ('fr', 0);" >/dev/null || fail "seed"

# subscriptions copy what their node holds first (the stand-in's COPY reads the shards)
subscribe() {
	sub "CREATE SUBSCRIPTION $1 CONNECTION 'host=127.0.0.1 port=$2 dbname=$DB user=postgres'
		 PUBLICATION cdc_all WITH (create_slot = false, slot_name = 'cdc_all')" ||
		fail "subscribe to $2"
	wait_for "the initial copy of $1 finishes" 60 copies_done
}
copies_done() { [ "$(sub "SELECT count(*) FROM pg_subscription_rel WHERE srsubstate <> 'r'")" = 0 ]; }
subscribe sub_w1 "$WORKER_1_PORT"
subscribe sub_w2 "$WORKER_2_PORT"
expect_eq "the initial copies took every row once" "200|2" \
	"$(sub "SELECT (SELECT count(*) FROM orders) || '|' || (SELECT count(*) FROM countries)")"

# ---- the load
cat >"$WORK/insert.sql" <<'EOF'
\set m random(1, 1000)
BEGIN;
INSERT INTO orders (id, merchant_id, amount, note) VALUES (nextval('order_ids') + 1000, :m, 1, 'temp');
INSERT INTO ledger VALUES ('insert_temp');
END;
EOF
cat >"$WORK/update.sql" <<'EOF'
\set k random(1, 200)
BEGIN;
UPDATE orders SET amount = amount + 1 WHERE merchant_id = :k AND id = :k;
INSERT INTO ledger VALUES ('update');
END;
EOF
cat >"$WORK/delete.sql" <<'EOF'
\set m random(1, 1000)
DELETE FROM orders WHERE merchant_id = :m AND note = 'temp';
EOF
cat >"$WORK/multi.sql" <<'EOF'
\set a random(1, 1000)
\set b random(1, 1000)
BEGIN;
INSERT INTO orders VALUES (nextval('order_ids') + 1000, :a, 2, 'multi'), (nextval('order_ids') + 1000, :b, 2, 'multi');
INSERT INTO "Sales Dept"."Order Lines" VALUES (:a, nextval('order_ids'), 1);
UPDATE countries SET hits = hits + 1 WHERE code = 'de';
INSERT INTO ledger VALUES ('insert'), ('insert'), ('lines'), ('ref');
END;
EOF
start_load() {
	"$BINDIR/pgbench" -h 127.0.0.1 -p "$COORDINATOR_PORT" -U postgres -n -c 4 -j 2 -T "$1" \
		-f "$WORK/insert.sql@4" -f "$WORK/update.sql@3" -f "$WORK/delete.sql@1" \
		-f "$WORK/multi.sql@1" "$DB" >"$WORK/pgbench.out" 2>&1 &
	LOAD_PID=$!
}
finish_load() {
	wait "$LOAD_PID" || fail "$1: pgbench failed: $(cat "$WORK/pgbench.out")"
	grep -q "number of failed transactions: 0 " "$WORK/pgbench.out" ||
		fail "$1: failed transactions: $(cat "$WORK/pgbench.out")"
	echo "ok - $1 under load ($(grep -o 'actually processed: [0-9]*' "$WORK/pgbench.out"))"
}
under_load() {
	start_load 6
	psql_at "$COORDINATOR_PORT" -c "SET client_min_messages = warning" -c "$2" >"$WORK/op.out" 2>&1 ||
		fail "$1: $(cat "$WORK/op.out")"
	finish_load "$1"
}

W2=$(node_id_of_port "$WORKER_2_PORT")
SHARD=$(coord "SELECT shard_id FROM shardext.shards WHERE logicalrelid = 'orders'::regclass
	AND node_port = $WORKER_1_PORT ORDER BY hash_min LIMIT 1")
under_load "move" "SELECT shardext_move_shard($SHARD, $W2)"
under_load "split" "SELECT shardext_split_shard($SHARD)"

# a third worker: refused without wal_level = logical, then added
if [ -d "$SHARDEXT_CLUSTER_DIR/worker3" ]; then cluster start-node worker3; else cluster add-worker >/dev/null; fi
psql_at "$WORKER_3_PORT" -d postgres -c "ALTER SYSTEM SET wal_level = replica" >/dev/null
cluster stop-node worker3 && cluster start-node worker3
psql_at "$WORKER_3_PORT" -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" \
	-c "DO \$\$ BEGIN CREATE ROLE cdc_owner LOGIN; EXCEPTION WHEN duplicate_object THEN ALTER ROLE cdc_owner LOGIN; END \$\$" >/dev/null
expect_error_like "a node without wal_level = logical" \
	"wal_level on node 127.0.0.1:$WORKER_3_PORT is \"replica\"; change data capture needs \"logical\"" \
	coord "SELECT shardext_add_node('127.0.0.1', $WORKER_3_PORT)"
expect_eq "refused node: not registered" "0" \
	"$(coord "SELECT count(*) FROM shardext.nodes WHERE node_port = $WORKER_3_PORT")"
psql_at "$WORKER_3_PORT" -d postgres -c "ALTER SYSTEM RESET wal_level" >/dev/null
cluster stop-node worker3 && cluster start-node worker3
psql_at "$COORDINATOR_PORT" -c "SELECT shardext_add_node('127.0.0.1', $WORKER_3_PORT)" >"$WORK/add.out" 2>&1 ||
	fail "add worker 3: $(cat "$WORK/add.out")"
grep -q "NOTICE:  node 127.0.0.1:$WORKER_3_PORT publishes the changes of publications \"cdc_all\"" "$WORK/add.out" ||
	fail "no NOTICE at shardext_add_node: $(cat "$WORK/add.out")"
echo "ok - shardext_add_node tells consumers to subscribe"
expect_eq "the new node has the slot" "cdc_all|false" \
	"$(coord "SELECT slot_name || '|' || active FROM shardext.cdc_slots WHERE node_port = $WORKER_3_PORT")"
psql_at "$WORKER_3_PORT" -c "SELECT pg_create_logical_replication_slot('cdc_td', 'test_decoding')" >/dev/null
subscribe sub_w3 "$WORKER_3_PORT"
under_load "rebalance" "SELECT shardext_rebalance()"
expect_eq "rebalance moved shards onto worker 3" "t" \
	"$(coord "SELECT count(*) > 0 FROM shardext.shards WHERE node_port = $WORKER_3_PORT AND method = 'hash'")"

# ---- the subscriber catches up and equals the distributed tables
sub_is() { [ "$(sub "$1")" = "$2" ]; }	# SQL VALUE: the subscriber's SQL returns VALUE
table_rows() { echo "SELECT md5(string_agg(t::text, ',' ORDER BY t::text)) || ':' || count(*) FROM $1 t"; }
for t in orders '"Sales Dept"."Order Lines"' countries; do
	expected=$(coord "$(table_rows "$t")")
	poll 60 sub_is "$(table_rows "$t")" "$expected"
	expect_eq "subscriber's $t equals the distributed table" "$expected" "$(sub "$(table_rows "$t")")"
done
errors=$(grep -E "ERROR|duplicate key|could not find row" "$SUB_DIR/server.log")
expect_eq "no apply error in the subscriber's log" "" "$errors"

# ---- test_decoding on every worker: names, counts
: >"$WORK/decoded.txt"
for port in $WORKER_1_PORT $WORKER_2_PORT $WORKER_3_PORT; do
	psql_at "$port" -c "SELECT data FROM pg_logical_slot_get_changes('cdc_td', NULL, NULL)" >>"$WORK/decoded.txt" ||
		fail "decode on $port"
done
expect_eq "test_decoding never shows a shard" "0" \
	"$(grep -cE '(orders|Order Lines|countries)_[0-9]+' "$WORK/decoded.txt")"
expect_eq "test_decoding shows nothing of shardext's own tables" "0" \
	"$(grep -cE 'table shardext' "$WORK/decoded.txt")"
count() { grep -cF "$1" "$WORK/decoded.txt"; }
ledger() { coord "SELECT count(*) FROM ledger WHERE op = '$1'"; }
expect_eq "decoded inserts of orders = inserts made" \
	"$(coord "SELECT count(*) FROM ledger WHERE op IN ('insert', 'insert_temp')")" \
	"$(count 'table public.orders: INSERT:')"
expect_eq "decoded updates of orders = updates made" "$(ledger update)" \
	"$(count 'table public.orders: UPDATE:')"
expect_eq "decoded deletes of orders = rows deleted" \
	"$(coord "SELECT (SELECT count(*) FROM ledger WHERE op = 'insert_temp') - count(*) FROM orders WHERE note = 'temp'")" \
	"$(count 'table public.orders: DELETE:')"
expect_eq "decoded inserts of the odd table" "$(ledger lines)" \
	"$(count 'table "Sales Dept"."Order Lines": INSERT:')"
expect_eq "a reference table's change arrives once" "2|$(ledger ref)" \
	"$(count 'table public.countries: INSERT:')|$(count 'table public.countries: UPDATE:')"
expect_eq "every part with a reference table update names its distributed transaction" "0" \
	"$(awk '/^BEGIN/ {ref = 0; msg = 0} /public.countries: UPDATE/ {ref = 1}
		/prefix: shardext.distributed_transaction/ {msg = 1}
		/^COMMIT/ {if (ref && !msg) n++} END {print n + 0}' "$WORK/decoded.txt")"

# ---- dropping the publication: everything goes, with the slots
for s in sub_w1 sub_w2 sub_w3; do
	sub "ALTER SUBSCRIPTION $s DISABLE" && sub "ALTER SUBSCRIPTION $s SET (slot_name = NONE)" &&
		sub "DROP SUBSCRIPTION $s" || fail "drop subscription $s"
done
poll 60 sql_is "$COORDINATOR_PORT" "SELECT count(*) FROM shardext.cdc_slots WHERE active" 0
coord "SELECT shardext_drop_publication('cdc_all')" >/dev/null || fail "drop publication"
for port in $WORKER_1_PORT $WORKER_2_PORT $WORKER_3_PORT; do
	expect_eq "dropped on $port" "0|0|0" \
		"$(psql_at "$port" -c "SELECT (SELECT count(*) FROM pg_publication) || '|' ||
			(SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'cdc_all') || '|' ||
			(SELECT count(*) FROM shardext.cdc_table)")"
done
