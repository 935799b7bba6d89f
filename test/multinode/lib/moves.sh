# Helpers of the shard move tests (sourced after common.sh, not run).

# drop_database_everywhere NAME: drop NAME on every node, with the
# subscriptions a failed test may have left in it (they block DROP DATABASE)
drop_database_everywhere() {
	local name=$1 port
	for port in $COORDINATOR_PORT $WORKER_1_PORT $WORKER_2_PORT $WORKER_3_PORT; do
		"$BINDIR/psql" -X -q -h 127.0.0.1 -U postgres -p "$port" -d "$name" -c "DO \$\$
			DECLARE s record;
			BEGIN
				FOR s IN SELECT subname FROM pg_subscription WHERE subdbid =
						 (SELECT oid FROM pg_database WHERE datname = current_database()) LOOP
					EXECUTE format('ALTER SUBSCRIPTION %I DISABLE', s.subname);
					EXECUTE format('ALTER SUBSCRIPTION %I SET (slot_name = NONE)', s.subname);
					EXECUTE format('DROP SUBSCRIPTION %I', s.subname);
				END LOOP;
			END \$\$" >/dev/null 2>&1
		"$BINDIR/psql" -X -q -h 127.0.0.1 -U postgres -p "$port" -d postgres \
			-c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '$name' AND NOT active" \
			-c "DROP DATABASE IF EXISTS $name WITH (FORCE)" >/dev/null 2>&1
	done
}

# moves_database NAME: a fresh database NAME on the coordinator with shardext
# and workers 1 and 2 registered; later helpers use it
moves_database() {
	local name=$1
	drop_database_everywhere "$name"
	"$BINDIR/psql" -X -q -h 127.0.0.1 -U postgres -p "$COORDINATOR_PORT" -d postgres \
		-c "CREATE DATABASE $name" || fail "could not create database $name"
	DB=$name
	psql_at "$COORDINATOR_PORT" -c "SET client_min_messages = warning" \
		-c "CREATE EXTENSION shardext" \
		-c "SELECT shardext_add_node('127.0.0.1', $WORKER_1_PORT)" \
		-c "SELECT shardext_add_node('127.0.0.1', $WORKER_2_PORT)" >/dev/null ||
		fail "could not set up database $name"
}

# moves_drop_database: drop the test database everywhere
moves_drop_database() { drop_database_everywhere "$DB"; }

node_id_of_port() { coord "SELECT node_id FROM shardext.nodes WHERE node_port = $1"; }
port_of_shard() { coord "SELECT node_port FROM shardext.shards WHERE shard_id = $1"; }

# table_state TABLE: "rows:checksum" of every row of a distributed table,
# read from each placement the catalog names
table_state() {
	coord "SELECT sum(split_part(result, ':', 1)::bigint) || ':' || sum(split_part(result, ':', 2)::bigint)
		FROM shardext_run_on_shards('$1', 'SELECT count(*) || '':'' || coalesce(sum(hashtext(r::text)), 0) FROM %s r')"
}

# moves_leftovers: what moves left on the nodes of the test database: slots,
# publications, subscriptions, markers, changed replica identities, tables
# (of any schema but shardext's own and the system's) that the catalog does
# not place there ('' when nothing)
moves_leftovers() {
	local port placed found out=""
	local user_schemas="n.nspname NOT IN ('shardext', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'"
	for port in $(coord "SELECT node_port FROM shardext.nodes ORDER BY 1"); do
		placed=$(coord "SELECT coalesce(string_agg(quote_literal(shard_name), ','), '''''')
			FROM shardext.shards WHERE node_port = $port")
		found=$(psql_at "$port" -c "SELECT string_agg(x, ', ' ORDER BY x) FROM (
			SELECT 'slot ' || slot_name FROM pg_replication_slots
				WHERE slot_name LIKE 'shardext%' AND database = current_database()
			UNION ALL SELECT 'publication ' || pubname FROM pg_publication
			UNION ALL SELECT 'subscription ' || subname FROM pg_subscription
				WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())
			UNION ALL SELECT 'marker ' || move_id FROM shardext.move_marker
			UNION ALL SELECT 'marker ' || move_id FROM shardext.move_marker_applied
			UNION ALL SELECT 'identity ' || quote_ident(n.nspname) || '.' || quote_ident(relname)
				FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE $user_schemas AND c.relkind = 'r' AND c.relreplident <> 'd'
			UNION ALL SELECT 'table ' || quote_ident(n.nspname) || '.' || quote_ident(relname)
				FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE $user_schemas AND c.relkind = 'r'
				  AND quote_ident(n.nspname) || '.' || quote_ident(c.relname) NOT IN ($placed)) s(x)" 2>&1)
		[ -n "$found" ] && out="$out$port: $found; "
	done
	echo "$out"
}

# expect_no_leftovers WHAT
expect_no_leftovers() { expect_eq "$1: nothing left on the nodes" "" "$(moves_leftovers)"; }

# start_paused_move LOG PHASE SQL: run SQL (a move) in the background, output
# in LOG; it waits at the pause point "move: PHASE" until pause_release;
# sets MOVE_PID to the psql process
start_paused_move() {
	local log=$1 phase=$2 sql=$3
	pause_hold "move: $phase"
	psql_at "$COORDINATOR_PORT" -c "SET shardext.test_pause_points = 'move: $phase'" -c "$sql" >"$log" 2>&1 &
	MOVE_PID=$!
	wait_for_pause "move: $phase"
}

# move_backend_pid: the coordinator backend running the move
move_backend_pid() { coord "SELECT owner_pid FROM shardext.move WHERE status = 'running' ORDER BY move_id DESC LIMIT 1"; }
