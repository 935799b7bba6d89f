/*-------------------------------------------------------------------------
 *
 * failover.c
 *	  Automatic failover: promoting the best replica of a worker that the
 *	  maintenance daemon found unreachable for shardext.failover_timeout
 *	  (node_health.c).
 *
 * The daemon looks at each active replica of the worker over a connection
 * of its own: it must be a standby of the worker's system that holds the
 * node, and it says how much WAL it has received and under which name it
 * streams.  The one that received the most WAL is promoted, by the path of
 * shardext_promote_replica (PromoteReplicaNode: promotion, the catalog's
 * switch, fencing of the old primary, resolution of the node's in-doubt
 * prepared transactions), provided the data loss is bounded:
 *	- some reachable replica was a synchronous standby of the worker at
 *	  the worker's last answered probe (sync_state sync or quorum): every
 *	  commit the worker acknowledged was flushed by a synchronous standby,
 *	  and the replica with the most WAL has all of it;
 *	- or, with shardext.failover_max_lag > 0, the chosen replica's data was
 *	  at most that far behind the worker when the worker was last reached
 *	  (as the replica monitor measured it); commits of that last stretch
 *	  may be lost.
 * Otherwise nothing happens and the reason is returned for the log: the
 * daemon tries again at every probe, so a replica that comes back, or a
 * worker that comes back, ends the wait.  A replica that is out of recovery
 * on a later timeline than the worker was promoted by an earlier attempt
 * whose catalog change failed: it is taken whatever its lag, since two
 * servers of one node must never both accept writes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"

#include "shardext/connection.h"
#include "shardext/failover.h"
#include "shardext/fencing.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/remote_command.h"
#include "shardext/replica_state.h"
#include "shardext/subtransaction.h"

/* how long the daemon waits for a replica it looks at */
#define REPLICA_CONNECT_TIMEOUT_MS 2000
#define REPLICA_QUERY_TIMEOUT_MS 5000
/* how long a promotion may take */
#define PROMOTION_WAIT_SECONDS 60

/* what the daemon found of one replica */
typedef struct ReplicaCandidate
{
	WorkerNode *replica;
	bool		usable;			/* a standby of the node, or promoted earlier */
	bool		promoted;		/* out of recovery on a later timeline */
	bool		synchronous;	/* a synchronous standby at the last sample */
	XLogRecPtr	receivedLsn;
	char	   *why;			/* why it is not usable */
} ReplicaCandidate;

/* what ExamineReplicaPart works on */
typedef struct ExamineReplicaArgs
{
	NodeConnection *conn;
	FailoverCandidateNode *candidate;
	ReplicaCandidate *result;
} ExamineReplicaArgs;

static List *ExamineReplicas(FailoverCandidateNode *candidate);
static void ExamineReplica(FailoverCandidateNode *candidate, ReplicaCandidate *result);
static void ExamineReplicaPart(void *arg);
static void ExamineReplicaOn(NodeConnection *conn, FailoverCandidateNode *candidate,
							 ReplicaCandidate *result);
static char *WalReceiverName(NodeConnection *conn, TimestampTz deadline);
static bool NameInLines(const char *name, const char *lines);
static ReplicaCandidate *ChooseReplica(List *candidates, bool *anySynchronous);
static bool LossBounded(FailoverCandidateNode *candidate, ReplicaCandidate *best,
						bool anySynchronous, char **waitReason);
static void Promote(FailoverCandidateNode *candidate, ReplicaCandidate *best);

/*
 * FailOverNode promotes the best replica of an unreachable worker (see the
 * file header) and returns true, or returns false with *waitReason set.
 * It runs in the daemon's transaction; a promotion that fails raises an
 * error, and the next probe tries again.
 */
bool
FailOverNode(FailoverCandidateNode *candidate, char **waitReason)
{
	WorkerNode *node = candidate->node;
	List	   *candidates;
	ReplicaCandidate *best;
	bool		anySynchronous;

	if (ReplicaNodeList(node->nodeId, true) == NIL)
	{
		*waitReason = pstrdup("it has no active replica");
		return false;
	}
	candidates = ExamineReplicas(candidate);
	best = ChooseReplica(candidates, &anySynchronous);
	if (best == NULL)
	{
		StringInfoData reasons;
		ListCell   *cell;

		initStringInfo(&reasons);
		appendStringInfoString(&reasons, "none of its replicas can take over");
		foreach(cell, candidates)
			appendStringInfo(&reasons, "; %s", ((ReplicaCandidate *) lfirst(cell))->why);
		*waitReason = reasons.data;
		return false;
	}
	if (!best->promoted && !LossBounded(candidate, best, anySynchronous, waitReason))
		return false;
	if (!ConditionalLockRelationOid(ShardextCatalogRelid("node"), ShareRowExclusiveLock))
	{
		*waitReason = pstrdup("node management holds the catalog of nodes");
		return false;
	}
	Promote(candidate, best);
	return true;
}

/* ExamineReplicas looks at every active replica of the node */
static List *
ExamineReplicas(FailoverCandidateNode *candidate)
{
	List	   *candidates = NIL;
	ListCell   *cell;

	foreach(cell, ReplicaNodeList(candidate->node->nodeId, true))
	{
		ReplicaCandidate *result = palloc0(sizeof(ReplicaCandidate));

		result->replica = lfirst(cell);
		ExamineReplica(candidate, result);
		candidates = lappend(candidates, result);
		CHECK_FOR_INTERRUPTS();
	}
	return candidates;
}

/*
 * ExamineReplica connects to a replica and looks at it; any error (it
 * went away, a query failed) makes it unusable, with the error as reason.
 */
static void
ExamineReplica(FailoverCandidateNode *candidate, ReplicaCandidate *result)
{
	WorkerNode *replica = result->replica;
	NodeProbeOutcome outcome;
	char	   *detail = NULL;
	ExamineReplicaArgs args;
	ErrorData  *error;

	args.conn = ProbeNodeConnection(replica->host, replica->port, REPLICA_CONNECT_TIMEOUT_MS,
									&outcome, &detail);
	if (args.conn == NULL)
	{
		result->why = psprintf("%s:%d cannot be reached: %s", replica->host, replica->port,
							   detail);
		return;
	}
	args.candidate = candidate;
	args.result = result;
	error = RunInSubtransaction(ExamineReplicaPart, &args);
	if (error != NULL)
	{
		result->usable = false;
		result->why = psprintf("%s:%d: %s", replica->host, replica->port, error->message);
	}
	CloseDedicatedConnection(args.conn);
}

/* ExamineReplicaPart: ExamineReplicaOn as a part of RunInSubtransaction */
static void
ExamineReplicaPart(void *arg)
{
	ExamineReplicaArgs *args = (ExamineReplicaArgs *) arg;

	ExamineReplicaOn(args->conn, args->candidate, args->result);
}

/*
 * ExamineReplicaOn does the work of ExamineReplica once connected: the
 * server must be of the node's system and a standby (or promoted by an
 * earlier attempt); it reports the WAL it received and the name it streams
 * under.  Its queries survive recovery conflicts (ExecuteStandbyScalar).
 */
static void
ExamineReplicaOn(NodeConnection *conn, FailoverCandidateNode *candidate,
				 ReplicaCandidate *result)
{
	WorkerNode *node = candidate->node;
	WorkerNode *replica = result->replica;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   REPLICA_QUERY_TIMEOUT_MS);
	ServerIdentity identity;
	char	   *value;

	if (ReportedServerIdentity(conn, &identity) && node->systemId != 0 &&
		identity.systemId != node->systemId)
	{
		result->why = psprintf("%s:%d is a server of another system (%s)", replica->host,
							   replica->port, DescribeServerIdentity(&identity));
		return;
	}
	value = ExecuteStandbyScalar(conn, "SHOW in_hot_standby", deadline);
	if (value == NULL || strcmp(value, "on") != 0)
	{
		value = ExecuteStandbyScalar(conn, "SELECT pg_catalog.current_setting("
									 "'shardext.server_identity', true)", deadline);
		result->promoted = node->systemId != 0 && ParseServerIdentity(value, &identity) &&
			identity.systemId == node->systemId && identity.timeline > node->timeline;
		result->usable = result->promoted;
		if (!result->usable)
			result->why = psprintf("%s:%d is not a standby", replica->host, replica->port);
		return;
	}
	value = ExecuteStandbyScalar(conn, "SELECT GREATEST("
								 "pg_catalog.pg_last_wal_receive_lsn(), "
								 "pg_catalog.pg_last_wal_replay_lsn())::text", deadline);
	if (value == NULL)
	{
		result->why = psprintf("%s:%d has no WAL position", replica->host, replica->port);
		return;
	}
	result->receivedLsn = DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(value)));
	result->synchronous = candidate->syncSampledAt != 0 &&
		NameInLines(WalReceiverName(conn, deadline), candidate->syncStandbys);
	result->usable = true;
}

/*
 * WalReceiverName is the application name a standby streams under, which
 * synchronous_standby_names and pg_stat_replication use: the one in
 * primary_conninfo, else cluster_name, else "walreceiver".
 */
static char *
WalReceiverName(NodeConnection *conn, TimestampTz deadline)
{
	char	   *conninfo = ExecuteStandbyScalar(conn, "SHOW primary_conninfo", deadline);
	PQconninfoOption *options = PQconninfoParse(conninfo ? conninfo : "", NULL);
	char	   *name = NULL;

	for (PQconninfoOption *option = options; option != NULL && option->keyword != NULL;
		 option++)
	{
		if (strcmp(option->keyword, "application_name") == 0 && option->val != NULL &&
			option->val[0] != '\0')
			name = pstrdup(option->val);
	}
	if (options != NULL)
		PQconninfoFree(options);
	if (name == NULL)
	{
		name = ExecuteStandbyScalar(conn, "SHOW cluster_name", deadline);
		if (name == NULL || name[0] == '\0')
			name = "walreceiver";
	}
	return name;
}

/* NameInLines tells whether name is one of the lines of lines */
static bool
NameInLines(const char *name, const char *lines)
{
	size_t		length = strlen(name);

	for (const char *line = lines; *line != '\0';)
	{
		const char *end = strchr(line, '\n');
		size_t		lineLength = end ? (size_t) (end - line) : strlen(line);

		if (lineLength == length && strncmp(line, name, length) == 0)
			return true;
		if (end == NULL)
			break;
		line = end + 1;
	}
	return false;
}

/*
 * ChooseReplica returns the replica promoted by an earlier attempt, else
 * the usable one that received the most WAL (NULL when none is usable),
 * and whether any usable one was synchronous.
 */
static ReplicaCandidate *
ChooseReplica(List *candidates, bool *anySynchronous)
{
	ReplicaCandidate *best = NULL;
	ListCell   *cell;

	*anySynchronous = false;
	foreach(cell, candidates)
	{
		ReplicaCandidate *candidate = lfirst(cell);

		if (!candidate->usable)
			continue;
		if (candidate->promoted)
			return candidate;
		*anySynchronous |= candidate->synchronous;
		if (best == NULL || candidate->receivedLsn > best->receivedLsn)
			best = candidate;
	}
	return best;
}

/*
 * LossBounded tells whether promoting best loses no acknowledged commit
 * (a synchronous standby was reachable, and best has at least its WAL), or
 * at most shardext.failover_max_lag of them; else it says why not.
 */
static bool
LossBounded(FailoverCandidateNode *candidate, ReplicaCandidate *best, bool anySynchronous,
			char **waitReason)
{
	ReplicaView view;
	long		lagMs;

	if (anySynchronous)
		return true;
	if (ShardextFailoverMaxLag == 0)
	{
		*waitReason = psprintf("none of its reachable replicas was a synchronous standby of "
							   "it%s, and shardext.failover_max_lag is 0 (only synchronous "
							   "replicas are promoted): %s:%d could lack commits the worker "
							   "acknowledged",
							   candidate->syncSampledAt == 0 ?
							   " (it was not reached since the daemon started)" : "",
							   best->replica->host, best->replica->port);
		return false;
	}
	if (!GetReplicaView(best->replica->nodeId, &view) || view.freshAsOf == 0)
	{
		*waitReason = psprintf("the lag of its replica %s:%d is not known",
							   best->replica->host, best->replica->port);
		return false;
	}
	lagMs = (long) (Max(candidate->lastAlive - view.freshAsOf, 0) / 1000);
	if (lagMs > ShardextFailoverMaxLag)
	{
		*waitReason = psprintf("its best replica %s:%d was %ld ms behind when the worker was "
							   "last reached, more than shardext.failover_max_lag (%d ms)",
							   best->replica->host, best->replica->port, lagMs,
							   ShardextFailoverMaxLag);
		return false;
	}
	return true;
}

/* Promote promotes the chosen replica and logs the failover */
static void
Promote(FailoverCandidateNode *candidate, ReplicaCandidate *best)
{
	WorkerNode *node = candidate->node;
	int32		nodeId = node->nodeId;
	char	   *oldAddress = psprintf("%s:%d", node->host, node->port);
	char	   *newAddress = psprintf("%s:%d", best->replica->host, best->replica->port);
	TimestampTz start = GetCurrentTimestamp();

	ereport(LOG,
			(errmsg("shardext: failing over node %d (%s), unreachable for %ld ms: promoting "
					"its replica %s", nodeId, oldAddress,
					(long) ((start - candidate->lastAlive) / 1000), newAddress),
			 best->promoted ?
			 errdetail("The replica was promoted by an earlier attempt.") :
			 errdetail("It received WAL up to %X/%X%s.", LSN_FORMAT_ARGS(best->receivedLsn),
					   best->synchronous ? " as a synchronous standby" :
					   ", within shardext.failover_max_lag")));
	(void) PromoteReplicaNode(best->replica, PROMOTION_WAIT_SECONDS);
	ereport(LOG,
			(errmsg("shardext: node %d failed over from %s to %s in %ld ms, %ld ms after it "
					"was last reached", nodeId, oldAddress, newAddress,
					(long) ((GetCurrentTimestamp() - start) / 1000),
					(long) ((GetCurrentTimestamp() - candidate->lastAlive) / 1000)),
			 errhint("Rebuild the old primary as a standby of the new one and run "
					 "shardext_add_replica() for it.")));
}
