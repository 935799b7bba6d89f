--
-- copy_distributed: COPY into and out of distributed and reference tables
-- (PostgreSQL 18 and later spell a hint's "datestyle" DateStyle:
-- copy_distributed_1.out)
--
CREATE TABLE items (id int PRIMARY KEY, day date, label text,
					qty int DEFAULT 7 CHECK (qty > 0), seq bigserial);
SELECT create_distributed_table('items', 'id', shard_count => 8);
CREATE TABLE kinds (code text PRIMARY KEY, name text);
SELECT create_reference_table('kinds');

-- text, with escapes and NULLs
COPY items (id, day, label, qty) FROM STDIN;
1	2024-01-01	plain	1
2	2024-01-02	tab\there	2
3	\N	no day	3
\.
-- CSV with a header, quotes and a field spanning two lines
COPY items (id, day, label, qty) FROM STDIN WITH (FORMAT csv, HEADER);
id,day,label,qty
4,2024-02-01,"a,b",4
5,2024-02-02,"two
lines",5
\.
-- missing columns get their DEFAULT, evaluated on the coordinator
COPY items (id, label) FROM STDIN;
6	defaulted
7	defaulted too
\.
-- every row is on a worker, none in the local table
SELECT sum(result::int) AS rows_on_shards
FROM shardext_run_on_shards('items', 'SELECT count(*) FROM %s');
SELECT pg_relation_size('items') AS bytes_in_shell;
SELECT count(DISTINCT result) > 1 AS spread_over_shards
FROM shardext_run_on_shards('items', 'SELECT string_agg(id::text, '','') FROM %s');

-- COPY out streams every shard, in the session's output formats
COPY items TO STDOUT;
COPY items (id, label) TO STDOUT WITH (FORMAT csv, HEADER, FORCE_QUOTE (label));
SET DateStyle = 'SQL, DMY';
COPY items (id, day) FROM STDIN WITH (FORMAT csv);
20,03/04/2024
\.
COPY items (id, day) TO STDOUT WITH (FORMAT csv);
RESET DateStyle;
COPY items (id, day) TO STDOUT WITH (FORMAT csv);

-- a bad row anywhere fails the whole COPY, naming its input line, and
-- leaves no row behind: bad distribution column (found here) ...
COPY items (id, day, label, qty) FROM STDIN WITH (FORMAT csv);
30,2024-01-01,ok,1
x31,2024-01-01,bad id,1
32,2024-01-01,ok,1
\.
-- ... bad date (found by a worker, on line 3)
COPY items (id, day, label, qty) FROM STDIN WITH (FORMAT csv);
30,2024-01-01,ok,1
31,2024-01-01,ok,1
32,2024-13-01,bad day,1
33,2024-01-01,ok,1
\.
-- ... a CHECK violation (worker) and a duplicate key (worker)
COPY items (id, day, label, qty) FROM STDIN WITH (FORMAT csv);
30,2024-01-01,ok,1
31,2024-01-01,bad qty,-1
\.
COPY items (id, label) FROM STDIN;
40	new
1	duplicate
\.
-- ... wrong number of columns, NULL distribution column
COPY items (id, day, label, qty) FROM STDIN;
41	2024-01-01	short
\.
COPY items (id, label) FROM STDIN;
\N	no id
\.
SELECT sum(result::int) AS rows_after_failures
FROM shardext_run_on_shards('items', 'SELECT count(*) FROM %s');

-- binary round trip, and WHERE
COPY items TO '/tmp/shardext_copy_items.bin' WITH (FORMAT binary);
CREATE TABLE items_local (LIKE items);
COPY items_local FROM '/tmp/shardext_copy_items.bin' WITH (FORMAT binary);
SELECT count(*), sum(id), count(day) FROM items_local;
TRUNCATE items;
COPY items FROM '/tmp/shardext_copy_items.bin' WITH (FORMAT binary);
COPY items (id, label) FROM STDIN WHERE id > 100;
101	kept
8	dropped by WHERE
\.
SELECT sum(result::int) AS rows_now
FROM shardext_run_on_shards('items', 'SELECT count(*) FROM %s');

-- a reference table gets every row on every node; COPY out reads one copy
COPY kinds FROM STDIN WITH (FORMAT csv);
a,Alpha
b,Beta
\.
SELECT node_id > 0 AS node, result AS rows FROM shardext_run_on_shards('kinds',
	'SELECT count(*) FROM %s') ORDER BY node_id;
COPY kinds TO STDOUT WITH (FORMAT csv);

-- inside a transaction: COPY and its rollback
BEGIN;
COPY kinds FROM STDIN WITH (FORMAT csv);
c,Gamma
\.
COPY kinds TO STDOUT WITH (FORMAT csv);
ROLLBACK;
COPY kinds TO STDOUT WITH (FORMAT csv);

-- FREEZE follows PostgreSQL's rules (see copy_options for the rest)
COPY items FROM STDIN WITH (FREEZE);

DROP TABLE items, items_local, kinds;
