/*-------------------------------------------------------------------------
 *
 * move_worker_functions.c
 *	  Functions a shard move calls on the nodes: the free space of the data
 *	  directory's file system, and the distribution hash of a value (which
 *	  must equal the coordinator's, see shard_lookup.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/statvfs.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

PG_FUNCTION_INFO_V1(shardext_worker_free_disk_bytes);
PG_FUNCTION_INFO_V1(shardext_worker_hash_value);

/*
 * shardext.worker_free_disk_bytes() returns the bytes that an unprivileged
 * process may still write on the file system of the data directory (table
 * spaces elsewhere are not counted).
 */
Datum
shardext_worker_free_disk_bytes(PG_FUNCTION_ARGS)
{
	struct statvfs fs;

	if (statvfs(DataDir, &fs) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read the free space of \"%s\": %m", DataDir)));
	PG_RETURN_INT64((int64) fs.f_bavail * (int64) fs.f_frsize);
}

/* the hash function of one argument type, cached in fn_extra */
typedef struct HashFunctionCache
{
	Oid			typeId;
	FmgrInfo	hashFunc;
} HashFunctionCache;

/*
 * shardext.worker_hash_value(anyelement) hashes a value as shardext places
 * it: the standard hash support function of the type's default hash
 * operator class, with the collation of the argument.
 */
Datum
shardext_worker_hash_value(PG_FUNCTION_ARGS)
{
	Oid			typeId = get_fn_expr_argtype(fcinfo->flinfo, 0);
	HashFunctionCache *cache = fcinfo->flinfo->fn_extra;

	if (cache == NULL || cache->typeId != typeId)
	{
		TypeCacheEntry *typeEntry = lookup_type_cache(typeId, TYPECACHE_HASH_PROC_FINFO);

		if (!OidIsValid(typeEntry->hash_proc_finfo.fn_oid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("type %s has no default hash function", format_type_be(typeId))));
		cache = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(HashFunctionCache));
		cache->typeId = typeId;
		fmgr_info_copy(&cache->hashFunc, &typeEntry->hash_proc_finfo,
					   fcinfo->flinfo->fn_mcxt);
		fcinfo->flinfo->fn_extra = cache;
	}
	PG_RETURN_INT32(DatumGetInt32(FunctionCall1Coll(&cache->hashFunc, PG_GET_COLLATION(),
													PG_GETARG_DATUM(0))));
}
