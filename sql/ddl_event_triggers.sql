--
-- ddl_event_triggers: while DDL on distributed tables runs (locally, then on
-- the shards), queries that event triggers and functions run see the
-- distributed tables as they are, not the coordinator's empty shells; and
-- plans cached meanwhile keep doing so.
--
CREATE TABLE ddl_target (id int PRIMARY KEY, v text);
INSERT INTO ddl_target SELECT g, 'v' || g FROM generate_series(1, 25) g;
SELECT create_distributed_table('ddl_target', 'id', shard_count => 4);
CREATE TABLE ddl_log (id bigserial, tag text, target_rows bigint, at_phase text);
SELECT create_distributed_table('ddl_log', 'id', shard_count => 2);

-- event triggers that read one distributed table and write another
CREATE FUNCTION log_ddl_end() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO ddl_log (tag, target_rows, at_phase)
	SELECT tg_tag, count(*), 'end' FROM ddl_target;
END $$;
CREATE FUNCTION log_ddl_start() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE
	n bigint := (SELECT count(*) FROM ddl_target);
BEGIN
	INSERT INTO ddl_log (tag, target_rows, at_phase) VALUES (tg_tag, n, 'start');
END $$;
CREATE EVENT TRIGGER ddl_end_log ON ddl_command_end
	WHEN TAG IN ('ALTER TABLE', 'CREATE INDEX') EXECUTE FUNCTION log_ddl_end();
CREATE EVENT TRIGGER ddl_start_log ON ddl_command_start
	WHEN TAG IN ('ALTER TABLE') EXECUTE FUNCTION log_ddl_start();

ALTER TABLE ddl_target ADD COLUMN extra int DEFAULT 7;
CREATE INDEX ddl_target_v_idx ON ddl_target (v);
INSERT INTO ddl_target (id, v) VALUES (26, 'v26');
ALTER TABLE ddl_target ALTER COLUMN extra SET DEFAULT 8;
-- every trigger saw the real row count, and its rows are in ddl_log's shards
SELECT tag, at_phase, target_rows FROM ddl_log ORDER BY id;
SELECT sum(result::int) AS log_rows_in_shards
FROM shardext_run_on_shards('ddl_log', 'SELECT count(*) FROM %s');
-- the shards got the DDL too
SELECT DISTINCT result AS shard_default FROM shardext_run_on_shards('ddl_target',
	$$SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef
	  WHERE adrelid = '%s'::regclass AND adnum = 3$$);

-- a plan the trigger's function cached during the DDL keeps reading the
-- shards afterwards
CREATE FUNCTION count_target() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
	RETURN (SELECT count(*) FROM ddl_target);
END $$;
CREATE FUNCTION log_with_count() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO ddl_log (tag, target_rows, at_phase) VALUES (tg_tag, count_target(), 'cached');
END $$;
CREATE EVENT TRIGGER ddl_cached_log ON ddl_command_end
	WHEN TAG IN ('COMMENT') EXECUTE FUNCTION log_with_count();
COMMENT ON TABLE ddl_target IS 'target';
SELECT count_target() AS after_ddl;
INSERT INTO ddl_target (id, v) VALUES (27, 'v27');
SELECT count_target() AS after_insert;
SELECT target_rows FROM ddl_log WHERE at_phase = 'cached';
DROP EVENT TRIGGER ddl_end_log;
DROP EVENT TRIGGER ddl_start_log;
DROP EVENT TRIGGER ddl_cached_log;

-- foreign keys that ALTER TABLE adds are validated by the shards
CREATE TABLE ddl_kinds (code text PRIMARY KEY);
INSERT INTO ddl_kinds VALUES ('v1'), ('v2');
SELECT create_reference_table('ddl_kinds');
ALTER TABLE ddl_target ADD CONSTRAINT ddl_target_v_fk FOREIGN KEY (v) REFERENCES ddl_kinds (code);
SELECT count(*) AS fk_added FROM pg_constraint WHERE conname = 'ddl_target_v_fk';
INSERT INTO ddl_kinds SELECT 'v' || g FROM generate_series(3, 27) g;
ALTER TABLE ddl_target ADD CONSTRAINT ddl_target_v_fk FOREIGN KEY (v) REFERENCES ddl_kinds (code);
SELECT convalidated FROM pg_constraint WHERE conname = 'ddl_target_v_fk';
SELECT DISTINCT result AS shard_fk_valid FROM shardext_run_on_shards('ddl_target',
	$$SELECT convalidated FROM pg_constraint WHERE conrelid = '%s'::regclass AND contype = 'f'$$);
INSERT INTO ddl_target (id, v) VALUES (28, 'nope');
-- NOT VALID, then VALIDATE: the check runs over the distributed tables
ALTER TABLE ddl_target DROP CONSTRAINT ddl_target_v_fk;
DELETE FROM ddl_kinds WHERE code = 'v27';
ALTER TABLE ddl_target ADD CONSTRAINT ddl_target_v_fk FOREIGN KEY (v) REFERENCES ddl_kinds (code)
	NOT VALID;
ALTER TABLE ddl_target VALIDATE CONSTRAINT ddl_target_v_fk;
INSERT INTO ddl_kinds VALUES ('v27');
ALTER TABLE ddl_target VALIDATE CONSTRAINT ddl_target_v_fk;
SELECT convalidated FROM pg_constraint WHERE conname = 'ddl_target_v_fk';
SELECT DISTINCT result AS shard_fk_valid FROM shardext_run_on_shards('ddl_target',
	$$SELECT convalidated FROM pg_constraint WHERE conrelid = '%s'::regclass AND contype = 'f'$$);

DROP TABLE ddl_target, ddl_log, ddl_kinds;
DROP FUNCTION log_ddl_end(), log_ddl_start(), log_with_count(), count_target();
