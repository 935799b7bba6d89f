--
-- copy_split: COPY FROM of text and CSV into a distributed table whose
-- every column comes from the input is split into lines on the
-- coordinator without parsing their fields (only the distribution column
-- is read); the workers parse the lines.  Whatever input PostgreSQL's own
-- reader treats specially (end-of-copy markers, escaped line ends, other
-- end-of-line styles, a last line without one) is handed over to it from
-- that line on.  Every case loads the same rows as into a local table,
-- from the client (inline and \copy, whose messages split lines), from a
-- server file and from a program; errors name the line as PostgreSQL does.
--
CREATE TABLE sp (a text, id int, b text, c numeric);
SELECT create_distributed_table('sp', 'id', shard_count => 4);
CREATE TABLE sp_local (LIKE sp);
CREATE TABLE spk (k text, v text);
SELECT create_distributed_table('spk', 'k', shard_count => 4);
CREATE TABLE spk_local (LIKE spk);
CREATE FUNCTION sp_same() RETURNS TABLE (distributed bigint, local bigint, same boolean)
LANGUAGE sql AS $$
	SELECT (SELECT count(*) FROM sp), (SELECT count(*) FROM sp_local),
	       NOT EXISTS (SELECT * FROM sp EXCEPT ALL SELECT * FROM sp_local)
	   AND NOT EXISTS (SELECT * FROM sp_local EXCEPT ALL SELECT * FROM sp)
$$;
CREATE FUNCTION spk_same() RETURNS TABLE (distributed bigint, local bigint, same boolean)
LANGUAGE sql AS $$
	SELECT (SELECT count(*) FROM spk), (SELECT count(*) FROM spk_local),
	       NOT EXISTS (SELECT * FROM spk EXCEPT ALL SELECT * FROM spk_local)
	   AND NOT EXISTS (SELECT * FROM spk_local EXCEPT ALL SELECT * FROM spk)
$$;

-- text from the client: NULLs, escapes (also in the distribution column,
-- which is the second field), a backslash before a period that is data
COPY sp FROM STDIN;
x	1	plain	1.5
tab\there	2	back\\slash	\N
\N	3	\N	3
a\\.b	4	escaped\ttab	4
\x41	5	octal\101	5
o	\066	octal id	6
h	\x37	hex id	7
\N	8	first field null	8
\.
COPY sp_local FROM STDIN;
x	1	plain	1.5
tab\there	2	back\\slash	\N
\N	3	\N	3
a\\.b	4	escaped\ttab	4
\x41	5	octal\101	5
o	\066	octal id	6
h	\x37	hex id	7
\N	8	first field null	8
\.
SELECT * FROM sp_same();
SELECT id, a, b FROM sp WHERE id IN (2, 6, 7) ORDER BY id;

-- CSV from the client: quoted fields with line ends and quotes, a quoted
-- distribution column, empty and NULL fields, a line starting with \.
-- (data in CSV) after which PostgreSQL's reader takes over
COPY sp FROM STDIN WITH (FORMAT csv);
"multi
line",9,"say ""hi""",9
,"10",,
"",11,"",11
\.,12,backslash dot,12
after,13,handed over,13
\.
COPY sp_local FROM STDIN WITH (FORMAT csv);
"multi
line",9,"say ""hi""",9
,"10",,
"",11,"",11
\.,12,backslash dot,12
after,13,handed over,13
\.
SELECT * FROM sp_same();

-- CSV with HEADER, another delimiter, quote and escape
COPY sp FROM STDIN WITH (FORMAT csv, HEADER, DELIMITER ';', QUOTE '''', ESCAPE '\');
a;id;b;c
'it\'s';14;'semi;colon';14
plain;'15';'';15
\.
COPY sp_local FROM STDIN WITH (FORMAT csv, HEADER, DELIMITER ';', QUOTE '''', ESCAPE '\');
a;id;b;c
'it\'s';14;'semi;colon';14
plain;'15';'';15
\.
SELECT * FROM sp_same();

-- server files: \r\n line ends (also inside a quoted CSV field), an
-- escaped line end in text, a last line without line end, the
-- end-of-copy marker at the end
\! printf 'r1\t16\tx\t1\r\nr2\t17\ty\t2\r\n' > /tmp/shardext_split_crlf.txt
\! printf '"q\r\nr",18,z,3\r\nplain,19,z,4\r\n' > /tmp/shardext_split_crlf.csv
\! printf 'n1\t20\tline\\\nbreak\t1\nn2\t21\tafter\t2\n' > /tmp/shardext_split_escnl.txt
\! printf 'e1\t22\tx\t1\ne2\t23\tno line end\t2' > /tmp/shardext_split_noeol.txt
\! printf 'm1\t24\tx\t1\n\\.\n' > /tmp/shardext_split_marker.txt
\! printf 'a,id,b,c' > /tmp/shardext_split_header_only.csv
COPY sp FROM '/tmp/shardext_split_crlf.txt';
COPY sp_local FROM '/tmp/shardext_split_crlf.txt';
COPY sp FROM '/tmp/shardext_split_crlf.csv' WITH (FORMAT csv);
COPY sp_local FROM '/tmp/shardext_split_crlf.csv' WITH (FORMAT csv);
COPY sp FROM '/tmp/shardext_split_escnl.txt';
COPY sp_local FROM '/tmp/shardext_split_escnl.txt';
COPY sp FROM '/tmp/shardext_split_noeol.txt';
COPY sp_local FROM '/tmp/shardext_split_noeol.txt';
COPY sp FROM PROGRAM 'cat /tmp/shardext_split_marker.txt';
COPY sp_local FROM PROGRAM 'cat /tmp/shardext_split_marker.txt';
-- a header that is the last line, without line end (found by copyfuzz)
COPY sp FROM '/tmp/shardext_split_header_only.csv' WITH (FORMAT csv, HEADER);
COPY sp_local FROM '/tmp/shardext_split_header_only.csv' WITH (FORMAT csv, HEADER);
SELECT * FROM sp_same();
SELECT id, a, b FROM sp WHERE id IN (18, 20, 23) ORDER BY id;

-- many lines through \copy (psql sends chunks that split lines) and from
-- a file: CSV with line ends and quotes in every seventh row
COPY (SELECT CASE WHEN g % 7 = 0 THEN E'multi\nline "q",' || g ELSE md5(g::text) END,
			 g + 100, repeat('x', g % 50), g / 3.0
	  FROM generate_series(1, 20000) g)
	TO '/tmp/shardext_split_many.csv' WITH (FORMAT csv);
\copy sp FROM '/tmp/shardext_split_many.csv' WITH (FORMAT csv)
\copy sp_local FROM '/tmp/shardext_split_many.csv' WITH (FORMAT csv)
COPY sp FROM '/tmp/shardext_split_many.csv' WITH (FORMAT csv);
COPY sp_local FROM '/tmp/shardext_split_many.csv' WITH (FORMAT csv);
SELECT * FROM sp_same();

-- a text distribution column with escapes and multibyte characters
COPY spk FROM STDIN;
caf\303\251	octal UTF-8
caf\xc3\xa9	hex UTF-8
straße	plain UTF-8
tab\tin key	escaped tab
\.
COPY spk_local FROM STDIN;
caf\303\251	octal UTF-8
caf\xc3\xa9	hex UTF-8
straße	plain UTF-8
tab\tin key	escaped tab
\.
SELECT * FROM spk_same();
SELECT k, count(*) FROM spk GROUP BY k ORDER BY k COLLATE "C";

-- errors, as PostgreSQL reports them, and nothing loaded
COPY sp FROM STDIN;
x	30	fine	1
y	31	fine	1
z	notanint	bad	1
\.
COPY sp FROM STDIN;
onlyone
\.
COPY spk FROM STDIN;
bad\377	invalid byte
\.
COPY spk_local FROM STDIN;
bad\377	invalid byte
\.
COPY sp FROM STDIN WITH (FORMAT csv, FORCE_NULL (id));
a,"",b,1
\.
\! printf 'a,32,b,1\nb,"33\n' > /tmp/shardext_split_open.csv
COPY sp FROM '/tmp/shardext_split_open.csv' WITH (FORMAT csv);
COPY sp_local FROM '/tmp/shardext_split_open.csv' WITH (FORMAT csv);
COPY sp FROM STDIN;
x	34	too	1	many
\.
\! printf 'm1\t35\tx\t1\r\nm2\t36\ty\t2\n' > /tmp/shardext_split_mixed.txt
COPY sp FROM '/tmp/shardext_split_mixed.txt';
COPY sp_local FROM '/tmp/shardext_split_mixed.txt';
SELECT * FROM sp_same();

\! rm -f /tmp/shardext_split_*
DROP TABLE sp, sp_local, spk, spk_local;
DROP FUNCTION sp_same(), spk_same();
