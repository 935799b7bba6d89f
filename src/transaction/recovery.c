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
 * A gid that ends in _d<node id>_<incarnation> belongs to a transaction
 * that commits with a decider (last-participant commit, remote_xact.c):
 * one of an earlier incarnation of the coordinator no longer runs (its xid
 * may have been handed out again since), and without a commit record the
 * decider's node says how it ended
 * (shardext.resolve_commit_decision, which fixes "aborted" where the
 * decider did not commit, so that a commit still on its way fails).  Once
 * every node answered, the decisions of coordinator transactions that had
 * ended before recovery started, and that no prepared transaction still
 * needs, are deleted on each node.
 *
 * Recovery also records the identity of nodes added before 1.2, which
 * fencing needs (fencing.c).
 *
 * A COMMIT PREPARED that follows a decider's decision runs inside the
 * commit gate (commit_gate.c), so that a restore point never falls between
 * a late decision and the commits that follow it.
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
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "shardext/commit_gate.h"
#include "shardext/connection.h"
#include "shardext/fencing.h"
#include "shardext/maintenance.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
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

/* a prepared transaction of this coordinator database on a node */
typedef struct PreparedXact
{
	char	   *gid;
	char	   *owner;
} PreparedXact;

/* what the gid of a transaction that commits with a decider names */
typedef struct DeciderRef
{
	int32		nodeId;			/* the deciding node */
	uint64		xid;			/* the coordinator transaction */
	uint64		incarnation;	/* of the coordinator (CoordinatorIncarnation) */
} DeciderRef;

/* which decisions a deciding node must keep for the prepared ones left */
typedef struct DecisionFloor
{
	int32		nodeId;
	uint64		xid;			/* none of this incarnation from here on */
	bool		olderNeeded;	/* one of an older incarnation too */
} DecisionFloor;

/* a commit record read from shardext.transaction */
typedef struct CommitRecord
{
	char	   *gid;
	ItemPointerData tid;
} CommitRecord;

static int	RecoverNode(WorkerNode *node, Relation recordRel, const char *prefix,
						bool *reached, List **floors);
static int	RecoverOnConnection(NodeConnection *conn, WorkerNode *node, Relation recordRel,
								const char *prefix, bool *reached, List **floors);
static bool ResolveAsDecided(NodeConnection *conn, WorkerNode *node, PreparedXact *xact,
							 DeciderRef *ref, const char *prefix, bool *answered);
static bool DecidedByDecider(const char *gid, const char *prefix, DeciderRef *ref);
static bool AskDecider(const DeciderRef *ref, const char *gid, const char *owner,
					   const char *prefix, bool *committed);
static char *TryNodeValue(WorkerNode *node, const char *query, int nParams,
						  const char *const *params, char **failure);
static void RaiseDecisionFloors(List **floors, List *stillPrepared, const char *prefix);
static void ForgetDecisions(List *nodes, List *floors, const char *prefix, uint64 horizon);
static uint64 OldestRunningFullXid(void);
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
	List	   *floors = NIL;
	ListCell   *cell;
	int			resolved = 0;
	bool		everyNode = true;
	uint64		horizon;

	if (!ShardextExtensionLoaded())
		return 0;
	nodes = WorkerNodeList(false);
	if (nodes == NIL)
		return 0;

	prefix = RemotePreparedGidPrefix();
	recordRel = table_open(ShardextCatalogRelid("transaction"), ShareUpdateExclusiveLock);
	horizon = OldestRunningFullXid();
	foreach(cell, nodes)
	{
		WorkerNode *node = lfirst(cell);
		bool		reached = false;

		if (skipFailing && SkipFailingNode(node->nodeId))
		{
			everyNode = false;
			continue;
		}
		resolved += RecoverNode(node, recordRel, prefix, &reached, &floors);
		NoteNodeOutcome(node->nodeId, reached);
		everyNode &= reached;
		CHECK_FOR_INTERRUPTS();
	}
	if (everyNode)
		ForgetDecisions(nodes, floors, prefix, horizon);
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
RecoverNode(WorkerNode *node, Relation recordRel, const char *prefix, bool *reached,
			List **floors)
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
		RecordMissingIdentity(node, conn);
		resolved = RecoverOnConnection(conn, node, recordRel, prefix, reached, floors);
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(conn);
	}
	PG_END_TRY();
	return resolved;
}

/*
 * RecoverOnConnection: RecoverNode once connected.  *floors learns which
 * decisions the node's remaining prepared transactions still need.
 */
static int
RecoverOnConnection(NodeConnection *conn, WorkerNode *node, Relation recordRel,
					const char *prefix, bool *reached, List **floors)
{
	List	   *prepared;
	List	   *undecided = NIL;
	List	   *records;
	List	   *stillPrepared;
	ListCell   *cell;
	int			resolved = 0;
	bool		ok;
	bool		allDecided = true;

	prepared = PreparedGidsOnNode(conn, node, prefix, &ok);
	if (!ok)
		return 0;

	/* first "still running?", then the records (see the file header) */
	foreach(cell, prepared)
	{
		PreparedXact *xact = lfirst(cell);

		if (!CoordinatorTransactionRunning(xact->gid, prefix))
			undecided = lappend(undecided, xact);
	}
	records = ReadCommitRecords(recordRel, node->nodeId);

	foreach(cell, undecided)
	{
		PreparedXact *xact = lfirst(cell);
		bool		committed = false;
		ListCell   *recordCell;
		DeciderRef	ref;

		foreach(recordCell, records)
			committed |= (strcmp(((CommitRecord *) lfirst(recordCell))->gid, xact->gid) == 0);
		if (!committed && DecidedByDecider(xact->gid, prefix, &ref))
		{
			bool		answered = false;

			if (ResolveAsDecided(conn, node, xact, &ref, prefix, &answered))
				resolved++;
			allDecided &= answered; /* the decider cannot tell now: next round */
		}
		else if (RunResolution(conn, node,
							   psprintf("%s PREPARED %s", committed ? "COMMIT" : "ROLLBACK",
										quote_literal_cstr(xact->gid))))
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
	RaiseDecisionFloors(floors, stillPrepared, prefix);
	*reached = allDecided;
	return resolved;
}

/*
 * ResolveAsDecided asks the deciding node of a prepared transaction how it
 * ended and commits or rolls it back accordingly, inside the commit gate
 * (see the file header); *answered says whether the decider could tell.
 * Returns whether the transaction was resolved.
 */
static bool
ResolveAsDecided(NodeConnection *conn, WorkerNode *node, PreparedXact *xact,
				 DeciderRef *ref, const char *prefix, bool *answered)
{
	bool		committed = false;
	bool		resolved = false;

	EnterCommitDecision();
	PG_TRY();
	{
		*answered = AskDecider(ref, xact->gid, xact->owner, prefix, &committed);
		if (*answered)
			resolved = RunResolution(conn, node,
									 psprintf("%s PREPARED %s",
											  committed ? "COMMIT" : "ROLLBACK",
											  quote_literal_cstr(xact->gid)));
	}
	PG_FINALLY();
	{
		LeaveCommitDecision();
	}
	PG_END_TRY();
	return resolved;
}

/*
 * DecidedByDecider tells whether gid names a deciding node (suffix
 * _d<node id>_<incarnation>), and returns what it names.
 */
static bool
DecidedByDecider(const char *gid, const char *prefix, DeciderRef *ref)
{
	const char *rest = gid + strlen(prefix);
	const char *suffix = strstr(rest, "_d");
	char	   *end;

	if (suffix == NULL)
		return false;
	ref->xid = strtou64(rest, &end, 10);
	ref->nodeId = (int32) strtol(suffix + 2, &end, 10);
	if (*end != '_' || ref->nodeId <= 0)
		return false;
	ref->incarnation = strtou64(end + 1, &end, 10);
	return *end == '\0';
}

/*
 * AskDecider asks the deciding node of gid (what ref names) whether the
 * transaction committed there (see the file header).  Returns false, with
 * a warning, when the node cannot answer now.
 */
static bool
AskDecider(const DeciderRef *ref, const char *gid, const char *owner, const char *prefix,
		   bool *committed)
{
	WorkerNode *node = LookupWorkerNode(ref->nodeId);
	const char *params[4] = {prefix, psprintf(UINT64_FORMAT, ref->incarnation),
	psprintf(UINT64_FORMAT, ref->xid), owner};
	char	   *failure = NULL;
	char	   *value;

	if (node == NULL)
	{
		ereport(WARNING,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("the node that decides prepared transaction %s is not registered", gid)));
		return false;
	}
	value = TryNodeValue(node, "SELECT shardext.resolve_commit_decision($1, $2, $3, $4)",
						 4, params, &failure);
	if (value == NULL)
	{
		ereport(WARNING,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not ask node %s:%d how prepared transaction %s ended",
						node->host, node->port, gid),
				 errdetail_internal("%s", failure)));
		return false;
	}
	*committed = (strcmp(value, "t") == 0);
	return true;
}

/*
 * TryNodeValue runs a query with text parameters on a node over a
 * connection of its own (closed on every path), waiting
 * RECOVERY_COMMAND_TIMEOUT_MS at most, and returns the first value of its
 * result; NULL, with *failure set, when it did not run.
 */
static char *
TryNodeValue(WorkerNode *node, const char *query, int nParams, const char *const *params,
			 char **failure)
{
	NodeConnection *conn = OpenDedicatedConnection(node->host, node->port, false, false);
	char	   *value = NULL;

	*failure = "no connection";
	if (conn == NULL)
		return NULL;
	PG_TRY();
	{
		PGresult   *result = TryRemoteQuery(conn, query, nParams, params,
											RECOVERY_COMMAND_TIMEOUT_MS, failure);

		if (result != NULL && PQresultStatus(result) == PGRES_TUPLES_OK &&
			PQntuples(result) == 1)
			value = pstrdup(PQgetvalue(result, 0, 0));
		else if (*failure == NULL)
			*failure = "no row";
		PQclear(result);
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(conn);
	}
	PG_END_TRY();
	return value;
}

/*
 * RaiseDecisionFloors notes, per deciding node, which decisions the
 * prepared transactions left on a node still need: the smallest xid of
 * this coordinator incarnation, and whether an older incarnation's.
 */
static void
RaiseDecisionFloors(List **floors, List *stillPrepared, const char *prefix)
{
	ListCell   *cell;

	foreach(cell, stillPrepared)
	{
		PreparedXact *xact = lfirst(cell);
		DecisionFloor *floor = NULL;
		DeciderRef	ref;
		ListCell   *floorCell;

		if (!DecidedByDecider(xact->gid, prefix, &ref))
			continue;
		foreach(floorCell, *floors)
		{
			if (((DecisionFloor *) lfirst(floorCell))->nodeId == ref.nodeId)
				floor = lfirst(floorCell);
		}
		if (floor == NULL)
		{
			floor = palloc0(sizeof(DecisionFloor));
			floor->nodeId = ref.nodeId;
			floor->xid = PG_UINT64_MAX;
			*floors = lappend(*floors, floor);
		}
		if (ref.incarnation != CoordinatorIncarnation())
			floor->olderNeeded = true;
		else
			floor->xid = Min(floor->xid, ref.xid);
	}
}

/*
 * ForgetDecisions deletes, on every node, the commit decisions that no
 * prepared transaction needs any more: those of earlier incarnations of
 * the coordinator (every transaction of theirs has ended), and those of
 * transactions older than horizon (all of them had ended when recovery
 * started, so whatever they prepared was listed).  Failures are warnings;
 * the next round retries.
 */
static void
ForgetDecisions(List *nodes, List *floors, const char *prefix, uint64 horizon)
{
	const char *params[3] = {prefix, psprintf(UINT64_FORMAT, CoordinatorIncarnation()), NULL};
	char	   *failure;
	ListCell   *cell;

	foreach(cell, nodes)
	{
		WorkerNode *node = lfirst(cell);
		uint64		below = horizon;
		ListCell   *floorCell;
		bool		olderNeeded = false;

		if (NodeIsReplica(node))
			continue;
		foreach(floorCell, floors)
		{
			DecisionFloor *floor = lfirst(floorCell);

			if (floor->nodeId == node->nodeId)
			{
				below = Min(below, floor->xid);
				olderNeeded = floor->olderNeeded;
			}
		}
		if (olderNeeded)
			continue;			/* left for a round after they are resolved */
		params[2] = psprintf(UINT64_FORMAT, below);
		if (TryNodeValue(node, "SELECT shardext.forget_commit_decisions($1, $2, $3)",
						 3, params, &failure) == NULL)
			ereport(WARNING,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not delete old commit decisions on node %s:%d",
							node->host, node->port),
					 errdetail_internal("%s", failure)));
	}
}

/*
 * OldestRunningFullXid returns the full xid below which every transaction
 * of this coordinator has ended: the oldest running one, or the next xid.
 */
static uint64
OldestRunningFullXid(void)
{
	FullTransactionId next = ReadNextFullTransactionId();
	TransactionId oldest = OldestActiveXid();

	return U64FromFullTransactionId(next) - (uint32) (XidFromFullTransactionId(next) - oldest);
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
 * PreparedGidsOnNode lists the node's prepared transactions (PreparedXact)
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

	result = TryRemoteQuery(conn,
							"SELECT gid, owner FROM pg_catalog.pg_prepared_xacts "
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
	{
		PreparedXact *xact = palloc(sizeof(PreparedXact));

		xact->gid = pstrdup(PQgetvalue(result, i, 0));
		xact->owner = pstrdup(PQgetvalue(result, i, 1));
		gids = lappend(gids, xact);
	}
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
	TableScanDesc scan = BeginTableScan(rel, snapshot, 0, NULL);
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
	DeciderRef	ref;

	if (end == xidString || *end != '_' || !TransactionIdIsNormal(xid))
		return true;			/* not ours after all: leave it */

	/* of an earlier incarnation: its xid may belong to another one now */
	if (DecidedByDecider(gid, prefix, &ref) && ref.incarnation != CoordinatorIncarnation())
		return false;

	/*
	 * An xid at or beyond the next one was lost in a crash before any of its
	 * WAL reached disk: that transaction cannot have committed.
	 */
	if (fullXid >= U64FromFullTransactionId(ReadNextFullTransactionId()))
		return false;
	if (TransactionIdEquals(xid, GetTopTransactionIdIfAny()))
		return true;
	return !TryXactLockTableWait(xid);
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
	PGresult   *result = TryRemoteQuery(conn, command, 0, NULL,
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

/* is gid among the PreparedXacts of a list? */
static bool
GidInList(List *xacts, const char *gid)
{
	ListCell   *cell;

	foreach(cell, xacts)
	{
		if (strcmp(((PreparedXact *) lfirst(cell))->gid, gid) == 0)
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
	TableScanDesc scan = BeginTableScan(rel, snapshot, 0, NULL);
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
