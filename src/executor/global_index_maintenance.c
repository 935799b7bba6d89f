/*-------------------------------------------------------------------------
 *
 * global_index_maintenance.c
 *	  How a distributed write keeps the global indexes of its table in step
 *	  (DistributedJob.gindexMode), all inside the write's distributed
 *	  transaction:
 *
 *	- GINDEX_INSERT_ROWS: the coordinator evaluates the rows of an INSERT
 *	  anyway, so their entries are known before anything is sent; the index
 *	  statements go out with the rows, in the same round (deadlock-prone
 *	  waits happen only on equal values, as with a local unique index).
 *	- GINDEX_ARBITER_FIRST: INSERT ... ON CONFLICT (columns of a unique
 *	  global index) DO NOTHING inserts the entries first with ON CONFLICT
 *	  DO NOTHING; the rows whose entries went in are inserted, the others
 *	  are the conflicts (ArbiterIndexAdmits).
 *	- GINDEX_RETURNED: the shard statements return hidden columns after the
 *	  visible ones -- the indexed and distribution values of each deleted
 *	  row, or of each row an INSERT ... ON CONFLICT on a constraint of the
 *	  table inserted (DO UPDATE may not change indexed columns) -- and the
 *	  entries are written once every shard statement is done.
 *	- GINDEX_LOCK_THEN_UPDATE: an UPDATE that sets indexed columns first
 *	  runs SELECT ctid, <old values> ... FOR UPDATE with its WHERE clause
 *	  on each shard (the rows are then locked: nobody changes them before
 *	  the UPDATE), then updates exactly those rows by ctid, returning each
 *	  row's place among the locked ones and its new values.  One statement
 *	  would not do: a row updated concurrently is locked in its newest
 *	  version, which the UPDATE's snapshot cannot see; the second
 *	  statement's fresh snapshot (READ COMMITTED) does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/itemptr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "shardext/distributed_executor.h"
#include "shardext/global_index.h"
#include "shardext/metadata.h"
#include "shardext/remote_sql.h"
#include "shardext/resource_lock.h"

/* the values of the hidden columns of one returned (or locked) row */
typedef struct HiddenRow
{
	List	   *attnums;		/* base attribute of each value */
	Datum	   *values;
	bool	   *nulls;
} HiddenRow;

/* the rows the locking SELECT of one shard read */
typedef struct LockedRows
{
	int			count;
	char	  **ctids;			/* text form */
	Datum	  **values;			/* per row, per hidden column */
	bool	  **nulls;
} LockedRows;

/* the insert columns of one row of an INSERT */
typedef struct InsertRowValues
{
	List	   *attnums;		/* base attribute of each column */
	Datum	   *values;
	bool	   *nulls;
} InsertRowValues;

static bool HiddenValue(AttrNumber attnum, Datum *value, void *arg);
static bool InsertRowValue(AttrNumber attnum, Datum *value, void *arg);
static Oid	TargetRelid(DistributedJob *job);
static GlobalIndexChanges *Changes(DistributedScanState *state);
static void ConvertHidden(DistributedScanState *state, PGresult *result, int first,
						  Datum *values, bool *nulls);
static void CollectLockedRow(RemoteTask *task, PGresult *row, void *arg);
static int	DistinctLockedRows(LockedRows *locked);

/* the written table: the first relation of a write's SQL */
static Oid
TargetRelid(DistributedJob *job)
{
	return linitial_oid(job->relations);
}

/* the changes of this execution, started at first use */
static GlobalIndexChanges *
Changes(DistributedScanState *state)
{
	if (state->gindexChanges == NULL)
	{
		MemoryContext oldContext = MemoryContextSwitchTo(state->execContext);

		state->gindexChanges = StartGlobalIndexChanges(TargetRelid(state->job),
													   state->job->gindexRelids);
		MemoryContextSwitchTo(oldContext);
	}
	return state->gindexChanges;
}

/* BaseValueFunction over a HiddenRow */
static bool
HiddenValue(AttrNumber attnum, Datum *value, void *arg)
{
	HiddenRow  *row = arg;
	ListCell   *cell;

	foreach(cell, row->attnums)
	{
		if (lfirst_int(cell) == attnum)
		{
			int			i = foreach_current_index(cell);

			*value = row->values[i];
			return !row->nulls[i];
		}
	}
	elog(ERROR, "column %d is not among the returned columns", attnum);
	return false;
}

/* BaseValueFunction over an InsertRowValues; a column left out is NULL */
static bool
InsertRowValue(AttrNumber attnum, Datum *value, void *arg)
{
	InsertRowValues *row = arg;
	ListCell   *cell;

	foreach(cell, row->attnums)
	{
		if (lfirst_int(cell) == attnum)
		{
			int			i = foreach_current_index(cell);

			*value = row->values[i];
			return !row->nulls[i];
		}
	}
	return false;
}

/*
 * BeginGlobalIndexMaintenance prepares a scan that maintains global
 * indexes: remote transactions are needed whatever the task count.
 */
void
BeginGlobalIndexMaintenance(DistributedScanState *state)
{
	state->gindexChanges = NULL;
	state->lockTasks = NIL;
}

/*
 * ConvertHidden reads the hidden base columns of a row, from column first
 * on, into values/nulls (allocated by the caller, in the row's memory).
 */
static void
ConvertHidden(DistributedScanState *state, PGresult *result, int first, Datum *values,
			  bool *nulls)
{
	Oid			relid = TargetRelid(state->job);
	ListCell   *cell;

	foreach(cell, state->job->hiddenAttnums)
	{
		int			i = foreach_current_index(cell);
		int			column = first + i;
		Oid			type;
		int32		typmod;
		Oid			collation;
		Oid			inputFunction;
		Oid			typioparam;

		nulls[i] = PQgetisnull(result, 0, column);
		values[i] = (Datum) 0;
		if (nulls[i])
			continue;
		get_atttypetypmodcoll(relid, lfirst_int(cell), &type, &typmod, &collation);
		getTypeInputInfo(type, &inputFunction, &typioparam);
		values[i] = OidInputFunctionCall(inputFunction, PQgetvalue(result, 0, column),
										 typioparam, typmod);
	}
}

/*
 * CaptureHiddenColumns takes the hidden columns of a row a task returned
 * (after the scan's own columns) as changes of the global indexes.
 */
void
CaptureHiddenColumns(DistributedScanState *state, RemoteTask *task, PGresult *result)
{
	DistributedJob *job = state->job;
	int			first = state->remoteColumns;
	int			count = list_length(job->hiddenAttnums);
	HiddenRow	row;

	if (job->gindexMode != GINDEX_RETURNED && job->gindexMode != GINDEX_LOCK_THEN_UPDATE)
		return;
	if (PQnfields(result) != first + (job->hiddenLead != GINDEX_LEAD_NONE ? 1 : 0) + count)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("a worker returned %d columns where %d were expected", PQnfields(result),
						first + count + (job->hiddenLead != GINDEX_LEAD_NONE ? 1 : 0))));
	row.attnums = job->hiddenAttnums;
	row.values = palloc(sizeof(Datum) * Max(count, 1));
	row.nulls = palloc(sizeof(bool) * Max(count, 1));

	switch (job->hiddenLead)
	{
		case GINDEX_LEAD_NONE:
			/* a deleted row: its entries go */
			ConvertHidden(state, result, first, row.values, row.nulls);
			AddGlobalIndexRow(Changes(state), HiddenValue, &row, -1);
			break;
		case GINDEX_LEAD_INSERTED:
			/* only inserted rows have new entries; an updated one keeps its own */
			if (strcmp(PQgetvalue(result, 0, first), "t") != 0)
				break;
			ConvertHidden(state, result, first + 1, row.values, row.nulls);
			AddGlobalIndexRow(Changes(state), HiddenValue, &row, 1);
			break;
		case GINDEX_LEAD_OLD_POSITION:
			{
				LockedRows *locked = task->taskPrivate;
				int			position = atoi(PQgetvalue(result, 0, first));
				HiddenRow	old;

				if (locked == NULL || position < 1 || position > locked->count)
					elog(ERROR, "shard " INT64_FORMAT " updated a row it did not lock",
						 task->shardId);
				old.attnums = job->hiddenAttnums;
				old.values = locked->values[position - 1];
				old.nulls = locked->nulls[position - 1];
				ConvertHidden(state, result, first + 1, row.values, row.nulls);
				AddGlobalIndexRow(Changes(state), HiddenValue, &old, -1);
				AddGlobalIndexRow(Changes(state), HiddenValue, &row, 1);
				break;
			}
	}
}

/*
 * FinishGlobalIndexMaintenance writes the changes the statement (or the
 * batch of an INSERT ... SELECT) collected, once all its tasks are done.
 */
void
FinishGlobalIndexMaintenance(DistributedScanState *state)
{
	if (state->gindexChanges != NULL)
		ApplyGlobalIndexChanges(state->gindexChanges, NULL);
}

/*
 * AddInsertRowsToIndexes adds the entries of an INSERT's rows (those
 * admitted, when admitted is given) to the index changes, and returns the
 * statements that write them, to be run with the rows' own.
 */
List *
AddInsertRowsToIndexes(DistributedScanState *state, int rowCount, int columns,
					   Datum *values, bool *nulls, bool *admitted)
{
	InsertRowValues row;
	List	   *tasks;

	row.attnums = state->job->insertAttnums;
	for (int r = 0; r < rowCount; r++)
	{
		if (admitted != NULL && !admitted[r])
			continue;
		row.values = &values[r * columns];
		row.nulls = &nulls[r * columns];
		AddGlobalIndexRow(Changes(state), InsertRowValue, &row, 1);
	}
	ApplyGlobalIndexChanges(Changes(state), &tasks);
	return tasks;
}

/*
 * AdmitInsertRows runs the entries of the arbiter index first (ON CONFLICT
 * DO NOTHING) and returns which rows of the INSERT may go in.
 */
bool *
AdmitInsertRows(DistributedScanState *state, int rowCount, int columns, Datum *values,
				bool *nulls)
{
	InsertRowValues *rows = palloc(sizeof(InsertRowValues) * Max(rowCount, 1));
	void	  **args = palloc(sizeof(void *) * Max(rowCount, 1));

	for (int r = 0; r < rowCount; r++)
	{
		rows[r].attnums = state->job->insertAttnums;
		rows[r].values = &values[r * columns];
		rows[r].nulls = &nulls[r * columns];
		args[r] = &rows[r];
	}
	return ArbiterIndexAdmits(TargetRelid(state->job), state->job->gindexArbiter, rowCount,
							  InsertRowValue, args);
}

/* row callback of the locking SELECTs: keeps ctid and old values per task */
static void
CollectLockedRow(RemoteTask *task, PGresult *row, void *arg)
{
	DistributedScanState *state = arg;
	LockedRows *locked = task->taskPrivate;
	int			count = list_length(state->job->hiddenAttnums);
	int			n = locked->count;
	MemoryContext oldContext = MemoryContextSwitchTo(state->execContext);

	if ((n & (n - 1)) == 0)
	{
		int			size = Max(n * 2, 8);

		locked->ctids = n == 0 ? palloc(sizeof(char *) * size) :
			repalloc(locked->ctids, sizeof(char *) * size);
		locked->values = n == 0 ? palloc(sizeof(Datum *) * size) :
			repalloc(locked->values, sizeof(Datum *) * size);
		locked->nulls = n == 0 ? palloc(sizeof(bool *) * size) :
			repalloc(locked->nulls, sizeof(bool *) * size);
	}
	locked->ctids[n] = pstrdup(PQgetvalue(row, 0, 0));
	locked->values[n] = palloc(sizeof(Datum) * Max(count, 1));
	locked->nulls[n] = palloc(sizeof(bool) * Max(count, 1));
	ConvertHidden(state, row, 1, locked->values[n], locked->nulls[n]);
	locked->count++;
	MemoryContextSwitchTo(oldContext);
}

/* a locked row: its ctid and its place in LockedRows */
typedef struct LockedRowRef
{
	ItemPointerData ctid;
	int			position;
} LockedRowRef;

static int
CompareLockedRows(const void *a, const void *b)
{
	const LockedRowRef *left = a;
	const LockedRowRef *right = b;
	int			result = ItemPointerCompare((ItemPointer) &left->ctid,
											(ItemPointer) &right->ctid);

	if (result != 0)
		return result;
	return (left->position > right->position) - (left->position < right->position);
}

/*
 * DistinctLockedRows sorts the rows a shard locked by ctid and keeps each
 * once (a row may have met several rows of a join); returns how many are
 * left.  Their places in the array are the positions the UPDATE returns.
 */
static int
DistinctLockedRows(LockedRows *locked)
{
	LockedRowRef *refs = palloc(sizeof(LockedRowRef) * locked->count);
	char	  **ctids = palloc(sizeof(char *) * locked->count);
	Datum	  **values = palloc(sizeof(Datum *) * locked->count);
	bool	  **nulls = palloc(sizeof(bool *) * locked->count);
	int			distinct = 0;

	for (int i = 0; i < locked->count; i++)
	{
		ItemPointer ctid = (ItemPointer) DatumGetPointer(DirectFunctionCall1(tidin,
																   CStringGetDatum(locked->ctids[i])));

		refs[i].ctid = *ctid;
		refs[i].position = i;
	}
	qsort(refs, locked->count, sizeof(LockedRowRef), CompareLockedRows);
	for (int i = 0; i < locked->count; i++)
	{
		int			p = refs[i].position;

		if (i > 0 && ItemPointerEquals(&refs[i].ctid, &refs[i - 1].ctid))
			continue;
		ctids[distinct] = locked->ctids[p];
		values[distinct] = locked->values[p];
		nulls[distinct] = locked->nulls[p];
		distinct++;
	}
	locked->ctids = ctids;
	locked->values = values;
	locked->nulls = nulls;
	locked->count = distinct;
	return distinct;
}

/*
 * LockRowsBeforeUpdate runs the locking SELECT of every shard of an UPDATE
 * of indexed columns, then gives each UPDATE task the ctids its shard
 * locked (parameter $1) and drops the tasks of shards without rows.  A row
 * that joins several rows of other tables is locked once.
 */
void
LockRowsBeforeUpdate(DistributedScanState *state)
{
	List	   *updates = NIL;
	ListCell   *lockCell;
	ListCell   *updateCell;

	forboth(lockCell, state->lockTasks, updateCell, state->tasks)
	{
		RemoteTask *lock = lfirst(lockCell);

		lock->taskPrivate = palloc0(sizeof(LockedRows));
	}
	ExecuteRemoteTasks(state->lockTasks, true, true, CollectLockedRow, state);

	forboth(lockCell, state->lockTasks, updateCell, state->tasks)
	{
		RemoteTask *lock = lfirst(lockCell);
		RemoteTask *update = lfirst(updateCell);
		LockedRows *locked = lock->taskPrivate;
		Datum	   *ctids;
		int			distinct = 0;
		RemoteParams *params;

		if (locked->count == 0)
			continue;
		distinct = DistinctLockedRows(locked);
		ctids = palloc(sizeof(Datum) * distinct);
		for (int i = 0; i < distinct; i++)
			ctids[i] = DirectFunctionCall1(tidin, CStringGetDatum(locked->ctids[i]));

		params = MakeRemoteParams(update->params->count);
		for (int i = 0; i < params->count; i++)
		{
			params->types[i] = update->params->types[i];
			params->values[i] = update->params->values[i];
			params->lengths[i] = update->params->lengths[i];
			params->formats[i] = update->params->formats[i];
		}
		EncodeRemoteParam(params, 0,
						  PointerGetDatum(construct_array(ctids, distinct, TIDOID,
														  sizeof(ItemPointerData), false,
														  TYPALIGN_SHORT)),
						  false, TIDARRAYOID);
		update->params = params;
		update->taskPrivate = locked;
		updates = lappend(updates, update);
	}
	state->tasks = updates;
}
