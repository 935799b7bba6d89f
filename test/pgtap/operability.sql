-- pgTAP: operability contracts: the shardext_admin role and what it may
-- call, the shard naming rule for long names, shardext_check_cluster()
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(24);

-- administrators: superusers and members of shardext_admin
SELECT has_role('shardext_admin', 'the extension creates role shardext_admin');
SELECT ok(NOT (SELECT rolcanlogin FROM pg_roles WHERE rolname = 'shardext_admin'),
		  'shardext_admin cannot log in');
SELECT ok(bool_and(has_function_privilege('shardext_admin', f, 'EXECUTE')),
		  'shardext_admin may execute every administrative function')
FROM unnest(ARRAY['pg_catalog.shardext_add_node(text, int, float8)',
				  'pg_catalog.shardext_remove_node(text, int)',
				  'pg_catalog.shardext_set_node_weight(text, int, float8)',
				  'pg_catalog.shardext_run_on_nodes(text)',
				  'pg_catalog.shardext_run_on_shards(regclass, text)',
				  'pg_catalog.shardext_move_shard(bigint, int, text)',
				  'pg_catalog.shardext_split_shard(bigint, int)',
				  'pg_catalog.shardext_rebalance(text, text)',
				  'pg_catalog.shardext_drain_node(text, int, text)',
				  'pg_catalog.shardext_cleanup()',
				  'pg_catalog.shardext_cancel_rebalance()',
				  'pg_catalog.shardext_recover_prepared_transactions()']) f;
SELECT ok(NOT bool_or(has_function_privilege('public', f, 'EXECUTE')),
		  'PUBLIC may not execute them')
FROM unnest(ARRAY['pg_catalog.shardext_add_node(text, int, float8)',
				  'pg_catalog.shardext_move_shard(bigint, int, text)',
				  'pg_catalog.shardext_run_on_nodes(text)']) f;
SELECT ok(has_table_privilege('shardext_admin', 'shardext.move', 'INSERT, UPDATE, DELETE'),
		  'shardext_admin writes move records (over the move''s own connection)');
SELECT ok(NOT has_table_privilege('shardext_admin', 'shardext.placement', 'INSERT'),
		  'nobody but the extension owner writes placements');
SELECT ok(NOT has_table_privilege('public', 'shardext.dist_table', 'INSERT, UPDATE, DELETE'),
		  'the catalog is read-only to PUBLIC');

CREATE ROLE tap_plain NOSUPERUSER;
CREATE ROLE tap_admin NOSUPERUSER IN ROLE shardext_admin;
SET LOCAL ROLE tap_plain;
SELECT throws_ok($$SELECT shardext_set_node_weight('127.0.0.1', 1, 1)$$, '42501',
				 'permission denied for function shardext_set_node_weight',
				 'a plain role may not change node weights');
SELECT throws_ok($$SELECT shardext_cleanup()$$, '42501', NULL, 'nor clean up');
SELECT throws_ok($$SELECT shardext.worker_register('x:1', 1)$$, '42501', NULL,
				 'nor register a worker');
SELECT throws_ok($$SELECT shardext.move_lock_shards(ARRAY[1::bigint])$$, '42501', NULL,
				 'nor take cutover locks');
SELECT throws_ok($$INSERT INTO shardext.shard_naming VALUES (true, 1)$$, '42501', NULL,
				 'nor change the shard naming');
RESET ROLE;
SET LOCAL ROLE tap_admin;
SELECT throws_ok($$SELECT shardext_set_node_weight('127.0.0.1', 1, 1)$$, '42704',
				 'node 127.0.0.1:1 is not registered',
				 'a member of shardext_admin passes the check (and gets to the real error)');
SELECT throws_ok($$SELECT shardext_remove_node('127.0.0.1', 1)$$, '42704',
				 'node 127.0.0.1:1 is not registered', 'and to remove nodes');
SELECT throws_ok($$SELECT shardext.worker_register('x:1', 0)$$, '22023', 'node id 0 is out of range',
				 'worker_register checks its input after the role');
RESET ROLE;

-- shard names: "<name>_<shard id>"; clipped names get a hash of the whole name
CREATE TABLE short_name (id int);
CREATE TABLE "Ein langer Tabellenname mit Umlauten äöü, genau 63 Bytes Nr1" (id int);
CREATE TABLE "Ein langer Tabellenname mit Umlauten äöü, genau 63 Bytes Nr2" (id int);
SELECT is(shardext.shard_name('short_name', 102008), 'public.short_name_102008',
		  'a short name is not changed');
SELECT matches(shardext.shard_name('"Ein langer Tabellenname mit Umlauten äöü, genau 63 Bytes Nr1"', 102008),
			   '^public\."Ein langer Tabellenname mit Umlauten äöü, ge_[0-9a-f]{8}_102008"$',
			   'a long name is clipped and gets a hash before the shard id');
SELECT ok(octet_length(split_part(shardext.shard_name(
			'"Ein langer Tabellenname mit Umlauten äöü, genau 63 Bytes Nr1"', 102008), '.', 2)) - 2
		  <= 63, 'the clipped name fits in 63 bytes');
SELECT isnt(shardext.shard_name('"Ein langer Tabellenname mit Umlauten äöü, genau 63 Bytes Nr1"', 102008),
			shardext.shard_name('"Ein langer Tabellenname mit Umlauten äöü, genau 63 Bytes Nr2"', 102008),
			'two long names that differ at the end stay different');
-- shards from before the upgrade to 1.1 keep 1.0's names
INSERT INTO shardext.shard_naming (first_hashed_shard_id) VALUES (200000);
SELECT is(shardext.shard_name('"Ein langer Tabellenname mit Umlauten äöü, genau 63 Bytes Nr1"', 102008),
		  'public."Ein langer Tabellenname mit Umlauten äöü, genau 63 By_102008"',
		  'a shard created by 1.0 keeps its clipped name without hash');
SELECT matches(shardext.shard_name('"Ein langer Tabellenname mit Umlauten äöü, genau 63 Bytes Nr1"', 200001),
			   '_[0-9a-f]{8}_200001"$', 'newer shards of the same table get the hash');
SELECT is(shardext.shard_name('short_name', 102008), 'public.short_name_102008',
		  'short names are the same in both');

-- shardext_check_cluster: a row per check and node, statuses ok/warning/error
SELECT ok((SELECT bool_and(status IN ('ok', 'warning', 'error')) AND count(DISTINCT node_id) >= 1
		   FROM shardext_check_cluster()), 'shardext_check_cluster reports known statuses');
SELECT is((SELECT count(*)::int FROM shardext_check_cluster() WHERE node_id = 0 AND status = 'error'), 0,
		  'the coordinator passes its own checks');

SELECT * FROM finish();
ROLLBACK;
