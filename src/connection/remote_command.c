/*-------------------------------------------------------------------------
 *
 * remote_command.c
 *	  Sending commands to nodes, reading results without blocking the
 *	  backend's reaction to interrupts, and relaying remote errors.
 *
 * Connections are in non-blocking mode; every wait goes through the latch so
 * that a cancel or statement_timeout interrupts it.  When an error escapes
 * while a command is in flight, conn->queryInProgress stays set and the
 * transaction abort callback cancels the remote command.
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
#include "shardext/remote_command.h"

static void FlushRemoteOutput(NodeConnection *conn);


/*
 * WaitForRemoteSocket sleeps until the connection's socket is readable (or
 * writable, when forWrite) or an interrupt arrives; interrupts are served,
 * which may throw.
 */
void
WaitForRemoteSocket(NodeConnection *conn, bool forWrite)
{
	int			events = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | WL_SOCKET_READABLE;
	int			rc;

	if (forWrite)
		events |= WL_SOCKET_WRITEABLE;

	rc = WaitLatchOrSocket(MyLatch, events, PQsocket(conn->pgConn), -1L,
						   PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
	{
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	if (rc & WL_SOCKET_READABLE)
	{
		if (!PQconsumeInput(conn->pgConn))
			ReportConnectionError(conn, ERROR);
	}
}

/* pushes everything libpq has buffered to the server */
static void
FlushRemoteOutput(NodeConnection *conn)
{
	int			rc;

	while ((rc = PQflush(conn->pgConn)) == 1)
		WaitForRemoteSocket(conn, true);
	if (rc == -1)
		ReportConnectionError(conn, ERROR);
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

	while (PQisBusy(conn->pgConn))
		WaitForRemoteSocket(conn, false);

	result = PQgetResult(conn->pgConn);
	if (result == NULL)
		conn->queryInProgress = false;
	return result;
}

static bool
ResultIsError(PGresult *result)
{
	ExecStatusType status = PQresultStatus(result);

	return status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK &&
		status != PGRES_EMPTY_QUERY && status != PGRES_SINGLE_TUPLE;
}

/*
 * ExecuteRemoteCommand runs a command and checks that it succeeded; a
 * remote error is rethrown locally with its SQLSTATE.
 */
void
ExecuteRemoteCommand(NodeConnection *conn, const char *command)
{
	PGresult   *result = ExecuteRemoteQuery(conn, command);

	PQclear(result);
}

/*
 * ExecuteRemoteQuery runs a command and returns its last result, which the
 * caller must PQclear.  Errors are rethrown after all results were read, so
 * the connection is left idle.
 */
PGresult *
ExecuteRemoteQuery(NodeConnection *conn, const char *query)
{
	PGresult   *result;
	PGresult   *last = NULL;
	PGresult   *error = NULL;

	SendRemoteCommand(conn, query);
	while ((result = GetRemoteResult(conn)) != NULL)
	{
		if (ResultIsError(result) && error == NULL)
		{
			error = result;
			continue;
		}
		PQclear(last);
		last = result;
	}

	if (error != NULL)
	{
		PQclear(last);
		ReportRemoteError(conn, error, ERROR, query);
	}
	return last;
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
		PGresult   *result;

		while ((result = GetRemoteResult(conn)) != NULL)
		{
			if (ResultIsError(result) && error == NULL)
			{
				error = result;
				errorConn = conn;
				errorCommand = lfirst(commandCell);
				continue;
			}
			PQclear(result);
		}
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
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeoutMs);
	PGconn	   *pgConn = conn->pgConn;

	if (pgConn == NULL || PQstatus(pgConn) != CONNECTION_OK)
		return false;

	for (;;)
	{
		PGresult   *result;

		while (PQisBusy(pgConn) || PQflush(pgConn) == 1)
		{
			long		timeout = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
																  deadline);
			int			rc;

			if (timeout <= 0)
				return false;
			rc = WaitLatchOrSocket(MyLatch,
								   WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT |
								   WL_EXIT_ON_PM_DEATH,
								   PQsocket(pgConn), timeout, PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
			if ((rc & WL_SOCKET_READABLE) && !PQconsumeInput(pgConn))
				return false;
		}

		result = PQgetResult(pgConn);
		if (result == NULL)
			break;

		switch (PQresultStatus(result))
		{
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
	PGcancel   *cancel;
	char		errorBuffer[256];
	bool		sent = false;

	if (conn->pgConn == NULL || PQstatus(conn->pgConn) != CONNECTION_OK)
		return false;

	if ((cancel = PQgetCancel(conn->pgConn)) != NULL)
	{
		sent = PQcancel(cancel, errorBuffer, sizeof(errorBuffer));
		PQfreeCancel(cancel);
	}
	if (!sent)
		ereport(WARNING,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not send cancel request to node %s:%d",
						conn->host, conn->port)));

	return DrainRemoteResults(conn, timeoutMs);
}

/*
 * ExecuteRemoteCommandWithTimeout runs a command during cleanup: it never
 * throws for remote trouble and waits at most timeoutMs.  Returns whether
 * the command succeeded.
 */
bool
ExecuteRemoteCommandWithTimeout(NodeConnection *conn, const char *command,
								int timeoutMs)
{
	PGconn	   *pgConn = conn->pgConn;

	if (pgConn == NULL || PQstatus(pgConn) != CONNECTION_OK || conn->queryInProgress)
		return false;
	if (!PQsendQuery(pgConn, command))
		return false;
	conn->queryInProgress = true;
	return FinishRemoteCommandWithTimeout(conn, command, timeoutMs);
}

/*
 * FinishRemoteCommandWithTimeout reads the results of a command already
 * sent, like ExecuteRemoteCommandWithTimeout: it never throws for remote
 * trouble (errors become warnings) and waits at most timeoutMs.  Returns
 * whether the command succeeded and the connection is idle again.
 */
bool
FinishRemoteCommandWithTimeout(NodeConnection *conn, const char *command,
							   int timeoutMs)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeoutMs);
	PGconn	   *pgConn = conn->pgConn;
	bool		success = true;

	if (pgConn == NULL)
		return false;

	for (;;)
	{
		PGresult   *result;

		while (PQisBusy(pgConn) || PQflush(pgConn) == 1)
		{
			long		timeout = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
																  deadline);
			int			rc;

			if (timeout <= 0)
				return false;
			rc = WaitLatchOrSocket(MyLatch,
								   WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT |
								   WL_EXIT_ON_PM_DEATH,
								   PQsocket(pgConn), timeout, PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
			if ((rc & WL_SOCKET_READABLE) && !PQconsumeInput(pgConn))
				return false;
		}
		result = PQgetResult(pgConn);
		if (result == NULL)
			break;
		if (ResultIsError(result))
		{
			success = false;
			ReportRemoteError(conn, result, WARNING, command);
			continue;
		}
		PQclear(result);
	}
	conn->queryInProgress = false;
	return success;
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
