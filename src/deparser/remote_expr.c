/*-------------------------------------------------------------------------
 *
 * remote_expr.c
 *	  Deparsing of the less common expression kinds for the workers: CASE
 *	  with an operand, row constructors and row comparisons, field
 *	  selection, subscripts, array coercions, domain coercions, named
 *	  arguments, GROUPING(), multidimensional ARRAY constructors, window
 *	  frames, ordered-set aggregates and VALUES lists in FROM; and the
 *	  placeholders of values a distributed write computes first
 *	  (sublink_params.c).
 *
 * The rules are remote_sql.c's: only built-in immutable functions and
 * operators run on the workers, every type is printed schema-qualified, and
 * a construct that cannot be printed exactly makes the deparse fail (the
 * query then runs another way, see planner.h).
 *
 * Expression kinds that are deliberately not printed: XmlExpr (its result
 * depends on xmloption and xmlbinary, which remote sessions do not pin: a
 * column-free one is evaluated on the coordinator, one on columns makes the
 * query run on the coordinator), ConvertRowtypeExpr (inheritance only),
 * CurrentOfExpr (a cursor of the coordinator), NextValueExpr and
 * SetToDefault (evaluated by the coordinator where rows are written),
 * SubPlan and AlternativeSubPlan (planned subqueries never reach the
 * deparser except in pulled scan quals, which then stay local).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_aggregate.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "shardext/remote_sql.h"

static void DeparseFrameBound(RemoteSql *sql, int options, int offsetPreceding,
							  int offsetFollowing, int unbounded, int current,
							  Node *offset, const char *unboundedText);

/*
 * DeparseCaseExpr prints CASE WHEN ... THEN ... [ELSE ...] END.  CASE x
 * WHEN v THEN ... is printed as a searched CASE: the parser made each WHEN
 * "CaseTestExpr = v", and CaseTestExpr is printed as the operand (see
 * DeparseCaseTestExpr), so every comparison keeps its exact operator.  The
 * operand is then evaluated once per WHEN, which is only the same when it
 * has no volatile functions.
 */
void
DeparseCaseExpr(RemoteSql *sql, CaseExpr *c)
{
	StringInfo	buf = &sql->buf;
	ListCell   *cell;

	if (c->arg != NULL && contain_volatile_functions((Node *) c->arg))
	{
		RemoteSqlFail(sql, "a CASE whose operand has a volatile function");
		return;
	}
	appendStringInfoString(buf, "(CASE");
	foreach(cell, c->args)
	{
		CaseWhen   *when = lfirst(cell);

		appendStringInfoString(buf, " WHEN ");
		if (c->arg != NULL)
			sql->caseOperands = lcons(c->arg, sql->caseOperands);
		DeparseRemoteExpr(sql, (Node *) when->expr);
		if (c->arg != NULL)
			sql->caseOperands = list_delete_first(sql->caseOperands);
		appendStringInfoString(buf, " THEN ");
		DeparseRemoteExpr(sql, (Node *) when->result);
	}
	if (c->defresult != NULL)
	{
		appendStringInfoString(buf, " ELSE ");
		DeparseRemoteExpr(sql, (Node *) c->defresult);
	}
	appendStringInfoString(buf, " END)");
}

/* the placeholder of a CASE operand in a WHEN test: the operand itself */
void
DeparseCaseTestExpr(RemoteSql *sql, CaseTestExpr *test)
{
	Node	   *operand;

	if (sql->caseOperands == NIL)
	{
		RemoteSqlFail(sql, "a placeholder value outside its CASE");
		return;
	}
	operand = linitial(sql->caseOperands);
	if (exprType(operand) != test->typeId)
	{
		RemoteSqlFail(sql, "a CASE operand of another type");
		return;
	}
	/* the operand is printed outside its own CASE's operand context */
	sql->caseOperands = list_delete_first(sql->caseOperands);
	appendStringInfoChar(&sql->buf, '(');
	DeparseRemoteExpr(sql, operand);
	appendStringInfoChar(&sql->buf, ')');
	sql->caseOperands = lcons(operand, sql->caseOperands);
}

/* ROW(a, b, ...), cast to its named composite type when it has one */
void
DeparseRowExpr(RemoteSql *sql, RowExpr *row)
{
	StringInfo	buf = &sql->buf;

	if (row->row_typeid != RECORDOID)
	{
		TupleDesc	desc = lookup_rowtype_tupdesc(row->row_typeid, -1);
		bool		dropped = false;

		for (int i = 0; i < desc->natts; i++)
			dropped |= TupleDescAttr(desc, i)->attisdropped;
		ReleaseTupleDesc(desc);
		/* ROW(...)::type matches live columns only */
		if (dropped)
		{
			RemoteSqlFail(sql, "a row of a type with dropped columns");
			return;
		}
	}
	appendStringInfoString(buf, "(ROW(");
	RemoteSqlDeparseExprList(sql, row->args);
	appendStringInfoChar(buf, ')');
	if (row->row_typeid != RECORDOID)
		appendStringInfo(buf, "::%s", RemoteTypeName(row->row_typeid, -1));
	appendStringInfoChar(buf, ')');
}

/*
 * (a, b) < (c, d): the comparison of rows the parser made from one
 * operator name; every column's operator must be built-in and immutable.
 */
void
DeparseRowCompareExpr(RemoteSql *sql, RowCompareExpr *rc)
{
	StringInfo	buf = &sql->buf;
	ListCell   *cell;

	foreach(cell, rc->opnos)
	{
		Oid			opno = lfirst_oid(cell);

		if (!IsBuiltinObject(opno) ||
			func_volatile(get_opcode(opno)) != PROVOLATILE_IMMUTABLE)
		{
			RemoteSqlFail(sql, "a row comparison with an operator that only the coordinator can evaluate");
			return;
		}
	}
	appendStringInfoString(buf, "(ROW(");
	RemoteSqlDeparseExprList(sql, rc->largs);
	appendStringInfoString(buf, ") ");
	RemoteSqlDeparseOperator(sql, linitial_oid(rc->opnos));
	appendStringInfoString(buf, " ROW(");
	RemoteSqlDeparseExprList(sql, rc->rargs);
	appendStringInfoString(buf, "))");
}

/* (composite).field; the field is named by the composite type */
void
DeparseFieldSelect(RemoteSql *sql, FieldSelect *fs)
{
	Oid			argType = exprType((Node *) fs->arg);
	Oid			typrelid = get_typ_typrelid(getBaseType(argType));
	char	   *name;

	if (!OidIsValid(typrelid) || fs->fieldnum <= 0)
	{
		RemoteSqlFail(sql, "a field of an anonymous record");
		return;
	}
	name = get_attname(typrelid, fs->fieldnum, true);
	if (name == NULL)
	{
		RemoteSqlFail(sql, "a field of an anonymous record");
		return;
	}
	appendStringInfoString(&sql->buf, "((");
	DeparseRemoteExpr(sql, (Node *) fs->arg);
	appendStringInfo(&sql->buf, ").%s)", quote_identifier(name));
}

/*
 * container[i], container[lo:hi] (bounds may be omitted): array and other
 * built-in subscripting (jsonb).  Assignments (UPDATE SET a[i] = v) are
 * printed by the UPDATE deparser, not here.
 */
void
DeparseSubscriptingRef(RemoteSql *sql, SubscriptingRef *ref)
{
	StringInfo	buf = &sql->buf;
	if (ref->refassgnexpr != NULL)
	{
		RemoteSqlFail(sql, "an assignment to a subscript inside an expression");
		return;
	}
	if (!IsBuiltinObject(get_typsubscript(ref->refcontainertype, NULL)))
	{
		RemoteSqlFail(sql, "a user-defined subscript");
		return;
	}
	appendStringInfoString(buf, "((");
	DeparseRemoteExpr(sql, (Node *) ref->refexpr);
	appendStringInfoChar(buf, ')');
	RemoteSqlDeparseSubscripts(sql, ref);
	appendStringInfoChar(buf, ')');
}

/* the [..] parts of a subscript, with omitted slice bounds */
void
RemoteSqlDeparseSubscripts(RemoteSql *sql, SubscriptingRef *ref)
{
	StringInfo	buf = &sql->buf;
	ListCell   *lower = list_head(ref->reflowerindexpr);
	ListCell   *upper;

	foreach(upper, ref->refupperindexpr)
	{
		appendStringInfoChar(buf, '[');
		if (lower != NULL)
		{
			if (lfirst(lower) != NULL)
				DeparseRemoteExpr(sql, lfirst(lower));
			appendStringInfoChar(buf, ':');
			lower = lnext(ref->reflowerindexpr, lower);
		}
		if (lfirst(upper) != NULL)
			DeparseRemoteExpr(sql, lfirst(upper));
		appendStringInfoChar(buf, ']');
	}
}

/*
 * an array cast (text[] -> int[], int[] -> bigint[]): printed as a cast,
 * which the workers resolve to the same per-element cast when the result
 * type is built-in and the element cast is immutable.
 */
void
DeparseArrayCoerceExpr(RemoteSql *sql, ArrayCoerceExpr *ac)
{
	if (!IsBuiltinObject(ac->resulttype) ||
		!IsBuiltinObject(exprType((Node *) ac->arg)) ||
		contain_mutable_functions((Node *) ac->elemexpr) ||
		ExprNeedsCoordinator((Node *) ac->elemexpr))
	{
		RemoteSqlFail(sql, "an array cast that depends on session settings");
		return;
	}
	appendStringInfoString(&sql->buf, "((");
	DeparseRemoteExpr(sql, (Node *) ac->arg);
	appendStringInfo(&sql->buf, ")::%s)", RemoteTypeName(ac->resulttype, ac->resulttypmod));
}

/*
 * a value checked against a domain: printed as a cast to the domain, which
 * exists on the workers whenever a shard has a column of it.
 */
void
DeparseCoerceToDomain(RemoteSql *sql, CoerceToDomain *cd)
{
	appendStringInfoString(&sql->buf, "((");
	DeparseRemoteExpr(sql, (Node *) cd->arg);
	appendStringInfo(&sql->buf, ")::%s)", RemoteTypeName(cd->resulttype, cd->resulttypmod));
}

/* f(name => value) */
void
DeparseNamedArgExpr(RemoteSql *sql, NamedArgExpr *arg)
{
	appendStringInfo(&sql->buf, "%s => ", quote_identifier(arg->name));
	DeparseRemoteExpr(sql, (Node *) arg->arg);
}

/* GROUPING(a, b) of a grouped query that runs whole on a worker */
void
DeparseGroupingFunc(RemoteSql *sql, GroupingFunc *gf)
{
	if (gf->agglevelsup != 0)
	{
		RemoteSqlFail(sql, "GROUPING() of an outer query");
		return;
	}
	appendStringInfoString(&sql->buf, "GROUPING(");
	RemoteSqlDeparseExprList(sql, gf->args);
	appendStringInfoChar(&sql->buf, ')');
}

/*
 * ARRAY[ARRAY[1, 2], ARRAY[3, 4]]: the sub-arrays (array constructors or
 * array values) are printed as typed arrays, which the workers stack into
 * dimensions.
 */
void
DeparseMultiDimArray(RemoteSql *sql, ArrayExpr *a)
{
	appendStringInfoString(&sql->buf, "ARRAY[");
	RemoteSqlDeparseExprList(sql, a->elements);
	appendStringInfo(&sql->buf, "]::%s", RemoteTypeName(a->array_typeid, -1));
}

/*
 * DeparseWindowFrame prints the frame clause of a window (ROWS / RANGE /
 * GROUPS, its bounds and EXCLUDE), nothing for the default frame.
 */
void
DeparseWindowFrame(RemoteSql *sql, WindowClause *clause)
{
	StringInfo	buf = &sql->buf;
	int			options = clause->frameOptions;

	if (!(options & FRAMEOPTION_NONDEFAULT))
		return;
	if (options & FRAMEOPTION_RANGE)
		appendStringInfoString(buf, " RANGE ");
	else if (options & FRAMEOPTION_ROWS)
		appendStringInfoString(buf, " ROWS ");
	else if (options & FRAMEOPTION_GROUPS)
		appendStringInfoString(buf, " GROUPS ");
	else
	{
		RemoteSqlFail(sql, "a window frame shardext cannot print");
		return;
	}
	if (options & FRAMEOPTION_BETWEEN)
		appendStringInfoString(buf, "BETWEEN ");
	DeparseFrameBound(sql, options, FRAMEOPTION_START_OFFSET_PRECEDING,
					  FRAMEOPTION_START_OFFSET_FOLLOWING,
					  FRAMEOPTION_START_UNBOUNDED_PRECEDING, FRAMEOPTION_START_CURRENT_ROW,
					  clause->startOffset, "UNBOUNDED PRECEDING");
	if (options & FRAMEOPTION_BETWEEN)
	{
		appendStringInfoString(buf, " AND ");
		DeparseFrameBound(sql, options, FRAMEOPTION_END_OFFSET_PRECEDING,
						  FRAMEOPTION_END_OFFSET_FOLLOWING,
						  FRAMEOPTION_END_UNBOUNDED_FOLLOWING, FRAMEOPTION_END_CURRENT_ROW,
						  clause->endOffset, "UNBOUNDED FOLLOWING");
	}
	if (options & FRAMEOPTION_EXCLUDE_CURRENT_ROW)
		appendStringInfoString(buf, " EXCLUDE CURRENT ROW");
	else if (options & FRAMEOPTION_EXCLUDE_GROUP)
		appendStringInfoString(buf, " EXCLUDE GROUP");
	else if (options & FRAMEOPTION_EXCLUDE_TIES)
		appendStringInfoString(buf, " EXCLUDE TIES");
}

/* one bound of a frame */
static void
DeparseFrameBound(RemoteSql *sql, int options, int offsetPreceding, int offsetFollowing,
				  int unbounded, int current, Node *offset, const char *unboundedText)
{
	StringInfo	buf = &sql->buf;

	if (options & unbounded)
		appendStringInfoString(buf, unboundedText);
	else if (options & current)
		appendStringInfoString(buf, "CURRENT ROW");
	else if (options & (offsetPreceding | offsetFollowing))
	{
		DeparseRemoteExpr(sql, offset);
		appendStringInfoString(buf, (options & offsetPreceding) ? " PRECEDING" : " FOLLOWING");
	}
	else
		RemoteSqlFail(sql, "a window frame shardext cannot print");
}

/*
 * percentile_cont(0.5) WITHIN GROUP (ORDER BY x) and the hypothetical-set
 * aggregates: the direct arguments, then the ordered ones.
 */
void
DeparseOrderedSetAggregate(RemoteSql *sql, Aggref *aggref)
{
	StringInfo	buf = &sql->buf;

	appendStringInfo(buf, "%s(", RemoteSqlFunctionName(aggref->aggfnoid));
	RemoteSqlDeparseExprList(sql, aggref->aggdirectargs);
	appendStringInfoString(buf, ") WITHIN GROUP (ORDER BY ");
	RemoteSqlDeparseSortClause(sql, aggref->aggorder, aggref->args);
	appendStringInfoChar(buf, ')');
	if (aggref->aggfilter != NULL)
	{
		appendStringInfoString(buf, " FILTER (WHERE ");
		DeparseRemoteExpr(sql, (Node *) aggref->aggfilter);
		appendStringInfoChar(buf, ')');
	}
}

/*
 * (VALUES (...), (...)) alias(c1, c2, ...) in FROM; its columns are then
 * printed as alias.cN (see DeparseVar).  The values are typed like every
 * other expression, so the workers infer the same column types.
 */
void
DeparseValuesFromItem(RemoteSql *sql, RangeTblEntry *rte, Index rtindex)
{
	StringInfo	buf = &sql->buf;
	ListCell   *rowCell;
	int			ncolumns = list_length(rte->coltypes);

	appendStringInfoString(buf, "(VALUES ");
	foreach(rowCell, rte->values_lists)
	{
		List	   *row = lfirst(rowCell);
		ListCell   *cell;
		int			column = 0;

		if (rowCell != list_head(rte->values_lists))
			appendStringInfoString(buf, ", ");
		appendStringInfoChar(buf, '(');
		foreach(cell, row)
		{
			Node	   *value = lfirst(cell);

			if (column > 0)
				appendStringInfoString(buf, ", ");
			/* every row typed, so that NULLs and literals agree with the column */
			appendStringInfoChar(buf, '(');
			DeparseRemoteExpr(sql, value);
			appendStringInfo(buf, ")::%s",
							 RemoteTypeName(list_nth_oid(rte->coltypes, column),
											list_nth_int(rte->coltypmods, column)));
			column++;
		}
		appendStringInfoChar(buf, ')');
	}
	appendStringInfo(buf, ") %s(", RemoteSqlAlias(sql, 0, rtindex));
	for (int i = 0; i < ncolumns; i++)
		appendStringInfo(buf, "%sc%d", i > 0 ? ", " : "", i + 1);
	appendStringInfoChar(buf, ')');
}

/*
 * MakeSubplanValueParam makes the placeholder of column `column` of the
 * one-row plan under a distributed write (sublink_params.c): a PARAM_EXEC
 * Param with a negative id, which PostgreSQL never uses.
 */
Param *
MakeSubplanValueParam(int column, Oid type, int32 typmod, Oid collation)
{
	Param	   *param = makeNode(Param);

	param->paramkind = PARAM_EXEC;
	param->paramid = -column;
	param->paramtype = type;
	param->paramtypmod = typmod;
	param->paramcollid = collation;
	param->location = -1;
	return param;
}

bool
IsSubplanValueParam(Node *node)
{
	return node != NULL && IsA(node, Param) && ((Param *) node)->paramkind == PARAM_EXEC &&
		((Param *) node)->paramid < 0;
}

/*
 * SubplanValueExpr is what the executor evaluates for a placeholder: the
 * column of the one-row plan's row (the scan's outer tuple then).
 */
Node *
SubplanValueExpr(Node *node)
{
	Param	   *param = (Param *) node;

	return (Node *) makeVar(OUTER_VAR, -param->paramid, param->paramtype, param->paramtypmod,
							param->paramcollid, 0);
}

static Node *
SubplanValuesMutator(Node *node, void *context)
{
	if (node == NULL)
		return NULL;
	if (IsSubplanValueParam(node))
		return SubplanValueExpr(node);
	return expression_tree_mutator(node, SubplanValuesMutator, context);
}

/* SubplanValueExprs replaces every placeholder of an expression (see above) */
Node *
SubplanValueExprs(Node *node)
{
	return SubplanValuesMutator(node, NULL);
}
