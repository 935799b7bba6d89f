--
-- shard_moves: moving and splitting shard groups, online and with writes
-- blocked; bad input; interrupted moves; cleanup; the rebalancer.
--
-- Queries on distributed tables go through shardext_run_on_shards() here,
-- which reads every placement as the catalog has it.
--
-- It runs in a database of its own, so that drains and rebalances move
-- only its tables.
--
\getenv worker_1_port WORKER_1_PORT
\getenv worker_2_port WORKER_2_PORT
\getenv coordinator_port COORDINATOR_PORT
\set regress_db :DBNAME
-- what an interrupted earlier run may have left
\c :regress_db - - :worker_1_port
SET client_min_messages TO warning;
DROP DATABASE IF EXISTS shard_moves WITH (FORCE);
\c :regress_db - - :worker_2_port
SET client_min_messages TO warning;
DROP DATABASE IF EXISTS shard_moves WITH (FORCE);
\c :regress_db - - :coordinator_port
SET client_min_messages TO warning;
DROP DATABASE IF EXISTS shard_moves WITH (FORCE);
RESET client_min_messages;
CREATE DATABASE shard_moves;
\c shard_moves
SET client_min_messages TO warning;
CREATE EXTENSION shardext;
SELECT shardext_add_node('127.0.0.1', :worker_1_port) AS worker_1_id \gset
SELECT shardext_add_node('127.0.0.1', :worker_2_port, weight => 2) AS worker_2_id \gset
RESET client_min_messages;

CREATE SCHEMA moves;
SET search_path TO moves, public;

-- a table with a primary key and a secondary index, a co-located table
-- without any key, both with rows
CREATE TABLE orders (id bigint PRIMARY KEY, merchant int NOT NULL, note text,
					 CHECK (merchant >= 0));
CREATE INDEX orders_merchant_idx ON orders (merchant);
INSERT INTO orders SELECT g, g % 10, 'order ' || g FROM generate_series(1, 2000) g;
CREATE TABLE order_items (order_id bigint, qty int);
INSERT INTO order_items SELECT g % 2000 + 1, g FROM generate_series(1, 3000) g;
SET client_min_messages TO warning;
SELECT create_distributed_table('orders', 'id', shard_count => 4);
SELECT create_distributed_table('order_items', 'order_id', colocate_with => 'orders');
RESET client_min_messages;

-- rows per table, and an order-independent checksum of all rows
CREATE FUNCTION moves.table_state(t regclass, OUT row_count bigint, OUT checksum bigint)
LANGUAGE sql AS $$
	SELECT sum(split_part(result, ',', 1)::bigint), sum(split_part(result, ',', 2)::bigint)
	FROM shardext_run_on_shards(t, 'SELECT count(*) || '','' || coalesce(sum(hashtext(r::text)), 0) FROM %s r')
$$;
CREATE TABLE moves.before AS
	SELECT 'orders' AS t, * FROM moves.table_state('orders')
	UNION ALL SELECT 'order_items', * FROM moves.table_state('order_items');
SELECT t, row_count FROM moves.before ORDER BY t;

-- the nodes hold no replication objects, no shard tables but the placed ones
CREATE FUNCTION moves.leftovers() RETURNS TABLE (node_port int, leftover text)
LANGUAGE sql AS $$
	SELECT node_port, result FROM shardext_run_on_nodes($q$
		SELECT string_agg(x, ', ' ORDER BY x) FROM (
			SELECT 'slot ' || slot_name FROM pg_replication_slots
				WHERE slot_name LIKE 'shardext%' AND database = current_database()
			UNION ALL SELECT 'publication ' || pubname FROM pg_publication
			UNION ALL SELECT 'subscription ' || subname FROM pg_subscription
				WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())
			UNION ALL SELECT 'marker ' || move_id FROM shardext.move_marker
			UNION ALL SELECT 'marker ' || move_id FROM shardext.move_marker_applied
			UNION ALL SELECT 'identity ' || relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = 'moves' AND c.relkind = 'r' AND c.relreplident <> 'd') s(x)
		$q$) WHERE result IS NOT NULL
	UNION ALL
	SELECT n.node_port, 'unplaced table ' || r.result
	FROM shardext.nodes n,
		 LATERAL shardext_run_on_nodes(
			'SELECT string_agg(relname, '', '' ORDER BY relname) FROM pg_class c '
			'JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = ''moves'' '
			'AND c.relkind = ''r'' AND c.relname NOT IN ('
			|| (SELECT string_agg(quote_literal(split_part(shard_name, '.', 2)), ',')
				FROM shardext.shards WHERE node_port = n.node_port AND shard_name LIKE 'moves.%')
			|| ')') r
	WHERE r.node_id = n.node_id AND r.result IS NOT NULL
$$;
SELECT * FROM moves.leftovers();

SELECT shard_id AS first_shard FROM shardext.shards
WHERE logicalrelid = 'orders'::regclass AND node_port = :worker_1_port
ORDER BY hash_min LIMIT 1 \gset

--
-- bad input: clear errors, nothing changed
--
SELECT shardext_move_shard(1, :worker_2_id);
SELECT shardext_move_shard(:first_shard, 9999);
SELECT shardext_move_shard(:first_shard, :worker_1_id);
SELECT shardext_move_shard(:first_shard, :worker_2_id, 'teleport');
SELECT shardext_move_shard(NULL, :worker_2_id);
SELECT shardext_move_shard(:first_shard, NULL);
BEGIN;
SELECT shardext_move_shard(:first_shard, :worker_2_id);
ROLLBACK;
CREATE TABLE moves.ref (id int PRIMARY KEY);
SELECT create_reference_table('moves.ref');
SELECT shardext_move_shard((SELECT shard_id FROM shardext.shards WHERE logicalrelid = 'moves.ref'::regclass LIMIT 1), :worker_2_id);
SELECT shardext_split_shard((SELECT shard_id FROM shardext.shards WHERE logicalrelid = 'moves.ref'::regclass LIMIT 1));
DROP TABLE moves.ref;
SELECT shardext_split_shard(:first_shard, 0);
SELECT shardext_rebalance('by_luck');
SELECT shardext_rebalance_plan('by_luck');
SELECT shardext_drain_node('127.0.0.1', 1);
-- not enough room on the target
SET shardext.min_free_disk_space TO '1000TB';
\set VERBOSITY terse
SELECT shardext_move_shard(:first_shard, :worker_2_id);
\set VERBOSITY default
RESET shardext.min_free_disk_space;
-- an inactive node receives no shards
UPDATE shardext.node SET active = false WHERE nodeid = :worker_2_id;
\c
SET search_path TO moves, public;
SELECT shardext_move_shard(:first_shard, :worker_2_id);
UPDATE shardext.node SET active = true WHERE nodeid = :worker_2_id;
\c
SET search_path TO moves, public;
-- only superusers move shards
CREATE ROLE mover;
SET ROLE mover;
SELECT shardext_move_shard(:first_shard, :worker_2_id);
SELECT shardext_cleanup();
RESET ROLE;
DROP ROLE mover;
-- a table of the shard's name on the target, not known to the catalog
SELECT shard_name AS first_shard_name FROM shardext.shards WHERE shard_id = :first_shard \gset
\c - - - :worker_2_port
CREATE TABLE :first_shard_name (id bigint);
\c - - - :coordinator_port
SET search_path TO moves, public;
SELECT shardext_move_shard(:first_shard, :worker_2_id);
\c - - - :worker_2_port
DROP TABLE :first_shard_name;
\c - - - :coordinator_port
SET search_path TO moves, public;
-- nothing was recorded or left behind by any of that
SELECT count(*) FROM shardext.move;
SELECT * FROM moves.leftovers();

--
-- online move: the group moves, the data with it, the source goes
--
SELECT shardext_move_shard(:first_shard, :worker_2_id);
SELECT logicalrelid, node_port = :worker_2_port AS on_worker_2
FROM shardext.shards WHERE hash_min = (SELECT hash_min FROM shardext.shards WHERE shard_id = :first_shard)
ORDER BY 1;
SELECT b.t, s.row_count = b.row_count AS same_rows, s.checksum = b.checksum AS same_checksum
FROM moves.before b, LATERAL moves.table_state(b.t::regclass) s ORDER BY 1;
SELECT operation, mode, status, phase, cardinality(shard_ids) AS shards, rows_copied, error
FROM shardext.move ORDER BY move_id;
SELECT count(*) AS cleanup_records FROM shardext.cleanup_record;
SELECT * FROM moves.leftovers();
-- the target has the indexes and constraints
\c - - - :worker_2_port
SELECT indexrelid::regclass::text ~ '^moves\.orders_(pkey|merchant_idx)_1' AS shard_index
FROM pg_index WHERE indrelid = (SELECT oid FROM pg_class WHERE relname = split_part(:'first_shard_name', '.', 2));
SELECT count(*) AS check_constraints FROM pg_constraint
WHERE conrelid = (SELECT oid FROM pg_class WHERE relname = split_part(:'first_shard_name', '.', 2)) AND contype = 'c';
\c - - - :coordinator_port
SET search_path TO moves, public;

-- and back, blocking writes this time
SELECT shardext_move_shard(:first_shard, :worker_1_id, mode => 'block_writes');
SELECT node_port = :worker_1_port AS on_worker_1 FROM shardext.shards WHERE shard_id = :first_shard;
SELECT b.t, s.row_count = b.row_count AS same_rows, s.checksum = b.checksum AS same_checksum
FROM moves.before b, LATERAL moves.table_state(b.t::regclass) s ORDER BY 1;
SELECT * FROM moves.leftovers();

--
-- a copy that differs from the source fails verification; the source stays
--
\c - - - :worker_2_port
CREATE FUNCTION public.corrupt_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.note := NEW.note || ' (changed)'; RETURN NEW; END $$;
CREATE FUNCTION public.corrupt_new_shards() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
	FOR r IN SELECT objid::regclass AS t FROM pg_event_trigger_ddl_commands()
			 WHERE command_tag = 'CREATE TABLE' AND object_identity LIKE 'moves.orders_%' LOOP
		EXECUTE format('CREATE TRIGGER corrupt BEFORE INSERT ON %s FOR EACH ROW EXECUTE FUNCTION public.corrupt_row()', r.t);
	END LOOP;
END $$;
CREATE EVENT TRIGGER corrupt_new_shards ON ddl_command_end EXECUTE FUNCTION public.corrupt_new_shards();
\c - - - :coordinator_port
SET search_path TO moves, public;
SELECT shardext_move_shard(:first_shard, :worker_2_id);
SELECT node_port = :worker_1_port AS still_on_worker_1 FROM shardext.shards WHERE shard_id = :first_shard;
SELECT status, error FROM shardext.move ORDER BY move_id DESC LIMIT 1;
SELECT * FROM moves.leftovers();
\c - - - :worker_2_port
DROP EVENT TRIGGER corrupt_new_shards;
DROP FUNCTION public.corrupt_new_shards();
DROP FUNCTION public.corrupt_row();
\c - - - :coordinator_port
SET search_path TO moves, public;

--
-- a cancelled move (here: at the copy, by statement_timeout) leaves the
-- source authoritative and nothing behind; a retry succeeds
--
SET shardext.move_test_pause_phase TO 'copying';
SET statement_timeout TO '1s';
SELECT shardext_move_shard(:first_shard, :worker_2_id);
RESET statement_timeout;
RESET shardext.move_test_pause_phase;
SELECT node_port = :worker_1_port AS still_on_worker_1 FROM shardext.shards WHERE shard_id = :first_shard;
SELECT status, error FROM shardext.move ORDER BY move_id DESC LIMIT 1;
SELECT * FROM moves.leftovers();
SET client_min_messages TO warning;
SELECT shardext_move_shard(:first_shard, :worker_2_id);
RESET client_min_messages;
SELECT node_port = :worker_2_port AS on_worker_2 FROM shardext.shards WHERE shard_id = :first_shard;

--
-- splits: in place and onto another node
--
SELECT hash_min AS split_min, hash_max AS split_max FROM shardext.shards WHERE shard_id = :first_shard \gset
SELECT shardext_split_shard(:first_shard) AS halves \gset
SELECT logicalrelid, count(*) AS shards, bool_and(node_port = :worker_2_port) AS on_worker_2,
	   min(hash_min) = :split_min AND max(hash_max) = :split_max AS same_range
FROM shardext.shards WHERE hash_min >= :split_min AND hash_max <= :split_max GROUP BY 1 ORDER BY 1;
SELECT cardinality(:'halves'::bigint[]) AS new_shards,
	   (SELECT count(*) FROM shardext.shards WHERE shard_id = ANY (:'halves'::bigint[])) AS in_catalog;
SELECT logicalrelid, shard_count, shards FROM shardext.tables ORDER BY 1;
SELECT hash_min, hash_max FROM shardext.shards WHERE logicalrelid = 'orders'::regclass ORDER BY hash_min;
SELECT b.t, s.row_count = b.row_count AS same_rows, s.checksum = b.checksum AS same_checksum
FROM moves.before b, LATERAL moves.table_state(b.t::regclass) s ORDER BY 1;
-- every row is in the shard its hash belongs to
SELECT bool_and(split_part(r.result, ',', 1)::int >= s.hash_min
				AND split_part(r.result, ',', 2)::int <= s.hash_max) AS rows_in_range
FROM shardext_run_on_shards('orders',
	'SELECT min(shardext.worker_hash_value(id)) || '','' || max(shardext.worker_hash_value(id)) FROM %s') r
JOIN shardext.shards s USING (shard_id);
SELECT * FROM moves.leftovers();
-- the upper half goes on being split, onto worker 1
SELECT shardext_split_shard((:'halves'::bigint[])[2], :worker_1_id) IS NOT NULL AS split;
SELECT logicalrelid, count(*) AS shards FROM shardext.shards GROUP BY 1 ORDER BY 1;
SELECT b.t, s.row_count = b.row_count AS same_rows, s.checksum = b.checksum AS same_checksum
FROM moves.before b, LATERAL moves.table_state(b.t::regclass) s ORDER BY 1;
SELECT * FROM moves.leftovers();

--
-- the rebalancer: plan, drain, rebalance
--
SELECT source_node_port AS source, target_node_port AS target, count(*)
FROM shardext_rebalance_plan() GROUP BY 1, 2 ORDER BY 1, 2;
SELECT count(*) AS bytes_plan FROM shardext_rebalance_plan('by_disk_size');
SET client_min_messages TO warning;
SELECT shardext_drain_node('127.0.0.1', :worker_2_port) AS moves_made;
RESET client_min_messages;
SELECT node_port = :worker_1_port AS on_worker_1, count(*) FROM shardext.shards GROUP BY 1 ORDER BY 1;
SELECT count(*) AS moves_planned FROM shardext_rebalance_plan();
SET client_min_messages TO warning;
SELECT shardext_rebalance() AS moves_made;
RESET client_min_messages;
SELECT node_port = :worker_1_port AS on_worker_1, logicalrelid, count(*) FROM shardext.shards GROUP BY 1, 2 ORDER BY 1, 2;
SELECT count(*) AS moves_planned FROM shardext_rebalance_plan();
SELECT shardext_rebalance() AS moves_made;
SELECT b.t, s.row_count = b.row_count AS same_rows, s.checksum = b.checksum AS same_checksum
FROM moves.before b, LATERAL moves.table_state(b.t::regclass) s ORDER BY 1;
SELECT status, count(*) FROM shardext.move GROUP BY 1 ORDER BY 1;
SELECT * FROM shardext.rebalance_progress;
SELECT shardext_cleanup();
SELECT * FROM moves.leftovers();

DROP SCHEMA moves CASCADE;
\c :regress_db - - :worker_1_port
DROP DATABASE shard_moves;
\c :regress_db - - :worker_2_port
DROP DATABASE shard_moves;
\c :regress_db - - :coordinator_port
DROP DATABASE shard_moves;
