/*-------------------------------------------------------------------------
 *
 * saga.c
 *	  The SQL functions of sagas: shardext_run_saga, shardext_start_saga,
 *	  shardext_retry_saga and shardext_abandon_saga, and the checks of a
 *	  saga's definition.
 *
 * A definition is checked in full before anything runs or is recorded:
 * at least one step, each with a statement and (but the last) a
 * compensation, each statement, compensation and check routed with the
 * step's parameters to one shard (saga_routing.c), and a step's
 * compensation and check on its statement's node.  The routing runs in a
 * subtransaction that is rolled back, so the definition leaves no locks.
 *
 * Only a saga's owner and administrators (superusers, members of
 * shardext_admin) may retry or abandon it; shardext.sagas shows each user
 * their own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "shardext/array_literal.h"
#include "shardext/maintenance.h"
#include "shardext/metadata.h"
#include "shardext/privileges.h"
#include "shardext/remote_xact.h"
#include "shardext/saga.h"

/* more steps than this is a mistake, not a saga */
#define SAGA_MAX_STEPS 1000

PG_FUNCTION_INFO_V1(shardext_run_saga);
PG_FUNCTION_INFO_V1(shardext_start_saga);
PG_FUNCTION_INFO_V1(shardext_retry_saga);
PG_FUNCTION_INFO_V1(shardext_abandon_saga);

static Saga *DefineSaga(const char *name, Datum stepsArray);
static void CheckStepDefinition(SagaStep *step, int number, int count);
static void RouteDefinition(Saga *saga);
static int32 StepNode(List *statements, int32 node, int step, const char *what);
static int64 NextSagaId(void);
static char *NoteStartSql(Saga *saga, Datum stepsArray, Oid arrayType);
static int64 InsertQueuedSaga(Saga *saga, Datum stepsArray, Oid arrayType);
static void ReportSagaEnd(Saga *saga);
static void PreventSagaAfterNodeWrites(const char *function);
static Saga *LoadUnfinishedSaga(int64 sagaId);
static void CheckSagaAccess(Saga *saga);
static void LockSagaForChange(Saga *saga);
static char *StringField(HeapTupleHeader tuple, int attno);
static char *NonBlank(char *value);

/*
 * shardext_run_saga(name text, steps shardext.saga_step[]) runs a saga in
 * this session: step after step, each committed on its node, and on a
 * failure the compensations of the committed steps backwards.  Returns the
 * saga's id when it completed; raises the failure when it was compensated
 * (or could not be).
 */
Datum
shardext_run_saga(PG_FUNCTION_ARGS)
{
	Datum		stepsArray = PG_GETARG_DATUM(1);
	Oid			arrayType = get_fn_expr_argtype(fcinfo->flinfo, 1);
	Saga	   *saga = DefineSaga(text_to_cstring(PG_GETARG_TEXT_PP(0)), stepsArray);
	char	   *noteStart;

	PreventSagaAfterNodeWrites("shardext_run_saga");

	/* locked before it exists: the daemon never takes a saga a session runs */
	saga->sagaId = NextSagaId();
	if (!TryLockSaga(saga->sagaId))
		elog(ERROR, "saga " INT64_FORMAT " is locked", saga->sagaId);
	noteStart = NoteStartSql(saga, stepsArray, arrayType);
	PG_TRY();
	{
		(void) RunSaga(saga, true, noteStart);
	}
	PG_FINALLY();
	{
		UnlockSaga(saga->sagaId);
		/* a saga left unfinished is the daemon's now */
		if (strcmp(saga->state, "completed") != 0 && strcmp(saga->state, "compensated") != 0)
			WakeMaintenanceDaemon();
	}
	PG_END_TRY();
	ReportSagaEnd(saga);
	PG_RETURN_INT64(saga->sagaId);
}

/*
 * shardext_start_saga(name text, steps shardext.saga_step[]) records a saga
 * as queued in the caller's transaction: when (and only if) it commits,
 * the maintenance daemon runs the saga.  Returns its id.
 */
Datum
shardext_start_saga(PG_FUNCTION_ARGS)
{
	Datum		stepsArray = PG_GETARG_DATUM(1);
	Saga	   *saga = DefineSaga(text_to_cstring(PG_GETARG_TEXT_PP(0)), stepsArray);
	int64		sagaId;

	sagaId = InsertQueuedSaga(saga, stepsArray, get_fn_expr_argtype(fcinfo->flinfo, 1));
	WakeMaintenanceDaemonAtCommit();
	PG_RETURN_INT64(sagaId);
}

/*
 * shardext_retry_saga(saga_id bigint) runs a saga that needs attention (or
 * waits for its next attempt) again in this session, from where it
 * stopped, with a fresh count of retries: a failed one goes on
 * compensating.  Returns the state it reached.
 */
Datum
shardext_retry_saga(PG_FUNCTION_ARGS)
{
	int64		sagaId = PG_GETARG_INT64(0);
	Saga	   *saga = LoadUnfinishedSaga(sagaId);

	PreventSagaAfterNodeWrites("shardext_retry_saga");
	if (!TryLockSaga(sagaId))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("saga " INT64_FORMAT " is being run by another session", sagaId),
				 errhint("Wait until its current attempt ends, then try again.")));
	if (strcmp(saga->state, "failed") == 0)
		saga->state = "compensating";
	saga->attempts = 0;
	PG_TRY();
	{
		(void) RunSaga(saga, true, NULL);
	}
	PG_FINALLY();
	{
		UnlockSaga(sagaId);
		WakeMaintenanceDaemon();
	}
	PG_END_TRY();
	PG_RETURN_TEXT_P(cstring_to_text(saga->state));
}

/*
 * shardext_abandon_saga(saga_id bigint) gives up a saga: nothing more runs
 * for it (what its steps and compensations applied stays as it is).  For
 * sagas that need attention, after their remains were dealt with by hand,
 * and for queued ones that should not run.
 */
Datum
shardext_abandon_saga(PG_FUNCTION_ARGS)
{
	int64		sagaId = PG_GETARG_INT64(0);
	Saga	   *saga = LoadUnfinishedSaga(sagaId);
	CatalogAccess access;
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(sagaId)};

	LockSagaForChange(saga);
	if (strcmp(saga->state, "running") == 0 || strcmp(saga->state, "compensating") == 0)
		ereport(WARNING,
				(errmsg("saga " INT64_FORMAT " is abandoned while %s at step %d", sagaId,
						saga->state, saga->currentStep),
				 errdetail("Its steps up to step %d may have applied and are not undone.",
						   saga->currentStep)));

	BeginCatalogAccess(&access);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("UPDATE shardext.saga SET state = 'abandoned', "
							  "next_attempt_at = NULL, updated_at = pg_catalog.now(), "
							  "finished_at = pg_catalog.now() WHERE saga_id = $1",
							  1, argtypes, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not abandon saga " INT64_FORMAT, sagaId);
	SPI_finish();
	EndCatalogAccess(&access);
	ereport(LOG,
			(errmsg("shardext saga " INT64_FORMAT " (\"%s\") was abandoned by %s in state %s",
					sagaId, saga->name, GetUserNameFromId(GetUserId(), false), saga->state)));
	PG_RETURN_VOID();
}

/*
 * DefineSaga checks that shardext is installed and a saga's definition, and
 * routes its steps; nothing is recorded yet.  The saga is owned by the
 * current user.
 */
static Saga *
DefineSaga(const char *name, Datum stepsArray)
{
	Saga	   *saga = palloc0(sizeof(Saga));

	EnsureShardextInstalled();
	saga->name = pstrdup(name);
	saga->owner = GetUserId();
	saga->steps = SagaStepsFromArray(stepsArray, &saga->stepCount);
	if (saga->stepCount == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("saga \"%s\" has no steps", name),
				 errhint("A saga is an array of at least one shardext.saga_step.")));
	if (saga->stepCount > SAGA_MAX_STEPS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("saga \"%s\" has %d steps, more than %d", name, saga->stepCount,
						SAGA_MAX_STEPS)));
	for (int i = 0; i < saga->stepCount; i++)
		CheckStepDefinition(&saga->steps[i], i + 1, saga->stepCount);
	saga->stepNodes = palloc0(sizeof(int32) * saga->stepCount);
	saga->routes = palloc0(sizeof(List *) * saga->stepCount * 2);
	RouteDefinition(saga);
	saga->settings = CurrentSagaSettings();
	saga->state = "running";
	saga->currentStep = 1;
	saga->actions = palloc0(sizeof(SagaActionState) * saga->stepCount * 2);
	return saga;
}

/* CheckStepDefinition checks what a step must have, before any routing */
static void
CheckStepDefinition(SagaStep *step, int number, int count)
{
	if (step->statement == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("saga step %d has no statement", number)));
	if (step->compensation == NULL && number < count)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("saga step %d has no compensation", number),
				 errdetail("When a later step fails, the steps before it are undone by "
						   "their compensations."),
				 errhint("Give every step but the last a statement that undoes it, on the "
						 "same node, with the same parameters.")));
	if (step->expectRows < -1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("expect_rows of saga step %d is negative", number)));
}

/*
 * RouteDefinition routes every statement, compensation and check of the
 * saga (refusing what cannot be a step) and records each step's node, in
 * a subtransaction that is rolled back: routing locks the shards of
 * writes, and a definition keeps no locks.
 */
static void
RouteDefinition(Saga *saga)
{
	MemoryContext callerContext = CurrentMemoryContext;
	ResourceOwner callerOwner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(callerContext);
	PG_TRY();
	{
		for (int i = 0; i < saga->stepCount; i++)
		{
			SagaStep   *step = &saga->steps[i];
			int32		node;

			List	   *forward = RouteSagaStatements(step->statement, SAGA_STATEMENT, i + 1,
														  step->nParams, step->params,
														  step->expectRows);
			List	   *undo = NIL;
			List	   *check = NIL;

			node = StepNode(forward, 0, i + 1, "statement");
			if (step->compensation != NULL)
				undo = RouteSagaStatements(step->compensation, SAGA_COMPENSATION, i + 1,
										   step->nParams, step->params, -1);
			(void) StepNode(undo, node, i + 1, "compensation");
			if (step->checkQuery != NULL)
				check = RouteSagaStatements(step->checkQuery, SAGA_CHECK, i + 1,
											step->nParams, step->params, -1);
			(void) StepNode(check, node, i + 1, "check query");
			saga->stepNodes[i] = node;
			/*
			 * a saga run at once uses these routes (LockRoutedStatements);
			 * compensations, which are rare, are routed when they run, so
			 * that what the coordinator computes for them (sequence values
			 * of defaults) comes after their steps
			 */
			saga->routes[i * 2] = list_concat(forward, check);
		}
	}
	PG_CATCH();
	{
		ErrorData  *error;

		MemoryContextSwitchTo(callerContext);
		error = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(callerContext);
		CurrentResourceOwner = callerOwner;
		ReThrowError(error);
	}
	PG_END_TRY();
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(callerContext);
	CurrentResourceOwner = callerOwner;
}

/*
 * StepNode returns the node of routed statements, which must all be node
 * (unless node is 0: the step's statement, which decides).
 */
static int32
StepNode(List *statements, int32 node, int step, const char *what)
{
	ListCell   *cell;

	foreach(cell, statements)
	{
		RoutedStatement *routed = lfirst(cell);

		if (node == 0)
			node = routed->nodeId;
		else if (routed->nodeId != node && strcmp(what, "statement") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the statements of saga step %d run on two nodes", step),
					 errdetail("They run on nodes %d and %d; a step is one local transaction "
							   "on one node.", node, routed->nodeId),
					 errhint("Split work on two nodes into two steps.")));
		else if (routed->nodeId != node)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the %s of saga step %d runs on another node than its statement",
							what, step),
					 errdetail("The step's statement runs on node %d, its %s on node %d; a "
							   "step is one local transaction on one node.",
							   node, what, routed->nodeId),
					 errhint("Pin the %s to the same distribution value (or a co-located "
							 "one) as the statement; split work on two nodes into two steps.",
							 what)));
	}
	return node;
}

/*
 * SagaStepsFromArray reads a shardext.saga_step[] value into SagaSteps
 * (blank strings count as missing).
 */
SagaStep *
SagaStepsFromArray(Datum arrayDatum, int *count)
{
	ArrayType  *array = DatumGetArrayTypeP(arrayDatum);
	Datum	   *elements;
	bool	   *nulls;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	SagaStep   *steps;

	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("the steps of a saga are a one-dimensional array")));
	get_typlenbyvalalign(ARR_ELEMTYPE(array), &typlen, &typbyval, &typalign);
	deconstruct_array(array, ARR_ELEMTYPE(array), typlen, typbyval, typalign, &elements,
					  &nulls, count);
	steps = palloc0(sizeof(SagaStep) * Max(*count, 1));
	for (int i = 0; i < *count; i++)
	{
		HeapTupleHeader tuple;
		bool		isnull;
		Datum		params;
		Datum		expect;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("saga step %d is NULL", i + 1)));
		tuple = DatumGetHeapTupleHeader(elements[i]);
		steps[i].statement = NonBlank(StringField(tuple, 1));
		params = GetAttributeByNum(tuple, 2, &isnull);
		if (!isnull)
		{
			List	   *values = TextArrayValues(params);
			ListCell   *cell;

			steps[i].nParams = list_length(values);
			steps[i].params = palloc0(sizeof(char *) * Max(steps[i].nParams, 1));
			foreach(cell, values)
				steps[i].params[foreach_current_index(cell)] = lfirst(cell);
		}
		steps[i].compensation = NonBlank(StringField(tuple, 3));
		steps[i].checkQuery = NonBlank(StringField(tuple, 4));
		expect = GetAttributeByNum(tuple, 5, &isnull);
		steps[i].expectRows = isnull ? -1 : DatumGetInt64(expect);
		if (!isnull && steps[i].expectRows < 0)
			steps[i].expectRows = -2;	/* refused by CheckStepDefinition */
	}
	return steps;
}

/* a text field of a composite value, or NULL */
static char *
StringField(HeapTupleHeader tuple, int attno)
{
	bool		isnull;
	Datum		value = GetAttributeByNum(tuple, attno, &isnull);

	return isnull ? NULL : TextDatumGetCString(value);
}

/* value, or NULL when it is only white space */
static char *
NonBlank(char *value)
{
	if (value == NULL)
		return NULL;
	for (char *c = value; *c != '\0'; c++)
	{
		if (!isspace((unsigned char) *c))
			return value;
	}
	return NULL;
}

/* TextArrayValues returns the elements of a text[] (NULL for NULLs) */
List *
TextArrayValues(Datum arrayDatum)
{
	Datum	   *elements;
	bool	   *nulls;
	int			count;
	List	   *result = NIL;

	deconstruct_array(DatumGetArrayTypeP(arrayDatum), TEXTOID, -1, false, TYPALIGN_INT,
					  &elements, &nulls, &count);
	for (int i = 0; i < count; i++)
		result = lappend(result, nulls[i] ? NULL : TextDatumGetCString(elements[i]));
	return result;
}

/* IntArrayValues returns the elements of an int[] without NULLs */
int32 *
IntArrayValues(Datum arrayDatum)
{
	Datum	   *elements;
	bool	   *nulls;
	int			count;
	int32	   *result;

	deconstruct_array(DatumGetArrayTypeP(arrayDatum), INT4OID, sizeof(int32), true,
					  TYPALIGN_INT, &elements, &nulls, &count);
	result = palloc0(sizeof(int32) * Max(count, 1));
	for (int i = 0; i < count; i++)
		result[i] = nulls[i] ? 0 : DatumGetInt32(elements[i]);
	return result;
}

/*
 * NextSagaId draws a saga id from shardext.saga's sequence (which the
 * caller need not be allowed to use: shardext writes its catalog).
 */
static int64
NextSagaId(void)
{
	return nextval_internal(ShardextCatalogRelid("saga_saga_id_seq"), false);
}

/* the literal of an array of node ids */
static char *
NodeArrayLiteral(Saga *saga)
{
	StringInfoData literal;

	initStringInfo(&literal);
	appendStringInfoChar(&literal, '{');
	for (int i = 0; i < saga->stepCount; i++)
		appendStringInfo(&literal, "%s%d", i > 0 ? "," : "", saga->stepNodes[i]);
	appendStringInfoChar(&literal, '}');
	return literal.data;
}

/*
 * NoteStartSql returns the log note that records a saga run in this
 * session (written with its first step's note, over the loopback
 * connection, as the saga's owner).
 */
static char *
NoteStartSql(Saga *saga, Datum stepsArray, Oid arrayType)
{
	Oid			output;
	bool		isVarlena;

	getTypeOutputInfo(arrayType, &output, &isVarlena);
	return psprintf("SELECT shardext.saga_note_start(" INT64_FORMAT ", %s, "
					"%s::shardext.saga_step[], %s::int[], %s::text[], 'running', %d);",
					saga->sagaId, quote_literal_cstr(saga->name),
					quote_literal_cstr(OidOutputFunctionCall(output, stepsArray)),
					quote_literal_cstr(NodeArrayLiteral(saga)),
					quote_literal_cstr(TextArrayLiteral(saga->settings)), MyProcPid);
}

/* InsertQueuedSaga records a queued saga in the caller's transaction */
static int64
InsertQueuedSaga(Saga *saga, Datum stepsArray, Oid arrayType)
{
	Oid			argtypes[5] = {TEXTOID, OIDOID, arrayType, TEXTOID, TEXTOID};
	Datum		args[5];
	CatalogAccess access;
	bool		isnull;
	int64		sagaId;

	args[0] = CStringGetTextDatum(saga->name);
	args[1] = ObjectIdGetDatum(saga->owner);
	args[2] = stepsArray;
	args[3] = CStringGetTextDatum(NodeArrayLiteral(saga));
	args[4] = CStringGetTextDatum(TextArrayLiteral(saga->settings));
	BeginCatalogAccess(&access);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("INSERT INTO shardext.saga (name, owner, steps, step_nodes, "
							  "settings, state) VALUES ($1, $2, $3, $4::int[], $5::text[], "
							  "'queued') RETURNING saga_id",
							  5, argtypes, args, NULL, false, 1) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not queue the saga");
	sagaId = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										 &isnull));
	SPI_finish();
	EndCatalogAccess(&access);
	return sagaId;
}

/*
 * ReportSagaEnd raises what the session that ran a saga must hear unless
 * it completed: the failure it was compensated for, a compensation that
 * failed, or that the daemon finishes it.
 */
static void
ReportSagaEnd(Saga *saga)
{
	int			sqlstate = ERRCODE_TRANSACTION_ROLLBACK;

	if (saga->failureSqlstate != NULL && strlen(saga->failureSqlstate) == 5)
		sqlstate = MAKE_SQLSTATE(saga->failureSqlstate[0], saga->failureSqlstate[1],
								 saga->failureSqlstate[2], saga->failureSqlstate[3],
								 saga->failureSqlstate[4]);
	if (strcmp(saga->state, "completed") == 0)
		return;
	if (strcmp(saga->state, "compensated") == 0 && saga->actions[0].status != SAGA_ACTION_DONE)
		ereport(ERROR,
				(errcode(sqlstate),
				 errmsg("saga " INT64_FORMAT " (\"%s\") failed at its first step: nothing "
						"was applied", saga->sagaId, saga->name),
				 errdetail("It failed at %s", saga->failure)));
	if (strcmp(saga->state, "compensated") == 0)
		ereport(ERROR,
				(errcode(sqlstate),
				 errmsg("saga " INT64_FORMAT " (\"%s\") failed and was compensated",
						saga->sagaId, saga->name),
				 errdetail("It failed at %s", saga->failure)));
	if (strcmp(saga->state, "failed") == 0)
		ereport(ERROR,
				(errcode(sqlstate),
				 errmsg("saga " INT64_FORMAT " (\"%s\") failed and could not be compensated",
						saga->sagaId, saga->name),
				 errdetail("It failed at %s; then the %s", saga->failure, saga->error),
				 errhint("It needs attention: fix the cause and call shardext_retry_saga("
						 INT64_FORMAT "), or undo the rest by hand and call "
						 "shardext_abandon_saga(" INT64_FORMAT ").",
						 saga->sagaId, saga->sagaId)));
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("saga " INT64_FORMAT " (\"%s\") is still %s at step %d", saga->sagaId,
					saga->name, saga->state, saga->currentStep),
			 errdetail("%s", saga->error ? saga->error : "It waits for a node."),
			 errhint("The maintenance daemon finishes it; shardext.sagas shows how it goes.")));
}

/*
 * PreventSagaAfterNodeWrites refuses to run a saga in a transaction that
 * wrote on nodes: the steps run on connections of their own, and would
 * wait for the transaction's own row locks (which it keeps until after
 * the saga), and a rollback of the transaction could not undo the steps
 * either way.  Other transactions may run sagas: their steps commit on
 * their own, like the work of dblink.
 */
static void
PreventSagaAfterNodeWrites(const char *function)
{
	if (RemoteTransactionWrote())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("%s cannot run in a transaction that wrote on nodes", function),
				 errdetail("The steps of a saga commit one by one on their nodes, on "
						   "connections of their own, and would wait for this "
						   "transaction's locks."),
				 errhint("Run the saga before the writes or on its own, or queue it with "
						 "shardext_start_saga() to run it after the transaction commits.")));
}

/*
 * LoadUnfinishedSaga loads a saga that the caller may change (see
 * CheckSagaAccess) and that has not ended (completed, compensated,
 * abandoned), for shardext_retry_saga and shardext_abandon_saga.
 */
static Saga *
LoadUnfinishedSaga(int64 sagaId)
{
	Saga	   *saga;

	EnsureShardextInstalled();
	saga = LoadSaga(sagaId, false);
	CheckSagaAccess(saga);
	if (strcmp(saga->state, "completed") == 0 || strcmp(saga->state, "compensated") == 0 ||
		strcmp(saga->state, "abandoned") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("saga " INT64_FORMAT " has ended: it is %s", sagaId, saga->state),
				 errhint("Only sagas that are queued, running, compensating or failed can be "
						 "retried or abandoned.")));
	return saga;
}

/* CheckSagaAccess: only the owner (and its members) and administrators */
static void
CheckSagaAccess(Saga *saga)
{
	Oid			userId = GetUserId();

	if (!has_privs_of_role(userId, saga->owner) && !IsShardextAdmin(userId))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for saga " INT64_FORMAT, saga->sagaId),
				 errdetail("Only the role that started a saga and administrators can "
						   "retry or abandon it.")));
}

/*
 * LockSagaForChange takes the saga's runner lock until the end of the
 * transaction (so the daemon leaves it alone until the change commits),
 * or fails when a session or the daemon runs it right now.
 */
static void
LockSagaForChange(Saga *saga)
{
	if (!TryLockSagaInTransaction(saga->sagaId))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("saga " INT64_FORMAT " is being run right now", saga->sagaId),
				 errhint("Wait until its current attempt ends, then try again.")));
}
