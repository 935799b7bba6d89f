/*-------------------------------------------------------------------------
 *
 * global_index_writes.c
 *	  Writing the changes of a statement to the index tables of the global
 *	  indexes of its table, in the same distributed transaction.
 *
 * A statement's writers add one change per base row and index: +1 for an
 * entry the row now has, -1 for one it no longer has (an UPDATE of indexed
 * values adds both).  Rows with a NULL among the indexed values have no
 * entry.  The changes of one index are sorted (spilling beyond work_mem) by
 * the hash of the first indexed value -- the index table is distributed by
 * it, so each shard's changes are consecutive -- then by the values and the
 * distribution value, and equal entries are added up.  What is left is
 * written shard by shard: first the entries that go away (DELETE, or for a
 * non-unique index a lower row count and DELETE of the entries that reach
 * zero), then the new ones (INSERT; ON CONFLICT adds to the row count of a
 * non-unique index).  A unique index's shard rejects a second entry of a
 * value with PostgreSQL's own unique violation, which is reported under
 * the global index's name.  The index shards are locked (in id order, as
 * every writer does) before their placements are looked at, so shard moves
 * and splits of index tables hold their writers like any others.
 *
 * Deletes go first so that a statement that moves a value from one row to
 * another (two rows trading values) does not trip over itself.
 *
 * A removal must find an entry whose insertion is not visible yet.  The
 * writer of a row commits on the row's node and on the index shard's node
 * separately (COMMIT PREPARED reaches them one after the other), so a
 * statement may see the row of a transaction that is still prepared on the
 * index shard, and read its indexed value there; a plain DELETE or UPDATE
 * of the entry skips the invisible new entry and the entry stays behind
 * when that transaction's commit arrives.  So removals go through
 * INSERT ... ON CONFLICT, whose unique check waits for the transaction
 * that inserted the entry (as a unique index makes an inserter wait):
 * a unique index's entries are first claimed (ON CONFLICT DO NOTHING:
 * afterwards the entry exists and is visible) and then deleted, and a
 * non-unique index's row counts are lowered by an upsert of the negative
 * count before the entries that reach zero are deleted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/sortsupport.h"
#include "utils/syscache.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"

#include "shardext/distributed_executor.h"
#include "shardext/global_index.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/remote_sql.h"
#include "shardext/resource_lock.h"

/* rows of one INSERT, DELETE or UPDATE statement sent to an index shard */
#define INDEX_BATCH_ROWS 1000
/* changes sent per round of tasks (bounds the memory of the statements) */
#define INDEX_ROUND_ROWS 20000

/* the pending changes of one global index */
typedef struct IndexChangeSet
{
	Oid			indexRelid;
	char	   *name;
	bool		isUnique;
	int			keyCount;
	AttrNumber *baseAttnums;	/* indexed columns, then the distribution column */
	Oid		   *types;			/* of those columns */
	Oid		   *collations;
	char	  **columnNames;	/* quoted; then the row count column */
	TupleDesc	desc;			/* hash, keys..., distribution value, delta */
	Tuplesortstate *sort;
	SortSupport compare;		/* keys and distribution value */
	int64		count;			/* changes added */
	Datum	   *values;			/* of one row being added */
	bool	   *nulls;
	TupleTableSlot *slot;		/* that row, for the sort */
} IndexChangeSet;

struct GlobalIndexChanges
{
	Oid			baseRelid;
	MemoryContext context;
	List	   *sets;			/* IndexChangeSet * */
};

/* the entries of one shard that a statement changes, by direction */
typedef struct ShardBatch
{
	ShardInterval *shard;
	List	   *removed;		/* HeapTuple (net delta < 0) */
	List	   *added;			/* HeapTuple (net delta > 0) */
} ShardBatch;

static IndexChangeSet *MakeChangeSet(Oid baseRelid, GlobalIndex *index, MemoryContext context);
static void BeginSort(IndexChangeSet *set);
static void ApplyChangeSet(IndexChangeSet *set, List **lastRound);
static DistTableCacheEntry *LockIndexShards(IndexChangeSet *set);
static bool SameValues(IndexChangeSet *set, HeapTuple a, HeapTuple b, bool withDistribution);
static void AddNetEntry(IndexChangeSet *set, DistTableCacheEntry *entry, ShardBatch *batch,
						HeapTuple tuple, int64 net, List **tasks);
static List *ShardBatchTasks(IndexChangeSet *set, DistTableCacheEntry *entry, ShardBatch *batch);
static RemoteTask *EntryTask(IndexChangeSet *set, ShardInterval *shard, List *tuples,
							 int first, int count, int kind);
struct ParamSql;
static void AppendEntryInsert(struct ParamSql *sql, RemoteParams *params, IndexChangeSet *set,
							  const char *shardName, List *tuples, int first, int count,
							  int kind);
static void AppendValuesList(struct ParamSql *sql, RemoteParams *params, IndexChangeSet *set,
							 List *tuples, int first, int count, bool withDelta, bool negate);
static void NoteUniqueShard(RemoteTask *task, IndexChangeSet *set, ShardInterval *shard);
static void AppendEntryMatch(StringInfo sql, IndexChangeSet *set, const char *left,
							 const char *right);
static GlobalIndex *FindIndexOf(Oid baseRelid, Oid indexRelid);
struct ArbiterBatch;
static RemoteTask *ArbiterTask(IndexChangeSet *set, ShardInterval *shard,
							   struct ArbiterBatch *batch);
static void AdmitReturnedRow(RemoteTask *task, PGresult *row, void *arg);

/* what an EntryTask does */
#define ENTRY_INSERT 0			/* add entries (a non-unique one's count) */
#define ENTRY_DELETE 1			/* delete unique entries */
#define ENTRY_DECREMENT 2		/* lower a non-unique entry's count (upsert) */
#define ENTRY_DELETE_EMPTY 3	/* delete non-unique entries of count <= 0 */
#define ENTRY_CLAIM 4			/* wait for unique entries' inserters */

/* the global index of baseRelid whose index table is indexRelid */
static GlobalIndex *
FindIndexOf(Oid baseRelid, Oid indexRelid)
{
	ListCell   *cell;

	foreach(cell, TableGlobalIndexes(baseRelid))
	{
		GlobalIndex *index = lfirst(cell);

		if (index->indexRelid == indexRelid)
			return index;
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("the global indexes of table \"%s\" changed during planning",
					get_rel_name(baseRelid)),
			 errhint("Run the statement again.")));
	return NULL;
}

/*
 * StartGlobalIndexChanges starts collecting the changes of a statement to
 * the given global indexes (index table OIDs) of a table, in the current
 * memory context.
 */
GlobalIndexChanges *
StartGlobalIndexChanges(Oid baseRelid, List *indexRelids)
{
	GlobalIndexChanges *changes = palloc0(sizeof(GlobalIndexChanges));
	ListCell   *cell;

	changes->baseRelid = baseRelid;
	changes->context = AllocSetContextCreate(CurrentMemoryContext, "shardext global index changes",
											 ALLOCSET_DEFAULT_SIZES);
	foreach(cell, indexRelids)
	{
		GlobalIndex *index = FindIndexOf(baseRelid, lfirst_oid(cell));

		changes->sets = lappend(changes->sets, MakeChangeSet(baseRelid, index, changes->context));
	}
	return changes;
}

/* MakeChangeSet describes an index's entries for sorting and writing */
static IndexChangeSet *
MakeChangeSet(Oid baseRelid, GlobalIndex *index, MemoryContext context)
{
	MemoryContext oldContext = MemoryContextSwitchTo(context);
	IndexChangeSet *set = palloc0(sizeof(IndexChangeSet));
	DistTableCacheEntry *base = GetDistTableCacheEntry(baseRelid);
	int			columns = index->columnCount + 1;

	set->indexRelid = index->indexRelid;
	set->name = pstrdup(index->name);
	set->isUnique = index->isUnique;
	set->keyCount = index->columnCount;
	set->baseAttnums = palloc(sizeof(AttrNumber) * columns);
	set->types = palloc(sizeof(Oid) * columns);
	set->collations = palloc(sizeof(Oid) * columns);
	set->columnNames = palloc(sizeof(char *) * (columns + 1));
	set->desc = CreateTemplateTupleDesc(columns + 2);
	TupleDescInitEntry(set->desc, 1, "hash", INT4OID, -1, 0);
	for (int i = 0; i < columns; i++)
	{
		AttrNumber	attnum = i < index->columnCount ? index->baseAttnums[i] : base->distAttnum;
		int32		typmod;

		set->baseAttnums[i] = attnum;
		get_atttypetypmodcoll(baseRelid, attnum, &set->types[i], &typmod, &set->collations[i]);
		set->columnNames[i] = pstrdup(quote_identifier(get_attname(baseRelid, attnum, false)));
		TupleDescInitEntry(set->desc, i + 2, NULL, set->types[i], -1, 0);
		TupleDescInitEntryCollation(set->desc, i + 2, set->collations[i]);
	}
	set->columnNames[columns] = index->isUnique ? NULL :
		pstrdup(quote_identifier(GlobalIndexCountColumn(baseRelid, index->baseAttnums,
														index->columnCount)));
	TupleDescInitEntry(set->desc, columns + 2, "delta", INT8OID, -1, 0);
	FinishTupleDesc(set->desc);

	set->compare = palloc0(sizeof(SortSupportData) * columns);
	for (int i = 0; i < columns; i++)
	{
		TypeCacheEntry *type = lookup_type_cache(set->types[i], TYPECACHE_LT_OPR);

		set->compare[i].ssup_cxt = context;
		set->compare[i].ssup_collation = set->collations[i];
		set->compare[i].ssup_nulls_first = false;
		PrepareSortSupportFromOrderingOp(type->lt_opr, &set->compare[i]);
	}
	set->values = palloc(sizeof(Datum) * (columns + 2));
	set->nulls = palloc0(sizeof(bool) * (columns + 2));
	set->slot = MakeSingleTupleTableSlot(set->desc, &TTSOpsVirtual);
	BeginSort(set);
	MemoryContextSwitchTo(oldContext);
	return set;
}

/* BeginSort starts the sort of a set's changes: by hash, values, distribution value */
static void
BeginSort(IndexChangeSet *set)
{
	int			keys = set->keyCount + 2;
	AttrNumber *attnums = palloc(sizeof(AttrNumber) * keys);
	Oid		   *operators = palloc(sizeof(Oid) * keys);
	Oid		   *collations = palloc(sizeof(Oid) * keys);
	bool	   *nullsFirst = palloc0(sizeof(bool) * keys);

	for (int i = 0; i < keys; i++)
	{
		Oid			type = TupleDescAttr(set->desc, i)->atttypid;

		attnums[i] = i + 1;
		operators[i] = lookup_type_cache(type, TYPECACHE_LT_OPR)->lt_opr;
		collations[i] = TupleDescAttr(set->desc, i)->attcollation;
	}
	set->sort = tuplesort_begin_heap(set->desc, keys, attnums, operators, collations,
									 nullsFirst, work_mem, NULL, TUPLESORT_RANDOMACCESS);
	set->count = 0;
}

/*
 * AddGlobalIndexRow adds the changes of one base row to every index: its
 * entry counts delta times (+1 inserted, -1 deleted).  values() returns the
 * row's value of a base column (false for NULL).
 */
void
AddGlobalIndexRow(GlobalIndexChanges *changes, BaseValueFunction values, void *arg, int64 delta)
{
	ListCell   *cell;

	foreach(cell, changes->sets)
	{
		IndexChangeSet *set = lfirst(cell);
		int			columns = set->keyCount + 1;
		bool		complete = true;
		DistTableCacheEntry *entry;
		MemoryContext oldContext;

		for (int i = 0; i < columns && complete; i++)
			complete = values(set->baseAttnums[i], &set->values[i + 1], arg);
		if (!complete)
			continue;			/* NULL among the values: no entry */
		entry = GetDistTableCacheEntry(set->indexRelid);
		if (entry == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("global index \"%s\" was dropped during the statement", set->name)));
		set->values[0] = Int32GetDatum(HashDistributionValue(entry, set->values[1]));
		set->values[columns + 1] = Int64GetDatum(delta);
		oldContext = MemoryContextSwitchTo(changes->context);
		ExecClearTuple(set->slot);
		memcpy(set->slot->tts_values, set->values, sizeof(Datum) * set->desc->natts);
		memcpy(set->slot->tts_isnull, set->nulls, sizeof(bool) * set->desc->natts);
		ExecStoreVirtualTuple(set->slot);
		tuplesort_puttupleslot(set->sort, set->slot);
		MemoryContextSwitchTo(oldContext);
		set->count++;
	}
}

/*
 * ApplyGlobalIndexChanges writes what was added so far to the index shards
 * and starts afresh (an INSERT ... SELECT applies batch by batch).  With
 * lastRound, the statements of the last round are not run but returned
 * there (allocated in the caller's memory), for the caller to run together
 * with its own tasks; they return no rows.
 */
void
ApplyGlobalIndexChanges(GlobalIndexChanges *changes, List **lastRound)
{
	ListCell   *cell;

	if (lastRound != NULL)
		*lastRound = NIL;
	if (changes == NULL)
		return;
	foreach(cell, changes->sets)
	{
		IndexChangeSet *set = lfirst(cell);
		MemoryContext oldContext;

		if (set->count == 0)
			continue;
		ApplyChangeSet(set, lastRound);
		tuplesort_end(set->sort);
		oldContext = MemoryContextSwitchTo(changes->context);
		BeginSort(set);
		MemoryContextSwitchTo(oldContext);
	}
}

/* EndGlobalIndexChanges releases the sorts (their temporary files) */
void
EndGlobalIndexChanges(GlobalIndexChanges *changes)
{
	ListCell   *cell;

	if (changes == NULL)
		return;
	foreach(cell, changes->sets)
		tuplesort_end(((IndexChangeSet *) lfirst(cell))->sort);
	changes->sets = NIL;
}

/*
 * LockIndexShards locks the index shards the sorted changes go to, in id
 * order, and returns the index table's cache entry after the locks; a split
 * that committed meanwhile changed the shards, so then it locks again.
 */
static DistTableCacheEntry *
LockIndexShards(IndexChangeSet *set)
{
	TupleTableSlot *slot = MakeSingleTupleTableSlot(set->desc, &TTSOpsMinimalTuple);

	for (;;)
	{
		DistTableCacheEntry *entry = GetDistTableCacheEntry(set->indexRelid);
		int64	   *ids = palloc(sizeof(int64) * Max(entry->shardCount, 1));
		int			count = 0;
		int			layoutCount = entry->shardCount;
		int64	   *layout = palloc(sizeof(int64) * Max(layoutCount, 1));
		bool		changed = false;

		for (int i = 0; i < layoutCount; i++)
			layout[i] = entry->shards[i].shardId;
		tuplesort_rescan(set->sort);
		while (tuplesort_gettupleslot(set->sort, true, false, slot, NULL))
		{
			bool		isnull;
			int32		hash = DatumGetInt32(slot_getattr(slot, 1, &isnull));
			int64		shardId = FindShardIntervalForHash(entry, hash)->shardId;

			/* sorted by hash: a shard's changes are consecutive */
			if (count == 0 || ids[count - 1] != shardId)
				ids[count++] = shardId;
		}
		LockShardsInOrder(ids, count, ShardWriteLockMode);
		entry = GetDistTableCacheEntry(set->indexRelid);
		if (entry == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("global index \"%s\" was dropped during the statement", set->name)));
		changed = entry->shardCount != layoutCount;
		for (int i = 0; !changed && i < layoutCount; i++)
			changed = entry->shards[i].shardId != layout[i];
		if (!changed)
		{
			ExecDropSingleTupleTableSlot(slot);
			return entry;
		}
	}
}

/*
 * SameValues: do two sorted change tuples have the same indexed values
 * (and, withDistribution, the same distribution value: the same entry)?
 */
static bool
SameValues(IndexChangeSet *set, HeapTuple a, HeapTuple b, bool withDistribution)
{
	int			columns = set->keyCount + (withDistribution ? 1 : 0);

	for (int i = 0; i < columns; i++)
	{
		bool		nullA;
		bool		nullB;
		Datum		valueA = heap_getattr(a, i + 2, set->desc, &nullA);
		Datum		valueB = heap_getattr(b, i + 2, set->desc, &nullB);

		if (ApplySortComparator(valueA, nullA, valueB, nullB, &set->compare[i]) != 0)
			return false;
	}
	return true;
}

/*
 * AddNetEntry puts an entry whose changes add up to net (not 0) into the
 * batch of its shard, after turning a finished batch of another shard into
 * tasks.  A unique index's entry goes in |net| times (a second copy is a
 * duplicate); a non-unique one's once, with |net| as its delta.
 */
static void
AddNetEntry(IndexChangeSet *set, DistTableCacheEntry *entry, ShardBatch *batch,
			HeapTuple tuple, int64 net, List **tasks)
{
	bool		isnull;
	int32		hash = DatumGetInt32(heap_getattr(tuple, 1, set->desc, &isnull));
	ShardInterval *shard = FindShardIntervalForHash(entry, hash);
	int64		count = net < 0 ? -net : net;
	List	  **target;

	if (batch->shard != shard)
	{
		if (batch->shard != NULL)
			*tasks = list_concat(*tasks, ShardBatchTasks(set, entry, batch));
		memset(batch, 0, sizeof(ShardBatch));
		batch->shard = shard;
	}
	target = net < 0 ? &batch->removed : &batch->added;
	if (set->isUnique)
	{
		for (int64 i = 0; i < count; i++)
			*target = lappend(*target, tuple);
	}
	else
	{
		Datum	   *values = palloc(sizeof(Datum) * set->desc->natts);
		bool	   *nulls = palloc(sizeof(bool) * set->desc->natts);

		heap_deform_tuple(tuple, set->desc, values, nulls);
		values[set->desc->natts - 1] = Int64GetDatum(count);
		*target = lappend(*target, heap_form_tuple(set->desc, values, nulls));
	}
}

/*
 * ApplyChangeSet adds up the changes of each entry and writes the result,
 * shard by shard.  The statements go out in rounds of about
 * INDEX_ROUND_ROWS entries, cut only where the indexed values change, so
 * that the removal of a value always goes before its addition.
 */
static void
ApplyChangeSet(IndexChangeSet *set, List **lastRound)
{
	MemoryContext callerContext = CurrentMemoryContext;
	MemoryContext roundContext = AllocSetContextCreate(CurrentMemoryContext,
													   "shardext global index round",
													   ALLOCSET_DEFAULT_SIZES);
	/* statements the caller runs are built in its memory */
	MemoryContext taskContext = lastRound != NULL ? callerContext : roundContext;
	DistTableCacheEntry *entry;
	TupleTableSlot *slot;
	HeapTuple	current = NULL;
	int64		net = 0;
	ShardBatch	batch;
	List	   *tasks = NIL;
	int			roundRows = 0;

	tuplesort_performsort(set->sort);
	entry = LockIndexShards(set);
	slot = MakeSingleTupleTableSlot(set->desc, &TTSOpsMinimalTuple);
	memset(&batch, 0, sizeof(batch));
	tuplesort_rescan(set->sort);
	MemoryContextSwitchTo(roundContext);
	for (;;)
	{
		bool		more = tuplesort_gettupleslot(set->sort, true, false, slot, NULL);
		HeapTuple	tuple = more ? ExecCopySlotHeapTuple(slot) : NULL;
		bool		isnull;

		if (current != NULL && (tuple == NULL || !SameValues(set, current, tuple, true)))
		{
			if (net != 0)
			{
				MemoryContextSwitchTo(taskContext);
				AddNetEntry(set, entry, &batch, current, net, &tasks);
				MemoryContextSwitchTo(roundContext);
				roundRows++;
			}
			if (tuple != NULL && lastRound == NULL && roundRows >= INDEX_ROUND_ROWS &&
				!SameValues(set, current, tuple, false))
			{
				/* a round is complete: send it, keep only the next tuple */
				if (batch.shard != NULL)
					tasks = list_concat(tasks, ShardBatchTasks(set, entry, &batch));
				ExecuteRemoteTasks(tasks, true, true, NULL, NULL);
				tasks = NIL;
				roundRows = 0;
				memset(&batch, 0, sizeof(batch));
				MemoryContextReset(roundContext);
				tuple = ExecCopySlotHeapTuple(slot);
			}
			current = NULL;
			net = 0;
		}
		if (tuple == NULL)
			break;
		if (current == NULL)
			current = tuple;
		net += DatumGetInt64(heap_getattr(tuple, set->desc->natts, set->desc, &isnull));
		CHECK_FOR_INTERRUPTS();
	}
	MemoryContextSwitchTo(taskContext);
	if (batch.shard != NULL)
		tasks = list_concat(tasks, ShardBatchTasks(set, entry, &batch));
	if (lastRound != NULL)
		*lastRound = list_concat(*lastRound, tasks);
	else
		ExecuteRemoteTasks(tasks, true, true, NULL, NULL);
	MemoryContextSwitchTo(callerContext);
	ExecDropSingleTupleTableSlot(slot);
	MemoryContextDelete(roundContext);
}

/*
 * ShardBatchTasks returns the statements that apply one shard's net
 * changes: removals first, then additions, in batches.
 */
static List *
ShardBatchTasks(IndexChangeSet *set, DistTableCacheEntry *entry, ShardBatch *batch)
{
	List	   *tasks = NIL;

	for (int first = 0; first < list_length(batch->removed); first += INDEX_BATCH_ROWS)
	{
		int			count = Min(INDEX_BATCH_ROWS, list_length(batch->removed) - first);

		/* see the header comment: first wait for the entries' inserters */
		if (set->isUnique)
		{
			tasks = lappend(tasks, EntryTask(set, batch->shard, batch->removed, first, count,
											 ENTRY_CLAIM));
			tasks = lappend(tasks, EntryTask(set, batch->shard, batch->removed, first, count,
											 ENTRY_DELETE));
		}
		else
		{
			tasks = lappend(tasks, EntryTask(set, batch->shard, batch->removed, first, count,
											 ENTRY_DECREMENT));
			tasks = lappend(tasks, EntryTask(set, batch->shard, batch->removed, first, count,
											 ENTRY_DELETE_EMPTY));
		}
	}
	for (int first = 0; first < list_length(batch->added); first += INDEX_BATCH_ROWS)
	{
		int			count = Min(INDEX_BATCH_ROWS, list_length(batch->added) - first);

		tasks = lappend(tasks, EntryTask(set, batch->shard, batch->added, first, count,
										 ENTRY_INSERT));
	}
	return tasks;
}

/*
 * The SQL of an index statement is kept as parts -- text (String) and
 * parameter numbers (Integer, 0-based) -- so that it can be numbered from
 * any offset when it joins another statement (MergeIndexTasks).
 */
typedef struct ParamSql
{
	StringInfoData buf;
	List	   *parts;
} ParamSql;

static void
FlushParamSql(ParamSql *sql)
{
	if (sql->buf.len > 0)
	{
		sql->parts = lappend(sql->parts, makeString(pstrdup(sql->buf.data)));
		resetStringInfo(&sql->buf);
	}
}

/* appends parameter n (0-based) cast to type */
static void
AppendParamPart(ParamSql *sql, int n, Oid type)
{
	FlushParamSql(sql);
	sql->parts = lappend(sql->parts, makeInteger(n));
	appendStringInfo(&sql->buf, "::%s", RemoteTypeName(type, -1));
}

/* the text of parts with parameter n as $(n + 1 + offset) */
static char *
AssembleParamSql(List *parts, int offset)
{
	StringInfoData buf;
	ListCell   *cell;

	initStringInfo(&buf);
	foreach(cell, parts)
	{
		Node	   *part = lfirst(cell);

		if (IsA(part, String))
			appendStringInfoString(&buf, strVal(part));
		else
			appendStringInfo(&buf, "$%d", intVal(part) + 1 + offset);
	}
	return buf.data;
}

/*
 * EntryTask builds the statement of count entries (from the first-th of
 * tuples) for an index shard: kind ENTRY_*.  Its SQL parts are kept in
 * taskPrivate.
 */
static RemoteTask *
EntryTask(IndexChangeSet *set, ShardInterval *shard, List *tuples, int first, int count,
		  int kind)
{
	RemoteTask *task = palloc0(sizeof(RemoteTask));
	int			columns = set->keyCount + 1;
	bool		withDelta = !set->isUnique && kind != ENTRY_DELETE_EMPTY;
	RemoteParams *params = MakeRemoteParams(count * (columns + (withDelta ? 1 : 0)));
	char	   *shardName = QualifiedShardName(set->indexRelid, shard->shardId);
	ParamSql	sql;

	initStringInfo(&sql.buf);
	sql.parts = NIL;
	if (kind == ENTRY_INSERT || kind == ENTRY_CLAIM || kind == ENTRY_DECREMENT)
		AppendEntryInsert(&sql, params, set, shardName, tuples, first, count, kind);
	else
	{
		appendStringInfo(&sql.buf, "DELETE FROM %s i USING (VALUES ", shardName);
		AppendValuesList(&sql, params, set, tuples, first, count, false, false);
		appendStringInfoString(&sql.buf, ") v (");
		for (int c = 0; c < columns; c++)
			appendStringInfo(&sql.buf, "%sc%d", c > 0 ? ", " : "", c + 1);
		appendStringInfoString(&sql.buf, ") WHERE ");
		AppendEntryMatch(&sql.buf, set, "i", "v");
		if (kind == ENTRY_DELETE_EMPTY)
			appendStringInfo(&sql.buf, " AND i.%s OPERATOR(pg_catalog.<=) 0",
							 set->columnNames[columns]);
	}
	if (kind == ENTRY_INSERT && set->isUnique)
		NoteUniqueShard(task, set, shard);
	FlushParamSql(&sql);
	task->sql = AssembleParamSql(sql.parts, 0);
	task->taskPrivate = sql.parts;
	task->params = params;
	task->shardId = shard->shardId;
	if (shard->placementCount != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shard " INT64_FORMAT " of global index \"%s\" has %d placements",
						shard->shardId, set->name, shard->placementCount)));
	task->nodeId = shard->placementNodeIds[0];
	task->returnsRows = false;
	return task;
}

/*
 * AppendEntryInsert appends the INSERT of an EntryTask of kind
 * ENTRY_INSERT (a unique index's entries plainly, a non-unique one's adding
 * to the row counts), ENTRY_CLAIM (a unique index's entries, ON CONFLICT DO
 * NOTHING: only the unique check's wait matters) or ENTRY_DECREMENT (a
 * non-unique index's row counts lowered by an upsert of their negative).
 */
static void
AppendEntryInsert(ParamSql *sql, RemoteParams *params, IndexChangeSet *set,
				  const char *shardName, List *tuples, int first, int count, int kind)
{
	StringInfo	buf = &sql->buf;
	int			columns = set->keyCount + 1;
	const char *countColumn = set->columnNames[columns];

	appendStringInfo(buf, "INSERT INTO %s AS i (", shardName);
	for (int c = 0; c < columns; c++)
		appendStringInfo(buf, "%s%s", c > 0 ? ", " : "", set->columnNames[c]);
	if (!set->isUnique)
		appendStringInfo(buf, ", %s", countColumn);
	appendStringInfoString(buf, ") VALUES ");
	AppendValuesList(sql, params, set, tuples, first, count, !set->isUnique,
					 kind == ENTRY_DECREMENT);
	if (kind == ENTRY_CLAIM)
		appendStringInfoString(buf, " ON CONFLICT DO NOTHING");
	else if (!set->isUnique)
	{
		appendStringInfoString(buf, " ON CONFLICT (");
		for (int c = 0; c < columns; c++)
			appendStringInfo(buf, "%s%s", c > 0 ? ", " : "", set->columnNames[c]);
		appendStringInfo(buf, ") DO UPDATE SET %s = i.%s OPERATOR(pg_catalog.+) excluded.%s",
						 countColumn, countColumn, countColumn);
	}
}

/*
 * NoteUniqueShard records that a task writes a shard of a unique global
 * index, so that its unique violations are reported under the index's name.
 */
static void
NoteUniqueShard(RemoteTask *task, IndexChangeSet *set, ShardInterval *shard)
{
	UniqueShard *unique = palloc(sizeof(UniqueShard));

	unique->relname = ShardTableName(set->indexRelid, shard->shardId);
	unique->indexName = set->name;
	task->uniqueShards = lappend(task->uniqueShards, unique);
}

/*
 * AppendValuesList appends "($1::t1, $2::t2, ...), (...)" for the entries
 * and sets their parameters; withDelta adds each entry's count (negated
 * with negate).
 */
static void
AppendValuesList(ParamSql *sql, RemoteParams *params, IndexChangeSet *set, List *tuples,
				 int first, int count, bool withDelta, bool negate)
{
	int			columns = set->keyCount + 1;
	int			n = 0;

	for (int r = 0; r < count; r++)
	{
		HeapTuple	tuple = list_nth(tuples, first + r);

		appendStringInfoString(&sql->buf, r > 0 ? ", (" : "(");
		for (int c = 0; c < columns + (withDelta ? 1 : 0); c++)
		{
			bool		isnull;
			Oid			type = c < columns ? set->types[c] : INT8OID;
			Datum		value = heap_getattr(tuple, c + 2, set->desc, &isnull);

			if (c == columns && negate)
				value = Int64GetDatum(-DatumGetInt64(value));
			if (c > 0)
				appendStringInfoString(&sql->buf, ", ");
			AppendParamPart(sql, n, type);
			EncodeRemoteParam(params, n, value, isnull, type);
			n++;
		}
		appendStringInfoChar(&sql->buf, ')');
	}
}

/* "left.c = right.c1 AND ..." with each type's own equality */
static void
AppendEntryMatch(StringInfo sql, IndexChangeSet *set, const char *left, const char *right)
{
	for (int c = 0; c <= set->keyCount; c++)
		appendStringInfo(sql, "%s%s.%s %s %s.c%d", c > 0 ? " AND " : "", left,
						 set->columnNames[c], QualifiedEqualityOperator(set->types[c]),
						 right, c + 1);
}

/*
 * MergeIndexTasks folds the index statements (from ApplyGlobalIndexChanges
 * with lastRound) into statements of the write on the same node, as
 * data-modifying WITH queries: WITH shardext_gidx1 AS (INSERT INTO <index
 * shard> ...) INSERT INTO <shard> ...  One statement per node instead of
 * two -- and a single-row INSERT whose index entry is on the same node
 * stays a single statement that commits on its own.  Returns the index
 * tasks that found no statement on their node.
 */
List *
MergeIndexTasks(List *indexTasks, List *tasks)
{
	List	   *unmerged = NIL;
	ListCell   *cell;

	foreach(cell, indexTasks)
	{
		RemoteTask *index = lfirst(cell);
		RemoteTask *target = NULL;
		ListCell   *taskCell;
		RemoteParams *params;
		char	   *indexSql;

		foreach(taskCell, tasks)
		{
			RemoteTask *task = lfirst(taskCell);

			if (task->nodeId == index->nodeId && task->taskPrivate == NULL)
			{
				target = task;
				break;
			}
		}
		if (target == NULL || index->taskPrivate == NULL)
		{
			unmerged = lappend(unmerged, index);
			continue;
		}
		indexSql = AssembleParamSql(index->taskPrivate, target->params->count);
		/* the write's SQL starts with INSERT, or with WITH after a first merge */
		target->sql = strncmp(target->sql, "WITH ", 5) == 0 ?
			psprintf("WITH shardext_gidx%d AS (%s), %s", foreach_current_index(cell), indexSql,
					 target->sql + 5) :
			psprintf("WITH shardext_gidx%d AS (%s) %s", foreach_current_index(cell), indexSql,
					 target->sql);
		params = MakeRemoteParams(target->params->count + index->params->count);
		for (int i = 0; i < params->count; i++)
		{
			RemoteParams *from = i < target->params->count ? target->params : index->params;
			int			j = i < target->params->count ? i : i - target->params->count;

			params->types[i] = from->types[j];
			params->values[i] = from->values[j];
			params->lengths[i] = from->lengths[j];
			params->formats[i] = from->formats[j];
		}
		target->params = params;
		target->uniqueShards = list_concat(target->uniqueShards, index->uniqueShards);
	}
	return unmerged;
}

/*
 * ReportUniqueViolation raises a unique violation of a global index's shard
 * as PostgreSQL reports one of a local unique index: under the global
 * index's name, with the shard's DETAIL (the index table's columns carry
 * the table's column names).  Other errors return to the caller.
 */
void
ReportUniqueViolation(NodeConnection *conn, PGresult *result, RemoteTask *task)
{
	const char *sqlstate = PQresultErrorField(result, PG_DIAG_SQLSTATE);
	const char *table = PQresultErrorField(result, PG_DIAG_TABLE_NAME);
	const char *remoteDetail;
	char	   *detail;
	const char *indexName = NULL;
	ListCell   *cell;

	if (sqlstate == NULL || strcmp(sqlstate, "23505") != 0 || table == NULL)
		return;
	foreach(cell, task->uniqueShards)
	{
		UniqueShard *unique = lfirst(cell);

		if (strcmp(unique->relname, table) == 0)
			indexName = unique->indexName;
	}
	if (indexName == NULL)
		return;
	remoteDetail = PQresultErrorField(result, PG_DIAG_MESSAGE_DETAIL);
	detail = remoteDetail ? pstrdup(remoteDetail) : NULL;
	PQclear(result);
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("duplicate key value violates unique constraint \"%s\"", indexName),
			 detail ? errdetail_internal("%s", detail) : 0,
			 err_generic_string(PG_DIAG_CONSTRAINT_NAME, indexName)));
}

/* the rows of an INSERT ... ON CONFLICT DO NOTHING sent to one arbiter shard */
typedef struct ArbiterBatch
{
	IndexChangeSet *set;
	int			count;
	int		   *rows;			/* row numbers of the statement, in order */
	Datum	  **values;			/* per row: indexed values, distribution value */
	int			next;			/* first row not yet matched by a returned one */
	bool	   *admitted;		/* of the statement's rows */
} ArbiterBatch;

/*
 * AdmitReturnedRow: the arbiter shard returns the entries it inserted, in
 * the order of its rows (a subsequence of them): the rows before the one
 * returned conflicted, it is admitted.
 */
static void
AdmitReturnedRow(RemoteTask *task, PGresult *row, void *arg)
{
	ArbiterBatch *batch = task->taskPrivate;
	IndexChangeSet *set = batch->set;
	int			columns = set->keyCount + 1;
	Datum	   *returned = palloc(sizeof(Datum) * columns);

	for (int c = 0; c < columns; c++)
	{
		Oid			inputFunction;
		Oid			typioparam;

		getTypeInputInfo(set->types[c], &inputFunction, &typioparam);
		returned[c] = OidInputFunctionCall(inputFunction, PQgetvalue(row, 0, c), typioparam, -1);
	}
	while (batch->next < batch->count)
	{
		Datum	   *values = batch->values[batch->next++];
		bool		equal = true;

		for (int c = 0; c < columns && equal; c++)
			equal = ApplySortComparator(values[c], false, returned[c], false,
										&set->compare[c]) == 0;
		if (equal)
		{
			batch->admitted[batch->rows[batch->next - 1]] = true;
			return;
		}
	}
	elog(ERROR, "global index \"%s\" returned an entry it was not given", set->name);
}

/*
 * ArbiterIndexAdmits inserts the entries of an INSERT's rows into a unique
 * global index with ON CONFLICT DO NOTHING, shard by shard in the rows'
 * order, and returns which rows may be inserted: those whose entry went in
 * (the first of several equal ones, as PostgreSQL admits it) and those
 * with a NULL among the indexed values.  values() reads row r's values
 * from rowArgs[r].
 */
bool *
ArbiterIndexAdmits(Oid baseRelid, Oid indexRelid, int rowCount, BaseValueFunction values,
				   void **rowArgs)
{
	IndexChangeSet *set = MakeChangeSet(baseRelid, FindIndexOf(baseRelid, indexRelid),
										CurrentMemoryContext);
	int			columns = set->keyCount + 1;
	bool	   *admitted = palloc0(sizeof(bool) * Max(rowCount, 1));
	int32	   *hashes = palloc(sizeof(int32) * Max(rowCount, 1));
	Datum	  **rowValues = palloc0(sizeof(Datum *) * Max(rowCount, 1));
	DistTableCacheEntry *entry = GetDistTableCacheEntry(indexRelid);
	List	   *tasks = NIL;

	tuplesort_end(set->sort);
	for (int r = 0; r < rowCount; r++)
	{
		bool		complete = true;

		rowValues[r] = palloc(sizeof(Datum) * columns);
		for (int c = 0; c < columns && complete; c++)
			complete = values(set->baseAttnums[c], &rowValues[r][c], rowArgs[r]);
		if (!complete)
		{
			admitted[r] = true;	/* a NULL conflicts with nothing */
			rowValues[r] = NULL;
			continue;
		}
		hashes[r] = HashDistributionValue(entry, rowValues[r][0]);
	}

	/* lock the shards, in id order, until a split did not move them */
	for (;;)
	{
		int64	   *ids = palloc(sizeof(int64) * Max(entry->shardCount, 1));
		int			count = 0;
		int64		firstId = entry->shardCount > 0 ? entry->shards[0].shardId : 0;
		int			shardCount = entry->shardCount;

		for (int s = 0; s < entry->shardCount; s++)
		{
			for (int r = 0; r < rowCount; r++)
			{
				if (rowValues[r] != NULL &&
					FindShardIntervalForHash(entry, hashes[r])->shardIndex == s)
				{
					ids[count++] = entry->shards[s].shardId;
					break;
				}
			}
		}
		LockShardsInOrder(ids, count, ShardWriteLockMode);
		entry = GetDistTableCacheEntry(indexRelid);
		if (entry == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("global index \"%s\" was dropped during the statement", set->name)));
		if (entry->shardCount == shardCount &&
			(shardCount == 0 || entry->shards[0].shardId == firstId))
			break;
	}

	for (int s = 0; s < entry->shardCount; s++)
	{
		ShardInterval *shard = &entry->shards[s];
		ArbiterBatch *batch = NULL;

		for (int r = 0; r < rowCount; r++)
		{
			if (rowValues[r] == NULL ||
				FindShardIntervalForHash(entry, hashes[r])->shardIndex != s)
				continue;
			if (batch == NULL || batch->count == INDEX_BATCH_ROWS)
			{
				if (batch != NULL)
					tasks = lappend(tasks, ArbiterTask(set, shard, batch));
				batch = palloc0(sizeof(ArbiterBatch));
				batch->set = set;
				batch->rows = palloc(sizeof(int) * INDEX_BATCH_ROWS);
				batch->values = palloc(sizeof(Datum *) * INDEX_BATCH_ROWS);
				batch->admitted = admitted;
			}
			batch->rows[batch->count] = r;
			batch->values[batch->count++] = rowValues[r];
		}
		if (batch != NULL)
			tasks = lappend(tasks, ArbiterTask(set, shard, batch));
	}
	ExecuteRemoteTasks(tasks, true, true, AdmitReturnedRow, NULL);
	return admitted;
}

/*
 * ArbiterTask: INSERT INTO <shard> (...) VALUES ... ON CONFLICT (indexed
 * columns) DO NOTHING RETURNING the entries that went in.
 */
static RemoteTask *
ArbiterTask(IndexChangeSet *set, ShardInterval *shard, ArbiterBatch *batch)
{
	RemoteTask *task = palloc0(sizeof(RemoteTask));
	int			columns = set->keyCount + 1;
	RemoteParams *params = MakeRemoteParams(batch->count * columns);
	StringInfoData sql;
	int			n = 0;

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (", QualifiedShardName(set->indexRelid, shard->shardId));
	for (int c = 0; c < columns; c++)
		appendStringInfo(&sql, "%s%s", c > 0 ? ", " : "", set->columnNames[c]);
	appendStringInfoString(&sql, ") VALUES ");
	for (int r = 0; r < batch->count; r++)
	{
		appendStringInfoString(&sql, r > 0 ? ", (" : "(");
		for (int c = 0; c < columns; c++)
		{
			appendStringInfo(&sql, "%s$%d::%s", c > 0 ? ", " : "", n + 1,
							 RemoteTypeName(set->types[c], -1));
			EncodeRemoteParam(params, n++, batch->values[r][c], false, set->types[c]);
		}
		appendStringInfoChar(&sql, ')');
	}
	appendStringInfoString(&sql, " ON CONFLICT (");
	for (int c = 0; c < set->keyCount; c++)
		appendStringInfo(&sql, "%s%s", c > 0 ? ", " : "", set->columnNames[c]);
	appendStringInfoString(&sql, ") DO NOTHING RETURNING ");
	for (int c = 0; c < columns; c++)
		appendStringInfo(&sql, "%s%s", c > 0 ? ", " : "", set->columnNames[c]);
	if (!set->isUnique)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("global index \"%s\" is not unique", set->name)));
	task->sql = sql.data;
	task->params = params;
	task->shardId = shard->shardId;
	task->nodeId = shard->placementNodeIds[0];
	task->returnsRows = true;
	task->taskPrivate = batch;
	return task;
}
