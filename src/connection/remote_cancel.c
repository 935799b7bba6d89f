/*-------------------------------------------------------------------------
 *
 * remote_cancel.c
 *	  Sending a cancel request to a node within a time limit.
 *
 * libpq's PQcancel (before PostgreSQL 17's non-blocking cancel API)
 * connects to the node's postmaster with a blocking connect() and waits,
 * with a blocking recv(), for the postmaster to close the connection: a
 * node that accepts TCP connections but does not answer (a stopped or hung
 * postmaster, a half-dead network) keeps the backend there forever, and
 * neither Ctrl-C nor a timeout gets it out.  Cancels are sent on abort
 * paths, so that would hang the session.
 *
 * SendNodeCancelRequest does what PQcancel does -- a CancelRequest packet with
 * the backend's pid and key to the address the connection uses -- over a
 * non-blocking socket, waiting on the latch with a deadline.  The pid,
 * key and address come from the PGcancel object, whose layout libpq does
 * not publish; the start of it (address, pid, key) is the same in libpq 15
 * and 16, which is checked at run time.  With another libpq the blocking
 * PQcancel is used.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libpq/pqcomm.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_bswap.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "shardext/connection.h"
#include "shardext/remote_command.h"

/* the start of libpq's struct pg_cancel (libpq-int.h, libpq 15 and 16) */
typedef struct LibpqCancelStart
{
	SockAddr	raddr;
	int			be_pid;
	int			be_key;
} LibpqCancelStart;

static bool SendCancelPacket(const SockAddr *address, int pid, int key,
							 TimestampTz deadline);
static bool WaitForCancelSocket(pgsocket sock, int events, TimestampTz deadline);

/*
 * SendNodeCancelRequest asks the node to cancel the command in flight on the
 * connection, waiting at most timeoutMs for the postmaster to take the
 * request.  It serves no interrupts (it runs on abort paths) and never
 * throws; returns whether the request was delivered.
 */
bool
SendNodeCancelRequest(NodeConnection *conn, int timeoutMs)
{
	PGcancel   *cancel;
	bool		sent = false;
	int			libpqMajor = PQlibVersion() / 10000;

	if (conn->pgConn == NULL || (cancel = PQgetCancel(conn->pgConn)) == NULL)
		return false;

	if (libpqMajor == 15 || libpqMajor == 16)
	{
		LibpqCancelStart *start = (LibpqCancelStart *) cancel;

		sent = SendCancelPacket(&start->raddr, start->be_pid, start->be_key,
								TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeoutMs));
	}
	else
	{
		char		errorBuffer[256];

		sent = PQcancel(cancel, errorBuffer, sizeof(errorBuffer));
	}
	PQfreeCancel(cancel);
	return sent;
}

/*
 * SendCancelPacket connects to address, sends the CancelRequest packet and
 * waits for the postmaster to close the connection (which says it has
 * processed the request, so that it cannot hit a later command), all
 * before deadline.
 */
static bool
SendCancelPacket(const SockAddr *address, int pid, int key, TimestampTz deadline)
{
	/*
	 * The CancelRequest of protocol 3.0, with its 4-byte key (pqcomm.h's
	 * CancelRequestPacket has a key of variable length since 18).
	 */
	struct
	{
		uint32		length;
		uint32		code;
		uint32		pid;
		uint32		key;
	}			packet;
	pgsocket	sock;
	bool		sent = false;
	int			error = 0;
	socklen_t	errorLength = sizeof(error);
	char		ignored;

	sock = socket(address->addr.ss_family, SOCK_STREAM, 0);
	if (sock == PGINVALID_SOCKET)
		return false;
	if (!pg_set_noblock(sock))
	{
		closesocket(sock);
		return false;
	}

	packet.length = pg_hton32((uint32) sizeof(packet));
	packet.code = pg_hton32(CANCEL_REQUEST_CODE);
	packet.pid = pg_hton32(pid);
	packet.key = pg_hton32(key);

	if (connect(sock, (const struct sockaddr *) &address->addr, address->salen) < 0 &&
		errno != EINPROGRESS && errno != EINTR)
		goto done;
	if (!WaitForCancelSocket(sock, WL_SOCKET_WRITEABLE, deadline) ||
		getsockopt(sock, SOL_SOCKET, SO_ERROR, &error, &errorLength) < 0 || error != 0)
		goto done;
	if (send(sock, &packet, sizeof(packet), 0) != (ssize_t) sizeof(packet))
		goto done;
	sent = true;

	/* EOF (or an error) means the postmaster is done with the request */
	while (WaitForCancelSocket(sock, WL_SOCKET_READABLE, deadline))
	{
		ssize_t		n = recv(sock, &ignored, 1, 0);

		if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			break;
	}

done:
	closesocket(sock);
	return sent;
}

/* waits for events on a socket until deadline, serving no interrupts */
static bool
WaitForCancelSocket(pgsocket sock, int events, TimestampTz deadline)
{
	for (;;)
	{
		long		timeout = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		int			rc;

		if (timeout <= 0)
			return false;
		rc = WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH | events,
							   sock, timeout, PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
		if (rc & events)
			return true;
	}
}
