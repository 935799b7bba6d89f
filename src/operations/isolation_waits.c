/*-------------------------------------------------------------------------
 *
 * isolation_waits.c
 *	  shardext_test_session_is_blocked(pid, pids): isolationtester's test
 *	  for a blocked session, extended to waits on the nodes (test builds
 *	  only).
 *
 * isolationtester decides that a step waits when
 * pg_isolation_test_session_is_blocked(pid, the pids of its sessions) says
 * so: the backend waits for a heavyweight lock that one of those sessions
 * holds.  A coordinator backend whose statement waits for a row lock on a
 * node does not wait for a lock of its own: it waits for the node's
 * answer.  This function answers true in that case too: a backend of a
 * node, or a session shardext opened to the coordinator itself, that works
 * for the coordinator backend (its application_name names the pid, see
 * deadlock_detection.c) waits for a lock held by a backend working for one
 * of the test's sessions, or by a prepared transaction.  The isolation
 * suite (test/isolation/setup.sql) puts it in the place of PostgreSQL's
 * function in the test database, so that specs show such waits as
 * "<waiting ...>" where they happen, and only then.
 *
 * isolationtester asks every 10 ms while a step runs, so the nodes are
 * asked only while the backend waits for one (wait event "Extension"),
 * over connections kept for the session.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#ifdef SHARDEXT_TEST_HOOKS

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"

#include "shardext/connection.h"
#include "shardext/metadata.h"
#include "shardext/remote_command.h"
#include "shardext/wait_graph.h"

/* how long a node may take to answer */
#define NODE_ANSWER_TIMEOUT_MS 5000

/*
 * Whether the session's backend ($4, on the coordinator only) or a backend
 * working for it ($1: its application_name) waits for a lock held by a
 * backend working for one of the sessions ($2: their application_names;
 * $3: their pids, on the coordinator only) or by a prepared transaction
 * (pid 0).
 */
#define BLOCKED_BY_SESSIONS_QUERY \
	"SELECT EXISTS (SELECT FROM pg_catalog.pg_stat_activity w " \
	"CROSS JOIN LATERAL pg_catalog.unnest(pg_catalog.pg_blocking_pids(w.pid)) b(pid) " \
	"LEFT JOIN pg_catalog.pg_stat_activity h ON h.pid = b.pid " \
	"WHERE (w.application_name = $1 OR w.pid = $4::int) AND w.wait_event_type = 'Lock' " \
	"AND (b.pid = 0 OR h.application_name = ANY ($2::text[]) OR h.pid = ANY ($3::int[])))"

/* a node connection kept for the session */
typedef struct WaitsConnection
{
	int32		nodeId;
	NodeConnection *conn;
} WaitsConnection;

static List *waitsConnections = NIL;

static bool LocalWaitsForNode(const char *const *params, bool *blocked);
static bool NodeBlocks(WorkerNode *node, const char *const *params);
static NodeConnection *WaitsConnectionFor(WorkerNode *node);
static void DropWaitsConnection(int32 nodeId);

PG_FUNCTION_INFO_V1(shardext_test_session_is_blocked);

/*
 * shardext_test_session_is_blocked(pid int, pids int[]) returns bool: see
 * the file header.
 */
Datum
shardext_test_session_is_blocked(PG_FUNCTION_ARGS)
{
	int32		pid = PG_GETARG_INT32(0);
	ArrayType  *pids = PG_GETARG_ARRAYTYPE_P(1);
	char	   *prefix = RemoteApplicationNamePrefix();
	Datum	   *elements;
	int			count;
	StringInfoData names;
	StringInfoData numbers;
	const char *params[4];
	bool		blocked = false;
	ListCell   *cell;

	if (DatumGetBool(DirectFunctionCall2(pg_isolation_test_session_is_blocked,
										 PG_GETARG_DATUM(0), PG_GETARG_DATUM(1))))
		PG_RETURN_BOOL(true);

	deconstruct_array(pids, INT4OID, sizeof(int32), true, TYPALIGN_INT, &elements, NULL, &count);
	initStringInfo(&names);
	initStringInfo(&numbers);
	for (int i = 0; i < count; i++)
	{
		appendStringInfo(&names, "%s%s%d", i > 0 ? "," : "{", prefix, DatumGetInt32(elements[i]));
		appendStringInfo(&numbers, "%s%d", i > 0 ? "," : "{", DatumGetInt32(elements[i]));
	}
	appendStringInfoString(&names, count > 0 ? "}" : "{}");
	appendStringInfoString(&numbers, count > 0 ? "}" : "{}");
	params[0] = psprintf("%s%d", prefix, pid);
	params[1] = names.data;
	params[2] = numbers.data;
	params[3] = psprintf("%d", pid);

	if (!LocalWaitsForNode(params, &blocked) || blocked)
		PG_RETURN_BOOL(blocked);

	/* the pids of the test's sessions mean nothing on the nodes */
	params[2] = "{}";
	params[3] = "0";
	foreach(cell, WorkerNodeList(true))
	{
		if (NodeBlocks(lfirst(cell), params))
			PG_RETURN_BOOL(true);
	}
	PG_RETURN_BOOL(false);
}

/*
 * LocalWaitsForNode returns whether the backend waits for a node; *blocked
 * says whether it, or a session shardext opened to the coordinator for it,
 * is blocked by the test's sessions (or by their sessions to the
 * coordinator, such as a shard move's, which holds the cutover lock).
 */
static bool
LocalWaitsForNode(const char *const *params, bool *blocked)
{
	Oid			types[4] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[4];
	bool		waitsForNode;
	bool		isnull;

	for (int i = 0; i < 4; i++)
		values[i] = CStringGetTextDatum(params[i]);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(BLOCKED_BY_SESSIONS_QUERY ", "
							  "coalesce((SELECT wait_event_type = 'Extension' "
							  "FROM pg_catalog.pg_stat_activity WHERE pid = $4::int), false)",
							  4, types, values, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read the coordinator's lock waits");
	*blocked = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										  &isnull));
	waitsForNode = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2,
											  &isnull));
	SPI_finish();
	return waitsForNode;
}

/*
 * NodeBlocks returns whether a backend of the node working for the session
 * is blocked by the test's sessions; a node that cannot be asked blocks
 * nothing (its connection is opened again next time).
 */
static bool
NodeBlocks(WorkerNode *node, const char *const *params)
{
	NodeConnection *conn = WaitsConnectionFor(node);
	PGresult   *result;
	char	   *failure;
	bool		blocked;

	if (conn == NULL)
		return false;
	result = TryRemoteQuery(conn, BLOCKED_BY_SESSIONS_QUERY, 4, params,
									   NODE_ANSWER_TIMEOUT_MS, &failure);
	if (result == NULL || PQresultStatus(result) != PGRES_TUPLES_OK || PQntuples(result) != 1)
	{
		PQclear(result);
		DropWaitsConnection(node->nodeId);
		return false;
	}
	blocked = strcmp(PQgetvalue(result, 0, 0), "t") == 0;
	PQclear(result);
	return blocked;
}

/* WaitsConnectionFor returns the session's connection to the node, or NULL */
static NodeConnection *
WaitsConnectionFor(WorkerNode *node)
{
	ListCell   *cell;
	WaitsConnection *entry;
	NodeConnection *conn;
	MemoryContext oldContext;

	foreach(cell, waitsConnections)
	{
		entry = lfirst(cell);
		if (entry->nodeId == node->nodeId)
			return entry->conn;
	}
	conn = OpenDedicatedConnectionWithTimeout(node->host, node->port, NODE_ANSWER_TIMEOUT_MS);
	if (conn == NULL)
		return NULL;
	KeepConnectionAcrossTransactions(conn);
	oldContext = MemoryContextSwitchTo(TopMemoryContext);
	entry = palloc(sizeof(WaitsConnection));
	entry->nodeId = node->nodeId;
	entry->conn = conn;
	waitsConnections = lappend(waitsConnections, entry);
	MemoryContextSwitchTo(oldContext);
	return conn;
}

/* DropWaitsConnection closes the session's connection to a node */
static void
DropWaitsConnection(int32 nodeId)
{
	ListCell   *cell;

	foreach(cell, waitsConnections)
	{
		WaitsConnection *entry = lfirst(cell);

		if (entry->nodeId != nodeId)
			continue;
		CloseDedicatedConnection(entry->conn);
		waitsConnections = foreach_delete_current(waitsConnections, cell);
		pfree(entry);
		return;
	}
}

#endif							/* SHARDEXT_TEST_HOOKS */
