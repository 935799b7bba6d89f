/*-------------------------------------------------------------------------
 *
 * remote_cancel.c
 *	  Cancelling the command in flight on a connection, within a time
 *	  limit, with libpq's public API only.
 *
 * libpq's PQcancel connects to the node's postmaster with a blocking
 * connect() and waits, with a blocking recv(), for the postmaster to close
 * the connection: a node that accepts TCP connections but does not answer
 * (a stopped or hung postmaster, a half-dead network) keeps the backend
 * there forever, and neither Ctrl-C nor a timeout gets it out.  Cancels
 * are sent on abort paths, so that would hang the session.  Two bounded
 * ways instead, both waiting in WaitForNodeUntil (no interrupts served, a
 * deadline):
 *
 *	- where libpq has the non-blocking cancel API (libpq 17 and later:
 *	  PQcancelCreate, PQcancelStart, PQcancelPoll), the cancel request goes
 *	  the usual way, to the postmaster with the connection's cancel key,
 *	  and is delivered when the postmaster closes the request's connection;
 *	- with an older libpq (15 and 16), a second connection to the node as
 *	  the same role (OpenSideConnection) runs pg_cancel_backend() on the
 *	  connection's backend (PQbackendPID): the same SIGINT the postmaster
 *	  would send, delivered when the function returns true.  It needs a
 *	  free connection slot on the node, and a node behind a connection
 *	  pooler cannot be cancelled this way (the pid is the pooler's).
 *
 * The libpq compiled against decides (its libpq-fe.h, not the server's
 * version): 18's says LIBPQ_HAS_ASYNC_CANCEL, 17's only declares the API,
 * which the Makefile detects (SHARDEXT_LIBPQ_CANCEL_CREATE).  Either way
 * a request that cannot be delivered in time makes the caller close the
 * connection, which ends the remote transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "shardext/connection.h"
#include "shardext/remote_command.h"

#if defined(LIBPQ_HAS_ASYNC_CANCEL) || defined(SHARDEXT_LIBPQ_CANCEL_CREATE)
#define ASYNC_CANCEL 1
#endif

#ifdef ASYNC_CANCEL
static bool SendCancelRequestAsync(NodeConnection *conn, TimestampTz deadline);
#else
static bool SignalRemoteBackend(NodeConnection *conn, TimestampTz deadline);
#endif

/*
 * SendNodeCancelRequest asks the node to cancel the command in flight on the
 * connection, waiting at most timeoutMs for the request to be delivered.
 * It serves no interrupts (it runs on abort paths) and never throws for
 * remote trouble; returns whether the request was delivered.
 */
bool
SendNodeCancelRequest(NodeConnection *conn, int timeoutMs)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeoutMs);

	if (conn->pgConn == NULL || PQstatus(conn->pgConn) != CONNECTION_OK)
		return false;
#ifdef ASYNC_CANCEL
	return SendCancelRequestAsync(conn, deadline);
#else
	return SignalRemoteBackend(conn, deadline);
#endif
}

/*
 * NodeWaitSocket is the socket a wait for the connection watches: the
 * cancel request's while one is being sent, else the connection's.
 */
pgsocket
NodeWaitSocket(NodeConnection *conn)
{
#ifdef ASYNC_CANCEL
	if (conn->cancelRequest != NULL)
		return PQcancelSocket((PGcancelConn *) conn->cancelRequest);
#endif
	return PQsocket(conn->pgConn);
}

/*
 * AdvanceCancelRequest lets libpq go on with the cancel request being sent
 * once its socket is ready (WaitForNodeUntil, NODE_WAIT_CANCEL_SENT).
 */
void
AdvanceCancelRequest(NodeConnection *conn)
{
#ifdef ASYNC_CANCEL
	conn->cancelPollStatus = PQcancelPoll((PGcancelConn *) conn->cancelRequest);
#else
	conn->cancelPollStatus = PGRES_POLLING_FAILED;
#endif
}

#ifdef ASYNC_CANCEL

/*
 * SendCancelRequestAsync sends the cancel request with libpq's
 * non-blocking cancel API: delivered when the postmaster has closed the
 * request's connection (so that the cancel cannot hit a later command).
 */
static bool
SendCancelRequestAsync(NodeConnection *conn, TimestampTz deadline)
{
	PGcancelConn *request = PQcancelCreate(conn->pgConn);
	bool		sent = false;

	if (request == NULL)
		return false;
	if (PQcancelStart(request))
	{
		conn->cancelRequest = request;
		conn->cancelPollStatus = PGRES_POLLING_WRITING;
		sent = WaitForNodeUntil(conn, NODE_WAIT_CANCEL_SENT, deadline, false) ==
			NODE_WAIT_DONE;
		conn->cancelRequest = NULL;
	}
	PQcancelFinish(request);
	return sent;
}

#else

/*
 * SignalRemoteBackend runs pg_cancel_backend() on the connection's backend
 * over a connection of its own to the node, as the same role (which may
 * signal its own backends); true when the function says it signalled.
 */
static bool
SignalRemoteBackend(NodeConnection *conn, TimestampTz deadline)
{
	char		pid[12];
	const char *params[1] = {pid};
	NodeConnection *side = OpenSideConnection(conn, deadline);
	bool		signalled = false;

	if (side == NULL)
		return false;
	snprintf(pid, sizeof(pid), "%d", PQbackendPID(conn->pgConn));
	if (PQsendQueryParams(side->pgConn,
						  "SELECT pg_catalog.pg_cancel_backend($1::pg_catalog.int4)",
						  1, NULL, params, NULL, NULL, 0))
	{
		while (WaitForNodeUntil(side, NODE_WAIT_RESULT, deadline, false) == NODE_WAIT_DONE)
		{
			PGresult   *result = PQgetResult(side->pgConn);

			if (result == NULL)
				break;
			if (PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) == 1 &&
				strcmp(PQgetvalue(result, 0, 0), "t") == 0)
				signalled = true;
			PQclear(result);
		}
	}
	CloseDedicatedConnection(side);
	return signalled;
}

#endif							/* ASYNC_CANCEL */
