/*-------------------------------------------------------------------------
 *
 * pushdown_planner.c
 *	  Multi-shard SELECT pushdown: one query per shard plus a "combine"
 *	  step on the coordinator.
 *
 * The FROM clause is pushed down when it is correct shard by shard (see
 * pushdown_analysis.c).  Above it, either the whole query runs on each shard ("full pushdown":
 * no aggregates, or GROUP BY the distribution column, window functions
 * partitioned by it) and the coordinator only merges (ORDER BY, LIMIT,
 * OFFSET, DISTINCT; each shard returns at most LIMIT + OFFSET rows), or
 * each shard computes partial aggregates per group and the coordinator
 * combines them (count -> sum of counts, avg -> sum / count, ...),
 * regroups, and applies HAVING, ORDER BY, LIMIT and DISTINCT.
 *
 * The combine step is a Query over a placeholder function scan
 * (shardext.distributed_result(), whose columns are the shard query's),
 * planned by the standard planner; the function scan is then replaced by
 * the distributed scan.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_func.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

#include "shardext/pg_compat.h"
#include "shardext/shardext.h"
#include "shardext/global_index.h"
#include "shardext/guc.h"
#include "shardext/planner.h"
#include "shardext/remote_sql.h"

/* builds the shard query's columns and the combine step's expressions */
/* AppendPartial's cast that squares the argument as numeric */
#define SQUARE_AS_NUMERIC "square"

typedef struct CombineContext
{
	Query	   *query;
	RemoteSql  *sql;
	List	   *groupExprs;		/* original GROUP BY expressions */
	List	   *columnTypes;	/* of the shard query's columns */
	List	   *columnTypmods;
	List	   *columnCollations;
	int			columnCount;
	int			distinctColumn; /* shard column of the DISTINCT aggregates' argument */
	bool		failed;
	const char *failReason;
} CombineContext;

static bool ChoosePushdown(Query *query, PushdownInfo *info);
static bool DecidePushdown(Query *query, PushdownInfo *info, bool *fullPushdown);
static CustomScan *BuildShardScan(Query *query, PushdownInfo *info, RemoteSql *sql, void *arg);
static Query *MakeCombineQuery(Query *query);
static void DeparseFullPushdownTargets(Query *query, CombineContext *context, Query *combine);
static void DeparsePartialAggregateTargets(Query *query, CombineContext *context,
										   Query *combine, Node *distinctExpr);
static void DeparseShardQueryRest(Query *query, RemoteSql *sql, bool fullPushdown,
								  Node *distinctExpr);
static void BuildSelectJob(Query *query, PushdownInfo *info, RemoteSql *sql,
						   DistributedJob *job, List **customExprs);
static void AddPlaceholderScan(Query *combine, Query *query, CombineContext *context);
static int	AddWorkerColumn(CombineContext *context, Oid type, int32 typmod, Oid collation);
static Var *WorkerColumnVar(CombineContext *context, int column);
static Node *CombineMutator(Node *node, CombineContext *context);
static Node *DistinctAggregateArgument(Query *query);
static Node *SplitAggregate(Aggref *aggref, CombineContext *context);
static Node *CombineDistinctAggregate(Aggref *aggref, CombineContext *context);
static Aggref *CombineColumn(CombineContext *context, const char *schema, const char *name,
							 Oid type, int column);
static Node *SplitAverage(Aggref *aggref, Node *arg, CombineContext *context);
static Node *SplitVariance(Aggref *aggref, const char *name, Node *arg,
						   CombineContext *context);
static Aggref *MakeAggref(Oid aggfnoid, Oid resultType, Oid inputCollation, List *args);
static Oid	LookupAggregate(const char *schema, const char *name, int nargs, Oid *argtypes);
static PlannedStmt *PlanCombineQuery(Query *combine, CustomScan *scan, int columnCount,
									 int cursorOptions, ParamListInfo boundParams);
static Plan *ReplacePlaceholderScan(Plan *plan, CustomScan *scan, bool *replaced);
static Node *PlaceholderVarsToIndexVars(Node *node, void *context);

/*
 * PlanMultiShardSelect plans a SELECT for pushdown, or returns NULL when the
 * query must be planned locally (the pull fallback).
 */
PlannedStmt *
PlanMultiShardSelect(Query *query, int cursorOptions, ParamListInfo boundParams)
{
	PushdownInfo info;

	if (!ChoosePushdown(query, &info))
		return NULL;
	return PlanPushdownSelect(query, &info, BuildShardScan, NULL, cursorOptions, boundParams);
}

/*
 * PlanPushdownSelect plans a SELECT whose FROM clause runs shard by shard
 * (or partition by partition: info names its distribution Vars) as one
 * query per shard and a combine step; NULL when the query cannot be split
 * so.  makeScan builds the distributed scan of the per-shard SQL.
 */
PlannedStmt *
PlanPushdownSelect(Query *query, PushdownInfo *info, PushdownScanBuilder makeScan,
				   void *arg, int cursorOptions, ParamListInfo boundParams)
{
	RemoteSql	sql;
	CombineContext context;
	CustomScan *scan;
	Query	   *combine;
	bool		fullPushdown;
	bool		needsCombine;
	Node	   *distinctExpr = NULL;

	if (!DecidePushdown(query, info, &fullPushdown))
		return NULL;

	memset(&context, 0, sizeof(context));
	context.query = query;
	context.sql = &sql;
	InitRemoteSql(&sql);
	RemoteSqlPushQuery(&sql, query);
	combine = MakeCombineQuery(query);

	appendStringInfoString(&sql.buf, "SELECT ");
	if (fullPushdown)
		DeparseFullPushdownTargets(query, &context, combine);
	else
	{
		distinctExpr = DistinctAggregateArgument(query);
		if (distinctExpr == (Node *) query)
			return NULL;
		DeparsePartialAggregateTargets(query, &context, combine, distinctExpr);
	}
	if (context.failed)
		RemoteSqlFail(&sql, context.failReason);
	DeparseShardQueryRest(query, &sql, fullPushdown, distinctExpr);
	RemoteSqlPopQuery(&sql);
	FinishRemoteSql(&sql);
	if (sql.failed)
		return NULL;

	scan = makeScan(query, info, &sql, arg);
	if (scan == NULL)
		return NULL;
	needsCombine = !fullPushdown || query->sortClause != NIL || query->limitCount != NULL ||
		query->limitOffset != NULL || query->distinctClause != NIL;
	if (!needsCombine)
	{
		List	   *remoteTargetList = NIL;
		ListCell   *cell;

		foreach(cell, query->targetList)
			remoteTargetList = lappend(remoteTargetList, lfirst(cell));
		return MakeDistributedPlannedStmt(query, scan, remoteTargetList);
	}

	AddPlaceholderScan(combine, query, &context);
	return PlanCombineQuery(combine, scan, context.columnCount, cursorOptions, boundParams);
}

/* BuildShardScan is the scan builder of shard by shard pushdown */
static CustomScan *
BuildShardScan(Query *query, PushdownInfo *info, RemoteSql *sql, void *arg)
{
	DistributedJob job;
	List	   *customExprs;

	BuildSelectJob(query, info, sql, &job, &customExprs);
	return MakeDistributedScan(&job, customExprs);
}

/*
 * ChoosePushdown decides whether the query can be pushed down at all
 * (false: plan it locally): its FROM clause runs shard by shard.
 */
static bool
ChoosePushdown(Query *query, PushdownInfo *info)
{
	if (query->setOperations != NULL || query->cteList != NIL || query->hasTargetSRFs ||
		query->groupingSets != NIL || query->rowMarks != NIL || query->hasRecursive ||
		query->limitOption == LIMIT_OPTION_WITH_TIES || query->jointree->fromlist == NIL)
		return false;
	memset(info, 0, sizeof(PushdownInfo));
	return AnalyzePushdownFrom(query, info);
}

/*
 * DecidePushdown decides, for a query whose FROM clause runs shard by
 * shard, whether the rest runs there fully (*fullPushdown) or with partial
 * aggregates combined on the coordinator; false when neither is correct.
 */
static bool
DecidePushdown(Query *query, PushdownInfo *info, bool *fullPushdown)
{
	if (query->hasWindowFuncs)
	{
		if (!WindowsPartitionedByDistColumn(query, info))
			return false;
		if (query->hasAggs && !GroupedByDistColumn(query, info))
			return false;
		*fullPushdown = true;
	}
	else if (query->hasAggs || query->groupClause != NIL || query->havingQual != NULL)
		*fullPushdown = GroupedByDistColumn(query, info);
	else
		*fullPushdown = true;
	return !(query->hasDistinctOn && !*fullPushdown);
}

/*
 * MakeCombineQuery starts the coordinator's query over the shards' rows:
 * the original's ORDER BY, DISTINCT and LIMIT; its target list and range
 * table come later.
 */
static Query *
MakeCombineQuery(Query *query)
{
	Query	   *combine = makeNode(Query);

	combine->commandType = CMD_SELECT;
	combine->querySource = QSRC_ORIGINAL;
	combine->queryId = query->queryId;
	combine->canSetTag = query->canSetTag;
	combine->sortClause = query->sortClause;
	combine->distinctClause = query->distinctClause;
	combine->hasDistinctOn = query->hasDistinctOn;
	combine->limitCount = query->limitCount;
	combine->limitOffset = query->limitOffset;
	combine->limitOption = query->limitOption;
	combine->stmt_location = query->stmt_location;
	combine->stmt_len = query->stmt_len;
	return combine;
}

/*
 * DeparseFullPushdownTargets: every target (junk too) is computed by the
 * shards, DISTINCT [ON] included; the combine query returns the shards'
 * columns.
 */
static void
DeparseFullPushdownTargets(Query *query, CombineContext *context, Query *combine)
{
	RemoteSql  *sql = context->sql;
	ListCell   *cell;

	if (query->distinctClause != NIL && !query->hasDistinctOn)
		appendStringInfoString(&sql->buf, "DISTINCT ");
	else if (query->hasDistinctOn)
	{
		appendStringInfoString(&sql->buf, "DISTINCT ON (");
		foreach(cell, query->distinctClause)
		{
			if (cell != list_head(query->distinctClause))
				appendStringInfoString(&sql->buf, ", ");
			DeparseSortGroupItem(sql, lfirst(cell), query->targetList, SORT_POSITIONS_ALL);
		}
		appendStringInfoString(&sql->buf, ") ");
	}
	foreach(cell, query->targetList)
	{
		TargetEntry *tle = lfirst(cell);
		TargetEntry *newTle;
		int			column;
		Node	   *expr = FlattenAliasVars(query, (Node *) tle->expr);

		if (cell != list_head(query->targetList))
			appendStringInfoString(&sql->buf, ", ");
		DeparseRemoteExpr(sql, expr);
		column = AddWorkerColumn(context, exprType(expr), exprTypmod(expr),
								 exprCollation(expr));
		newTle = makeTargetEntry((Expr *) WorkerColumnVar(context, column),
								 tle->resno, tle->resname, tle->resjunk);
		newTle->ressortgroupref = tle->ressortgroupref;
		combine->targetList = lappend(combine->targetList, newTle);
	}
}

/*
 * DeparsePartialAggregateTargets: the shards group and compute partial
 * aggregates (and group by distinctExpr too, when not NULL, for
 * count(DISTINCT x)); the combine query regroups and combines them.
 */
static void
DeparsePartialAggregateTargets(Query *query, CombineContext *context, Query *combine,
							   Node *distinctExpr)
{
	RemoteSql  *sql = context->sql;
	ListCell   *cell;

	foreach(cell, query->groupClause)
	{
		Node	   *expr = get_sortgroupclause_expr(lfirst(cell), query->targetList);

		context->groupExprs = lappend(context->groupExprs, expr);
		if (cell != list_head(query->groupClause))
			appendStringInfoString(&sql->buf, ", ");
		DeparseRemoteExpr(sql, FlattenAliasVars(query, expr));
		AddWorkerColumn(context, exprType(expr), exprTypmod(expr), exprCollation(expr));
	}
	if (distinctExpr != NULL)
	{
		/* count(DISTINCT x): the shards also group by x */
		if (context->columnCount > 0)
			appendStringInfoString(&sql->buf, ", ");
		DeparseRemoteExpr(sql, FlattenAliasVars(query, distinctExpr));
		context->distinctColumn = AddWorkerColumn(context, exprType(distinctExpr),
												  exprTypmod(distinctExpr),
												  exprCollation(distinctExpr));
	}
	foreach(cell, query->targetList)
	{
		TargetEntry *tle = lfirst(cell);
		TargetEntry *newTle;

		newTle = makeTargetEntry((Expr *) CombineMutator((Node *) tle->expr, context),
								 tle->resno, tle->resname, tle->resjunk);
		newTle->ressortgroupref = tle->ressortgroupref;
		combine->targetList = lappend(combine->targetList, newTle);
	}
	combine->havingQual = CombineMutator(query->havingQual, context);
	combine->groupClause = query->groupClause;
	combine->hasAggs = query->hasAggs;
	if (context->columnCount == 0)
		appendStringInfoString(&sql->buf, "NULL");
}

/*
 * DeparseShardQueryRest appends what follows the shard query's target list:
 * FROM, WHERE, GROUP BY, and with full pushdown HAVING, ORDER BY and LIMIT.
 */
static void
DeparseShardQueryRest(Query *query, RemoteSql *sql, bool fullPushdown, Node *distinctExpr)
{
	ListCell   *cell;

	appendStringInfoString(&sql->buf, " FROM ");
	foreach(cell, query->jointree->fromlist)
	{
		if (cell != list_head(query->jointree->fromlist))
			appendStringInfoString(&sql->buf, ", ");
		DeparseRemoteFromItem(sql, lfirst(cell));
	}
	if (query->jointree->quals != NULL)
	{
		appendStringInfoString(&sql->buf, " WHERE ");
		DeparseRemoteExpr(sql, FlattenAliasVars(query, query->jointree->quals));
	}
	if (query->groupClause != NIL || distinctExpr != NULL)
	{
		appendStringInfoString(&sql->buf, " GROUP BY ");
		/*
		 * By output column number (see DeparseSortGroupItem): with full
		 * pushdown the SELECT list is the query's, junk included; with
		 * partial aggregation the grouping expressions come first.
		 */
		foreach(cell, query->groupClause)
		{
			if (cell != list_head(query->groupClause))
				appendStringInfoString(&sql->buf, ", ");
			if (fullPushdown)
				DeparseSortGroupItem(sql, lfirst(cell),
									 (List *) FlattenAliasVars(query, (Node *) query->targetList),
									 SORT_POSITIONS_ALL);
			else
				appendStringInfo(&sql->buf, "%d", foreach_current_index(cell) + 1);
		}
		if (distinctExpr != NULL)
		{
			if (query->groupClause != NIL)
				appendStringInfoString(&sql->buf, ", ");
			DeparseRemoteExpr(sql, FlattenAliasVars(query, distinctExpr));
		}
	}
	if (!fullPushdown)
		return;
	if (query->havingQual != NULL)
	{
		appendStringInfoString(&sql->buf, " HAVING ");
		DeparseRemoteExpr(sql, FlattenAliasVars(query, query->havingQual));
	}
	if (query->sortClause != NIL)
	{
		appendStringInfoString(&sql->buf, " ORDER BY ");
		DeparseRemoteOrderBy(sql, query, query->sortClause,
							 (List *) FlattenAliasVars(query, (Node *) query->targetList));
	}
	/*
	 * Each shard's first LIMIT + OFFSET rows hold the result's -- unless the
	 * shard's DISTINCT also covers junk columns (window or sort helpers it
	 * computes): its distinct rows are then not the result's.
	 */
	if (query->limitCount != NULL && query->distinctClause != NIL && !query->hasDistinctOn)
	{
		ListCell   *tleCell;

		foreach(tleCell, query->targetList)
		{
			if (((TargetEntry *) lfirst(tleCell))->resjunk)
				return;
		}
	}
	if (query->limitCount != NULL)
	{
		appendStringInfoString(&sql->buf, " LIMIT ");
		if (query->limitOffset != NULL)
		{
			appendStringInfoString(&sql->buf, "(");
			DeparseRemoteExpr(sql, query->limitCount);
			appendStringInfoString(&sql->buf, " OPERATOR(pg_catalog.+) ");
			DeparseRemoteExpr(sql, query->limitOffset);
			appendStringInfoString(&sql->buf, ")");
		}
		else
			DeparseRemoteExpr(sql, query->limitCount);
	}
}

/*
 * BuildSelectJob fills the job of the shard query, pruned by the
 * distribution columns of every (connected) hash table, and the planned
 * expressions of its pruning values and parameters.
 */
static void
BuildSelectJob(Query *query, PushdownInfo *info, RemoteSql *sql, DistributedJob *job,
			   List **customExprs)
{
	List	   *values = NIL;
	List	   *kinds = NIL;
	List	   *indexes = NIL;
	List	   *conjuncts = TopLevelConjuncts(query);
	ListCell   *cell;

	foreach(cell, info->hashRtindexes)
	{
		Index		rtindex = lfirst_int(cell);
		DistTableCacheEntry *entry =
			GetDistTableCacheEntry(rt_fetch(rtindex, query->rtable)->relid);

		FindPruningValues(query, rtindex, entry, (Node *) conjuncts, &values, &kinds);
		/* or by a global index of the table */
		FindGlobalIndexPruning(query, rtindex, entry, (Node *) conjuncts, &values, &kinds,
							   &indexes);
	}
	/* and by the distribution columns subqueries in FROM return */
	foreach(cell, info->distVars)
	{
		Var		   *var = lfirst(cell);

		if (rt_fetch(var->varno, query->rtable)->rtekind == RTE_SUBQUERY)
			FindColumnPruningValues(var->varno, var->varattno,
									GetDistTableCacheEntry(info->anchorRelid),
									(Node *) conjuncts, &values, &kinds);
	}

	InitDistributedJob(job, JOB_SELECT, sql->parts, sql->relations,
					   list_length(sql->paramExprs));
	job->anchor = RelationPosition(sql->relations, info->anchorRelid);
	job->pruneCount = list_length(values);
	job->pruneKinds = kinds;
	job->pruneIndexes = indexes;
	job->emptyInputRow = ReturnsRowOfNoInput(query);
	*customExprs = NIL;
	foreach(cell, list_concat(values, sql->paramExprs))
		*customExprs = lappend(*customExprs, expression_planner(lfirst(cell)));
}

/*
 * AddPlaceholderScan makes the combine query read the shards' rows from the
 * placeholder function scan, and adds the query's tables to its range
 * table for permission checks and plan invalidation.
 */
static void
AddPlaceholderScan(Query *combine, Query *query, CombineContext *context)
{
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	RangeTblFunction *rtfunc = makeNode(RangeTblFunction);
	FuncExpr   *placeholder;
	List	   *names = NIL;
	Oid			placeholderOid;

	placeholderOid = LookupFuncName(list_make2(makeString(SHARDEXT_SCHEMA_NAME),
											   makeString("distributed_result")),
									0, NULL, false);
	placeholder = makeFuncExpr(placeholderOid, RECORDOID, NIL, InvalidOid,
							   InvalidOid, COERCE_EXPLICIT_CALL);
	placeholder->funcretset = true;
	for (int i = 1; i <= context->columnCount; i++)
		names = lappend(names, makeString(psprintf("w%d", i)));
	rtfunc->funcexpr = (Node *) placeholder;
	rtfunc->funccolcount = context->columnCount;
	rtfunc->funccolnames = names;
	rtfunc->funccoltypes = context->columnTypes;
	rtfunc->funccoltypmods = context->columnTypmods;
	rtfunc->funccolcollations = context->columnCollations;
	rte->rtekind = RTE_FUNCTION;
	rte->functions = list_make1(rtfunc);
	rte->eref = makeAlias("shards", names);
	rte->alias = makeAlias("shards", NIL);
	rte->inFromCl = true;
	rte->lateral = false;
	combine->rtable = list_make1(rte);
	combine->jointree = makeFromExpr(list_make1(makeNode(RangeTblRef)), NULL);
	((RangeTblRef *) linitial(combine->jointree->fromlist))->rtindex = 1;

	AppendRelationsForChecks(combine, query, false);
}

/* registers a shard query column (1-based) */
static int
AddWorkerColumn(CombineContext *context, Oid type, int32 typmod, Oid collation)
{
	if (!IsReceivableType(type) && !context->failed)
	{
		context->failed = true;
		context->failReason = "an anonymous record in the result";
	}
	context->columnTypes = lappend_oid(context->columnTypes, type);
	context->columnTypmods = lappend_int(context->columnTypmods, typmod);
	context->columnCollations = lappend_oid(context->columnCollations, collation);
	return ++context->columnCount;
}

static Var *
WorkerColumnVar(CombineContext *context, int column)
{
	return makeVar(1, column, list_nth_oid(context->columnTypes, column - 1),
				   list_nth_int(context->columnTypmods, column - 1),
				   list_nth_oid(context->columnCollations, column - 1), 0);
}

/*
 * CombineMutator rewrites a target or HAVING expression of a grouped query
 * for the combine step: group keys become shard columns, aggregates their
 * combination.
 */
static Node *
CombineMutator(Node *node, CombineContext *context)
{
	ListCell   *cell;
	int			column = 1;

	if (node == NULL || context->failed)
		return node;
	foreach(cell, context->groupExprs)
	{
		if (equal(node, lfirst(cell)))
			return (Node *) WorkerColumnVar(context, column);
		column++;
	}
	if (IsA(node, Aggref))
		return SplitAggregate((Aggref *) node, context);
	if (IsA(node, Var) || IsA(node, SubLink) || IsA(node, WindowFunc) ||
		IsA(node, GroupingFunc))
	{
		context->failed = true;
		context->failReason = "a column outside aggregates that is not grouped";
		return node;
	}
	return expression_tree_mutator(node, CombineMutator, context);
}

static Oid
LookupAggregate(const char *schema, const char *name, int nargs, Oid *argtypes)
{
	return LookupFuncName(list_make2(makeString((char *) schema), makeString((char *) name)),
						  nargs, argtypes, true);
}

static Aggref *
MakeAggref(Oid aggfnoid, Oid resultType, Oid inputCollation, List *args)
{
	Aggref	   *aggref = makeNode(Aggref);
	ListCell   *cell;
	int			resno = 1;

	aggref->aggfnoid = aggfnoid;
	aggref->aggtype = resultType;
	aggref->aggcollid = type_is_collatable(resultType) ? inputCollation : InvalidOid;
	aggref->inputcollid = inputCollation;
	aggref->aggtranstype = InvalidOid;
	foreach(cell, args)
	{
		aggref->aggargtypes = lappend_oid(aggref->aggargtypes, exprType(lfirst(cell)));
		aggref->args = lappend(aggref->args,
							   makeTargetEntry(lfirst(cell), resno++, NULL, false));
	}
	aggref->aggkind = AGGKIND_NORMAL;
	aggref->aggsplit = AGGSPLIT_SIMPLE;
	aggref->aggno = -1;
	aggref->aggtransno = -1;
	aggref->location = -1;
	return aggref;
}

/*
 * AppendPartial adds a partial aggregate "<function>(<arg>) FILTER (...)"
 * to the shard query and returns its column.
 */
static int
AppendPartial(CombineContext *context, const char *function, Node *arg, const char *cast,
			  Node *extraArg, Aggref *original, Oid type, int32 typmod, Oid collation)
{
	StringInfo	buf = &context->sql->buf;

	if (context->columnCount > 0)
		appendStringInfoString(buf, ", ");
	appendStringInfo(buf, "%s(", function);
	if (arg == NULL)
		appendStringInfoChar(buf, '*');
	else
	{
		Node	   *expr = FlattenAliasVars(context->query, arg);

		appendStringInfoChar(buf, '(');
		DeparseRemoteExpr(context->sql, expr);
		if (cast != NULL && strcmp(cast, SQUARE_AS_NUMERIC) == 0)
		{
			appendStringInfoString(buf, ")::pg_catalog.numeric OPERATOR(pg_catalog.*) (");
			DeparseRemoteExpr(context->sql, expr);
			appendStringInfoString(buf, ")::pg_catalog.numeric");
		}
		else
			appendStringInfo(buf, ")%s", cast ? cast : "");
	}
	if (extraArg != NULL)
	{
		appendStringInfoString(buf, ", ");
		DeparseRemoteExpr(context->sql, extraArg);
	}
	appendStringInfoChar(buf, ')');
	if (original->aggfilter != NULL)
	{
		appendStringInfoString(buf, " FILTER (WHERE ");
		DeparseRemoteExpr(context->sql, FlattenAliasVars(context->query,
														 (Node *) original->aggfilter));
		appendStringInfoChar(buf, ')');
	}
	return AddWorkerColumn(context, type, typmod, collation);
}

/*
 * SplitAggregate adds an aggregate's partial form(s) to the shard query and
 * returns the expression that combines them.  Exact where PostgreSQL's own
 * result is exact: count, sum and avg of integers and numeric combine with
 * the arithmetic the aggregates' final functions use.
 */
static Node *
SplitAggregate(Aggref *aggref, CombineContext *context)
{
	char	   *name = get_func_name(aggref->aggfnoid);
	Oid			namespace = get_func_namespace(aggref->aggfnoid);
	Node	   *arg = NULL;
	Oid			argType = InvalidOid;
	Oid			resultType = aggref->aggtype;
	Oid			collation = aggref->inputcollid;
	int			column;

	if (aggref->aggdistinct != NIL && context->distinctColumn > 0 &&
		aggref->aggorder == NIL && aggref->aggfilter == NULL &&
		list_length(aggref->args) == 1 && aggref->agglevelsup == 0)
		return CombineDistinctAggregate(aggref, context);
	if (namespace != PG_CATALOG_NAMESPACE || aggref->aggorder != NIL ||
		aggref->aggdistinct != NIL || aggref->aggkind != AGGKIND_NORMAL ||
		aggref->agglevelsup != 0 || list_length(aggref->args) > 2)
	{
		context->failed = true;
		context->failReason = "an ordered, DISTINCT or special aggregate";
		return (Node *) aggref;
	}
	if (aggref->args != NIL)
	{
		arg = (Node *) ((TargetEntry *) linitial(aggref->args))->expr;
		argType = exprType(arg);
	}

	if (strcmp(name, "count") == 0)
	{
		column = AppendPartial(context, "pg_catalog.count", arg, NULL, NULL, aggref,
							   INT8OID, -1, InvalidOid);
		return (Node *) CombineColumn(context, SHARDEXT_SCHEMA_NAME, "sum_counts", INT8OID,
									  column);
	}
	if (strcmp(name, "sum") == 0 && list_length(aggref->args) == 1)
	{
		Oid			combineFn;

		column = AppendPartial(context, "pg_catalog.sum", arg, NULL, NULL, aggref,
							   resultType, -1, InvalidOid);
		if (resultType == INT8OID)
			combineFn = LookupAggregate(SHARDEXT_SCHEMA_NAME, "sum_int8", 1, &resultType);
		else
			combineFn = LookupAggregate("pg_catalog", "sum", 1, &resultType);
		if (!OidIsValid(combineFn) || get_func_rettype(combineFn) != resultType)
		{
			context->failed = true;
			context->failReason = "a sum that cannot be combined";
			return (Node *) aggref;
		}
		return (Node *) MakeAggref(combineFn, resultType, InvalidOid,
								   list_make1(WorkerColumnVar(context, column)));
	}
	if (strcmp(name, "avg") == 0 && list_length(aggref->args) == 1)
		return SplitAverage(aggref, arg, context);
	if ((strcmp(name, "min") == 0 || strcmp(name, "max") == 0 ||
		 strcmp(name, "bool_and") == 0 || strcmp(name, "bool_or") == 0 ||
		 strcmp(name, "every") == 0 || strcmp(name, "bit_and") == 0 ||
		 strcmp(name, "bit_or") == 0) && list_length(aggref->args) == 1)
	{
		column = AppendPartial(context, quote_qualified_identifier("pg_catalog", name), arg,
							   NULL, NULL, aggref, resultType, exprTypmod((Node *) aggref),
							   aggref->aggcollid);
		return (Node *) MakeAggref(aggref->aggfnoid, resultType, collation,
								   list_make1(WorkerColumnVar(context, column)));
	}
	if (strcmp(name, "string_agg") == 0 && list_length(aggref->args) == 2 &&
		IsA(((TargetEntry *) lsecond(aggref->args))->expr, Const))
	{
		Node	   *delimiter = (Node *) ((TargetEntry *) lsecond(aggref->args))->expr;

		column = AppendPartial(context, "pg_catalog.string_agg", arg, NULL, delimiter, aggref,
							   resultType, -1, aggref->aggcollid);
		return (Node *) MakeAggref(aggref->aggfnoid, resultType, collation,
								   list_make2(WorkerColumnVar(context, column), delimiter));
	}
	if ((strcmp(name, "variance") == 0 || strcmp(name, "var_samp") == 0 ||
		 strcmp(name, "var_pop") == 0 || strcmp(name, "stddev") == 0 ||
		 strcmp(name, "stddev_samp") == 0 || strcmp(name, "stddev_pop") == 0) &&
		list_length(aggref->args) == 1 &&
		(argType == INT2OID || argType == INT4OID || argType == INT8OID || argType == NUMERICOID))
		return SplitVariance(aggref, name, arg, context);
	if ((strcmp(name, "array_agg") == 0 || strcmp(name, "jsonb_agg") == 0 ||
		 strcmp(name, "json_agg") == 0) &&
		list_length(aggref->args) == 1)
	{
		Oid			combineFn;

		column = AppendPartial(context, quote_qualified_identifier("pg_catalog", name), arg,
							   NULL, NULL, aggref, resultType, -1, aggref->aggcollid);
		combineFn = LookupAggregate(SHARDEXT_SCHEMA_NAME,
									strcmp(name, "array_agg") == 0 ? "array_cat_agg" :
									strcmp(name, "jsonb_agg") == 0 ? "jsonb_cat_agg" : "json_cat_agg",
									1, &resultType);
		if (OidIsValid(combineFn))
			return (Node *) MakeAggref(combineFn, resultType, collation,
									   list_make1(WorkerColumnVar(context, column)));
	}

	context->failed = true;
	context->failReason = "an aggregate that cannot be split";
	return (Node *) aggref;
}

/*
 * CombineDistinctAggregate: the shards grouped by the argument of agg(DISTINCT
 * x), so the coordinator aggregates the distinct values they return.
 */
static Node *
CombineDistinctAggregate(Aggref *aggref, CombineContext *context)
{
	Aggref	   *combine = copyObject(aggref);
	TargetEntry *tle = linitial(combine->args);
	SortGroupClause *sgc = linitial(combine->aggdistinct);

	tle->expr = (Expr *) WorkerColumnVar(context, context->distinctColumn);
	tle->ressortgroupref = 1;
	sgc->tleSortGroupRef = 1;
	combine->aggtranstype = InvalidOid;
	combine->aggno = -1;
	combine->aggtransno = -1;
	return (Node *) combine;
}

/*
 * CombineColumn is the aggregate schema.name(type) of a shard query column:
 * how the coordinator combines a partial aggregate.
 */
static Aggref *
CombineColumn(CombineContext *context, const char *schema, const char *name, Oid type,
			  int column)
{
	return MakeAggref(LookupAggregate(schema, name, 1, &type), type, InvalidOid,
					  list_make1(WorkerColumnVar(context, column)));
}

/*
 * SplitAverage: the shards return sums and counts; the coordinator divides
 * the sum of the sums by the sum of the counts, in the result type of avg.
 */
static Node *
SplitAverage(Aggref *aggref, Node *arg, CombineContext *context)
{
	Oid			argType = exprType(arg);
	Oid			resultType = aggref->aggtype;
	int			sumColumn;
	int			countColumn;
	Node	   *sum;
	Node	   *count;

	if (argType == INT2OID || argType == INT4OID)
	{
		sumColumn = AppendPartial(context, "pg_catalog.sum", arg, NULL, NULL, aggref,
								  INT8OID, -1, InvalidOid);
		sum = (Node *) CombineColumn(context, SHARDEXT_SCHEMA_NAME, "sum_int8", INT8OID,
									 sumColumn);
		sum = (Node *) makeFuncExpr(F_NUMERIC_INT8, NUMERICOID, list_make1(sum),
									InvalidOid, InvalidOid, COERCE_EXPLICIT_CAST);
	}
	else if (argType == INT8OID || argType == NUMERICOID)
	{
		sumColumn = AppendPartial(context, "pg_catalog.sum", arg, NULL, NULL, aggref,
								  NUMERICOID, -1, InvalidOid);
		sum = (Node *) CombineColumn(context, "pg_catalog", "sum", NUMERICOID, sumColumn);
	}
	else if (argType == FLOAT4OID || argType == FLOAT8OID)
	{
		sumColumn = AppendPartial(context, "pg_catalog.sum", arg, "::pg_catalog.float8",
								  NULL, aggref, FLOAT8OID, -1, InvalidOid);
		sum = (Node *) CombineColumn(context, "pg_catalog", "sum", FLOAT8OID, sumColumn);
	}
	else
	{
		context->failed = true;
		context->failReason = "an average of this type";
		return (Node *) aggref;
	}
	countColumn = AppendPartial(context, "pg_catalog.count", arg, NULL, NULL, aggref,
								INT8OID, -1, InvalidOid);
	count = (Node *) CombineColumn(context, SHARDEXT_SCHEMA_NAME, "sum_counts", INT8OID,
								   countColumn);
	if (resultType == NUMERICOID)
		return (Node *) makeFuncExpr(F_NUMERIC_DIV, NUMERICOID,
									 list_make2(sum,
												makeFuncExpr(F_NUMERIC_INT8, NUMERICOID,
															 list_make1(count), InvalidOid,
															 InvalidOid, COERCE_EXPLICIT_CAST)),
									 InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	return (Node *) makeFuncExpr(F_FLOAT8DIV, FLOAT8OID,
								 list_make2(sum,
											makeFuncExpr(F_FLOAT8_INT8, FLOAT8OID,
														 list_make1(count), InvalidOid,
														 InvalidOid, COERCE_EXPLICIT_CAST)),
								 InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
}

/*
 * SplitVariance: exact numeric counts, sums and sums of squares per shard;
 * shardext.combine_variance applies the arithmetic of PostgreSQL's
 * numeric_stddev_internal to their totals.
 */
static Node *
SplitVariance(Aggref *aggref, const char *name, Node *arg, CombineContext *context)
{
	int			countColumn;
	int			sumColumn;
	int			squaresColumn;
	Oid			combineFn;
	Oid			argtypes[5] = {INT8OID, NUMERICOID, NUMERICOID, BOOLOID, BOOLOID};
	bool		sample = strcmp(name, "var_pop") != 0 && strcmp(name, "stddev_pop") != 0;
	bool		root = strncmp(name, "stddev", 6) == 0;

	countColumn = AppendPartial(context, "pg_catalog.count", arg, NULL, NULL, aggref,
								INT8OID, -1, InvalidOid);
	sumColumn = AppendPartial(context, "pg_catalog.sum", arg, "::pg_catalog.numeric",
							  NULL, aggref, NUMERICOID, -1, InvalidOid);
	squaresColumn = AppendPartial(context, "pg_catalog.sum", arg, SQUARE_AS_NUMERIC,
								  NULL, aggref, NUMERICOID, -1, InvalidOid);
	combineFn = LookupFuncName(list_make2(makeString(SHARDEXT_SCHEMA_NAME),
										  makeString("combine_variance")),
							   5, argtypes, false);
	return (Node *) makeFuncExpr(combineFn, NUMERICOID,
								 list_make5(CombineColumn(context, SHARDEXT_SCHEMA_NAME,
														  "sum_counts", INT8OID, countColumn),
											CombineColumn(context, "pg_catalog", "sum",
														  NUMERICOID, sumColumn),
											CombineColumn(context, "pg_catalog", "sum",
														  NUMERICOID, squaresColumn),
											makeBoolConst(sample, false),
											makeBoolConst(root, false)),
								 InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
}

typedef struct DistinctContext
{
	Node	   *argument;
	bool		conflict;
} DistinctContext;

static bool
DistinctAggregateWalker(Node *node, DistinctContext *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Aggref))
	{
		Aggref	   *aggref = (Aggref *) node;

		if (aggref->aggdistinct != NIL && aggref->agglevelsup == 0)
		{
			Node	   *argument;

			if (list_length(aggref->args) != 1 || aggref->aggfilter != NULL ||
				aggref->aggorder != NIL)
			{
				context->conflict = true;
				return true;
			}
			argument = (Node *) ((TargetEntry *) linitial(aggref->args))->expr;
			if (context->argument != NULL && !equal(context->argument, argument))
			{
				context->conflict = true;
				return true;
			}
			context->argument = argument;
		}
		return false;
	}
	return expression_tree_walker(node, DistinctAggregateWalker, context);
}

/*
 * DistinctAggregateArgument returns the argument of the query's DISTINCT
 * aggregates (all must share one), NULL when there are none, or the query
 * itself when they cannot be split (several arguments, FILTER, ORDER BY).
 */
static Node *
DistinctAggregateArgument(Query *query)
{
	DistinctContext context = {NULL, false};

	DistinctAggregateWalker((Node *) query->targetList, &context);
	DistinctAggregateWalker(query->havingQual, &context);
	if (context.conflict)
		return (Node *) query;
	return context.argument;
}

/*
 * PlanCombineQuery plans the combine step and puts the distributed scan in
 * place of the placeholder function scan.
 */
static PlannedStmt *
PlanCombineQuery(Query *combine, CustomScan *scan, int columnCount, int cursorOptions,
				 ParamListInfo boundParams)
{
	PlannedStmt *plan;
	bool		replaced = false;
	List	   *scanTargetList = NIL;
	RangeTblEntry *rte = linitial(combine->rtable);
	RangeTblFunction *rtfunc = linitial(rte->functions);

	plan = StandardPlanner(combine, NULL, cursorOptions, boundParams, PlannerExplainState);

	for (int i = 1; i <= columnCount; i++)
		scanTargetList = lappend(scanTargetList,
								 makeTargetEntry((Expr *) makeVar(1, i,
																  list_nth_oid(rtfunc->funccoltypes, i - 1),
																  list_nth_int(rtfunc->funccoltypmods, i - 1),
																  list_nth_oid(rtfunc->funccolcollations, i - 1),
																  0),
												 i, NULL, false));
	scan->custom_scan_tlist = scanTargetList;
	plan->planTree = ReplacePlaceholderScan(plan->planTree, scan, &replaced);
	if (!replaced)
		elog(ERROR, "the combine plan has no scan of the shard results");
	return plan;
}

static Node *
PlaceholderVarsToIndexVars(Node *node, void *context)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var) && ((Var *) node)->varno == 1 && ((Var *) node)->varlevelsup == 0)
	{
		Var		   *var = copyObject((Var *) node);

		var->varno = INDEX_VAR;
		return (Node *) var;
	}
	return expression_tree_mutator(node, PlaceholderVarsToIndexVars, context);
}

static Plan *
ReplacePlaceholderScan(Plan *plan, CustomScan *scan, bool *replaced)
{
	if (plan == NULL)
		return NULL;
	if (IsA(plan, FunctionScan) && ((Scan *) plan)->scanrelid == 1)
	{
		scan->scan.plan.startup_cost = plan->startup_cost;
		scan->scan.plan.total_cost = plan->total_cost;
		scan->scan.plan.plan_rows = plan->plan_rows;
		scan->scan.plan.plan_width = plan->plan_width;
		scan->scan.plan.targetlist = (List *) PlaceholderVarsToIndexVars((Node *) plan->targetlist, NULL);
		scan->scan.plan.qual = (List *) PlaceholderVarsToIndexVars((Node *) plan->qual, NULL);
		scan->scan.plan.initPlan = plan->initPlan;
		scan->scan.plan.extParam = plan->extParam;
		scan->scan.plan.allParam = plan->allParam;
		scan->scan.plan.plan_node_id = plan->plan_node_id;
		scan->scan.scanrelid = 0;
		*replaced = true;
		return (Plan *) scan;
	}
	plan->lefttree = ReplacePlaceholderScan(plan->lefttree, scan, replaced);
	plan->righttree = ReplacePlaceholderScan(plan->righttree, scan, replaced);
	return plan;
}
