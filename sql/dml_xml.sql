--
-- dml_xml: XML expressions in writes to a distributed table go to the shards
-- as they are, and give what they give on a local table.  A server built
-- without libxml refuses them on both (dml_xml_1.out), as PostgreSQL's own
-- xml test expects.
--
CREATE TABLE xml_d (k int PRIMARY KEY, region text);
SELECT create_distributed_table('xml_d', 'k', shard_count => 4);
CREATE TABLE xml_l (k int PRIMARY KEY, region text);
INSERT INTO xml_d VALUES (1, 'north'), (4, 'south'), (7, 'east');
INSERT INTO xml_l SELECT * FROM xml_d;
UPDATE xml_d SET region = xmlelement(name r, region)::text WHERE k = 4 RETURNING k, region;
UPDATE xml_l SET region = xmlelement(name r, region)::text WHERE k = 4 RETURNING k, region;
UPDATE xml_d SET region = xmlconcat(xmlelement(name a, k), xmlelement(name b, region))::text
WHERE k > 5 RETURNING k, region;
UPDATE xml_l SET region = xmlconcat(xmlelement(name a, k), xmlelement(name b, region))::text
WHERE k > 5 RETURNING k, region;
SELECT (SELECT string_agg(k || '=' || region, ' ' ORDER BY k) FROM xml_d) =
	   (SELECT string_agg(k || '=' || region, ' ' ORDER BY k) FROM xml_l) AS same_rows;
DROP TABLE xml_d, xml_l;
