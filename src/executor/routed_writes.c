/*-------------------------------------------------------------------------
 *
 * routed_writes.c
 *	  The write of an UPDATE, DELETE or MERGE that runs through the
 *	  coordinator (see coordinator_modify.c for the plan): the subplan's
 *	  rows name target rows by (distribution value, shard ctid); each row
 *	  gets the first action whose condition holds, and the actions' rows
 *	  are sent per shard, batch by batch, as one statement each:
 *
 *		UPDATE ONLY shard t SET a = v.c2 ...
 *			FROM ROWS FROM (unnest($1::tid[]), unnest($2 ...)) v WHERE t.ctid = v.c1
 *		DELETE FROM ONLY shard t WHERE t.ctid = ANY ($1::tid[])
 *		INSERT INTO shard (a, ...) SELECT ... FROM ROWS FROM (unnest($1), ...) v
 *
 * Values travel as arrays of their type (binary for built-in types), or as
 * text arrays cast back on the shard for types without a usable array
 * type (arrays, composites).  Every shard of the target is locked against
 * other writers before the subplan runs, its rows are all read before the
 * first write (as PostgreSQL's snapshot would), and each UPDATE or DELETE
 * must change exactly the rows it was given (distributed_executor.c checks
 * the count).  A target row that two rows of the subplan name is changed
 * once; for MERGE that is PostgreSQL's cardinality violation.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "storage/itemptr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "shardext/deparser.h"
#include "shardext/distributed_executor.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/remote_sql.h"

/* subplan rows decided per batch */
#define ROUTED_BATCH_ROWS 10000

/* the subplan's first two columns: ctid and distribution value */
#define CTID_COLUMN 0
#define DIST_COLUMN 1

typedef struct ActionState
{
	bool		matched;
	int			command;		/* CMD_UPDATE, CMD_DELETE, CMD_INSERT, CMD_NOTHING */
	List	   *attnos;
	int			distPosition;
	ExprState  *qual;
	List	   *values;			/* ExprState * */
	Oid		   *types;			/* of the values */
} ActionState;

/* a target row changed so far, by shard */
typedef struct SeenRowKey
{
	int32		shardIndex;
	BlockNumber block;
	OffsetNumber offset;
} SeenRowKey;

/* one row of a batch that an action writes */
typedef struct RoutedRow
{
	ItemPointerData ctid;
	Datum	   *values;
	bool	   *nulls;
} RoutedRow;

typedef struct RoutedWriteState
{
	int			actionCount;
	ActionState *actions;
	List	   *returningStates;	/* ExprState * */
	HTAB	   *seen;
	bool		locked;
	List	   *returned;		/* MinimalTuples of the batch, handed out when it is done */
	int			nextReturned;
} RoutedWriteState;

static void InitRoutedWrite(DistributedScanState *state);
static int	ChooseAction(RoutedWriteState *routed, bool matched, ExprContext *econtext);
static MinimalTuple EvaluateReturning(RoutedWriteState *routed, ExprContext *econtext,
									  TupleDesc resultDesc);
static bool FirstChange(DistributedScanState *state, int shardIndex, ItemPointer ctid);
static RoutedRow *EvaluateActionRow(ActionState *action, ExprContext *econtext,
									ItemPointer ctid);
static void AddActionTasks(DistributedScanState *state, DistTableCacheEntry *entry,
						   ShardInterval *shard, ActionState *action, List *rows);
static void AppendArrayParam(StringInfo sql, RemoteParams *params, int number, List *rows,
							 int column, Oid type, bool *castBack);
static const char *ColumnName(Oid relid, int attno);

/*
 * InitRoutedWrite reads the actions from the job and the expression
 * states (in custom_exprs order: per action its condition and values, then
 * RETURNING), once per execution.
 */
static void
InitRoutedWrite(DistributedScanState *state)
{
	DistributedJob *job = state->job;
	MemoryContext oldContext = MemoryContextSwitchTo(state->execContext);
	RoutedWriteState *routed = palloc0(sizeof(RoutedWriteState));
	ListCell   *exprCell = list_head(state->insertExprStates);
	ListCell   *cell;
	HASHCTL		info;
	int			a = 0;

	routed->actionCount = list_length(job->routedActions);
	routed->actions = palloc0(sizeof(ActionState) * Max(routed->actionCount, 1));
	foreach(cell, job->routedActions)
	{
		List	   *desc = lfirst(cell);
		ActionState *action = &routed->actions[a++];
		int			n;

		action->matched = intVal(linitial(desc)) != 0;
		action->command = intVal(lsecond(desc));
		action->attnos = lthird(desc);
		action->distPosition = intVal(lfourth(desc));
		action->qual = lfirst(exprCell);
		exprCell = lnext(state->insertExprStates, exprCell);
		n = list_length(action->attnos);
		action->types = palloc(sizeof(Oid) * Max(n, 1));
		for (int i = 0; i < n; i++)
		{
			ExprState  *value = lfirst(exprCell);

			action->values = lappend(action->values, value);
			action->types[i] = exprType((Node *) value->expr);
			exprCell = lnext(state->insertExprStates, exprCell);
		}
	}
	for (; exprCell != NULL; exprCell = lnext(state->insertExprStates, exprCell))
		routed->returningStates = lappend(routed->returningStates, lfirst(exprCell));

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(SeenRowKey);
	info.entrysize = sizeof(SeenRowKey);
	info.hcxt = state->execContext;
	routed->seen = hash_create("shardext changed rows", 1024, &info,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	state->routed = routed;
	MemoryContextSwitchTo(oldContext);
}

/* ResetRoutedWrite forgets the execution's state (its memory is execContext's) */
void
ResetRoutedWrite(DistributedScanState *state)
{
	state->routed = NULL;
}

/*
 * BuildRoutedTasks decides the next batch of the subplan's rows and makes
 * the batch's tasks (in the batch memory context); sets subplanDone after
 * the last row.
 */
void
BuildRoutedTasks(DistributedScanState *state)
{
	DistributedJob *job = state->job;
	Oid			relid = linitial_oid(job->relations);
	ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
	TupleDesc	resultDesc = state->css.ss.ss_ScanTupleSlot->tts_tupleDescriptor;
	RoutedWriteState *routed;
	DistTableCacheEntry *entry;
	List	  **groups;
	int			count = 0;

	if (state->routed == NULL)
		InitRoutedWrite(state);
	routed = state->routed;
	if (!routed->locked)
	{
		LockAllShardsForWrite(relid);
		routed->locked = true;
	}
	if (state->sourceRows == NULL)
		MaterializeSubplan(state);
	entry = GetDistTableCacheEntry(relid);
	if (entry == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is no longer distributed", get_rel_name(relid))));

	groups = palloc0(sizeof(List *) * entry->shardCount * Max(routed->actionCount, 1));
	routed->returned = NIL;
	routed->nextReturned = 0;
	while (count < ROUTED_BATCH_ROWS)
	{
		TupleTableSlot *slot = state->sourceSlot;
		ActionState *action;
		ItemPointer ctid = NULL;
		int			shardIndex = 0;
		int			chosen;
		RoutedRow  *row;

		CHECK_FOR_INTERRUPTS();
		if (!NextSourceRow(state))
		{
			state->subplanDone = true;
			break;
		}
		count++;
		slot_getallattrs(slot);
		ResetExprContext(econtext);
		econtext->ecxt_outertuple = slot;

		chosen = ChooseAction(routed, !slot->tts_isnull[CTID_COLUMN], econtext);
		if (chosen < 0 || routed->actions[chosen].command == CMD_NOTHING)
			continue;
		action = &routed->actions[chosen];
		if (action->command != CMD_INSERT)
		{
			ctid = (ItemPointer) DatumGetPointer(slot->tts_values[CTID_COLUMN]);
			shardIndex = ShardIndexForRow(entry, slot->tts_values[DIST_COLUMN],
										  slot->tts_isnull[DIST_COLUMN]);
			if (!FirstChange(state, shardIndex, ctid))
				continue;
		}
		row = EvaluateActionRow(action, econtext, ctid);
		if (action->command == CMD_INSERT && action->distPosition >= 0)
			shardIndex = ShardIndexForRow(entry, row->values[action->distPosition],
										  row->nulls[action->distPosition]);
		groups[shardIndex * routed->actionCount + chosen] =
			lappend(groups[shardIndex * routed->actionCount + chosen], row);

		if (job->hasReturning)
			routed->returned = lappend(routed->returned,
									   EvaluateReturning(routed, econtext, resultDesc));
	}

	for (int s = 0; s < entry->shardCount; s++)
	{
		for (int a = 0; a < routed->actionCount; a++)
		{
			List	   *rows = groups[s * routed->actionCount + a];

			if (rows != NIL)
				AddActionTasks(state, entry, &entry->shards[s], &routed->actions[a], rows);
		}
	}
}

/* the RETURNING row of the current row, in the batch's memory */
static MinimalTuple
EvaluateReturning(RoutedWriteState *routed, ExprContext *econtext, TupleDesc resultDesc)
{
	Datum	   *values = palloc(sizeof(Datum) * resultDesc->natts);
	bool	   *nulls = palloc(sizeof(bool) * resultDesc->natts);
	ListCell   *cell;
	int			i = 0;

	foreach(cell, routed->returningStates)
	{
		values[i] = ExecEvalExprSwitchContext(lfirst(cell), econtext, &nulls[i]);
		i++;
	}
	return FormMinimalTuple(resultDesc, values, nulls);
}

/* the first action (in WHEN order) for the row whose condition holds, or -1 */
static int
ChooseAction(RoutedWriteState *routed, bool matched, ExprContext *econtext)
{
	for (int a = 0; a < routed->actionCount; a++)
	{
		ActionState *action = &routed->actions[a];
		bool		isnull;
		Datum		value;

		if (action->matched != matched)
			continue;
		value = ExecEvalExprSwitchContext(action->qual, econtext, &isnull);
		if (!isnull && DatumGetBool(value))
			return a;
	}
	return -1;
}

/*
 * FirstChange records that a target row is changed; false when it already
 * was.  A second change of one row is skipped for UPDATE ... FROM and
 * DELETE ... USING (PostgreSQL changes such a row once, with one of the
 * rows that matched it) and an error for MERGE, as in PostgreSQL.
 */
static bool
FirstChange(DistributedScanState *state, int shardIndex, ItemPointer ctid)
{
	SeenRowKey	key;
	bool		found;

	/* without joins every target row comes once: nothing to remember */
	if (!state->job->routedDedupe)
		return true;
	memset(&key, 0, sizeof(key));
	key.shardIndex = shardIndex;
	key.block = ItemPointerGetBlockNumber(ctid);
	key.offset = ItemPointerGetOffsetNumber(ctid);
	hash_search(state->routed->seen, &key, HASH_ENTER, &found);
	if (found && state->job->routedStrict)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("MERGE command cannot affect row a second time"),
				 errhint("Ensure that not more than one source row matches any one target row.")));
	return !found;
}

/* the values an action writes for the current row, copied into the batch's memory */
static RoutedRow *
EvaluateActionRow(ActionState *action, ExprContext *econtext, ItemPointer ctid)
{
	int			n = list_length(action->values);
	RoutedRow  *row = palloc(sizeof(RoutedRow));
	ListCell   *cell;
	int			i = 0;

	if (ctid != NULL)
		ItemPointerCopy(ctid, &row->ctid);
	row->values = palloc(sizeof(Datum) * Max(n, 1));
	row->nulls = palloc(sizeof(bool) * Max(n, 1));
	foreach(cell, action->values)
	{
		int16		typlen;
		bool		typbyval;
		Datum		value = ExecEvalExprSwitchContext(lfirst(cell), econtext, &row->nulls[i]);

		get_typlenbyval(action->types[i], &typlen, &typbyval);
		row->values[i] = row->nulls[i] ? (Datum) 0 : datumCopy(value, typbyval, typlen);
		i++;
	}
	return row;
}

static const char *
ColumnName(Oid relid, int attno)
{
	return quote_identifier(get_attname(relid, attno, false));
}

/*
 * AddActionTasks makes the statement that applies one action to its rows
 * of one shard (see the file header), on every placement of the shard.
 */
static void
AddActionTasks(DistributedScanState *state, DistTableCacheEntry *entry, ShardInterval *shard,
			   ActionState *action, List *rows)
{
	Oid			relid = entry->relid;
	char	   *shardName = QualifiedShardName(relid, shard->shardId);
	int			n = list_length(action->attnos);
	RemoteParams *params = MakeRemoteParams(action->command == CMD_INSERT ? n : n + 1);
	StringInfoData sql;
	StringInfoData columns;
	bool	   *castBack = palloc0(sizeof(bool) * (n + 1));
	RemoteTask *task;
	ListCell   *cell;
	int			i;

	initStringInfo(&sql);
	initStringInfo(&columns);
	if (action->command == CMD_DELETE)
	{
		appendStringInfo(&sql, "DELETE FROM ONLY %s t WHERE t.ctid OPERATOR(pg_catalog.=) ANY (",
						 shardName);
		AppendArrayParam(&sql, params, 0, rows, -1, TIDOID, &castBack[0]);
		appendStringInfoChar(&sql, ')');
	}
	else if (action->command == CMD_UPDATE)
	{
		appendStringInfoString(&columns, "ROWS FROM (pg_catalog.unnest(");
		AppendArrayParam(&columns, params, 0, rows, -1, TIDOID, &castBack[0]);
		for (i = 0; i < n; i++)
		{
			appendStringInfoString(&columns, "), pg_catalog.unnest(");
			AppendArrayParam(&columns, params, i + 1, rows, i, action->types[i], &castBack[i + 1]);
		}
		appendStringInfoChar(&columns, ')');
		appendStringInfo(&sql, "UPDATE ONLY %s t SET ", shardName);
		i = 0;
		foreach(cell, action->attnos)
		{
			appendStringInfo(&sql, "%s%s = ", i > 0 ? ", " : "", ColumnName(relid, lfirst_int(cell)));
			if (castBack[i + 1])
				appendStringInfo(&sql, "(v.c%d)::%s", i + 2, RemoteTypeName(action->types[i], -1));
			else
				appendStringInfo(&sql, "v.c%d", i + 2);
			i++;
		}
		appendStringInfo(&sql, " FROM %s) v(", columns.data);
		for (i = 0; i <= n; i++)
			appendStringInfo(&sql, "%sc%d", i > 0 ? ", " : "", i + 1);
		appendStringInfoString(&sql, ") WHERE t.ctid OPERATOR(pg_catalog.=) v.c1");
	}
	else
	{
		appendStringInfo(&sql, "INSERT INTO %s (", shardName);
		i = 0;
		foreach(cell, action->attnos)
			appendStringInfo(&sql, "%s%s", i++ > 0 ? ", " : "", ColumnName(relid, lfirst_int(cell)));
		appendStringInfoString(&columns, "ROWS FROM (");
		for (i = 0; i < n; i++)
		{
			appendStringInfoString(&columns, i > 0 ? "), pg_catalog.unnest(" : "pg_catalog.unnest(");
			AppendArrayParam(&columns, params, i, rows, i, action->types[i], &castBack[i]);
		}
		appendStringInfoString(&columns, n > 0 ? ")" : "");
		appendStringInfoString(&sql, ") SELECT ");
		for (i = 0; i < n; i++)
		{
			if (castBack[i])
				appendStringInfo(&sql, "%s(v.c%d)::%s", i > 0 ? ", " : "", i + 1,
								 RemoteTypeName(action->types[i], -1));
			else
				appendStringInfo(&sql, "%sv.c%d", i > 0 ? ", " : "", i + 1);
		}
		appendStringInfo(&sql, " FROM %s) v(", columns.data);
		for (i = 0; i < n; i++)
			appendStringInfo(&sql, "%sc%d", i > 0 ? ", " : "", i + 1);
		appendStringInfoChar(&sql, ')');
	}
	task = AddShardTasks(state, shard, sql.data, params, true);
	task->checkRows = true;
	task->expectedRows = list_length(rows);
}

/*
 * AppendArrayParam makes parameter number (0-based) the array of the rows'
 * values of column (-1: their ctids) and appends "$n::type[]".  A type
 * whose values cannot form an array of it (arrays, composite types) is
 * sent as text[]; *castBack then tells the caller to cast each element.
 */
static void
AppendArrayParam(StringInfo sql, RemoteParams *params, int number, List *rows, int column,
				 Oid type, bool *castBack)
{
	int			count = list_length(rows);
	Datum	   *values = palloc(sizeof(Datum) * Max(count, 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(count, 1));
	Oid			arrayType = get_array_type(type);
	Oid			elementType = type;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			dims[1] = {count};
	int			lbs[1] = {1};
	ListCell   *cell;
	int			i = 0;

	*castBack = !OidIsValid(arrayType) || type_is_rowtype(type) ||
		OidIsValid(get_element_type(type));
	if (*castBack)
	{
		elementType = TEXTOID;
		arrayType = TEXTARRAYOID;
	}
	foreach(cell, rows)
	{
		RoutedRow  *row = lfirst(cell);

		if (column < 0)
		{
			ItemPointer copy = palloc(sizeof(ItemPointerData));

			ItemPointerCopy(&row->ctid, copy);
			values[i] = PointerGetDatum(copy);
			nulls[i] = false;
		}
		else if (*castBack && !row->nulls[column])
		{
			Oid			output;
			bool		isVarlena;
			int			nestLevel = BeginSafeDeparse();

			getTypeOutputInfo(type, &output, &isVarlena);
			values[i] = CStringGetTextDatum(OidOutputFunctionCall(output, row->values[column]));
			EndSafeDeparse(nestLevel);
			nulls[i] = false;
		}
		else
		{
			values[i] = row->values[column];
			nulls[i] = row->nulls[column];
		}
		i++;
	}
	get_typlenbyvalalign(elementType, &typlen, &typbyval, &typalign);
	EncodeRemoteParam(params, number,
					  PointerGetDatum(construct_md_array(values, nulls, 1, dims, lbs, elementType,
														 typlen, typbyval, typalign)),
					  false, arrayType);
	appendStringInfo(sql, "$%d::%s", number + 1, RemoteTypeName(arrayType, -1));
}

/*
 * AddSourceArrayParams returns params followed by one text array per
 * column of the scan's subplan, with that column's values of all its rows
 * (read completely first, after the shards were locked), in the remote
 * sessions' output settings: a MERGE source shipped to every copy of a
 * reference table.
 */
RemoteParams *
AddSourceArrayParams(DistributedScanState *state, RemoteParams *params)
{
	int			columns = state->job->sourceArrayCount;
	RemoteParams *result = MakeRemoteParams(params->count + columns);
	TupleDesc	desc;
	List	  **texts = palloc0(sizeof(List *) * columns);
	int			rows = 0;

	for (int i = 0; i < params->count; i++)
	{
		result->types[i] = params->types[i];
		result->values[i] = params->values[i];
		result->lengths[i] = params->lengths[i];
		result->formats[i] = params->formats[i];
	}
	if (state->sourceRows == NULL)
		MaterializeSubplan(state);
	desc = state->sourceSlot->tts_tupleDescriptor;
	while (NextSourceRow(state))
	{
		TupleTableSlot *slot = state->sourceSlot;
		int			nestLevel = BeginSafeDeparse();

		slot_getallattrs(slot);
		for (int c = 0; c < columns; c++)
		{
			Oid			output;
			bool		isVarlena;

			if (slot->tts_isnull[c])
			{
				texts[c] = lappend(texts[c], NULL);
				continue;
			}
			getTypeOutputInfo(TupleDescAttr(desc, c)->atttypid, &output, &isVarlena);
			texts[c] = lappend(texts[c], OidOutputFunctionCall(output, slot->tts_values[c]));
		}
		EndSafeDeparse(nestLevel);
		rows++;
		CHECK_FOR_INTERRUPTS();
	}
	for (int c = 0; c < columns; c++)
	{
		Datum	   *values = palloc(sizeof(Datum) * Max(rows, 1));
		bool	   *nulls = palloc(sizeof(bool) * Max(rows, 1));
		int			dims[1] = {rows};
		int			lbs[1] = {1};
		ListCell   *cell;
		int			r = 0;

		foreach(cell, texts[c])
		{
			nulls[r] = (lfirst(cell) == NULL);
			values[r] = nulls[r] ? (Datum) 0 : CStringGetTextDatum(lfirst(cell));
			r++;
		}
		EncodeRemoteParam(result, params->count + c,
						  PointerGetDatum(construct_md_array(values, nulls, 1, dims, lbs, TEXTOID,
															 -1, false, TYPALIGN_INT)),
						  false, TEXTARRAYOID);
	}
	return result;
}

/*
 * NextRoutedReturnedRow stores the next RETURNING row of the batch whose
 * writes are done; false when there is none.
 */
bool
NextRoutedReturnedRow(DistributedScanState *state, TupleTableSlot *slot)
{
	RoutedWriteState *routed = state->routed;

	if (state->job->kind != JOB_ROUTED || routed == NULL ||
		routed->nextReturned >= list_length(routed->returned))
		return false;
	ExecStoreMinimalTuple(list_nth(routed->returned, routed->nextReturned++),
						  state->bufferSlot, false);
	ExecCopySlot(slot, state->bufferSlot);
	return true;
}
