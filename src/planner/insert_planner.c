/*-------------------------------------------------------------------------
 *
 * insert_planner.c
 *	  INSERT into distributed and reference tables.
 *
 * INSERT ... VALUES: the row values (with the defaults the rewriter
 * filled in, such as nextval() of serial columns) are evaluated on the
 * coordinator at execution, once per row, so sequence values are unique
 * and routing sees the real distribution value; each shard gets one
 * multi-row INSERT with the values as parameters.
 *
 * INSERT ... SELECT: see insert_select.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "catalog/pg_constraint.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "shardext/global_index.h"
#include "shardext/planner.h"
#include "shardext/remote_sql.h"

typedef struct ValuesRowContext
{
	Index		valuesIndex;
	List	   *row;
} ValuesRowContext;

static Node *SubstituteValuesRow(Node *node, ValuesRowContext *context);
static void DeparseOnConflict(RemoteSql *sql, Query *query, DistTableCacheEntry *entry);
static void DeparseConflictConstraint(RemoteSql *sql, Query *query, Oid constraintOid);

/* replaces the columns of the VALUES list by one row's expressions */
static Node *
SubstituteValuesRow(Node *node, ValuesRowContext *context)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;

		if (var->varno == context->valuesIndex && var->varlevelsup == 0)
			return copyObject(list_nth(context->row, var->varattno - 1));
	}
	return expression_tree_mutator(node, SubstituteValuesRow, context);
}

/*
 * DeparseConflictConstraint prints the arbiter of ON CONFLICT ON CONSTRAINT
 * for a shard, whose constraint has a name of its own: a primary key or
 * unique constraint becomes its columns, which the shard infers to the
 * same index (constraints have neither expressions nor predicates); an
 * exclusion constraint, which inference never picks, is named by the
 * shard's name for it.
 */
static void
DeparseConflictConstraint(RemoteSql *sql, Query *query, Oid constraintOid)
{
	HeapTuple	tuple = SearchSysCache1(CONSTROID, ObjectIdGetDatum(constraintOid));
	Form_pg_constraint con;
	Oid			relid = rt_fetch(query->resultRelation, query->rtable)->relid;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for constraint %u", constraintOid);
	con = (Form_pg_constraint) GETSTRUCT(tuple);
	if (con->contype == CONSTRAINT_EXCLUSION)
	{
		appendStringInfoString(&sql->buf, " ON CONSTRAINT ");
		RemoteSqlAppendShardConstraintName(sql, relid, NameStr(con->conname));
	}
	else
	{
		Relation	index = index_open(con->conindid, AccessShareLock);

		appendStringInfoString(&sql->buf, " (");
		for (int i = 0; i < index->rd_index->indnkeyatts; i++)
		{
			AttrNumber	attno = index->rd_index->indkey.values[i];

			if (attno <= 0)
				elog(ERROR, "constraint \"%s\" has an expression", NameStr(con->conname));
			appendStringInfo(&sql->buf, "%s%s", i > 0 ? ", " : "",
							 quote_identifier(get_attname(relid, attno, false)));
		}
		appendStringInfoChar(&sql->buf, ')');
		index_close(index, AccessShareLock);
	}
	ReleaseSysCache(tuple);
}

/*
 * DeparseOnConflict appends ON CONFLICT ... for the shard statement; the
 * arbiter is inferred again on the shard (which has the same indexes).
 */
static void
DeparseOnConflict(RemoteSql *sql, Query *query, DistTableCacheEntry *entry)
{
	OnConflictExpr *onConflict = query->onConflict;
	StringInfo	buf = &sql->buf;
	ListCell   *cell;
	bool		first = true;
	Oid			relid = rt_fetch(query->resultRelation, query->rtable)->relid;

	if (onConflict == NULL)
		return;
	appendStringInfoString(buf, " ON CONFLICT");
	if (OidIsValid(onConflict->constraint))
		DeparseConflictConstraint(sql, query, onConflict->constraint);
	else if (onConflict->arbiterElems != NIL)
	{
		appendStringInfoString(buf, " (");
		foreach(cell, onConflict->arbiterElems)
		{
			InferenceElem *elem = lfirst(cell);

			if (cell != list_head(onConflict->arbiterElems))
				appendStringInfoString(buf, ", ");
			if (OidIsValid(elem->infercollid) || OidIsValid(elem->inferopclass))
				RemoteSqlFail(sql, "ON CONFLICT with a collation or operator class");
			if (IsA(elem->expr, Var))
				appendStringInfoString(buf, quote_identifier(get_attname(relid,
																		 ((Var *) elem->expr)->varattno,
																		 false)));
			else
			{
				appendStringInfoChar(buf, '(');
				DeparseRemoteExpr(sql, elem->expr);
				appendStringInfoChar(buf, ')');
			}
		}
		appendStringInfoChar(buf, ')');
		if (onConflict->arbiterWhere != NULL)
		{
			appendStringInfoString(buf, " WHERE ");
			DeparseRemoteExpr(sql, onConflict->arbiterWhere);
		}
	}
	if (onConflict->action == ONCONFLICT_NOTHING)
	{
		appendStringInfoString(buf, " DO NOTHING");
		return;
	}
	appendStringInfoString(buf, " DO UPDATE SET ");
	sql->exclRelIndex = onConflict->exclRelIndex;
	foreach(cell, onConflict->onConflictSet)
	{
		TargetEntry *tle = lfirst(cell);

		if (tle->resjunk)
			continue;
		if (entry->method == DISTRIBUTE_BY_HASH && tle->resno == entry->distAttnum)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot update distribution column \"%s\" of distributed table \"%s\"",
							get_attname(relid, tle->resno, false), get_rel_name(relid)),
					 errhint("Leave the distribution column out of ON CONFLICT DO UPDATE SET.")));
		appendStringInfo(buf, "%s%s = ", first ? "" : ", ",
						 quote_identifier(get_attname(relid, tle->resno, false)));
		first = false;
		DeparseRemoteExpr(sql, (Node *) tle->expr);
	}
	if (onConflict->onConflictWhere != NULL)
	{
		appendStringInfoString(buf, " WHERE ");
		DeparseRemoteExpr(sql, onConflict->onConflictWhere);
	}
	if (contain_volatile_functions((Node *) onConflict->onConflictSet))
		RemoteSqlFail(sql, "a volatile function in ON CONFLICT DO UPDATE");
}

/*
 * InsertColumns returns the non-junk target entries of an INSERT and where
 * among them the distribution column is; a row of a hash-distributed table
 * needs a value for it.
 */
List *
InsertColumns(Query *query, DistTableCacheEntry *entry, int *distColumn)
{
	List	   *columns = NIL;
	ListCell   *cell;
	int			position = 0;

	*distColumn = -1;
	foreach(cell, query->targetList)
	{
		TargetEntry *tle = lfirst(cell);

		if (tle->resjunk)
			continue;
		columns = lappend(columns, tle);
		if (entry->method == DISTRIBUTE_BY_HASH && tle->resno == entry->distAttnum)
			*distColumn = position;
		position++;
	}
	if (entry->method == DISTRIBUTE_BY_HASH && *distColumn < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("cannot insert into distributed table \"%s\" without a value for distribution column \"%s\"",
						get_rel_name(entry->relid),
						get_attname(entry->relid, entry->distAttnum, false)),
				 errhint("Give the distribution column a value or a default.")));
	return columns;
}

/*
 * InitInsertJob fills the job of a shard INSERT whose rows are routed by the
 * coordinator: its SQL around the rows (see DeparseInsertStatement) and
 * what the rows look like.  *paramExprs are the expressions of the
 * statement's own parameters (ON CONFLICT, RETURNING), to evaluate at
 * execution.
 */
void
InitInsertJob(DistributedJob *job, Query *query, DistTableCacheEntry *entry, List *columns,
			  int distColumn, List **paramExprs)
{
	RemoteSql	prefix;
	RemoteSql	suffix;
	DistributedJob gindex;
	OnConflictExpr *onConflict;

	/* global indexes: how they are kept, and which ON CONFLICT the shards get */
	memset(&gindex, 0, sizeof(gindex));
	onConflict = PlanGlobalIndexInsert(query, entry, columns, &gindex);
	DeparseInsertStatementWith(query, onConflict != NULL, entry, columns, &prefix, &suffix);
	if (gindex.gindexMode == GINDEX_RETURNED)
		suffix.parts = lappend(suffix.parts,
							   makeString(HiddenInsertReturning(query, &gindex,
																RemoteSqlAlias(&suffix, 0,
																			   query->resultRelation))));
	InitDistributedJob(job, JOB_INSERT, prefix.parts, prefix.relations,
					   list_length(suffix.paramExprs));
	job->sqlSuffix = suffix.parts;
	job->anchor = entry->method == DISTRIBUTE_BY_HASH ? 0 : -1;
	job->hasReturning = query->returningList != NIL;
	job->insertColumnCount = list_length(columns);
	job->insertDistColumn = distColumn;
	job->gindexMode = gindex.gindexMode;
	job->gindexRelids = gindex.gindexRelids;
	job->gindexArbiter = gindex.gindexArbiter;
	job->insertAttnums = gindex.insertAttnums;
	job->hiddenLead = gindex.hiddenLead;
	job->hiddenAttnums = gindex.hiddenAttnums;
	*paramExprs = suffix.paramExprs;
}

/*
 * DeparseInsertStatement deparses the parts of a shard INSERT around its
 * rows: "INSERT INTO <shard> AS alias (columns)" into prefix, and the
 * ON CONFLICT and RETURNING clauses into suffix (whose parameters, if any,
 * come first: the row values are numbered after them).  Errors out when
 * the clauses cannot be shipped.
 */
void
DeparseInsertStatement(Query *query, DistTableCacheEntry *entry, List *columns,
					   RemoteSql *prefix, RemoteSql *suffix)
{
	DeparseInsertStatementWith(query, true, entry, columns, prefix, suffix);
}

/*
 * DeparseInsertStatementWith is DeparseInsertStatement that leaves the ON
 * CONFLICT clause out unless withOnConflict (a conflict target that is a
 * global index is handled before the rows go out).
 */
void
DeparseInsertStatementWith(Query *query, bool withOnConflict, DistTableCacheEntry *entry,
						   List *columns, RemoteSql *prefix, RemoteSql *suffix)
{
	RangeTblEntry *target = rt_fetch(query->resultRelation, query->rtable);
	ListCell   *cell;

	/* INSERT INTO <shard> AS alias (columns) */
	InitRemoteSql(prefix);
	appendStringInfoString(&prefix->buf, "INSERT INTO ");
	RemoteSqlAppendRelation(prefix, target->relid);
	RemoteSqlPushQuery(prefix, query);
	appendStringInfo(&prefix->buf, " AS %s (", RemoteSqlAlias(prefix, 0, query->resultRelation));
	foreach(cell, columns)
	{
		TargetEntry *tle = lfirst(cell);

		appendStringInfo(&prefix->buf, "%s%s", cell == list_head(columns) ? "" : ", ",
						 quote_identifier(get_attname(target->relid, tle->resno, false)));
	}
	appendStringInfoChar(&prefix->buf, ')');
	FinishRemoteSql(prefix);

	/* ON CONFLICT ... RETURNING ... */
	InitRemoteSql(suffix);
	suffix->nextLevelId = 0;
	RemoteSqlPushQuery(suffix, query);
	if (withOnConflict)
		DeparseOnConflict(suffix, query, entry);
	if (query->returningList != NIL)
	{
		appendStringInfoString(&suffix->buf, " RETURNING ");
		DeparseRemoteTargetList(suffix, query->returningList, true);
	}
	FinishRemoteSql(suffix);
	/* the target itself is there for ON CONFLICT ON CONSTRAINT of an exclusion constraint */
	if (!suffix->failed && suffix->relations != NIL &&
		!(list_length(suffix->relations) == 1 && linitial_oid(suffix->relations) == target->relid))
		RemoteSqlFail(suffix, "a subquery");
	if (suffix->failed)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("INSERT into distributed table \"%s\" with %s is not supported",
						get_rel_name(target->relid), suffix->failReason),
				 errhint("Simplify the ON CONFLICT or RETURNING clause.")));
}

/*
 * PlanDistributedInsert plans INSERT into a distributed or reference table.
 */
PlannedStmt *
PlanDistributedInsert(Query *query, int cursorOptions, ParamListInfo boundParams)
{
	RangeTblEntry *target = rt_fetch(query->resultRelation, query->rtable);
	DistTableCacheEntry *entry = GetDistTableCacheEntry(target->relid);
	List	   *fromlist = query->jointree->fromlist;
	Index		valuesIndex = 0;
	List	   *rows;
	List	   *columns;
	List	   *customExprs = NIL;
	List	   *paramExprs;
	DistributedJob job;
	ListCell   *cell;
	int			distColumn;

	if (list_length(fromlist) == 1 && IsA(linitial(fromlist), RangeTblRef))
	{
		Index		rtindex = ((RangeTblRef *) linitial(fromlist))->rtindex;

		if (rt_fetch(rtindex, query->rtable)->rtekind == RTE_VALUES)
			valuesIndex = rtindex;
	}
	if (fromlist != NIL && valuesIndex == 0)
		return PlanInsertSelect(query, cursorOptions, boundParams);

	/*
	 * Subqueries (and the CTEs they may read) in the values need a plan of
	 * their own: the rows are computed like those of an INSERT ... SELECT.
	 */
	if (query->cteList != NIL ||
		checkExprHasSubLink((Node *) query->targetList) ||
		(valuesIndex > 0 &&
		 checkExprHasSubLink((Node *) rt_fetch(valuesIndex, query->rtable)->values_lists)))
		return PlanInsertSelect(query, cursorOptions, boundParams);

	columns = InsertColumns(query, entry, &distColumn);

	/* the rows, each a list of column values */
	if (valuesIndex == 0)
	{
		List	   *row = NIL;

		foreach(cell, columns)
			row = lappend(row, ((TargetEntry *) lfirst(cell))->expr);
		rows = list_make1(row);
	}
	else
	{
		RangeTblEntry *values = rt_fetch(valuesIndex, query->rtable);
		ListCell   *rowCell;

		rows = NIL;
		foreach(rowCell, values->values_lists)
		{
			ValuesRowContext context = {valuesIndex, lfirst(rowCell)};
			List	   *row = NIL;

			foreach(cell, columns)
				row = lappend(row, SubstituteValuesRow((Node *) ((TargetEntry *) lfirst(cell))->expr,
													   &context));
			rows = lappend(rows, row);
		}
	}

	InitInsertJob(&job, query, entry, columns, distColumn, &paramExprs);
	/*
	 * A single row's statement is prepared per connection, and so are the
	 * statements of its global index entries, also where row and entry
	 * share a node (MergeIndexTasks): such a text names a pair of shards,
	 * prepared at its first use on a connection, and saves parsing and
	 * planning from then on.  Once a connection has MAX_PREPARED_STATEMENTS,
	 * further texts go unnamed.
	 */
	job.usePrepared = (list_length(rows) == 1 &&
					   (job.gindexMode == GINDEX_NONE || job.gindexMode == GINDEX_INSERT_ROWS));
	job.insertRowCount = list_length(rows);

	foreach(cell, paramExprs)
		customExprs = lappend(customExprs, expression_planner(lfirst(cell)));
	foreach(cell, rows)
	{
		ListCell   *valueCell;

		foreach(valueCell, (List *) lfirst(cell))
		{
			Node	   *value = lfirst(valueCell);

			if (IsA(value, SetToDefault))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("DEFAULT in this INSERT into distributed table \"%s\" is not supported",
								get_rel_name(target->relid))));
			customExprs = lappend(customExprs, expression_planner((Expr *) value));
		}
	}

	return MakeDistributedPlannedStmt(query, MakeDistributedScan(&job, customExprs),
									  query->returningList);
}
