--
-- hot_tenants: per-tenant statistics (shardext.stat_tenants), isolating a
-- tenant in a shard of its own, the by_load rebalance plan and the hot
-- shard report.  In a database of its own, so that its statistics and
-- plans see only its tables.
--
\getenv worker_1_port WORKER_1_PORT
\getenv worker_2_port WORKER_2_PORT
\getenv coordinator_port COORDINATOR_PORT
\c regression - - :worker_1_port
SET client_min_messages TO warning;
DROP DATABASE IF EXISTS hot_tenants WITH (FORCE);
\c regression - - :worker_2_port
SET client_min_messages TO warning;
DROP DATABASE IF EXISTS hot_tenants WITH (FORCE);
\c regression - - :coordinator_port
SET client_min_messages TO warning;
DROP DATABASE IF EXISTS hot_tenants WITH (FORCE);
RESET client_min_messages;
CREATE DATABASE hot_tenants;
\c hot_tenants
SET client_min_messages TO warning;
CREATE EXTENSION shardext;
SELECT shardext_add_node('127.0.0.1', :worker_1_port) AS worker_1_id \gset
SELECT shardext_add_node('127.0.0.1', :worker_2_port) AS worker_2_id \gset
RESET client_min_messages;

-- a multi-tenant table and a co-located one, 4 shards
CREATE TABLE accounts (tenant_id int, id int, balance int, PRIMARY KEY (tenant_id, id));
CREATE TABLE events (tenant_id int, id int, what text);
SET client_min_messages TO warning;
SELECT create_distributed_table('accounts', 'tenant_id', shard_count => 4);
SELECT create_distributed_table('events', 'tenant_id', colocate_with => 'accounts');
RESET client_min_messages;
INSERT INTO accounts SELECT g % 20, g, 100 FROM generate_series(1, 400) g;
INSERT INTO events SELECT g % 20, g, 'e' || g FROM generate_series(1, 200) g;

-- Periods of shardext.stat_tenants end every shardext.stat_tenants_period
-- (60 s) counted from the server's start, for all databases alike (a reset
-- does not start one): a test that reads the counts of the current period
-- must not have its statements split by the end of one.  fresh_tenant_period
-- waits, where less than 15 s of the current period are left, for the next
-- one, then forgets this database's tenants.
CREATE FUNCTION pg_temp.fresh_tenant_period() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	period interval := current_setting('shardext.stat_tenants_period')::interval;
	started timestamptz;
BEGIN
	-- a counted statement: the counters show when the period started
	PERFORM count(*) FROM accounts WHERE tenant_id = 19;
	LOOP
		SELECT max(period_start) INTO started FROM shardext.stat_tenants_counters();
		IF started IS NULL THEN
			RAISE EXCEPTION 'no tenant counted (is shardext.stat_tenants_sample_rate 1?)';
		END IF;
		EXIT WHEN started + period - clock_timestamp() >= least(interval '15 s', period / 4);
		PERFORM pg_sleep(0.1);
	END LOOP;
	PERFORM shardext_stat_tenants_reset();
END $$;

-- only single-shard statements count, each for its tenant
SET shardext.stat_tenants_sample_rate = 1;
SELECT pg_temp.fresh_tenant_period();
SELECT count(*) FROM accounts WHERE tenant_id = 5;
SELECT count(*) FROM accounts WHERE tenant_id = 5 AND id > 100;
SELECT sum(balance) FROM accounts a JOIN events e USING (tenant_id, id) WHERE a.tenant_id = 5;
UPDATE accounts SET balance = balance + 1 WHERE tenant_id = 5 AND id = 5;
DELETE FROM events WHERE tenant_id = 5 AND id = 5;
SELECT balance FROM accounts WHERE tenant_id = 6 AND id = 6 FOR UPDATE;
INSERT INTO events VALUES (6, 1000, 'one'), (6, 1001, 'two');	-- one tenant: counts
INSERT INTO events VALUES (7, 1002, 'a'), (8, 1003, 'b');		-- two tenants: does not
SELECT count(*) FROM accounts;										-- every shard: does not
SELECT count(*) FROM accounts WHERE tenant_id IN (9, 10);			-- two values: does not
SELECT table_name, tenant_value,
	   read_count + prev_read_count AS reads, write_count + prev_write_count AS writes,
	   count_error + prev_count_error AS error,
	   shard_id = shardext_shard_for_value(table_name, tenant_value) AS right_shard,
	   node_id IS NOT NULL AS has_node, elapsed_ms + prev_elapsed_ms > 0 AS timed
FROM shardext.stat_tenants ORDER BY statements + prev_statements DESC, tenant_value;
-- shares are of the single-shard statements of the period
SELECT tenant_value, coalesce(share_percent, prev_share_percent) AS share
FROM shardext.stat_tenants ORDER BY 2 DESC, 1;

-- sampled (the default is 0.1): nothing counted at rate 0; shardext_stat_tenants_reset() forgets
SET shardext.stat_tenants_sample_rate = 0;
SELECT count(*) FROM accounts WHERE tenant_id = 11;
SELECT count(*) FROM shardext.stat_tenants WHERE tenant_value = '11';
SET shardext.stat_tenants_sample_rate = 1;
SELECT shardext_stat_tenants_reset();
SELECT count(*) FROM shardext.stat_tenants;

-- text values are kept, cut to 63 bytes at a character boundary
CREATE TABLE docs (owner text, body text);
SET client_min_messages TO warning;
SELECT create_distributed_table('docs', 'owner', shard_count => 2);
RESET client_min_messages;
SELECT count(*) FROM docs WHERE owner = 'O''Brien & "Sons"';
SELECT count(*) FROM docs WHERE owner = repeat('é', 40);
SELECT tenant_value, octet_length(tenant_value) AS bytes FROM shardext.stat_tenants
WHERE table_name = 'docs'::regclass ORDER BY 1;

-- isolating tenant 5: its hash value gets a shard of its own, in both tables
SELECT hash_min, hash_max FROM shardext.shards
WHERE shard_id = shardext_shard_for_value('accounts', '5') \gset old_
SET client_min_messages TO warning;
SELECT shardext_isolate_tenant('accounts', '5') AS isolated \gset
RESET client_min_messages;
SELECT :isolated = shardext_shard_for_value('accounts', '5') AS holds_tenant;
SELECT logicalrelid, hash_min = hash_max AS isolated,
	   hash_min = :old_hash_min OR hash_max = :old_hash_max AS at_old_edge
FROM shardext.shards
WHERE method = 'hash' AND logicalrelid IN ('accounts'::regclass, 'events'::regclass)
  AND hash_min BETWEEN :old_hash_min AND :old_hash_max
ORDER BY logicalrelid, hash_min;
SELECT shard_count FROM shardext.colocation c JOIN shardext.dist_table d USING (colocationid)
WHERE d.logicalrelid = 'accounts'::regclass;
SELECT count(*), sum(balance) FROM accounts;
SELECT count(*) FROM events;
SELECT count(*), sum(balance) FROM accounts WHERE tenant_id = 5;
SELECT count(*) FROM events WHERE tenant_id = 5;
-- only the isolated shard holds the tenant's rows
SELECT count(*) FROM shardext_run_on_shards('accounts',
	'SELECT count(*) FROM %s WHERE tenant_id = 5') r WHERE r.result <> '0';
-- already alone: a notice, the same shard
SELECT shardext_isolate_tenant('accounts', '5') = :isolated AS same_shard;
-- the isolated tenant moves to the other node when asked
SELECT node_id AS isolated_node FROM shardext.shards WHERE shard_id = :isolated \gset
SELECT CASE WHEN :isolated_node = :worker_1_id THEN :worker_2_id ELSE :worker_1_id END
	AS other_node \gset
SET client_min_messages TO warning;
SELECT shardext_isolate_tenant('accounts', '5', :other_node, 'block_writes') = :isolated
	AS same_shard;
RESET client_min_messages;
SELECT node_id = :other_node AS moved FROM shardext.shards WHERE shard_id = :isolated;
SELECT count(*), sum(balance) FROM accounts WHERE tenant_id = 5;
-- a value at the edge of its range: no empty piece
SELECT shardext_isolate_tenant('accounts', '5') = :isolated AS same_shard;
SELECT count(*) FROM shardext.shards WHERE hash_min > hash_max;

CREATE TABLE plain (id int);
CREATE TABLE lookup (id int PRIMARY KEY);
SET client_min_messages TO warning;
SELECT create_reference_table('lookup');
RESET client_min_messages;
-- bad input: nothing changes
SELECT count(*) AS shards_before FROM shardext.shards \gset
SELECT shardext_isolate_tenant('accounts', 'five');
SELECT shardext_isolate_tenant('accounts', '99999999999');
SELECT shardext_isolate_tenant('accounts', NULL);
SELECT shardext_isolate_tenant('accounts', '6', 999);
SELECT shardext_isolate_tenant('accounts', '6', NULL, 'quick');
SELECT shardext_isolate_tenant('plain', '1');
SELECT shardext_isolate_tenant('lookup', '1');
BEGIN;
SELECT shardext_isolate_tenant('accounts', '6');
ROLLBACK;
CREATE ROLE hot_tenants_other;
SET ROLE hot_tenants_other;
SELECT shardext_isolate_tenant('accounts', '6');
RESET ROLE;
DROP ROLE hot_tenants_other;
SELECT count(*) = :shards_before AS unchanged FROM shardext.shards;

-- by_load: statements since shardext_stat_shards_reset(), per shard group;
-- the isolated tenant's group stays where it is
SELECT shardext_stat_shards_reset();
SELECT count(*) FROM accounts WHERE tenant_id = 5;
SELECT count(*) FROM accounts WHERE tenant_id = 1;
SELECT count(*) FROM accounts WHERE tenant_id = 1;
SELECT count(*) FROM accounts WHERE tenant_id = 2;
SELECT count(*) FROM accounts WHERE tenant_id = 2;
SELECT count(*) FROM accounts WHERE tenant_id = 3;
SELECT count(*) FROM accounts WHERE tenant_id = 3;
SELECT count(*) FROM accounts WHERE tenant_id = 4;
SELECT count(*) FROM accounts WHERE tenant_id = 4;
SELECT bool_and(source_load_after < source_load_before) AS source_lighter,
	   bool_and(target_load_after > target_load_before) AS target_heavier,
	   bool_and(target_load_after <= source_load_before) AS no_overshoot,
	   bool_and(shard_id <> :isolated) AS isolated_stays
FROM shardext_rebalance_plan('by_load');
SET shardext.rebalance_isolated_tenants = on;
SELECT count(*) >= 0 AS plans FROM shardext_rebalance_plan('by_load');
RESET shardext.rebalance_isolated_tenants;
-- the other strategies say how many groups or bytes a move shifts
SELECT bool_and(shard_group_load = 1) AS one_group_each
FROM shardext_rebalance_plan('by_shard_count');
SELECT bool_and(shard_group_load = shard_group_bytes) AS bytes
FROM shardext_rebalance_plan('by_disk_size');
SELECT shardext_rebalance_plan('by_weather');

-- the hot shard report: every node, then the busiest shards and tenants
-- (of the current period: counted anew)
SELECT pg_temp.fresh_tenant_period();
SELECT count(*) FROM accounts WHERE tenant_id = 5;
SELECT count(*) FROM accounts WHERE tenant_id = 5;
SELECT count(*) FROM accounts WHERE tenant_id = 5;
SELECT count(*) FROM accounts WHERE tenant_id = 5;
SELECT count(*) FROM accounts WHERE tenant_id = 1;
SELECT count(*) FROM accounts WHERE tenant_id = 1;
SELECT count(*) FROM accounts WHERE tenant_id = 2;
SELECT kind, count(*), sum(share_percent) FILTER (WHERE kind = 'node') AS total_share,
	   sum(weight_share_percent) AS weight_share
FROM shardext_hot_shard_report(3) GROUP BY kind ORDER BY kind;
SELECT rank, tenant_value, statements FROM shardext_hot_shard_report(2)
WHERE kind = 'tenant' ORDER BY rank;

\c regression - - :coordinator_port
SET client_min_messages TO warning;
DROP DATABASE hot_tenants WITH (FORCE);
