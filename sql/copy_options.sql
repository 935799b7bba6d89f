--
-- copy_options: every COPY option PostgreSQL 15 accepts works on
-- distributed tables as on their local twins: FORMAT, DELIMITER, NULL,
-- HEADER (and MATCH), QUOTE, ESCAPE, FORCE_QUOTE, FORCE_NOT_NULL,
-- FORCE_NULL, ENCODING, FREEZE, column lists, WHERE.
--
CREATE TABLE copt (k int, v text, n numeric, d date, w text DEFAULT 'dflt');
CREATE TABLE copt_local (LIKE copt INCLUDING DEFAULTS);
SELECT create_distributed_table('copt', 'k', shard_count => 4);
CREATE FUNCTION copt_same() RETURNS TABLE (distributed bigint, local bigint, same boolean)
LANGUAGE sql AS $$
	SELECT (SELECT count(*) FROM copt), (SELECT count(*) FROM copt_local),
	       NOT EXISTS (SELECT * FROM copt EXCEPT ALL SELECT * FROM copt_local)
	   AND NOT EXISTS (SELECT * FROM copt_local EXCEPT ALL SELECT * FROM copt)
$$;

-- text: DELIMITER, NULL, escapes, column lists with DEFAULT for the rest
COPY copt (k, v, n) FROM STDIN WITH (FORMAT text, DELIMITER '|', NULL 'none');
1|tab\there|1.5
2|none|2
3|back\\slash|none
\.
COPY copt_local (k, v, n) FROM STDIN WITH (FORMAT text, DELIMITER '|', NULL 'none');
1|tab\there|1.5
2|none|2
3|back\\slash|none
\.
SELECT * FROM copt_same();

-- csv: HEADER, HEADER MATCH, QUOTE, ESCAPE, FORCE_NOT_NULL, FORCE_NULL
COPY copt (k, v, d) FROM STDIN WITH (FORMAT csv, HEADER MATCH, QUOTE '''', ESCAPE '\', FORCE_NOT_NULL (v));
k,v,d
4,'it\'s, quoted',2024-02-29
5,,2024-03-01
\.
COPY copt_local (k, v, d) FROM STDIN WITH (FORMAT csv, HEADER MATCH, QUOTE '''', ESCAPE '\', FORCE_NOT_NULL (v));
k,v,d
4,'it\'s, quoted',2024-02-29
5,,2024-03-01
\.
COPY copt (k, v, w) FROM STDIN WITH (FORMAT csv, HEADER true, FORCE_NULL (v, w));
whatever,the,header
6,"",""
7,"x",
\.
COPY copt_local (k, v, w) FROM STDIN WITH (FORMAT csv, HEADER true, FORCE_NULL (v, w));
whatever,the,header
6,"",""
7,"x",
\.
SELECT * FROM copt_same();
-- HEADER MATCH checks the names, as PostgreSQL does
COPY copt (k, v) FROM STDIN WITH (FORMAT csv, HEADER MATCH);
v,k
8,x
\.

-- WHERE and DEFAULT expressions are evaluated on the coordinator
COPY copt (k, v) FROM STDIN WITH (FORMAT csv) WHERE k > 10;
9,no
11,yes
\.
COPY copt_local (k, v) FROM STDIN WITH (FORMAT csv) WHERE k > 10;
9,no
11,yes
\.
SELECT * FROM copt_same();

-- out: FORCE_QUOTE, delimiters, NULL, header, in shard order
COPY (SELECT * FROM copt ORDER BY k) TO STDOUT WITH (FORMAT csv, HEADER, FORCE_QUOTE (v, w), NULL 'NUL');
COPY (SELECT k, v FROM copt_local ORDER BY k) TO STDOUT WITH (FORMAT csv, FORCE_QUOTE *, DELIMITER ';');
COPY copt (k) TO STDOUT WITH (FORMAT text);

-- ENCODING, in and out, through a file in LATIN1
COPY (SELECT 12 AS k, 'café naïve' AS v) TO '/tmp/shardext_copy_latin1.csv' WITH (FORMAT csv, ENCODING 'LATIN1');
SELECT length(pg_read_binary_file('/tmp/shardext_copy_latin1.csv')) AS latin1_bytes;
COPY copt (k, v) FROM '/tmp/shardext_copy_latin1.csv' WITH (FORMAT csv, ENCODING 'LATIN1');
COPY copt_local (k, v) FROM '/tmp/shardext_copy_latin1.csv' WITH (FORMAT csv, ENCODING 'LATIN1');
SELECT * FROM copt_same();
COPY (SELECT v FROM copt WHERE k = 12) TO '/tmp/shardext_copy_latin1_out.csv' WITH (FORMAT csv, ENCODING 'LATIN1');
COPY copt (v) TO '/tmp/shardext_copy_latin1_out2.csv' WITH (FORMAT csv, ENCODING 'LATIN1', FORCE_QUOTE *);
SELECT length(pg_read_binary_file('/tmp/shardext_copy_latin1_out.csv')) AS latin1_bytes,
       position('"caf' in convert_from(pg_read_binary_file('/tmp/shardext_copy_latin1_out2.csv'), 'LATIN1')) > 0 AS quoted;

-- binary, out and back in
COPY copt TO '/tmp/shardext_copy.bin' WITH (FORMAT binary);
TRUNCATE copt;
COPY copt FROM '/tmp/shardext_copy.bin' WITH (FORMAT binary);
SELECT * FROM copt_same();

-- FREEZE: PostgreSQL's rules on the table, frozen rows on the shards
COPY copt FROM STDIN WITH (FREEZE);
\.
BEGIN;
TRUNCATE copt;
COPY copt (k, v) FROM STDIN WITH (FREEZE, FORMAT csv);
1,frozen
2,frozen
\.
SAVEPOINT s;
COPY copt (k, v) FROM STDIN WITH (FREEZE, FORMAT csv);
\.
ROLLBACK TO s;
COMMIT;
SELECT k, v FROM copt ORDER BY k;
BEGIN;
CREATE TABLE copt_new (k int, v text);
SELECT create_distributed_table('copt_new', 'k', shard_count => 2);
COPY copt_new FROM STDIN WITH (FREEZE);
1	a
2	b
3	c
\.
COMMIT;
SELECT count(*) FROM copt_new;
-- the shards' pages are all frozen (in the visibility map, as COPY FREEZE leaves them)
SELECT shardext_run_on_nodes('CREATE EXTENSION IF NOT EXISTS pg_visibility') IS NOT NULL AS ok;
SELECT bool_and(result::boolean) AS all_frozen FROM shardext_run_on_shards('copt_new',
	$$SELECT all_frozen = pg_relation_size('%s') / 8192 FROM pg_visibility_map_summary('%s')$$);
SELECT shardext_run_on_nodes('DROP EXTENSION pg_visibility') IS NOT NULL AS ok;

DROP TABLE copt, copt_local, copt_new;
DROP FUNCTION copt_same();
