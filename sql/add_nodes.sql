--
-- add_nodes: install the extension and register the workers of the test
-- cluster.  Every later test relies on the two workers registered here.
--
\getenv worker_1_port WORKER_1_PORT
\getenv worker_2_port WORKER_2_PORT
SET client_min_messages TO warning;
CREATE EXTENSION shardext;
RESET client_min_messages;

-- the catalog and views exist and are empty
SELECT count(*) FROM shardext.nodes;
SELECT count(*) FROM shardext.shards;

-- nothing can be distributed without nodes
CREATE TABLE no_nodes (id int);
SELECT create_distributed_table('no_nodes', 'id');
SELECT create_reference_table('no_nodes');
DROP TABLE no_nodes;

-- bad arguments are refused before anything is attempted
SELECT shardext_add_node('127.0.0.1', 0);
SELECT shardext_add_node('127.0.0.1', 70000);
SELECT shardext_add_node('127.0.0.1', :worker_1_port, weight => 0);
SELECT shardext_add_node('127.0.0.1', :worker_1_port, weight => -1);

-- an unreachable node is an error (no server listens on port 1), nothing recorded
SELECT shardext_add_node('127.0.0.1', 1);
SELECT count(*) FROM shardext.node;

-- register both workers; the second gets twice the shards of the first
-- (the notice that the test database is created on each worker names its port)
SET client_min_messages TO warning;
SELECT shardext_add_node('127.0.0.1', :worker_1_port) AS worker_1_id \gset
SELECT shardext_add_node('127.0.0.1', :worker_2_port, weight => 2.0) AS worker_2_id \gset
RESET client_min_messages;
SELECT :worker_1_id > 0 AS has_id, :worker_2_id <> :worker_1_id AS distinct_ids;

-- adding the same node again is harmless and returns the same id
SELECT shardext_add_node('127.0.0.1', :worker_1_port) = :worker_1_id AS same_id;
SELECT count(*) FROM shardext.node;

SELECT node_port = :worker_1_port AS is_worker_1, weight, active, placement_count
FROM shardext.nodes ORDER BY node_id;

-- removing an unknown node is an error; a node without shards can be removed
SELECT shardext_remove_node('127.0.0.1', 1);
SELECT shardext_remove_node('127.0.0.1', :worker_2_port);
SELECT count(*) FROM shardext.node;
SELECT shardext_add_node('127.0.0.1', :worker_2_port, weight => 2.0) AS worker_2_id \gset
SELECT shardext_set_node_weight('127.0.0.1', :worker_2_port, 0);
SELECT node_port = :worker_2_port AS is_worker_2, weight FROM shardext.nodes ORDER BY node_id;

-- the configuration of every node, checked: all is well on the test cluster
SELECT node_id > 0 AS worker, check_name, status, count(*) AS nodes
FROM shardext_check_cluster() GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
-- the library and the installed extension are the same version
SELECT current_setting('shardext.version') = extversion AS same_version,
	   extversion = (SELECT default_version FROM pg_available_extensions
					 WHERE name = 'shardext') AS default_version
FROM pg_extension WHERE extname = 'shardext';

-- only superusers (and members of shardext_admin) manage nodes
CREATE ROLE node_intruder;
SET ROLE node_intruder;
SELECT shardext_add_node('127.0.0.1', :worker_1_port);
SELECT shardext_remove_node('127.0.0.1', :worker_1_port);
RESET ROLE;
DROP ROLE node_intruder;

-- each worker database now has the extension and knows its coordinator
\c - - - :worker_1_port
SELECT extname FROM pg_extension WHERE extname = 'shardext';
SELECT node_id > 0 AS registered FROM shardext.local_identity;
-- a second coordinator cannot take over this worker database
\set VERBOSITY terse
SELECT shardext.worker_register('1234:5', 99);
\set VERBOSITY default
\c - - - :worker_2_port
SELECT count(*) AS registered FROM shardext.local_identity;
