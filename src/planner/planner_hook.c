/*-------------------------------------------------------------------------
 *
 * planner_hook.c
 *	  The planner hook: queries that touch distributed or reference tables
 *	  are planned by shardext, all others by the previous hook or the
 *	  standard planner, untouched.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/nodeFuncs.h"
#include "optimizer/planner.h"
#include "parser/parsetree.h"

#include "shardext/ddl.h"
#include "shardext/metadata.h"
#include "shardext/planner.h"

planner_hook_type prev_planner_hook = NULL;

static bool DistributedTableWalker(Node *node, void *context);

PlannedStmt *
ShardextPlanner(Query *parse, const char *queryString, int cursorOptions,
				ParamListInfo boundParams)
{
	/* queries DDL runs for itself (foreign key checks) see the local shells */
	if (ShardextLocalDDLDepth == 0 &&
		ShardextExtensionLoaded() && QueryReferencesDistributedTable((Node *) parse))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("queries on distributed tables are not supported yet"),
				 errhint("Use undistribute_table() to query the table locally.")));

	if (prev_planner_hook)
		return prev_planner_hook(parse, queryString, cursorOptions, boundParams);
	return standard_planner(parse, queryString, cursorOptions, boundParams);
}

/*
 * QueryReferencesDistributedTable tells whether a query (including its
 * subqueries and CTEs) reads or writes a distributed or reference table.
 */
bool
QueryReferencesDistributedTable(Node *node)
{
	return DistributedTableWalker(node, NULL);
}

static bool
DistributedTableWalker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		return rte->rtekind == RTE_RELATION && IsDistributedTable(rte->relid);
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, DistributedTableWalker, context,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, DistributedTableWalker, context);
}
