/*-------------------------------------------------------------------------
 *
 * shard_copy.c
 *	  Streams rows into the shards of a distributed or reference table with
 *	  COPY ... FROM STDIN on the workers.
 *
 * Rows are routed by the hash of their distribution column and collected
 * in a buffer per shard, in COPY text format.  A full buffer is sent to each
 * placement of its shard over one of up to connectionsPerNode connections
 * per node; a connection keeps its COPY open while later buffers go to the
 * same shard and switches shards only when it must.  Sends do not wait for
 * the workers, so all nodes load in parallel with the routing.  Every
 * connection takes part in the local transaction (remote_xact.c), so the
 * rows appear atomically at commit or not at all.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "shardext/connection.h"
#include "shardext/deparser.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"
#include "shardext/shard_copy.h"

/* bytes collected per shard before they are sent */
#define SHARD_COPY_BUFFER_SIZE (256 * 1024)

typedef struct CopyConnection
{
	NodeConnection *conn;
	int64		activeShardId;	/* shard whose COPY is open, 0 if none */
} CopyConnection;

typedef struct NodeCopyState
{
	int32		nodeId;
	int			count;			/* connections opened so far */
	int			nextVictim;		/* round-robin choice when all are busy */
	CopyConnection *connections;
} NodeCopyState;

struct ShardCopyState
{
	Oid			relid;
	DistTableCacheEntry *entry;
	char	   *columnList;
	int			connectionsPerNode;
	StringInfoData *buffers;	/* one per shard, by shard index */
	List	   *nodeStates;		/* NodeCopyState * */
	int			natts;
	bool	   *columnIncluded;
	FmgrInfo   *outputFunctions;
	MemoryContext rowContext;	/* reset after every row */
	uint64		rowCount;
};

static void FlushShardBuffer(ShardCopyState *state, ShardInterval *shard);
static CopyConnection *ConnectionForShard(ShardCopyState *state, int32 nodeId,
										  int64 shardId);
static void StartCopy(ShardCopyState *state, CopyConnection *copyConn, int64 shardId);
static void FinishCopy(CopyConnection *copyConn);

/*
 * BeginShardCopy prepares to stream rows into the shards of relid.  The
 * rows must contain every live, non-generated column of the table.
 */
ShardCopyState *
BeginShardCopy(Oid relid, int connectionsPerNode)
{
	ShardCopyState *state = palloc0(sizeof(ShardCopyState));
	Relation	rel = relation_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);

	state->relid = relid;
	state->entry = GetDistTableCacheEntry(relid);
	if (state->entry == NULL)
		elog(ERROR, "relation %u is not distributed", relid);
	state->columnList = ColumnListString(relid);
	state->connectionsPerNode = Max(connectionsPerNode, 1);
	state->buffers = palloc0(state->entry->shardCount * sizeof(StringInfoData));
	for (int i = 0; i < state->entry->shardCount; i++)
		initStringInfo(&state->buffers[i]);

	state->natts = desc->natts;
	state->columnIncluded = palloc0(desc->natts * sizeof(bool));
	state->outputFunctions = palloc0(desc->natts * sizeof(FmgrInfo));
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);
		Oid			outputFunction;
		bool		isVarlena;

		if (attr->attisdropped || attr->attgenerated)
			continue;
		state->columnIncluded[i] = true;
		getTypeOutputInfo(attr->atttypid, &outputFunction, &isVarlena);
		fmgr_info(outputFunction, &state->outputFunctions[i]);
	}
	relation_close(rel, AccessShareLock);

	state->rowContext = AllocSetContextCreate(CurrentMemoryContext,
											  "shardext copy row",
											  ALLOCSET_DEFAULT_SIZES);
	return state;
}

/*
 * AppendCopyTextValue appends a value escaped for COPY's text format.
 */
void
AppendCopyTextValue(StringInfo buf, const char *value)
{
	const char *start = value;
	const char *p;

	for (p = value; *p; p++)
	{
		char		escaped;

		switch (*p)
		{
			case '\\':
				escaped = '\\';
				break;
			case '\n':
				escaped = 'n';
				break;
			case '\r':
				escaped = 'r';
				break;
			case '\t':
				escaped = 't';
				break;
			default:
				continue;
		}
		appendBinaryStringInfo(buf, start, p - start);
		appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, escaped);
		start = p + 1;
	}
	appendBinaryStringInfo(buf, start, p - start);
}

/*
 * ShardCopySendSlot routes one row (a slot of the table's row type) to its
 * shard.  A NULL distribution column is an error: such a row has no shard.
 */
void
ShardCopySendSlot(ShardCopyState *state, TupleTableSlot *slot)
{
	DistTableCacheEntry *entry = state->entry;
	ShardInterval *shard;
	StringInfo	buf;
	bool		first = true;
	MemoryContext oldContext;

	slot_getallattrs(slot);

	if (entry->method == DISTRIBUTE_BY_HASH)
	{
		int			index = entry->distAttnum - 1;

		if (slot->tts_isnull[index])
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("cannot store a row with NULL in distribution column \"%s\" of \"%s\"",
							get_attname(state->relid, entry->distAttnum, false),
							get_rel_name(state->relid)),
					 errhint("Every row of a distributed table needs a distribution "
							 "column value to choose its shard.")));
		shard = FindShardForValue(entry, slot->tts_values[index]);
	}
	else
		shard = &entry->shards[0];

	buf = &state->buffers[shard->shardIndex];
	oldContext = MemoryContextSwitchTo(state->rowContext);
	for (int i = 0; i < state->natts; i++)
	{
		if (!state->columnIncluded[i])
			continue;
		if (!first)
			appendStringInfoChar(buf, '\t');
		first = false;
		if (slot->tts_isnull[i])
			appendStringInfoString(buf, "\\N");
		else
			AppendCopyTextValue(buf, OutputFunctionCall(&state->outputFunctions[i],
														slot->tts_values[i]));
	}
	appendStringInfoChar(buf, '\n');
	MemoryContextSwitchTo(oldContext);
	MemoryContextReset(state->rowContext);

	state->rowCount++;
	if (buf->len >= SHARD_COPY_BUFFER_SIZE)
		FlushShardBuffer(state, shard);
}

/*
 * ShardCopySendLine queues a line that is already in COPY text format
 * (ending in a newline) for the given shard.
 */
void
ShardCopySendLine(ShardCopyState *state, ShardInterval *shard,
				  const char *line, int length)
{
	StringInfo	buf = &state->buffers[shard->shardIndex];

	appendBinaryStringInfo(buf, line, length);
	state->rowCount++;
	if (buf->len >= SHARD_COPY_BUFFER_SIZE)
		FlushShardBuffer(state, shard);
}

/* sends a shard's buffer to every placement of the shard */
static void
FlushShardBuffer(ShardCopyState *state, ShardInterval *shard)
{
	StringInfo	buf = &state->buffers[shard->shardIndex];

	if (buf->len == 0)
		return;

	for (int i = 0; i < shard->placementCount; i++)
	{
		CopyConnection *copyConn = ConnectionForShard(state,
													  shard->placementNodeIds[i],
													  shard->shardId);

		SendRemoteCopyData(copyConn->conn, buf->data, buf->len);
	}
	resetStringInfo(buf);
}

/*
 * ConnectionForShard returns a connection of nodeId with a COPY into the
 * shard open: the one that already has it, else an idle or new one, else
 * one whose COPY is ended to make room.
 */
static CopyConnection *
ConnectionForShard(ShardCopyState *state, int32 nodeId, int64 shardId)
{
	NodeCopyState *nodeState = NULL;
	ListCell   *cell;
	CopyConnection *copyConn;

	foreach(cell, state->nodeStates)
	{
		if (((NodeCopyState *) lfirst(cell))->nodeId == nodeId)
			nodeState = lfirst(cell);
	}
	if (nodeState == NULL)
	{
		nodeState = palloc0(sizeof(NodeCopyState));
		nodeState->nodeId = nodeId;
		nodeState->connections = palloc0(state->connectionsPerNode *
										 sizeof(CopyConnection));
		state->nodeStates = lappend(state->nodeStates, nodeState);
	}

	for (int i = 0; i < nodeState->count; i++)
	{
		if (nodeState->connections[i].activeShardId == shardId)
			return &nodeState->connections[i];
	}
	for (int i = 0; i < nodeState->count; i++)
	{
		if (nodeState->connections[i].activeShardId == 0)
		{
			StartCopy(state, &nodeState->connections[i], shardId);
			return &nodeState->connections[i];
		}
	}
	if (nodeState->count < state->connectionsPerNode)
	{
		copyConn = &nodeState->connections[nodeState->count];
		copyConn->conn = GetNodeConnectionByIndex(nodeId, nodeState->count);
		nodeState->count++;
		StartCopy(state, copyConn, shardId);
		return copyConn;
	}

	copyConn = &nodeState->connections[nodeState->nextVictim];
	nodeState->nextVictim = (nodeState->nextVictim + 1) % nodeState->count;
	FinishCopy(copyConn);
	StartCopy(state, copyConn, shardId);
	return copyConn;
}

/* opens COPY <shard> FROM STDIN on a connection, inside the transaction */
static void
StartCopy(ShardCopyState *state, CopyConnection *copyConn, int64 shardId)
{
	NodeConnection *conn = copyConn->conn;
	PGresult   *result;
	char	   *command;

	RemoteTransactionBegin(conn);
	RemoteTransactionMarkModified(conn);

	command = psprintf("COPY %s %s FROM STDIN",
					   QualifiedShardName(state->relid, shardId), state->columnList);
	SendRemoteCommand(conn, command);
	result = GetRemoteResult(conn);
	if (result == NULL || PQresultStatus(result) != PGRES_COPY_IN)
	{
		/* read the rest so the connection is idle before we throw */
		PGresult   *extra;

		while ((extra = GetRemoteResult(conn)) != NULL)
			PQclear(extra);
		ReportRemoteError(conn, result, ERROR, command);
	}
	PQclear(result);
	copyConn->activeShardId = shardId;
}

/* ends the COPY open on a connection and checks that it succeeded */
static void
FinishCopy(CopyConnection *copyConn)
{
	NodeConnection *conn = copyConn->conn;
	PGresult   *result;
	PGresult   *error = NULL;

	if (copyConn->activeShardId == 0)
		return;

	EndRemoteCopy(conn, NULL);
	while ((result = GetRemoteResult(conn)) != NULL)
	{
		if (PQresultStatus(result) != PGRES_COMMAND_OK && error == NULL)
		{
			error = result;
			continue;
		}
		PQclear(result);
	}
	copyConn->activeShardId = 0;
	if (error != NULL)
		ReportRemoteError(conn, error, ERROR, "COPY");
}

/*
 * EndShardCopy sends what is left, ends every COPY and checks the results.
 * Returns the number of rows sent.
 */
uint64
EndShardCopy(ShardCopyState *state)
{
	ListCell   *cell;

	for (int i = 0; i < state->entry->shardCount; i++)
		FlushShardBuffer(state, &state->entry->shards[i]);

	/* end all COPYs before waiting for any, so the nodes finish together */
	foreach(cell, state->nodeStates)
	{
		NodeCopyState *nodeState = lfirst(cell);

		for (int i = 0; i < nodeState->count; i++)
		{
			if (nodeState->connections[i].activeShardId != 0)
				EndRemoteCopy(nodeState->connections[i].conn, NULL);
		}
	}
	foreach(cell, state->nodeStates)
	{
		NodeCopyState *nodeState = lfirst(cell);

		for (int i = 0; i < nodeState->count; i++)
		{
			CopyConnection *copyConn = &nodeState->connections[i];
			PGresult   *result;
			PGresult   *error = NULL;

			if (copyConn->activeShardId == 0)
				continue;
			while ((result = GetRemoteResult(copyConn->conn)) != NULL)
			{
				if (PQresultStatus(result) != PGRES_COMMAND_OK && error == NULL)
				{
					error = result;
					continue;
				}
				PQclear(result);
			}
			copyConn->activeShardId = 0;
			if (error != NULL)
				ReportRemoteError(copyConn->conn, error, ERROR, "COPY");
		}
	}

	MemoryContextDelete(state->rowContext);
	return state->rowCount;
}
