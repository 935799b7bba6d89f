/*-------------------------------------------------------------------------
 *
 * replica_management.c
 *	  Registering read replicas, promoting one to primary, and repointing
 *	  a node after a promotion done elsewhere.
 *
 * A read replica is a physical streaming standby of a worker, recorded as
 * a row of shardext.node with primary_nodeid set: it has a node id of its
 * own (connections to it are cached like any node's) and never holds
 * placements.
 *
 * Promotion (shardext_promote_replica) keeps the node id: the promoted
 * server takes over the address in the node's row, so placements, commit
 * records and everything else that names the node stay as they are.  The
 * old primary's address moves into the replica's row, which stays as an
 * inactive replica record: the old primary must be rebuilt as a standby of
 * the new one (pg_basebackup, or pg_rewind) before shardext_add_replica()
 * activates it again.  Every other replica of the node is deactivated too:
 * it streams from the old primary, and with asynchronous replication it may
 * even have replayed commits the promoted server never received.  Point
 * each at the new primary (primary_conninfo) or rebuild it, then run
 * shardext_add_replica() for it again.
 *
 * pg_promote cannot be part of a transaction: if the catalog change fails
 * after the promotion, run the function again (a replica that is no longer
 * in recovery is taken as promoted) or use shardext_update_node().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "shardext/connection.h"
#include "shardext/failover.h"
#include "shardext/fencing.h"
#include "shardext/maintenance.h"
#include "shardext/metadata.h"
#include "shardext/operations.h"
#include "shardext/privileges.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"
#include "shardext/replica_state.h"

/* how long one query on a node may take, recovery conflicts retried */
#define STANDBY_QUERY_TIMEOUT_MS 30000
/* how often a promotion in progress is looked at */
#define PROMOTION_POLL_MS 50

PG_FUNCTION_INFO_V1(shardext_add_replica);
PG_FUNCTION_INFO_V1(shardext_remove_replica);
PG_FUNCTION_INFO_V1(shardext_promote_replica);
PG_FUNCTION_INFO_V1(shardext_update_node);
PG_FUNCTION_INFO_V1(shardext_replica_status);

static void CheckPort(int32 port);
static char *RemoteValue(NodeConnection *conn, const char *query);
static void CheckReplicaOf(NodeConnection *replica, const char *host, int32 port,
						   WorkerNode *primary);
static void CheckHoldsNode(NodeConnection *conn, const char *host, int32 port, int32 nodeId);
static void CheckPrimaryStopped(WorkerNode *primary);
static void PromoteServer(NodeConnection *conn, WorkerNode *primary, const char *host,
						  int32 port, int waitSeconds);
static void CheckPromotedEarlier(NodeConnection *conn, WorkerNode *primary, const char *host,
								 int32 port);
static bool ServerInHotStandby(NodeConnection *conn);
static void TakeOverNode(WorkerNode *node, WorkerNode *replica, NodeConnection *conn);
static void RepointNode(WorkerNode *node, const char *host, int32 port,
						NodeConnection *conn);
static void CheckNotOldPrimary(NodeConnection *conn, WorkerNode *node, const char *host,
							   int32 port);
static void ResolvePreparedTransactions(void);

static void
CheckPort(int32 port)
{
	if (port < 1 || port > 65535)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("port %d is out of range", port),
				 errhint("A port is between 1 and 65535.")));
}

/*
 * RemoteValue runs a one-value query (NULL for a NULL value) within
 * STANDBY_QUERY_TIMEOUT_MS.  The servers asked here are often standbys
 * that replay WAL, which cancels queries it conflicts with: those run
 * again (ExecuteStandbyScalar), so that no step depends on the standby's
 * hot_standby_feedback.
 */
static char *
RemoteValue(NodeConnection *conn, const char *query)
{
	return ExecuteStandbyScalar(conn, query,
								TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															STANDBY_QUERY_TIMEOUT_MS));
}

/*
 * shardext_add_replica(host, port, primary_host, primary_port) registers a
 * streaming standby of a registered worker as its read replica and returns
 * its node id; for a replica already registered, its id (an inactive one is
 * checked again and activated).
 */
Datum
shardext_add_replica(PG_FUNCTION_ARGS)
{
	char	   *host = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int32		port = PG_GETARG_INT32(1);
	char	   *primaryHost = text_to_cstring(PG_GETARG_TEXT_PP(2));
	int32		primaryPort = PG_GETARG_INT32(3);
	WorkerNode *primary;
	WorkerNode *existing;
	NodeConnection *conn;
	int32		nodeId;

	EnsureAdminAndShardext("shardext_add_replica");
	CheckPort(port);
	CheckPort(primaryPort);
	LockRelationOid(ShardextCatalogRelid("node"), ShareRowExclusiveLock);

	primary = FindWorkerNode(primaryHost, primaryPort);
	if (primary == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("node %s:%d is not registered", primaryHost, primaryPort),
				 errhint("A replica's primary is a worker registered with shardext_add_node().")));
	if (NodeIsReplica(primary))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("node %s:%d is itself a read replica", primaryHost, primaryPort),
				 errhint("Name the worker the standby replicates.")));

	existing = FindWorkerNode(host, port);
	if (existing != NULL && !NodeIsReplica(existing))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("node %s:%d is registered as a worker node", host, port)));
	if (existing != NULL && existing->primaryNodeId != primary->nodeId)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("node %s:%d is already a read replica of node %d",
						host, port, existing->primaryNodeId),
				 errhint("Remove it with shardext_remove_replica() first.")));
	if (existing != NULL && existing->active)
		PG_RETURN_INT32(existing->nodeId);

	conn = OpenDedicatedConnection(host, port, false, true);
	PG_TRY();
	{
		CheckReplicaOf(conn, host, port, primary);
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(conn);
	}
	PG_END_TRY();

	if (existing != NULL)
	{
		/* an old primary that was rebuilt as a standby is a replica again */
		nodeId = existing->nodeId;
		SetNodeActive(nodeId, true);
		if (existing->needsRebuild)
			SetNodeNeedsRebuild(nodeId, false);
	}
	else
		nodeId = InsertReplicaNode(host, port, primary->nodeId);
	/* the daemon polls the replica: reads use it from its first poll on */
	EnsureMaintenanceDaemon();
	PG_RETURN_INT32(nodeId);
}

/*
 * CheckReplicaOf errors out unless the server on conn runs the
 * coordinator's major version of PostgreSQL and is a standby of the
 * primary's system serving this coordinator database's copy of that node,
 * with shardext preloaded, and not ahead of the primary.
 */
static void
CheckReplicaOf(NodeConnection *replica, const char *host, int32 port, WorkerNode *primary)
{
	const char *systemIdQuery = "SELECT system_identifier::text FROM pg_catalog.pg_control_system()";
	NodeConnection *primaryConn;
	char	   *value;
	char	   *primarySystemId;
	char	   *primaryLsn;
	char	   *replayLsn;

	CheckSameMajorVersion(replica, host, port);
	value = RemoteValue(replica, "SELECT pg_catalog.pg_is_in_recovery()::text");
	if (value == NULL || strcmp(value, "true") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node %s:%d is not a standby", host, port),
				 errdetail("A read replica is a physical streaming standby of its worker, "
						   "in recovery."),
				 errhint("Create one with pg_basebackup -R from the worker.")));

	/* the replica's position first: it cannot pass what the primary has after */
	replayLsn = RemoteValue(replica, "SELECT pg_catalog.pg_last_wal_replay_lsn()::text");
	primaryConn = OpenDedicatedConnection(primary->host, primary->port, false, true);
	PG_TRY();
	{
		primarySystemId = RemoteValue(primaryConn, systemIdQuery);
		primaryLsn = RemoteValue(primaryConn,
								 "SELECT pg_catalog.pg_current_wal_insert_lsn()::text");
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(primaryConn);
	}
	PG_END_TRY();

	value = RemoteValue(replica, systemIdQuery);
	if (value == NULL || primarySystemId == NULL || strcmp(value, primarySystemId) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("node %s:%d is not a standby of node %s:%d", host, port,
						primary->host, primary->port),
				 errdetail("Its system identifier is %s, the node's is %s.",
						   value ? value : "unknown",
						   primarySystemId ? primarySystemId : "unknown")));

	value = RemoteValue(replica, "SELECT extversion FROM pg_catalog.pg_extension "
						"WHERE extname = 'shardext'");
	if (value == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shardext is not installed on node %s:%d", host, port)));
	value = RemoteValue(replica, "SELECT 'shardext' = ANY (string_to_array(replace("
						"current_setting('shared_preload_libraries'), ' ', ''), ','))::text");
	if (value == NULL || strcmp(value, "true") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shardext is not preloaded on node %s:%d", host, port),
				 errhint("Add shardext to shared_preload_libraries on the standby and "
						 "restart it.")));
	CheckHoldsNode(replica, host, port, primary->nodeId);

	value = primaryLsn == NULL || replayLsn == NULL ? NULL :
		RemoteValue(replica, psprintf("SELECT (%s::pg_lsn > %s::pg_lsn)::text",
									  quote_literal_cstr(replayLsn),
									  quote_literal_cstr(primaryLsn)));
	if (value != NULL && strcmp(value, "true") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node %s:%d has replayed WAL that node %s:%d does not have",
						host, port, primary->host, primary->port),
				 errdetail("It follows another server, or it diverged in a failover."),
				 errhint("Rebuild it as a standby of the node (pg_basebackup or pg_rewind).")));
}

/*
 * CheckHoldsNode errors out unless the server's database is this
 * coordinator database's node nodeId (shardext.local_identity, which a
 * standby or promoted standby has from its primary).
 */
static void
CheckHoldsNode(NodeConnection *conn, const char *host, int32 port, int32 nodeId)
{
	char	   *expected = psprintf(UINT64_FORMAT ":%u/%d", GetSystemIdentifier(),
									MyDatabaseId, nodeId);
	char	   *value = RemoteValue(conn, "SELECT coordinator_id || '/' || node_id "
									"FROM shardext.local_identity");

	if (value == NULL || strcmp(value, expected) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("node %s:%d does not hold the data of node %d of this coordinator",
						host, port, nodeId),
				 errdetail("Its database serves %s, not %s.", value ? value : "no coordinator",
						   expected)));
}

/* shardext_remove_replica(host, port) unregisters a read replica */
Datum
shardext_remove_replica(PG_FUNCTION_ARGS)
{
	char	   *host = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int32		port = PG_GETARG_INT32(1);
	WorkerNode *node;

	EnsureAdminAndShardext("shardext_remove_replica");
	LockRelationOid(ShardextCatalogRelid("node"), ShareRowExclusiveLock);
	node = FindWorkerNode(host, port);
	if (node == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("node %s:%d is not registered", host, port)));
	if (!NodeIsReplica(node))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("node %s:%d is not a read replica", host, port),
				 errhint("Remove worker nodes with shardext_remove_node().")));
	DeleteWorkerNode(node->nodeId);
	PG_RETURN_VOID();
}

/*
 * shardext_promote_replica(host, port, wait_seconds) promotes a read
 * replica, waits until it accepts writes, and makes it the primary of its
 * node (see the file header); returns the node id.
 */
Datum
shardext_promote_replica(PG_FUNCTION_ARGS)
{
	char	   *host = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int32		port = PG_GETARG_INT32(1);
	int32		waitSeconds = PG_GETARG_INT32(2);
	WorkerNode *replica;

	EnsureAdminAndShardext("shardext_promote_replica");
	if (waitSeconds < 1 || waitSeconds > 3600)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wait_seconds must be between 1 and 3600, not %d", waitSeconds)));
	LockRelationOid(ShardextCatalogRelid("node"), ShareRowExclusiveLock);
	replica = FindWorkerNode(host, port);
	if (replica == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("node %s:%d is not registered", host, port)));
	if (!NodeIsReplica(replica))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("node %s:%d is a primary, not a read replica", host, port),
				 errhint("Promote one of its replicas (shardext.nodes lists them).")));
	PG_RETURN_INT32(PromoteReplicaNode(replica, waitSeconds));
}

/*
 * PromoteReplicaNode promotes a registered read replica and makes it the
 * primary of its node, for shardext_promote_replica and automatic failover
 * (failover.c): it refuses while the node's primary still accepts writes,
 * checks that the standby holds the node, promotes it, and then the replica
 * takes the node over (TakeOverNode).  The caller holds
 * ShareRowExclusiveLock on shardext.node.  Returns the node id.
 */
int32
PromoteReplicaNode(WorkerNode *replica, int waitSeconds)
{
	WorkerNode *primary = GetWorkerNode(replica->primaryNodeId);
	char	   *host = pstrdup(replica->host);
	int32		port = replica->port;
	NodeConnection *conn;

	if (replica->needsRebuild)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node %s:%d is an old primary of node %d that a failover replaced",
						host, port, primary->nodeId),
				 errdetail("Its data may lack what the node committed since."),
				 errhint("Rebuild it as a standby of the node's primary and run "
						 "shardext_add_replica() for it first.")));
	CheckPrimaryStopped(primary);

	conn = OpenDedicatedConnection(host, port, false, true);
	PG_TRY();
	{
		CheckHoldsNode(conn, host, port, primary->nodeId);
		PromoteServer(conn, primary, host, port, waitSeconds);
		TakeOverNode(primary, replica, conn);
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(conn);
	}
	PG_END_TRY();
	ResolvePreparedTransactions();
	return primary->nodeId;
}

/*
 * CheckPrimaryStopped refuses to promote while the node's primary still
 * accepts writes: both servers would, and writes to the old one would be
 * lost.
 */
static void
CheckPrimaryStopped(WorkerNode *primary)
{
	NodeConnection *conn = OpenDedicatedConnectionWithTimeout(primary->host, primary->port,
															  1000);
	PGresult   *result;
	bool		writable;

	if (conn == NULL)
		return;
	result = TryRemoteQueryNoInterrupts(conn, "SELECT NOT pg_catalog.pg_is_in_recovery()",
										5000);
	writable = result != NULL && PQntuples(result) == 1 &&
		strcmp(PQgetvalue(result, 0, 0), "t") == 0;
	PQclear(result);
	CloseDedicatedConnection(conn);
	if (writable)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("node %d still runs on %s:%d", primary->nodeId, primary->host,
						primary->port),
				 errdetail("Promoting a replica while its primary accepts writes would let "
						   "both accept them."),
				 errhint("Stop the primary first.")));
}

/*
 * PromoteServer promotes the standby on conn and waits until it accepts
 * writes; a server already out of recovery counts as promoted when it is on
 * a later timeline than the node's primary (CheckPromotedEarlier).  Only
 * pg_promote itself takes a snapshot, for a moment (it does not wait: a
 * query waiting for the promotion would hold its snapshot while the
 * standby replays the rest of its WAL, which cancels it for a recovery
 * conflict when it removes row versions the snapshot might see); the
 * waiting polls SHOW in_hot_standby, which takes none.
 */
static void
PromoteServer(NodeConnection *conn, WorkerNode *primary, const char *host, int32 port,
			  int waitSeconds)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   waitSeconds * 1000L);
	char	   *value;

	if (!ServerInHotStandby(conn))
	{
		CheckPromotedEarlier(conn, primary, host, port);
		ereport(NOTICE,
				(errmsg("node %s:%d is not in recovery any more: taking it as promoted",
						host, port)));
		return;
	}
	value = ExecuteStandbyScalar(conn, "SELECT pg_catalog.pg_promote(false)::text", deadline);
	if (value == NULL || strcmp(value, "true") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node %s:%d could not be promoted", host, port),
				 errhint("Look at the server's log.")));
	while (ServerInHotStandby(conn))
	{
		if (GetCurrentTimestamp() >= deadline)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("node %s:%d did not finish its promotion within %d seconds",
							host, port, waitSeconds),
					 errhint("Look at the server's log; once it accepts writes, run "
							 "shardext_promote_replica() again.")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 PROMOTION_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * CheckPromotedEarlier errors out unless a replica that is out of recovery
 * is on a later timeline than the one recorded for the node's primary: a
 * promotion that went through before (a catalog change that failed after
 * it) starts a new timeline, while a server that merely is not a standby
 * (an old primary, another node's server) could hold anything.
 */
static void
CheckPromotedEarlier(NodeConnection *conn, WorkerNode *primary, const char *host, int32 port)
{
	ServerIdentity identity;

	if (primary->systemId == 0)
		return;
	if (!ParseServerIdentity(RemoteValue(conn, "SELECT pg_catalog.current_setting("
										 "'shardext.server_identity', true)"), &identity) ||
		identity.systemId != primary->systemId || identity.timeline <= primary->timeline)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node %s:%d is not in recovery, and no promotion of it replaced node %d",
						host, port, primary->nodeId),
				 errdetail("It reports %s; the node ran on timeline %u.",
						   DescribeServerIdentity(&identity), primary->timeline),
				 errhint("Promote a standby of the node.")));
}

/*
 * ServerInHotStandby tells whether the server on conn is (still) a hot
 * standby.  SHOW takes no snapshot, so replay never cancels it.  A backend
 * notices the end of recovery when it finishes a command, so right after a
 * promotion one more poll may still say "on".
 */
static bool
ServerInHotStandby(NodeConnection *conn)
{
	char	   *value = RemoteValue(conn, "SHOW in_hot_standby");

	return value != NULL && strcmp(value, "on") == 0;
}

/*
 * TakeOverNode makes the (promoted) replica, whose server is on conn, the
 * primary of the node: the two rows exchange addresses, so the node id and
 * its placements stay; the node records the server's identity, so that
 * connections refuse the old primary from now on (fencing.c), and the row
 * that now names the old primary is marked as needing a rebuild; it and
 * every other replica of the node are deactivated.  The caller then
 * resolves the in-doubt prepared transactions on the new primary
 * (ResolvePreparedTransactions).
 */
static void
TakeOverNode(WorkerNode *node, WorkerNode *replica, NodeConnection *conn)
{
	int32		nodeId = node->nodeId;
	int32		replicaId = replica->nodeId;
	char	   *oldHost = pstrdup(node->host);
	int32		oldPort = node->port;
	char	   *newHost = pstrdup(replica->host);
	int32		newPort = replica->port;
	int			others = list_length(ReplicaNodeList(nodeId, true)) - (replica->active ? 1 : 0);

	SwapNodeAddresses(nodeId, replicaId);
	DeactivateReplicasOf(nodeId);
	SetNodeNeedsRebuild(replicaId, true);
	RecordServerIdentity(nodeId, conn);
	CommandCounterIncrement();
	ereport(NOTICE,
			(errmsg("node %d now runs on %s:%d", nodeId, newHost, newPort),
			 errdetail("The old primary %s:%d is recorded as inactive replica %d, which needs "
					   "a rebuild; %d other replicas of the node were deactivated.",
					   oldHost, oldPort, replicaId, others),
			 errhint("Rebuild the old primary as a standby of the new one, point the other "
					 "replicas at it, and run shardext_add_replica() for each.")));
}

/*
 * ResolvePreparedTransactions runs 2PC recovery now, so that transactions
 * prepared on a node's new server are committed or rolled back by their
 * commit records without waiting for the maintenance daemon.
 */
static void
ResolvePreparedTransactions(void)
{
	int			resolved;

	AcceptInvalidationMessages();
	resolved = RecoverShardextPreparedTransactions(false);
	if (resolved > 0)
		ereport(NOTICE,
				(errmsg("resolved %d prepared transactions", resolved)));
}

/*
 * shardext_update_node(node_id, host, port) points a worker node at
 * another server: the standby that an external tool (Patroni and the like)
 * promoted.  The server must accept writes and hold the node's data; its
 * identity becomes the node's (fencing.c).  Called with the node's own
 * address, it accepts the server there as the node's (after a restore from
 * backups, which starts a new timeline).  When the identity changes, the
 * node's replicas are deactivated (see the file header).
 */
Datum
shardext_update_node(PG_FUNCTION_ARGS)
{
	int32		nodeId = PG_GETARG_INT32(0);
	char	   *host = text_to_cstring(PG_GETARG_TEXT_PP(1));
	int32		port = PG_GETARG_INT32(2);
	WorkerNode *node;
	WorkerNode *other = NULL;
	bool		sameAddress;
	bool		identityCheck;
	NodeConnection *volatile conn = NULL;

	EnsureAdminAndShardext("shardext_update_node");
	CheckPort(port);
	LockRelationOid(ShardextCatalogRelid("node"), ShareRowExclusiveLock);
	node = LookupWorkerNode(nodeId);
	if (node == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("node with id %d does not exist", nodeId),
				 errhint("shardext.nodes lists the nodes.")));
	if (NodeIsReplica(node))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("node %d is a read replica", nodeId),
				 errhint("Remove it and add the replica again with its new address.")));
	sameAddress = node->port == port && strcmp(node->host, host) == 0;
	if (!sameAddress)
		other = FindWorkerNode(host, port);
	if (other != NULL && other->primaryNodeId != nodeId)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("node %s:%d is registered as node %d", host, port, other->nodeId)));

	/* look at whatever runs there: the node may record another server */
	identityCheck = SetNodeIdentityCheck(false);
	PG_TRY();
	{
		conn = OpenDedicatedConnection(host, port, false, true);
		CheckSameMajorVersion(conn, host, port);
		if (ServerInHotStandby(conn))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("node %s:%d is a standby", host, port),
					 errhint("Point the node at the server once it was promoted.")));
		CheckHoldsNode(conn, host, port, nodeId);
		CheckNotOldPrimary(conn, node, host, port);
		if (other != NULL)
			TakeOverNode(node, other, conn);
		else
			RepointNode(node, host, port, conn);
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(conn);
		SetNodeIdentityCheck(identityCheck);
	}
	PG_END_TRY();
	ResolvePreparedTransactions();
	PG_RETURN_VOID();
}

/*
 * CheckNotOldPrimary refuses a server of the node's system on an earlier
 * timeline than the node's: an old primary that a failover replaced, which
 * lacks what the node committed since.  (A server restored from a backup,
 * or promoted by another tool, is on a later timeline; one of another
 * system holds the node's data by a copy, which CheckHoldsNode checked.)
 */
static void
CheckNotOldPrimary(NodeConnection *conn, WorkerNode *node, const char *host, int32 port)
{
	ServerIdentity identity;

	if (!ReportedServerIdentity(conn, &identity) || identity.systemId != node->systemId ||
		identity.timeline >= node->timeline)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("server %s:%d is an old primary of node %d", host, port, node->nodeId),
			 errdetail("It reports %s; the node runs on timeline %u since a failover.",
					   DescribeServerIdentity(&identity), node->timeline),
			 errhint("Rebuild it as a standby of the node's primary.")));
}

/*
 * RepointNode makes the node run on the server at host:port (on conn),
 * which holds its data and accepts writes: address and identity; a new
 * identity deactivates the node's replicas, which follow another history.
 */
static void
RepointNode(WorkerNode *node, const char *host, int32 port, NodeConnection *conn)
{
	int32		nodeId = node->nodeId;
	ServerIdentity before = {node->systemId, node->timeline};

	if (node->port != port || strcmp(node->host, host) != 0)
		UpdateNodeAddress(nodeId, host, port);
	RecordServerIdentity(nodeId, conn);
	CommandCounterIncrement();
	node = GetWorkerNode(nodeId);
	if (node->systemId != before.systemId || node->timeline != before.timeline)
		DeactivateReplicasOf(nodeId);
	CommandCounterIncrement();
}

/*
 * shardext.replica_status() returns what the maintenance daemon last saw
 * of each node with replicas and of each replica (shared memory), with the
 * read counters: the rows behind shardext.stat_replicas and the lag column
 * of shardext.nodes.
 */
Datum
shardext_replica_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *cell;

	InitMaterializedSRF(fcinfo, 0);
	foreach(cell, ReplicaStatusRows())
	{
		ReplicaStatusRow *row = lfirst(cell);
		Datum		values[9];
		bool		nulls[9] = {false};

		values[0] = Int32GetDatum(row->nodeId);
		nulls[1] = row->primaryNodeId == 0;
		values[1] = Int32GetDatum(row->primaryNodeId);
		values[2] = BoolGetDatum(row->healthy);
		nulls[3] = XLogRecPtrIsInvalid(row->lsn);
		values[3] = LSNGetDatum(row->lsn);
		/* how old the replica's data may be: unknown when never measured */
		nulls[4] = row->primaryNodeId == 0 || row->freshAsOf == 0;
		if (!nulls[4])
		{
			Interval   *lag = palloc0(sizeof(Interval));

			lag->time = Max(now - row->freshAsOf, 0);
			values[4] = IntervalPGetDatum(lag);
		}
		nulls[5] = row->sampleTime == 0;
		values[5] = TimestampTzGetDatum(row->sampleTime);
		values[6] = Int64GetDatum((int64) row->replicaReads);
		values[7] = Int64GetDatum((int64) row->fallbacks);
		values[8] = Int64GetDatum((int64) row->primaryReads);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
