/*-------------------------------------------------------------------------
 *
 * shard_lookup.c
 *	  From a distribution column value to its shard, and from a shard to the
 *	  name of its table on the workers.
 *
 * Values are hashed with the standard hash support function of the column
 * type's default hash operator class (the same function hash partitioning and
 * hash joins use), with the column's collation, into int4.  Shards cover the
 * whole int4 space in consecutive inclusive ranges.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "common/hashfn.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "shardext/metadata.h"
#include "shardext/shardext.h"

/* "_" and 8 hex digits of the hash of a clipped name */
#define SHARD_NAME_HASH_LENGTH 9

/*
 * HashDistributionValue hashes a non-NULL value of the distribution column.
 */
int32
HashDistributionValue(DistTableCacheEntry *entry, Datum value)
{
	Assert(entry->method == DISTRIBUTE_BY_HASH);
	return DatumGetInt32(FunctionCall1Coll(&entry->hashFunc,
										   entry->distCollation, value));
}

/*
 * FindShardIntervalForHash returns the shard whose range holds hash.  Equal
 * ranges (the layout create_distributed_table makes) are found by division;
 * after splits, by binary search.  Reference tables have a single shard.
 */
ShardInterval *
FindShardIntervalForHash(DistTableCacheEntry *entry, int32 hash)
{
	int			low = 0;
	int			high = entry->shardCount - 1;

	if (entry->shardCount == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("table \"%s\" has no shards", get_rel_name(entry->relid))));

	if (entry->method == DISTRIBUTE_BY_REFERENCE)
		return &entry->shards[0];

	if (entry->uniformShards)
	{
		uint64		width = (UINT64CONST(1) << 32) / entry->shardCount;
		uint64		index = ((uint64) ((int64) hash - PG_INT32_MIN)) / width;

		if (index >= (uint64) entry->shardCount)
			index = entry->shardCount - 1;
		return &entry->shards[index];
	}

	while (low <= high)
	{
		int			middle = low + (high - low) / 2;
		ShardInterval *shard = &entry->shards[middle];

		if (hash < shard->hashMin)
			high = middle - 1;
		else if (hash > shard->hashMax)
			low = middle + 1;
		else
			return shard;
	}

	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("no shard of table \"%s\" covers hash value %d",
					get_rel_name(entry->relid), hash),
			 errhint("Check shardext.shards for gaps in the hash ranges.")));
	return NULL;				/* keep compiler quiet */
}

/* FindShardForValue is FindShardIntervalForHash of the value's hash */
ShardInterval *
FindShardForValue(DistTableCacheEntry *entry, Datum value)
{
	if (entry->method == DISTRIBUTE_BY_REFERENCE)
		return FindShardIntervalForHash(entry, 0);
	return FindShardIntervalForHash(entry, HashDistributionValue(entry, value));
}

/*
 * FindShardById returns the shard with the given id and the cache entry of
 * its table, or NULL when no such shard exists.
 */
ShardInterval *
FindShardById(int64 shardId, DistTableCacheEntry **entryOut)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	Oid			relid = InvalidOid;
	DistTableCacheEntry *entry;

	rel = table_open(ShardextCatalogRelid("shard"), AccessShareLock);
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(shardId));
	scan = systable_beginscan(rel, ShardextCatalogRelid("shard_pkey"),
							  true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;

		relid = DatumGetObjectId(heap_getattr(tuple, 2, RelationGetDescr(rel), &isnull));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	if (!OidIsValid(relid) || (entry = GetDistTableCacheEntry(relid)) == NULL)
		return NULL;

	for (int i = 0; i < entry->shardCount; i++)
	{
		if (entry->shards[i].shardId == shardId)
		{
			if (entryOut)
				*entryOut = entry;
			return &entry->shards[i];
		}
	}
	return NULL;
}

/*
 * FirstHashedShardId returns the first shard id whose clipped names carry a
 * hash (see ShardNameFromParts).  Shards created by 1.0 keep 1.0's names:
 * the upgrade to 1.1 records the next shard id in shardext.shard_naming; a
 * fresh install has no row there, and every shard gets the new names.
 * Without the table (a 1.0 catalog, before ALTER EXTENSION shardext
 * UPDATE) every name is a 1.0 name.  Read at each call: it is only needed
 * for names that must be clipped.
 */
static int64
FirstHashedShardId(void)
{
	Oid			namespaceId = get_namespace_oid(SHARDEXT_SCHEMA_NAME, true);
	Oid			relid = OidIsValid(namespaceId) ?
		get_relname_relid("shard_naming", namespaceId) : InvalidOid;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	int64		result = 0;

	if (!OidIsValid(relid))
		return PG_INT64_MAX;
	rel = table_open(relid, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		value = heap_getattr(tuple, 2, RelationGetDescr(rel), &isnull);

		if (!isnull)
			result = DatumGetInt64(value);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

/*
 * ShardNameFromParts builds "<name>_<shardid>", the name of a shard table
 * (name = the table's) or of a shard's index or constraint.  A name that
 * does not fit in NAMEDATALEN is clipped (at a character boundary) and
 * gets 8 hex digits of a hash of the whole name before the shard id:
 * "<clipped name>_<hash>_<shardid>", so that two long names that begin
 * alike (a long table and its "..._pkey") stay two names.  Shards created
 * before 1.1 keep 1.0's clipped names without hash (FirstHashedShardId).
 */
char *
ShardNameFromParts(const char *relname, int64 shardId)
{
	char		suffix[32];
	int			suffixLength;

	suffixLength = snprintf(suffix, sizeof(suffix), "_" INT64_FORMAT, shardId);
	if (strlen(relname) + suffixLength <= NAMEDATALEN - 1)
		return psprintf("%s%s", relname, suffix);
	return ClippedShardName(relname, shardId, shardId >= FirstHashedShardId());
}

/*
 * ClippedShardName is the clipped name ShardNameFromParts gives a shard
 * whose name is too long, with the hash (1.1 and later) or without it
 * (1.0).  Decoding (cdc_decoder.c), which cannot read shard_naming, tries
 * both.
 */
char *
ClippedShardName(const char *relname, int64 shardId, bool hashed)
{
	char		suffix[32];
	int			suffixLength;
	int			relnameLength = strlen(relname);
	uint32		hash;

	suffixLength = snprintf(suffix, sizeof(suffix), "_" INT64_FORMAT, shardId);
	if (!hashed)
	{
		relnameLength = pg_mbcliplen(relname, relnameLength,
									 NAMEDATALEN - 1 - suffixLength);
		return psprintf("%.*s%s", relnameLength, relname, suffix);
	}

	hash = hash_bytes((const unsigned char *) relname, relnameLength);
	relnameLength = pg_mbcliplen(relname, relnameLength,
								 NAMEDATALEN - 1 - suffixLength - SHARD_NAME_HASH_LENGTH);
	return psprintf("%.*s_%08x%s", relnameLength, relname, hash, suffix);
}

/* ShardTableName returns the unqualified, unquoted name of a shard table */
char *
ShardTableName(Oid relid, int64 shardId)
{
	char	   *relname = get_rel_name(relid);

	if (relname == NULL)
		elog(ERROR, "cache lookup failed for relation %u", relid);
	return ShardNameFromParts(relname, shardId);
}

/*
 * QualifiedShardName returns the quoted, schema-qualified name of a shard
 * table, ready to paste into SQL sent to a worker.
 */
char *
QualifiedShardName(Oid relid, int64 shardId)
{
	char	   *schemaName = get_namespace_name(get_rel_namespace(relid));

	return quote_qualified_identifier(schemaName, ShardTableName(relid, shardId));
}

/*
 * ShardNameGeneration goes up when a schema changes (a rename): cached
 * qualified shard names made before may be stale.  A table's own rename
 * rebuilds its cache entry, names and all.
 */
uint64		ShardNameGeneration = 0;

/*
 * CachedQualifiedShardName is QualifiedShardName for a shard of a cache
 * entry, kept with the shard: statements ask for it at every execution.
 */
char *
CachedQualifiedShardName(DistTableCacheEntry *entry, ShardInterval *shard)
{
	if (shard->qualifiedName == NULL || shard->nameGeneration != ShardNameGeneration)
	{
		char	   *name = QualifiedShardName(entry->relid, shard->shardId);

		shard->qualifiedName = MemoryContextStrdup(entry->context, name);
		shard->nameGeneration = ShardNameGeneration;
		pfree(name);
	}
	return shard->qualifiedName;
}
