/*-------------------------------------------------------------------------
 *
 * wait_graph.c
 *	  Reading the lock waits of the coordinator and of the nodes for the
 *	  distributed deadlock detector (deadlock_detection.c), and mapping
 *	  each node backend to the coordinator transaction it works for.  A
 *	  wait for a prepared transaction whose coordinator transaction still
 *	  runs (an implicit transaction's write prepares with its statement
 *	  while other nodes still work) is a wait for that transaction.
 *
 * The nodes are asked over connections of the maintenance daemon's own,
 * with bounded waits (shardext.connect_timeout to connect,
 * NODE_QUERY_TIMEOUT_MS per query), and only when a coordinator statement
 * has waited for a node longer than the timeout; the connections are
 * closed after each round (CloseDetectorConnections).  A node that cannot
 * be asked is left alone for a while, twice as long after each failure, so
 * that a hung node does not slow down every round.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "shardext/connection.h"
#include "shardext/deadlock_detection.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/remote_command.h"
#include "shardext/wait_graph.h"

/* how long the detector waits for a node's answer */
#define NODE_QUERY_TIMEOUT_MS 5000
/* after a failure, leave the node alone this long (doubling up to the maximum) */
#define NODE_RETRY_MS 2000
#define NODE_MAX_RETRY_MS 60000
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

/*
 * The waits of a node's backends for prepared transactions (which have no
 * backend: pg_blocking_pids shows them as 0): waiter pid and
 * application_name, and the gid of the prepared transaction.  A prepared
 * transaction is known by its own transaction id lock, which every wait
 * for its rows or index entries waits for.  %s filters the waiters.
 */
#define PREPARED_WAITS_QUERY \
	"SELECT w.pid, coalesce(w.application_name, ''), p.gid " \
	"FROM pg_catalog.pg_stat_activity w " \
	"JOIN pg_catalog.pg_locks l ON l.pid = w.pid AND NOT l.granted " \
	"AND l.locktype = 'transactionid' " \
	"JOIN pg_catalog.pg_prepared_xacts p ON p.transaction = l.transactionid " \
	"WHERE %s"

/* the daemon's connection to a node */
typedef struct DetectorConnection
{
	int32		nodeId;
	char		host[256];
	int32		port;
	NodeConnection *conn;		/* dedicated, kept across the round's transactions */
	TimestampTz retryAfter;
	int			retryMs;		/* the wait after the last failure */
	bool		failing;		/* the last attempt failed (and was reported) */
} DetectorConnection;

static List *detectorConnections = NIL;

static void ReadCoordinatorWaits(WaitGraph *graph, const char *prefix);
static void ReadNodeWaits(WaitGraph *graph, WorkerNode *node, const char *prefix);
static DetectorConnection *DetectorConnectionFor(WorkerNode *node);
static PGresult *RunNodeQuery(DetectorConnection *dc, const char *query, int timeoutMs);
static void NodeFailed(DetectorConnection *dc);
static int32 PreparedTransactionOwner(const char *gid, const char *prefix);
static void CloseDetectorConnection(DetectorConnection *dc);
static WaitVertex MapNodeBackend(int32 nodeId, int32 pid, const char *appName,
								 const char *prefix);
static void AddWaitEdge(WaitGraph *graph, int32 onNode, int32 waiterPid,
						const char *waiterApp, int32 holderPid, const char *holderApp,
						bool holderWaitsForSession, const char *prefix);

/*
 * ReadWaitGraph reads the lock waits of the coordinator and, when a
 * statement has waited for a node for longer than the timeout, of every
 * node, in a transaction of its own; NULL when shardext is not installed.
 * Nodes that cannot be asked are skipped (with a warning when they become
 * unreachable).
 */
WaitGraph *
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
		char	   *prefix = RemoteApplicationNamePrefix();
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

		if (proc == NULL || ProcLocalXid(proc) == InvalidLocalTransactionId)
			continue;
		oldContext = MemoryContextSwitchTo(callerContext);
		backend = palloc(sizeof(CoordinatorBackend));
		backend->pid = pid;
		backend->lxid = ProcLocalXid(proc);
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

	if (dc->conn == NULL)
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

	result = RunNodeQuery(dc, psprintf(PREPARED_WAITS_QUERY, "w.wait_event_type = 'Lock'"),
						  NODE_QUERY_TIMEOUT_MS);
	if (result == NULL)
		return;					/* the connection failed: warned about next round */
	for (int i = 0; i < PQntuples(result); i++)
	{
		int32		coordinatorPid = PreparedTransactionOwner(PQgetvalue(result, i, 2),
															  prefix);

		/* the prepared transaction's locks stay until its session ends it */
		if (coordinatorPid != 0)
			AddWaitEdge(graph, node->nodeId, pg_strtoint32(PQgetvalue(result, i, 0)),
						PQgetvalue(result, i, 1), 0, psprintf("%s%d", prefix, coordinatorPid),
						true, prefix);
	}
	PQclear(result);
}

/*
 * PreparedTransactionOwner returns the pid of this database's coordinator
 * backend whose transaction prepared the transaction gid on a node (see
 * RemotePreparedGidPrefix: <prefix><full xid>_<serial>; a statement of an
 * implicit transaction prepares with its tasks, and its session may still
 * wait for other nodes), or 0 when that transaction no longer runs or the
 * gid is not ours.
 */
static int32
PreparedTransactionOwner(const char *gid, const char *prefix)
{
	size_t		prefixLength = strlen(prefix);
	FullTransactionId next = ReadNextFullTransactionId();
	char	   *end;
	uint64		fullXid;

	if (strncmp(gid, prefix, prefixLength) != 0)
		return 0;
	errno = 0;
	fullXid = strtou64(gid + prefixLength, &end, 10);
	if (errno != 0 || end == gid + prefixLength || *end != '_' ||
		fullXid >= U64FromFullTransactionId(next) ||
		U64FromFullTransactionId(next) - fullXid > MaxTransactionId / 2)
		return 0;
	return BackendXidGetPid(XidFromFullTransactionId(FullTransactionIdFromU64(fullXid)));
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
		CloseDetectorConnection(found);
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

	if (found->conn != NULL && PQstatus(found->conn->pgConn) != CONNECTION_OK)
		CloseDetectorConnection(found);
	if (found->conn == NULL && found->retryAfter <= now)
	{
		found->conn = OpenDedicatedConnection(node->host, node->port, false, false);
		if (found->conn == NULL)
		{
			if (!found->failing)
				ereport(WARNING,
						(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
						 errmsg("could not connect to node %s:%d for distributed deadlock "
								"detection", node->host, node->port),
						 errdetail("Deadlocks that involve the node go undetected until "
								   "it can be reached.")));
			NodeFailed(found);
		}
		else
		{
			KeepConnectionAcrossTransactions(found->conn);
			found->failing = false;
			found->retryMs = 0;
		}
	}
	return found;
}

/* NodeFailed leaves a node alone for a while, longer after each failure */
static void
NodeFailed(DetectorConnection *dc)
{
	dc->failing = true;
	dc->retryMs = dc->retryMs == 0 ? NODE_RETRY_MS : Min(dc->retryMs * 2, NODE_MAX_RETRY_MS);
	dc->retryAfter = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), dc->retryMs);
}

/*
 * RunNodeQuery runs a query on a detector connection, interruptibly and
 * waiting at most timeoutMs; returns its result, or NULL on failure, after
 * which the connection is closed and the node left alone for a while.
 */
static PGresult *
RunNodeQuery(DetectorConnection *dc, const char *query, int timeoutMs)
{
	char	   *failure = NULL;
	PGresult   *result = TryRemoteQuery(dc->conn, query, 0, NULL, timeoutMs,
										&failure);

	if (result == NULL || PQresultStatus(result) != PGRES_TUPLES_OK)
	{
		PQclear(result);
		/* the connection's state is unknown: a later round reconnects */
		CloseDetectorConnection(dc);
		NodeFailed(dc);
		return NULL;
	}
	return result;
}

/* CloseDetectorConnection closes one node's connection, if open */
static void
CloseDetectorConnection(DetectorConnection *dc)
{
	CloseDedicatedConnection(dc->conn);
	dc->conn = NULL;
}

/*
 * CloseDetectorConnections closes the connections of a round: a connection
 * kept open would keep a node's database from being dropped.  Nodes are
 * asked only while a statement waits long for a node, so rounds that
 * connect are rare.
 */
void
CloseDetectorConnections(void)
{
	ListCell   *cell;

	foreach(cell, detectorConnections)
		CloseDetectorConnection(lfirst(cell));
}

/*
 * WaitGraphServerName names a server of the wait graph for messages: the
 * coordinator, or a node by the address the detector connected to.
 */
char *
WaitGraphServerName(int32 nodeId)
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
