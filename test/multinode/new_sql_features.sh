#!/usr/bin/env bash
# What PostgreSQL 16 to 19 add to SQL, on distributed tables: it gives what
# it gives on a local table, or a clear 0A000 error that leaves nothing
# changed -- never a wrong answer.  Each part runs on the versions that have
# the syntax (the others skip it, saying so).
source "$(dirname "$0")/lib/common.sh"
source "$ROOT/scripts/lib/pg.sh"

major=$(pg_major)
# sql SQL: runs it with errors that print their SQLSTATE
sql() { psql_at "$COORDINATOR_PORT" -c '\set VERBOSITY verbose' -c "$1"; }
# same WHAT QUERY: the query gives the same rows on nf_d (distributed) and nf_l (local)
same() {
	local d l
	d=$(coord "SET search_path = nf_d, public; $2") || fail "$1 (distributed): $d"
	l=$(coord "SET search_path = nf_l, public; $2") || fail "$1 (local): $l"
	[ -n "$d" ] || fail "$1: no rows"
	expect_eq "$1" "$l" "$d"
}
since() {
	if [ "$major" -lt "$1" ]; then
		echo "ok - skipped on PostgreSQL $major: $2 (PostgreSQL $1)"
		return 1
	fi
}

coord "SET client_min_messages = warning; DROP SCHEMA IF EXISTS nf_d CASCADE; DROP SCHEMA IF EXISTS nf_l CASCADE"
coord "CREATE SCHEMA nf_d; CREATE SCHEMA nf_l"
for s in nf_d nf_l; do
	coord "CREATE TABLE $s.t (k int PRIMARY KEY, v int DEFAULT -1, note text DEFAULT 'dflt', doc jsonb);
		   INSERT INTO $s.t SELECT g, g * 10, 'n' || g,
			   jsonb_build_object('a', g, 'tags', jsonb_build_array('x' || g, 'y'))
		   FROM generate_series(1, 20) g;
		   CREATE TABLE $s.src (k int, v int)" || fail "tables in $s"
done
coord "SELECT create_distributed_table('nf_d.t', 'k', shard_count => 4),
			  create_distributed_table('nf_d.src', 'k', colocate_with => 'nf_d.t')" >/dev/null ||
	fail "distributing"

# --- 16: COPY FROM with a DEFAULT marker ---
if since 16 "COPY ... DEFAULT"; then
	for s in nf_d nf_l; do
		printf '101,1010,DEF\n102,DEF,x\n' |
			coord "COPY $s.t (k, v, note) FROM STDIN WITH (FORMAT csv, DEFAULT 'DEF')" ||
			fail "COPY DEFAULT into $s.t"
	done
	same "COPY ... DEFAULT: the marker takes the column's default" \
		"SELECT k, v, note FROM t WHERE k > 100 ORDER BY k"
fi

# --- 17: FORCE_NOT_NULL * / FORCE_NULL *, ON_ERROR, MERGE ... RETURNING / BY SOURCE, JSON_TABLE ---
if since 17 "FORCE_NOT_NULL *, ON_ERROR, MERGE RETURNING, JSON_TABLE"; then
	for s in nf_d nf_l; do
		printf '201,2010,\n202,2020,""\n' |
			coord "COPY $s.t (k, v, note) FROM STDIN WITH (FORMAT csv, FORCE_NOT_NULL *)" ||
			fail "COPY FORCE_NOT_NULL * into $s.t"
		printf '203,2030,""\n' |
			coord "COPY $s.t (k, v, note) FROM STDIN WITH (FORMAT csv, FORCE_NULL *)" ||
			fail "COPY FORCE_NULL * into $s.t"
	done
	same "COPY ... FORCE_NOT_NULL * / FORCE_NULL *" \
		"SELECT k, coalesce(v::text, 'null'), coalesce(note, 'null') FROM t WHERE k > 200 ORDER BY k"

	expect_error_like "COPY ... ON_ERROR is refused" \
		'0A000: COPY ... ON_ERROR on distributed table "t" is not supported' \
		sql "COPY nf_d.t (k, v) FROM PROGRAM 'printf \"301\\tx\\n302\\t3020\\n\"' WITH (ON_ERROR ignore)"
	expect_eq "... and loads nothing" "0" "$(coord "SELECT count(*) FROM nf_d.t WHERE k > 300")"

	coord "INSERT INTO nf_d.src VALUES (1, 1), (25, 250); INSERT INTO nf_l.src VALUES (1, 1), (25, 250)"
	expect_error_like "MERGE ... RETURNING is refused" \
		'0A000: MERGE ... RETURNING on distributed table "t" is not supported' \
		sql "MERGE INTO nf_d.t t USING nf_d.src s ON t.k = s.k
			 WHEN MATCHED THEN UPDATE SET v = s.v RETURNING t.k"
	expect_error_like "MERGE ... WHEN NOT MATCHED BY SOURCE is refused" \
		'0A000: MERGE ... WHEN NOT MATCHED BY SOURCE on distributed table "t" is not supported' \
		sql "MERGE INTO nf_d.t t USING nf_d.src s ON t.k = s.k
			 WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED BY SOURCE THEN DELETE"
	same "... and change nothing" "SELECT count(*), sum(v) FROM t"
	for s in nf_d nf_l; do
		coord "MERGE INTO $s.t t USING $s.src s ON t.k = s.k
			   WHEN MATCHED THEN UPDATE SET v = t.v + s.v
			   WHEN NOT MATCHED BY TARGET THEN INSERT (k, v) VALUES (s.k, s.v)" >/dev/null ||
			fail "MERGE ... WHEN NOT MATCHED BY TARGET on $s"
	done
	same "MERGE ... WHEN NOT MATCHED BY TARGET" "SELECT k, v FROM t WHERE k IN (1, 25) ORDER BY k"

	same "JSON_TABLE over a distributed table" \
		"SELECT t.k, j.tag FROM t, JSON_TABLE(t.doc, '$.tags[*]' COLUMNS (tag text PATH '$')) j
		 WHERE t.k < 4 ORDER BY 1, 2"
	same "SQL/JSON query functions" \
		"SELECT k, JSON_VALUE(doc, '$.a' RETURNING int), JSON_QUERY(doc, '$.tags'),
				JSON_EXISTS(doc, '$.tags[1]')
		 FROM t WHERE JSON_VALUE(doc, '$.a' RETURNING int) BETWEEN 3 AND 5 ORDER BY k"
	same "SQL/JSON functions in an aggregate" \
		"SELECT count(*), sum(JSON_VALUE(doc, '$.a' RETURNING int)) FROM t
		 WHERE JSON_EXISTS(doc, '$.a ? (@ > 10)')"
fi

# --- 18: RETURNING OLD/NEW, virtual generated columns, uuidv7() keys ---
if since 18 "RETURNING OLD/NEW, virtual generated columns, uuidv7()"; then
	expect_error_like "RETURNING OLD/NEW is refused" \
		'0A000: RETURNING OLD or NEW on distributed table "t" is not supported' \
		sql "UPDATE nf_d.t SET v = v + 1 WHERE k = 2 RETURNING old.v, new.v"
	same "... and changes nothing" "SELECT v FROM t WHERE k = 2"

	for s in nf_d nf_l; do
		coord "CREATE TABLE $s.g (k int PRIMARY KEY, a int, b int GENERATED ALWAYS AS (a * 2) VIRTUAL)" ||
			fail "a virtual generated column in $s"
	done
	coord "SELECT create_distributed_table('nf_d.g', 'k')" >/dev/null || fail "distributing g"
	for s in nf_d nf_l; do
		coord "INSERT INTO $s.g (k, a) SELECT i, i FROM generate_series(1, 10) i;
			   UPDATE $s.g SET a = a + 100 WHERE k % 2 = 0" || fail "writes to $s.g"
	done
	same "a virtual generated column follows its inputs" "SELECT k, a, b FROM g ORDER BY k"
	same "... in WHERE and aggregates" "SELECT count(*), sum(b) FROM g WHERE b > 100"

	for s in nf_d nf_l; do
		coord "CREATE TABLE $s.u (id uuid PRIMARY KEY DEFAULT uuidv7(), n int)" || fail "uuid table in $s"
	done
	coord "SELECT create_distributed_table('nf_d.u', 'id')" >/dev/null || fail "distributing u"
	for s in nf_d nf_l; do
		coord "INSERT INTO $s.u (n) SELECT generate_series(1, 100)" || fail "uuidv7 keys in $s"
	done
	same "uuidv7() keys" "SELECT count(*), count(DISTINCT id), sum(n) FROM u"
	expect_eq "uuidv7() keys spread over the shards" "t" \
		"$(coord "SELECT count(DISTINCT shardext_shard_for_value('nf_d.u', id::text)) > 1 FROM nf_d.u")"
fi

# --- 19: COPY TO ... FORMAT json ---
if since 19 "COPY ... FORMAT json"; then
	expect_error_like "COPY t TO ... FORMAT json is refused" \
		'0A000: COPY ... FORMAT json on distributed table "t" is not supported' \
		sql "COPY nf_d.t TO STDOUT WITH (FORMAT json)"
	same "COPY (SELECT ...) TO ... FORMAT json" \
		"COPY (SELECT k, v FROM t WHERE k < 4 ORDER BY k) TO STDOUT WITH (FORMAT json)"
fi

coord "SET client_min_messages = warning; DROP SCHEMA nf_d CASCADE; DROP SCHEMA nf_l CASCADE"
