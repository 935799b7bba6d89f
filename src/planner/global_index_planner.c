/*-------------------------------------------------------------------------
 *
 * global_index_planner.c
 *	  The planner's side of global indexes: which writes maintain them and
 *	  how (DistributedJob.gindexMode, see executor/
 *	  global_index_maintenance.c), the SQL of the hidden columns and of the
 *	  locking SELECT, the writes refused, and pruning by a global index
 *	  (WHERE email = $1 looks the value up in the index first).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "shardext/global_index.h"
#include "shardext/pg_compat.h"
#include "shardext/planner.h"
#include "shardext/remote_sql.h"

static bool IndexCoversAttnum(GlobalIndex *index, AttrNumber attnum);
static List *HiddenAttnums(DistTableCacheEntry *entry, List *indexes);
static void AppendHiddenColumns(StringInfo buf, Oid relid, const char *alias, List *attnums);
static GlobalIndex *ArbiterGlobalIndex(Query *query, List *indexes);
static Node *IndexColumnValue(Node *clause, Index rtindex, AttrNumber attno, Oid type,
							  Oid collation, bool first, bool *any);
static bool IsColumnEquality(Oid opno, Oid type, Oid inputCollation, Oid collation,
							 bool first);

/* depth of writes shardext itself makes to index tables (see global_index.h) */
int			GlobalIndexInternalWriteDepth = 0;

static bool
IndexCoversAttnum(GlobalIndex *index, AttrNumber attnum)
{
	for (int i = 0; i < index->columnCount; i++)
	{
		if (index->baseAttnums[i] == attnum)
			return true;
	}
	return false;
}

/*
 * HiddenAttnums: the base columns an index entry needs -- the indexed
 * columns of the indexes, then the distribution column -- each once.
 */
static List *
HiddenAttnums(DistTableCacheEntry *entry, List *indexes)
{
	List	   *result = NIL;
	ListCell   *cell;

	foreach(cell, indexes)
	{
		GlobalIndex *index = lfirst(cell);

		for (int i = 0; i < index->columnCount; i++)
			result = list_append_unique_int(result, index->baseAttnums[i]);
	}
	return list_append_unique_int(result, entry->distAttnum);
}

/* appends ", alias.a, alias.b" for the hidden columns */
static void
AppendHiddenColumns(StringInfo buf, Oid relid, const char *alias, List *attnums)
{
	ListCell   *cell;

	foreach(cell, attnums)
		appendStringInfo(buf, ", %s.%s", alias,
						 quote_identifier(get_attname(relid, lfirst_int(cell), false)));
}

/*
 * RejectIndexTableWrite refuses writes to the index table of a global index
 * that do not come from shardext itself.
 */
void
RejectIndexTableWrite(Oid relid, const char *command)
{
	DistTableCacheEntry *entry;

	if (GlobalIndexInternalWriteDepth > 0)
		return;
	entry = GetDistTableCacheEntry(relid);
	if (entry == NULL || !OidIsValid(entry->globalIndexBase))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("cannot %s \"%s\": it is the index table of a global index",
					command, get_rel_name(relid)),
			 errdetail("shardext keeps it in step with table \"%s\".",
					   get_rel_name(entry->globalIndexBase)),
			 errhint("Write to table \"%s\", or drop the index with "
					 "shardext_drop_global_index().", get_rel_name(entry->globalIndexBase))));
}

/*
 * RejectMergeWithGlobalIndexes: MERGE does not maintain global indexes.
 */
void
RejectMergeWithGlobalIndexes(Oid relid)
{
	List	   *indexes = TableGlobalIndexes(relid);

	if (indexes == NIL)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("MERGE on table \"%s\" with global index \"%s\" is not supported",
					get_rel_name(relid), ((GlobalIndex *) linitial(indexes))->name),
			 errhint("Use INSERT ... ON CONFLICT, UPDATE and DELETE, which keep global "
					 "indexes in step.")));
}

/*
 * ArbiterGlobalIndex returns the unique global index whose columns are the
 * conflict target of an INSERT ... ON CONFLICT, or NULL.
 */
static GlobalIndex *
ArbiterGlobalIndex(Query *query, List *indexes)
{
	OnConflictExpr *onConflict = query->onConflict;
	ListCell   *cell;

	if (onConflict->arbiterElems == NIL || onConflict->arbiterWhere != NULL)
		return NULL;
	foreach(cell, indexes)
	{
		GlobalIndex *index = lfirst(cell);
		ListCell   *elemCell;
		int			matched = 0;

		if (!index->isUnique)
			continue;
		foreach(elemCell, onConflict->arbiterElems)
		{
			InferenceElem *elem = lfirst(elemCell);
			Var		   *var = (Var *) elem->expr;

			if (IsA(var, Var) && var->varno == query->resultRelation &&
				IndexCoversAttnum(index, var->varattno) &&
				!OidIsValid(elem->infercollid) && !OidIsValid(elem->inferopclass))
				matched++;
		}
		if (matched == list_length(onConflict->arbiterElems) &&
			matched == index->columnCount)
			return index;
	}
	return NULL;
}

/*
 * PlanGlobalIndexInsert decides how an INSERT into a table with global
 * indexes maintains them (job->gindex*) and returns the ON CONFLICT clause
 * the shard statement must carry: query's own, or none when the conflict
 * target is a global index (its entries are inserted first).  columns are
 * the INSERT's target entries.  Refuses the ON CONFLICT forms that cannot
 * keep the indexes exact.
 */
OnConflictExpr *
PlanGlobalIndexInsert(Query *query, DistTableCacheEntry *entry, List *columns,
					  DistributedJob *job)
{
	List	   *indexes = entry->globalIndexes;
	OnConflictExpr *onConflict = query->onConflict;
	Oid			relid = entry->relid;
	GlobalIndex *arbiter;
	ListCell   *cell;

	job->gindexMode = GINDEX_NONE;
	if (indexes == NIL)
		return onConflict;
	foreach(cell, columns)
		job->insertAttnums = lappend_int(job->insertAttnums, ((TargetEntry *) lfirst(cell))->resno);

	if (onConflict == NULL)
	{
		job->gindexMode = GINDEX_INSERT_ROWS;
		job->gindexRelids = GlobalIndexRelids(indexes);
		return NULL;
	}

	arbiter = ArbiterGlobalIndex(query, indexes);
	if (arbiter != NULL)
	{
		if (onConflict->action != ONCONFLICT_NOTHING)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("ON CONFLICT DO UPDATE on global index \"%s\" is not supported",
							arbiter->name),
					 errdetail("The conflicting row may be in another shard than the new one."),
					 errhint("Use ON CONFLICT (...) DO NOTHING, then UPDATE the existing row by "
							 "its indexed columns.")));
		job->gindexMode = GINDEX_ARBITER_FIRST;
		job->gindexArbiter = arbiter->indexRelid;
		job->gindexRelids = list_delete_oid(GlobalIndexRelids(indexes), arbiter->indexRelid);
		return NULL;
	}

	/* the conflict target is a constraint of the table's shards */
	if (onConflict->arbiterElems == NIL && !OidIsValid(onConflict->constraint))
	{
		foreach(cell, indexes)
		{
			GlobalIndex *index = lfirst(cell);

			if (index->isUnique)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("ON CONFLICT DO NOTHING without a conflict target on table \"%s\" "
								"with unique global index \"%s\" is not supported",
								get_rel_name(relid), index->name),
						 errhint("Name the conflict target, for example ON CONFLICT (%s) DO NOTHING.",
								 get_attname(relid, index->baseAttnums[0], false))));
		}
	}
	if (onConflict->action == ONCONFLICT_UPDATE)
	{
		foreach(cell, onConflict->onConflictSet)
		{
			TargetEntry *tle = lfirst(cell);
			ListCell   *indexCell;

			if (tle->resjunk)
				continue;
			foreach(indexCell, indexes)
			{
				GlobalIndex *index = lfirst(indexCell);

				if (IndexCoversAttnum(index, tle->resno))
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("ON CONFLICT DO UPDATE SET of column \"%s\" of global index \"%s\" "
									"is not supported", get_attname(relid, tle->resno, false),
									index->name),
							 errhint("Update the column with a separate UPDATE.")));
			}
		}
	}
	job->gindexMode = GINDEX_RETURNED;
	job->gindexRelids = GlobalIndexRelids(indexes);
	job->hiddenLead = GINDEX_LEAD_INSERTED;
	job->hiddenAttnums = HiddenAttnums(entry, indexes);
	return onConflict;
}

/*
 * HiddenInsertReturning returns what an INSERT ... ON CONFLICT with hidden
 * columns appends to its shard statement: whether the row was inserted (a
 * row ON CONFLICT DO UPDATE changed carries the updating transaction in
 * xmax, as the lock it took on the old version passes on to the new one;
 * an inserted one has none) and the hidden columns.
 */
char *
HiddenInsertReturning(Query *query, DistributedJob *job, const char *alias)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "%s(%s.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid)",
					 query->returningList != NIL ? ", " : " RETURNING ", alias);
	AppendHiddenColumns(&buf, rt_fetch(query->resultRelation, query->rtable)->relid, alias,
						job->hiddenAttnums);
	return buf.data;
}

/*
 * PlanGlobalIndexModify decides how an UPDATE or DELETE maintains the
 * global indexes of its table: a DELETE returns the entries of the rows it
 * deletes; an UPDATE that sets indexed columns of some indexes locks and
 * reads the rows first (GINDEX_LOCK_THEN_UPDATE); other UPDATEs change no
 * entry.
 */
void
PlanGlobalIndexModify(Query *query, DistTableCacheEntry *entry, DistributedJob *job)
{
	List	   *affected = NIL;
	ListCell   *cell;

	job->gindexMode = GINDEX_NONE;
	if (entry->globalIndexes == NIL)
		return;
	if (query->commandType == CMD_DELETE)
		affected = entry->globalIndexes;
	else
	{
		foreach(cell, entry->globalIndexes)
		{
			GlobalIndex *index = lfirst(cell);
			ListCell   *tleCell;

			foreach(tleCell, query->targetList)
			{
				TargetEntry *tle = lfirst(tleCell);

				if (!tle->resjunk && IndexCoversAttnum(index, tle->resno))
				{
					affected = lappend(affected, index);
					break;
				}
			}
		}
	}
	if (affected == NIL)
		return;
	job->gindexMode = query->commandType == CMD_DELETE ? GINDEX_RETURNED : GINDEX_LOCK_THEN_UPDATE;
	job->gindexRelids = GlobalIndexRelids(affected);
	job->hiddenLead = query->commandType == CMD_DELETE ? GINDEX_LEAD_NONE :
		GINDEX_LEAD_OLD_POSITION;
	job->hiddenAttnums = HiddenAttnums(entry, affected);
}

/*
 * AppendHiddenReturning appends the hidden columns to the RETURNING clause
 * of an UPDATE or DELETE being deparsed (after the query's own).
 */
void
AppendHiddenReturning(RemoteSql *sql, Query *query, DistributedJob *job)
{
	Oid			relid = rt_fetch(query->resultRelation, query->rtable)->relid;
	char	   *alias = RemoteSqlAlias(sql, 0, query->resultRelation);
	bool		first = true;
	ListCell   *cell;

	appendStringInfoString(&sql->buf, query->returningList != NIL ? ", " : " RETURNING ");
	if (job->hiddenLead == GINDEX_LEAD_OLD_POSITION)
	{
		appendStringInfoString(&sql->buf, "shardext_old.old_position");
		first = false;
	}
	foreach(cell, job->hiddenAttnums)
	{
		appendStringInfo(&sql->buf, "%s%s.%s", first ? "" : ", ", alias,
						 quote_identifier(get_attname(relid, lfirst_int(cell), false)));
		first = false;
	}
}

/*
 * DeparseLockingSelect deparses the locking SELECT of an UPDATE of indexed
 * columns into sql (which the caller started): the target's ctid and hidden
 * columns of the rows the UPDATE's WHERE clause (and FROM list) select,
 * FOR UPDATE of the target.  Its parameter $1 is reserved (the UPDATE's
 * array of ctids): the caller seeds sql->paramExprs with it.
 */
void
DeparseLockingSelect(RemoteSql *sql, Query *query, DistributedJob *job)
{
	RangeTblEntry *target = rt_fetch(query->resultRelation, query->rtable);
	char	   *alias;
	ListCell   *cell;

	RemoteSqlPushQuery(sql, query);
	alias = RemoteSqlAlias(sql, 0, query->resultRelation);
	appendStringInfo(&sql->buf, "SELECT %s.ctid", alias);
	AppendHiddenColumns(&sql->buf, target->relid, alias, job->hiddenAttnums);
	appendStringInfoString(&sql->buf, " FROM ONLY ");
	RemoteSqlAppendRelation(sql, target->relid);
	appendStringInfo(&sql->buf, " %s", alias);
	foreach(cell, query->jointree->fromlist)
	{
		Node	   *item = lfirst(cell);

		if (IsA(item, RangeTblRef) && ((RangeTblRef *) item)->rtindex == query->resultRelation)
			continue;
		appendStringInfoString(&sql->buf, ", ");
		DeparseRemoteFromItem(sql, item);
	}
	if (query->jointree->quals != NULL)
	{
		appendStringInfoString(&sql->buf, " WHERE ");
		DeparseRemoteExpr(sql, FlattenAliasVars(query, query->jointree->quals));
	}
	appendStringInfo(&sql->buf, " FOR UPDATE OF %s", alias);
	RemoteSqlPopQuery(sql);
}

/* the reserved $1 of an UPDATE of indexed columns: its ctids */
Node *
LockedCtidsParam(void)
{
	return (Node *) makeNullConst(TIDARRAYOID, -1, InvalidOid);
}

/*
 * IsColumnEquality: is opno the equality of the column type's default
 * btree operator class (and, for the first column, by which the index is
 * distributed, of its hash operator class), under a collation that treats
 * equality as the column's does?
 */
static bool
IsColumnEquality(Oid opno, Oid type, Oid inputCollation, Oid collation, bool first)
{
	TypeCacheEntry *typentry = lookup_type_cache(type, TYPECACHE_EQ_OPR |
												 TYPECACHE_HASH_OPFAMILY);

	if (opno != typentry->eq_opr)
		return false;
	if (first && (!OidIsValid(typentry->hash_opf) || !op_in_opfamily(opno, typentry->hash_opf)))
		return false;
	if (OidIsValid(inputCollation) && inputCollation != collation &&
		(!get_collation_isdeterministic(inputCollation) ||
		 !get_collation_isdeterministic(collation)))
		return false;
	return true;
}

/*
 * IndexColumnValue returns the value a clause pins column attno of range
 * table entry rtindex to (column = value, value referring to no column;
 * *any for column = ANY (array)), converted to the column's type, or NULL.
 * The first column's equality must also be the hash operator class's (the
 * index table is distributed by it).
 */
static Node *
IndexColumnValue(Node *clause, Index rtindex, AttrNumber attno, Oid type, Oid collation,
				 bool first, bool *any)
{
	Node	   *other = NULL;
	Oid			opno = InvalidOid;
	Oid			inputCollation = InvalidOid;

	*any = false;
	if (IsA(clause, OpExpr) && list_length(((OpExpr *) clause)->args) == 2)
	{
		OpExpr	   *op = (OpExpr *) clause;

		for (int side = 0; side < 2 && other == NULL; side++)
		{
			Var		   *var = (Var *) StripRelabel(list_nth(op->args, side));

			if (IsA(var, Var) && var->varno == rtindex && var->varlevelsup == 0 &&
				var->varattno == attno)
				other = list_nth(op->args, 1 - side);
		}
		opno = op->opno;
		inputCollation = op->inputcollid;
	}
	else if (IsA(clause, ScalarArrayOpExpr) && ((ScalarArrayOpExpr *) clause)->useOr)
	{
		ScalarArrayOpExpr *op = (ScalarArrayOpExpr *) clause;
		Var		   *var = (Var *) StripRelabel(linitial(op->args));

		if (IsA(var, Var) && var->varno == rtindex && var->varlevelsup == 0 &&
			var->varattno == attno)
		{
			other = lsecond(op->args);
			*any = true;
		}
		opno = op->opno;
		inputCollation = op->inputcollid;
	}
	if (other == NULL || ContainsAnyVar(other) || contain_volatile_functions(other) ||
		!IsColumnEquality(opno, type, inputCollation, collation, first))
		return NULL;
	{
		Oid			target = *any ? get_array_type(type) : type;
		Oid			source = exprType(other);

		if (!OidIsValid(target))
			return NULL;
		if (source == target)
			return other;
		return coerce_to_target_type(NULL, other, source, target, -1, COERCION_IMPLICIT,
									 COERCE_IMPLICIT_CAST, -1);
	}
}

/*
 * FindGlobalIndexPruning adds to values, kinds and indexes the lookup of a
 * global index of the table at rtindex whose every column the conjuncts in
 * quals pin (col = value; col = ANY (array) for a one-column index), when
 * they do not pin its distribution column already.  *indexes runs parallel
 * to *kinds (InvalidOid for plain pruning values); it is filled in for the
 * values before as well.  A unique index is preferred, then one of more
 * columns.
 */
void
FindGlobalIndexPruning(Query *query, Index rtindex, DistTableCacheEntry *entry, Node *quals,
					   List **values, List **kinds, List **indexes)
{
	List	   *conjuncts = NIL;
	List	   *plainValues = NIL;
	List	   *plainKinds = NIL;
	GlobalIndex *best = NULL;
	List	   *bestValues = NIL;
	bool		bestAny = false;
	ListCell   *cell;

	if (entry == NULL || entry->globalIndexes == NIL)
		return;
	FindPruningValues(query, rtindex, entry, quals, &plainValues, &plainKinds);
	if (plainValues != NIL)
		return;
	CollectConjuncts(quals, &conjuncts);

	foreach(cell, entry->globalIndexes)
	{
		GlobalIndex *index = lfirst(cell);
		List	   *found = NIL;
		bool		any = false;

		for (int c = 0; c < index->columnCount; c++)
		{
			AttrNumber	attno = index->baseAttnums[c];
			Oid			type;
			int32		typmod;
			Oid			collation;
			Node	   *value = NULL;
			ListCell   *conjunctCell;

			get_atttypetypmodcoll(entry->relid, attno, &type, &typmod, &collation);
			foreach(conjunctCell, conjuncts)
			{
				bool		isAny;

				value = IndexColumnValue(lfirst(conjunctCell), rtindex, attno, type,
										 collation, c == 0, &isAny);
				if (value != NULL && (!isAny || index->columnCount == 1))
				{
					any = isAny;
					break;
				}
				value = NULL;
			}
			if (value == NULL)
				break;
			found = lappend(found, value);
		}
		if (list_length(found) != index->columnCount)
			continue;
		if (best == NULL || (index->isUnique && !best->isUnique) ||
			(index->isUnique == best->isUnique && index->columnCount > best->columnCount))
		{
			best = index;
			bestValues = found;
			bestAny = any;
		}
	}
	if (best == NULL)
		return;

	while (list_length(*indexes) < list_length(*kinds))
		*indexes = lappend_oid(*indexes, InvalidOid);
	foreach(cell, bestValues)
	{
		*values = lappend(*values, lfirst(cell));
		*kinds = lappend_int(*kinds, cell == list_head(bestValues) ?
							 (bestAny ? PRUNE_GINDEX_ANY : PRUNE_GINDEX_EQUAL) :
							 PRUNE_GINDEX_NEXT);
		*indexes = lappend_oid(*indexes, best->indexRelid);
	}
}
