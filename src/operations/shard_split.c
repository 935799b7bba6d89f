/*-------------------------------------------------------------------------
 *
 * shard_split.c
 *	  shardext_split_shard(): split the hash range of a shard group in two
 *	  halves, online, onto the same node or another one.
 *
 * A split is a move (shard_move.c, move_steps.c) whose target tables are
 * new shards, one per half and table: the copy reads each half from the
 * source, the change stream reaches the right half through shardext's
 * output plugin (split_decoder.c), and the catalog switch replaces each old
 * shard by its two halves and raises the colocation group's shard count.
 * Splitting every shard of a table whose shard count is a power of two
 * halves each range exactly, so the ranges stay uniform.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"

#include "shardext/connection.h"
#include "shardext/shard_move.h"

PG_FUNCTION_INFO_V1(shardext_split_shard);

/*
 * shardext_split_shard(shard_id bigint, target_node_id int DEFAULT NULL)
 * returns the ids of the two new shards of the given shard's table, lower
 * half first.
 */
Datum
shardext_split_shard(PG_FUNCTION_ARGS)
{
	int64		shardId;
	int32		targetNodeId = 0;
	ShardMoveState *state;
	Datum		newIds[2] = {0, 0};
	ListCell   *cell;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("shard_id must not be NULL")));
	shardId = PG_GETARG_INT64(0);
	if (!PG_ARGISNULL(1))
	{
		targetNodeId = PG_GETARG_INT32(1);
		CheckTargetNodeIdArgument(targetNodeId);
	}

	state = RunSingleShardMove("shardext_split_shard", shardId, targetNodeId,
							   MOVE_MODE_ONLINE, MOVE_OPERATION_SPLIT, NULL);

	foreach(cell, state->shards)
	{
		MoveShard  *shard = lfirst(cell);

		if (shard->shardId == shardId)
		{
			newIds[0] = Int64GetDatum(shard->childIds[0]);
			newIds[1] = Int64GetDatum(shard->childIds[1]);
		}
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(newIds, 2, INT8OID, 8, FLOAT8PASSBYVAL,
										  TYPALIGN_DOUBLE));
}
