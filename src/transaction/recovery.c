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
 * warning; the next run tries again.
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
#include "utils/snapmgr.h"

#include "shardext/connection.h"
#include "shardext/metadata.h"
#include "shardext/privileges.h"
#include "shardext/remote_xact.h"

PG_FUNCTION_INFO_V1(shardext_recover_prepared_transactions);

/* a commit record read from shardext.transaction */
typedef struct CommitRecord
{
	char	   *gid;
	ItemPointerData tid;
} CommitRecord;

static int	RecoverNode(WorkerNode *node, Relation recordRel, const char *prefix);
static List *PreparedGidsOnNode(PGconn *pgConn, WorkerNode *node, const char *prefix,
								bool *ok);
static List *ReadCommitRecords(Relation rel, int32 nodeId);
static bool CoordinatorTransactionRunning(const char *gid, const char *prefix);
static bool RunResolution(PGconn *pgConn, WorkerNode *node, const char *command);
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
	PG_RETURN_INT32(RecoverShardextPreparedTransactions());
}

/*
 * RecoverShardextPreparedTransactions resolves the in-doubt prepared transactions of
 * this coordinator database on every node and returns how many it resolved.
 */
int
RecoverShardextPreparedTransactions(void)
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
		resolved += RecoverNode(lfirst(cell), recordRel, prefix);
		CHECK_FOR_INTERRUPTS();
	}
	DeleteRecordsOfRemovedNodes(recordRel, nodes);
	table_close(recordRel, NoLock);
	return resolved;
}

/* RecoverNode does the work of recovery for one node; see the file header */
static int
RecoverNode(WorkerNode *node, Relation recordRel, const char *prefix)
{
	PGconn	   *pgConn;
	List	   *prepared;
	List	   *undecided = NIL;
	List	   *records;
	List	   *stillPrepared;
	ListCell   *cell;
	int			resolved = 0;
	bool		ok;

	pgConn = ConnectToNodeDirect(node->host, node->port,
								 get_database_name(MyDatabaseId), false);
	if (pgConn == NULL)
	{
		ereport(WARNING,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to node %s:%d to recover prepared transactions",
						node->host, node->port)));
		return 0;
	}
	PQsetnonblocking(pgConn, 0);

	PG_TRY();
	{
		prepared = PreparedGidsOnNode(pgConn, node, prefix, &ok);

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

			if (RunResolution(pgConn, node,
							  psprintf("%s PREPARED %s",
									   committed ? "COMMIT" : "ROLLBACK",
									   quote_literal_cstr(gid))))
				resolved++;
		}

		/* records whose prepared transaction is gone are done with */
		stillPrepared = PreparedGidsOnNode(pgConn, node, prefix, &ok);
		if (ok)
		{
			foreach(cell, records)
			{
				CommitRecord *record = lfirst(cell);

				if (!GidInList(stillPrepared, record->gid))
					simple_heap_delete(recordRel, &record->tid);
			}
		}
	}
	PG_FINALLY();
	{
		PQfinish(pgConn);
	}
	PG_END_TRY();

	return resolved;
}

/*
 * PreparedGidsOnNode lists the gids of the node's prepared transactions
 * that this coordinator database made; *ok is false (and the list empty)
 * when the node could not answer.
 */
static List *
PreparedGidsOnNode(PGconn *pgConn, WorkerNode *node, const char *prefix, bool *ok)
{
	const char *params[1] = {prefix};
	PGresult   *result;
	List	   *gids = NIL;

	result = PQexecParams(pgConn,
						  "SELECT gid FROM pg_catalog.pg_prepared_xacts "
						  "WHERE database = pg_catalog.current_database() "
						  "AND pg_catalog.starts_with(gid, $1) ORDER BY gid",
						  1, NULL, params, NULL, NULL, 0);
	*ok = (PQresultStatus(result) == PGRES_TUPLES_OK);
	if (!*ok)
	{
		ereport(WARNING,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not list prepared transactions on node %s:%d",
						node->host, node->port),
				 errdetail_internal("%s", pchomp(PQresultErrorMessage(result)))));
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
RunResolution(PGconn *pgConn, WorkerNode *node, const char *command)
{
	PGresult   *result = PQexec(pgConn, command);
	bool		success = (PQresultStatus(result) == PGRES_COMMAND_OK);
	const char *sqlstate = PQresultErrorField(result, PG_DIAG_SQLSTATE);

	if (!success && sqlstate != NULL && strcmp(sqlstate, "42704") == 0)
	{
		PQclear(result);
		return false;
	}
	if (!success)
		ereport(WARNING,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not run \"%s\" on node %s:%d", command, node->host, node->port),
				 errdetail_internal("%s", pchomp(PQresultErrorMessage(result)))));
	else
		ereport(LOG,
				(errmsg("shardext recovery: %s on node %s:%d", command, node->host,
						node->port)));
	PQclear(result);
	return success;
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
