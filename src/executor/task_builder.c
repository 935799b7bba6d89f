/*-------------------------------------------------------------------------
 *
 * task_builder.c
 *	  Building the tasks of a distributed scan at execution: choosing the
 *	  shards (pruning values evaluated now, so prepared statements route by
 *	  their parameters), locking the shards a write touches, choosing
 *	  placements, evaluating the parameters once, and for INSERT evaluating
 *	  and routing the rows.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "postmaster/postmaster.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "shardext/connection.h"
#include "shardext/deparser.h"
#include "shardext/distributed_executor.h"
#include "shardext/global_index.h"
#include "shardext/metadata.h"
#include "shardext/remote_sql.h"
#include "shardext/remote_xact.h"
#include "shardext/repartition.h"
#include "shardext/resource_lock.h"
#include "shardext/tenant_stats.h"

/* bind parameters one statement may have (the protocol's limit) */
#define MAX_PARAMS_PER_STATEMENT 65535
/* rows of an INSERT ... SELECT routed per batch */
#define INSERT_SELECT_BATCH_ROWS 10000

static int64 *SnapshotShardIds(DistTableCacheEntry *entry, int *count);
static bool ShardIdsChanged(DistTableCacheEntry *entry, int64 *ids, int count);
static List *SelectShardIndexes(DistributedScanState *state, DistTableCacheEntry *anchor,
								Datum *tenantValue, bool *haveTenant);
static bool SelectByEqualities(DistributedScanState *state, DistTableCacheEntry *anchor,
							   List **result, Datum *tenantValue, bool *haveTenant);
/* the rows of an INSERT, column after column of each row */
typedef struct InsertRows
{
	int			count;
	int			columns;
	Datum	   *values;
	bool	   *nulls;
	Oid		   *types;			/* per column */
} InsertRows;

static void BuildInsertTasks(DistributedScanState *state);
static List *LockShardsToModify(DistributedScanState *state, List *shardIndexes,
								DistTableCacheEntry **anchor);
static char *ShardTaskSql(DistributedJob *job, List *parts, DistTableCacheEntry *anchor,
						  int shardIndex, ShardInterval **taskShard);
static void AddLockTasks(DistributedScanState *state, ShardInterval *taskShard, char *sql,
						 RemoteParams *params);
static void NoteRowPositions(DistributedScanState *state, RemoteTask *task,
							 List *shardRows, int first, int count);
static void EvaluateInsertRows(DistributedScanState *state, InsertRows *rows);
static void SampleInsertTenant(DistributedScanState *state, DistTableCacheEntry *entry,
							   InsertRows *rows);
static List **RouteAndLockInsertRows(DistributedScanState *state, InsertRows *rows,
									 DistTableCacheEntry **entry, bool *admitted,
									 List **shardIndexes);
static char *BuildInsertBatch(InsertRows *rows, List *shardRows, int first, int count,
							  const char *prefix, const char *suffix, RemoteParams *shared,
							  RemoteParams **paramsOut);
static int	ReadSubplanRows(DistributedScanState *state, Datum **valuesOut, bool **nullsOut,
							Oid *types);
static int	ChooseReadPlacement(ShardInterval *shard);

/*
 * SnapshotShardIds returns the ids of a table's shards in hash order (the
 * cache entry is rebuilt in place after an invalidation, so a copy is what
 * tells later whether the shards changed).
 */
static int64 *
SnapshotShardIds(DistTableCacheEntry *entry, int *count)
{
	int64	   *ids = palloc(sizeof(int64) * Max(entry->shardCount, 1));

	for (int i = 0; i < entry->shardCount; i++)
		ids[i] = entry->shards[i].shardId;
	*count = entry->shardCount;
	return ids;
}

/*
 * ShardIdsChanged tells whether a table's shards differ from a snapshot:
 * a split replaced some (shard ids never change their hash range).
 */
static bool
ShardIdsChanged(DistTableCacheEntry *entry, int64 *ids, int count)
{
	if (entry == NULL || entry->shardCount != count)
		return true;
	for (int i = 0; i < count; i++)
	{
		if (entry->shards[i].shardId != ids[i])
			return true;
	}
	return false;
}

/*
 * ShardLayoutChanged tells whether a table's shards differ from what an
 * earlier look at its cache entry found (shards, count): a split replaced
 * some.  An entry that was not rebuilt since holds the same array, which
 * takes no comparison (a router statement's cost must not grow with the
 * shard count); the array of a rebuilt one stays valid until the end of
 * the transaction (metadata.h), so the ids can be compared then.
 */
static bool
ShardLayoutChanged(DistTableCacheEntry *entry, ShardInterval *shards, int count)
{
	if (entry == NULL || entry->shardCount != count)
		return true;
	if (entry->shards == shards)
		return false;
	for (int i = 0; i < count; i++)
	{
		if (entry->shards[i].shardId != shards[i].shardId)
			return true;
	}
	return false;
}

/*
 * BuildDistributedTasks makes the task list (once per execution); EXPLAIN
 * calls it too, without running the tasks.
 */
void
BuildDistributedTasks(DistributedScanState *state)
{
	DistributedJob *job = state->job;
	DistTableCacheEntry *anchor = NULL;
	List	   *shardIndexes;
	RemoteParams *params;
	MemoryContext oldContext;
	ListCell   *cell;
	Datum		tenantValue = (Datum) 0;
	bool		haveTenant = false;

	if (state->tasksBuilt)
		return;
	state->tenantSample = NULL;

	oldContext = MemoryContextSwitchTo(job->insertFromSubplan ?
									   state->batchContext : state->execContext);
	if (job->repartition != NIL)
	{
		/* a repartition join: its exchange runs first (repartition_exchange.c) */
		BuildRepartitionTasks(state, true);
		state->tasksBuilt = true;
		MemoryContextSwitchTo(oldContext);
		return;
	}
	if (job->kind == JOB_INSERT || job->kind == JOB_ROUTED)
	{
		if (job->kind == JOB_INSERT)
			BuildInsertTasks(state);
		else
			BuildRoutedTasks(state);
		state->tasksBuilt = true;
		MemoryContextSwitchTo(oldContext);
		return;
	}

	/* the values of uncorrelated subqueries, computed once (sublink_params.c) */
	if (job->paramsFromSubplan)
	{
		TupleTableSlot *slot = ExecProcNode(linitial(state->css.custom_ps));

		if (TupIsNull(slot))
			elog(ERROR, "the subqueries of a distributed write returned no row");
		slot_getallattrs(slot);
		state->css.ss.ps.ps_ExprContext->ecxt_outertuple = slot;
	}
	if (job->anchor >= 0)
		anchor = GetDistTableCacheEntry(list_nth_oid(job->relations, job->anchor));
	shardIndexes = SelectShardIndexes(state, anchor, &tenantValue, &haveTenant);
	if (job->kind == JOB_MODIFY)
		shardIndexes = LockShardsToModify(state, shardIndexes, &anchor);

	/* a single-shard statement with a distribution value belongs to a tenant */
	if (haveTenant && list_length(shardIndexes) == 1 && anchor != NULL &&
		anchor->method == DISTRIBUTE_BY_HASH && TenantStatsSampleNext())
		state->tenantSample = TenantSampleBegin(anchor, tenantValue,
												job->kind != JOB_SELECT || job->locksRows);

	params = EvaluateParams(state, state->paramExprStates, 0, job->paramCount);
	/* the rows of a MERGE source shipped to every copy (merge_shipped_source.c) */
	if (job->sourceArrayCount > 0)
		params = AddSourceArrayParams(state, params);

	foreach(cell, shardIndexes)
	{
		ShardInterval *taskShard;
		char	   *sql = ShardTaskSql(job, job->sqlParts, anchor, lfirst_int(cell), &taskShard);

		AddShardTasks(state, taskShard, sql, params, job->kind == JOB_MODIFY);
		if (job->gindexMode == GINDEX_LOCK_THEN_UPDATE)
			AddLockTasks(state, taskShard,
						 ShardTaskSql(job, job->lockSqlParts, anchor, lfirst_int(cell), &taskShard),
						 params);
	}
	RouteReadsToReplicas(state);
	state->tasksBuilt = true;
	MemoryContextSwitchTo(oldContext);
}

/*
 * FirstShardTaskSql returns the SQL a task on the first shard would run,
 * without evaluating anything (EXPLAIN of a scan whose pruning values and
 * parameters come from the row of an outer plan that has none yet).
 */
char *
FirstShardTaskSql(DistributedScanState *state)
{
	DistributedJob *job = state->job;
	DistTableCacheEntry *anchor = NULL;
	ShardInterval *taskShard;

	if (job->anchor >= 0)
		anchor = GetDistTableCacheEntry(list_nth_oid(job->relations, job->anchor));
	return ShardTaskSql(job, job->sqlParts, anchor, 0, &taskShard);
}

/*
 * LockShardsToModify locks the shards a write chose, in id order, before
 * their placements are looked at.  A wait may have let a move commit (new
 * placements: looked up later) or a split (new shards: the positions chosen
 * before name other ranges now), so the shards are chosen again until the
 * layout held still.  Returns the final choice; *anchor is looked up again.
 */
static List *
LockShardsToModify(DistributedScanState *state, List *shardIndexes,
				   DistTableCacheEntry **anchor)
{
	DistributedJob *job = state->job;
	Oid			target = list_nth_oid(job->relations, Max(job->anchor, 0));
	ListCell   *cell;

	for (;;)
	{
		DistTableCacheEntry *entry = GetDistTableCacheEntry(target);
		int64	   *ids = palloc(sizeof(int64) * Max(list_length(shardIndexes), 1));
		ShardInterval *layout = entry->shards;
		int			layoutCount = entry->shardCount;
		int			n = 0;
		bool		several = false;

		foreach(cell, shardIndexes)
		{
			ShardInterval *shard = &entry->shards[lfirst_int(cell)];

			ids[n++] = shard->shardId;
			if (shard->placementCount > 1)
				several = true;
		}
		if (n > 1)
			several = true;
		LockShardsInOrder(ids, n, several ? ShardMultiWriteLockMode : ShardWriteLockMode);

		if (job->anchor >= 0)
			*anchor = GetDistTableCacheEntry(list_nth_oid(job->relations, job->anchor));
		if (!ShardLayoutChanged(GetDistTableCacheEntry(target), layout, layoutCount))
			return shardIndexes;
		{
			Datum		value;
			bool		have = false;

			shardIndexes = SelectShardIndexes(state, *anchor, &value, &have);
		}
	}
}

/*
 * ShardTaskSql returns the SQL of the task for the shards at position
 * shardIndex of the job's tables (the one shard of a reference table), and
 * in *taskShard the shard whose placements run it.  The shards of
 * co-located tables must still line up with the anchor's.
 */
static char *
ShardTaskSql(DistributedJob *job, List *parts, DistTableCacheEntry *anchor, int shardIndex,
			 ShardInterval **taskShard)
{
	List	   *shardNames = NIL;
	List	   *shardIds = NIL;
	int			relationCount = list_length(job->relations);

	*taskShard = NULL;
	for (int i = 0; i < relationCount; i++)
	{
		Oid			relid = list_nth_oid(job->relations, i);
		DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);
		ShardInterval *shard;

		if (entry == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"%s\" is no longer distributed", get_rel_name(relid))));
		if (entry->method == DISTRIBUTE_BY_HASH)
		{
			if (shardIndex >= entry->shardCount)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("shards of table \"%s\" changed during planning",
								get_rel_name(relid)),
						 errhint("Run the statement again.")));
			shard = &entry->shards[shardIndex];
			/* co-located shards of one index must cover the same hashes */
			if (anchor != NULL &&
				(shard->hashMin != anchor->shards[shardIndex].hashMin ||
				 shard->hashMax != anchor->shards[shardIndex].hashMax))
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("shards of tables \"%s\" and \"%s\" do not line up",
								get_rel_name(anchor->relid), get_rel_name(relid)),
						 errdetail("Joins of co-located tables run shard by shard."),
						 errhint("Run the statement again once the shard operation has finished.")));
		}
		else
			shard = &entry->shards[0];
		if (i == Max(job->anchor, 0))
			*taskShard = shard;
		shardNames = lappend(shardNames, CachedQualifiedShardName(entry, shard));
		shardIds = lappend(shardIds, &shard->shardId);
	}
	if ((*taskShard)->placementCount == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shard " INT64_FORMAT " has no placement", (*taskShard)->shardId)));
	return BuildShardTaskSql(parts, shardNames, shardIds);
}

/*
 * AddLockTasks adds the locking SELECT of an UPDATE of indexed columns for
 * each placement of a shard, matching the UPDATE tasks AddShardTasks made
 * (see global_index_maintenance.c); it takes the first parameters.
 */
static void
AddLockTasks(DistributedScanState *state, ShardInterval *taskShard, char *sql,
			 RemoteParams *params)
{
	RemoteParams *lockParams = palloc(sizeof(RemoteParams));

	*lockParams = *params;
	lockParams->count = state->job->lockParamCount;
	for (int p = 0; p < taskShard->placementCount; p++)
	{
		RemoteTask *task = palloc0(sizeof(RemoteTask));

		task->sql = sql;
		task->nodeId = taskShard->placementNodeIds[p];
		task->shardId = taskShard->shardId;
		task->params = lockParams;
		task->returnsRows = true;
		state->lockTasks = lappend(state->lockTasks, task);
	}
}

/*
 * AddShardTasks adds the tasks of one shard: a write goes to every
 * placement (the first one's rows are returned), a read to one.  Returns
 * the task whose rows are returned.
 */
RemoteTask *
AddShardTasks(DistributedScanState *state, ShardInterval *taskShard, char *sql,
			  RemoteParams *params, bool write)
{
	int			first = write ? 0 : ChooseReadPlacement(taskShard);
	int			last = write ? taskShard->placementCount - 1 : first;
	RemoteTask *returning = NULL;

	for (int p = first; p <= last; p++)
	{
		RemoteTask *task = palloc0(sizeof(RemoteTask));

		task->sql = sql;
		task->nodeId = taskShard->placementNodeIds[p];
		task->shardId = taskShard->shardId;
		task->params = params;
		task->returnsRows = (p == first);
		if (task->returnsRows)
			returning = task;
		state->tasks = lappend(state->tasks, task);
	}
	return returning;
}

/*
 * SelectByEqualities is SelectShardIndexes for a job whose pruning values
 * are all equalities (PRUNE_EQUAL) -- the common router statement -- without
 * looking at every shard: the values must all fall into one shard, which
 * is the result; a NULL or a second shard leaves none.  Returns false for
 * other jobs.
 */
static bool
SelectByEqualities(DistributedScanState *state, DistTableCacheEntry *anchor, List **result,
				   Datum *tenantValue, bool *haveTenant)
{
	DistributedJob *job = state->job;
	ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
	int			shardIndex = -1;
	bool		none = false;
	ListCell   *cell;

	if (job->pruneCount == 0)
		return false;
	foreach(cell, job->pruneKinds)
	{
		if (lfirst_int(cell) != PRUNE_EQUAL)
			return false;
	}
	for (int p = 0; p < job->pruneCount; p++)
	{
		bool		isnull;
		Datum		value = ExecEvalExpr(list_nth(state->pruneExprStates, p), econtext, &isnull);
		int			index;

		if (isnull)
		{
			none = true;
			continue;
		}
		index = FindShardForValue(anchor, value)->shardIndex;
		if (!*haveTenant)
		{
			*tenantValue = value;
			*haveTenant = true;
		}
		if (shardIndex >= 0 && index != shardIndex)
			none = true;
		shardIndex = index;
	}
	*result = none ? NIL : list_make1_int(shardIndex);
	/* a read of no shard still runs once (see the end of SelectShardIndexes) */
	if (*result == NIL && job->emptyInputRow && anchor->shardCount > 0)
		*result = list_make1_int(0);
	return true;
}

/*
 * SelectShardIndexes evaluates the pruning values and returns the indexes
 * of the anchor table's shards that can hold matching rows (one index, 0,
 * when only reference tables are involved).  *tenantValue gets the first
 * equality value (valid for this execution), if any (*haveTenant).
 */
static List *
SelectShardIndexes(DistributedScanState *state, DistTableCacheEntry *anchor,
				   Datum *tenantValue, bool *haveTenant)
{
	DistributedJob *job = state->job;
	ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
	bool	   *selected;
	List	   *result = NIL;

	if (anchor == NULL)
		return list_make1_int(0);
	if (SelectByEqualities(state, anchor, &result, tenantValue, haveTenant))
		return result;

	selected = palloc(sizeof(bool) * anchor->shardCount);
	for (int i = 0; i < anchor->shardCount; i++)
		selected[i] = true;

	for (int p = 0; p < job->pruneCount; p++)
	{
		int			kind = list_nth_int(job->pruneKinds, p);
		bool		isnull;
		Datum		value = ExecEvalExpr(list_nth(state->pruneExprStates, p), econtext, &isnull);
		bool	   *matches = palloc0(sizeof(bool) * anchor->shardCount);

		if (kind == PRUNE_GINDEX_EQUAL || kind == PRUNE_GINDEX_ANY)
		{
			/* the values of the index's columns follow as PRUNE_GINDEX_NEXT */
			Oid			indexRelid = list_nth_oid(job->pruneIndexes, p);
			int			count = 1;
			Datum	   *values;
			bool	   *nulls;

			while (p + count < job->pruneCount &&
				   list_nth_int(job->pruneKinds, p + count) == PRUNE_GINDEX_NEXT)
				count++;
			values = palloc(sizeof(Datum) * count);
			nulls = palloc(sizeof(bool) * count);
			values[0] = value;
			nulls[0] = isnull;
			for (int i = 1; i < count; i++)
				values[i] = ExecEvalExpr(list_nth(state->pruneExprStates, p + i), econtext,
										 &nulls[i]);
			LookupGlobalIndex(state, anchor, indexRelid, kind, values, nulls, matches);
			p += count - 1;
		}
		else if (!isnull && kind == PRUNE_EQUAL)
		{
			matches[FindShardForValue(anchor, value)->shardIndex] = true;
			if (!*haveTenant)
			{
				*tenantValue = value;
				*haveTenant = true;
			}
		}
		else if (!isnull)
		{
			ArrayType  *array = DatumGetArrayTypeP(value);
			int16		typlen;
			bool		typbyval;
			char		typalign;
			Datum	   *elements;
			bool	   *nulls;
			int			count;

			get_typlenbyvalalign(ARR_ELEMTYPE(array), &typlen, &typbyval, &typalign);
			deconstruct_array(array, ARR_ELEMTYPE(array), typlen, typbyval, typalign,
							  &elements, &nulls, &count);
			for (int i = 0; i < count; i++)
			{
				if (!nulls[i])
					matches[FindShardForValue(anchor, elements[i])->shardIndex] = true;
			}
		}
		for (int i = 0; i < anchor->shardCount; i++)
			selected[i] = selected[i] && matches[i];
	}

	for (int i = 0; i < anchor->shardCount; i++)
	{
		if (selected[i])
			result = lappend_int(result, i);
	}

	/*
	 * A read that no shard can match (distribution column = NULL) still
	 * runs once: an aggregate without GROUP BY returns its row of an empty
	 * input, which the shard computes (its rows fail the same condition).
	 */
	if (result == NIL && job->emptyInputRow && anchor->shardCount > 0)
		result = list_make1_int(0);
	return result;
}

/*
 * EvaluateParams computes count expressions starting at first on the
 * coordinator and encodes them for libpq: binary for built-in types (exact
 * and independent of DateStyle), text otherwise.
 */
RemoteParams *
EvaluateParams(DistributedScanState *state, List *exprStates, int first, int count)
{
	ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
	RemoteParams *params = MakeRemoteParams(count);

	for (int i = 0; i < count; i++)
	{
		ExprState  *exprState = list_nth(exprStates, first + i);
		bool		isnull;
		Datum		value = ExecEvalExpr(exprState, econtext, &isnull);

		EncodeRemoteParam(params, i, value, isnull, exprType((Node *) exprState->expr));
	}
	return params;
}

/* MakeRemoteParams returns count parameters, all NULL and untyped */
RemoteParams *
MakeRemoteParams(int count)
{
	RemoteParams *params = palloc0(sizeof(RemoteParams));

	params->count = count;
	params->types = palloc0(sizeof(Oid) * Max(count, 1));
	params->values = palloc0(sizeof(char *) * Max(count, 1));
	params->lengths = palloc0(sizeof(int) * Max(count, 1));
	params->formats = palloc0(sizeof(int) * Max(count, 1));
	return params;
}

/*
 * EncodeRemoteParam sets parameter i to a value of type type: binary for
 * built-in types (their OIDs are the same everywhere), text otherwise (the
 * SQL then casts $n to the type, which the node resolves by name).
 */
void
EncodeRemoteParam(RemoteParams *params, int i, Datum value, bool isnull, Oid type)
{
	Oid			function;
	bool		isVarlena;

	if (type < FirstGenbkiObjectId && type != UNKNOWNOID)
	{
		params->types[i] = type;
		params->formats[i] = 1;
		if (isnull)
			return;
		getTypeBinaryOutputInfo(type, &function, &isVarlena);
		{
			bytea	   *bytes = OidSendFunctionCall(function, value);

			params->values[i] = VARDATA(bytes);
			params->lengths[i] = VARSIZE(bytes) - VARHDRSZ;
		}
		return;
	}

	params->types[i] = InvalidOid;	/* the SQL casts $n to its type */
	params->formats[i] = 0;
	if (isnull)
		return;
	getTypeOutputInfo(type, &function, &isVarlena);
	{
		int			nestLevel = BeginSafeDeparse();

		params->values[i] = OidOutputFunctionCall(function, value);
		EndSafeDeparse(nestLevel);
	}
}

/*
 * MaterializeSubplan reads every row of an INSERT ... SELECT's source before
 * the first row is written.  The source may read the target table (or
 * anything the inserts change), and the remote statements that read it see
 * the transaction's earlier batches, so streaming would feed inserted rows
 * back into the source (the Halloween problem).  PostgreSQL's own INSERT ...
 * SELECT reads a snapshot taken before the statement; this is its
 * equivalent.  The rows spill to disk beyond work_mem.
 */
void
MaterializeSubplan(DistributedScanState *state)
{
	PlanState  *child = linitial(state->css.custom_ps);
	EState	   *estate = child->state;
	MemoryContext oldContext = MemoryContextSwitchTo(estate->es_query_cxt);

	state->sourceRows = tuplestore_begin_heap(false, false, work_mem);
	for (;;)
	{
		TupleTableSlot *slot = ExecProcNode(child);

		if (TupIsNull(slot))
			break;
		tuplestore_puttupleslot(state->sourceRows, slot);
		CHECK_FOR_INTERRUPTS();
	}
	state->sourceSlot = MakeSingleTupleTableSlot(ExecGetResultType(child),
												 &TTSOpsMinimalTuple);
	MemoryContextSwitchTo(oldContext);
}

/*
 * ReadSubplanRows reads the next batch of rows of an INSERT ... SELECT
 * (copied into the batch's memory) and returns how many; after the last
 * batch state->subplanDone is set.
 */
static int
ReadSubplanRows(DistributedScanState *state, Datum **valuesOut, bool **nullsOut, Oid *types)
{
	PlanState  *child = linitial(state->css.custom_ps);
	TupleDesc	desc = ExecGetResultType(child);
	int			columns = state->job->insertColumnCount;
	Datum	   *values = palloc(sizeof(Datum) * INSERT_SELECT_BATCH_ROWS * columns);
	bool	   *nulls = palloc(sizeof(bool) * INSERT_SELECT_BATCH_ROWS * columns);
	int			count = 0;

	if (state->sourceRows == NULL)
		MaterializeSubplan(state);

	for (int c = 0; c < columns; c++)
		types[c] = TupleDescAttr(desc, c)->atttypid;
	while (count < INSERT_SELECT_BATCH_ROWS)
	{
		TupleTableSlot *slot = state->sourceSlot;
		MemoryContext batchContext;
		bool		found;

		/*
		 * Rows read back from disk are allocated in the current context and
		 * owned by the slot until the next row: not the batch memory, which
		 * is reset between batches.
		 */
		batchContext = MemoryContextSwitchTo(state->css.ss.ps.state->es_query_cxt);
		found = tuplestore_gettupleslot(state->sourceRows, true, false, slot);
		MemoryContextSwitchTo(batchContext);
		if (!found)
		{
			state->subplanDone = true;
			break;
		}
		slot_getallattrs(slot);
		for (int c = 0; c < columns; c++)
		{
			Form_pg_attribute attr = TupleDescAttr(desc, c);

			nulls[count * columns + c] = slot->tts_isnull[c];
			values[count * columns + c] = slot->tts_isnull[c] ? (Datum) 0 :
				datumCopy(slot->tts_values[c], attr->attbyval, attr->attlen);
		}
		count++;
	}
	*valuesOut = values;
	*nullsOut = nulls;
	return count;
}

/*
 * BuildInsertTasks evaluates the rows of an INSERT on the coordinator
 * (defaults such as nextval() and volatile functions run once here), routes
 * each row to its shard, and makes one multi-row INSERT per shard and
 * placement.
 */
static void
BuildInsertTasks(DistributedScanState *state)
{
	DistributedJob *job = state->job;
	Oid			relid = linitial_oid(job->relations);
	DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);
	int			columns = job->insertColumnCount;
	InsertRows	rows;
	List	  **rowsByShard;
	int			rowsPerTask;
	RemoteParams *shared;
	bool	   *admitted = NULL;
	List	   *indexTasks = NIL;
	List	   *shardIndexes = NIL;
	ListCell   *cell;

	if (entry == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is no longer distributed", get_rel_name(relid))));
	shared = EvaluateParams(state, state->paramExprStates, 0, job->paramCount);
	rowsPerTask = Max(1, (MAX_PARAMS_PER_STATEMENT - shared->count) / Max(columns, 1));

	EvaluateInsertRows(state, &rows);
	if (job->gindexMode == GINDEX_ARBITER_FIRST)
	{
		/* the shards of every row are locked first, as other writers lock them */
		RouteAndLockInsertRows(state, &rows, &entry, NULL, &shardIndexes);
		admitted = AdmitInsertRows(state, rows.count, rows.columns, rows.values, rows.nulls);
	}
	rowsByShard = RouteAndLockInsertRows(state, &rows, &entry, admitted, &shardIndexes);
	/* the index statements go out with the rows (see MergeIndexTasks) */
	if (job->gindexMode == GINDEX_INSERT_ROWS || job->gindexMode == GINDEX_ARBITER_FIRST)
		indexTasks = AddInsertRowsToIndexes(state, rows.count, rows.columns, rows.values,
											rows.nulls, admitted);
	state->tenantSample = NULL;
	if (!job->insertFromSubplan && rows.count > 0 && job->insertDistColumn >= 0 &&
		entry->method == DISTRIBUTE_BY_HASH && TenantStatsSampleNext())
		SampleInsertTenant(state, entry, &rows);
	state->insertRowCount = rows.count;
	state->orderReturning = false;
	state->orderedRows = NULL;

	foreach(cell, shardIndexes)
	{
		ShardInterval *shard = &entry->shards[lfirst_int(cell)];
		List	   *shardNames;
		char	   *prefix;
		char	   *suffix;
		List	   *shardRows = rowsByShard[lfirst_int(cell)];
		int			done = 0;
		RemoteTask *task;

		shardNames = list_make1(CachedQualifiedShardName(entry, shard));
		prefix = BuildTaskSql(job->sqlParts, shardNames);
		suffix = BuildShardTaskSql(job->sqlSuffix, shardNames, list_make1(&shard->shardId));

		while (done < list_length(shardRows))
		{
			int			count = Min(rowsPerTask, list_length(shardRows) - done);
			RemoteParams *params;
			char	   *sql;

			sql = BuildInsertBatch(&rows, shardRows, done, count, prefix, suffix,
								   shared, &params);
			task = AddShardTasks(state, shard, sql, params, true);
			if (job->hasReturning)
				NoteRowPositions(state, task, shardRows, done, count);
			done += count;
		}
	}
	if (indexTasks != NIL)
		state->tasks = list_concat(MergeIndexTasks(indexTasks, state->tasks), state->tasks);
}

/*
 * SampleInsertTenant samples an INSERT whose rows all have the same hash
 * of the distribution value, that is, belong to one tenant; an INSERT of
 * several tenants is not attributed.
 */
static void
SampleInsertTenant(DistributedScanState *state, DistTableCacheEntry *entry, InsertRows *rows)
{
	int			column = state->job->insertDistColumn;
	Datum		first = rows->values[column];

	if (rows->count > 1)
	{
		int32		hash = HashDistributionValue(entry, first);

		for (int r = 1; r < rows->count; r++)
		{
			if (HashDistributionValue(entry, rows->values[r * rows->columns + column]) != hash)
				return;
		}
	}
	state->tenantSample = TenantSampleBegin(entry, first, true);
}

/*
 * NoteRowPositions records which rows of the statement a task inserts, so
 * that its RETURNING rows can be handed out in the order of the rows, as
 * PostgreSQL does.  That takes collecting them first: it is done only when
 * more than one task returns rows.
 */
static void
NoteRowPositions(DistributedScanState *state, RemoteTask *task, List *shardRows,
				 int first, int count)
{
	task->rowPositions = palloc(sizeof(int) * count);
	task->rowCount = count;
	for (int i = 0; i < count; i++)
		task->rowPositions[i] = list_nth_int(shardRows, first + i);
	if (first > 0 || count < state->insertRowCount)
		state->orderReturning = true;
}

/*
 * EvaluateInsertRows evaluates the rows of an INSERT ... VALUES, or reads
 * those of the subplan of an INSERT ... SELECT, with their column types.
 */
static void
EvaluateInsertRows(DistributedScanState *state, InsertRows *rows)
{
	DistributedJob *job = state->job;
	ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
	int			columns = job->insertColumnCount;

	rows->columns = columns;
	rows->types = palloc(sizeof(Oid) * columns);
	if (job->insertFromSubplan)
	{
		rows->count = ReadSubplanRows(state, &rows->values, &rows->nulls, rows->types);
		return;
	}
	rows->count = job->insertRowCount;
	rows->values = palloc(sizeof(Datum) * Max(rows->count * columns, 1));
	rows->nulls = palloc(sizeof(bool) * Max(rows->count * columns, 1));
	for (int c = 0; c < columns; c++)
		rows->types[c] = exprType((Node *) ((ExprState *) list_nth(state->insertExprStates, c))->expr);
	for (int r = 0; r < rows->count; r++)
	{
		for (int c = 0; c < columns; c++)
		{
			ExprState  *exprState = list_nth(state->insertExprStates, r * columns + c);

			rows->values[r * columns + c] = ExecEvalExpr(exprState, econtext,
														 &rows->nulls[r * columns + c]);
		}
	}
}

/*
 * RouteAndLockInsertRows returns, per shard index of the table, the rows
 * that go there, with the shards written locked in id order; when the wait
 * let a split change the shards (see LockShardsToModify), the rows are
 * routed again.  *entry is the table's cache entry after the locks, and
 * *shardIndexes the indexes of the shards written, in shard order.  Rows
 * not admitted (when admitted is given) are left out.
 */
static List **
RouteAndLockInsertRows(DistributedScanState *state, InsertRows *rows,
					   DistTableCacheEntry **entry, bool *admitted, List **shardIndexes)
{
	DistributedJob *job = state->job;
	Oid			relid = linitial_oid(job->relations);

	for (;;)
	{
		ShardInterval *layout = (*entry)->shards;
		int			layoutCount = (*entry)->shardCount;
		List	  **rowsByShard = palloc0(sizeof(List *) * (*entry)->shardCount);
		int64	   *lockIds = palloc(sizeof(int64) * Max(rows->count, 1));
		int			lockCount = 0;
		List	   *indexes = NIL;

		for (int r = 0; r < rows->count; r++)
		{
			int			shardIndex = 0;

			/* ON CONFLICT DO NOTHING on a global index turned the row away */
			if (admitted != NULL && !admitted[r])
				continue;
			if (job->insertDistColumn >= 0)
			{
				int			d = r * rows->columns + job->insertDistColumn;

				shardIndex = ShardIndexForRow(*entry, rows->values[d], rows->nulls[d]);
			}
			/* the shards written, locked below (in id order) */
			if (rowsByShard[shardIndex] == NIL)
			{
				lockIds[lockCount++] = (*entry)->shards[shardIndex].shardId;
				indexes = lappend_int(indexes, shardIndex);
			}
			rowsByShard[shardIndex] = lappend_int(rowsByShard[shardIndex], r);
		}

		/* few shards are sorted; many are taken in shard order, which is id order */
		if (lockCount <= 16)
			list_sort(indexes, list_int_cmp);
		else
		{
			list_free(indexes);
			indexes = NIL;
			lockCount = 0;
			for (int s = 0; s < (*entry)->shardCount; s++)
			{
				if (rowsByShard[s] == NIL)
					continue;
				lockIds[lockCount++] = (*entry)->shards[s].shardId;
				indexes = lappend_int(indexes, s);
			}
		}
		*shardIndexes = indexes;
		LockShardsInOrder(lockIds, lockCount,
						  (*entry)->method == DISTRIBUTE_BY_REFERENCE ?
						  ShardMultiWriteLockMode : ShardWriteLockMode);
		*entry = GetDistTableCacheEntry(relid);
		if (*entry == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"%s\" is no longer distributed", get_rel_name(relid))));
		if (!ShardLayoutChanged(*entry, layout, layoutCount))
			return rowsByShard;
	}
}

/*
 * ShardIndexForRow returns the index of the shard of a table that a row
 * with the given distribution column value goes to (0 for a reference
 * table).  Every write that routes rows by value comes here: INSERT
 * (VALUES and through the coordinator) and the rows MERGE inserts.
 */
int
ShardIndexForRow(DistTableCacheEntry *entry, Datum value, bool isnull)
{
	if (entry->method != DISTRIBUTE_BY_HASH)
		return 0;
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("cannot insert a NULL distribution column value into \"%s\"",
						get_rel_name(entry->relid)),
				 errhint("Every row of a distributed table needs a distribution "
						 "column value to choose its shard.")));
	return FindShardForValue(entry, value)->shardIndex;
}

/*
 * LockAllShardsForWrite locks every shard of a table against other writers
 * (in id order, the multi-shard write mode), before a write through the
 * coordinator reads the rows it changes; a split while waiting means
 * locking the new shards.  Returns the table's cache entry after the locks.
 */
DistTableCacheEntry *
LockAllShardsForWrite(Oid relid)
{
	for (;;)
	{
		DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);
		int			count;
		int64	   *ids;
		int64	   *layout;

		if (entry == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"%s\" is no longer distributed", get_rel_name(relid))));
		ids = SnapshotShardIds(entry, &count);
		layout = SnapshotShardIds(entry, &count);
		LockShardsInOrder(ids, count, ShardMultiWriteLockMode);
		entry = GetDistTableCacheEntry(relid);
		if (!ShardIdsChanged(entry, layout, count))
			return entry;
	}
}

/*
 * NextSourceRow stores the next row a write read from its subplan (see
 * MaterializeSubplan) in state->sourceSlot; false after the last.
 */
bool
NextSourceRow(DistributedScanState *state)
{
	MemoryContext oldContext;
	bool		found;

	/*
	 * Rows read back from disk are allocated in the current context and
	 * owned by the slot until the next row: not the batch memory, which is
	 * reset between batches.
	 */
	oldContext = MemoryContextSwitchTo(state->css.ss.ps.state->es_query_cxt);
	found = tuplestore_gettupleslot(state->sourceRows, true, false, state->sourceSlot);
	MemoryContextSwitchTo(oldContext);
	return found;
}

/*
 * BuildInsertBatch returns the INSERT of count rows of a shard (from the
 * first-th of shardRows on), their values as parameters after the shared
 * ones, in *paramsOut.
 */
static char *
BuildInsertBatch(InsertRows *rows, List *shardRows, int first, int count,
				 const char *prefix, const char *suffix, RemoteParams *shared,
				 RemoteParams **paramsOut)
{
	int			columns = rows->columns;
	RemoteParams *params = palloc0(sizeof(RemoteParams));
	StringInfoData sql;
	int			n = shared->count;

	params->count = shared->count + count * columns;
	params->types = palloc0(sizeof(Oid) * params->count);
	params->values = palloc0(sizeof(char *) * params->count);
	params->lengths = palloc0(sizeof(int) * params->count);
	params->formats = palloc0(sizeof(int) * params->count);
	for (int i = 0; i < shared->count; i++)
	{
		params->types[i] = shared->types[i];
		params->values[i] = shared->values[i];
		params->lengths[i] = shared->lengths[i];
		params->formats[i] = shared->formats[i];
	}

	initStringInfo(&sql);
	appendStringInfoString(&sql, prefix);
	appendStringInfoString(&sql, " VALUES ");
	for (int i = 0; i < count; i++)
	{
		int			r = list_nth_int(shardRows, first + i);

		appendStringInfoString(&sql, i > 0 ? ", (" : "(");
		for (int c = 0; c < columns; c++)
		{
			appendStringInfo(&sql, "%s$%d::%s", c > 0 ? ", " : "", n + 1,
							 RemoteTypeName(rows->types[c], -1));
			EncodeRemoteParam(params, n, rows->values[r * columns + c],
						rows->nulls[r * columns + c], rows->types[c]);
			n++;
		}
		appendStringInfoChar(&sql, ')');
	}
	appendStringInfoString(&sql, suffix);
	*paramsOut = params;
	return sql.data;
}

/*
 * ChooseReadPlacement picks the placement a read of a replicated shard (a
 * reference table) uses: one on a node this transaction already uses (it
 * sees the transaction's writes), else one on this server itself, else
 * one chosen by process id, so sessions spread over the nodes.
 */
static int
ChooseReadPlacement(ShardInterval *shard)
{
	int			choice = MyProcPid % Max(shard->placementCount, 1);

	if (shard->placementCount <= 1)
		return 0;
	for (int p = 0; p < shard->placementCount; p++)
	{
		List	   *conns = NodeConnectionList(shard->placementNodeIds[p]);
		ListCell   *cell;

		foreach(cell, conns)
		{
			if (((NodeConnection *) lfirst(cell))->xactState != REMOTE_XACT_NONE)
				return p;
		}
	}
	for (int p = 0; p < shard->placementCount; p++)
	{
		WorkerNode *node = LookupWorkerNode(shard->placementNodeIds[p]);

		if (node != NULL && node->port == PostPortNumber &&
			(strcmp(node->host, "127.0.0.1") == 0 || strcmp(node->host, "localhost") == 0))
			choice = p;
	}
	return choice;
}
