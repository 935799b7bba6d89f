/*-------------------------------------------------------------------------
 *
 * node_checks.c
 *	  Checks of a node's configuration: what shardext needs of every server
 *	  of a cluster, reported by shardext_add_node() for a new node and by
 *	  shardext_check_cluster() for all of them, read replicas included.
 *
 * One query per node reads its settings; each check turns them into a
 * status: "error" for what breaks shardext (a different version of
 * PostgreSQL or shardext, no prepared transactions: every multi-node write
 * would fail at PREPARE), "warning" for what breaks some operations or
 * makes them slow (online moves need wal_level = logical, replication
 * slots and senders; roles missing on the node; a skewed clock), "ok"
 * otherwise.  shardext_add_node() refuses a node with an error and shows
 * the warnings.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "shardext/array_literal.h"
#include "shardext/connection.h"
#include "shardext/fencing.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/operations.h"
#include "shardext/privileges.h"
#include "shardext/remote_command.h"
#include "shardext/shardext.h"
#include "shardext/subtransaction.h"

PG_FUNCTION_INFO_V1(shardext_check_cluster);

/* a node gets this long to answer the settings query */
#define NODE_CHECK_TIMEOUT_MS 10000

typedef enum NodeCheckStatus
{
	NODE_CHECK_OK,
	NODE_CHECK_WARNING,
	NODE_CHECK_ERROR
} NodeCheckStatus;

/* the outcome of one check */
typedef struct NodeCheck
{
	const char *name;
	NodeCheckStatus status;
	char	   *summary;		/* for messages about a problem */
	char	   *detail;
	char	   *hint;
} NodeCheck;

/* columns of the settings query (NodeSettingsQuery) */
enum
{
	COL_VERSION_NUM,
	COL_VERSION,
	COL_LIBRARY,
	COL_EXTENSION,
	COL_PRELOAD,
	COL_PREPARED,
	COL_CONNECTIONS,
	COL_WAL_LEVEL,
	COL_SLOTS,
	COL_SLOTS_USED,
	COL_SENDERS,
	COL_SENDERS_USED,
	COL_WORKERS,
	COL_REPLICATION_WORKERS,
	COL_MISSING_ROLES,
	COL_CLOCK_MS,
	COL_IN_RECOVERY,
	COL_COUNT
};

/* what the settings query returned, one string per column (NULL = null) */
typedef struct NodeSettings
{
	char	   *values[COL_COUNT];
	double		clockSkewMs;	/* the node's clock minus ours */
	double		clockUncertaintyMs; /* half the round trip */
} NodeSettings;

/* where ConnectForChecks connects, and the connection it gets */
typedef struct CheckConnection
{
	const char *host;
	int32		port;
	NodeConnection *conn;
} CheckConnection;

static List *CheckNode(const char *host, int32 port, List *roles, WorkerNode *node);
static void CheckFencing(List **checks, WorkerNode *node, NodeConnection *conn,
						 NodeSettings *settings);
static NodeCheck *MakeCheck(List **checks, const char *name, NodeCheckStatus status,
							const char *summary, const char *detail, const char *hint);
static NodeCheck *ConnectForChecks(const char *host, int32 port, NodeConnection **connOut);
static void OpenCheckConnection(void *arg);
static bool ReadNodeSettings(NodeConnection *conn, List *roles, NodeSettings *settings);
static char *NodeSettingsQuery(List *roles);
static void CheckVersions(List **checks, NodeSettings *settings);
static void CheckPreparedTransactions(List **checks, NodeSettings *settings);
static void CheckReplication(List **checks, NodeSettings *settings);
static void CheckWorkersRolesAndClock(List **checks, NodeSettings *settings);
static void CheckRecovery(List **checks, NodeSettings *settings, bool replica);
static List *NodesToCheck(void);
static List *CoordinatorChecks(void);
static List *RolesUsingDistributedTables(void);
static const char *StatusName(NodeCheckStatus status);

/*
 * CheckNewNode runs the checks on a node that shardext_add_node() is about
 * to register: the first error is raised as an ERROR, warnings become
 * WARNINGs.
 */
void
CheckNewNode(const char *host, int32 port)
{
	List	   *checks = CheckNode(host, port, RolesUsingDistributedTables(), NULL);
	ListCell   *cell;

	foreach(cell, checks)
	{
		NodeCheck  *check = lfirst(cell);

		if (check->status == NODE_CHECK_ERROR)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot add node %s:%d: %s", host, port, check->summary),
					 errdetail_internal("%s", check->detail),
					 check->hint ? errhint("%s", check->hint) : 0));
	}
	foreach(cell, checks)
	{
		NodeCheck  *check = lfirst(cell);

		if (check->status == NODE_CHECK_WARNING)
			ereport(WARNING,
					(errmsg("node %s:%d: %s", host, port, check->summary),
					 errdetail_internal("%s", check->detail),
					 check->hint ? errhint("%s", check->hint) : 0));
	}
}

/*
 * shardext_check_cluster() returns one row per check and node (the
 * coordinator is node 0): node_id, node_host, node_port, check_name,
 * status ('ok', 'warning' or 'error'), detail.
 */
Datum
shardext_check_cluster(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	List	   *roles;
	List	   *nodes;
	ListCell   *nodeCell;

	EnsureShardextInstalled();
	InitMaterializedSRF(fcinfo, 0);
	roles = RolesUsingDistributedTables();
	nodes = NodesToCheck();

	foreach(nodeCell, nodes)
	{
		WorkerNode *node = lfirst(nodeCell);
		List	   *checks = node ? CheckNode(node->host, node->port, roles, node) :
			CoordinatorChecks();
		ListCell   *cell;

		foreach(cell, checks)
		{
			NodeCheck  *check = lfirst(cell);
			Datum		values[6];
			bool		nulls[6] = {false, false, false, false, false, false};

			values[0] = Int32GetDatum(node ? node->nodeId : 0);
			values[1] = node ? CStringGetTextDatum(node->host) : (Datum) 0;
			nulls[1] = node == NULL;
			values[2] = Int32GetDatum(node ? node->port : PostPortNumber);
			values[3] = CStringGetTextDatum(check->name);
			values[4] = CStringGetTextDatum(StatusName(check->status));
			values[5] = CStringGetTextDatum(check->detail);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	return (Datum) 0;
}

/*
 * NodesToCheck lists the nodes shardext_check_cluster() checks: NULL for
 * the coordinator, then every worker followed by its read replicas.
 */
static List *
NodesToCheck(void)
{
	List	   *nodes = list_make1(NULL);
	ListCell   *cell;

	foreach(cell, WorkerNodeList(false))
	{
		WorkerNode *node = lfirst(cell);

		nodes = lappend(nodes, node);
		nodes = list_concat(nodes, ReplicaNodeList(node->nodeId, false));
	}
	return nodes;
}

/*
 * CheckNode connects to a node and runs every check; trouble with the node
 * becomes a failed check, not an error.  node is the node's record (NULL
 * for one that shardext_add_node() is about to register).  The connection
 * reaches whatever server is there: the fencing check says whether it is
 * the node's.
 */
static List *
CheckNode(const char *host, int32 port, List *roles, WorkerNode *node)
{
	List	   *checks = NIL;
	NodeConnection *conn = NULL;
	bool		identityCheck = SetNodeIdentityCheck(false);
	NodeCheck  *connection = ConnectForChecks(host, port, &conn);
	NodeSettings settings;
	bool		replica = node != NULL && NodeIsReplica(node);

	SetNodeIdentityCheck(identityCheck);

	checks = lappend(checks, connection);
	if (conn == NULL)
		return checks;

	if (!ReadNodeSettings(conn, roles, &settings))
	{
		connection->status = NODE_CHECK_ERROR;
		connection->detail = psprintf("The node did not answer the settings query within %d ms.",
									  NODE_CHECK_TIMEOUT_MS);
	}
	else
	{
		CheckVersions(&checks, &settings);
		CheckPreparedTransactions(&checks, &settings);
		CheckReplication(&checks, &settings);
		CheckWorkersRolesAndClock(&checks, &settings);
		if (node == NULL || !node->needsRebuild)
			CheckRecovery(&checks, &settings, replica);
		if (node != NULL)
			CheckFencing(&checks, node, conn, &settings);
	}
	CloseDedicatedConnection(conn);
	return checks;
}

/*
 * MakeCheck appends a check's outcome to *checks (when checks is not
 * NULL).  summary (lower case, no period) says what is wrong, for the
 * messages of shardext_add_node(); NULL says "nothing".
 */
static NodeCheck *
MakeCheck(List **checks, const char *name, NodeCheckStatus status, const char *summary,
		  const char *detail, const char *hint)
{
	NodeCheck  *check = palloc0(sizeof(NodeCheck));

	check->name = name;
	check->status = status;
	check->summary = pstrdup(summary ? summary : name);
	check->detail = pstrdup(detail);
	check->hint = hint ? pstrdup(hint) : NULL;
	if (checks != NULL)
		*checks = lappend(*checks, check);
	return check;
}

/* OpenCheckConnection: the part of ConnectForChecks that may fail */
static void
OpenCheckConnection(void *arg)
{
	CheckConnection *target = arg;

	target->conn = OpenDedicatedConnection(target->host, target->port, false, true);
}

/*
 * ConnectForChecks opens a dedicated connection to the node as the current
 * user; a failure is caught (in a subtransaction) and becomes the outcome
 * of the "connection" check, with libpq's reason.
 */
static NodeCheck *
ConnectForChecks(const char *host, int32 port, NodeConnection **connOut)
{
	CheckConnection target = {host, port, NULL};
	ErrorData  *edata;

	edata = RunInSubtransaction(OpenCheckConnection, &target);
	*connOut = target.conn;
	if (edata != NULL)
		return MakeCheck(NULL, "connection", NODE_CHECK_ERROR, "cannot connect",
						 psprintf("%s%s%s", edata->message, edata->detail ? ": " : "",
								  edata->detail ? edata->detail : ""),
						 edata->hint);
	return MakeCheck(NULL, "connection", NODE_CHECK_OK, NULL,
					 psprintf("Connected to %s:%d as \"%s\".", host, port,
							  GetUserNameFromId(GetUserId(), false)),
					 NULL);
}

/*
 * ReadNodeSettings runs the settings query on the node and measures its
 * clock against ours; false when the node did not answer.
 */
static bool
ReadNodeSettings(NodeConnection *conn, List *roles, NodeSettings *settings)
{
	TimestampTz before = GetCurrentTimestamp();
	PGresult   *result = TryRemoteQueryNoInterrupts(conn, NodeSettingsQuery(roles),
													NODE_CHECK_TIMEOUT_MS);
	TimestampTz after = GetCurrentTimestamp();
	double		middleMs;

	if (result == NULL || PQresultStatus(result) != PGRES_TUPLES_OK ||
		PQntuples(result) != 1 || PQnfields(result) != COL_COUNT)
	{
		PQclear(result);
		return false;
	}
	for (int i = 0; i < COL_COUNT; i++)
		settings->values[i] = PQgetisnull(result, 0, i) ? NULL :
			pstrdup(PQgetvalue(result, 0, i));
	PQclear(result);

	/* our clock in ms since the Unix epoch, halfway through the round trip */
	middleMs = ((double) (before + (after - before) / 2)) / 1000.0 +
		((double) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE)) * SECS_PER_DAY * 1000.0;
	settings->clockSkewMs = strtod(settings->values[COL_CLOCK_MS], NULL) - middleMs;
	settings->clockUncertaintyMs = ((double) (after - before)) / 2000.0;
	return true;
}

/*
 * NodeSettingsQuery is the one query that reads what the checks need;
 * roles is the list of role names that must exist on the node.
 */
static char *
NodeSettingsQuery(List *roles)
{
	return psprintf("SELECT pg_catalog.current_setting('server_version_num'), "
					"pg_catalog.current_setting('server_version'), "
					"pg_catalog.current_setting('shardext.version', true), "
					"(SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'shardext'), "
					"pg_catalog.current_setting('shared_preload_libraries'), "
					"pg_catalog.current_setting('max_prepared_transactions'), "
					"pg_catalog.current_setting('max_connections'), "
					"pg_catalog.current_setting('wal_level'), "
					"pg_catalog.current_setting('max_replication_slots'), "
					"(SELECT pg_catalog.count(*) FROM pg_catalog.pg_replication_slots), "
					"pg_catalog.current_setting('max_wal_senders'), "
					"(SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_replication), "
					"pg_catalog.current_setting('max_worker_processes'), "
					"pg_catalog.current_setting('max_logical_replication_workers'), "
					"(SELECT pg_catalog.string_agg(pg_catalog.quote_ident(r), ', ' ORDER BY r) "
					" FROM pg_catalog.unnest(%s::pg_catalog.text[]) r "
					" WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r)), "
					"pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000, "
					"pg_catalog.pg_is_in_recovery()::pg_catalog.text",
					quote_literal_cstr(TextArrayLiteral(roles)));
}

/* CheckVersions: PostgreSQL, the loaded library and the installed extension */
static void
CheckVersions(List **checks, NodeSettings *settings)
{
	char	  **v = settings->values;
	const char *ours = GetConfigOption("server_version", false, false);
	char	   *installed = InstalledShardextVersion();
	char	   *versions = psprintf("The node runs PostgreSQL %s, the coordinator %s.",
									v[COL_VERSION], ours);

	if (atoi(v[COL_VERSION_NUM]) / 10000 != PG_VERSION_NUM / 10000)
		MakeCheck(checks, "postgresql_version", NODE_CHECK_ERROR,
				  psprintf("the node runs PostgreSQL %s", v[COL_VERSION]), versions,
				  "Every node of a shardext cluster runs the same major version of PostgreSQL.");
	else if (strcmp(v[COL_VERSION], ours) != 0)
		MakeCheck(checks, "postgresql_version", NODE_CHECK_WARNING,
				  psprintf("the node runs PostgreSQL %s", v[COL_VERSION]), versions,
				  "Update the servers to the same minor release.");
	else
		MakeCheck(checks, "postgresql_version", NODE_CHECK_OK, NULL,
				  psprintf("PostgreSQL %s.", v[COL_VERSION]), NULL);

	if (strstr(v[COL_PRELOAD], SHARDEXT_EXTENSION_NAME) == NULL)
		MakeCheck(checks, "shardext_library", NODE_CHECK_ERROR,
				  "shardext is not preloaded on the node",
				  psprintf("shared_preload_libraries is '%s'.", v[COL_PRELOAD]),
				  "Add shardext to shared_preload_libraries and restart the node.");
	else if (v[COL_LIBRARY] == NULL || strcmp(v[COL_LIBRARY], SHARDEXT_LIBRARY_VERSION) != 0)
		MakeCheck(checks, "shardext_library", NODE_CHECK_ERROR,
				  psprintf("the node runs shardext %s, the coordinator %s",
						   v[COL_LIBRARY] ? v[COL_LIBRARY] : "1.0", SHARDEXT_LIBRARY_VERSION),
				  psprintf("The node loaded the library of shardext %s.",
						   v[COL_LIBRARY] ? v[COL_LIBRARY] : "1.0"),
				  "Install the same shardext package on every node and restart the node.");
	else
		MakeCheck(checks, "shardext_library", NODE_CHECK_OK, NULL,
				  psprintf("The library of shardext %s is loaded.", v[COL_LIBRARY]), NULL);

	if (v[COL_EXTENSION] == NULL || installed == NULL ||
		strcmp(v[COL_EXTENSION], installed) != 0)
		MakeCheck(checks, "shardext_extension", NODE_CHECK_ERROR,
				  psprintf("extension shardext is at version %s on the node, %s on the coordinator",
						   v[COL_EXTENSION] ? v[COL_EXTENSION] : "(none)",
						   installed ? installed : "(none)"),
				  psprintf("The node's database has extension shardext %s, the coordinator's %s.",
						   v[COL_EXTENSION] ? v[COL_EXTENSION] : "(none)",
						   installed ? installed : "(none)"),
				  "Run ALTER EXTENSION shardext UPDATE in the database on the coordinator "
				  "and on every node.");
	else
		MakeCheck(checks, "shardext_extension", NODE_CHECK_OK, NULL,
				  psprintf("Extension shardext %s.", v[COL_EXTENSION]), NULL);
}

/*
 * CheckPreparedTransactions: every transaction that writes on several
 * nodes prepares on each of them (two-phase commit), one prepared
 * transaction per connection to the node.
 */
static void
CheckPreparedTransactions(List **checks, NodeSettings *settings)
{
	int			prepared = atoi(settings->values[COL_PREPARED]);
	int			connections = atoi(settings->values[COL_CONNECTIONS]);
	char	   *detail = psprintf("max_prepared_transactions is %d, max_connections %d.",
								  prepared, connections);

	if (prepared == 0)
		MakeCheck(checks, "max_prepared_transactions", NODE_CHECK_ERROR,
				  "max_prepared_transactions is 0 on the node",
				  psprintf("%s Every transaction that writes on several nodes would fail at "
						   "PREPARE TRANSACTION.", detail),
				  "Set max_prepared_transactions to max_connections or more and restart the node.");
	else if (prepared < connections)
		MakeCheck(checks, "max_prepared_transactions", NODE_CHECK_WARNING,
				  "max_prepared_transactions is below max_connections on the node",
				  psprintf("%s Multi-node commits fail when more of them prepare at once.", detail),
				  "Set max_prepared_transactions to max_connections or more and restart the node.");
	else
		MakeCheck(checks, "max_prepared_transactions", NODE_CHECK_OK, NULL, detail, NULL);
}

/*
 * CheckReplication: online moves and splits use logical replication from
 * the node (a slot and a WAL sender each).
 */
static void
CheckReplication(List **checks, NodeSettings *settings)
{
	char	  **v = settings->values;
	int			freeSlots = Max(atoi(v[COL_SLOTS]) - atoi(v[COL_SLOTS_USED]), 0);
	int			freeSenders = Max(atoi(v[COL_SENDERS]) - atoi(v[COL_SENDERS_USED]), 0);
	const char *hint = "Raise it in the node's postgresql.conf and restart the node.";
	char	   *detail;

	detail = psprintf("wal_level is %s.", v[COL_WAL_LEVEL]);
	if (strcmp(v[COL_WAL_LEVEL], "logical") != 0)
		MakeCheck(checks, "wal_level", NODE_CHECK_WARNING, "wal_level is not logical on the node",
				  psprintf("%s Online shard moves and splits need logical.", detail),
				  "Set wal_level = logical in the node's postgresql.conf and restart the node.");
	else
		MakeCheck(checks, "wal_level", NODE_CHECK_OK, NULL, detail, NULL);

	detail = psprintf("%d of max_replication_slots = %s are free.", freeSlots, v[COL_SLOTS]);
	if (freeSlots < 2)
		MakeCheck(checks, "max_replication_slots", NODE_CHECK_WARNING,
				  "fewer than 2 replication slots are free on the node",
				  psprintf("%s Every online move or split from the node needs one.", detail), hint);
	else
		MakeCheck(checks, "max_replication_slots", NODE_CHECK_OK, NULL, detail, NULL);

	detail = psprintf("%d of max_wal_senders = %s are free.", freeSenders, v[COL_SENDERS]);
	if (freeSenders < 2)
		MakeCheck(checks, "max_wal_senders", NODE_CHECK_WARNING,
				  "fewer than 2 WAL senders are free on the node",
				  psprintf("%s Every online move or split from the node needs one.", detail), hint);
	else
		MakeCheck(checks, "max_wal_senders", NODE_CHECK_OK, NULL, detail, NULL);
}

/*
 * CheckWorkersRolesAndClock: background worker slots, the roles that use
 * distributed tables, and the node's clock.
 */
static void
CheckWorkersRolesAndClock(List **checks, NodeSettings *settings)
{
	char	  **v = settings->values;
	int			workers = atoi(v[COL_WORKERS]);
	int			replicationWorkers = atoi(v[COL_REPLICATION_WORKERS]);
	double		skew = fabs(settings->clockSkewMs) - settings->clockUncertaintyMs;
	char	   *detail;

	detail = psprintf("max_worker_processes is %d, max_logical_replication_workers %d.",
					  workers, replicationWorkers);
	if (workers < replicationWorkers + 2)
		MakeCheck(checks, "max_worker_processes", NODE_CHECK_WARNING,
				  "max_worker_processes is low on the node",
				  psprintf("%s The maintenance daemon of each database with shardext and the "
						   "replication workers of shard moves need background worker slots.",
						   detail),
				  "Set max_worker_processes to max_logical_replication_workers + 2 or more "
				  "and restart the node.");
	else
		MakeCheck(checks, "max_worker_processes", NODE_CHECK_OK, NULL, detail, NULL);

	if (v[COL_MISSING_ROLES] != NULL)
		MakeCheck(checks, "roles", NODE_CHECK_WARNING, "roles are missing on the node",
				  psprintf("Roles that own or have privileges on distributed tables do not "
						   "exist on the node: %s.", v[COL_MISSING_ROLES]),
				  "Statements run on the nodes as the user who runs them on the coordinator: "
				  "create the roles on every node.");
	else
		MakeCheck(checks, "roles", NODE_CHECK_OK, NULL,
				  "The current user and every role that owns or has privileges on distributed "
				  "tables exist.", NULL);

	detail = psprintf("The node's clock is %.0f ms %s the coordinator's (+/- %.0f ms).",
					  fabs(settings->clockSkewMs),
					  settings->clockSkewMs >= 0 ? "ahead of" : "behind",
					  settings->clockUncertaintyMs);
	if (skew > ShardextSnowflakeMaxClockSkew)
		MakeCheck(checks, "clock_skew", NODE_CHECK_WARNING,
				  psprintf("the node's clock is off by more than "
						   "shardext.snowflake_max_clock_skew (%d ms)",
						   ShardextSnowflakeMaxClockSkew),
				  psprintf("%s Snowflake ids of different nodes are not ordered by time.", detail),
				  "Synchronise the clocks of the servers (NTP).");
	else
		MakeCheck(checks, "clock_skew", NODE_CHECK_OK, NULL, detail, NULL);
}

/*
 * CheckRecovery: a worker takes writes, so it must not be a standby; a
 * read replica must still be one (promoted outside shardext it would drift
 * away from its primary while reads are routed to it).
 */
static void
CheckRecovery(List **checks, NodeSettings *settings, bool replica)
{
	bool		inRecovery = strcmp(settings->values[COL_IN_RECOVERY], "true") == 0;

	if (replica && !inRecovery)
		MakeCheck(checks, "recovery", NODE_CHECK_ERROR,
				  "the read replica is not in recovery",
				  "The node is registered as a read replica but accepts writes: it was "
				  "promoted without shardext_promote_replica().",
				  "Remove it with shardext_remove_replica() or register it again as a "
				  "standby of its primary.");
	else if (!replica && inRecovery)
		MakeCheck(checks, "recovery", NODE_CHECK_ERROR, "the node is a standby server",
				  "The node is in recovery and cannot take writes.",
				  "Register standbys with shardext_add_replica(), not as workers.");
	else
		MakeCheck(checks, "recovery", NODE_CHECK_OK, NULL,
				  replica ? "The read replica is a standby in recovery." :
				  "The node is not in recovery.", NULL);
}

/*
 * CheckFencing checks that a worker's address reaches the server the
 * catalog records for it (fencing.c), and reports the old primary that a
 * failover replaced as long as it has not been rebuilt as a standby.
 */
static void
CheckFencing(List **checks, WorkerNode *node, NodeConnection *conn, NodeSettings *settings)
{
	bool		inRecovery = strcmp(settings->values[COL_IN_RECOVERY], "true") == 0;
	ServerIdentity identity;
	bool		reported = ReportedServerIdentity(conn, &identity);

	if (node->needsRebuild && !inRecovery)
		MakeCheck(checks, "fencing", NODE_CHECK_ERROR,
				  "an old primary that a failover replaced accepts writes",
				  psprintf("The server was node %d's primary until a failover; the cluster "
						   "refuses it and sends it nothing.", node->primaryNodeId),
				  "Rebuild it as a standby of the node's primary (pg_rewind or "
				  "pg_basebackup), then run shardext_add_replica() for it.");
	else if (node->needsRebuild)
		MakeCheck(checks, "fencing", NODE_CHECK_WARNING,
				  "an old primary that a failover replaced is a standby now",
				  "It is not used until it is registered again.",
				  "Run shardext_add_replica() for it.");
	else if (!NodeIsReplica(node) && reported && !NodeIdentityMatches(node, &identity))
		MakeCheck(checks, "fencing", NODE_CHECK_ERROR,
				  "the node's address reaches another server than the node's",
				  psprintf("The server reports %s; node %d runs on system " UINT64_FORMAT
						   ", timeline %u. Connections to it are refused.",
						   DescribeServerIdentity(&identity), node->nodeId, node->systemId,
						   node->timeline),
				  "Rebuild it as a standby of the node's primary; if it rightly took the "
				  "node over, run shardext_update_node() for it.");
	else if (!NodeIsReplica(node))
		MakeCheck(checks, "fencing", NODE_CHECK_OK, NULL,
				  node->systemId == 0 ?
				  pstrdup("The node's identity is not recorded yet.") :
				  psprintf("The server is the node's: system " UINT64_FORMAT ", timeline %u.",
						   node->systemId, node->timeline),
				  NULL);
}

/* CoordinatorChecks: the checks that concern the coordinator itself */
static List *
CoordinatorChecks(void)
{
	List	   *checks = NIL;
	char	   *installed = InstalledShardextVersion();
	int			replicationWorkers = atoi(GetConfigOption("max_logical_replication_workers",
														  false, false));
	char	   *detail;

	detail = psprintf("The library is shardext %s, the extension in this database %s.",
					  SHARDEXT_LIBRARY_VERSION, installed ? installed : "(none)");
	MakeCheck(&checks, "shardext_extension",
			  installed && strcmp(installed, SHARDEXT_LIBRARY_VERSION) == 0 ?
			  NODE_CHECK_OK : NODE_CHECK_ERROR, NULL, detail, NULL);

	detail = psprintf("max_worker_processes is %d, max_logical_replication_workers %d.",
					  max_worker_processes, replicationWorkers);
	MakeCheck(&checks, "max_worker_processes",
			  max_worker_processes >= replicationWorkers + 2 ? NODE_CHECK_OK : NODE_CHECK_WARNING,
			  NULL, detail, NULL);
	return checks;
}

/*
 * RolesUsingDistributedTables lists the roles that must exist on every
 * node: the current user, and the owners and grantees of distributed and
 * reference tables (their statements run on the nodes as themselves).
 */
static List *
RolesUsingDistributedTables(void)
{
	List	   *roles = NIL;
	MemoryContext callerContext = CurrentMemoryContext;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute("SELECT DISTINCT r.rolname::pg_catalog.text "
					"FROM pg_catalog.pg_roles r "
					"WHERE r.rolname = CURRENT_USER OR r.oid IN ("
					"  SELECT c.relowner FROM shardext.dist_table d "
					"  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.logicalrelid "
					"  UNION "
					"  SELECT (pg_catalog.aclexplode(c.relacl)).grantee FROM shardext.dist_table d "
					"  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.logicalrelid) "
					"ORDER BY 1", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not list the roles of distributed tables");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		MemoryContext oldContext = MemoryContextSwitchTo(callerContext);

		roles = lappend(roles, pstrdup(name));
		MemoryContextSwitchTo(oldContext);
	}
	SPI_finish();
	return roles;
}

static const char *
StatusName(NodeCheckStatus status)
{
	switch (status)
	{
		case NODE_CHECK_OK:
			return "ok";
		case NODE_CHECK_WARNING:
			return "warning";
		case NODE_CHECK_ERROR:
			return "error";
	}
	return "error";				/* keep compiler quiet */
}
