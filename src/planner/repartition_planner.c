/*-------------------------------------------------------------------------
 *
 * repartition_planner.c
 *	  Planning joins of distributed tables that are not co-located on the
 *	  join key as repartition joins (see repartition.h).
 *
 * The query's distributed tables are its units: those of its FROM clause,
 * and those EXISTS, NOT EXISTS and IN subqueries of its WHERE clause read
 * (semi and anti joins).  Equalities between expressions of two units are
 * edges: rows that are equal by them hash alike, so partitioning both
 * units by these expressions keeps the rows that join in one partition.
 * Edges merge expressions into key classes; the query runs partition by
 * partition when every unit is partitioned by its expression of one class
 * and every join of the query joins its sides by an edge of that class
 * (repartition_cost.c checks this and chooses: which units stay in their
 * shards, which move and which are copied to every node).
 * repartition_rewrite.c then puts reads of the partitions in place of the
 * moving tables and plans the result like a co-located query.
 *
 * Equalities count when their operator is a hash equality whose hash
 * functions are the standard ones of both types (the nodes hash with
 * those), and its collation, if any, is deterministic.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_func.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/planner.h"
#include "shardext/remote_sql.h"
#include "shardext/repartition.h"
#include "shardext/shardext.h"

static bool QueryShapeAllowed(Query *query);
static bool CollectFromUnits(RepartitionContext *context, Query *query, Node *jtnode,
							 int level);
static JoinUnit *NewUnit(RepartitionContext *context, Query *owner, Index rtindex, int level,
						 Oid relid);
static bool CollectSubqueryUnit(RepartitionContext *context, Query *query, Index rtindex,
								int level);
static bool CollectSublinkJoins(RepartitionContext *context);
static bool CollectSublinkJoin(RepartitionContext *context, Node *conjunct);
static bool RewriteNotIn(RepartitionContext *context, SublinkJoin *join);
static bool SubqueryIsSimple(Query *subquery);
static bool ReadsHashTables(Node *node);
static bool OtherSublinksReadHashTables(RepartitionContext *context);
static void CollectEdges(RepartitionContext *context, Node *jtnode);
static void CollectSublinkEdges(RepartitionContext *context, SublinkJoin *join);
static void TryEdge(RepartitionContext *context, Node *clause, Node *left, List *leftScope,
					Node *right, List *rightScope);
static JoinUnit *SideUnit(RepartitionContext *context, Node **expr, List *scope);
static bool HashesAlike(OpExpr *op);
static int	KeyNode(RepartitionContext *context, JoinUnit *unit, Node *expr);
static void MergeKeyClasses(RepartitionContext *context);
static int	ClassRoot(int *classes, int node);

/*
 * PlanRepartitionSelect plans a SELECT whose distributed tables are not
 * co-located as a repartition join; NULL when it cannot be (or a join on
 * the coordinator is cheaper): the caller then plans it another way.
 */
PlannedStmt *
PlanRepartitionSelect(Query *query, int cursorOptions, ParamListInfo boundParams)
{
	RepartitionContext context;

	if (!ShardextEnableRepartitionJoins || !QueryShapeAllowed(query))
		return NULL;
	memset(&context, 0, sizeof(context));
	context.query = copyObject(query);
	context.keyClass = -1;
	/* JOIN columns are the tables' own: units' columns are what the query reads */
	context.query->targetList = (List *) FlattenJoinAliasVars(context.query,
															  (Node *) context.query->targetList);
	context.query->havingQual = FlattenJoinAliasVars(context.query, context.query->havingQual);
	context.query->jointree = (FromExpr *) FlattenJoinAliasVars(context.query,
																(Node *) context.query->jointree);
	/* co-located tables joined on their distribution columns move together */
	GroupColocatedTables(context.query);
	if (!CollectFromUnits(&context, context.query, (Node *) context.query->jointree, 0) ||
		!CollectSublinkJoins(&context) || OtherSublinksReadHashTables(&context) ||
		list_length(context.units) < 2)
		return NULL;
	CollectEdges(&context, (Node *) context.query->jointree);
	{
		ListCell   *cell;

		foreach(cell, context.sublinks)
			CollectSublinkEdges(&context, lfirst(cell));
	}
	if (context.edges == NIL)
		return NULL;
	MergeKeyClasses(&context);
	FindPushedConjuncts(&context);
	EstimateUnits(&context);
	if (!ChooseRepartitionStrategy(&context))
		return NULL;
	return PlanRepartitionedQuery(&context, query, cursorOptions, boundParams);
}

/*
 * QueryShapeAllowed: what the pushdown of the partition queries supports
 * (as for co-located queries), with a FROM clause.
 */
static bool
QueryShapeAllowed(Query *query)
{
	return query->commandType == CMD_SELECT && query->utilityStmt == NULL &&
		query->setOperations == NULL && query->cteList == NIL && !query->hasTargetSRFs &&
		query->groupingSets == NIL && query->rowMarks == NIL && !query->hasRecursive &&
		query->limitOption != LIMIT_OPTION_WITH_TIES && query->jointree->fromlist != NIL &&
		!query->hasModifyingCTE;
}

/*
 * CollectFromUnits adds a unit for every hash-distributed table of a FROM
 * clause, and for every subquery (or view) that runs shard by shard on
 * co-located tables; false when the clause has something no partition can
 * read: a local table, a function, another subquery (whose parts may be
 * planned on their own, recursive_planner.c) or TABLESAMPLE.  Reference
 * tables, and subqueries of reference tables only, are read whole in every
 * partition.
 */
static bool
CollectFromUnits(RepartitionContext *context, Query *query, Node *jtnode, int level)
{
	if (IsA(jtnode, RangeTblRef))
	{
		Index		rtindex = ((RangeTblRef *) jtnode)->rtindex;
		RangeTblEntry *rte = rt_fetch(rtindex, query->rtable);
		DistTableCacheEntry *entry;
		JoinUnit   *unit;

		if (rte->rtekind == RTE_SUBQUERY)
			return CollectSubqueryUnit(context, query, rtindex, level);
		if (rte->rtekind != RTE_RELATION || rte->tablesample != NULL)
			return false;
		entry = GetDistTableCacheEntry(rte->relid);
		if (entry == NULL)
			return false;
		if (entry->method != DISTRIBUTE_BY_HASH)
			return true;
		unit = NewUnit(context, query, rtindex, level, rte->relid);
		unit->distColumns = list_make1_int(entry->distAttnum);
		return true;
	}
	if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) jtnode;

		return CollectFromUnits(context, query, join->larg, level) &&
			CollectFromUnits(context, query, join->rarg, level);
	}
	if (IsA(jtnode, FromExpr))
	{
		ListCell   *cell;

		foreach(cell, ((FromExpr *) jtnode)->fromlist)
		{
			if (!CollectFromUnits(context, query, lfirst(cell), level))
				return false;
		}
		return true;
	}
	return false;
}

/* NewUnit adds a unit: an entry of owner's range table, on relid's shards */
static JoinUnit *
NewUnit(RepartitionContext *context, Query *owner, Index rtindex, int level, Oid relid)
{
	JoinUnit   *unit = palloc0(sizeof(JoinUnit));

	unit->unitId = list_length(context->units) + 1;
	unit->owner = owner;
	unit->level = level;
	unit->rtindex = rtindex;
	unit->relid = relid;
	unit->entry = GetDistTableCacheEntry(relid);
	context->units = lappend(context->units, unit);
	return unit;
}

/*
 * CollectSubqueryUnit adds a subquery in FROM that runs shard by shard (a
 * join of co-located tables, grouped by a distribution column ...) as a
 * unit on the shards of its colocation group; its output columns that
 * carry a distribution column are its distribution columns.  A subquery
 * of reference tables is read whole by every partition.
 */
static bool
CollectSubqueryUnit(RepartitionContext *context, Query *query, Index rtindex, int level)
{
	RangeTblEntry *rte = rt_fetch(rtindex, query->rtable);
	PushdownInfo info;
	bool		readsHashTables;
	JoinUnit   *unit;
	ListCell   *cell;

	memset(&info, 0, sizeof(info));
	info.colocationId = -1;
	if (!SubqueryIsColocated(rte, rtindex, &info, &readsHashTables))
		return false;
	if (!readsHashTables)
		return true;
	unit = NewUnit(context, query, rtindex, level, info.anchorRelid);
	unit->subquery = rte->subquery;
	foreach(cell, info.distVars)
		unit->distColumns = lappend_int(unit->distColumns, ((Var *) lfirst(cell))->varattno);
	return true;
}

/*
 * CollectSublinkJoins finds the semi and anti joins of the WHERE clause:
 * conjuncts EXISTS (...), NOT EXISTS (...) and expr IN (SELECT ...) over a
 * simple subquery of one distributed table (and reference tables).
 */
static bool
CollectSublinkJoins(RepartitionContext *context)
{
	List	   *conjuncts = NIL;
	ListCell   *cell;

	CollectConjuncts(context->query->jointree->quals, &conjuncts);
	foreach(cell, conjuncts)
	{
		Node	   *conjunct = lfirst(cell);

		if (!ReadsHashTables(conjunct))
			continue;
		if (!CollectSublinkJoin(context, conjunct))
			return false;
	}
	/* NOT IN's conditions on the flags join the WHERE clause */
	if (context->flagConjuncts != NIL)
		context->query->jointree->quals =
			(Node *) make_ands_explicit(list_concat(conjuncts, context->flagConjuncts));
	return true;
}

/* CollectSublinkJoin adds the semi or anti join of one conjunct */
static bool
CollectSublinkJoin(RepartitionContext *context, Node *conjunct)
{
	Node	   *node = conjunct;
	SubLink    *sublink;
	Query	   *subquery;
	SublinkJoin *join;
	int			unitsBefore = list_length(context->units);

	if (IsA(node, BoolExpr) && ((BoolExpr *) node)->boolop == NOT_EXPR)
		node = linitial(((BoolExpr *) node)->args);
	if (!IsA(node, SubLink))
		return false;
	sublink = (SubLink *) node;
	subquery = (Query *) sublink->subselect;
	if (sublink->subLinkType == ANY_SUBLINK)
	{
		OpExpr	   *test = (OpExpr *) sublink->testexpr;
		TargetEntry *first = linitial(subquery->targetList);

		if (test == NULL || !IsA(test, OpExpr) || list_length(test->args) != 2 ||
			!IsA(lsecond(test->args), Param) || first->resjunk ||
			contain_volatile_functions(linitial(test->args)))
			return false;
	}
	else if (sublink->subLinkType != EXISTS_SUBLINK)
		return false;
	if (!SubqueryIsSimple(subquery))
		return false;
	subquery->targetList = (List *) FlattenJoinAliasVars(subquery, (Node *) subquery->targetList);
	subquery->jointree = (FromExpr *) FlattenJoinAliasVars(subquery, (Node *) subquery->jointree);
	if (!CollectFromUnits(context, subquery, (Node *) subquery->jointree, 1) ||
		list_length(context->units) != unitsBefore + 1)
		return false;
	join = palloc0(sizeof(SublinkJoin));
	join->conjunct = conjunct;
	join->sublink = sublink;
	join->unit = llast(context->units);
	context->sublinks = lappend(context->sublinks, join);
	if (sublink->subLinkType == ANY_SUBLINK && node != conjunct)
		return RewriteNotIn(context, join);
	return true;
}

/*
 * RewriteNotIn turns x NOT IN (SELECT y FROM t WHERE c) into what runs
 * partition by partition, with PostgreSQL's NULL semantics (NOT IN is
 * never true once a y is NULL, and always true when there are no rows):
 *	  NOT EXISTS (SELECT y FROM t WHERE c AND x = y)
 *	  AND (t_empty OR (x IS NOT NULL AND NOT t_has_null))
 * where t_empty and t_has_null are flags of t's map phase over all
 * partitions (shardext.repartition_flag, evaluated on the coordinator
 * before the partition queries start).  t must therefore move, and its
 * map query must evaluate every condition of the subquery (which has no
 * other table): false otherwise.
 */
static bool
RewriteNotIn(RepartitionContext *context, SublinkJoin *join)
{
	SubLink    *sublink = join->sublink;
	Query	   *subquery = (Query *) sublink->subselect;
	OpExpr	   *test = (OpExpr *) sublink->testexpr;
	TargetEntry *first = linitial(subquery->targetList);
	Node	   *outer = copyObject(linitial(test->args));
	Node	   *inner = copyObject(linitial(test->args));
	OpExpr	   *equality = copyObject(test);
	Oid			flagTypes[2] = {INT4OID, INT4OID};
	Oid			flagFunction;
	Node	   *empty;
	Node	   *hasNull;
	NullTest   *notNull = makeNode(NullTest);
	ListCell   *cell;

	if (list_length(subquery->jointree->fromlist) != 1 ||
		!IsA(linitial(subquery->jointree->fromlist), RangeTblRef))
		return false;
	foreach(cell, TopLevelConjuncts(subquery))
	{
		if (!IsConjunctOfUnit(context, lfirst(cell), subquery, join->unit))
			return false;
	}
	flagFunction = LookupFuncName(list_make2(makeString(SHARDEXT_SCHEMA_NAME),
											 makeString("repartition_flag")),
								  2, flagTypes, false);
	IncrementVarSublevelsUp(inner, 1, 0);
	linitial(equality->args) = inner;
	lsecond(equality->args) = copyObject(first->expr);
	subquery->jointree->quals = subquery->jointree->quals == NULL ? (Node *) equality :
		(Node *) make_andclause(list_make2(subquery->jointree->quals, equality));
	sublink->subLinkType = EXISTS_SUBLINK;
	sublink->testexpr = NULL;
	sublink->operName = NIL;
	join->unit->nullKey = (Node *) first->expr;

	empty = (Node *) makeFuncExpr(flagFunction, BOOLOID,
								  list_make2(makeConst(INT4OID, -1, InvalidOid, 4,
													   Int32GetDatum(join->unit->unitId),
													   false, true),
											 makeConst(INT4OID, -1, InvalidOid, 4,
													   Int32GetDatum(FLAG_UNIT_EMPTY), false, true)),
								  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	hasNull = copyObject(empty);
	lsecond(((FuncExpr *) hasNull)->args) =
		makeConst(INT4OID, -1, InvalidOid, 4, Int32GetDatum(FLAG_UNIT_HAS_NULL_KEY), false, true);
	notNull->arg = (Expr *) outer;
	notNull->nulltesttype = IS_NOT_NULL;
	notNull->location = -1;
	context->flagConjuncts =
		lappend(context->flagConjuncts,
				make_orclause(list_make2(empty,
										 make_andclause(list_make2(notNull,
																   make_notclause((Expr *) hasNull))))));
	return true;
}

/*
 * SubqueryIsSimple: a subquery that is a plain filtered join (of inner
 * joins), evaluated the same in every partition for the rows of its
 * distributed table that are there.
 */
static bool
SubqueryIsSimple(Query *subquery)
{
	List	   *conjuncts = NIL;

	if (subquery->commandType != CMD_SELECT || subquery->setOperations != NULL ||
		subquery->cteList != NIL || subquery->hasAggs || subquery->groupClause != NIL ||
		subquery->havingQual != NULL || subquery->hasWindowFuncs ||
		subquery->distinctClause != NIL || subquery->limitCount != NULL ||
		subquery->limitOffset != NULL || subquery->hasTargetSRFs ||
		subquery->rowMarks != NIL || subquery->jointree->fromlist == NIL)
		return false;
	CollectJoinTreeQuals((Node *) subquery->jointree, false, &conjuncts);
	if (list_length(conjuncts) != list_length(TopLevelConjuncts(subquery)))
		return false;			/* an outer join */
	return !ReadsHashTables((Node *) subquery->jointree->quals) &&
		!ReadsHashTables((Node *) subquery->targetList);
}

static bool
ReadsHashTablesWalker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		return rte->rtekind == RTE_RELATION && IsHashDistributedTable(rte->relid);
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, ReadsHashTablesWalker, context,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, ReadsHashTablesWalker, context);
}

/* does an expression have a subquery that reads a hash-distributed table? */
static bool
ReadsHashTables(Node *node)
{
	return ReadsHashTablesWalker(node, NULL);
}

/*
 * OtherSublinksReadHashTables: a subquery elsewhere than as a semi or anti
 * join conjunct (in the target list, join conditions ...) that reads a
 * hash-distributed table cannot run partition by partition.
 */
static bool
OtherSublinksReadHashTables(RepartitionContext *context)
{
	Query	   *query = context->query;
	List	   *conjuncts = NIL;
	List	   *joinQuals = NIL;
	ListCell   *cell;

	if (ReadsHashTables((Node *) query->targetList) || ReadsHashTables(query->havingQual))
		return true;
	CollectConjuncts(query->jointree->quals, &conjuncts);
	foreach(cell, conjuncts)
	{
		ListCell   *joinCell;
		bool		isJoin = false;

		foreach(joinCell, context->sublinks)
		{
			if (((SublinkJoin *) lfirst(joinCell))->conjunct == lfirst(cell))
				isJoin = true;
		}
		if (!isJoin && ReadsHashTables(lfirst(cell)))
			return true;
	}
	/* join conditions: everything but the top WHERE clause */
	CollectJoinTreeQuals((Node *) query->jointree, false, &joinQuals);
	foreach(cell, joinQuals)
	{
		if (!list_member_ptr(conjuncts, lfirst(cell)) && ReadsHashTables(lfirst(cell)))
			return true;
	}
	return false;
}

/*
 * CollectEdges finds the equalities between two units among the
 * conditions of every join of the FROM clause (and its WHERE clause).
 */
static void
CollectEdges(RepartitionContext *context, Node *jtnode)
{
	List	   *conjuncts = NIL;
	ListCell   *cell;

	if (IsA(jtnode, FromExpr))
	{
		CollectConjuncts(((FromExpr *) jtnode)->quals, &conjuncts);
		foreach(cell, ((FromExpr *) jtnode)->fromlist)
			CollectEdges(context, lfirst(cell));
	}
	else if (IsA(jtnode, JoinExpr))
	{
		CollectConjuncts(((JoinExpr *) jtnode)->quals, &conjuncts);
		CollectEdges(context, ((JoinExpr *) jtnode)->larg);
		CollectEdges(context, ((JoinExpr *) jtnode)->rarg);
	}
	foreach(cell, conjuncts)
	{
		OpExpr	   *op = lfirst(cell);

		if (IsA(op, OpExpr) && list_length(op->args) == 2)
			TryEdge(context, (Node *) op, linitial(op->args), list_make1(context->query),
					lsecond(op->args), list_make1(context->query));
	}
}

/*
 * CollectSublinkEdges finds the equalities that correlate a semi or anti
 * join's table with a table of the FROM clause: among the conjuncts of
 * its subquery (EXISTS), or its test (IN).
 */
static void
CollectSublinkEdges(RepartitionContext *context, SublinkJoin *join)
{
	SubLink    *sublink = join->sublink;
	Query	   *subquery = (Query *) sublink->subselect;
	List	   *inner = list_make2(subquery, context->query);
	ListCell   *cell;

	if (sublink->subLinkType == ANY_SUBLINK)
	{
		OpExpr	   *test = (OpExpr *) sublink->testexpr;
		TargetEntry *first = linitial(subquery->targetList);

		/* outer = Param: the Param stands for the subquery's first column */
		TryEdge(context, (Node *) test, linitial(test->args), list_make1(context->query),
				(Node *) first->expr, inner);
		return;
	}
	foreach(cell, TopLevelConjuncts(subquery))
	{
		OpExpr	   *op = lfirst(cell);

		if (!IsA(op, OpExpr) || list_length(op->args) != 2)
			continue;
		TryEdge(context, (Node *) op, linitial(op->args), inner, lsecond(op->args), inner);
	}
}

/*
 * TryEdge adds an edge for the equality clause when each side is an
 * expression of one unit (and the units differ).  A side's scope lists the
 * queries it is written in, innermost first (a subquery's condition sees
 * the subquery's tables, then one level up those of the FROM clause).
 */
static void
TryEdge(RepartitionContext *context, Node *clause, Node *left, List *leftScope,
		Node *right, List *rightScope)
{
	OpExpr	   *op = (OpExpr *) clause;
	JoinUnit   *leftUnit;
	JoinUnit   *rightUnit;
	KeyEdge    *edge;

	if (!IsA(op, OpExpr) || !HashesAlike(op))
		return;
	leftUnit = SideUnit(context, &left, leftScope);
	rightUnit = SideUnit(context, &right, rightScope);
	if (leftUnit == NULL || rightUnit == NULL || leftUnit == rightUnit)
		return;
	edge = palloc0(sizeof(KeyEdge));
	edge->left = leftUnit;
	edge->leftExpr = left;
	edge->right = rightUnit;
	edge->rightExpr = right;
	edge->clause = clause;
	edge->leftNode = KeyNode(context, leftUnit, left);
	edge->rightNode = KeyNode(context, rightUnit, right);
	context->edges = lappend(context->edges, edge);
}

/*
 * SideUnit: the unit a side of an equality is an expression of, looking
 * at each query of its scope; *expr becomes the expression as written in
 * the unit's own query.
 */
static JoinUnit *
SideUnit(RepartitionContext *context, Node **expr, List *scope)
{
	ListCell   *cell;

	foreach(cell, scope)
	{
		int			up = foreach_current_index(cell);
		JoinUnit   *unit = ExpressionUnit(context, *expr, up, lfirst(cell));

		if (unit == NULL)
			continue;
		if (up > 0)
		{
			*expr = copyObject(*expr);
			IncrementVarSublevelsUp(*expr, -up, up);
		}
		return unit;
	}
	return NULL;
}

typedef struct UnitVarsContext
{
	int			levelsUp;		/* the level of the Vars that count */
	int			depth;
	List	   *varnos;			/* of the Vars at that level */
	bool		other;			/* a Var of another level, or something else */
} UnitVarsContext;

static bool
UnitVarsWalker(Node *node, UnitVarsContext *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;

		if ((int) var->varlevelsup - context->depth != context->levelsUp ||
			var->varattno <= 0)
			context->other = true;
		else
			context->varnos = list_append_unique_int(context->varnos, var->varno);
		return false;
	}
	if (IsA(node, SubLink) || IsA(node, Aggref) || IsA(node, WindowFunc) ||
		IsA(node, PlaceHolderVar) || IsA(node, GroupingFunc) ||
		(IsA(node, Param) && ((Param *) node)->paramkind != PARAM_EXTERN))
	{
		context->other = true;
		return true;
	}
	return expression_tree_walker(node, UnitVarsWalker, context);
}

/*
 * ExpressionUnit: the unit whose columns (levelsUp levels out) an
 * expression is made of, when it uses exactly one unit's columns and
 * nothing volatile; NULL otherwise.
 */
JoinUnit *
ExpressionUnit(RepartitionContext *context, Node *expr, int levelsUp, Query *owner)
{
	UnitVarsContext walker = {levelsUp, 0, NIL, false};
	ListCell   *cell;

	UnitVarsWalker(expr, &walker);
	if (walker.other || list_length(walker.varnos) != 1 || contain_volatile_functions(expr))
		return NULL;
	foreach(cell, context->units)
	{
		JoinUnit   *unit = lfirst(cell);

		if (unit->rtindex == (Index) linitial_int(walker.varnos) && unit->owner == owner)
			return unit;
	}
	return NULL;
}

/*
 * HashesAlike: is op an equality whose matching values the nodes hash
 * alike?  Its hash functions must be the standard ones of its input types
 * (what the nodes and the shards hash with), and its collation
 * deterministic (equal strings are equal bytes).
 */
static bool
HashesAlike(OpExpr *op)
{
	RegProcedure leftHash;
	RegProcedure rightHash;
	Oid			leftType;
	Oid			rightType;

	if (list_length(op->args) != 2 || !get_op_hash_functions(op->opno, &leftHash, &rightHash))
		return false;
	leftType = exprType(linitial(op->args));
	rightType = exprType(lsecond(op->args));
	if (lookup_type_cache(leftType, TYPECACHE_HASH_PROC)->hash_proc != leftHash ||
		lookup_type_cache(rightType, TYPECACHE_HASH_PROC)->hash_proc != rightHash)
		return false;
	if (OidIsValid(op->inputcollid) && !get_collation_isdeterministic(op->inputcollid))
		return false;
	return true;
}

/* KeyNode returns the key node of (unit, expr), adding it if new */
static int
KeyNode(RepartitionContext *context, JoinUnit *unit, Node *expr)
{
	ListCell   *unitCell;
	ListCell   *exprCell;

	forboth(unitCell, context->nodeUnits, exprCell, context->nodeExprs)
	{
		if (lfirst(unitCell) == unit && equal(lfirst(exprCell), expr))
			return foreach_current_index(unitCell);
	}
	context->nodeUnits = lappend(context->nodeUnits, unit);
	context->nodeExprs = lappend(context->nodeExprs, expr);
	return list_length(context->nodeUnits) - 1;
}

/* MergeKeyClasses merges the key nodes of every edge into classes */
static void
MergeKeyClasses(RepartitionContext *context)
{
	int			count = list_length(context->nodeUnits);
	ListCell   *cell;

	context->nodeClass = palloc(sizeof(int) * Max(count, 1));
	for (int i = 0; i < count; i++)
		context->nodeClass[i] = i;
	foreach(cell, context->edges)
	{
		KeyEdge    *edge = lfirst(cell);
		int			left = ClassRoot(context->nodeClass, edge->leftNode);
		int			right = ClassRoot(context->nodeClass, edge->rightNode);

		if (left != right)
			context->nodeClass[left] = right;
	}
	for (int i = 0; i < count; i++)
		context->nodeClass[i] = ClassRoot(context->nodeClass, i);
}

static int
ClassRoot(int *classes, int node)
{
	while (classes[node] != node)
		node = classes[node];
	return node;
}

static bool
PartitionReadWalker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
		return ((RangeTblEntry *) node)->rtekind == RTE_FUNCTION &&
			RepartitionReadUnit((RangeTblEntry *) node) > 0;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, PartitionReadWalker, context,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, PartitionReadWalker, context);
}

/*
 * ReadsRepartitionedRows: is a SELECT (on a node) a repartition join's
 * query of one partition, which reads partitions?
 */
bool
ReadsRepartitionedRows(Query *query)
{
	return query->commandType == CMD_SELECT &&
		query_tree_walker(query, PartitionReadWalker, NULL, QTW_EXAMINE_RTES_BEFORE);
}

/*
 * PlanPartitionQuery plans a query of one partition (on a node) preferring
 * hash joins, and without JIT compilation: the partitions have no
 * statistics, so PostgreSQL would guess 200 distinct keys, overrate each
 * hash probe and sort both sides for a merge join instead, and expect a
 * join output that makes compiling the query look worth hundreds of
 * milliseconds; a hash of one partition fits work_mem, which the partition
 * count was chosen for, and joining it takes less than compiling.
 */
PlannedStmt *
PlanPartitionQuery(Query *query, const char *queryString, int cursorOptions,
				   ParamListInfo boundParams)
{
	int			nestLevel = NewGUCNestLevel();
	PlannedStmt *plan;

	(void) set_config_option("enable_mergejoin", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	plan = ShardextLocalPlanner(query, queryString, cursorOptions, boundParams);
	AtEOXact_GUC(true, nestLevel);
	return plan;
}

/* ListIntPosition: where value is in a list of ints (0-based), or -1 */
int
ListIntPosition(List *ints, int value)
{
	ListCell   *cell;

	foreach(cell, ints)
	{
		if (lfirst_int(cell) == value)
			return foreach_current_index(cell);
	}
	return -1;
}

/* UnitOfRtindex: the unit of a range table entry of owner, or NULL */
JoinUnit *
UnitOfRtindex(RepartitionContext *context, Query *owner, Index rtindex)
{
	ListCell   *cell;

	foreach(cell, context->units)
	{
		JoinUnit   *unit = lfirst(cell);

		if (unit->owner == owner && unit->rtindex == rtindex)
			return unit;
	}
	return NULL;
}
