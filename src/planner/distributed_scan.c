/*-------------------------------------------------------------------------
 *
 * distributed_scan.c
 *	  Building the distributed CustomScan plan node and reading its
 *	  DistributedJob back.
 *
 * The job travels in custom_private as a list of plain nodes, so that
 * copyObject (plan caching) and outfuncs (debug_print_plan) work on it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_proc.h"
#include "fmgr.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/nodes.h"
#include "optimizer/optimizer.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

#include "shardext/distributed_plan.h"
#include "shardext/pg_compat.h"

static CustomScanMethods DistributedScanMethods = {
	SHARDEXT_SCAN_NAME,
	CreateDistributedScanState
};

/* lets the plan node be read back from its text form (debug output) */
void
RegisterDistributedScanMethods(void)
{
	RegisterCustomScanMethods(&DistributedScanMethods);
}

bool
IsDistributedScan(Plan *plan)
{
	return plan != NULL && IsA(plan, CustomScan) &&
		((CustomScan *) plan)->methods == &DistributedScanMethods;
}

#define IntNode(x) ((Node *) makeInteger(x))
#define BoolNode(x) ((Node *) makeInteger((x) ? 1 : 0))

/*
 * InitDistributedJob starts a job of the given kind on the shard SQL
 * sqlParts over relations, with paramCount parameters: no pruning values,
 * no anchor table and no INSERT columns yet.
 */
void
InitDistributedJob(DistributedJob *job, DistributedJobKind kind, List *sqlParts,
				   List *relations, int paramCount)
{
	memset(job, 0, sizeof(DistributedJob));
	job->kind = kind;
	job->sqlParts = sqlParts;
	job->relations = relations;
	job->anchor = -1;
	job->paramCount = paramCount;
	job->insertDistColumn = -1;
}

/*
 * MakeDistributedScan returns a CustomScan (without target lists, which
 * the caller sets) that runs job; customExprs is the list described in
 * distributed_plan.h.
 */
CustomScan *
MakeDistributedScan(DistributedJob *job, List *customExprs)
{
	CustomScan *scan = makeNode(CustomScan);
	List	   *private = NIL;

	private = lappend(private, IntNode(job->kind));
	private = lappend(private, job->sqlParts);
	private = lappend(private, job->sqlSuffix);
	private = lappend(private, job->relations);
	private = lappend(private, IntNode(job->anchor));
	private = lappend(private, IntNode(job->pruneCount));
	private = lappend(private, job->pruneKinds);
	private = lappend(private, IntNode(job->paramCount));
	private = lappend(private, BoolNode(job->hasReturning));
	private = lappend(private, BoolNode(job->usePrepared));
	private = lappend(private, IntNode(job->insertRowCount));
	private = lappend(private, IntNode(job->insertColumnCount));
	private = lappend(private, IntNode(job->insertDistColumn));
	private = lappend(private, job->scanAttnums);
	private = lappend(private, BoolNode(job->pullFallback));
	private = lappend(private, BoolNode(job->insertFromSubplan));
	private = lappend(private, BoolNode(job->locksRows));
	private = lappend(private, job->pruneIndexes);
	private = lappend(private, IntNode(job->gindexMode));
	private = lappend(private, job->gindexRelids);
	private = lappend(private, IntNode(job->gindexArbiter));
	private = lappend(private, job->insertAttnums);
	private = lappend(private, IntNode(job->hiddenLead));
	private = lappend(private, job->hiddenAttnums);
	private = lappend(private, job->lockSqlParts);
	private = lappend(private, IntNode(job->lockParamCount));
	private = lappend(private, IntNode(job->routedCommand));
	private = lappend(private, BoolNode(job->routedStrict));
	private = lappend(private, BoolNode(job->routedDedupe));
	private = lappend(private, job->routedActions);
	private = lappend(private, BoolNode(job->paramsFromSubplan));
	private = lappend(private, IntNode(job->sourceArrayCount));
	private = lappend(private, BoolNode(job->emptyInputRow));
	private = lappend(private, job->repartition);
	/* last: MarkPrimaryOnlyScans sets it in the finished plan */
	private = lappend(private, BoolNode(job->primaryOnly));

	scan->custom_private = private;
	scan->custom_exprs = customExprs;
	scan->methods = &DistributedScanMethods;
	return scan;
}

/* DistributedJobFromScan unpacks what MakeDistributedScan packed */
DistributedJob *
DistributedJobFromScan(CustomScan *scan)
{
	DistributedJob *job = palloc0(sizeof(DistributedJob));
	List	   *p = scan->custom_private;
	int			i = 0;

#define NEXT_INT() intVal(list_nth(p, i++))
#define NEXT_LIST() ((List *) list_nth(p, i++))
	job->kind = NEXT_INT();
	job->sqlParts = NEXT_LIST();
	job->sqlSuffix = NEXT_LIST();
	job->relations = NEXT_LIST();
	job->anchor = NEXT_INT();
	job->pruneCount = NEXT_INT();
	job->pruneKinds = NEXT_LIST();
	job->paramCount = NEXT_INT();
	job->hasReturning = NEXT_INT() != 0;
	job->usePrepared = NEXT_INT() != 0;
	job->insertRowCount = NEXT_INT();
	job->insertColumnCount = NEXT_INT();
	job->insertDistColumn = NEXT_INT();
	job->scanAttnums = NEXT_LIST();
	job->pullFallback = NEXT_INT() != 0;
	job->insertFromSubplan = NEXT_INT() != 0;
	job->locksRows = NEXT_INT() != 0;
	job->pruneIndexes = NEXT_LIST();
	job->gindexMode = NEXT_INT();
	job->gindexRelids = NEXT_LIST();
	job->gindexArbiter = (Oid) NEXT_INT();
	job->insertAttnums = NEXT_LIST();
	job->hiddenLead = NEXT_INT();
	job->hiddenAttnums = NEXT_LIST();
	job->lockSqlParts = NEXT_LIST();
	job->lockParamCount = NEXT_INT();
	job->routedCommand = NEXT_INT();
	job->routedStrict = NEXT_INT() != 0;
	job->routedDedupe = NEXT_INT() != 0;
	job->routedActions = NEXT_LIST();
	job->paramsFromSubplan = NEXT_INT() != 0;
	job->sourceArrayCount = NEXT_INT();
	job->emptyInputRow = NEXT_INT() != 0;
	job->repartition = NEXT_LIST();
	job->primaryOnly = NEXT_INT() != 0;
#undef NEXT_INT
#undef NEXT_LIST
	return job;
}


/*
 * MayWrite is the check of WritesWalker for one function: volatile ones
 * may write (nextval, snowflake_id, user functions), except a few that
 * only read the clock or a random source.
 */
static bool
MayWrite(Oid functionId, void *context)
{
	if (functionId == F_RANDOM_NO_ARGS || functionId == F_CLOCK_TIMESTAMP ||
		functionId == F_TIMEOFDAY || functionId == F_GEN_RANDOM_UUID)
		return false;
	return func_volatile(functionId) == PROVOLATILE_VOLATILE;
}

static bool
WritesWalker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, MayWrite, context) || IsA(node, NextValueExpr))
		return true;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, WritesWalker, context, 0);
	return expression_tree_walker(node, WritesWalker, context);
}

/* MarkPlanTree sets primaryOnly in every distributed scan of a plan tree */
static void
MarkPlanTree(Plan *plan)
{
	ListCell   *cell;
	List	   *children = NIL;

	if (plan == NULL)
		return;
	/* primaryOnly is the last of the job's fields (MakeDistributedScan) */
	if (IsDistributedScan(plan))
		list_last_cell(((CustomScan *) plan)->custom_private)->ptr_value = BoolNode(true);
	if (IsA(plan, CustomScan))
		children = ((CustomScan *) plan)->custom_plans;
	else if (IsA(plan, Append))
		children = ((Append *) plan)->appendplans;
	else if (IsA(plan, MergeAppend))
		children = ((MergeAppend *) plan)->mergeplans;
	else if (IsA(plan, SubqueryScan))
		children = list_make1(((SubqueryScan *) plan)->subplan);
	else if (IsA(plan, BitmapAnd))
		children = ((BitmapAnd *) plan)->bitmapplans;
	else if (IsA(plan, BitmapOr))
		children = ((BitmapOr *) plan)->bitmapplans;
	foreach(cell, children)
		MarkPlanTree(lfirst(cell));
	MarkPlanTree(plan->lefttree);
	MarkPlanTree(plan->righttree);
}

/*
 * MarkPrimaryOnlyScans keeps the reads of a SELECT that calls functions
 * that may write off read replicas (a write on a standby fails): every
 * distributed scan of the plan runs on primaries.  Other statements never
 * read on replicas anyway (see replica_routing.c).
 */
void
MarkPrimaryOnlyScans(PlannedStmt *plan, Query *parse)
{
	ListCell   *cell;

	if (plan == NULL || parse->commandType != CMD_SELECT ||
		!WritesWalker((Node *) parse, NULL))
		return;
	MarkPlanTree(plan->planTree);
	foreach(cell, plan->subplans)
		MarkPlanTree(lfirst(cell));
}

PG_FUNCTION_INFO_V1(shardext_distributed_result);

/*
 * shardext_distributed_result is the placeholder the combine plan reads
 * shard rows from; the planner always replaces its scan.
 */
Datum
shardext_distributed_result(PG_FUNCTION_ARGS)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("shardext.distributed_result() is a planner placeholder and cannot be called")));
	PG_RETURN_NULL();
}
