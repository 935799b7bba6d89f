/*-------------------------------------------------------------------------
 *
 * repartition_group.c
 *	  Co-located tables of a repartition join move together: in a FROM
 *	  clause that joins, say, orders and merchants on their distribution
 *	  column and orders and returns on orders.id, orders and merchants are
 *	  joined shard by shard first and their joined rows move by orders.id.
 *
 * The FROM clause's inner joins are flattened into one list (their ON
 * conditions join the WHERE clause, which is the same for inner joins),
 * and every set of two or more co-located hash-distributed tables joined
 * by equalities of their distribution columns becomes a subquery of those
 * tables with the conditions that only they use; the query reads the
 * columns it needs from the subquery instead.  The repartition planner
 * then sees the subquery as one unit (repartition_planner.c), which stays
 * in its shards or moves as a whole.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/lsyscache.h"

#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/planner.h"
#include "shardext/repartition.h"

/* a set of co-located tables that becomes a subquery */
typedef struct TableGroup
{
	List	   *rtindexes;		/* of the outer query */
	List	   *conjuncts;		/* conditions that only use them */
	List	   *columns;		/* (rtindex, attno) pairs the rest of the query reads */
	Index		subqueryIndex;	/* the subquery's range table index */
} TableGroup;

/* a walk over the query that renumbers the Vars of the grouped tables */
typedef struct GroupVarsContext
{
	List	   *groups;
	int			depth;
	bool		collect;		/* true: note the columns used; false: renumber */
	bool		check;			/* only look for whole-row references */
	bool		wholeRow;		/* check found one */
} GroupVarsContext;

static void FlattenInnerJoins(Node *jtnode, List **items, List **conjuncts);
static List *FindGroups(Query *query, List *items, List *conjuncts);
static bool DistributionEquality(Query *query, Node *clause, Index *left, Index *right);
static TableGroup *GroupOf(List *groups, Index rtindex);
static bool GroupVarsWalker(Node *node, GroupVarsContext *context);
static void MakeGroupSubquery(Query *query, TableGroup *group);

/*
 * GroupColocatedTables rewrites query (a copy) so that sets of co-located
 * tables joined on their distribution columns are subqueries (see the
 * file header); the query is left as it is when there are none, or when
 * nothing else would be joined to them.
 */
void
GroupColocatedTables(Query *query)
{
	List	   *items = NIL;
	List	   *conjuncts = NIL;
	List	   *groups;
	List	   *fromlist = NIL;
	List	   *remaining = NIL;
	GroupVarsContext walker;
	ListCell   *cell;
	int			members = 0;

	FlattenInnerJoins((Node *) query->jointree, &items, &conjuncts);
	groups = FindGroups(query, items, conjuncts);
	foreach(cell, groups)
		members += list_length(((TableGroup *) lfirst(cell))->rtindexes);
	/* grouping helps only when something else is joined to the groups */
	if (groups == NIL ||
		(list_length(groups) == 1 && members == list_length(items) && !query->hasSubLinks))
		return;

	/*
	 * A whole-row reference to a grouped table (a LATERAL subquery's, say)
	 * has no column of the group's subquery to read: the query is left as
	 * it is.
	 */
	memset(&walker, 0, sizeof(walker));
	walker.groups = groups;
	walker.check = true;
	query_tree_walker(query, GroupVarsWalker, &walker, QTW_IGNORE_JOINALIASES);
	if (walker.wholeRow)
		return;

	/* the conditions that only use one group's tables move into it */
	foreach(cell, conjuncts)
	{
		Node	   *conjunct = lfirst(cell);
		Relids		varnos = pull_varnos_of_level(NULL, conjunct, 0);
		TableGroup *group = NULL;
		bool		inside = !bms_is_empty(varnos) && !checkExprHasSubLink(conjunct) &&
			!contain_volatile_functions(conjunct);
		int			varno = -1;

		while ((varno = bms_next_member(varnos, varno)) >= 0)
		{
			TableGroup *other = GroupOf(groups, varno);

			if (other == NULL || (group != NULL && other != group))
				inside = false;
			group = other;
		}
		if (inside)
			group->conjuncts = lappend(group->conjuncts, conjunct);
		else
			remaining = lappend(remaining, conjunct);
	}

	/* the FROM clause without the groups: the columns the query reads of them */
	foreach(cell, items)
	{
		Node	   *item = lfirst(cell);

		if (!IsA(item, RangeTblRef) || GroupOf(groups, ((RangeTblRef *) item)->rtindex) == NULL)
			fromlist = lappend(fromlist, item);
	}
	query->jointree->fromlist = fromlist;
	query->jointree->quals = remaining != NIL ? (Node *) make_ands_explicit(remaining) : NULL;
	memset(&walker, 0, sizeof(walker));
	walker.groups = groups;
	walker.collect = true;
	query_tree_walker(query, GroupVarsWalker, &walker, QTW_IGNORE_JOINALIASES);

	/* each group's subquery, read instead of its tables */
	foreach(cell, groups)
		MakeGroupSubquery(query, lfirst(cell));
	walker.collect = false;
	query_tree_walker(query, GroupVarsWalker, &walker, QTW_IGNORE_JOINALIASES);
	foreach(cell, groups)
	{
		RangeTblRef *ref = makeNode(RangeTblRef);

		ref->rtindex = ((TableGroup *) lfirst(cell))->subqueryIndex;
		query->jointree->fromlist = lappend(query->jointree->fromlist, ref);
	}
}

/*
 * FlattenInnerJoins lists the items of the top FROM clause, looking
 * through inner joins, and the conditions of those joins and of WHERE.
 */
static void
FlattenInnerJoins(Node *jtnode, List **items, List **conjuncts)
{
	if (IsA(jtnode, FromExpr))
	{
		ListCell   *cell;

		CollectConjuncts(((FromExpr *) jtnode)->quals, conjuncts);
		foreach(cell, ((FromExpr *) jtnode)->fromlist)
			FlattenInnerJoins(lfirst(cell), items, conjuncts);
	}
	else if (IsA(jtnode, JoinExpr) && ((JoinExpr *) jtnode)->jointype == JOIN_INNER)
	{
		JoinExpr   *join = (JoinExpr *) jtnode;

		CollectConjuncts(join->quals, conjuncts);
		FlattenInnerJoins(join->larg, items, conjuncts);
		FlattenInnerJoins(join->rarg, items, conjuncts);
	}
	else
		*items = lappend(*items, jtnode);
}

/*
 * FindGroups finds the sets of two or more co-located hash-distributed
 * tables among the items that equalities of distribution columns connect.
 */
static List *
FindGroups(Query *query, List *items, List *conjuncts)
{
	List	   *groups = NIL;
	ListCell   *cell;

	foreach(cell, conjuncts)
	{
		Index		left;
		Index		right;
		TableGroup *leftGroup;
		TableGroup *rightGroup;
		bool		leftItem = false;
		bool		rightItem = false;
		ListCell   *itemCell;

		if (!DistributionEquality(query, lfirst(cell), &left, &right) || left == right)
			continue;
		foreach(itemCell, items)
		{
			Node	   *item = lfirst(itemCell);

			if (IsA(item, RangeTblRef) && ((RangeTblRef *) item)->rtindex == left)
				leftItem = true;
			if (IsA(item, RangeTblRef) && ((RangeTblRef *) item)->rtindex == right)
				rightItem = true;
		}
		if (!leftItem || !rightItem)
			continue;
		leftGroup = GroupOf(groups, left);
		rightGroup = GroupOf(groups, right);
		if (leftGroup == NULL && rightGroup == NULL)
		{
			TableGroup *group = palloc0(sizeof(TableGroup));

			group->rtindexes = list_make2_int(left, right);
			groups = lappend(groups, group);
		}
		else if (leftGroup == NULL)
			rightGroup->rtindexes = lappend_int(rightGroup->rtindexes, left);
		else if (rightGroup == NULL)
			leftGroup->rtindexes = lappend_int(leftGroup->rtindexes, right);
		else if (leftGroup != rightGroup)
		{
			leftGroup->rtindexes = list_concat(leftGroup->rtindexes, rightGroup->rtindexes);
			groups = list_delete_ptr(groups, rightGroup);
		}
	}
	return groups;
}

/*
 * DistributionEquality: is clause an equality of the distribution columns
 * of two co-located hash-distributed tables of the query (their range
 * table indexes in *left and *right)?
 */
static bool
DistributionEquality(Query *query, Node *clause, Index *left, Index *right)
{
	OpExpr	   *op = (OpExpr *) clause;
	DistTableCacheEntry *entries[2];
	Index		rtindexes[2];

	if (!IsA(op, OpExpr) || list_length(op->args) != 2)
		return false;
	for (int side = 0; side < 2; side++)
	{
		Var		   *var = (Var *) StripRelabel(list_nth(op->args, side));
		RangeTblEntry *rte;

		if (var == NULL || !IsA(var, Var) || var->varlevelsup != 0)
			return false;
		rte = rt_fetch(var->varno, query->rtable);
		if (rte->rtekind != RTE_RELATION || rte->tablesample != NULL)
			return false;
		entries[side] = GetDistTableCacheEntry(rte->relid);
		if (entries[side] == NULL || entries[side]->method != DISTRIBUTE_BY_HASH ||
			var->varattno != entries[side]->distAttnum)
			return false;
		rtindexes[side] = var->varno;
	}
	if (entries[0]->colocationId != entries[1]->colocationId ||
		!IsHashEquality(op->opno, entries[0]))
		return false;
	*left = rtindexes[0];
	*right = rtindexes[1];
	return true;
}

static TableGroup *
GroupOf(List *groups, Index rtindex)
{
	ListCell   *cell;

	foreach(cell, groups)
	{
		if (list_member_int(((TableGroup *) lfirst(cell))->rtindexes, rtindex))
			return lfirst(cell);
	}
	return NULL;
}

/*
 * GroupVarsWalker notes the columns of grouped tables that the query
 * reads (collect), or renumbers them to the groups' subquery columns.
 */
static bool
GroupVarsWalker(Node *node, GroupVarsContext *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;
		TableGroup *group;

		if ((int) var->varlevelsup != context->depth)
			return false;
		group = GroupOf(context->groups, var->varno);
		if (group == NULL)
			return false;
		if (context->check)
		{
			if (var->varattno <= 0)
				context->wholeRow = true;
			return false;
		}
		if (context->collect)
		{
			List	   *column = list_make2_int(var->varno, var->varattno);

			if (!list_member(group->columns, column))
				group->columns = lappend(group->columns, column);
		}
		else
		{
			List	   *column = list_make2_int(var->varno, var->varattno);
			int			position = 1;
			ListCell   *cell;

			foreach(cell, group->columns)
			{
				if (equal(lfirst(cell), column))
					break;
				position++;
			}
			var->varno = group->subqueryIndex;
			var->varattno = position;
			var->varnosyn = var->varno;
			var->varattnosyn = var->varattno;
		}
		return false;
	}
	if (IsA(node, Query))
	{
		bool		result;

		context->depth++;
		result = query_tree_walker((Query *) node, GroupVarsWalker, context,
								   QTW_IGNORE_JOINALIASES);
		context->depth--;
		return result;
	}
	return expression_tree_walker(node, GroupVarsWalker, context);
}

/*
 * MakeGroupSubquery adds the subquery of a group to the query's range
 * table: its tables (copies of their entries, which stay in the outer
 * range table for permission checks), the conditions that only they use,
 * and the columns the rest of the query reads.
 */
static void
MakeGroupSubquery(Query *query, TableGroup *group)
{
	Query	   *subquery = makeNode(Query);
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	List	   *fromlist = NIL;
	List	   *names = NIL;
	ListCell   *cell;
	int			resno = 1;
	char	   *alias = "";

	subquery->commandType = CMD_SELECT;
	subquery->querySource = QSRC_ORIGINAL;
	subquery->canSetTag = true;
	foreach(cell, group->rtindexes)
	{
		RangeTblEntry *table = copyObject(rt_fetch(lfirst_int(cell), query->rtable));
		RangeTblRef *ref = makeNode(RangeTblRef);

		RteForgetPermissions(table);
		subquery->rtable = lappend(subquery->rtable, table);
		ref->rtindex = list_length(subquery->rtable);
		fromlist = lappend(fromlist, ref);
	}
	subquery->jointree = makeFromExpr(fromlist,
									  (Node *) make_ands_explicit(copyObject(group->conjuncts)));
	if (group->conjuncts == NIL)
		subquery->jointree->quals = NULL;
	foreach(cell, group->columns)
	{
		Index		varno = linitial_int((List *) lfirst(cell));
		AttrNumber	attno = lsecond_int((List *) lfirst(cell));
		RangeTblEntry *table = rt_fetch(varno, query->rtable);
		Oid			type;
		int32		typmod;
		Oid			collation;
		char	   *name;

		name = psprintf("%s_%s", table->eref->aliasname, get_attname(table->relid, attno, false));
		get_atttypetypmodcoll(table->relid, attno, &type, &typmod, &collation);
		subquery->targetList =
			lappend(subquery->targetList,
					makeTargetEntry((Expr *) makeVar(ListIntPosition(group->rtindexes, varno) + 1,
													 attno, type, typmod, collation, 0),
									resno++, name, false));
		names = lappend(names, makeString(name));
	}
	/* the tables' Vars in the subquery's conditions: its own numbering */
	foreach(cell, group->rtindexes)
		ChangeVarNodes((Node *) subquery->jointree->quals, lfirst_int(cell),
					   ListIntPosition(group->rtindexes, lfirst_int(cell)) + 1000000, 0);
	foreach(cell, group->rtindexes)
		ChangeVarNodes((Node *) subquery->jointree->quals,
					   ListIntPosition(group->rtindexes, lfirst_int(cell)) + 1000000,
					   ListIntPosition(group->rtindexes, lfirst_int(cell)) + 1, 0);
	foreach(cell, group->rtindexes)
		alias = psprintf("%s%s%s", alias, alias[0] != '\0' ? "_" : "",
						 rt_fetch(lfirst_int(cell), query->rtable)->eref->aliasname);
	rte->rtekind = RTE_SUBQUERY;
	rte->subquery = subquery;
	rte->eref = makeAlias(alias, names);
	rte->alias = makeAlias(alias, NIL);
	rte->inFromCl = true;
	query->rtable = lappend(query->rtable, rte);
	group->subqueryIndex = list_length(query->rtable);
}
