/*-------------------------------------------------------------------------
 *
 * saga_steps.c
 *	  Applying one step or compensation of a saga on its node, exactly
 *	  once, and finding out whether an interrupted one applied.
 *
 * A step (or compensation) is sent in one pipeline that forms one local
 * transaction on its node (TryRemotePipeline): the session's
 * time zone, shardext.saga_claim_step(), which inserts the step's record
 * into shardext.saga_step_record, the step's statements, and its check.
 * The record commits with the step or not at all, and its primary key
 * (coordinator database, saga, step, compensation or not, role) makes a
 * second attempt fail on it (it waits for one still running) instead of
 * applying the step again.
 *
 * When the coordinator does not hear how a step ended (the connection
 * broke, the node did not answer, the coordinator crashed), recovery asks
 * the node with shardext.saga_fence_step(): it waits for an attempt that
 * is still running, says whether the step applied, and when not, leaves a
 * fence that makes every attempt numbered below the next one fail, so
 * that a step still on its way to the node (in a socket buffer) can never
 * apply after the answer "not applied" was given.
 *
 * Steps run over connections of their own (not the transaction's cached
 * ones: they commit on their own), opened as the current user, which the
 * runner set to the saga's owner, and kept across sagas per node and user.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"
#include "pgtime.h"
#include "common/hashfn.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "shardext/connection.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"
#include "shardext/saga.h"

/* the longest a step may take on its node before its outcome is in doubt */
#define SAGA_STEP_TIMEOUT_MS (60 * 1000)
/* ... and the question whether it applied */
#define SAGA_FENCE_TIMEOUT_MS (30 * 1000)

/* commands of a step's pipeline (after the time zone, when it is set) */
#define SAGA_COMMAND_CLAIM 0
#define SAGA_FIRST_STATEMENT 1

/* statements prepared on a kept connection at most (then unnamed) */
#define SAGA_MAX_PREPARED 1000

/* a connection kept for steps, per node and user */
typedef struct SagaConnection
{
	int32		nodeId;
	Oid			userId;
	NodeConnection *conn;
	MemoryContext context;		/* of the prepared statements' names */
	HTAB	   *prepared;		/* SQL hash -> SagaPreparedStatement */
	int			preparedCount;
} SagaConnection;

/* a statement prepared on a kept connection */
typedef struct SagaPreparedStatement
{
	uint64		key;			/* hash of the SQL */
	char	   *sql;
	char		name[16];
} SagaPreparedStatement;

static List *sagaConnections = NIL;

static SagaConnection *SagaNodeConnection(int32 nodeId, char **failure);
static bool NameStatement(SagaConnection *kept, PipelineCommand *command, const Oid *types,
						  char **failure);
static void DropSagaConnection(NodeConnection *conn);
static void ClassifyRemoteError(PGresult *error, int failedIndex, SagaActionOutcome *outcome);
static void SetOutcome(SagaActionOutcome *outcome, SagaActionResult result,
					   const char *sqlstate, const char *error);
static void ClaimParams(Saga *saga, int step, bool compensation, int attempt,
						const char **values);
static void SetCommand(PipelineCommand *command, const char *sql, int nParams,
					   const char **values, RoutedStatement *routed);
#ifdef SHARDEXT_TEST_HOOKS
static void SagaTestFault(int point, int step);
#else
#define SagaTestFault(point, step) ((void) 0)
#endif

/*
 * SagaCoordinatorId names this coordinator database in the nodes' step
 * records (the prefix of its prepared transactions' gids).
 */
char *
SagaCoordinatorId(void)
{
	return RemotePreparedGidPrefix();
}

/*
 * TakeRoutesOfDefinition returns the statements of a step (or of its
 * compensation) as the definition routed them moments ago in this
 * session, with the shards they write locked, when they are still valid
 * (no shard moved since); the caller unlocks them after the step.  NIL
 * otherwise: the caller routes them anew.  Each route is taken once.
 */
List *
TakeRoutesOfDefinition(Saga *saga, int step, bool compensation)
{
	List	  **cached;
	List	   *statements;

	if (saga->routes == NULL)
		return NIL;
	cached = &saga->routes[(step - 1) * 2 + (compensation ? 1 : 0)];
	statements = *cached;
	*cached = NIL;
	if (statements == NIL || !LockRoutedStatements(statements))
		return NIL;
	return statements;
}

/*
 * RouteSagaAction routes the statements of a step, or of its compensation,
 * with the saga's parameters (see saga_routing.c); the statements of a
 * step are followed by its check.  Writes lock their shards until the end
 * of the current (sub)transaction.
 */
List *
RouteSagaAction(Saga *saga, int step, bool compensation)
{
	SagaStep   *def = &saga->steps[step - 1];
	List	   *statements;

	if (compensation)
		return RouteSagaStatements(def->compensation, SAGA_COMPENSATION, step,
								   def->nParams, def->params, -1);
	statements = RouteSagaStatements(def->statement, SAGA_STATEMENT, step, def->nParams,
									 def->params, def->expectRows);
	if (def->checkQuery != NULL)
		statements = list_concat(statements,
								 RouteSagaStatements(def->checkQuery, SAGA_CHECK, step,
													 def->nParams, def->params, -1));
	return statements;
}

/*
 * ApplySagaAction runs attempt number attempt of a step (or compensation)
 * whose statements were routed, in one transaction on their node, and
 * says in *outcome how it ended.  It never throws for the node's trouble;
 * an interrupt (a cancel) still throws, leaving the outcome to recovery.
 */
void
ApplySagaAction(Saga *saga, int step, bool compensation, int attempt, List *statements,
				SagaActionOutcome *outcome)
{
	PipelineCommand *commands = palloc0(sizeof(PipelineCommand) *
										(list_length(statements) + 2));
	const char *zone[1] = {pg_get_timezone_name(session_timezone)};
	const char *claim[5];
	RoutedStatement *first = linitial(statements);
	SagaConnection *kept;
	NodeConnection *conn;
	PipelineOutcome result;
	PGresult   *error = NULL;
	char	   *failure = NULL;
	int			failedIndex;
	int			count = 0;
	bool		setZone;
	ListCell   *cell;

	foreach(cell, statements)
	{
		RoutedStatement *routed = lfirst(cell);

		if (routed->nodeId != first->nodeId)
		{
			SetOutcome(outcome, SAGA_ACTION_PERMANENT, "0A000",
					   psprintf("the statements of saga step %d are on nodes %d and %d now",
								step, first->nodeId, routed->nodeId));
			return;
		}
	}
	kept = SagaNodeConnection(first->nodeId, &failure);
	if (kept == NULL)
	{
		SetOutcome(outcome, SAGA_ACTION_TRANSIENT, "08006", failure);
		return;
	}
	conn = kept->conn;

	/* the session's time zone, when the connection does not have it yet */
	setZone = conn->remoteTimeZone == NULL || strcmp(conn->remoteTimeZone, zone[0]) != 0;
	if (setZone)
		SetCommand(&commands[count++], "SELECT pg_catalog.set_config('TimeZone', $1, false)",
				   1, zone, NULL);
	ClaimParams(saga, step, compensation, attempt, claim);
	SetCommand(&commands[count++], "SELECT shardext.saga_claim_step($1, $2, $3, $4, $5)", 5,
			   claim, NULL);
	foreach(cell, statements)
	{
		RoutedStatement *routed = lfirst(cell);

		SetCommand(&commands[count++], routed->sql, routed->nParams,
				   (const char **) routed->values, routed);
	}
	/* the claim and the statements run prepared (not the rare time zone) */
	for (int i = setZone ? 1 : 0; i < count; i++)
	{
		if (!NameStatement(kept, &commands[i], commands[i].types, &failure))
		{
			DropSagaConnection(conn);
			SetOutcome(outcome, SAGA_ACTION_TRANSIENT, "08006", failure);
			return;
		}
	}

	SagaTestFault(compensation ? TEST_SAGA_CRASH_BEFORE_COMPENSATION :
				  TEST_SAGA_CRASH_BEFORE_STEP, step);
	PG_TRY();
	{
		result = TryRemotePipeline(conn, commands, count, SAGA_STEP_TIMEOUT_MS,
											  &failedIndex, &error, &failure);
	}
	PG_CATCH();
	{
		/* interrupted while the step was on its way: recovery finds out */
		DropSagaConnection(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();

	switch (result)
	{
		case PIPELINE_SUCCEEDED:
			if (setZone)
			{
				if (conn->remoteTimeZone != NULL)
					pfree(conn->remoteTimeZone);
				conn->remoteTimeZone = MemoryContextStrdup(TopMemoryContext, zone[0]);
			}
			SetOutcome(outcome, SAGA_ACTION_APPLIED, "00000", NULL);
			SagaTestFault(compensation ? TEST_SAGA_CRASH_AFTER_COMPENSATION :
						  TEST_SAGA_CRASH_AFTER_STEP, step);
#ifdef SHARDEXT_TEST_HOOKS
			if (ShardextSagaTestFault == TEST_SAGA_LOSE_STEP_ANSWER &&
				(ShardextSagaTestFaultStep == 0 || ShardextSagaTestFaultStep == step))
			{
				DropSagaConnection(conn);
				SetOutcome(outcome, SAGA_ACTION_IN_DOUBT, "08006",
						   "shardext.saga_test_fault: the answer of the node was lost");
			}
#endif
			break;
		case PIPELINE_FAILED:
			ClassifyRemoteError(error, failedIndex - (setZone ? 1 : 0), outcome);
			PQclear(error);
			if (strcmp(outcome->sqlstate, "26000") == 0 ||
				(outcome->error != NULL && strstr(outcome->error, "cached plan") != NULL))
			{
				/* a prepared statement is gone or stale: prepare anew on a new session */
				DropSagaConnection(conn);
				outcome->result = SAGA_ACTION_TRANSIENT;
			}
			break;
		case PIPELINE_NOT_SENT:
			DropSagaConnection(conn);
			SetOutcome(outcome, SAGA_ACTION_TRANSIENT, "08006", failure);
			break;
		case PIPELINE_NO_ANSWER:
			DropSagaConnection(conn);
			SetOutcome(outcome, SAGA_ACTION_IN_DOUBT, "08006", failure);
			break;
	}
}

/*
 * FenceSagaAction asks the node where attempts below attempt of a step (or
 * compensation) ran whether one applied, and fences those that did not.
 * Returns false when the node could not be asked (*outcome says why);
 * otherwise *outcome is APPLIED, or TRANSIENT: not applied, try again.
 */
bool
FenceSagaAction(Saga *saga, int step, bool compensation, int32 nodeId, int attempt,
				SagaActionOutcome *outcome)
{
	const char *params[5];
	char	   *failure = NULL;
	SagaConnection *kept = SagaNodeConnection(nodeId, &failure);
	NodeConnection *conn = kept != NULL ? kept->conn : NULL;
	PGresult   *result;
	bool		applied;

	if (conn == NULL)
	{
		SetOutcome(outcome, SAGA_ACTION_IN_DOUBT, "08006", failure);
		return false;
	}
	ClaimParams(saga, step, compensation, attempt, params);
	PG_TRY();
	{
		result = TryRemoteQuery(conn,
										   "SELECT shardext.saga_fence_step($1, $2, $3, $4, $5)",
										   5, params, SAGA_FENCE_TIMEOUT_MS, &failure);
	}
	PG_CATCH();
	{
		DropSagaConnection(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (result == NULL || PQntuples(result) != 1)
	{
		PQclear(result);
		DropSagaConnection(conn);
		SetOutcome(outcome, SAGA_ACTION_IN_DOUBT, "08006",
				   failure ? failure : "the node gave no answer");
		return false;
	}
	applied = strcmp(PQgetvalue(result, 0, 0), "t") == 0;
	PQclear(result);
	SetOutcome(outcome, applied ? SAGA_ACTION_APPLIED : SAGA_ACTION_TRANSIENT,
			   applied ? "00000" : "08006",
			   applied ? NULL : "the node lost the connection before the step committed");
	return true;
}

/* SetCommand fills a pipeline command (text parameters unless routed says) */
static void
SetCommand(PipelineCommand *command, const char *sql, int nParams, const char **values,
		   RoutedStatement *routed)
{
	command->sql = sql;
	command->statementName = NULL;
	command->nParams = nParams;
	command->values = values;
	command->types = routed ? routed->types : NULL;
	command->lengths = routed ? routed->lengths : NULL;
	command->formats = routed ? routed->formats : NULL;
}

/* the parameters of saga_claim_step and saga_fence_step */
static void
ClaimParams(Saga *saga, int step, bool compensation, int attempt, const char **values)
{
	values[0] = SagaCoordinatorId();
	values[1] = psprintf(INT64_FORMAT, saga->sagaId);
	values[2] = psprintf("%d", step);
	values[3] = compensation ? "true" : "false";
	values[4] = psprintf("%d", attempt);
}

/*
 * ClassifyRemoteError turns the node's error for command failedIndex into
 * an outcome: the claim saying the step applied before means it applied;
 * serialization failures, deadlocks, lock timeouts, cancels and the
 * node's shutdown or lack of resources are worth another attempt; the
 * rest (constraints, a failed check, bad data) is permanent.
 */
static void
ClassifyRemoteError(PGresult *error, int failedIndex, SagaActionOutcome *outcome)
{
	const char *sqlstate = PQresultErrorField(error, PG_DIAG_SQLSTATE);
	const char *message = PQresultErrorField(error, PG_DIAG_MESSAGE_PRIMARY);
	const char *detail = PQresultErrorField(error, PG_DIAG_MESSAGE_DETAIL);
	char	   *text;
	bool		transient;

	if (sqlstate == NULL)
		sqlstate = "XX000";
	if (failedIndex == SAGA_COMMAND_CLAIM && strcmp(sqlstate, "23505") == 0)
	{
		SetOutcome(outcome, SAGA_ACTION_APPLIED, "00000", NULL);
		return;
	}
	text = detail != NULL ? psprintf("%s (%s)", message ? message : "", detail) :
		pstrdup(message ? message : "unknown error");
	transient = failedIndex < SAGA_FIRST_STATEMENT ||
		strcmp(sqlstate, "40001") == 0 || strcmp(sqlstate, "40P01") == 0 ||
		strcmp(sqlstate, "55P03") == 0 || strcmp(sqlstate, "57014") == 0 ||
		strncmp(sqlstate, "08", 2) == 0 || strncmp(sqlstate, "53", 2) == 0 ||
		strncmp(sqlstate, "57P", 3) == 0;
	SetOutcome(outcome, transient ? SAGA_ACTION_TRANSIENT : SAGA_ACTION_PERMANENT, sqlstate,
			   text);
}

static void
SetOutcome(SagaActionOutcome *outcome, SagaActionResult result, const char *sqlstate,
		   const char *error)
{
	outcome->result = result;
	strlcpy(outcome->sqlstate, sqlstate, sizeof(outcome->sqlstate));
	outcome->error = error != NULL ? pstrdup(error) : NULL;
}

/*
 * SagaNodeConnection returns the kept step connection to a node (0: this
 * coordinator) for the current user, opening it if needed; NULL (with
 * *failure) when it cannot be reached.
 */
static SagaConnection *
SagaNodeConnection(int32 nodeId, char **failure)
{
	Oid			userId = GetUserId();
	WorkerNode *node;
	NodeConnection *conn;
	SagaConnection *kept;
	MemoryContext oldContext;
	HASHCTL		info;
	ListCell   *cell;

	foreach(cell, sagaConnections)
	{
		kept = lfirst(cell);
		if (kept->nodeId != nodeId || kept->userId != userId)
			continue;
		if (kept->conn->pgConn != NULL && PQstatus(kept->conn->pgConn) == CONNECTION_OK &&
			!kept->conn->queryInProgress)
			return kept;
		DropSagaConnection(kept->conn);
		break;
	}

	node = nodeId == 0 ? NULL : GetWorkerNode(nodeId);
	conn = node == NULL ? OpenLoopbackConnection(false) :
		OpenDedicatedConnection(node->host, node->port, false, false);
	if (conn == NULL)
	{
		*failure = node == NULL ? pstrdup("could not connect to the coordinator itself") :
			psprintf("could not connect to node %s:%d", node->host, node->port);
		return NULL;
	}
	KeepConnectionAcrossTransactions(conn);
	conn->keepWaitSet = true;	/* kept for many steps: one wait set, not one per wait */
	kept = MemoryContextAllocZero(TopMemoryContext, sizeof(SagaConnection));
	kept->nodeId = nodeId;
	kept->userId = userId;
	kept->conn = conn;
	kept->context = AllocSetContextCreate(TopMemoryContext, "shardext saga connection",
										  ALLOCSET_SMALL_SIZES);
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(uint64);
	info.entrysize = sizeof(SagaPreparedStatement);
	info.hcxt = kept->context;
	kept->prepared = hash_create("shardext saga statements", 64, &info,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	oldContext = MemoryContextSwitchTo(TopMemoryContext);
	sagaConnections = lappend(sagaConnections, kept);
	MemoryContextSwitchTo(oldContext);
	return kept;
}

/*
 * NameStatement makes a pipeline command run a statement prepared on the
 * connection (preparing it there on first use: a round trip once, and no
 * parsing and planning on the node for every step after).  Returns false
 * (with *failure) when the node refused or could not be asked.
 */
static bool
NameStatement(SagaConnection *kept, PipelineCommand *command, const Oid *types,
			  char **failure)
{
	uint64		key = hash_bytes_extended((const unsigned char *) command->sql,
										  strlen(command->sql), 0);
	SagaPreparedStatement *entry;
	bool		found;
	char		name[16];

	entry = hash_search(kept->prepared, &key, HASH_FIND, &found);
	if (found)
	{
		if (strcmp(entry->sql, command->sql) == 0)
			command->statementName = entry->name;
		return true;
	}
	if (kept->preparedCount >= SAGA_MAX_PREPARED)
		return true;			/* sent unnamed */
	snprintf(name, sizeof(name), "saga%d", kept->preparedCount + 1);
	if (!TryPrepareRemoteStatement(kept->conn, name, command->sql, command->nParams,
									   types, SAGA_STEP_TIMEOUT_MS, failure))
		return false;
	entry = hash_search(kept->prepared, &key, HASH_ENTER, &found);
	entry->sql = MemoryContextStrdup(kept->context, command->sql);
	strlcpy(entry->name, name, sizeof(entry->name));
	kept->preparedCount++;
	command->statementName = entry->name;
	return true;
}

/*
 * SagaLoopbackConnection returns the kept connection to this coordinator's
 * own database for the current user, where the runner writes its log;
 * errors out when it cannot be opened.
 */
NodeConnection *
SagaLoopbackConnection(void)
{
	char	   *failure = NULL;
	SagaConnection *kept = SagaNodeConnection(0, &failure);

	if (kept == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to this server to log the saga"),
				 errhint("Sagas log their progress over a connection to the coordinator's "
						 "own socket as their user; allow it in pg_hba.conf.")));
	return kept->conn;
}

/* DropSagaLoopback closes the current user's loopback connection */
void
DropSagaLoopback(void)
{
	ListCell   *cell;

	foreach(cell, sagaConnections)
	{
		SagaConnection *kept = lfirst(cell);

		if (kept->nodeId == 0 && kept->userId == GetUserId())
		{
			DropSagaConnection(kept->conn);
			return;
		}
	}
}

/* DropSagaConnection closes a step connection and forgets it */
static void
DropSagaConnection(NodeConnection *conn)
{
	ListCell   *cell;

	foreach(cell, sagaConnections)
	{
		SagaConnection *kept = lfirst(cell);

		if (kept->conn == conn)
		{
			sagaConnections = foreach_delete_current(sagaConnections, cell);
			MemoryContextDelete(kept->context);
			pfree(kept);
			break;
		}
	}
	CloseDedicatedConnection(conn);
}

/*
 * CloseSagaConnections closes every kept step connection (and the
 * loopback): the maintenance daemon's, when no saga is due.
 */
void
CloseSagaConnections(void)
{
	while (sagaConnections != NIL)
		DropSagaConnection(((SagaConnection *) linitial(sagaConnections))->conn);
}

#ifdef SHARDEXT_TEST_HOOKS
/*
 * SagaTestFault kills this backend at a step boundary when
 * shardext.saga_test_fault asks for it (and shardext.saga_test_fault_step
 * is 0 or the step): the coordinator crashes there.
 */
static void
SagaTestFault(int point, int step)
{
	if (ShardextSagaTestFault != point ||
		(ShardextSagaTestFaultStep != 0 && ShardextSagaTestFaultStep != step))
		return;
	ereport(LOG, (errmsg("shardext.saga_test_fault: crashing at step %d", step)));
	kill(MyProcPid, SIGKILL);
	pg_usleep(10L * 1000000L);	/* SIGKILL arrives before this ends */
}
#endif
