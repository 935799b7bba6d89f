/*-------------------------------------------------------------------------
 *
 * merge_shipped_source.c
 *	  MERGE into a reference table from a source the nodes cannot read the
 *	  same way (distributed or local tables, subqueries, volatile or
 *	  user-defined functions): the coordinator computes the source rows once
 *	  and every copy of the table runs one MERGE over those rows,
 *
 *		MERGE INTO ONLY <copy> t
 *		USING (SELECT (x.c1)::type1, ... FROM ROWS FROM (unnest($1::text[]), ...) x)
 *			AS s(c1, ...)
 *		ON ... WHEN ...
 *
 * so each copy makes the same changes (and raises the same cardinality
 * violation).  The source rows hold the source's columns that the ON and
 * WHEN clauses use, and whatever part of those clauses refers to the
 * source alone but cannot run on the nodes (it is computed for every source
 * row: a sequence default of an INSERT may then skip values); a part that
 * needs both the target's columns and the coordinator cannot be done and
 * is refused.  The values travel as text arrays (read back under the
 * remote sessions' settings) and the rows all go in one statement, so a
 * target row matched twice is seen by one MERGE.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/lsyscache.h"

#include "shardext/pg_compat.h"
#include "shardext/planner.h"
#include "shardext/remote_sql.h"

typedef struct ShippedSourceContext
{
	Index		targetIndex;
	Index		sourceIndex;	/* the range table entry the shipped rows become */
	List	   *columns;		/* expressions of the source rows */
} ShippedSourceContext;

static bool ReferencesTarget(Node *node, Index targetIndex);
static bool contain_case_test(Node *node);
static Node *ShippedSourceMutator(Node *node, ShippedSourceContext *context);
static void DeparseShippedMerge(RemoteSql *sql, Query *query, Index sourceIndex,
								List *columns, int *arrayBase);

static bool
CaseTestWalker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, CaseTestExpr))
		return true;
	return expression_tree_walker(node, CaseTestWalker, context);
}

/* does node use a CASE operand's placeholder? */
static bool
contain_case_test(Node *node)
{
	return CaseTestWalker(node, NULL);
}

/* does node use a column of the target (at its own level)? */
static bool
ReferencesTarget(Node *node, Index targetIndex)
{
	return bms_is_member(targetIndex, pull_varnos(NULL, node));
}

/*
 * ShippedSourceMutator replaces each source column, and each part that
 * refers to the source alone and needs the coordinator, by a column of the
 * shipped rows (a Var of the source entry).
 */
static Node *
ShippedSourceMutator(Node *node, ShippedSourceContext *context)
{
	bool		carry;

	if (node == NULL)
		return NULL;
	if (IsA(node, Var) && ((Var *) node)->varno == context->targetIndex)
		return copyObject(node);
	/*
	 * Lists, target entries and WHEN arms are walked into, never carried
	 * whole, and neither is what uses a CASE operand's placeholder (it only
	 * has a value inside its CASE).
	 */
	if (IsA(node, List) || IsA(node, TargetEntry) || IsA(node, CaseWhen) ||
		contain_case_test(node))
		return expression_tree_mutator(node, ShippedSourceMutator, context);
	if (IsA(node, Var))
		carry = true;
	else
		carry = !ReferencesTarget(node, context->targetIndex) &&
			(checkExprHasSubLink(node) || contain_volatile_functions(node) ||
			 (ExprNeedsCoordinator(node) && contain_vars_of_level(node, 0)));
	if (carry)
	{
		ListCell   *cell;
		int			column = 1;

		foreach(cell, context->columns)
		{
			if (equal(lfirst(cell), node))
				break;
			column++;
		}
		if (cell == NULL)
			context->columns = lappend(context->columns, copyObject(node));
		return (Node *) makeVar(context->sourceIndex, column, exprType(node), exprTypmod(node),
								exprCollation(node), 0);
	}
	return expression_tree_mutator(node, ShippedSourceMutator, context);
}

/*
 * DeparseShippedMerge prints the MERGE of one copy (see the file header);
 * the ON and WHEN clauses use the source entry's columns c1, c2 ..., and
 * the source arrays are the parameters after the clauses' own (their first
 * number is *arrayBase + 1).
 */
static void
DeparseShippedMerge(RemoteSql *sql, Query *query, Index sourceIndex, List *columns,
					int *arrayBase)
{
	RemoteSql	clauses;
	RangeTblEntry *target = rt_fetch(query->resultRelation, query->rtable);
	ListCell   *cell;
	int			n = list_length(columns);

	/* the clauses first: their parameters come first */
	InitRemoteSql(&clauses);
	RemoteSqlPushQuery(&clauses, query);
	appendStringInfoString(&clauses.buf, " ON ");
	DeparseRemoteExpr(&clauses, MergeJoinCondition(query));
	foreach(cell, query->mergeActionList)
		DeparseMergeAction(&clauses, query, lfirst(cell));
	RemoteSqlPopQuery(&clauses);
	FinishRemoteSql(&clauses);
	if (clauses.failed || clauses.relations != NIL)
	{
		RemoteSqlFail(sql, clauses.failed ? clauses.failReason : "a table in the WHEN clauses");
		return;
	}
	*arrayBase = list_length(clauses.paramExprs);

	InitRemoteSql(sql);
	RemoteSqlPushQuery(sql, query);
	appendStringInfoString(&sql->buf, "MERGE INTO ONLY ");
	RemoteSqlAppendRelation(sql, target->relid);
	appendStringInfo(&sql->buf, " %s USING (SELECT ", RemoteSqlAlias(sql, 0, query->resultRelation));
	for (int i = 0; i < n; i++)
	{
		Node	   *column = list_nth(columns, i);

		appendStringInfo(&sql->buf, "%s(x.c%d)::%s", i > 0 ? ", " : "", i + 1,
						 RemoteTypeName(exprType(column), exprTypmod(column)));
	}
	appendStringInfoString(&sql->buf, " FROM ROWS FROM (");
	for (int i = 0; i < n; i++)
		appendStringInfo(&sql->buf, "%spg_catalog.unnest($%d::pg_catalog.text[])", i > 0 ? ", " : "",
						 *arrayBase + i + 1);
	appendStringInfoString(&sql->buf, ") x(");
	for (int i = 0; i < n; i++)
		appendStringInfo(&sql->buf, "%sc%d", i > 0 ? ", " : "", i + 1);
	appendStringInfo(&sql->buf, ")) %s(", RemoteSqlAlias(sql, 0, sourceIndex));
	for (int i = 0; i < n; i++)
		appendStringInfo(&sql->buf, "%sc%d", i > 0 ? ", " : "", i + 1);
	appendStringInfoChar(&sql->buf, ')');
	RemoteSqlPopQuery(sql);
	FinishRemoteSql(sql);
	sql->parts = list_concat(sql->parts, clauses.parts);
	sql->paramExprs = clauses.paramExprs;
}

/*
 * PlanMergeWithShippedSource plans a MERGE into a reference table whose
 * source rows the coordinator computes and ships (see the file header);
 * NULL when its clauses cannot run on the copies even so.
 */
PlannedStmt *
PlanMergeWithShippedSource(Query *query, int cursorOptions, ParamListInfo boundParams)
{
	Query	   *merge = copyObject(query);
	Query	   *source = copyObject(query);
	RangeTblEntry *sourceRte = makeNode(RangeTblEntry);
	ShippedSourceContext context;
	RemoteSql	sql;
	DistributedJob job;
	CustomScan *scan;
	PlannedStmt *plan;
	List	   *customExprs = NIL;
	ListCell   *cell;
	int			arrayBase = 0;
	int			resno = 1;

	/* the shipped rows' entry: a subquery in the deparser's eyes (columns c1, c2 ...) */
	sourceRte->rtekind = RTE_SUBQUERY;
	sourceRte->subquery = makeNode(Query);
	sourceRte->eref = makeAlias("shipped", NIL);
	merge->rtable = lappend(merge->rtable, sourceRte);
	memset(&context, 0, sizeof(context));
	context.targetIndex = query->resultRelation;
	context.sourceIndex = list_length(merge->rtable);
	MergeJoinCondition(merge) = ShippedSourceMutator(MergeJoinCondition(merge), &context);
	foreach(cell, merge->mergeActionList)
	{
		MergeAction *action = lfirst(cell);

		action->qual = ShippedSourceMutator(action->qual, &context);
		action->targetList = (List *) ShippedSourceMutator((Node *) action->targetList, &context);
	}
	if (context.columns == NIL || contain_volatile_functions((Node *) merge->mergeActionList) ||
		contain_volatile_functions(MergeJoinCondition(merge)))
		return NULL;
	DeparseShippedMerge(&sql, merge, context.sourceIndex, context.columns, &arrayBase);
	if (sql.failed)
		return NULL;

	/* SELECT <source columns> FROM <source>: the coordinator's part */
	MergeBecomesSelect(source);
	source->targetList = NIL;
	foreach(cell, context.columns)
		source->targetList = lappend(source->targetList,
									 makeTargetEntry(lfirst(cell), resno++, NULL, false));
	source->canSetTag = true;
	source->hasSubLinks = checkExprHasSubLink((Node *) source->targetList) ||
		checkExprHasSubLink((Node *) source->jointree);
	plan = ShardextPlanner(source, NULL, cursorOptions, boundParams);

	InitDistributedJob(&job, JOB_MODIFY, sql.parts, sql.relations, arrayBase);
	job.anchor = -1;
	job.sourceArrayCount = list_length(context.columns);
	foreach(cell, sql.paramExprs)
		customExprs = lappend(customExprs, expression_planner(lfirst(cell)));
	scan = MakeDistributedScan(&job, customExprs);
	scan->custom_plans = list_make1(plan->planTree);
	SetDistributedScanTargetList(scan, NIL);
	scan->scan.scanrelid = 0;
	scan->scan.plan.startup_cost = plan->planTree->startup_cost;
	scan->scan.plan.total_cost = plan->planTree->total_cost;
	scan->scan.plan.plan_rows = plan->planTree->plan_rows;
	scan->scan.plan.plan_width = plan->planTree->plan_width;

	plan->planTree = (Plan *) scan;
	plan->commandType = CMD_MERGE;
	plan->hasReturning = false;
	plan->canSetTag = query->canSetTag;
	plan->queryId = query->queryId;
	return plan;
}
