/*-------------------------------------------------------------------------
 *
 * pushdown_analysis.c
 *	  Whether a query's FROM clause, subqueries and window functions give
 *	  the right answer when run shard by shard, for multi-shard SELECTs,
 *	  co-located UPDATE/DELETE ... FROM and INSERT ... SELECT.
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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"

#include "shardext/pg_compat.h"
#include "shardext/planner.h"

static bool JoinColocationGroup(PushdownInfo *info, int32 colocationId, Oid anchorRelid);
static bool DistColumnUnit(Node *node, PushdownInfo *info, int levelsUp, Index *rtindex);
static bool IsDistColumnAt(PushdownInfo *info, Index varno, AttrNumber attno);
static bool SetOperationIsColocated(Query *subquery, Index rtindex, PushdownInfo *info,
									bool *readsHashTables);
static bool SetOperandIsColocated(Query *subquery, Node *node, PushdownInfo *info,
								  bool *distColumns, bool *removesDuplicates);
static bool DistinctOnDistColumn(Query *query, PushdownInfo *info);
static bool ReadsOnlyReferenceTables(Query *query);
static bool SameOnEveryNode(Query *query);
static bool JoinTreeHasHashTable(Node *jtnode, Query *query);
static bool CheckOuterJoins(Node *jtnode, Query *query);
static bool SublinksAreColocated(Query *query, PushdownInfo *info);

/*
 * AnalyzePushdownFrom checks that the FROM clause can run shard by shard
 * (see the file header) and finds its hash tables.  A subquery in FROM is
 * a unit of its own when it runs shard by shard too (SubqueryIsColocated);
 * its output columns that carry a distribution column join like one.
 */
bool
AnalyzePushdownFrom(Query *query, PushdownInfo *info)
{
	int			count = list_length(query->rtable);
	int		   *groups;
	List	   *units = NIL;	/* range table indexes of hash tables and subqueries */
	List	   *conjuncts = NIL;
	ListCell   *cell;
	int			group = -1;
	Index		rtindex;

	info->colocationId = -1;
	groups = palloc(sizeof(int) * (count + 1));
	for (rtindex = 1; rtindex <= count; rtindex++)
	{
		RangeTblEntry *rte = rt_fetch(rtindex, query->rtable);
		DistTableCacheEntry *entry;

		groups[rtindex] = rtindex;
		if (rte->rtekind == RTE_JOIN || RteIsGroup(rte))
			continue;
		if (rte->rtekind == RTE_SUBQUERY)
		{
			bool		readsHashTables;

			if (!SubqueryIsColocated(rte, rtindex, info, &readsHashTables))
				return false;
			if (readsHashTables)
				units = lappend_int(units, rtindex);
			continue;
		}
		if (rte->rtekind != RTE_RELATION)
			return false;
		entry = GetDistTableCacheEntry(rte->relid);
		if (entry == NULL)
			return false;
		if (entry->method != DISTRIBUTE_BY_HASH)
			continue;
		if (!JoinColocationGroup(info, entry->colocationId, rte->relid))
			return false;
		units = lappend_int(units, rtindex);
		info->hashRtindexes = lappend_int(info->hashRtindexes, rtindex);
		info->distVars = lappend(info->distVars,
								 makeVar(rtindex, entry->distAttnum, entry->distType,
										 entry->distTypmod, entry->distCollation, 0));
	}
	if (units == NIL)
		return false;

	/* distribution column equalities connect the units */
	CollectJoinTreeQuals((Node *) query->jointree, false, &conjuncts);
	/* and a MERGE's ON condition, which 17 keeps out of the join tree */
	if (query->commandType == CMD_MERGE && MergeJoinCondition(query) != query->jointree->quals)
		CollectConjuncts(MergeJoinCondition(query), &conjuncts);
	foreach(cell, conjuncts)
	{
		OpExpr	   *op = lfirst(cell);
		Index		left;
		Index		right;

		if (!IsA(op, OpExpr) || list_length(op->args) != 2)
			continue;
		if (DistColumnUnit(linitial(op->args), info, 0, &left) &&
			DistColumnUnit(lsecond(op->args), info, 0, &right) &&
			IsHashEquality(op->opno, GetDistTableCacheEntry(info->anchorRelid)))
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
	foreach(cell, units)
	{
		if (group >= 0 && groups[lfirst_int(cell)] != group)
			return false;
		group = groups[lfirst_int(cell)];
	}

	if (!CheckOuterJoins((Node *) query->jointree, query))
		return false;
	return SublinksAreColocated(query, info);
}

/*
 * JoinColocationGroup adds a unit of the given colocation group; false
 * when the query already reads another group.
 */
static bool
JoinColocationGroup(PushdownInfo *info, int32 colocationId, Oid anchorRelid)
{
	if (info->colocationId >= 0 && info->colocationId != colocationId)
		return false;
	info->colocationId = colocationId;
	if (!OidIsValid(info->anchorRelid))
		info->anchorRelid = anchorRelid;
	return true;
}

/*
 * DistColumnUnit: is node (a Var levelsUp out) one of the query's
 * distribution column Vars (of a hash table or a subquery's output)?  Sets
 * *rtindex to its unit.
 */
static bool
DistColumnUnit(Node *node, PushdownInfo *info, int levelsUp, Index *rtindex)
{
	Var		   *var = (Var *) StripRelabel(node);

	if (var == NULL || !IsA(var, Var) || var->varlevelsup != levelsUp ||
		!IsDistColumnAt(info, var->varno, var->varattno))
		return false;
	*rtindex = var->varno;
	return true;
}

/* is column attno of range table entry varno a distribution column Var? */
static bool
IsDistColumnAt(PushdownInfo *info, Index varno, AttrNumber attno)
{
	ListCell   *cell;

	foreach(cell, info->distVars)
	{
		Var		   *distVar = lfirst(cell);

		if (distVar->varno == varno && distVar->varattno == attno)
			return true;
	}
	return false;
}

/*
 * SubqueryIsColocated: does a subquery in FROM give, on each shard, exactly
 * its rows that belong to that shard?  It does when its own FROM runs shard
 * by shard and nothing above it mixes rows of different shards: no LIMIT or
 * OFFSET, aggregates and DISTINCT only by a distribution column, windows
 * partitioned by one.  A subquery of reference tables only gives the same
 * rows everywhere unless it picks rows by their order (SameOnEveryNode) or
 * aggregates (string_agg and the like follow the order of the copy it
 * reads): those are refused.  Security
 * barrier views are planned locally, where the barrier holds.  Its output
 * columns that are distribution columns become distribution Vars of the
 * outer query.
 */
bool
SubqueryIsColocated(RangeTblEntry *rte, Index rtindex, PushdownInfo *info,
					bool *readsHashTables)
{
	Query	   *subquery = rte->subquery;
	PushdownInfo subinfo;
	ListCell   *cell;

	*readsHashTables = false;
	/* a security barrier view's quals must stay below the caller's */
	if (rte->lateral || rte->security_barrier || subquery->cteList != NIL ||
		subquery->hasTargetSRFs || subquery->rowMarks != NIL ||
		subquery->groupingSets != NIL || subquery->hasRecursive ||
		subquery->limitCount != NULL || subquery->limitOffset != NULL)
		return false;
	if (ReadsOnlyReferenceTables(subquery))
		return SameOnEveryNode(subquery) && !subquery->hasAggs;
	if (subquery->setOperations != NULL)
		return SetOperationIsColocated(subquery, rtindex, info, readsHashTables);

	memset(&subinfo, 0, sizeof(subinfo));
	if (!AnalyzePushdownFrom(subquery, &subinfo))
		return false;
	if ((subquery->hasAggs || subquery->groupClause != NIL || subquery->havingQual != NULL) &&
		!GroupedByDistColumn(subquery, &subinfo))
		return false;
	if (subquery->hasWindowFuncs && !WindowsPartitionedByDistColumn(subquery, &subinfo))
		return false;
	if (subquery->distinctClause != NIL && !DistinctOnDistColumn(subquery, &subinfo))
		return false;
	if (!JoinColocationGroup(info, subinfo.colocationId, subinfo.anchorRelid))
		return false;

	foreach(cell, subquery->targetList)
	{
		TargetEntry *tle = lfirst(cell);
		Node	   *expr = (Node *) tle->expr;

		if (!tle->resjunk && IsDistColumnOf(expr, subquery, &subinfo))
			info->distVars = lappend(info->distVars,
									 makeVar(rtindex, tle->resno, exprType(expr),
											 exprTypmod(expr), exprCollation(expr), 0));
	}
	*readsHashTables = true;
	return true;
}

/*
 * SetOperationIsColocated: a UNION [ALL] of subqueries that each run shard by
 * shard, in one colocation group, runs shard by shard too -- UNION (which
 * removes duplicates) only when one of its columns is a distribution column
 * in every branch, so that equal rows are in one shard.  The columns that
 * are a distribution column in every branch are distribution Vars of the
 * outer query.
 */
static bool
SetOperationIsColocated(Query *subquery, Index rtindex, PushdownInfo *info,
						bool *readsHashTables)
{
	SetOperationStmt *top = (SetOperationStmt *) subquery->setOperations;
	int			columns = list_length(top->colTypes);
	bool	   *distColumns = palloc(sizeof(bool) * columns);
	bool		removesDuplicates = false;
	bool		anyDistColumn = false;

	if (subquery->sortClause != NIL)
		return false;
	for (int i = 0; i < columns; i++)
		distColumns[i] = true;
	if (!SetOperandIsColocated(subquery, (Node *) top, info, distColumns, &removesDuplicates))
		return false;

	for (int i = 0; i < columns; i++)
	{
		if (!distColumns[i])
			continue;
		anyDistColumn = true;
		info->distVars = lappend(info->distVars,
								 makeVar(rtindex, i + 1, list_nth_oid(top->colTypes, i),
										 list_nth_int(top->colTypmods, i),
										 list_nth_oid(top->colCollations, i), 0));
	}
	if (removesDuplicates && !anyDistColumn)
		return false;
	*readsHashTables = true;
	return true;
}

/*
 * SetOperandIsColocated checks one branch or UNION of a set operation and
 * clears distColumns[i] where the branch's column i is not a distribution
 * column.  A branch of reference tables only would be repeated by every
 * shard: refused.
 */
static bool
SetOperandIsColocated(Query *subquery, Node *node, PushdownInfo *info,
					  bool *distColumns, bool *removesDuplicates)
{
	if (IsA(node, SetOperationStmt))
	{
		SetOperationStmt *op = (SetOperationStmt *) node;

		if (op->op != SETOP_UNION)
			return false;
		if (!op->all)
			*removesDuplicates = true;
		return SetOperandIsColocated(subquery, op->larg, info, distColumns, removesDuplicates) &&
			SetOperandIsColocated(subquery, op->rarg, info, distColumns, removesDuplicates);
	}
	if (IsA(node, RangeTblRef))
	{
		Index		leafIndex = ((RangeTblRef *) node)->rtindex;
		RangeTblEntry *leaf = rt_fetch(leafIndex, subquery->rtable);
		PushdownInfo leafInfo;
		bool		readsHashTables;
		int			column = 0;
		ListCell   *cell;

		memset(&leafInfo, 0, sizeof(leafInfo));
		leafInfo.colocationId = -1;
		if (leaf->rtekind != RTE_SUBQUERY ||
			!SubqueryIsColocated(leaf, leafIndex, &leafInfo, &readsHashTables) ||
			!readsHashTables ||
			!JoinColocationGroup(info, leafInfo.colocationId, leafInfo.anchorRelid))
			return false;
		foreach(cell, leaf->subquery->targetList)
		{
			TargetEntry *tle = lfirst(cell);

			if (tle->resjunk)
				continue;
			if (!IsDistColumnAt(&leafInfo, leafIndex, tle->resno))
				distColumns[column] = false;
			column++;
		}
		return true;
	}
	return false;
}

/* does the DISTINCT [ON] list of a query include a distribution column? */
static bool
DistinctOnDistColumn(Query *query, PushdownInfo *info)
{
	ListCell   *cell;

	foreach(cell, query->distinctClause)
	{
		if (IsDistColumnOf(get_sortgroupclause_expr(lfirst(cell), query->targetList),
						   query, info))
			return true;
	}
	return false;
}

static bool
JoinTreeHasHashTable(Node *jtnode, Query *query)
{
	if (IsA(jtnode, RangeTblRef))
	{
		RangeTblEntry *rte = rt_fetch(((RangeTblRef *) jtnode)->rtindex, query->rtable);

		if (rte->rtekind == RTE_SUBQUERY)
			return !ReadsOnlyReferenceTables(rte->subquery);
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

/*
 * SameOnEveryNode: does a query of reference tables give the same rows on
 * every node?  Not when it picks rows by their order in the table (LIMIT,
 * OFFSET, DISTINCT ON, window functions), which may differ between the
 * copies.
 */
static bool
SameOnEveryNode(Query *query)
{
	return query->limitCount == NULL && query->limitOffset == NULL &&
		!query->hasDistinctOn && !query->hasWindowFuncs;
}

/* does a query (with its subqueries) read only reference tables? */
static bool
ReadsOnlyReferenceTables(Query *query)
{
	return !query_tree_walker(query, SublinkRelationsWalker, NULL, QTW_EXAMINE_RTES_BEFORE);
}

/*
 * SubqueryCorrelatedOnDistColumn: does a conjunct of the subquery equate
 * one of its distribution columns (subinfo) with one of the outer query's
 * (info)?
 */
static bool
SubqueryCorrelatedOnDistColumn(Query *subquery, PushdownInfo *subinfo, PushdownInfo *info)
{
	List	   *conjuncts = TopLevelConjuncts(subquery);
	ListCell   *cell;

	foreach(cell, conjuncts)
	{
		OpExpr	   *op = lfirst(cell);

		if (!IsA(op, OpExpr) || list_length(op->args) != 2 ||
			!IsHashEquality(op->opno, GetDistTableCacheEntry(info->anchorRelid)))
			continue;
		for (int side = 0; side < 2; side++)
		{
			Index		unit;

			if (DistColumnUnit(list_nth(op->args, side), subinfo, 0, &unit) &&
				DistColumnUnit(list_nth(op->args, 1 - side), info, 1, &unit))
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
 * Yes when it reads only reference tables (SameOnEveryNode); or, for
 * co-located tables, when EXISTS (...) or a scalar subquery is correlated
 * on the distribution column (the rows it can see are in the outer row's
 * shard), or when dist_col IN (SELECT dist_col ...) has a plain subquery
 * (no aggregation, DISTINCT or LIMIT, which would be computed per shard).
 */
static bool
SublinkIsColocated(SubLink *sublink, SublinkCheckContext *context)
{
	Query	   *subquery = (Query *) sublink->subselect;
	PushdownInfo subinfo;

	if (ReadsOnlyReferenceTables(subquery))
		return SameOnEveryNode(subquery);
	if (subquery->setOperations != NULL || subquery->cteList != NIL ||
		subquery->hasTargetSRFs || subquery->rowMarks != NIL)
		return false;
	memset(&subinfo, 0, sizeof(subinfo));
	if (!AnalyzePushdownFrom(subquery, &subinfo) ||
		subinfo.colocationId != context->info->colocationId)
		return false;

	/* the rows an outer row's subquery can see are in that row's shard */
	if (sublink->subLinkType == EXISTS_SUBLINK || sublink->subLinkType == EXPR_SUBLINK)
		return SubqueryCorrelatedOnDistColumn(subquery, &subinfo, context->info);

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

/*
 * NullableRelids collects the range table indexes of the relations under
 * jtnode that an outer join can null-extend.
 */
static void
NullableRelids(Node *jtnode, Query *query, bool nullable, Bitmapset **relids)
{
	if (jtnode == NULL)
		return;
	if (IsA(jtnode, RangeTblRef))
	{
		if (nullable)
			*relids = bms_add_member(*relids, ((RangeTblRef *) jtnode)->rtindex);
	}
	else if (IsA(jtnode, FromExpr))
	{
		ListCell   *cell;

		foreach(cell, ((FromExpr *) jtnode)->fromlist)
			NullableRelids(lfirst(cell), query, nullable, relids);
	}
	else if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) jtnode;

		NullableRelids(join->larg, query,
					   nullable || join->jointype == JOIN_RIGHT || join->jointype == JOIN_FULL,
					   relids);
		NullableRelids(join->rarg, query,
					   nullable || join->jointype == JOIN_LEFT || join->jointype == JOIN_FULL ||
					   join->jointype == JOIN_ANTI, relids);
	}
}

/*
 * IsDistColumnOf: is node a distribution column Var of one of the
 * top-level hash tables (or subqueries), never NULL?  A distribution
 * column on the nullable side of an outer join is NULL in rows of every
 * shard: grouping, DISTINCT, window partitions or inserting by it would
 * mix shards.
 */
bool
IsDistColumnOf(Node *node, Query *query, PushdownInfo *info)
{
	ListCell   *cell;
	Bitmapset  *nullable = NULL;

	node = FlattenAliasVars(query, node);
	NullableRelids((Node *) query->jointree, query, false, &nullable);
	foreach(cell, info->distVars)
	{
		Var		   *distVar = lfirst(cell);
		Var		   *var = (Var *) node;

		while (var != NULL && IsA(var, RelabelType))
			var = (Var *) ((RelabelType *) var)->arg;
		if (var != NULL && IsA(var, Var) && var->varlevelsup == 0 &&
			var->varno == distVar->varno && var->varattno == distVar->varattno)
			return !bms_is_member(var->varno, nullable);
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

bool
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
