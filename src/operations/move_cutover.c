/*-------------------------------------------------------------------------
 *
 * move_cutover.c
 *	  The end of an online shard move or split: letting the target catch
 *	  up, verifying it, and switching the catalog to it while writes pause.
 *
 * Writes are paused (the cutover lock, held by the loopback session) twice,
 * each time only until the target has applied a marker row written on the
 * source after the pause began:
 *	- to take snapshots on both sides that hold the same rows, whose counts
 *	  and checksums are then compared while writes go on;
 *	- to switch the catalog to the target, in the transaction that holds the
 *	  locks.
 * Waits poll every millisecond; no step sleeps for seconds.  Every wait has
 * a deadline (shardext.move_catchup_timeout for catching up,
 * shardext.move_cutover_timeout while writes are paused), serves
 * interrupts, and allocates per poll only in a context reset before the
 * next (poll_loop.h).
 *
 * block_writes: the copy, index build, verification and switch all happen
 * under one pause, without logical replication.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "shardext/array_literal.h"
#include "shardext/connection.h"
#include "shardext/guc.h"
#include "shardext/poll_loop.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"
#include "shardext/replica_state.h"
#include "shardext/shard_move.h"

/* how long the apply worker may be absent before the move gives up */
#define APPLY_WORKER_START_TIMEOUT_MS 60000
/* how long prepared transactions on the source may take to end at a pause */
#define PREPARED_WAIT_TIMEOUT_MS 2000

static void CheckReplicationHealth(ShardMoveState *state, TimestampTz *workerMissingSince);
static void InsertMarker(ShardMoveState *state, int seq);
static bool MarkerAppliedWithin(ShardMoveState *state, NodeConnection *conn, int seq,
								bool inSnapshot, long timeoutMs);
static void CatchUpTimedOut(ShardMoveState *state);
static void CutoverTimedOut(ShardMoveState *state);
static void AcquireCutoverLock(ShardMoveState *state);
static void ReleaseCutoverLock(ShardMoveState *state);
static bool WaitForPreparedTransactions(ShardMoveState *state, const char *firstCommand);
static void CommitCutover(ShardMoveState *state, TimestampTz pauseStart);
static char *ChecksumQuery(MoveShard *shard, const char *tableName, int32 lo, int32 hi,
						   bool filter);
static void ReportWritePause(ShardMoveState *state, const char *when, TimestampTz pauseStart);

/*
 * CheckReplicationHealth fails the move when the subscription reported an
 * apply error or has had no apply worker for too long.
 */
static void
CheckReplicationHealth(ShardMoveState *state, TimestampTz *workerMissingSince)
{
	const char *params[1] = {state->objectName};
	PGresult   *result;
	bool		running;
	int64		errors;

	result = ExecuteRemoteQueryParams(state->targetConn,
									  "SELECT w.pid IS NOT NULL, coalesce(st.apply_error_count, 0) "
									  "FROM pg_catalog.pg_subscription s "
									  "LEFT JOIN pg_catalog.pg_stat_subscription w "
									  "  ON w.subid = s.oid AND w.relid IS NULL "
									  "LEFT JOIN pg_catalog.pg_stat_subscription_stats st ON st.subid = s.oid "
									  "WHERE s.subname = $1",
									  1, params);
	if (PQntuples(result) == 0)
	{
		PQclear(result);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("subscription \"%s\" on node %s:%d disappeared during the move",
						state->objectName, state->target.host, state->target.port)));
	}
	running = strcmp(PQgetvalue(result, 0, 0), "t") == 0;
	errors = pg_strtoint64(PQgetvalue(result, 0, 1));
	PQclear(result);

	if (errors > 0)
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("logical replication of %s to node %s:%d failed",
						state->description, state->target.host, state->target.port),
				 errdetail("Subscription \"%s\" reported " INT64_FORMAT " apply errors.",
						   state->objectName, errors),
				 errhint("The node's server log has the error. The source was left unchanged.")));

	if (running)
		*workerMissingSince = 0;
	else if (*workerMissingSince == 0)
		*workerMissingSince = GetCurrentTimestamp();
	else if (TimestampDifferenceExceeds(*workerMissingSince, GetCurrentTimestamp(),
										APPLY_WORKER_START_TIMEOUT_MS))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("no logical replication worker runs for subscription \"%s\" on node %s:%d",
						state->objectName, state->target.host, state->target.port),
				 errhint("Check max_logical_replication_workers and max_worker_processes "
						 "on the node, and its server log.")));
}

/*
 * MoveWaitForLag waits until the target is within shardext.move_max_lag of
 * the source, then writes a marker on the source (without pausing writes)
 * and waits until the target has applied it, so that what remains to apply
 * at the next pause is a few milliseconds' worth.  Both within
 * shardext.move_catchup_timeout: a target that cannot keep up with the
 * writes fails the move rather than keep it running.
 */
void
MoveWaitForLag(ShardMoveState *state)
{
	const char *params[1] = {state->objectName};
	TimestampTz lastHealthCheck = 0;
	TimestampTz workerMissingSince = 0;
	int64		maxLag = (int64) ShardextMoveMaxLag * 1024;
	TimestampTz deadline;
	long		remainingMs;
	PollLoop	poll;
	bool		caughtUp = false;

	SetMovePhase(state, "catching up");
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ShardextMoveCatchUpTimeout);
	StartPollLoop(&poll, ShardextMoveCatchUpTimeout, 50);
	while (PollAgain(&poll))
	{
		char	   *lagText = ExecuteRemoteScalar(state->sourceConn,
												  "SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), "
												  "  coalesce(r.write_lsn, s.confirmed_flush_lsn))::int8 "
												  "FROM pg_catalog.pg_replication_slots s "
												  "LEFT JOIN pg_catalog.pg_stat_replication r ON r.pid = s.active_pid "
												  "WHERE s.slot_name = $1",
												  1, params);
		int64		lag;

		if (lagText == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("replication slot \"%s\" on node %s:%d disappeared during the move",
							state->objectName, state->source.host, state->source.port)));
		lag = pg_strtoint64(lagText);
		ReportMoveProgress(state, false, lag);
		if (TimestampDifferenceExceeds(lastHealthCheck, GetCurrentTimestamp(), 1000))
		{
			CheckReplicationHealth(state, &workerMissingSince);
			lastHealthCheck = GetCurrentTimestamp();
		}
		caughtUp = lag <= maxLag && workerMissingSince == 0 && lastHealthCheck != 0;
		if (caughtUp)
			break;
	}
	EndPollLoop(&poll);
	if (!caughtUp)
		CatchUpTimedOut(state);

	InsertMarker(state, ++state->markerSeq);
	remainingMs = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
	if (!MarkerAppliedWithin(state, state->targetConn, state->markerSeq, false,
							 Max(remainingMs, 1)))
		CatchUpTimedOut(state);
	ReportMoveProgress(state, true, 0);
}

/* CatchUpTimedOut fails a move whose target did not catch up in time */
static void
CatchUpTimedOut(ShardMoveState *state)
{
	ereport(ERROR,
			(errcode(ERRCODE_QUERY_CANCELED),
			 errmsg("node %s:%d did not catch up with the writes to %s within %d ms",
					state->target.host, state->target.port, state->description,
					ShardextMoveCatchUpTimeout),
			 errdetail("The source stays authoritative; what the move created is removed."),
			 errhint("Retry when the write load is lower, or raise "
					 "shardext.move_catchup_timeout.")));
}

/* CutoverTimedOut fails a move whose target did not catch up while writes were paused */
static void
CutoverTimedOut(ShardMoveState *state)
{
	ereport(ERROR,
			(errcode(ERRCODE_QUERY_CANCELED),
			 errmsg("node %s:%d did not catch up with %s within %d ms while writes "
					"were paused", state->target.host, state->target.port,
					state->description, ShardextMoveCutoverTimeout),
			 errhint("Retry when the write load is lower, or raise "
					 "shardext.move_cutover_timeout.")));
}

/* InsertMarker writes marker seq on the source, committed and flushed */
static void
InsertMarker(ShardMoveState *state, int seq)
{
	ExecuteRemoteCommand(state->sourceConn,
						 psprintf("INSERT INTO shardext.move_marker (move_id, seq) "
								  "VALUES (" INT64_FORMAT ", %d)", state->moveId, seq));
}

/*
 * MarkerAppliedWithin polls the target until it has applied marker seq,
 * and returns true then: the target holds every change the source
 * committed before the marker.  With inSnapshot, each poll opens a
 * repeatable read transaction on conn and the one that sees the marker
 * stays open (its snapshot is the one to verify).  Returns false when
 * timeoutMs passed first; fails when replication broke.
 */
static bool
MarkerAppliedWithin(ShardMoveState *state, NodeConnection *conn, int seq, bool inSnapshot,
					long timeoutMs)
{
	TimestampTz lastHealthCheck = GetCurrentTimestamp();
	TimestampTz workerMissingSince = 0;
	char	   *check = psprintf("%sSELECT EXISTS (SELECT 1 FROM %s WHERE move_id = "
								 INT64_FORMAT " AND seq = %d)",
								 inSnapshot ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; " : "",
								 state->operation == MOVE_OPERATION_SPLIT ?
								 "shardext.move_marker_applied" : "shardext.move_marker",
								 state->moveId, seq);
	PollLoop	poll;
	bool		applied = false;

	StartPollLoop(&poll, timeoutMs, 1);
	while (PollAgain(&poll))
	{
		char	   *seen = ExecuteRemoteScalar(conn, check, 0, NULL);

		applied = seen != NULL && strcmp(seen, "t") == 0;
		if (applied)
			break;
		if (inSnapshot)
			ExecuteRemoteCommand(conn, "ROLLBACK");
		if (TimestampDifferenceExceeds(lastHealthCheck, GetCurrentTimestamp(), 1000))
		{
			CheckReplicationHealth(state, &workerMissingSince);
			lastHealthCheck = GetCurrentTimestamp();
		}
	}
	EndPollLoop(&poll);
	pfree(check);
	return applied;
}

/*
 * AcquireCutoverLock opens a transaction on a loopback connection of its
 * own (the records stay visible meanwhile) and takes the cutover locks of
 * the shard group there: writes through the coordinator wait from now on,
 * reads go on.  The lock waits at most shardext.move_lock_timeout for the
 * writes in flight; a timeout is retried after a pause (writers queued
 * behind us run meanwhile).
 */
static void
AcquireCutoverLock(ShardMoveState *state)
{
	int64	   *shardIds = palloc(sizeof(int64) * list_length(state->shards));
	char	   *lock;
	ListCell   *cell;

	if (state->lockConn == NULL)
		state->lockConn = OpenLoopbackConnection(true);

	foreach(cell, state->shards)
		shardIds[foreach_current_index(cell)] = ((MoveShard *) lfirst(cell))->shardId;
	lock = psprintf("BEGIN; SET LOCAL lock_timeout = %d; "
					"SELECT shardext.move_lock_shards(%s::pg_catalog.int8[])",
					ShardextMoveLockTimeout,
					quote_literal_cstr(Int64ArrayLiteral(shardIds, list_length(state->shards))));

	for (int attempt = 1;; attempt++)
	{
		PGresult   *error;
		bool		timedOut;

		SendRemoteCommand(state->lockConn, lock);
		PQclear(ReadRemoteResults(state->lockConn, &error));
		if (error == NULL)
			return;

		timedOut = PQresultErrorField(error, PG_DIAG_SQLSTATE) != NULL &&
			strcmp(PQresultErrorField(error, PG_DIAG_SQLSTATE), "55P03") == 0;
		ExecuteRemoteCommand(state->lockConn, "ROLLBACK");
		if (!timedOut)
			ReportRemoteError(state->lockConn, error, ERROR, lock);
		PQclear(error);

		if (attempt >= 10)
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not pause writes to %s: transactions that write to it "
							"kept running for more than %d ms, %d times",
							state->description, ShardextMoveLockTimeout, attempt),
					 errhint("Look for long transactions that wrote to the table "
							 "(pg_stat_activity), or raise shardext.move_lock_timeout.")));
		ereport(DEBUG1, (errmsg("%s: writes still in flight, retrying the pause",
								state->description)));
		SleepInterruptibly(100 * attempt);
	}
}

/* ReleaseCutoverLock ends the lock transaction, letting writes go on */
static void
ReleaseCutoverLock(ShardMoveState *state)
{
	ExecuteRemoteCommand(state->lockConn, "ROLLBACK");
}

/*
 * WaitForPreparedTransactions: a prepared transaction of this coordinator
 * on the source, present while writes are paused, is either one that
 * finishes in a moment (for other shards) or one whose COMMIT PREPARED
 * failed and awaits recovery; the latter may hold writes to our shards that
 * would be committed after the switch and lost, so the move gives up.
 * firstCommand ("" for none) travels in the same round trip as the query
 * for them.  Returns whether there were any (they ended after
 * firstCommand).
 */
static bool
WaitForPreparedTransactions(ShardMoveState *state, const char *firstCommand)
{
	PGresult   *gids;
	char	   *list = NULL;
	const char *params[1];
	PollLoop	poll;
	bool		resolved = false;

	gids = ExecuteRemoteQueryParams(state->sourceConn,
									psprintf("%sSELECT pg_catalog.array_agg(gid) "
											 "FROM pg_catalog.pg_prepared_xacts "
											 "WHERE pg_catalog.starts_with(gid, %s) "
											 "AND database = pg_catalog.current_database()",
											 firstCommand,
											 quote_literal_cstr(RemotePreparedGidPrefix())),
									0, NULL);
	if (PQntuples(gids) > 0 && !PQgetisnull(gids, 0, 0) &&
		strcmp(PQgetvalue(gids, 0, 0), "{}") != 0)
		list = pstrdup(PQgetvalue(gids, 0, 0));
	PQclear(gids);
	if (list == NULL)
		return false;

	params[0] = list;
	StartPollLoop(&poll, PREPARED_WAIT_TIMEOUT_MS, 2);
	while (PollAgain(&poll))
	{
		char	   *left = ExecuteRemoteScalar(state->sourceConn,
											   "SELECT count(*) FROM pg_catalog.pg_prepared_xacts "
											   "WHERE gid = ANY ($1::text[])", 1, params);

		resolved = left != NULL && strcmp(left, "0") == 0;
		if (resolved)
			break;
	}
	EndPollLoop(&poll);
	if (!resolved)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node %s:%d has prepared transactions of this coordinator that "
						"are not resolved", state->source.host, state->source.port),
				 errdetail("Prepared transactions: %s.", list),
				 errhint("Let the recovery of prepared transactions resolve them, then "
						 "retry the move.")));
	return true;
}

/*
 * ChecksumQuery: row count and two order-independent sums of row hashes,
 * computed alike on both sides (the sessions share their settings, so the
 * rows' text is the same).  With filter, only rows whose distribution value
 * hashes into [lo, hi].
 */
static char *
ChecksumQuery(MoveShard *shard, const char *tableName, int32 lo, int32 hi, bool filter)
{
	char	   *columns = BareColumnList(shard);

	return psprintf("SELECT count(*), "
					"coalesce(sum(pg_catalog.hashtext(r::text)::int8), 0), "
					"coalesce(sum(pg_catalog.hashtextextended(r::text, 7) >> 33), 0) "
					"FROM (SELECT %s FROM %s%s) r",
					columns, tableName,
					filter ? psprintf(" WHERE shardext.worker_hash_value(%s) BETWEEN %d AND %d",
									  shard->distColumn, lo, hi) : "");
}

/* runs a checksum query on one connection without waiting for it */
static void
SendChecksum(NodeConnection *conn, const char *query)
{
	SendRemoteCommand(conn, query);
}

/* reads the result of SendChecksum as "count/sum/sum" */
static char *
ReceiveChecksum(NodeConnection *conn, const char *query)
{
	PGresult   *result = FinishRemoteQuery(conn, query);
	char	   *value;

	value = psprintf("%s rows, checksums %s/%s", PQgetvalue(result, 0, 0),
					 PQgetvalue(result, 0, 1), PQgetvalue(result, 0, 2));
	PQclear(result);
	return value;
}

/*
 * CompareChecksums computes a checksum on the source and the target
 * snapshots at the same time and fails the move when they differ.
 */
static void
CompareChecksums(ShardMoveState *state, const char *sourceQuery, const char *targetQuery,
				 const char *targetName)
{
	char	   *sourceSum;
	char	   *targetSum;

	SendChecksum(state->sourceSnapshot, sourceQuery);
	SendChecksum(state->targetSnapshot, targetQuery);
	sourceSum = ReceiveChecksum(state->sourceSnapshot, sourceQuery);
	targetSum = ReceiveChecksum(state->targetSnapshot, targetQuery);
	if (strcmp(sourceSum, targetSum) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("verification of %s failed: the copy of %s differs from the source",
						state->description, targetName),
				 errdetail("Source: %s; target: %s.", sourceSum, targetSum),
				 errhint("The move was rolled back and the source left as it was.")));
}

/*
 * MoveVerify checks that source and target hold the same rows: counts and
 * checksums over snapshots that hold the same rows.  Online, writes are
 * paused just long enough to take the snapshots (after a marker that the
 * target must apply first); the checksums are computed afterwards, with
 * writes going on.  With writesBlocked the caller holds the pause already.
 */
void
MoveVerify(ShardMoveState *state, bool writesBlocked)
{
	ListCell   *cell;

	if (!ShardextMoveVerify)
		return;
	SetMovePhase(state, "verifying");
	if (state->sourceSnapshot == NULL)
		state->sourceSnapshot = OpenDedicatedConnection(state->source.host, state->source.port,
														false, true);
	if (state->targetSnapshot == NULL)
		state->targetSnapshot = OpenDedicatedConnection(state->target.host, state->target.port,
														false, true);

	if (writesBlocked)
	{
		ExecuteRemoteCommand(state->sourceSnapshot,
							 "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1");
		ExecuteRemoteCommand(state->targetSnapshot,
							 "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1");
	}
	else
	{
		int			seq = ++state->markerSeq;

		TimestampTz pauseStart;

		AcquireCutoverLock(state);
		pauseStart = GetCurrentTimestamp();
		InsertMarker(state, seq);
		ExecuteRemoteCommand(state->sourceSnapshot,
							 "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1");
		if (!MarkerAppliedWithin(state, state->targetSnapshot, seq, true,
								 ShardextMoveCutoverTimeout))
			CutoverTimedOut(state);
		ReleaseCutoverLock(state);
		ReportWritePause(state, "to take the verification snapshots", pauseStart);
	}

	foreach(cell, state->shards)
	{
		MoveShard  *shard = lfirst(cell);

		CHECK_FOR_INTERRUPTS();
		if (state->operation == MOVE_OPERATION_MOVE)
		{
			char	   *query = ChecksumQuery(shard, shard->shardName, 0, 0, false);

			CompareChecksums(state, query, query, shard->shardName);
			continue;
		}
		for (int half = 0; half < state->pieces.count; half++)
		{
			int32		lo;
			int32		hi;

			SplitHalfRange(state, half, &lo, &hi);
			CompareChecksums(state, ChecksumQuery(shard, shard->shardName, lo, hi, true),
							 ChecksumQuery(shard, shard->childNames[half], 0, 0, false),
							 shard->childNames[half]);
		}
		/* every row of the source must be in one of the halves */
		{
			char	   *outside = ExecuteRemoteScalar(state->sourceSnapshot,
													  psprintf("SELECT count(*) FROM %s WHERE %s IS NULL "
															   "OR shardext.worker_hash_value(%s) NOT BETWEEN %d AND %d",
															   shard->shardName, shard->distColumn,
															   shard->distColumn, state->hashMin,
															   state->hashMax),
													  0, NULL);

			if (outside == NULL || strcmp(outside, "0") != 0)
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("cannot split %s: %s rows of %s are outside its hash range",
								state->description, outside ? outside : "some",
								shard->shardName),
						 errhint("The split was rolled back and the shard left as it was.")));
		}
	}
	ExecuteRemoteCommand(state->sourceSnapshot, "COMMIT");
	ExecuteRemoteCommand(state->targetSnapshot, "COMMIT");
}

/*
 * CommitCutover switches the catalog in the transaction that holds the
 * cutover locks and commits it, which lets the queued writes go to the
 * new placement.  The commit's outcome decides the move, so interrupts wait
 * until it is known.
 */
static void
CommitCutover(ShardMoveState *state, TimestampTz pauseStart)
{
	char	   *command = psprintf("SELECT shardext.move_commit_placements(" INT64_FORMAT
								   "); COMMIT", state->moveId);

	/*
	 * Replicas of the target get the shards by replaying what the move
	 * wrote there (all of it by now): reads use them only past the
	 * target's next sampled LSN.
	 */
	RaiseReplicaBarrier(state->target.nodeId);
	HOLD_INTERRUPTS();
	PG_TRY();
	{
		ExecuteRemoteCommand(state->lockConn, command);
	}
	PG_FINALLY();
	{
		RESUME_INTERRUPTS();
	}
	PG_END_TRY();
	state->flipped = true;

	ReportWritePause(state, "at the switch", pauseStart);
}

/*
 * ReportWritePause reports at DEBUG1 how long writes were paused, with the
 * pause's bounds in Unix epoch microseconds (benchmarks match them with
 * the clients' latency logs).
 */
static void
ReportWritePause(ShardMoveState *state, const char *when, TimestampTz pauseStart)
{
	TimestampTz pauseEnd = GetCurrentTimestamp();
	int64		unixOffset = ((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE)) *
		SECS_PER_DAY * USECS_PER_SEC;

	ereport(DEBUG1,
			(errmsg("%s: writes were paused for %ld ms %s", state->description,
					TimestampDifferenceMilliseconds(pauseStart, pauseEnd), when),
			 errdetail("From " INT64_FORMAT " to " INT64_FORMAT " (Unix time in microseconds).",
					   pauseStart + unixOffset, pauseEnd + unixOffset)));
}

/*
 * MoveCutover pauses writes, waits until the target applied everything
 * written before the pause, makes the target's applied changes durable,
 * and switches the catalog to the target.
 */
void
MoveCutover(ShardMoveState *state)
{
	TimestampTz pauseStart;
	int			seq = ++state->markerSeq;

	SetMovePhase(state, "cutting over");
	AcquireCutoverLock(state);
	pauseStart = GetCurrentTimestamp();
	MoveTestPause(state, "writes paused");

	if (WaitForPreparedTransactions(state,
									psprintf("INSERT INTO shardext.move_marker (move_id, seq) "
											 "VALUES (" INT64_FORMAT ", %d); ",
											 state->moveId, seq)))
	{
		/*
		 * Those committed (recovery may have committed one of ours) after
		 * the marker, so the target may have the marker without their
		 * changes: wait for a marker written after them.
		 */
		seq = ++state->markerSeq;
		InsertMarker(state, seq);
	}

	if (!MarkerAppliedWithin(state, state->targetConn, seq, false, ShardextMoveCutoverTimeout))
		CutoverTimedOut(state);
	/* the apply worker commits asynchronously: flush its commits */
	ExecuteRemoteCommand(state->targetConn, "SELECT pg_catalog.txid_current()");
	CommitCutover(state, pauseStart);
}

/*
 * MoveBlockingCopyAndCutover is the block_writes mode: pause writes, copy,
 * build the indexes, verify, switch the catalog, in one pause.
 */
void
MoveBlockingCopyAndCutover(ShardMoveState *state)
{
	TimestampTz pauseStart;

	SetMovePhase(state, "pausing writes");
	AcquireCutoverLock(state);
	pauseStart = GetCurrentTimestamp();
	WaitForPreparedTransactions(state, "");

	MoveCopyData(state, false);
	MoveBuildIndexes(state);
	MoveVerify(state, true);
	SetMovePhase(state, "cutting over");
	CommitCutover(state, pauseStart);
}
