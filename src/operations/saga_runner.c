/*-------------------------------------------------------------------------
 *
 * saga_runner.c
 *	  The state machine of a saga: its steps forward, then on a failure its
 *	  compensations backwards from the last step that committed, with
 *	  retries, backoff and recovery of interrupted steps.
 *
 * A saga is queued, running (current_step: the step being applied),
 * completed, compensating (current_step: the step being undone),
 * compensated, or failed (a compensation kept failing: it needs
 * attention); shardext_abandon_saga makes it abandoned.  The coordinator's
 * log is shardext.saga and shardext.saga_action, written over a loopback
 * connection as the saga's owner, in transactions of their own:
 *	- before a step or compensation: its attempt number and node, status
 *	  'started', and the saga's state;
 *	- after it: 'applied' or 'failed' -- written together with the next
 *	  action's "before", or with the saga's final state, in one commit.
 * A step whose log says 'started' may or may not have committed on its
 * node; whoever runs the saga next asks the node (FenceSagaAction) before
 * anything else, so nothing is applied twice and nothing is forgotten.
 *
 * Transient errors (a lost connection, a serialization failure, a
 * deadlock, a node that shuts down) are retried with exponential backoff,
 * shardext.saga_max_retries times; a step that fails for good, or keeps
 * failing, starts the compensation.  A compensation is retried likewise,
 * and one that keeps failing leaves the saga failed, with its error in
 * shardext.sagas and in the server log.  A step whose outcome cannot be
 * learnt because its node is down is never given up: its saga waits,
 * and the maintenance daemon tries again.
 *
 * A saga is run by the session that called shardext_run_saga (or
 * shardext_retry_saga), or by the maintenance daemon: queued sagas, and
 * those whose session ended, crashed or gave up waiting.  The runner
 * holds a session-level lock on the saga, so only one runs it at a time.
 * Steps always run as the saga's owner, with the search_path and date
 * settings of the session that defined it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "shardext/connection.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/remote_command.h"
#include "shardext/saga.h"

/* backoff between attempts: doubling from the first, up to the last */
#define SAGA_FIRST_RETRY_DELAY_MS 10
#define SAGA_MAX_RETRY_DELAY_MS 2000
/* a saga waiting for an unreachable node is tried again this often at most */
#define SAGA_MAX_WAIT_DELAY_MS 10000
/* how long the log may take to write */
#define SAGA_LOG_TIMEOUT_MS (30 * 1000)
/* the daemon: one saga's turn, one round's, and its sleeps between rounds */
#define SAGA_DAEMON_SLICE_MS 500
#define SAGA_DAEMON_ROUND_MS 2000
#define SAGA_DAEMON_POLL_MS 1000
#define SAGA_DAEMON_MIN_SLEEP_MS 10
/* a saga whose run the daemon could not even log is left alone this long */
#define SAGA_POSTPONE_MS 10000
/* forgetting old sagas: how often, and how long a node may take */
#define SAGA_FORGET_INTERVAL_MS (60 * 1000)
#define SAGA_FORGET_TIMEOUT_MS 5000

/* the settings a saga's statements are planned with */
static const char *const SagaSettingNames[] = {
	"search_path", "DateStyle", "IntervalStyle", "TimeZone"
};

/* one run of a saga by a session or the daemon */
typedef struct SagaRun
{
	Saga	   *saga;
	bool		inSession;		/* sleep between attempts, else schedule and return */
	TimestampTz deadline;		/* daemon: stop after this (0: none) */
	StringInfoData log;			/* notes to write with the next flush */
	TimestampTz nextAttemptAt;	/* when the saga should be tried again */
} SagaRun;

static bool RunNextAction(SagaRun *run);
static void AfterStep(SagaRun *run, int step, SagaActionOutcome *outcome);
static void AfterCompensation(SagaRun *run, int step, SagaActionOutcome *outcome);
static bool RetryLater(SagaRun *run, SagaActionOutcome *outcome);
static int	RetryDelayMs(int attempt, int maxDelay);
static void TakeAction(SagaRun *run, int step, bool compensation, SagaActionOutcome *outcome);
static void RouteAndApply(SagaRun *run, int step, bool compensation,
						  SagaActionOutcome *outcome);
static void StartAndApply(SagaRun *run, int step, bool compensation, List *statements,
						  SagaActionOutcome *outcome);
static bool ResolveAction(SagaRun *run, int step, bool compensation,
						  SagaActionOutcome *outcome);
static SagaActionState *ActionState(Saga *saga, int step, bool compensation);
static const char *ActionStatusName(SagaActionStatus status);
static void NoteAction(SagaRun *run, int step, bool compensation, const char *error);
static void NoteState(SagaRun *run);
static char *Literal(const char *value);
static void FlushSagaLog(SagaRun *run);
static void SetState(Saga *saga, const char *state, int step);
static bool IsTerminal(const char *state);
static void LoadSagaActions(Saga *saga);
static void RunSagaInDaemon(int64 sagaId, MemoryContext sagaContext);
static void PostponeSaga(int64 sagaId, const char *message);
static List *DueSagas(void);
static long NextSagaWakeupMs(void);
static void ForgetOldSagas(void);
static bool ForgetSagasOnNode(int32 nodeId, const char *ids);
static void SetSagaLockTag(LOCKTAG *tag, int64 sagaId);

/*
 * RunSaga runs a saga that its caller locked (TryLockSaga) until it ends,
 * or -- for the daemon -- until it must wait or the daemon's time is up,
 * or -- in a session -- until it waits for an unreachable node longer than
 * its retries allow (then the daemon takes over).  The log of a new saga
 * (shardext.saga_note_start) may wait in *pendingLog, to be written with
 * the first step's note.  Returns the saga's state.
 */
char *
RunSaga(Saga *saga, bool inSession, const char *pendingLog)
{
	SagaRun		run;
	Oid			savedUserId;
	int			savedSecContext;
	int			gucLevel;

	memset(&run, 0, sizeof(run));
	run.saga = saga;
	run.inSession = inSession;
	initStringInfo(&run.log);
	if (pendingLog != NULL)
		appendStringInfoString(&run.log, pendingLog);
	if (!inSession)
		run.deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), SAGA_DAEMON_SLICE_MS);

	/* steps run as the saga's owner, with the settings it was defined with */
	GetUserIdAndSecContext(&savedUserId, &savedSecContext);
	SetUserIdAndSecContext(saga->owner, savedSecContext | SECURITY_LOCAL_USERID_CHANGE);
	gucLevel = NewGUCNestLevel();
	PG_TRY();
	{
		SetSagaSettings(saga);
		while (RunNextAction(&run))
			CHECK_FOR_INTERRUPTS();
		FlushSagaLog(&run);
	}
	PG_FINALLY();
	{
		AtEOXact_GUC(false, gucLevel);
		SetUserIdAndSecContext(savedUserId, savedSecContext);
	}
	PG_END_TRY();
	return saga->state;
}

/*
 * RunNextAction takes the saga one step (or compensation) further and
 * tells whether the run goes on.
 */
static bool
RunNextAction(SagaRun *run)
{
	Saga	   *saga = run->saga;
	SagaActionOutcome outcome;

	if (strcmp(saga->state, "queued") == 0)
		SetState(saga, "running", 1);
	if (run->deadline != 0 && GetCurrentTimestamp() > run->deadline)
	{
		/* the daemon's turn is over: others get theirs, this one comes back */
		run->nextAttemptAt = GetCurrentTimestamp();
		NoteState(run);
		return false;
	}
	if (strcmp(saga->state, "running") == 0)
	{
		if (saga->currentStep > saga->stepCount)
		{
			SetState(saga, "completed", saga->stepCount);
			NoteState(run);
			return false;
		}
		TakeAction(run, saga->currentStep, false, &outcome);
		AfterStep(run, saga->currentStep, &outcome);
	}
	else if (strcmp(saga->state, "compensating") == 0)
	{
		if (saga->currentStep < 1)
		{
			SetState(saga, "compensated", 0);
			NoteState(run);
			return false;
		}
		TakeAction(run, saga->currentStep, true, &outcome);
		AfterCompensation(run, saga->currentStep, &outcome);
	}
	else
		return false;
	return !IsTerminal(saga->state) && run->nextAttemptAt == 0;
}

/* AfterStep decides what follows a step's attempt */
static void
AfterStep(SagaRun *run, int step, SagaActionOutcome *outcome)
{
	Saga	   *saga = run->saga;

	switch (outcome->result)
	{
		case SAGA_ACTION_APPLIED:
			SetState(saga, step == saga->stepCount ? "completed" : "running", step + 1);
			if (step == saga->stepCount)
			{
				saga->currentStep = step;
				NoteState(run);
			}
			return;
		case SAGA_ACTION_TRANSIENT:
		case SAGA_ACTION_IN_DOUBT:
			if (RetryLater(run, outcome))
				return;
			/* a step known not to have applied: give it up */
			break;
		case SAGA_ACTION_PERMANENT:
			break;
	}
	saga->failure = psprintf("step %d: %s", step, outcome->error ? outcome->error : "failed");
	saga->failureSqlstate = pstrdup(outcome->sqlstate);
	saga->error = NULL;
	SetState(saga, step > 1 ? "compensating" : "compensated", step - 1);
	ereport(LOG,
			(errmsg("shardext saga %lld (\"%s\") compensates: %s",
					(long long) saga->sagaId, saga->name, saga->failure)));
	NoteState(run);
}

/* AfterCompensation decides what follows a compensation's attempt */
static void
AfterCompensation(SagaRun *run, int step, SagaActionOutcome *outcome)
{
	Saga	   *saga = run->saga;

	if (outcome->result == SAGA_ACTION_APPLIED)
	{
		SetState(saga, step > 1 ? "compensating" : "compensated", step - 1);
		if (step == 1)
			NoteState(run);
		return;
	}
	if (RetryLater(run, outcome))
		return;
	saga->error = psprintf("compensation of step %d: %s", step,
						   outcome->error ? outcome->error : "failed");
	saga->state = "failed";		/* keeps its step and attempts for the view */
	ereport(run->inSession ? LOG : WARNING,
			(errmsg("shardext saga %lld (\"%s\") needs attention: its %s",
					(long long) saga->sagaId, saga->name, saga->error),
			 errdetail("It failed at %s.", saga->failure ? saga->failure : "a step"),
			 errhint("Fix the cause, then call shardext_retry_saga(%lld), or undo the "
					 "remaining steps by hand and call shardext_abandon_saga(%lld).",
					 (long long) saga->sagaId, (long long) saga->sagaId)));
	NoteState(run);
}

/*
 * RetryLater arranges the next attempt after a transient failure, or
 * after a step whose outcome is in doubt: in a session it sleeps, the
 * daemon schedules it.  Returns false when a transient failure has used
 * up its retries.  A step in doubt is never given up (its node must be
 * asked first), but a session hands it to the daemon after the retries.
 */
static bool
RetryLater(SagaRun *run, SagaActionOutcome *outcome)
{
	Saga	   *saga = run->saga;
	bool		inDoubt = outcome->result == SAGA_ACTION_IN_DOUBT;
	int			delayMs;

	if (!inDoubt && saga->attempts > ShardextSagaMaxRetries)
	{
		outcome->error = psprintf("%s (gave up after %d attempts)",
								  outcome->error ? outcome->error : "failed", saga->attempts);
		return false;
	}
	saga->error = outcome->error;
	delayMs = RetryDelayMs(saga->attempts, inDoubt ? SAGA_MAX_WAIT_DELAY_MS :
						   SAGA_MAX_RETRY_DELAY_MS);
	if (run->inSession && !(inDoubt && saga->attempts > ShardextSagaMaxRetries))
	{
		FlushSagaLog(run);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, delayMs,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		return true;
	}
	run->nextAttemptAt = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), delayMs);
	NoteState(run);
	return true;
}

/* the wait before attempt number attempt + 1 */
static int
RetryDelayMs(int attempt, int maxDelay)
{
	int			delay = SAGA_FIRST_RETRY_DELAY_MS;

	for (int i = 1; i < attempt && delay < maxDelay; i++)
		delay *= 2;
	delay = Min(delay, maxDelay);
	/* jitter, so that sessions that collided do not collide again */
	return delay / 2 + (int) pg_prng_uint64_range(&pg_global_prng_state, 0, delay / 2);
}

/*
 * TakeAction makes one attempt at a step or compensation: first, when an
 * earlier attempt's outcome is unknown, its node is asked (and fenced);
 * then the statements are routed, the attempt is logged as started, and
 * it runs on the node.  Every attempt and every question to a node gets
 * the next number of the action's counter, so a fence always stops the
 * attempts before it and never the ones after.  The note of the outcome
 * waits in the log buffer for the next flush.
 */
static void
TakeAction(SagaRun *run, int step, bool compensation, SagaActionOutcome *outcome)
{
	Saga	   *saga = run->saga;
	SagaActionState *action = ActionState(saga, step, compensation);

	if (action->status == SAGA_ACTION_STARTED && !ResolveAction(run, step, compensation, outcome))
		return;

	saga->attempts = ++action->attempt;
	RouteAndApply(run, step, compensation, outcome);
	if (outcome->result == SAGA_ACTION_IN_DOUBT)
	{
		/* ask at once: the node may only have lost the connection */
		(void) ResolveAction(run, step, compensation, outcome);
		return;
	}
	action->status = outcome->result == SAGA_ACTION_APPLIED ? SAGA_ACTION_DONE :
		SAGA_ACTION_FAILED;
	NoteAction(run, step, compensation, outcome->error);
}

/*
 * RouteAndApply applies the current attempt with the routes the saga's
 * definition made moments ago in this session when they are still valid,
 * or else routes its statements anew, in a subtransaction: the shard locks
 * of the step's writes are held while it runs on its node (so that a shard
 * move cannot switch placements under it), and no longer.  A statement
 * that cannot be routed any more (a table was dropped, a shard split ...)
 * is a permanent failure; a cancel or shutdown ends the run.
 */
static void
RouteAndApply(SagaRun *run, int step, bool compensation, SagaActionOutcome *outcome)
{
	Saga	   *saga = run->saga;
	MemoryContext runContext = CurrentMemoryContext;
	ResourceOwner runOwner = CurrentResourceOwner;
	List	   *statements = TakeRoutesOfDefinition(saga, step, compensation);
	volatile bool routed = false;

	if (statements != NIL)
	{
		StartAndApply(run, step, compensation, statements, outcome);
		UnlockRoutedStatements(statements);
		return;
	}

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(runContext);
	PG_TRY();
	{
		statements = RouteSagaAction(saga, step, compensation);
		routed = true;
		StartAndApply(run, step, compensation, statements, outcome);
	}
	PG_CATCH();
	{
		ErrorData  *error;

		MemoryContextSwitchTo(runContext);
		error = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(runContext);
		CurrentResourceOwner = runOwner;
		if (routed || ERRCODE_TO_CATEGORY(error->sqlerrcode) == ERRCODE_OPERATOR_INTERVENTION)
			ReThrowError(error);
		outcome->result = SAGA_ACTION_PERMANENT;
		outcome->error = error->message;
		strlcpy(outcome->sqlstate, unpack_sql_state(error->sqlerrcode),
				sizeof(outcome->sqlstate));
		return;
	}
	PG_END_TRY();
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(runContext);
	CurrentResourceOwner = runOwner;
}

/*
 * StartAndApply logs the attempt as started on the node of its routed
 * statements (durably: with the notes before it, in one commit) and
 * applies it there.
 */
static void
StartAndApply(SagaRun *run, int step, bool compensation, List *statements,
			  SagaActionOutcome *outcome)
{
	SagaActionState *action = ActionState(run->saga, step, compensation);

	action->nodeId = ((RoutedStatement *) linitial(statements))->nodeId;
	action->status = SAGA_ACTION_STARTED;
	run->saga->currentStep = step;
	NoteAction(run, step, compensation, NULL);
	FlushSagaLog(run);
	ApplySagaAction(run->saga, step, compensation, action->attempt, statements, outcome);
}

/*
 * ResolveAction asks the node of an action whose last attempt has an
 * unknown outcome whether it applied, fencing it if not.  Returns true
 * when it did not apply (a new attempt may follow); otherwise *outcome is
 * APPLIED (noted) or IN_DOUBT (the node could not be asked).
 */
static bool
ResolveAction(SagaRun *run, int step, bool compensation, SagaActionOutcome *outcome)
{
	Saga	   *saga = run->saga;
	SagaActionState *action = ActionState(saga, step, compensation);

	saga->attempts = ++action->attempt;
	if (!FenceSagaAction(saga, step, compensation, action->nodeId, action->attempt, outcome))
		return false;
	if (outcome->result == SAGA_ACTION_APPLIED)
	{
		action->status = SAGA_ACTION_DONE;
		NoteAction(run, step, compensation, NULL);
		return false;
	}
	action->status = SAGA_ACTION_FAILED;
	NoteAction(run, step, compensation, outcome->error);
	return true;
}

/* the state of a step's forward or compensating action */
static SagaActionState *
ActionState(Saga *saga, int step, bool compensation)
{
	return &saga->actions[(step - 1) * 2 + (compensation ? 1 : 0)];
}

static const char *
ActionStatusName(SagaActionStatus status)
{
	switch (status)
	{
		case SAGA_ACTION_STARTED:
			return "started";
		case SAGA_ACTION_DONE:
			return "applied";
		case SAGA_ACTION_FAILED:
		case SAGA_ACTION_NONE:
			break;
	}
	return "failed";
}

/*
 * NoteAction adds the action's current status to the log buffer; the note
 * of a started action also makes it the saga's current one (state, step,
 * attempts: see shardext.saga_note_action).
 */
static void
NoteAction(SagaRun *run, int step, bool compensation, const char *error)
{
	Saga	   *saga = run->saga;
	SagaActionState *action = ActionState(saga, step, compensation);

	appendStringInfo(&run->log,
					 "SELECT shardext.saga_note_action(" INT64_FORMAT ", %s, %d, %s, %d, %d, %s, "
					 "%s, %d);",
					 saga->sagaId, Literal(saga->state), step, compensation ? "true" : "false",
					 action->nodeId, action->attempt, Literal(ActionStatusName(action->status)),
					 Literal(error), MyProcPid);
}

/* NoteState adds the saga's current state to the log buffer */
static void
NoteState(SagaRun *run)
{
	Saga	   *saga = run->saga;
	/* seconds since 1970: independent of the session's DateStyle */
	char	   *nextAttempt = run->nextAttemptAt == 0 ? "NULL" :
		psprintf("pg_catalog.to_timestamp(%.6f)",
				 (double) run->nextAttemptAt / USECS_PER_SEC +
				 (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY);

	appendStringInfo(&run->log,
					 "SELECT shardext.saga_note_state(" INT64_FORMAT ", %s, %d, %d, %s, %s, "
					 "%s, %s, %s);",
					 saga->sagaId, Literal(saga->state), saga->currentStep, saga->attempts,
					 nextAttempt,
					 IsTerminal(saga->state) || run->nextAttemptAt != 0 ? "NULL" :
					 psprintf("%d", MyProcPid),
					 Literal(saga->failure), Literal(saga->failureSqlstate),
					 Literal(saga->error));
}

/* a quoted literal, or NULL */
static char *
Literal(const char *value)
{
	return value == NULL ? "NULL" : quote_literal_cstr(value);
}

/*
 * FlushSagaLog writes the notes in the log buffer in one transaction on
 * the loopback connection (one commit); a failure to write stops the run
 * with an error (the saga goes on from its last written state later).
 */
static void
FlushSagaLog(SagaRun *run)
{
	NodeConnection *conn;
	PGresult   *result;
	char	   *failure = NULL;

	if (run->log.len == 0)
		return;
	/*
	 * The end of a saga need not wait for its flush: if it is lost, the
	 * last step or compensation is found applied (or not) on its node
	 * again, and the saga ends the same way.  Everything else must be on
	 * disk before the step it announces runs.
	 */
	if (IsTerminal(run->saga->state))
		appendStringInfoString(&run->log,
							   "SELECT pg_catalog.set_config('synchronous_commit', 'off', true);");
	conn = SagaLoopbackConnection();
	result = TryRemoteQuery(conn, run->log.data, 0, NULL, SAGA_LOG_TIMEOUT_MS,
									   &failure);
	if (result == NULL)
	{
		DropSagaLoopback();
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not log the progress of saga " INT64_FORMAT, run->saga->sagaId),
				 errdetail_internal("%s", failure ? failure : ""),
				 errhint("The maintenance daemon goes on with the saga from its last logged state.")));
	}
	PQclear(result);
	resetStringInfo(&run->log);
}

static void
SetState(Saga *saga, const char *state, int step)
{
	saga->state = pstrdup(state);
	saga->currentStep = step;
	saga->attempts = 0;
}

static bool
IsTerminal(const char *state)
{
	return strcmp(state, "completed") == 0 || strcmp(state, "compensated") == 0 ||
		strcmp(state, "failed") == 0 || strcmp(state, "abandoned") == 0;
}

/*
 * SetSagaSettings sets, in the current GUC nest level, the settings the
 * saga's statements are planned with (those of the defining session).
 */
void
SetSagaSettings(Saga *saga)
{
	ListCell   *cell;

	foreach(cell, saga->settings)
	{
		char	   *setting = pstrdup(lfirst(cell));
		char	   *equals = strchr(setting, '=');

		if (equals == NULL)
			continue;
		*equals = '\0';
		(void) set_config_option(setting, equals + 1, PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	}
}

/* CurrentSagaSettings returns this session's settings that steps keep */
List *
CurrentSagaSettings(void)
{
	List	   *settings = NIL;

	for (int i = 0; i < lengthof(SagaSettingNames); i++)
		settings = lappend(settings,
						   psprintf("%s=%s", SagaSettingNames[i],
									GetConfigOption(SagaSettingNames[i], false, false)));
	return settings;
}

/* the lock a runner holds on its saga: session level, so it spans transactions */
static void
SetSagaLockTag(LOCKTAG *tag, int64 sagaId)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) ((uint64) sagaId >> 32),
						 (uint32) sagaId, SHARDEXT_LOCK_CLASS_SAGA);
}

/* TryLockSaga takes the saga's runner lock if nobody holds it */
bool
TryLockSaga(int64 sagaId)
{
	LOCKTAG		tag;

	SetSagaLockTag(&tag, sagaId);
	return LockAcquire(&tag, ExclusiveLock, true, true) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * TryLockSagaInTransaction takes the saga's runner lock until the end of
 * the transaction, if nobody runs the saga now.
 */
bool
TryLockSagaInTransaction(int64 sagaId)
{
	LOCKTAG		tag;

	SetSagaLockTag(&tag, sagaId);
	return LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL;
}

void
UnlockSaga(int64 sagaId)
{
	LOCKTAG		tag;

	SetSagaLockTag(&tag, sagaId);
	LockRelease(&tag, ExclusiveLock, true);
}

/*
 * LoadSaga reads a saga and the state of its actions from the catalog
 * (with the extension owner's rights), into the current memory context;
 * NULL when it does not exist and missingOk.
 */
Saga *
LoadSaga(int64 sagaId, bool missingOk)
{
	MemoryContext callerContext = CurrentMemoryContext;
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(sagaId)};
	CatalogAccess access;
	Saga	   *saga = NULL;

	BeginCatalogAccess(&access);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT name, owner, steps, step_nodes, settings, state, "
							  "current_step, attempts, failure, failure_sqlstate, error "
							  "FROM shardext.saga WHERE saga_id = $1",
							  1, argtypes, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read saga " INT64_FORMAT, sagaId);
	if (SPI_processed == 1)
	{
		HeapTuple	tuple = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext spiContext = MemoryContextSwitchTo(callerContext);
		bool		isnull;

		saga = palloc0(sizeof(Saga));
		saga->sagaId = sagaId;
		saga->name = SPI_getvalue(tuple, desc, 1);
		saga->owner = DatumGetObjectId(SPI_getbinval(tuple, desc, 2, &isnull));
		saga->steps = SagaStepsFromArray(SPI_getbinval(tuple, desc, 3, &isnull),
										 &saga->stepCount);
		saga->stepNodes = IntArrayValues(SPI_getbinval(tuple, desc, 4, &isnull));
		saga->settings = TextArrayValues(SPI_getbinval(tuple, desc, 5, &isnull));
		saga->state = SPI_getvalue(tuple, desc, 6);
		saga->currentStep = DatumGetInt32(SPI_getbinval(tuple, desc, 7, &isnull));
		saga->attempts = DatumGetInt32(SPI_getbinval(tuple, desc, 8, &isnull));
		saga->failure = SPI_getvalue(tuple, desc, 9);
		saga->failureSqlstate = SPI_getvalue(tuple, desc, 10);
		saga->error = SPI_getvalue(tuple, desc, 11);
		saga->actions = palloc0(sizeof(SagaActionState) * saga->stepCount * 2);
		MemoryContextSwitchTo(spiContext);
		LoadSagaActions(saga);
	}
	SPI_finish();
	EndCatalogAccess(&access);
	if (saga == NULL && !missingOk)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("saga " INT64_FORMAT " does not exist", sagaId)));
	return saga;
}

/* LoadSagaActions reads what the log says of each step and compensation */
static void
LoadSagaActions(Saga *saga)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(saga->sagaId)};

	if (SPI_execute_with_args("SELECT step, compensation, node_id, attempt, status "
							  "FROM shardext.saga_action WHERE saga_id = $1",
							  1, argtypes, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the actions of saga " INT64_FORMAT, saga->sagaId);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int			step = DatumGetInt32(SPI_getbinval(tuple, desc, 1, &isnull));
		bool		compensation = DatumGetBool(SPI_getbinval(tuple, desc, 2, &isnull));
		char	   *status = SPI_getvalue(tuple, desc, 5);
		SagaActionState *action;

		if (step < 1 || step > saga->stepCount)
			continue;
		action = ActionState(saga, step, compensation);
		action->nodeId = DatumGetInt32(SPI_getbinval(tuple, desc, 3, &isnull));
		action->attempt = DatumGetInt32(SPI_getbinval(tuple, desc, 4, &isnull));
		action->status = strcmp(status, "started") == 0 ? SAGA_ACTION_STARTED :
			strcmp(status, "applied") == 0 ? SAGA_ACTION_DONE : SAGA_ACTION_FAILED;
	}
}

/*
 * RunDueSagas is the maintenance daemon's share: it runs, for a short
 * slice each, the sagas that are queued, due for another attempt, or
 * left unfinished by a session that ended or crashed (nobody holds their
 * lock), and forgets sagas that ended longer than shardext.saga_retention
 * ago.  Called in a transaction, as the daemon's (super)user.  Returns how
 * long the daemon may sleep before the next call.
 */
long
RunDueSagas(void)
{
	MemoryContext sagaContext = AllocSetContextCreate(CurrentMemoryContext, "shardext saga",
													  ALLOCSET_DEFAULT_SIZES);
	TimestampTz roundEnd = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   SAGA_DAEMON_ROUND_MS);
	List	   *due = DueSagas();
	bool		roundOver = false;
	ListCell   *cell;

	foreach(cell, due)
	{
		int64		sagaId = *(int64 *) lfirst(cell);

		if (GetCurrentTimestamp() > roundEnd)
		{
			roundOver = true;
			break;
		}
		if (!TryLockSaga(sagaId))
			continue;			/* a session runs it */
		PG_TRY();
		{
			RunSagaInDaemon(sagaId, sagaContext);
		}
		PG_FINALLY();
		{
			UnlockSaga(sagaId);
		}
		PG_END_TRY();
		MemoryContextReset(sagaContext);
	}
	ForgetOldSagas();
	MemoryContextDelete(sagaContext);

	/*
	 * With nothing due, the daemon keeps no step connection: each holds a
	 * slot of its node's pool, and one broken by a node's restart would
	 * stay counted until the next saga.
	 */
	if (due == NIL)
		CloseSagaConnections();
	return roundOver ? 0 : NextSagaWakeupMs();
}

/*
 * RunSagaInDaemon runs one locked saga in a subtransaction: an error is
 * logged and the next round tries again.
 */
static void
RunSagaInDaemon(int64 sagaId, MemoryContext sagaContext)
{
	MemoryContext daemonContext = CurrentMemoryContext;
	ResourceOwner daemonOwner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(sagaContext);
	PG_TRY();
	{
		Saga	   *saga = LoadSaga(sagaId, true);

		if (saga != NULL && !IsTerminal(saga->state))
			(void) RunSaga(saga, false, NULL);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *error;

		MemoryContextSwitchTo(daemonContext);
		error = CopyErrorData();
		EmitErrorReport();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(daemonContext);
		CurrentResourceOwner = daemonOwner;
		PostponeSaga(sagaId, error->message);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(daemonContext);
	CurrentResourceOwner = daemonOwner;
}

/*
 * PostponeSaga notes, as the daemon, an error that stopped a saga's run
 * before its runner could log it (its role cannot connect to log, say),
 * and leaves the saga alone for a while instead of failing every second.
 */
static void
PostponeSaga(int64 sagaId, const char *message)
{
	Oid			argtypes[3] = {INT8OID, TEXTOID, INT4OID};
	Datum		args[3] = {Int64GetDatum(sagaId), CStringGetTextDatum(message),
		Int32GetDatum(SAGA_POSTPONE_MS)};

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("UPDATE shardext.saga SET error = $2, updated_at = pg_catalog.now(), "
							  "next_attempt_at = pg_catalog.now() + $3 * interval '1 ms' "
							  "WHERE saga_id = $1 AND state IN ('queued', 'running', 'compensating')",
							  3, argtypes, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not postpone saga " INT64_FORMAT, sagaId);
	SPI_finish();
}

/* the ids of the sagas the daemon should run now, oldest first */
static List *
DueSagas(void)
{
	MemoryContext callerContext = CurrentMemoryContext;
	List	   *result = NIL;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute("SELECT saga_id FROM shardext.saga "
					"WHERE state IN ('queued', 'running', 'compensating') "
					"AND (next_attempt_at IS NULL OR next_attempt_at <= pg_catalog.now()) "
					"ORDER BY saga_id LIMIT 1000", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the sagas to run");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		MemoryContext spiContext = MemoryContextSwitchTo(callerContext);
		int64	   *id = palloc(sizeof(int64));

		*id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1,
										  &isnull));
		result = lappend(result, id);
		MemoryContextSwitchTo(spiContext);
	}
	SPI_finish();
	return result;
}

/*
 * NextSagaWakeupMs: how long until the next retry is due (a second at
 * most, so that sagas a session left behind are picked up soon; queued
 * ones wake the daemon when their transaction commits).
 */
static long
NextSagaWakeupMs(void)
{
	long		wait = SAGA_DAEMON_POLL_MS;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute("SELECT pg_catalog.min(coalesce(extract(epoch FROM next_attempt_at "
					"- pg_catalog.clock_timestamp()) * 1000, 0))::bigint "
					"FROM shardext.saga WHERE state IN ('running', 'compensating') "
					"AND next_attempt_at IS NOT NULL",
					true, 1) == SPI_OK_SELECT && SPI_processed == 1)
	{
		bool		isnull;
		Datum		value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										  &isnull);

		if (!isnull)
			wait = Max(Min(DatumGetInt64(value), wait), SAGA_DAEMON_MIN_SLEEP_MS);
	}
	SPI_finish();
	return wait;
}

/*
 * ForgetOldSagas deletes, every few minutes, the sagas that completed, were
 * compensated or abandoned longer than shardext.saga_retention ago: first
 * their step records on the nodes they ran on, then, once every node
 * answered, the sagas themselves.  Failed sagas stay until someone looks
 * at them.
 */
static void
ForgetOldSagas(void)
{
	static TimestampTz lastRun = 0;
	TimestampTz now = GetCurrentTimestamp();
	Oid			argtypes[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(ShardextSagaRetention)};
	char	   *ids = NULL;
	bool		allForgotten = true;

	if (ShardextSagaRetention < 0 ||
		!TimestampDifferenceExceeds(lastRun, now, SAGA_FORGET_INTERVAL_MS))
		return;
	lastRun = now;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT pg_catalog.array_agg(saga_id)::text FROM "
							  "(SELECT saga_id FROM shardext.saga "
							  " WHERE state IN ('completed', 'compensated', 'abandoned') "
							  " AND finished_at < pg_catalog.now() - $1 * interval '1 s' "
							  " ORDER BY saga_id LIMIT 1000) s",
							  1, argtypes, args, NULL, true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
		ids = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (ids != NULL)
	{
		Oid			idsType[1] = {TEXTOID};
		Datum		idsArg[1] = {CStringGetTextDatum(ids)};

		if (SPI_execute_with_args("SELECT DISTINCT node_id FROM shardext.saga_action "
								  "WHERE saga_id = ANY ($1::bigint[])",
								  1, idsType, idsArg, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not read the nodes of old sagas");
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool		isnull;
			int32		nodeId = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
															 SPI_tuptable->tupdesc, 1,
															 &isnull));

			allForgotten &= ForgetSagasOnNode(nodeId, ids);
		}
		if (allForgotten &&
			SPI_execute_with_args("DELETE FROM shardext.saga WHERE saga_id = ANY ($1::bigint[])",
								  1, idsType, idsArg, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not delete old sagas");
	}
	SPI_finish();
}

/* ForgetSagasOnNode deletes the step records of sagas on one node */
static bool
ForgetSagasOnNode(int32 nodeId, const char *ids)
{
	WorkerNode *node = LookupWorkerNode(nodeId);
	NodeConnection *conn;
	const char *params[2] = {SagaCoordinatorId(), ids};
	char	   *failure = NULL;
	PGresult   *result;

	if (node == NULL)
		return true;			/* the node was removed, and its records with it */
	conn = OpenDedicatedConnectionWithTimeout(node->host, node->port, SAGA_FORGET_TIMEOUT_MS);
	if (conn == NULL)
		return false;
	result = TryRemoteQuery(conn, "SELECT shardext.saga_forget_steps($1, $2::bigint[])",
									   2, params, SAGA_FORGET_TIMEOUT_MS, &failure);
	CloseDedicatedConnection(conn);
	if (result == NULL)
	{
		ereport(LOG,
				(errmsg("shardext could not forget old saga steps on node %s:%d", node->host,
						node->port),
				 errdetail_internal("%s", failure ? failure : "")));
		return false;
	}
	PQclear(result);
	return true;
}
