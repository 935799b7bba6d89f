/*-------------------------------------------------------------------------
 *
 * recovery.c
 *	  Resolving in-doubt prepared transactions:
 *	  shardext_recover_prepared_transactions().
 *
 * A two-phase commit (remote_xact.c) prepares a transaction on every node
 * it wrote on, with gid <prefix><full xid>_<serial>, and inserts a commit
 * record per gid into shardext.transaction in the coordinator transaction.
 * When the coordinator or a node fails before COMMIT PREPARED, the
 * prepared transaction stays behind.  Recovery looks at each node's
 * prepared transactions that carry this coordinator database's prefix:
 *	- the coordinator transaction still runs (or is in its commit or abort
 *	  processing): leave it alone;
 *	- a commit record exists: the coordinator committed, so COMMIT PREPARED;
 *	- otherwise the coordinator transaction aborted: ROLLBACK PREPARED.
 * The order matters: "still running" is checked before the commit records
 * are read with a fresh snapshot, so a transaction that commits in between
 * is seen as committed.  Commit records whose prepared transaction is gone
 * are deleted afterwards, judged by a second look at the node taken after
 * the records were read.
 *
 * Runs of recovery are serialised by a self-conflicting lock on
 * shardext.transaction that committing transactions (which only insert)
 * do not conflict with.  Nodes that cannot be reached are skipped with a
 * warning; the next run tries again.  Every remote wait is interruptible
 * and bounded (shardext.connect_timeout to connect, RECOVERY_COMMAND_
 * TIMEOUT_MS per command), so a node that hangs holds recovery up for
 * that long at most; the maintenance daemon moreover skips a node that
 * failed for a while (doubling up to MAX_NODE_BACKOFF_MS), so that a hung
 * node does not slow down every round (nor the deadlock detection that
 * shares the daemon).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "shardext/connection.h"
#include "shardext/metadata.h"
#include "shardext/privileges.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"

/* how long one command of recovery may wait for a node */
#define RECOVERY_COMMAND_TIMEOUT_MS 30000
/* the daemon leaves a failing node alone for up to this long */
#define MAX_NODE_BACKOFF_MS (5 * 60 * 1000)
#define FIRST_NODE_BACKOFF_MS 10000

PG_FUNCTION_INFO_V1(shardext_recover_prepared_transactions);

/* a node the daemon's recovery could not reach, and when to try again */
typedef struct FailingNode
{
	int32		nodeId;
	int			backoffMs;
	TimestampTz retryAfter;
} FailingNode;

static List *failingNodes = NIL;

/* a commit record read from shardext.transaction */
typedef struct CommitRecord
{
	char	   *gid;
	ItemPointerData tid;
} CommitRecord;

static int	RecoverNode(WorkerNode *node, Relation recordRel, const char *prefix,
						bool *reached);
static int	RecoverOnConnection(NodeConnection *conn, WorkerNode *node, Relation recordRel,
								const char *prefix, bool *reached);
static bool SkipFailingNode(int32 nodeId);
static void NoteNodeOutcome(int32 nodeId, bool reached);
static List *PreparedGidsOnNode(NodeConnection *conn, WorkerNode *node, const char *prefix,
								bool *ok);
static List *ReadCommitRecords(Relation rel, int32 nodeId);
static bool CoordinatorTransactionRunning(const char *gid, const char *prefix);
static bool RunResolution(NodeConnection *conn, WorkerNode *node, const char *command);
static bool GidInList(List *gids, const char *gid);
static void DeleteRecordsOfRemovedNodes(Relation rel, List *nodes);

/*
 * shardext_recover_prepared_transactions() returns the number of prepared
 * transactions it committed or rolled back.
 */
Datum
shardext_recover_prepared_transactions(PG_FUNCTION_ARGS)
{
	EnsureShardextAdmin("shardext_recover_prepared_transactions");
	PG_RETURN_INT32(RecoverShardextPreparedTransactions(false));
}

/*
 * RecoverShardextPreparedTransactions resolves the in-doubt prepared
 * transactions of this coordinator database on every node and returns how
 * many it resolved.  With skipFailing (the maintenance daemon), nodes that
 * failed recently are left for a later round.
 */
int
RecoverShardextPreparedTransactions(bool skipFailing)
{
	Relation	recordRel;
	char	   *prefix;
	List	   *nodes;
	ListCell   *cell;
	int			resolved = 0;

	if (!ShardextExtensionLoaded())
		return 0;
	nodes = WorkerNodeList(false);
	if (nodes == NIL)
		return 0;

	prefix = RemotePreparedGidPrefix();
	recordRel = table_open(ShardextCatalogRelid("transaction"), ShareUpdateExclusiveLock);
	foreach(cell, nodes)
	{
		WorkerNode *node = lfirst(cell);
		bool		reached = false;

		if (skipFailing && SkipFailingNode(node->nodeId))
			continue;
		resolved += RecoverNode(node, recordRel, prefix, &reached);
		NoteNodeOutcome(node->nodeId, reached);
		CHECK_FOR_INTERRUPTS();
	}
	DeleteRecordsOfRemovedNodes(recordRel, nodes);
	table_close(recordRel, NoLock);
	return resolved;
}

/*
 * RecoverNode does the work of recovery for one node (see the file header)
 * over a connection of its own, closed on every path; *reached says
 * whether the node answered everything.
 */
static int
RecoverNode(WorkerNode *node, Relation recordRel, const char *prefix, bool *reached)
{
	NodeConnection *conn = OpenDedicatedConnection(node->host, node->port, false, false);
	int			resolved = 0;

	if (conn == NULL)
	{
		ereport(WARNING,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to node %s:%d to recover prepared transactions",
						node->host, node->port)));
		return 0;
	}
	PG_TRY();
	{
		resolved = RecoverOnConnection(conn, node, recordRel, prefix, reached);
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(conn);
	}
	PG_END_TRY();
	return resolved;
}

/* RecoverOnConnection: RecoverNode once connected */
static int
RecoverOnConnection(NodeConnection *conn, WorkerNode *node, Relation recordRel,
					const char *prefix, bool *reached)
{
	List	   *prepared;
	List	   *undecided = NIL;
	List	   *records;
	List	   *stillPrepared;
	ListCell   *cell;
	int			resolved = 0;
	bool		ok;

	prepared = PreparedGidsOnNode(conn, node, prefix, &ok);
	if (!ok)
		return 0;

	/* first "still running?", then the records (see the file header) */
	foreach(cell, prepared)
	{
		char	   *gid = lfirst(cell);

		if (!CoordinatorTransactionRunning(gid, prefix))
			undecided = lappend(undecided, gid);
	}
	records = ReadCommitRecords(recordRel, node->nodeId);

	foreach(cell, undecided)
	{
		char	   *gid = lfirst(cell);
		bool		committed = false;
		ListCell   *recordCell;

		foreach(recordCell, records)
			committed |= (strcmp(((CommitRecord *) lfirst(recordCell))->gid, gid) == 0);

		if (RunResolution(conn, node,
						  psprintf("%s PREPARED %s", committed ? "COMMIT" : "ROLLBACK",
								   quote_literal_cstr(gid))))
			resolved++;
		if (conn->queryInProgress)
			return resolved;	/* the node stopped answering */
	}

	/* records whose prepared transaction is gone are done with */
	stillPrepared = PreparedGidsOnNode(conn, node, prefix, &ok);
	if (!ok)
		return resolved;
	foreach(cell, records)
	{
		CommitRecord *record = lfirst(cell);

		if (!GidInList(stillPrepared, record->gid))
			simple_heap_delete(recordRel, &record->tid);
	}
	*reached = true;
	return resolved;
}

/*
 * SkipFailingNode tells whether the daemon should leave a node that failed
 * recently alone this round.
 */
static bool
SkipFailingNode(int32 nodeId)
{
	ListCell   *cell;

	foreach(cell, failingNodes)
	{
		FailingNode *failing = lfirst(cell);

		if (failing->nodeId == nodeId)
			return GetCurrentTimestamp() < failing->retryAfter;
	}
	return false;
}

/*
 * NoteNodeOutcome forgets a node that answered, and makes one that did not
 * wait twice as long as last time before the daemon tries it again.
 */
static void
NoteNodeOutcome(int32 nodeId, bool reached)
{
	ListCell   *cell;
	FailingNode *failing = NULL;
	MemoryContext oldContext;

	foreach(cell, failingNodes)
	{
		if (((FailingNode *) lfirst(cell))->nodeId == nodeId)
			failing = lfirst(cell);
	}
	if (reached)
	{
		if (failing != NULL)
		{
			failingNodes = list_delete_ptr(failingNodes, failing);
			pfree(failing);
		}
		return;
	}
	if (failing == NULL)
	{
		oldContext = MemoryContextSwitchTo(TopMemoryContext);
		failing = palloc0(sizeof(FailingNode));
		failing->nodeId = nodeId;
		failingNodes = lappend(failingNodes, failing);
		MemoryContextSwitchTo(oldContext);
	}
	failing->backoffMs = failing->backoffMs == 0 ? FIRST_NODE_BACKOFF_MS :
		Min(failing->backoffMs * 2, MAX_NODE_BACKOFF_MS);
	failing->retryAfter = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													  failing->backoffMs);
}

/*
 * PreparedGidsOnNode lists the gids of the node's prepared transactions
 * that this coordinator database made; *ok is false (and the list empty)
 * when the node could not answer.
 */
static List *
PreparedGidsOnNode(NodeConnection *conn, WorkerNode *node, const char *prefix, bool *ok)
{
	const char *params[1] = {prefix};
	PGresult   *result;
	char	   *failure = NULL;
	List	   *gids = NIL;

	result = ExecuteRemoteQueryBounded(conn,
									   "SELECT gid FROM pg_catalog.pg_prepared_xacts "
									   "WHERE database = pg_catalog.current_database() "
									   "AND pg_catalog.starts_with(gid, $1) ORDER BY gid",
									   1, params, RECOVERY_COMMAND_TIMEOUT_MS, &failure);
	*ok = (result != NULL && PQresultStatus(result) == PGRES_TUPLES_OK);
	if (!*ok)
	{
		ereport(WARNING,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not list prepared transactions on node %s:%d",
						node->host, node->port),
				 errdetail_internal("%s", failure ? failure : "no rows")));
		PQclear(result);
		return NIL;
	}
	for (int i = 0; i < PQntuples(result); i++)
		gids = lappend(gids, pstrdup(PQgetvalue(result, i, 0)));
	PQclear(result);
	return gids;
}

/*
 * ReadCommitRecords returns the committed commit records of a node, read
 * with a snapshot taken now (not the caller's transaction snapshot, which
 * may be older than the commits recovery must see).
 */
static List *
ReadCommitRecords(Relation rel, int32 nodeId)
{
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	TableScanDesc scan = table_beginscan(rel, snapshot, 0, NULL);
	TupleDesc	desc = RelationGetDescr(rel);
	HeapTuple	tuple;
	List	   *records = NIL;

	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		bool		isnull;
		CommitRecord *record;

		if (DatumGetInt32(heap_getattr(tuple, 2, desc, &isnull)) != nodeId)
			continue;
		record = palloc(sizeof(CommitRecord));
		record->gid = TextDatumGetCString(heap_getattr(tuple, 1, desc, &isnull));
		record->tid = tuple->t_self;
		records = lappend(records, record);
	}
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	return records;
}

/*
 * CoordinatorTransactionRunning tells whether the coordinator transaction
 * that prepared gid has not finished yet.  Its transaction lock is held
 * until after its commit or abort callbacks (which send COMMIT or ROLLBACK
 * PREPARED), so a transaction in those callbacks counts as running too.
 */
static bool
CoordinatorTransactionRunning(const char *gid, const char *prefix)
{
	const char *xidString = gid + strlen(prefix);
	char	   *end;
	uint64		fullXid = strtou64(xidString, &end, 10);
	TransactionId xid = (TransactionId) fullXid;

	if (end == xidString || *end != '_' || !TransactionIdIsNormal(xid))
		return true;			/* not ours after all: leave it */

	/*
	 * An xid at or beyond the next one was lost in a crash before any of its
	 * WAL reached disk: that transaction cannot have committed.
	 */
	if (fullXid >= U64FromFullTransactionId(ReadNextFullTransactionId()))
		return false;
	if (TransactionIdEquals(xid, GetTopTransactionIdIfAny()))
		return true;
	return !ConditionalXactLockTableWait(xid);
}

/*
 * RunResolution runs COMMIT/ROLLBACK PREPARED; failures are warnings.  A
 * prepared transaction that was listed a moment ago but no longer exists
 * was finished meanwhile by the backend that prepared it (between the
 * listing and the look at its transaction lock): nothing to do, and
 * nothing to warn about.
 */
static bool
RunResolution(NodeConnection *conn, WorkerNode *node, const char *command)
{
	char	   *failure = NULL;
	PGresult   *result = ExecuteRemoteQueryBounded(conn, command, 0, NULL,
												   RECOVERY_COMMAND_TIMEOUT_MS, &failure);

	if (result != NULL)
	{
		PQclear(result);
		ereport(LOG,
				(errmsg("shardext recovery: %s on node %s:%d", command, node->host,
						node->port)));
		return true;
	}
	/* 42704 undefined_object: finished meanwhile by its own backend */
	if (strcmp(RemoteFailureSqlstate(), "42704") == 0)
		return false;
	ereport(WARNING,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("could not run \"%s\" on node %s:%d", command, node->host, node->port),
			 errdetail_internal("%s", failure)));
	return false;
}

static bool
GidInList(List *gids, const char *gid)
{
	ListCell   *cell;

	foreach(cell, gids)
	{
		if (strcmp(lfirst(cell), gid) == 0)
			return true;
	}
	return false;
}

/*
 * DeleteRecordsOfRemovedNodes drops the commit records of nodes that are no
 * longer registered: nothing can be resolved there any more (a node can only
 * be removed once it holds no shards).
 */
static void
DeleteRecordsOfRemovedNodes(Relation rel, List *nodes)
{
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	TableScanDesc scan = table_beginscan(rel, snapshot, 0, NULL);
	HeapTuple	tuple;

	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		bool		isnull;
		int32		nodeId = DatumGetInt32(heap_getattr(tuple, 2, RelationGetDescr(rel),
														&isnull));
		bool		registered = false;
		ListCell   *cell;

		foreach(cell, nodes)
			registered |= (((WorkerNode *) lfirst(cell))->nodeId == nodeId);
		if (!registered)
			simple_heap_delete(rel, &tuple->t_self);
	}
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
}
