--
-- permission_checks: the coordinator checks a statement's privileges on
-- distributed tables as PostgreSQL checks them on local tables -- table and
-- column privileges, at every level of the statement (subqueries, CTEs,
-- views), whichever way the statement runs (routed to one shard, pushed
-- down with a combine step, planned in parts, rows pulled for a local
-- join).  PostgreSQL 16 moved these checks out of the range table
-- (RTEPermissionInfo); the output is the same on every version.
--
SET client_min_messages TO warning;
DROP SCHEMA IF EXISTS perm CASCADE;
DROP ROLE IF EXISTS perm_reader;
CREATE ROLE perm_reader LOGIN NOSUPERUSER;
SELECT bool_and(success) AS roles_on_workers FROM shardext_run_on_nodes(
	'DROP SCHEMA IF EXISTS perm CASCADE; DROP ROLE IF EXISTS perm_reader;
	 CREATE ROLE perm_reader LOGIN NOSUPERUSER;
	 CREATE SCHEMA perm; GRANT USAGE ON SCHEMA perm TO perm_reader');
RESET client_min_messages;
CREATE SCHEMA perm;
GRANT USAGE ON SCHEMA perm TO perm_reader;
CREATE TABLE perm.t (k int PRIMARY KEY, pub int, secret int);
INSERT INTO perm.t SELECT g, g, g * 100 FROM generate_series(1, 20) g;
SELECT create_distributed_table('perm.t', 'k', shard_count => 4);
CREATE TABLE perm.o (k int, v int);
SELECT create_distributed_table('perm.o', 'k', colocate_with => 'perm.t');
INSERT INTO perm.o SELECT g, g FROM generate_series(1, 20) g;
CREATE TABLE perm.loc (k int);
INSERT INTO perm.loc VALUES (1), (2);
GRANT SELECT (k, pub), UPDATE (pub) ON perm.t TO perm_reader;
GRANT SELECT ON perm.loc TO perm_reader;
CREATE VIEW perm.v_granted AS SELECT k, pub FROM perm.t;
GRANT SELECT ON perm.v_granted TO perm_reader;
CREATE VIEW perm.v_hidden AS SELECT k FROM perm.t;

SET ROLE perm_reader;
-- the columns granted, every way a query runs
SELECT pub FROM perm.t WHERE k = 3;
SELECT count(*), sum(pub) FROM perm.t;
SELECT k, pub FROM perm.t ORDER BY pub DESC LIMIT 2;
WITH c AS MATERIALIZED (SELECT k, pub FROM perm.t) SELECT count(*) FROM c;
SELECT count(*) FROM perm.t t JOIN perm.loc l USING (k);
SELECT count(*) FROM (SELECT k FROM perm.t WHERE pub > 5) s;
SELECT count(*) FROM perm.loc WHERE k IN (SELECT k FROM perm.t WHERE pub > 1);
UPDATE perm.t SET pub = pub WHERE k = 1;
-- a column not granted, every way
SELECT secret FROM perm.t WHERE k = 3;
SELECT sum(secret) FROM perm.t;
SELECT k FROM perm.t ORDER BY secret DESC LIMIT 2;
WITH c AS MATERIALIZED (SELECT secret FROM perm.t) SELECT count(*) FROM c;
SELECT count(*) FROM perm.t t JOIN perm.loc l USING (k) WHERE t.secret > 0;
SELECT count(*) FROM (SELECT k FROM perm.t WHERE secret > 5) s;
SELECT count(*) FROM perm.loc WHERE k IN (SELECT k FROM perm.t WHERE secret > 0);
SELECT * FROM perm.t WHERE k = 1;
SELECT count(*) FROM perm.t t WHERE t IS NOT NULL;
UPDATE perm.t SET secret = 0 WHERE k = 1;
UPDATE perm.t SET pub = secret WHERE k = 1;
-- a table not granted at all, at any level
SELECT count(*) FROM perm.t WHERE k IN (SELECT k FROM perm.o);
SELECT count(*) FROM perm.t t JOIN perm.o o USING (k);
WITH c AS MATERIALIZED (SELECT v FROM perm.o) SELECT count(*) FROM c;
SELECT count(*) FROM perm.loc l WHERE EXISTS (SELECT 1 FROM perm.o o WHERE o.k = l.k);
INSERT INTO perm.t (k, pub) VALUES (100, 1);
DELETE FROM perm.t WHERE k = 1;
-- views: the view's privilege is the caller's
SELECT count(*) FROM perm.v_hidden;
SELECT count(*) FROM perm.v_hidden WHERE k = 1;
SELECT count(*), sum(pub) FROM perm.v_granted;
SELECT pub FROM perm.v_granted WHERE k = 2;
RESET ROLE;
SELECT count(*) AS rows, sum(pub) AS pubs, sum(secret) AS secrets FROM perm.t;

SET client_min_messages TO warning;
DROP SCHEMA perm CASCADE;
DROP ROLE perm_reader;
SELECT bool_and(success) AS cleaned_on_workers FROM shardext_run_on_nodes(
	'DROP SCHEMA IF EXISTS perm CASCADE; DROP ROLE IF EXISTS perm_reader');
RESET client_min_messages;
