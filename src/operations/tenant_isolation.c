/*-------------------------------------------------------------------------
 *
 * tenant_isolation.c
 *	  shardext_isolate_tenant(): give one distribution column value (a
 *	  tenant) a shard of its own, and optionally a node of its own.
 *
 * The shard holding the value's hash h (with every co-located shard) is
 * split, online like shardext_split_shard(), into up to three ranges:
 * [min, h - 1], [h, h] and [h + 1, max], leaving out the empty ones when h
 * is at an edge of the range.  The split is made on the node the shard is
 * on.  When a target node is given, the isolated shard group is then moved
 * there by an ordinary shard move, in the same call: these are two
 * operations, each atomic and verified on its own.  If the move fails, the
 * split stays (the tenant is isolated on its old node) and the error says
 * which shard to move.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/privileges.h"
#include "shardext/shard_move.h"

PG_FUNCTION_INFO_V1(shardext_isolate_tenant);

static DistTableCacheEntry *CheckIsolationTable(Oid relid);
static int32 TenantHash(DistTableCacheEntry *entry, const char *valueText);
static void TenantPieces(ShardInterval *shard, int32 hash, SplitPieces *pieces,
						 int *isolatedPiece);
static int64 IsolatedShardOf(ShardMoveState *state, Oid relid, int isolatedPiece);
static void MoveIsolatedShard(int64 shardId, WorkerNode *source, WorkerNode *target,
							  MoveMode mode);

/*
 * shardext_isolate_tenant(table_name regclass, tenant_value text,
 * target_node_id int DEFAULT NULL, mode text DEFAULT 'online') returns the
 * id of the table's shard that holds only the tenant's hash value.
 */
Datum
shardext_isolate_tenant(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *valueText;
	MoveMode	mode;
	DistTableCacheEntry *entry;
	WorkerNode *target = NULL;
	ShardInterval *shard;
	int32		hash;
	int64		isolatedId = 0;
	int32		nodeId;
	SplitPieces pieces;
	int			isolatedPiece;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table_name, tenant_value and mode must not be NULL")));
	relid = PG_GETARG_OID(0);
	valueText = text_to_cstring(PG_GETARG_TEXT_PP(1));
	mode = ParseMoveMode(text_to_cstring(PG_GETARG_TEXT_PP(3)));
	entry = CheckIsolationTable(relid);
	EnsureAdminAndShardext("shardext_isolate_tenant");
	if (!PG_ARGISNULL(2))
		target = CheckPlacementTarget(PG_GETARG_INT32(2));

	hash = TenantHash(entry, valueText);
	shard = FindShardIntervalForHash(entry, hash);
	if (shard->placementCount != 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("shard " INT64_FORMAT " has %d placements, not one",
						shard->shardId, shard->placementCount)));
	nodeId = shard->placementNodeIds[0];

	if (shard->hashMin == shard->hashMax)
	{
		isolatedId = shard->shardId;
		if (target == NULL || target->nodeId == nodeId)
		{
			ereport(NOTICE,
					(errmsg("tenant %s of \"%s\" already has a shard of its own",
							valueText, get_rel_name(relid))));
			PG_RETURN_INT64(isolatedId);
		}
	}
	EnsureOutsideTransactionBlock("shardext_isolate_tenant");
	if (shard->hashMin != shard->hashMax)
	{
		ShardMoveState *state;

		TenantPieces(shard, hash, &pieces, &isolatedPiece);
		state = RunSingleShardMove("shardext_isolate_tenant", shard->shardId, 0, mode,
								   MOVE_OPERATION_SPLIT, &pieces);
		isolatedId = IsolatedShardOf(state, relid, isolatedPiece);
	}

	if (target != NULL && target->nodeId != nodeId)
		MoveIsolatedShard(isolatedId, GetWorkerNode(nodeId), target, mode);
	PG_RETURN_INT64(isolatedId);
}

/*
 * CheckIsolationTable returns the cache entry of a hash-distributed table
 * the caller owns, or fails with the reason.
 */
static DistTableCacheEntry *
CheckIsolationTable(Oid relid)
{
	DistTableCacheEntry *entry;

	if (get_rel_name(relid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
	entry = GetDistTableCacheEntry(relid);
	if (entry == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("table \"%s\" is not distributed", get_rel_name(relid)),
				 errhint("Distribute it with create_distributed_table() first.")));
	if (entry->method != DISTRIBUTE_BY_HASH)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot isolate a tenant of reference table \"%s\"",
						get_rel_name(relid)),
				 errdetail("Reference tables have a copy on every node; only hash-distributed "
						   "tables have tenants.")));
	return entry;
}

/*
 * TenantHash reads a tenant value as the distribution column's type (its
 * input function reports a value that does not parse) and returns its hash.
 */
static int32
TenantHash(DistTableCacheEntry *entry, const char *valueText)
{
	Oid			inputFunction;
	Oid			ioParam;
	Datum		value;

	getTypeInputInfo(entry->distType, &inputFunction, &ioParam);
	value = OidInputFunctionCall(inputFunction, (char *) valueText, ioParam,
								 entry->distTypmod);
	return HashDistributionValue(entry, value);
}

/*
 * TenantPieces cuts the range of shard around hash: [min, h - 1], [h, h],
 * [h + 1, max], without the empty ones; *isolatedPiece is [h, h]'s place.
 */
static void
TenantPieces(ShardInterval *shard, int32 hash, SplitPieces *pieces, int *isolatedPiece)
{
	memset(pieces, 0, sizeof(SplitPieces));
	if (hash > shard->hashMin)
	{
		pieces->hashMin[pieces->count] = shard->hashMin;
		pieces->hashMax[pieces->count++] = hash - 1;
	}
	*isolatedPiece = pieces->count;
	pieces->hashMin[pieces->count] = hash;
	pieces->hashMax[pieces->count++] = hash;
	if (hash < shard->hashMax)
	{
		pieces->hashMin[pieces->count] = hash + 1;
		pieces->hashMax[pieces->count++] = shard->hashMax;
	}
}

/* IsolatedShardOf returns the new shard of relid that holds the tenant */
static int64
IsolatedShardOf(ShardMoveState *state, Oid relid, int isolatedPiece)
{
	ListCell   *cell;

	foreach(cell, state->shards)
	{
		MoveShard  *shard = lfirst(cell);

		if (shard->relid == relid)
			return shard->childIds[isolatedPiece];
	}
	elog(ERROR, "table %u was not part of the split", relid);
	return 0;					/* keep compiler quiet */
}

/*
 * MoveIsolatedShard moves the isolated tenant's shard group to its target
 * node; when that fails, the error's hint says where the tenant is now.
 */
static void
MoveIsolatedShard(int64 shardId, WorkerNode *source, WorkerNode *target, MoveMode mode)
{
	MemoryContext oldContext = CurrentMemoryContext;

	PG_TRY();
	{
		(void) RunSingleShardMove("shardext_isolate_tenant", shardId, target->nodeId, mode,
								  MOVE_OPERATION_MOVE, NULL);
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		char	   *where;

		MemoryContextSwitchTo(oldContext);
		edata = CopyErrorData();
		FlushErrorState();
		where = psprintf("The tenant has a shard of its own, " INT64_FORMAT ", on node %s:%d; "
						 "move it with shardext_move_shard().", shardId, source->host,
						 source->port);
		edata->hint = edata->hint ? psprintf("%s %s", edata->hint, where) : where;
		ReThrowError(edata);
	}
	PG_END_TRY();
}
