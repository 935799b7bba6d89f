-- Distributed transactions: recovery of in-doubt two-phase commits

CREATE FUNCTION pg_catalog.shardext_recover_prepared_transactions()
	RETURNS int
	LANGUAGE C STRICT
	AS 'MODULE_PATHNAME', 'shardext_recover_prepared_transactions';
COMMENT ON FUNCTION pg_catalog.shardext_recover_prepared_transactions()
	IS 'commit or roll back the prepared transactions this coordinator left on the nodes; returns how many';
REVOKE ALL ON FUNCTION pg_catalog.shardext_recover_prepared_transactions() FROM PUBLIC;
