--
-- connection_pool: the settings of the connections to the nodes, the shared
-- per-node connection count, and shardext.node_conninfo's checks.
--

-- defaults
SHOW shardext.max_shared_pool_size;
SHOW shardext.connection_wait_timeout;
SHOW shardext.max_cached_connections_per_node;
SHOW shardext.connection_lifetime;
SHOW shardext.connection_share_interval;
SHOW shardext.max_connections_per_node;
SHOW shardext.executor_slow_start_interval;

CREATE TABLE pool_t (id int PRIMARY KEY, v int);
SELECT create_distributed_table('pool_t', 'id', shard_count => 8);
INSERT INTO pool_t SELECT g, g FROM generate_series(1, 1000) g;

-- slow start, seen inside a transaction block (the connections of a read
-- stay until the block ends): more connections per node only after the
-- node's tasks have waited for the interval
BEGIN;
SET LOCAL shardext.executor_slow_start_interval = '10s';
SELECT count(*) FROM pool_t;
SELECT max(session_connections) AS one_per_node FROM shardext.connection_stats
WHERE node_port IN (SELECT node_port FROM shardext.nodes);
COMMIT;
BEGIN;
SET LOCAL shardext.executor_slow_start_interval = 0;
SELECT count(*) FROM pool_t;
SELECT max(session_connections) > 1 AS more_than_one FROM shardext.connection_stats
WHERE node_port IN (SELECT node_port FROM shardext.nodes);
COMMIT;

-- the session keeps those connections while the node's pool can spare
-- them (it is nearly empty here) ...
SELECT node_id IS NOT NULL AS registered, session_connections > 1 AS kept_more_than_one,
	   connections >= 1 AS counted, max_connections > 0 AS limited, wait_timeouts
FROM shardext.connection_stats
WHERE node_port IN (SELECT node_port FROM shardext.nodes)
ORDER BY node_id;
-- ... and the next multi-shard statement takes them at once, without slow start
BEGIN;
SET LOCAL shardext.executor_slow_start_interval = '10s';
SELECT count(*) FROM pool_t;
SELECT max(session_connections) > 1 AS more_than_one FROM shardext.connection_stats
WHERE node_port IN (SELECT node_port FROM shardext.nodes);
COMMIT;

-- without cached connections, none is counted once the transaction ends
SET shardext.max_cached_connections_per_node = 0;
SELECT count(*) FROM pool_t WHERE id = 7;
SELECT sum(session_connections) FROM shardext.connection_stats
WHERE node_port IN (SELECT node_port FROM shardext.nodes);
RESET shardext.max_cached_connections_per_node;

-- inside a transaction, the connections stay until its end
BEGIN;
SET LOCAL shardext.max_cached_connections_per_node = 0;
UPDATE pool_t SET v = v + 1 WHERE id = 7;
SELECT sum(session_connections) AS held FROM shardext.connection_stats
WHERE node_port IN (SELECT node_port FROM shardext.nodes);
COMMIT;

-- a pool of one connection per node: statements run their tasks over it
ALTER SYSTEM SET shardext.max_shared_pool_size = 1;
SELECT pg_reload_conf();
SELECT pg_sleep(0.2);
SHOW shardext.max_shared_pool_size;
SELECT count(*), sum(v) FROM pool_t;
SELECT max_connections, session_connections FROM shardext.connection_stats
WHERE node_port IN (SELECT node_port FROM shardext.nodes) ORDER BY node_id;
-- a pool of 4 per node: a statement may take all of them, but between
-- transactions the session keeps no more than half of the pool
ALTER SYSTEM SET shardext.max_shared_pool_size = 4;
SELECT pg_reload_conf();
SELECT pg_sleep(0.2);
SHOW shardext.max_shared_pool_size;
SET shardext.executor_slow_start_interval = 0;
SELECT count(*), sum(v) FROM pool_t;
RESET shardext.executor_slow_start_interval;
SELECT max_connections, session_connections BETWEEN 1 AND max_connections / 2 AS at_most_half
FROM shardext.connection_stats
WHERE node_port IN (SELECT node_port FROM shardext.nodes) ORDER BY node_id;
ALTER SYSTEM RESET shardext.max_shared_pool_size;
SELECT pg_reload_conf();
-- (wait until the server read the file again: later tests change it)
SELECT pg_sleep(0.2);

-- ordinary users may not change what bounds everybody's connections
CREATE ROLE pool_user;
SET ROLE pool_user;
SET shardext.max_connections_per_node = 8;
SET shardext.max_cached_connections_per_node = 8;
SET shardext.connection_wait_timeout = '5s';
SELECT count(*) FROM shardext.connection_stats WHERE node_port IN (SELECT node_port FROM shardext.nodes);
RESET ROLE;
SET shardext.max_connections_per_node = 65;
SET shardext.max_connections_per_node = 0;
SET shardext.max_shared_pool_size = 10;

-- shardext.node_conninfo: security and network options only, checked when set
ALTER SYSTEM SET shardext.node_conninfo = 'user=bob';
ALTER SYSTEM SET shardext.node_conninfo = 'dbname=other';
ALTER SYSTEM SET shardext.node_conninfo = 'options=''-c work_mem=1GB''';
ALTER SYSTEM SET shardext.node_conninfo = 'replication=database';
ALTER SYSTEM SET shardext.node_conninfo = 'password=secret';
ALTER SYSTEM SET shardext.node_conninfo = 'host=10.0.0.9';
ALTER SYSTEM SET shardext.node_conninfo = 'application_name=x';
ALTER SYSTEM SET shardext.node_conninfo = 'service=prod';
ALTER SYSTEM SET shardext.node_conninfo = 'sslmode=require no_such_option=1';
ALTER SYSTEM SET shardext.node_conninfo = 'sslmode';
ALTER SYSTEM SET shardext.node_conninfo = 'sslmode=require keepalives=1 keepalives_idle=30 keepalives_interval=10 keepalives_count=3 tcp_user_timeout=60000 connect_timeout=10 gssencmode=disable target_session_attrs=any sslcompression=0';
ALTER SYSTEM RESET shardext.node_conninfo;
SET shardext.node_conninfo = 'sslmode=require';

DROP TABLE pool_t;
DROP ROLE pool_user;
