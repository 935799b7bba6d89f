/*-------------------------------------------------------------------------
 *
 * planner_hook.c
 *	  The planner hook: queries that touch distributed or reference tables
 *	  are planned by shardext (see planner.h for the order of strategies),
 *	  all others by the previous hook or the standard planner, untouched.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/planmain.h"
#include "optimizer/planner.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "shardext/distributed_plan.h"
#include "shardext/global_index.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/planner.h"
#include "shardext/repartition.h"

planner_hook_type prev_planner_hook = NULL;
set_rel_pathlist_hook_type prev_set_rel_pathlist_hook = NULL;

static bool DistributedTableWalker(Node *node, void *context);
static void RejectRowLocks(Query *parse);
static void RejectModifyingCTEs(Query *parse);
static void RejectOldNewReturning(Query *parse);
static bool IsDistributedResultRelation(Query *parse);
static Oid	ResultRelid(Query *parse);
static void WrapDistributedTablesForRowMarks(Query *query);

/*
 * The EXPLAIN whose statement is being planned, or NULL: PostgreSQL 19
 * gives it to the planner hook, and the local planners pass it on.
 */
struct ExplainState *PlannerExplainState = NULL;

/*
 * ShardextPlannerHook is the planner hook (19 added the ExplainState
 * argument); ShardextPlanner does the work.
 */
#if PG_VERSION_NUM >= 190000
PlannedStmt *
ShardextPlannerHook(Query *parse, const char *queryString, int cursorOptions,
					ParamListInfo boundParams, struct ExplainState *es)
{
	struct ExplainState *outer = PlannerExplainState;
	PlannedStmt *plan;

	PlannerExplainState = es;
	PG_TRY();
	{
		plan = ShardextPlanner(parse, queryString, cursorOptions, boundParams);
	}
	PG_FINALLY();
	{
		PlannerExplainState = outer;
	}
	PG_END_TRY();
	return plan;
}
#else
PlannedStmt *
ShardextPlannerHook(Query *parse, const char *queryString, int cursorOptions,
					ParamListInfo boundParams)
{
	return ShardextPlanner(parse, queryString, cursorOptions, boundParams);
}
#endif

/* ShardextLocalPlanner plans a query as PostgreSQL would (the next hook) */
PlannedStmt *
ShardextLocalPlanner(Query *parse, const char *queryString, int cursorOptions,
					 ParamListInfo boundParams)
{
	if (prev_planner_hook)
		return CallPlannerHook(prev_planner_hook, parse, queryString, cursorOptions,
							   boundParams, PlannerExplainState);
	return StandardPlanner(parse, queryString, cursorOptions, boundParams,
						   PlannerExplainState);
}

/*
 * ShardextPlanner is the planner hook.  The common case of a query without
 * distributed tables costs one walk over its range tables.
 */
PlannedStmt *
ShardextPlanner(Query *parse, const char *queryString, int cursorOptions,
				ParamListInfo boundParams)
{
	PlannedStmt *plan = NULL;

	/* on a node: a repartition join's query of one partition */
	if (ReadsRepartitionedRows(parse))
		return PlanPartitionQuery(parse, queryString, cursorOptions, boundParams);
	if (!ShardextExtensionLoaded() ||
		!QueryReferencesDistributedTable((Node *) parse))
		return ShardextLocalPlanner(parse, queryString, cursorOptions, boundParams);

	if (parse->returningList != NIL && IsDistributedResultRelation(parse))
		RejectOldNewReturning(parse);
	switch (parse->commandType)
	{
		case CMD_SELECT:
			if (ShardextEnablePushdown)
			{
				parse = InlineSingleUseCtes(parse);
				plan = PlanRouterQuery(parse);
				/* rows can be locked in one shard: only the router plans that */
				if (plan == NULL)
					RejectRowLocks(parse);
				if (plan == NULL)
					plan = PlanMultiShardSelect(parse, cursorOptions, boundParams);
				if (plan == NULL)
					plan = PlanRepartitionSelect(parse, cursorOptions, boundParams);
				if (plan == NULL)
					plan = PlanRecursively(parse, queryString, cursorOptions, boundParams,
										   ShardextLocalPlanner);
			}
			else
				RejectRowLocks(parse);
			break;
		case CMD_INSERT:
			if (IsDistributedResultRelation(parse))
			{
				RejectIndexTableWrite(ResultRelid(parse), "INSERT into");
				plan = PlanDistributedInsert(parse, cursorOptions, boundParams);
			}
			break;
		case CMD_UPDATE:
		case CMD_DELETE:
			if (IsDistributedResultRelation(parse))
				plan = PlanDistributedModify(parse, cursorOptions, boundParams);
			break;
		case CMD_MERGE:
			if (IsDistributedResultRelation(parse))
			{
				/* MERGE does not maintain global indexes (yet): refused for them */
				RejectIndexTableWrite(ResultRelid(parse), "MERGE into");
				RejectMergeWithGlobalIndexes(ResultRelid(parse));
				plan = PlanDistributedMerge(parse, cursorOptions, boundParams);
			}
			break;
		default:
			break;
	}

	if (plan == NULL && IsDistributedResultRelation(parse))
		elog(ERROR, "no distributed plan for a write to a distributed table");
	RejectModifyingCTEs(parse);

	if (plan != NULL)
	{
		if ((cursorOptions & CURSOR_OPT_SCROLL) &&
			!ExecSupportsBackwardScan(plan->planTree))
			plan->planTree = materialize_finished_plan(plan->planTree);
		MarkPrimaryOnlyScans(plan, parse);
		return plan;
	}

	/*
	 * Everything else is planned locally; distributed tables in it are
	 * scanned by pulling rows (DistributedRelPathlist).
	 */
	if (parse->rowMarks != NIL ||
		((parse->commandType == CMD_UPDATE || parse->commandType == CMD_DELETE ||
		  parse->commandType == CMD_MERGE) &&
		 !IsDistributedResultRelation(parse)))
	{
		parse = copyObject(parse);
		WrapDistributedTablesForRowMarks(parse);
	}
	plan = ShardextLocalPlanner(parse, queryString, cursorOptions, boundParams);
	MarkPrimaryOnlyScans(plan, parse);
	return plan;
}

/*
 * WrapDistributedTablesForRowMarks: when a local table is updated, deleted
 * from or locked, the planner marks the other tables of the statement so
 * that a row updated concurrently can be rechecked, and for a table that
 * means fetching its row again by ctid -- which a distributed table cannot
 * do.  Each distributed table of the top level becomes
 * (SELECT <its columns> FROM it OFFSET 0), whose rows are marked by copying
 * them instead.  (OFFSET 0 keeps the planner from pulling the subquery up.)
 * The tables of subqueries in FROM (LATERAL ones too) are wrapped as well:
 * the planner pulls those subqueries up, and their tables with them.
 */
static void
WrapDistributedTablesForRowMarks(Query *query)
{
	ListCell   *cell;
	Index		rtindex = 0;

	foreach(cell, query->rtable)
	{
		RangeTblEntry *rte = lfirst(cell);
		RangeTblEntry *inner;
		Query	   *subquery;
		Relation	relation;
		TupleDesc	desc;
		RangeTblRef *ref = makeNode(RangeTblRef);

		rtindex++;
		if (rte->rtekind == RTE_SUBQUERY)
			WrapDistributedTablesForRowMarks(rte->subquery);
		if (rte->rtekind != RTE_RELATION || (int) rtindex == query->resultRelation ||
			!IsDistributedTable(rte->relid))
			continue;

		inner = copyObject(rte);
		inner->inh = false;
		subquery = makeNode(Query);
		subquery->commandType = CMD_SELECT;
		subquery->querySource = QSRC_ORIGINAL;
		subquery->canSetTag = true;
		subquery->rtable = list_make1(inner);
		ref->rtindex = 1;
		subquery->jointree = makeFromExpr(list_make1(ref), NULL);
		subquery->limitOffset = (Node *) makeConst(INT8OID, -1, InvalidOid, sizeof(int64),
												   Int64GetDatum(0), false, FLOAT8PASSBYVAL);
		subquery->limitOption = LIMIT_OPTION_COUNT;

		/* output column k is attribute k, so the query's Vars keep meaning */
		relation = table_open(rte->relid, NoLock);
		desc = RelationGetDescr(relation);
		for (int i = 0; i < desc->natts; i++)
		{
			Form_pg_attribute attr = TupleDescAttr(desc, i);
			Expr	   *expr;

			if (attr->attisdropped)
				expr = (Expr *) makeNullConst(INT4OID, -1, InvalidOid);
			else
				expr = (Expr *) makeVar(1, attr->attnum, attr->atttypid, attr->atttypmod,
										attr->attcollation, 0);
			subquery->targetList = lappend(subquery->targetList,
										   makeTargetEntry(expr, i + 1,
														   pstrdup(NameStr(attr->attname)),
														   false));
		}
		table_close(relation, NoLock);

		RteWrappedInSubquery(query, rte, subquery, inner);
		rte->rtekind = RTE_SUBQUERY;
		rte->subquery = subquery;
		rte->relid = InvalidOid;
		rte->relkind = 0;
		rte->rellockmode = NoLock;
		rte->tablesample = NULL;
		rte->inh = false;
	}
}

/* the target table of an INSERT/UPDATE/DELETE/MERGE */
static Oid
ResultRelid(Query *parse)
{
	return rt_fetch(parse->resultRelation, parse->rtable)->relid;
}

/* is the target of this INSERT/UPDATE/DELETE/MERGE a distributed table? */
static bool
IsDistributedResultRelation(Query *parse)
{
	RangeTblEntry *rte;

	if (parse->resultRelation <= 0)
		return false;
	rte = rt_fetch(parse->resultRelation, parse->rtable);
	return rte->rtekind == RTE_RELATION && IsDistributedTable(rte->relid);
}

/*
 * RejectRowLocks: SELECT ... FOR UPDATE/SHARE the router did not take (it
 * locks rows of one shard, in the remote transaction) is refused.
 */
static void
RejectRowLocks(Query *parse)
{
	ListCell   *cell;
	Oid			distributed = InvalidOid;

	foreach(cell, parse->rowMarks)
	{
		RowMarkClause *mark = lfirst(cell);
		RangeTblEntry *rte = rt_fetch(mark->rti, parse->rtable);

		if (rte->rtekind != RTE_RELATION || !IsDistributedTable(rte->relid))
			continue;
		if (IsReferenceTable(rte->relid))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("SELECT ... FOR UPDATE/SHARE on reference table \"%s\" is not supported",
							get_rel_name(rte->relid)),
					 errhint("Name only distributed tables in FOR UPDATE OF, or use "
							 "UPDATE ... RETURNING.")));
		distributed = rte->relid;
	}
	if (OidIsValid(distributed))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("SELECT ... FOR UPDATE/SHARE on distributed table \"%s\" is only supported "
						"when the query reads one shard",
						get_rel_name(distributed)),
				 errhint("Pin the distribution column to one value (WHERE key = ...), or use "
						 "UPDATE ... RETURNING.")));
}

/*
 * RejectModifyingCTEs refuses WITH (INSERT/UPDATE/DELETE ...) on distributed
 * tables: the local planner would write to the empty local table.
 */
static void
RejectModifyingCTEs(Query *parse)
{
	ListCell   *cell;

	foreach(cell, parse->cteList)
	{
		CommonTableExpr *cte = lfirst(cell);
		Query	   *cteQuery = (Query *) cte->ctequery;

		if (cteQuery->commandType != CMD_SELECT && IsDistributedResultRelation(cteQuery))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("data-modifying statement in WITH on distributed table \"%s\" is not supported",
							get_rel_name(rt_fetch(cteQuery->resultRelation,
												  cteQuery->rtable)->relid)),
					 errhint("Run the modification as a separate statement.")));
		RejectModifyingCTEs(cteQuery);
	}
}

static bool
OldNewVarWalker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
		return VarReturnsOldOrNew((Var *) node);
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, OldNewVarWalker, context, 0);
	return expression_tree_walker(node, OldNewVarWalker, context);
}

/*
 * RejectOldNewReturning refuses RETURNING OLD/NEW (PostgreSQL 18) in a
 * write to a distributed table: the shards' rows are returned as they are
 * after the write.
 */
static void
RejectOldNewReturning(Query *parse)
{
	if (OldNewVarWalker((Node *) parse->returningList, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("RETURNING OLD or NEW on distributed table \"%s\" is not supported",
						get_rel_name(ResultRelid(parse))),
				 errhint("Return the columns without OLD or NEW, or read the old values in a "
						 "SELECT ... FOR UPDATE first.")));
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

typedef struct CollectContext
{
	List	   *relids;
	List	   *rtes;
	List	   *permInfoLists;	/* for each of rtes, its query's rteperminfos */
	Query	   *query;			/* the query whose range table is being walked */
	bool		checked;		/* also entries checked without a relation (16+) */
} CollectContext;

/*
 * CollectRelationsWalker collects the entries of relations (and, on 16+,
 * of views, which are subquery entries naming their relation; with
 * context->checked also any other entry with permissions to check).
 */
static bool
CollectRelationsWalker(Node *node, CollectContext *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;
		bool		view = rte->rtekind == RTE_SUBQUERY && OidIsValid(rte->relid);

		if (rte->rtekind == RTE_RELATION || view ||
			(context->checked && RteNeedsPermissionCheck(rte)))
		{
			if (OidIsValid(rte->relid))
				context->relids = list_append_unique_oid(context->relids, rte->relid);
			context->rtes = lappend(context->rtes, rte);
			context->permInfoLists = lappend(context->permInfoLists,
											 QueryPermInfos(context->query));
		}
		return false;
	}
	if (IsA(node, Query))
	{
		Query	   *outer = context->query;
		bool		result;

		context->query = (Query *) node;
		result = query_tree_walker((Query *) node, CollectRelationsWalker, context,
								   QTW_EXAMINE_RTES_BEFORE);
		context->query = outer;
		return result;
	}
	return expression_tree_walker(node, CollectRelationsWalker, context);
}

/*
 * CollectRelations returns the OIDs of every relation (view included) a
 * query uses, at any level, and their range table entries.
 */
void
CollectRelations(Query *query, List **relids, List **rtes)
{
	CollectContext context = {NIL, NIL, NIL, query, false};

	query_tree_walker(query, CollectRelationsWalker, &context, QTW_EXAMINE_RTES_BEFORE);
	*relids = context.relids;
	if (rtes)
		*rtes = context.rtes;
}

/*
 * AppendRelationsForChecks appends to target's range table a copy of every
 * entry of source, at any level, that is a relation or has permissions to
 * check, with those checks (pg_compat.h): the plan of target then checks
 * permissions and is invalidated as one of source would be.  With
 * nestedOnly, source's own range table is left out (target holds it).
 */
void
AppendRelationsForChecks(Query *target, Query *source, bool nestedOnly)
{
	CollectContext context = {NIL, NIL, NIL, source, true};
	ListCell   *rteCell;
	ListCell   *permCell;

	query_tree_walker(source, CollectRelationsWalker, &context, QTW_EXAMINE_RTES_BEFORE);
	forboth(rteCell, context.rtes, permCell, context.permInfoLists)
	{
		if (nestedOnly && list_member_ptr(source->rtable, lfirst(rteCell)))
			continue;
		AppendRteWithPermissions(target, lfirst(rteCell), lfirst(permCell));
	}
}

/*
 * RemoteScanTargetList makes the custom_scan_tlist describing the columns
 * the workers return: a plain column keeps its Var (EXPLAIN VERBOSE shows
 * it); anything else is described by a typed NULL, because expressions such
 * as window functions cannot be shown outside their plan node.
 */
List *
RemoteScanTargetList(List *remoteTargetList)
{
	List	   *result = NIL;
	ListCell   *cell;
	int			resno = 1;

	foreach(cell, remoteTargetList)
	{
		TargetEntry *tle = lfirst(cell);
		Node	   *expr = (Node *) tle->expr;

		if (!(IsA(expr, Var) && ((Var *) expr)->varlevelsup == 0))
			expr = (Node *) makeNullConst(exprType(expr), exprTypmod(expr),
										  exprCollation(expr));
		result = lappend(result, makeTargetEntry((Expr *) expr, resno++,
												 tle->resname, false));
	}
	return result;
}

/*
 * MakeDistributedPlannedStmt wraps a distributed scan, built without the
 * standard planner, into a PlannedStmt for query.  remoteTargetList
 * describes the columns the tasks return, in order (the query's target list
 * for a SELECT, its RETURNING list for DML); the scan returns them as they
 * are.  Every relation the query uses goes into the range table, so that
 * permissions are checked and cached plans are invalidated as usual.
 */
PlannedStmt *
MakeDistributedPlannedStmt(Query *query, CustomScan *scan, List *remoteTargetList)
{
	PlannedStmt *stmt = makeNode(PlannedStmt);
	Query	   *flat = makeNode(Query);
	List	   *relids;

	/* the query's range table, then the relations of its subqueries */
	flat->rtable = list_copy(query->rtable);
	CopyQueryPermInfos(flat, query);
	AppendRelationsForChecks(flat, query, true);
	CollectRelations(query, &relids, NULL);

	SetDistributedScanTargetList(scan, remoteTargetList);
	scan->scan.scanrelid = 0;
	scan->scan.plan.startup_cost = 0;
	scan->scan.plan.total_cost = 0;
	scan->scan.plan.plan_rows = 1;
	scan->scan.plan.plan_width = 32;
	scan->scan.plan.parallel_safe = false;

	/* makeNode leaves the rest empty: no result relations, subplans, row marks */
	stmt->commandType = query->commandType;
	stmt->queryId = query->queryId;
	stmt->hasReturning = (query->returningList != NIL);
	stmt->canSetTag = query->canSetTag;
	stmt->planTree = (Plan *) scan;
	SetPlannedStmtRangeTable(stmt, flat);
	stmt->relationOids = relids;
	stmt->stmt_location = query->stmt_location;
	stmt->stmt_len = query->stmt_len;
	return stmt;
}

/*
 * SetDistributedScanTargetList makes the scan return the columns the tasks
 * return (described by remoteTargetList) as they are.
 */
void
SetDistributedScanTargetList(CustomScan *scan, List *remoteTargetList)
{
	List	   *targetList = NIL;
	ListCell   *cell;
	int			resno = 1;

	foreach(cell, remoteTargetList)
	{
		TargetEntry *tle = lfirst(cell);
		Var		   *var = makeVar(INDEX_VAR, resno, exprType((Node *) tle->expr),
								  exprTypmod((Node *) tle->expr),
								  exprCollation((Node *) tle->expr), 0);
		TargetEntry *newTle = makeTargetEntry((Expr *) var, resno, tle->resname,
											  tle->resjunk);

		newTle->ressortgroupref = tle->ressortgroupref;
		targetList = lappend(targetList, newTle);
		resno++;
	}
	scan->custom_scan_tlist = RemoteScanTargetList(remoteTargetList);
	scan->scan.plan.targetlist = targetList;
}
