#!/usr/bin/env bash
# A shard move whose target cannot keep up ends in bounded time: with the
# target's apply of the move's changes held up at the move's marker (a
# trigger on the target's marker table waits for an advisory lock this
# test holds), the move fails after shardext.move_catchup_timeout with an
# error naming the target; the source stays authoritative, nothing is left
# on the nodes once cleanup ran, and a retry succeeds.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/moves.sh"
holder=""
trap '[ -n "$holder" ] && kill "$holder" 2>/dev/null; moves_drop_database' EXIT

moves_database move_catchup
coord "CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL);
	INSERT INTO items SELECT g, g % 100 FROM generate_series(1, 2000) g;
	SET client_min_messages = warning;
	SELECT create_distributed_table('items', 'id', shard_count => 2);" >/dev/null
SHARD=$(coord "SELECT shard_id FROM shardext.shards WHERE logicalrelid = 'items'::regclass
	AND node_port = $WORKER_1_PORT ORDER BY hash_min LIMIT 1")
W2=$(node_id_of_port "$WORKER_2_PORT")
STATE=$(table_state items)

worker2 "CREATE FUNCTION public.hold_marker() RETURNS trigger LANGUAGE plpgsql AS \$\$
		BEGIN PERFORM pg_advisory_lock(2242); PERFORM pg_advisory_unlock(2242); RETURN NEW; END \$\$;
	CREATE TRIGGER hold_marker BEFORE INSERT ON shardext.move_marker
		FOR EACH ROW EXECUTE FUNCTION public.hold_marker();
	ALTER TABLE shardext.move_marker ENABLE ALWAYS TRIGGER hold_marker;" >/dev/null
coproc HOLDER { exec "$BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres \
	-p "$WORKER_2_PORT" -d "$DB" 2>&1; }
holder=$HOLDER_PID
printf '%s\n' "SELECT pg_advisory_lock(2242) IS NULL;" '\echo held' >&"${HOLDER[1]}"
read -t 30 -r answer <&"${HOLDER[0]}"
read -t 30 -r answer <&"${HOLDER[0]}"
[ "$answer" = held ] || fail "the test could not take its lock: $answer"

start=$(date +%s%N)
out=$(psql_at "$COORDINATOR_PORT" -c "SET client_min_messages = warning" \
	-c "SET shardext.move_catchup_timeout = '2s'" -c "SET statement_timeout = '60s'" \
	-c "SELECT shardext_move_shard($SHARD, $W2)" 2>&1) && fail "the move succeeded: $out"
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
grep -q "node 127.0.0.1:$WORKER_2_PORT did not catch up with the writes to .* within 2000 ms" <<<"$out" ||
	fail "unexpected error: $out"
[ "$elapsed_ms" -lt 30000 ] || fail "the move took $elapsed_ms ms to give up"
echo "ok - a target that does not catch up fails the move ($elapsed_ms ms)"

printf '%s\n' '\q' >&"${HOLDER[1]}"
wait "$holder"
holder=""
worker2 "DROP TRIGGER hold_marker ON shardext.move_marker; DROP FUNCTION public.hold_marker()" >/dev/null
expect_eq "the shard stays on its source" "$WORKER_1_PORT" "$(port_of_shard "$SHARD")"
expect_eq "its rows are intact" "$STATE" "$(table_state items)"
coord "SELECT shardext_cleanup()" >/dev/null
expect_no_leftovers "after cleanup"
psql_at "$COORDINATOR_PORT" -c "SET client_min_messages = warning" \
	-c "SELECT shardext_move_shard($SHARD, $W2)" >/dev/null || fail "the retry failed"
expect_eq "the retry moved the shard" "$WORKER_2_PORT" "$(port_of_shard "$SHARD")"
expect_eq "with every row" "$STATE" "$(table_state items)"
