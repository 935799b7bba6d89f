/*-------------------------------------------------------------------------
 *
 * connection.c
 *	  Per-backend cache of connections to worker nodes, and dedicated
 *	  connections outside the cache.
 *
 * A connection is opened on first use and may be kept for later
 * statements.  Its session is pinned like postgres_fdw pins its sessions
 * (search_path, datestyle, intervalstyle, extra_float_digits), so deparsed
 * SQL and text values mean the same on both sides; the time zone follows
 * the local session (see remote_command.c).  Connections are made without
 * blocking the backend's reaction to cancels, and give up after
 * shardext.connect_timeout.  StartNodeConnection and
 * ContinueNodeConnection let the executor open several at once from its
 * event loop; GetNodeConnection* open one and wait for it.
 *
 * Every connection to a node holds a slot of the node's shared count
 * (shared_pool.c).  A backend's first connection to a node is required: if
 * the pool is full, the backend waits for a slot -- holding only slots of
 * pools that come earlier in one global order, or that its transaction
 * uses (see AcquireSlot), so that backends never wait for each other in a
 * circle.  More connections to a node are optional and simply not opened
 * when the pool has no room.
 *
 * At the end of each transaction (ConnectionsAtTransactionEnd) the cache
 * keeps shardext.max_cached_connections_per_node connections per node, and
 * more (those of multi-shard statements, up to max_connections_per_node)
 * only while the node's pool is at most half full and nobody waits, so
 * that the next such statement need not open them again while others can
 * always get their first connection; it closes connections older than
 * shardext.connection_lifetime, and gives a
 * connection back when other sessions wait for a slot of its node and it
 * was held for shardext.connection_share_interval: so busy sessions take
 * turns instead of starving the others.
 *
 * Dedicated connections (shard moves, node management, recovery, the
 * deadlock detector) stay out of the cache; they are closed by their
 * callers, and else when the resource owner they were opened under is
 * released (an error, or a caller that forgot), so that neither the
 * PGconn nor the pool slot leaks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "commands/dbcommands.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/postmaster.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "shardext/pg_compat.h"
#include "shardext/shardext.h"
#include "shardext/connection.h"
#include "shardext/fencing.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/remote_command.h"
#include "shardext/shared_pool.h"

/* how long the query that learns a node's connection limit may take */
#define NODE_LIMIT_QUERY_TIMEOUT_MS 2000
/* ... and how long an answer stands */
#define NODE_LIMIT_MAX_AGE_MS 1000
/* prepared statements a cached connection may carry unused (see connection.h) */
#define MAX_ABANDONED_STATEMENTS 500

typedef struct ConnectionKey
{
	int32		nodeId;
	Oid			userId;
} ConnectionKey;

typedef struct ConnectionCacheEntry
{
	ConnectionKey key;
	List	   *connections;	/* NodeConnection *, open ones first */
} ConnectionCacheEntry;

/* shardext.node_conninfo, parsed by its check hook (malloc'd, one block) */
typedef struct NodeConninfoOptions
{
	int			count;
	const char **keywords;
	const char **values;
} NodeConninfoOptions;

/*
 * The libpq options shardext.node_conninfo may set: security and network
 * behaviour.  What identifies the session (host, port, user, dbname,
 * options, application_name, client_encoding, replication) is shardext's
 * to set; passwords belong in a password file.
 */
static const char *const AllowedConninfoKeywords[] = {
	"channel_binding", "connect_timeout", "gssencmode", "gsslib", "keepalives",
	"keepalives_count", "keepalives_idle", "keepalives_interval", "krbsrvname",
	"passfile", "requirepeer", "ssl_max_protocol_version", "ssl_min_protocol_version",
	"sslcert", "sslcompression", "sslcrl", "sslcrldir", "sslkey", "sslmode",
	"sslrootcert", "sslsni", "target_session_attrs", "tcp_user_timeout"
};

static HTAB *ConnectionCache = NULL;
static MemoryContext ConnectionContext = NULL;
static List *dedicatedConnections = NIL;
static int	connectionSerial = 0;
static NodeConninfoOptions *nodeConninfoOptions = NULL;
static bool lastAttemptTimedOut = false;

/* remote session settings that change how values are read and written */
typedef struct FormatSetting
{
	const char *name;
	const char *remoteValue;	/* as pinned at connect (StartConnection) */
} FormatSetting;

static const FormatSetting formatSettings[] = {
	{"DateStyle", "ISO, MDY"},
	{"IntervalStyle", "postgres"},
	{"bytea_output", "hex"},
	{NULL, NULL}
};

static void EnsureConnectionContext(void);
static ConnectionCacheEntry *GetCacheEntry(int32 nodeId);
static NodeConnection *CachedConnectionAt(int32 nodeId, int index);
static bool PrepareConnection(NodeConnection *conn, PoolSlotKind kind, bool wait);
static bool AcquireSlot(NodeConnection *conn, PoolSlotKind kind, bool wait);
static void ReleaseIdleConnectionsAfter(PoolEntry *entry);
static int	ComparePoolOrder(const void *a, const void *b);
static void BeginConnect(NodeConnection *conn, const char *dbname, bool replication);
static void BeginConnectAs(NodeConnection *conn, const char *dbname, const char *user,
						   bool replication);
static bool FinishConnect(NodeConnection *conn);
static void CompleteConnection(NodeConnection *conn);
static void LearnNodeLimit(NodeConnection *conn);
static bool ConnectSocketReady(NodeConnection *conn);
static void ConnectionFailed(NodeConnection *conn, const char *hint);
static PGconn *StartConnection(const char *host, int32 port, const char *dbname,
							   const char *user, const char *timeZone, bool replication);
static char *ConnectionFailureMessage(NodeConnection *conn);
static bool ShouldKeepConnection(NodeConnection *conn, TimestampTz now, int kept);
static void CompactConnectionList(ConnectionCacheEntry *entry);
static void RepointConnection(NodeConnection *conn, WorkerNode *node);
static int	ConnectTimeout(NodeConnection *conn);
static NodeConnection *NewDedicatedConnection(const char *host, int32 port, bool counted,
											  int timeoutMs);
static NodeConnection *OpenDedicated(const char *host, int32 port, const char *dbname,
									 bool replication, bool counted, bool errorOnFailure,
									 int timeoutMs, const char *hint);
static void ConnectionResourceRelease(ResourceReleasePhase phase, bool isCommit,
									  bool isTopLevel, void *arg);

/* registers the resource release callback; called from _PG_init */
void
InitializeConnections(void)
{
	RegisterResourceReleaseCallback(ConnectionResourceRelease, NULL);
}

static void
EnsureConnectionContext(void)
{
	HASHCTL		info;

	if (ConnectionCache != NULL)
		return;

	ConnectionContext = AllocSetContextCreate(TopMemoryContext,
											  "shardext connections",
											  ALLOCSET_DEFAULT_SIZES);
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(ConnectionKey);
	info.entrysize = sizeof(ConnectionCacheEntry);
	info.hcxt = ConnectionContext;
	ConnectionCache = hash_create("shardext connection cache", 16, &info,
								  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

static ConnectionCacheEntry *
GetCacheEntry(int32 nodeId)
{
	ConnectionKey key;
	ConnectionCacheEntry *entry;
	bool		found;

	EnsureConnectionContext();
	memset(&key, 0, sizeof(key));
	key.nodeId = nodeId;
	key.userId = GetUserId();
	entry = hash_search(ConnectionCache, &key, HASH_ENTER, &found);
	if (!found)
		entry->connections = NIL;
	return entry;
}

/*
 * CachedConnectionAt returns the index-th cache slot of the current user's
 * connections to a node, making (unconnected) slots up to it as needed.
 */
static NodeConnection *
CachedConnectionAt(int32 nodeId, int index)
{
	ConnectionCacheEntry *entry = GetCacheEntry(nodeId);
	NodeConnection *conn;
	WorkerNode *node;

	Assert(index >= 0);
	while (list_length(entry->connections) <= index)
	{
		MemoryContext oldContext;

		node = GetWorkerNode(nodeId);
		conn = MemoryContextAllocZero(ConnectionContext, sizeof(NodeConnection));
		conn->nodeId = nodeId;
		conn->userId = GetUserId();
		conn->host = MemoryContextStrdup(ConnectionContext, node->host);
		conn->port = node->port;
		conn->keepWaitSet = true;
		conn->poolEntry = GetPoolEntry(node->host, node->port);
		oldContext = MemoryContextSwitchTo(ConnectionContext);
		entry->connections = lappend(entry->connections, conn);
		MemoryContextSwitchTo(oldContext);
	}
	conn = list_nth(entry->connections, index);
	node = GetWorkerNode(nodeId);
	if (conn->port != node->port || strcmp(conn->host, node->host) != 0)
		RepointConnection(conn, node);
	return conn;
}

/*
 * RepointConnection makes a cached connection of a node whose address
 * changed (a replica took over the node, shardext_update_node) connect to
 * the new address on its next use; inside a remote transaction that is an
 * error, as for a connection lost then.
 */
static void
RepointConnection(NodeConnection *conn, WorkerNode *node)
{
	if (conn->pgConn != NULL && conn->xactState != REMOTE_XACT_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("node %d moved from %s:%d to %s:%d during the transaction",
						node->nodeId, conn->host, conn->port, node->host, node->port)));
	CloseNodeConnection(conn);
	pfree(conn->host);
	conn->host = MemoryContextStrdup(ConnectionContext, node->host);
	conn->port = node->port;
	conn->poolEntry = GetPoolEntry(node->host, node->port);
}

/*
 * GetNodeConnection returns the session's first connection to a node for
 * the current user, opening it if needed.  Broken connections that are not
 * part of a remote transaction are replaced transparently.
 */
NodeConnection *
GetNodeConnection(int32 nodeId)
{
	return GetNodeConnectionByIndex(nodeId, 0);
}

/*
 * GetNodeConnectionByIndex returns the index-th connection (0-based) to a
 * node for the current user, opening it if needed (waiting for a slot of
 * the shared pool if it must).
 */
NodeConnection *
GetNodeConnectionByIndex(int32 nodeId, int index)
{
	NodeConnection *conn = StartNodeConnection(nodeId, index, POOL_SLOT_REQUIRED);

	FinishNodeConnection(conn);
	return conn;
}

/*
 * GetOptionalNodeConnection is GetNodeConnectionByIndex for a connection
 * that only adds parallelism: NULL when the shared pool has no room.
 */
NodeConnection *
GetOptionalNodeConnection(int32 nodeId, int index)
{
	NodeConnection *conn = StartNodeConnection(nodeId, index, POOL_SLOT_OPTIONAL);

	if (conn != NULL)
		FinishNodeConnection(conn);
	return conn;
}

/*
 * TryGetNodeConnectionByIndex returns the index-th connection to a node
 * like GetOptionalNodeConnection (NULL when the node's pool has no room),
 * but a new one gives up after timeoutMs, and a failed attempt returns NULL
 * with *unreachable set instead of raising an error: for read replicas,
 * whose reads then go to the primary.
 */
NodeConnection *
TryGetNodeConnectionByIndex(int32 nodeId, int index, int timeoutMs, bool *unreachable)
{
	NodeConnection *conn = CachedConnectionAt(nodeId, index);

	*unreachable = false;
	conn->connectTimeoutMs = timeoutMs;
	if (!PrepareConnection(conn, POOL_SLOT_OPTIONAL, false))
		return NULL;
	if (conn->connecting && !FinishConnect(conn))
	{
		DisconnectNodeConnection(conn);
		*unreachable = true;
		return NULL;
	}
	return conn;
}

/*
 * StartNodeConnection returns the index-th connection to a node: the
 * cached one when it is usable, else one that has begun connecting
 * (conn->connecting; drive it with ContinueNodeConnection or
 * FinishNodeConnection).  A required slot may wait; for an optional one
 * NULL is returned when the shared pool has no room.  A broken connection
 * inside a remote transaction is an error.
 */
NodeConnection *
StartNodeConnection(int32 nodeId, int index, PoolSlotKind kind)
{
	NodeConnection *conn = CachedConnectionAt(nodeId, index);

	return PrepareConnection(conn, kind, true) ? conn : NULL;
}

/*
 * CachedConnectionIsOpen tells whether the index-th connection of the
 * current user to a node is open and idle outside a remote transaction:
 * one kept from earlier statements, which a scan can take without waiting
 * for slow start.
 */
bool
CachedConnectionIsOpen(int32 nodeId, int index)
{
	ConnectionCacheEntry *entry = GetCacheEntry(nodeId);
	NodeConnection *conn;

	if (list_length(entry->connections) <= index)
		return false;
	conn = list_nth(entry->connections, index);
	return conn->pgConn != NULL && !conn->connecting && !conn->queryInProgress &&
		conn->xactState == REMOTE_XACT_NONE && PQstatus(conn->pgConn) == CONNECTION_OK;
}

/*
 * StartFirstNodeConnections returns the first connection (index 0) to each
 * of the nodes, like StartNodeConnection with required slots, but takes
 * them in the global order of the nodes' pools (see AcquireSlot), so that
 * statements needing several nodes cannot wait for each other.
 */
List *
StartFirstNodeConnections(List *nodeIds)
{
	int			count = list_length(nodeIds);
	NodeConnection **ordered = palloc(count * sizeof(NodeConnection *));
	List	   *conns = NIL;
	ListCell   *cell;

	foreach(cell, nodeIds)
	{
		NodeConnection *conn = CachedConnectionAt(lfirst_int(cell), 0);

		conns = lappend(conns, conn);
		ordered[foreach_current_index(cell)] = conn;
	}
	qsort(ordered, count, sizeof(NodeConnection *), ComparePoolOrder);
	for (int i = 0; i < count; i++)
		(void) PrepareConnection(ordered[i], POOL_SLOT_REQUIRED, true);
	pfree(ordered);
	return conns;
}

/* qsort comparator: connections in the global order of their pools */
static int
ComparePoolOrder(const void *a, const void *b)
{
	uintptr_t	left = (uintptr_t) (*(NodeConnection *const *) a)->poolEntry;
	uintptr_t	right = (uintptr_t) (*(NodeConnection *const *) b)->poolEntry;

	return left < right ? -1 : (left > right ? 1 : 0);
}

/*
 * PrepareConnection makes a cache slot usable: keeps it when connected (or
 * connecting), else takes a pool slot (waiting for a required one only if
 * wait) and starts connecting.  Returns false when no slot was taken.
 */
static bool
PrepareConnection(NodeConnection *conn, PoolSlotKind kind, bool wait)
{
	conn->lastUsedLxid = MyProc != NULL ? ProcLocalXid(MyProc) : InvalidLocalTransactionId;
	if (conn->pgConn != NULL && (conn->connecting || PQstatus(conn->pgConn) == CONNECTION_OK))
		return true;

	if (conn->pgConn != NULL)
	{
		if (conn->xactState != REMOTE_XACT_NONE)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("connection to node %s:%d was lost during the transaction",
							conn->host, conn->port)));
		DisconnectNodeConnection(conn);
	}
	conn->executorState = NULL;
	if (!conn->holdsSlot && !AcquireSlot(conn, kind, wait))
		return false;
	conn->learnLimit = (kind == POOL_SLOT_REQUIRED);

	PG_TRY();
	{
		BeginConnect(conn, get_database_name(MyDatabaseId), false);
	}
	PG_CATCH();
	{
		DisconnectNodeConnection(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return true;
}

/*
 * ContinueNodeConnection advances a connection that is being opened;
 * socketReady says that its socket is ready for what the last call asked
 * for (libpq must only be polled then).  Returns 0 when the connection is
 * ready for commands, else the socket events (WL_SOCKET_*) to wait for.
 * Fails (closing the connection) when the attempt failed or
 * shardext.connect_timeout passed.
 */
int
ContinueNodeConnection(NodeConnection *conn, bool socketReady)
{
	if (!conn->connecting)
		return 0;

	/*
	 * The time limit is for the node's silence, not for ours: a scan may not
	 * have looked at this attempt for a while (a nested loop ran the other
	 * side), and the node may have answered meanwhile.
	 */
	if (!socketReady && GetCurrentTimestamp() >= conn->connectDeadline &&
		conn->pollStatus != PGRES_POLLING_OK && conn->pollStatus != PGRES_POLLING_FAILED)
		socketReady = ConnectSocketReady(conn);
	if (socketReady && conn->pollStatus != PGRES_POLLING_OK &&
		conn->pollStatus != PGRES_POLLING_FAILED)
		AdvanceConnect(conn);

	if (conn->pollStatus == PGRES_POLLING_OK)
	{
		CompleteConnection(conn);
		return 0;
	}
	if (conn->pollStatus == PGRES_POLLING_FAILED ||
		GetCurrentTimestamp() >= conn->connectDeadline)
		ConnectionFailed(conn, "Check that the node is running and accepts connections, "
						 "or remove it with shardext_remove_node().");
	return conn->pollStatus == PGRES_POLLING_READING ?
		WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
}

/*
 * AdvanceConnect polls a connection attempt whose socket is ready; each
 * answer of the node gives it shardext.connect_timeout again.  It notes
 * whether the attempt got past the TCP connection (ProbeNodeConnection).
 */
void
AdvanceConnect(NodeConnection *conn)
{
	ConnStatusType status;

	conn->pollStatus = PQconnectPoll(conn->pgConn);
	status = PQstatus(conn->pgConn);
	/* past CONNECTION_STARTED, a TCP connection to the node was established */
	if (status != CONNECTION_STARTED && status != CONNECTION_BAD)
		conn->tcpEstablished = true;
	conn->connectDeadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														ConnectTimeout(conn));
}

/* ConnectTimeout: how long a connection attempt may wait for the node */
static int
ConnectTimeout(NodeConnection *conn)
{
	return conn->connectTimeoutMs > 0 ? conn->connectTimeoutMs : ShardextConnectTimeout;
}

/* ConnectSocketReady: can the attempt go on now, without waiting? */
static bool
ConnectSocketReady(NodeConnection *conn)
{
	int			events = conn->pollStatus == PGRES_POLLING_READING ?
		WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;

	return (WaitLatchOrSocket(NULL, events | WL_TIMEOUT, PQsocket(conn->pgConn), 0,
							  PG_WAIT_EXTENSION) & events) != 0;
}

/*
 * FinishNodeConnection waits, interruptibly, until a connection that is
 * being opened is ready; it fails like ContinueNodeConnection.
 */
void
FinishNodeConnection(NodeConnection *conn)
{
	if (!conn->connecting)
		return;
	if (!FinishConnect(conn))
		ConnectionFailed(conn, "Check that the node is running and accepts connections, "
						 "or remove it with shardext_remove_node().");
}

/*
 * AcquireSlot takes a slot of the node's shared pool for a connection.  A
 * required slot that is not free at once is waited for (if wait).  Before
 * it waits, the backend closes its idle cached connections that the
 * running transaction has not used and that belong to this pool or to
 * pools later in the global order of pools (their addresses in shared
 * memory, the same in every backend): a backend waits only while holding
 * slots of earlier pools (and those its transaction uses), so backends
 * cannot wait for each other in a circle.  Only connections a transaction holds from an
 * earlier statement can break the order; connection_wait_timeout ends
 * such a wait.
 */
static bool
AcquireSlot(NodeConnection *conn, PoolSlotKind kind, bool wait)
{
	if (!TryAcquirePoolSlot(conn->poolEntry, kind))
	{
		if (kind == POOL_SLOT_OPTIONAL || !wait)
			return false;
		ReleaseIdleConnectionsAfter(conn->poolEntry);
		if (!TryAcquirePoolSlot(conn->poolEntry, kind))
			WaitForPoolSlot(conn->poolEntry, conn->host, conn->port);
	}
	conn->holdsSlot = true;
	return true;
}

/*
 * ReleaseIdleConnectionsAfter closes the cached connections that are idle,
 * outside remote transactions, not used by the running transaction, and
 * whose pool is entry's or comes after it in the global order (see
 * AcquireSlot; one of another role to the same node, say, would only sit
 * on a slot of the pool the backend waits for).
 */
static void
ReleaseIdleConnectionsAfter(PoolEntry *entry)
{
	LocalTransactionId lxid = MyProc != NULL ? ProcLocalXid(MyProc) : InvalidLocalTransactionId;
	List	   *all = AllNodeConnections();
	ListCell   *cell;

	foreach(cell, all)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn->pgConn != NULL && !conn->connecting && !conn->queryInProgress &&
			conn->xactState == REMOTE_XACT_NONE && conn->lastUsedLxid != lxid &&
			(uintptr_t) conn->poolEntry >= (uintptr_t) entry)
			CloseNodeConnection(conn);
	}
	list_free(all);
}

/*
 * NodeConnectionList returns the connections of the current user to a
 * node, open or not, without opening any.
 */
List *
NodeConnectionList(int32 nodeId)
{
	return list_copy(GetCacheEntry(nodeId)->connections);
}

/* AllNodeConnections returns every cached connection of every user */
List *
AllNodeConnections(void)
{
	List	   *result = NIL;
	HASH_SEQ_STATUS status;
	ConnectionCacheEntry *entry;

	if (ConnectionCache == NULL)
		return NIL;

	hash_seq_init(&status, ConnectionCache);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		ListCell   *cell;

		foreach(cell, entry->connections)
			result = lappend(result, lfirst(cell));
	}
	return result;
}

/*
 * CloseNodeConnection closes the libpq connection; the NodeConnection stays
 * in the cache and is reconnected on next use outside a transaction.
 */
void
CloseNodeConnection(NodeConnection *conn)
{
	DisconnectNodeConnection(conn);
	conn->queryInProgress = false;
	conn->pipelineStage = PIPELINE_NONE;
	conn->xactState = REMOTE_XACT_NONE;
	conn->xactModified = false;
	conn->preparedGid[0] = '\0';
	conn->executorState = NULL;
}

/*
 * DisconnectNodeConnection closes the libpq connection, frees what belongs
 * to it (its wait set) and gives its pool slot back; the rest of the
 * NodeConnection's state is the caller's to reset.
 */
void
DisconnectNodeConnection(NodeConnection *conn)
{
	if (conn->pgConn != NULL)
		PQfinish(conn->pgConn);
	conn->pgConn = NULL;
	conn->connecting = false;
	ReleaseConnectionWaitSet(conn);
	if (conn->holdsSlot)
	{
		conn->holdsSlot = false;
		ReleasePoolSlot(conn->poolEntry);
	}
}

/*
 * ConnectionsAtTransactionEnd trims the cache once the transaction's
 * remote work is finished (see the file header); called by the
 * transaction callback after commit or abort.
 */
void
ConnectionsAtTransactionEnd(void)
{
	HASH_SEQ_STATUS status;
	ConnectionCacheEntry *entry;
	TimestampTz now;
	List	   *nodeIds = NIL;
	List	   *keptCounts = NIL;

	if (ConnectionCache == NULL)
		return;
	now = GetCurrentTimestamp();
	hash_seq_init(&status, ConnectionCache);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		ListCell   *cell;
		int			position;
		ListCell   *countCell;

		position = list_length(nodeIds);
		foreach(cell, nodeIds)
		{
			if (lfirst_int(cell) == entry->key.nodeId)
				position = foreach_current_index(cell);
		}
		if (position == list_length(nodeIds))
		{
			nodeIds = lappend_int(nodeIds, entry->key.nodeId);
			keptCounts = lappend_int(keptCounts, 0);
		}
		countCell = list_nth_cell(keptCounts, position);

		foreach(cell, entry->connections)
		{
			NodeConnection *conn = lfirst(cell);

			if (conn->pgConn == NULL || conn->queryInProgress ||
				conn->xactState != REMOTE_XACT_NONE)
				continue;
			if (ShouldKeepConnection(conn, now, lfirst_int(countCell)))
				lfirst_int(countCell)++;
			else
				CloseNodeConnection(conn);
		}
		CompactConnectionList(entry);
	}
	list_free(nodeIds);
	list_free(keptCounts);
}

/*
 * ShouldKeepConnection decides whether an idle connection stays cached:
 * not when it is broken or half open, when kept connections to its node
 * reach shardext.max_cached_connections_per_node (more, up to
 * shardext.max_connections_per_node, while the node's pool can spare them:
 * PoolHasSpareRoom), when it is older than
 * shardext.connection_lifetime, when it carries many prepared statements
 * nobody uses any more, or when others wait for a slot of its node
 * and it was held for shardext.connection_share_interval (or a waiter that
 * waited long asks for it).
 */
static bool
ShouldKeepConnection(NodeConnection *conn, TimestampTz now, int kept)
{
	if (conn->connecting || PQstatus(conn->pgConn) != CONNECTION_OK)
		return false;
	/* beyond the ones always kept, only what the node's pool can spare */
	if (kept >= ShardextMaxCachedConnectionsPerNode &&
		(ShardextMaxCachedConnectionsPerNode == 0 ||
		 kept >= ShardextMaxConnectionsPerNode || !PoolHasSpareRoom(conn->poolEntry)))
		return false;
	if (conn->abandonedStatements > MAX_ABANDONED_STATEMENTS)
		return false;
	if (ShardextConnectionLifetime > 0 &&
		TimestampDifferenceExceeds(conn->openedAt, now, ShardextConnectionLifetime))
		return false;
	if (PoolWaiters(conn->poolEntry) > 0 &&
		(TimestampDifferenceExceeds(conn->openedAt, now, ShardextConnectionShareInterval) ||
		 PoolYieldRequested(conn->poolEntry)))
		return false;
	return true;
}

/*
 * CompactConnectionList moves the open connections of an entry to the
 * front, so that the lowest indexes (which statements use first) are the
 * ones that are open.  Only between transactions: nobody holds an index.
 */
static void
CompactConnectionList(ConnectionCacheEntry *entry)
{
	List	   *open = NIL;
	List	   *closed = NIL;
	ListCell   *cell;
	MemoryContext oldContext;

	if (list_length(entry->connections) < 2)
		return;
	oldContext = MemoryContextSwitchTo(ConnectionContext);
	foreach(cell, entry->connections)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn->pgConn != NULL)
			open = lappend(open, conn);
		else
			closed = lappend(closed, conn);
	}
	list_free(entry->connections);
	entry->connections = list_concat(open, closed);
	list_free(closed);
	MemoryContextSwitchTo(oldContext);
}

/*
 * BeginConnect starts a non-blocking connection attempt for conn, which
 * holds its pool slot already.
 */
static void
BeginConnect(NodeConnection *conn, const char *dbname, bool replication)
{
	BeginConnectAs(conn, dbname, GetUserNameFromId(conn->userId, false), replication);
}

/* BeginConnectAs is BeginConnect with the role's name given (no catalog read) */
static void
BeginConnectAs(NodeConnection *conn, const char *dbname, const char *user, bool replication)
{
	const char *timeZone = GetConfigOption("TimeZone", false, false);
	TimestampTz now = GetCurrentTimestamp();

	conn->pgConn = StartConnection(conn->host, conn->port, dbname, user, timeZone,
								   replication);
	conn->connecting = true;
	conn->tcpEstablished = false;
	conn->pollStatus = PQstatus(conn->pgConn) == CONNECTION_BAD ?
		PGRES_POLLING_FAILED : PGRES_POLLING_WRITING;
	conn->connectDeadline = TimestampTzPlusMilliseconds(now, ConnectTimeout(conn));
	conn->openedAt = now;
	conn->serial = ++connectionSerial;
	conn->queryInProgress = false;
	conn->pipelineStage = PIPELINE_NONE;
	conn->executorState = NULL;
	conn->abandonedStatements = 0;
	if (conn->remoteTimeZone != NULL)
		pfree(conn->remoteTimeZone);
	conn->remoteTimeZone = MemoryContextStrdup(ConnectionContext, timeZone);
}

/*
 * FinishConnect waits, serving interrupts, until a connection attempt ends;
 * returns whether the connection is ready.  On an interrupt the attempt is
 * abandoned (the connection closed) before the error goes on.
 */
static bool
FinishConnect(NodeConnection *conn)
{
	bool		connected;

	PG_TRY();
	{
		connected = WaitForNodeUntil(conn, NODE_WAIT_CONNECTED, 0, true) == NODE_WAIT_DONE;
	}
	PG_CATCH();
	{
		DisconnectNodeConnection(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (connected)
		CompleteConnection(conn);
	return connected;
}

/*
 * CompleteConnection makes a freshly opened connection ready for commands:
 * non-blocking mode, the server of a cached connection checked to be the
 * one the catalog records for the node (fencing.c; OpenDedicated checks its
 * own), and the node's connection limit learned when
 * the pool's limit is derived from it and no backend asked within the last
 * second.  That costs a round trip now and then (a tenth of a millisecond
 * against milliseconds for the connection itself; the extra connections of
 * slow start never ask) and keeps the limit right when the node is
 * restarted with another max_connections.
 */
static void
CompleteConnection(NodeConnection *conn)
{
	conn->connecting = false;
	if (PQsetnonblocking(conn->pgConn, 1) != 0)
		ConnectionFailed(conn, NULL);
	conn->openedAt = GetCurrentTimestamp();
	if (!conn->dedicated)
		(void) CheckNodeConnectionIdentity(conn, ERROR);
	if (ShardextMaxSharedPoolSize == 0 && conn->poolEntry != NULL && conn->learnLimit &&
		!PoolNodeLimitFresh(conn->poolEntry, NODE_LIMIT_MAX_AGE_MS))
		LearnNodeLimit(conn);
}

/*
 * LearnNodeLimit asks the node how many connections ordinary users may
 * open (the automatic shardext.max_shared_pool_size is derived from it).
 * A failure keeps what was known.
 */
static void
LearnNodeLimit(NodeConnection *conn)
{
	PGresult   *result;
	char	   *failure = NULL;

	result = TryRemoteQuery(conn,
							"SELECT pg_catalog.current_setting('max_connections')::int"
							" - pg_catalog.current_setting('superuser_reserved_connections')::int",
							0, NULL, NODE_LIMIT_QUERY_TIMEOUT_MS, &failure);
	if (result != NULL && PQntuples(result) == 1 && !PQgetisnull(result, 0, 0))
		SetPoolNodeLimit(conn->poolEntry, Max(atoi(PQgetvalue(result, 0, 0)), 1));
	PQclear(result);
	/* a node that cannot answer this right after connecting is no use now */
	if (conn->queryInProgress)
		ConnectionFailed(conn, NULL);
}

/*
 * ConnectionFailed closes a connection whose attempt failed and raises the
 * error, naming the node and why.
 */
static void
ConnectionFailed(NodeConnection *conn, const char *hint)
{
	char	   *message = ConnectionFailureMessage(conn);

	DisconnectNodeConnection(conn);
	ereport(ERROR,
			(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
			 errmsg("could not connect to node %s:%d", conn->host, conn->port),
			 errdetail_internal("%s", message),
			 hint ? errhint("%s", hint) : 0));
}

/*
 * OpenDedicatedConnection opens a connection that is not in the cache and
 * takes no part in the local transaction: for work that commits on its own
 * (shard moves, cleanup).  With replication, it is a logical replication
 * connection (replication=database, which also runs SQL and counts against
 * the node's max_wal_senders, not its pool).  On failure it errors out, or
 * returns NULL when errorOnFailure is false.  Close it with
 * CloseDedicatedConnection.
 */
NodeConnection *
OpenDedicatedConnection(const char *host, int32 port, bool replication,
						bool errorOnFailure)
{
	return OpenDedicated(host, port, get_database_name(MyDatabaseId), replication,
						 !replication, errorOnFailure, 0,
						 "Check that the node is running and accepts connections.");
}

/*
 * OpenDedicatedConnectionWithTimeout is OpenDedicatedConnection (not for
 * replication) that gives up after timeoutMs and returns NULL on failure,
 * and takes no slot of the node's pool (a short poll must not wait for
 * one): for the maintenance daemon's polls of read replicas.
 */
NodeConnection *
OpenDedicatedConnectionWithTimeout(const char *host, int32 port, int timeoutMs)
{
	return OpenDedicated(host, port, get_database_name(MyDatabaseId), false, false, false,
						 timeoutMs, "Check that the node is running and accepts connections.");
}

/*
 * OpenDedicatedConnectionTo is OpenDedicatedConnection for another database
 * of the node (used to inspect a node before it is registered).
 */
NodeConnection *
OpenDedicatedConnectionTo(const char *host, int32 port, const char *dbname,
						  bool errorOnFailure)
{
	return OpenDedicated(host, port, dbname, false, true, errorOnFailure, 0,
						 "Check that the node is running and accepts connections "
						 "within shardext.connect_timeout.");
}

/*
 * OpenLoopbackConnection connects to this server's own database as the
 * current user, through the first Unix socket directory (or localhost when
 * the server has none): autonomous transactions for records that must
 * survive the caller's transaction.  Not counted in any node's pool.
 */
NodeConnection *
OpenLoopbackConnection(bool errorOnFailure)
{
	char	   *host = "localhost";

	if (Unix_socket_directories != NULL && Unix_socket_directories[0] != '\0')
	{
		char	   *copy = pstrdup(Unix_socket_directories);
		List	   *directories = NIL;

		if (SplitDirectoriesString(copy, ',', &directories) && directories != NIL)
			host = pstrdup((char *) linitial(directories));
	}
	return OpenDedicated(host, PostPortNumber, get_database_name(MyDatabaseId), false,
						 false, errorOnFailure, 0,
						 "Check that the server accepts connections from its own socket.");
}

/*
 * NewDedicatedConnection makes the struct of a dedicated connection, not
 * connected yet, owned by the current resource owner.
 */
static NodeConnection *
NewDedicatedConnection(const char *host, int32 port, bool counted, int timeoutMs)
{
	NodeConnection *conn;
	MemoryContext oldContext;

	EnsureConnectionContext();
	conn = MemoryContextAllocZero(ConnectionContext, sizeof(NodeConnection));
	conn->nodeId = -1;
	conn->userId = GetUserId();
	conn->host = MemoryContextStrdup(ConnectionContext, host);
	conn->port = port;
	conn->dedicated = true;
	conn->owner = CurrentResourceOwner;
	conn->connectTimeoutMs = timeoutMs;
	conn->poolEntry = counted ? GetPoolEntry(host, port) : NULL;
	conn->learnLimit = true;
	oldContext = MemoryContextSwitchTo(ConnectionContext);
	dedicatedConnections = lappend(dedicatedConnections, conn);
	MemoryContextSwitchTo(oldContext);
	return conn;
}

/*
 * ProbeNodeConnection tries to connect to a node within timeoutMs for the
 * maintenance daemon's health probes (node_health.c): outside the node's
 * pool, without the identity check (a probe looks at whatever answers),
 * and saying how far it got in *outcome -- a connection (returned; close
 * it with CloseDedicatedConnection), no TCP connection at all (refused, or
 * not established in time: nothing listens there, or the host cannot be
 * reached), or a TCP connection over which the server did not complete
 * the startup in time, or refused it.  *detail says why it failed.
 */
NodeConnection *
ProbeNodeConnection(const char *host, int32 port, int timeoutMs, NodeProbeOutcome *outcome,
					char **detail)
{
	NodeConnection *conn = NewDedicatedConnection(host, port, false, timeoutMs);
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeoutMs);
	bool		identityCheck = SetNodeIdentityCheck(false);
	NodeWaitResult waited = NODE_WAIT_FAILED;

	PG_TRY();
	{
		BeginConnect(conn, get_database_name(MyDatabaseId), false);
		waited = WaitForNodeUntil(conn, NODE_WAIT_CONNECTED, deadline, true);
		if (waited == NODE_WAIT_DONE)
			CompleteConnection(conn);
	}
	PG_CATCH();
	{
		SetNodeIdentityCheck(identityCheck);
		CloseDedicatedConnection(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();
	SetNodeIdentityCheck(identityCheck);

	*detail = NULL;
	if (waited == NODE_WAIT_DONE)
	{
		*outcome = NODE_PROBE_CONNECTED;
		return conn;
	}
	if (!conn->tcpEstablished)
		*outcome = NODE_PROBE_UNREACHABLE;
	else if (waited == NODE_WAIT_TIMEOUT)
		*outcome = NODE_PROBE_NOT_ANSWERING;
	else
		*outcome = NODE_PROBE_REJECTED;
	*detail = waited == NODE_WAIT_TIMEOUT ?
		psprintf("no answer within %d ms", timeoutMs) :
		pchomp(PQerrorMessage(conn->pgConn));
	CloseDedicatedConnection(conn);
	return NULL;
}

/* OpenDedicated does the work of the OpenDedicated* and loopback functions */
static NodeConnection *
OpenDedicated(const char *host, int32 port, const char *dbname, bool replication,
			  bool counted, bool errorOnFailure, int timeoutMs, const char *hint)
{
	NodeConnection *conn = NewDedicatedConnection(host, port, counted, timeoutMs);
	bool		connected;

	PG_TRY();
	{
		(void) AcquireSlot(conn, POOL_SLOT_REQUIRED, true);
		BeginConnect(conn, dbname, replication);
		connected = FinishConnect(conn);
		/* a fenced server: an error, or a warning and no connection */
		if (connected &&
			!CheckNodeConnectionIdentity(conn, errorOnFailure ? ERROR : WARNING))
		{
			CloseDedicatedConnection(conn);
			return NULL;
		}
	}
	PG_CATCH();
	{
		CloseDedicatedConnection(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (!connected)
	{
		char	   *message = ConnectionFailureMessage(conn);

		CloseDedicatedConnection(conn);
		if (!errorOnFailure)
			return NULL;
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to node %s:%d", host, port),
				 errdetail_internal("%s", message),
				 errhint("%s", hint)));
	}
	return conn;
}

/*
 * OpenSideConnection opens a second connection to the node, database and
 * role of conn, for cancelling conn's command where libpq has no
 * non-blocking cancel (remote_cancel.c).  It runs on abort paths: it waits
 * at most until deadline (and shardext.connect_timeout), serves no
 * interrupts, reads no catalog, takes no slot of the node's pool and never
 * throws for remote trouble; returns NULL when the node could not be
 * reached.  Close it with CloseDedicatedConnection.
 */
NodeConnection *
OpenSideConnection(NodeConnection *conn, TimestampTz deadline)
{
	NodeConnection *side;
	MemoryContext oldContext;

	if (conn->pgConn == NULL)
		return NULL;
	EnsureConnectionContext();
	side = MemoryContextAllocZero(ConnectionContext, sizeof(NodeConnection));
	side->nodeId = -1;
	side->userId = conn->userId;
	side->host = MemoryContextStrdup(ConnectionContext, conn->host);
	side->port = conn->port;
	side->dedicated = true;
	side->owner = CurrentResourceOwner;
	oldContext = MemoryContextSwitchTo(ConnectionContext);
	dedicatedConnections = lappend(dedicatedConnections, side);
	MemoryContextSwitchTo(oldContext);

	BeginConnectAs(side, PQdb(conn->pgConn), PQuser(conn->pgConn), false);
	if (WaitForNodeUntil(side, NODE_WAIT_CONNECTED, deadline, false) != NODE_WAIT_DONE ||
		PQsetnonblocking(side->pgConn, 1) != 0)
	{
		CloseDedicatedConnection(side);
		return NULL;
	}
	side->connecting = false;
	return side;
}

/* CloseDedicatedConnection closes and frees a dedicated connection */
void
CloseDedicatedConnection(NodeConnection *conn)
{
	if (conn == NULL)
		return;
	Assert(conn->dedicated);
	DisconnectNodeConnection(conn);
	dedicatedConnections = list_delete_ptr(dedicatedConnections, conn);
	if (conn->remoteTimeZone != NULL)
		pfree(conn->remoteTimeZone);
	pfree(conn->host);
	pfree(conn);
}

/*
 * KeepConnectionAcrossTransactions takes a dedicated connection out of the
 * resource owner's care: the caller closes it, possibly in a later
 * transaction.
 */
void
KeepConnectionAcrossTransactions(NodeConnection *conn)
{
	conn->owner = NULL;
}

/*
 * ConnectionResourceRelease closes the dedicated connections of a resource
 * owner that is released (PostgreSQL makes it CurrentResourceOwner for the
 * callbacks).  When a subtransaction or portal commits, they pass to the
 * parent owner; at abort they are closed; at top-level commit a connection
 * still open was leaked by its caller and is closed too.  The struct
 * stays allocated for a caller that still closes it.
 */
static void
ConnectionResourceRelease(ResourceReleasePhase phase, bool isCommit, bool isTopLevel,
						  void *arg)
{
	ListCell   *cell;

	if (phase != RESOURCE_RELEASE_AFTER_LOCKS || dedicatedConnections == NIL)
		return;
	foreach(cell, dedicatedConnections)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn->owner == NULL || conn->owner != CurrentResourceOwner)
			continue;
		if (isCommit && !isTopLevel)
		{
			conn->owner = ResourceOwnerGetParent(CurrentResourceOwner);
			continue;
		}
#ifdef SHARDEXT_TEST_HOOKS
		if (isCommit && conn->pgConn != NULL)
			elog(WARNING, "shardext: connection to %s:%d was not closed", conn->host,
				 conn->port);
#endif
		DisconnectNodeConnection(conn);
		conn->queryInProgress = false;
		conn->pipelineStage = PIPELINE_NONE;
		conn->owner = NULL;
	}
}

/*
 * RemoteApplicationNamePrefix is the start of the application_name of
 * this coordinator database's sessions: shardext_<system id>_<database oid>_
 */
char *
RemoteApplicationNamePrefix(void)
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
 * FormatSettingCommands returns the SET that gives a remote session the
 * local session's output settings, and the RESET that restores its pinned
 * ones; both NULL when they agree already.
 */
void
FormatSettingCommands(char **setCommand, char **resetCommand)
{
	StringInfoData set;
	StringInfoData reset;

	initStringInfo(&set);
	initStringInfo(&reset);
	for (const FormatSetting *setting = formatSettings; setting->name; setting++)
	{
		const char *local = GetConfigOption(setting->name, false, false);

		if (pg_strcasecmp(local, setting->remoteValue) == 0)
			continue;
		appendStringInfo(&set, "SET %s = %s;", setting->name, quote_literal_cstr(local));
		appendStringInfo(&reset, "RESET %s;", setting->name);
	}
	/* shortest-exact output for any positive value, rounded otherwise */
	if (atoi(GetConfigOption("extra_float_digits", false, false)) <= 0)
	{
		appendStringInfo(&set, "SET extra_float_digits = %s;",
						 GetConfigOption("extra_float_digits", false, false));
		appendStringInfoString(&reset, "RESET extra_float_digits;");
	}
	*setCommand = set.len > 0 ? set.data : NULL;
	*resetCommand = reset.len > 0 ? reset.data : NULL;
}

/*
 * StartConnection begins a non-blocking connection attempt.  The session
 * settings travel in the startup packet, which costs no round trip.  The
 * options of shardext.node_conninfo come first; shardext's own after them
 * (libpq takes the last value of a keyword, and the check hook refuses
 * those keywords anyway).
 */
static PGconn *
StartConnection(const char *host, int32 port, const char *dbname,
				const char *user, const char *timeZone, bool replication)
{
	int			extraCount = nodeConninfoOptions ? nodeConninfoOptions->count : 0;
	const char **keywords = palloc((extraCount + 9) * sizeof(char *));
	const char **values = palloc((extraCount + 9) * sizeof(char *));
	int			n = 0;
	char		portString[12];
	StringInfoData options;
	PGconn	   *pgConn;

	snprintf(portString, sizeof(portString), "%d", port);
	initStringInfo(&options);
	appendStringInfo(&options,
					 "-c search_path=pg_catalog -c DateStyle=ISO "
					 "-c IntervalStyle=postgres -c extra_float_digits=3 "
					 "-c TimeZone=");
	/* time zone names contain no spaces; escape backslashes defensively */
	for (const char *p = timeZone; *p; p++)
	{
		if (*p == ' ' || *p == '\\')
			appendStringInfoChar(&options, '\\');
		appendStringInfoChar(&options, *p);
	}

	for (int i = 0; i < extraCount; i++)
	{
		keywords[n] = nodeConninfoOptions->keywords[i];
		values[n++] = nodeConninfoOptions->values[i];
	}
	keywords[n] = "host";
	values[n++] = host;
	keywords[n] = "port";
	values[n++] = portString;
	keywords[n] = "dbname";
	values[n++] = dbname;
	keywords[n] = "user";
	values[n++] = user;
	/* tells the distributed deadlock detector whose transaction this is */
	keywords[n] = "application_name";
	values[n++] = RemoteApplicationName();
	keywords[n] = "options";
	values[n++] = options.data;
	keywords[n] = "client_encoding";
	values[n++] = GetDatabaseEncodingName();
	if (replication)
	{
		keywords[n] = "replication";
		values[n++] = "database";
	}
	keywords[n] = NULL;
	values[n] = NULL;
	Assert(n < extraCount + 9);

	pgConn = PQconnectStartParams(keywords, values, false);
	pfree(keywords);
	pfree(values);
	if (pgConn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory while connecting to node %s:%d", host, port)));
	return pgConn;
}

/*
 * ConnectionFailureMessage says why a connection attempt failed: libpq's
 * message, or the timeout when libpq has nothing to say.
 */
static char *
ConnectionFailureMessage(NodeConnection *conn)
{
	char	   *message = conn->pgConn ? PQerrorMessage(conn->pgConn) : NULL;

	lastAttemptTimedOut = (message == NULL || message[0] == '\0' ||
						   PQstatus(conn->pgConn) != CONNECTION_BAD);
	if (lastAttemptTimedOut)
		return psprintf("timeout expired after %d ms (shardext.connect_timeout)",
						ShardextConnectTimeout);
	return pchomp(message);
}

/*
 * LastConnectionTimedOut tells whether the last failed connection attempt
 * of this backend gave up for shardext.connect_timeout (rather than being
 * refused).
 */
bool
LastConnectionTimedOut(void)
{
	return lastAttemptTimedOut;
}

/*
 * CheckNodeConninfo, the check hook of shardext.node_conninfo, accepts a
 * libpq connection string whose keywords are all in
 * AllowedConninfoKeywords, and hands the parsed options to the assign hook
 * (in one malloc'd block, as GUC "extra" data must be).
 */
bool
CheckNodeConninfo(char **newval, void **extra, GucSource source)
{
	PQconninfoOption *options;
	char	   *parseError = NULL;
	NodeConninfoOptions *parsed;
	Size		size = sizeof(NodeConninfoOptions);
	int			count = 0;
	char	   *strings;

	options = PQconninfoParse(*newval ? *newval : "", &parseError);
	if (options == NULL)
	{
		GUC_check_errdetail("It is not a valid libpq connection string: %s.",
							parseError ? pchomp(parseError) : "out of memory");
		if (parseError)
			PQfreemem(parseError);
		return false;
	}
	for (PQconninfoOption *option = options; option->keyword != NULL; option++)
	{
		bool		allowed = false;

		if (option->val == NULL)
			continue;
		for (int i = 0; i < lengthof(AllowedConninfoKeywords); i++)
			allowed |= (strcmp(option->keyword, AllowedConninfoKeywords[i]) == 0);
		if (!allowed)
		{
			GUC_check_errdetail("Option \"%s\" cannot be set in shardext.node_conninfo.",
								option->keyword);
			GUC_check_errhint("Connections to nodes set host, port, dbname, user, options, "
							  "application_name and client_encoding themselves; passwords "
							  "belong in a password file.");
			PQconninfoFree(options);
			return false;
		}
		count++;
		size += 2 * sizeof(char *) + strlen(option->keyword) + strlen(option->val) + 2;
	}

	parsed = GucExtraAlloc(size);
	if (parsed == NULL)
	{
		PQconninfoFree(options);
		GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
		GUC_check_errdetail("out of memory");
		return false;
	}
	parsed->count = count;
	parsed->keywords = (const char **) (parsed + 1);
	parsed->values = parsed->keywords + count;
	strings = (char *) (parsed->values + count);
	count = 0;
	for (PQconninfoOption *option = options; option->keyword != NULL; option++)
	{
		if (option->val == NULL)
			continue;
		parsed->keywords[count] = strcpy(strings, option->keyword);
		strings += strlen(option->keyword) + 1;
		parsed->values[count] = strcpy(strings, option->val);
		strings += strlen(option->val) + 1;
		count++;
	}
	PQconninfoFree(options);
	*extra = parsed;
	return true;
}

/* AssignNodeConninfo makes the checked options the ones connections use */
void
AssignNodeConninfo(const char *newval, void *extra)
{
	nodeConninfoOptions = (NodeConninfoOptions *) extra;
}
