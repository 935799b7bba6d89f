--
-- distribute_bad_input: every invalid request fails with a clear error
-- and leaves the table, the catalog and the workers as they were
--
CREATE TABLE bad_input (id int PRIMARY KEY, pos point, v text);
INSERT INTO bad_input VALUES (1, '(0,0)', 'a'), (2, '(1,1)', 'b');

-- unknown table and column, NULL arguments
SELECT create_distributed_table('no_such_table', 'id');
SELECT create_distributed_table('bad_input', 'no_such_column');
SELECT create_distributed_table('bad_input', 'ID');
SELECT create_distributed_table('bad_input', NULL);
SELECT create_distributed_table(NULL, 'id');
SELECT create_distributed_table('bad_input', 'ctid');
-- a column type without a hash operator class
SELECT create_distributed_table('bad_input', 'pos');
-- unsupported distribution type and shard counts
SELECT create_distributed_table('bad_input', 'id', 'range');
SELECT create_distributed_table('bad_input', 'id', 'append');
SELECT create_distributed_table('bad_input', 'id', shard_count => 0);
SELECT create_distributed_table('bad_input', 'id', shard_count => 100000);
-- a primary key / unique index without the distribution column
SELECT create_distributed_table('bad_input', 'v');
CREATE UNIQUE INDEX bad_input_v ON bad_input (v);
SELECT create_distributed_table('bad_input', 'id');
DROP INDEX bad_input_v;

-- relation kinds and features that cannot be distributed
CREATE TABLE parted (id int) PARTITION BY HASH (id);
SELECT create_distributed_table('parted', 'id');
CREATE VIEW a_view AS SELECT 1 AS id;
SELECT create_distributed_table('a_view', 'id');
CREATE FOREIGN DATA WRAPPER dummy_fdw;
CREATE SERVER dummy_server FOREIGN DATA WRAPPER dummy_fdw;
CREATE FOREIGN TABLE a_foreign_table (id int) SERVER dummy_server;
SELECT create_distributed_table('a_foreign_table', 'id');
CREATE TEMP TABLE a_temp_table (id int);
SELECT create_distributed_table('a_temp_table', 'id');
CREATE TABLE parent_t (id int);
CREATE TABLE child_t () INHERITS (parent_t);
SELECT create_distributed_table('parent_t', 'id');
SELECT create_distributed_table('child_t', 'id');
CREATE TABLE fk_target (id int PRIMARY KEY);
CREATE TABLE fk_source (id int REFERENCES fk_target);
SELECT create_distributed_table('fk_source', 'id');
SELECT create_distributed_table('fk_target', 'id');
SELECT create_distributed_table('shardext.node', 'nodeid');
-- already distributed
SELECT create_distributed_table('orders', 'merchant_id');
-- only the owner may distribute a table
CREATE ROLE not_the_owner;
GRANT SELECT ON bad_input TO not_the_owner;
SET ROLE not_the_owner;
SELECT create_distributed_table('bad_input', 'id');
RESET ROLE;
REVOKE ALL ON bad_input FROM not_the_owner;
DROP ROLE not_the_owner;
-- rows with NULL in the distribution column have no shard
CREATE TABLE null_keys (id int, k int);
INSERT INTO null_keys VALUES (1, 1), (2, NULL);
SELECT create_distributed_table('null_keys', 'k');

-- nothing was recorded, nothing was created on the workers, no row was lost
SELECT count(*) AS catalog_rows FROM shardext.dist_table
WHERE logicalrelid::text IN ('bad_input', 'parted', 'a_foreign_table', 'parent_t', 'child_t',
							 'fk_source', 'fk_target', 'null_keys');
SELECT node_id, result AS leftover_shard_tables FROM shardext_run_on_nodes(
	$$SELECT count(*) FROM pg_class WHERE relname ~ '^(bad_input|null_keys|fk_source|parent_t)_[0-9]+$'$$)
ORDER BY node_id;
SELECT count(*) AS rows_kept FROM bad_input;
SELECT count(*) AS rows_kept FROM null_keys;

-- a failure on one worker after another succeeded rolls back both:
-- occupy every shard name the next table could get on worker 2
CREATE TABLE atomic_t (id int);
INSERT INTO atomic_t SELECT generate_series(1, 100);
SELECT last_value AS last_shard FROM shardext.shard_shardid_seq \gset
\getenv worker_2_port WORKER_2_PORT
\getenv coordinator_port COORDINATOR_PORT
\c - - - :worker_2_port
SELECT string_agg(format('CREATE TABLE public.atomic_t_%s (id int)', :last_shard + g), '; ')
FROM generate_series(1, 40) g \gexec
\c - - - :coordinator_port
SELECT create_distributed_table('atomic_t', 'id');
SELECT count(*) AS catalog_rows FROM shardext.dist_table WHERE logicalrelid = 'atomic_t'::regclass;
SELECT count(*) AS rows_kept FROM atomic_t;
SELECT node_id, result AS atomic_t_tables FROM shardext_run_on_nodes(
	$$SELECT count(*) FROM pg_class WHERE relname ~ '^atomic_t_[0-9]+$'$$)
ORDER BY node_id;
-- once the obstacle is gone the same call succeeds
\c - - - :worker_2_port
SELECT string_agg(format('DROP TABLE %s', oid::regclass), '; ')
FROM pg_class WHERE relname ~ '^atomic_t_[0-9]+$' \gexec
\c - - - :coordinator_port
SELECT create_distributed_table('atomic_t', 'id');
SELECT sum(result::int) AS rows_in_shards FROM shardext_run_on_shards('atomic_t', 'SELECT count(*) FROM %s');

-- triggers and row security would not reach the shards: refused
CREATE TABLE with_trigger (id int);
CREATE FUNCTION noop_trigger() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER t BEFORE INSERT ON with_trigger FOR EACH ROW EXECUTE FUNCTION noop_trigger();
SELECT create_distributed_table('with_trigger', 'id');
CREATE TABLE with_rls (id int);
ALTER TABLE with_rls ENABLE ROW LEVEL SECURITY;
SELECT create_distributed_table('with_rls', 'id');
CREATE TRIGGER t BEFORE INSERT ON atomic_t FOR EACH ROW EXECUTE FUNCTION noop_trigger();
CREATE POLICY p ON atomic_t USING (id > 0);
CREATE RULE r AS ON INSERT TO atomic_t DO INSTEAD NOTHING;
DROP TABLE with_trigger, with_rls;
DROP FUNCTION noop_trigger();
