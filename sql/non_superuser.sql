--
-- non_superuser: a table owner without superuser distributes, uses, changes
-- and drops their own tables; shardext writes its catalog with the
-- extension owner's rights, while the checks are on the caller.  Others
-- are refused, and administration is for superusers and shardext_admin.
--
-- The roles exist on the coordinator and on the workers (remote work runs
-- as the calling user); they own nothing outside this test's database.
SET client_min_messages TO warning;
DROP ROLE IF EXISTS app_owner;
DROP ROLE IF EXISTS app_other;
DROP ROLE IF EXISTS app_admin;
CREATE ROLE app_owner LOGIN NOSUPERUSER;
CREATE ROLE app_other LOGIN NOSUPERUSER;
CREATE ROLE app_admin LOGIN NOSUPERUSER IN ROLE shardext_admin;
SELECT node_id > 0 AS worker, success FROM shardext_run_on_nodes($cmd$
	DO $d$ BEGIN
	  DROP ROLE IF EXISTS app_owner; DROP ROLE IF EXISTS app_other; DROP ROLE IF EXISTS app_admin;
	  CREATE ROLE app_owner LOGIN NOSUPERUSER; CREATE ROLE app_other LOGIN NOSUPERUSER;
	  CREATE ROLE app_admin LOGIN NOSUPERUSER IN ROLE shardext_admin;
	END $d$ $cmd$) ORDER BY node_id;
-- the owner's schema exists on every node; the owner may not create
-- schemas (no CREATE on the databases) and gets CREATE on public only here
CREATE SCHEMA app AUTHORIZATION app_owner;
SELECT bool_and(success) AS schemas_on_workers FROM shardext_run_on_nodes(
	'CREATE SCHEMA app AUTHORIZATION app_owner');
GRANT CREATE ON SCHEMA public TO app_owner;
RESET client_min_messages;

SET ROLE app_owner;
SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user;
SET search_path TO app, public;

-- create_distributed_table and create_reference_table of one's own tables
CREATE TABLE accounts (id bigint PRIMARY KEY, owner_name text, balance numeric DEFAULT 0);
INSERT INTO accounts SELECT g, 'user ' || g, g * 10 FROM generate_series(1, 20) g;
SELECT create_distributed_table('accounts', 'id', shard_count => 4);
CREATE TABLE currencies (code text PRIMARY KEY, name text);
INSERT INTO currencies VALUES ('EUR', 'euro'), ('USD', 'dollar');
SELECT create_reference_table('currencies');
SELECT logicalrelid, method, shards FROM shardext.tables
WHERE logicalrelid::text IN ('accounts', 'currencies') ORDER BY 1;
SELECT count(*) AS rows, sum(balance) AS total FROM accounts;
SELECT shardext_shard_for_value('accounts', '7') = shard_id AS shard_of_7
FROM shardext.shards WHERE logicalrelid = 'accounts'::regclass
  AND hashint8(7) BETWEEN hash_min AND hash_max;

-- the shards on the workers belong to the owner
RESET ROLE;
SELECT DISTINCT result AS shard_owner FROM shardext_run_on_shards('app.accounts',
	$$SELECT relowner::regrole FROM pg_class WHERE oid = '%s'::regclass$$);
SET ROLE app_owner;
SET search_path TO app, public;

-- the caller's search_path takes no part in the catalog writes: a nextval()
-- of the owner's does not hand out the shard ids
CREATE FUNCTION app.nextval(regclass) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
SET search_path TO app, pg_catalog, public;
CREATE TABLE ledger (account_id bigint, amount numeric, note text);
SELECT create_distributed_table('ledger', 'account_id', colocate_with => 'accounts');
SELECT count(*) AS ledger_shards, bool_and(shard_id > 1) AS real_shard_ids
FROM shardext.shards WHERE logicalrelid = 'ledger'::regclass;
DROP FUNCTION app.nextval(regclass);
SET search_path TO app, public;

-- DML, COPY in and out
INSERT INTO ledger SELECT id, 5, 'opening' FROM accounts;
UPDATE accounts SET balance = balance + 5 WHERE id = 3;
DELETE FROM ledger WHERE account_id = 20;
COPY ledger (account_id, amount, note) FROM STDIN WITH (FORMAT csv);
1,2.5,copied
2,3.5,copied
\.
SELECT count(*) AS ledger_rows, sum(amount) AS ledger_total FROM ledger;
COPY (SELECT account_id, amount FROM ledger WHERE note = 'copied' ORDER BY 1) TO STDOUT;
COPY currencies FROM STDIN;
GBP	pound
\.
SELECT string_agg(code, ',' ORDER BY code) AS codes FROM currencies;

-- DDL on one's own distributed and reference tables
ALTER TABLE accounts ADD COLUMN opened date DEFAULT '2024-01-01';
ALTER TABLE ledger ADD COLUMN currency text REFERENCES currencies (code);
CREATE INDEX ledger_note_idx ON ledger (note);
ALTER TABLE accounts RENAME COLUMN owner_name TO holder;
COMMENT ON TABLE accounts IS 'accounts of app';
GRANT SELECT ON accounts TO app_other;
-- (privileges on schemas are not propagated: the owner's schema is granted
-- on every node by hand)
GRANT USAGE ON SCHEMA app TO app_other, app_admin;
RESET ROLE;
SELECT bool_and(success) AS schema_granted_on_workers FROM shardext_run_on_nodes(
	'GRANT USAGE ON SCHEMA app TO app_other, app_admin');
SELECT DISTINCT result AS ledger_shard_indexes FROM shardext_run_on_shards('app.ledger',
	$$SELECT count(*) FROM pg_index WHERE indrelid = '%s'::regclass$$);
SET ROLE app_owner;
SET search_path TO app, public;
DROP INDEX ledger_note_idx;
RESET ROLE;
SELECT DISTINCT result AS shard_columns FROM shardext_run_on_shards('app.accounts',
	$$SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
	  WHERE attrelid = '%s'::regclass AND attnum > 0 AND NOT attisdropped$$);
SELECT DISTINCT result AS shard_comment FROM shardext_run_on_shards('app.accounts',
	$$SELECT obj_description('%s'::regclass, 'pg_class')$$);
SELECT DISTINCT result AS shard_grants FROM shardext_run_on_shards('app.accounts',
	$$SELECT has_table_privilege('app_other', '%s', 'SELECT')$$);
SELECT DISTINCT result AS ledger_shard_indexes_after_drop FROM shardext_run_on_shards('app.ledger',
	$$SELECT count(*) FROM pg_index WHERE indrelid = '%s'::regclass$$);
SET ROLE app_owner;
SET search_path TO app, public;
TRUNCATE ledger;
SELECT count(*) AS ledger_after_truncate FROM ledger;

-- someone else may read what was granted, and nothing more
SET ROLE app_other;
SET search_path TO app, public;
SELECT count(*) AS readable FROM accounts;
SELECT count(*) FROM ledger;
INSERT INTO accounts (id) VALUES (100);
SELECT create_distributed_table('app.currencies', 'code');
SELECT undistribute_table('app.accounts');
DROP TABLE app.ledger;
ALTER TABLE app.accounts ADD COLUMN stolen int;
CREATE TABLE app.mine (id int);
-- the catalog is read-only to everyone but the extension's owner
INSERT INTO shardext.node (host, port) VALUES ('10.0.0.1', 5432);
DELETE FROM shardext.dist_table;
UPDATE shardext.placement SET nodeid = nodeid;
-- administration is for superusers and shardext_admin
SELECT shardext_add_node('127.0.0.1', 1);
SELECT shardext_set_node_weight('127.0.0.1', 1, 1);
SELECT shardext_run_on_nodes('SELECT 1');
SELECT shardext_run_on_shards('app.accounts', 'SELECT 1');
SELECT shardext_move_shard(1, 1);
SELECT shardext_split_shard(1);
SELECT shardext_rebalance();
SELECT shardext_drain_node('127.0.0.1', 1);
SELECT shardext_cleanup();
SELECT shardext_cancel_rebalance();
SELECT shardext_recover_prepared_transactions();
SELECT shardext.move_commit_placements(1);
SELECT shardext.worker_register('x', 1);

-- a member of shardext_admin administers without being a superuser
SET ROLE app_admin;
SELECT rolsuper FROM pg_roles WHERE rolname = current_user;
SELECT shardext_set_node_weight(node_host, node_port, weight) FROM shardext.nodes
ORDER BY node_id LIMIT 1;
SELECT node_id > 0 AS worker, success, result FROM shardext_run_on_nodes('SELECT current_user')
ORDER BY node_id;
SELECT count(*) > 0 AS ran_on_shards FROM shardext_run_on_shards('app.accounts', 'SELECT 1');
SELECT shardext_cleanup() >= 0 AS cleaned;
SELECT shardext_cancel_rebalance();
SELECT count(*) >= 0 AS planned FROM shardext_rebalance_plan();
-- but not a table owner: tables are their owners'
SELECT undistribute_table('app.accounts');

-- the owner undistributes and drops
SET ROLE app_owner;
SET search_path TO app, public;
INSERT INTO ledger VALUES (7, 1.5, 'back', 'EUR');
ALTER TABLE ledger DROP COLUMN currency;
SELECT undistribute_table('ledger');
SELECT count(*) AS still_distributed FROM shardext.dist_table WHERE logicalrelid = 'ledger'::regclass;
SELECT * FROM ledger;
SELECT create_distributed_table('ledger', 'account_id', colocate_with => 'accounts');
SELECT undistribute_table('currencies');
SELECT string_agg(code, ',' ORDER BY code) AS codes_back FROM currencies;
DROP TABLE ledger;
DROP TABLE accounts;
-- in public too, with CREATE granted there on every node
CREATE TABLE public.app_events (id int, payload text);
SELECT create_distributed_table('public.app_events', 'id', shard_count => 2);
SELECT count(*) AS nothing_recorded FROM shardext.dist_table
WHERE logicalrelid = 'public.app_events'::regclass;
RESET ROLE;
SELECT bool_and(success) AS granted_on_workers FROM shardext_run_on_nodes(
	'GRANT CREATE ON SCHEMA public TO app_owner');
SET ROLE app_owner;
SELECT create_distributed_table('public.app_events', 'id', shard_count => 2);
INSERT INTO public.app_events VALUES (1, 'one'), (2, 'two');
SELECT count(*) AS events FROM public.app_events;
-- a shard that an administrator moves stays its table's owner's
RESET ROLE;
SET client_min_messages TO warning;
SELECT shardext_move_shard(s.shard_id, (SELECT n.node_id FROM shardext.nodes n
	WHERE n.node_id <> s.node_id ORDER BY n.node_id LIMIT 1)) IS NOT NULL AS moved
FROM shardext.shards s WHERE logicalrelid = 'public.app_events'::regclass
ORDER BY shard_id LIMIT 1;
RESET client_min_messages;
SET ROLE app_owner;
SELECT count(*) AS events_after_move FROM public.app_events;
INSERT INTO public.app_events VALUES (3, 'three'), (4, 'four');
DROP TABLE public.app_events, currencies;
RESET ROLE;
SELECT count(*) AS catalog_rows_left FROM shardext.dist_table d
WHERE d.logicalrelid::text ~ '^(app\.|app_events)';
SELECT node_id > 0 AS worker, result AS shards_left FROM shardext_run_on_nodes(
	$$SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	  WHERE (n.nspname = 'app' OR c.relname LIKE 'app_events%') AND c.relkind = 'r'$$)
ORDER BY node_id;

-- clean up the roles everywhere
SET client_min_messages TO warning;
DROP SCHEMA app CASCADE;
REVOKE CREATE ON SCHEMA public FROM app_owner;
DROP ROLE app_owner, app_other, app_admin;
SELECT node_id > 0 AS worker, success FROM shardext_run_on_nodes($cmd$
	DO $d$ BEGIN
	  DROP SCHEMA app CASCADE; REVOKE CREATE ON SCHEMA public FROM app_owner;
	  DROP ROLE app_owner, app_other, app_admin;
	END $d$ $cmd$) ORDER BY node_id;
RESET client_min_messages;
