#!/usr/bin/env bash
# Global indexes while shards move under a write load.  A table with a
# unique global index and a non-unique one -- the table, its schema, the
# indexes and their columns have names with quotes, spaces, upper case and
# non-ASCII characters, the table's of 63 bytes (its shards get hashed
# names) -- whose pgbench clients insert rows, change indexed values by key,
# look rows up by the index, and record what they did in ledger tables on
# the coordinator in the same transaction.  While they run: an
# online move of a table shard, of an index shard, a split of each, a
# rebalance that moves shards of both, and a split of an index shard onto
# the other node.  After each: no client transaction
# failed, the table holds what the ledger says, both indexes match the table
# exactly, rows are in the shards their hashes belong to, and nothing the
# moves created is left on the nodes.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/moves.sh"
trap 'moves_drop_database; rm -rf "$WORK"' EXIT
WORK=$(mktemp -d)
chmod 777 "$WORK"

T='"Mové ""Sch"" Ü"."Läd ""Users"" mit Ümlauten, Leerzeichen und Namen aus 63 Bytes!"'
IDX='Läd "E Mail" idx ü'
IDXT='shardext_gidx."Läd ""E Mail"" idx ü"'
TAG_IDX='Tag "idx" Ä'
moves_database gidx_moves
coord "SET client_min_messages = warning;
	   CREATE SCHEMA \"Mové \"\"Sch\"\" Ü\";
	   CREATE TABLE $T (\"User Id\" bigint PRIMARY KEY, \"E Mail\" text, \"Tag\" int, counter int NOT NULL);
	   INSERT INTO $T SELECT g, 'seed' || g, g % 13, 0 FROM generate_series(1, 2000) g;
	   SELECT create_distributed_table('$T', 'User Id', shard_count => 4);
	   SELECT shardext_create_global_index('$T', '\"E Mail\"', true, '$IDX');
	   SELECT shardext_create_global_index('$T', '\"Tag\"', false, '$TAG_IDX');
	   CREATE TABLE ledger_rows (id bigint PRIMARY KEY);
	   CREATE TABLE ledger_counts (id bigint PRIMARY KEY, n int NOT NULL);
	   INSERT INTO ledger_counts SELECT g, 0 FROM generate_series(1, 2000) g;" >/dev/null ||
	fail "setup"
cat >"$WORK/load.sql" <<EOF
\set id random(1000000, 9000000000000000000)
\set k random(1, 2000)
\set tag :id % 13
BEGIN;
INSERT INTO $T VALUES (:id, 'new' || :id, :tag, 0);
INSERT INTO ledger_rows (id) VALUES (:id);
UPDATE $T SET "E Mail" = 'k' || :k || '-' || :id, "Tag" = :tag, counter = counter + 1 WHERE "User Id" = :k;
UPDATE ledger_counts SET n = n + 1 WHERE id = :k;
SELECT "User Id" FROM $T WHERE "E Mail" = 'new' || :id;
END;
EOF

start_load() {	# SECONDS
	local before
	before=$(coord "SELECT count(*) FROM ledger_rows")
	"$BINDIR/pgbench" -h 127.0.0.1 -p "$COORDINATOR_PORT" -U postgres -n -c 4 -j 2 -M prepared \
		-T "$1" -f "$WORK/load.sql" "$DB" >"$WORK/pgbench.out" 2>&1 &
	LOAD_PID=$!
	wait_sql "the load commits" 30 "$COORDINATOR_PORT" "SELECT count(*) > $before FROM ledger_rows"
}
finish_load() {	# WHAT
	wait "$LOAD_PID" || fail "$1: pgbench failed: $(cat "$WORK/pgbench.out")"
	grep -q "number of failed transactions: 0 " "$WORK/pgbench.out" ||
		fail "$1: failed transactions: $(cat "$WORK/pgbench.out")"
	echo "ok - $1: no failed client transaction ($(grep -o 'actually processed: [0-9]*' "$WORK/pgbench.out"))"
}
# gidx_leftovers: tables of schema shardext_gidx on the nodes that the
# catalog does not place there ('' when none)
gidx_leftovers() {
	local port placed found out=""
	for port in $(coord "SELECT node_port FROM shardext.nodes ORDER BY 1"); do
		placed=$(coord "SELECT coalesce(string_agg(quote_literal(shard_name), ','), '''''')
			FROM shardext.shards WHERE node_port = $port AND shard_name LIKE 'shardext_gidx.%'")
		found=$(psql_at "$port" -c "SELECT string_agg(quote_ident(n.nspname) || '.' || quote_ident(c.relname), ', ')
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = 'shardext_gidx' AND c.relkind = 'r'
			  AND quote_ident(n.nspname) || '.' || quote_ident(c.relname) NOT IN ($placed)")
		[ -n "$found" ] && out="$out$port: $found; "
	done
	echo "$out"
}
check_all() {	# WHAT
	expect_eq "$1: rows match the ledger" \
		"$(coord "SELECT count(*) || ':' || coalesce(sum(id::numeric), 0) FROM ledger_rows")" \
		"$(coord "SELECT count(*) || ':' || coalesce(sum(\"User Id\"::numeric), 0) FROM $T WHERE \"User Id\" >= 1000000")"
	coord "SELECT id || ':' || n FROM ledger_counts ORDER BY id" >"$WORK/ledger.txt"
	coord "SELECT \"User Id\" || ':' || counter FROM $T WHERE \"User Id\" < 1000000 ORDER BY \"User Id\"" \
		>"$WORK/counters.txt"
	# on a mismatch, say which rows differ (ledger <, table >) and where they are
	cmp -s "$WORK/ledger.txt" "$WORK/counters.txt" ||
		fail "$1: counters do not match the ledger: $(diff "$WORK/ledger.txt" "$WORK/counters.txt" |
			grep '^[<>]' | head -10 | tr '\n' ' ')shards: $(coord "SELECT string_agg(shard_id || '@' ||
			node_port || '[' || hash_min || ',' || hash_max || ']', ' ' ORDER BY hash_min)
			FROM shardext.shards WHERE logicalrelid = '$T'::regclass")"
	echo "ok - $1: counters match the ledger"
	expect_eq "$1: unique index matches the table" "0" "$(coord "SELECT shardext_check_global_index('$IDX')")"
	expect_eq "$1: non-unique index matches the table" "0" \
		"$(coord "SELECT shardext_check_global_index('$TAG_IDX')")"
	expect_eq "$1: index entries in the shards their hashes belong to" "t" \
		"$(coord "SELECT coalesce(bool_and(split_part(r.result, ',', 1)::int >= s.hash_min
				AND split_part(r.result, ',', 2)::int <= s.hash_max), true)
			FROM shardext_run_on_shards('$IDXT',
				'SELECT min(shardext.worker_hash_value(\"E Mail\")) || '','' || max(shardext.worker_hash_value(\"E Mail\")) FROM %s') r
			JOIN shardext.shards s USING (shard_id) WHERE r.result <> ','")"
	expect_no_leftovers "$1"
	expect_eq "$1: no index table left over" "" "$(gidx_leftovers)"
}
run_under_load() {	# WHAT SQL
	start_load 6
	psql_at "$COORDINATOR_PORT" -c "SET client_min_messages = warning" -c "$2" >"$WORK/move.out" 2>&1 ||
		fail "$1: $(cat "$WORK/move.out")"
	finish_load "$1"
	check_all "$1"
}

W1=$(node_id_of_port "$WORKER_1_PORT")
W2=$(node_id_of_port "$WORKER_2_PORT")
shard_of() {	# TABLE PORT: its first shard on that node
	coord "SELECT shard_id FROM shardext.shards WHERE logicalrelid = '$1'::regclass
		AND node_port = $2 ORDER BY hash_min LIMIT 1"
}
check_all "before the moves"

run_under_load "online move of a table shard" "SELECT shardext_move_shard($(shard_of "$T" "$WORKER_1_PORT"), $W2)"
run_under_load "online move of an index shard" \
	"SELECT shardext_move_shard($(shard_of "$IDXT" "$WORKER_1_PORT"), $W2)"
run_under_load "split of a table shard" "SELECT shardext_split_shard($(shard_of "$T" "$WORKER_2_PORT"))"
run_under_load "split of an index shard" "SELECT shardext_split_shard($(shard_of "$IDXT" "$WORKER_2_PORT"))"
expect_eq "shards of table and index after the splits" "5|5" \
	"$(coord "SELECT (SELECT count(*) FROM shardext.shards WHERE logicalrelid = '$T'::regclass) || '|' ||
		(SELECT count(*) FROM shardext.shards WHERE logicalrelid = '$IDXT'::regclass)")"
expect_eq "the plan moves shards of both the table and its index" "2" \
	"$(coord "SELECT count(DISTINCT table_name) FROM shardext_rebalance_plan()
		WHERE table_name IN ('$T'::regclass, '$IDXT'::regclass)")"
run_under_load "rebalance" "SELECT shardext_rebalance()"
expect_eq "balanced now" "0" "$(coord "SELECT count(*) FROM shardext_rebalance_plan()")"
run_under_load "split of an index shard onto the other node" \
	"SELECT shardext_split_shard($(shard_of "$IDXT" "$WORKER_1_PORT"), $W2)"
expect_eq "lookups by the index still find the rows" "1" \
	"$(coord "SELECT count(*) FROM $T WHERE \"E Mail\" = (SELECT \"E Mail\" FROM $T WHERE \"User Id\" = 1)")"
