/*-------------------------------------------------------------------------
 *
 * replica_routing.c
 *	  Choosing read replicas for the tasks of a read.
 *
 * With shardext.replica_reads on, a statement that only reads runs each of
 * its tasks on a replica of the task's node when one qualifies, else on the
 * node itself (its primary).  What qualifies is decided from shared memory
 * (replica_state.c: the maintenance daemon's polls), without a round trip:
 * the replica is healthy, no backend failed to use it lately, its data is
 * at most shardext.max_replica_lag old, and it has replayed what the
 * session requires on the node (read_your_writes.c: its own commits, the
 * causal token of shardext.read_after, the node's barrier).  A replica that
 * streams without delay but was not yet seen to replay the session's last
 * commit may still be used: the read then goes out behind
 * CALL shardext.wait_for_replay_lsn() in the same query string, which waits
 * up to shardext.replica_wait_timeout on the replica (no extra round
 * trip), and if it fails the read runs on the primary.
 *
 * Always on the primary: anything but a plain SELECT (writes, row locks,
 * data-modifying CTEs, SELECT under INSERT ... SELECT), SELECTs calling
 * functions that may write (see MarkPrimaryOnlyScans), reads whose shards a
 * global index lookup chose (on the primaries), SERIALIZABLE
 * transactions (a standby cannot run them), REPEATABLE READ transactions
 * that are not READ ONLY (a write after reading from a replica would not
 * see the snapshot it read), and every statement of a transaction that
 * has a remote transaction on a primary (it wrote, locked rows, or already
 * reads from there).  A transaction that read a node on a replica keeps
 * reading that node there, so that REPEATABLE READ READ ONLY sees one
 * snapshot per node.
 *
 * Spreading: the replicas of a node are tried in a rotating order.
 *
 * Falling back: a replica that cannot be connected to within
 * shardext.replica_connect_timeout, or whose read fails before it returned
 * a row (it went down, lags behind a schema change, cancelled the read for
 * a recovery conflict, did not replay in time), leaves the read to the
 * primary (RetryOnPrimary, called by the executor where it would raise the
 * error), and is avoided by every backend for REPLICA_FAILURE_MEMORY_MS
 * when it could not be reached.  Inside a remote transaction on the
 * replica the error is raised: another server would not have its snapshot.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "nodes/plannodes.h"
#include "storage/proc.h"
#include "utils/timestamp.h"

#include "shardext/connection.h"
#include "shardext/distributed_executor.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/read_your_writes.h"
#include "shardext/remote_command.h"
#include "shardext/replica_state.h"

/* how long every backend avoids a replica that failed for one */
#define REPLICA_FAILURE_MEMORY_MS 10000
/* the daemon's last poll of a replica that reads may wait for */
#define WAIT_SAMPLE_MAX_AGE_MS 1000

/* the server chosen for one node in this statement */
typedef struct NodeChoice
{
	int32		nodeId;
	int32		serverId;		/* the node itself or one of its replicas */
	XLogRecPtr	waitLsn;
} NodeChoice;

static uint32 rotation = 0;

/*
 * The choices of the current statement, so that every scan of a statement
 * (a pulled join, a subquery planned apart) reads a node on the same
 * server.  They live in TopTransactionContext; the key tells whether they
 * still belong to the running statement.
 */
static List *statementChoices = NIL;
static LocalTransactionId choicesXact = InvalidLocalTransactionId;
static TimestampTz choicesStatementStart = 0;

static bool StatementMayUseReplicas(DistributedScanState *state);
static void ChooseServer(int32 nodeId, bool mayWait, NodeChoice *choice);
static int32 ReplicaInTransaction(int32 nodeId);
static bool AnyPrimaryInTransaction(void);

/*
 * RouteReadsToReplicas moves the tasks of a read to replicas where that is
 * allowed (see the file header); called when the tasks are built, so
 * EXPLAIN shows the choice.
 */
void
RouteReadsToReplicas(DistributedScanState *state)
{
	ListCell   *cell;
	bool		mayWait;

	if (!StatementMayUseReplicas(state))
		return;

	if (choicesXact != ProcLocalXid(MyProc) ||
		choicesStatementStart != GetCurrentStatementStartTimestamp())
	{
		statementChoices = NIL;
		choicesXact = ProcLocalXid(MyProc);
		choicesStatementStart = GetCurrentStatementStartTimestamp();
	}
	/* a read that will run in a remote transaction cannot fall back */
	mayWait = ShardextReplicaWaitTimeout > 0 && !IsTransactionBlock();
	foreach(cell, state->tasks)
	{
		RemoteTask *task = lfirst(cell);
		NodeChoice *choice = NULL;
		ListCell   *c;

		foreach(c, statementChoices)
		{
			if (((NodeChoice *) lfirst(c))->nodeId == task->nodeId)
				choice = lfirst(c);
		}
		if (choice == NULL)
		{
			MemoryContext oldContext;

			choice = MemoryContextAllocZero(TopTransactionContext, sizeof(NodeChoice));
			ChooseServer(task->nodeId, mayWait, choice);
			oldContext = MemoryContextSwitchTo(TopTransactionContext);
			statementChoices = lappend(statementChoices, choice);
			MemoryContextSwitchTo(oldContext);
		}
		if (choice->serverId != task->nodeId)
		{
			task->primaryNodeId = task->nodeId;
			task->nodeId = choice->serverId;
			task->waitLsn = choice->waitLsn;
		}
	}
}

/*
 * StatementMayUseReplicas tells whether the statement and the transaction
 * allow reads on replicas at all.
 */
static bool
StatementMayUseReplicas(DistributedScanState *state)
{
	DistributedJob *job = state->job;
	PlannedStmt *statement = state->css.ss.ps.state->es_plannedstmt;
	ListCell   *cell;

	if (!ShardextReplicaReads || job->kind != JOB_SELECT || job->locksRows ||
		job->primaryOnly || !AnyActiveReplica())
		return false;

	/*
	 * Shards chosen by a global index were looked up on the primaries: a
	 * replica behind them could hide a row both under its old and under its
	 * new value.
	 */
	foreach(cell, job->pruneIndexes)
	{
		if (OidIsValid(lfirst_oid(cell)))
			return false;
	}
	if (statement == NULL || statement->commandType != CMD_SELECT ||
		statement->hasModifyingCTE || statement->rowMarks != NIL)
		return false;
	if (XactIsoLevel == XACT_SERIALIZABLE)
		return false;
	if (IsTransactionBlock() && IsolationUsesXactSnapshot() && !XactReadOnly)
		return false;
	return !AnyPrimaryInTransaction();
}

/*
 * ChooseServer picks the server that reads a node's shards in this
 * statement: a qualifying replica (with the LSN it must wait for, when
 * mayWait lets it) or the node itself.
 */
static void
ChooseServer(int32 nodeId, bool mayWait, NodeChoice *choice)
{
	List	   *replicas;
	int			count;
	XLogRecPtr	required;
	TimestampTz now;
	int32		waitCandidate = 0;
	uint32		start;

	choice->nodeId = nodeId;
	choice->serverId = nodeId;
	choice->waitLsn = InvalidXLogRecPtr;

	if ((choice->serverId = ReplicaInTransaction(nodeId)) != 0)
		return;
	choice->serverId = nodeId;
	replicas = ReplicaNodeList(nodeId, true);
	count = list_length(replicas);
	if (count == 0)
		return;
	if (!ReplicaRequirement(nodeId, &required))
	{
		CountPrimaryRead(nodeId);
		return;
	}

	now = GetCurrentTimestamp();
	start = rotation++;
	for (int i = 0; i < count; i++)
	{
		WorkerNode *replica = list_nth(replicas, (start + i) % count);
		ReplicaView view;

		if (!GetReplicaView(replica->nodeId, &view) || !view.healthy ||
			view.failedUntil > now || view.freshAsOf == 0 ||
			TimestampDifferenceExceeds(view.freshAsOf, now, ShardextMaxReplicaLag))
			continue;
		if (view.replayLsn >= required)
		{
			choice->serverId = replica->nodeId;
			return;
		}
		/* streaming without delay: it will most likely have it at once */
		if (mayWait && waitCandidate == 0 && view.caughtUp &&
			!TimestampDifferenceExceeds(view.sampleTime, now, WAIT_SAMPLE_MAX_AGE_MS))
			waitCandidate = replica->nodeId;
	}
	if (waitCandidate != 0)
	{
		choice->serverId = waitCandidate;
		choice->waitLsn = required;
		return;
	}
	CountPrimaryRead(nodeId);
}

/*
 * ReplicaInTransaction returns the replica of a node on which this
 * transaction has a remote transaction (it must keep reading there), or 0.
 */
static int32
ReplicaInTransaction(int32 nodeId)
{
	ListCell   *cell;

	if (!IsTransactionBlock())
		return 0;
	foreach(cell, ReplicaNodeList(nodeId, false))
	{
		WorkerNode *replica = lfirst(cell);
		List	   *conns = NodeConnectionList(replica->nodeId);
		ListCell   *c;

		foreach(c, conns)
		{
			if (((NodeConnection *) lfirst(c))->xactState != REMOTE_XACT_NONE)
				return replica->nodeId;
		}
	}
	return 0;
}

/* does this transaction have a remote transaction on a primary? */
static bool
AnyPrimaryInTransaction(void)
{
	List	   *all = AllNodeConnections();
	ListCell   *cell;
	bool		found = false;

	foreach(cell, all)
	{
		NodeConnection *conn = lfirst(cell);
		WorkerNode *node;

		if (conn->xactState == REMOTE_XACT_NONE)
			continue;
		node = LookupWorkerNode(conn->nodeId);
		if (node == NULL || !NodeIsReplica(node))
			found = true;
	}
	list_free(all);
	return found;
}

/*
 * ConnectReplicaTasks makes sure the first connection to each replica the
 * tasks use can be had, within shardext.replica_connect_timeout and
 * without waiting for a slot of the replica's pool: otherwise the
 * replica's tasks go to its primary, and every backend avoids a replica
 * that could not be reached for a while.  (More connections to a replica
 * are opened by the executor's slow start, with optional slots.)
 */
void
ConnectReplicaTasks(DistributedScanState *state)
{
	ListCell   *cell;
	List	   *checked = NIL;

	foreach(cell, state->tasks)
	{
		RemoteTask *task = lfirst(cell);
		int32		replicaId = task->nodeId;
		bool		unreachable;
		ListCell   *c;

		if (task->primaryNodeId == 0 || list_member_int(checked, replicaId))
			continue;
		checked = lappend_int(checked, replicaId);
		if (TryGetNodeConnectionByIndex(replicaId, 0, ShardextReplicaConnectTimeout,
										&unreachable) != NULL)
			continue;
		foreach(c, state->tasks)
		{
			RemoteTask *other = lfirst(c);

			if (other->nodeId == replicaId && other->primaryNodeId != 0)
				MoveTaskToPrimary(other, unreachable);
		}
	}
}

/*
 * MoveTaskToPrimary sends a replica's task to the replica's primary
 * instead; replicaFailed says the replica could not be used at all (every
 * backend then avoids it for a while).
 */
void
MoveTaskToPrimary(RemoteTask *task, bool replicaFailed)
{
	if (task->primaryNodeId == 0)
		return;
	if (replicaFailed)
		NoteReplicaFailure(task->nodeId, REPLICA_FAILURE_MEMORY_MS);
	CountReplicaFallback(task->nodeId);
	task->nodeId = task->primaryNodeId;
	task->primaryNodeId = 0;
	task->waitLsn = InvalidXLogRecPtr;
}

/*
 * RetryOnPrimary handles the failure of a replica's task that returned no
 * row yet, outside remote transactions: the connection is brought back to
 * idle (or closed), and the task -- with the rest of its batch and the
 * tasks still queued for the replica -- is queued on the replica's
 * primary, so that a replica that went down, lags behind a schema change,
 * cancelled the read for a recovery conflict or did not replay in time
 * never makes a read fail.  Takes ownership of result (may be NULL).
 * Returns false, and changes nothing, when the failure must be raised.
 */
bool
RetryOnPrimary(DistributedScanState *state, TaskConnection *tc, RemoteTask *task,
			   PGresult *result, bool closeConnection)
{
	NodeConnection *conn = tc->conn;
	List	   *moving;
	bool		broken;
	MemoryContext oldContext;
	ListCell   *cell;

	if (task == NULL || task->primaryNodeId == 0 || task->rowsSeen > 0 ||
		state->inTransaction || conn->xactState != REMOTE_XACT_NONE)
		return false;
	PQclear(result);
	broken = conn->pgConn == NULL || PQstatus(conn->pgConn) != CONNECTION_OK;
	if (broken || closeConnection ||
		(conn->queryInProgress && !DrainRemoteResults(conn, DRAIN_TIMEOUT_MS)))
		CloseNodeConnection(conn);
	conn->queryInProgress = false;
	ReleaseConnection(conn);

	oldContext = MemoryContextSwitchTo(state->execContext);
	moving = lcons(task, list_concat(tc->batch, tc->node->pending));
	tc->current = NULL;
	tc->batch = NIL;
	tc->node->pending = NIL;
	foreach(cell, moving)
	{
		RemoteTask *moved = lfirst(cell);

		MoveTaskToPrimary(moved, broken);
		moved->sent = false;
		moved->waitPending = false;
		RequeueTask(state, moved);
	}
	MemoryContextSwitchTo(oldContext);
	state->rerouted = true;
	return true;
}

/*
 * NoteAutocommitWrite records a write that committed on its own on the
 * node (read-your-writes), with the commit LSN the node reported.
 */
void
NoteAutocommitWrite(DistributedScanState *state, RemoteTask *task, NodeConnection *conn)
{
	if (state->inTransaction || state->job->kind == JOB_SELECT)
		return;
	NoteNodeWrite(task->nodeId, ReportedCommitLsn(conn));
}

/*
 * ReplicaWaitCommand returns the command that makes the replica of a task
 * wait for the LSN the read requires, or NULL when it need not wait.
 */
char *
ReplicaWaitCommand(RemoteTask *task)
{
	if (task->primaryNodeId == 0 || XLogRecPtrIsInvalid(task->waitLsn))
		return NULL;
	return psprintf("CALL shardext.wait_for_replay_lsn('%X/%X', %d)",
					LSN_FORMAT_ARGS(task->waitLsn), ShardextReplicaWaitTimeout);
}
