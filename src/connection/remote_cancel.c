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
 * Several connections are cancelled together (SendNodeCancelRequests):
 * every request goes out first, then all are waited for against one
 * deadline.
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

#include "storage/latch.h"
#include "utils/timestamp.h"

#include "shardext/connection.h"
#include "shardext/remote_command.h"

#if defined(LIBPQ_HAS_ASYNC_CANCEL) || defined(SHARDEXT_LIBPQ_CANCEL_CREATE)
#define ASYNC_CANCEL 1
#endif

#ifdef ASYNC_CANCEL
static bool StartCancelRequest(NodeConnection *conn);
static void AdvanceReadyCancelRequest(NodeConnection *conn);
static bool FinishCancelRequest(NodeConnection *conn, TimestampTz deadline);
#else
static bool SignalRemoteBackend(NodeConnection *conn, TimestampTz deadline);
#endif

/*
 * SendNodeCancelRequests asks the nodes to cancel the commands in flight on
 * the connections, waiting until deadline for the requests to be delivered:
 * every request goes out before any is waited for, so that nodes that do
 * not answer cost one wait, not one per connection.  It serves no
 * interrupts (it runs on abort paths) and never throws for remote trouble;
 * returns the connections whose request was not delivered.
 */
List *
SendNodeCancelRequests(List *conns, TimestampTz deadline)
{
	List	   *failed = NIL;
	ListCell   *cell;
#ifdef ASYNC_CANCEL
	List	   *started = NIL;

	foreach(cell, conns)
	{
		NodeConnection *conn = lfirst(cell);

		if (StartCancelRequest(conn))
			started = lappend(started, conn);
		else
			failed = lappend(failed, conn);
	}
	foreach(cell, started)
		AdvanceReadyCancelRequest(lfirst(cell));
	foreach(cell, started)
	{
		NodeConnection *conn = lfirst(cell);

		if (!FinishCancelRequest(conn, deadline))
			failed = lappend(failed, conn);
	}
	list_free(started);
#else
	foreach(cell, conns)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn->pgConn == NULL || PQstatus(conn->pgConn) != CONNECTION_OK ||
			!SignalRemoteBackend(conn, deadline))
			failed = lappend(failed, conn);
	}
#endif
	return failed;
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
 * StartCancelRequest starts sending the cancel request of the connection
 * with libpq's non-blocking cancel API (conn->cancelRequest).
 */
static bool
StartCancelRequest(NodeConnection *conn)
{
	PGcancelConn *request;

	if (conn->pgConn == NULL || PQstatus(conn->pgConn) != CONNECTION_OK)
		return false;
	request = PQcancelCreate(conn->pgConn);
	if (request == NULL)
		return false;
	if (!PQcancelStart(request))
	{
		PQcancelFinish(request);
		return false;
	}
	conn->cancelRequest = request;
	conn->cancelPollStatus = PGRES_POLLING_WRITING;
	return true;
}

/*
 * AdvanceReadyCancelRequest lets libpq go on with a started request whose
 * socket is ready now, without waiting: the request goes out while those of
 * other connections are waited for.
 */
static void
AdvanceReadyCancelRequest(NodeConnection *conn)
{
	int			events = conn->cancelPollStatus == PGRES_POLLING_READING ?
		WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;

	if (WaitOnNodeConnection(conn, events, 0) & events)
		AdvanceCancelRequest(conn);
}

/*
 * FinishCancelRequest waits until deadline for the started request to be
 * delivered (the postmaster has closed the request's connection, so that
 * the cancel cannot hit a later command), then frees it.
 */
static bool
FinishCancelRequest(NodeConnection *conn, TimestampTz deadline)
{
	bool		sent;

	sent = WaitForNodeUntil(conn, NODE_WAIT_CANCEL_SENT, deadline, false) == NODE_WAIT_DONE;
	PQcancelFinish((PGcancelConn *) conn->cancelRequest);
	conn->cancelRequest = NULL;
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
