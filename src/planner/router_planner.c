/*-------------------------------------------------------------------------
 *
 * router_planner.c
 *	  Router queries (every distributed table pinned to the same shard),
 *	  UPDATE/DELETE and INSERT ... VALUES on distributed and reference
 *	  tables.  These plans are built without the standard planner: the
 *	  statement is deparsed once, and at execution the shard is chosen from
 *	  the pinning value, so a prepared statement's generic plan routes each
 *	  execution by its parameters.
 *
 * A table is pinned when a top-level conjunct of its query level (WHERE or
 * the ON clause of an inner join) says distribution column = value, where
 * the value refers to no column, or equates it with the distribution column
 * of a pinned co-located table (also of an outer query level, for
 * correlated subqueries).  Rows of a pinned table that take part in the
 * result all hash to the shard of that value, so when all tables share one
 * value, one task on that shard computes the whole result.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/hash.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "shardext/global_index.h"
#include "shardext/pg_compat.h"
#include "shardext/planner.h"
#include "shardext/remote_sql.h"

typedef struct RouterLevel
{
	Query	   *query;
	Node	  **pins;			/* per range table index - 1 */
	struct RouterLevel *parent;
} RouterLevel;

typedef struct RouterContext
{
	int32		colocationId;	/* of the hash tables; -1 before the first */
	Node	   *pin;			/* the value all hash tables are pinned to */
	Oid			anchorRelid;
	bool		failed;
} RouterContext;

static void DeparseModifyStatement(RemoteSql *sql, Query *query, DistTableCacheEntry *entry,
								   bool byLockedCtids);
static bool ModifyReadsColocated(Query *query, DistTableCacheEntry *entry, List *relations,
								 const char *command, bool raise);
static List *InitModifyJob(DistributedJob *job, RemoteSql *sql, Query *query,
						   DistTableCacheEntry *entry, bool hasReturning);
static PlannedStmt *PlanModifyWithGlobalIndexes(Query *query, DistTableCacheEntry *entry,
												DistributedJob *gindex, const char *command);
static void AnalyzeRouterLevel(Query *query, RouterLevel *parent, RouterContext *context);
static bool PinByValue(RouterLevel *level, Node *clause);
static bool PinByEquality(RouterLevel *level, Node *clause);
static void CheckLevelPins(RouterLevel *level, RouterContext *context);
static bool AnalyzeSublinksWalker(Node *node, void *context);
static bool ContainsAnyVarWalker(Node *node, void *context);
static Node *CoerceToDistType(Node *value, DistTableCacheEntry *entry, bool array);
static List *PlanExprs(List *exprs);
static Node *ColumnPinValue(Node *clause, Index rtindex, AttrNumber attno, int levelsUp,
							 DistTableCacheEntry *entry, int *kind);
static bool QueryLocksRows(Node *node, void *context);
static void DeparseReturning(RemoteSql *sql, List *returningList);
static void RejectUnshippable(RemoteSql *sql, Query *query, const char *command);

/*
 * StripRelabel removes binary-compatible relabelling on top of a node.
 */
Node *
StripRelabel(Node *node)
{
	while (node != NULL && IsA(node, RelabelType))
		node = (Node *) ((RelabelType *) node)->arg;
	return node;
}

static bool
ContainsAnyVarWalker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var) || IsA(node, PlaceHolderVar) || IsA(node, Aggref) ||
		IsA(node, WindowFunc) || IsA(node, SubLink) || IsA(node, SubPlan) ||
		IsA(node, GroupingFunc) || IsA(node, Query))
		return true;
	/* executor values (init plans, nestloop parameters of scans) are fine */
	if (IsA(node, Param) && ((Param *) node)->paramkind == PARAM_SUBLINK)
		return true;
	return expression_tree_walker(node, ContainsAnyVarWalker, context);
}

/* does the expression depend on any row (of any query level)? */
bool
ContainsAnyVar(Node *node)
{
	return ContainsAnyVarWalker(node, NULL);
}

/*
 * is opno the equality of the distribution column type's hash opfamily?
 * (The type cache remembers the family; GetDefaultOpClass would scan
 * pg_opclass for every clause of every query.)
 */
bool
IsHashEquality(Oid opno, DistTableCacheEntry *entry)
{
	/* the type cache keeps the opfamily: no catalog scan per query */
	TypeCacheEntry *typentry = lookup_type_cache(entry->distType, TYPECACHE_HASH_OPFAMILY);

	if (!OidIsValid(typentry->hash_opf))
		return false;
	return op_in_opfamily(opno, typentry->hash_opf);
}

/*
 * CoerceToDistType converts a pinning value to the distribution column's
 * type (or its array type), so that it hashes like the column; NULL when
 * no implicit cast exists.
 */
static Node *
CoerceToDistType(Node *value, DistTableCacheEntry *entry, bool array)
{
	Oid			target = array ? get_array_type(entry->distType) : entry->distType;
	Oid			source = exprType(value);

	if (!OidIsValid(target))
		return NULL;
	if (source == target)
		return value;
	return coerce_to_target_type(NULL, value, source, target, -1,
								 COERCION_IMPLICIT, COERCE_IMPLICIT_CAST, -1);
}

/*
 * IsDistColumnVar: is node (possibly relabelled) the distribution column of
 * a hash-distributed table of the query levelsUp levels out?
 */
bool
IsDistColumnVar(Node *node, Query *query, int levelsUp, Index *rtindex)
{
	Var		   *var = (Var *) StripRelabel(node);
	RangeTblEntry *rte;
	DistTableCacheEntry *entry;

	if (var == NULL || !IsA(var, Var) || var->varlevelsup != levelsUp ||
		var->varno < 1 || var->varno > list_length(query->rtable))
		return false;
	rte = rt_fetch(var->varno, query->rtable);
	if (rte->rtekind != RTE_RELATION)
		return false;
	entry = GetDistTableCacheEntry(rte->relid);
	if (entry == NULL || entry->method != DISTRIBUTE_BY_HASH ||
		entry->distAttnum != var->varattno)
		return false;
	*rtindex = var->varno;
	return true;
}

/*
 * DistributionPinValue returns the value a clause pins the distribution
 * column of range table entry rtindex (of the query levelsUp out) to, with
 * its kind (PRUNE_EQUAL or PRUNE_ANY), or NULL.
 */
Node *
DistributionPinValue(Node *clause, Index rtindex, int levelsUp,
					 DistTableCacheEntry *entry, int *kind)
{
	return ColumnPinValue(clause, rtindex, entry->distAttnum, levelsUp, entry, kind);
}

/* DistributionPinValue for column attno, which holds distribution values */
static Node *
ColumnPinValue(Node *clause, Index rtindex, AttrNumber attno, int levelsUp,
			   DistTableCacheEntry *entry, int *kind)
{
	if (clause == NULL)
		return NULL;
	if (IsA(clause, OpExpr) && list_length(((OpExpr *) clause)->args) == 2)
	{
		OpExpr	   *op = (OpExpr *) clause;

		for (int side = 0; side < 2; side++)
		{
			Var		   *var = (Var *) StripRelabel(list_nth(op->args, side));
			Node	   *other = list_nth(op->args, 1 - side);

			if (IsA(var, Var) && var->varno == rtindex && var->varlevelsup == levelsUp &&
				var->varattno == attno && !ContainsAnyVar(other) &&
				!contain_volatile_functions(other) && IsHashEquality(op->opno, entry))
			{
				*kind = PRUNE_EQUAL;
				return CoerceToDistType(other, entry, false);
			}
		}
	}
	else if (IsA(clause, ScalarArrayOpExpr))
	{
		ScalarArrayOpExpr *op = (ScalarArrayOpExpr *) clause;
		Var		   *var = (Var *) StripRelabel(linitial(op->args));
		Node	   *other = lsecond(op->args);

		if (op->useOr && IsA(var, Var) && var->varno == rtindex &&
			var->varlevelsup == levelsUp && var->varattno == attno &&
			!ContainsAnyVar(other) && !contain_volatile_functions(other) &&
			IsHashEquality(op->opno, entry))
		{
			*kind = PRUNE_ANY;
			return CoerceToDistType(other, entry, true);
		}
	}
	return NULL;
}

/*
 * FindPruningValues collects the pinning values of one table from a list
 * of conjuncts (an implicitly ANDed qual list, or a qual tree).
 */
void
FindPruningValues(Query *query, Index rtindex, DistTableCacheEntry *entry,
				  Node *quals, List **values, List **kinds)
{
	if (entry == NULL || entry->method != DISTRIBUTE_BY_HASH)
		return;
	FindColumnPruningValues(rtindex, entry->distAttnum, entry, quals, values, kinds);
}

/*
 * FindColumnPruningValues is FindPruningValues for column attno of range
 * table entry rtindex, which holds values of entry's distribution column
 * (a subquery's output).
 */
void
FindColumnPruningValues(Index rtindex, AttrNumber attno, DistTableCacheEntry *entry,
						Node *quals, List **values, List **kinds)
{
	List	   *conjuncts = NIL;
	ListCell   *cell;

	CollectConjuncts(quals, &conjuncts);
	foreach(cell, conjuncts)
	{
		int			kind;
		Node	   *value = ColumnPinValue(lfirst(cell), rtindex, attno, 0, entry, &kind);

		if (value != NULL)
		{
			*values = lappend(*values, value);
			*kinds = lappend_int(*kinds, kind);
		}
	}
}

void
CollectConjuncts(Node *node, List **conjuncts)
{
	if (node == NULL)
		return;
	if (IsA(node, List))
	{
		ListCell   *cell;

		foreach(cell, (List *) node)
			CollectConjuncts(lfirst(cell), conjuncts);
	}
	else if (IsA(node, BoolExpr) && ((BoolExpr *) node)->boolop == AND_EXPR)
		CollectConjuncts((Node *) ((BoolExpr *) node)->args, conjuncts);
	else if (IsA(node, RestrictInfo))
		CollectConjuncts((Node *) ((RestrictInfo *) node)->clause, conjuncts);
	else
		*conjuncts = lappend(*conjuncts, node);
}

/*
 * CollectJoinTreeQuals adds the conjuncts of the WHERE clauses and join
 * conditions of a join tree, of inner joins only when innerOnly (their
 * conditions restrict the result; an outer join's do not).
 */
void
CollectJoinTreeQuals(Node *jtnode, bool innerOnly, List **conjuncts)
{
	if (jtnode == NULL)
		return;
	if (IsA(jtnode, FromExpr))
	{
		ListCell   *cell;

		CollectConjuncts(((FromExpr *) jtnode)->quals, conjuncts);
		foreach(cell, ((FromExpr *) jtnode)->fromlist)
			CollectJoinTreeQuals(lfirst(cell), innerOnly, conjuncts);
	}
	else if (IsA(jtnode, JoinExpr) &&
			 (!innerOnly || ((JoinExpr *) jtnode)->jointype == JOIN_INNER))
	{
		JoinExpr   *join = (JoinExpr *) jtnode;

		CollectConjuncts(join->quals, conjuncts);
		CollectJoinTreeQuals(join->larg, innerOnly, conjuncts);
		CollectJoinTreeQuals(join->rarg, innerOnly, conjuncts);
	}
}

/* the conjuncts of WHERE and of inner join conditions, flattened */
List *
TopLevelConjuncts(Query *query)
{
	List	   *conjuncts = NIL;

	CollectJoinTreeQuals((Node *) query->jointree, true, &conjuncts);
	return conjuncts;
}

typedef struct SublinkWalkerContext
{
	RouterLevel *level;
	RouterContext *router;
} SublinkWalkerContext;

static bool
AnalyzeSublinksWalker(Node *node, void *context)
{
	SublinkWalkerContext *walker = context;

	if (node == NULL || walker->router->failed)
		return false;
	if (IsA(node, SubLink))
	{
		SubLink    *sublink = (SubLink *) node;

		AnalyzeRouterLevel((Query *) sublink->subselect, walker->level, walker->router);
		return expression_tree_walker(sublink->testexpr, AnalyzeSublinksWalker, context);
	}
	if (IsA(node, Query))
		return false;
	return expression_tree_walker(node, AnalyzeSublinksWalker, context);
}

/*
 * AnalyzeRouterLevel finds the pins of the hash tables of one query level
 * and checks that they agree with every other level's.
 */
static void
AnalyzeRouterLevel(Query *query, RouterLevel *parent, RouterContext *context)
{
	RouterLevel level;
	List	   *conjuncts;
	bool		changed = true;
	ListCell   *cell;
	SublinkWalkerContext walker;

	if (context->failed)
		return;
	if (query->commandType != CMD_SELECT || query->setOperations != NULL ||
		query->cteList != NIL)
	{
		context->failed = true;
		return;
	}
	level.query = query;
	level.pins = palloc0(sizeof(Node *) * Max(list_length(query->rtable), 1));
	level.parent = parent;
	conjuncts = TopLevelConjuncts(query);

	/* pins spread over equalities: repeat until none is added */
	while (changed)
	{
		changed = false;
		foreach(cell, conjuncts)
		{
			Node	   *clause = lfirst(cell);

			changed |= PinByValue(&level, clause);
			changed |= PinByEquality(&level, clause);
		}
	}

	CheckLevelPins(&level, context);

	walker.level = &level;
	walker.router = context;
	if (!context->failed)
		query_tree_walker(query, AnalyzeSublinksWalker, &walker, QTW_IGNORE_RANGE_TABLE);
}

/*
 * PinByValue pins the hash tables of the level whose distribution column
 * the clause compares with a value (distribution column = value); returns
 * whether it pinned one that was not pinned yet.
 */
static bool
PinByValue(RouterLevel *level, Node *clause)
{
	Query	   *query = level->query;
	bool		changed = false;

	for (Index rtindex = 1; rtindex <= list_length(query->rtable); rtindex++)
	{
		RangeTblEntry *rte = rt_fetch(rtindex, query->rtable);
		DistTableCacheEntry *entry;
		int			kind;
		Node	   *value;

		if (level->pins[rtindex - 1] != NULL || rte->rtekind != RTE_RELATION)
			continue;
		entry = GetDistTableCacheEntry(rte->relid);
		if (entry == NULL || entry->method != DISTRIBUTE_BY_HASH)
			continue;
		value = DistributionPinValue(clause, rtindex, 0, entry, &kind);
		if (value != NULL && kind == PRUNE_EQUAL)
		{
			level->pins[rtindex - 1] = value;
			changed = true;
		}
	}
	return changed;
}

/*
 * PinByEquality passes a pin on over an equality of distribution columns:
 * between two tables of the level, or from a table of an outer level to one
 * of this level.  Returns whether it pinned a table that was not pinned yet.
 */
static bool
PinByEquality(RouterLevel *level, Node *clause)
{
	Query	   *query = level->query;
	OpExpr	   *op;
	Index		left;
	Index		right;
	bool		changed = false;

	if (!IsA(clause, OpExpr) || list_length(((OpExpr *) clause)->args) != 2)
		return false;
	op = (OpExpr *) clause;
	if (!op_hashjoinable(op->opno, exprType(linitial(op->args))) &&
		!op_mergejoinable(op->opno, exprType(linitial(op->args))))
		return false;

	/* distribution column = distribution column of this level */
	if (IsDistColumnVar(linitial(op->args), query, 0, &left) &&
		IsDistColumnVar(lsecond(op->args), query, 0, &right) &&
		IsHashEquality(op->opno, GetDistTableCacheEntry(rt_fetch(left, query->rtable)->relid)))
	{
		if (level->pins[left - 1] != NULL && level->pins[right - 1] == NULL)
		{
			level->pins[right - 1] = level->pins[left - 1];
			changed = true;
		}
		else if (level->pins[right - 1] != NULL && level->pins[left - 1] == NULL)
		{
			level->pins[left - 1] = level->pins[right - 1];
			changed = true;
		}
	}

	/* distribution column = distribution column of an outer level */
	for (int side = 0; side < 2; side++)
	{
		Node	   *mine = list_nth(op->args, side);
		Var		   *outer = (Var *) StripRelabel(list_nth(op->args, 1 - side));
		RouterLevel *outerLevel = level->parent;
		Index		outerIndex;

		if (!IsDistColumnVar(mine, query, 0, &left) || level->pins[left - 1] != NULL ||
			!IsA(outer, Var) || outer->varlevelsup == 0)
			continue;
		for (int up = 1; outerLevel != NULL && up < (int) outer->varlevelsup; up++)
			outerLevel = outerLevel->parent;
		if (outerLevel == NULL ||
			!IsDistColumnVar((Node *) outer, outerLevel->query, outer->varlevelsup,
							 &outerIndex) ||
			outerLevel->pins[outerIndex - 1] == NULL ||
			!IsHashEquality(op->opno, GetDistTableCacheEntry(rt_fetch(left, query->rtable)->relid)))
			continue;
		level->pins[left - 1] = outerLevel->pins[outerIndex - 1];
		changed = true;
	}
	return changed;
}

/*
 * CheckLevelPins: every hash table of the level must be pinned, to the same
 * value, in one colocation group (with those of the other levels); subqueries
 * in FROM are analyzed as levels of their own.  Sets context->failed when
 * not.
 */
static void
CheckLevelPins(RouterLevel *level, RouterContext *context)
{
	Query	   *query = level->query;

	for (Index rtindex = 1; rtindex <= list_length(query->rtable) && !context->failed; rtindex++)
	{
		RangeTblEntry *rte = rt_fetch(rtindex, query->rtable);
		DistTableCacheEntry *entry;

		if (rte->rtekind == RTE_SUBQUERY)
		{
			AnalyzeRouterLevel(rte->subquery, level, context);
			continue;
		}
		if (rte->rtekind == RTE_JOIN || RteIsGroup(rte))
			continue;
		if (rte->rtekind != RTE_RELATION)
		{
			context->failed = true;
			break;
		}
		entry = GetDistTableCacheEntry(rte->relid);
		if (entry == NULL)
		{
			context->failed = true;
			break;
		}
		if (entry->method != DISTRIBUTE_BY_HASH)
			continue;
		if (level->pins[rtindex - 1] == NULL ||
			(context->colocationId >= 0 && context->colocationId != entry->colocationId) ||
			(context->pin != NULL && !equal(context->pin, level->pins[rtindex - 1])))
		{
			context->failed = true;
			break;
		}
		context->colocationId = entry->colocationId;
		context->pin = level->pins[rtindex - 1];
		if (!OidIsValid(context->anchorRelid))
			context->anchorRelid = rte->relid;
	}
}

/*
 * ReturnsRowOfNoInput: does the query return a row even when its tables
 * give none (aggregates without GROUP BY)?  Then it runs on one shard even
 * when no shard can hold a matching row.
 */
bool
ReturnsRowOfNoInput(Query *query)
{
	return query->hasAggs && query->groupClause == NIL && query->groupingSets == NIL;
}

/* does the query, or a subquery of it, have FOR UPDATE / SHARE? */
static bool
QueryLocksRows(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		if (((Query *) node)->rowMarks != NIL)
			return true;
		return query_tree_walker((Query *) node, QueryLocksRows, context, 0);
	}
	return expression_tree_walker(node, QueryLocksRows, context);
}

/* expression_planner on each expression of a list */
static List *
PlanExprs(List *exprs)
{
	List	   *result = NIL;
	ListCell   *cell;

	foreach(cell, exprs)
		result = lappend(result, expression_planner(lfirst(cell)));
	return result;
}

int
RelationPosition(List *relations, Oid relid)
{
	int			position = 0;
	ListCell   *cell;

	foreach(cell, relations)
	{
		if (lfirst_oid(cell) == relid)
			return position;
		position++;
	}
	return -1;
}

/*
 * PlanRouterQuery plans a SELECT whose distributed tables are all pinned to
 * one shard (or that reads only reference tables) as a single task; NULL
 * when the query is not such a query or cannot be shipped as a whole.
 */
PlannedStmt *
PlanRouterQuery(Query *query)
{
	RouterContext context;
	RemoteSql	sql;
	DistributedJob job;
	List	   *customExprs = NIL;
	List	   *remoteTargetList = NIL;
	ListCell   *cell;

	memset(&context, 0, sizeof(context));
	context.colocationId = -1;
	AnalyzeRouterLevel(query, NULL, &context);
	if (context.failed)
		return NULL;

	InitRemoteSql(&sql);
	/* one task: its constants go as parameters, one prepared text for all */
	sql.constantsAsParams = true;
	DeparseRemoteSelect(&sql, query);
	FinishRemoteSql(&sql);
	if (sql.failed)
		return NULL;

	InitDistributedJob(&job, JOB_SELECT, sql.parts, sql.relations,
					   list_length(sql.paramExprs));
	job.anchor = OidIsValid(context.anchorRelid) ?
		RelationPosition(sql.relations, context.anchorRelid) : -1;
	if (context.pin != NULL)
	{
		job.pruneCount = 1;
		job.pruneKinds = list_make1_int(PRUNE_EQUAL);
		customExprs = list_make1(expression_planner((Expr *) context.pin));
	}
	customExprs = list_concat(customExprs, PlanExprs(sql.paramExprs));
	/* a text with parameters is reused: prepare it once per connection */
	job.usePrepared = (sql.paramExprs != NIL);
	job.locksRows = QueryLocksRows((Node *) query, NULL);
	job.emptyInputRow = ReturnsRowOfNoInput(query);

	foreach(cell, query->targetList)
	{
		if (!((TargetEntry *) lfirst(cell))->resjunk)
			remoteTargetList = lappend(remoteTargetList, lfirst(cell));
	}
	return MakeDistributedPlannedStmt(query, MakeDistributedScan(&job, customExprs),
									  remoteTargetList);
}

/* appends " RETURNING ..." for the target list of a DML statement */
static void
DeparseReturning(RemoteSql *sql, List *returningList)
{
	if (returningList == NIL)
		return;
	appendStringInfoString(&sql->buf, " RETURNING ");
	DeparseRemoteTargetList(sql, returningList, true);
}

/*
 * RejectUnshippable: an UPDATE or DELETE of a reference table that cannot
 * be shipped whole is an error, never a local write (one of a hash table
 * runs through the coordinator instead).
 */
static void
RejectUnshippable(RemoteSql *sql, Query *query, const char *command)
{
	RangeTblEntry *target = rt_fetch(query->resultRelation, query->rtable);

	if (!sql->failed)
		return;
	if (IsHashDistributedTable(target->relid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s of distributed table \"%s\" with global indexes and with %s is not supported",
						command, get_rel_name(target->relid), sql->failReason),
				 errdetail("The global indexes are maintained where rows change, so the statement "
						   "must run whole on the shards."),
				 errhint("Compute the values first (for example in a SELECT), then run "
						 "the %s with constants or parameters.", command)));
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s of reference table \"%s\" with %s is not supported",
					command, get_rel_name(target->relid), sql->failReason),
			 errdetail("A reference table has a copy on every node; the statement runs whole on "
					   "each copy, so every part of it must be one the nodes can evaluate the same way."),
			 errhint("Compute the values first (for example in a SELECT), then run "
					 "the %s with constants or parameters.", command)));
}

/*
 * DeparseModifyStatement deparses an UPDATE or DELETE of the target's shard
 * up to its RETURNING clause: SET (the distribution column cannot change),
 * the other FROM items (FROM / USING) and WHERE.  byLockedCtids (an UPDATE
 * of global index columns, see global_index_maintenance.c) restricts it to
 * the rows of the ctids in $1 and names their places shardext_old.
 */
static void
DeparseModifyStatement(RemoteSql *sql, Query *query, DistTableCacheEntry *entry,
					   bool byLockedCtids)
{
	RangeTblEntry *target = rt_fetch(query->resultRelation, query->rtable);
	List	   *fromItems = NIL;
	ListCell   *cell;
	char	   *alias;

	foreach(cell, query->jointree->fromlist)
	{
		Node	   *item = lfirst(cell);

		if (IsA(item, RangeTblRef) && ((RangeTblRef *) item)->rtindex == query->resultRelation)
			continue;
		fromItems = lappend(fromItems, item);
	}

	if (query->commandType == CMD_UPDATE)
	{
		bool		first = true;

		appendStringInfoString(&sql->buf, "UPDATE ONLY ");
		RemoteSqlAppendRelation(sql, target->relid);
		alias = RemoteSqlAlias(sql, 0, query->resultRelation);
		appendStringInfo(&sql->buf, " %s SET ", alias);
		foreach(cell, query->targetList)
		{
			TargetEntry *tle = lfirst(cell);

			if (tle->resjunk)
				continue;
			if (entry->method == DISTRIBUTE_BY_HASH && tle->resno == entry->distAttnum)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot update distribution column \"%s\" of distributed table \"%s\"",
								get_attname(target->relid, tle->resno, false),
								get_rel_name(target->relid)),
						 errhint("Delete the row and insert it with the new value instead.")));
			appendStringInfo(&sql->buf, "%s%s = ", first ? "" : ", ",
							 quote_identifier(get_attname(target->relid, tle->resno, false)));
			first = false;
			DeparseRemoteExpr(sql, (Node *) tle->expr);
		}
		if (fromItems != NIL || byLockedCtids)
			appendStringInfoString(&sql->buf, " FROM ");
	}
	else
	{
		appendStringInfoString(&sql->buf, "DELETE FROM ONLY ");
		RemoteSqlAppendRelation(sql, target->relid);
		alias = RemoteSqlAlias(sql, 0, query->resultRelation);
		appendStringInfo(&sql->buf, " %s", alias);
		if (fromItems != NIL)
			appendStringInfoString(&sql->buf, " USING ");
	}
	foreach(cell, fromItems)
	{
		if (cell != list_head(fromItems))
			appendStringInfoString(&sql->buf, ", ");
		DeparseRemoteFromItem(sql, lfirst(cell));
	}
	if (byLockedCtids)
		appendStringInfo(&sql->buf, "%sunnest($1::pg_catalog.tid[]) WITH ORDINALITY AS "
						 "shardext_old (old_ctid, old_position)", fromItems != NIL ? ", " : "");
	if (query->jointree->quals != NULL)
	{
		appendStringInfoString(&sql->buf, byLockedCtids ? " WHERE (" : " WHERE ");
		DeparseRemoteExpr(sql, FlattenAliasVars(query, query->jointree->quals));
		if (byLockedCtids)
			appendStringInfoString(&sql->buf, ") AND ");
	}
	else if (byLockedCtids)
		appendStringInfoString(&sql->buf, " WHERE ");
	if (byLockedCtids)
		appendStringInfo(&sql->buf, "%s.ctid OPERATOR(pg_catalog.=) shardext_old.old_ctid", alias);
}

/*
 * ModifyReadsColocated: do the other tables an UPDATE or DELETE reads
 * (relations: those of its SQL) let it run shard by shard?  They must be
 * on every node (reference tables), or co-located with the target and
 * joined to it on the distribution column, so that each shard's rows meet
 * all the rows they can match there.  A reference table's statement that
 * reads a distributed table is refused when raise is set.
 */
static bool
ModifyReadsColocated(Query *query, DistTableCacheEntry *entry, List *relations,
					 const char *command, bool raise)
{
	RangeTblEntry *target = rt_fetch(query->resultRelation, query->rtable);
	ListCell   *cell;

	if (entry->method == DISTRIBUTE_BY_HASH)
	{
		PushdownInfo info;

		memset(&info, 0, sizeof(info));
		if (AnalyzePushdownFrom(query, &info) && info.colocationId == entry->colocationId)
			return true;
		if (!raise)
			return false;
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s of distributed table \"%s\" with global indexes that reads other "
						"distributed tables this way is not supported",
						command, get_rel_name(target->relid)),
				 errdetail("The global indexes are maintained where rows change, so the other "
						   "tables must be co-located with it and joined on the distribution "
						   "column, or be reference tables."),
				 errhint("Read the other tables' values first, then run the %s with them.",
						 command)));
	}
	foreach(cell, relations)
	{
		if (lfirst_oid(cell) == target->relid || IsReferenceTable(lfirst_oid(cell)))
			continue;
		if (!raise)
			return false;
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s of reference table \"%s\" that reads distributed table \"%s\" is not supported",
						command, get_rel_name(target->relid), get_rel_name(lfirst_oid(cell))),
				 errdetail("A reference table has a copy on every node; the statement runs whole on "
						   "each copy, which cannot read another table's rows row by row."),
				 errhint("Read the other table's values in a subquery that does not refer to the "
						 "updated rows, or join only reference tables.")));
	}
	return true;
}

/*
 * PinnedToOneShard tells whether an UPDATE or DELETE of a hash-distributed
 * table pins its distribution column to one value (one shard).
 */
static bool
PinnedToOneShard(Query *query, DistTableCacheEntry *entry)
{
	List	   *values = NIL;
	List	   *kinds = NIL;

	FindPruningValues(query, query->resultRelation, entry, query->jointree->quals,
					  &values, &kinds);
	return list_member_int(kinds, PRUNE_EQUAL);
}

/*
 * DeparseShippedModify deparses an UPDATE or DELETE to run whole on the
 * target's shards; false when it cannot (something the shards cannot
 * evaluate, or tables that are not co-located with the target).
 */
static bool
DeparseShippedModify(Query *query, DistTableCacheEntry *entry, RemoteSql *sql,
					 const char *command)
{
	InitRemoteSql(sql);
	/* a write of one shard: constants as parameters, one prepared text for all */
	sql->constantsAsParams = PinnedToOneShard(query, entry);
	RemoteSqlPushQuery(sql, query);
	DeparseModifyStatement(sql, query, entry, false);
	DeparseReturning(sql, query->returningList);
	RemoteSqlPopQuery(sql);
	FinishRemoteSql(sql);
	if (!sql->failed && contain_volatile_functions((Node *) query->targetList))
		RemoteSqlFail(sql, "a volatile function");
	return !sql->failed && ModifyReadsColocated(query, entry, sql->relations, command, false);
}

/*
 * PlanDistributedModify plans UPDATE or DELETE on a distributed or
 * reference table: the statement runs on every shard its WHERE clause
 * leaves (every placement of them) when it can (other tables co-located or
 * reference tables, everything shippable), also once its uncorrelated
 * subqueries are values the coordinator computes first
 * (sublink_params.c); otherwise an UPDATE or DELETE of a hash-distributed
 * table runs through the coordinator (coordinator_modify.c).  A table with
 * global indexes keeps its writes on the shards, where their index
 * maintenance is (PlanModifyWithGlobalIndexes).
 */
PlannedStmt *
PlanDistributedModify(Query *query, int cursorOptions, ParamListInfo boundParams)
{
	RangeTblEntry *target = rt_fetch(query->resultRelation, query->rtable);
	DistTableCacheEntry *entry = GetDistTableCacheEntry(target->relid);
	const char *command = query->commandType == CMD_UPDATE ? "UPDATE" : "DELETE";
	Query	   *shipped = query;
	List	   *sublinkColumns = NIL;
	RemoteSql	sql;
	DistributedJob job;
	DistributedJob gindex;
	List	   *values;
	List	   *customExprs;
	CustomScan *scan;

	RejectIndexTableWrite(target->relid, command);
	memset(&gindex, 0, sizeof(gindex));
	PlanGlobalIndexModify(query, entry, &gindex);
	if (gindex.gindexMode != GINDEX_NONE)
		return PlanModifyWithGlobalIndexes(query, entry, &gindex, command);

	if (!DeparseShippedModify(query, entry, &sql, command))
	{
		Query	   *withParams = ExtractSublinkParams(query, &sublinkColumns);
		RemoteSql	paramSql;

		if (withParams != NULL && DeparseShippedModify(withParams, entry, &paramSql, command))
		{
			shipped = withParams;
			sql = paramSql;
		}
		else if (entry->method == DISTRIBUTE_BY_HASH)
			return PlanCoordinatorModify(query, cursorOptions, boundParams);
		else
		{
			RejectUnshippable(&sql, query, command);
			ModifyReadsColocated(query, entry, sql.relations, command, true);
			elog(ERROR, "no plan for a write to reference table \"%s\"",
				 get_rel_name(target->relid));
		}
	}
	values = InitModifyJob(&job, &sql, shipped, entry, query->returningList != NIL);
	job.paramsFromSubplan = (shipped != query);
	/* pruning values may be subquery values: their plan's columns */
	customExprs = list_concat(PlanExprs((List *) SubplanValueExprs((Node *) values)),
							  PlanExprs(sql.paramExprs));
	scan = MakeDistributedScan(&job, customExprs);
	if (shipped != query)
		return PlanWithSublinkParams(shipped, sublinkColumns, scan, query->returningList,
									 cursorOptions, boundParams);
	return MakeDistributedPlannedStmt(query, scan, query->returningList);
}

/*
 * InitModifyJob sets up the job of an UPDATE or DELETE deparsed into sql:
 * its shards are pruned by the conditions of query (the statement as
 * shipped) on the distribution column and on global indexes.  Returns the
 * pruning values, which the caller adds to the scan's expressions.
 */
static List *
InitModifyJob(DistributedJob *job, RemoteSql *sql, Query *query, DistTableCacheEntry *entry,
			  bool hasReturning)
{
	List	   *values = NIL;
	List	   *kinds = NIL;
	List	   *indexes = NIL;

	FindPruningValues(query, query->resultRelation, entry, query->jointree->quals,
					  &values, &kinds);
	FindGlobalIndexPruning(query, query->resultRelation, entry, query->jointree->quals,
						   &values, &kinds, &indexes);
	InitDistributedJob(job, JOB_MODIFY, sql->parts, sql->relations,
					   list_length(sql->paramExprs));
	job->anchor = entry->method == DISTRIBUTE_BY_HASH ? 0 : -1;
	job->pruneCount = list_length(values);
	job->pruneKinds = kinds;
	job->pruneIndexes = indexes;
	job->hasReturning = hasReturning;
	job->usePrepared = (values != NIL && sql->paramExprs != NIL);
	return values;
}

/*
 * PlanModifyWithGlobalIndexes plans an UPDATE or DELETE that maintains
 * global indexes (gindex says how): only whole on the shards, where the
 * changed rows' old and new values are seen (global_index_maintenance.c);
 * what cannot run there is refused.
 */
static PlannedStmt *
PlanModifyWithGlobalIndexes(Query *query, DistTableCacheEntry *entry, DistributedJob *gindex,
							const char *command)
{
	RemoteSql	sql;
	RemoteSql	lock;
	DistributedJob job;
	List	   *values;
	List	   *customExprs;
	bool		lockFirst = gindex->gindexMode == GINDEX_LOCK_THEN_UPDATE;

	InitRemoteSql(&sql);
	InitRemoteSql(&lock);
	if (lockFirst)
	{
		/* the locking SELECT's parameters come first ($1: the ctids) */
		lock.paramExprs = list_make1(LockedCtidsParam());
		DeparseLockingSelect(&lock, query, gindex);
		FinishRemoteSql(&lock);
		if (lock.failed)
			RemoteSqlFail(&sql, lock.failReason);
		sql.paramExprs = list_copy(lock.paramExprs);
		sql.relations = list_copy(lock.relations);
	}
	RemoteSqlPushQuery(&sql, query);
	DeparseModifyStatement(&sql, query, entry, lockFirst);
	DeparseReturning(&sql, query->returningList);
	AppendHiddenReturning(&sql, query, gindex);
	RemoteSqlPopQuery(&sql);
	FinishRemoteSql(&sql);
	if (!sql.failed && contain_volatile_functions((Node *) query->targetList))
		RemoteSqlFail(&sql, "a volatile function");
	RejectUnshippable(&sql, query, command);
	ModifyReadsColocated(query, entry, sql.relations, command, true);
	values = InitModifyJob(&job, &sql, query, entry, query->returningList != NIL);
	job.gindexMode = gindex->gindexMode;
	job.gindexRelids = gindex->gindexRelids;
	job.hiddenLead = gindex->hiddenLead;
	job.hiddenAttnums = gindex->hiddenAttnums;
	job.lockSqlParts = lock.parts;
	job.lockParamCount = list_length(lock.paramExprs);
	customExprs = list_concat(PlanExprs(values), PlanExprs(sql.paramExprs));

	return MakeDistributedPlannedStmt(query, MakeDistributedScan(&job, customExprs),
									  query->returningList);
}
