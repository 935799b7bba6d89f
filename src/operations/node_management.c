/*-------------------------------------------------------------------------
 *
 * node_management.c
 *	  Registering and removing worker nodes.
 *
 * A worker keeps the shards of a coordinator database in its database of
 * the same name.  On registration that database gets the extension, and a
 * record of which coordinator database it serves (shardext.local_identity),
 * so that a second coordinator cannot take over the same worker database
 * by mistake.  New nodes receive a copy of every reference table.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "shardext/cdc.h"
#include "shardext/connection.h"
#include "shardext/deparser.h"
#include "shardext/fencing.h"
#include "shardext/metadata.h"
#include "shardext/operations.h"
#include "shardext/privileges.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"
#include "shardext/snowflake.h"

PG_FUNCTION_INFO_V1(shardext_add_node);
PG_FUNCTION_INFO_V1(shardext_remove_node);
PG_FUNCTION_INFO_V1(shardext_set_node_weight);
PG_FUNCTION_INFO_V1(shardext_worker_register);
PG_FUNCTION_INFO_V1(shardext_worker_unregister);

static void CheckNodeArguments(int32 port, double weight);
static NodeConnection *ConnectToNewNode(const char *host, int32 port);
static bool NodeLacksDatabase(const char *host, int32 port, const char *dbname);
static void PrepareNewNode(NodeConnection *conn, const char *host, int32 port);
static char *RunOnNewNode(NodeConnection *conn, const char *host, int32 port,
						  const char *command, int nParams, const char *const *params);
static void CopyReferenceShard(Oid relid, ShardInterval *shard, int32 sourceNodeId,
							   int32 targetNodeId);
static void DropReferencePlacements(WorkerNode *node);

/*
 * shardext_add_node(host text, port int, weight float8) returns the node id
 * of the (new or already registered) node.
 */
Datum
shardext_add_node(PG_FUNCTION_ARGS)
{
	char	   *host = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int32		port = PG_GETARG_INT32(1);
	double		weight = PG_GETARG_FLOAT8(2);
	WorkerNode *existing;
	NodeConnection *conn;
	int32		nodeId;

	EnsureAdminAndShardext("shardext_add_node");
	CheckNodeArguments(port, weight);

	/* one node change at a time */
	LockRelationOid(ShardextCatalogRelid("node"), ShareRowExclusiveLock);

	existing = FindWorkerNode(host, port);
	if (existing != NULL && NodeIsReplica(existing))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("node %s:%d is registered as a read replica of node %d",
						host, port, existing->primaryNodeId),
				 errhint("Use shardext_promote_replica() to make it a primary.")));
	if (existing != NULL)
	{
		if (existing->weight != weight)
			ereport(NOTICE,
					(errmsg("node %s:%d is already registered with weight %g",
							host, port, existing->weight),
					 errhint("Use shardext_set_node_weight() to change its weight.")));
		PG_RETURN_INT32(existing->nodeId);
	}

	conn = ConnectToNewNode(host, port);
	PG_TRY();
	{
		const char *params[2];

		PrepareNewNode(conn, host, port);
		CheckNewNode(host, port);
		nodeId = InsertWorkerNode(host, port, weight);
		RecordServerIdentity(nodeId, conn);
		params[0] = CoordinatorId();
		params[1] = psprintf("%d", nodeId);
		RunOnNewNode(conn, host, port,
					 "SELECT shardext.worker_register($1, $2::int)", 2, params);
		CdcPrepareNewNode(conn, host, port);
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(conn);
	}
	PG_END_TRY();

	CommandCounterIncrement();
	ReplicateReferenceTablesToNode(nodeId);
	CdcSetUpNewNode(nodeId);

	PG_RETURN_INT32(nodeId);
}

static void
CheckNodeArguments(int32 port, double weight)
{
	if (port < 1 || port > 65535)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("port %d is out of range", port),
				 errhint("A port is between 1 and 65535.")));
	if (!(weight > 0 && weight <= 1000))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("node weight must be greater than 0 and at most 1000, not %g", weight)));
}

/* identifies this coordinator database: <system identifier>:<database oid> */
char *
CoordinatorId(void)
{
	return psprintf(UINT64_FORMAT ":%u", GetSystemIdentifier(), MyDatabaseId);
}

/*
 * ConnectToNewNode connects to the database of our name on the node,
 * creating that database first if the node does not have it.
 */
static NodeConnection *
ConnectToNewNode(const char *host, int32 port)
{
	char	   *dbname = get_database_name(MyDatabaseId);
	NodeConnection *conn = OpenDedicatedConnectionTo(host, port, dbname, false);

	if (conn != NULL)
		return conn;

	/*
	 * Is it the database that is missing?  Ask the maintenance database --
	 * unless the node did not answer in time: it would not answer that
	 * either.
	 */
	if (!LastConnectionTimedOut())
		(void) NodeLacksDatabase(host, port, dbname);
	return OpenDedicatedConnectionTo(host, port, dbname, true);
}

/*
 * NodeLacksDatabase creates the database on the node when the node's
 * "postgres" database says it does not exist, and returns whether it did.
 * When "postgres" cannot be reached either, it returns false (the caller's
 * connection attempt then reports why).
 */
static bool
NodeLacksDatabase(const char *host, int32 port, const char *dbname)
{
	NodeConnection *maintenance = OpenDedicatedConnectionTo(host, port, "postgres", false);
	const char *params[1] = {dbname};
	bool		missing = false;

	if (maintenance == NULL)
		return false;
	PG_TRY();
	{
		char	   *failure = NULL;
		PGresult   *result;

		result = TryRemoteQuery(maintenance,
								"SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1",
								1, params, 0, &failure);
		missing = result != NULL && PQntuples(result) == 0;
		PQclear(result);
		if (missing)
		{
			ereport(NOTICE,
					(errmsg("creating database \"%s\" on node %s:%d", dbname, host, port)));
			result = TryRemoteQuery(maintenance,
									psprintf("CREATE DATABASE %s",
											 quote_identifier(dbname)),
									0, NULL, 0, &failure);
			if (result == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
						 errmsg("could not create database \"%s\" on node %s:%d",
								dbname, host, port),
						 errdetail_internal("%s", failure)));
			PQclear(result);
		}
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(maintenance);
	}
	PG_END_TRY();
	return missing;
}

/*
 * RunOnNewNode runs one command on a not yet registered node (waiting
 * interruptibly) and returns the first value of its result, if any; a
 * remote error is raised with the node's SQLSTATE and hint.
 */
static char *
RunOnNewNode(NodeConnection *conn, const char *host, int32 port, const char *command,
			 int nParams, const char *const *params)
{
	PGresult   *result;
	PGresult   *error;
	char	   *value = NULL;

	if (nParams > 0)
		SendRemoteCommandParams(conn, command, nParams, NULL, params);
	else
		SendRemoteCommand(conn, command);
	result = ReadRemoteResults(conn, &error);
	if (error != NULL)
	{
		const char *sqlstate = PQresultErrorField(error, PG_DIAG_SQLSTATE);
		char	   *message = pchomp(PQresultErrorMessage(error));
		const char *hint = PQresultErrorField(error, PG_DIAG_MESSAGE_HINT);
		char	   *hintCopy = hint ? pstrdup(hint) : NULL;
		int			code = ERRCODE_CONNECTION_FAILURE;

		if (sqlstate != NULL && strlen(sqlstate) == 5)
			code = MAKE_SQLSTATE(sqlstate[0], sqlstate[1], sqlstate[2],
								 sqlstate[3], sqlstate[4]);
		PQclear(error);
		PQclear(result);
		ereport(ERROR,
				(errcode(code),
				 errmsg("could not prepare node %s:%d: %s", host, port, message),
				 hintCopy ? errhint("%s", hintCopy) : 0));
	}
	if (result != NULL && PQresultStatus(result) == PGRES_TUPLES_OK &&
		PQntuples(result) > 0 && !PQgetisnull(result, 0, 0))
		value = pstrdup(PQgetvalue(result, 0, 0));
	PQclear(result);
	return value;
}

/*
 * CheckSameMajorVersion errors out unless the server on conn runs the
 * coordinator's major version of PostgreSQL: nodes exchange query text,
 * COPY data and replicated rows that only the same major reads the same
 * way, and the library is built for one major.
 */
void
CheckSameMajorVersion(NodeConnection *conn, const char *host, int32 port)
{
	int			major = PQserverVersion(conn->pgConn) / 10000;

	if (major != PG_VERSION_NUM / 10000)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("node %s:%d runs PostgreSQL %d, the coordinator PostgreSQL %d",
						host, port, major, PG_VERSION_NUM / 10000),
				 errhint("Every node of a shardext cluster, read replicas included, runs the "
						 "same major version of PostgreSQL.")));
}

/*
 * PrepareNewNode checks that the node runs the coordinator's major version
 * of PostgreSQL with shardext available, is not this server, and is no
 * coordinator itself; then it installs the extension there.
 */
static void
PrepareNewNode(NodeConnection *conn, const char *host, int32 port)
{
	char	   *value;
	char		systemId[32];

	CheckSameMajorVersion(conn, host, port);

	value = RunOnNewNode(conn, host, port, "SELECT pg_catalog.pg_is_in_recovery()::text",
						 0, NULL);
	if (value != NULL && strcmp(value, "true") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node %s:%d is a standby", host, port),
				 errhint("Register a streaming standby of a worker as a read replica with "
						 "shardext_add_replica().")));

	snprintf(systemId, sizeof(systemId), UINT64_FORMAT, GetSystemIdentifier());
	value = RunOnNewNode(conn, host, port,
						 "SELECT system_identifier::text FROM pg_control_system()", 0, NULL);
	if (value != NULL && strcmp(value, systemId) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("node %s:%d is this coordinator itself", host, port),
				 errhint("Add the worker servers, not the coordinator.")));

	value = RunOnNewNode(conn, host, port,
						 "SELECT 1 FROM pg_available_extensions WHERE name = 'shardext'",
						 0, NULL);
	if (value == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shardext is not installed on node %s:%d", host, port),
				 errhint("Install the shardext package on the node and add it to "
						 "shared_preload_libraries.")));

	RunOnNewNode(conn, host, port, "CREATE EXTENSION IF NOT EXISTS shardext", 0, NULL);

	value = RunOnNewNode(conn, host, port,
						 "SELECT count(*) FROM shardext.node", 0, NULL);
	if (value != NULL && strcmp(value, "0") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("node %s:%d is itself a coordinator with registered nodes", host, port),
				 errhint("A worker database must not have worker nodes of its own.")));
}

/*
 * ReplicateReferenceTablesToNode gives a new node a placement of every
 * reference table, copied from an existing placement, in this transaction.
 */
void
ReplicateReferenceTablesToNode(int32 nodeId)
{
	List	   *tables = DistributedTableList();
	ListCell   *cell;

	foreach(cell, tables)
	{
		Oid			relid = lfirst_oid(cell);
		DistTableCacheEntry *entry;
		ShardInterval *shard;
		int64	   *shardId = palloc(sizeof(int64));
		ShardLayout *layout = palloc0(sizeof(ShardLayout));

		if (!IsReferenceTable(relid))
			continue;

		/* writes wait; reads go on */
		LockRelationOid(relid, ExclusiveLock);
		entry = GetDistTableCacheEntry(relid);
		shard = &entry->shards[0];
		*shardId = shard->shardId;
		layout->nodeIds = list_make1_int(nodeId);

		CreateShardTablesOnNodes(relid, list_make1(shardId), list_make1(layout));
		if (shard->placementCount > 0)
			CopyReferenceShard(relid, shard, shard->placementNodeIds[0], nodeId);
		InsertPlacement(shard->shardId, nodeId);
	}
}

/*
 * CopyReferenceShard streams a shard from one node to another through this
 * backend: COPY TO STDOUT on the source, COPY FROM STDIN on the target.
 */
static void
CopyReferenceShard(Oid relid, ShardInterval *shard, int32 sourceNodeId,
				   int32 targetNodeId)
{
	NodeConnection *source = GetNodeConnection(sourceNodeId);
	NodeConnection *target = GetNodeConnection(targetNodeId);
	char	   *shardName = QualifiedShardName(relid, shard->shardId);
	char	   *columns = ColumnListString(relid);
	char	   *copyOut = psprintf("COPY %s %s TO STDOUT", shardName, columns);
	char	   *copyIn = psprintf("COPY %s %s FROM STDIN", shardName, columns);

	RemoteTransactionBegin(source);
	RemoteTransactionBegin(target);
	RemoteTransactionMarkModified(target);
	CopyBetweenNodes(source, copyOut, target, copyIn, NULL, NULL);
}

/*
 * shardext_remove_node(host text, port int): only nodes without shards of
 * distributed tables can go; their reference table copies go with them.
 */
Datum
shardext_remove_node(PG_FUNCTION_ARGS)
{
	char	   *host = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int32		port = PG_GETARG_INT32(1);
	WorkerNode *node;
	int32		nodeId;
	int64		placements;

	EnsureAdminAndShardext("shardext_remove_node");
	LockRelationOid(ShardextCatalogRelid("node"), ShareRowExclusiveLock);

	node = GetWorkerNodeAt(host, port);
	nodeId = node->nodeId;

	DropReferencePlacements(node);
	placements = NodePlacementCount(nodeId);
	if (placements > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("cannot remove node %s:%d because it holds " INT64_FORMAT
						" shard placements", host, port, placements),
				 errhint("Move its shards to other nodes (shardext_drain_node()) or "
						 "drop or undistribute the tables first.")));

	CdcNodeRemoved(nodeId);
	DeleteWorkerNode(nodeId);

	/* best effort: the node may be gone for good */
	{
		NodeConnection *conn = OpenDedicatedConnection(host, port, false, false);

		if (conn != NULL)
		{
			const char *params[1] = {CoordinatorId()};
			char	   *failure = NULL;

			PG_TRY();
			{
				PQclear(TryRemoteQuery(conn, "SELECT shardext.worker_unregister($1)",
									   1, params, 0, &failure));
			}
			PG_FINALLY();
			{
				CloseDedicatedConnection(conn);
			}
			PG_END_TRY();
		}
	}
	PG_RETURN_VOID();
}

/*
 * DropReferencePlacements removes the node's copies of reference tables; a
 * reference table must keep at least one copy.  The shard tables on the
 * node are dropped if it is reachable.
 */
static void
DropReferencePlacements(WorkerNode *node)
{
	List	   *tables = DistributedTableList();
	ListCell   *cell;
	List	   *drops = NIL;

	foreach(cell, tables)
	{
		Oid			relid = lfirst_oid(cell);
		DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);
		ShardInterval *shard;
		bool		placed = false;

		if (entry == NULL || entry->method != DISTRIBUTE_BY_REFERENCE)
			continue;
		shard = &entry->shards[0];
		for (int i = 0; i < shard->placementCount; i++)
			placed |= (shard->placementNodeIds[i] == node->nodeId);
		if (!placed)
			continue;
		if (shard->placementCount == 1)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("cannot remove node %s:%d because it holds the only copy "
							"of reference table \"%s\"", node->host, node->port,
							get_rel_name(relid)),
					 errhint("Add another node first, or drop the reference table.")));
		drops = lappend(drops, ShardDropCommand(get_namespace_name(get_rel_namespace(relid)),
												get_rel_name(relid), shard->shardId));
		DeletePlacement(shard->shardId, node->nodeId);
	}

	if (drops != NIL)
	{
		NodeConnection *probe = OpenDedicatedConnection(node->host, node->port, false, false);

		if (probe == NULL)
			ereport(WARNING,
					(errmsg("node %s:%d is unreachable; its reference table copies are "
							"left in place", node->host, node->port)));
		else
		{
			StringInfoData command;

			CloseDedicatedConnection(probe);
			initStringInfo(&command);
			foreach(cell, drops)
				appendStringInfo(&command, "%s;\n", (char *) lfirst(cell));
			ExecuteOnNodesInTransaction(list_make1_int(node->nodeId),
										list_make1(command.data));
		}
	}
}

/* shardext_set_node_weight(host text, port int, weight float8) */
Datum
shardext_set_node_weight(PG_FUNCTION_ARGS)
{
	char	   *host = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int32		port = PG_GETARG_INT32(1);
	double		weight = PG_GETARG_FLOAT8(2);
	WorkerNode *node;

	EnsureAdminAndShardext("shardext_set_node_weight");
	CheckNodeArguments(port, weight);
	node = GetWorkerNodeAt(host, port);
	UpdateWorkerNodeWeight(node->nodeId, weight);
	PG_RETURN_VOID();
}

/*
 * shardext_worker_register(coordinator_id text, node_id int), run on a
 * worker: records the coordinator database this database serves, refusing
 * a second coordinator, and makes node_id the node id of the server's
 * snowflake ids (kept across restarts).
 */
Datum
shardext_worker_register(PG_FUNCTION_ARGS)
{
	char	   *coordinatorId = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int32		nodeId = PG_GETARG_INT32(1);

	EnsureShardextAdmin("shardext.worker_register");
	if (nodeId < 1 || nodeId > SNOWFLAKE_MAX_NODE_ID)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("node id %d is out of range", nodeId),
				 errdetail("Worker node ids are between 1 and %d.", SNOWFLAKE_MAX_NODE_ID)));

	RegisterLocalIdentity(coordinatorId, nodeId);
	SnowflakeSetRegisteredNodeId(nodeId);
	PG_RETURN_VOID();
}

/* shardext_worker_unregister(coordinator_id text), run on a worker */
Datum
shardext_worker_unregister(PG_FUNCTION_ARGS)
{
	EnsureShardextAdmin("shardext.worker_unregister");
	UnregisterLocalIdentity(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	PG_RETURN_VOID();
}
