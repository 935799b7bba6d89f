/*-------------------------------------------------------------------------
 *
 * sublink_params.c
 *	  Uncorrelated subqueries of an UPDATE or DELETE of a distributed or
 *	  reference table become parameters the coordinator computes once.
 *
 * A subquery that does not refer to the statement's rows has one value
 * for the whole statement (PostgreSQL runs it once, as an init plan), so
 * the coordinator can run it first and send its value to every shard:
 *
 *	(SELECT ...)			its value
 *	EXISTS (SELECT ...)		its boolean
 *	ARRAY(SELECT ...)		its array
 *	x op ANY (SELECT y ...)	x op ANY ($n), $n = ARRAY(SELECT y ...)
 *	x op ALL (SELECT y ...)	x op ALL ($n), likewise
 *
 * (op ANY / ALL of an array give exactly the NULL and empty-set results of
 * the subquery forms.)  The statement is then shipped to the shards, which
 * no longer need to read the subqueries' tables -- local, non-co-located or
 * distributed ones -- and a condition like key IN (SELECT ...) prunes the
 * shards.  The values come from a one-row plan, "SELECT (subquery), ...",
 * which runs under the distributed scan (custom_plans) before its tasks;
 * in the statement a value is a placeholder Param (MakeSubplanValueParam),
 * which the deparser sends as a parameter whose value is that column of
 * the plan's row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteManip.h"
#include "utils/lsyscache.h"

#include "shardext/pg_compat.h"
#include "shardext/planner.h"
#include "shardext/remote_sql.h"

typedef struct SublinkParamContext
{
	List	   *columns;		/* expressions of the one-row plan */
} SublinkParamContext;

static Node *SublinkParamMutator(Node *node, SublinkParamContext *context);
static Node *SublinkAsParam(SubLink *sublink, SublinkParamContext *context);
static Param *AddParamColumn(SublinkParamContext *context, Node *expr);

/* the placeholder of a new column of the one-row plan (see remote_sql.h) */
static Param *
AddParamColumn(SublinkParamContext *context, Node *expr)
{
	context->columns = lappend(context->columns, expr);
	return MakeSubplanValueParam(list_length(context->columns), exprType(expr),
								 exprTypmod(expr), exprCollation(expr));
}

/*
 * SublinkAsParam returns what replaces an uncorrelated subquery (see the
 * file header), or NULL when it stays as it is.
 */
static Node *
SublinkAsParam(SubLink *sublink, SublinkParamContext *context)
{
	Query	   *subquery = (Query *) sublink->subselect;

	if (contain_vars_of_level((Node *) subquery, 1) ||
		contain_aggs_of_level((Node *) subquery, 1))
		return NULL;
	switch (sublink->subLinkType)
	{
		case EXPR_SUBLINK:
		case EXISTS_SUBLINK:
		case ARRAY_SUBLINK:
			return (Node *) AddParamColumn(context, (Node *) copyObject(sublink));
		case ANY_SUBLINK:
		case ALL_SUBLINK:
			{
				OpExpr	   *test = (OpExpr *) sublink->testexpr;
				TargetEntry *output;
				Oid			arrayType;
				SubLink    *array;
				ScalarArrayOpExpr *saop;

				/* only the single-column form: x op ANY (SELECT y ...) */
				if (test == NULL || !IsA(test, OpExpr) || list_length(test->args) != 2 ||
					!IsA(lsecond(test->args), Param) ||
					((Param *) lsecond(test->args))->paramkind != PARAM_SUBLINK ||
					checkExprHasSubLink(linitial(test->args)))
					return NULL;
				output = linitial(subquery->targetList);
				arrayType = get_array_type(exprType((Node *) output->expr));
				if (!OidIsValid(arrayType))
					return NULL;
				array = makeNode(SubLink);
				array->subLinkType = ARRAY_SUBLINK;
				array->subLinkId = 0;
				array->subselect = copyObject(sublink->subselect);
				array->location = -1;
				saop = makeNode(ScalarArrayOpExpr);
				saop->opno = test->opno;
				saop->opfuncid = test->opfuncid;
				saop->hashfuncid = InvalidOid;
				saop->negfuncid = InvalidOid;
				saop->useOr = (sublink->subLinkType == ANY_SUBLINK);
				saop->inputcollid = test->inputcollid;
				saop->args = list_make2(copyObject(linitial(test->args)),
										AddParamColumn(context, (Node *) array));
				saop->location = -1;
				return (Node *) saop;
			}
		default:
			return NULL;
	}
}

static Node *
SublinkParamMutator(Node *node, SublinkParamContext *context)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, SubLink))
	{
		Node	   *param = SublinkAsParam((SubLink *) node, context);

		if (param != NULL)
			return param;
		/* correlated: stays, with its uncorrelated parts left alone */
		return copyObject(node);
	}
	if (IsA(node, Query))
		return node;
	return expression_tree_mutator(node, SublinkParamMutator, context);
}

/*
 * ExtractSublinkParams returns a copy of an UPDATE or DELETE whose
 * uncorrelated subqueries (in SET, WHERE and RETURNING) are placeholders,
 * and in *columns the expressions that compute them; NULL when it has
 * none.
 */
Query *
ExtractSublinkParams(Query *query, List **columns)
{
	SublinkParamContext context = {NIL};
	Query	   *result;

	if (!query->hasSubLinks)
		return NULL;
	result = copyObject(query);
	result->targetList = (List *) SublinkParamMutator((Node *) result->targetList, &context);
	result->jointree->quals = SublinkParamMutator(result->jointree->quals, &context);
	result->returningList = (List *) SublinkParamMutator((Node *) result->returningList,
														 &context);
	if (context.columns == NIL)
		return NULL;
	result->hasSubLinks = checkExprHasSubLink((Node *) result->targetList) ||
		checkExprHasSubLink(result->jointree->quals) ||
		checkExprHasSubLink((Node *) result->returningList);
	*columns = context.columns;
	return result;
}

/*
 * PlanWithSublinkParams puts a distributed write whose parameters include
 * the values of ExtractSublinkParams' columns over the one-row plan that
 * computes them: "SELECT <columns>" (with the statement's range table, so
 * that its tables are checked and its plan invalidated as usual), planned
 * as any query is.
 */
PlannedStmt *
PlanWithSublinkParams(Query *query, List *columns, CustomScan *scan, List *remoteTargetList,
					  int cursorOptions, ParamListInfo boundParams)
{
	Query	   *values = makeNode(Query);
	PlannedStmt *plan;
	ListCell   *cell;
	int			resno = 1;

	values->commandType = CMD_SELECT;
	values->querySource = QSRC_ORIGINAL;
	values->canSetTag = true;
	values->rtable = copyObject(query->rtable);
	CopyQueryPermInfos(values, query);
	values->jointree = makeFromExpr(NIL, NULL);
	values->hasSubLinks = true;
	foreach(cell, columns)
		values->targetList = lappend(values->targetList,
									 makeTargetEntry(lfirst(cell), resno++, NULL, false));

	plan = ShardextPlanner(values, NULL, cursorOptions, boundParams);
	scan->custom_plans = list_make1(plan->planTree);
	SetDistributedScanTargetList(scan, remoteTargetList);
	scan->scan.scanrelid = 0;
	scan->scan.plan.startup_cost = plan->planTree->startup_cost;
	scan->scan.plan.total_cost = plan->planTree->total_cost;
	scan->scan.plan.plan_rows = 1;
	scan->scan.plan.plan_width = 32;

	plan->planTree = (Plan *) scan;
	plan->commandType = query->commandType;
	plan->hasReturning = query->returningList != NIL;
	plan->canSetTag = query->canSetTag;
	plan->queryId = query->queryId;
	return plan;
}
