/*-------------------------------------------------------------------------
 *
 * merge_planner.c
 *	  MERGE into distributed and reference tables.
 *
 * Pushed down, the whole MERGE runs on each shard of the target (every
 * copy of a reference table) with the shards of the source tables of the
 * same index, when each target row and every source row that can match it
 * are on one shard, and every row a WHEN NOT MATCHED clause inserts lands
 * on the shard that ran it:
 *	- the source reads hash tables co-located with the target, the ON
 *	  clause equates the target's distribution column with a source
 *	  distribution column, and INSERT gives the distribution column that
 *	  same source column;
 *	- the source reads only reference tables, VALUES lists and constants
 *	  (the same rows on every node), and either the MERGE has no WHEN NOT
 *	  MATCHED clause (each shard matches its own target rows), or the ON
 *	  clause pins the target's distribution column to one shard (to a
 *	  constant, or to a VALUES column whose constants all hash to one shard)
 *	  and INSERT gives it that same value;
 *	- for a reference table target, the source reads only reference tables,
 *	  VALUES lists and constants.
 * Each shard's MERGE then raises PostgreSQL's own errors, the cardinality
 * violation included, and the command tag adds up the shards' counts.
 *
 * Otherwise a MERGE into a hash-distributed table runs through the
 * coordinator (coordinator_modify.c, routed_writes.c): the source is
 * joined with the target's rows (read with their shard ctids) on the
 * coordinator, each joined row gets the first WHEN clause whose condition
 * holds, evaluated there, and the updates, deletes and inserts are sent to
 * the shards.  A target row that two source rows update or delete is the
 * cardinality violation, as in PostgreSQL.
 *
 * Neither route can change the distribution column (rows would have to
 * move between shards): that is refused.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "shardext/guc.h"
#include "shardext/pg_compat.h"
#include "shardext/planner.h"
#include "shardext/remote_sql.h"

static void CheckMergeActions(Query *query, DistTableCacheEntry *entry);
static Node *MergeRouteValue(Query *query, DistTableCacheEntry *entry);
static bool InsertsGiveRouteValue(Query *query, DistTableCacheEntry *entry, Node *route);
static bool SourceOnEveryNode(Query *query);
static List *RouteValuesList(Query *query, Node *route);
static bool RouteValueInOneShard(Query *query, DistTableCacheEntry *entry, Node *route,
								 Node **pin);
static Node *RouteValuesCondition(Query *query, DistTableCacheEntry *entry, Node *route);
static void DeparseMerge(RemoteSql *sql, Query *query);
static PlannedStmt *PlanPushdownMerge(Query *query, DistTableCacheEntry *entry);
static PlannedStmt *PlanCoordinatorMerge(Query *query, DistTableCacheEntry *entry,
										 int cursorOptions, ParamListInfo boundParams);
static Index JoinSourceWithTarget(Query *source, Index rtindex, bool outer, List *conditions);

/*
 * PlanDistributedMerge plans MERGE into a distributed or reference table
 * (see the file header).
 */
PlannedStmt *
PlanDistributedMerge(Query *query, int cursorOptions, ParamListInfo boundParams)
{
	RangeTblEntry *target = rt_fetch(query->resultRelation, query->rtable);
	DistTableCacheEntry *entry = GetDistTableCacheEntry(target->relid);
	PlannedStmt *plan;

	CheckMergeActions(query, entry);
	plan = PlanPushdownMerge(query, entry);
	if (plan != NULL)
		return plan;
	if (entry->method == DISTRIBUTE_BY_HASH)
		return PlanCoordinatorMerge(query, entry, cursorOptions, boundParams);
	plan = PlanMergeWithShippedSource(query, cursorOptions, boundParams);
	if (plan != NULL)
		return plan;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("MERGE into reference table \"%s\" with these WHEN clauses is not supported",
					get_rel_name(target->relid)),
			 errdetail("A MERGE into a reference table runs on every copy of it with the same "
					   "source rows, so every part of its ON and WHEN clauses that uses the "
					   "target's columns must be one the nodes can evaluate the same way."),
			 errhint("Compute volatile or user-defined values from the source's columns only.")));
	return NULL;
}

/*
 * CheckMergeActions refuses what a distributed MERGE does not do: change
 * the distribution column, and (what PostgreSQL 17 added) RETURNING and
 * WHEN NOT MATCHED BY SOURCE.
 */
static void
CheckMergeActions(Query *query, DistTableCacheEntry *entry)
{
	ListCell   *cell;

	if (query->returningList != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("MERGE ... RETURNING on distributed table \"%s\" is not supported",
						get_rel_name(entry->relid)),
				 errhint("Run the MERGE without RETURNING, and read the rows it changed in a "
						 "second statement.")));
	foreach(cell, query->mergeActionList)
	{
		MergeAction *action = lfirst(cell);
		ListCell   *tleCell;

		if (MergeActionBySource(action))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("MERGE ... WHEN NOT MATCHED BY SOURCE on distributed table \"%s\" "
							"is not supported", get_rel_name(entry->relid)),
					 errhint("Change the target rows without a source row in a separate "
							 "UPDATE or DELETE ... WHERE NOT EXISTS (...).")));
		if (action->commandType != CMD_UPDATE)
			continue;
		foreach(tleCell, action->targetList)
		{
			TargetEntry *tle = lfirst(tleCell);

			if (!tle->resjunk)
				CheckDistributionColumnUnchanged(entry, tle->resno);
		}
	}
}

/*
 * MergeRouteValue returns the source side of an ON conjunct "target's
 * distribution column = source expression" (a hash equality, the
 * expression referring to no target column), or NULL.
 */
static Node *
MergeRouteValue(Query *query, DistTableCacheEntry *entry)
{
	List	   *conjuncts = NIL;
	ListCell   *cell;

	if (entry->method != DISTRIBUTE_BY_HASH)
		return NULL;
	CollectConjuncts(MergeJoinCondition(query), &conjuncts);
	foreach(cell, conjuncts)
	{
		OpExpr	   *op = lfirst(cell);

		if (!IsA(op, OpExpr) || list_length(op->args) != 2 || !IsHashEquality(op->opno, entry))
			continue;
		for (int side = 0; side < 2; side++)
		{
			Var		   *var = (Var *) StripRelabel(list_nth(op->args, side));
			Node	   *other = list_nth(op->args, 1 - side);

			if (IsA(var, Var) && var->varno == query->resultRelation &&
				var->varlevelsup == 0 && var->varattno == entry->distAttnum &&
				!contain_volatile_functions(other) &&
				!bms_is_member(query->resultRelation, pull_varnos(NULL, other)) &&
				exprType(StripRelabel(other)) == entry->distType)
				return StripRelabel(other);
		}
	}
	return NULL;
}

/*
 * InsertsGiveRouteValue: does every WHEN NOT MATCHED ... INSERT give the
 * distribution column the route value (so the row lands on the shard that
 * found no match)?
 */
static bool
InsertsGiveRouteValue(Query *query, DistTableCacheEntry *entry, Node *route)
{
	ListCell   *cell;

	foreach(cell, query->mergeActionList)
	{
		MergeAction *action = lfirst(cell);
		ListCell   *tleCell;
		bool		found = false;

		if (action->commandType != CMD_INSERT)
			continue;
		if (route == NULL)
			return false;
		foreach(tleCell, action->targetList)
		{
			TargetEntry *tle = lfirst(tleCell);

			if (tle->resno == entry->distAttnum)
				found = equal(StripRelabel((Node *) tle->expr), route);
		}
		if (!found)
			return false;
	}
	return true;
}

/* does the MERGE have WHEN NOT MATCHED clauses that insert? */
static bool
MergeInserts(Query *query)
{
	ListCell   *cell;

	foreach(cell, query->mergeActionList)
	{
		if (((MergeAction *) lfirst(cell))->commandType == CMD_INSERT)
			return true;
	}
	return false;
}

/*
 * SourceOnEveryNode: does the source read only reference tables (the same
 * rows on every node), VALUES lists and constants?
 */
static bool
SourceOnEveryNode(Query *query)
{
	RangeTblEntry *target = rt_fetch(query->resultRelation, query->rtable);
	List	   *relids;
	List	   *rtes;
	ListCell   *cell;

	CollectRelations(query, &relids, &rtes);
	foreach(cell, rtes)
	{
		RangeTblEntry *rte = lfirst(cell);

		/* the target itself, read at any level of the source, is on several shards */
		if (rte == target)
			continue;
		if (rte->relid == target->relid && !IsReferenceTable(rte->relid))
			return false;
		if (!IsReferenceTable(rte->relid))
			return false;
	}
	return !checkExprHasSubLink((Node *) query->jointree) &&
		!checkExprHasSubLink(MergeJoinCondition(query)) &&
		!checkExprHasSubLink((Node *) query->mergeActionList);
}

/*
 * RouteValuesList returns the entries of the VALUES list column that the
 * route value is (directly or through (VALUES ...) v), or NIL.
 */
static List *
RouteValuesList(Query *query, Node *route)
{
	Var		   *var = (Var *) route;
	RangeTblEntry *rte;
	int			column;
	List	   *entries = NIL;
	ListCell   *cell;

	if (!IsA(var, Var) || var->varlevelsup != 0)
		return NIL;
	rte = rt_fetch(var->varno, query->rtable);
	column = var->varattno;
	if (rte->rtekind == RTE_SUBQUERY && rte->subquery->setOperations == NULL &&
		list_length(rte->subquery->rtable) == 1 &&
		rt_fetch(1, rte->subquery->rtable)->rtekind == RTE_VALUES &&
		rte->subquery->jointree->quals == NULL)
	{
		TargetEntry *tle = list_nth(rte->subquery->targetList, column - 1);
		Var		   *inner = (Var *) StripRelabel((Node *) tle->expr);

		if (!IsA(inner, Var))
			return NIL;
		column = inner->varattno;
		rte = rt_fetch(1, rte->subquery->rtable);
	}
	if (rte->rtekind != RTE_VALUES)
		return NIL;
	foreach(cell, rte->values_lists)
	{
		Node	   *value = list_nth(lfirst(cell), column - 1);

		/* a value of its own row only: no columns, subqueries or volatility */
		if (contain_vars_of_level(value, 0) || contain_volatile_functions(value) ||
			checkExprHasSubLink(value))
			return NIL;
		entries = lappend(entries, value);
	}
	return entries;
}

/*
 * RouteValueInOneShard: the route value is a constant (or a parameter),
 * or a column of a VALUES list of one row, or whose entries are constants
 * of one shard; *pin is then a value of that shard.  (A split that
 * separates the constants changes the table's shards, which invalidates
 * this plan.)
 */
static bool
RouteValueInOneShard(Query *query, DistTableCacheEntry *entry, Node *route, Node **pin)
{
	List	   *entries;
	int			shardIndex = -1;
	Node	   *first = NULL;
	ListCell   *cell;

	*pin = NULL;
	if (!contain_vars_of_level(route, 0) && !checkExprHasSubLink(route) &&
		!contain_volatile_functions(route))
	{
		*pin = route;
		return true;
	}
	entries = RouteValuesList(query, route);
	/* one row: its value, whatever it is (a parameter of a prepared MERGE) */
	if (list_length(entries) == 1)
	{
		*pin = linitial(entries);
		return true;
	}
	foreach(cell, entries)
	{
		Node	   *value = StripRelabel(eval_const_expressions(NULL, lfirst(cell)));

		if (!IsA(value, Const) || ((Const *) value)->constisnull ||
			((Const *) value)->consttype != entry->distType)
			return false;
		if (shardIndex >= 0 &&
			FindShardForValue(entry, ((Const *) value)->constvalue)->shardIndex != shardIndex)
			return false;
		shardIndex = FindShardForValue(entry, ((Const *) value)->constvalue)->shardIndex;
		if (first == NULL)
			first = value;
	}
	*pin = first;
	return shardIndex >= 0;
}

/*
 * RouteValuesCondition returns "target's distribution column = ANY
 * (ARRAY[the VALUES entries])" when the route value is a VALUES column:
 * target rows without such a value match no source row, so the coordinator
 * need not read them (and the shards are pruned).  NULL otherwise.
 */
static Node *
RouteValuesCondition(Query *query, DistTableCacheEntry *entry, Node *route)
{
	List	   *entries = RouteValuesList(query, route);
	ArrayExpr  *array;
	ScalarArrayOpExpr *saop;
	TypeCacheEntry *typentry = lookup_type_cache(entry->distType, TYPECACHE_EQ_OPR);

	if (entries == NIL || !OidIsValid(get_array_type(entry->distType)) ||
		!OidIsValid(typentry->eq_opr) || !IsHashEquality(typentry->eq_opr, entry))
		return NULL;
	array = makeNode(ArrayExpr);
	array->array_typeid = get_array_type(entry->distType);
	array->element_typeid = entry->distType;
	array->elements = copyObject(entries);
	array->multidims = false;
	array->location = -1;
	saop = makeNode(ScalarArrayOpExpr);
	saop->opno = typentry->eq_opr;
	saop->opfuncid = get_opcode(typentry->eq_opr);
	saop->useOr = true;
	saop->inputcollid = entry->distCollation;
	saop->args = list_make2(makeVar(query->resultRelation, entry->distAttnum, entry->distType,
									entry->distTypmod, entry->distCollation, 0),
							array);
	saop->location = -1;
	return (Node *) saop;
}

/*
 * DeparseMerge prints the MERGE for one shard: the target's shard, the
 * source, the ON clause and the WHEN clauses.
 */
static void
DeparseMerge(RemoteSql *sql, Query *query)
{
	RangeTblEntry *target = rt_fetch(query->resultRelation, query->rtable);
	ListCell   *cell;

	RemoteSqlPushQuery(sql, query);
	appendStringInfoString(&sql->buf, "MERGE INTO ONLY ");
	RemoteSqlAppendRelation(sql, target->relid);
	appendStringInfo(&sql->buf, " %s USING ", RemoteSqlAlias(sql, 0, query->resultRelation));
	if (list_length(query->jointree->fromlist) != 1)
		RemoteSqlFail(sql, "a MERGE source of several items");
	else
		DeparseRemoteFromItem(sql, linitial(query->jointree->fromlist));
	appendStringInfoString(&sql->buf, " ON ");
	DeparseRemoteExpr(sql, FlattenAliasVars(query, MergeJoinCondition(query)));
	foreach(cell, query->mergeActionList)
		DeparseMergeAction(sql, query, lfirst(cell));
	RemoteSqlPopQuery(sql);
}

/* one WHEN [NOT] MATCHED [AND condition] THEN ... clause */
void
DeparseMergeAction(RemoteSql *sql, Query *query, MergeAction *action)
{
	StringInfo	buf = &sql->buf;
	Oid			relid = rt_fetch(query->resultRelation, query->rtable)->relid;
	ListCell   *cell;
	bool		first = true;

	appendStringInfoString(buf, MergeActionIsMatched(action) ? " WHEN MATCHED" :
						   " WHEN NOT MATCHED");
	if (action->qual != NULL)
	{
		appendStringInfoString(buf, " AND ");
		DeparseRemoteExpr(sql, FlattenAliasVars(query, action->qual));
	}
	appendStringInfoString(buf, " THEN ");
	switch (action->commandType)
	{
		case CMD_UPDATE:
			appendStringInfoString(buf, "UPDATE SET ");
			foreach(cell, action->targetList)
			{
				TargetEntry *tle = lfirst(cell);

				if (tle->resjunk)
					continue;
				appendStringInfo(buf, "%s%s = ", first ? "" : ", ",
								 quote_identifier(get_attname(relid, tle->resno, false)));
				first = false;
				DeparseRemoteExpr(sql, FlattenAliasVars(query, (Node *) tle->expr));
			}
			break;
		case CMD_DELETE:
			appendStringInfoString(buf, "DELETE");
			break;
		case CMD_INSERT:
			if (action->targetList == NIL)
			{
				appendStringInfoString(buf, "INSERT DEFAULT VALUES");
				break;
			}
			appendStringInfoString(buf, "INSERT (");
			foreach(cell, action->targetList)
			{
				TargetEntry *tle = lfirst(cell);

				appendStringInfo(buf, "%s%s", first ? "" : ", ",
								 quote_identifier(get_attname(relid, tle->resno, false)));
				first = false;
			}
			appendStringInfoString(buf, ") VALUES (");
			first = true;
			foreach(cell, action->targetList)
			{
				if (!first)
					appendStringInfoString(buf, ", ");
				first = false;
				DeparseRemoteExpr(sql, FlattenAliasVars(query,
														(Node *) ((TargetEntry *) lfirst(cell))->expr));
			}
			appendStringInfoChar(buf, ')');
			break;
		case CMD_NOTHING:
			appendStringInfoString(buf, "DO NOTHING");
			break;
		default:
			RemoteSqlFail(sql, "a MERGE action shardext does not know");
			break;
	}
}

/*
 * PlanPushdownMerge returns a plan that runs the MERGE on the target's
 * shards, or NULL when that would not be correct (see the file header).
 */
static PlannedStmt *
PlanPushdownMerge(Query *query, DistTableCacheEntry *entry)
{
	Node	   *route = MergeRouteValue(query, entry);
	Node	   *pin = NULL;
	List	   *values = NIL;
	List	   *kinds = NIL;
	RemoteSql	sql;
	DistributedJob job;
	List	   *customExprs;
	ListCell   *cell;

	if (!ShardextEnablePushdown)
		return NULL;
	if (entry->method != DISTRIBUTE_BY_HASH)
	{
		if (!SourceOnEveryNode(query))
			return NULL;
	}
	else if (SourceOnEveryNode(query))
	{
		bool		pinned = route != NULL && RouteValueInOneShard(query, entry, route, &pin);

		if (!pinned)
			pin = NULL;

		/* without WHEN NOT MATCHED, a pin only prunes */
		if (MergeInserts(query) && (!pinned || !InsertsGiveRouteValue(query, entry, route)))
			return NULL;
	}
	else
	{
		PushdownInfo info;

		memset(&info, 0, sizeof(info));
		if (route == NULL || !AnalyzePushdownFrom(query, &info) ||
			info.colocationId != entry->colocationId ||
			!IsDistColumnOf(route, query, &info) ||
			!InsertsGiveRouteValue(query, entry, route))
			return NULL;
	}

	InitRemoteSql(&sql);
	DeparseMerge(&sql, query);
	FinishRemoteSql(&sql);
	if (sql.failed || contain_volatile_functions((Node *) query->mergeActionList) ||
		contain_volatile_functions(MergeJoinCondition(query)))
		return NULL;

	FindPruningValues(query, query->resultRelation, entry, MergeJoinCondition(query),
					  &values, &kinds);
	if (pin != NULL && values == NIL)
	{
		values = list_make1(pin);
		kinds = list_make1_int(PRUNE_EQUAL);
	}
	InitDistributedJob(&job, JOB_MODIFY, sql.parts, sql.relations,
					   list_length(sql.paramExprs));
	job.anchor = entry->method == DISTRIBUTE_BY_HASH ?
		RelationPosition(sql.relations, entry->relid) : -1;
	job.pruneCount = list_length(values);
	job.pruneKinds = kinds;
	/* a text with parameters is reused: prepare it once per connection */
	job.usePrepared = (values != NIL && sql.paramExprs != NIL);
	customExprs = NIL;
	foreach(cell, values)
		customExprs = lappend(customExprs, expression_planner(lfirst(cell)));
	foreach(cell, sql.paramExprs)
		customExprs = lappend(customExprs, expression_planner(lfirst(cell)));
	return MakeDistributedPlannedStmt(query, MakeDistributedScan(&job, customExprs), NIL);
}

/*
 * JoinSourceWithTarget makes the FROM clause of a MERGE's row source: the
 * source LEFT JOIN the target (an inner join when no WHEN NOT MATCHED
 * clause needs the unmatched source rows) ON the conditions left.  Returns
 * the join's range table index.
 */
static Index
JoinSourceWithTarget(Query *source, Index rtindex, bool outer, List *conditions)
{
	JoinExpr   *join = makeNode(JoinExpr);
	RangeTblEntry *joinRte = makeNode(RangeTblEntry);
	RangeTblRef *targetRef = makeNode(RangeTblRef);

	joinRte->rtekind = RTE_JOIN;
	joinRte->jointype = outer ? JOIN_LEFT : JOIN_INNER;
	joinRte->eref = makeAlias("*MERGE*", NIL);
	joinRte->inFromCl = true;
	source->rtable = lappend(source->rtable, joinRte);
	targetRef->rtindex = rtindex;
	join->jointype = joinRte->jointype;
	join->larg = linitial(source->jointree->fromlist);
	join->rarg = (Node *) targetRef;
	join->quals = conditions != NIL ? (Node *) make_ands_explicit(conditions) :
		(Node *) makeBoolConst(true, false);
	join->rtindex = list_length(source->rtable);
	source->jointree = makeFromExpr(list_make1(join), NULL);
	return join->rtindex;
}

/* maps the expressions of the WHEN clauses onto the row source's columns */
static Node *
MergeColumnsMutator(Node *node, RowSourceColumns *context)
{
	if (node == NULL)
		return NULL;
	/* columns, and subqueries (planned with the row source), are carried */
	if (IsA(node, Var) || IsA(node, SubLink))
		return CarryRowSourceColumn(context, node);
	return expression_tree_mutator(node, MergeColumnsMutator, context);
}

/*
 * PlanCoordinatorMerge plans a MERGE into a hash-distributed table
 * through the coordinator: the row source is source LEFT JOIN target (an
 * inner join without WHEN NOT MATCHED clauses) with the target's ctid and
 * distribution value first, then every column (and subquery) the WHEN
 * clauses use; the write evaluates the clauses over its rows.
 */
static PlannedStmt *
PlanCoordinatorMerge(Query *query, DistTableCacheEntry *entry, int cursorOptions,
					 ParamListInfo boundParams)
{
	Index		rtindex = query->resultRelation;
	RangeTblEntry *target = rt_fetch(rtindex, query->rtable);
	Query	   *source = copyObject(query);
	List	   *conjuncts = NIL;
	List	   *pushed;
	List	   *remaining = NIL;
	Bitmapset  *attnos;
	List	   *targetList = NIL;
	List	   *actions = NIL;
	RowSourceColumns context;
	AttrNumber	ctidColumn;
	bool		outer;
	Index		joinIndex;
	ListCell   *cell;

	RejectShardCtidReferences(query);
	if (list_length(query->jointree->fromlist) != 1)
		elog(ERROR, "MERGE with a source of %d items", list_length(query->jointree->fromlist));
	attnos = TargetColumns((Node *) query, rtindex, target->relid, NULL);
	attnos = bms_add_member(attnos, entry->distAttnum);

	/* ON conditions on the target alone filter its rows on the shards */
	CollectConjuncts(MergeJoinCondition(source), &conjuncts);
	pushed = PushableTargetConditions(conjuncts, rtindex, target);
	foreach(cell, conjuncts)
	{
		if (!list_member_ptr(pushed, lfirst(cell)))
			remaining = lappend(remaining, lfirst(cell));
	}
	/* ... and so does the list of keys a VALUES source can match */
	{
		Node	   *route = MergeRouteValue(query, entry);
		Node	   *keys = route ? RouteValuesCondition(query, entry, route) : NULL;

		if (keys != NULL)
			pushed = lappend(pushed, keys);
	}
	ctidColumn = ReadTargetThroughRowsQuery(source, rtindex, attnos, pushed);

	outer = MergeKeepsUnmatchedSourceRows(query);
	joinIndex = JoinSourceWithTarget(source, rtindex, outer, remaining);

	AddRowSourceColumn(&targetList, (Expr *) makeVar(rtindex, ctidColumn, TIDOID, -1,
													 InvalidOid, 0), "ctid");
	AddRowSourceColumn(&targetList, (Expr *) makeVar(rtindex, entry->distAttnum,
													 entry->distType, entry->distTypmod,
													 entry->distCollation, 0),
					   "distribution_value");
	memset(&context, 0, sizeof(context));
	context.targetList = &targetList;
	foreach(cell, query->mergeActionList)
	{
		MergeAction *merge = lfirst(cell);
		RoutedAction *action = palloc0(sizeof(RoutedAction));
		ListCell   *tleCell;

		action->matched = MergeActionIsMatched(merge);
		action->commandType = merge->commandType;
		action->distPosition = -1;
		action->qual = MergeColumnsMutator(merge->qual, &context);
		foreach(tleCell, merge->targetList)
		{
			TargetEntry *tle = lfirst(tleCell);

			if (tle->resjunk)
				continue;
			if (merge->commandType == CMD_INSERT && tle->resno == entry->distAttnum)
				action->distPosition = list_length(action->attnos);
			action->attnos = lappend_int(action->attnos, tle->resno);
			action->values = lappend(action->values,
									 MergeColumnsMutator((Node *) tle->expr, &context));
		}
		if (merge->commandType == CMD_INSERT && action->distPosition < 0)
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("cannot insert into distributed table \"%s\" without a value for distribution column \"%s\"",
							get_rel_name(entry->relid),
							get_attname(entry->relid, entry->distAttnum, false)),
					 errhint("Give the distribution column a value or a default.")));
		actions = lappend(actions, action);
	}

	MergeBecomesSelect(source);
	/* the target's columns come out of the outer join: they can be null-extended */
	if (outer)
		targetList = (List *) MarkNullableByJoin((Node *) targetList, rtindex, joinIndex);
	source->targetList = targetList;
	source->canSetTag = true;
	source->hasSubLinks = checkExprHasSubLink((Node *) targetList) ||
		checkExprHasSubLink((Node *) source->jointree);

	return PlanRoutedWrite(query, source, rtindex, actions, NIL, cursorOptions, boundParams);
}
