/*-------------------------------------------------------------------------
 *
 * shard_copy.c
 *	  Streams rows into the shards of a distributed or reference table with
 *	  COPY ... FROM STDIN on the workers.
 *
 * Rows are routed by the hash of their distribution column and collected
 * in a buffer per shard: either rows of the table's type (formatted here in
 * COPY text format) or input lines forwarded as they came (then the remote
 * COPY gets the input's format options).  A full buffer is sent to each
 * placement of its shard over one of up to connectionsPerNode connections
 * per node; a connection keeps its COPY open while later buffers go to the
 * same shard and switches shards only when it must -- on a node with more
 * shards than connections a COPY is ended right after each buffer, so the
 * node finishes it while other rows are routed.  Sends do not wait for
 * the workers: what a socket does not take yet stays in libpq's buffer and
 * is pushed on while rows are routed (up to SHARD_COPY_MAX_UNSENT bytes in
 * all), so all nodes load in parallel with the routing.  Every
 * connection takes part in the local transaction (remote_xact.c), so the
 * rows appear atomically at commit or not at all.
 *
 * Several connections per node are used only when the node has no
 * connection in the transaction yet and the COPY is not inside a
 * transaction block: writes over different connections of one node are in
 * different remote transactions, which must not see (or wait for) each
 * other.
 *
 * Each remote COPY remembers the input line of every row it received
 * (delta-encoded, about a byte per row), so that an error a worker reports
 * for "line K" of its COPY names the input line, as PostgreSQL would.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "shardext/connection.h"
#include "shardext/deparser.h"
#include "shardext/distributed_plan.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"
#include "shardext/resource_lock.h"
#include "shardext/shard_copy.h"

/*
 * Bytes collected per shard before they are sent: large, because sending to
 * a shard whose COPY is not open on a connection means ending another COPY
 * there (a round trip that waits for the worker); bounded in total.
 */
#define SHARD_COPY_MAX_BUFFER_SIZE (1024 * 1024)
#define SHARD_COPY_MIN_BUFFER_SIZE (64 * 1024)
#define SHARD_COPY_TOTAL_BUFFER_SIZE (32 * 1024 * 1024)

/*
 * Sent buffers stay in libpq's output buffers until the sockets take them
 * (the workers read as fast as they insert): routing goes on meanwhile, up
 * to this many bytes not yet sent over all connections.  Every
 * SHARD_COPY_PUSH_ROWS rows, what the sockets take is pushed on.
 */
#define SHARD_COPY_MAX_UNSENT (32 * 1024 * 1024)
#define SHARD_COPY_PUSH_ROWS 1024

/* input line numbers of the rows a buffer or a remote COPY holds */
typedef struct LineMap
{
	StringInfoData deltas;		/* varint-encoded differences */
	uint64		last;
	uint64		count;
} LineMap;

typedef struct CopyConnection
{
	NodeConnection *conn;
	int64		activeShardId;	/* shard whose COPY is open, 0 if none */
	bool		ending;			/* that COPY was ended, its result is to come */
	int64		unsent;			/* bytes queued that libpq may still hold */
	LineMap		lines;			/* rows sent in that COPY */
} CopyConnection;

typedef struct NodeCopyState
{
	int32		nodeId;
	int			count;			/* connections opened so far */
	int			maxCount;		/* connections it may use */
	int			nextVictim;		/* round-robin choice when all are busy */
	int			shardCount;		/* shards with a placement on the node */
	CopyConnection *connections;
} NodeCopyState;

struct ShardCopyState
{
	Oid			relid;
	char	   *relname;
	DistTableCacheEntry *entry;
	char	   *columnList;
	char	   *copyOptions;	/* "WITH (...)" of the remote COPY, or "" */
	char	   *setCommand;		/* sent before each remote COPY, or NULL */
	char	   *resetCommand;	/* sent to each connection at the end, or NULL */
	int			connectionsPerNode;
	StringInfoData *buffers;	/* one per shard, by shard index */
	LineMap    *bufferLines;	/* the same, line numbers */
	List	   *nodeStates;		/* NodeCopyState * */
	int			natts;
	bool	   *columnIncluded;
	FmgrInfo   *outputFunctions;
	MemoryContext rowContext;	/* reset after every row */
	MemoryContext context;		/* lives as long as the COPY */
	uint64		rowCount;
	int			bufferSize;		/* flush a shard's buffer at this size */
	int		   *flushAt;		/* per shard: its next flush, staggered */
	int64		unsent;			/* sum of the connections' unsent bytes */
	bool		forwardsLines;	/* rows are input lines as they came */
};

static DistTableCacheEntry *LockShardsForCopy(Oid relid);
static void FlushShardBuffer(ShardCopyState *state, ShardInterval *shard);
static void EndCopyEarly(ShardCopyState *state, CopyConnection *copyConn,
						 ShardInterval *shard);
static void PushCopyOutput(ShardCopyState *state, bool sendAll);
static CopyConnection *MostUnsentConnection(ShardCopyState *state);
static NodeCopyState *NodeStateFor(ShardCopyState *state, int32 nodeId);
static CopyConnection *ConnectionForShard(ShardCopyState *state, int32 nodeId,
										  int64 shardId);
static void StartCopy(ShardCopyState *state, CopyConnection *copyConn, int64 shardId);
static void FinishCopy(ShardCopyState *state, CopyConnection *copyConn);
static void ReadCopyResult(ShardCopyState *state, CopyConnection *copyConn);
static void ReportCopyError(ShardCopyState *state, CopyConnection *copyConn,
							PGresult *result);
static void LineMapAdd(LineMap *map, uint64 line);
static void LineMapAppend(LineMap *target, LineMap *source);
static uint64 LineMapGet(LineMap *map, uint64 index);
static uint64 LineMapNextDelta(const unsigned char **p);
static void LineMapReset(LineMap *map);

/*
 * LockShardsForCopy takes the write lock of every shard of the table, in
 * shard id order, before any row is routed, and returns the table's cache
 * entry as it is once they are held: a shard move or split waits for the
 * COPY to commit, and a COPY that waited for one routes by the new shards.
 */
static DistTableCacheEntry *
LockShardsForCopy(Oid relid)
{
	for (;;)
	{
		DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);
		int64	   *ids;
		int			count;
		bool		changed = false;
		LOCKMODE	mode;

		if (entry == NULL)
			elog(ERROR, "relation %u is not distributed", relid);
		count = entry->shardCount;
		mode = entry->method == DISTRIBUTE_BY_REFERENCE ?
			ShardMultiWriteLockMode : ShardWriteLockMode;
		ids = palloc(sizeof(int64) * Max(count, 1));
		for (int i = 0; i < count; i++)
			ids[i] = entry->shards[i].shardId;
		LockShardsInOrder(ids, count, mode);

		entry = GetDistTableCacheEntry(relid);
		if (entry == NULL || entry->shardCount != count)
			changed = true;
		for (int i = 0; !changed && i < count; i++)
		{
			bool		found = false;

			for (int j = 0; j < count; j++)
				found |= entry->shards[i].shardId == ids[j];
			changed = !found;
		}
		pfree(ids);
		if (!changed)
			return entry;
	}
}

/*
 * BeginShardCopy prepares to stream rows into the shards of relid.
 * columnList is the remote COPY's "(a, b)" or NULL for every live,
 * non-generated column (then rows sent as slots must have them all);
 * copyOptions is the remote COPY's WITH clause, or NULL for text format.
 */
ShardCopyState *
BeginShardCopy(Oid relid, int connectionsPerNode, const char *columnList,
			   const char *copyOptions)
{
	ShardCopyState *state = palloc0(sizeof(ShardCopyState));
	Relation	rel = relation_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);

	state->context = CurrentMemoryContext;
	state->relid = relid;
	state->relname = pstrdup(RelationGetRelationName(rel));
	state->entry = LockShardsForCopy(relid);
	state->columnList = columnList ? pstrdup(columnList) : ColumnListString(relid);
	state->forwardsLines = (copyOptions != NULL);
	state->copyOptions = copyOptions ? pstrdup(copyOptions) : "";
	state->connectionsPerNode = Max(connectionsPerNode, 1);
	state->bufferSize = Max(SHARD_COPY_MIN_BUFFER_SIZE,
							Min(SHARD_COPY_MAX_BUFFER_SIZE,
								SHARD_COPY_TOTAL_BUFFER_SIZE / Max(state->entry->shardCount, 1)));
	state->buffers = palloc0(state->entry->shardCount * sizeof(StringInfoData));
	state->bufferLines = palloc0(state->entry->shardCount * sizeof(LineMap));
	state->flushAt = palloc(state->entry->shardCount * sizeof(int));
	for (int i = 0; i < state->entry->shardCount; i++)
	{
		initStringInfo(&state->buffers[i]);
		initStringInfo(&state->bufferLines[i].deltas);

		/*
		 * Hashed rows fill all buffers at the same pace: first flushes at
		 * staggered sizes keep them from all going out at once (the nodes
		 * idle while the buffers fill, then get everything in a burst).
		 */
		state->flushAt[i] = (int) ((int64) state->bufferSize * (i + 1) /
								   state->entry->shardCount);
	}

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

	/* the workers read values (ours or the input's) as this session would */
	FormatSettingCommands(&state->setCommand, &state->resetCommand);
	return state;
}

/*
 * ShardCopyFreeze makes the shards' COPYs load frozen rows (COPY ...
 * FREEZE).  The caller has checked PostgreSQL's conditions on the local
 * table: it was created or truncated in the current subtransaction, and
 * so were its shards, by the same remote transactions this COPY uses.
 */
void
ShardCopyFreeze(ShardCopyState *state)
{
	if (state->copyOptions[0] == '\0')
		state->copyOptions = "WITH (FREEZE)";
	else
	{
		size_t		length = strlen(state->copyOptions);
		char	   *options = palloc(length + sizeof(", FREEZE"));

		/* "WITH (..." + ", FREEZE" + ")" */
		memcpy(options, state->copyOptions, length - 1);
		strcpy(options + length - 1, ", FREEZE)");
		state->copyOptions = options;
	}
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
 * ShardCopyShardForValue returns the shard of a row, given its
 * distribution column value; a NULL value is an error: such a row has no
 * shard.  Reference tables have a single shard.
 */
ShardInterval *
ShardCopyShardForValue(ShardCopyState *state, Datum value, bool isnull)
{
	DistTableCacheEntry *entry = state->entry;

	if (entry->method != DISTRIBUTE_BY_HASH)
		return &entry->shards[0];
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("cannot store a row with NULL in distribution column \"%s\" of \"%s\"",
						get_attname(state->relid, entry->distAttnum, false),
						state->relname),
				 errhint("Every row of a distributed table needs a distribution "
						 "column value to choose its shard.")));
	return FindShardForValue(entry, value);
}

/*
 * ShardCopySendSlot routes one row (a slot of the table's row type) to its
 * shard.  line is its input line number, for error messages (0: none).
 */
void
ShardCopySendSlot(ShardCopyState *state, TupleTableSlot *slot, uint64 line)
{
	DistTableCacheEntry *entry = state->entry;
	ShardInterval *shard;
	StringInfo	buf;
	bool		first = true;
	MemoryContext oldContext;

	slot_getallattrs(slot);

	if (entry->method == DISTRIBUTE_BY_HASH)
		shard = ShardCopyShardForValue(state, slot->tts_values[entry->distAttnum - 1],
									   slot->tts_isnull[entry->distAttnum - 1]);
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

	LineMapAdd(&state->bufferLines[shard->shardIndex], line);
	state->rowCount++;
	if (buf->len >= state->flushAt[shard->shardIndex])
		FlushShardBuffer(state, shard);
	else if (state->unsent > 0 && state->rowCount % SHARD_COPY_PUSH_ROWS == 0)
		PushCopyOutput(state, false);
}

/*
 * ShardCopySendLine queues an input line (without its end of line) for the
 * given shard; the remote COPY reads it with the input's format options.
 */
void
ShardCopySendLine(ShardCopyState *state, ShardInterval *shard,
				  const char *line, int length, uint64 lineNumber)
{
	StringInfo	buf = &state->buffers[shard->shardIndex];

	appendBinaryStringInfo(buf, line, length);
	appendStringInfoChar(buf, '\n');
	LineMapAdd(&state->bufferLines[shard->shardIndex], lineNumber);
	state->rowCount++;
	if (buf->len >= state->flushAt[shard->shardIndex])
		FlushShardBuffer(state, shard);
	else if (state->unsent > 0 && state->rowCount % SHARD_COPY_PUSH_ROWS == 0)
		PushCopyOutput(state, false);
}

/* sends a shard's buffer to every placement of the shard */
static void
FlushShardBuffer(ShardCopyState *state, ShardInterval *shard)
{
	StringInfo	buf = &state->buffers[shard->shardIndex];
	LineMap    *lines = &state->bufferLines[shard->shardIndex];
	MemoryContext oldContext;

	if (buf->len == 0)
		return;

	/* callers may be in a per-row context; connection state must outlive it */
	oldContext = MemoryContextSwitchTo(state->context);

	for (int i = 0; i < shard->placementCount; i++)
	{
		CopyConnection *copyConn = ConnectionForShard(state,
													  shard->placementNodeIds[i],
													  shard->shardId);

		SendRemoteCopyData(copyConn->conn, buf->data, buf->len);
		copyConn->unsent += buf->len;
		state->unsent += buf->len;
		LineMapAppend(&copyConn->lines, lines);
		EndCopyEarly(state, copyConn, shard);
	}
	resetStringInfo(buf);
	LineMapReset(lines);
	state->flushAt[shard->shardIndex] = state->bufferSize;
	PushCopyOutput(state, false);
	MemoryContextSwitchTo(oldContext);
}

/*
 * PushCopyOutput hands the sockets what libpq holds for them, without
 * waiting; while more than SHARD_COPY_MAX_UNSENT bytes are left (with
 * sendAll, any), it waits until the connection holding the most has sent
 * everything.
 */
static void
PushCopyOutput(ShardCopyState *state, bool sendAll)
{
	ListCell   *cell;

	foreach(cell, state->nodeStates)
	{
		NodeCopyState *nodeState = lfirst(cell);

		for (int i = 0; i < nodeState->count; i++)
		{
			CopyConnection *copyConn = &nodeState->connections[i];

			if (copyConn->unsent > 0 && TryFlushRemoteOutput(copyConn->conn))
			{
				state->unsent -= copyConn->unsent;
				copyConn->unsent = 0;
			}
		}
	}
	while (state->unsent > (sendAll ? 0 : SHARD_COPY_MAX_UNSENT))
	{
		CopyConnection *copyConn = MostUnsentConnection(state);

		WaitForRemoteSocket(copyConn->conn, true);
		state->unsent -= copyConn->unsent;
		copyConn->unsent = 0;
	}
}

/* the connection with the most bytes that may not have been sent yet */
static CopyConnection *
MostUnsentConnection(ShardCopyState *state)
{
	CopyConnection *most = NULL;
	ListCell   *cell;

	foreach(cell, state->nodeStates)
	{
		NodeCopyState *nodeState = lfirst(cell);

		for (int i = 0; i < nodeState->count; i++)
		{
			if (most == NULL || nodeState->connections[i].unsent > most->unsent)
				most = &nodeState->connections[i];
		}
	}
	return most;
}

/*
 * EndCopyEarly ends the COPY of a single-placement shard right after a
 * buffer went out when its node has more shards than the COPY may use
 * connections: the next buffer for that node most likely goes to another
 * shard, which would have to end this COPY and wait for the node to finish
 * its rows; ended now, the node finishes while rows for the others are
 * routed, and the connection is usually free again by then.
 */
static void
EndCopyEarly(ShardCopyState *state, CopyConnection *copyConn, ShardInterval *shard)
{
	NodeCopyState *nodeState = NodeStateFor(state, shard->placementNodeIds[0]);

	if (shard->placementCount != 1 || nodeState->shardCount <= nodeState->maxCount)
		return;
	QueueRemoteCopyEnd(copyConn->conn);
	copyConn->ending = true;
}

/* NodeStateFor returns the per-node state, creating it on first use */
static NodeCopyState *
NodeStateFor(ShardCopyState *state, int32 nodeId)
{
	NodeCopyState *nodeState;
	ListCell   *cell;

	foreach(cell, state->nodeStates)
	{
		if (((NodeCopyState *) lfirst(cell))->nodeId == nodeId)
			return lfirst(cell);
	}

	nodeState = palloc0(sizeof(NodeCopyState));
	nodeState->nodeId = nodeId;
	nodeState->maxCount = state->connectionsPerNode;
	for (int i = 0; i < state->entry->shardCount; i++)
	{
		ShardInterval *shard = &state->entry->shards[i];

		for (int p = 0; p < shard->placementCount; p++)
		{
			if (shard->placementNodeIds[p] == nodeId)
				nodeState->shardCount++;
		}
	}

	/* see the file header */
	if (nodeState->maxCount > 1 &&
		(IsTransactionBlock() || NodeHasOtherConnectionInTransaction(nodeId, -1)))
		nodeState->maxCount = 1;
	if (NodeHasOtherConnectionInTransaction(nodeId, 0) && nodeState->maxCount == 1)
	{
		WorkerNode *node = GetWorkerNode(nodeId);

		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("cannot COPY into table \"%s\" on node %s:%d after a parallel "
						"operation in the same transaction", state->relname,
						node->host, node->port),
				 errhint("Run the COPY in its own transaction.")));
	}
	nodeState->connections = palloc0(nodeState->maxCount * sizeof(CopyConnection));
	for (int i = 0; i < nodeState->maxCount; i++)
		initStringInfo(&nodeState->connections[i].lines.deltas);
	state->nodeStates = lappend(state->nodeStates, nodeState);
	return nodeState;
}

/*
 * ConnectionForShard returns a connection of nodeId with a COPY into the
 * shard open: the one that already has it, else an idle or new one, else
 * one whose COPY is ended to make room.
 */
static CopyConnection *
ConnectionForShard(ShardCopyState *state, int32 nodeId, int64 shardId)
{
	NodeCopyState *nodeState = NodeStateFor(state, nodeId);
	CopyConnection *copyConn;

	for (int i = 0; i < nodeState->count; i++)
	{
		if (nodeState->connections[i].activeShardId == shardId &&
			!nodeState->connections[i].ending)
			return &nodeState->connections[i];
	}
	for (int i = 0; i < nodeState->count; i++)
	{
		copyConn = &nodeState->connections[i];
		/* free, or its ended COPY has finished (see EndCopyEarly) */
		if (copyConn->activeShardId == 0 ||
			(copyConn->ending && RemoteResultReady(copyConn->conn)))
		{
			FinishCopy(state, copyConn);
			StartCopy(state, copyConn, shardId);
			return copyConn;
		}
	}
	if (nodeState->count < nodeState->maxCount)
	{
		NodeConnection *conn;

		/* more than one connection only while the node's shared pool has room */
		if (nodeState->count == 0)
			conn = GetNodeConnectionByIndex(nodeId, 0);
		else
			conn = GetOptionalNodeConnection(nodeId, nodeState->count);
		if (conn != NULL)
		{
			copyConn = &nodeState->connections[nodeState->count];
			copyConn->conn = conn;
			nodeState->count++;
			StartCopy(state, copyConn, shardId);
			return copyConn;
		}
		nodeState->maxCount = nodeState->count;
	}

	copyConn = &nodeState->connections[nodeState->nextVictim];
	nodeState->nextVictim = (nodeState->nextVictim + 1) % nodeState->count;
	FinishCopy(state, copyConn);
	StartCopy(state, copyConn, shardId);
	return copyConn;
}

/* opens COPY <shard> FROM STDIN on a connection, inside the transaction */
static void
StartCopy(ShardCopyState *state, CopyConnection *copyConn, int64 shardId)
{
	NodeConnection *conn = copyConn->conn;
	char	   *command;

	RemoteTransactionBegin(conn);
	RemoteTransactionMarkModified(conn);

	command = psprintf("%sCOPY %s %s FROM STDIN %s",
					   state->setCommand ? state->setCommand : "",
					   QualifiedShardName(state->relid, shardId), state->columnList,
					   state->copyOptions);
	BeginRemoteCopy(conn, command, PGRES_COPY_IN);
	copyConn->activeShardId = shardId;
	LineMapReset(&copyConn->lines);
}

/* ends the COPY open on a connection and checks that it succeeded */
static void
FinishCopy(ShardCopyState *state, CopyConnection *copyConn)
{
	if (copyConn->activeShardId == 0)
		return;
	if (!copyConn->ending)
		QueueRemoteCopyEnd(copyConn->conn);
	ReadCopyResult(state, copyConn);
}

/* reads the result of an ended COPY; a remote error is rethrown */
static void
ReadCopyResult(ShardCopyState *state, CopyConnection *copyConn)
{
	PGresult   *error;

	/* waiting for the result sends what was queued */
	PQclear(ReadRemoteResults(copyConn->conn, &error));
	state->unsent -= copyConn->unsent;
	copyConn->unsent = 0;
	copyConn->activeShardId = 0;
	copyConn->ending = false;
	if (error != NULL)
		ReportCopyError(state, copyConn, error);
}

/*
 * ReportCopyError rethrows a worker's COPY error with its SQLSTATE and
 * messages; its context "COPY <shard>, line K..." becomes "COPY <table>,
 * line N..." with N the input line of that row.
 */
static void
ReportCopyError(ShardCopyState *state, CopyConnection *copyConn, PGresult *result)
{
	const char *sqlstate = PQresultErrorField(result, PG_DIAG_SQLSTATE);
	const char *primary = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
	const char *detail = PQresultErrorField(result, PG_DIAG_MESSAGE_DETAIL);
	const char *hint = PQresultErrorField(result, PG_DIAG_MESSAGE_HINT);
	const char *context = PQresultErrorField(result, PG_DIAG_CONTEXT);
	char	   *copyContext = NULL;
	char	   *otherContext = NULL;
	int			code = ERRCODE_CONNECTION_FAILURE;
	NodeConnection *conn = copyConn->conn;

	if (sqlstate != NULL && strlen(sqlstate) == 5)
		code = MAKE_SQLSTATE(sqlstate[0], sqlstate[1], sqlstate[2],
							 sqlstate[3], sqlstate[4]);
	if (context != NULL)
	{
		const char *copy = strstr(context, "COPY ");
		const char *line = copy ? strstr(copy, ", line ") : NULL;

		if (line != NULL)
		{
			char	   *end;
			uint64		k = strtou64(line + 7, &end, 10);
			uint64		inputLine = (k >= 1 && k <= copyConn->lines.count) ?
				LineMapGet(&copyConn->lines, k - 1) : 0;
			const char *lineEnd = strchr(end, '\n');

			/* a row we formatted is not the input line: do not quote it */
			if (!state->forwardsLines && strncmp(end, ": \"", 3) == 0)
				lineEnd = end;

			if (inputLine > 0)
				copyContext = psprintf("COPY %s, line " UINT64_FORMAT "%.*s", state->relname,
									   inputLine,
									   lineEnd ? (int) (lineEnd - end) : (int) strlen(end),
									   end);
			if (copy > context)
				otherContext = pnstrdup(context, copy - context);
		}
		else
			otherContext = pstrdup(context);
	}
	primary = primary ? pstrdup(primary) : pchomp(PQerrorMessage(conn->pgConn));
	detail = detail ? pstrdup(detail) : NULL;
	hint = hint ? pstrdup(hint) : NULL;
	PQclear(result);

	ereport(ERROR,
			(errcode(code),
			 errmsg_internal("%s", primary),
			 detail ? errdetail_internal("%s", detail) : 0,
			 hint ? errhint("%s", hint) : 0,
			 otherContext ? errcontext("%s", pchomp(otherContext)) : 0,
			 copyContext ? errcontext("%s", copyContext) : 0,
			 errcontext("while executing command on %s:%d", conn->host, conn->port)));
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
			if (nodeState->connections[i].activeShardId != 0 &&
				!nodeState->connections[i].ending)
			{
				QueueRemoteCopyEnd(nodeState->connections[i].conn);
				nodeState->connections[i].ending = true;
			}
		}
	}
	PushCopyOutput(state, true);
	foreach(cell, state->nodeStates)
	{
		NodeCopyState *nodeState = lfirst(cell);

		for (int i = 0; i < nodeState->count; i++)
		{
			if (nodeState->connections[i].activeShardId != 0)
				ReadCopyResult(state, &nodeState->connections[i]);
			if (state->resetCommand != NULL)
				ExecuteRemoteCommand(nodeState->connections[i].conn, state->resetCommand);
		}
	}

	MemoryContextDelete(state->rowContext);
	return state->rowCount;
}

/* LineMapAdd records the input line of the next row */
static void
LineMapAdd(LineMap *map, uint64 line)
{
	uint64		delta = line - map->last;

	while (delta >= 0x80)
	{
		appendStringInfoChar(&map->deltas, (char) ((delta & 0x7F) | 0x80));
		delta >>= 7;
	}
	appendStringInfoChar(&map->deltas, (char) delta);
	map->last = line;
	map->count++;
}

/* LineMapNextDelta decodes the delta at *p (7 bits a byte) and steps over it */
static uint64
LineMapNextDelta(const unsigned char **p)
{
	uint64		delta = 0;
	int			shift = 0;

	while (**p & 0x80)
	{
		delta |= (uint64) (*(*p)++ & 0x7F) << shift;
		shift += 7;
	}
	delta |= (uint64) (*(*p)++) << shift;
	return delta;
}

/* LineMapAppend adds the rows of source after those of target */
static void
LineMapAppend(LineMap *target, LineMap *source)
{
	const unsigned char *p = (const unsigned char *) source->deltas.data;
	uint64		line = 0;

	for (uint64 i = 0; i < source->count; i++)
	{
		line += LineMapNextDelta(&p);
		LineMapAdd(target, line);
	}
}

/* LineMapGet returns the input line of the index-th row (0-based) */
static uint64
LineMapGet(LineMap *map, uint64 index)
{
	const unsigned char *p = (const unsigned char *) map->deltas.data;
	uint64		line = 0;

	for (uint64 i = 0; i <= index; i++)
		line += LineMapNextDelta(&p);
	return line;
}

static void
LineMapReset(LineMap *map)
{
	resetStringInfo(&map->deltas);
	map->last = 0;
	map->count = 0;
}
