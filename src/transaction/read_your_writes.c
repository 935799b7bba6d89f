/*-------------------------------------------------------------------------
 *
 * read_your_writes.c
 *	  The session's write marks and what they require of replicas.
 *
 * After a session commits a write on a node, it remembers the node's WAL
 * insert position right after the commit (fetched in the same round trip
 * as the COMMIT, see remote_xact.c and the executor), and when it wrote.
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

#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"

#include "shardext/guc.h"
#include "shardext/metadata.h"
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
 * NodeWantsCommitLsn tells whether a commit on the node should fetch the
 * node's LSN: only when it has replicas in use (it costs a little work on
 * the node, no round trip).  Needs a transaction (reads the node cache).
 */
bool
NodeWantsCommitLsn(int32 nodeId)
{
	return AnyActiveReplica() && ReplicaNodeList(nodeId, true) != NIL;
}

/* ParseCommitLsn reads the text of a pg_lsn; InvalidXLogRecPtr if it is none */
XLogRecPtr
ParseCommitLsn(const char *text)
{
	bool		failed = false;
	XLogRecPtr	lsn;

	if (text == NULL)
		return InvalidXLogRecPtr;
	lsn = pg_lsn_in_internal(text, &failed);
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
