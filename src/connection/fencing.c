/*-------------------------------------------------------------------------
 *
 * fencing.c
 *	  Fencing old primaries: every new connection to a worker checks that
 *	  the server behind the address is the one the catalog records for
 *	  the node.
 *
 * Every server with shardext reports "<system identifier>/<timeline>" in
 * the reported setting shardext.server_identity: PostgreSQL sends it in
 * the ParameterStatus messages at the start of every connection, so the
 * check costs no round trip.  The catalog records the identity of each
 * worker's primary when it is added, when a replica takes the node over
 * (shardext_promote_replica, automatic failover) and when
 * shardext_update_node() points the node at a server.  A promotion starts
 * a new timeline, so an old primary -- one that a failover replaced and
 * that comes back, or that was only cut off by the network -- reports an
 * older timeline than the catalog: connections to it are refused
 * (SQLSTATE 08004) and it never receives another write from the cluster.
 * The maintenance daemon reports such a server (node_health.c) and
 * shardext_check_cluster() says it needs a rebuild.
 *
 * A node without a recorded identity (catalogs of 1.1, until the daemon
 * records it) and a server whose library does not report one are not
 * checked.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "shardext/connection.h"
#include "shardext/fencing.h"
#include "shardext/metadata.h"
#include "shardext/remote_command.h"

/* the name of the reported setting */
#define SERVER_IDENTITY_SETTING "shardext.server_identity"

/* how long RecordServerIdentity waits for the server's answer */
#define IDENTITY_QUERY_TIMEOUT_MS 30000

/* see SetNodeIdentityCheck */
static bool identityCheckEnabled = true;

/*
 * ShowServerIdentity, the show hook of shardext.server_identity, computes
 * this server's identity each time it is shown or reported: the timeline
 * is the one WAL is written on (replayed on, during recovery), which a
 * promotion changes.
 */
const char *
ShowServerIdentity(void)
{
	static char buffer[64];
	TimeLineID	timeline;

	/* the postmaster (postgres -C) has no control file loaded yet */
	if (!IsUnderPostmaster)
		return "";
	if (RecoveryInProgress())
		(void) GetXLogReplayRecPtr(&timeline);
	else
		timeline = GetWALInsertionTimeLine();
	snprintf(buffer, sizeof(buffer), UINT64_FORMAT "/%u", GetSystemIdentifier(), timeline);
	return buffer;
}

/* ParseServerIdentity reads "<system identifier>/<timeline>" */
bool
ParseServerIdentity(const char *text, ServerIdentity *identity)
{
	char	   *end;

	identity->systemId = 0;
	identity->timeline = 0;
	if (text == NULL || text[0] == '\0')
		return false;
	identity->systemId = strtou64(text, &end, 10);
	if (*end != '/' || identity->systemId == 0)
		return false;
	identity->timeline = (uint32) strtoul(end + 1, &end, 10);
	return *end == '\0' && identity->timeline != 0;
}

/*
 * ReportedServerIdentity returns the identity the server of a connection
 * reported when the connection was made; false when it reported none.
 */
bool
ReportedServerIdentity(NodeConnection *conn, ServerIdentity *identity)
{
	return ParseServerIdentity(PQparameterStatus(conn->pgConn, SERVER_IDENTITY_SETTING),
							   identity);
}

/*
 * NodeIdentityMatches tells whether an identity is the node's recorded
 * one (or the node has none recorded).
 */
bool
NodeIdentityMatches(WorkerNode *node, const ServerIdentity *identity)
{
	return node->systemId == 0 ||
		(identity->systemId == node->systemId && identity->timeline == node->timeline);
}

/* DescribeServerIdentity: "system <id>, timeline <n>" */
char *
DescribeServerIdentity(const ServerIdentity *identity)
{
	return psprintf("system " UINT64_FORMAT ", timeline %u", identity->systemId,
					identity->timeline);
}

/*
 * CheckNodeConnectionIdentity, for a connection that was just made,
 * refuses a server that is not the one the catalog records for the worker
 * at that address: it closes the connection, reports the refusal at elevel
 * (ERROR throws) and returns false.  Connections to read replicas, to
 * addresses no primary has and those made outside a transaction are not
 * checked.
 */
bool
CheckNodeConnectionIdentity(NodeConnection *conn, int elevel)
{
	WorkerNode *node;
	ServerIdentity reported;
	ServerIdentity recorded;

	if (!identityCheckEnabled || !IsTransactionState() || !ShardextExtensionLoaded())
		return true;
	node = conn->nodeId > 0 ? LookupWorkerNode(conn->nodeId) :
		FindWorkerNode(conn->host, conn->port);
	if (node == NULL || NodeIsReplica(node) || node->port != conn->port ||
		strcmp(node->host, conn->host) != 0 || !ReportedServerIdentity(conn, &reported) ||
		NodeIdentityMatches(node, &reported))
		return true;

	recorded.systemId = node->systemId;
	recorded.timeline = node->timeline;
	DisconnectNodeConnection(conn);
	ereport(elevel,
			(errcode(ERRCODE_SQLSERVER_REJECTED_ESTABLISHMENT_OF_SQLCONNECTION),
			 errmsg("server at %s:%d is not the one node %d runs on", conn->host, conn->port,
					node->nodeId),
			 errdetail("It reports %s; the node runs on %s.%s",
					   DescribeServerIdentity(&reported), DescribeServerIdentity(&recorded),
					   reported.systemId == recorded.systemId &&
					   reported.timeline < recorded.timeline ?
					   " It is an old primary that a failover replaced." : ""),
			 errhint("Rebuild it as a standby of the node's primary.  If it rightly took the "
					 "node over (restored from a backup, promoted by another tool), run "
					 "shardext_update_node() for it.")));
	return false;
}

/*
 * SetNodeIdentityCheck turns the check of new connections on or off and
 * returns what it was: off, node management and the daemon's probes
 * connect to a server to look at whatever runs there (the caller restores
 * the setting on every path, errors included).
 */
bool
SetNodeIdentityCheck(bool enabled)
{
	bool		previous = identityCheckEnabled;

	identityCheckEnabled = enabled;
	return previous;
}

/*
 * RecordServerIdentity records, as node nodeId's identity, that of the
 * server on conn as it is now (asked anew: a connection made before a
 * promotion reported the old timeline).  A server without the setting
 * leaves the node unchecked.
 */
void
RecordServerIdentity(int32 nodeId, NodeConnection *conn)
{
	ServerIdentity identity;
	char	   *value;

	value = ExecuteStandbyScalar(conn, "SELECT pg_catalog.current_setting("
								 "'" SERVER_IDENTITY_SETTING "', true)",
								 TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															 IDENTITY_QUERY_TIMEOUT_MS));
	if (!ParseServerIdentity(value, &identity))
		return;
	SetNodeIdentity(nodeId, identity.systemId, identity.timeline);
}

/*
 * RecordMissingIdentity records, for a node added before 1.2 (no identity
 * recorded), the identity its server reported on conn -- unless node
 * management holds the catalog of nodes, or the server reported none.
 */
void
RecordMissingIdentity(WorkerNode *node, NodeConnection *conn)
{
	ServerIdentity identity;

	if (node->systemId != 0 || NodeIsReplica(node) || !ReportedServerIdentity(conn, &identity) ||
		!ConditionalLockRelationOid(ShardextCatalogRelid("node"), ShareRowExclusiveLock))
		return;
	SetNodeIdentity(node->nodeId, identity.systemId, identity.timeline);
	ereport(LOG,
			(errmsg("shardext: recorded the identity of node %d (%s:%d): %s", node->nodeId,
					node->host, node->port, DescribeServerIdentity(&identity))));
}
