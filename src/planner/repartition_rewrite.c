/*-------------------------------------------------------------------------
 *
 * repartition_rewrite.c
 *	  Turning a query whose units have their roles (repartition_cost.c)
 *	  into a plan: the map query of every moving unit, and the query that
 *	  runs per partition, in which each moving table is replaced by a read
 *	  of its rows of the partition; then the multi-shard pushdown planner
 *	  plans that query as a co-located one (aggregates split and combined,
 *	  ORDER BY and LIMIT merged) with the scan of repartition_exchange.c.
 *
 * Conditions of one moving table that hold before the joins (in WHERE,
 * an inner join's ON, or an outer join's ON for its nullable side, when
 * no outer join lies between them and the table) go into its map query,
 * so that only its matching rows move, and leave the partition query.
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
#include "parser/parse_relation.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "shardext/distributed_plan.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/planner.h"
#include "shardext/remote_sql.h"
#include "shardext/repartition.h"
#include "shardext/shardext.h"

/* a walk over the query and its subqueries, with the queries it is in */
typedef struct UnitColumnsContext
{
	RepartitionContext *repartition;
	List	   *queries;		/* innermost first */
	JoinUnit   *unit;			/* collect its columns (or all units': NULL) */
	List	   *skip;			/* nodes not to look into */
	bool		remap;			/* renumber the moving units' Vars */
	bool		failed;			/* a whole-row or system column of a unit */
} UnitColumnsContext;

static void FindPushable(RepartitionContext *context, Node *jtnode);
static Bitmapset *InnerReachable(RepartitionContext *context, Node *jtnode);
static bool IsSublinkConjunct(RepartitionContext *context, Node *conjunct);
static bool UnitColumnsWalker(Node *node, UnitColumnsContext *context);
static bool CollectUnitColumns(RepartitionContext *context, JoinUnit *unit);
static bool Moves(JoinUnit *unit);
static int	ColumnPosition(List *columns, AttrNumber attno);
static MovedUnit *MakeMovedUnit(RepartitionContext *context, JoinUnit *unit);
static char *UnitDescription(JoinUnit *unit, RangeTblEntry *rte);
static void RemoveConjuncts(Node *jtnode, List *removed);
static Node *RemainingQuals(Node *quals, List *removed);
static void ReplaceWithRead(RepartitionContext *context, JoinUnit *unit, Oid readFunction);
static void SetDistributionVars(RepartitionContext *context, PushdownInfo *info);
static CustomScan *BuildRepartitionScan(Query *query, PushdownInfo *info, RemoteSql *sql,
										void *arg);

/*
 * FindPushedConjuncts finds, for every unit, the conditions its map query
 * can evaluate (see the file header), and the columns of the unit the rest
 * of the query reads.
 */
void
FindPushedConjuncts(RepartitionContext *context)
{
	ListCell   *cell;

	FindPushable(context, (Node *) context->query->jointree);
	foreach(cell, context->sublinks)
	{
		SublinkJoin *join = lfirst(cell);
		Query	   *subquery = (Query *) join->sublink->subselect;
		ListCell   *conjunctCell;

		foreach(conjunctCell, TopLevelConjuncts(subquery))
		{
			Node	   *conjunct = lfirst(conjunctCell);

			if (IsConjunctOfUnit(context, conjunct, subquery, join->unit))
				join->unit->pushed = lappend(join->unit->pushed, conjunct);
		}
	}
	foreach(cell, context->units)
		(void) CollectUnitColumns(context, lfirst(cell));
}

/*
 * IsConjunctOfUnit: can a condition of a semi or anti join's subquery go
 * into its table's map query: it reads only that table's columns (or no
 * row at all), and can be shipped?
 */
bool
IsConjunctOfUnit(RepartitionContext *context, Node *conjunct, Query *subquery, JoinUnit *unit)
{
	if (ExpressionUnit(context, conjunct, 0, subquery) != unit &&
		(ContainsAnyVar(conjunct) || contain_volatile_functions(conjunct)))
		return false;
	return ExprIsShippable(conjunct, subquery, false);
}

/*
 * FindPushable looks at the conditions of every node of the FROM clause
 * for those of one unit that holds before any outer join above the unit.
 */
static void
FindPushable(RepartitionContext *context, Node *jtnode)
{
	List	   *conjuncts = NIL;
	Bitmapset  *reachable = NULL;
	ListCell   *cell;

	if (IsA(jtnode, FromExpr))
	{
		CollectConjuncts(((FromExpr *) jtnode)->quals, &conjuncts);
		reachable = InnerReachable(context, jtnode);
		foreach(cell, ((FromExpr *) jtnode)->fromlist)
			FindPushable(context, lfirst(cell));
	}
	else if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) jtnode;

		CollectConjuncts(join->quals, &conjuncts);
		if (join->jointype == JOIN_INNER)
			reachable = InnerReachable(context, jtnode);
		else if (join->jointype == JOIN_LEFT)
			reachable = InnerReachable(context, join->rarg);
		else if (join->jointype == JOIN_RIGHT)
			reachable = InnerReachable(context, join->larg);
		FindPushable(context, join->larg);
		FindPushable(context, join->rarg);
	}
	foreach(cell, conjuncts)
	{
		Node	   *conjunct = lfirst(cell);
		JoinUnit   *unit;

		if (IsSublinkConjunct(context, conjunct) ||
			list_member_ptr(context->flagConjuncts, conjunct))
			continue;
		unit = ExpressionUnit(context, conjunct, 0, context->query);
		if (unit != NULL && bms_is_member(unit->unitId, reachable) &&
			ExprIsShippable(conjunct, context->query, false))
			unit->pushed = lappend(unit->pushed, conjunct);
	}
}

/*
 * InnerReachable: the units below jtnode that no outer join below it can
 * null-extend (a condition at jtnode on one of them may filter its rows
 * before the joins).
 */
static Bitmapset *
InnerReachable(RepartitionContext *context, Node *jtnode)
{
	if (IsA(jtnode, RangeTblRef))
	{
		JoinUnit   *unit = UnitOfRtindex(context, context->query,
										 ((RangeTblRef *) jtnode)->rtindex);

		return unit != NULL ? bms_make_singleton(unit->unitId) : NULL;
	}
	if (IsA(jtnode, FromExpr))
	{
		Bitmapset  *result = NULL;
		ListCell   *cell;

		foreach(cell, ((FromExpr *) jtnode)->fromlist)
			result = bms_union(result, InnerReachable(context, lfirst(cell)));
		return result;
	}
	if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) jtnode;

		switch (join->jointype)
		{
			case JOIN_INNER:
				return bms_union(InnerReachable(context, join->larg),
								 InnerReachable(context, join->rarg));
			case JOIN_LEFT:
				return InnerReachable(context, join->larg);
			case JOIN_RIGHT:
				return InnerReachable(context, join->rarg);
			default:
				return NULL;
		}
	}
	return NULL;
}

static bool
IsSublinkConjunct(RepartitionContext *context, Node *conjunct)
{
	ListCell   *cell;

	foreach(cell, context->sublinks)
	{
		if (((SublinkJoin *) lfirst(cell))->conjunct == conjunct)
			return true;
	}
	return false;
}

/*
 * CollectUnitColumns sets unit->columns to the columns of the unit that
 * the query reads outside the unit's pushed conditions, in attribute
 * order; false when it reads the whole row or a system column.
 */
static bool
CollectUnitColumns(RepartitionContext *context, JoinUnit *unit)
{
	UnitColumnsContext walker;

	memset(&walker, 0, sizeof(walker));
	walker.repartition = context;
	walker.queries = list_make1(context->query);
	walker.unit = unit;
	walker.skip = unit->pushed;
	unit->columns = NIL;
	query_tree_walker(context->query, UnitColumnsWalker, &walker, QTW_IGNORE_JOINALIASES);
	list_sort(unit->columns, list_int_cmp);
	return !walker.failed;
}

/*
 * UnitColumnsWalker collects the columns of walker->unit, or with remap
 * renumbers the Vars of every moving unit to the read's columns.
 */
static bool
UnitColumnsWalker(Node *node, UnitColumnsContext *context)
{
	if (node == NULL || list_member_ptr(context->skip, node))
		return false;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;
		Query	   *owner;
		JoinUnit   *unit;

		if (var->varlevelsup >= (Index) list_length(context->queries))
			return false;
		owner = list_nth(context->queries, var->varlevelsup);
		unit = UnitOfRtindex(context->repartition, owner, var->varno);
		if (unit == NULL || (context->unit != NULL && unit != context->unit))
			return false;
		if (var->varattno <= 0)
			context->failed = true;
		else if (context->remap && Moves(unit))
			var->varattno = ColumnPosition(unit->columns, var->varattno);
		else if (!context->remap)
			unit->columns = list_append_unique_int(unit->columns, var->varattno);
		return false;
	}
	if (IsA(node, Query))
	{
		bool		result;

		context->queries = lcons(node, context->queries);
		result = query_tree_walker((Query *) node, UnitColumnsWalker, context,
								   QTW_IGNORE_JOINALIASES);
		context->queries = list_delete_first(context->queries);
		return result;
	}
	return expression_tree_walker(node, UnitColumnsWalker, context);
}

/* UnitColumnType: the type of a column of a unit (of its table or subquery) */
void
UnitColumnType(JoinUnit *unit, AttrNumber attno, Oid *type, int32 *typmod, Oid *collation)
{
	TargetEntry *tle;

	if (unit->subquery == NULL)
	{
		get_atttypetypmodcoll(unit->relid, attno, type, typmod, collation);
		return;
	}
	tle = get_tle_by_resno(unit->subquery->targetList, attno);
	if (tle == NULL)
		elog(ERROR, "subquery has no column %d", attno);
	*type = exprType((Node *) tle->expr);
	*typmod = exprTypmod((Node *) tle->expr);
	*collation = exprCollation((Node *) tle->expr);
}

/* ColumnPosition: the read's column (1-based) of a moved table's column */
static int
ColumnPosition(List *columns, AttrNumber attno)
{
	ListCell   *cell;

	foreach(cell, columns)
	{
		if (lfirst_int(cell) == attno)
			return foreach_current_index(cell) + 1;
	}
	elog(ERROR, "column %d of a moved table is not read", attno);
	return 0;					/* keep compiler quiet */
}

/* does the unit's table move (is it read from partitions)? */
static bool
Moves(JoinUnit *unit)
{
	return unit->role == UNIT_MOVED || unit->role == UNIT_BROADCAST;
}

/*
 * PlanRepartitionedQuery makes the plan of the query: the moving units'
 * map queries, the partition query, its combine step.  original is the
 * query as the caller gave it (context->query is a copy, changed here).
 * NULL when something cannot be shipped.
 */
PlannedStmt *
PlanRepartitionedQuery(RepartitionContext *context, Query *original, int cursorOptions,
					   ParamListInfo boundParams)
{
	Oid			readTypes[4] = {TEXTOID, INT4OID, INT4OID, INT8OID};
	Oid			readFunction;
	List	   *removed = NIL;
	PushdownInfo info;
	ListCell   *cell;

	readFunction = LookupFuncName(list_make2(makeString(SHARDEXT_SCHEMA_NAME),
											 makeString("repartition_read")),
								  4, readTypes, true);
	if (!OidIsValid(readFunction))
		return NULL;			/* an older extension version */

	/* the map queries, of the query as it is */
	foreach(cell, context->units)
	{
		JoinUnit   *unit = lfirst(cell);
		MovedUnit  *moved;

		if (!Moves(unit))
		{
			unit->pushed = NIL;
			continue;
		}
		if (!CollectUnitColumns(context, unit) || unit->columns == NIL)
			return NULL;
		moved = MakeMovedUnit(context, unit);
		if (moved == NULL)
			return NULL;
		context->movedUnits = lappend(context->movedUnits, moved);
		removed = list_concat(removed, unit->pushed);
	}

	/* the partition query: no pushed conditions, reads for moving tables */
	RemoveConjuncts((Node *) context->query->jointree, removed);
	foreach(cell, context->sublinks)
		RemoveConjuncts((Node *) ((Query *) ((SublinkJoin *) lfirst(cell))->sublink->subselect)->jointree,
						removed);
	{
		UnitColumnsContext walker;

		memset(&walker, 0, sizeof(walker));
		walker.repartition = context;
		walker.remap = true;
		walker.queries = list_make1(context->query);
		query_tree_walker(context->query, UnitColumnsWalker, &walker, QTW_IGNORE_JOINALIASES);
	}
	foreach(cell, context->units)
	{
		if (Moves(lfirst(cell)))
			ReplaceWithRead(context, lfirst(cell), readFunction);
	}

	memset(&info, 0, sizeof(info));
	info.colocationId = -1;
	SetDistributionVars(context, &info);
	return PlanPushdownSelect(context->query, &info, BuildRepartitionScan, context,
							  cursorOptions, boundParams);
}

/*
 * MakeMovedUnit deparses a moving unit's map query: the columns the
 * partition query reads, then its key, from one shard (a gap), with its
 * pushed conditions; NULL when it cannot be shipped.
 */
static MovedUnit *
MakeMovedUnit(RepartitionContext *context, JoinUnit *unit)
{
	MovedUnit  *moved = palloc0(sizeof(MovedUnit));
	RangeTblEntry *rte = rt_fetch(unit->rtindex, unit->owner->rtable);
	RemoteSql	sql;
	ListCell   *cell;
	char	   *alias;

	InitRemoteSql(&sql);
	RemoteSqlPushQuery(&sql, unit->owner);
	alias = RemoteSqlAlias(&sql, 0, unit->rtindex);
	appendStringInfoString(&sql.buf, "SELECT ");
	foreach(cell, unit->columns)
	{
		Oid			type;
		int32		typmod;
		Oid			collation;

		if (unit->subquery != NULL)
			appendStringInfo(&sql.buf, "%s.c%d, ", alias, lfirst_int(cell));
		else
			appendStringInfo(&sql.buf, "%s.%s, ", alias,
							 quote_identifier(get_attname(unit->relid, lfirst_int(cell), false)));
		UnitColumnType(unit, lfirst_int(cell), &type, &typmod, &collation);
		moved->columnTypes = lappend(moved->columnTypes, makeString(format_type_be_qualified(type)));
	}
	if (unit->key != NULL)
		DeparseRemoteExpr(&sql, unit->key);
	else if (unit->nullKey != NULL)
		DeparseRemoteExpr(&sql, unit->nullKey); /* broadcast: only its NULLs count */
	else
		appendStringInfoString(&sql.buf, "NULL");	/* broadcast: every row goes everywhere */
	if (unit->subquery != NULL)
	{
		RangeTblRef *ref = makeNode(RangeTblRef);

		ref->rtindex = unit->rtindex;
		appendStringInfoString(&sql.buf, " FROM ");
		DeparseRemoteFromItem(&sql, (Node *) ref);
	}
	else
	{
		appendStringInfoString(&sql.buf, " FROM ONLY ");
		RemoteSqlAppendRelation(&sql, unit->relid);
		appendStringInfo(&sql.buf, " %s", alias);
	}
	foreach(cell, unit->pushed)
	{
		appendStringInfoString(&sql.buf, cell == list_head(unit->pushed) ? " WHERE " : " AND ");
		DeparseRemoteExpr(&sql, lfirst(cell));
	}
	RemoteSqlPopQuery(&sql);
	FinishRemoteSql(&sql);
	if (sql.failed)
		return NULL;

	moved->unitId = unit->unitId;
	moved->relid = unit->relid;
	moved->mapSqlParts = sql.parts;
	moved->mapRelations = sql.relations;
	moved->mapParamCount = list_length(sql.paramExprs);
	foreach(cell, sql.paramExprs)
	{
		moved->mapParams = lappend_int(moved->mapParams, list_length(context->mapParamExprs));
		context->mapParamExprs = lappend(context->mapParamExprs, lfirst(cell));
	}
	moved->columnCount = list_length(unit->columns);
	moved->keyCount = 1;
	moved->layout = unit->role == UNIT_BROADCAST ? LAYOUT_BROADCAST :
		context->strategy == REPARTITION_DUAL ? LAYOUT_MODULO : LAYOUT_RANGES;
	moved->estimatedRows = unit->rows;
	moved->description = UnitDescription(unit, rte);
	return moved;
}

/*
 * UnitDescription names a moving table for EXPLAIN: the table (with its
 * alias when it has another), and the column it is partitioned by.
 */
static char *
UnitDescription(JoinUnit *unit, RangeTblEntry *rte)
{
	char	   *name = get_rel_name(unit->relid);
	Var		   *key = (Var *) StripRelabel(unit->key);

	if (unit->subquery != NULL)
	{
		name = psprintf("subquery %s", quote_identifier(rte->eref->aliasname));
		if (unit->role == UNIT_BROADCAST)
			return name;
		if (IsA(key, Var))
			return psprintf("%s by %s", name,
							quote_identifier(get_rte_attribute_name(rte, key->varattno)));
		return psprintf("%s by an expression", name);
	}
	if (strcmp(name, rte->eref->aliasname) != 0)
		name = psprintf("%s %s", quote_identifier(name), quote_identifier(rte->eref->aliasname));
	else
		name = pstrdup(quote_identifier(name));
	if (unit->role == UNIT_BROADCAST)
		return name;
	if (IsA(key, Var))
		return psprintf("%s by %s", name,
						quote_identifier(get_attname(unit->relid, key->varattno, false)));
	return psprintf("%s by an expression", name);
}

/* RemoveConjuncts drops the given conditions from a FROM clause */
static void
RemoveConjuncts(Node *jtnode, List *removed)
{
	ListCell   *cell;

	if (removed == NIL)
		return;
	if (IsA(jtnode, FromExpr))
	{
		FromExpr   *from = (FromExpr *) jtnode;

		from->quals = RemainingQuals(from->quals, removed);
		foreach(cell, from->fromlist)
			RemoveConjuncts(lfirst(cell), removed);
	}
	else if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) jtnode;

		join->quals = RemainingQuals(join->quals, removed);
		RemoveConjuncts(join->larg, removed);
		RemoveConjuncts(join->rarg, removed);
	}
}

static Node *
RemainingQuals(Node *quals, List *removed)
{
	List	   *conjuncts = NIL;
	List	   *kept = NIL;
	ListCell   *cell;

	CollectConjuncts(quals, &conjuncts);
	foreach(cell, conjuncts)
	{
		if (!list_member_ptr(removed, lfirst(cell)))
			kept = lappend(kept, lfirst(cell));
	}
	if (list_length(kept) == list_length(conjuncts))
		return quals;
	if (kept == NIL)
		return NULL;
	if (list_length(kept) == 1)
		return linitial(kept);
	return (Node *) make_andclause(kept);
}

/*
 * ReplaceWithRead puts the read of a moving unit's partition in place of
 * its table; a copy of the table's entry joins the top query's range
 * table, so that permissions are checked and plans invalidated as before.
 */
static void
ReplaceWithRead(RepartitionContext *context, JoinUnit *unit, Oid readFunction)
{
	ListCell   *entryCell = list_nth_cell(unit->owner->rtable, unit->rtindex - 1);
	RangeTblEntry *table = lfirst(entryCell);
	RangeTblEntry *read = makeNode(RangeTblEntry);
	RangeTblFunction *rtfunc = makeNode(RangeTblFunction);
	FuncExpr   *call;
	List	   *names = NIL;
	ListCell   *cell;

	call = makeFuncExpr(readFunction, RECORDOID,
						list_make4(makeConst(TEXTOID, -1, DEFAULT_COLLATION_OID, -1,
											 CStringGetTextDatum(""), false, false),
								   makeConst(INT4OID, -1, InvalidOid, 4,
											 Int32GetDatum(unit->unitId), false, true),
								   makeConst(INT4OID, -1, InvalidOid, 4, Int32GetDatum(0),
											 false, true),
								   makeConst(INT8OID, -1, InvalidOid, 8, Int64GetDatum(0),
											 false, FLOAT8PASSBYVAL)),
						InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	call->funcretset = true;
	foreach(cell, unit->columns)
	{
		Oid			type;
		int32		typmod;
		Oid			collation;

		UnitColumnType(unit, lfirst_int(cell), &type, &typmod, &collation);
		names = lappend(names, makeString(psprintf("c%d", foreach_current_index(cell) + 1)));
		rtfunc->funccoltypes = lappend_oid(rtfunc->funccoltypes, type);
		rtfunc->funccoltypmods = lappend_int(rtfunc->funccoltypmods, typmod);
		rtfunc->funccolcollations = lappend_oid(rtfunc->funccolcollations, collation);
	}
	rtfunc->funcexpr = (Node *) call;
	rtfunc->funccolcount = list_length(unit->columns);
	rtfunc->funccolnames = names;
	read->rtekind = RTE_FUNCTION;
	read->functions = list_make1(rtfunc);
	read->eref = makeAlias(table->eref->aliasname, names);
	read->inFromCl = true;
	lfirst(entryCell) = read;
	if (unit->subquery != NULL)
		AppendRelationsForChecks(context->query, unit->subquery, false);
	else
		AppendRteWithPermissions(context->query, table, QueryPermInfos(unit->owner));
}

/*
 * SetDistributionVars tells the pushdown planner which columns of the
 * partition query follow the partitions: the stationary tables'
 * distribution columns and the moved tables' keys (when a column), so that
 * grouping, DISTINCT or windows by them run partition by partition.
 */
static void
SetDistributionVars(RepartitionContext *context, PushdownInfo *info)
{
	ListCell   *cell;

	foreach(cell, context->units)
	{
		JoinUnit   *unit = lfirst(cell);
		Var		   *key = (Var *) StripRelabel(unit->key);

		if (unit->level != 0)
			continue;
		if (unit->role == UNIT_STATIONARY)
		{
			ListCell   *columnCell;

			foreach(columnCell, unit->distColumns)
			{
				Oid			type;
				int32		typmod;
				Oid			collation;

				UnitColumnType(unit, lfirst_int(columnCell), &type, &typmod, &collation);
				info->distVars = lappend(info->distVars,
										 makeVar(unit->rtindex, lfirst_int(columnCell), type,
												 typmod, collation, 0));
			}
		}
		else if (unit->role == UNIT_MOVED && key != NULL && IsA(key, Var) &&
				 list_member_int(unit->columns, key->varattno))
			info->distVars = lappend(info->distVars,
									 makeVar(unit->rtindex,
											 ColumnPosition(unit->columns, key->varattno),
											 key->vartype, key->vartypmod, key->varcollid, 0));
	}
}

/*
 * BuildRepartitionScan makes the distributed scan of the partition query
 * (the pushdown planner's builder): a job with the repartition plan, whose
 * parameters are the partition query's, then the map queries'.
 */
static CustomScan *
BuildRepartitionScan(Query *query, PushdownInfo *info, RemoteSql *sql, void *arg)
{
	RepartitionContext *context = arg;
	RepartitionPlan plan;
	DistributedJob job;
	List	   *customExprs = NIL;
	ListCell   *cell;

	memset(&plan, 0, sizeof(plan));
	plan.strategy = context->strategy;
	plan.partitionCount = context->partitionCount;
	plan.layoutRelid = context->layoutRelid;
	plan.units = context->movedUnits;
	InitDistributedJob(&job, JOB_SELECT, sql->parts, sql->relations,
					   list_length(sql->paramExprs));
	job.repartition = RepartitionPlanToList(&plan);
	foreach(cell, list_concat(list_copy(sql->paramExprs), context->mapParamExprs))
		customExprs = lappend(customExprs, expression_planner(lfirst(cell)));
	return MakeDistributedScan(&job, customExprs);
}
