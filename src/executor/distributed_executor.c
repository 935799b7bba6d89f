/*-------------------------------------------------------------------------
 *
 * distributed_executor.c
 *	  Runs the tasks of a distributed CustomScan on the workers and returns
 *	  their rows.
 *
 * At the first fetch the scan builds its tasks (task_builder.c: one per
 * shard, per placement when it writes; shards locked in id order before
 * placements are looked at, so shard moves can block writes at cutover).
 * Tasks are queued per node, and every connection to a node takes the
 * node's next task when it is free; which connections a scan uses, and
 * when it opens more ("slow start"), is task_queues.c's part.  One event
 * loop drives everything, connection attempts included: results arrive in
 * single-row mode and are returned as they come.
 *
 * A task that opens its connection's remote transaction sends BEGIN in
 * the same round trip.  An implicit transaction's write on several nodes
 * also sends PREPARE TRANSACTION with each connection's (first and last)
 * task (PrepareWithTasks): two-phase commit then costs one round trip
 * less; the first such connection is left unprepared where it can commit
 * last as the decider (remote_xact.c), and the rest of the commit follows
 * as usual.
 *
 * A connection serves one task at a time.  When another scan (for example
 * the inner side of a nested loop) needs a connection that a scan is still
 * reading from, the rest of that task's rows are read into a tuplestore
 * first ("buffering"), and the first scan later returns them from there.
 *
 * Errors are relayed with the worker's SQLSTATE; connections left busy are
 * cancelled by the transaction abort callbacks (remote_xact.c for
 * transactional connections, ours for the rest).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "tcop/pquery.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/rel.h"

#include "shardext/connection.h"
#include "shardext/deparser.h"
#include "shardext/distributed_executor.h"
#include "shardext/global_index.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/read_your_writes.h"
#include "shardext/remote_command.h"
#include "shardext/remote_sql.h"
#include "shardext/remote_xact.h"
#include "shardext/replica_state.h"
#include "shardext/repartition.h"
#include "shardext/resource_lock.h"
#include "shardext/tenant_stats.h"

static CustomExecMethods DistributedExecMethods;

static void BeginDistributedScan(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *ExecDistributedScan(CustomScanState *node);
static void EndDistributedScan(CustomScanState *node);
static void ForgetSourceRows(DistributedScanState *state);
static void ReScanDistributedScan(CustomScanState *node);
static TupleTableSlot *DistributedScanNext(ScanState *node);
static bool DistributedScanRecheck(ScanState *node, TupleTableSlot *slot);
static void StartExecution(DistributedScanState *state);
static void SendFirstTasks(DistributedScanState *state);
static bool StartNextInsertBatch(DistributedScanState *state);
static void FinishScan(DistributedScanState *state);
static bool NextReturnedRowInOrder(DistributedScanState *state, TupleTableSlot *slot);
static void CollectReturnedRows(DistributedScanState *state);
static void SendNextTasks(DistributedScanState *state, TaskConnection *tc);
static void SendTaskBatch(DistributedScanState *state, TaskConnection *tc, List *tasks);
static void MakeConnectionAvailable(DistributedScanState *state, TaskConnection *tc);
static void FlushConnection(NodeConnection *conn);
static void SendTask(DistributedScanState *state, TaskConnection *tc, RemoteTask *task);
static void StartPipeline(NodeConnection *conn, const char *beginCommand,
						  const char *parseName, const char *sql, RemoteParams *params);
static void UseSingleRowMode(NodeConnection *conn);
static bool PipelineResult(NodeConnection *conn, PGresult **result);
static PGresult *NextRemoteResult(DistributedScanState *state, RemoteTask **taskOut);
static bool PollConnection(DistributedScanState *state, TaskConnection *tc,
						   PGresult **resultOut);
static void WaitForConnections(DistributedScanState *state);
static void WaitForSingleConnection(DistributedScanState *state, TaskConnection *tc,
									long timeout);
static bool TaskStatementName(DistributedScanState *state, TaskConnection *tc,
							  RemoteTask *task, char **name);
static void StoreRemoteRow(DistributedScanState *state, RemoteTask *task, PGresult *result,
						   TupleTableSlot *slot, MemoryContext context);
static void BufferTaskRows(DistributedScanState *owner, TaskConnection *tc);
static void AbandonExecution(DistributedScanState *state);
static bool IsWholeTopLevelStatement(EState *estate);
static bool PrepareWithTasks(DistributedScanState *state, EState *estate);
static bool AnyRemoteTransactionOpen(void);
static void ExecutorXactCallback(XactEvent event, void *arg);
static void NoteFailedNode(int32 nodeId);
static void ConnectionFailed(NodeConnection *conn);
static void ExecutorSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
									SubTransactionId parentSubid, void *arg);

/* nodes whose connections broke in this transaction (see FailedNodes) */
static List *failedNodeIds = NIL;

static void
NoteFailedNode(int32 nodeId)
{
	MemoryContext oldContext = MemoryContextSwitchTo(TopMemoryContext);

	failedNodeIds = list_append_unique_int(failedNodeIds, nodeId);
	MemoryContextSwitchTo(oldContext);
}

/* ConnectionFailed raises the failure of a connection, noting its node */
static void
ConnectionFailed(NodeConnection *conn)
{
	NoteFailedNode(conn->nodeId);
	ReportConnectionError(conn, ERROR);
}

/* ExecutorConnectionFailed is ConnectionFailed for the executor's other files */
void
ExecutorConnectionFailed(NodeConnection *conn)
{
	ConnectionFailed(conn);
}

/* registers the abort callbacks; called from _PG_init */
void
InitializeDistributedExecutor(void)
{
	DistributedExecMethods.CustomName = SHARDEXT_SCAN_NAME;
	DistributedExecMethods.BeginCustomScan = BeginDistributedScan;
	DistributedExecMethods.ExecCustomScan = ExecDistributedScan;
	DistributedExecMethods.EndCustomScan = EndDistributedScan;
	DistributedExecMethods.ReScanCustomScan = ReScanDistributedScan;
	DistributedExecMethods.ExplainCustomScan = ExplainDistributedScan;
	RegisterDistributedScanMethods();
	RegisterXactCallback(ExecutorXactCallback, NULL);
	RegisterSubXactCallback(ExecutorSubXactCallback, NULL);
}

Node *
CreateDistributedScanState(CustomScan *scan)
{
	DistributedScanState *state = palloc0(sizeof(DistributedScanState));

	NodeSetTag(state, T_CustomScanState);
	state->css.methods = &DistributedExecMethods;
	state->job = DistributedJobFromScan(scan);
	return (Node *) state;
}

static void
BeginDistributedScan(CustomScanState *node, EState *estate, int eflags)
{
	DistributedScanState *state = (DistributedScanState *) node;
	CustomScan *scan = (CustomScan *) node->ss.ps.plan;
	DistributedJob *job = state->job;
	List	   *exprStates = ExecInitExprList(scan->custom_exprs, (PlanState *) node);
	TupleDesc	desc = node->ss.ss_ScanTupleSlot->tts_tupleDescriptor;
	int			first = job->pruneCount + job->paramCount;

	state->pruneExprStates = list_copy_head(exprStates, job->pruneCount);
	state->paramExprStates = list_copy_head(list_copy_tail(exprStates, job->pruneCount),
											job->paramCount);
	state->insertExprStates = list_copy_tail(exprStates, first);

	state->execContext = AllocSetContextCreate(estate->es_query_cxt,
											   "shardext execution",
											   ALLOCSET_DEFAULT_SIZES);
	state->rowContext = AllocSetContextCreate(estate->es_query_cxt,
											  "shardext row",
											  ALLOCSET_DEFAULT_SIZES);
	/* the rows and tasks of one batch of an INSERT ... SELECT */
	if (job->insertFromSubplan)
		state->batchContext = AllocSetContextCreate(state->execContext,
													"shardext insert batch",
													ALLOCSET_DEFAULT_SIZES);
	if (scan->custom_plans != NIL)
		node->custom_ps = list_make1(ExecInitNode(linitial(scan->custom_plans), estate, eflags));
	if (job->gindexMode != GINDEX_NONE)
		BeginGlobalIndexMaintenance(state);

	/* which scan slot attribute each remote column fills */
	if (job->pullFallback)
	{
		ListCell   *cell;
		int			i = 0;

		state->remoteColumns = list_length(job->scanAttnums);
		state->columnAttnos = palloc(sizeof(AttrNumber) * Max(state->remoteColumns, 1));
		foreach(cell, job->scanAttnums)
			state->columnAttnos[i++] = lfirst_int(cell);
	}
	else
	{
		state->remoteColumns = desc->natts;
		state->columnAttnos = palloc(sizeof(AttrNumber) * desc->natts);
		for (int i = 0; i < desc->natts; i++)
			state->columnAttnos[i] = i + 1;
	}

	state->inputFunctions = palloc0(sizeof(FmgrInfo) * desc->natts);
	state->typioparams = palloc0(sizeof(Oid) * desc->natts);
	state->typmods = palloc0(sizeof(int32) * desc->natts);
	for (int i = 0; i < state->remoteColumns; i++)
	{
		int			index = state->columnAttnos[i] - 1;
		Form_pg_attribute attr = TupleDescAttr(desc, index);
		Oid			inputFunction;

		getTypeInputInfo(attr->atttypid, &inputFunction, &state->typioparams[index]);
		fmgr_info(inputFunction, &state->inputFunctions[index]);
		state->typmods[index] = attr->atttypmod;
	}
	state->bufferSlot = AllocTableSlot(&estate->es_tupleTable, desc, &TTSOpsMinimalTuple);
	InitScanReplay(state);
#ifdef SHARDEXT_CHECK_REMOTE_SCANS
	CheckRemoteScanColumns(state);
#endif
}

static TupleTableSlot *
ExecDistributedScan(CustomScanState *node)
{
	return ExecScan(&node->ss, DistributedScanNext, DistributedScanRecheck);
}

static bool
DistributedScanRecheck(ScanState *node, TupleTableSlot *slot)
{
	return true;
}

/*
 * DistributedScanNext returns the next row of any task, or an empty slot
 * when every task is done.
 */
static TupleTableSlot *
DistributedScanNext(ScanState *node)
{
	DistributedScanState *state = (DistributedScanState *) node;
	TupleTableSlot *slot = node->ss_ScanTupleSlot;
	RemoteTask *task;
	PGresult   *result;

	if (ReplayKeptRow(state, slot))
		return slot;
	if (!state->started)
		StartExecution(state);

	MemoryContextReset(state->rowContext);
	ExecClearTuple(slot);

	/* rows read ahead while another scan needed a connection come first */
	while (state->bufferedTasks != NIL)
	{
		RemoteTask *buffered = linitial(state->bufferedTasks);

		if (tuplestore_gettupleslot(buffered->buffer, true, false, state->bufferSlot))
		{
			ExecCopySlot(slot, state->bufferSlot);
			KeepScanRow(state, slot);
			return slot;
		}
		tuplestore_end(buffered->buffer);
		buffered->buffer = NULL;
		state->bufferedTasks = list_delete_first(state->bufferedTasks);
	}

	if (state->finished)
	{
		KeptRowsComplete(state);
		return slot;
	}
	for (;;)
	{
		if (state->orderReturning)
		{
			if (NextReturnedRowInOrder(state, slot))
				return slot;
		}
		else if ((result = NextRemoteResult(state, &task)) != NULL)
			break;
		/* the statement (or batch) is done: its global index entries follow */
		FinishGlobalIndexMaintenance(state);
		/* a write through the coordinator returns its rows once they are written */
		if (NextRoutedReturnedRow(state, slot))
			return slot;
		if (!StartNextInsertBatch(state))
		{
			FinishScan(state);
			KeptRowsComplete(state);
			return slot;
		}
	}
	PG_TRY();
	{
		StoreRemoteRow(state, task, result, slot, state->rowContext);
	}
	PG_FINALLY();
	{
		PQclear(result);
	}
	PG_END_TRY();
	KeepScanRow(state, slot);
	return slot;
}

/*
 * FinishScan notes that every task is done; the command tag is set right
 * after the run, so the rows written are counted now.
 */
static void
FinishScan(DistributedScanState *state)
{
	state->finished = true;
	if (state->job->kind != JOB_SELECT)
		state->css.ss.ps.state->es_processed += state->affectedRows;
	if (state->tenantSample != NULL)
	{
		TenantSampleEnd(state->tenantSample);
		state->tenantSample = NULL;
	}
}

/*
 * NextReturnedRowInOrder stores in slot the next RETURNING row of an INSERT
 * whose rows went to several shards, in the order of the rows, as
 * PostgreSQL does (clients match them to the rows they sent): the rows of
 * the statement or batch are collected first, then handed out by
 * position.  Returns false when the batch has no more.
 */
static bool
NextReturnedRowInOrder(DistributedScanState *state, TupleTableSlot *slot)
{
	if (state->orderedRows == NULL)
		CollectReturnedRows(state);
	while (state->orderedNext < state->insertRowCount)
	{
		MinimalTuple tuple = state->orderedRows[state->orderedNext++];

		if (tuple != NULL)
		{
			ExecStoreMinimalTuple(tuple, state->bufferSlot, false);
			ExecCopySlot(slot, state->bufferSlot);
			return true;
		}
	}
	return false;
}

/*
 * CollectReturnedRows reads the RETURNING rows of every task and puts them
 * at the places of the rows they came from.  A task given fewer rows back
 * than it inserted (ON CONFLICT DO NOTHING skipped some) does not say
 * which were skipped: its rows keep their order, at its first places.
 */
static void
CollectReturnedRows(DistributedScanState *state)
{
	TupleTableSlot *slot = state->css.ss.ss_ScanTupleSlot;
	MemoryContext taskContext = state->job->insertFromSubplan ?
		state->batchContext : state->execContext;
	RemoteTask *task;
	PGresult   *result;
	ListCell   *cell;

	while ((result = NextRemoteResult(state, &task)) != NULL)
	{
		MemoryContext oldContext;

		MemoryContextReset(state->rowContext);
		PG_TRY();
		{
			StoreRemoteRow(state, task, result, slot, state->rowContext);
		}
		PG_FINALLY();
		{
			PQclear(result);
		}
		PG_END_TRY();
		if (list_length(task->returnedRows) >= task->rowCount)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("shard " INT64_FORMAT " returned more rows than were inserted",
							task->shardId)));
		oldContext = MemoryContextSwitchTo(taskContext);
		task->returnedRows = lappend(task->returnedRows, ExecCopySlotMinimalTuple(slot));
		MemoryContextSwitchTo(oldContext);
	}
	ExecClearTuple(slot);

	state->orderedRows = MemoryContextAllocZero(taskContext, sizeof(MinimalTuple) *
												Max(state->insertRowCount, 1));
	state->orderedNext = 0;
	foreach(cell, state->tasks)
	{
		ListCell   *rowCell;
		int			k = 0;

		task = lfirst(cell);
		foreach(rowCell, task->returnedRows)
			state->orderedRows[task->rowPositions[k++]] = lfirst(rowCell);
	}
}

/*
 * StartNextInsertBatch starts the tasks of the next batch of an INSERT ...
 * SELECT; false when there is none.
 */
static bool
StartNextInsertBatch(DistributedScanState *state)
{
	MemoryContext oldContext;

	if (!state->job->insertFromSubplan || state->subplanDone)
		return false;
	state->tasks = NIL;
	state->tasksBuilt = false;
	MemoryContextReset(state->batchContext);
	BuildDistributedTasks(state);
	oldContext = MemoryContextSwitchTo(state->execContext);
	AssignTasksToConnections(state);
	MemoryContextSwitchTo(oldContext);
	SendFirstTasks(state);
	return true;
}

/*
 * StoreRemoteRow converts the text values of a single-row result into the
 * scan slot; unfetched attributes are NULL.  Hidden columns after the
 * scan's own (global index maintenance) are taken here, once per row.
 */
static void
StoreRemoteRow(DistributedScanState *state, RemoteTask *task, PGresult *result,
			   TupleTableSlot *slot, MemoryContext context)
{
	TupleDesc	desc = slot->tts_tupleDescriptor;
	MemoryContext oldContext;

	if (PQnfields(result) != state->remoteColumns && state->job->gindexMode == GINDEX_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("a worker returned %d columns where %d were expected",
						PQnfields(result), state->remoteColumns)));
#ifdef SHARDEXT_CHECK_REMOTE_SCANS
	CheckRemoteResultTypes(state, result);
#endif

	oldContext = MemoryContextSwitchTo(context);
	for (int i = 0; i < desc->natts; i++)
	{
		slot->tts_values[i] = (Datum) 0;
		slot->tts_isnull[i] = true;
	}
	for (int i = 0; i < state->remoteColumns; i++)
	{
		int			index = state->columnAttnos[i] - 1;
		char	   *value = PQgetisnull(result, 0, i) ? NULL : PQgetvalue(result, 0, i);

		slot->tts_values[index] = InputFunctionCall(&state->inputFunctions[index], value,
													state->typioparams[index],
													state->typmods[index]);
		slot->tts_isnull[index] = (value == NULL);
	}
	if (state->job->gindexMode != GINDEX_NONE)
		CaptureHiddenColumns(state, task, result);
	MemoryContextSwitchTo(oldContext);
	ExecStoreVirtualTuple(slot);
}

/*
 * IsWholeTopLevelStatement tells whether the executing plan is the entire
 * transaction a client asked for outside a transaction block: then a
 * single-shard write may commit on its own on the worker, without BEGIN.
 * Statements run by functions, DO blocks or SQL EXECUTE do not qualify;
 * neither does a statement of an extended-protocol pipeline (several
 * Execute messages before one Sync make one transaction, as JDBC batches
 * do): only an Execute followed by Sync is a transaction of its own.
 */
static bool
IsWholeTopLevelStatement(EState *estate)
{
	if (IsTransactionBlock() || ActivePortal == NULL ||
		GetCurrentTransactionNestLevel() != 1 || debug_query_string == NULL)
		return false;
	if (!(list_length(ActivePortal->stmts) == 1 &&
		  linitial(ActivePortal->stmts) == estate->es_plannedstmt))
		return false;

	/* simple protocol: one statement (several make a transaction block) */
	if (ActivePortal->sourceText == debug_query_string)
		return true;

	/* extended protocol: the portal's text is reported as a copy */
	if (strcmp(ActivePortal->sourceText, debug_query_string) != 0 ||
		(MyXactFlags & XACT_FLAGS_PIPELINING) || whereToSendOutput != DestRemote)
		return false;
	return PeekClientMessageType() == 'S';
}

/*
 * RemoteReadsInTransaction tells whether a read now must run in the remote
 * transactions: when this transaction has one anywhere (it reads its own
 * writes) or keeps a snapshot for the whole transaction.
 */
bool
RemoteReadsInTransaction(void)
{
	return AnyRemoteTransactionOpen() ||
		(IsTransactionBlock() && IsolationUsesXactSnapshot());
}

/*
 * ExecuteRemoteTasks runs tasks that are no scan's result -- global index
 * writes and lookups, the locking reads before an UPDATE -- to completion,
 * with the connection discipline of scans: inside the remote transactions
 * when inTransaction (writes always are), then on each node's first
 * connection, so tasks of one node run one after the other in list order;
 * the nodes in parallel.  The rows the tasks return are passed to callback
 * (which must not keep the PGresult).  Tasks need sql, params, nodeId,
 * shardId and returnsRows.
 */
void
ExecuteRemoteTasks(List *tasks, bool writes, bool inTransaction,
				   RemoteRowCallback callback, void *arg)
{
	DistributedScanState *state;
	DistributedJob *job;
	RemoteTask *task;
	PGresult   *result;

	if (tasks == NIL)
		return;

	/*
	 * A scan of its own: the abort callbacks find it through the connections
	 * it owns, so it lives in the caller's memory, which outlasts them.
	 */
	state = palloc0(sizeof(DistributedScanState));
	job = palloc0(sizeof(DistributedJob));
	job->kind = writes ? JOB_MODIFY : JOB_SELECT;
	job->anchor = -1;
	/* reads (index lookups) repeat their text: prepared once per connection */
	job->usePrepared = !writes;
	state->job = job;
	state->inTransaction = inTransaction || writes;
	state->subxactLevel = GetCurrentTransactionNestLevel();
	state->execContext = CurrentMemoryContext;
	state->tasks = tasks;
	state->tasksBuilt = true;
	AssignTasksToConnections(state);
	state->started = true;
	SendFirstTasks(state);
	while ((result = NextRemoteResult(state, &task)) != NULL)
	{
		PG_TRY();
		{
			if (callback != NULL)
				callback(task, result, arg);
		}
		PG_FINALLY();
		{
			PQclear(result);
		}
		PG_END_TRY();
	}
	state->finished = true;
}

/* has this transaction started a remote transaction anywhere? */
static bool
AnyRemoteTransactionOpen(void)
{
	List	   *all = AllNodeConnections();
	ListCell   *cell;
	bool		open = false;

	foreach(cell, all)
	{
		if (((NodeConnection *) lfirst(cell))->xactState != REMOTE_XACT_NONE)
			open = true;
	}
	list_free(all);
	return open;
}

/*
 * PrepareWithTasks tells whether a write that opens the remote transactions
 * of an implicit transaction (the whole top-level statement) and writes on
 * two nodes or more can send PREPARE TRANSACTION together with the task of
 * each connection (SendTask): the two-phase commit it needs then costs no
 * round trip of its own before the commit record, and the connections
 * prepare in parallel with the other nodes' statements.  Only writes whose
 * tasks are all known now, that return no rows (no RETURNING expression
 * can run more remote work), and that are allowed to commit on several
 * nodes qualify, and not under EXPLAIN ANALYZE (which asks the nodes for
 * their plans afterwards).  The prepared connections take no further
 * command (RemoteTransactionBeginCommand refuses); one connection may stay
 * unprepared to commit last (RemoteTransactionPrepareWithStatement), and
 * the rest of the commit follows as usual (remote_xact.c).
 */
static bool
PrepareWithTasks(DistributedScanState *state, EState *estate)
{
	DistributedJob *job = state->job;
	int32		firstNode = 0;
	ListCell   *cell;

	if ((job->kind != JOB_INSERT && job->kind != JOB_MODIFY) || job->hasReturning ||
		job->insertFromSubplan || job->locksRows ||
		(job->gindexMode != GINDEX_NONE && job->gindexMode != GINDEX_INSERT_ROWS) ||
		ShardextMultiNodeCommit == MULTI_NODE_COMMIT_REJECT ||
		estate->es_instrument != 0 || !IsWholeTopLevelStatement(estate))
		return false;
	foreach(cell, state->tasks)
	{
		RemoteTask *task = lfirst(cell);

		if (firstNode == 0)
			firstNode = task->nodeId;
		else if (task->nodeId != firstNode)
			return true;
	}
	return false;
}

/*
 * StartExecution builds the tasks, puts them on connections and sends the
 * first task of each connection.
 */
static void
StartExecution(DistributedScanState *state)
{
	EState	   *estate = state->css.ss.ps.state;
	DistributedJob *job = state->job;
	bool		modifies = job->kind != JOB_SELECT || job->locksRows;
	bool		firstRemote;
	MemoryContext oldContext;

	BuildDistributedTasks(state);
	if (job->gindexMode == GINDEX_LOCK_THEN_UPDATE)
		LockRowsBeforeUpdate(state);

	/*
	 * Remote transactions are needed for writes and row locks, which must
	 * last until the end of the transaction (except a single-shard
	 * statement that is the whole top-level statement: it commits on its
	 * own; an INSERT ... SELECT may send more batches later, so never), to read this transaction's earlier writes, and for the
	 * snapshot of a REPEATABLE READ or SERIALIZABLE transaction block.  A
	 * READ COMMITTED read takes a new snapshot per statement anyway.
	 */
	firstRemote = !AnyRemoteTransactionOpen();
	state->inTransaction = !firstRemote ||
		(IsTransactionBlock() && IsolationUsesXactSnapshot()) ||
		(job->gindexMode != GINDEX_NONE && job->gindexMode != GINDEX_INSERT_ROWS) ||
		(modifies && !(list_length(state->tasks) == 1 && !job->insertFromSubplan &&
					   IsWholeTopLevelStatement(estate)));
	state->prepareWithTasks = state->inTransaction && firstRemote &&
		PrepareWithTasks(state, estate);
	state->subxactLevel = GetCurrentTransactionNestLevel();

	/* replicas that cannot be reached leave their tasks to the primaries */
	ConnectReplicaTasks(state);
	oldContext = MemoryContextSwitchTo(state->execContext);
	AssignTasksToConnections(state);
	MemoryContextSwitchTo(oldContext);
	state->started = true;
	SendFirstTasks(state);
}

/* SendFirstTasks starts a task on every idle connection that is ready */
static void
SendFirstTasks(DistributedScanState *state)
{
	ListCell   *cell;

	foreach(cell, state->taskConns)
	{
		TaskConnection *tc = lfirst(cell);

		if (!tc->conn->connecting)
			SendNextTasks(state, tc);
	}
}

/*
 * SendNextTasks starts the next task of its node (or a batch of them, see
 * TaskBatchSize) on a connection that is free and ready.
 */
static void
SendNextTasks(DistributedScanState *state, TaskConnection *tc)
{
	List	   *tasks = NIL;
	int			size;

	if (tc->current != NULL || tc->node->pending == NIL || tc->conn->connecting)
		return;
	size = TaskBatchSize(state, tc);
	while (list_length(tasks) < size && tc->node->pending != NIL)
	{
		RemoteTask *task = linitial(tc->node->pending);

		if (tasks != NIL && task->params->count > 0)
			break;
		tasks = lappend(tasks, task);
		tc->node->pending = list_delete_first(tc->node->pending);
	}
	if (list_length(tasks) == 1)
		SendTask(state, tc, linitial(tasks));
	else
		SendTaskBatch(state, tc, tasks);
	list_free(tasks);
	if (tc->node->pending != NIL)
		tc->batchSent = GetCurrentTimestamp();
}

/*
 * SendTaskBatch sends several tasks (without parameters, outside remote
 * transactions) as one query string, in single-row mode: their results
 * come one statement after the other, and PollConnection moves on to the
 * next task at the end of each.
 */
static void
SendTaskBatch(DistributedScanState *state, TaskConnection *tc, List *tasks)
{
	NodeConnection *conn = tc->conn;
	StringInfoData sql;
	ListCell   *cell;

	Assert(!state->inTransaction && list_length(tasks) > 1);
	MakeConnectionAvailable(state, tc);
	SyncRemoteTimeZone(conn);
	initStringInfo(&sql);
	/* the tasks of a node share its server: one wait for the replica does */
	if (ReplicaWaitCommand(linitial(tasks)) != NULL)
	{
		appendStringInfoString(&sql, ReplicaWaitCommand(linitial(tasks)));
		((RemoteTask *) linitial(tasks))->waitPending = true;
	}
	foreach(cell, tasks)
	{
		RemoteTask *task = lfirst(cell);

		appendStringInfo(&sql, "%s%s", sql.len > 0 ? ";" : "", task->sql);
		task->taskConn = tc;
		task->sent = true;
		CountShardQuery(task->shardId);
	}
	tc->current = linitial(tasks);
	tc->batch = list_copy_tail(tasks, 1);
	if (!PQsendQuery(conn->pgConn, sql.data) ||
		(tc->current->primaryNodeId != 0 && !FlushOutput(conn)))
	{
		if (RetryOnPrimary(state, tc, tc->current, NULL, true))
			return;
		ConnectionFailed(conn);
	}
	pfree(sql.data);
	conn->queryInProgress = true;
	UseSingleRowMode(conn);
	FlushConnection(conn);

	GetConnectionExecState(conn)->owner = state;
}

/*
 * MakeConnectionAvailable makes sure nothing else is in flight on a
 * connection before a task is sent: another scan's task is buffered, and
 * leftovers of an abandoned command are drained.
 */
static void
MakeConnectionAvailable(DistributedScanState *state, TaskConnection *tc)
{
	NodeConnection *conn = tc->conn;
	ConnectionExecState *es = GetConnectionExecState(conn);

	if (es->owner != NULL && es->owner != state)
	{
		DistributedScanState *owner = es->owner;
		ListCell   *cell;

		foreach(cell, owner->taskConns)
		{
			TaskConnection *ownerConn = lfirst(cell);

			if (ownerConn->conn == conn && ownerConn->current != NULL)
				BufferTaskRows(owner, ownerConn);
		}
		es->owner = NULL;
	}
	if (conn->queryInProgress && !DrainRemoteResults(conn, DRAIN_TIMEOUT_MS))
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("connection to node %s:%d is busy", conn->host, conn->port)));
}

static void
FlushConnection(NodeConnection *conn)
{
	if (!FlushOutput(conn))
		ConnectionFailed(conn);
}

/*
 * SendTask starts a task on its connection (inside the remote transaction
 * when the scan runs in one) and switches the connection to single-row
 * mode.  When the remote transaction has yet to begin and the task has no
 * parameters, BEGIN goes in the same simple query as the task.
 */
static void
SendTask(DistributedScanState *state, TaskConnection *tc, RemoteTask *task)
{
	NodeConnection *conn = tc->conn;
	RemoteParams *params = task->params;
	ConnectionExecState *es;
	char	   *statementName = NULL;
	char	   *beginCommand = NULL;
	char	   *prepareCommand = NULL;
	bool		parse = false;
	int			ok;

	MakeConnectionAvailable(state, tc);
	if (state->inTransaction)
	{
		/* a refused write (multi_node_commit) must leave no trace: check first */
		if (state->job->kind != JOB_SELECT)
			RemoteTransactionMarkModified(conn);
		beginCommand = RemoteTransactionBeginCommand(conn);

		/*
		 * The connection's first and last task of the statement: its remote
		 * transaction ends with it (see PrepareWithTasks).
		 */
		if (state->prepareWithTasks && beginCommand != NULL &&
			strchr(beginCommand, ';') == NULL && tc->node->pending == NIL)
			prepareCommand = RemoteTransactionPrepareWithStatement(conn);
	}
	else if ((beginCommand = ReplicaWaitCommand(task)) != NULL)
		task->waitPending = true;	/* runs ahead like BEGIN */
	SyncRemoteTimeZone(conn);

	/* a replica must prepare first: one that cannot leaves the task to its primary */
	if (state->job->usePrepared && task->primaryNodeId != 0)
	{
		if (!TaskStatementName(state, tc, task, &statementName))
			return;				/* moved to the primary */
	}
	else if (state->job->usePrepared)
		statementName = StatementToRun(conn, task->sql, &parse);

	/*
	 * A statement with parameters cannot share a simple query with BEGIN;
	 * a pipeline sends both at once, and the Parse of a statement being
	 * prepared.  Savepoints still take a round trip.
	 */
	if (beginCommand != NULL && strchr(beginCommand, ';') != NULL &&
		(parse || statementName != NULL || params->count > 0))
	{
		ExecuteRemoteCommand(conn, beginCommand);
		beginCommand = NULL;
	}
	if (parse || (beginCommand != NULL && (statementName != NULL || params->count > 0)))
	{
		StartPipeline(conn, beginCommand, parse ? statementName : NULL, task->sql, params);
		beginCommand = NULL;
	}

	if (beginCommand != NULL)
	{
		/* BEGIN (and savepoints) travel with the statement: no round trip */
		char	   *combined = psprintf("%s;%s%s%s", beginCommand, task->sql,
										prepareCommand != NULL ? ";" : "",
										prepareCommand != NULL ? prepareCommand : "");

		ok = PQsendQuery(conn->pgConn, combined);
		pfree(combined);
	}
	else if (statementName != NULL)
		ok = PQsendQueryPrepared(conn->pgConn, statementName, params->count,
								 params->values, params->lengths, params->formats, 0);
	else
		ok = PQsendQueryParams(conn->pgConn, task->sql, params->count, params->types,
							   params->values, params->lengths, params->formats, 0);
	if (conn->pipelineStage != PIPELINE_NONE)
	{
		/* PipelineResult reads PREPARE's result after the statement's */
		if (prepareCommand != NULL)
			ok = ok && PQsendQueryParams(conn->pgConn, prepareCommand, 0, NULL, NULL, NULL,
										 NULL, 0);
		ok = ok && PQpipelineSync(conn->pgConn);
	}
	if (!ok || (task->primaryNodeId != 0 && !FlushOutput(conn)))
	{
		tc->current = task;
		if (RetryOnPrimary(state, tc, task, NULL, true))
			return;
		ConnectionFailed(conn);
	}
	conn->queryInProgress = true;
	if (conn->pipelineStage == PIPELINE_NONE)
		UseSingleRowMode(conn);
	FlushConnection(conn);

	es = GetConnectionExecState(conn);
	es->owner = state;
	tc->current = task;
	task->taskConn = tc;
	task->sent = true;
	CountShardQuery(task->shardId);
}

/*
 * TaskStatementName sets *name to the prepared statement of the task on
 * its connection (see PreparedStatementName).  On a replica, a failure to
 * prepare (it lags behind a schema change, or is gone) moves the task to
 * the primary: then it returns false.
 */
static bool
TaskStatementName(DistributedScanState *state, TaskConnection *tc, RemoteTask *task,
				  char **name)
{
	NodeConnection *conn = tc->conn;
	bool		failed = false;
	PGresult   *error = NULL;

	*name = PreparedStatementName(conn, task->sql, task->params,
								  task->primaryNodeId != 0 ? &failed : NULL, &error);
	if (!failed)
		return true;
	tc->current = task;
	if (RetryOnPrimary(state, tc, task, error, error == NULL))
		return false;
	tc->current = NULL;
	if (error != NULL)
		ReportRemoteError(conn, error, ERROR, task->sql);
	ConnectionFailed(conn);
	return false;				/* keep compiler quiet */
}

/*
 * NextRemoteResult drives every connection of the scan until one returns
 * a row of a task whose rows count; returns NULL when all tasks are done.
 * The caller must PQclear the result.
 */
static PGresult *
NextRemoteResult(DistributedScanState *state, RemoteTask **taskOut)
{
	for (;;)
	{
		int			count = list_length(state->taskConns);
		bool		active = false;

		for (int i = 0; i < count; i++)
		{
			TaskConnection *tc = list_nth(state->taskConns, (state->nextConn + i) % count);
			PGresult   *result = NULL;

			if (AdvanceConnecting(tc))
			{
				active = true;
				continue;
			}
			SendNextTasks(state, tc);
			if (tc->current == NULL)
				continue;
			if (PollConnection(state, tc, &result))
			{
				*taskOut = tc->current;
				state->nextConn = (state->nextConn + i) % count;
				return result;
			}
			if (tc->current == NULL && tc->node->pending != NIL)
			{
				/* finished a task: start the next one right away */
				i--;
				continue;
			}
			if (tc->current != NULL)
				active = true;
		}
		if (state->rerouted)
		{
			/* tasks moved to other connections: send them before waiting */
			state->rerouted = false;
			continue;
		}
		if (!active)
			return NULL;
		OpenMoreConnections(state);
		WaitForConnections(state);
	}
}

/*
 * StartPipeline puts a connection in pipeline mode and queues what runs
 * ahead of a statement: BEGIN (beginCommand, unless NULL) and the Parse of
 * the statement as parseName (unless NULL); the statement and a Sync
 * follow (see SendTask), and PipelineResult reads the results.
 */
static void
StartPipeline(NodeConnection *conn, const char *beginCommand, const char *parseName,
			  const char *sql, RemoteParams *params)
{
	if (!PQenterPipelineMode(conn->pgConn))
		ConnectionFailed(conn);
	conn->pipelineLeading = 0;
	if (beginCommand != NULL)
	{
		if (!PQsendQueryParams(conn->pgConn, beginCommand, 0, NULL, NULL, NULL, NULL, 0))
			ConnectionFailed(conn);
		conn->pipelineLeading++;
	}
	if (parseName != NULL)
	{
		if (!PQsendPrepare(conn->pgConn, parseName, sql, params->count, params->types))
			ConnectionFailed(conn);
		conn->pipelineLeading++;
	}
	else
		GetConnectionExecState(conn)->parsingNumber = 0;	/* none in flight */
	conn->pipelineStage = PIPELINE_BEGIN;
}

/*
 * UseSingleRowMode makes the statement at the head of the connection's
 * queue return its rows one at a time, which PollConnection relies on.
 */
static void
UseSingleRowMode(NodeConnection *conn)
{
	if (!PQsetSingleRowMode(conn->pgConn))
		elog(ERROR, "could not use single-row mode on node %s:%d", conn->host, conn->port);
}

/*
 * PipelineResult follows a pipelined BEGIN and/or Parse and statement
 * (and PREPARE TRANSACTION, when the connection was prepared with its
 * task) through their results: it consumes those of BEGIN, the Parse and
 * PREPARE, the ends of commands and the Sync, and returns true for what
 * is the statement's (*result) or an error of the others, or true with a
 * NULL *result at the end of the pipeline, as for a statement sent alone.
 */
static bool
PipelineResult(NodeConnection *conn, PGresult **result)
{
	PGresult   *r = *result;

	switch (conn->pipelineStage)
	{
		case PIPELINE_BEGIN:
			if (r == NULL)
			{
				if (--conn->pipelineLeading > 0)
					return false;
				conn->pipelineStage = PIPELINE_STATEMENT;
				UseSingleRowMode(conn);
			}
			else if (PQresultStatus(r) != PGRES_COMMAND_OK)
				return true;	/* the caller raises the error (or retries) */
			else
			{
				/* the Parse, when there is one, comes last */
				if (conn->pipelineLeading == 1)
					StatementParsed(conn);
				PQclear(r);
			}
			return false;
		case PIPELINE_STATEMENT:
			if (r != NULL)
				return true;
			/* PREPARE TRANSACTION was sent after the statement (SendTask) */
			conn->pipelineStage = conn->xactState == REMOTE_XACT_PREPARED ?
				PIPELINE_PREPARE : PIPELINE_SYNC;
			return false;
		case PIPELINE_PREPARE:
			if (r == NULL)
				conn->pipelineStage = PIPELINE_SYNC;
			else if (PQresultStatus(r) != PGRES_COMMAND_OK)
				return true;	/* the caller raises the error */
			else
				PQclear(r);
			return false;
		case PIPELINE_SYNC:
			if (r == NULL || PQresultStatus(r) != PGRES_PIPELINE_SYNC)
				elog(ERROR, "unexpected result from node %s:%d at the end of a pipeline",
					 conn->host, conn->port);
			PQclear(r);
			if (!PQexitPipelineMode(conn->pgConn))
				ConnectionFailed(conn);
			conn->pipelineStage = PIPELINE_NONE;
			*result = NULL;
			return true;
		case PIPELINE_NONE:
			break;
	}
	return true;
}

/*
 * PollConnection reads what has arrived on a connection without waiting.
 * Returns true with a row in *resultOut; false when more input is needed
 * or its task finished (then tc->current is NULL).
 */
static bool
PollConnection(DistributedScanState *state, TaskConnection *tc, PGresult **resultOut)
{
	NodeConnection *conn = tc->conn;
	RemoteTask *task = tc->current;

	while (!PQisBusy(conn->pgConn))
	{
		PGresult   *result = PQgetResult(conn->pgConn);

		if (conn->pipelineStage != PIPELINE_NONE && !PipelineResult(conn, &result))
			continue;
		if (result == NULL)
		{
			conn->queryInProgress = false;
			task->done = true;
			tc->current = NULL;
			tc->batch = NIL;
			ReleaseConnection(conn);
			TaskBatchDone(tc);
			NoteAutocommitWrite(state, task, conn);
			if (task->primaryNodeId != 0)
				CountReplicaRead(task->nodeId);
			return false;
		}
		switch (PQresultStatus(result))
		{
			case PGRES_SINGLE_TUPLE:
				if (task->returnsRows)
				{
					task->rowsSeen++;
					*resultOut = result;
					return true;
				}
				PQclear(result);
				break;
			case PGRES_TUPLES_OK:
			case PGRES_COMMAND_OK:
				if (task->waitPending)
				{
					/* the replica's wait ahead of the statement ended */
					task->waitPending = false;
					PQclear(result);
					break;
				}
				{
					char	   *tuples = PQcmdTuples(result);

					if (tuples[0] != '\0')
					{
						task->affectedRows = strtoull(tuples, NULL, 10);
						if (task->returnsRows)
							state->affectedRows += task->affectedRows;
					}
					if (task->checkRows && task->affectedRows != task->expectedRows)
						ereport(ERROR,
								(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
								 errmsg("could not serialize access due to concurrent update"),
								 errdetail("Shard " INT64_FORMAT " changed " UINT64_FORMAT " of the " UINT64_FORMAT " rows the statement read through the coordinator; the others were changed by another transaction first.",
										   task->shardId, task->affectedRows, task->expectedRows),
								 errhint("Run the statement again.")));
					PQclear(result);
					if (tc->batch != NIL)
					{
						/* the end of one statement of a batch: the next task's results follow */
						task->done = true;
						task = tc->current = linitial(tc->batch);
						tc->batch = list_delete_first(tc->batch);
					}
					break;
				}
			default:
				if (RetryOnPrimary(state, tc, task, result, false))
					return false;
				if (PQstatus(conn->pgConn) == CONNECTION_BAD)
					NoteFailedNode(conn->nodeId);
				/* an error ends the query: PREPARE sent with it did not run */
				else if (state->prepareWithTasks && conn->xactState == REMOTE_XACT_PREPARED)
					RemoteTransactionPrepareFailed(conn);
				if (task->uniqueShards != NIL)
					ReportUniqueViolation(conn, result, task);
				ForgetStatementsIfStale(conn, result);
				ReportRemoteError(conn, result, ERROR, task->sql);
		}
	}
	return false;
}

/* ReleaseConnection: no scan owns the connection's results any more */
void
ReleaseConnection(NodeConnection *conn)
{
	ConnectionExecState *es = conn->executorState;

	if (es != NULL)
		es->owner = NULL;
}

/*
 * WaitForSingleConnection waits for input on one connection (or an
 * interrupt, or timeout ms: -1 for none), with the wait set the connection
 * keeps (see WaitOnNodeConnection): a scan of one shard is the common
 * case.
 */
static void
WaitForSingleConnection(DistributedScanState *state, TaskConnection *tc, long timeout)
{
	NodeConnection *conn = tc->conn;
	int			rc = WaitOnNodeConnection(conn, WL_SOCKET_READABLE, timeout);

	if (rc & WL_LATCH_SET)
	{
		ResetLatch(MyLatch);
		ServeNodeWaitInterrupts();
	}
	else if (rc & WL_SOCKET_READABLE)
	{
		if (!PQconsumeInput(conn->pgConn) &&
			!RetryOnPrimary(state, tc, tc->current, NULL, true))
			ConnectionFailed(conn);
	}
}

/*
 * WaitForConnections sleeps until a busy connection has input, a
 * connection being opened can go on, an interrupt arrives, or the next
 * timeout of the scan (NextExecutorTimeout); input is consumed.
 */
static void
WaitForConnections(DistributedScanState *state)
{
	WaitEventSet *set;
	WaitEvent	events[16];
	int			count;
	ListCell   *cell;
	int			waiting = 0;
	TaskConnection *only = NULL;
	long		timeout = NextExecutorTimeout(state);

	foreach(cell, state->taskConns)
	{
		TaskConnection *tc = lfirst(cell);

		if (tc->current != NULL || tc->conn->connecting)
		{
			waiting++;
			only = tc;
		}
	}
	if (waiting == 0)
		return;
	if (waiting == 1 && !only->conn->connecting)
	{
		WaitForSingleConnection(state, only, timeout);
		return;
	}

	set = CreateTransientWaitEventSet(waiting + 2);
	AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	foreach(cell, state->taskConns)
	{
		TaskConnection *tc = lfirst(cell);

		if (tc->conn->connecting)
			AddWaitEventToSet(set, tc->connectEvents, PQsocket(tc->conn->pgConn), NULL, tc);
		else if (tc->current != NULL)
			AddWaitEventToSet(set, WL_SOCKET_READABLE, PQsocket(tc->conn->pgConn), NULL, tc);
	}
	count = WaitEventSetWait(set, timeout, events, lengthof(events), PG_WAIT_EXTENSION);
	FreeWaitEventSet(set);

	for (int i = 0; i < count; i++)
	{
		if (events[i].events & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			ServeNodeWaitInterrupts();
		}
		else if (events[i].events & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE))
		{
			TaskConnection *tc = events[i].user_data;

			if (tc->conn->connecting)
				tc->socketReady = true;
			else if (!PQconsumeInput(tc->conn->pgConn) &&
					 !RetryOnPrimary(state, tc, tc->current, NULL, true))
				ConnectionFailed(tc->conn);
		}
	}
}

/*
 * BufferTaskRows reads the rest of a scan's task on a connection into a
 * tuplestore, freeing the connection for someone else.
 */
static void
BufferTaskRows(DistributedScanState *owner, TaskConnection *tc)
{
	RemoteTask *task = NULL;
	TupleDesc	desc = owner->css.ss.ss_ScanTupleSlot->tts_tupleDescriptor;
	MemoryContext oldContext = MemoryContextSwitchTo(owner->execContext);
	MemoryContext convertContext;
	TupleTableSlot *tmp;
	PGresult   *result;

	/* everything that outlives this call belongs to the owner's execution */
	tmp = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	convertContext = AllocSetContextCreate(owner->execContext, "shardext buffering",
										   ALLOCSET_DEFAULT_SIZES);

	/* the task in flight, and those of its batch */
	while (tc->current != NULL)
	{
		if (tc->current != task)
		{
			task = tc->current;
			if (task->buffer == NULL)
				task->buffer = tuplestore_begin_heap(false, false, work_mem);
			owner->bufferedTasks = lappend(owner->bufferedTasks, task);
		}
		result = NULL;
		if (PollConnection(owner, tc, &result))
		{
			PG_TRY();
			{
				StoreRemoteRow(owner, task, result, tmp, convertContext);
				tuplestore_puttupleslot(task->buffer, tmp);
			}
			PG_FINALLY();
			{
				PQclear(result);
			}
			PG_END_TRY();
			ExecClearTuple(tmp);
			MemoryContextReset(convertContext);
			continue;
		}
		if (tc->current == task)
			WaitForSingleConnection(owner, tc, -1L);
	}
	ExecDropSingleTupleTableSlot(tmp);
	MemoryContextDelete(convertContext);
	MemoryContextSwitchTo(oldContext);
}

/*
 * AbandonExecution stops whatever the scan still has in flight: outside
 * remote transactions the command is cancelled, inside them its results are
 * read and dropped (a cancel would abort the remote transaction).
 */
static void
AbandonExecution(DistributedScanState *state)
{
	List	   *toCancel = NIL;
	List	   *failed;
	ListCell   *cell;

	/* all cancels at once: hung nodes cost one wait, not one per connection */
	foreach(cell, state->taskConns)
	{
		TaskConnection *tc = lfirst(cell);

		if (tc->current != NULL && tc->conn->xactState == REMOTE_XACT_NONE)
			toCancel = list_append_unique_ptr(toCancel, tc->conn);
	}
	failed = CancelRemoteCommands(toCancel, DRAIN_TIMEOUT_MS);
	foreach(cell, state->taskConns)
	{
		TaskConnection *tc = lfirst(cell);
		NodeConnection *conn = tc->conn;

		tc->node->pending = NIL;
		tc->batch = NIL;
		if (tc->current == NULL)
			continue;
		if (conn->xactState != REMOTE_XACT_NONE)
			(void) DrainRemoteResults(conn, DRAIN_TIMEOUT_MS);
		else if (list_member_ptr(failed, conn))
			CloseNodeConnection(conn);
		tc->current = NULL;
		ReleaseConnection(conn);
	}
	list_free(toCancel);
	list_free(failed);
}

static void
EndDistributedScan(CustomScanState *node)
{
	DistributedScanState *state = (DistributedScanState *) node;

	/*
	 * A write that maintains global indexes whose caller stopped reading its
	 * RETURNING rows (SPI with a row limit) runs to the end, as
	 * PostgreSQL's ModifyTable does: its index entries come at the end.
	 */
	if (state->started && !state->finished && state->job->gindexMode != GINDEX_NONE)
	{
		while (!TupIsNull(DistributedScanNext(&node->ss)))
			CHECK_FOR_INTERRUPTS();
	}
	if (state->started)
		AbandonExecution(state);
	EndRepartitionExchange(state);
	ForgetSourceRows(state);
	EndScanReplay(state);
	EndGlobalIndexChanges(state->gindexChanges);
	if (node->custom_ps != NIL)
		ExecEndNode(linitial(node->custom_ps));
}

/* releases the rows an INSERT ... SELECT read before writing */
static void
ForgetSourceRows(DistributedScanState *state)
{
	if (state->sourceSlot != NULL)
		ExecDropSingleTupleTableSlot(state->sourceSlot);
	if (state->sourceRows != NULL)
		tuplestore_end(state->sourceRows);
	state->sourceSlot = NULL;
	state->sourceRows = NULL;
}

static void
ReScanDistributedScan(CustomScanState *node)
{
	DistributedScanState *state = (DistributedScanState *) node;

	if (RescanFromKeptRows(state))
	{
		ExecScanReScan(&node->ss);
		return;
	}
	if (state->started)
		AbandonExecution(state);
	EndRepartitionExchange(state);
	state->exchange = NULL;
	state->started = false;
	state->finished = false;
	state->tasksBuilt = false;
	state->tasks = NIL;
	state->nodeQueues = NIL;
	state->taskConns = NIL;
	state->bufferedTasks = NIL;
	state->nextConn = 0;
	state->subplanDone = false;
	state->orderReturning = false;
	state->orderedRows = NULL;
	ForgetSourceRows(state);
	ResetRoutedWrite(state);
	MemoryContextReset(state->execContext);
	if (state->job->insertFromSubplan)
		state->batchContext = AllocSetContextCreate(state->execContext,
													"shardext insert batch",
													ALLOCSET_DEFAULT_SIZES);
	if (node->custom_ps != NIL)
		ExecReScan(linitial(node->custom_ps));
	ExecScanReScan(&node->ss);
}

/*
 * After an error, scans are gone: forget which scan owned a connection.
 * Connections in remote transactions are cleaned by remote_xact.c; busy
 * ones outside them are cancelled here.
 */
static void
ForgetOwners(int level)
{
	List	   *all = AllNodeConnections();
	List	   *toCancel = NIL;
	List	   *failed;
	ListCell   *cell;

	foreach(cell, all)
	{
		NodeConnection *conn = lfirst(cell);
		ConnectionExecState *es = conn->executorState;

		if (es == NULL || es->owner == NULL)
			continue;
		if (level > 0 && es->owner->subxactLevel < level)
			continue;
		es->owner = NULL;
		if (conn->queryInProgress && conn->xactState == REMOTE_XACT_NONE)
			toCancel = lappend(toCancel, conn);
	}
	/* all cancels at once: hung nodes cost one wait, not one per connection */
	failed = CancelRemoteCommands(toCancel, DRAIN_TIMEOUT_MS);
	foreach(cell, failed)
		CloseNodeConnection(lfirst(cell));
	list_free(failed);
	list_free(toCancel);
	list_free(all);
}

/*
 * FailedNodes / CloseConnectionsToNodes: when a connection to a node broke, the
 * other cached connections to it (idle, so not known to be broken yet) most
 * likely are too; closing them lets the next statement reconnect instead of
 * failing on a dead socket.  Called at the end of a failed transaction.
 */
static List *
FailedNodes(void)
{
	List	   *all = AllNodeConnections();
	List	   *failedNodes = list_copy(failedNodeIds);
	ListCell   *cell;

	list_free(failedNodeIds);
	failedNodeIds = NIL;
	foreach(cell, all)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn->pgConn != NULL && PQstatus(conn->pgConn) == CONNECTION_BAD)
			failedNodes = list_append_unique_int(failedNodes, conn->nodeId);
	}
	list_free(all);
	return failedNodes;
}

static void
CloseConnectionsToNodes(List *nodeIds)
{
	List	   *all = AllNodeConnections();
	ListCell   *cell;

	foreach(cell, all)
	{
		NodeConnection *conn = lfirst(cell);

		if (list_member_int(nodeIds, conn->nodeId) && conn->pgConn != NULL)
			CloseNodeConnection(conn);
	}
	list_free(all);
}

static void
ExecutorXactCallback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		/* look before cleanup closes the broken connections themselves */
		List	   *failedNodes = FailedNodes();

		ForgetOwners(0);
		CloseConnectionsToNodes(failedNodes);
	}
}

static void
ExecutorSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		ForgetOwners(GetCurrentTransactionNestLevel());
}

/*
 * SendTaskCommand sends a command that stands for a task without running it
 * as part of the scan (EXPLAIN of the task's SQL, with the task's
 * parameters) on the first connection to the task's node: inside the
 * remote transaction when this transaction has one or reads a snapshot,
 * after anything else in flight there is out of the way.  The caller reads
 * the results (FinishRemoteQuery).
 */
NodeConnection *
SendTaskCommand(DistributedScanState *state, RemoteTask *task, const char *command)
{
	NodeConnection *conn = GetNodeConnection(task->nodeId);
	TaskConnection tc;

	if (AnyRemoteTransactionOpen() || (IsTransactionBlock() && IsolationUsesXactSnapshot()))
		RemoteTransactionBegin(conn);
	memset(&tc, 0, sizeof(tc));
	tc.conn = conn;
	MakeConnectionAvailable(state, &tc);
	SyncRemoteTimeZone(conn);
	if (!PQsendQueryParams(conn->pgConn, command, task->params->count,
						   task->params->types, task->params->values,
						   task->params->lengths, task->params->formats, 0))
		ConnectionFailed(conn);
	conn->queryInProgress = true;
	FlushConnection(conn);
	return conn;
}
