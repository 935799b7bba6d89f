-- Snowflake ids: time-ordered bigint ids, unique across the nodes of a cluster

-- Parallel safe: parallel workers draw from the same shared-memory state as
-- their leader, so their ids are unique too; it writes no database state.
CREATE FUNCTION pg_catalog.snowflake_id()
	RETURNS bigint
	LANGUAGE C VOLATILE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'snowflake_id';
COMMENT ON FUNCTION pg_catalog.snowflake_id()
	IS 'generate a unique, time-ordered bigint id (41 bits ms, 10 bits node, 12 bits sequence)';

CREATE FUNCTION pg_catalog.snowflake_node_id()
	RETURNS int
	LANGUAGE C VOLATILE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'snowflake_node_id';
COMMENT ON FUNCTION pg_catalog.snowflake_node_id()
	IS 'node id that snowflake_id() puts into the ids of this server';

CREATE FUNCTION pg_catalog.snowflake_parse(id bigint,
										   OUT created_at timestamptz,
										   OUT node_id int,
										   OUT sequence int)
	RETURNS record
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'snowflake_parse';
COMMENT ON FUNCTION pg_catalog.snowflake_parse(bigint)
	IS 'split a snowflake id into creation time (ms precision), node id and sequence number';

CREATE FUNCTION pg_catalog.snowflake_from_time(ts timestamptz)
	RETURNS bigint
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'snowflake_from_time';
COMMENT ON FUNCTION pg_catalog.snowflake_from_time(timestamptz)
	IS 'smallest snowflake id of the millisecond of a time, for time-range filters on id columns';
