/*-------------------------------------------------------------------------
 *
 * insert_select.c
 *	  INSERT ... SELECT into distributed and reference tables.
 *
 * Between co-located tables, when the distribution column is carried over
 * unchanged and the SELECT can run shard by shard (see pushdown_planner.c),
 * each shard runs INSERT INTO <target shard> SELECT ... FROM <source
 * shards of the same index>: no row leaves its node.
 *
 * Otherwise the SELECT is planned on its own (distributed or not), and the
 * coordinator evaluates the target columns of each row (defaults such as
 * nextval() included), routes the rows by their distribution value and
 * sends them in multi-row INSERTs, batch by batch.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"

#include "shardext/guc.h"
#include "shardext/planner.h"
#include "shardext/remote_sql.h"

static PlannedStmt *PlanPushdownInsertSelect(Query *query, DistTableCacheEntry *entry,
											 Index sourceIndex);
static PlannedStmt *PlanCoordinatorInsertSelect(Query *query, DistTableCacheEntry *entry,
												int cursorOptions, ParamListInfo boundParams);

PlannedStmt *
PlanInsertSelect(Query *query, int cursorOptions, ParamListInfo boundParams)
{
	RangeTblEntry *target = rt_fetch(query->resultRelation, query->rtable);
	DistTableCacheEntry *entry = GetDistTableCacheEntry(target->relid);
	List	   *fromlist = query->jointree->fromlist;
	PlannedStmt *plan = NULL;

	/* rows that never pass the coordinator could not maintain global indexes */
	if (ShardextEnablePushdown && list_length(fromlist) == 1 &&
		IsA(linitial(fromlist), RangeTblRef) && query->cteList == NIL &&
		entry->method == DISTRIBUTE_BY_HASH && entry->globalIndexes == NIL)
	{
		Index		sourceIndex = ((RangeTblRef *) linitial(fromlist))->rtindex;

		if (rt_fetch(sourceIndex, query->rtable)->rtekind == RTE_SUBQUERY)
			plan = PlanPushdownInsertSelect(query, entry, sourceIndex);
	}
	if (plan == NULL)
		plan = PlanCoordinatorInsertSelect(query, entry, cursorOptions, boundParams);
	return plan;
}

/*
 * PlanPushdownInsertSelect returns a plan that runs the INSERT ... SELECT
 * on each shard, or NULL when that would not be correct.
 */
static PlannedStmt *
PlanPushdownInsertSelect(Query *query, DistTableCacheEntry *entry, Index sourceIndex)
{
	Query	   *source = rt_fetch(sourceIndex, query->rtable)->subquery;
	PushdownInfo info;
	List	   *columns;
	int			distColumn;
	TargetEntry *distTle;
	Var		   *distVar;
	TargetEntry *sourceTle;
	RemoteSql	sql;
	DistributedJob job;
	ListCell   *cell;

	if (source->setOperations != NULL || source->cteList != NIL || source->hasTargetSRFs ||
		source->groupingSets != NIL || source->limitCount != NULL ||
		source->limitOffset != NULL || source->distinctClause != NIL ||
		source->hasWindowFuncs || source->rowMarks != NIL ||
		contain_volatile_functions((Node *) query->targetList))
		return NULL;
	memset(&info, 0, sizeof(info));
	if (!AnalyzePushdownFrom(source, &info) || info.colocationId != entry->colocationId)
		return NULL;
	if ((source->hasAggs || source->groupClause != NIL || source->havingQual != NULL) &&
		!GroupedByDistColumn(source, &info))
		return NULL;

	/* the target's distribution column is a source distribution column */
	columns = InsertColumns(query, entry, &distColumn);
	distTle = list_nth(columns, distColumn);
	distVar = (Var *) distTle->expr;
	while (IsA(distVar, RelabelType))
		distVar = (Var *) ((RelabelType *) distVar)->arg;
	if (!IsA(distVar, Var) || distVar->varno != sourceIndex || distVar->varlevelsup != 0 ||
		distVar->varattno < 1 || distVar->varattno > list_length(source->targetList))
		return NULL;
	sourceTle = list_nth(source->targetList, distVar->varattno - 1);
	if (sourceTle->resjunk || !IsDistColumnOf((Node *) sourceTle->expr, source, &info))
		return NULL;

	InitRemoteSql(&sql);
	{
		RemoteSql	prefix;
		RemoteSql	suffix;

		DeparseInsertStatement(query, entry, columns, &prefix, &suffix);
		/* INSERT INTO <shard> AS alias (columns) SELECT ... FROM (source) ... */
		sql.parts = prefix.parts;
		sql.relations = prefix.relations;
		RemoteSqlPushQuery(&sql, query);
		appendStringInfoString(&sql.buf, " SELECT ");
		foreach(cell, columns)
		{
			if (cell != list_head(columns))
				appendStringInfoString(&sql.buf, ", ");
			DeparseRemoteExpr(&sql, (Node *) ((TargetEntry *) lfirst(cell))->expr);
		}
		appendStringInfoString(&sql.buf, " FROM ");
		DeparseRemoteFromItem(&sql, linitial(query->jointree->fromlist));
		RemoteSqlPopQuery(&sql);
		FinishRemoteSql(&sql);
		if (sql.failed || suffix.paramExprs != NIL)
			return NULL;
		sql.parts = list_concat(sql.parts, suffix.parts);
	}

	InitDistributedJob(&job, JOB_MODIFY, sql.parts, sql.relations,
					   list_length(sql.paramExprs));
	job.anchor = 0;
	job.hasReturning = query->returningList != NIL;
	{
		List	   *customExprs = NIL;

		foreach(cell, sql.paramExprs)
			customExprs = lappend(customExprs, expression_planner(lfirst(cell)));
		return MakeDistributedPlannedStmt(query, MakeDistributedScan(&job, customExprs),
										  query->returningList);
	}
}

/*
 * PlanCoordinatorInsertSelect plans the SELECT part as a query of its own
 * whose columns are the target columns' values, and puts the distributed
 * INSERT on top: it reads those rows and routes them.
 */
static PlannedStmt *
PlanCoordinatorInsertSelect(Query *query, DistTableCacheEntry *entry, int cursorOptions,
							ParamListInfo boundParams)
{
	Query	   *select = copyObject(query);
	List	   *columns;
	int			distColumn;
	List	   *targetList = NIL;
	ListCell   *cell;
	int			resno = 1;
	List	   *paramExprs;
	DistributedJob job;
	CustomScan *scan;
	PlannedStmt *plan;

	columns = InsertColumns(query, entry, &distColumn);
	foreach(cell, columns)
	{
		TargetEntry *tle = copyObject(lfirst(cell));

		tle->resno = resno++;
		targetList = lappend(targetList, tle);
	}
	select->commandType = CMD_SELECT;
	select->resultRelation = 0;
	select->targetList = targetList;
	select->returningList = NIL;
	select->onConflict = NULL;
	select->canSetTag = true;

	plan = ShardextPlanner(select, NULL, cursorOptions, boundParams);

	InitInsertJob(&job, query, entry, columns, distColumn, &paramExprs);
	job.insertFromSubplan = true;

	scan = MakeDistributedScan(&job, NIL);
	foreach(cell, paramExprs)
		scan->custom_exprs = lappend(scan->custom_exprs, expression_planner(lfirst(cell)));
	scan->custom_plans = list_make1(plan->planTree);
	SetDistributedScanTargetList(scan, query->returningList);
	scan->scan.scanrelid = 0;
	scan->scan.plan.startup_cost = plan->planTree->startup_cost;
	scan->scan.plan.total_cost = plan->planTree->total_cost;
	scan->scan.plan.plan_rows = plan->planTree->plan_rows;
	scan->scan.plan.plan_width = plan->planTree->plan_width;

	plan->planTree = (Plan *) scan;
	plan->commandType = CMD_INSERT;
	plan->hasReturning = query->returningList != NIL;
	plan->canSetTag = query->canSetTag;
	plan->queryId = query->queryId;
	return plan;
}
