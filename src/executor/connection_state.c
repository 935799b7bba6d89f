/*-------------------------------------------------------------------------
 *
 * connection_state.c
 *	  The executor's state of each connection it uses: which scan's task
 *	  is in flight on it, and the statements prepared on it.
 *
 * The state hangs off NodeConnection.executorState; connection.c forgets
 * it when the connection is closed or opened again, and the memory of such
 * stale states is freed the next time one is made.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "shardext/distributed_executor.h"
#include "shardext/remote_command.h"

/* every ConnectionExecState made, to free those of closed connections */
static List *ConnectionExecStates = NIL;
static MemoryContext ExecutorStateContext = NULL;

typedef struct PreparedStatementEntry
{
	uint64		key;			/* hash of the SQL text */
	char	   *sql;
	int			number;			/* statement name sx<number> */
} PreparedStatementEntry;

#define MAX_PREPARED_STATEMENTS 2000

static void FreeStaleConnectionExecStates(void);

/*
 * FreeStaleConnectionExecStates frees the state of connections that were
 * closed or reconnected since (connection.c forgets executorState then):
 * their prepared statements are gone with the session.
 */
static void
FreeStaleConnectionExecStates(void)
{
	ListCell   *cell;

	foreach(cell, ConnectionExecStates)
	{
		ConnectionExecState *es = lfirst(cell);

		if (es->conn->executorState == es)
			continue;
		hash_destroy(es->statements);
		ConnectionExecStates = foreach_delete_current(ConnectionExecStates, cell);
		pfree(es);
	}
}

/* GetConnectionExecState returns the state of a connection, making it if needed */
ConnectionExecState *
GetConnectionExecState(NodeConnection *conn)
{
	ConnectionExecState *es = conn->executorState;

	if (es == NULL)
	{
		HASHCTL		info;
		MemoryContext oldContext;

		if (ExecutorStateContext == NULL)
			ExecutorStateContext = AllocSetContextCreate(TopMemoryContext,
														 "shardext executor connections",
														 ALLOCSET_DEFAULT_SIZES);
		FreeStaleConnectionExecStates();
		es = MemoryContextAllocZero(ExecutorStateContext, sizeof(ConnectionExecState));
		es->conn = conn;
		oldContext = MemoryContextSwitchTo(ExecutorStateContext);
		ConnectionExecStates = lappend(ConnectionExecStates, es);
		MemoryContextSwitchTo(oldContext);
		memset(&info, 0, sizeof(info));
		info.keysize = sizeof(uint64);
		info.entrysize = sizeof(PreparedStatementEntry);
		info.hcxt = ExecutorStateContext;
		es->statements = hash_create("shardext prepared statements", 64, &info,
									 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		conn->executorState = es;
	}
	return es;
}

/* FlushOutput pushes libpq's output to the node; false when that failed */
bool
FlushOutput(NodeConnection *conn)
{
	int			rc;

	while ((rc = PQflush(conn->pgConn)) == 1)
		WaitForRemoteSocket(conn, true);
	return rc != -1;
}

/*
 * PreparedStatementName returns the name of the statement prepared for sql
 * on the connection, preparing it first if needed; NULL when the cache is
 * full (then the statement is sent unnamed).  With failed, a failure to
 * prepare is not raised: *failed is set and *error gets the node's error
 * (NULL when the connection failed), for the caller to handle.
 */
char *
PreparedStatementName(NodeConnection *conn, const char *sql, RemoteParams *params,
					  bool *failed, PGresult **error)
{
	ConnectionExecState *es = GetConnectionExecState(conn);
	uint64		key = hash_bytes_extended((const unsigned char *) sql, strlen(sql), 0);
	PreparedStatementEntry *entry;
	bool		found;
	char		name[32];

	entry = hash_search(es->statements, &key, HASH_FIND, &found);
	if (found)
	{
		if (strcmp(entry->sql, sql) != 0)
			return NULL;
		snprintf(name, sizeof(name), "sx%d", entry->number);
		return pstrdup(name);
	}
	if (es->statementCount >= MAX_PREPARED_STATEMENTS)
		return NULL;

	snprintf(name, sizeof(name), "sx%d", es->statementCount + 1);
	SyncRemoteTimeZone(conn);
	if (failed != NULL)
	{
		*failed = true;
		*error = NULL;
		if (!PQsendPrepare(conn->pgConn, name, sql, params->count, params->types))
			return NULL;
		conn->queryInProgress = true;
		if (!FlushOutput(conn))
			return NULL;
		PQclear(ReadRemoteResults(conn, error));
		if (*error != NULL || PQstatus(conn->pgConn) != CONNECTION_OK)
			return NULL;
		*failed = false;
	}
	else
	{
		if (!PQsendPrepare(conn->pgConn, name, sql, params->count, params->types))
			ExecutorConnectionFailed(conn);
		conn->queryInProgress = true;
		if (!FlushOutput(conn))
			ExecutorConnectionFailed(conn);
		PQclear(FinishRemoteQuery(conn, sql));
	}

	entry = hash_search(es->statements, &key, HASH_ENTER, &found);
	entry->sql = MemoryContextStrdup(ExecutorStateContext, sql);
	entry->number = ++es->statementCount;
	return pstrdup(name);
}

