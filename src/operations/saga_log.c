/*-------------------------------------------------------------------------
 *
 * saga_log.c
 *	  The coordinator's log of sagas: shardext.saga_note_start(),
 *	  shardext.saga_note_action() and shardext.saga_note_state(), which the
 *	  saga runner calls over its loopback connection as the saga's owner
 *	  (saga_runner.c batches them: one commit per flush).
 *
 * They write shardext.saga and shardext.saga_action directly (heap and
 * index, as record_commit_decision writes its table): the tables grant
 * writes to nobody, and these functions act only on sagas of the calling
 * role (note_start records one for it).  They run several times for every
 * saga, so they do without SPI, PL/pgSQL and the search_path switch of a
 * SECURITY DEFINER function, which cost three times the writes.  Only the
 * runner holding a saga's lock writes its rows (and shardext_abandon_saga,
 * with the lock), so a row is never updated by two sessions at once.
 * What constraints would check, the functions check: the states and
 * statuses are those of the tables' CHECK constraints.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "shardext/metadata.h"
#include "shardext/saga.h"

/* columns of shardext.saga */
#define Natts_saga 17
#define Anum_saga_saga_id 1
#define Anum_saga_name 2
#define Anum_saga_owner 3
#define Anum_saga_steps 4
#define Anum_saga_step_nodes 5
#define Anum_saga_settings 6
#define Anum_saga_state 7
#define Anum_saga_current_step 8
#define Anum_saga_attempts 9
#define Anum_saga_next_attempt_at 10
#define Anum_saga_runner_pid 11
#define Anum_saga_failure 12
#define Anum_saga_failure_sqlstate 13
#define Anum_saga_error 14
#define Anum_saga_created_at 15
#define Anum_saga_updated_at 16
#define Anum_saga_finished_at 17

/* columns of shardext.saga_action */
#define Natts_saga_action 9
#define Anum_action_saga_id 1
#define Anum_action_step 2
#define Anum_action_compensation 3
#define Anum_action_node_id 4
#define Anum_action_attempt 5
#define Anum_action_status 6
#define Anum_action_error 7
#define Anum_action_started_at 8
#define Anum_action_finished_at 9

PG_FUNCTION_INFO_V1(shardext_saga_note_start);
PG_FUNCTION_INFO_V1(shardext_saga_note_action);
PG_FUNCTION_INFO_V1(shardext_saga_note_state);

/* a row to change: its values and which of them to replace */
typedef struct RowChange
{
	Datum		values[Natts_saga];
	bool		nulls[Natts_saga];
	bool		replace[Natts_saga];
} RowChange;

static void CheckState(const char *state);
static HeapTuple FindRow(Relation rel, const char *indexName, int keyCount, Datum *keys,
						 RegProcedure *procs);
static HeapTuple OwnSagaRow(Relation rel, int64 sagaId);
static void SetColumn(RowChange *change, int attno, Datum value, bool isnull);
static void UpdateRow(Relation rel, HeapTuple old, RowChange *change);
static void NoteActionRow(int64 sagaId, int step, bool compensation, int32 nodeId,
						  int32 attempt, const char *status, Datum error, bool errorIsNull);

/* CheckState refuses a state the table's CHECK constraint would refuse */
static void
CheckState(const char *state)
{
	static const char *const states[] = {
		"queued", "running", "completed", "compensating", "compensated", "failed", "abandoned"
	};

	for (int i = 0; i < lengthof(states); i++)
	{
		if (strcmp(state, states[i]) == 0)
			return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("\"%s\" is not a state of a saga", state)));
}

/*
 * shardext.saga_note_start(saga_id, name, steps, step_nodes, settings,
 * state, runner_pid) records a new saga of the calling role.
 */
Datum
shardext_saga_note_start(PG_FUNCTION_ARGS)
{
	Relation	rel = table_open(ShardextCatalogRelid("saga"), RowExclusiveLock);
	Datum		values[Natts_saga];
	bool		nulls[Natts_saga];
	TimestampTz now = GetCurrentTimestamp();
	HeapTuple	tuple;

	CheckState(text_to_cstring(PG_GETARG_TEXT_PP(5)));
	memset(nulls, true, sizeof(nulls));
	values[Anum_saga_saga_id - 1] = PG_GETARG_DATUM(0);
	values[Anum_saga_name - 1] = PG_GETARG_DATUM(1);
	values[Anum_saga_owner - 1] = ObjectIdGetDatum(GetUserId());
	values[Anum_saga_steps - 1] = PG_GETARG_DATUM(2);
	values[Anum_saga_step_nodes - 1] = PG_GETARG_DATUM(3);
	values[Anum_saga_settings - 1] = PG_GETARG_DATUM(4);
	values[Anum_saga_state - 1] = PG_GETARG_DATUM(5);
	values[Anum_saga_current_step - 1] = Int32GetDatum(0);
	values[Anum_saga_attempts - 1] = Int32GetDatum(0);
	values[Anum_saga_runner_pid - 1] = PG_GETARG_DATUM(6);
	values[Anum_saga_created_at - 1] = TimestampTzGetDatum(now);
	values[Anum_saga_updated_at - 1] = TimestampTzGetDatum(now);
	for (int i = Anum_saga_saga_id; i <= Anum_saga_updated_at; i++)
		nulls[i - 1] = i == Anum_saga_next_attempt_at || i == Anum_saga_failure ||
			i == Anum_saga_failure_sqlstate || i == Anum_saga_error;
	tuple = heap_form_tuple(RelationGetDescr(rel), values, nulls);
	CatalogTupleInsert(rel, tuple);
	heap_freetuple(tuple);
	table_close(rel, NoLock);
	PG_RETURN_VOID();
}

/*
 * shardext.saga_note_action(saga_id, state, step, compensation, node_id,
 * attempt, status, error, runner_pid) records that a step or compensation
 * started ('started': it becomes the saga's current action, in state) or
 * ended ('applied', 'failed').
 */
Datum
shardext_saga_note_action(PG_FUNCTION_ARGS)
{
	int64		sagaId = PG_GETARG_INT64(0);
	char	   *state = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *status = text_to_cstring(PG_GETARG_TEXT_PP(6));
	bool		started = strcmp(status, "started") == 0;
	Relation	rel;
	HeapTuple	old;
	RowChange	change;

	for (int i = 0; i < 8; i++)
	{
		if (i != 7 && PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("only the error of a saga action may be NULL")));
	}
	CheckState(state);
	if (!started && strcmp(status, "applied") != 0 && strcmp(status, "failed") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("\"%s\" is not a status of a saga action", status)));

	rel = table_open(ShardextCatalogRelid("saga"), RowExclusiveLock);
	old = OwnSagaRow(rel, sagaId);
	memset(&change, 0, sizeof(change));
	if (started)
	{
		SetColumn(&change, Anum_saga_state, PG_GETARG_DATUM(1), false);
		SetColumn(&change, Anum_saga_current_step, PG_GETARG_DATUM(2), false);
		SetColumn(&change, Anum_saga_attempts, PG_GETARG_DATUM(5), false);
	}
	SetColumn(&change, Anum_saga_next_attempt_at, (Datum) 0, true);
	SetColumn(&change, Anum_saga_runner_pid, PG_GETARG_DATUM(8), PG_ARGISNULL(8));
	SetColumn(&change, Anum_saga_updated_at, TimestampTzGetDatum(GetCurrentTimestamp()),
			  false);
	UpdateRow(rel, old, &change);
	table_close(rel, NoLock);

	NoteActionRow(sagaId, PG_GETARG_INT32(2), PG_GETARG_BOOL(3), PG_GETARG_INT32(4),
				  PG_GETARG_INT32(5), status, PG_GETARG_DATUM(7), PG_ARGISNULL(7));
	PG_RETURN_VOID();
}

/* NoteActionRow inserts or updates the row of an action */
static void
NoteActionRow(int64 sagaId, int step, bool compensation, int32 nodeId, int32 attempt,
			  const char *status, Datum error, bool errorIsNull)
{
	Relation	rel = table_open(ShardextCatalogRelid("saga_action"), RowExclusiveLock);
	Datum		keys[3] = {Int64GetDatum(sagaId), Int32GetDatum(step), BoolGetDatum(compensation)};
	RegProcedure procs[3] = {F_INT8EQ, F_INT4EQ, F_BOOLEQ};
	HeapTuple	old = FindRow(rel, "saga_action_pkey", 3, keys, procs);
	Datum		values[Natts_saga_action];
	bool		nulls[Natts_saga_action];
	TimestampTz now = GetCurrentTimestamp();
	bool		started = strcmp(status, "started") == 0;
	HeapTuple	tuple;

	memset(nulls, false, sizeof(nulls));
	values[Anum_action_saga_id - 1] = keys[0];
	values[Anum_action_step - 1] = keys[1];
	values[Anum_action_compensation - 1] = keys[2];
	values[Anum_action_node_id - 1] = Int32GetDatum(nodeId);
	values[Anum_action_attempt - 1] = Int32GetDatum(attempt);
	values[Anum_action_status - 1] = CStringGetTextDatum(status);
	values[Anum_action_error - 1] = error;
	nulls[Anum_action_error - 1] = errorIsNull;
	values[Anum_action_started_at - 1] = TimestampTzGetDatum(now);
	values[Anum_action_finished_at - 1] = TimestampTzGetDatum(now);
	nulls[Anum_action_finished_at - 1] = started;
	if (old != NULL && !started)
	{
		/* an action that ends keeps the time it started */
		values[Anum_action_started_at - 1] =
			heap_getattr(old, Anum_action_started_at, RelationGetDescr(rel),
						 &nulls[Anum_action_started_at - 1]);
	}
	tuple = heap_form_tuple(RelationGetDescr(rel), values, nulls);
	if (old != NULL)
		CatalogTupleUpdate(rel, &old->t_self, tuple);
	else
		CatalogTupleInsert(rel, tuple);
	table_close(rel, NoLock);
}

/*
 * shardext.saga_note_state(saga_id, state, current_step, attempts,
 * next_attempt_at, runner_pid, failure, failure_sqlstate, error) records
 * the state of a saga (failure and failure_sqlstate only when given);
 * completed, compensated and failed sagas get their finishing time.
 */
Datum
shardext_saga_note_state(PG_FUNCTION_ARGS)
{
	char	   *state;
	Relation	rel;
	HeapTuple	old;
	RowChange	change;
	bool		finished;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a saga's id, state, step and attempts cannot be NULL")));
	state = text_to_cstring(PG_GETARG_TEXT_PP(1));
	CheckState(state);
	finished = strcmp(state, "completed") == 0 || strcmp(state, "compensated") == 0 ||
		strcmp(state, "failed") == 0;

	rel = table_open(ShardextCatalogRelid("saga"), RowExclusiveLock);
	old = OwnSagaRow(rel, PG_GETARG_INT64(0));
	memset(&change, 0, sizeof(change));
	SetColumn(&change, Anum_saga_state, PG_GETARG_DATUM(1), false);
	SetColumn(&change, Anum_saga_current_step, PG_GETARG_DATUM(2), false);
	SetColumn(&change, Anum_saga_attempts, PG_GETARG_DATUM(3), false);
	SetColumn(&change, Anum_saga_next_attempt_at, PG_GETARG_DATUM(4), PG_ARGISNULL(4));
	SetColumn(&change, Anum_saga_runner_pid, PG_GETARG_DATUM(5), PG_ARGISNULL(5));
	if (!PG_ARGISNULL(6))
		SetColumn(&change, Anum_saga_failure, PG_GETARG_DATUM(6), false);
	if (!PG_ARGISNULL(7))
		SetColumn(&change, Anum_saga_failure_sqlstate, PG_GETARG_DATUM(7), false);
	SetColumn(&change, Anum_saga_error, PG_GETARG_DATUM(8), PG_ARGISNULL(8));
	SetColumn(&change, Anum_saga_updated_at, TimestampTzGetDatum(GetCurrentTimestamp()),
			  false);
	SetColumn(&change, Anum_saga_finished_at, TimestampTzGetDatum(GetCurrentTimestamp()),
			  !finished);
	UpdateRow(rel, old, &change);
	table_close(rel, NoLock);
	PG_RETURN_VOID();
}

/*
 * FindRow returns a copy of the row of rel with the given key in index
 * indexName (of shardext), as this transaction sees it now, or NULL.
 */
static HeapTuple
FindRow(Relation rel, const char *indexName, int keyCount, Datum *keys, RegProcedure *procs)
{
	ScanKeyData scanKeys[3];
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	SysScanDesc scan;
	HeapTuple	tuple;

	Assert(keyCount <= lengthof(scanKeys));
	for (int i = 0; i < keyCount; i++)
		ScanKeyInit(&scanKeys[i], i + 1, BTEqualStrategyNumber, procs[i], keys[i]);
	scan = systable_beginscan(rel, ShardextCatalogRelid(indexName), true, snapshot, keyCount,
							  scanKeys);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		tuple = heap_copytuple(tuple);
	else
		tuple = NULL;
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	return tuple;
}

/*
 * OwnSagaRow returns the row of a saga of the calling role (or of a role
 * whose privileges it has), or raises an error.
 */
static HeapTuple
OwnSagaRow(Relation rel, int64 sagaId)
{
	Datum		key = Int64GetDatum(sagaId);
	RegProcedure proc = F_INT8EQ;
	HeapTuple	tuple = FindRow(rel, "saga_pkey", 1, &key, &proc);
	bool		isnull;

	if (tuple == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("saga " INT64_FORMAT " does not exist", sagaId)));
	if (!has_privs_of_role(GetUserId(),
						   DatumGetObjectId(heap_getattr(tuple, Anum_saga_owner,
														 RelationGetDescr(rel), &isnull))))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("saga " INT64_FORMAT " is not yours", sagaId)));
	return tuple;
}

static void
SetColumn(RowChange *change, int attno, Datum value, bool isnull)
{
	change->values[attno - 1] = value;
	change->nulls[attno - 1] = isnull;
	change->replace[attno - 1] = true;
}

/* UpdateRow writes the changed columns of a saga's row */
static void
UpdateRow(Relation rel, HeapTuple old, RowChange *change)
{
	HeapTuple	tuple = heap_modify_tuple(old, RelationGetDescr(rel), change->values,
										  change->nulls, change->replace);

	CatalogTupleUpdate(rel, &old->t_self, tuple);
	heap_freetuple(tuple);
}
