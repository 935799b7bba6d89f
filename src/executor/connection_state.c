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
	char	   *sql;			/* NULL: seen once, not prepared */
	int			number;			/* statement name sx<number> */
	bool		parsed;			/* the node accepted its Parse */
} PreparedStatementEntry;

/* statements prepared on one connection at most */
#define MAX_PREPARED_STATEMENTS 2000
/* texts remembered as seen once, at most (then forgotten) */
#define MAX_SEEN_STATEMENTS (4 * MAX_PREPARED_STATEMENTS)

static void FreeStaleConnectionExecStates(void);
static HTAB *CreateStatementTable(void);
static void ForgetStaleStatements(ConnectionExecState *es);
static void DropStatements(ConnectionExecState *es);
static void ForgetSeenStatements(ConnectionExecState *es);
static char *StatementName(int number);

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
		es->statements = CreateStatementTable();
		es->generation = DistTableCacheGeneration;
		conn->executorState = es;
	}
	return es;
}

static HTAB *
CreateStatementTable(void)
{
	HASHCTL		info;

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(uint64);
	info.entrysize = sizeof(PreparedStatementEntry);
	info.hcxt = ExecutorStateContext;
	return hash_create("shardext prepared statements", 64, &info,
					   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/*
 * ForgetStaleStatements drops the statements of a connection once a
 * distributed table changed (DistTableCacheGeneration): the same text may
 * now return other column types, which a statement prepared before cannot
 * ("cached plan must not change result type").  They stay on the node,
 * counted in abandonedStatements, until the connection closes.
 */
static void
ForgetStaleStatements(ConnectionExecState *es)
{
	if (es->generation == DistTableCacheGeneration)
		return;
	es->generation = DistTableCacheGeneration;
	DropStatements(es);
}

/* DropStatements forgets every statement of a connection (see above) */
static void
DropStatements(ConnectionExecState *es)
{
	if (hash_get_num_entries(es->statements) == 0)
		return;
	es->conn->abandonedStatements += es->preparedCount;
	hash_destroy(es->statements);
	es->statements = CreateStatementTable();
	es->preparedCount = 0;
	es->parsingNumber = 0;
}

/*
 * ForgetStatementsIfStale forgets the statements prepared on a connection
 * when a node reports that one of them no longer fits its tables ("cached
 * plan must not change result type": the tables were changed on the node
 * without the coordinator, e.g. with shardext_run_on_shards): the statement
 * fails, the next one prepares again.
 */
void
ForgetStatementsIfStale(NodeConnection *conn, PGresult *result)
{
	const char *sqlstate = PQresultErrorField(result, PG_DIAG_SQLSTATE);
	ConnectionExecState *es;

	if (sqlstate == NULL || strcmp(sqlstate, "0A000") != 0 || conn->executorState == NULL)
		return;
	es = conn->executorState;
	DropStatements(es);
}

/* ForgetSeenStatements forgets the texts seen once on a connection */
static void
ForgetSeenStatements(ConnectionExecState *es)
{
	HASH_SEQ_STATUS status;
	PreparedStatementEntry *entry;

	hash_seq_init(&status, es->statements);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (entry->sql == NULL)
			hash_search(es->statements, &entry->key, HASH_REMOVE, NULL);
	}
}

/* StatementName returns the name of prepared statement number */
static char *
StatementName(int number)
{
	return psprintf("sx%d", number);
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
 * StatementToRun tells how to run sql (with parameters) on a connection:
 * NULL to send it unnamed, else the name of the statement prepared for
 * it.  A text is prepared when it comes the second time (most texts that
 * come once never come again); then *parse is set, and the caller sends
 * the Parse ahead of the statement in the same pipeline and calls
 * StatementParsed when the node accepted it.  Beyond
 * MAX_PREPARED_STATEMENTS per connection, further texts go unnamed.
 */
char *
StatementToRun(NodeConnection *conn, const char *sql, bool *parse)
{
	ConnectionExecState *es = GetConnectionExecState(conn);
	uint64		key = hash_bytes_extended((const unsigned char *) sql, strlen(sql), 0);
	PreparedStatementEntry *entry;
	bool		found;

	*parse = false;
	ForgetStaleStatements(es);
	entry = hash_search(es->statements, &key, HASH_FIND, &found);
	if (!found)
	{
		if (hash_get_num_entries(es->statements) >= MAX_SEEN_STATEMENTS)
			ForgetSeenStatements(es);
		entry = hash_search(es->statements, &key, HASH_ENTER, &found);
		entry->sql = NULL;
		entry->number = 0;
		entry->parsed = false;
		return NULL;
	}
	if (entry->sql == NULL)
	{
		/* the second time: prepare it */
		if (es->preparedCount >= MAX_PREPARED_STATEMENTS)
			return NULL;
		entry->sql = MemoryContextStrdup(ExecutorStateContext, sql);
		es->preparedCount++;
	}
	else if (strcmp(entry->sql, sql) != 0)
		return NULL;			/* another text with the same hash */
	else if (entry->parsed)
		return StatementName(entry->number);

	/* a new name also after a Parse whose answer never came */
	entry->number = ++es->statementCount;
	es->parsingKey = key;
	es->parsingNumber = entry->number;
	*parse = true;
	return StatementName(entry->number);
}

/* StatementParsed: the node accepted the Parse StatementToRun asked for */
void
StatementParsed(NodeConnection *conn)
{
	ConnectionExecState *es = GetConnectionExecState(conn);
	PreparedStatementEntry *entry;

	if (es->parsingNumber == 0)
		return;
	entry = hash_search(es->statements, &es->parsingKey, HASH_FIND, NULL);
	if (entry != NULL && entry->number == es->parsingNumber)
		entry->parsed = true;
	es->parsingNumber = 0;
}

/*
 * PreparedStatementName returns the name of the statement prepared for sql
 * on the connection, preparing it first if needed (a round trip of its
 * own); NULL when the cache is full (then the statement is sent unnamed).
 * With failed, a failure to prepare is not raised: *failed is set and
 * *error gets the node's error (NULL when the connection failed), for the
 * caller to handle.  Reads on replicas use it: a replica that cannot
 * prepare a statement (it lags behind a schema change) sends the task to
 * its primary.
 */
char *
PreparedStatementName(NodeConnection *conn, const char *sql, RemoteParams *params,
					  bool *failed, PGresult **error)
{
	ConnectionExecState *es = GetConnectionExecState(conn);
	uint64		key = hash_bytes_extended((const unsigned char *) sql, strlen(sql), 0);
	PreparedStatementEntry *entry;
	bool		found;
	char	   *name;

	ForgetStaleStatements(es);
	entry = hash_search(es->statements, &key, HASH_FIND, &found);
	if (found && entry->sql != NULL)
	{
		if (strcmp(entry->sql, sql) != 0)
			return NULL;
		if (entry->parsed)
			return StatementName(entry->number);
	}
	if (!(found && entry->sql != NULL) && es->preparedCount >= MAX_PREPARED_STATEMENTS)
		return NULL;

	name = StatementName(es->statementCount + 1);
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
	if (!found || entry->sql == NULL)
	{
		entry->sql = MemoryContextStrdup(ExecutorStateContext, sql);
		es->preparedCount++;
	}
	entry->number = ++es->statementCount;
	entry->parsed = true;
	return name;
}
