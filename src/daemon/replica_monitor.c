/*-------------------------------------------------------------------------
 *
 * replica_monitor.c
 *	  The maintenance daemon's polls of read replicas and their primaries.
 *
 * Every shardext.replica_poll_interval the daemon asks each primary that
 * has active replicas for its WAL insert position, and then each of its
 * replicas whether it is (still) a standby of the same system and how far
 * it has replayed, and reports to shared memory (replica_state.c), where
 * backends look when they route reads.  One short query per node, on
 * connections the daemon keeps; a node that does not answer within
 * POLL_TIMEOUT_MS counts as failed (its replicas are then not used) and is
 * tried again after RECONNECT_DELAY_MS.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "shardext/connection.h"
#include "shardext/guc.h"
#include "shardext/maintenance.h"
#include "shardext/metadata.h"
#include "shardext/read_your_writes.h"
#include "shardext/remote_command.h"
#include "shardext/replica_state.h"

#define POLL_TIMEOUT_MS 1000
#define RECONNECT_DELAY_MS 1000
/* every this many rounds, forget the state of nodes that left the catalog */
#define FORGET_EVERY_ROUNDS 100

/* the daemon's connection to one polled node */
typedef struct MonitorConnection
{
	int32		nodeId;
	char	   *host;
	int32		port;
	NodeConnection *conn;		/* NULL: not connected */
	TimestampTz retryAt;		/* no new connection before this */
	bool		seen;			/* polled in this round */
} MonitorConnection;

static List *monitorConnections = NIL;	/* in TopMemoryContext */
static int	roundsSinceForget = 0;

static MonitorConnection *GetMonitorConnection(WorkerNode *node);
static PGresult *PollNode(WorkerNode *node, const char *query);
static uint32 AddressHash(WorkerNode *node);
static void ClosePolledConnections(bool onlyUnseen);
static void ForgetRemovedNodes(void);
static void FreeMonitorConnection(MonitorConnection *mc);

/*
 * PollReplicas runs one round of polls; the daemon calls it inside a
 * transaction (for the catalog).  Returns whether any replica is in use.
 */
bool
PollReplicas(void)
{
	List	   *primaries = WorkerNodeList(false);
	ListCell   *cell;
	bool		any = false;

	foreach(cell, monitorConnections)
		((MonitorConnection *) lfirst(cell))->seen = false;

	foreach(cell, primaries)
	{
		WorkerNode *primary = lfirst(cell);
		List	   *replicas = ReplicaNodeList(primary->nodeId, true);
		PGresult   *result;
		char	   *systemId = NULL;
		ListCell   *replicaCell;
		TimestampTz sent;

		if (replicas == NIL)
			continue;
		any = true;
		/* the time before the poll: every commit finished before it is below the LSN */
		sent = GetCurrentTimestamp();
		result = PollNode(primary, CURRENT_LSN_QUERY ", (SELECT system_identifier::text "
						  "FROM pg_catalog.pg_control_system())");
		ReportPrimarySample(primary->nodeId, AddressHash(primary), result != NULL,
							result ? ParseCommitLsn(PQgetvalue(result, 0, 0)) : InvalidXLogRecPtr,
							sent);
		if (result != NULL)
			systemId = pstrdup(PQgetvalue(result, 0, 1));
		PQclear(result);

		foreach(replicaCell, replicas)
		{
			WorkerNode *replica = lfirst(replicaCell);
			bool		ok;

			result = PollNode(replica, "SELECT pg_catalog.pg_is_in_recovery()::text, "
							  "pg_catalog.pg_last_wal_replay_lsn(), "
							  "(SELECT system_identifier::text FROM pg_catalog.pg_control_system())");
			/* a promoted "replica" or one of another system is never read */
			ok = result != NULL && systemId != NULL &&
				strcmp(PQgetvalue(result, 0, 0), "true") == 0 &&
				!PQgetisnull(result, 0, 1) &&
				strcmp(PQgetvalue(result, 0, 2), systemId) == 0;
			ReportReplicaSample(replica->nodeId, primary->nodeId, AddressHash(replica), ok,
								ok ? ParseCommitLsn(PQgetvalue(result, 0, 1)) :
								InvalidXLogRecPtr,
								GetCurrentTimestamp());
			PQclear(result);
			CHECK_FOR_INTERRUPTS();
		}
	}
	ClosePolledConnections(true);
	if (++roundsSinceForget >= FORGET_EVERY_ROUNDS)
	{
		ForgetRemovedNodes();
		roundsSinceForget = 0;
	}
	return any;
}

/*
 * PollNode runs a one-row query on a node over the daemon's connection to
 * it and returns the result (the caller PQclears it), or NULL when the node
 * did not answer in time or the query failed.  It never throws for remote
 * trouble.
 */
static PGresult *
PollNode(WorkerNode *node, const char *query)
{
	MonitorConnection *mc = GetMonitorConnection(node);
	PGresult   *result;

	mc->seen = true;
	if (mc->conn == NULL)
	{
		if (GetCurrentTimestamp() < mc->retryAt)
			return NULL;
		mc->conn = OpenDedicatedConnectionWithTimeout(node->host, node->port,
													  Min(ShardextReplicaConnectTimeout,
														  POLL_TIMEOUT_MS));
		if (mc->conn == NULL)
		{
			mc->retryAt = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													  RECONNECT_DELAY_MS);
			return NULL;
		}
		/* it serves the polls of every round, each a transaction of its own */
		KeepConnectionAcrossTransactions(mc->conn);
	}

	result = TryRemoteQueryNoInterrupts(mc->conn, query, POLL_TIMEOUT_MS);
	if (result == NULL || PQresultStatus(result) != PGRES_TUPLES_OK ||
		PQntuples(result) != 1 || PQgetisnull(result, 0, 0))
	{
		bool		broken = PQstatus(mc->conn->pgConn) != CONNECTION_OK ||
			mc->conn->queryInProgress;

		PQclear(result);
		if (broken)
		{
			FreeMonitorConnection(mc);
			mc->retryAt = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													  RECONNECT_DELAY_MS);
		}
		return NULL;
	}
	return result;
}

/*
 * GetMonitorConnection returns the daemon's entry for a node, replacing it
 * when the node's address changed.
 */
static MonitorConnection *
GetMonitorConnection(WorkerNode *node)
{
	ListCell   *cell;
	MonitorConnection *mc;
	MemoryContext oldContext;

	foreach(cell, monitorConnections)
	{
		mc = lfirst(cell);
		if (mc->nodeId != node->nodeId)
			continue;
		if (mc->port == node->port && strcmp(mc->host, node->host) == 0)
			return mc;
		/* repointed: start over with the new address */
		FreeMonitorConnection(mc);
		pfree(mc->host);
		mc->host = MemoryContextStrdup(TopMemoryContext, node->host);
		mc->port = node->port;
		mc->retryAt = 0;
		return mc;
	}
	oldContext = MemoryContextSwitchTo(TopMemoryContext);
	mc = palloc0(sizeof(MonitorConnection));
	mc->nodeId = node->nodeId;
	mc->host = pstrdup(node->host);
	mc->port = node->port;
	monitorConnections = lappend(monitorConnections, mc);
	MemoryContextSwitchTo(oldContext);
	return mc;
}

/* FreeMonitorConnection closes the connection of an entry, if it has one */
static void
FreeMonitorConnection(MonitorConnection *mc)
{
	if (mc->conn == NULL)
		return;
	CloseDedicatedConnection(mc->conn);
	mc->conn = NULL;
}

/* AddressHash identifies the server a node row points at */
static uint32
AddressHash(WorkerNode *node)
{
	char	   *address = psprintf("%s:%d", node->host, node->port);
	uint32		hash = hash_bytes((const unsigned char *) address, strlen(address));

	pfree(address);
	return hash;
}

/*
 * ClosePolledConnections closes the daemon's connections (only those to
 * nodes not polled in this round, when asked): a node without replicas or
 * removed needs none.
 */
static void
ClosePolledConnections(bool onlyUnseen)
{
	ListCell   *cell;

	foreach(cell, monitorConnections)
	{
		MonitorConnection *mc = lfirst(cell);

		if (onlyUnseen && mc->seen)
			continue;
		FreeMonitorConnection(mc);
		pfree(mc->host);
		pfree(mc);
		monitorConnections = foreach_delete_current(monitorConnections, cell);
	}
}

/* ForgetRemovedNodes frees the shared state of nodes that left the catalog */
static void
ForgetRemovedNodes(void)
{
	List	   *keep = NIL;
	ListCell   *cell;

	foreach(cell, WorkerNodeList(false))
		keep = lappend_int(keep, ((WorkerNode *) lfirst(cell))->nodeId);
	foreach(cell, ReplicaNodeList(0, false))
		keep = lappend_int(keep, ((WorkerNode *) lfirst(cell))->nodeId);
	ForgetReplicaSlots(keep);
}
