--
-- global_index: global secondary indexes of distributed tables.  Building
-- (and refusing), every write path keeping the index exact (checked with
-- shardext_check_global_index after each), unique violations reported as
-- PostgreSQL reports them, routing by the index (EXPLAIN shows the
-- lookup), privileges of a non-superuser owner, DDL that follows or is
-- refused, and what is dropped with what.
--
SET client_min_messages TO warning;
CREATE SCHEMA gidx;
SET search_path TO gidx, public;

-- the lines of a query's EXPLAIN that say how it was routed
CREATE FUNCTION explain_route(query text) RETURNS SETOF text LANGUAGE plpgsql AS $fn$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
		IF line ~ '(Global Ind|Index Shards|Index Lookup|Task Count|Custom Scan)' THEN
			RETURN NEXT regexp_replace(regexp_replace(line, '\s+$', ''), '_1[0-9]{5}', '_<shard>', 'g');
		END IF;
	END LOOP;
END
$fn$;

CREATE TABLE users (id bigint PRIMARY KEY, email text, name text, score int);
CREATE INDEX users_email ON users (email);
SELECT create_distributed_table('users', 'id', shard_count => 8);
CREATE TABLE countries (code text PRIMARY KEY, name text);
SELECT create_reference_table('countries');
CREATE TABLE local_t (id int, email text);
INSERT INTO users SELECT g, 'u' || g || '@x', 'n' || g, g % 5 FROM generate_series(1, 40) g;
RESET client_min_messages;

-- building over existing rows; the hidden index table and the view
SELECT shardext_create_global_index('users', 'email', is_unique => true);
SELECT index_name, table_name, columns, is_unique, index_table, shards FROM shardext.global_indexes;
SELECT shardext_check_global_index('users_email_gidx');
SELECT count(*) AS entries FROM shardext_gidx.users_email_gidx;
SELECT count(*) AS index_shards FROM shardext.shards WHERE logicalrelid = 'shardext_gidx.users_email_gidx'::regclass;

-- bad input: nothing is created
SELECT shardext_create_global_index('no_such_table', 'email');
SELECT shardext_create_global_index('users', 'no_such_column');
SELECT shardext_create_global_index('users', '');
SELECT shardext_create_global_index('users', 'email,,name');
SELECT shardext_create_global_index('users', 'email, email');
SELECT shardext_create_global_index('users', 'id');
SELECT shardext_create_global_index('countries', 'name');
SELECT shardext_create_global_index('local_t', 'email');
SELECT shardext_create_global_index('users', 'email', true, 'users_email_gidx');
SELECT shardext_create_global_index('users', NULL);
SELECT shardext_create_global_index('shardext_gidx.users_email_gidx', 'id');
CREATE TABLE shapes (id int PRIMARY KEY, p point, j json, n int);
SELECT create_distributed_table('shapes', 'id', shard_count => 4);
SELECT shardext_create_global_index('shapes', 'p');
SELECT shardext_create_global_index('shapes', 'n, j');
SELECT shardext_create_global_index('shapes', 'n', index_name => repeat('x', 64));
SELECT count(*) AS global_indexes FROM shardext.global_indexes;

-- a unique index over duplicates fails with PostgreSQL's own error, leaving nothing
INSERT INTO shapes VALUES (1, NULL, NULL, 7), (2, NULL, NULL, 7), (3, NULL, NULL, NULL), (4, NULL, NULL, NULL);
SELECT shardext_create_global_index('shapes', 'n', true, 'shapes_n_key');
SELECT count(*) AS global_indexes FROM shardext.global_indexes;
SELECT count(*) AS leftover_tables FROM pg_class WHERE relname LIKE 'shapes_n_key%';
SELECT sum(result::int) AS leftover_shards FROM shardext_run_on_nodes(
	$$SELECT count(*) FROM pg_class WHERE relname LIKE 'shapes_n_key%'$$);
-- NULLs never conflict: unique over the non-NULL values works
DELETE FROM shapes WHERE id = 2;
SELECT shardext_create_global_index('shapes', 'n', true, 'shapes_n_key');
SELECT shardext_check_global_index('shapes_n_key');
DROP TABLE shapes;

-- INSERT: one row, several rows, NULL email (no entry), duplicates
INSERT INTO users VALUES (101, 'new101@x', 'a', 1);
INSERT INTO users VALUES (102, 'new102@x', 'b', 1), (103, 'new103@x', 'c', 2), (104, NULL, 'd', 3);
INSERT INTO users VALUES (105, 'u1@x', 'dup of an existing row', 0);
INSERT INTO users VALUES (106, 'same@x', 'a', 0), (107, 'same@x', 'b', 0);
SELECT count(*) AS not_inserted FROM users WHERE id IN (105, 106, 107);
INSERT INTO users (id, name) VALUES (108, 'no email') RETURNING id, email;
SELECT shardext_check_global_index('users_email_gidx');

-- a duplicate of the table's own key next to a new email leaves no entry behind
INSERT INTO users VALUES (101, 'other@x', 'pk dup', 0);
SELECT count(*) FROM users WHERE email = 'other@x';
SELECT shardext_check_global_index('users_email_gidx');

-- INSERT ... SELECT: through the coordinator (also what could be pushed down)
CREATE TABLE staging (id bigint PRIMARY KEY, email text, name text, score int);
SELECT create_distributed_table('staging', 'id', colocate_with => 'users');
INSERT INTO staging SELECT g, 's' || g || '@x', 'staged', 0 FROM generate_series(201, 230) g;
SELECT * FROM explain_route('INSERT INTO users SELECT * FROM staging');
INSERT INTO users SELECT * FROM staging;
INSERT INTO users SELECT id + 100, email, name, score FROM staging WHERE id = 202;
INSERT INTO users SELECT g, 'gen' || g || '@x', 'generated', 0 FROM generate_series(301, 310) g;
SELECT shardext_check_global_index('users_email_gidx');

-- COPY: rows and entries; a duplicate fails the whole COPY
COPY users FROM STDIN;
401	copy401@x	copied	1
402	copy402@x	copied	1
403	\N	copied	1
\.
COPY users FROM STDIN;
404	copy404@x	copied	1
405	copy401@x	copied	1
\.
SELECT count(*) FROM users WHERE id BETWEEN 401 AND 405;
SELECT shardext_check_global_index('users_email_gidx');

-- ON CONFLICT on the global unique index: DO NOTHING works (also within the statement)
INSERT INTO users VALUES (501, 'u2@x', 'taken', 0) ON CONFLICT (email) DO NOTHING;
INSERT INTO users VALUES (502, 'oc502@x', 'first', 0), (503, 'oc502@x', 'second', 0), (504, 'oc504@x', 'x', 0)
	ON CONFLICT (email) DO NOTHING RETURNING id, email, name;
-- a NULL email conflicts with nothing
INSERT INTO users VALUES (505, NULL, 'null email', 0) ON CONFLICT (email) DO NOTHING RETURNING id;
-- a duplicate of the table's own key is still an error
INSERT INTO users VALUES (1, 'oc-new@x', 'x', 0) ON CONFLICT (email) DO NOTHING;
SELECT shardext_check_global_index('users_email_gidx');
-- ON CONFLICT on the table's own key: DO NOTHING and DO UPDATE of other columns
INSERT INTO users VALUES (3, 'oc-three@x', 'x', 0), (506, 'oc506@x', 'new', 0)
	ON CONFLICT (id) DO NOTHING RETURNING id, email;
INSERT INTO users VALUES (4, 'oc-four@x', 'x', 0), (507, 'oc507@x', 'new', 0)
	ON CONFLICT (id) DO UPDATE SET name = 'upserted', score = excluded.score + 10 RETURNING id, email, name;
INSERT INTO users VALUES (508, 'u5@x', 'x', 0) ON CONFLICT (id) DO NOTHING;
SELECT shardext_check_global_index('users_email_gidx');
-- the other forms are refused
INSERT INTO users VALUES (5, 'u5@x', 'x', 0) ON CONFLICT (email) DO UPDATE SET name = 'no';
INSERT INTO users VALUES (5, 'x@x', 'x', 0) ON CONFLICT (id) DO UPDATE SET email = excluded.email;
INSERT INTO users VALUES (5, 'x@x', 'x', 0) ON CONFLICT DO NOTHING;
MERGE INTO users u USING staging s ON u.id = s.id WHEN MATCHED THEN DELETE;
SELECT shardext_check_global_index('users_email_gidx');

-- UPDATE of the indexed column: one row, several shards, values trading places
UPDATE users SET email = 'renamed6@x' WHERE id = 6;
UPDATE users SET email = upper(email) WHERE id BETWEEN 7 AND 20;
UPDATE users SET email = CASE WHEN id = 21 THEN 'u22@x' ELSE 'u21@x' END WHERE id IN (21, 22);
SELECT id, email FROM users WHERE id IN (6, 7, 21, 22) ORDER BY id;
UPDATE users SET email = 'u23@x' WHERE id = 24;
UPDATE users SET email = NULL WHERE id = 25 RETURNING id, email;
UPDATE users SET email = 'back25@x', name = 'back' WHERE id = 25 RETURNING id, email, name;
-- UPDATE of other columns changes no entry; of the key's rows by the index
UPDATE users SET score = score + 1 WHERE email = 'u30@x';
UPDATE users SET email = 'moved31@x' WHERE email = 'u31@x' RETURNING id;
SELECT shardext_check_global_index('users_email_gidx');

-- DELETE: by key, by the index, on every shard
DELETE FROM users WHERE id = 32;
DELETE FROM users WHERE email IN ('u33@x', 'u34@x', 'nobody@x') RETURNING id;
DELETE FROM users WHERE score = 4;
SELECT shardext_check_global_index('users_email_gidx');

-- transactions: the index follows savepoints and rollbacks
BEGIN;
INSERT INTO users VALUES (601, 'tx601@x', 'in tx', 0);
SELECT id FROM users WHERE email = 'tx601@x';
SAVEPOINT s1;
INSERT INTO users VALUES (602, 'tx602@x', 'rolled back', 0);
UPDATE users SET email = 'tx-renamed@x' WHERE id = 601;
ROLLBACK TO SAVEPOINT s1;
SELECT id FROM users WHERE email = 'tx601@x';
INSERT INTO users VALUES (603, 'tx602@x', 'reuses the rolled back email', 0);
COMMIT;
BEGIN;
DELETE FROM users WHERE id = 603;
INSERT INTO users VALUES (604, 'tx604@x', 'never', 0);
ROLLBACK;
SELECT id, email FROM users WHERE id BETWEEN 601 AND 604 ORDER BY id;
SELECT shardext_check_global_index('users_email_gidx');

-- routing by the index: one lookup, then only the shards that hold matches
SELECT * FROM explain_route($$SELECT * FROM users WHERE email = 'u35@x'$$);
SELECT * FROM explain_route($$SELECT * FROM users WHERE email = 'nobody@x'$$);
SELECT * FROM explain_route($$SELECT name FROM users WHERE email IN ('u35@x', 'u36@x', 'u37@x')$$);
SELECT * FROM explain_route($$DELETE FROM users WHERE email = 'u38@x'$$);
SELECT * FROM explain_route($$UPDATE users SET name = 'x' WHERE email = ANY (ARRAY['u38@x', 'u39@x'])$$);
SELECT * FROM explain_route($$SELECT count(*) FROM users WHERE email = 'u35@x' OR id = 1$$);
SELECT * FROM explain_route($$SELECT * FROM users WHERE id = 35 AND email = 'u35@x'$$);
SELECT id, name FROM users WHERE email = 'u35@x';
SELECT id, name FROM users WHERE email IN ('u35@x', 'u36@x', 'nobody@x') ORDER BY id;
SELECT id FROM users WHERE email = ANY (ARRAY['u37@x', 'U8@X']) ORDER BY id;
SELECT count(*) FROM users WHERE email = 'nobody@x';
SELECT u.id, s.name FROM users u JOIN staging s ON s.id = u.id WHERE u.email = 's201@x';
-- prepared statements, also after the switch to a generic plan
PREPARE by_email(text) AS SELECT id, name FROM users WHERE email = $1;
EXECUTE by_email('u35@x');
EXECUTE by_email('u36@x');
EXECUTE by_email('u37@x');
EXECUTE by_email('u38@x');
EXECUTE by_email('u39@x');
EXECUTE by_email('u40@x');
EXECUTE by_email('nobody@x');
SELECT * FROM explain_route('EXECUTE by_email(''u36@x'')');
PREPARE rename_by_email(text, text) AS UPDATE users SET email = $2 WHERE email = $1 RETURNING id;
EXECUTE rename_by_email('u36@x', 'p1@x');
EXECUTE rename_by_email('p1@x', 'p2@x');
EXECUTE rename_by_email('p2@x', 'p3@x');
EXECUTE rename_by_email('p3@x', 'p4@x');
EXECUTE rename_by_email('p4@x', 'p5@x');
EXECUTE rename_by_email('p5@x', 'u36@x');
EXECUTE rename_by_email('nobody@x', 'p6@x');
SELECT shardext_check_global_index('users_email_gidx');
-- in PL/pgSQL, also DELETE ... RETURNING INTO (a row limit: the write still completes)
DO $$
DECLARE
	found_id bigint;
BEGIN
	SELECT id INTO found_id FROM users WHERE email = 'u37@x';
	RAISE NOTICE 'found %', found_id;
	DELETE FROM users WHERE email = 'u37@x' RETURNING id INTO found_id;
	RAISE NOTICE 'deleted %', found_id;
END
$$;
SELECT shardext_check_global_index('users_email_gidx');

-- TRUNCATE empties the index with the table
TRUNCATE staging, users;
SELECT count(*) AS entries FROM shardext_gidx.users_email_gidx;
INSERT INTO users SELECT g, 'u' || g || '@x', 'n' || g, g % 5 FROM generate_series(1, 20) g;
SELECT shardext_check_global_index('users_email_gidx');

-- a non-unique index counts the rows behind each entry; a two-column index
SELECT shardext_create_global_index('users', 'score');
SELECT shardext_create_global_index('users', 'name, score', index_name => 'users_name_score');
SELECT index_name, columns, is_unique FROM shardext.global_indexes WHERE table_name = 'users'::regclass ORDER BY 1;
SELECT score, count(*) AS entries, sum(shardext_count) AS rows FROM shardext_gidx.users_score_gidx GROUP BY score ORDER BY score;
INSERT INTO users VALUES (21, 'u21@x', 'n21', 1), (22, 'u22@x', 'n1', 1);
UPDATE users SET score = 9 WHERE id IN (1, 2, 3);
UPDATE users SET name = 'n1', score = 1 WHERE id = 4;
DELETE FROM users WHERE score = 2;
COPY users FROM STDIN;
30	u30@x	n30	9
31	u31@x	n31	9
\.
SELECT shardext_check_global_index('users_email_gidx') AS email,
	   shardext_check_global_index('users_score_gidx') AS score,
	   shardext_check_global_index('users_name_score') AS name_score;
SELECT * FROM explain_route($$SELECT id FROM users WHERE name = 'n1' AND score = 1$$);
SELECT id FROM users WHERE name = 'n1' AND score = 1 ORDER BY id;
SELECT count(*) FROM users WHERE score = 9;
SELECT shardext_drop_global_index('users_score_gidx');
SELECT shardext_drop_global_index('users_score_gidx');
-- many rows per distribution value: an entry counts them
CREATE TABLE events (tenant int, id int, kind text, PRIMARY KEY (tenant, id));
SELECT create_distributed_table('events', 'tenant', shard_count => 4);
INSERT INTO events SELECT g % 3, g, 'k' || (g % 4) FROM generate_series(1, 60) g;
SELECT shardext_create_global_index('events', 'kind');
SELECT kind, tenant, shardext_count FROM shardext_gidx.events_kind_gidx ORDER BY 1, 2 LIMIT 4;
DELETE FROM events WHERE id % 10 = 0;
UPDATE events SET kind = 'k9' WHERE id % 7 = 0;
UPDATE events SET kind = 'k8' WHERE tenant = 1 AND kind = 'k1';
INSERT INTO events VALUES (5, 100, 'k9'), (5, 101, 'k9'), (6, 102, NULL);
SELECT kind, tenant, shardext_count FROM shardext_gidx.events_kind_gidx WHERE kind IN ('k8', 'k9') ORDER BY 1, 2;
SELECT shardext_check_global_index('events_kind_gidx');
SELECT tenant, count(*) FROM events WHERE kind = 'k9' GROUP BY tenant ORDER BY tenant;
DELETE FROM events WHERE kind = 'k8';
SELECT count(*) AS k8_entries FROM shardext_gidx.events_kind_gidx WHERE kind = 'k8';
SELECT shardext_check_global_index('events_kind_gidx');
DROP TABLE events;

-- shardext_check_global_index finds missing and dangling entries
SELECT count(*) FROM shardext_run_on_shards('shardext_gidx.users_email_gidx',
	$$DELETE FROM %s WHERE email IN ('u5@x', 'u6@x')$$) WHERE success;
SELECT count(*) FROM shardext_run_on_shards('shardext_gidx.users_email_gidx',
	$$INSERT INTO %s VALUES ('ghost@x', 99)$$) WHERE success;
SELECT shardext_check_global_index('users_email_gidx') AS two_missing_eight_dangling;
SELECT shardext_check_global_index('no_such_index');

-- the index table is shardext's: users' writes and DDL on it are refused
INSERT INTO shardext_gidx.users_email_gidx VALUES ('x@x', 1);
UPDATE shardext_gidx.users_email_gidx SET id = 2;
DELETE FROM shardext_gidx.users_email_gidx;
TRUNCATE shardext_gidx.users_email_gidx;
ALTER TABLE shardext_gidx.users_email_gidx ADD COLUMN extra int;
GRANT SELECT ON shardext_gidx.users_email_gidx TO PUBLIC;
SELECT undistribute_table('shardext_gidx.users_email_gidx');
-- a CREATE UNIQUE INDEX without the distribution column points here
CREATE UNIQUE INDEX users_email_local ON users (email);

-- rebuild the damaged index
SELECT shardext_drop_global_index('users_email_gidx');
SELECT shardext_create_global_index('users', 'email', true);
SELECT shardext_check_global_index('users_email_gidx');

-- DDL: a renamed column is renamed in the index too; its type cannot change
ALTER TABLE users RENAME COLUMN email TO mail;
INSERT INTO users VALUES (40, 'renamed40@x', 'x', 0);
SELECT id FROM users WHERE mail = 'renamed40@x';
INSERT INTO users VALUES (41, 'renamed40@x', 'x', 0);
SELECT shardext_check_global_index('users_email_gidx');
ALTER TABLE users ALTER COLUMN mail TYPE varchar(200);
ALTER TABLE users RENAME COLUMN mail TO email;
-- dropping an indexed column drops its indexes
SELECT shardext_create_global_index('users', 'name', index_name => 'users_by_name');
ALTER TABLE users DROP COLUMN name;
SELECT index_name FROM shardext.global_indexes ORDER BY 1;
SELECT sum(result::int) AS name_index_shards FROM shardext_run_on_nodes(
	$$SELECT count(*) FROM pg_class WHERE relname LIKE 'users_by_name%'$$);

-- a non-superuser owner, and a role granted writes: remote work runs as them
CREATE ROLE gidx_owner LOGIN;
CREATE ROLE gidx_writer LOGIN;
CREATE ROLE gidx_reader LOGIN;
SELECT count(*) FROM shardext_run_on_nodes(
	'CREATE ROLE gidx_owner LOGIN; CREATE ROLE gidx_writer LOGIN; CREATE ROLE gidx_reader LOGIN') WHERE success;
GRANT USAGE ON SCHEMA gidx TO gidx_owner, gidx_writer, gidx_reader;
SELECT count(*) FROM shardext_run_on_nodes(
	'GRANT USAGE ON SCHEMA gidx TO gidx_owner, gidx_writer, gidx_reader') WHERE success;
ALTER TABLE users OWNER TO gidx_owner;
-- the grants of the index table: the table's, to the same roles (the owner's
-- own privileges are what PostgreSQL gives an owner, MAINTAIN too from 17 on)
CREATE TEMP VIEW gidx_grants AS
	SELECT a.grantee::regrole, string_agg(a.privilege_type, ', ' ORDER BY a.privilege_type) AS privileges,
		   i.relacl = t.relacl AS same_as_table
	FROM pg_class i CROSS JOIN LATERAL aclexplode(i.relacl) a
	JOIN pg_class t ON t.oid = 'users'::regclass
	WHERE i.oid = 'shardext_gidx.users_email_gidx'::regclass AND a.grantee <> i.relowner
	GROUP BY 1, 3 ORDER BY 1;
SELECT relowner::regrole FROM pg_class WHERE oid = 'shardext_gidx.users_email_gidx'::regclass;
SET ROLE gidx_owner;
GRANT SELECT, INSERT, UPDATE, DELETE ON users TO gidx_writer;
GRANT SELECT ON users TO gidx_reader;
INSERT INTO users VALUES (700, 'owner700@x', 0);
RESET ROLE;
SELECT * FROM gidx_grants;
SELECT DISTINCT result FROM shardext_run_on_shards('shardext_gidx.users_email_gidx',
	format($$SELECT relowner::regrole || ' ' || (relacl::text = %L) FROM pg_class WHERE oid = '%%s'::regclass$$,
		   (SELECT relacl::text FROM pg_class WHERE oid = 'shardext_gidx.users_email_gidx'::regclass)));
SET ROLE gidx_writer;
INSERT INTO users VALUES (701, 'writer701@x', 0);
UPDATE users SET email = 'writer701b@x' WHERE email = 'writer701@x';
INSERT INTO users VALUES (702, 'owner700@x', 0);
DELETE FROM users WHERE email = 'owner700@x';
INSERT INTO shardext_gidx.users_email_gidx VALUES ('sneaky@x', 1);
SELECT shardext_create_global_index('users', 'score');
RESET ROLE;
-- the owner, no superuser, makes and drops a global index of their own table
SET ROLE gidx_owner;
SELECT rolsuper FROM pg_roles WHERE rolname = current_user;
SELECT shardext_create_global_index('users', 'score', index_name => 'owners_own');
SELECT relowner::regrole FROM pg_class WHERE oid = 'shardext_gidx.owners_own'::regclass;
INSERT INTO users VALUES (704, 'owner704@x', 7);
SELECT id FROM users WHERE score = 7;
SELECT shardext_check_global_index('owners_own');
SELECT shardext_drop_global_index('owners_own');
RESET ROLE;
SET ROLE gidx_reader;
SELECT id FROM users WHERE email = 'writer701b@x';
INSERT INTO users VALUES (703, 'reader703@x', 0);
RESET ROLE;
SET ROLE gidx_owner;
REVOKE INSERT, UPDATE, DELETE ON users FROM gidx_writer;
RESET ROLE;
SELECT * FROM gidx_grants;
DROP VIEW gidx_grants;
SELECT shardext_check_global_index('users_email_gidx');
SET ROLE gidx_reader;
SELECT shardext_drop_global_index('users_email_gidx');
RESET ROLE;
ALTER TABLE users OWNER TO CURRENT_USER;

-- identifiers with quotes, spaces, upper case and non-ASCII letters
CREATE TABLE "Odd ""Users"" é" ("User Id" bigint PRIMARY KEY, "E-Mail ""Address""" text, "Ünïcode" text);
SELECT create_distributed_table('"Odd ""Users"" é"', 'User Id', shard_count => 4);
INSERT INTO "Odd ""Users"" é" VALUES (1, 'a@x', 'ä'), (2, 'b@x', 'ö');
SELECT shardext_create_global_index('"Odd ""Users"" é"', '"E-Mail ""Address""", "Ünïcode"', true,
									'Odd "index" é');
SELECT index_name, columns FROM shardext.global_indexes WHERE index_name = 'Odd "index" é';
INSERT INTO "Odd ""Users"" é" VALUES (3, 'a@x', 'ä');
UPDATE "Odd ""Users"" é" SET "Ünïcode" = 'ü' WHERE "User Id" = 2;
SELECT "User Id" FROM "Odd ""Users"" é" WHERE "E-Mail ""Address""" = 'b@x' AND "Ünïcode" = 'ü';
SELECT * FROM explain_route($q$SELECT 1 FROM "Odd ""Users"" é" WHERE "E-Mail ""Address""" = 'b@x' AND "Ünïcode" = 'ü'$q$);
SELECT shardext_check_global_index('Odd "index" é');

-- DROP TABLE drops the global indexes with their shards; undistribute_table too
DROP TABLE "Odd ""Users"" é";
SELECT undistribute_table('users');
SELECT count(*) AS global_indexes FROM shardext.global_indexes;
SELECT count(*) AS index_tables FROM pg_class WHERE relnamespace = 'shardext_gidx'::regnamespace;
SELECT sum(result::int) AS index_shards FROM shardext_run_on_nodes(
	$$SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	  WHERE n.nspname = 'shardext_gidx'$$);
SELECT count(*) AS rows_back FROM users;

SET client_min_messages TO warning;
DROP SCHEMA gidx CASCADE;
DROP ROLE gidx_owner;
DROP ROLE gidx_writer;
DROP ROLE gidx_reader;
SELECT count(*) FROM shardext_run_on_nodes(
	'DROP SCHEMA IF EXISTS gidx CASCADE; DROP ROLE gidx_owner; DROP ROLE gidx_writer; DROP ROLE gidx_reader') WHERE success;
