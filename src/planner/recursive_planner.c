/*-------------------------------------------------------------------------
 *
 * recursive_planner.c
 *	  Recursive planning: a query that cannot be pushed down as a whole may
 *	  still have parts that can -- subqueries in FROM, CTEs, the branches of
 *	  UNION / INTERSECT / EXCEPT.  Each such part that the router or the
 *	  multi-shard planner can plan on its own is planned so; in the query, it
 *	  is replaced by "SELECT * FROM shardext.distributed_subplan(n)", the
 *	  rest is planned locally (other distributed tables by the pull
 *	  fallback), and the scans of the placeholder are then replaced by the
 *	  part's distributed plan.  The part's rows come to the coordinator
 *	  already filtered, joined and aggregated by the workers.
 *
 * Only parts that do not refer to outer query levels qualify (they run
 * once); set operations and CTEs are correct part by part because their
 * semantics are applied on the coordinator.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_func.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"

#include "shardext/pg_compat.h"
#include "shardext/shardext.h"
#include "shardext/planner.h"
#include "shardext/repartition.h"

typedef struct RecursiveContext
{
	List	   *subplans;		/* PlannedStmt * per placeholder number - 1 */
	Oid			placeholderOid;
	int			cursorOptions;
	ParamListInfo boundParams;
} RecursiveContext;

static Query *PlanPart(Query *part, RecursiveContext *context, bool force);

/* looking for the one reference to a CTE of the top level */
typedef struct CteReferenceContext
{
	const char *name;
	int			depth;			/* of the query being walked, below the top */
	RangeTblEntry *found;
	int			foundDepth;
} CteReferenceContext;

static bool FindCteReference(Node *node, CteReferenceContext *context);
static void InlineCte(RangeTblEntry *reference, Query *ctequery, int depth);
static Plan *GraftSubplans(Plan *plan, RecursiveContext *context);
static Node *SublinkMutator(Node *node, RecursiveContext *context);
static void HideScanTargetVars(Plan *plan);

/*
 * PlanPart plans one part on its own; when that gives a distributed plan,
 * returns the placeholder query to put in its place, else NULL.  A forced
 * part is distributed even when the local planner could pull it up.
 */
static Query *
PlanPart(Query *part, RecursiveContext *context, bool force)
{
	PlannedStmt *plan;
	Query	   *placeholder;
	RangeTblEntry *rte;
	RangeTblFunction *rtfunc;
	FuncExpr   *call;
	List	   *names = NIL;
	List	   *types = NIL;
	List	   *typmods = NIL;
	List	   *collations = NIL;
	ListCell   *cell;
	int			column = 0;

	if (part->commandType != CMD_SELECT || part->utilityStmt != NULL ||
		!QueryReferencesDistributedTable((Node *) part) ||
		contain_vars_of_level((Node *) part, 1) || part->hasRecursive)
		return NULL;

	/*
	 * A simple part (no aggregation, DISTINCT, LIMIT ...) is better left to
	 * the local planner, which pulls it up into the query so that the
	 * query's conditions reach its scans; unless it is a router query, or
	 * a repartition join (which would pull its tables whole).
	 */
	plan = PlanRouterQuery(part);
	if (plan == NULL && (force || part->hasAggs || part->groupClause != NIL ||
						 part->havingQual != NULL || part->distinctClause != NIL ||
						 part->limitCount != NULL || part->limitOffset != NULL ||
						 part->hasWindowFuncs))
		plan = PlanMultiShardSelect(part, context->cursorOptions, context->boundParams);
	/* a join of tables that are not co-located: on the workers when it can */
	if (plan == NULL)
		plan = PlanRepartitionSelect(part, context->cursorOptions, context->boundParams);
	if (plan == NULL || plan->subplans != NIL || plan->paramExecTypes != NIL)
		return NULL;
	context->subplans = lappend(context->subplans, plan);

	/* SELECT c1, c2 ... FROM shardext.distributed_subplan(n) AS f(c1 t1, ...) */
	placeholder = makeNode(Query);
	placeholder->commandType = CMD_SELECT;
	placeholder->querySource = QSRC_ORIGINAL;
	placeholder->canSetTag = true;
	foreach(cell, part->targetList)
	{
		TargetEntry *tle = lfirst(cell);

		if (tle->resjunk)
			continue;
		column++;
		names = lappend(names, makeString(tle->resname ? pstrdup(tle->resname) :
										  psprintf("c%d", column)));
		types = lappend_oid(types, exprType((Node *) tle->expr));
		typmods = lappend_int(typmods, exprTypmod((Node *) tle->expr));
		collations = lappend_oid(collations, exprCollation((Node *) tle->expr));
		placeholder->targetList =
			lappend(placeholder->targetList,
					makeTargetEntry((Expr *) makeVar(1, column, llast_oid(types),
													 llast_int(typmods),
													 llast_oid(collations), 0),
									column, tle->resname, false));
	}
	call = makeFuncExpr(context->placeholderOid, RECORDOID,
						list_make1(makeConst(INT4OID, -1, InvalidOid, 4,
											 Int32GetDatum(list_length(context->subplans)),
											 false, true)),
						InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	call->funcretset = true;
	rtfunc = makeNode(RangeTblFunction);
	rtfunc->funcexpr = (Node *) call;
	rtfunc->funccolcount = column;
	rtfunc->funccolnames = names;
	rtfunc->funccoltypes = types;
	rtfunc->funccoltypmods = typmods;
	rtfunc->funccolcollations = collations;
	rte = makeNode(RangeTblEntry);
	rte->rtekind = RTE_FUNCTION;
	rte->functions = list_make1(rtfunc);
	rte->eref = makeAlias("distributed_subplan", names);
	rte->alias = makeAlias("distributed_subplan", NIL);
	rte->inFromCl = true;
	placeholder->rtable = list_make1(rte);
	placeholder->jointree = makeFromExpr(list_make1(makeNode(RangeTblRef)), NULL);
	((RangeTblRef *) linitial(placeholder->jointree->fromlist))->rtindex = 1;

	/* keep the part's tables for permission checks and plan invalidation */
	AppendRelationsForChecks(placeholder, part, false);
	return placeholder;
}

/*
 * InlineSingleUseCtes turns each CTE that PostgreSQL itself would inline
 * -- a SELECT read once, not recursive, not MATERIALIZED, without volatile
 * functions -- into a subquery where it is read, so that the distributed
 * planners see it as part of the query (joined shard by shard where it is
 * co-located) instead of a separate step.  Returns the query, copied when
 * it has CTEs.
 */
Query *
InlineSingleUseCtes(Query *parse)
{
	Query	   *query;
	ListCell   *cell;

	if (parse->cteList == NIL || parse->hasRecursive)
		return parse;
	query = copyObject(parse);
	/* an inlined CTE leaves the list at once: its definition is not read again */
	foreach(cell, list_copy(query->cteList))
	{
		CommonTableExpr *cte = lfirst(cell);
		Query	   *ctequery = (Query *) cte->ctequery;
		CteReferenceContext context = {cte->ctename, 0, NULL, 0};

		if (cte->cterefcount == 1 && !cte->cterecursive &&
			cte->ctematerialized != CTEMaterializeAlways &&
			IsA(ctequery, Query) && ctequery->commandType == CMD_SELECT &&
			!ctequery->hasModifyingCTE && ctequery->rowMarks == NIL &&
			!contain_volatile_functions((Node *) ctequery))
			query_tree_walker(query, FindCteReference, &context, QTW_EXAMINE_RTES_BEFORE);
		if (context.found == NULL)
			continue;
		InlineCte(context.found, ctequery, context.foundDepth);
		query->cteList = list_delete_ptr(query->cteList, cte);
	}
	return query;
}

/*
 * FindCteReference finds the range table entry that reads a CTE of the top
 * level, at any depth (CTEs that read it included).
 */
static bool
FindCteReference(Node *node, CteReferenceContext *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		bool		found;

		context->depth++;
		found = query_tree_walker((Query *) node, FindCteReference, context,
								  QTW_EXAMINE_RTES_BEFORE);
		context->depth--;
		return found;
	}
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind == RTE_CTE && rte->ctelevelsup == context->depth &&
			strcmp(rte->ctename, context->name) == 0)
		{
			context->found = rte;
			context->foundDepth = context->depth;
			return true;
		}
		return false;
	}
	return expression_tree_walker(node, FindCteReference, context);
}

/*
 * InlineCte makes a reference to a CTE, depth levels below the query that
 * defines it, a subquery with the CTE's query; what that query refers to
 * outside itself is then depth levels further out.
 */
static void
InlineCte(RangeTblEntry *reference, Query *ctequery, int depth)
{
	Query	   *subquery = copyObject(ctequery);

	if (depth > 0)
		IncrementVarSublevelsUp((Node *) subquery, depth, 1);
	reference->rtekind = RTE_SUBQUERY;
	reference->subquery = subquery;
	reference->security_barrier = false;
	reference->ctename = NULL;
	reference->ctelevelsup = 0;
	reference->self_reference = false;
	reference->coltypes = NIL;
	reference->coltypmods = NIL;
	reference->colcollations = NIL;
}

/*
 * PlanRecursively plans the distributable parts of a SELECT on their own
 * and the rest locally; NULL when no part could be distributed (then the
 * caller plans the whole query locally).
 */
PlannedStmt *
PlanRecursively(Query *parse, const char *queryString, int cursorOptions,
				ParamListInfo boundParams, LocalPlannerFunction localPlanner)
{
	return PlanRecursivelyForcing(parse, queryString, cursorOptions, boundParams,
								  localPlanner, 0);
}

/*
 * PlanRecursivelyForcing is PlanRecursively where the subquery in FROM at
 * range table index forcedRtindex (when not 0) must be distributed on its
 * own; NULL when it cannot be.
 */
PlannedStmt *
PlanRecursivelyForcing(Query *parse, const char *queryString, int cursorOptions,
					   ParamListInfo boundParams, LocalPlannerFunction localPlanner,
					   Index forcedRtindex)
{
	Query	   *query = copyObject(parse);
	RecursiveContext context;
	PlannedStmt *plan;
	ListCell   *cell;
	Index		rtindex = 0;

	memset(&context, 0, sizeof(context));
	context.placeholderOid =
		LookupFuncName(list_make2(makeString(SHARDEXT_SCHEMA_NAME),
								  makeString("distributed_subplan")),
					   1, (Oid[]) {INT4OID}, false);
	context.cursorOptions = cursorOptions;
	context.boundParams = boundParams;

	/* subqueries in FROM and branches of set operations */
	foreach(cell, query->rtable)
	{
		RangeTblEntry *rte = lfirst(cell);
		Query	   *placeholder;

		rtindex++;
		if (rte->rtekind != RTE_SUBQUERY || rte->lateral)
			continue;
		placeholder = PlanPart(rte->subquery, &context, rtindex == forcedRtindex);
		if (placeholder != NULL)
			rte->subquery = placeholder;
		else if (rtindex == forcedRtindex)
			return NULL;
	}
	/* CTEs that only this level refers to */
	if (!query->hasRecursive)
	{
		foreach(cell, query->cteList)
		{
			CommonTableExpr *cte = lfirst(cell);
			Query	   *placeholder;

			if (cte->cterecursive)
				continue;
			placeholder = PlanPart((Query *) cte->ctequery, &context, false);
			if (placeholder != NULL)
				cte->ctequery = (Node *) placeholder;
		}
	}
	/* subqueries in expressions that do not refer to this level */
	query->jointree->quals = SublinkMutator(query->jointree->quals, &context);
	query->havingQual = SublinkMutator(query->havingQual, &context);
	query->targetList = (List *) SublinkMutator((Node *) query->targetList, &context);
	if (context.subplans == NIL)
		return NULL;

	plan = localPlanner(query, queryString, cursorOptions, boundParams);
	plan->planTree = GraftSubplans(plan->planTree, &context);
	foreach(cell, plan->subplans)
		lfirst(cell) = GraftSubplans(lfirst(cell), &context);
	return plan;
}

/*
 * SublinkMutator replaces the query of each uncorrelated subquery in an
 * expression of the top level by a placeholder, when it can be distributed
 * on its own (it then runs once, as an init plan or a join).
 */
static Node *
SublinkMutator(Node *node, RecursiveContext *context)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, SubLink))
	{
		SubLink    *sublink = copyObject((SubLink *) node);
		Query	   *placeholder = PlanPart((Query *) sublink->subselect, context, false);

		if (placeholder != NULL)
			sublink->subselect = (Node *) placeholder;
		sublink->testexpr = SublinkMutator(sublink->testexpr, context);
		return (Node *) sublink;
	}
	if (IsA(node, Query))
		return node;
	return expression_tree_mutator(node, SublinkMutator, context);
}

/*
 * HideScanTargetVars: a grafted distributed scan's custom_scan_tlist Vars
 * point into the part's own range table; EXPLAIN would resolve them in the
 * outer one, so they become typed NULLs (they only describe column types).
 */
static void
HideScanTargetVars(Plan *plan)
{
	if (plan == NULL)
		return;
	if (IsDistributedScan(plan))
	{
		CustomScan *scan = (CustomScan *) plan;
		ListCell   *cell;

		foreach(cell, scan->custom_scan_tlist)
		{
			TargetEntry *tle = lfirst(cell);
			Node	   *expr = (Node *) tle->expr;

			tle->expr = (Expr *) makeNullConst(exprType(expr), exprTypmod(expr),
											   exprCollation(expr));
		}
		foreach(cell, scan->custom_plans)
			HideScanTargetVars(lfirst(cell));
	}
	HideScanTargetVars(plan->lefttree);
	HideScanTargetVars(plan->righttree);
}

/*
 * GraftSubplans replaces each scan of a placeholder by a subquery scan
 * over the part's distributed plan.
 */
static Plan *
GraftSubplans(Plan *plan, RecursiveContext *context)
{
	ListCell   *cell;

	if (plan == NULL)
		return NULL;
	if (IsA(plan, FunctionScan))
	{
		FunctionScan *scan = (FunctionScan *) plan;
		RangeTblFunction *rtfunc = linitial(scan->functions);
		FuncExpr   *call = (FuncExpr *) rtfunc->funcexpr;

		if (list_length(scan->functions) == 1 && IsA(call, FuncExpr) &&
			call->funcid == context->placeholderOid)
		{
			int			number = DatumGetInt32(((Const *) linitial(call->args))->constvalue);
			PlannedStmt *part = list_nth(context->subplans, number - 1);
			SubqueryScan *subqueryScan = makeNode(SubqueryScan);

			subqueryScan->scan.plan = scan->scan.plan;
			NodeSetTag(subqueryScan, T_SubqueryScan);
			subqueryScan->scan.plan.lefttree = NULL;
			subqueryScan->scan.plan.righttree = NULL;
			subqueryScan->scan.plan.parallel_safe = false;
			subqueryScan->scan.scanrelid = scan->scan.scanrelid;
			subqueryScan->subplan = copyObject(part->planTree);
			subqueryScan->scanstatus = SUBQUERY_SCAN_UNKNOWN;
			HideScanTargetVars(subqueryScan->subplan);
			return (Plan *) subqueryScan;
		}
		return plan;
	}
	plan->lefttree = GraftSubplans(plan->lefttree, context);
	plan->righttree = GraftSubplans(plan->righttree, context);
	switch (nodeTag(plan))
	{
		case T_Append:
			foreach(cell, ((Append *) plan)->appendplans)
				lfirst(cell) = GraftSubplans(lfirst(cell), context);
			break;
		case T_MergeAppend:
			foreach(cell, ((MergeAppend *) plan)->mergeplans)
				lfirst(cell) = GraftSubplans(lfirst(cell), context);
			break;
		case T_SubqueryScan:
			((SubqueryScan *) plan)->subplan =
				GraftSubplans(((SubqueryScan *) plan)->subplan, context);
			break;
		case T_CustomScan:
			foreach(cell, ((CustomScan *) plan)->custom_plans)
				lfirst(cell) = GraftSubplans(lfirst(cell), context);
			break;
		default:
			break;
	}
	return plan;
}
