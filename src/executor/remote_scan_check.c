/*-------------------------------------------------------------------------
 *
 * remote_scan_check.c
 *	  Test and assert builds only: checks that a distributed scan returns
 *	  only what its remote SQL fetches.
 *
 * A distributed scan's target list and quals may use the columns the
 * workers send (the table's fetched columns for the pull fallback, the
 * columns of custom_scan_tlist otherwise), parameters, and expressions of
 * those computed on the coordinator -- nothing else.  A Var of another
 * table (a lateral reference that was not turned into a parameter), of a
 * column that is not fetched, or a PlaceHolderVar left in the plan would
 * be read from the wrong column of the scan's row, silently.  The check
 * runs when the scan starts (EXPLAIN included); the types of the columns
 * a worker sends are checked against the declared ones as rows arrive.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "nodes/nodeFuncs.h"
#include "parser/parse_coerce.h"
#include "utils/builtins.h"

#include "shardext/distributed_executor.h"

#ifdef SHARDEXT_CHECK_REMOTE_SCANS

typedef struct ScanCheckContext
{
	DistributedScanState *state;
	const char *where;			/* "target list", "qual", "parameter" */
	bool		params;			/* checking custom_exprs */
} ScanCheckContext;

static bool ScanColumnWalker(Node *node, ScanCheckContext *context);

/* the scan's table is fetched whole (a whole-row reference is complete) */
static bool
FetchesAllColumns(DistributedScanState *state)
{
	TupleDesc	desc = state->css.ss.ss_ScanTupleSlot->tts_tupleDescriptor;
	int			fetched = 0;

	for (int i = 0; i < desc->natts; i++)
	{
		if (TupleDescAttr(desc, i)->attisdropped)
			continue;
		if (!list_member_int(state->job->scanAttnums, i + 1))
			return false;
		fetched++;
	}
	return fetched > 0;
}

/* fails with what the plan declares that the remote SQL does not fetch */
static void
ReportUnfetched(ScanCheckContext *context, const char *what, Var *var)
{
	elog(ERROR, "distributed scan's %s uses %s (varno %d, attno %d) that its remote SQL does not fetch",
		 context->where, what, var ? (int) var->varno : 0, var ? (int) var->varattno : 0);
}

/* a Var of the pull fallback's scan: a fetched column of its own table */
static void
CheckFallbackVar(ScanCheckContext *context, Var *var)
{
	DistributedScanState *state = context->state;
	CustomScan *scan = (CustomScan *) state->css.ss.ps.plan;

	if (var->varno != scan->scan.scanrelid)
		ReportUnfetched(context, "a column of another table", var);
	else if (var->varattno < 0)
		ReportUnfetched(context, "a system column", var);
	else if (var->varattno == 0 && !FetchesAllColumns(state))
		ReportUnfetched(context, "a whole-row reference", var);
	else if (var->varattno > 0 && !list_member_int(state->job->scanAttnums, var->varattno))
		ReportUnfetched(context, "a column", var);
}

/* a Var of a scan of the workers' result rows: one of custom_scan_tlist */
static void
CheckResultVar(ScanCheckContext *context, Var *var)
{
	CustomScan *scan = (CustomScan *) context->state->css.ss.ps.plan;

	if (var->varno != INDEX_VAR)
		ReportUnfetched(context, "a column of a table", var);
	else if (var->varattno < 1 || var->varattno > list_length(scan->custom_scan_tlist))
		ReportUnfetched(context, "a result column", var);
}

/*
 * A Var of what the coordinator evaluates for the workers (pruning values,
 * parameters): there is no row to read columns from -- except the row of
 * the scan's own subplan (OUTER_VAR), when it has one.
 */
static void
CheckParamVar(ScanCheckContext *context, Var *var)
{
	CustomScan *scan = (CustomScan *) context->state->css.ss.ps.plan;

	if (var->varno != OUTER_VAR || scan->custom_plans == NIL)
		ReportUnfetched(context, "a column", var);
}

static bool
ScanColumnWalker(Node *node, ScanCheckContext *context)
{
	CustomScan *scan = (CustomScan *) context->state->css.ss.ps.plan;

	if (node == NULL)
		return false;
	if (IsA(node, PlaceHolderVar))
		ReportUnfetched(context, "a PlaceHolderVar", NULL);
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;

		if (context->params)
			CheckParamVar(context, var);
		else if (var->varlevelsup != 0)
			ReportUnfetched(context, "a column of an outer query", var);
		else if (scan->scan.scanrelid > 0)
			CheckFallbackVar(context, var);
		else
			CheckResultVar(context, var);
		return false;
	}
	return expression_tree_walker(node, ScanColumnWalker, context);
}

/*
 * CheckRemoteScanColumns checks, when a distributed scan starts, that its
 * target list and quals only read what the remote SQL fetches (see the
 * file header); an internal error names what does not.
 */
void
CheckRemoteScanColumns(DistributedScanState *state)
{
	CustomScan *scan = (CustomScan *) state->css.ss.ps.plan;
	ScanCheckContext context = {state, "target list", false};

	if (scan->scan.scanrelid > 0 && (!state->job->pullFallback || scan->custom_scan_tlist != NIL))
		elog(ERROR, "distributed scan of a table is not a pull fallback scan");
	ScanColumnWalker((Node *) scan->scan.plan.targetlist, &context);
	context.where = "qual";
	ScanColumnWalker((Node *) scan->scan.plan.qual, &context);
	/* routed writes evaluate their actions over the row source's rows */
	if (state->job->kind != JOB_ROUTED && state->job->kind != JOB_INSERT)
	{
		context.where = "parameter";
		context.params = true;
		ScanColumnWalker((Node *) scan->custom_exprs, &context);
	}
}

/*
 * CheckRemoteResultTypes checks that the columns a worker sent have the
 * types the scan reads them as, where both are built-in (shard row types
 * and user types have other OIDs on the workers); binary-compatible types
 * (varchar read as text) read the same.
 */
void
CheckRemoteResultTypes(DistributedScanState *state, PGresult *result)
{
	TupleDesc	desc = state->css.ss.ss_ScanTupleSlot->tts_tupleDescriptor;

	for (int i = 0; i < state->remoteColumns && i < PQnfields(result); i++)
	{
		Oid			sent = PQftype(result, i);
		Oid			declared = TupleDescAttr(desc, state->columnAttnos[i] - 1)->atttypid;

		if (sent == declared || sent >= FirstGenbkiObjectId || declared >= FirstGenbkiObjectId ||
			IsBinaryCoercible(sent, declared) || IsBinaryCoercible(declared, sent))
			continue;
		elog(ERROR, "remote column %d of a distributed scan has type %s where the scan reads %s",
			 i + 1, format_type_be(sent), format_type_be(declared));
	}
}

#endif							/* SHARDEXT_CHECK_REMOTE_SCANS */
