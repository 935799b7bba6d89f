/*-------------------------------------------------------------------------
 *
 * coordinator_modify.c
 *	  UPDATE, DELETE and MERGE of a hash-distributed table that cannot run
 *	  shard by shard: the coordinator finds the rows to change and their new
 *	  values, then changes them on their shards by ctid.
 *
 * The statement becomes a SELECT (the "row source") that returns, for
 * every target row it changes, the row's ctid on its shard, its
 * distribution column value (which names the shard) and whatever the
 * change needs.  The target table is read in it through a subquery that
 * selects the needed columns and ctid from the shards (with the conditions
 * on the target alone, so the usual shard pruning applies); that subquery
 * is always planned as a distributed query of its own, the rest of the
 * row source by the usual strategies (joins with local, non-co-located or
 * reference tables, subqueries, volatile and user-defined functions all
 * run on the coordinator as PostgreSQL runs them).
 *
 * The write itself (routed_writes.c) locks every shard of the target
 * against other writers before the row source runs, reads it completely,
 * then sends per shard one UPDATE / DELETE by ctid (and for MERGE one
 * INSERT per action) per batch of rows, and checks that each changed as
 * many rows as it was given: a row changed by someone else meanwhile (a
 * writer that bypassed this coordinator) is a serialization failure, never
 * a lost update.
 *
 * Reference tables have one copy per node, and a ctid names a row of one
 * copy only: their statements must run as a whole on every copy.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "rewrite/rewriteManip.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "shardext/pg_compat.h"
#include "shardext/planner.h"
#include "shardext/remote_sql.h"

typedef struct TargetColumnsContext
{
	Index		rtindex;
	int			depth;
	Bitmapset  *attnos;
	bool		wholeRow;
} TargetColumnsContext;

typedef struct CtidReferenceContext
{
	int			depth;
	List	   *rtables;		/* range tables of the enclosing levels, innermost first */
} CtidReferenceContext;

static bool TargetColumnsWalker(Node *node, TargetColumnsContext *context);
static bool NodeOfTypeWalker(Node *node, NodeTag *tag);
static bool contain_node_of_type(Node *node, NodeTag tag);
static bool CtidReferenceWalker(Node *node, CtidReferenceContext *context);
static bool OnlyTargetColumns(Node *node, Index rtindex);
static Query *TargetRowsQuery(Query *query, Index rtindex, Bitmapset *attnos, List *quals);
static List *RemoveConjuncts(List *conjuncts, List *removed);

/*
 * RejectShardCtidReferences: a user's ctid of a distributed table names a
 * row of some shard, not of the table; such queries are refused (the row
 * source below reads shard ctids for itself).
 */
void
RejectShardCtidReferences(Query *query)
{
	CtidReferenceContext context = {0, NIL};

	context.rtables = list_make1(query->rtable);
	query_tree_walker(query, CtidReferenceWalker, &context, 0);
}

static bool
CtidReferenceWalker(Node *node, CtidReferenceContext *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;
		List	   *rtable;
		RangeTblEntry *rte;

		if (var->varattno != SelfItemPointerAttributeNumber ||
			var->varlevelsup >= list_length(context->rtables))
			return false;
		rtable = list_nth(context->rtables, var->varlevelsup);
		if (var->varno < 1 || var->varno > list_length(rtable))
			return false;
		rte = rt_fetch(var->varno, rtable);
		if (rte->rtekind == RTE_RELATION && IsDistributedTable(rte->relid))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("system columns of distributed table \"%s\" cannot be read",
							get_rel_name(rte->relid)),
					 errhint("Rows of a distributed table live on several nodes; "
							 "use a key column instead of ctid or similar.")));
		return false;
	}
	if (IsA(node, Query))
	{
		bool		result;

		context->rtables = lcons(((Query *) node)->rtable, context->rtables);
		result = query_tree_walker((Query *) node, CtidReferenceWalker, context, 0);
		context->rtables = list_delete_first(context->rtables);
		return result;
	}
	return expression_tree_walker(node, CtidReferenceWalker, context);
}

static bool
NodeOfTypeWalker(Node *node, NodeTag *tag)
{
	if (node == NULL)
		return false;
	if (nodeTag(node) == *tag)
		return true;
	return expression_tree_walker(node, NodeOfTypeWalker, tag);
}

/* does an expression (not its subqueries) have a node of the given type? */
static bool
contain_node_of_type(Node *node, NodeTag tag)
{
	return NodeOfTypeWalker(node, &tag);
}

/* collects the target's columns used at any depth (whole-row use noted) */
static bool
TargetColumnsWalker(Node *node, TargetColumnsContext *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;

		if (var->varno == context->rtindex && var->varlevelsup == context->depth)
		{
			if (var->varattno == 0)
				context->wholeRow = true;
			else if (var->varattno > 0)
				context->attnos = bms_add_member(context->attnos, var->varattno);
		}
		return false;
	}
	if (IsA(node, Query))
	{
		bool		result;

		context->depth++;
		result = query_tree_walker((Query *) node, TargetColumnsWalker, context, 0);
		context->depth--;
		return result;
	}
	return expression_tree_walker(node, TargetColumnsWalker, context);
}

/*
 * TargetColumns returns the attribute numbers of the target's columns that
 * node (a part of the statement, at its top level) uses; a whole-row
 * reference to the target is refused.
 */
Bitmapset *
TargetColumns(Node *node, Index rtindex, Oid relid, Bitmapset *attnos)
{
	TargetColumnsContext context = {rtindex, 0, attnos, false};

	if (IsA(node, Query))
		query_tree_walker((Query *) node, TargetColumnsWalker, &context, 0);
	else
		TargetColumnsWalker(node, &context);
	if (context.wholeRow)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a whole-row reference to distributed table \"%s\" is not supported in this statement",
						get_rel_name(relid)),
				 errdetail("The statement runs through the coordinator, which reads the table's columns one by one."),
				 errhint("Name the columns instead.")));
	return context.attnos;
}

typedef struct OnlyTargetContext
{
	Index		rtindex;
	bool		other;
} OnlyTargetContext;

static bool
OnlyTargetWalker(Node *node, OnlyTargetContext *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		if (((Var *) node)->varno != context->rtindex || ((Var *) node)->varlevelsup != 0 ||
			((Var *) node)->varattno <= 0)
			context->other = true;
		return false;
	}
	if (IsA(node, SubLink) || IsA(node, Query) || IsA(node, PlaceHolderVar) ||
		IsA(node, Aggref) || IsA(node, WindowFunc) || IsA(node, GroupingFunc))
	{
		context->other = true;
		return false;
	}
	return expression_tree_walker(node, OnlyTargetWalker, context);
}

/* does a condition use the target's columns and nothing else of any row? */
static bool
OnlyTargetColumns(Node *node, Index rtindex)
{
	OnlyTargetContext context = {rtindex, false};

	OnlyTargetWalker(node, &context);
	return !context.other && !contain_volatile_functions(node);
}

/*
 * PushableTargetConditions returns those conjuncts that use only the
 * target's columns and that the shards can evaluate: the target rows
 * query evaluates them on the shards (which also prunes shards).
 */
List *
PushableTargetConditions(List *conjuncts, Index rtindex, RangeTblEntry *target)
{
	List	   *result = NIL;
	ListCell   *cell;
	Query	   *probe = makeNode(Query);

	probe->commandType = CMD_SELECT;
	probe->rtable = list_make1(target);

	foreach(cell, conjuncts)
	{
		Node	   *qual = lfirst(cell);
		Node	   *renumbered;

		if (!OnlyTargetColumns(qual, rtindex))
			continue;
		renumbered = copyObject(qual);
		ChangeVarNodes(renumbered, rtindex, 1, 0);
		if (ExprIsShippable(renumbered, probe, false))
			result = lappend(result, qual);
	}
	return result;
}

/* conjuncts without those in removed (compared by pointer) */
static List *
RemoveConjuncts(List *conjuncts, List *removed)
{
	List	   *result = NIL;
	ListCell   *cell;

	foreach(cell, conjuncts)
	{
		if (!list_member_ptr(removed, lfirst(cell)))
			result = lappend(result, lfirst(cell));
	}
	return result;
}

/*
 * TargetRowsQuery builds SELECT <columns>, ctid FROM ONLY target WHERE
 * quals: output column k is attribute k (a typed NULL when not needed),
 * and column natts + 1 is the shard ctid, so the statement's Vars of the
 * target keep their meaning when the target's range table entry becomes
 * this subquery.
 */
static Query *
TargetRowsQuery(Query *query, Index rtindex, Bitmapset *attnos, List *quals)
{
	RangeTblEntry *target = rt_fetch(rtindex, query->rtable);
	RangeTblEntry *inner = copyObject(target);
	Query	   *subquery = makeNode(Query);
	RangeTblRef *ref = makeNode(RangeTblRef);
	Relation	rel = table_open(target->relid, NoLock);
	TupleDesc	desc = RelationGetDescr(rel);
	List	   *renumbered = NIL;
	ListCell   *cell;

	inner->inh = false;
	subquery->commandType = CMD_SELECT;
	subquery->querySource = QSRC_ORIGINAL;
	subquery->canSetTag = true;
	subquery->rtable = list_make1(inner);
	ref->rtindex = 1;
	foreach(cell, quals)
	{
		Node	   *qual = copyObject(lfirst(cell));

		ChangeVarNodes(qual, rtindex, 1, 0);
		renumbered = lappend(renumbered, qual);
	}
	subquery->jointree = makeFromExpr(list_make1(ref),
									  (Node *) make_ands_explicit(renumbered));
	if (renumbered == NIL)
		subquery->jointree->quals = NULL;

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);
		Expr	   *expr;

		if (attr->attisdropped)
			expr = (Expr *) makeNullConst(INT4OID, -1, InvalidOid);
		else if (bms_is_member(attr->attnum, attnos))
			expr = (Expr *) makeVar(1, attr->attnum, attr->atttypid, attr->atttypmod,
									attr->attcollation, 0);
		else
			expr = (Expr *) makeNullConst(attr->atttypid, attr->atttypmod, attr->attcollation);
		subquery->targetList = lappend(subquery->targetList,
									   makeTargetEntry(expr, i + 1,
													   pstrdup(NameStr(attr->attname)), false));
	}
	subquery->targetList =
		lappend(subquery->targetList,
				makeTargetEntry((Expr *) makeVar(1, SelfItemPointerAttributeNumber, TIDOID,
												 -1, InvalidOid, 0),
								desc->natts + 1, pstrdup("ctid"), false));
	table_close(rel, NoLock);
	return subquery;
}

/*
 * ReadTargetThroughRowsQuery makes the target's range table entry of a row
 * source query the subquery TargetRowsQuery builds; quals are its
 * conditions on the target alone.  Returns the number of the ctid column.
 */
AttrNumber
ReadTargetThroughRowsQuery(Query *source, Index rtindex, Bitmapset *attnos, List *quals)
{
	RangeTblEntry *rte = rt_fetch(rtindex, source->rtable);
	Query	   *subquery = TargetRowsQuery(source, rtindex, attnos, quals);
	List	   *names = NIL;
	ListCell   *cell;

	foreach(cell, subquery->targetList)
		names = lappend(names, makeString(((TargetEntry *) lfirst(cell))->resname));
	RteWrappedInSubquery(source, rte, subquery, linitial(subquery->rtable));
	rte->rtekind = RTE_SUBQUERY;
	rte->subquery = subquery;
	rte->eref = makeAlias(rte->eref->aliasname, names);
	rte->relid = InvalidOid;
	rte->relkind = 0;
	rte->rellockmode = NoLock;
	rte->tablesample = NULL;
	rte->inh = false;
	return list_length(subquery->targetList);
}

/*
 * PlanRowSource plans a row source query whose range table entry
 * targetIndex reads the target through ReadTargetThroughRowsQuery: as a
 * whole on the shards when it can be, else with that subquery (and other
 * parts) distributed and the rest on the coordinator.
 */
PlannedStmt *
PlanRowSource(Query *source, Index targetIndex, int cursorOptions, ParamListInfo boundParams)
{
	PlannedStmt *plan = NULL;

	SetDeparseShardCtid(true);
	PG_TRY();
	{
		plan = PlanRouterQuery(source);
		if (plan == NULL)
			plan = PlanMultiShardSelect(source, cursorOptions, boundParams);
		if (plan == NULL)
			plan = PlanRecursivelyForcing(source, NULL, cursorOptions, boundParams,
										  ShardextLocalPlanner, targetIndex);
	}
	PG_FINALLY();
	{
		SetDeparseShardCtid(false);
	}
	PG_END_TRY();
	if (plan == NULL)
		elog(ERROR, "could not plan the rows of a coordinator write");
	return plan;
}

/* maps the Vars of RETURNING expressions to row source columns */
typedef struct ReturningContext
{
	Index		rtindex;
	Relation	rel;
	List	   *setAttnos;		/* UPDATE: the columns set ... */
	List	   *setValues;		/* ... and their new values' row source columns */
	RowSourceColumns columns;	/* Vars carried through the row source */
} ReturningContext;

static Node *
ReturningMutator(Node *node, ReturningContext *context)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;
		ListCell   *attnoCell;
		ListCell   *valueCell;

		if (var->varno == context->rtindex && var->varlevelsup == 0 && var->varattno > 0)
		{
			Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(context->rel),
												   var->varattno - 1);

			/* the new value of a column set, or of a generated column */
			forboth(attnoCell, context->setAttnos, valueCell, context->setValues)
			{
				if (lfirst_int(attnoCell) == var->varattno)
					return copyObject(lfirst(valueCell));
			}
			if (context->setAttnos != NIL && attr->attgenerated == ATTRIBUTE_GENERATED_STORED)
			{
				Node	   *expr = build_column_default(context->rel, var->varattno);

				if (expr == NULL)
					elog(ERROR, "no generation expression for column \"%s\"",
						 NameStr(attr->attname));
				ChangeVarNodes(expr, 1, context->rtindex, 0);
				return ReturningMutator(expr, context);
			}
		}
		/* any other column: carried through the row source */
		return CarryRowSourceColumn(&context->columns, node);
	}
	return expression_tree_mutator(node, ReturningMutator, context);
}

/*
 * ReturningOverRowSource returns a RETURNING expression as the write
 * evaluates it, over the row source's columns: the target's columns are
 * their new values for an UPDATE (the values the write sets, or a
 * generated column's expression over them), every other column is carried
 * through the row source.  An expression with a subquery is computed in
 * the row source itself, with the SET expressions in place of the columns
 * (only when they have no volatile functions: they would run twice).
 */
static Node *
ReturningOverRowSource(Query *query, ReturningContext *context, Node *expr)
{
	if (checkExprHasSubLink(expr))
	{
		bool		hasSubLinks = false;

		if (query->commandType == CMD_UPDATE)
		{
			if (contain_volatile_functions((Node *) query->targetList))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("a subquery in RETURNING of an UPDATE of distributed table \"%s\" "
								"with volatile functions in SET is not supported",
								RelationGetRelationName(context->rel)),
						 errhint("Return the columns and compute the rest in a second statement.")));
			expr = ReplaceVarsFromTargetListOf(expr, context->rtindex, 0,
											   rt_fetch(context->rtindex, query->rtable),
											   query->targetList, context->rtindex,
											   REPLACEVARS_CHANGE_VARNO, context->rtindex,
											   &hasSubLinks);
		}
		return AddRowSourceColumn(context->columns.targetList, (Expr *) expr, NULL);
	}
	return ReturningMutator(expr, context);
}

/*
 * PlanCoordinatorModify plans an UPDATE or DELETE of a hash-distributed
 * table through the coordinator (see the file header).  The row source
 * returns ctid, the distribution column, the new values of the SET columns
 * and the RETURNING values; the write applies them.
 */
PlannedStmt *
PlanCoordinatorModify(Query *query, int cursorOptions, ParamListInfo boundParams)
{
	Index		rtindex = query->resultRelation;
	RangeTblEntry *target = rt_fetch(rtindex, query->rtable);
	DistTableCacheEntry *entry = GetDistTableCacheEntry(target->relid);
	Query	   *source = copyObject(query);
	Relation	rel;
	Bitmapset  *attnos;
	List	   *conjuncts = NIL;
	List	   *pushed;
	List	   *targetList = NIL;
	List	   *returning = NIL;
	RoutedAction *action = palloc0(sizeof(RoutedAction));
	ReturningContext returningContext;
	AttrNumber	ctidColumn;
	ListCell   *cell;

	RejectShardCtidReferences(query);
	/* a cursor's current row is one of the coordinator's (empty) table */
	if (contain_node_of_type(query->jointree->quals, T_CurrentOfExpr))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("WHERE CURRENT OF on distributed table \"%s\" is not supported",
						get_rel_name(target->relid)),
				 errhint("Name the row by its key (WHERE key = ...) instead.")));
	attnos = TargetColumns((Node *) query, rtindex, target->relid, NULL);
	attnos = bms_add_member(attnos, entry->distAttnum);

	/* the conditions on the target alone go to its shards */
	CollectConjuncts(source->jointree->quals, &conjuncts);
	pushed = PushableTargetConditions(conjuncts, rtindex, target);
	source->jointree->quals = (Node *) make_ands_explicit(RemoveConjuncts(conjuncts, pushed));
	if (list_length(conjuncts) == list_length(pushed))
		source->jointree->quals = NULL;
	ctidColumn = ReadTargetThroughRowsQuery(source, rtindex, attnos, pushed);

	/* ctid, distribution value, new values, RETURNING */
	AddRowSourceColumn(&targetList, (Expr *) makeVar(rtindex, ctidColumn, TIDOID, -1,
													 InvalidOid, 0), "ctid");
	AddRowSourceColumn(&targetList, (Expr *) makeVar(rtindex, entry->distAttnum,
													 entry->distType, entry->distTypmod,
													 entry->distCollation, 0),
					   "distribution_value");
	action->matched = true;
	action->distPosition = -1;
	action->commandType = query->commandType;
	if (query->commandType == CMD_UPDATE)
	{
		foreach(cell, query->targetList)
		{
			TargetEntry *tle = lfirst(cell);

			if (tle->resjunk)
				continue;
			CheckDistributionColumnUnchanged(entry, tle->resno);
			action->attnos = lappend_int(action->attnos, tle->resno);
			action->values = lappend(action->values,
									 AddRowSourceColumn(&targetList, copyObject(tle->expr),
														tle->resname));
		}
	}
	rel = table_open(target->relid, NoLock);
	memset(&returningContext, 0, sizeof(returningContext));
	returningContext.rtindex = rtindex;
	returningContext.rel = rel;
	returningContext.setAttnos = action->attnos;
	returningContext.setValues = action->values;
	returningContext.columns.targetList = &targetList;
	foreach(cell, query->returningList)
	{
		TargetEntry *tle = lfirst(cell);
		Node	   *expr = ReturningOverRowSource(query, &returningContext, (Node *) tle->expr);

		returning = lappend(returning, makeTargetEntry((Expr *) expr, tle->resno,
													   tle->resname, false));
	}
	table_close(rel, NoLock);

	source->commandType = CMD_SELECT;
	source->resultRelation = 0;
	source->returningList = NIL;
	source->targetList = targetList;
	source->canSetTag = true;
	source->hasSubLinks = checkExprHasSubLink((Node *) targetList) ||
		checkExprHasSubLink((Node *) source->jointree);

	return PlanRoutedWrite(query, source, rtindex, list_make1(action), returning,
						   cursorOptions, boundParams);
}

/*
 * AddRowSourceColumn appends expr to a row source's target list and
 * returns the reference to that column in the write's expressions, which
 * are evaluated over the row source's rows: an OUTER_VAR Var.
 */
Node *
AddRowSourceColumn(List **targetList, Expr *expr, const char *name)
{
	int			resno = list_length(*targetList) + 1;

	*targetList = lappend(*targetList, makeTargetEntry(expr, resno,
													   name ? pstrdup(name) : NULL, false));
	return (Node *) makeVar(OUTER_VAR, resno, exprType((Node *) expr),
							exprTypmod((Node *) expr), exprCollation((Node *) expr), 0);
}

/*
 * CarryRowSourceColumn returns the row source column that carries expr
 * (a Var, or an expression computed with the row source), adding it to the
 * row source the first time.
 */
Node *
CarryRowSourceColumn(RowSourceColumns *columns, Node *expr)
{
	ListCell   *refCell;
	ListCell   *exprCell;

	forboth(refCell, columns->carriedRefs, exprCell, columns->carried)
	{
		if (equal(lfirst(exprCell), expr))
			return copyObject(lfirst(refCell));
	}
	columns->carried = lappend(columns->carried, expr);
	columns->carriedRefs = lappend(columns->carriedRefs,
								   AddRowSourceColumn(columns->targetList,
													  (Expr *) copyObject(expr), NULL));
	return copyObject(llast(columns->carriedRefs));
}

/*
 * CheckDistributionColumnUnchanged: a write through the coordinator changes
 * rows where they are, so the distribution column cannot change.
 */
void
CheckDistributionColumnUnchanged(DistTableCacheEntry *entry, AttrNumber attno)
{
	if (entry->method == DISTRIBUTE_BY_HASH && attno == entry->distAttnum)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot update distribution column \"%s\" of distributed table \"%s\"",
						get_attname(entry->relid, attno, false), get_rel_name(entry->relid)),
				 errhint("Delete the row and insert it with the new value instead.")));
}

/*
 * PlanRoutedWrite plans the row source and puts the write on top: a
 * distributed scan that reads the row source's rows and applies actions
 * (see RoutedAction) to them; returning are the target entries (over the
 * row source's columns) of the rows it returns.
 */
PlannedStmt *
PlanRoutedWrite(Query *query, Query *source, Index targetIndex, List *actions,
				List *returning, int cursorOptions, ParamListInfo boundParams)
{
	RangeTblEntry *target = rt_fetch(query->resultRelation, query->rtable);
	PlannedStmt *plan = PlanRowSource(source, targetIndex, cursorOptions, boundParams);
	DistributedJob job;
	CustomScan *scan;
	List	   *customExprs = NIL;
	List	   *returningTles = NIL;
	ListCell   *cell;
	int			resno = 1;

	InitDistributedJob(&job, JOB_ROUTED, NIL, list_make1_oid(target->relid), 0);
	job.anchor = 0;
	job.insertFromSubplan = true;
	job.hasReturning = returning != NIL;
	job.routedCommand = query->commandType;
	job.routedStrict = query->commandType == CMD_MERGE;
	/* only a join (MERGE's, or other tables in FROM / USING) repeats a target row */
	job.routedDedupe = query->commandType == CMD_MERGE ||
		list_length(query->jointree->fromlist) > 1 ||
		!IsA(linitial(query->jointree->fromlist), RangeTblRef);
	foreach(cell, actions)
	{
		RoutedAction *action = lfirst(cell);
		Node	   *qual = action->qual ? action->qual :
			(Node *) makeBoolConst(true, false);
		ListCell   *valueCell;

		job.routedActions = lappend(job.routedActions,
									list_make4(makeInteger(action->matched ? 1 : 0),
											   makeInteger(action->commandType),
											   action->attnos,
											   makeInteger(action->distPosition)));

		customExprs = lappend(customExprs, expression_planner((Expr *) qual));
		foreach(valueCell, action->values)
			customExprs = lappend(customExprs, expression_planner(lfirst(valueCell)));
	}
	foreach(cell, returning)
	{
		TargetEntry *tle = lfirst(cell);
		Node	   *expr = (Node *) expression_planner(tle->expr);

		customExprs = lappend(customExprs, expr);
		/* the scan's columns are described by type only (EXPLAIN shows no OUTER_VAR) */
		returningTles = lappend(returningTles,
								makeTargetEntry((Expr *) makeNullConst(exprType(expr),
																	   exprTypmod(expr),
																	   exprCollation(expr)),
												resno++, tle->resname, false));
	}

	scan = MakeDistributedScan(&job, customExprs);
	scan->custom_plans = list_make1(plan->planTree);
	SetDistributedScanTargetList(scan, returningTles);
	scan->scan.scanrelid = 0;
	scan->scan.plan.startup_cost = plan->planTree->startup_cost;
	scan->scan.plan.total_cost = plan->planTree->total_cost;
	scan->scan.plan.plan_rows = plan->planTree->plan_rows;
	scan->scan.plan.plan_width = plan->planTree->plan_width;

	plan->planTree = (Plan *) scan;
	plan->commandType = query->commandType;
	plan->hasReturning = returning != NIL;
	plan->canSetTag = query->canSetTag;
	plan->queryId = query->queryId;
	return plan;
}
