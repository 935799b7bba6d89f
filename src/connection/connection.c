/*-------------------------------------------------------------------------
 *
 * connection.c
 *	  Per-backend cache of connections to worker nodes.
 *
 * A connection is opened on first use and kept for later statements.  Its
 * session is pinned like postgres_fdw pins its sessions (search_path,
 * datestyle, intervalstyle, extra_float_digits), so deparsed SQL and text
 * values mean the same on both sides; the time zone follows the local
 * session (see remote_command.c).  Connections are made without blocking
 * the backend's reaction to cancels, and give up after
 * shardext.connect_timeout.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/varlena.h"
#include "postmaster/postmaster.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "shardext/shardext.h"
#include "shardext/connection.h"
#include "shardext/deadlock_detection.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/remote_command.h"

typedef struct ConnectionKey
{
	int32		nodeId;
	Oid			userId;
} ConnectionKey;

typedef struct ConnectionCacheEntry
{
	ConnectionKey key;
	List	   *connections;	/* NodeConnection *, in opening order */
} ConnectionCacheEntry;

static HTAB *ConnectionCache = NULL;
static MemoryContext ConnectionContext = NULL;
static int	connectionSerial = 0;

static ConnectionCacheEntry *GetCacheEntry(int32 nodeId);
static NodeConnection *GetCachedConnection(int32 nodeId, int index, int timeoutMs,
										   bool errorOnFailure);
static NodeConnection *OpenNodeConnection(int32 nodeId, int timeoutMs, bool errorOnFailure);
static PGconn *StartConnection(const char *host, int32 port, const char *dbname,
							   const char *user, const char *timeZone, bool replication);
static bool FinishConnection(PGconn *pgConn, int timeoutMs);
static NodeConnection *OpenDedicated(const char *host, int32 port, bool replication,
									 bool errorOnFailure, int timeoutMs);
static char *ConnectionFailureMessage(PGconn *pgConn);

static void
EnsureConnectionCache(void)
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

	EnsureConnectionCache();
	memset(&key, 0, sizeof(key));
	key.nodeId = nodeId;
	key.userId = GetUserId();
	entry = hash_search(ConnectionCache, &key, HASH_ENTER, &found);
	if (!found)
		entry->connections = NIL;
	return entry;
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
 * node for the current user, opening connections up to that one as needed.
 * index must be below shardext.max_connections_per_node.
 */
NodeConnection *
GetNodeConnectionByIndex(int32 nodeId, int index)
{
	return GetCachedConnection(nodeId, index, ShardextConnectTimeout, true);
}

/*
 * TryGetNodeConnectionByIndex is GetNodeConnectionByIndex that gives up
 * after timeoutMs and returns NULL when the node cannot be reached (for
 * read replicas, whose reads then go to the primary).
 */
NodeConnection *
TryGetNodeConnectionByIndex(int32 nodeId, int index, int timeoutMs)
{
	return GetCachedConnection(nodeId, index, timeoutMs, false);
}

/*
 * GetCachedConnection does the work of the two above.  A cached connection
 * that broke, or whose node now has another address (the node was
 * repointed, shardext_update_node), is replaced when it is not part of a
 * remote transaction.
 */
static NodeConnection *
GetCachedConnection(int32 nodeId, int index, int timeoutMs, bool errorOnFailure)
{
	ConnectionCacheEntry *entry = GetCacheEntry(nodeId);
	NodeConnection *conn;
	WorkerNode *node;

	Assert(index >= 0);
	while (list_length(entry->connections) <= index)
	{
		MemoryContext oldContext;

		conn = OpenNodeConnection(nodeId, timeoutMs, errorOnFailure);
		if (conn == NULL)
			return NULL;
		oldContext = MemoryContextSwitchTo(ConnectionContext);
		entry->connections = lappend(entry->connections, conn);
		MemoryContextSwitchTo(oldContext);
	}

	conn = list_nth(entry->connections, index);
	node = GetWorkerNode(nodeId);
	if (conn->pgConn == NULL || PQstatus(conn->pgConn) != CONNECTION_OK ||
		conn->port != node->port || strcmp(conn->host, node->host) != 0)
	{
		NodeConnection *fresh;

		if (conn->xactState != REMOTE_XACT_NONE)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("connection to node %s:%d was lost during the transaction",
							conn->host, conn->port)));
		DisconnectNodeConnection(conn);
		fresh = OpenNodeConnection(nodeId, timeoutMs, errorOnFailure);
		if (fresh == NULL)
			return NULL;
		conn->pgConn = fresh->pgConn;
		conn->remoteTimeZone = fresh->remoteTimeZone;
		conn->host = fresh->host;
		conn->port = fresh->port;
		conn->executorState = NULL;
		pfree(fresh);
	}
	return conn;
}

/*
 * NodeConnectionList returns the open connections of the current user to a
 * node, without opening any.
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
	conn->claimed = false;
	conn->xactState = REMOTE_XACT_NONE;
	conn->xactModified = false;
	conn->preparedGid[0] = '\0';
	conn->executorState = NULL;
}

/*
 * DisconnectNodeConnection closes the libpq connection and frees what
 * belongs to it (its wait set); the rest of the NodeConnection's state is
 * the caller's to reset.
 */
void
DisconnectNodeConnection(NodeConnection *conn)
{
	if (conn->pgConn != NULL)
		PQfinish(conn->pgConn);
	conn->pgConn = NULL;
	ReleaseConnectionWaitSet(conn);
}

/*
 * OpenNodeConnection connects to a registered node as the current user,
 * giving up after timeoutMs; on failure it errors out, or returns NULL when
 * errorOnFailure is false.
 */
static NodeConnection *
OpenNodeConnection(int32 nodeId, int timeoutMs, bool errorOnFailure)
{
	WorkerNode *node = GetWorkerNode(nodeId);
	NodeConnection *conn;
	const char *timeZone = GetConfigOption("TimeZone", false, false);
	char	   *dbname = get_database_name(MyDatabaseId);
	char	   *user = GetUserNameFromId(GetUserId(), false);
	PGconn	   *pgConn;

	pgConn = StartConnection(node->host, node->port, dbname, user, timeZone, false);
	if (!FinishConnection(pgConn, timeoutMs))
	{
		char	   *message = ConnectionFailureMessage(pgConn);

		PQfinish(pgConn);
		if (!errorOnFailure)
			return NULL;
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to node %s:%d", node->host, node->port),
				 errdetail_internal("%s", message),
				 errhint("Check that the node is running and accepts connections, "
						 "or remove it with shardext_remove_node().")));
	}

	conn = MemoryContextAllocZero(ConnectionContext, sizeof(NodeConnection));
	conn->nodeId = nodeId;
	conn->userId = GetUserId();
	conn->host = MemoryContextStrdup(ConnectionContext, node->host);
	conn->port = node->port;
	conn->pgConn = pgConn;
	conn->serial = ++connectionSerial;
	conn->remoteTimeZone = MemoryContextStrdup(ConnectionContext, timeZone);
	conn->keepWaitSet = true;
	return conn;
}

/*
 * ConnectToNodeDirect opens an uncached connection (used to inspect a node
 * before it is registered).  On failure it errors out, or returns NULL when
 * errorOnFailure is false.  The caller must PQfinish the result.
 */
PGconn *
ConnectToNodeDirect(const char *host, int32 port, const char *dbname,
					bool errorOnFailure)
{
	char	   *user = GetUserNameFromId(GetUserId(), false);
	PGconn	   *pgConn;

	pgConn = StartConnection(host, port, dbname, user,
							 GetConfigOption("TimeZone", false, false), false);
	if (FinishConnection(pgConn, ShardextConnectTimeout))
		return pgConn;

	if (!errorOnFailure)
	{
		PQfinish(pgConn);
		return NULL;
	}
	{
		char	   *message = ConnectionFailureMessage(pgConn);

		PQfinish(pgConn);
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to node %s:%d", host, port),
				 errdetail_internal("%s", message),
				 errhint("Check that the node is running and accepts connections "
						 "within shardext.connect_timeout.")));
	}
	return NULL;				/* keep compiler quiet */
}

/*
 * OpenDedicatedConnection opens a connection that is not in the cache and
 * takes no part in the local transaction: for work that commits on its own
 * (shard moves, cleanup).  With replication, it is a logical replication
 * connection (replication=database), which also runs SQL.  On failure it
 * errors out, or returns NULL when errorOnFailure is false.  The connection
 * lives in CurrentMemoryContext; close it with CloseDedicatedConnection.
 */
NodeConnection *
OpenDedicatedConnection(const char *host, int32 port, bool replication,
						bool errorOnFailure)
{
	return OpenDedicated(host, port, replication, errorOnFailure, ShardextConnectTimeout);
}

/*
 * OpenDedicatedConnectionWithTimeout is OpenDedicatedConnection (not for
 * replication) that gives up after timeoutMs and returns NULL on failure:
 * for the maintenance daemon's polls of read replicas.
 */
NodeConnection *
OpenDedicatedConnectionWithTimeout(const char *host, int32 port, int timeoutMs)
{
	return OpenDedicated(host, port, false, false, timeoutMs);
}

/* OpenDedicated does the work of the two above */
static NodeConnection *
OpenDedicated(const char *host, int32 port, bool replication, bool errorOnFailure,
			  int timeoutMs)
{
	char	   *dbname = get_database_name(MyDatabaseId);
	char	   *user = GetUserNameFromId(GetUserId(), false);
	const char *timeZone = GetConfigOption("TimeZone", false, false);
	PGconn	   *pgConn;
	NodeConnection *conn;

	pgConn = StartConnection(host, port, dbname, user, timeZone, replication);
	if (!FinishConnection(pgConn, timeoutMs))
	{
		char	   *message = ConnectionFailureMessage(pgConn);

		PQfinish(pgConn);
		if (!errorOnFailure)
			return NULL;
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to node %s:%d", host, port),
				 errdetail_internal("%s", message),
				 errhint("Check that the node is running and accepts connections.")));
	}

	conn = palloc0(sizeof(NodeConnection));
	conn->nodeId = -1;
	conn->userId = GetUserId();
	conn->host = pstrdup(host);
	conn->port = port;
	conn->pgConn = pgConn;
	conn->serial = ++connectionSerial;
	conn->remoteTimeZone = MemoryContextStrdup(TopMemoryContext, timeZone);
	return conn;
}

/*
 * OpenLoopbackConnection connects to this server's own database as the
 * current user, through the first Unix socket directory (or localhost when
 * the server has none): autonomous transactions for records that must
 * survive the caller's transaction.
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
	return OpenDedicatedConnection(host, PostPortNumber, false, errorOnFailure);
}

/* CloseDedicatedConnection closes a connection of OpenDedicatedConnection */
void
CloseDedicatedConnection(NodeConnection *conn)
{
	if (conn == NULL)
		return;
	DisconnectNodeConnection(conn);
	conn->queryInProgress = false;
	conn->pipelineStage = PIPELINE_NONE;
}

/*
 * StartConnection begins a non-blocking connection attempt.  The session
 * settings travel in the startup packet, which costs no round trip.
 */
static PGconn *
StartConnection(const char *host, int32 port, const char *dbname,
				const char *user, const char *timeZone, bool replication)
{
	const char *keywords[16];
	const char *values[16];
	int			n = 0;
	char		portString[12];
	StringInfoData options;
	PQconninfoOption *extra = NULL;
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

	if (ShardextNodeConninfo != NULL && ShardextNodeConninfo[0] != '\0')
	{
		char	   *parseError = NULL;

		extra = PQconninfoParse(ShardextNodeConninfo, &parseError);
		if (extra == NULL)
		{
			if (parseError)
				PQfreemem(parseError);
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid shardext.node_conninfo")));
		}
		for (PQconninfoOption *option = extra; option->keyword != NULL; option++)
		{
			if (option->val == NULL || n >= 8)
				continue;
			keywords[n] = option->keyword;
			values[n] = option->val;
			n++;
		}
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

	pgConn = PQconnectStartParams(keywords, values, false);
	if (extra != NULL)
		PQconninfoFree(extra);
	if (pgConn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory while connecting to node %s:%d", host, port)));
	return pgConn;
}

/*
 * FinishConnection drives a connection attempt to completion, reacting to
 * interrupts, and gives up after timeoutMs (shardext.connect_timeout in
 * general).  Returns whether the connection is usable (then in
 * non-blocking mode).
 */
static bool
FinishConnection(PGconn *pgConn, int timeoutMs)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   timeoutMs);
	PostgresPollingStatusType status = PGRES_POLLING_WRITING;

	if (PQstatus(pgConn) == CONNECTION_BAD)
		return false;

	while (status != PGRES_POLLING_OK && status != PGRES_POLLING_FAILED)
	{
		long		timeout = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
															  deadline);
		int			events = (status == PGRES_POLLING_READING) ?
			WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
		int			rc;

		if (timeout <= 0)
			return false;

		PG_TRY();
		{
			rc = WaitLatchOrSocket(MyLatch,
								   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH | events,
								   PQsocket(pgConn), timeout, PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				CHECK_FOR_INTERRUPTS();
			}
		}
		PG_CATCH();
		{
			PQfinish(pgConn);
			PG_RE_THROW();
		}
		PG_END_TRY();

		if (rc & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE))
			status = PQconnectPoll(pgConn);
	}

	if (status != PGRES_POLLING_OK)
		return false;

	if (PQsetnonblocking(pgConn, 1) != 0)
		return false;
	return true;
}

/*
 * ConnectionFailureMessage says why a connection attempt failed: libpq's
 * message, or the timeout when libpq has nothing to say.
 */
static char *
ConnectionFailureMessage(PGconn *pgConn)
{
	char	   *message = PQerrorMessage(pgConn);

	if (message == NULL || message[0] == '\0' || PQstatus(pgConn) != CONNECTION_BAD)
		return psprintf("timeout expired after %d ms (shardext.connect_timeout)",
						ShardextConnectTimeout);
	return pchomp(message);
}
