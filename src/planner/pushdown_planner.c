/*-------------------------------------------------------------------------
 *
 * pushdown_planner.c
 *	  Multi-shard SELECT pushdown: one query per shard plus a "combine"
 *	  step on the coordinator.
 *
 * The FROM clause is pushed down when it is correct shard by shard: the
 * distributed tables are co-located and connected by equalities of their
 * distribution columns (so rows that join live in shards of the same
 * index), reference tables are only joined where they cannot produce
 * unmatched rows once per shard, and subqueries in expressions read only
 * reference tables or are co-located: EXISTS correlated on the
 * distribution column, distribution column IN (SELECT distribution
 * column ...).
 *
 * Above it, either the whole query runs on each shard ("full pushdown":
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

#include "shardext/shardext.h"
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

static bool JoinTreeHasHashTable(Node *jtnode, Query *query);
static bool CheckOuterJoins(Node *jtnode, Query *query);
static bool SublinksAreColocated(Query *query, PushdownInfo *info);
static bool WindowsPartitionedByDistColumn(Query *query, PushdownInfo *info);
static int	AddWorkerColumn(CombineContext *context, Oid type, int32 typmod, Oid collation);
static Var *WorkerColumnVar(CombineContext *context, int column);
static Node *CombineMutator(Node *node, CombineContext *context);
static Node *DistinctAggregateArgument(Query *query);
static Node *SplitAggregate(Aggref *aggref, CombineContext *context);
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
	RemoteSql	sql;
	CombineContext context;
	DistributedJob job;
	List	   *values = NIL;
	List	   *kinds = NIL;
	List	   *customExprs;
	Query	   *combine;
	bool		fullPushdown;
	bool		needsCombine;
	ListCell   *cell;
	List	   *conjuncts;
	Node	   *distinctExpr = NULL;

	if (query->setOperations != NULL || query->cteList != NIL || query->hasTargetSRFs ||
		query->groupingSets != NIL || query->rowMarks != NIL || query->hasRecursive ||
		query->limitOption == LIMIT_OPTION_WITH_TIES || query->jointree->fromlist == NIL)
		return NULL;
	memset(&info, 0, sizeof(info));
	if (!AnalyzePushdownFrom(query, &info))
		return NULL;

	if (query->hasWindowFuncs)
	{
		if (!WindowsPartitionedByDistColumn(query, &info))
			return NULL;
		if (query->hasAggs && !GroupedByDistColumn(query, &info))
			return NULL;
		fullPushdown = true;
	}
	else if (query->hasAggs || query->groupClause != NIL || query->havingQual != NULL)
		fullPushdown = GroupedByDistColumn(query, &info);
	else
		fullPushdown = true;
	if (query->hasDistinctOn && !fullPushdown)
		return NULL;

	memset(&context, 0, sizeof(context));
	context.query = query;
	context.sql = &sql;
	InitRemoteSql(&sql);
	RemoteSqlPushQuery(&sql, query);

	combine = makeNode(Query);
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

	appendStringInfoString(&sql.buf, "SELECT ");
	if (fullPushdown)
	{
		/* every target (junk too) is computed by the shards */
		if (query->distinctClause != NIL && !query->hasDistinctOn)
			appendStringInfoString(&sql.buf, "DISTINCT ");
		else if (query->hasDistinctOn)
		{
			appendStringInfoString(&sql.buf, "DISTINCT ON (");
			foreach(cell, query->distinctClause)
			{
				if (cell != list_head(query->distinctClause))
					appendStringInfoString(&sql.buf, ", ");
				DeparseRemoteExpr(&sql, get_sortgroupclause_expr(lfirst(cell), query->targetList));
			}
			appendStringInfoString(&sql.buf, ") ");
		}
		foreach(cell, query->targetList)
		{
			TargetEntry *tle = lfirst(cell);
			TargetEntry *newTle;
			int			column;
			Node	   *expr = flatten_join_alias_vars(query, (Node *) tle->expr);

			if (cell != list_head(query->targetList))
				appendStringInfoString(&sql.buf, ", ");
			DeparseRemoteExpr(&sql, expr);
			column = AddWorkerColumn(&context, exprType(expr), exprTypmod(expr),
									 exprCollation(expr));
			newTle = makeTargetEntry((Expr *) WorkerColumnVar(&context, column),
									 tle->resno, tle->resname, tle->resjunk);
			newTle->ressortgroupref = tle->ressortgroupref;
			combine->targetList = lappend(combine->targetList, newTle);
		}
	}
	else
	{
		/* shards group and compute partial aggregates; we combine them */
		foreach(cell, query->groupClause)
		{
			Node	   *expr = get_sortgroupclause_expr(lfirst(cell), query->targetList);

			context.groupExprs = lappend(context.groupExprs, expr);
			if (cell != list_head(query->groupClause))
				appendStringInfoString(&sql.buf, ", ");
			DeparseRemoteExpr(&sql, flatten_join_alias_vars(query, expr));
			AddWorkerColumn(&context, exprType(expr), exprTypmod(expr), exprCollation(expr));
		}
		distinctExpr = DistinctAggregateArgument(query);
		if (distinctExpr == (Node *) query)
			return NULL;
		if (distinctExpr != NULL)
		{
			/* count(DISTINCT x): the shards also group by x */
			if (context.columnCount > 0)
				appendStringInfoString(&sql.buf, ", ");
			DeparseRemoteExpr(&sql, flatten_join_alias_vars(query, distinctExpr));
			context.distinctColumn = AddWorkerColumn(&context, exprType(distinctExpr),
													 exprTypmod(distinctExpr),
													 exprCollation(distinctExpr));
		}
		foreach(cell, query->targetList)
		{
			TargetEntry *tle = lfirst(cell);
			TargetEntry *newTle;

			newTle = makeTargetEntry((Expr *) CombineMutator((Node *) tle->expr, &context),
									 tle->resno, tle->resname, tle->resjunk);
			newTle->ressortgroupref = tle->ressortgroupref;
			combine->targetList = lappend(combine->targetList, newTle);
		}
		combine->havingQual = CombineMutator(query->havingQual, &context);
		combine->groupClause = query->groupClause;
		combine->hasAggs = query->hasAggs;
		if (context.columnCount == 0)
			appendStringInfoString(&sql.buf, "NULL");
	}
	if (context.failed)
		RemoteSqlFail(&sql, context.failReason);

	appendStringInfoString(&sql.buf, " FROM ");
	foreach(cell, query->jointree->fromlist)
	{
		if (cell != list_head(query->jointree->fromlist))
			appendStringInfoString(&sql.buf, ", ");
		DeparseRemoteFromItem(&sql, lfirst(cell));
	}
	if (query->jointree->quals != NULL)
	{
		appendStringInfoString(&sql.buf, " WHERE ");
		DeparseRemoteExpr(&sql, flatten_join_alias_vars(query, query->jointree->quals));
	}
	if (query->groupClause != NIL || distinctExpr != NULL)
	{
		appendStringInfoString(&sql.buf, " GROUP BY ");
		foreach(cell, query->groupClause)
		{
			if (cell != list_head(query->groupClause))
				appendStringInfoString(&sql.buf, ", ");
			DeparseRemoteExpr(&sql, flatten_join_alias_vars(query,
															get_sortgroupclause_expr(lfirst(cell), query->targetList)));
		}
		if (distinctExpr != NULL)
		{
			if (query->groupClause != NIL)
				appendStringInfoString(&sql.buf, ", ");
			DeparseRemoteExpr(&sql, flatten_join_alias_vars(query, distinctExpr));
		}
	}
	if (fullPushdown && query->havingQual != NULL)
	{
		appendStringInfoString(&sql.buf, " HAVING ");
		DeparseRemoteExpr(&sql, flatten_join_alias_vars(query, query->havingQual));
	}
	if (fullPushdown && query->sortClause != NIL)
	{
		appendStringInfoString(&sql.buf, " ORDER BY ");
		DeparseRemoteOrderBy(&sql, query, query->sortClause,
							 (List *) flatten_join_alias_vars(query, (Node *) query->targetList));
	}
	if (fullPushdown && query->limitCount != NULL)
	{
		/* each shard's first LIMIT + OFFSET rows hold the result's */
		appendStringInfoString(&sql.buf, " LIMIT ");
		if (query->limitOffset != NULL)
		{
			appendStringInfoString(&sql.buf, "(");
			DeparseRemoteExpr(&sql, query->limitCount);
			appendStringInfoString(&sql.buf, " OPERATOR(pg_catalog.+) ");
			DeparseRemoteExpr(&sql, query->limitOffset);
			appendStringInfoString(&sql.buf, ")");
		}
		else
			DeparseRemoteExpr(&sql, query->limitCount);
	}
	RemoteSqlPopQuery(&sql);
	FinishRemoteSql(&sql);
	if (sql.failed)
		return NULL;

	/* prune by the distribution columns of every (connected) hash table */
	conjuncts = TopLevelConjuncts(query);
	foreach(cell, info.hashRtindexes)
	{
		Index		rtindex = lfirst_int(cell);

		FindPruningValues(query, rtindex,
						  GetDistTableCacheEntry(rt_fetch(rtindex, query->rtable)->relid),
						  (Node *) conjuncts, &values, &kinds);
	}

	memset(&job, 0, sizeof(job));
	job.kind = JOB_SELECT;
	job.sqlParts = sql.parts;
	job.relations = sql.relations;
	job.anchor = RelationPosition(sql.relations, info.anchorRelid);
	job.pruneCount = list_length(values);
	job.pruneKinds = kinds;
	job.paramCount = list_length(sql.paramExprs);
	job.usePrepared = false;
	job.insertDistColumn = -1;
	customExprs = NIL;
	foreach(cell, list_concat(values, sql.paramExprs))
		customExprs = lappend(customExprs, expression_planner(lfirst(cell)));

	needsCombine = !fullPushdown || query->sortClause != NIL || query->limitCount != NULL ||
		query->limitOffset != NULL || query->distinctClause != NIL;
	if (!needsCombine)
	{
		List	   *remoteTargetList = NIL;

		foreach(cell, query->targetList)
			remoteTargetList = lappend(remoteTargetList, lfirst(cell));
		return MakeDistributedPlannedStmt(query, MakeDistributedScan(&job, customExprs),
										  remoteTargetList);
	}

	/* the combine query reads the shard rows from the placeholder */
	{
		RangeTblEntry *rte = makeNode(RangeTblEntry);
		RangeTblFunction *rtfunc = makeNode(RangeTblFunction);
		FuncExpr   *placeholder;
		List	   *names = NIL;
		Oid			placeholderOid;
		List	   *relids;
		List	   *rtes;

		placeholderOid = LookupFuncName(list_make2(makeString(SHARDEXT_SCHEMA_NAME),
												   makeString("distributed_result")),
										0, NULL, false);
		placeholder = makeFuncExpr(placeholderOid, RECORDOID, NIL, InvalidOid,
								   InvalidOid, COERCE_EXPLICIT_CALL);
		placeholder->funcretset = true;
		for (int i = 1; i <= context.columnCount; i++)
			names = lappend(names, makeString(psprintf("w%d", i)));
		rtfunc->funcexpr = (Node *) placeholder;
		rtfunc->funccolcount = context.columnCount;
		rtfunc->funccolnames = names;
		rtfunc->funccoltypes = context.columnTypes;
		rtfunc->funccoltypmods = context.columnTypmods;
		rtfunc->funccolcollations = context.columnCollations;
		rte->rtekind = RTE_FUNCTION;
		rte->functions = list_make1(rtfunc);
		rte->eref = makeAlias("shards", names);
		rte->alias = makeAlias("shards", NIL);
		rte->inFromCl = true;
		rte->lateral = false;
		combine->rtable = list_make1(rte);
		combine->jointree = makeFromExpr(list_make1(makeNode(RangeTblRef)), NULL);
		((RangeTblRef *) linitial(combine->jointree->fromlist))->rtindex = 1;

		/* the tables, for permission checks and plan invalidation */
		CollectRelations(query, &relids, &rtes);
		foreach(cell, rtes)
		{
			RangeTblEntry *copy = copyObject(lfirst(cell));

			copy->inh = false;
			combine->rtable = lappend(combine->rtable, copy);
		}
	}

	return PlanCombineQuery(combine, MakeDistributedScan(&job, customExprs),
							context.columnCount, cursorOptions, boundParams);
}

/*
 * AnalyzePushdownFrom checks that the FROM clause can run shard by shard
 * (see the file header) and finds its hash tables.
 */
bool
AnalyzePushdownFrom(Query *query, PushdownInfo *info)
{
	int			count = list_length(query->rtable);
	int32		colocationId = -1;
	int		   *groups;
	List	   *conjuncts = NIL;
	ListCell   *cell;
	int			group = -1;
	Index		rtindex;

	groups = palloc(sizeof(int) * (count + 1));
	for (rtindex = 1; rtindex <= count; rtindex++)
	{
		RangeTblEntry *rte = rt_fetch(rtindex, query->rtable);
		DistTableCacheEntry *entry;

		groups[rtindex] = rtindex;
		if (rte->rtekind == RTE_JOIN)
			continue;
		if (rte->rtekind != RTE_RELATION)
			return false;
		entry = GetDistTableCacheEntry(rte->relid);
		if (entry == NULL)
			return false;
		if (entry->method != DISTRIBUTE_BY_HASH)
			continue;
		if (colocationId >= 0 && entry->colocationId != colocationId)
			return false;
		colocationId = entry->colocationId;
		info->colocationId = colocationId;
		info->hashRtindexes = lappend_int(info->hashRtindexes, rtindex);
		info->distVars = lappend(info->distVars,
								 makeVar(rtindex, entry->distAttnum, entry->distType,
										 entry->distTypmod, entry->distCollation, 0));
		if (!OidIsValid(info->anchorRelid))
			info->anchorRelid = rte->relid;
	}
	if (info->hashRtindexes == NIL)
		return false;

	/* distribution column equalities connect the hash tables */
	CollectJoinTreeQuals((Node *) query->jointree, false, &conjuncts);
	foreach(cell, conjuncts)
	{
		OpExpr	   *op = lfirst(cell);
		Index		left;
		Index		right;

		if (!IsA(op, OpExpr) || list_length(op->args) != 2)
			continue;
		if (IsDistColumnVar(linitial(op->args), query, 0, &left) &&
			IsDistColumnVar(lsecond(op->args), query, 0, &right) &&
			IsHashEquality(op->opno, GetDistTableCacheEntry(rt_fetch(left, query->rtable)->relid)))
		{
			int			from = groups[left];
			int			to = groups[right];

			for (rtindex = 1; rtindex <= count; rtindex++)
			{
				if (groups[rtindex] == from)
					groups[rtindex] = to;
			}
		}
	}
	foreach(cell, info->hashRtindexes)
	{
		if (group >= 0 && groups[lfirst_int(cell)] != group)
			return false;
		group = groups[lfirst_int(cell)];
	}

	if (!CheckOuterJoins((Node *) query->jointree, query))
		return false;
	return SublinksAreColocated(query, info);
}

static bool
JoinTreeHasHashTable(Node *jtnode, Query *query)
{
	if (IsA(jtnode, RangeTblRef))
	{
		RangeTblEntry *rte = rt_fetch(((RangeTblRef *) jtnode)->rtindex, query->rtable);

		return rte->rtekind == RTE_RELATION && IsHashDistributedTable(rte->relid);
	}
	if (IsA(jtnode, JoinExpr))
		return JoinTreeHasHashTable(((JoinExpr *) jtnode)->larg, query) ||
			JoinTreeHasHashTable(((JoinExpr *) jtnode)->rarg, query);
	if (IsA(jtnode, FromExpr))
	{
		ListCell   *cell;

		foreach(cell, ((FromExpr *) jtnode)->fromlist)
		{
			if (JoinTreeHasHashTable(lfirst(cell), query))
				return true;
		}
	}
	return false;
}

/*
 * CheckOuterJoins: the preserved side of an outer join whose other side
 * reads a distributed table must read one too (else its unmatched rows
 * would come back once per shard).
 */
static bool
CheckOuterJoins(Node *jtnode, Query *query)
{
	if (IsA(jtnode, FromExpr))
	{
		ListCell   *cell;

		foreach(cell, ((FromExpr *) jtnode)->fromlist)
		{
			if (!CheckOuterJoins(lfirst(cell), query))
				return false;
		}
		return true;
	}
	if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) jtnode;
		bool		left = JoinTreeHasHashTable(join->larg, query);
		bool		right = JoinTreeHasHashTable(join->rarg, query);

		if ((join->jointype == JOIN_LEFT && right && !left) ||
			(join->jointype == JOIN_RIGHT && left && !right) ||
			(join->jointype == JOIN_FULL && left != right))
			return false;
		return CheckOuterJoins(join->larg, query) && CheckOuterJoins(join->rarg, query);
	}
	return true;
}

static bool
SublinkRelationsWalker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind == RTE_RELATION)
			return !IsReferenceTable(rte->relid);
		return false;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, SublinkRelationsWalker, context,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, SublinkRelationsWalker, context);
}

/* does a query (with its subqueries) read only reference tables? */
static bool
ReadsOnlyReferenceTables(Query *query)
{
	return !query_tree_walker(query, SublinkRelationsWalker, NULL, QTW_EXAMINE_RTES_BEFORE);
}

/*
 * SubqueryCorrelatedOnDistColumn: does a conjunct of the subquery equate
 * the distribution column of one of its hash tables with the distribution
 * column of one of the outer query's?
 */
static bool
SubqueryCorrelatedOnDistColumn(Query *subquery, Query *outer)
{
	List	   *conjuncts = TopLevelConjuncts(subquery);
	ListCell   *cell;

	foreach(cell, conjuncts)
	{
		OpExpr	   *op = lfirst(cell);
		Index		inner;
		Index		outerIndex;

		if (!IsA(op, OpExpr) || list_length(op->args) != 2)
			continue;
		for (int side = 0; side < 2; side++)
		{
			if (IsDistColumnVar(list_nth(op->args, side), subquery, 0, &inner) &&
				IsDistColumnVar(list_nth(op->args, 1 - side), outer, 1, &outerIndex) &&
				IsHashEquality(op->opno,
							   GetDistTableCacheEntry(rt_fetch(inner, subquery->rtable)->relid)))
				return true;
		}
	}
	return false;
}

typedef struct SublinkCheckContext
{
	Query	   *query;
	PushdownInfo *info;
	bool		ok;
} SublinkCheckContext;

/*
 * SublinkIsColocated: can a subquery in an expression run shard by shard?
 * Yes when it reads only reference tables; or, for co-located tables,
 * when EXISTS (...) is correlated on the distribution column (the rows it
 * can see are in the outer row's shard), or when dist_col IN (SELECT
 * dist_col ...) has a plain subquery (no aggregation, DISTINCT or LIMIT,
 * which would be computed per shard).
 */
static bool
SublinkIsColocated(SubLink *sublink, SublinkCheckContext *context)
{
	Query	   *subquery = (Query *) sublink->subselect;
	PushdownInfo subinfo;

	if (ReadsOnlyReferenceTables(subquery))
		return true;
	if (subquery->setOperations != NULL || subquery->cteList != NIL ||
		subquery->hasTargetSRFs || subquery->rowMarks != NIL)
		return false;
	memset(&subinfo, 0, sizeof(subinfo));
	if (!AnalyzePushdownFrom(subquery, &subinfo) ||
		subinfo.colocationId != context->info->colocationId)
		return false;

	if (sublink->subLinkType == EXISTS_SUBLINK)
		return SubqueryCorrelatedOnDistColumn(subquery, context->query);

	if (sublink->subLinkType == ANY_SUBLINK)
	{
		OpExpr	   *test = (OpExpr *) sublink->testexpr;
		TargetEntry *first;

		if (subquery->hasAggs || subquery->groupClause != NIL ||
			subquery->havingQual != NULL || subquery->distinctClause != NIL ||
			subquery->limitCount != NULL || subquery->limitOffset != NULL ||
			subquery->hasWindowFuncs)
			return false;
		if (test == NULL || !IsA(test, OpExpr) || list_length(test->args) != 2 ||
			!IsA(lsecond(test->args), Param) ||
			!IsDistColumnOf(linitial(test->args), context->query, context->info) ||
			!IsHashEquality(test->opno, GetDistTableCacheEntry(context->info->anchorRelid)))
			return false;
		first = linitial(subquery->targetList);
		return !first->resjunk && IsDistColumnOf((Node *) first->expr, subquery, &subinfo);
	}
	return false;
}

static bool
SublinkCheckWalker(Node *node, SublinkCheckContext *context)
{
	if (node == NULL || !context->ok)
		return false;
	if (IsA(node, SubLink))
	{
		if (!SublinkIsColocated((SubLink *) node, context))
		{
			context->ok = false;
			return true;
		}
		return SublinkCheckWalker(((SubLink *) node)->testexpr, context);
	}
	if (IsA(node, Query))
		return false;
	return expression_tree_walker(node, SublinkCheckWalker, context);
}

/* can every subquery in the query's expressions run shard by shard? */
static bool
SublinksAreColocated(Query *query, PushdownInfo *info)
{
	SublinkCheckContext context = {query, info, true};

	if (!query->hasSubLinks)
		return true;
	query_tree_walker(query, SublinkCheckWalker, &context, QTW_IGNORE_RANGE_TABLE);
	return context.ok;
}

/* is node a distribution column Var of one of the top-level hash tables? */
bool
IsDistColumnOf(Node *node, Query *query, PushdownInfo *info)
{
	ListCell   *cell;

	node = flatten_join_alias_vars(query, node);
	foreach(cell, info->distVars)
	{
		Var		   *distVar = lfirst(cell);
		Var		   *var = (Var *) node;

		while (var != NULL && IsA(var, RelabelType))
			var = (Var *) ((RelabelType *) var)->arg;
		if (var != NULL && IsA(var, Var) && var->varlevelsup == 0 &&
			var->varno == distVar->varno && var->varattno == distVar->varattno)
			return true;
	}
	return false;
}

bool
GroupedByDistColumn(Query *query, PushdownInfo *info)
{
	ListCell   *cell;

	foreach(cell, query->groupClause)
	{
		if (IsDistColumnOf(get_sortgroupclause_expr(lfirst(cell), query->targetList), query, info))
			return true;
	}
	return false;
}

static bool
WindowsPartitionedByDistColumn(Query *query, PushdownInfo *info)
{
	ListCell   *cell;

	foreach(cell, query->windowClause)
	{
		WindowClause *clause = lfirst(cell);
		ListCell   *partCell;
		bool		found = false;

		foreach(partCell, clause->partitionClause)
		{
			if (IsDistColumnOf(get_sortgroupclause_expr(lfirst(partCell), query->targetList), query, info))
				found = true;
		}
		if (!found)
			return false;
	}
	return true;
}

/* registers a shard query column (1-based) */
static int
AddWorkerColumn(CombineContext *context, Oid type, int32 typmod, Oid collation)
{
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
		Node	   *expr = flatten_join_alias_vars(context->query, arg);

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
		DeparseRemoteExpr(context->sql, flatten_join_alias_vars(context->query,
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
	{
		/* the shards grouped by the argument: aggregate its distinct values */
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
		Oid			int8Type = INT8OID;

		column = AppendPartial(context, "pg_catalog.count", arg, NULL, NULL, aggref,
							   INT8OID, -1, InvalidOid);
		return (Node *) MakeAggref(LookupAggregate(SHARDEXT_SCHEMA_NAME, "sum_counts", 1, &int8Type),
								   INT8OID, InvalidOid,
								   list_make1(WorkerColumnVar(context, column)));
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
	{
		Oid			int8Type = INT8OID;
		Oid			numericType = NUMERICOID;
		Oid			float8Type = FLOAT8OID;
		int			sumColumn;
		int			countColumn;
		Node	   *sum;
		Node	   *count;

		if (argType == INT2OID || argType == INT4OID)
		{
			sumColumn = AppendPartial(context, "pg_catalog.sum", arg, NULL, NULL, aggref,
									  INT8OID, -1, InvalidOid);
			sum = (Node *) MakeAggref(LookupAggregate(SHARDEXT_SCHEMA_NAME, "sum_int8", 1, &int8Type),
									  INT8OID, InvalidOid,
									  list_make1(WorkerColumnVar(context, sumColumn)));
			sum = (Node *) makeFuncExpr(F_NUMERIC_INT8, NUMERICOID, list_make1(sum),
										InvalidOid, InvalidOid, COERCE_EXPLICIT_CAST);
		}
		else if (argType == INT8OID || argType == NUMERICOID)
		{
			sumColumn = AppendPartial(context, "pg_catalog.sum", arg, NULL, NULL, aggref,
									  NUMERICOID, -1, InvalidOid);
			sum = (Node *) MakeAggref(LookupAggregate("pg_catalog", "sum", 1, &numericType),
									  NUMERICOID, InvalidOid,
									  list_make1(WorkerColumnVar(context, sumColumn)));
		}
		else if (argType == FLOAT4OID || argType == FLOAT8OID)
		{
			sumColumn = AppendPartial(context, "pg_catalog.sum", arg, "::pg_catalog.float8",
									  NULL, aggref, FLOAT8OID, -1, InvalidOid);
			sum = (Node *) MakeAggref(LookupAggregate("pg_catalog", "sum", 1, &float8Type),
									  FLOAT8OID, InvalidOid,
									  list_make1(WorkerColumnVar(context, sumColumn)));
		}
		else
		{
			context->failed = true;
			context->failReason = "an average of this type";
			return (Node *) aggref;
		}
		countColumn = AppendPartial(context, "pg_catalog.count", arg, NULL, NULL, aggref,
									INT8OID, -1, InvalidOid);
		count = (Node *) MakeAggref(LookupAggregate(SHARDEXT_SCHEMA_NAME, "sum_counts", 1, &int8Type),
									INT8OID, InvalidOid,
									list_make1(WorkerColumnVar(context, countColumn)));
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
	{
		/*
		 * Exact numeric sums per shard; shardext.combine_variance applies
		 * the arithmetic of PostgreSQL's numeric_stddev_internal to them.
		 */
		Oid			int8Type = INT8OID;
		Oid			numericType = NUMERICOID;
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
									 list_make5(MakeAggref(LookupAggregate(SHARDEXT_SCHEMA_NAME, "sum_counts", 1, &int8Type),
														   INT8OID, InvalidOid,
														   list_make1(WorkerColumnVar(context, countColumn))),
												MakeAggref(LookupAggregate("pg_catalog", "sum", 1, &numericType),
														   NUMERICOID, InvalidOid,
														   list_make1(WorkerColumnVar(context, sumColumn))),
												MakeAggref(LookupAggregate("pg_catalog", "sum", 1, &numericType),
														   NUMERICOID, InvalidOid,
														   list_make1(WorkerColumnVar(context, squaresColumn))),
												makeBoolConst(sample, false),
												makeBoolConst(root, false)),
									 InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	}
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

	plan = standard_planner(combine, NULL, cursorOptions, boundParams);

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
