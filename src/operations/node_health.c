/*-------------------------------------------------------------------------
 *
 * node_health.c
 *	  The maintenance daemon's health probes of the workers: what they
 *	  found (shardext.node_health(), the health columns of shardext.nodes)
 *	  and when a worker is failed over (failover.c).
 *
 * With shardext.auto_failover on, the daemon probes every primary each
 * shardext.health_check_interval over a connection it keeps: a short query,
 * which also reads the names of the worker's synchronous standbys, given
 * the interval to answer.  When the kept connection cannot be used, the
 * probe makes a new one (ProbeNodeConnection), which says how far it got.
 * That is the rule that tells a dead worker from a slow one:
 *	- unreachable: the address refuses TCP connections (nothing listens:
 *	  the server is stopped or crashed), or no TCP connection is
 *	  established within the probe's time (the host is down, the network
 *	  to it is cut).  Only this counts towards failover;
 *	- alive: everything else, since a TCP connection was established --
 *	  a server that answers (up), answers later than the probe waits or
 *	  does not finish the connection's startup in time (slow: CPU-starved,
 *	  stopped by SIGSTOP, stalled in a checkpoint or on I/O; its kernel
 *	  still accepts connections), or refuses the connection (rejecting:
 *	  too many clients, starting up, shutting down).  Such a worker is
 *	  never failed over automatically: it may still commit on connections
 *	  it holds, and promoting a replica next to it would let two servers
 *	  accept writes.  When it has not answered for failover_timeout the
 *	  daemon logs that it does not answer but is not failed over.
 * A worker that was not reached for shardext.failover_timeout, with at
 * least two unreachable probes in a row (the last one included), is failed
 * over (failover.c); the names of its synchronous standbys are those of
 * its last answered probe.  A worker whose address reaches a standby, or a
 * server with another identity than the node's (fencing.c), is reported
 * and left alone.  A node without a recorded identity (a catalog of 1.1)
 * gets the one its server reports.
 *
 * The daemon also probes the records of old primaries that a failover
 * replaced (needs_rebuild): one that runs and accepts writes is reported
 * as fenced (connections of the cluster refuse it; it must be rebuilt).
 *
 * What the probes found is kept in shared memory per (database, node id),
 * for shardext.node_health().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "shardext/connection.h"
#include "shardext/failover.h"
#include "shardext/fencing.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/remote_command.h"

#define MAX_HEALTH_SLOTS 256
#define HEALTH_DETAIL_SIZE 192
/* the shortest time between two probes */
#define MIN_PROBE_DELAY_MS 50
/* after a failover attempt that failed with an error, the next one waits this long */
#define FAILED_ATTEMPT_PAUSE_MS 10000
/* a reason for waiting that did not change is logged again after this */
#define WAIT_LOG_INTERVAL_MS (60 * 1000)

/* the names of the worker's synchronous standbys, one per line */
#define PROBE_QUERY \
	"SELECT coalesce(pg_catalog.string_agg(application_name, E'\\n'), '') FROM " \
	"(SELECT application_name FROM pg_catalog.pg_stat_replication " \
	"GROUP BY application_name HAVING count(*) = 1 " \
	"AND bool_and(sync_state IN ('sync', 'quorum'))) s"

typedef enum NodeHealth
{
	NODE_HEALTH_UP,
	NODE_HEALTH_SLOW,
	NODE_HEALTH_REJECTING,
	NODE_HEALTH_UNREACHABLE,
	NODE_HEALTH_STANDBY,
	NODE_HEALTH_FENCED
} NodeHealth;

static const char *const NodeHealthNames[] = {
	"up", "slow", "rejecting", "unreachable", "standby", "fenced"
};

typedef struct NodeHealthSlot
{
	Oid			databaseId;		/* InvalidOid: free */
	int32		nodeId;
	NodeHealth	health;
	TimestampTz since;			/* when the node got this health */
	TimestampTz lastProbe;
	char		detail[HEALTH_DETAIL_SIZE];
} NodeHealthSlot;

typedef struct NodeHealthShared
{
	slock_t		mutex;
	NodeHealthSlot slots[MAX_HEALTH_SLOTS];
} NodeHealthShared;

/* the daemon's state of one probed node (in TopMemoryContext) */
typedef struct ProbedNode
{
	int32		nodeId;
	char	   *host;
	int32		port;
	NodeConnection *conn;		/* kept between probes, or NULL */
	bool		seen;			/* probed in this round */
	TimestampTz lastAlive;		/* a probe last got a TCP connection */
	TimestampTz lastUp;			/* a probe last got an answer */
	int			unreachableProbes;	/* in a row */
	bool		silenceLogged;	/* "does not answer" logged in this episode */
	char	   *syncStandbys;	/* of the last answered probe */
	TimestampTz syncSampledAt;
	char	   *waitReason;		/* last logged reason not to fail over */
	TimestampTz waitLoggedAt;
	TimestampTz failoverNotBefore;	/* after a failed attempt */
} ProbedNode;

PG_FUNCTION_INFO_V1(shardext_node_health);

static NodeHealthShared *NodeHealthState = NULL;
static List *probedNodes = NIL;

static ProbedNode *GetProbedNode(WorkerNode *node);
static void ResetProbedNode(ProbedNode *pn);
static void ProbePrimary(WorkerNode *node, ProbedNode *pn);
static NodeHealth ConnectProbe(WorkerNode *node, ProbedNode *pn, char **detail);
static NodeHealth QueryProbe(WorkerNode *node, ProbedNode *pn, char **detail);
static NodeHealth ServerHealth(WorkerNode *node, ProbedNode *pn, char **detail);
static void NoteProbe(WorkerNode *node, ProbedNode *pn, NodeHealth health, const char *detail);
static bool ConsiderFailover(WorkerNode *node, ProbedNode *pn);
static void LogWaitReason(WorkerNode *node, ProbedNode *pn, const char *reason);
static void ProbeOldPrimary(WorkerNode *record, ProbedNode *pn);
static void CloseProbeConnection(ProbedNode *pn);
static int	ProbeTimeoutMs(void);
static void ReportHealth(int32 nodeId, NodeHealth health, const char *detail);
static void ForgetUnseenNodes(void);
static TimestampTz NextProbeTime(void);

Size
NodeHealthShmemSize(void)
{
	return MAXALIGN(sizeof(NodeHealthShared));
}

void
NodeHealthShmemInit(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	NodeHealthState = ShmemInitStruct("shardext node health", NodeHealthShmemSize(), &found);
	if (!found)
	{
		memset(NodeHealthState, 0, NodeHealthShmemSize());
		SpinLockInit(&NodeHealthState->mutex);
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * CheckNodeHealth runs one round of probes (see the file header); the
 * daemon calls it inside a transaction.  Returns whether a node was failed
 * over, so that recovery runs at once, and in *nextCheck when to probe
 * next: after shardext.health_check_interval, or as soon as an unreachable
 * worker's failover_timeout ends.
 */
bool
CheckNodeHealth(TimestampTz *nextCheck)
{
	ListCell   *cell;
	bool		failedOver = false;

	foreach(cell, probedNodes)
		((ProbedNode *) lfirst(cell))->seen = false;

	foreach(cell, WorkerNodeList(true))
	{
		WorkerNode *node = lfirst(cell);
		ProbedNode *pn = GetProbedNode(node);

		ProbePrimary(node, pn);
		if (ConsiderFailover(node, pn))
		{
			failedOver = true;
			break;				/* the catalog changed: the next round goes on */
		}
		CHECK_FOR_INTERRUPTS();
	}
	if (!failedOver)
	{
		foreach(cell, ReplicaNodeList(0, false))
		{
			WorkerNode *record = lfirst(cell);

			if (record->needsRebuild)
				ProbeOldPrimary(record, GetProbedNode(record));
		}
		ForgetUnseenNodes();
	}
	*nextCheck = NextProbeTime();
	return failedOver;
}

/*
 * NextProbeTime: a health_check_interval from now, or earlier when an
 * unreachable worker's failover_timeout ends before (not before
 * MIN_PROBE_DELAY_MS, though).
 */
static TimestampTz
NextProbeTime(void)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz next = TimestampTzPlusMilliseconds(now, ShardextHealthCheckInterval);
	ListCell   *cell;

	foreach(cell, probedNodes)
	{
		ProbedNode *pn = lfirst(cell);
		TimestampTz due = TimestampTzPlusMilliseconds(pn->lastAlive, ShardextFailoverTimeout);

		if (pn->unreachableProbes > 0 && due < next)
			next = Max(due, TimestampTzPlusMilliseconds(now, MIN_PROBE_DELAY_MS));
	}
	return next;
}

/*
 * GetProbedNode returns the daemon's state of a node, starting it afresh
 * when the node is new or its address changed.
 */
static ProbedNode *
GetProbedNode(WorkerNode *node)
{
	ListCell   *cell;
	ProbedNode *pn = NULL;

	foreach(cell, probedNodes)
	{
		if (((ProbedNode *) lfirst(cell))->nodeId == node->nodeId)
			pn = lfirst(cell);
	}
	if (pn == NULL)
	{
		MemoryContext oldContext = MemoryContextSwitchTo(TopMemoryContext);

		pn = palloc0(sizeof(ProbedNode));
		pn->nodeId = node->nodeId;
		probedNodes = lappend(probedNodes, pn);
		MemoryContextSwitchTo(oldContext);
	}
	if (pn->host == NULL || pn->port != node->port || strcmp(pn->host, node->host) != 0)
	{
		ResetProbedNode(pn);
		pn->host = MemoryContextStrdup(TopMemoryContext, node->host);
		pn->port = node->port;
	}
	pn->seen = true;
	return pn;
}

/* ResetProbedNode forgets what the daemon knew of a node's server */
static void
ResetProbedNode(ProbedNode *pn)
{
	CloseProbeConnection(pn);
	if (pn->host != NULL)
		pfree(pn->host);
	if (pn->syncStandbys != NULL)
		pfree(pn->syncStandbys);
	if (pn->waitReason != NULL)
		pfree(pn->waitReason);
	pn->host = pn->syncStandbys = pn->waitReason = NULL;
	pn->lastAlive = pn->lastUp = GetCurrentTimestamp();
	pn->unreachableProbes = 0;
	pn->silenceLogged = false;
	pn->syncSampledAt = pn->waitLoggedAt = pn->failoverNotBefore = 0;
}

/* ProbePrimary probes a worker's primary once and notes what it found */
static void
ProbePrimary(WorkerNode *node, ProbedNode *pn)
{
	char	   *detail = NULL;
	NodeHealth	health = NODE_HEALTH_UP;

	if (pn->conn == NULL)
		health = ConnectProbe(node, pn, &detail);
	if (pn->conn != NULL)
		health = QueryProbe(node, pn, &detail);
	NoteProbe(node, pn, health, detail);
}

/*
 * ConnectProbe makes a new probe connection (kept in pn->conn when it
 * works) and returns the health it shows.
 */
static NodeHealth
ConnectProbe(WorkerNode *node, ProbedNode *pn, char **detail)
{
	NodeProbeOutcome outcome;
	NodeConnection *conn = ProbeNodeConnection(node->host, node->port, ProbeTimeoutMs(),
											   &outcome, detail);

	if (conn == NULL)
		return outcome == NODE_PROBE_UNREACHABLE ? NODE_HEALTH_UNREACHABLE :
			outcome == NODE_PROBE_NOT_ANSWERING ? NODE_HEALTH_SLOW : NODE_HEALTH_REJECTING;
	KeepConnectionAcrossTransactions(conn);
	pn->conn = conn;
	return NODE_HEALTH_UP;
}

/*
 * QueryProbe runs the probe query on the kept connection.  An answer in
 * time makes the node up (unless ServerHealth says otherwise); none in
 * time makes it slow; a broken connection is replaced by a new one, which
 * tells whether the server is still there.
 */
static NodeHealth
QueryProbe(WorkerNode *node, ProbedNode *pn, char **detail)
{
	PGresult   *result = TryRemoteQuery(pn->conn, PROBE_QUERY, 0, NULL, ProbeTimeoutMs(),
										detail);
	bool		broken;
	bool		timedOut;
	NodeHealth	health;

	if (result != NULL)
	{
		if (pn->syncStandbys != NULL)
			pfree(pn->syncStandbys);
		pn->syncStandbys = MemoryContextStrdup(TopMemoryContext,
											   PQntuples(result) == 1 ?
											   PQgetvalue(result, 0, 0) : "");
		pn->syncSampledAt = GetCurrentTimestamp();
		PQclear(result);
		return ServerHealth(node, pn, detail);
	}
	broken = PQstatus(pn->conn->pgConn) != CONNECTION_OK;
	timedOut = pn->conn->queryInProgress;
	CloseProbeConnection(pn);
	if (timedOut)
	{
		*detail = psprintf("no answer to a query within %d ms", ProbeTimeoutMs());
		return NODE_HEALTH_SLOW;
	}
	if (!broken)
		return NODE_HEALTH_UP;	/* it answered, with an error */
	health = ConnectProbe(node, pn, detail);
	return pn->conn != NULL ? ServerHealth(node, pn, detail) : health;
}

/*
 * ServerHealth checks what a connected probe reached: the node's own
 * server (up), a standby, or a server with another identity (fenced).  A
 * node without a recorded identity gets the one its server reports.
 */
static NodeHealth
ServerHealth(WorkerNode *node, ProbedNode *pn, char **detail)
{
	ServerIdentity identity;
	const char *standby = PQparameterStatus(pn->conn->pgConn, "in_hot_standby");

	if (standby != NULL && strcmp(standby, "on") == 0)
	{
		*detail = pstrdup("the node's address reaches a standby");
		return NODE_HEALTH_STANDBY;
	}
	if (!ReportedServerIdentity(pn->conn, &identity))
		return NODE_HEALTH_UP;
	RecordMissingIdentity(node, pn->conn);
	if (!NodeIdentityMatches(node, &identity))
	{
		*detail = psprintf("the node's address reaches another server (%s) than the node's "
						   "(system " UINT64_FORMAT ", timeline %u)",
						   DescribeServerIdentity(&identity), node->systemId, node->timeline);
		return NODE_HEALTH_FENCED;
	}
	return NODE_HEALTH_UP;
}

/*
 * NoteProbe keeps what a probe found: in the daemon's state (for
 * failover) and in shared memory; it logs a worker that has been alive but
 * silent for failover_timeout, once per episode.
 */
static void
NoteProbe(WorkerNode *node, ProbedNode *pn, NodeHealth health, const char *detail)
{
	TimestampTz now = GetCurrentTimestamp();

	if (health == NODE_HEALTH_UNREACHABLE)
		pn->unreachableProbes++;
	else
	{
		pn->unreachableProbes = 0;
		pn->lastAlive = now;
	}
	if (health == NODE_HEALTH_UP)
	{
		pn->lastUp = now;
		pn->silenceLogged = false;
	}
	else if ((health == NODE_HEALTH_SLOW || health == NODE_HEALTH_REJECTING) &&
			 !pn->silenceLogged && ShardextAutoFailover &&
			 TimestampDifferenceExceeds(pn->lastUp, now, ShardextFailoverTimeout))
	{
		ereport(LOG,
				(errmsg("shardext: node %d (%s:%d) has not answered for %ld ms, but it accepts "
						"connections: not failing it over", node->nodeId, node->host,
						node->port, (long) ((now - pn->lastUp) / 1000)),
				 errdetail("%s.", detail ? detail : NodeHealthNames[health]),
				 errhint("A worker that is only slow is never failed over automatically; stop "
						 "it to have it failed over.")));
		pn->silenceLogged = true;
	}
	ReportHealth(node->nodeId, health, detail);
}

/*
 * ConsiderFailover fails a worker over once it has been unreachable for
 * shardext.failover_timeout (see the file header), or logs why it cannot.
 * Returns whether it did.
 */
static bool
ConsiderFailover(WorkerNode *node, ProbedNode *pn)
{
	FailoverCandidateNode candidate;
	char	   *reason = NULL;

	TimestampTz now = GetCurrentTimestamp();

	if (!ShardextAutoFailover || pn->unreachableProbes < 2 || now < pn->failoverNotBefore ||
		!TimestampDifferenceExceeds(pn->lastAlive, now, ShardextFailoverTimeout))
		return false;
	/* an attempt that fails (the error is logged) is not repeated at once */
	pn->failoverNotBefore = TimestampTzPlusMilliseconds(now, FAILED_ATTEMPT_PAUSE_MS);
	candidate.node = node;
	candidate.lastAlive = pn->lastAlive;
	candidate.syncSampledAt = pn->syncSampledAt;
	candidate.syncStandbys = pn->syncStandbys ? pn->syncStandbys : "";
	if (FailOverNode(&candidate, &reason))
	{
		ResetProbedNode(pn);
		return true;
	}
	pn->failoverNotBefore = 0;
	LogWaitReason(node, pn, reason);
	return false;
}

/*
 * LogWaitReason logs why an unreachable worker is not failed over: when
 * the reason changes, and every WAIT_LOG_INTERVAL_MS.
 */
static void
LogWaitReason(WorkerNode *node, ProbedNode *pn, const char *reason)
{
	TimestampTz now = GetCurrentTimestamp();

	if (pn->waitReason != NULL && strcmp(pn->waitReason, reason) == 0 &&
		!TimestampDifferenceExceeds(pn->waitLoggedAt, now, WAIT_LOG_INTERVAL_MS))
		return;
	ereport(LOG,
			(errmsg("shardext: node %d (%s:%d) has been unreachable for %ld ms; not failing "
					"it over: %s", node->nodeId, node->host, node->port,
					(long) ((now - pn->lastAlive) / 1000), reason)));
	if (pn->waitReason != NULL)
		pfree(pn->waitReason);
	pn->waitReason = MemoryContextStrdup(TopMemoryContext, reason);
	pn->waitLoggedAt = now;
}

/*
 * ProbeOldPrimary looks at the server of an old primary that a failover
 * replaced: fenced when it runs and accepts writes (it must be rebuilt),
 * standby once it was rebuilt (shardext_add_replica() takes it back).
 */
static void
ProbeOldPrimary(WorkerNode *record, ProbedNode *pn)
{
	char	   *detail = NULL;
	NodeHealth	health = NODE_HEALTH_UNREACHABLE;
	const char *standby;

	CloseProbeConnection(pn);
	health = ConnectProbe(record, pn, &detail);
	if (pn->conn != NULL)
	{
		standby = PQparameterStatus(pn->conn->pgConn, "in_hot_standby");
		if (standby != NULL && strcmp(standby, "on") == 0)
		{
			health = NODE_HEALTH_STANDBY;
			detail = pstrdup("the old primary is a standby now: shardext_add_replica() "
							 "takes it back as a replica");
		}
		else
		{
			health = NODE_HEALTH_FENCED;
			detail = psprintf("old primary of node %d that a failover replaced: it accepts "
							  "writes, which the cluster no longer sends it; rebuild it as a "
							  "standby", record->primaryNodeId);
		}
		CloseProbeConnection(pn);
	}
	ReportHealth(record->nodeId, health, detail);
}

/* CloseProbeConnection closes a probe's kept connection, if any */
static void
CloseProbeConnection(ProbedNode *pn)
{
	if (pn->conn == NULL)
		return;
	CloseDedicatedConnection(pn->conn);
	pn->conn = NULL;
}

/* ProbeTimeoutMs: how long a probe waits for a connection or an answer */
static int
ProbeTimeoutMs(void)
{
	return Max(ShardextHealthCheckInterval, 100);
}

/*
 * ForgetUnseenNodes drops the daemon's state (and the health in shared
 * memory) of nodes not probed in this round: removed, or old primaries
 * that are replicas again.
 */
static void
ForgetUnseenNodes(void)
{
	ListCell   *cell;

	foreach(cell, probedNodes)
	{
		ProbedNode *pn = lfirst(cell);

		if (pn->seen)
			continue;
		ResetProbedNode(pn);
		SpinLockAcquire(&NodeHealthState->mutex);
		for (int i = 0; i < MAX_HEALTH_SLOTS; i++)
		{
			NodeHealthSlot *slot = &NodeHealthState->slots[i];

			if (slot->databaseId == MyDatabaseId && slot->nodeId == pn->nodeId)
				slot->databaseId = InvalidOid;
		}
		SpinLockRelease(&NodeHealthState->mutex);
		pfree(pn);
		probedNodes = foreach_delete_current(probedNodes, cell);
	}
}

/*
 * ForgetNodeHealthConnections closes the probes' connections, when the
 * daemon stops probing (shardext.auto_failover turned off).
 */
void
ForgetNodeHealthConnections(void)
{
	ListCell   *cell;

	foreach(cell, probedNodes)
		((ProbedNode *) lfirst(cell))->seen = false;
	ForgetUnseenNodes();
}

/*
 * ReportHealth stores a node's health in shared memory (for this
 * database); a node whose slot cannot be had is not shown.
 */
static void
ReportHealth(int32 nodeId, NodeHealth health, const char *detail)
{
	TimestampTz now = GetCurrentTimestamp();
	NodeHealthSlot *slot = NULL;
	NodeHealthSlot *free = NULL;

	SpinLockAcquire(&NodeHealthState->mutex);
	for (int i = 0; i < MAX_HEALTH_SLOTS && slot == NULL; i++)
	{
		NodeHealthSlot *candidate = &NodeHealthState->slots[i];

		if (candidate->databaseId == MyDatabaseId && candidate->nodeId == nodeId)
			slot = candidate;
		else if (free == NULL && candidate->databaseId == InvalidOid)
			free = candidate;
	}
	if (slot == NULL && free != NULL)
	{
		slot = free;
		slot->databaseId = MyDatabaseId;
		slot->nodeId = nodeId;
		slot->since = 0;
	}
	if (slot != NULL)
	{
		if (slot->since == 0 || slot->health != health)
			slot->since = now;
		slot->health = health;
		slot->lastProbe = now;
		strlcpy(slot->detail, detail ? detail : "", HEALTH_DETAIL_SIZE);
	}
	SpinLockRelease(&NodeHealthState->mutex);
}

/*
 * shardext.node_health() returns what the probes last found of each node
 * of this database: node_id, health, health_since, last_probe, detail.
 */
Datum
shardext_node_health(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	NodeHealthSlot *copy = palloc(sizeof(NodeHealthSlot) * MAX_HEALTH_SLOTS);

	InitMaterializedSRF(fcinfo, 0);
	SpinLockAcquire(&NodeHealthState->mutex);
	memcpy(copy, NodeHealthState->slots, sizeof(NodeHealthSlot) * MAX_HEALTH_SLOTS);
	SpinLockRelease(&NodeHealthState->mutex);
	for (int i = 0; i < MAX_HEALTH_SLOTS; i++)
	{
		NodeHealthSlot *slot = &copy[i];
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};

		if (slot->databaseId != MyDatabaseId)
			continue;
		values[0] = Int32GetDatum(slot->nodeId);
		values[1] = CStringGetTextDatum(NodeHealthNames[slot->health]);
		values[2] = TimestampTzGetDatum(slot->since);
		values[3] = TimestampTzGetDatum(slot->lastProbe);
		nulls[4] = slot->detail[0] == '\0';
		values[4] = CStringGetTextDatum(slot->detail);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
