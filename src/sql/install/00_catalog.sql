-- Catalog tables of shardext.  They live in schema shardext, belong to the
-- extension, and those that hold user data are dumped by pg_dump as
-- extension configuration.

CREATE SCHEMA shardext;
GRANT USAGE ON SCHEMA shardext TO PUBLIC;

-- worker nodes known to this coordinator database
CREATE SEQUENCE shardext.node_nodeid_seq MINVALUE 1 MAXVALUE 1023 NO CYCLE;
CREATE TABLE shardext.node (
	nodeid int NOT NULL DEFAULT nextval('shardext.node_nodeid_seq') PRIMARY KEY,
	host text NOT NULL,
	port int NOT NULL CHECK (port BETWEEN 1 AND 65535),
	weight float8 NOT NULL DEFAULT 1.0 CHECK (weight > 0 AND weight <= 1000),
	active bool NOT NULL DEFAULT true,
	UNIQUE (host, port)
);
ALTER SEQUENCE shardext.node_nodeid_seq OWNED BY shardext.node.nodeid;

-- groups of tables whose shards share hash ranges and nodes
CREATE SEQUENCE shardext.colocation_colocationid_seq MINVALUE 1;
CREATE TABLE shardext.colocation (
	colocationid int NOT NULL DEFAULT nextval('shardext.colocation_colocationid_seq') PRIMARY KEY,
	shard_count int NOT NULL CHECK (shard_count > 0),
	dist_type regtype,			-- NULL for the reference table group
	dist_collation oid NOT NULL DEFAULT 0
);
ALTER SEQUENCE shardext.colocation_colocationid_seq OWNED BY shardext.colocation.colocationid;

-- distributed and reference tables
CREATE TABLE shardext.dist_table (
	logicalrelid regclass NOT NULL PRIMARY KEY,
	method "char" NOT NULL CHECK (method IN ('h', 'r')),
	dist_attnum int2,			-- NULL for reference tables
	colocationid int NOT NULL REFERENCES shardext.colocation,
	CHECK ((method = 'h') = (dist_attnum IS NOT NULL))
);
CREATE INDEX dist_table_colocationid_idx ON shardext.dist_table (colocationid);

-- shards: hash ranges [hash_min, hash_max], both inclusive; NULL for reference
CREATE SEQUENCE shardext.shard_shardid_seq MINVALUE 1 START 102008;
CREATE TABLE shardext.shard (
	shardid bigint NOT NULL PRIMARY KEY,
	logicalrelid regclass NOT NULL REFERENCES shardext.dist_table ON DELETE CASCADE,
	hash_min int4,
	hash_max int4,
	CHECK ((hash_min IS NULL) = (hash_max IS NULL)),
	CHECK (hash_min <= hash_max)
);
CREATE INDEX shard_logicalrelid_idx ON shardext.shard (logicalrelid);
ALTER SEQUENCE shardext.shard_shardid_seq OWNED BY shardext.shard.shardid;

-- where each shard lives
CREATE TABLE shardext.placement (
	shardid bigint NOT NULL REFERENCES shardext.shard ON DELETE CASCADE,
	nodeid int NOT NULL REFERENCES shardext.node,
	PRIMARY KEY (shardid, nodeid)
);
CREATE INDEX placement_nodeid_idx ON shardext.placement (nodeid);

-- commit records of two-phase commits (one row per prepared remote transaction)
CREATE TABLE shardext.transaction (
	gid text NOT NULL PRIMARY KEY,
	nodeid int NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);

-- on a worker: which coordinator database this database serves
CREATE TABLE shardext.local_identity (
	only_row bool NOT NULL DEFAULT true PRIMARY KEY CHECK (only_row),
	coordinator_id text NOT NULL,
	node_id int NOT NULL
);

SELECT pg_catalog.pg_extension_config_dump('shardext.node', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.node_nodeid_seq', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.colocation', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.colocation_colocationid_seq', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.dist_table', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.shard', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.shard_shardid_seq', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.placement', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.transaction', '');
SELECT pg_catalog.pg_extension_config_dump('shardext.local_identity', '');

GRANT SELECT ON ALL TABLES IN SCHEMA shardext TO PUBLIC;
