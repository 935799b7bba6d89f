/*-------------------------------------------------------------------------
 *
 * remote_command.c
 *	  Sending commands to nodes, reading results without blocking the
 *	  backend's reaction to interrupts, relaying remote errors, streaming
 *	  COPY data, and the bounded waits of cleanup paths.
 *
 * Connections are in non-blocking mode, and every wait for a node is one
 * loop, WaitForNodeUntil: on the latch, so that a cancel, statement_timeout
 * or the distributed deadlock detector (through NodeWaitCancel_hook, which
 * the transaction layer sets) interrupts it, and with a deadline
 * where the caller has one.  When an error escapes while a command is in
 * flight, conn->queryInProgress stays set and the transaction abort
 * callback cancels the remote command.
 *
 * Three kinds of callers, which the names tell apart (Execute* throws,
 * Try* returns the failure):
 *	- statements (ExecuteRemoteQuery and friends): interruptible, throw
 *	  remote errors, bounded by statement_timeout -- and in the maintenance
 *	  daemon, which has no statement_timeout, by SetRemoteCommandTimeout;
 *	- admin and daemon work that must not hang (TryRemoteQuery):
 *	  interruptible, a time limit of its own, returns remote trouble (the
 *	  caller reports it);
 *	- abort and cleanup paths (Try*NoInterrupts, DrainRemoteResults,
 *	  CancelRemoteCommand): a time limit, no interrupts served, return
 *	  remote trouble (errors of the node become warnings).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "pgtime.h"

#include "shardext/connection.h"
#include "shardext/guc.h"
#include "shardext/pg_compat.h"
#include "shardext/remote_command.h"

/* how long a cancelled command may take to end before the connection is given up */
#define CANCEL_DRAIN_TIMEOUT_MS 5000

static void FlushRemoteOutput(NodeConnection *conn);
static bool DrainRemoteResultsUntil(NodeConnection *conn, TimestampTz deadline);
static bool ResultIsError(PGresult *result);
static void WaitForNodeOrFail(NodeConnection *conn, NodeWaitGoal goal);
static void ReportNodeWaitFailure(NodeConnection *conn, NodeWaitResult result);
static bool FinishRemoteCommandUntil(NodeConnection *conn, const char *command,
									 TimestampTz deadline, PGresult **lastOut,
									 bool *timedOut);

/* how long ExecuteStandbyScalar pauses before it runs a cancelled query again */
#define STANDBY_RETRY_DELAY_MS 20

NodeWaitCancel_hook_type NodeWaitCancel_hook = NULL;

/* the SQLSTATE of the last remote error of TryRemoteQuery */
static char lastFailureSqlstate[6] = "";

/* SetRemoteCommandTimeout: the deadline of interruptible waits, or 0 */
static TimestampTz remoteCommandDeadline = 0;
static int	remoteCommandTimeoutMs = 0;


/* positions of the events in a connection's WaitEventSet */
#define WAIT_SET_LATCH 0
#define WAIT_SET_SOCKET 2

/*
 * WaitOnNodeConnection waits for the given socket events of the connection,
 * its latch, or timeoutMs (-1: no timeout), and returns what happened as
 * WL_* flags.  It serves no interrupts: callers decide whether they may.  A
 * cached connection's WaitEventSet is made on first use and kept (making
 * one per wait costs an epoll instance per round trip, which showed up in
 * profiles of router queries); it is the only wait set of the connection.
 */
int
WaitOnNodeConnection(NodeConnection *conn, int socketEvents, long timeoutMs)
{
	WaitEventSet *set = conn->waitSet;
	WaitEvent	occurred[3];
	int			count;
	int			result = 0;

	/*
	 * While connecting, libpq may switch sockets: no kept wait set yet; a
	 * cancel request has a socket of its own.
	 */
	if (!conn->keepWaitSet || conn->connecting || conn->cancelRequest != NULL)
	{
		int			rc = WaitLatchOrSocket(MyLatch,
										   WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | socketEvents |
										   (timeoutMs >= 0 ? WL_TIMEOUT : 0),
										   NodeWaitSocket(conn), timeoutMs,
										   PG_WAIT_EXTENSION);

		return rc & (WL_LATCH_SET | WL_TIMEOUT | WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE);
	}

	if (set == NULL)
	{
		set = CreateLongLivedWaitEventSet(3);
		AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
		AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
		AddWaitEventToSet(set, socketEvents, PQsocket(conn->pgConn), NULL, NULL);
		conn->waitSet = set;
		conn->waitSetEvents = socketEvents;
	}
	else if (conn->waitSetEvents != socketEvents)
	{
		ModifyWaitEvent(set, WAIT_SET_SOCKET, socketEvents, NULL);
		conn->waitSetEvents = socketEvents;
	}

	count = WaitEventSetWait(set, timeoutMs, occurred, lengthof(occurred), PG_WAIT_EXTENSION);
	if (count == 0)
		return WL_TIMEOUT;
	for (int i = 0; i < count; i++)
	{
		if (occurred[i].pos == WAIT_SET_LATCH)
			result |= WL_LATCH_SET;
		else if (occurred[i].pos == WAIT_SET_SOCKET)
			result |= occurred[i].events & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE);
	}
	return result;
}

/*
 * ServeNodeWaitInterrupts serves what woke an interruptible wait for a node
 * (its latch was set and reset): NodeWaitCancel_hook, then interrupts.
 * Either may throw.
 */
void
ServeNodeWaitInterrupts(void)
{
	if (NodeWaitCancel_hook)
		NodeWaitCancel_hook();
	CHECK_FOR_INTERRUPTS();
}

/*
 * WaitForNodeUntil is the one loop that waits for a node: until the
 * connection reaches goal (connection attempt ended, next result readable
 * with nothing left to send, output flushed, some input read, or the cancel
 * request that SendNodeCancelRequests started delivered), the deadline passes (0: none),
 * or the connection fails.  A connection attempt also ends when the
 * node stays silent for shardext.connect_timeout (conn->connectDeadline,
 * renewed by each answer).  With interruptible, interrupts are served while
 * waiting (which may throw); without, the latch is only reset (abort and
 * cleanup paths).
 */
NodeWaitResult
WaitForNodeUntil(NodeConnection *conn, NodeWaitGoal goal, TimestampTz deadline,
				 bool interruptible)
{
	PGconn	   *pgConn = conn->pgConn;
	bool		gotInput = false;

	if (pgConn == NULL)
		return NODE_WAIT_FAILED;
	for (;;)
	{
		int			events;
		long		timeout = -1;
		TimestampTz until;
		int			rc;

		if (goal == NODE_WAIT_CONNECTED || goal == NODE_WAIT_CANCEL_SENT)
		{
			PostgresPollingStatusType status = goal == NODE_WAIT_CONNECTED ?
				conn->pollStatus : conn->cancelPollStatus;

			if (status == PGRES_POLLING_OK)
				return NODE_WAIT_DONE;
			if (status == PGRES_POLLING_FAILED)
				return NODE_WAIT_FAILED;
			events = status == PGRES_POLLING_READING ?
				WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
		}
		else
		{
			int			flush = PQflush(pgConn);

			if (flush < 0)
				return NODE_WAIT_FAILED;
			if (goal == NODE_WAIT_INPUT ? gotInput :
				flush == 0 && (goal == NODE_WAIT_FLUSHED || !PQisBusy(pgConn)))
				return NODE_WAIT_DONE;
			events = WL_SOCKET_READABLE | (flush == 1 ? WL_SOCKET_WRITEABLE : 0);
		}

		until = deadline;
		if (goal == NODE_WAIT_CONNECTED && (until == 0 || conn->connectDeadline < until))
			until = conn->connectDeadline;
		if (until != 0)
		{
			timeout = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until);
			if (timeout <= 0)
				return NODE_WAIT_TIMEOUT;
		}
		rc = WaitOnNodeConnection(conn, events, timeout);
		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			if (interruptible)
				ServeNodeWaitInterrupts();
		}
		if (goal == NODE_WAIT_CONNECTED)
		{
			if (rc & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE))
				AdvanceConnect(conn);
		}
		else if (goal == NODE_WAIT_CANCEL_SENT)
		{
			if (rc & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE))
				AdvanceCancelRequest(conn);
		}
		else if (rc & WL_SOCKET_READABLE)
		{
			if (!PQconsumeInput(pgConn))
				return NODE_WAIT_FAILED;
			gotInput = true;
		}
	}
}

/*
 * SetRemoteCommandTimeout bounds every interruptible wait for a node from
 * now on by timeoutMs (0: no bound), for work that has no
 * statement_timeout: the maintenance daemon.
 */
void
SetRemoteCommandTimeout(int timeoutMs)
{
	remoteCommandTimeoutMs = timeoutMs;
	remoteCommandDeadline = timeoutMs > 0 ?
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeoutMs) : 0;
}

/*
 * WaitForNodeOrFail waits interruptibly (within SetRemoteCommandTimeout's
 * bound) until goal; a failed connection or the bound raise an error.
 */
static void
WaitForNodeOrFail(NodeConnection *conn, NodeWaitGoal goal)
{
	ReportNodeWaitFailure(conn, WaitForNodeUntil(conn, goal, remoteCommandDeadline, true));
}

/* ReportNodeWaitFailure raises the error of a wait that timed out or failed (else nothing) */
static void
ReportNodeWaitFailure(NodeConnection *conn, NodeWaitResult result)
{
	if (result == NODE_WAIT_TIMEOUT)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("node %s:%d did not answer within %d ms",
						conn->host, conn->port, remoteCommandTimeoutMs)));
	if (result == NODE_WAIT_FAILED)
		ReportConnectionError(conn, ERROR);
}

/*
 * WaitForRemoteSocket waits, for callers that drive libpq themselves (COPY
 * data, flushing), until some input arrived, or with forWrite until
 * libpq's output is flushed; interrupts are served (which may throw), and
 * SetRemoteCommandTimeout's bound raises an error.  A broken connection
 * raises one while reading; while writing the caller's next libpq call
 * tells it.
 */
void
WaitForRemoteSocket(NodeConnection *conn, bool forWrite)
{
	NodeWaitResult result = WaitForNodeUntil(conn, forWrite ? NODE_WAIT_FLUSHED :
											 NODE_WAIT_INPUT, remoteCommandDeadline, true);

	if (result == NODE_WAIT_TIMEOUT || (result == NODE_WAIT_FAILED && !forWrite))
		ReportNodeWaitFailure(conn, result);
}

/*
 * ReleaseConnectionWaitSet frees the connection's WaitEventSet; called when
 * its libpq connection is closed (a new one gets a new set).
 */
void
ReleaseConnectionWaitSet(NodeConnection *conn)
{
	if (conn->waitSet != NULL)
		FreeWaitEventSet((WaitEventSet *) conn->waitSet);
	conn->waitSet = NULL;
	conn->waitSetEvents = 0;
}

/* pushes everything libpq has buffered to the server */
static void
FlushRemoteOutput(NodeConnection *conn)
{
	WaitForNodeOrFail(conn, NODE_WAIT_FLUSHED);
}

/*
 * SyncRemoteTimeZone makes the remote session use the local session's time
 * zone, so that time zone dependent expressions evaluate alike.
 */
void
SyncRemoteTimeZone(NodeConnection *conn)
{
	const char *localZone = pg_get_timezone_name(session_timezone);
	char	   *command;

	if (conn->remoteTimeZone != NULL && strcmp(conn->remoteTimeZone, localZone) == 0)
		return;

	command = psprintf("SET TimeZone = %s", quote_literal_cstr(localZone));
	if (conn->remoteTimeZone != NULL)
		pfree(conn->remoteTimeZone);
	/* set first: ExecuteRemoteCommand comes back through here */
	conn->remoteTimeZone = MemoryContextStrdup(TopMemoryContext, localZone);
	/* a remote ROLLBACK undoes a SET made inside the transaction */
	if (conn->xactState != REMOTE_XACT_NONE)
		conn->timeZoneSetInXact = true;
	PG_TRY();
	{
		ExecuteRemoteCommand(conn, command);
	}
	PG_CATCH();
	{
		pfree(conn->remoteTimeZone);
		conn->remoteTimeZone = NULL;
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * SendRemoteCommand sends a command (possibly several, ';'-separated) with
 * the simple query protocol.  The caller reads the results with
 * GetRemoteResult until it returns NULL.
 */
void
SendRemoteCommand(NodeConnection *conn, const char *command)
{
	Assert(!conn->queryInProgress);
	SyncRemoteTimeZone(conn);
	if (!PQsendQuery(conn->pgConn, command))
		ReportConnectionError(conn, ERROR);
	conn->queryInProgress = true;
	FlushRemoteOutput(conn);
}

/*
 * SendRemoteCommandParams sends one statement with text-format parameters
 * ($1 ...) through the extended protocol.
 */
void
SendRemoteCommandParams(NodeConnection *conn, const char *command,
						int nParams, const Oid *paramTypes,
						const char *const *paramValues)
{
	Assert(!conn->queryInProgress);
	SyncRemoteTimeZone(conn);
	if (!PQsendQueryParams(conn->pgConn, command, nParams, paramTypes,
						   paramValues, NULL, NULL, 0))
		ReportConnectionError(conn, ERROR);
	conn->queryInProgress = true;
	FlushRemoteOutput(conn);
}

/*
 * GetRemoteResult returns the next result of the command in flight, waiting
 * for it interruptibly, or NULL when all results were read.  The caller owns
 * the result and must PQclear it (also on error paths).
 */
PGresult *
GetRemoteResult(NodeConnection *conn)
{
	PGresult   *result;

	WaitForNodeOrFail(conn, NODE_WAIT_RESULT);
	result = PQgetResult(conn->pgConn);
	if (result == NULL)
		conn->queryInProgress = false;
	return result;
}

/* does a result report a failed command? */
static bool
ResultIsError(PGresult *result)
{
	ExecStatusType status = PQresultStatus(result);

	return status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK &&
		status != PGRES_EMPTY_QUERY && status != PGRES_SINGLE_TUPLE;
}

/*
 * ReadRemoteResults reads every result of the command in flight, so that
 * the connection is idle again, and returns the last successful one (or
 * NULL).  The first failed result is returned in *firstError (NULL when
 * none failed); later ones are dropped.  The caller owns both results and
 * relays the error, typically with ReportRemoteError.
 */
PGresult *
ReadRemoteResults(NodeConnection *conn, PGresult **firstError)
{
	PGresult   *result;
	PGresult   *last = NULL;

	*firstError = NULL;
	while ((result = GetRemoteResult(conn)) != NULL)
	{
		if (ResultIsError(result))
		{
			if (*firstError == NULL)
				*firstError = result;
			else
				PQclear(result);
			continue;
		}
		PQclear(last);
		last = result;
	}
	return last;
}

/*
 * FinishRemoteQuery reads the results of the command sent on conn and
 * returns the last one, which the caller must PQclear.  A remote error is
 * rethrown after all results were read, so the connection is left idle.
 */
PGresult *
FinishRemoteQuery(NodeConnection *conn, const char *command)
{
	PGresult   *error;
	PGresult   *last = ReadRemoteResults(conn, &error);

	if (error != NULL)
	{
		PQclear(last);
		ReportRemoteError(conn, error, ERROR, command);
	}
	return last;
}

/*
 * ExecuteRemoteCommand runs a command and checks that it succeeded; a
 * remote error is rethrown locally with its SQLSTATE.
 */
void
ExecuteRemoteCommand(NodeConnection *conn, const char *command)
{
	PQclear(ExecuteRemoteQuery(conn, command));
}

/*
 * ExecuteRemoteQuery runs a command (possibly several, ';'-separated) and
 * returns its last result, which the caller must PQclear.  Errors are
 * rethrown after all results were read, so the connection is left idle.
 */
PGresult *
ExecuteRemoteQuery(NodeConnection *conn, const char *query)
{
	SendRemoteCommand(conn, query);
	return FinishRemoteQuery(conn, query);
}

/*
 * ExecuteRemoteQueryParams is ExecuteRemoteQuery for one statement with
 * text parameters whose types the node infers; without parameters, the
 * simple query protocol is used (and several statements are allowed).
 */
PGresult *
ExecuteRemoteQueryParams(NodeConnection *conn, const char *query, int nParams,
						 const char *const *params)
{
	if (nParams > 0)
		SendRemoteCommandParams(conn, query, nParams, NULL, params);
	else
		SendRemoteCommand(conn, query);
	return FinishRemoteQuery(conn, query);
}

/*
 * ExecuteRemoteScalar runs a statement (see ExecuteRemoteQueryParams) and
 * returns the first value of its result (palloc'd), or NULL when it has no
 * rows or the value is NULL.
 */
char *
ExecuteRemoteScalar(NodeConnection *conn, const char *query, int nParams,
					const char *const *params)
{
	PGresult   *result = ExecuteRemoteQueryParams(conn, query, nParams, params);
	char	   *value = NULL;

	if (PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) > 0 &&
		PQnfields(result) > 0 && !PQgetisnull(result, 0, 0))
		value = pstrdup(PQgetvalue(result, 0, 0));
	PQclear(result);
	return value;
}

/*
 * ExecuteRemoteCommandsInParallel sends each command to its connection (the
 * lists correspond) before waiting for any, so that the nodes work at the
 * same time, then checks every result.  The first error is rethrown once all
 * connections are idle again.
 */
void
ExecuteRemoteCommandsInParallel(List *connections, List *commands)
{
	ListCell   *connCell;
	ListCell   *commandCell;
	NodeConnection *errorConn = NULL;
	PGresult   *error = NULL;
	char	   *errorCommand = NULL;

	Assert(list_length(connections) == list_length(commands));

	forboth(connCell, connections, commandCell, commands)
		SendRemoteCommand(lfirst(connCell), lfirst(commandCell));

	forboth(connCell, connections, commandCell, commands)
	{
		NodeConnection *conn = lfirst(connCell);
		PGresult   *connError;

		PQclear(ReadRemoteResults(conn, &connError));
		if (connError != NULL && error == NULL)
		{
			error = connError;
			errorConn = conn;
			errorCommand = lfirst(commandCell);
		}
		else
			PQclear(connError);
	}

	if (error != NULL)
		ReportRemoteError(errorConn, error, ERROR, errorCommand);
}

/*
 * ReportRemoteError raises a remote error locally at elevel, keeping the
 * remote SQLSTATE, detail, hint and context, and saying which node it came
 * from.  It takes ownership of result.
 */
void
ReportRemoteError(NodeConnection *conn, PGresult *result, int elevel,
				  const char *command)
{
	char	   *sqlstate = NULL;
	char	   *primary = NULL;
	char	   *detail = NULL;
	char	   *hint = NULL;
	char	   *context = NULL;
	int			code = ERRCODE_CONNECTION_FAILURE;

#define COPY_FIELD(var, field) \
	do { \
		const char *value_ = result ? PQresultErrorField(result, field) : NULL; \
		var = value_ ? pstrdup(value_) : NULL; \
	} while (0)

	COPY_FIELD(sqlstate, PG_DIAG_SQLSTATE);
	COPY_FIELD(primary, PG_DIAG_MESSAGE_PRIMARY);
	COPY_FIELD(detail, PG_DIAG_MESSAGE_DETAIL);
	COPY_FIELD(hint, PG_DIAG_MESSAGE_HINT);
	COPY_FIELD(context, PG_DIAG_CONTEXT);
#undef COPY_FIELD
	PQclear(result);

	if (sqlstate != NULL && strlen(sqlstate) == 5)
		code = MAKE_SQLSTATE(sqlstate[0], sqlstate[1], sqlstate[2],
							 sqlstate[3], sqlstate[4]);
	if (primary == NULL && conn->pgConn != NULL)
		primary = pchomp(PQerrorMessage(conn->pgConn));

	ereport(elevel,
			(errcode(code),
			 primary ? errmsg_internal("%s", primary) :
			 errmsg("could not obtain message string for remote error"),
			 detail ? errdetail_internal("%s", detail) : 0,
			 hint ? errhint("%s", hint) : 0,
			 context ? errcontext("%s", context) : 0,
			 errcontext("while executing command on %s:%d", conn->host, conn->port)));
}

/*
 * ReportConnectionError raises a failure of the connection itself (not of a
 * command) at elevel.
 */
void
ReportConnectionError(NodeConnection *conn, int elevel)
{
	char	   *message = conn->pgConn ? pchomp(PQerrorMessage(conn->pgConn)) : "";

	ereport(elevel,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("connection to node %s:%d failed", conn->host, conn->port),
			 errdetail_internal("%s", message)));
}

/*
 * DrainRemoteResults reads and discards what remains of the command in
 * flight, ending a COPY if one is open, within timeoutMs.  It never throws
 * for remote trouble; it returns false when the connection could not be
 * brought back to idle.
 */
bool
DrainRemoteResults(NodeConnection *conn, int timeoutMs)
{
	return DrainRemoteResultsUntil(conn,
								   TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeoutMs));
}

/*
 * DrainRemoteResultsUntil is DrainRemoteResults with a deadline.  What has
 * arrived is read first: a command that ended while other connections were
 * waited for counts as ended even once the deadline has passed.
 */
static bool
DrainRemoteResultsUntil(NodeConnection *conn, TimestampTz deadline)
{
	PGconn	   *pgConn = conn->pgConn;

	if (pgConn == NULL || PQstatus(pgConn) != CONNECTION_OK || !PQconsumeInput(pgConn))
		return false;

	for (;;)
	{
		PGresult   *result;

		if (WaitForNodeUntil(conn, NODE_WAIT_RESULT, deadline, false) != NODE_WAIT_DONE)
			return false;
		result = PQgetResult(pgConn);
		if (result == NULL)
		{
			/* a pipeline ends with its Sync, not with the end of a command */
			if (conn->pipelineStage == PIPELINE_NONE)
				break;
			continue;
		}

		switch (PQresultStatus(result))
		{
			case PGRES_PIPELINE_SYNC:
				if (!PQexitPipelineMode(pgConn))
				{
					PQclear(result);
					return false;
				}
				conn->pipelineStage = PIPELINE_NONE;
				break;
			case PGRES_COPY_IN:
				PQputCopyEnd(pgConn, "transaction aborted");
				break;
			case PGRES_COPY_OUT:
				{
					char	   *buffer = NULL;
					int			n;

					while ((n = PQgetCopyData(pgConn, &buffer, 1)) > 0)
						PQfreemem(buffer);
					if (n == -2)
					{
						PQclear(result);
						return false;
					}
					break;
				}
			case PGRES_COPY_BOTH:
				PQclear(result);
				return false;
			default:
				break;
		}
		PQclear(result);
	}

	conn->queryInProgress = false;
	return true;
}

/*
 * CancelRemoteCommand asks the node to cancel the command in flight and
 * drains its results; returns false if the connection is not usable after.
 */
bool
CancelRemoteCommand(NodeConnection *conn, int timeoutMs)
{
	List	   *one = list_make1(conn);
	List	   *failed = CancelRemoteCommands(one, timeoutMs);
	bool		clean = failed == NIL;

	list_free(one);
	list_free(failed);
	return clean;
}

/*
 * CancelRemoteCommands cancels the commands in flight on the connections
 * and drains their results; returns the connections that are not usable
 * after (the caller closes them).  Sending the requests waits at most
 * shardext.connect_timeout (within timeoutMs), and the cancelled commands
 * get a few seconds to end: a node that does not react by then is in
 * trouble, and the caller closes the connection rather than keep the
 * session waiting.  Both waits are shared by all the connections (every
 * request is sent before any result is awaited), so that a node whose
 * backends all hang costs the same time however many connections to it
 * were busy.
 */
List *
CancelRemoteCommands(List *conns, int timeoutMs)
{
	TimestampTz sendDeadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														   Min(timeoutMs, ShardextConnectTimeout));
	List	   *failed = SendNodeCancelRequests(conns, sendDeadline);
	TimestampTz drainDeadline;
	ListCell   *cell;

	foreach(cell, failed)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn->pgConn != NULL && PQstatus(conn->pgConn) == CONNECTION_OK)
			ereport(WARNING,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not send cancel request to node %s:%d",
							conn->host, conn->port)));
	}
	drainDeadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												Min(timeoutMs,
													Max(CANCEL_DRAIN_TIMEOUT_MS, ShardextConnectTimeout)));
	foreach(cell, conns)
	{
		NodeConnection *conn = lfirst(cell);

		if (!list_member_ptr(failed, conn) && !DrainRemoteResultsUntil(conn, drainDeadline))
			failed = lappend(failed, conn);
	}
	return failed;
}

/*
 * TryRemoteCommandNoInterrupts runs a command during cleanup: it serves
 * no interrupts, never throws for remote trouble (the node's errors become
 * warnings) and waits at most timeoutMs.  Returns whether the command
 * succeeded.
 */
bool
TryRemoteCommandNoInterrupts(NodeConnection *conn, const char *command,
							 int timeoutMs)
{
	PGconn	   *pgConn = conn->pgConn;

	if (pgConn == NULL || PQstatus(pgConn) != CONNECTION_OK || conn->queryInProgress)
		return false;
	if (!PQsendQuery(pgConn, command))
		return false;
	conn->queryInProgress = true;
	return TryFinishRemoteCommandNoInterrupts(conn, command, timeoutMs);
}

/*
 * TryRemoteQueryNoInterrupts is TryRemoteCommandNoInterrupts that
 * returns the command's last result (the caller PQclears it), or NULL when
 * the command failed; a command that takes longer than timeoutMs is
 * cancelled (waiting a second at most for that).
 */
PGresult *
TryRemoteQueryNoInterrupts(NodeConnection *conn, const char *query, int timeoutMs)
{
	PGconn	   *pgConn = conn->pgConn;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeoutMs);
	PGresult   *last = NULL;
	bool		timedOut;

	if (pgConn == NULL || PQstatus(pgConn) != CONNECTION_OK || conn->queryInProgress)
		return NULL;
	if (!PQsendQuery(pgConn, query))
		return NULL;
	conn->queryInProgress = true;
	if (FinishRemoteCommandUntil(conn, query, deadline, &last, &timedOut))
		return last;

	PQclear(last);
	if (timedOut)
		CancelRemoteCommand(conn, 1000);
	else
		conn->queryInProgress = false;
	return NULL;
}

/*
 * TryRemoteQuery runs a statement (with parameters one, without
 * several are allowed) for admin and daemon work that must not hang:
 * interrupts are served (a cancel throws as usual) and the node gets
 * timeoutMs to answer (0: no limit of its own, statement_timeout still
 * applies).  Returns the last result (the caller PQclears it), or NULL with
 * the reason in *failure: the node's error, a broken connection, a COPY
 * (not supported here) or the timeout.  Remote trouble never throws; after
 * a timeout or a COPY the command is still in flight (queryInProgress), and
 * the caller closes or cancels the connection.
 */
PGresult *
TryRemoteQuery(NodeConnection *conn, const char *query, int nParams,
			   const char *const *params, int timeoutMs, char **failure)
{
	TimestampTz deadline = timeoutMs > 0 ?
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeoutMs) : 0;
	PGresult   *last = NULL;
	char	   *error = NULL;
	int			sent;

	*failure = NULL;
	lastFailureSqlstate[0] = '\0';
	if (conn->pgConn == NULL || PQstatus(conn->pgConn) != CONNECTION_OK ||
		conn->queryInProgress)
	{
		*failure = pstrdup("the connection is not usable");
		return NULL;
	}
	if (nParams > 0)
		sent = PQsendQueryParams(conn->pgConn, query, nParams, NULL, params, NULL, NULL, 0);
	else
		sent = PQsendQuery(conn->pgConn, query);
	if (!sent)
	{
		*failure = pchomp(PQerrorMessage(conn->pgConn));
		return NULL;
	}
	conn->queryInProgress = true;

	for (;;)
	{
		NodeWaitResult waited = WaitForNodeUntil(conn, NODE_WAIT_RESULT, deadline, true);
		PGresult   *result;
		ExecStatusType status;

		if (waited != NODE_WAIT_DONE)
		{
			PQclear(last);
			*failure = waited == NODE_WAIT_TIMEOUT ?
				psprintf("node %s:%d did not answer within %d ms", conn->host, conn->port,
						 timeoutMs) :
				pchomp(PQerrorMessage(conn->pgConn));
			return NULL;
		}
		result = PQgetResult(conn->pgConn);
		if (result == NULL)
			break;
		status = PQresultStatus(result);
		if (status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH)
		{
			PQclear(result);
			PQclear(last);
			*failure = pstrdup("COPY cannot run here");
			return NULL;
		}
		if (ResultIsError(result))
		{
			if (error == NULL)
			{
				const char *sqlstate = PQresultErrorField(result, PG_DIAG_SQLSTATE);

				error = pchomp(PQresultErrorMessage(result));
				strlcpy(lastFailureSqlstate, sqlstate ? sqlstate : "",
						sizeof(lastFailureSqlstate));
			}
			PQclear(result);
			continue;
		}
		PQclear(last);
		last = result;
	}
	conn->queryInProgress = false;
	if (error != NULL)
	{
		PQclear(last);
		*failure = error;
		return NULL;
	}
	return last;
}

/*
 * TryPrepareRemoteStatement prepares a named statement on the
 * connection (for TryRemotePipeline's commands), waiting
 * interruptibly and at most timeoutMs.  Never throws for the node's
 * trouble: returns false with *failure (the connection may be unusable).
 */
bool
TryPrepareRemoteStatement(NodeConnection *conn, const char *name, const char *sql,
						  int nParams, const Oid *types, int timeoutMs, char **failure)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeoutMs);
	PGresult   *result;
	bool		ok = true;

	*failure = NULL;
	if (conn->pgConn == NULL || PQstatus(conn->pgConn) != CONNECTION_OK ||
		conn->queryInProgress || !PQsendPrepare(conn->pgConn, name, sql, nParams, types))
	{
		*failure = pstrdup("the connection is not usable");
		return false;
	}
	conn->queryInProgress = true;
	for (;;)
	{
		if (WaitForNodeUntil(conn, NODE_WAIT_RESULT, deadline, true) != NODE_WAIT_DONE)
		{
			*failure = pchomp(PQerrorMessage(conn->pgConn));
			return false;
		}
		if ((result = PQgetResult(conn->pgConn)) == NULL)
			break;
		if (ResultIsError(result) && ok)
		{
			*failure = pchomp(PQresultErrorMessage(result));
			ok = false;
		}
		PQclear(result);
	}
	conn->queryInProgress = false;
	return ok;
}

/*
 * TryRemotePipeline sends count commands with their parameters
 * in one pipeline that ends with one Sync, so that they form one implicit
 * transaction on the node: it commits at the Sync when every command
 * succeeded, and rolls back when one failed (the later ones are skipped).
 * One round trip.  Waits are interruptible and bounded by timeoutMs.
 *	- PIPELINE_SUCCEEDED: every command succeeded and the node committed;
 *	- PIPELINE_FAILED: the node reported *error (the caller PQclears it)
 *	  for command *failedIndex (count: the commit itself) and rolled back;
 *	- PIPELINE_NOT_SENT: the Sync never left, so nothing committed
 *	  (*failure says why);
 *	- PIPELINE_NO_ANSWER: the connection broke or the time ran out after
 *	  the Sync was sent: the node may have committed (*failure says why).
 * After PIPELINE_NOT_SENT and PIPELINE_NO_ANSWER the connection is not
 * usable any more; the caller closes it.
 */
PipelineOutcome
TryRemotePipeline(NodeConnection *conn, PipelineCommand *commands, int count,
				  int timeoutMs, int *failedIndex, PGresult **error, char **failure)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeoutMs);
	PGconn	   *pgConn = conn->pgConn;
	int			index = 0;
	NodeWaitResult waited;

	*error = NULL;
	*failure = NULL;
	*failedIndex = -1;
	if (pgConn == NULL || PQstatus(pgConn) != CONNECTION_OK || conn->queryInProgress ||
		!PQenterPipelineMode(pgConn))
	{
		*failure = pstrdup("the connection is not usable");
		return PIPELINE_NOT_SENT;
	}
	for (int i = 0; i < count; i++)
	{
		PipelineCommand *command = &commands[i];

		bool		sent = command->statementName != NULL ?
			PQsendQueryPrepared(pgConn, command->statementName, command->nParams,
								command->values, command->lengths, command->formats, 0) :
			PQsendQueryParams(pgConn, command->sql, command->nParams, command->types,
							  command->values, command->lengths, command->formats, 0);

		if (!sent)
		{
			*failure = pchomp(PQerrorMessage(pgConn));
			return PIPELINE_NOT_SENT;
		}
	}
	if (!PQpipelineSync(pgConn))
	{
		*failure = pchomp(PQerrorMessage(pgConn));
		return PIPELINE_NOT_SENT;
	}
	conn->queryInProgress = true;
	conn->pipelineStage = PIPELINE_SYNC;

	/* per command: its result, then NULL; at the end the Sync's result */
	for (;;)
	{
		PGresult   *result;
		ExecStatusType status;

		waited = WaitForNodeUntil(conn, NODE_WAIT_RESULT, deadline, true);
		if (waited != NODE_WAIT_DONE)
		{
			PQclear(*error);
			*error = NULL;
			*failure = waited == NODE_WAIT_TIMEOUT ?
				psprintf("node %s:%d did not answer within %d ms", conn->host, conn->port,
						 timeoutMs) :
				pchomp(PQerrorMessage(pgConn));
			return PIPELINE_NO_ANSWER;
		}
		result = PQgetResult(pgConn);
		if (result == NULL)
		{
			index++;
			continue;
		}
		status = PQresultStatus(result);
		if (status == PGRES_PIPELINE_SYNC)
		{
			PQclear(result);
			break;
		}
		if (status == PGRES_FATAL_ERROR && *error == NULL)
		{
			*error = result;
			*failedIndex = Min(index, count);
			continue;
		}
		PQclear(result);
	}
	conn->pipelineStage = PIPELINE_NONE;
	conn->queryInProgress = false;
	if (!PQexitPipelineMode(pgConn))
	{
		PQclear(*error);
		*error = NULL;
		*failure = pchomp(PQerrorMessage(pgConn));
		return PIPELINE_NO_ANSWER;
	}
	return *error != NULL ? PIPELINE_FAILED : PIPELINE_SUCCEEDED;
}

/*
 * RemoteFailureSqlstate returns the SQLSTATE of the node's error when the
 * last TryRemoteQuery failed with one, else "".
 */
const char *
RemoteFailureSqlstate(void)
{
	return lastFailureSqlstate;
}

/*
 * ExecuteStandbyScalar runs a one-value query on a server that may be a hot
 * standby still replaying WAL and returns the value (NULL for a NULL
 * value).  Replay cancels the queries it conflicts with ("canceling
 * statement due to conflict with recovery", SQLSTATE 40001, or 40P01 for a
 * deadlock with the startup process): without hot_standby_feedback any
 * query that holds a snapshot can be cancelled while the standby replays
 * its primary's pruning, and once the standby no longer streams it does so
 * after max_standby_archive_delay.  Such a query runs again, after a short
 * pause, until deadline; any other failure, or a conflict at the deadline,
 * raises the node's error.  After a failure the caller closes the
 * connection (a timed out query may still run).
 */
char *
ExecuteStandbyScalar(NodeConnection *conn, const char *query, TimestampTz deadline)
{
	for (;;)
	{
		long		remainingMs = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
																  deadline);
		char	   *failure = NULL;
		PGresult   *result = TryRemoteQuery(conn, query, 0, NULL, Max(remainingMs, 1),
										   &failure);
		char	   *value = NULL;
		const char *sqlstate;

		if (result != NULL)
		{
			if (PQntuples(result) > 0 && PQnfields(result) > 0 && !PQgetisnull(result, 0, 0))
				value = pstrdup(PQgetvalue(result, 0, 0));
			PQclear(result);
			return value;
		}
		sqlstate = RemoteFailureSqlstate();
		if ((strcmp(sqlstate, "40001") != 0 && strcmp(sqlstate, "40P01") != 0) ||
			GetCurrentTimestamp() >= deadline)
			ereport(ERROR,
					(errcode(strlen(sqlstate) == 5 ?
							 MAKE_SQLSTATE(sqlstate[0], sqlstate[1], sqlstate[2],
										   sqlstate[3], sqlstate[4]) :
							 ERRCODE_CONNECTION_FAILURE),
					 errmsg_internal("%s", failure),
					 errcontext("while executing command on %s:%d", conn->host, conn->port)));
		ereport(DEBUG1,
				(errmsg_internal("shardext: query on standby %s:%d cancelled by recovery, "
								 "running it again", conn->host, conn->port)));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 STANDBY_RETRY_DELAY_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * TryFinishRemoteCommandNoInterrupts reads the results of a command already
 * sent, like TryRemoteCommandNoInterrupts: it never throws for remote
 * trouble (errors become warnings) and waits at most timeoutMs.  Returns
 * whether the command succeeded and the connection is idle again.
 */
bool
TryFinishRemoteCommandNoInterrupts(NodeConnection *conn, const char *command,
								   int timeoutMs)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeoutMs);
	PGresult   *last = NULL;
	bool		timedOut;
	bool		success;

	if (conn->pgConn == NULL)
		return false;
	success = FinishRemoteCommandUntil(conn, command, deadline, &last, &timedOut);
	PQclear(last);
	return success;
}

/*
 * FinishRemoteCommandUntil reads the results of the command in flight until
 * deadline, reporting failed ones as warnings, and keeps the last
 * successful one in *lastOut (the caller PQclears it in any case).  Returns
 * whether the command succeeded and the connection is idle again; when
 * not, *timedOut tells whether the deadline passed.
 */
static bool
FinishRemoteCommandUntil(NodeConnection *conn, const char *command, TimestampTz deadline,
						 PGresult **lastOut, bool *timedOut)
{
	bool		success = true;

	*timedOut = false;
	for (;;)
	{
		PGresult   *result;
		NodeWaitResult waited = WaitForNodeUntil(conn, NODE_WAIT_RESULT, deadline, false);

		if (waited != NODE_WAIT_DONE)
		{
			*timedOut = (waited == NODE_WAIT_TIMEOUT);
			return false;
		}
		result = PQgetResult(conn->pgConn);
		if (result == NULL)
			break;
		if (ResultIsError(result))
		{
			success = false;
			ReportRemoteError(conn, result, WARNING, command);
			continue;
		}
		PQclear(*lastOut);
		*lastOut = result;
	}
	conn->queryInProgress = false;
	return success;
}

/*
 * RemoteResultReady tells, without waiting, whether the result of the
 * command in flight on a connection has arrived (a broken connection
 * counts as ready: reading the result reports it).
 */
bool
RemoteResultReady(NodeConnection *conn)
{
	if (!PQconsumeInput(conn->pgConn))
		return true;
	return !PQisBusy(conn->pgConn);
}

/*
 * SendRemoteCopyData queues COPY data, waiting (interruptibly) while libpq's
 * buffer is full.
 */
void
SendRemoteCopyData(NodeConnection *conn, const char *data, int length)
{
	int			rc;

	while ((rc = PQputCopyData(conn->pgConn, data, length)) == 0)
		WaitForRemoteSocket(conn, true);
	if (rc == -1)
		ReportConnectionError(conn, ERROR);
}

/*
 * EndRemoteCopy ends a COPY FROM STDIN, aborting it when errorMessage is not
 * NULL.  The caller then reads the COPY's result with GetRemoteResult.
 */
void
EndRemoteCopy(NodeConnection *conn, const char *errorMessage)
{
	int			rc;

	while ((rc = PQputCopyEnd(conn->pgConn, errorMessage)) == 0)
		WaitForRemoteSocket(conn, true);
	if (rc == -1)
		ReportConnectionError(conn, ERROR);
	FlushRemoteOutput(conn);
}

/*
 * QueueRemoteCopyEnd ends a COPY FROM STDIN like EndRemoteCopy, without
 * waiting until libpq has sent everything: the rest goes out with
 * TryFlushRemoteOutput or while the result is awaited.
 */
void
QueueRemoteCopyEnd(NodeConnection *conn)
{
	int			rc;

	while ((rc = PQputCopyEnd(conn->pgConn, NULL)) == 0)
		WaitForRemoteSocket(conn, true);
	if (rc == -1)
		ReportConnectionError(conn, ERROR);
}

/*
 * TryFlushRemoteOutput sends what libpq has buffered as far as the socket
 * takes it now, and returns true once nothing is left.
 */
bool
TryFlushRemoteOutput(NodeConnection *conn)
{
	int			rc = PQflush(conn->pgConn);

	if (rc == -1)
		ReportConnectionError(conn, ERROR);
	return rc == 0;
}

/*
 * BeginRemoteCopy sends a COPY command (which may follow SET commands in the
 * same string) and reads results until the COPY has started, expecting
 * copyStatus (PGRES_COPY_IN or PGRES_COPY_OUT).  A remote error is rethrown
 * after the connection is idle again.
 */
void
BeginRemoteCopy(NodeConnection *conn, const char *command, ExecStatusType copyStatus)
{
	PGresult   *result;

	SendRemoteCommand(conn, command);
	while ((result = GetRemoteResult(conn)) != NULL &&
		   PQresultStatus(result) == PGRES_COMMAND_OK)
		PQclear(result);		/* the SETs */
	if (result == NULL || PQresultStatus(result) != copyStatus)
	{
		/* read the rest so the connection is idle before we throw */
		PGresult   *extra;

		while ((extra = GetRemoteResult(conn)) != NULL)
			PQclear(extra);
		ReportRemoteError(conn, result, ERROR, command);
	}
	PQclear(result);
}

/*
 * ReceiveRemoteCopyData returns the length of the next row of a COPY TO
 * STDOUT that BeginRemoteCopy started, with the row in *buffer (free it
 * with FreeRemoteCopyData), waiting for it interruptibly; -1 at the end of
 * the COPY, whose result the caller then reads with FinishRemoteQuery.
 */
int
ReceiveRemoteCopyData(NodeConnection *conn, char **buffer)
{
	for (;;)
	{
		int			length = PQgetCopyData(conn->pgConn, buffer, 1);

		if (length > 0)
			return length;
		if (length == -1)
			return -1;
		if (length == -2)
			ReportConnectionError(conn, ERROR);
		WaitForRemoteSocket(conn, false);
	}
}

/* FreeRemoteCopyData frees a row of ReceiveRemoteCopyData */
void
FreeRemoteCopyData(char *buffer)
{
	PQfreemem(buffer);
}

/*
 * CopyBetweenNodes streams rows from one node to another through this
 * backend: copyOut (a COPY ... TO STDOUT) on source, copyIn (a COPY ...
 * FROM STDIN) on target, row by row.  rowHook, when not NULL, is called
 * after each row is passed on, with its length.  Remote errors are
 * rethrown; interrupts are served while waiting.
 */
void
CopyBetweenNodes(NodeConnection *source, const char *copyOut,
				 NodeConnection *target, const char *copyIn,
				 CopyRowHook rowHook, void *hookArg)
{
	BeginRemoteCopy(target, copyIn, PGRES_COPY_IN);
	BeginRemoteCopy(source, copyOut, PGRES_COPY_OUT);

	for (;;)
	{
		char	   *buffer = NULL;
		int			length = PQgetCopyData(source->pgConn, &buffer, 1);

		if (length == 0)
		{
			WaitForRemoteSocket(source, false);
			continue;
		}
		if (length == -1)
			break;
		if (length == -2)
			ReportConnectionError(source, ERROR);
		SendRemoteCopyData(target, buffer, length);
		PQfreemem(buffer);
		if (rowHook != NULL)
			rowHook(hookArg, length);
	}
	PQclear(FinishRemoteQuery(source, copyOut));

	EndRemoteCopy(target, NULL);
	PQclear(FinishRemoteQuery(target, copyIn));
}
