/*-------------------------------------------------------------------------
 *
 * remote_sql.c
 *	  Deparses query trees into SQL templates that run on shards (see
 *	  remote_sql.h for the template format).
 *
 * Like postgres_fdw's deparse.c this covers exactly the constructs shardext
 * ships: a node it does not know makes the deparse fail, and the query is
 * planned another way.  The output does not depend on the local session:
 * every function, operator, type and collation is schema-qualified, every
 * identifier and literal quoted, every constant typed ('...'::type) and
 * printed under the settings remote sessions use (ISO dates, full float
 * precision).  Only built-in immutable functions and operators run on the
 * workers; a column-free expression that uses anything else (now(), a
 * user-defined function, a parameter) is evaluated once on the coordinator
 * and sent as a parameter; a volatile function or a user-defined function
 * applied to columns cannot be shipped (see shippable.c).
 *
 * Table references are printed with aliases q<level>_<rtindex>, so columns
 * never need the (shard) table name; subqueries in FROM get column aliases
 * c1, c2 ... so their columns need no names either.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "shardext/deparser.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/remote_sql.h"
#include "shardext/shardext.h"

typedef struct DeparseLevel
{
	Query	   *query;
	int			id;
} DeparseLevel;

static void FlushText(RemoteSql *sql);
static void DeparseVar(RemoteSql *sql, Var *var);
static void DeparseConst(RemoteSql *sql, Const *constant, bool withType);
static bool SendConstAsParam(RemoteSql *sql, Const *constant);
static void DeparseParamExpr(RemoteSql *sql, Node *expr);
static void DeparseFuncExpr(RemoteSql *sql, FuncExpr *expr);
static void DeparseOpExpr(RemoteSql *sql, OpExpr *expr);
static void DeparseDistinctOrNullIf(RemoteSql *sql, OpExpr *op);
static void DeparseScalarArrayOpExpr(RemoteSql *sql, ScalarArrayOpExpr *op);
static void DeparseBoolExpr(RemoteSql *sql, BoolExpr *b);
static void DeparseTestExpr(RemoteSql *sql, Node *node);
static void DeparseCoercion(RemoteSql *sql, Node *node);
static void DeparseAggref(RemoteSql *sql, Aggref *aggref);
static void DeparseWindowFunc(RemoteSql *sql, WindowFunc *wfunc);
static void DeparseSubLink(RemoteSql *sql, SubLink *sublink);
static void DeparseSetOperationQuery(RemoteSql *sql, Query *query);
static void DeparseRowMarks(RemoteSql *sql, Query *query);
static void DeparseSetOperand(RemoteSql *sql, Query *query, Node *node);
static bool IsGucSensitiveType(Oid typid);
static void DeparseSortItems(RemoteSql *sql, List *sortClause, List *targetList, int positions);
static void DeparseRepartitionRead(RemoteSql *sql, RangeTblEntry *rte, Index rtindex);

/*
 * While set, a Var of a shard's ctid is printed (the coordinator's UPDATE,
 * DELETE and MERGE read the rows they change with it; see
 * coordinator_modify.c); user queries never see system columns.
 */
static bool DeparseShardCtid = false;

void
SetDeparseShardCtid(bool allow)
{
	DeparseShardCtid = allow;
}

void
InitRemoteSql(RemoteSql *sql)
{
	memset(sql, 0, sizeof(RemoteSql));
	initStringInfo(&sql->buf);
}

/*
 * FinishRemoteSql moves the remaining text into parts and restores the
 * session settings the deparse may have changed.  Call it also when the
 * deparse failed.
 */
void
FinishRemoteSql(RemoteSql *sql)
{
	FlushText(sql);
	if (sql->gucNestLevel > 0)
	{
		EndSafeDeparse(sql->gucNestLevel);
		sql->gucNestLevel = 0;
	}
}

void
RemoteSqlFail(RemoteSql *sql, const char *reason)
{
	if (!sql->failed)
	{
		sql->failed = true;
		sql->failReason = reason;
	}
}

static void
FlushText(RemoteSql *sql)
{
	if (sql->buf.len > 0)
	{
		sql->parts = lappend(sql->parts, makeString(pstrdup(sql->buf.data)));
		resetStringInfo(&sql->buf);
	}
}

/*
 * RemoteSqlAppendRelation emits the gap for the shard of a distributed or
 * reference table; a local table cannot be shipped.
 */
void
RemoteSqlAppendRelation(RemoteSql *sql, Oid relid)
{
	int			position = 0;
	ListCell   *cell;

	if (!IsDistributedTable(relid))
	{
		RemoteSqlFail(sql, "a local table");
		return;
	}
	foreach(cell, sql->relations)
	{
		if (lfirst_oid(cell) == relid)
			break;
		position++;
	}
	if (cell == NULL)
		sql->relations = lappend_oid(sql->relations, relid);
	FlushText(sql);
	sql->parts = lappend(sql->parts, makeInteger(position));
}

void
RemoteSqlPushQuery(RemoteSql *sql, Query *query)
{
	DeparseLevel *level = palloc(sizeof(DeparseLevel));

	level->query = query;
	level->id = ++sql->nextLevelId;
	sql->levels = lcons(level, sql->levels);
}

void
RemoteSqlPopQuery(RemoteSql *sql)
{
	sql->levels = list_delete_first(sql->levels);
}

/*
 * The alias of a range table entry levelsUp query levels out: "q<level>_<n>"
 * where n is the entry's position not counting the RTE_GROUP entries before
 * it (18 adds one to a query with GROUP BY; it names nothing), so that the
 * entries a planner appends after it are named alike on every version.
 */
char *
RemoteSqlAlias(RemoteSql *sql, int levelsUp, Index rtindex)
{
	DeparseLevel *level;
	Index		number = rtindex;

	if (levelsUp >= list_length(sql->levels))
		elog(ERROR, "variable level %d out of range", levelsUp);
	level = list_nth(sql->levels, levelsUp);
#if PG_VERSION_NUM >= 180000
	foreach_node(RangeTblEntry, rte, level->query->rtable)
	{
		if ((Index) foreach_current_index(rte) + 1 >= rtindex)
			break;
		if (RteIsGroup(rte))
			number--;
	}
#endif
	return psprintf("q%d_%u", level->id, number);
}

static Query *
LevelQuery(RemoteSql *sql, int levelsUp)
{
	return ((DeparseLevel *) list_nth(sql->levels, levelsUp))->query;
}

/*
 * RemoteSqlAppendShardConstraintName emits the gap for the name that an
 * index-backed constraint of a table has on its shard (a List part: the
 * table's position and the constraint's name).
 */
void
RemoteSqlAppendShardConstraintName(RemoteSql *sql, Oid relid, const char *name)
{
	int			position;

	RemoteSqlAppendRelation(sql, relid);
	if (sql->failed)
		return;
	/* the relation's gap just added tells its position; the name replaces it */
	position = intVal(llast(sql->parts));
	llast(sql->parts) = list_make2(makeInteger(position), makeString(pstrdup(name)));
}

/*
 * BuildTaskSql pastes shard names (quoted, qualified) into a template.
 */
char *
BuildTaskSql(List *parts, List *shardNames)
{
	return BuildShardTaskSql(parts, shardNames, NIL);
}

/*
 * BuildShardTaskSql is BuildTaskSql that also fills in the shards'
 * constraint names, from the shards' ids (in the order of shardNames).
 */
char *
BuildShardTaskSql(List *parts, List *shardNames, List *shardIds)
{
	StringInfoData buf;
	ListCell   *cell;

	initStringInfo(&buf);
	foreach(cell, parts)
	{
		Node	   *part = lfirst(cell);

		if (IsA(part, String))
			appendStringInfoString(&buf, strVal(part));
		else if (IsA(part, List))
		{
			int			position = intVal(linitial((List *) part));
			int64	   *shardId;

			if (position >= list_length(shardIds))
				elog(ERROR, "no shard id for a constraint name");
			shardId = list_nth(shardIds, position);
			appendStringInfoString(&buf,
								   quote_identifier(ShardConstraintName(strVal(lsecond((List *) part)),
																		true, *shardId)));
		}
		else
			appendStringInfoString(&buf, list_nth(shardNames, intVal(part)));
	}
	return buf.data;
}

/* a schema-qualified type name with its modifier, for casts */
char *
RemoteTypeName(Oid typid, int32 typmod)
{
	return format_type_extended(typid, typmod,
								FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY);
}

/*
 * QualifiedEqualityOperator returns OPERATOR(schema.=) of the equality of a
 * type's default btree operator class: the remote session's search_path
 * finds only pg_catalog's operators, and a type of an extension brings its
 * own.
 */
char *
QualifiedEqualityOperator(Oid type)
{
	Oid			opno = lookup_type_cache(type, TYPECACHE_EQ_OPR)->eq_opr;
	HeapTuple	tuple;
	Form_pg_operator operator;
	char	   *result;

	if (!OidIsValid(opno))
		elog(ERROR, "type %u has no equality operator", type);
	tuple = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	operator = (Form_pg_operator) GETSTRUCT(tuple);
	result = psprintf("OPERATOR(%s.%s)",
					  quote_identifier(get_namespace_name(operator->oprnamespace)),
					  NameStr(operator->oprname));
	ReleaseSysCache(tuple);
	return result;
}

char *
RemoteSqlFunctionName(Oid funcid)
{
	return quote_qualified_identifier(get_namespace_name(get_func_namespace(funcid)),
									  get_func_name(funcid));
}

/* types whose text form depends on DateStyle and similar settings */
static bool
IsGucSensitiveType(Oid typid)
{
	switch (typid)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case NUMERICOID:
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case NAMEOID:
		case BOOLOID:
		case OIDOID:
		case UUIDOID:
		case CHAROID:
			return false;
		default:
			return true;
	}
}

/*
 * DeparseRemoteExpr appends an expression of the innermost pushed query.
 */
void
DeparseRemoteExpr(RemoteSql *sql, Node *node)
{
	StringInfo	buf = &sql->buf;

	if (node == NULL || sql->failed)
		return;

	/* a value of the write's one-row subplan (sublink_params.c): a parameter */
	if (IsSubplanValueParam(node))
	{
		DeparseParamExpr(sql, SubplanValueExpr(node));
		return;
	}

	/* column-free parts the workers cannot evaluate: the coordinator does */
	if (!IsA(node, Const) && !IsA(node, List) && !IsA(node, Var) &&
		ExprNeedsCoordinator(node) &&
		!ExprNeedsRows(node, sql->allowExecParams))
	{
		if (contain_volatile_functions(node))
		{
			RemoteSqlFail(sql, "a volatile function");
			return;
		}
		DeparseParamExpr(sql, node);
		return;
	}

	switch (nodeTag(node))
	{
		case T_Var:
			DeparseVar(sql, (Var *) node);
			break;
		case T_Const:
			if (SendConstAsParam(sql, (Const *) node))
				DeparseParamExpr(sql, node);
			else
				DeparseConst(sql, (Const *) node, true);
			break;
		case T_FuncExpr:
			DeparseFuncExpr(sql, (FuncExpr *) node);
			break;
		case T_OpExpr:
			DeparseOpExpr(sql, (OpExpr *) node);
			break;
		case T_DistinctExpr:
		case T_NullIfExpr:
			DeparseDistinctOrNullIf(sql, (OpExpr *) node);
			break;
		case T_ScalarArrayOpExpr:
			DeparseScalarArrayOpExpr(sql, (ScalarArrayOpExpr *) node);
			break;
		case T_BoolExpr:
			DeparseBoolExpr(sql, (BoolExpr *) node);
			break;
		case T_NullTest:
		case T_BooleanTest:
			DeparseTestExpr(sql, node);
			break;
		case T_RelabelType:
		case T_CoerceViaIO:
		case T_CollateExpr:
			DeparseCoercion(sql, node);
			break;
		case T_CaseExpr:
			DeparseCaseExpr(sql, (CaseExpr *) node);
			break;
		case T_CaseTestExpr:
			DeparseCaseTestExpr(sql, (CaseTestExpr *) node);
			break;
		case T_RowExpr:
			DeparseRowExpr(sql, (RowExpr *) node);
			break;
		case T_RowCompareExpr:
			DeparseRowCompareExpr(sql, (RowCompareExpr *) node);
			break;
		case T_FieldSelect:
			DeparseFieldSelect(sql, (FieldSelect *) node);
			break;
		case T_SubscriptingRef:
			DeparseSubscriptingRef(sql, (SubscriptingRef *) node);
			break;
		case T_ArrayCoerceExpr:
			DeparseArrayCoerceExpr(sql, (ArrayCoerceExpr *) node);
			break;
		case T_CoerceToDomain:
			DeparseCoerceToDomain(sql, (CoerceToDomain *) node);
			break;
		case T_NamedArgExpr:
			DeparseNamedArgExpr(sql, (NamedArgExpr *) node);
			break;
		case T_GroupingFunc:
			DeparseGroupingFunc(sql, (GroupingFunc *) node);
			break;
		case T_CurrentOfExpr:
			RemoteSqlFail(sql, "WHERE CURRENT OF");
			break;
		case T_CoalesceExpr:
			appendStringInfoString(buf, "COALESCE(");
			RemoteSqlDeparseExprList(sql, ((CoalesceExpr *) node)->args);
			appendStringInfoChar(buf, ')');
			break;
		case T_MinMaxExpr:
			{
				MinMaxExpr *m = (MinMaxExpr *) node;

				appendStringInfoString(buf, m->op == IS_GREATEST ? "GREATEST(" : "LEAST(");
				RemoteSqlDeparseExprList(sql, m->args);
				appendStringInfoChar(buf, ')');
				break;
			}
		case T_ArrayExpr:
			{
				ArrayExpr  *a = (ArrayExpr *) node;

				if (a->multidims)
				{
					DeparseMultiDimArray(sql, a);
					break;
				}
				appendStringInfoString(buf, "ARRAY[");
				RemoteSqlDeparseExprList(sql, a->elements);
				appendStringInfo(buf, "]::%s", RemoteTypeName(a->array_typeid, -1));
				break;
			}
		case T_Aggref:
			DeparseAggref(sql, (Aggref *) node);
			break;
		case T_WindowFunc:
			DeparseWindowFunc(sql, (WindowFunc *) node);
			break;
		case T_SubLink:
			DeparseSubLink(sql, (SubLink *) node);
			break;
		case T_Param:
			DeparseParamExpr(sql, node);
			break;
		case T_List:
			RemoteSqlDeparseExprList(sql, (List *) node);
			break;
		default:
			RemoteSqlFail(sql, "an expression shardext cannot send to the workers");
			break;
	}
}

/* x IS DISTINCT FROM y, NULLIF(x, y): built-in operators only */
static void
DeparseDistinctOrNullIf(RemoteSql *sql, OpExpr *op)
{
	StringInfo	buf = &sql->buf;

	if (!IsBuiltinObject(op->opno))
	{
		RemoteSqlFail(sql, "a user-defined operator");
		return;
	}
	if (IsA(op, NullIfExpr))
	{
		appendStringInfoString(buf, "NULLIF(");
		RemoteSqlDeparseExprList(sql, op->args);
		appendStringInfoChar(buf, ')');
		return;
	}
	appendStringInfoChar(buf, '(');
	DeparseRemoteExpr(sql, linitial(op->args));
	appendStringInfoString(buf, " IS DISTINCT FROM ");
	DeparseRemoteExpr(sql, lsecond(op->args));
	appendStringInfoChar(buf, ')');
}

/* x op ANY/ALL (array): built-in immutable operators only */
static void
DeparseScalarArrayOpExpr(RemoteSql *sql, ScalarArrayOpExpr *op)
{
	StringInfo	buf = &sql->buf;

	if (!IsBuiltinObject(op->opno) || func_volatile(get_opcode(op->opno)) != PROVOLATILE_IMMUTABLE)
	{
		RemoteSqlFail(sql, "a user-defined operator");
		return;
	}
	appendStringInfoChar(buf, '(');
	DeparseRemoteExpr(sql, linitial(op->args));
	appendStringInfoChar(buf, ' ');
	RemoteSqlDeparseOperator(sql, op->opno);
	appendStringInfo(buf, " %s (", op->useOr ? "ANY" : "ALL");
	DeparseRemoteExpr(sql, lsecond(op->args));
	appendStringInfoString(buf, "))");
}

static void
DeparseBoolExpr(RemoteSql *sql, BoolExpr *b)
{
	StringInfo	buf = &sql->buf;
	ListCell   *cell;
	const char *op = b->boolop == AND_EXPR ? " AND " : " OR ";

	if (b->boolop == NOT_EXPR)
	{
		appendStringInfoString(buf, "(NOT ");
		DeparseRemoteExpr(sql, linitial(b->args));
		appendStringInfoChar(buf, ')');
		return;
	}
	appendStringInfoChar(buf, '(');
	foreach(cell, b->args)
	{
		if (cell != list_head(b->args))
			appendStringInfoString(buf, op);
		DeparseRemoteExpr(sql, lfirst(cell));
	}
	appendStringInfoChar(buf, ')');
}

/* IS [NOT] NULL, IS [NOT] TRUE/FALSE/UNKNOWN */
static void
DeparseTestExpr(RemoteSql *sql, Node *node)
{
	StringInfo	buf = &sql->buf;

	appendStringInfoChar(buf, '(');
	if (IsA(node, NullTest))
	{
		NullTest   *test = (NullTest *) node;

		DeparseRemoteExpr(sql, (Node *) test->arg);
		appendStringInfoString(buf, test->nulltesttype == IS_NULL ?
							   " IS NULL)" : " IS NOT NULL)");
	}
	else
	{
		BooleanTest *test = (BooleanTest *) node;
		static const char *const names[] = {
			" IS TRUE)", " IS NOT TRUE)", " IS FALSE)", " IS NOT FALSE)",
			" IS UNKNOWN)", " IS NOT UNKNOWN)"
		};

		DeparseRemoteExpr(sql, (Node *) test->arg);
		appendStringInfoString(buf, names[test->booltesttype]);
	}
}

/*
 * DeparseCoercion: a binary-compatible relabeling, a cast through text, or
 * a COLLATE clause.  Casts through text whose result depends on session
 * settings, and user-defined collations, cannot be shipped.
 */
static void
DeparseCoercion(RemoteSql *sql, Node *node)
{
	StringInfo	buf = &sql->buf;

	if (IsA(node, RelabelType))
	{
		RelabelType *r = (RelabelType *) node;

		if (r->relabelformat == COERCE_IMPLICIT_CAST)
			DeparseRemoteExpr(sql, (Node *) r->arg);
		else
		{
			appendStringInfoChar(buf, '(');
			DeparseRemoteExpr(sql, (Node *) r->arg);
			appendStringInfo(buf, ")::%s", RemoteTypeName(r->resulttype, r->resulttypmod));
		}
	}
	else if (IsA(node, CoerceViaIO))
	{
		CoerceViaIO *c = (CoerceViaIO *) node;

		/* the I/O functions of built-in types are immutable unless DateStyle-like */
		if (!IsBuiltinObject(c->resulttype) || !IsBuiltinObject(exprType((Node *) c->arg)) ||
			contain_mutable_functions(node))
		{
			RemoteSqlFail(sql, "a cast that depends on session settings");
			return;
		}
		appendStringInfoChar(buf, '(');
		DeparseRemoteExpr(sql, (Node *) c->arg);
		appendStringInfo(buf, ")::%s", RemoteTypeName(c->resulttype, -1));
	}
	else
	{
		CollateExpr *c = (CollateExpr *) node;

		if (!IsBuiltinObject(c->collOid))
		{
			RemoteSqlFail(sql, "a user-defined collation");
			return;
		}
		appendStringInfoChar(buf, '(');
		DeparseRemoteExpr(sql, (Node *) c->arg);
		appendStringInfo(buf, " COLLATE %s)", generate_collation_name(c->collOid));
	}
}

void
RemoteSqlDeparseExprList(RemoteSql *sql, List *exprs)
{
	ListCell   *cell;

	foreach(cell, exprs)
	{
		if (cell != list_head(exprs))
			appendStringInfoString(&sql->buf, ", ");
		DeparseRemoteExpr(sql, lfirst(cell));
	}
}

static void
DeparseVar(RemoteSql *sql, Var *var)
{
	Query	   *query;
	RangeTblEntry *rte;
	char	   *alias;

	if (var->varlevelsup >= list_length(sql->levels))
	{
		RemoteSqlFail(sql, "a reference to an outer query");
		return;
	}
	query = LevelQuery(sql, var->varlevelsup);
	if (var->varno < 1 || var->varno > list_length(query->rtable))
	{
		RemoteSqlFail(sql, "a column of a special relation");
		return;
	}
	rte = rt_fetch(var->varno, query->rtable);
	alias = RemoteSqlAlias(sql, var->varlevelsup, var->varno);
	if (sql->exclRelIndex > 0 && var->varno == sql->exclRelIndex &&
		var->varlevelsup == list_length(sql->levels) - 1)
		alias = "excluded";

	if (var->varattno == SelfItemPointerAttributeNumber && DeparseShardCtid &&
		rte->rtekind == RTE_RELATION)
	{
		appendStringInfo(&sql->buf, "%s.ctid", alias);
		return;
	}
	if (var->varattno <= 0)
	{
		RemoteSqlFail(sql, var->varattno == 0 ? "a whole-row reference" : "a system column");
		return;
	}

	if (rte->rtekind == RTE_RELATION)
	{
		char	   *name = get_attname(rte->relid, var->varattno, false);

		appendStringInfo(&sql->buf, "%s.%s", alias, quote_identifier(name));
	}
	else if (rte->rtekind == RTE_SUBQUERY || rte->rtekind == RTE_VALUES ||
			 RepartitionReadUnit(rte) > 0)
		appendStringInfo(&sql->buf, "%s.c%d", alias, var->varattno);
	else
		RemoteSqlFail(sql, "a column of a join or function");
}

/*
 * DeparseConst prints a constant as a typed literal.  Text forms that
 * depend on DateStyle and similar settings are printed under the settings
 * of remote sessions.
 */
static void
DeparseConst(RemoteSql *sql, Const *constant, bool withType)
{
	Oid			outputFunction;
	bool		isVarlena;
	char	   *text;

	if (constant->constisnull)
	{
		appendStringInfo(&sql->buf, "NULL::%s",
						 RemoteTypeName(constant->consttype, constant->consttypmod));
		return;
	}
	if (constant->consttype == BOOLOID)
	{
		appendStringInfoString(&sql->buf,
							   DatumGetBool(constant->constvalue) ? "true" : "false");
		return;
	}
	if (IsGucSensitiveType(constant->consttype) && sql->gucNestLevel == 0)
		sql->gucNestLevel = BeginSafeDeparse();

	getTypeOutputInfo(constant->consttype, &outputFunction, &isVarlena);
	text = OidOutputFunctionCall(outputFunction, constant->constvalue);
	appendStringInfoString(&sql->buf, quote_literal_cstr(text));
	if (withType)
		appendStringInfo(&sql->buf, "::%s",
						 RemoteTypeName(constant->consttype, constant->consttypmod));
}

/* at most this many parameters come from constants (see SendConstAsParam) */
#define MAX_CONSTANT_PARAMS 32

/*
 * SendConstAsParam tells whether a constant goes to the workers as a
 * parameter rather than a literal (RemoteSql.constantsAsParams): only
 * non-NULL values of built-in types whose binary form means the same on
 * every node (not reg* types, which are local OIDs) with the default
 * collation, and not booleans (which decide partial indexes and are
 * few).  Past MAX_CONSTANT_PARAMS parameters (long IN lists) further
 * constants stay literals: such texts rarely repeat.
 */
static bool
SendConstAsParam(RemoteSql *sql, Const *constant)
{
	if (!sql->constantsAsParams || constant->constisnull ||
		(OidIsValid(constant->constcollid) && constant->constcollid != DEFAULT_COLLATION_OID))
		return false;
	/* an equal constant that is a parameter already stays one (GROUP BY matches) */
	if (list_length(sql->paramExprs) >= MAX_CONSTANT_PARAMS)
		return list_member(sql->paramExprs, constant);
	switch (constant->consttype)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case NUMERICOID:
		case FLOAT4OID:
		case FLOAT8OID:
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case DATEOID:
		case TIMEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
		case INTERVALOID:
		case UUIDOID:
		case INT4ARRAYOID:
		case INT8ARRAYOID:
		case TEXTARRAYOID:
			return true;
		default:
			return false;
	}
}

/*
 * DeparseParamExpr sends a column-free expression as a parameter that the
 * coordinator evaluates at execution; equal expressions share a number.
 */
static void
DeparseParamExpr(RemoteSql *sql, Node *expr)
{
	int			number = 1;
	ListCell   *cell;

	if (IsA(expr, Param) && ((Param *) expr)->paramkind != PARAM_EXTERN &&
		!(((Param *) expr)->paramkind == PARAM_EXEC && sql->allowExecParams))
	{
		RemoteSqlFail(sql, "a parameter of a subplan");
		return;
	}
	foreach(cell, sql->paramExprs)
	{
		if (equal(lfirst(cell), expr))
			break;
		number++;
	}
	if (cell == NULL)
		sql->paramExprs = lappend(sql->paramExprs, expr);
	appendStringInfo(&sql->buf, "$%d::%s", number,
					 RemoteTypeName(exprType(expr), exprTypmod(expr)));
}

static void
DeparseFuncExpr(RemoteSql *sql, FuncExpr *expr)
{
	StringInfo	buf = &sql->buf;
	ListCell   *cell;

	if (!IsBuiltinObject(expr->funcid) || func_volatile(expr->funcid) != PROVOLATILE_IMMUTABLE)
	{
		RemoteSqlFail(sql, func_volatile(expr->funcid) == PROVOLATILE_VOLATILE ?
					  "a volatile function" : "a function that only the coordinator can evaluate");
		return;
	}
	if (expr->funcretset)
	{
		RemoteSqlFail(sql, "a set-returning function");
		return;
	}
	if (expr->funcformat == COERCE_IMPLICIT_CAST)
	{
		/* a length coercion keeps the value's typmod: print the cast */
		appendStringInfoChar(buf, '(');
		DeparseRemoteExpr(sql, linitial(expr->args));
		appendStringInfo(buf, ")::%s",
						 RemoteTypeName(expr->funcresulttype, exprTypmod((Node *) expr)));
		return;
	}
	if (expr->funcformat == COERCE_EXPLICIT_CAST)
	{
		appendStringInfoChar(buf, '(');
		DeparseRemoteExpr(sql, linitial(expr->args));
		appendStringInfo(buf, ")::%s",
						 RemoteTypeName(expr->funcresulttype, exprTypmod((Node *) expr)));
		return;
	}
	appendStringInfo(buf, "%s(", RemoteSqlFunctionName(expr->funcid));
	foreach(cell, expr->args)
	{
		if (cell != list_head(expr->args))
			appendStringInfoString(buf, ", ");
		if (expr->funcvariadic && lnext(expr->args, cell) == NULL)
			appendStringInfoString(buf, "VARIADIC ");
		DeparseRemoteExpr(sql, lfirst(cell));
	}
	appendStringInfoChar(buf, ')');
}

void
RemoteSqlDeparseOperator(RemoteSql *sql, Oid opno)
{
	HeapTuple	tuple = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	Form_pg_operator form;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	form = (Form_pg_operator) GETSTRUCT(tuple);
	appendStringInfo(&sql->buf, "OPERATOR(%s.%s)",
					 quote_identifier(get_namespace_name(form->oprnamespace)),
					 NameStr(form->oprname));
	ReleaseSysCache(tuple);
}

static void
DeparseOpExpr(RemoteSql *sql, OpExpr *expr)
{
	StringInfo	buf = &sql->buf;

	if (!IsBuiltinObject(expr->opno) ||
		func_volatile(get_opcode(expr->opno)) != PROVOLATILE_IMMUTABLE)
	{
		RemoteSqlFail(sql, "an operator that only the coordinator can evaluate");
		return;
	}
	appendStringInfoChar(buf, '(');
	if (list_length(expr->args) == 2)
	{
		DeparseRemoteExpr(sql, linitial(expr->args));
		appendStringInfoChar(buf, ' ');
		RemoteSqlDeparseOperator(sql, expr->opno);
		appendStringInfoChar(buf, ' ');
		DeparseRemoteExpr(sql, lsecond(expr->args));
	}
	else
	{
		RemoteSqlDeparseOperator(sql, expr->opno);
		appendStringInfoChar(buf, ' ');
		DeparseRemoteExpr(sql, linitial(expr->args));
	}
	appendStringInfoChar(buf, ')');
}

static void
DeparseAggref(RemoteSql *sql, Aggref *aggref)
{
	StringInfo	buf = &sql->buf;
	ListCell   *cell;
	bool		first = true;

	if (!IsBuiltinObject(aggref->aggfnoid) || aggref->aggsplit != AGGSPLIT_SIMPLE ||
		aggref->agglevelsup != 0)
	{
		RemoteSqlFail(sql, "an aggregate that cannot run on the workers");
		return;
	}
	if (aggref->aggkind != AGGKIND_NORMAL)
	{
		DeparseOrderedSetAggregate(sql, aggref);
		return;
	}
	appendStringInfo(buf, "%s(", RemoteSqlFunctionName(aggref->aggfnoid));
	if (aggref->aggdistinct != NIL)
		appendStringInfoString(buf, "DISTINCT ");
	if (aggref->aggstar)
		appendStringInfoChar(buf, '*');
	foreach(cell, aggref->args)
	{
		TargetEntry *tle = lfirst(cell);

		if (tle->resjunk)
			continue;
		if (!first)
			appendStringInfoString(buf, ", ");
		first = false;
		if (aggref->aggvariadic && lnext(aggref->args, cell) == NULL)
			appendStringInfoString(buf, "VARIADIC ");
		DeparseRemoteExpr(sql, (Node *) tle->expr);
	}
	if (aggref->aggorder != NIL)
	{
		appendStringInfoString(buf, " ORDER BY ");
		RemoteSqlDeparseSortClause(sql, aggref->aggorder, aggref->args);
	}
	appendStringInfoChar(buf, ')');
	if (aggref->aggfilter != NULL)
	{
		appendStringInfoString(buf, " FILTER (WHERE ");
		DeparseRemoteExpr(sql, (Node *) aggref->aggfilter);
		appendStringInfoChar(buf, ')');
	}
}

static void
DeparseWindowFunc(RemoteSql *sql, WindowFunc *wfunc)
{
	StringInfo	buf = &sql->buf;
	Query	   *query = LevelQuery(sql, 0);
	WindowClause *clause = NULL;
	ListCell   *cell;

	if (!IsBuiltinObject(wfunc->winfnoid) || func_volatile(wfunc->winfnoid) == PROVOLATILE_VOLATILE)
	{
		RemoteSqlFail(sql, "a user-defined window function");
		return;
	}
	foreach(cell, query->windowClause)
	{
		if (((WindowClause *) lfirst(cell))->winref == wfunc->winref)
			clause = lfirst(cell);
	}
	if (clause == NULL)
	{
		RemoteSqlFail(sql, "a window function without its window");
		return;
	}
	appendStringInfo(buf, "%s(", RemoteSqlFunctionName(wfunc->winfnoid));
	if (wfunc->winstar)
		appendStringInfoChar(buf, '*');
	RemoteSqlDeparseExprList(sql, wfunc->args);
	appendStringInfoChar(buf, ')');
	if (wfunc->aggfilter != NULL)
	{
		appendStringInfoString(buf, " FILTER (WHERE ");
		DeparseRemoteExpr(sql, (Node *) wfunc->aggfilter);
		appendStringInfoChar(buf, ')');
	}
	appendStringInfoString(buf, " OVER (");
	if (clause->partitionClause != NIL)
	{
		bool		first = true;

		appendStringInfoString(buf, "PARTITION BY ");
		foreach(cell, clause->partitionClause)
		{
			SortGroupClause *sgc = lfirst(cell);

			if (!first)
				appendStringInfoString(buf, ", ");
			first = false;
			DeparseRemoteExpr(sql, get_sortgroupclause_expr(sgc, query->targetList));
		}
	}
	if (clause->orderClause != NIL)
	{
		appendStringInfoString(buf, clause->partitionClause ? " ORDER BY " : "ORDER BY ");
		RemoteSqlDeparseSortClause(sql, clause->orderClause, query->targetList);
	}
	DeparseWindowFrame(sql, clause);
	appendStringInfoChar(buf, ')');
}

/*
 * DeparseSortGroupExpr prints an item of GROUP BY, ORDER BY or DISTINCT ON:
 * a bare true/false there would be read as a constant (and refused, as
 * ORDER BY 1 would be read as a position), so booleans get a cast.
 */
void
DeparseSortGroupExpr(RemoteSql *sql, Node *expr)
{
	Node	   *stripped = expr;

	while (stripped != NULL && IsA(stripped, RelabelType))
		stripped = (Node *) ((RelabelType *) stripped)->arg;

	if (IsA(stripped, Const) && ((Const *) stripped)->consttype == BOOLOID &&
		!((Const *) stripped)->constisnull)
	{
		appendStringInfoString(&sql->buf, DatumGetBool(((Const *) stripped)->constvalue) ?
							   "true::pg_catalog.bool" : "false::pg_catalog.bool");
		return;
	}
	DeparseRemoteExpr(sql, expr);
}

/*
 * SortGroupPosition returns the output column number that a GROUP BY,
 * ORDER BY or DISTINCT ON item names, or 0 when it is not printed as a
 * number.  A number refers to the very expression of the SELECT list: an
 * expression printed twice (a subquery, whose aliases differ each time)
 * would not be recognized as the same.  positions says how the SELECT list
 * was printed: SORT_POSITIONS_NONE (a window or aggregate, where numbers are
 * constants), SORT_POSITIONS_VISIBLE (junk columns left out) or
 * SORT_POSITIONS_ALL (junk columns too).
 */
static int
SortGroupPosition(SortGroupClause *sgc, List *targetList, int positions)
{
	ListCell   *cell;
	int			position = 0;

	if (positions == SORT_POSITIONS_NONE)
		return 0;
	foreach(cell, targetList)
	{
		TargetEntry *tle = lfirst(cell);

		if (!tle->resjunk || positions == SORT_POSITIONS_ALL)
			position++;
		if (tle->ressortgroupref == sgc->tleSortGroupRef)
			return (tle->resjunk && positions != SORT_POSITIONS_ALL) ? 0 : position;
	}
	return 0;
}

/*
 * DeparseSortGroupItem prints one GROUP BY / ORDER BY / DISTINCT ON item:
 * its output column number where it has one (see SortGroupPosition), else
 * the expression.
 */
void
DeparseSortGroupItem(RemoteSql *sql, SortGroupClause *sgc, List *targetList, int positions)
{
	int			position = SortGroupPosition(sgc, targetList, positions);

	if (position > 0)
		appendStringInfo(&sql->buf, "%d", position);
	else
		DeparseSortGroupExpr(sql, get_sortgroupclause_expr(sgc, targetList));
}

/*
 * DeparseSortClause prints ORDER BY items, each with its direction and
 * NULLS placement; a non-default ordering operator is printed with USING.
 */
void
RemoteSqlDeparseSortClause(RemoteSql *sql, List *sortClause, List *targetList)
{
	DeparseSortItems(sql, sortClause, targetList, SORT_POSITIONS_NONE);
}

/* DeparseSortItems is RemoteSqlDeparseSortClause with positions (see above) */
static void
DeparseSortItems(RemoteSql *sql, List *sortClause, List *targetList, int positions)
{
	StringInfo	buf = &sql->buf;
	ListCell   *cell;

	foreach(cell, sortClause)
	{
		SortGroupClause *sgc = lfirst(cell);
		Node	   *expr = get_sortgroupclause_expr(sgc, targetList);
		Oid			type = exprType(expr);
		TypeCacheEntry *typentry;

		if (cell != list_head(sortClause))
			appendStringInfoString(buf, ", ");
		DeparseSortGroupItem(sql, sgc, targetList, positions);

		typentry = lookup_type_cache(type, TYPECACHE_LT_OPR | TYPECACHE_GT_OPR);
		if (sgc->sortop == typentry->lt_opr)
			appendStringInfoString(buf, " ASC");
		else if (sgc->sortop == typentry->gt_opr)
			appendStringInfoString(buf, " DESC");
		else
		{
			if (!IsBuiltinObject(sgc->sortop))
			{
				RemoteSqlFail(sql, "a user-defined ordering operator");
				return;
			}
			appendStringInfoString(buf, " USING ");
			RemoteSqlDeparseOperator(sql, sgc->sortop);
		}
		appendStringInfoString(buf, sgc->nulls_first ? " NULLS FIRST" : " NULLS LAST");
	}
}

/*
 * DeparseRemoteOrderBy prints the ORDER BY of a query whose SELECT list
 * was printed with every entry, junk ones too.
 */
void
DeparseRemoteOrderBy(RemoteSql *sql, Query *query, List *sortClause, List *targetList)
{
	DeparseSortItems(sql, sortClause, targetList, SORT_POSITIONS_ALL);
}

static void
DeparseSubLink(RemoteSql *sql, SubLink *sublink)
{
	StringInfo	buf = &sql->buf;
	Query	   *subquery = (Query *) sublink->subselect;

	switch (sublink->subLinkType)
	{
		case EXISTS_SUBLINK:
			appendStringInfoString(buf, "EXISTS (");
			DeparseRemoteSelect(sql, subquery);
			appendStringInfoChar(buf, ')');
			break;
		case EXPR_SUBLINK:
			appendStringInfoChar(buf, '(');
			DeparseRemoteSelect(sql, subquery);
			appendStringInfoChar(buf, ')');
			break;
		case ARRAY_SUBLINK:
			appendStringInfoString(buf, "ARRAY(");
			DeparseRemoteSelect(sql, subquery);
			appendStringInfoChar(buf, ')');
			break;
		case ANY_SUBLINK:
		case ALL_SUBLINK:
			{
				OpExpr	   *test = (OpExpr *) sublink->testexpr;

				/* only the single-column form: lhs op ANY (SELECT ...) */
				if (test == NULL || !IsA(test, OpExpr) || list_length(test->args) != 2 ||
					!IsA(lsecond(test->args), Param) ||
					((Param *) lsecond(test->args))->paramkind != PARAM_SUBLINK)
				{
					RemoteSqlFail(sql, "a row comparison with a subquery");
					return;
				}
				if (!IsBuiltinObject(test->opno))
				{
					RemoteSqlFail(sql, "a user-defined operator");
					return;
				}
				appendStringInfoChar(buf, '(');
				DeparseRemoteExpr(sql, linitial(test->args));
				appendStringInfoChar(buf, ' ');
				RemoteSqlDeparseOperator(sql, test->opno);
				appendStringInfoString(buf, sublink->subLinkType == ANY_SUBLINK ?
									   " ANY (" : " ALL (");
				DeparseRemoteSelect(sql, subquery);
				appendStringInfoString(buf, "))");
				break;
			}
		default:
			RemoteSqlFail(sql, "a kind of subquery shardext cannot send to the workers");
			break;
	}
}

/*
 * DeparseRemoteTargetList prints a SELECT list (junk columns too when
 * asked: callers that read them by position need them).
 */
void
DeparseRemoteTargetList(RemoteSql *sql, List *targetList, bool withJunk)
{
	ListCell   *cell;
	bool		first = true;

	foreach(cell, targetList)
	{
		TargetEntry *tle = lfirst(cell);

		if (tle->resjunk && !withJunk)
			continue;
		if (!first)
			appendStringInfoString(&sql->buf, ", ");
		first = false;
		/* the coordinator reads the result's columns back by their type */
		if (list_length(sql->levels) == 1 && !IsReceivableType(exprType((Node *) tle->expr)))
			RemoteSqlFail(sql, "an anonymous record in the result");
		DeparseRemoteExpr(sql, (Node *) tle->expr);
	}
	if (first)
		appendStringInfoString(&sql->buf, "NULL");
}

/*
 * IsReceivableType: can the coordinator read a worker's text value of this
 * type back?  Not an anonymous record (or array of them), whose input
 * function needs a row type.
 */
bool
IsReceivableType(Oid type)
{
	return type != RECORDOID && type != RECORDARRAYOID;
}

/* prints one FROM item of the innermost query */
void
DeparseRemoteFromItem(RemoteSql *sql, Node *item)
{
	StringInfo	buf = &sql->buf;
	Query	   *query = LevelQuery(sql, 0);

	if (sql->failed)
		return;
	if (IsA(item, RangeTblRef))
	{
		Index		rtindex = ((RangeTblRef *) item)->rtindex;
		RangeTblEntry *rte = rt_fetch(rtindex, query->rtable);

		if (rte->rtekind == RTE_RELATION)
		{
			if (rte->tablesample != NULL)
			{
				RemoteSqlFail(sql, "TABLESAMPLE");
				return;
			}
			appendStringInfoString(buf, rte->inh ? "" : "ONLY ");
			RemoteSqlAppendRelation(sql, rte->relid);
			appendStringInfo(buf, " %s", RemoteSqlAlias(sql, 0, rtindex));
		}
		else if (rte->rtekind == RTE_SUBQUERY)
		{
			int			ncolumns = 0;
			ListCell   *cell;

			if (rte->lateral)
				appendStringInfoString(buf, "LATERAL ");
			appendStringInfoChar(buf, '(');
			DeparseRemoteSelect(sql, rte->subquery);
			appendStringInfo(buf, ") %s(", RemoteSqlAlias(sql, 0, rtindex));
			foreach(cell, rte->subquery->targetList)
			{
				if (((TargetEntry *) lfirst(cell))->resjunk)
					continue;
				appendStringInfo(buf, "%sc%d", ncolumns > 0 ? ", " : "", ncolumns + 1);
				ncolumns++;
			}
			if (ncolumns == 0)
				RemoteSqlFail(sql, "a subquery without columns");
			appendStringInfoChar(buf, ')');
		}
		else if (rte->rtekind == RTE_VALUES)
			DeparseValuesFromItem(sql, rte, rtindex);
		else if (RepartitionReadUnit(rte) > 0)
			DeparseRepartitionRead(sql, rte, rtindex);
		else
			RemoteSqlFail(sql, "a function or CTE in FROM");
	}
	else if (IsA(item, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) item;
		const char *type;

		switch (join->jointype)
		{
			case JOIN_INNER:
				type = "JOIN";
				break;
			case JOIN_LEFT:
				type = "LEFT JOIN";
				break;
			case JOIN_RIGHT:
				type = "RIGHT JOIN";
				break;
			case JOIN_FULL:
				type = "FULL JOIN";
				break;
			default:
				RemoteSqlFail(sql, "a kind of join shardext cannot send to the workers");
				return;
		}
		appendStringInfoChar(buf, '(');
		DeparseRemoteFromItem(sql, join->larg);
		appendStringInfo(buf, " %s ", type);
		DeparseRemoteFromItem(sql, join->rarg);
		appendStringInfoString(buf, " ON ");
		if (join->quals != NULL)
			DeparseRemoteExpr(sql, FlattenAliasVars(query, join->quals));
		else
			appendStringInfoString(buf, "true");
		appendStringInfoChar(buf, ')');
	}
	else
		RemoteSqlFail(sql, "an unknown FROM item");
}

/*
 * RepartitionReadUnit: is rte the read of a moved unit's partition that the
 * repartition planner puts in place of a table (a call of
 * shardext.repartition_read whose second argument is the unit)?  Returns
 * the unit, or 0.
 */
int
RepartitionReadUnit(RangeTblEntry *rte)
{
	RangeTblFunction *rtfunc;
	FuncExpr   *call;

	if (rte->rtekind != RTE_FUNCTION || list_length(rte->functions) != 1)
		return 0;
	rtfunc = linitial(rte->functions);
	call = (FuncExpr *) rtfunc->funcexpr;
	if (!IsA(call, FuncExpr) || list_length(call->args) != 4 ||
		!IsA(lsecond(call->args), Const) ||
		strcmp(get_func_name(call->funcid), "repartition_read") != 0 ||
		strcmp(get_namespace_name(get_func_namespace(call->funcid)), SHARDEXT_SCHEMA_NAME) != 0)
		return 0;
	return DatumGetInt32(((Const *) lsecond(call->args))->constvalue);
}

/*
 * DeparseRepartitionRead prints the read of a moved unit's partition: the
 * call with a gap for its arguments (a List part: "read" and the unit,
 * which the repartition executor fills per task), and the column
 * definitions c1, c2 ...
 */
static void
DeparseRepartitionRead(RemoteSql *sql, RangeTblEntry *rte, Index rtindex)
{
	RangeTblFunction *rtfunc = linitial(rte->functions);
	ListCell   *typeCell;
	ListCell   *typmodCell;
	int			column = 0;

	appendStringInfoString(&sql->buf, SHARDEXT_SCHEMA_NAME ".repartition_read(");
	FlushText(sql);
	sql->parts = lappend(sql->parts, list_make2(makeString("read"),
												makeInteger(RepartitionReadUnit(rte))));
	appendStringInfo(&sql->buf, ") %s(", RemoteSqlAlias(sql, 0, rtindex));
	forboth(typeCell, rtfunc->funccoltypes, typmodCell, rtfunc->funccoltypmods)
	{
		column++;
		appendStringInfo(&sql->buf, "%sc%d %s", column > 1 ? ", " : "", column,
						 RemoteTypeName(lfirst_oid(typeCell), lfirst_int(typmodCell)));
	}
	appendStringInfoChar(&sql->buf, ')');
}

/*
 * DeparseSetOperationQuery appends a UNION / INTERSECT / EXCEPT of SELECTs
 * without ORDER BY or LIMIT of its own.
 */
static void
DeparseSetOperationQuery(RemoteSql *sql, Query *query)
{
	if (query->sortClause != NIL || query->limitCount != NULL || query->limitOffset != NULL)
	{
		RemoteSqlFail(sql, "ORDER BY or LIMIT of a set operation");
		return;
	}
	RemoteSqlPushQuery(sql, query);
	DeparseSetOperand(sql, query, query->setOperations);
	RemoteSqlPopQuery(sql);
}

static void
DeparseSetOperand(RemoteSql *sql, Query *query, Node *node)
{
	StringInfo	buf = &sql->buf;

	if (IsA(node, RangeTblRef))
	{
		RangeTblEntry *rte = rt_fetch(((RangeTblRef *) node)->rtindex, query->rtable);

		appendStringInfoChar(buf, '(');
		DeparseRemoteSelect(sql, rte->subquery);
		appendStringInfoChar(buf, ')');
	}
	else
	{
		SetOperationStmt *op = castNode(SetOperationStmt, node);
		const char *name = op->op == SETOP_UNION ? "UNION" :
			op->op == SETOP_INTERSECT ? "INTERSECT" : "EXCEPT";

		appendStringInfoChar(buf, '(');
		DeparseSetOperand(sql, query, op->larg);
		appendStringInfo(buf, " %s%s ", name, op->all ? " ALL" : "");
		DeparseSetOperand(sql, query, op->rarg);
		appendStringInfoChar(buf, ')');
	}
}

/*
 * DeparseRemoteSelect appends a whole SELECT (a subquery or a query pushed
 * down as it is).  Output columns are in target list order without junk.
 */
void
DeparseRemoteSelect(RemoteSql *sql, Query *query)
{
	StringInfo	buf = &sql->buf;
	ListCell   *cell;
	List	   *targetList;
	bool		constantsAsParams;

	if (sql->failed)
		return;
	if (query->setOperations != NULL && query->cteList == NIL)
	{
		DeparseSetOperationQuery(sql, query);
		return;
	}
	if (query->commandType != CMD_SELECT || query->setOperations != NULL ||
		query->cteList != NIL || query->groupingSets != NIL ||
		query->hasTargetSRFs || query->utilityStmt != NULL)
	{
		RemoteSqlFail(sql, "a set operation, CTE, grouping set or set-returning function");
		return;
	}

	RemoteSqlPushQuery(sql, query);
	targetList = (List *) FlattenAliasVars(query, (Node *) query->targetList);

	appendStringInfoString(buf, "SELECT ");
	if (query->distinctClause != NIL)
	{
		if (query->hasDistinctOn)
		{
			bool		first = true;

			appendStringInfoString(buf, "DISTINCT ON (");
			foreach(cell, query->distinctClause)
			{
				if (!first)
					appendStringInfoString(buf, ", ");
				first = false;
				DeparseSortGroupItem(sql, lfirst(cell), targetList, SORT_POSITIONS_VISIBLE);
			}
			appendStringInfoString(buf, ") ");
		}
		else
			appendStringInfoString(buf, "DISTINCT ");
	}
	DeparseRemoteTargetList(sql, targetList, false);

	if (query->jointree->fromlist != NIL)
	{
		appendStringInfoString(buf, " FROM ");
		foreach(cell, query->jointree->fromlist)
		{
			if (cell != list_head(query->jointree->fromlist))
				appendStringInfoString(buf, ", ");
			DeparseRemoteFromItem(sql, lfirst(cell));
		}
	}
	if (query->jointree->quals != NULL)
	{
		appendStringInfoString(buf, " WHERE ");
		DeparseRemoteExpr(sql, FlattenAliasVars(query, query->jointree->quals));
	}
	if (query->groupClause != NIL)
	{
		appendStringInfoString(buf, " GROUP BY ");
		foreach(cell, query->groupClause)
		{
			if (cell != list_head(query->groupClause))
				appendStringInfoString(buf, ", ");
			DeparseSortGroupItem(sql, lfirst(cell), targetList, SORT_POSITIONS_VISIBLE);
		}
	}
	if (query->havingQual != NULL)
	{
		appendStringInfoString(buf, " HAVING ");
		DeparseRemoteExpr(sql, FlattenAliasVars(query, query->havingQual));
	}
	if (query->sortClause != NIL)
	{
		appendStringInfoString(buf, " ORDER BY ");
		DeparseSortItems(sql, query->sortClause, targetList, SORT_POSITIONS_VISIBLE);
	}
	/* row counts shape the workers' plans (fast-start ones): literals stay */
	constantsAsParams = sql->constantsAsParams;
	sql->constantsAsParams = false;
	if (query->limitCount != NULL)
	{
		if (query->limitOption == LIMIT_OPTION_WITH_TIES)
			RemoteSqlFail(sql, "FETCH FIRST ... WITH TIES");
		appendStringInfoString(buf, " LIMIT ");
		DeparseRemoteExpr(sql, query->limitCount);
	}
	if (query->limitOffset != NULL)
	{
		appendStringInfoString(buf, " OFFSET ");
		DeparseRemoteExpr(sql, query->limitOffset);
	}
	sql->constantsAsParams = constantsAsParams;
	DeparseRowMarks(sql, query);
	RemoteSqlPopQuery(sql);
}

/*
 * DeparseRowMarks appends FOR UPDATE / SHARE clauses.  Only rows of
 * distributed tables can be locked: a reference table's rows have a copy
 * on every node, and a lock on one copy would not stop a locker of another.
 */
static void
DeparseRowMarks(RemoteSql *sql, Query *query)
{
	static const char *const strengths[] = {
		[LCS_FORKEYSHARE] = "KEY SHARE",
		[LCS_FORSHARE] = "SHARE",
		[LCS_FORNOKEYUPDATE] = "NO KEY UPDATE",
		[LCS_FORUPDATE] = "UPDATE"
	};
	ListCell   *cell;

	foreach(cell, query->rowMarks)
	{
		RowMarkClause *mark = lfirst(cell);
		RangeTblEntry *rte = rt_fetch(mark->rti, query->rtable);

		if (rte->rtekind != RTE_RELATION || !IsHashDistributedTable(rte->relid) ||
			mark->strength == LCS_NONE)
		{
			RemoteSqlFail(sql, "a row lock on a reference table, subquery or join");
			return;
		}
		appendStringInfo(&sql->buf, " FOR %s OF %s", strengths[mark->strength],
						 RemoteSqlAlias(sql, 0, mark->rti));
		if (mark->waitPolicy == LockWaitSkip)
			appendStringInfoString(&sql->buf, " SKIP LOCKED");
		else if (mark->waitPolicy == LockWaitError)
			appendStringInfoString(&sql->buf, " NOWAIT");
	}
}
