/*-------------------------------------------------------------------------
 *
 * distributed_explain.c
 *	  EXPLAIN output of the distributed CustomScan: how many tasks, on which
 *	  nodes, the SQL of one task (of all with shardext.explain_all_tasks)
 *	  and the plan the worker makes for it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/explain.h"
#if PG_VERSION_NUM >= 180000
#include "commands/explain_format.h"	/* ExplainProperty* moved here in 18 */
#endif
#include "nodes/nodeFuncs.h"
#include "utils/memutils.h"

#include "shardext/distributed_executor.h"
#include "shardext/global_index.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/remote_command.h"
#include "shardext/repartition.h"

static void ExplainRemoteTask(DistributedScanState *state, RemoteTask *task,
							  ExplainState *es);
static void ExplainGlobalIndexMaintenance(DistributedJob *job, ExplainState *es);
static bool UsesOuterRowValues(CustomScan *scan, List *ancestors);

/*
 * ExplainGlobalIndexMaintenance names the global indexes a write keeps in
 * step, and how.
 */
static void
ExplainGlobalIndexMaintenance(DistributedJob *job, ExplainState *es)
{
	List	   *names = NIL;
	ListCell   *cell;
	const char *method = NULL;

	if (job->gindexMode == GINDEX_NONE)
		return;
	foreach(cell, TableGlobalIndexes(linitial_oid(job->relations)))
	{
		GlobalIndex *index = lfirst(cell);

		if (list_member_oid(job->gindexRelids, index->indexRelid) ||
			index->indexRelid == job->gindexArbiter)
			names = lappend(names, index->name);
	}
	switch (job->gindexMode)
	{
		case GINDEX_INSERT_ROWS:
			method = "entries of the routed rows, sent with them";
			break;
		case GINDEX_ARBITER_FIRST:
			method = "conflict target's entries inserted first, then the rows they admit";
			break;
		case GINDEX_RETURNED:
			method = "entries of the rows the shards return, written after them";
			break;
		case GINDEX_LOCK_THEN_UPDATE:
			method = "old values locked and read first, rows then updated by ctid";
			break;
	}
	ExplainPropertyList("Global Indexes Maintained", names, es);
	ExplainPropertyText("Global Index Maintenance", method, es);
}

/* collects the parameters that NestLoops and SubPlans above set per row */
static void
CollectRowParams(List *ancestors, Bitmapset **paramids)
{
	ListCell   *cell;

	foreach(cell, ancestors)
	{
		Node	   *ancestor = lfirst(cell);
		ListCell   *c;

		if (IsA(ancestor, NestLoop))
		{
			foreach(c, ((NestLoop *) ancestor)->nestParams)
				*paramids = bms_add_member(*paramids, ((NestLoopParam *) lfirst(c))->paramno);
		}
		else if (IsA(ancestor, SubPlan))
		{
			foreach(c, ((SubPlan *) ancestor)->parParam)
				*paramids = bms_add_member(*paramids, lfirst_int(c));
		}
	}
}

static bool
RowParamWalker(Node *node, Bitmapset *paramids)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param) && ((Param *) node)->paramkind == PARAM_EXEC &&
		bms_is_member(((Param *) node)->paramid, paramids))
		return true;
	return expression_tree_walker(node, RowParamWalker, paramids);
}

/*
 * UsesOuterRowValues: does the scan prune or send values that a nested loop
 * or a correlated subquery above sets for each of its rows (a LATERAL
 * reference, a join clause moved down, an outer query's column)?  Before
 * the scan runs for a row those have no value.
 */
static bool
UsesOuterRowValues(CustomScan *scan, List *ancestors)
{
	Bitmapset  *paramids = NULL;

	CollectRowParams(ancestors, &paramids);
	return paramids != NULL && RowParamWalker((Node *) scan->custom_exprs, paramids);
}

/*
 * ExplainDistributedScan adds the distributed part of the plan.  Without
 * ANALYZE the tasks are built (shards chosen, parameters evaluated) but not
 * run; with ANALYZE the shown task's plan is EXPLAIN ANALYZEd again on its
 * node (only for reads: a write is never run twice).
 */
void
ExplainDistributedScan(CustomScanState *node, List *ancestors, ExplainState *es)
{
	DistributedScanState *state = (DistributedScanState *) node;
	DistributedJob *job = state->job;
	MemoryContext oldContext = MemoryContextSwitchTo(state->execContext);
	List	   *nodeNames = NIL;
	ListCell   *cell;
	int			shown = 0;

	ExplainGlobalIndexMaintenance(job, es);
	if (job->kind == JOB_INSERT && !job->insertFromSubplan && !es->analyze)
	{
		/* building the tasks would evaluate the rows (nextval() ...) */
		ExplainPropertyText("Insert Method", "rows routed by the coordinator", es);
		ExplainPropertyInteger("Rows", NULL, job->insertRowCount, es);
		MemoryContextSwitchTo(oldContext);
		return;
	}
	if (job->sourceArrayCount > 0 && !es->analyze)
	{
		/* building the tasks would run the source */
		ExplainPropertyText("Source Rows", "computed once on the coordinator, sent to every copy",
							es);
		MemoryContextSwitchTo(oldContext);
		return;
	}
	if (job->paramsFromSubplan && !es->analyze)
	{
		/* building the tasks would run the subqueries */
		ExplainPropertyText("Subquery Values", "computed once on the coordinator, sent as parameters",
							es);
		MemoryContextSwitchTo(oldContext);
		return;
	}
	if (job->kind == JOB_ROUTED)
	{
		ExplainPropertyText("Write Method",
							"rows found through the coordinator, changed on their shards by ctid",
							es);
		if (!es->analyze)
		{
			MemoryContextSwitchTo(oldContext);
			return;
		}
	}
	else if (job->insertFromSubplan)
	{
		ExplainPropertyText("Insert Method", "rows routed by the coordinator", es);
		if (!es->analyze)
		{
			MemoryContextSwitchTo(oldContext);
			return;
		}
	}
	if (!state->tasksBuilt && job->kind == JOB_SELECT && job->repartition == NIL &&
		UsesOuterRowValues((CustomScan *) node->ss.ps.plan, ancestors))
	{
		/* no values to choose shards by yet: the SQL of one shard shows the parameters */
		if (job->pullFallback)
			ExplainPropertyText("Distributed Scan", "rows pulled to the coordinator", es);
		ExplainPropertyText("Tasks", "built for each outer row, whose values are parameters",
							es);
		ExplainPropertyText("Remote SQL", FirstShardTaskSql(state), es);
		MemoryContextSwitchTo(oldContext);
		return;
	}
	if (job->repartition != NIL)
		ExplainRepartition(state, es);
	BuildDistributedTasks(state);
	/* as execution would: an unreachable replica leaves its tasks to the primary */
	ConnectReplicaTasks(state);
	if (state->lookupNote != NULL)
	{
		GlobalIndexLookupNote *note = state->lookupNote;

		ExplainPropertyText("Global Index Lookup", note->indexName, es);
		ExplainPropertyInteger("Index Shards Asked", NULL, note->lookups, es);
		if (note->sql != NULL)
			ExplainPropertyText("Index Lookup SQL", note->sql, es);
	}

	if (job->pullFallback)
		ExplainPropertyText("Distributed Scan", "rows pulled to the coordinator", es);
	ExplainPropertyInteger("Task Count", NULL, list_length(state->tasks), es);
	foreach(cell, state->tasks)
	{
		RemoteTask *task = lfirst(cell);
		WorkerNode *worker = GetWorkerNode(task->nodeId);
		char	   *name = psprintf("%s:%d", worker->host, worker->port);
		ListCell   *c;
		bool		seen = false;

		foreach(c, nodeNames)
		{
			if (strcmp(lfirst(c), name) == 0)
				seen = true;
		}
		if (!seen)
			nodeNames = lappend(nodeNames, name);
	}
	ExplainPropertyList("Nodes", nodeNames, es);
	if (state->tasks == NIL)
	{
		MemoryContextSwitchTo(oldContext);
		return;
	}
	ExplainPropertyText("Tasks Shown",
						ShardextExplainAllTasks ? "All" :
						psprintf("One of %d", list_length(state->tasks)), es);

	ExplainOpenGroup("Tasks", "Tasks", false, es);
	foreach(cell, state->tasks)
	{
		RemoteTask *task = lfirst(cell);
		WorkerNode *worker = GetWorkerNode(task->nodeId);

		if (shown > 0 && !ShardextExplainAllTasks)
			break;
		shown++;
		ExplainOpenGroup("Task", NULL, true, es);
		if (es->format == EXPLAIN_FORMAT_TEXT)
		{
			appendStringInfoSpaces(es->str, es->indent * 2);
			appendStringInfoString(es->str, "->  Task\n");
			es->indent += 3;
		}
		ExplainPropertyText("Node", psprintf("host=%s port=%d", worker->host, worker->port), es);
		if (task->primaryNodeId != 0)
		{
			WorkerNode *primary = GetWorkerNode(task->primaryNodeId);

			ExplainPropertyText("Replica Of", psprintf("node %d (host=%s port=%d)",
													   primary->nodeId, primary->host,
													   primary->port), es);
			if (!XLogRecPtrIsInvalid(task->waitLsn))
				ExplainPropertyText("Replica Waits For",
									psprintf("%X/%X (up to %d ms, else the primary)",
											 LSN_FORMAT_ARGS(task->waitLsn),
											 ShardextReplicaWaitTimeout), es);
		}
		ExplainPropertyText("Remote SQL", task->sql, es);
		ExplainRemoteTask(state, task, es);
		if (es->format == EXPLAIN_FORMAT_TEXT)
			es->indent -= 3;
		ExplainCloseGroup("Task", NULL, true, es);
	}
	ExplainCloseGroup("Tasks", "Tasks", false, es);
	MemoryContextSwitchTo(oldContext);
}

/*
 * ExplainRemoteTask runs EXPLAIN of a task on its node (with ANALYZE when
 * the local EXPLAIN has it and the task only reads) and adds the plan.
 */
static void
ExplainRemoteTask(DistributedScanState *state, RemoteTask *task, ExplainState *es)
{
	bool		analyze = es->analyze && state->job->kind == JOB_SELECT;
	StringInfoData command;
	NodeConnection *conn;
	PGresult   *result;
	StringInfoData plan;

	initStringInfo(&command);
	appendStringInfo(&command, "EXPLAIN (ANALYZE %s, COSTS %s, TIMING %s, SUMMARY %s, VERBOSE %s) %s",
					 analyze ? "true" : "false",
					 es->costs ? "true" : "false",
					 (analyze && es->timing) ? "true" : "false",
					 (analyze && es->summary) ? "true" : "false",
					 es->verbose ? "true" : "false",
					 task->sql);
	conn = SendTaskCommand(state, task, command.data);

	initStringInfo(&plan);
	result = FinishRemoteQuery(conn, command.data);
	for (int i = 0; i < PQntuples(result); i++)
		appendStringInfo(&plan, "%s\n", PQgetvalue(result, i, 0));
	PQclear(result);

	if (es->format == EXPLAIN_FORMAT_TEXT)
	{
		char	   *line = plan.data;

		while (line != NULL && *line != '\0')
		{
			char	   *end = strchr(line, '\n');

			appendStringInfoSpaces(es->str, es->indent * 2);
			appendStringInfoString(es->str, "  ");
			if (end != NULL)
			{
				appendBinaryStringInfo(es->str, line, end - line + 1);
				line = end + 1;
			}
			else
			{
				appendStringInfo(es->str, "%s\n", line);
				line = NULL;
			}
		}
	}
	else
		ExplainPropertyText("Remote Plan", plan.data, es);
}
