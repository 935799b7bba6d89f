/*-------------------------------------------------------------------------
 *
 * shard_functions.c
 *	  Small SQL functions about shards: which shard holds a value, and the
 *	  name of a shard table.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "shardext/metadata.h"

PG_FUNCTION_INFO_V1(shardext_shard_for_value);
PG_FUNCTION_INFO_V1(shardext_shard_name);

/*
 * shardext_shard_for_value(table_name regclass, value text) returns the id
 * of the shard that holds rows whose distribution column equals value (cast
 * to the column's type).
 */
Datum
shardext_shard_for_value(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	char	   *valueText = text_to_cstring(PG_GETARG_TEXT_PP(1));
	DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);
	Oid			inputFunction;
	Oid			typeIOParam;
	Datum		value;

	if (entry == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("table \"%s\" is not distributed", get_rel_name(relid))));

	if (entry->method == DISTRIBUTE_BY_REFERENCE)
		PG_RETURN_INT64(entry->shards[0].shardId);

	getTypeInputInfo(entry->distType, &inputFunction, &typeIOParam);
	value = OidInputFunctionCall(inputFunction, valueText, typeIOParam,
								 entry->distTypmod);
	PG_RETURN_INT64(FindShardForValue(entry, value)->shardId);
}

/*
 * shardext_shard_name(table_name regclass, shard_id bigint) returns the
 * quoted, schema-qualified name of the shard table on its workers.
 */
Datum
shardext_shard_name(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	int64		shardId = PG_GETARG_INT64(1);

	if (get_rel_name(relid) == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(QualifiedShardName(relid, shardId)));
}
