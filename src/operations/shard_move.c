/*-------------------------------------------------------------------------
 *
 * shard_move.c
 *	  shardext_move_shard(): move a shard group to another node, online or
 *	  with writes blocked; the driver that shardext_split_shard() and the
 *	  rebalancer share; and the catalog switch at the end.
 *
 * The move runs inside the caller's statement but keeps nothing in the
 * caller's transaction: its records and the catalog switch are written by
 * the loopback connection (see move_records.c), its remote work by
 * dedicated connections that commit on their own (move_steps.c).  The steps
 * run in an internal subtransaction; when one fails, the subtransaction is
 * rolled back, the move's objects are removed (bounded waits, interrupts
 * held), the record says why the move failed, and the error is rethrown.
 * The source stays authoritative until the catalog switch commits; what
 * follows the switch (dropping the replication objects and, once no older
 * transaction can use it, the source) never fails the move.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "common/hashfn.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "access/htup_details.h"
#include "catalog/pg_class.h"

#include "shardext/array_literal.h"
#include "shardext/connection.h"
#include "shardext/deparser.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/privileges.h"
#include "shardext/remote_command.h"
#include "shardext/resource_lock.h"
#include "shardext/shard_move.h"
#include "shardext/subtransaction.h"

PG_FUNCTION_INFO_V1(shardext_move_shard);
PG_FUNCTION_INFO_V1(shardext_move_lock_shards);
PG_FUNCTION_INFO_V1(shardext_move_commit_placements);

/* a running move's record, as the catalog switch reads it */
static char RelationIdentityOf(Oid relid);
static List *ShardGroup(DistTableCacheEntry *entry, ShardInterval *shard, int32 sourceNodeId);
static void CheckSourceAndTarget(ShardMoveState *state);
static void CheckSourceSettings(ShardMoveState *state);
static char *ShardNameArray(ShardMoveState *state);
static void ReadSourceTables(ShardMoveState *state, char *shardNames);
static void CheckTargetRoom(ShardMoveState *state, char *shardNames);
static char *SizePretty(int64 bytes);
static void RunMoveSteps(void *arg);
static void AbortMove(ShardMoveState *state, ErrorData *edata);
static void FinishMove(ShardMoveState *state);
static void CleanUpAfterSwitch(void *arg);
static void AssignSplitShardIds(ShardMoveState *state);
static void CloseMoveConnections(ShardMoveState *state, bool cancel);
static void CommitMovedPlacements(int64 moveId);
static int32 SwitchMovedShard(MoveRecord *move, int i);
static char *MoveObjectName(int64 moveId);
static void SetSplitPieces(ShardMoveState *state, int64 shardId, const SplitPieces *pieces);

/*
 * shardext_move_shard(shard_id bigint, target_node_id int, mode text)
 */
Datum
shardext_move_shard(PG_FUNCTION_ARGS)
{
	int64		shardId;
	int32		targetNodeId;
	MoveMode	mode;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("shard_id, target_node_id and mode must not be NULL")));
	shardId = PG_GETARG_INT64(0);
	targetNodeId = PG_GETARG_INT32(1);
	mode = ParseMoveMode(text_to_cstring(PG_GETARG_TEXT_PP(2)));
	CheckTargetNodeIdArgument(targetNodeId);

	(void) RunSingleShardMove("shardext_move_shard", shardId, targetNodeId, mode,
							  MOVE_OPERATION_MOVE, NULL);
	PG_RETURN_VOID();
}

/*
 * CheckTargetNodeIdArgument rejects a target_node_id argument that cannot
 * name a node (PrepareShardMove looks up the others).
 */
void
CheckTargetNodeIdArgument(int32 targetNodeId)
{
	if (targetNodeId <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("node with id %d does not exist", targetNodeId),
				 errhint("shardext.nodes lists the nodes.")));
}

/*
 * CheckPlacementTarget returns the node with id nodeId after checking
 * that shards can be placed on it: an active primary.
 */
WorkerNode *
CheckPlacementTarget(int32 nodeId)
{
	WorkerNode *target;

	CheckTargetNodeIdArgument(nodeId);
	target = LookupWorkerNode(nodeId);
	if (target == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("node with id %d does not exist", nodeId),
				 errhint("shardext.nodes lists the nodes.")));
	if (NodeIsReplica(target))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("node %s:%d is a read replica", target->host, target->port),
				 errhint("Shards are placed on primaries; their replicas follow them.")));
	if (!target->active)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node %s:%d is not active", target->host, target->port),
				 errhint("Shards can only be placed on active nodes.")));
	return target;
}

/*
 * RunSingleShardMove is what shardext_move_shard() and
 * shardext_split_shard() do once their arguments are read: check the
 * caller, prepare the move (or split) of the shard's group, and run it over
 * a loopback connection of its own, after cleaning up what earlier moves
 * left.  function is the caller's SQL name, for messages.  A split makes
 * the given pieces, or halves when pieces is NULL.  Returns the state of
 * the finished move.
 */
ShardMoveState *
RunSingleShardMove(const char *function, int64 shardId, int32 targetNodeId,
				   MoveMode mode, MoveOperation operation, const SplitPieces *pieces)
{
	NodeConnection *local;
	ShardMoveState *state;

	EnsureAdminAndShardext(function);
	state = PrepareShardMove(shardId, targetNodeId, mode, operation, 0, 0);
	if (pieces != NULL)
		SetSplitPieces(state, shardId, pieces);
	EnsureOutsideTransactionBlock(function);

	local = OpenLoopbackConnection(true);
	PG_TRY();
	{
		RunCleanup(local, 0, true, true, 0, true);
		state->local = local;
		ExecuteShardMove(state);
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(local);
	}
	PG_END_TRY();
	return state;
}

/*
 * EnsureOutsideTransactionBlock: a move commits on its own as it goes, so
 * it cannot be rolled back with the caller's transaction.
 */
void
EnsureOutsideTransactionBlock(const char *function)
{
	if (IsTransactionBlock())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("%s() cannot run inside a transaction block", function),
				 errdetail("It commits its steps on its own and cannot be rolled back."),
				 errhint("Run it as a statement of its own.")));
}

/* ParseMoveMode: 'online' or 'block_writes' */
MoveMode
ParseMoveMode(const char *mode)
{
	if (strcmp(mode, "online") == 0)
		return MOVE_MODE_ONLINE;
	if (strcmp(mode, "block_writes") == 0)
		return MOVE_MODE_BLOCK_WRITES;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid shard move mode \"%s\"", mode),
			 errhint("Use 'online' (logical replication) or 'block_writes' (copy while "
					 "writes wait).")));
	return MOVE_MODE_ONLINE;	/* keep compiler quiet */
}

/*
 * ShardGroup returns the shards (MoveShard *) of every table co-located
 * with entry that cover the hash range of shard, in shard id order,
 * checking that they all live on the source node only.
 */
static List *
ShardGroup(DistTableCacheEntry *entry, ShardInterval *shard, int32 sourceNodeId)
{
	List	   *group = NIL;
	ListCell   *cell;
	int32		hashMin = shard->hashMin;
	int32		hashMax = shard->hashMax;

	foreach(cell, ColocatedTableList(entry->colocationId))
	{
		Oid			relid = lfirst_oid(cell);
		DistTableCacheEntry *other = GetDistTableCacheEntry(relid);
		ShardInterval *match = NULL;
		MoveShard  *moveShard;

		if (other == NULL)
			continue;
		for (int i = 0; i < other->shardCount; i++)
		{
			if (other->shards[i].hashMin == hashMin && other->shards[i].hashMax == hashMax)
				match = &other->shards[i];
		}
		if (match == NULL || match->placementCount != 1 ||
			match->placementNodeIds[0] != sourceNodeId)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("table \"%s\" has no shard for the hash range of shard "
							INT64_FORMAT " on the same node", get_rel_name(relid),
							shard->shardId),
					 errdetail("Co-located tables must have shards with the same ranges "
							   "on the same nodes.")));

		moveShard = palloc0(sizeof(MoveShard));
		moveShard->relid = relid;
		moveShard->shardId = match->shardId;
		moveShard->shardName = QualifiedShardName(relid, match->shardId);
		moveShard->columnList = ColumnListString(relid);
		moveShard->distColumnName = get_attname(relid, other->distAttnum, false);
		moveShard->distColumn = pstrdup(quote_identifier(moveShard->distColumnName));
		moveShard->coordinatorIdentity = RelationIdentityOf(relid);
		group = lappend(group, moveShard);
	}
	return group;
}

/* the replica identity setting (pg_class.relreplident) of a relation */
static char
RelationIdentityOf(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	char		identity;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	identity = ((Form_pg_class) GETSTRUCT(tuple))->relreplident;
	ReleaseSysCache(tuple);
	return identity;
}

static int
CompareMoveShards(const ListCell *a, const ListCell *b)
{
	int64		left = ((MoveShard *) lfirst(a))->shardId;
	int64		right = ((MoveShard *) lfirst(b))->shardId;

	return (left > right) - (left < right);
}

/*
 * PrepareShardMove checks a move or split against the catalog and gathers
 * what it needs, without changing anything or asking the nodes (that is
 * CheckSourceAndTarget's job, at the start of ExecuteShardMove).  It takes a
 * ShareUpdateExclusiveLock on each table of the group for the rest of the
 * transaction, which keeps schema changes and other moves of the group
 * away.  targetNodeId 0 means the source node (splits only).  moveId > 0
 * reuses a pending record of a rebalance.
 */
ShardMoveState *
PrepareShardMove(int64 shardId, int32 targetNodeId, MoveMode mode,
				 MoveOperation operation, int64 jobId, int64 moveId)
{
	ShardMoveState *state = palloc0(sizeof(ShardMoveState));
	DistTableCacheEntry *entry;
	ShardInterval *shard;
	WorkerNode *source;
	WorkerNode *target;
	ListCell   *cell;
	MoveShard  *first;

	state->operation = operation;
	state->mode = mode;
	state->jobId = jobId;
	state->moveId = moveId;
	state->context = CurrentMemoryContext;

	shard = FindShardById(shardId, &entry);
	if (shard == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("shard " INT64_FORMAT " does not exist", shardId)));
	if (entry->method != DISTRIBUTE_BY_HASH)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot %s shard " INT64_FORMAT " of reference table \"%s\"",
						operation == MOVE_OPERATION_SPLIT ? "split" : "move",
						shardId, get_rel_name(entry->relid)),
				 errdetail("Reference tables have a copy on every node.")));

	/* keep schema changes and other moves of these tables away, then look again */
	foreach(cell, ColocatedTableList(entry->colocationId))
		LockRelationOid(lfirst_oid(cell), ShareUpdateExclusiveLock);
	shard = FindShardById(shardId, &entry);
	if (shard == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("shard " INT64_FORMAT " does not exist", shardId),
				 errdetail("A concurrent split or drop removed it.")));
	if (shard->placementCount != 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("shard " INT64_FORMAT " has %d placements, not one", shardId,
						shard->placementCount)));

	source = GetWorkerNode(shard->placementNodeIds[0]);
	target = CheckPlacementTarget(targetNodeId == 0 ? source->nodeId : targetNodeId);
	state->source = *source;
	state->source.host = pstrdup(source->host);
	state->target = *target;
	state->target.host = pstrdup(target->host);
	state->hashMin = shard->hashMin;
	state->hashMax = shard->hashMax;
	state->inPlace = source->nodeId == target->nodeId;

	state->shards = ShardGroup(entry, shard, source->nodeId);
	list_sort(state->shards, CompareMoveShards);
	first = linitial(state->shards);

	if (operation == MOVE_OPERATION_MOVE && state->inPlace)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("shard " INT64_FORMAT " is already on node %s:%d", shardId,
						target->host, target->port)));

	if (operation == MOVE_OPERATION_SPLIT)
	{
		if (state->hashMin == state->hashMax)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cannot split shard " INT64_FORMAT ": its hash range holds a "
							"single value", shardId)));
		state->splitPoint = (int32) ((int64) state->hashMin +
									 ((int64) state->hashMax - (int64) state->hashMin) / 2);
		state->pieces.count = 2;
		state->pieces.hashMin[0] = state->hashMin;
		state->pieces.hashMax[0] = state->splitPoint;
		state->pieces.hashMin[1] = state->splitPoint + 1;
		state->pieces.hashMax[1] = state->hashMax;
	}

	state->description = psprintf("shard %s%s", ShardTableName(first->relid, first->shardId),
								  list_length(state->shards) == 1 ? "" :
								  psprintf(" and %d co-located shard%s",
										   list_length(state->shards) - 1,
										   list_length(state->shards) == 2 ? "" : "s"));

	return state;
}

/*
 * SetSplitPieces replaces the halves of a prepared split by the given
 * pieces, which must cover the shard's range (as it is under the lock)
 * exactly, in order.
 */
static void
SetSplitPieces(ShardMoveState *state, int64 shardId, const SplitPieces *pieces)
{
	bool		valid = state->operation == MOVE_OPERATION_SPLIT &&
		pieces->count >= 2 && pieces->count <= MAX_SPLIT_PIECES &&
		pieces->hashMin[0] == state->hashMin &&
		pieces->hashMax[pieces->count - 1] == state->hashMax;

	for (int i = 0; valid && i < pieces->count; i++)
	{
		valid = pieces->hashMin[i] <= pieces->hashMax[i];
		if (valid && i > 0)
			valid = (int64) pieces->hashMin[i] == (int64) pieces->hashMax[i - 1] + 1;
	}
	if (!valid)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the hash range of shard " INT64_FORMAT " changed", shardId),
				 errdetail("A concurrent split changed the shard."),
				 errhint("Try again.")));
	state->pieces = *pieces;
	state->splitPoint = pieces->hashMax[0];
}

/*
 * CheckSourceAndTarget opens the connections to the nodes and checks, in
 * read-only queries, what the move needs: wal_level = logical on the source
 * (online), the shard tables there (and how they are identified for
 * replication), no table of the same name on the target, room on the
 * target's disk.
 */
static void
CheckSourceAndTarget(ShardMoveState *state)
{
	char	   *shardNames;

	state->sourceConn = OpenDedicatedConnection(state->source.host, state->source.port,
												false, true);
	ExecuteRemoteCommand(state->sourceConn,
						 "SET lock_timeout = '10s'; SET synchronous_commit = on");
	CheckSourceSettings(state);
	shardNames = ShardNameArray(state);
	ReadSourceTables(state, shardNames);

	state->targetConn = OpenDedicatedConnection(state->target.host, state->target.port,
												false, true);
	ExecuteRemoteCommand(state->targetConn,
						 "SET lock_timeout = '10s'; SET synchronous_commit = on");
	CheckTargetRoom(state, shardNames);
}

/*
 * CheckSourceSettings checks the source's wal_level for an online move and
 * finds the output plugin libraries a split must allow.
 */
static void
CheckSourceSettings(ShardMoveState *state)
{
	char	   *value;

	if (state->mode == MOVE_MODE_ONLINE)
	{
		value = ExecuteRemoteScalar(state->sourceConn, "SHOW wal_level", 0, NULL);
		if (value == NULL || strcmp(value, "logical") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("wal_level on node %s:%d is \"%s\"; online shard moves need \"logical\"",
							state->source.host, state->source.port, value ? value : "unknown"),
					 errhint("Set wal_level = logical on the node and restart it, or use "
							 "mode => 'block_writes'.")));
	}

	/*
	 * Servers that restrict output plugins (output_plugin_libraries) must
	 * let our split sessions, which are a superuser's, use shardext's.
	 */
	if (state->operation == MOVE_OPERATION_SPLIT)
	{
		value = ExecuteRemoteScalar(state->sourceConn,
									"SELECT pg_catalog.string_agg(pg_catalog.btrim(l), ',') "
									"FROM pg_catalog.regexp_split_to_table("
									"  pg_catalog.current_setting('output_plugin_libraries', true), ',') l "
									"WHERE pg_catalog.btrim(l) <> ''",
									0, NULL);
		if (value != NULL)
			state->pluginLibraries = psprintf("%s,shardext", value);
		else if (ExecuteRemoteScalar(state->sourceConn,
									 "SELECT pg_catalog.current_setting('output_plugin_libraries', true)",
									 0, NULL) != NULL)
			state->pluginLibraries = "shardext";
	}
}

/*
 * ShardNameArray is the text form of a text[] of the (quoted, qualified)
 * names of the group's shards
 */
static char *
ShardNameArray(ShardMoveState *state)
{
	List	   *names = NIL;
	ListCell   *cell;

	foreach(cell, state->shards)
		names = lappend(names, ((MoveShard *) lfirst(cell))->shardName);
	return TextArrayLiteral(names);
}

/*
 * ReadSourceTables reads the size of the shard tables on the source and
 * how they are identified for replication, failing when one is missing.
 */
static void
ReadSourceTables(ShardMoveState *state, char *shardNames)
{
	const char *params[1] = {shardNames};
	PGresult   *result;
	ListCell   *cell;

	result = ExecuteRemoteQueryParams(state->sourceConn,
									  "SELECT n, c.relreplident, "
									  "pg_catalog.pg_total_relation_size(c.oid), "
									  "EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid "
									  "  AND CASE c.relreplident WHEN 'd' THEN i.indisprimary "
									  "      WHEN 'i' THEN i.indisreplident ELSE false END) "
									  "FROM pg_catalog.unnest($1::text[]) WITH ORDINALITY u(n, o) "
									  "LEFT JOIN pg_catalog.pg_class c ON c.oid = pg_catalog.to_regclass(n) "
									  "ORDER BY o",
									  1, params);
	foreach(cell, state->shards)
	{
		MoveShard  *shard = lfirst(cell);
		int			row = foreach_current_index(cell);

		if (PQgetisnull(result, row, 1))
		{
			PQclear(result);
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("shard table %s does not exist on node %s:%d", shard->shardName,
							state->source.host, state->source.port),
					 errhint("The catalog and the node disagree; check shardext.shards.")));
		}
		shard->sourceIdentity = PQgetvalue(result, row, 1)[0];
		state->totalBytes += pg_strtoint64(PQgetvalue(result, row, 2));
		shard->needsFullIdentity = state->mode == MOVE_MODE_ONLINE &&
			shard->sourceIdentity != 'f' && strcmp(PQgetvalue(result, row, 3), "t") != 0;
	}
	PQclear(result);
}

/*
 * CheckTargetRoom checks that the target has no table of the group's names
 * and room for a copy of the group on its disk.
 */
static void
CheckTargetRoom(ShardMoveState *state, char *shardNames)
{
	const char *params[1] = {shardNames};
	char	   *value;

	/* a leftover of an interrupted move that cleanup could not remove */
	if (state->operation == MOVE_OPERATION_MOVE)
	{
		value = ExecuteRemoteScalar(state->targetConn,
									"SELECT n FROM pg_catalog.unnest($1::text[]) n "
									"WHERE pg_catalog.to_regclass(n) IS NOT NULL LIMIT 1",
									1, params);
		if (value != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_TABLE),
					 errmsg("table %s already exists on node %s:%d", value,
							state->target.host, state->target.port),
					 errdetail("It is left from an earlier move of the shard that may still "
							   "be in use by running transactions."),
					 errhint("Run shardext_cleanup() when those transactions have ended, "
							 "then try again.")));
	}

	/* room for a copy of the shard group, and shardext.min_free_disk_space to spare */
	value = ExecuteRemoteScalar(state->targetConn, "SELECT shardext.worker_free_disk_bytes()", 0, NULL);
	if (value != NULL)
	{
		int64		freeBytes = pg_strtoint64(value);
		int64		margin = (int64) ShardextMinFreeDiskSpace * 1024 * 1024;

		if (freeBytes < state->totalBytes + margin)
			ereport(ERROR,
					(errcode(ERRCODE_DISK_FULL),
					 errmsg("not enough free disk space on node %s:%d for %s",
							state->target.host, state->target.port, state->description),
					 errdetail("The shards take %s; the node has %s free and "
							   "shardext.min_free_disk_space asks for %s to spare.",
							   SizePretty(state->totalBytes), SizePretty(freeBytes),
							   SizePretty(margin)),
					 errhint("Free space on the node or choose another node.")));
	}
}

/* SizePretty is pg_size_pretty() of a number of bytes */
static char *
SizePretty(int64 bytes)
{
	return text_to_cstring(DatumGetTextPP(DirectFunctionCall1(pg_size_pretty,
															  Int64GetDatum(bytes))));
}

/*
 * ExecuteShardMove runs a prepared move or split (with state->local set) to
 * the end: checks the nodes, records it,
 * runs its steps in a subtransaction, cleans up after a failure (and
 * rethrows it), or finishes after the catalog switch.
 */
void
ExecuteShardMove(ShardMoveState *state)
{
	ErrorData  *edata;

	Assert(state->local != NULL);
	CheckSourceAndTarget(state);

	/* new shard ids last: nothing is left to refuse the split */
	if (state->operation == MOVE_OPERATION_SPLIT)
		AssignSplitShardIds(state);

	state->moveId = InsertMoveRecord(state->local, state, "running");
	state->objectName = MoveObjectName(state->moveId);
	ereport(NOTICE,
			(errmsg("%s %s from %s:%d to %s:%d",
					state->operation == MOVE_OPERATION_SPLIT ? "splitting" : "moving",
					state->description, state->source.host, state->source.port,
					state->target.host, state->target.port)));

	edata = RunInSubtransaction(RunMoveSteps, state);
	if (edata != NULL)
	{
		if (!state->flipped && !MoveWasCommitted(state->moveId))
		{
			AbortMove(state, edata);
			ReThrowError(edata);
		}
		/* the switch committed although its acknowledgement was lost */
		state->flipped = true;
		CloseMoveConnections(state, true);
	}

	FinishMove(state);
}

/* AssignSplitShardIds draws the ids of the halves of each shard of a split */
static void
AssignSplitShardIds(ShardMoveState *state)
{
	ListCell   *cell;

	foreach(cell, state->shards)
	{
		MoveShard  *moveShard = lfirst(cell);

		for (int half = 0; half < state->pieces.count; half++)
		{
			moveShard->childIds[half] = NextShardId();
			moveShard->childNames[half] = QualifiedShardName(moveShard->relid,
															 moveShard->childIds[half]);
		}
	}
}

/* RunMoveSteps: the steps of an online or blocking move or split */
static void
RunMoveSteps(void *arg)
{
	ShardMoveState *state = arg;

	if (state->mode == MOVE_MODE_BLOCK_WRITES)
	{
		MoveSetUpTarget(state);
		if (state->operation == MOVE_OPERATION_SPLIT && state->inPlace)
			MoveSetUpSource(state);
		MoveBlockingCopyAndCutover(state);
		return;
	}

	MoveSetUpSource(state);
	MoveSetUpTarget(state);
	MoveCopyData(state, true);
	MoveBuildIndexes(state);
	MoveStartReplication(state);
	MoveWaitForLag(state);
	MoveVerify(state, false);
	MoveWaitForLag(state);
	MoveCutover(state);
}

/*
 * MoveObjectName names the replication slot, publication and subscription
 * of a move.  Slots are shared by all databases of a node, which may serve
 * several coordinator databases, so the name carries a hash of this
 * coordinator database's identity: shardext_move_<hash>_<move id>.
 */
static char *
MoveObjectName(int64 moveId)
{
	uint64		identity[2] = {GetSystemIdentifier(), MyDatabaseId};
	uint32		hash = hash_bytes((const unsigned char *) identity, sizeof(identity));

	return psprintf("shardext_move_%08x_" INT64_FORMAT, hash, moveId);
}

/*
 * MoveWasCommitted tells, from a fresh loopback connection, whether the
 * catalog switch of a move committed; used when the acknowledgement of its
 * commit was lost.
 */
bool
MoveWasCommitted(int64 moveId)
{
	NodeConnection *local = OpenLoopbackConnection(false);
	char	   *phase;

	if (local == NULL)
		return false;
	phase = LocalCoordinatorQuery(local,
								  psprintf("SELECT phase FROM shardext.move WHERE move_id = "
										   INT64_FORMAT, moveId));
	CloseDedicatedConnection(local);
	return phase != NULL && strcmp(phase, "cleaning up") == 0;
}

/*
 * CloseMoveConnections closes the connections of a move but the records'
 * loopback connection; with cancel, commands in flight are cancelled first
 * (bounded wait).  Closing the lock connection ends its transaction, which
 * releases the cutover locks.
 */
static void
CloseMoveConnections(ShardMoveState *state, bool cancel)
{
	NodeConnection **connections[] = {&state->lockConn, &state->replication,
		&state->sourceSnapshot, &state->targetSnapshot, &state->sourceConn,
	&state->targetConn};

	for (int i = 0; i < lengthof(connections); i++)
	{
		NodeConnection *conn = *connections[i];

		if (conn == NULL)
			continue;
		if (cancel && conn->queryInProgress)
			(void) CancelRemoteCommand(conn, 2000);
		CloseDedicatedConnection(conn);
		*connections[i] = NULL;
	}
}

/*
 * AbortMove undoes a move that failed before its catalog switch: it ends
 * the loopback transaction (releasing the cutover locks), removes what the
 * move created and records the failure.  Interrupts are held: every wait is
 * bounded.
 */
static void
AbortMove(ShardMoveState *state, ErrorData *edata)
{
	bool		cancelled = edata->sqlerrcode == ERRCODE_QUERY_CANCELED;
	NodeConnection *local = state->local;
	NodeConnection *replacement = NULL;

	HOLD_INTERRUPTS();
	CloseMoveConnections(state, true);
	if (local->queryInProgress)
		(void) CancelRemoteCommand(local, 2000);
	if (PQstatus(local->pgConn) != CONNECTION_OK)
	{
		CloseDedicatedConnection(local);
		replacement = OpenLoopbackConnection(false);
		state->local = replacement;
	}
	if (state->local != NULL)
	{
		RunCleanup(state->local, state->moveId, true, false, 0, false);
		SetMoveStatus(state, cancelled ? "cancelled" : "failed", edata->message);
		if (state->jobId > 0)
			CancelPendingMoves(state->local, state->jobId);
	}
	if (replacement != NULL)
		CloseDedicatedConnection(replacement);
	state->local = local;
	ereport(NOTICE,
			(errmsg("%s: %s; the source was left as it was",
					state->description, cancelled ? "cancelled" : "failed")));
	RESUME_INTERRUPTS();
}

/*
 * FinishMove runs after the catalog switch committed: it drops the
 * replication objects, waits (shardext.move_drop_timeout at most) for the
 * transactions that may still read the source, drops the source and
 * records the move as done.  Failures here are warnings; shardext_cleanup()
 * finishes the job later.
 */
static void
FinishMove(ShardMoveState *state)
{
	ErrorData  *edata;

	/* this session's next statements see the new placements */
	AcceptInvalidationMessages();

	edata = RunInSubtransaction(CleanUpAfterSwitch, state);
	if (edata != NULL)
	{
		SetMoveStatus(state, "done", NULL);
		ereport(WARNING,
				(errmsg("%s was moved, but cleaning up after it failed: %s",
						state->description, edata->message),
				 errhint("Run shardext_cleanup() to remove what is left.")));
	}

	ereport(NOTICE,
			(errmsg("%s: done", state->description)));
}

/*
 * CleanUpAfterSwitch drops what a move no longer needs once the catalog
 * points at the target: the replication objects at once, the source's
 * tables once no older transaction can read them.
 */
static void
CleanUpAfterSwitch(void *arg)
{
	ShardMoveState *state = arg;

	CloseMoveConnections(state, false);
	SetMovePhase(state, "cleaning up");
	MarkDeferredDropsNow(state);
	RunCleanup(state->local, state->moveId, false, false, 0, false);
	WaitForOlderTransactions(state->local, state->moveId, ShardextMoveDropTimeout);
	RunCleanup(state->local, state->moveId, false, true, 0, false);
	SetMoveStatus(state, "done", NULL);
}

/*
 * shardext.move_lock_shards(shard_ids bigint[]) takes the cutover locks of
 * a shard group, in shard id order (the order writers use), for the rest of
 * the calling transaction.
 */
Datum
shardext_move_lock_shards(PG_FUNCTION_ARGS)
{
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *values;
	bool	   *nulls;
	int			count;
	int64	   *ids;

	EnsureShardextAdmin("shardext.move_lock_shards");
	deconstruct_array(array, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &values, &nulls, &count);
	ids = palloc(sizeof(int64) * Max(count, 1));
	for (int i = 0; i < count; i++)
		ids[i] = DatumGetInt64(values[i]);
	LockShardsInOrder(ids, count, ShardCutoverLockMode);
	PG_RETURN_VOID();
}

/*
 * shardext.move_commit_placements(move_id bigint) switches the catalog to
 * the result of a move or split, in the transaction that holds the cutover
 * locks: the placements (or, for a split, the shards), and the records
 * (the target's tables are no longer to be removed on failure, the source's
 * are now to be dropped once no transaction can use them).
 */
Datum
shardext_move_commit_placements(PG_FUNCTION_ARGS)
{
	EnsureShardextAdmin("shardext.move_commit_placements");
	CommitMovedPlacements(PG_GETARG_INT64(0));
	PG_RETURN_VOID();
}

/* the body of shardext.move_commit_placements(); see there */
static void
CommitMovedPlacements(int64 moveId)
{
	MoveRecord	move;
	int32		colocationId = 0;

	ReadRunningMoveRecord(moveId, &move);
	for (int i = 0; i < move.shardCount; i++)
		colocationId = SwitchMovedShard(&move, i);

	if (move.split)
		IncrementColocationShardCount(colocationId, move.pieces.count - 1);
	MarkMoveSwitched(moveId);
}


/*
 * SwitchMovedShard switches the i-th shard of a move in the catalog: its
 * placement moves to the target (a split replaces the shard by its halves
 * there), and the source's table is recorded to be dropped once no
 * transaction can still read it.  Returns the colocation group of the
 * shard's table.
 */
static int32
SwitchMovedShard(MoveRecord *move, int i)
{
	int64		shardId = DatumGetInt64(move->shardIds[i]);
	DistTableCacheEntry *entry;
	ShardInterval *shard = FindShardById(shardId, &entry);
	Oid			relid;
	int32		colocationId;
	char	   *shardName;
	bool		placed = false;

	if (shard != NULL)
		for (int j = 0; j < shard->placementCount; j++)
			placed |= shard->placementNodeIds[j] == move->sourceNodeId;
	if (shard == NULL || !placed)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shard " INT64_FORMAT " is no longer on node %d", shardId,
						move->sourceNodeId),
				 errdetail("The table was dropped or changed during the move.")));
	relid = entry->relid;
	colocationId = entry->colocationId;
	shardName = QualifiedShardName(relid, shardId);

	if (!move->split)
	{
		DeletePlacement(shardId, move->sourceNodeId);
		InsertPlacement(shardId, move->targetNodeId);
	}
	else
	{
		int			last = move->pieces.count - 1;

		if (move->pieces.hashMax[last - 1] < shard->hashMin ||
			move->pieces.hashMax[last - 1] >= shard->hashMax)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("shard " INT64_FORMAT " no longer has the range the split cuts",
							shardId)));
		move->pieces.hashMin[0] = shard->hashMin;
		move->pieces.hashMax[last] = shard->hashMax;
		DeleteShard(shardId);
		for (int piece = 0; piece <= last; piece++)
		{
			int64		newId = DatumGetInt64(move->newShardIds[piece * move->shardCount + i]);

			InsertShard(newId, relid, true, move->pieces.hashMin[piece],
						move->pieces.hashMax[piece]);
			InsertPlacement(newId, move->targetNodeId);
		}
		InvalidateDistTableCache(relid);
	}

	/* the source's table goes once no transaction can still read it */
	RecordDeferredShardDrop(move->moveId, move->sourceNodeId, shardName, shardId);
	return colocationId;
}
