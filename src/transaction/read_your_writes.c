/*-------------------------------------------------------------------------
 *
 * read_your_writes.c
 *	  The session's write marks and what they require of replicas.
 *
 * After a session commits a write on a node, it remembers the end of the
 * commit record there, and when it wrote.  The node tells the LSN without
 * a round trip or a statement of its own: for connections of a coordinator
 * (application_name shardext_...), the node's shardext sets the reported
 * setting shardext.commit_lsn at the commit of every transaction that
 * wrote WAL, and the server sends its new value (a ParameterStatus
 * message) in the same packet as the end of the command; the coordinator
 * reads it from libpq (ReportedCommitLsn) after a COMMIT, a COMMIT
 * PREPARED, or a write that committed on its own.
 * A read of that node may then use a replica only if:
 *	- shardext.read_your_writes = 'lsn': the replica replayed that LSN (when
 *	  the LSN could not be fetched, the first LSN the maintenance daemon
 *	  sampled on the primary after the write stands in for it);
 *	- 'time': shardext.pin_window has passed since the write;
 *	- and always: it replayed the node's LSN in shardext.read_after and the
 *	  node's barrier (DDL, shards moved in; see replica_state.c).
 *
 * shardext.wait_for_replay_lsn() is the replica's side: a read that may
 * wait briefly for a replica that streams without delay sends it first.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "shardext/connection.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/read_your_writes.h"
#include "shardext/replica_state.h"

/* what the session wrote on one node */
typedef struct WriteMark
{
	int32		nodeId;
	XLogRecPtr	lsn;			/* highest commit LSN known */
	TimestampTz unknownSince;	/* latest commit whose LSN is unknown, or 0 */
	TimestampTz writtenAt;		/* latest commit */
} WriteMark;

static List *writeMarks = NIL;	/* WriteMark *, in TopMemoryContext */

/* on a node: what the committing transaction wrote (CommitLsnXactCallback) */
static bool transactionWroteWal = false;
static bool transactionHadXid = false;

static void CommitLsnXactCallback(XactEvent event, void *arg);

PG_FUNCTION_INFO_V1(shardext_wait_for_replay_lsn);

static WriteMark *
FindWriteMark(int32 nodeId, bool create)
{
	ListCell   *cell;
	WriteMark  *mark;
	MemoryContext oldContext;

	foreach(cell, writeMarks)
	{
		mark = lfirst(cell);
		if (mark->nodeId == nodeId)
			return mark;
	}
	if (!create)
		return NULL;
	oldContext = MemoryContextSwitchTo(TopMemoryContext);
	mark = palloc0(sizeof(WriteMark));
	mark->nodeId = nodeId;
	writeMarks = lappend(writeMarks, mark);
	MemoryContextSwitchTo(oldContext);
	return mark;
}

/*
 * NoteNodeWrite records that the session committed a write on a node (a
 * primary), with the node's insert LSN after the commit, or
 * InvalidXLogRecPtr when it is not known.
 */
void
NoteNodeWrite(int32 nodeId, XLogRecPtr commitLsn)
{
	WriteMark  *mark = FindWriteMark(nodeId, true);
	TimestampTz now = GetCurrentTimestamp();

	mark->writtenAt = now;
	if (XLogRecPtrIsInvalid(commitLsn))
		mark->unknownSince = now;
	else if (commitLsn > mark->lsn)
		mark->lsn = commitLsn;
}

/*
 * InitializeReadYourWrites registers the commit callback of the node side;
 * called from _PG_init.
 */
void
InitializeReadYourWrites(void)
{
	RegisterXactCallback(CommitLsnXactCallback, NULL);
}

/*
 * CommitLsnXactCallback, on a node, reports to a coordinator's connection
 * the end of the commit of a transaction that wrote WAL (the insert
 * position for one without an xid, such as COMMIT PREPARED, whose commit
 * record is already written then), through shardext.commit_lsn.
 */
static void
CommitLsnXactCallback(XactEvent event, void *arg)
{
	char		lsn[32];

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			transactionWroteWal = !XLogRecPtrIsInvalid(XactLastRecEnd);
			transactionHadXid = TransactionIdIsValid(GetTopTransactionIdIfAny());
			break;
		case XACT_EVENT_COMMIT:
			if (transactionWroteWal && application_name != NULL &&
				strncmp(application_name, "shardext_", strlen("shardext_")) == 0)
			{
				XLogRecPtr	end = transactionHadXid ? XactLastCommitEnd :
					GetXLogInsertRecPtr();

				snprintf(lsn, sizeof(lsn), "%X/%X", LSN_FORMAT_ARGS(end));
				SetConfigOption("shardext.commit_lsn", lsn, PGC_INTERNAL, PGC_S_OVERRIDE);
			}
			transactionWroteWal = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			transactionWroteWal = false;
			break;
		default:
			break;
	}
}

/*
 * ReportedCommitLsn returns the commit LSN a node reported on the
 * connection for the transaction that just committed there, or
 * InvalidXLogRecPtr when it reported none (a value this session has seen
 * before on the node is one of an earlier commit).
 */
XLogRecPtr
ReportedCommitLsn(NodeConnection *conn)
{
	const char *value;
	XLogRecPtr	lsn;
	WriteMark  *mark;

	if (conn->pgConn == NULL)
		return InvalidXLogRecPtr;
	value = PQparameterStatus(conn->pgConn, "shardext.commit_lsn");
	lsn = ParseCommitLsn(value);
	mark = FindWriteMark(conn->nodeId, false);
	if (mark != NULL && lsn <= mark->lsn)
		return InvalidXLogRecPtr;
	return lsn;
}

/* ParseCommitLsn reads the text of a pg_lsn; InvalidXLogRecPtr if it is none */
XLogRecPtr
ParseCommitLsn(const char *text)
{
	bool		failed = false;
	XLogRecPtr	lsn;

	if (text == NULL || text[0] == '\0')
		return InvalidXLogRecPtr;
	lsn = ParseLsn(text, &failed);
	return failed ? InvalidXLogRecPtr : lsn;
}

/*
 * ReplicaRequirement returns false when no replica of the node may serve
 * the session's reads now (time pinning, or an LSN that is not known yet);
 * otherwise true with the LSN a replica must have replayed in
 * *requiredLsn.
 */
bool
ReplicaRequirement(int32 primaryNodeId, XLogRecPtr *requiredLsn)
{
	XLogRecPtr	required = GetReplicaBarrier(primaryNodeId);
	WriteMark  *mark = FindWriteMark(primaryNodeId, false);

	if (required == PG_UINT64_MAX)
		return false;			/* the daemon has not sampled the primary yet */
	required = Max(required, ReadAfterLsn(primaryNodeId));

	if (mark != NULL && ShardextReadYourWrites == READ_YOUR_WRITES_TIME &&
		!TimestampDifferenceExceeds(mark->writtenAt, GetCurrentTimestamp(),
									ShardextPinWindow))
		return false;
	if (mark != NULL && ShardextReadYourWrites == READ_YOUR_WRITES_LSN)
	{
		required = Max(required, mark->lsn);
		if (mark->unknownSince != 0)
		{
			XLogRecPtr	sampled = PrimaryLsnSampledAfter(primaryNodeId, mark->unknownSince);

			if (XLogRecPtrIsInvalid(sampled))
				return false;
			/* a sampled LSN covers the unknown commit for good */
			mark->lsn = Max(mark->lsn, sampled);
			mark->unknownSince = 0;
			required = Max(required, sampled);
		}
	}
	*requiredLsn = required;
	return true;
}

/*
 * SessionWriteLsns returns the session's known commit LSNs (NodeLsn *) and,
 * in *unknownNodeIds, the nodes written whose LSN is not known (yet).
 */
List *
SessionWriteLsns(List **unknownNodeIds)
{
	List	   *result = NIL;
	ListCell   *cell;

	*unknownNodeIds = NIL;
	foreach(cell, writeMarks)
	{
		WriteMark  *mark = lfirst(cell);

		if (mark->unknownSince != 0)
		{
			XLogRecPtr	sampled = PrimaryLsnSampledAfter(mark->nodeId, mark->unknownSince);

			if (XLogRecPtrIsInvalid(sampled))
			{
				*unknownNodeIds = lappend_int(*unknownNodeIds, mark->nodeId);
				continue;
			}
			mark->lsn = Max(mark->lsn, sampled);
			mark->unknownSince = 0;
		}
		if (!XLogRecPtrIsInvalid(mark->lsn))
		{
			NodeLsn    *entry = palloc(sizeof(NodeLsn));

			entry->nodeId = mark->nodeId;
			entry->lsn = mark->lsn;
			result = lappend(result, entry);
		}
	}
	return result;
}

/*
 * shardext.wait_for_replay_lsn(target_lsn pg_lsn, timeout_ms int), run on
 * a replica ahead of a read: returns once the server has replayed
 * target_lsn (at once on a server not in recovery, whose WAL it is), fails
 * after timeout_ms, and the read that follows it in the same query string
 * does not run; the coordinator then reads on the primary.
 */
Datum
shardext_wait_for_replay_lsn(PG_FUNCTION_ARGS)
{
	XLogRecPtr	target = PG_GETARG_LSN(0);
	int32		timeoutMs = PG_GETARG_INT32(1);
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeoutMs);

	while (RecoveryInProgress() && GetXLogReplayRecPtr(NULL) < target)
	{
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

		if (left <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("replica has not replayed %X/%X within %d ms",
							LSN_FORMAT_ARGS(target), timeoutMs),
					 errdetail("It has replayed up to %X/%X.",
							   LSN_FORMAT_ARGS(GetXLogReplayRecPtr(NULL)))));
		/* replay wakes no one; poll (streaming replicas take well under 1 ms) */
		pgstat_report_wait_start(PG_WAIT_EXTENSION);
		pg_usleep(100L);
		pgstat_report_wait_end();
		CHECK_FOR_INTERRUPTS();
	}
	PG_RETURN_VOID();
}
