/*-------------------------------------------------------------------------
 *
 * shippable.c
 *	  What the workers may evaluate: built-in immutable functions and
 *	  operators on the rows' columns.  Anything else that does not depend
 *	  on the rows is evaluated on the coordinator and sent as a parameter;
 *	  the rest cannot be shipped (see remote_sql.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "catalog/pg_proc.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/lsyscache.h"

#include "shardext/remote_sql.h"

static bool ExprNeedsRowsWalker(Node *node, bool *allowExecParams);
static bool FunctionNeedsCoordinator(Oid funcid, void *context);
static bool NeedsCoordinatorWalker(Node *node, void *context);

/*
 * IsBuiltinObject tells whether an object (function, operator, type,
 * collation) comes with PostgreSQL, so that the workers have the same one.
 */
bool
IsBuiltinObject(Oid oid)
{
	return oid < FirstGenbkiObjectId;
}

/*
 * ExprNeedsRows tells whether an expression refers to a column of any query
 * level, an aggregate or a window function, or anything else that only
 * exists where the rows are (or, like a CASE operand's placeholder, only
 * inside its expression); with allowExecParams, executor parameters do
 * not count.
 */
bool
ExprNeedsRows(Node *node, bool allowExecParams)
{
	return ExprNeedsRowsWalker(node, &allowExecParams);
}

static bool
ExprNeedsRowsWalker(Node *node, bool *allowExecParams)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var) || IsA(node, Aggref) || IsA(node, WindowFunc) ||
		IsA(node, GroupingFunc) || IsA(node, SubLink) || IsA(node, SubPlan) ||
		IsA(node, AlternativeSubPlan) || IsA(node, CurrentOfExpr) ||
		IsA(node, PlaceHolderVar) || IsA(node, SetToDefault) ||
		IsA(node, NextValueExpr) || IsA(node, CaseTestExpr))
		return true;
	if (IsA(node, Param) && ((Param *) node)->paramkind == PARAM_EXEC && *allowExecParams)
		return false;			/* a value the executor provides: allowed here */
	if (IsA(node, Param) && ((Param *) node)->paramkind != PARAM_EXTERN)
		return true;
	if (IsA(node, Query))
		return true;
	return expression_tree_walker(node, ExprNeedsRowsWalker, allowExecParams);
}

/*
 * ExprNeedsCoordinator tells whether an expression uses something the
 * workers must not evaluate: a parameter, a function or operator that is
 * not built-in and immutable.
 */
bool
ExprNeedsCoordinator(Node *node)
{
	return NeedsCoordinatorWalker(node, NULL);
}

static bool
FunctionNeedsCoordinator(Oid funcid, void *context)
{
	return !IsBuiltinObject(funcid) || func_volatile(funcid) != PROVOLATILE_IMMUTABLE;
}

static bool
NeedsCoordinatorWalker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param))
		return true;
	if (IsA(node, SQLValueFunction))
		return true;
	/* XML results depend on xmloption and xmlbinary, not pinned remotely */
	if (IsA(node, XmlExpr))
		return true;
	/* a user's domain may not exist on the workers */
	if (IsA(node, CoerceToDomain) && !IsBuiltinObject(((CoerceToDomain *) node)->resulttype))
		return true;
	if (check_functions_in_node(node, FunctionNeedsCoordinator, NULL))
		return true;
	return expression_tree_walker(node, NeedsCoordinatorWalker, context);
}

/*
 * ExprIsShippable tells whether an expression of the given query can be
 * deparsed for the workers (possibly with coordinator-evaluated parts).
 */
bool
ExprIsShippable(Node *node, Query *query, bool allowExecParams)
{
	RemoteSql	sql;
	bool		ok;

	InitRemoteSql(&sql);
	sql.allowExecParams = allowExecParams;
	RemoteSqlPushQuery(&sql, query);
	DeparseRemoteExpr(&sql, node);
	ok = !sql.failed;
	FinishRemoteSql(&sql);
	return ok;
}
