/*-------------------------------------------------------------------------
 *
 * task_queues.c
 *	  Which connections a distributed scan runs its tasks on: per-node task
 *	  queues, the first connection of each node, and "slow start".
 *
 * The tasks of a scan are queued per node, and each connection to a node
 * takes the node's next task when it is free.  The scan starts with one
 * connection per node, taken in the nodes' pool order (see
 * StartFirstNodeConnections) and opened in parallel: the executor's event
 * loop finishes connection attempts along with everything else.  Inside a
 * transaction (or when writing) that stays the only one, so the
 * transaction reads its own writes; otherwise more connections are added
 * while the node's tasks wait and all its connections stay busy: after
 * shardext.executor_slow_start_interval, one, then two at once, then
 * four..., up to shardext.max_connections_per_node and as long as the
 * node's shared pool has room; connections the session kept open from
 * earlier statements (when the pool could spare them) join at once.  Quick tasks (small shards) thus run one
 * after the other on one connection -- several in one query string, so
 * that they do not cost a round trip each (TaskBatchSize) -- and under load
 * a scan runs over as few connections as the pool gives it, down to one
 * per node.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/latch.h"
#include "utils/timestamp.h"

#include "shardext/connection.h"
#include "shardext/distributed_executor.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/remote_xact.h"

/* most tasks one query string carries (see TaskBatchSize) */
#define MAX_TASK_BATCH 16

static NodeTaskQueue *GetNodeTaskQueue(DistributedScanState *state, int32 nodeId);
static void OpenFirstConnections(DistributedScanState *state);
static TaskConnection *AddTaskConnection(DistributedScanState *state, NodeTaskQueue *queue,
										 NodeConnection *conn);
static bool NeedsAnotherConnection(DistributedScanState *state, NodeTaskQueue *queue);

/*
 * AssignTasksToConnections queues each task on its node, then makes sure
 * every node with tasks has a first connection (see the file header).
 * Inside a transaction a node's tasks must run on its first connection,
 * which a parallel COPY may have left out of the transaction.
 */
void
AssignTasksToConnections(DistributedScanState *state)
{
	ListCell   *cell;

	foreach(cell, state->tasks)
	{
		RemoteTask *task = lfirst(cell);
		NodeTaskQueue *queue = GetNodeTaskQueue(state, task->nodeId);

		queue->pending = lappend(queue->pending, task);
	}
	OpenFirstConnections(state);
}

/*
 * RequeueTask queues a task that was not run on its node again (a replica's
 * task moved to the primary, see replica_routing.c), opening the node's
 * first connection if the scan has none yet.
 */
void
RequeueTask(DistributedScanState *state, RemoteTask *task)
{
	NodeTaskQueue *queue = GetNodeTaskQueue(state, task->nodeId);

	queue->pending = lappend(queue->pending, task);
	OpenFirstConnections(state);
}

/* GetNodeTaskQueue returns the scan's queue of a node, making it if needed */
static NodeTaskQueue *
GetNodeTaskQueue(DistributedScanState *state, int32 nodeId)
{
	ListCell   *cell;
	NodeTaskQueue *queue;
	int			position = 0;

	foreach(cell, state->nodeQueues)
	{
		queue = lfirst(cell);
		if (queue->nodeId == nodeId)
			return queue;
		if (queue->nodeId < nodeId)
			position = foreach_current_index(cell) + 1;
	}

	if (state->inTransaction && NodeHasOtherConnectionInTransaction(nodeId, 0))
	{
		WorkerNode *node = GetWorkerNode(nodeId);

		/* a parallel COPY left its work on other connections */
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("cannot run a distributed query on node %s:%d after a parallel "
						"operation in the same transaction", node->host, node->port),
				 errhint("Run the query in its own transaction.")));
	}
	queue = palloc0(sizeof(NodeTaskQueue));
	queue->nodeId = nodeId;
	queue->burst = 1;
	state->nodeQueues = list_insert_nth(state->nodeQueues, position, queue);
	return queue;
}

/*
 * OpenFirstConnections gives every node with tasks its first connection,
 * in node id order (the queues are sorted): cached ones are used as they
 * are, missing ones start connecting and are finished by the event loop,
 * so that they open in parallel.
 */
static void
OpenFirstConnections(DistributedScanState *state)
{
	ListCell   *cell;
	List	   *nodeIds = NIL;
	List	   *queues = NIL;
	List	   *conns;
	ListCell   *connCell;
	TimestampTz now;

	foreach(cell, state->nodeQueues)
	{
		NodeTaskQueue *queue = lfirst(cell);

		if (queue->taskConns != NIL || queue->pending == NIL)
			continue;
		nodeIds = lappend_int(nodeIds, queue->nodeId);
		queues = lappend(queues, queue);
	}
	if (nodeIds == NIL)
		return;

	conns = StartFirstNodeConnections(nodeIds);
	now = GetCurrentTimestamp();
	forboth(cell, queues, connCell, conns)
	{
		NodeTaskQueue *queue = lfirst(cell);

		AddTaskConnection(state, queue, lfirst(connCell));
		queue->lastOpened = now;
	}
}

/* AddTaskConnection makes conn one of the connections of a node's queue */
static TaskConnection *
AddTaskConnection(DistributedScanState *state, NodeTaskQueue *queue, NodeConnection *conn)
{
	TaskConnection *tc = palloc0(sizeof(TaskConnection));

	tc->conn = conn;
	tc->node = queue;
	tc->batchSize = 1;
	queue->taskConns = lappend(queue->taskConns, tc);
	state->taskConns = lappend(state->taskConns, tc);
	if (conn->connecting)
		tc->connectEvents = ContinueNodeConnection(conn, false);
	return tc;
}

/*
 * AdvanceConnecting drives a connection that is being opened; returns
 * whether it is still being opened (then tc->connectEvents says what for).
 */
bool
AdvanceConnecting(TaskConnection *tc)
{
	if (!tc->conn->connecting)
		return false;
	tc->connectEvents = ContinueNodeConnection(tc->conn, tc->socketReady);
	tc->socketReady = false;
	return tc->connectEvents != 0;
}

/*
 * NeedsAnotherConnection: the slow start test of a node's queue (see the
 * file header), but for the interval.
 */
static bool
NeedsAnotherConnection(DistributedScanState *state, NodeTaskQueue *queue)
{
	ListCell   *cell;

	if (state->inTransaction || queue->pending == NIL || queue->poolFull ||
		list_length(queue->taskConns) >= ShardextMaxConnectionsPerNode)
		return false;
	foreach(cell, queue->taskConns)
	{
		TaskConnection *tc = lfirst(cell);

		/* a free or opening connection takes the next task */
		if (tc->current == NULL || tc->conn->connecting)
			return false;
	}
	return true;
}

/*
 * OpenMoreConnections is the slow start step: for each node that needs
 * another connection and has waited the interval, it opens up to
 * queue->burst more at once (optional slots of the shared pool), and
 * doubles the burst for the next step.
 */
void
OpenMoreConnections(DistributedScanState *state)
{
	ListCell   *cell;
	TimestampTz now = 0;

	foreach(cell, state->nodeQueues)
	{
		NodeTaskQueue *queue = lfirst(cell);
		int			opened = 0;

		if (!NeedsAnotherConnection(state, queue))
			continue;

		/* connections kept open from earlier statements join at once */
		while (list_length(queue->taskConns) < ShardextMaxConnectionsPerNode &&
			   opened < list_length(queue->pending) &&
			   CachedConnectionIsOpen(queue->nodeId, list_length(queue->taskConns)))
		{
			AddTaskConnection(state, queue,
							  StartNodeConnection(queue->nodeId, list_length(queue->taskConns),
												  POOL_SLOT_OPTIONAL));
			opened++;
		}
		if (opened > 0)
			continue;

		if (now == 0)
			now = GetCurrentTimestamp();
		if (!TimestampDifferenceExceeds(queue->lastOpened, now,
										ShardextExecutorSlowStartInterval))
			continue;
		while (opened < queue->burst && opened < list_length(queue->pending) &&
			   list_length(queue->taskConns) < ShardextMaxConnectionsPerNode)
		{
			NodeConnection *conn = StartNodeConnection(queue->nodeId,
													   list_length(queue->taskConns),
													   POOL_SLOT_OPTIONAL);

			if (conn == NULL)
			{
				queue->poolFull = true;
				break;
			}
			AddTaskConnection(state, queue, conn);
			opened++;
		}
		queue->lastOpened = now;
		queue->burst *= 2;
	}
}

/*
 * NextExecutorTimeout returns how long the event loop may sleep (-1: until
 * something happens): until the nearest connection attempt times out or
 * the next slow start step is due.
 */
long
NextExecutorTimeout(DistributedScanState *state)
{
	TimestampTz now = GetCurrentTimestamp();
	long		timeout = -1;
	ListCell   *cell;

	foreach(cell, state->taskConns)
	{
		TaskConnection *tc = lfirst(cell);

		if (tc->conn->connecting)
		{
			long		left = TimestampDifferenceMilliseconds(now, tc->conn->connectDeadline);

			timeout = timeout < 0 ? left : Min(timeout, left);
		}
	}
	foreach(cell, state->nodeQueues)
	{
		NodeTaskQueue *queue = lfirst(cell);

		if (NeedsAnotherConnection(state, queue))
		{
			long		left = TimestampDifferenceMilliseconds(now,
															   TimestampTzPlusMilliseconds(queue->lastOpened,
																						   ShardextExecutorSlowStartInterval));

			timeout = timeout < 0 ? left : Min(timeout, left);
		}
	}
	return timeout;
}

/*
 * TaskBatchSize: how many tasks of its node a connection takes at once.
 * One round trip per task is what dominates small tasks (small shards, or
 * workers a network hop away), so tasks without parameters of a scan
 * outside remote transactions go several in one query string when the
 * last send came back quickly: the size doubles (up to MAX_TASK_BATCH)
 * while sends complete within half the slow start interval, and falls back
 * to one otherwise, so that long tasks stay in the queue for the
 * connections slow start adds.  A batch takes at most its share of the
 * node's queue among the node's connections.
 */
int
TaskBatchSize(DistributedScanState *state, TaskConnection *tc)
{
	int			share;

	/* a repartition join's tasks each join a partition: never quick */
	if (state->inTransaction || state->job->usePrepared || state->job->repartition != NIL ||
		tc->batchSize <= 1)
		return 1;
	share = (list_length(tc->node->pending) + list_length(tc->node->taskConns) - 1) /
		list_length(tc->node->taskConns);
	return Max(1, Min(tc->batchSize, share));
}

/*
 * TaskBatchDone adapts the connection's batch size once its send has been
 * answered (see TaskBatchSize).
 */
void
TaskBatchDone(TaskConnection *tc)
{
	if (tc->node->pending == NIL)
		return;
	if (!TimestampDifferenceExceeds(tc->batchSent, GetCurrentTimestamp(),
									ShardextExecutorSlowStartInterval / 2))
		tc->batchSize = Min(Max(tc->batchSize, 1) * 2, MAX_TASK_BATCH);
	else
		tc->batchSize = 2;
}
