# Helpers of the failover tests (sourced after common.sh, not run): a bank
# of accounts on both workers, money transfers between them by
# lib/transfers.py, and the checks of the books.

# as a non-superuser table owner, with odd identifiers
BANK_USER='Fäil Över'
BANK_ACCOUNTS='"Accöunts ""A"""'
BANK_LEDGER='"Lédger"'
BANK_ACCOUNT_COUNT=40
BANK_INITIAL=1000

# bank_database NAME: database NAME on the coordinator, the workers (given
# as ports after the name; default both) registered, the role, the tables
bank_database() {
	local name=$1 port
	shift
	local workers=("${@:-$WORKER_1_PORT $WORKER_2_PORT}")
	"$BINDIR/psql" -X -q -h 127.0.0.1 -U postgres -p "$COORDINATOR_PORT" -d postgres \
		-c "CREATE DATABASE $name" || fail "could not create database $name"
	DB=$name
	for port in $COORDINATOR_PORT $WORKER_1_PORT $WORKER_2_PORT; do
		psql_at "$port" -d postgres -c "SET client_min_messages = warning" \
			-c "DO \$\$ BEGIN CREATE ROLE \"$BANK_USER\" LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END \$\$" \
			-c "GRANT CREATE ON DATABASE $name TO \"$BANK_USER\"" >/dev/null 2>&1
	done
	coord "SET client_min_messages = warning; CREATE EXTENSION shardext" >/dev/null ||
		fail "could not create the extension in $name"
	for port in ${workers[*]}; do
		coord "SELECT shardext_add_node('127.0.0.1', $port)" >/dev/null || fail "could not add node $port"
	done
	for port in $COORDINATOR_PORT $WORKER_1_PORT $WORKER_2_PORT; do
		psql_at "$port" -c "GRANT CREATE, USAGE ON SCHEMA public TO \"$BANK_USER\"" >/dev/null 2>&1
	done
	coord "CREATE TABLE $BANK_ACCOUNTS (id int PRIMARY KEY, balance bigint NOT NULL);
		SELECT create_distributed_table('$BANK_ACCOUNTS', 'id', shard_count => 4);
		INSERT INTO $BANK_ACCOUNTS SELECT g, $BANK_INITIAL FROM generate_series(1, $BANK_ACCOUNT_COUNT) g;
		CREATE TABLE $BANK_LEDGER (id bigint PRIMARY KEY, payer int NOT NULL, payee int NOT NULL, amount int NOT NULL);
		SELECT create_distributed_table('$BANK_LEDGER', 'id', shard_count => 4);
		ALTER TABLE $BANK_ACCOUNTS OWNER TO \"$BANK_USER\";
		ALTER TABLE $BANK_LEDGER OWNER TO \"$BANK_USER\";" >/dev/null ||
		fail "could not create the bank tables"
}

# accounts_on PORT: the account ids whose shard is on the node at PORT, comma-separated
accounts_on() {
	coord "SELECT string_agg(a.id::text, ',' ORDER BY a.id) FROM $BANK_ACCOUNTS a
		JOIN shardext.shards s ON s.shard_id = shardext_shard_for_value('$BANK_ACCOUNTS', a.id::text)
		WHERE s.node_port = $1"
}

# start_transfers LOG_PREFIX CLIENTS FIRST SECOND [PORTS] [ID_BASE]: clients in the
# background (TRANSFERS_PID), until stop_transfers
start_transfers() {
	local log=$1 clients=$2 first=$3 second=$4 ports=${5:-$COORDINATOR_PORT} base=${6:-0}
	rm -f "$log".* "$log.stop"
	# shellcheck disable=SC2086
	python3 "$ROOT/test/multinode/lib/transfers.py" --ports $ports --dbname "$DB" \
		--user "$BANK_USER" --accounts "$BANK_ACCOUNTS" --ledger "$BANK_LEDGER" \
		--clients "$clients" --seconds 300 --first "$first" --second "$second" \
		--log "$log" --stop-file "$log.stop" --id-base "$base" &
	TRANSFERS_PID=$!
}
stop_transfers() {	# log prefix
	touch "$1.stop"
	wait "$TRANSFERS_PID"
}

# outcomes LOG_PREFIX WORD: the ledger ids of the transfers with that outcome
outcomes() { cat "$1".* 2>/dev/null | awk -v w="$2" '$2 == w {print $3}'; }

# wait_until WHAT SECONDS SQL [PORT]: until SQL returns t
wait_until() {
	wait_sql "$1" "$2" "${4:-$COORDINATOR_PORT}" "$3"
}

# log_has FILE PATTERN FROM_LINE: the server log has a line matching PATTERN
log_has() { tail -n +"$3" "$1" | grep -Eq "$2"; }
# wait_for_log FILE PATTERN SECONDS [FROM_LINE]: until the server log has a line matching PATTERN
wait_for_log() {
	wait_for "no log line /$2/ in $1" "$3" log_has "$1" "$2" "${4:-1}"
}
log_lines() { wc -l <"$1"; }

# resolved_on_primaries PORT: nothing of this database is prepared on the
# active primaries of the coordinator at PORT
resolved_on_primaries() {
	local worker
	for worker in $(psql_at "$1" -c "SELECT node_port FROM shardext.nodes WHERE role = 'primary' AND active"); do
		[ "$(prepared_on "$worker")" = 0 ] || return 1
	done
}

# check_books WHAT LOG_PREFIX [PORT]: once recovery resolved what a lost
# worker left prepared, every transfer a client saw committed is in the
# ledger, none it saw fail is, the total is unchanged and every balance is its
# initial one plus what the ledger says (no transfer applied in part)
check_books() {
	local what=$1 log=$2 port=${3:-$COORDINATOR_PORT} ok failed
	# a transfer whose commit decision was taken while one of its nodes was
	# down stays prepared there until recovery commits it
	wait_for "$what: recovery resolves the prepared transactions" 60 resolved_on_primaries "$port"
	ok=$(outcomes "$log" OK | paste -sd,)
	failed=$(outcomes "$log" FAIL | paste -sd,)
	expect_eq "$what: every committed transfer is in the ledger ($(outcomes "$log" OK | wc -l) committed)" 0 \
		"$(psql_at "$port" -c "SELECT count(*) FROM unnest('{${ok}}'::bigint[]) i
			WHERE NOT EXISTS (SELECT FROM $BANK_LEDGER l WHERE l.id = i)")"
	expect_eq "$what: no transfer a client saw fail is in the ledger ($(outcomes "$log" FAIL | wc -l) failed)" 0 \
		"$(psql_at "$port" -c "SELECT count(*) FROM $BANK_LEDGER WHERE id = ANY ('{${failed}}'::bigint[])")"
	expect_eq "$what: the total is unchanged" "$((BANK_ACCOUNT_COUNT * BANK_INITIAL))" \
		"$(psql_at "$port" -c "SELECT sum(balance) FROM $BANK_ACCOUNTS")"
	expect_eq "$what: every balance matches the ledger (no half transfer)" 0 \
		"$(psql_at "$port" -c "SELECT count(*) FROM $BANK_ACCOUNTS a WHERE a.balance <> $BANK_INITIAL
			- coalesce((SELECT sum(amount) FROM $BANK_LEDGER WHERE payer = a.id), 0)
			+ coalesce((SELECT sum(amount) FROM $BANK_LEDGER WHERE payee = a.id), 0)")"
}

# prepared_on PORT: this database's prepared transactions on a node
prepared_on() { psql_at "$1" -d postgres -c "SELECT count(*) FROM pg_prepared_xacts WHERE database = '$DB'"; }

# client_error_states LOG_PREFIX: the SQLSTATEs of failed transfers, with counts
client_error_states() { cat "$1".* | awk '$2 != "OK" {print $4}' | sort | uniq -c | tr '\n' ' '; }

node_id_of_port() { coord "SELECT node_id FROM shardext.nodes WHERE node_port = $1"; }

# wait_for_setting PORT NAME VALUE: until new sessions see the reloaded
# setting (VALUE in the setting's base unit; '' for its default)
wait_for_setting() {
	wait_for "$2 = '${3:-default}' on $1" 10 setting_is "$@"
}
setting_is() {	# PORT NAME VALUE
	[ "$(psql_at "$1" -d postgres -c "SELECT setting = coalesce(nullif('$3', ''), boot_val)
		FROM pg_settings WHERE name = '$2'" 2>/dev/null)" = t ]
}

# drop_test_database WORKER_PORT...: roll back the test database's prepared
# transactions on those workers, and drop it there and on the coordinator
drop_test_database() {
	local port gid
	for port in "$@"; do
		for gid in $(psql_at "$port" -d postgres -c "SELECT gid FROM pg_prepared_xacts WHERE database = '$TEST_DB'" 2>/dev/null); do
			psql_at "$port" -d "$TEST_DB" -c "ROLLBACK PREPARED '$gid'" >/dev/null 2>&1
		done
	done
	for port in $COORDINATOR_PORT "$@"; do
		psql_at "$port" -d postgres -c "DROP DATABASE IF EXISTS $TEST_DB WITH (FORCE)" >/dev/null 2>&1
	done
}
