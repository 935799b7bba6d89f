#!/usr/bin/env bash
# A node that accepts TCP connections but never answers: shardext_add_node
# gives up after shardext.connect_timeout with a clear error, records
# nothing, and does not hang.
source "$(dirname "$0")/lib/common.sh"

port=$((SHARDEXT_PORT + 8))
# a listener that accepts and then stays silent
perl -MIO::Socket::INET -e '
	my $s = IO::Socket::INET->new(Listen => 5, LocalAddr => "127.0.0.1:'"$port"'", ReuseAddr => 1)
		or die "listen: $!";
	my @held;
	local $SIG{ALRM} = sub { exit 0 };
	alarm 30;
	while (my $c = $s->accept) { push @held, $c; }' &
listener=$!
trap 'kill $listener 2>/dev/null' EXIT
wait_for "the silent listener listens" 10 port_open "$port"

start=$(date +%s%N)
out=$(psql_at "$COORDINATOR_PORT" -c "SET shardext.connect_timeout = 1500" \
	-c "SELECT shardext_add_node('127.0.0.1', $port)" 2>&1)
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
grep -q "could not connect to node 127.0.0.1:$port" <<<"$out" || fail "unexpected: $out"
grep -q "timeout expired after 1500 ms" <<<"$out" || fail "no timeout detail: $out"
echo "ok - silent node: error names the node and the timeout ($elapsed_ms ms)"
[ "$elapsed_ms" -lt 5000 ] || fail "took $elapsed_ms ms, more than the timeout allows"
[ "$elapsed_ms" -ge 1400 ] || fail "gave up after $elapsed_ms ms, before the timeout"
expect_eq "nothing recorded" "0" "$(coord "SELECT count(*) FROM shardext.node WHERE port = $port")"

# a cancel interrupts the wait as well
start=$(date +%s%N)
out=$(psql_at "$COORDINATOR_PORT" -c "SET shardext.connect_timeout = 20000" \
	-c "SET statement_timeout = 700" -c "SELECT shardext_add_node('127.0.0.1', $port)" 2>&1)
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
grep -q "canceling statement due to statement timeout" <<<"$out" || fail "unexpected: $out"
[ "$elapsed_ms" -lt 5000 ] || fail "statement_timeout took $elapsed_ms ms to interrupt the connect"
echo "ok - statement_timeout interrupts a hanging connect ($elapsed_ms ms)"
