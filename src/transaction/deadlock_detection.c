/*-------------------------------------------------------------------------
 *
 * deadlock_detection.c
 *	  Distributed deadlock detection.
 *
 * Two distributed transactions that update the same two rows on different
 * nodes in opposite order wait for each other, and no server sees a cycle:
 * node 1 sees A's backend wait for B's, node 2 sees B's backend wait for
 * A's.  Every shardext.distributed_deadlock_timeout the maintenance daemon
 * of each coordinator database looks for such cycles:
 *
 *	- Identity: a coordinator backend's connections to the nodes carry
 *	  application_name shardext_<system id>_<database oid>_<pid>, so a
 *	  node's backend (or a session shardext opened to the coordinator
 *	  itself) can be mapped to the coordinator backend (the distributed
 *	  transaction) it works for.  Backends without this prefix (local
 *	  clients of a node, other coordinators) stay vertices of their own.
 *	- Edges: the lock waits of the coordinator and of each node
 *	  (pg_stat_activity + pg_blocking_pids()), each mapped to vertices.  The
 *	  nodes are asked only when a coordinator statement has run for longer
 *	  than the timeout and waits for a node (every distributed deadlock has
 *	  one), over connections that are closed after the round, so that
 *	  nothing stays connected to the nodes' databases.
 *	- Cycles: a cycle is left alone when one server sees it whole (all its
 *	  waits on that server and each waiter the very backend the previous
 *	  wait is for): PostgreSQL's own detector resolves those.  Every other
 *	  cycle is a distributed deadlock.
 *	- Confirmation: the waits are read twice; only cycles whose waits are
 *	  in both readings, by the same coordinator transactions (local
 *	  transaction ids unchanged), count.  Real deadlocks persist; cycles
 *	  stitched together from waits of different moments do not.
 *	- Victim: of the coordinator transactions in the cycle that wait for a
 *	  node (there always is one), the youngest.  Its coordinator backend is
 *	  cancelled as a whole: a flag in shared memory plus its latch; the
 *	  backend's wait loops (CheckForDistributedDeadlockCancel) then raise
 *	  "canceling the transaction to resolve a distributed deadlock"
 *	  (40P01), the transaction aborts, and its remote transactions roll
 *	  back everywhere, which releases the locks.  A backend that does not
 *	  react by the next round gets a plain query cancel (SIGINT).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "shardext/connection.h"
#include "shardext/deadlock_detection.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"

#define DEADLOCK_DETAIL_LEN 1024
/* how long the detector waits for a node's answer */
#define NODE_QUERY_TIMEOUT_MS 5000
/* after a failed connection attempt, leave the node alone this long */
#define NODE_RETRY_MS 2000
/* bound on the work of one cycle search */
#define CYCLE_SEARCH_STEPS 100000

/* the coordinator itself in WaitVertex.nodeId and WaitEdge.onNode */
#define COORDINATOR_NODE 0

/*
 * The lock waits of a server: waiter pid and application_name, holder pid
 * and application_name, and whether the holder waits for its session: it
 * is idle in a transaction block or runs a later statement of one (its
 * locks stay until the session ends the transaction), it waits for a lock,
 * or it waits for the session to read its output.  A holder that is busy
 * with the only statement of its transaction (a read outside a remote
 * transaction) releases its locks when that statement ends, whatever its
 * session does meanwhile: no wait for the session.  %s filters the waiters.
 */
#define WAIT_EDGES_QUERY \
	"SELECT w.pid, coalesce(w.application_name, ''), b.pid, coalesce(h.application_name, ''), " \
	"coalesce(h.state LIKE 'idle in transaction%%' " \
	"OR h.wait_event_type IN ('Lock', 'Client') " \
	"OR h.xact_start < h.query_start, true) " \
	"FROM pg_catalog.pg_stat_activity w " \
	"CROSS JOIN LATERAL pg_catalog.unnest(pg_catalog.pg_blocking_pids(w.pid)) b(pid) " \
	"LEFT JOIN pg_catalog.pg_stat_activity h ON h.pid = b.pid " \
	"WHERE %s AND b.pid <> 0"

/* a cancel request for one backend, indexed by pgprocno */
typedef struct DeadlockCancelSlot
{
	slock_t		mutex;
	bool		cancelRequested;
	LocalTransactionId lxid;	/* the transaction to cancel */
	char		detail[DEADLOCK_DETAIL_LEN];
} DeadlockCancelSlot;

typedef struct DeadlockShared
{
	int			slotCount;
	DeadlockCancelSlot slots[FLEXIBLE_ARRAY_MEMBER];
} DeadlockShared;

static DeadlockShared *Deadlock = NULL;

/*
 * A vertex of the wait graph: a coordinator backend (nodeId 0; for the
 * backends of this database's shardext sessions, their distributed
 * transaction) or a backend on a node that no coordinator session of ours
 * owns.
 */
typedef struct WaitVertex
{
	int32		nodeId;
	int32		pid;
} WaitVertex;

/* a lock wait: waiter waits for holder, on server onNode */
typedef struct WaitEdge
{
	WaitVertex	waiter;
	WaitVertex	holder;
	int32		onNode;
	int32		waiterPid;		/* the backends on that server */
	int32		holderPid;
} WaitEdge;

/* a coordinator backend seen in a reading: its transaction and its age */
typedef struct CoordinatorBackend
{
	int32		pid;
	LocalTransactionId lxid;
	TimestampTz xactStart;
} CoordinatorBackend;

/* one reading of the wait graph */
typedef struct WaitGraph
{
	List	   *edges;			/* WaitEdge * */
	List	   *backends;		/* CoordinatorBackend * */
	bool		anyRemote;		/* an edge on a node */
	bool		longRemoteWait; /* a coordinator statement waits for a node */
} WaitGraph;

/* the daemon's connection to a node */
typedef struct DetectorConnection
{
	int32		nodeId;
	char		host[256];
	int32		port;
	PGconn	   *pgConn;
	TimestampTz retryAfter;
	bool		failing;		/* the last attempt failed (and was reported) */
} DetectorConnection;

static List *detectorConnections = NIL;

static int	DeadlockSlotCount(void);
static char *ApplicationNamePrefix(void);
static int	DetectDeadlocksOnce(void);
static void CloseDetectorConnections(void);
static WaitGraph *ReadWaitGraph(void);
static void ReadCoordinatorWaits(WaitGraph *graph, const char *prefix);
static void ReadNodeWaits(WaitGraph *graph, WorkerNode *node, const char *prefix);
static DetectorConnection *DetectorConnectionFor(WorkerNode *node);
static PGresult *RunNodeQuery(DetectorConnection *dc, const char *query, int timeoutMs);
static WaitVertex MapNodeBackend(int32 nodeId, int32 pid, const char *appName,
								 const char *prefix);
static void AddWaitEdge(WaitGraph *graph, int32 onNode, int32 waiterPid,
						const char *waiterApp, int32 holderPid, const char *holderApp,
						bool holderWaitsForSession, const char *prefix);
static List *ConfirmedEdges(WaitGraph *first, WaitGraph *second);
static CoordinatorBackend *FindBackend(List *backends, int32 pid);
static List *FindDistributedCycle(List *edges);
static bool CycleSeenByOneServer(List *cycle);
static bool VertexEquals(WaitVertex a, WaitVertex b);
static WaitEdge *ChooseVictim(List *cycle, List *backends);
static char *DescribeCycle(List *cycle, WaitEdge *victimEdge);
static char *DescribeVertex(WaitVertex vertex);
static char *ServerName(int32 nodeId);
static void CancelVictim(CoordinatorBackend *victim, const char *detail);

/* ---------------------------------------------------------------------
 * shared memory and the backend side
 * ---------------------------------------------------------------------
 */

/* regular backends and background workers have pgprocno < MaxBackends */
static int
DeadlockSlotCount(void)
{
	return MaxBackends;
}

Size
DistributedDeadlockShmemSize(void)
{
	return add_size(offsetof(DeadlockShared, slots),
					mul_size(DeadlockSlotCount(), sizeof(DeadlockCancelSlot)));
}

void
DistributedDeadlockShmemInit(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	Deadlock = ShmemInitStruct("shardext distributed deadlock detection",
							   DistributedDeadlockShmemSize(), &found);
	if (!found)
	{
		Deadlock->slotCount = DeadlockSlotCount();
		for (int i = 0; i < Deadlock->slotCount; i++)
		{
			SpinLockInit(&Deadlock->slots[i].mutex);
			Deadlock->slots[i].cancelRequested = false;
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/* shardext_<system id>_<database oid>_: the sessions of this database */
static char *
ApplicationNamePrefix(void)
{
	return psprintf("shardext_" UINT64_FORMAT "_%u_", GetSystemIdentifier(),
					MyDatabaseId);
}

/*
 * RemoteApplicationName returns the application_name of this backend's
 * connections to the nodes, which tells the deadlock detector whose
 * transaction a node's backend runs.  It fits NAMEDATALEN.
 */
char *
RemoteApplicationName(void)
{
	return psprintf("shardext_" UINT64_FORMAT "_%u_%d", GetSystemIdentifier(),
					MyDatabaseId, MyProcPid);
}

/*
 * CheckForDistributedDeadlockCancel raises the deadlock error when the
 * detector asked for it and this backend still runs the transaction it
 * chose.  Only where an error may be thrown: not while interrupts are held.
 */
void
CheckForDistributedDeadlockCancel(void)
{
	DeadlockCancelSlot *slot;
	bool		cancel;
	char		detail[DEADLOCK_DETAIL_LEN];

	if (Deadlock == NULL || MyProc == NULL || MyProc->pgprocno >= Deadlock->slotCount)
		return;
	slot = &Deadlock->slots[MyProc->pgprocno];
	if (likely(!((volatile DeadlockCancelSlot *) slot)->cancelRequested))
		return;
	if (InterruptHoldoffCount > 0 || CritSectionCount > 0)
		return;

	SpinLockAcquire(&slot->mutex);
	cancel = slot->cancelRequested && slot->lxid == MyProc->lxid;
	slot->cancelRequested = false;
	strlcpy(detail, slot->detail, sizeof(detail));
	SpinLockRelease(&slot->mutex);

	if (cancel)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
				 errmsg("canceling the transaction to resolve a distributed deadlock"),
				 errdetail_internal("%s", detail),
				 errhint("Transactions that change the same rows in different orders "
						 "on different nodes can deadlock; retry the transaction, or "
						 "change rows in a consistent order.")));
}

/*
 * CancelVictim asks the victim's backend to cancel its transaction.  If an
 * earlier request for the same transaction is still pending, the backend is
 * not in a loop that checks it; it gets a plain query cancel then.
 */
static void
CancelVictim(CoordinatorBackend *victim, const char *detail)
{
	PGPROC	   *proc = BackendPidGetProc(victim->pid);
	DeadlockCancelSlot *slot;
	bool		pending;

	if (proc == NULL || proc->lxid != victim->lxid || proc->pgprocno >= Deadlock->slotCount)
		return;
	slot = &Deadlock->slots[proc->pgprocno];

	SpinLockAcquire(&slot->mutex);
	pending = slot->cancelRequested && slot->lxid == victim->lxid;
	slot->lxid = victim->lxid;
	strlcpy(slot->detail, detail, sizeof(slot->detail));
	slot->cancelRequested = true;
	SpinLockRelease(&slot->mutex);

	ereport(LOG,
			(errmsg("shardext: canceling the transaction of process %d to resolve a "
					"distributed deadlock", victim->pid),
			 errdetail_internal("%s", detail)));
	if (pending)
		kill(victim->pid, SIGINT);
	else
		SetLatch(&proc->procLatch);
}

/* ---------------------------------------------------------------------
 * the detector (maintenance daemon)
 * ---------------------------------------------------------------------
 */

/*
 * DetectDistributedDeadlocks reads the wait graph, and when it has a
 * distributed cycle, reads it again and cancels one transaction of each
 * cycle that both readings show.  Runs its own transactions: call it
 * outside one.  Returns how many transactions it cancelled.  The
 * connections to the nodes are closed at the end.
 */
int
DetectDistributedDeadlocks(void)
{
	int			victims = 0;

	PG_TRY();
	{
		victims = DetectDeadlocksOnce();
	}
	PG_FINALLY();
	{
		CloseDetectorConnections();
	}
	PG_END_TRY();
	return victims;
}

/*
 * CloseDetectorConnections closes the connections of a round: a connection
 * kept open would keep a node's database from being dropped.  Nodes are
 * asked only while a statement waits long for a node, so rounds that
 * connect are rare.
 */
static void
CloseDetectorConnections(void)
{
	ListCell   *cell;

	foreach(cell, detectorConnections)
	{
		DetectorConnection *dc = lfirst(cell);

		if (dc->pgConn != NULL)
			PQfinish(dc->pgConn);
		dc->pgConn = NULL;
	}
}

/* DetectDeadlocksOnce is the work of DetectDistributedDeadlocks */
static int
DetectDeadlocksOnce(void)
{
	MemoryContext roundContext = AllocSetContextCreate(CurrentMemoryContext,
													   "shardext deadlock detection",
													   ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldContext = MemoryContextSwitchTo(roundContext);
	WaitGraph  *first;
	WaitGraph  *second;
	List	   *edges;
	List	   *cycle;
	int			victims = 0;

	first = ReadWaitGraph();
	if (first == NULL || !first->anyRemote || FindDistributedCycle(first->edges) == NIL)
	{
		MemoryContextSwitchTo(oldContext);
		MemoryContextDelete(roundContext);
		return 0;
	}

	second = ReadWaitGraph();
	if (second == NULL)
	{
		MemoryContextSwitchTo(oldContext);
		MemoryContextDelete(roundContext);
		return 0;
	}
	edges = ConfirmedEdges(first, second);

	while ((cycle = FindDistributedCycle(edges)) != NIL)
	{
		WaitEdge   *victimEdge = ChooseVictim(cycle, second->backends);
		CoordinatorBackend *victim;
		List	   *remaining = NIL;
		ListCell   *cell;

		if (victimEdge == NULL)
			break;				/* cannot happen, see ChooseVictim */
		victim = FindBackend(second->backends, victimEdge->waiter.pid);
		CancelVictim(victim, DescribeCycle(cycle, victimEdge));
		victims++;

		/* the victim's waits end with it; look for further cycles */
		foreach(cell, edges)
		{
			WaitEdge   *edge = lfirst(cell);

			if (!VertexEquals(edge->waiter, victimEdge->waiter) &&
				!VertexEquals(edge->holder, victimEdge->waiter))
				remaining = lappend(remaining, edge);
		}
		edges = remaining;
	}

	MemoryContextSwitchTo(oldContext);
	MemoryContextDelete(roundContext);
	return victims;
}

/*
 * ReadWaitGraph reads the lock waits of the coordinator and, when a
 * statement has waited for a node for longer than the timeout, of every
 * node, in a transaction of its own; NULL when shardext is not installed.
 * Nodes that cannot be asked are skipped (with a warning when they become
 * unreachable).
 */
static WaitGraph *
ReadWaitGraph(void)
{
	WaitGraph  *graph = palloc0(sizeof(WaitGraph));
	MemoryContext callerContext = CurrentMemoryContext;
	bool		installed;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	installed = ShardextExtensionLoaded();
	if (installed)
	{
		List	   *nodes = WorkerNodeList(false);
		char	   *prefix = ApplicationNamePrefix();
		ListCell   *cell;

		MemoryContextSwitchTo(callerContext);
		ReadCoordinatorWaits(graph, prefix);
		if (graph->longRemoteWait)
		{
			foreach(cell, nodes)
				ReadNodeWaits(graph, lfirst(cell), prefix);
		}
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(callerContext);
	return installed ? graph : NULL;
}

/*
 * ReadCoordinatorWaits adds the lock waits among the coordinator's backends
 * and records, for every backend of this database in a transaction, its
 * local transaction id and start time.
 */
static void
ReadCoordinatorWaits(WaitGraph *graph, const char *prefix)
{
	MemoryContext callerContext = CurrentMemoryContext;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/* sessions shardext opened to the coordinator itself belong to their owner */
	if (SPI_execute(psprintf(WAIT_EDGES_QUERY, "w.wait_event_type = 'Lock'"), true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the coordinator's lock waits");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext oldContext = MemoryContextSwitchTo(callerContext);

		AddWaitEdge(graph, COORDINATOR_NODE,
					pg_strtoint32(SPI_getvalue(tuple, desc, 1)), SPI_getvalue(tuple, desc, 2),
					pg_strtoint32(SPI_getvalue(tuple, desc, 3)), SPI_getvalue(tuple, desc, 4),
					strcmp(SPI_getvalue(tuple, desc, 5), "t") == 0, prefix);
		MemoryContextSwitchTo(oldContext);
	}

	/*
	 * The third column: the statement has run for longer than the timeout
	 * and now waits for a node (our waits report wait event "Extension").
	 * A distributed deadlock always has such a statement; without one, the
	 * nodes need not be asked.
	 */
	if (SPI_execute(psprintf("SELECT pid, xact_start, "
							 "coalesce(state = 'active' AND wait_event_type = 'Extension' "
							 "AND query_start < pg_catalog.clock_timestamp() - %d * interval '1 ms', false) "
							 "FROM pg_catalog.pg_stat_activity "
							 "WHERE datid = (SELECT oid FROM pg_catalog.pg_database "
							 "WHERE datname = pg_catalog.current_database()) "
							 "AND xact_start IS NOT NULL",
							 Max(ShardextDistributedDeadlockTimeout, 0)),
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the coordinator's transactions");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		int32		pid = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
													  SPI_tuptable->tupdesc, 1, &isnull));
		TimestampTz start = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[i],
															  SPI_tuptable->tupdesc, 2,
															  &isnull));
		bool		longRemoteWait = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i],
																SPI_tuptable->tupdesc, 3,
																&isnull));
		PGPROC	   *proc = BackendPidGetProc(pid);
		MemoryContext oldContext;
		CoordinatorBackend *backend;

		graph->longRemoteWait |= longRemoteWait;

		if (proc == NULL || proc->lxid == InvalidLocalTransactionId)
			continue;
		oldContext = MemoryContextSwitchTo(callerContext);
		backend = palloc(sizeof(CoordinatorBackend));
		backend->pid = pid;
		backend->lxid = proc->lxid;
		backend->xactStart = start;
		graph->backends = lappend(graph->backends, backend);
		MemoryContextSwitchTo(oldContext);
	}
	SPI_finish();
}

/*
 * ReadNodeWaits adds the lock waits on one node, each backend mapped to
 * the coordinator transaction it works for when it has one of ours.
 */
static void
ReadNodeWaits(WaitGraph *graph, WorkerNode *node, const char *prefix)
{
	DetectorConnection *dc = DetectorConnectionFor(node);
	PGresult   *result;

	if (dc->pgConn == NULL)
		return;
	result = RunNodeQuery(dc, psprintf(WAIT_EDGES_QUERY, "w.wait_event_type = 'Lock'"),
						  NODE_QUERY_TIMEOUT_MS);
	if (result == NULL)
	{
		ereport(WARNING,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not read the lock waits of node %s:%d for distributed "
						"deadlock detection", node->host, node->port)));
		return;
	}

	for (int i = 0; i < PQntuples(result); i++)
		AddWaitEdge(graph, node->nodeId,
					pg_strtoint32(PQgetvalue(result, i, 0)), PQgetvalue(result, i, 1),
					pg_strtoint32(PQgetvalue(result, i, 2)), PQgetvalue(result, i, 3),
					strcmp(PQgetvalue(result, i, 4), "t") == 0, prefix);
	PQclear(result);
}

/*
 * AddWaitEdge adds a lock wait on a server, its ends mapped to vertices.  A
 * wait for a backend that works for one of our sessions counts as a wait
 * for that session only if the holder waits for it (see WAIT_EDGES_QUERY).
 */
static void
AddWaitEdge(WaitGraph *graph, int32 onNode, int32 waiterPid, const char *waiterApp,
			int32 holderPid, const char *holderApp, bool holderWaitsForSession,
			const char *prefix)
{
	WaitEdge   *edge = palloc0(sizeof(WaitEdge));

	edge->onNode = onNode;
	edge->waiterPid = waiterPid;
	edge->holderPid = holderPid;
	edge->waiter = MapNodeBackend(onNode, waiterPid, waiterApp, prefix);
	edge->holder = MapNodeBackend(onNode, holderPid, holderApp, prefix);
	if (!(edge->holder.nodeId == onNode && edge->holder.pid == holderPid) &&
		!holderWaitsForSession)
	{
		pfree(edge);
		return;
	}
	graph->edges = lappend(graph->edges, edge);
	if (onNode != COORDINATOR_NODE &&
		(edge->waiter.nodeId == COORDINATOR_NODE || edge->holder.nodeId == COORDINATOR_NODE))
		graph->anyRemote = true;
}

/* a node's backend: our coordinator session's vertex, or its own */
static WaitVertex
MapNodeBackend(int32 nodeId, int32 pid, const char *appName, const char *prefix)
{
	WaitVertex	vertex = {nodeId, pid};
	size_t		prefixLength = strlen(prefix);

	if (strncmp(appName, prefix, prefixLength) == 0)
	{
		const char *digits = appName + prefixLength;
		char	   *end;
		long		coordinatorPid = strtol(digits, &end, 10);

		if (end != digits && *end == '\0' && coordinatorPid > 0 && coordinatorPid <= PG_INT32_MAX)
		{
			vertex.nodeId = COORDINATOR_NODE;
			vertex.pid = (int32) coordinatorPid;
		}
	}
	return vertex;
}

/*
 * DetectorConnectionFor returns the daemon's connection to a node,
 * connecting if needed; its pgConn is NULL when the node cannot be reached
 * now.
 */
static DetectorConnection *
DetectorConnectionFor(WorkerNode *node)
{
	DetectorConnection *found = NULL;
	ListCell   *cell;
	TimestampTz now = GetCurrentTimestamp();

	foreach(cell, detectorConnections)
	{
		DetectorConnection *dc = lfirst(cell);

		if (dc->nodeId == node->nodeId)
			found = dc;
	}
	if (found != NULL && (strcmp(found->host, node->host) != 0 || found->port != node->port))
	{
		/* the node moved: start over */
		if (found->pgConn != NULL)
			PQfinish(found->pgConn);
		found->pgConn = NULL;
		strlcpy(found->host, node->host, sizeof(found->host));
		found->port = node->port;
	}
	if (found == NULL)
	{
		MemoryContext oldContext = MemoryContextSwitchTo(TopMemoryContext);

		found = palloc0(sizeof(DetectorConnection));
		found->nodeId = node->nodeId;
		strlcpy(found->host, node->host, sizeof(found->host));
		found->port = node->port;
		detectorConnections = lappend(detectorConnections, found);
		MemoryContextSwitchTo(oldContext);
	}

	if (found->pgConn != NULL && PQstatus(found->pgConn) != CONNECTION_OK)
	{
		PQfinish(found->pgConn);
		found->pgConn = NULL;
	}
	if (found->pgConn == NULL && found->retryAfter <= now)
	{
		found->pgConn = ConnectToNodeDirect(node->host, node->port,
											get_database_name(MyDatabaseId), false);
		if (found->pgConn == NULL)
		{
			found->retryAfter = TimestampTzPlusMilliseconds(now, NODE_RETRY_MS);
			if (!found->failing)
				ereport(WARNING,
						(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
						 errmsg("could not connect to node %s:%d for distributed deadlock "
								"detection", node->host, node->port),
						 errdetail("Deadlocks that involve the node go undetected until "
								   "it can be reached.")));
			found->failing = true;
		}
		else
			found->failing = false;
	}
	return found;
}

/*
 * RunNodeQuery runs a query on a connection in non-blocking mode, waiting
 * at most timeoutMs (and reacting to interrupts); returns its result, or
 * NULL on failure, after which the connection is closed.
 */
static PGresult *
RunNodeQuery(DetectorConnection *dc, const char *query, int timeoutMs)
{
	PGconn	   *pgConn = dc->pgConn;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeoutMs);
	PGresult   *result;
	PGresult   *last = NULL;
	bool		failed = false;

	if (!PQsendQuery(pgConn, query))
		failed = true;
	while (!failed)
	{
		while (!failed && (PQisBusy(pgConn) || PQflush(pgConn) == 1))
		{
			long		timeout = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
																  deadline);
			int			rc;

			if (timeout <= 0)
			{
				failed = true;
				break;
			}
			rc = WaitLatchOrSocket(MyLatch,
								   WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT |
								   WL_EXIT_ON_PM_DEATH,
								   PQsocket(pgConn), timeout, PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				CHECK_FOR_INTERRUPTS();
			}
			if ((rc & WL_SOCKET_READABLE) && !PQconsumeInput(pgConn))
				failed = true;
		}
		if (failed)
			break;
		result = PQgetResult(pgConn);
		if (result == NULL)
			break;
		if (PQresultStatus(result) != PGRES_TUPLES_OK)
			failed = true;
		PQclear(last);
		last = result;
	}

	if (failed)
	{
		PQclear(last);
		/* the connection's state is unknown: the next round reconnects */
		PQfinish(pgConn);
		dc->pgConn = NULL;
		return NULL;
	}
	return last;
}

/*
 * ConfirmedEdges returns the waits of the second reading that the first
 * one showed too, between coordinator transactions that stayed the same.
 */
static List *
ConfirmedEdges(WaitGraph *first, WaitGraph *second)
{
	List	   *result = NIL;
	ListCell   *cell;

	foreach(cell, second->edges)
	{
		WaitEdge   *edge = lfirst(cell);
		bool		seen = false;
		ListCell   *other;

		foreach(other, first->edges)
		{
			WaitEdge   *old = lfirst(other);

			if (VertexEquals(old->waiter, edge->waiter) &&
				VertexEquals(old->holder, edge->holder) &&
				old->onNode == edge->onNode && old->waiterPid == edge->waiterPid &&
				old->holderPid == edge->holderPid)
				seen = true;
		}
		for (int end = 0; seen && end < 2; end++)
		{
			WaitVertex	vertex = end == 0 ? edge->waiter : edge->holder;
			CoordinatorBackend *before;
			CoordinatorBackend *after;

			if (vertex.nodeId != COORDINATOR_NODE)
				continue;
			before = FindBackend(first->backends, vertex.pid);
			after = FindBackend(second->backends, vertex.pid);
			/* a process of another database is known by its pid only */
			if ((before == NULL) != (after == NULL) ||
				(before != NULL && before->lxid != after->lxid))
				seen = false;
		}
		if (seen)
			result = lappend(result, edge);
	}
	return result;
}

static CoordinatorBackend *
FindBackend(List *backends, int32 pid)
{
	ListCell   *cell;

	foreach(cell, backends)
	{
		CoordinatorBackend *backend = lfirst(cell);

		if (backend->pid == pid)
			return backend;
	}
	return NULL;
}

static bool
VertexEquals(WaitVertex a, WaitVertex b)
{
	return a.nodeId == b.nodeId && a.pid == b.pid;
}

/* what a depth-first search from a vertex found */
typedef enum CycleSearchResult
{
	SEARCH_NOTHING,				/* no way back to the start */
	SEARCH_LOCAL_ONLY,			/* ways back, but only cycles one server sees */
	SEARCH_FOUND				/* a distributed cycle */
} CycleSearchResult;

static CycleSearchResult FindCycleFrom(List *edges, WaitVertex start, WaitVertex current,
									   List **path, List **dead, int *steps);

/*
 * FindDistributedCycle returns the edges of a wait cycle that no single
 * server sees (in order, each waiting for the next one's waiter), or NIL.
 */
static List *
FindDistributedCycle(List *edges)
{
	ListCell   *cell;
	int			steps = 0;

	foreach(cell, edges)
	{
		WaitEdge   *edge = lfirst(cell);
		List	   *path = NIL;
		List	   *dead = NIL;

		/* every such cycle has a wait by a coordinator transaction */
		if (edge->waiter.nodeId != COORDINATOR_NODE)
			continue;
		if (FindCycleFrom(edges, edge->waiter, edge->waiter, &path, &dead,
						  &steps) == SEARCH_FOUND)
			return path;
		if (steps > CYCLE_SEARCH_STEPS)
			break;
	}
	return NIL;
}

/*
 * FindCycleFrom extends the path (edges from start to current) depth first,
 * and returns SEARCH_FOUND with *path a distributed cycle back to start.
 * Vertices with no way back to start at all are remembered in *dead and
 * not explored again; the steps bound the rest.
 */
static CycleSearchResult
FindCycleFrom(List *edges, WaitVertex start, WaitVertex current, List **path,
			  List **dead, int *steps)
{
	CycleSearchResult best = SEARCH_NOTHING;
	ListCell   *cell;

	check_stack_depth();
	foreach(cell, edges)
	{
		WaitEdge   *edge = lfirst(cell);
		bool		isDead = false;
		bool		onPath = false;
		ListCell   *other;

		if (!VertexEquals(edge->waiter, current) || ++(*steps) > CYCLE_SEARCH_STEPS)
			continue;

		*path = lappend(*path, edge);
		if (VertexEquals(edge->holder, start))
		{
			if (!CycleSeenByOneServer(*path))
				return SEARCH_FOUND;
			best = SEARCH_LOCAL_ONLY;
			*path = list_delete_last(*path);
			continue;
		}
		foreach(other, *dead)
			isDead |= VertexEquals(*(WaitVertex *) lfirst(other), edge->holder);
		foreach(other, *path)
			onPath |= VertexEquals(((WaitEdge *) lfirst(other))->waiter, edge->holder);
		if (!isDead && !onPath)
		{
			CycleSearchResult found = FindCycleFrom(edges, start, edge->holder, path,
													dead, steps);

			if (found == SEARCH_FOUND)
				return SEARCH_FOUND;
			if (found == SEARCH_LOCAL_ONLY)
				best = SEARCH_LOCAL_ONLY;
			else
				*dead = lappend(*dead, &edge->holder);
		}
		*path = list_delete_last(*path);
	}
	return best;
}

/*
 * CycleSeenByOneServer: every wait of the cycle is on the same server, and
 * each waits for the very backend that waits next, so that server's own
 * deadlock detector sees the cycle.
 */
static bool
CycleSeenByOneServer(List *cycle)
{
	int			count = list_length(cycle);

	for (int i = 0; i < count; i++)
	{
		WaitEdge   *edge = list_nth(cycle, i);
		WaitEdge   *next = list_nth(cycle, (i + 1) % count);

		if (edge->onNode != next->onNode || edge->holderPid != next->waiterPid)
			return false;
	}
	return true;
}

/*
 * ChooseVictim returns the cycle's edge whose waiter is the youngest
 * coordinator transaction of this database that waits for a node.  There
 * always is one: a cycle no single server sees passes from one server to
 * another (or from one backend to another of the same session) only
 * through a coordinator transaction that waits for a node.
 */
static WaitEdge *
ChooseVictim(List *cycle, List *backends)
{
	WaitEdge   *victim = NULL;
	TimestampTz victimStart = 0;
	ListCell   *cell;

	foreach(cell, cycle)
	{
		WaitEdge   *edge = lfirst(cell);
		CoordinatorBackend *backend;

		if (edge->waiter.nodeId != COORDINATOR_NODE || edge->onNode == COORDINATOR_NODE)
			continue;
		backend = FindBackend(backends, edge->waiter.pid);
		if (backend == NULL)
			continue;
		if (victim == NULL || backend->xactStart > victimStart ||
			(backend->xactStart == victimStart && edge->waiter.pid > victim->waiter.pid))
		{
			victim = edge;
			victimStart = backend->xactStart;
		}
	}
	return victim;
}

/*
 * DescribeCycle says who waits for whom where, starting at the victim:
 * "Process 10 waits for process 11 on node 127.0.0.1:9702; process 11 waits
 * for process 10 on node 127.0.0.1:9701."  Coordinator processes are named
 * by their pid on the coordinator.
 */
static char *
DescribeCycle(List *cycle, WaitEdge *victimEdge)
{
	StringInfoData text;
	int			count = list_length(cycle);
	int			first = 0;

	for (int i = 0; i < count; i++)
	{
		if (list_nth(cycle, i) == victimEdge)
			first = i;
	}

	initStringInfo(&text);
	for (int i = 0; i < count; i++)
	{
		WaitEdge   *edge = list_nth(cycle, (first + i) % count);
		char	   *waiter = DescribeVertex(edge->waiter);

		if (i == 0)
			waiter[0] = pg_toupper((unsigned char) waiter[0]);
		appendStringInfo(&text, "%s%s waits for %s on %s",
						 i > 0 ? "; " : "", waiter, DescribeVertex(edge->holder),
						 ServerName(edge->onNode));
	}
	appendStringInfoChar(&text, '.');
	return text.data;
}

static char *
DescribeVertex(WaitVertex vertex)
{
	if (vertex.nodeId == COORDINATOR_NODE)
		return psprintf("process %d", vertex.pid);
	return psprintf("process %d of %s", vertex.pid, ServerName(vertex.nodeId));
}

static char *
ServerName(int32 nodeId)
{
	ListCell   *cell;

	if (nodeId == COORDINATOR_NODE)
		return pstrdup("the coordinator");
	foreach(cell, detectorConnections)
	{
		DetectorConnection *dc = lfirst(cell);

		if (dc->nodeId == nodeId)
			return psprintf("node %s:%d", dc->host, dc->port);
	}
	return psprintf("node %d", nodeId);
}
