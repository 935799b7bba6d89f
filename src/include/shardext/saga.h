/*-------------------------------------------------------------------------
 *
 * saga.h
 *	  Sagas: business transactions over several nodes made of local steps,
 *	  each committed at once on its node, with compensations that undo
 *	  them backwards when a later step fails.
 *
 * The parts, from the bottom up:
 *	- executor/saga_routing.c: a step's statements planned with their
 *	  parameters and routed, as the executor would, to one shard: the SQL
 *	  and parameter values to send, and the node;
 *	- operations/saga_steps.c: one step or compensation applied on its
 *	  node, exactly once (the node's step record commits with it), and
 *	  recovery's question whether an interrupted one applied;
 *	- operations/saga_runner.c: the state machine of a saga, logged on the
 *	  coordinator before and after every step, with retries, backoff and
 *	  compensation; run by the caller's session or the maintenance daemon;
 *	- operations/saga.c: the SQL functions and the checks of a definition.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_SAGA_H
#define SHARDEXT_SAGA_H

#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/timestamp.h"

/* pg_locks.objsubid of the lock a runner holds on its saga */
#define SHARDEXT_LOCK_CLASS_SAGA 11

/* one statement of a step, routed to its shard (executor/saga_routing.c) */
typedef struct RoutedStatement
{
	char	   *sql;			/* the shard statement, wrapped for checks */
	int32		nodeId;
	int64		shardId;
	Oid			relid;			/* the table whose shard it is */
	bool		writes;			/* locks its shard against moves while it runs */
	int			nParams;
	Oid		   *types;
	const char **values;
	int		   *lengths;
	int		   *formats;
} RoutedStatement;

/* what a statement of a step is */
typedef enum SagaStatementRole
{
	SAGA_STATEMENT,				/* the step's statement (or one of its list) */
	SAGA_COMPENSATION,			/* its compensation */
	SAGA_CHECK					/* its check query: one boolean */
} SagaStatementRole;

extern List *RouteSagaStatements(const char *sql, SagaStatementRole role, int stepNumber,
								 int nParams, char **paramValues, int64 expectRows);
extern bool LockRoutedStatements(List *statements);
extern void UnlockRoutedStatements(List *statements);

/* one step of a saga as defined (a shardext.saga_step) */
typedef struct SagaStep
{
	char	   *statement;
	int			nParams;
	char	  **params;			/* NULL elements are SQL NULLs */
	char	   *compensation;	/* NULL: none (only the last step) */
	char	   *checkQuery;		/* NULL: none */
	int64		expectRows;		/* -1: any */
} SagaStep;

/* what the log says of a step's forward or compensating action */
typedef enum SagaActionStatus
{
	SAGA_ACTION_NONE = 0,		/* never started */
	SAGA_ACTION_STARTED,		/* started: its outcome is unknown until asked */
	SAGA_ACTION_DONE,			/* applied */
	SAGA_ACTION_FAILED			/* did not apply (may be tried again) */
} SagaActionStatus;

typedef struct SagaActionState
{
	SagaActionStatus status;
	int			attempt;		/* attempts and questions so far (see TakeAction) */
	int32		nodeId;			/* where the last attempt ran */
} SagaActionState;

/* a saga as the runner sees it */
typedef struct Saga
{
	int64		sagaId;
	char	   *name;
	Oid			owner;
	int			stepCount;
	SagaStep   *steps;
	int32	   *stepNodes;		/* as routed when it was defined */
	List	   *settings;		/* "name=value" of the defining session */
	char	   *state;
	int			currentStep;
	int			attempts;		/* of the current action */
	char	   *failure;		/* why it compensates */
	char	   *failureSqlstate;
	char	   *error;			/* the last error */
	SagaActionState *actions;	/* per step: forward, then compensation */
	List	  **routes;			/* NULL, or per action: its statements as routed
								 * when the saga was defined in this session */
} Saga;

/* how applying a step or compensation on its node ended (saga_steps.c) */
typedef enum SagaActionResult
{
	SAGA_ACTION_APPLIED,		/* committed on the node, now or earlier */
	SAGA_ACTION_TRANSIENT,		/* did not apply; trying again may work */
	SAGA_ACTION_PERMANENT,		/* did not apply; trying again will not help */
	SAGA_ACTION_IN_DOUBT		/* unknown: the node could not be asked */
} SagaActionResult;

/* the outcome of one attempt, with the error when it did not apply */
typedef struct SagaActionOutcome
{
	SagaActionResult result;
	char	   *error;
	char		sqlstate[6];
} SagaActionOutcome;

/* saga.c */
extern SagaStep *SagaStepsFromArray(Datum arrayDatum, int *count);
extern List *TextArrayValues(Datum arrayDatum);
extern int32 *IntArrayValues(Datum arrayDatum);

/* saga_steps.c */
extern List *TakeRoutesOfDefinition(Saga *saga, int step, bool compensation);
extern List *RouteSagaAction(Saga *saga, int step, bool compensation);
extern void ApplySagaAction(Saga *saga, int step, bool compensation, int attempt,
							List *statements, SagaActionOutcome *outcome);
extern bool FenceSagaAction(Saga *saga, int step, bool compensation, int32 nodeId,
							int attempt, SagaActionOutcome *outcome);
extern struct NodeConnection *SagaLoopbackConnection(void);
extern void DropSagaLoopback(void);
extern void CloseSagaConnections(void);
extern char *SagaCoordinatorId(void);

/* saga_runner.c */
extern Saga *LoadSaga(int64 sagaId, bool missingOk);
extern char *RunSaga(Saga *saga, bool inSession, const char *pendingLog);
extern bool TryLockSaga(int64 sagaId);
extern bool TryLockSagaInTransaction(int64 sagaId);
extern void UnlockSaga(int64 sagaId);
extern long RunDueSagas(void);
extern void SetSagaSettings(Saga *saga);
extern List *CurrentSagaSettings(void);

#endif							/* SHARDEXT_SAGA_H */
