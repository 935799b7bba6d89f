/*-------------------------------------------------------------------------
 *
 * snowflake.c
 *	  Snowflake ids: 64-bit, time-ordered ids that every node of a cluster
 *	  generates on its own without ever producing the same id twice.
 *
 * Layout (see snowflake.h): sign bit 0, 41 bits of milliseconds since
 * 2024-01-01 00:00 UTC, 10 bits of node id, 12 bits of sequence.
 *
 * Uniqueness within a server: one 64-bit word in shared memory holds
 * (ms << 12 | sequence) of the last id the server issued.  Every backend
 * and parallel worker advances it with compare-and-swap, so the ids of a
 * server are strictly increasing across all its sessions without a lock.
 * When the 4096 sequence numbers of a millisecond are used up, callers
 * wait for the next millisecond.
 *
 * Uniqueness across servers: the node id.  A coordinator uses 0; a worker
 * uses the node id the coordinator assigned it in shardext_add_node()
 * (1..1023, from shardext.node_nodeid_seq), received through
 * shardext.worker_register().  shardext.node_id overrides both.
 *
 * Clock steps backwards: while the clock is at most
 * shardext.snowflake_max_clock_skew behind the last issued millisecond,
 * ids continue from that millisecond, borrowing the following ones as
 * sequences run out (never more than the bound ahead of the clock).
 * Beyond the bound snowflake_id() fails instead of risking a duplicate.
 *
 * Promotions: a standby that takes over (a worker's replica, the
 * coordinator's standby) issues ids with its primary's node id; its first
 * id starts past the clock by the tolerated skew (SnowflakeAfterPromotion).
 *
 * Restarts: the file $PGDATA/shardext_snowflake.state holds the node id and
 * a high-water mark, "reserved until ms R".  No id is handed out with a
 * millisecond beyond the R that is on disk; when issued ids come within
 * half of SNOWFLAKE_RESERVE_MS of R, R is moved SNOWFLAKE_RESERVE_MS past
 * them, so under load the file is rewritten about twice a second rather
 * than per id.  A clean shutdown stores the exact last millisecond.  At
 * startup ids resume after R, so a clock that went back across a restart
 * cannot repeat ids either.  After a crash R may be up to a reservation
 * ahead of the clock; the first callers then wait for the clock to catch
 * up instead of failing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "access/htup_details.h"
#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "shardext/guc.h"
#include "shardext/pg_compat.h"
#include "shardext/shardext.h"
#include "shardext/snowflake.h"

/* 2024-01-01 00:00:00 UTC in microseconds since 2000-01-01 (TimestampTz) */
#define SNOWFLAKE_EPOCH_US INT64CONST(757382400000000)

/* how far ahead of issued ids the high-water mark on disk is kept */
#define SNOWFLAKE_RESERVE_MS 1000

#define SNOWFLAKE_STATE_FILE "shardext_snowflake.state"
#define SNOWFLAKE_STATE_TEMP_FILE "shardext_snowflake.state.tmp"
#define SNOWFLAKE_STATE_HEADER "shardext snowflake state 1"

/* shared state of the generator of this server */
typedef struct SnowflakeShared
{
	/*
	 * (ms << 12 | sequence) of the last id issued.  Written by every call,
	 * so it has a cache line to itself.
	 */
	union
	{
		pg_atomic_uint64 value;
		char		pad[PG_CACHE_LINE_SIZE];
	}			lastState;

	/* no id is issued with a millisecond beyond this; it is on disk */
	pg_atomic_uint64 reservedUntilMs;

	/* node id received by registration, or SNOWFLAKE_NODE_ID_AUTOMATIC */
	pg_atomic_uint32 registeredNodeId;

	/* the high-water mark found at startup (see SnowflakeAdvance) */
	int64		startupMs;

	/* the state file could not be read at startup: issue no ids */
	bool		stateFileBroken;

	/* the first id after startup looked whether this server was promoted */
	pg_atomic_uint32 promotionChecked;

	/* serialises writes of the state file */
	int			lockTrancheId;
	LWLock		lock;
} SnowflakeShared;

static SnowflakeShared *Snowflake = NULL;

/* what SnowflakeAdvance tells its caller to do */
typedef enum SnowflakeStep
{
	SNOWFLAKE_NEXT,				/* store the next state computed */
	SNOWFLAKE_WAIT,				/* wait for the clock, then try again */
	SNOWFLAKE_BEHIND			/* the clock is too far behind the last id */
} SnowflakeStep;

PG_FUNCTION_INFO_V1(snowflake_id);
PG_FUNCTION_INFO_V1(snowflake_node_id);
PG_FUNCTION_INFO_V1(snowflake_parse);
PG_FUNCTION_INFO_V1(snowflake_from_time);

static void SnowflakeInitShared(SnowflakeShared *shared);
static void SnowflakeShmemExit(int code, Datum arg);
static bool SnowflakeReadStateFile(int32 *nodeId, int64 *reservedMs);
static bool SnowflakeWriteStateFile(int32 nodeId, int64 reservedMs, int elevel);
static void SnowflakeCheckUsable(void);
static int64 SnowflakeNowMs(void);
static SnowflakeStep SnowflakeAdvance(uint64 lastState, int64 nowMs, uint64 *nextState,
									  int64 *waitUntilMs);
static void SnowflakeClockBehindError(uint64 lastState, int64 nowMs);
static void SnowflakeWaitForClock(int64 targetMs);
static void SnowflakeAfterPromotion(void);
static uint64 SnowflakeClaimState(void);
static void SnowflakeReserve(int64 ms);
static bool SnowflakeLock(bool wait);
static void SnowflakeTimeRangeError(void);


/* ---------- shared memory and the state file ---------- */

/*
 * SnowflakeShmemSize is the shared memory the generator needs.
 */
Size
SnowflakeShmemSize(void)
{
	return MAXALIGN(sizeof(SnowflakeShared));
}

/*
 * SnowflakeShmemInit creates the shared state when the server starts (and
 * after a crash restart), loading node id and high-water mark from the
 * state file; in the postmaster it also arranges for the exact last
 * millisecond to be saved at shutdown.
 */
void
SnowflakeShmemInit(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	Snowflake = ShmemInitStruct("shardext snowflake", sizeof(SnowflakeShared), &found);
	if (!found)
		SnowflakeInitShared(Snowflake);
	LWLockRelease(AddinShmemInitLock);

	if (!IsUnderPostmaster)
		on_shmem_exit(SnowflakeShmemExit, (Datum) 0);
}

/*
 * SnowflakeInitShared fills in fresh shared state.  Ids resume after the
 * high-water mark of the state file: the last state is set to the mark's
 * final sequence number, so the next id has a later millisecond.
 */
static void
SnowflakeInitShared(SnowflakeShared *shared)
{
	int32		nodeId = SNOWFLAKE_NODE_ID_AUTOMATIC;
	int64		reservedMs = 0;

	memset(shared, 0, sizeof(SnowflakeShared));
	shared->stateFileBroken = !SnowflakeReadStateFile(&nodeId, &reservedMs);
	pg_atomic_init_u64(&shared->lastState.value,
					   ((uint64) reservedMs << SNOWFLAKE_SEQUENCE_BITS) | SNOWFLAKE_MAX_SEQUENCE);
	pg_atomic_init_u64(&shared->reservedUntilMs, (uint64) reservedMs);
	pg_atomic_init_u32(&shared->registeredNodeId, (uint32) nodeId);
	pg_atomic_init_u32(&shared->promotionChecked, 0);
	shared->startupMs = reservedMs;
	shared->lockTrancheId = NewLWLockTranche("shardext_snowflake");
	LWLockInitialize(&shared->lock, shared->lockTrancheId);
}

/*
 * SnowflakeShmemExit runs in the postmaster when it shuts down, after every
 * other process has exited, and stores the exact last millisecond issued,
 * so that a clean restart need not wait for the clock to pass a
 * reservation.  After a crash (code != 0) shared memory is not trusted and
 * the reservation on disk stays as it is.
 */
static void
SnowflakeShmemExit(int code, Datum arg)
{
	int64		lastMs;

	if (code != 0 || Snowflake == NULL || Snowflake->stateFileBroken)
		return;

	lastMs = (int64) (pg_atomic_read_u64(&Snowflake->lastState.value) >> SNOWFLAKE_SEQUENCE_BITS);
	(void) SnowflakeWriteStateFile((int32) pg_atomic_read_u32(&Snowflake->registeredNodeId),
								   lastMs, LOG);
}

/*
 * SnowflakeReadStateFile reads node id and high-water mark.  A missing file
 * is a new server: no registered node id, no mark.  An unreadable file
 * returns false; the server then issues no ids, because it cannot know
 * which ones it issued before.
 */
static bool
SnowflakeReadStateFile(int32 *nodeId, int64 *reservedMs)
{
	FILE	   *file = AllocateFile(SNOWFLAKE_STATE_FILE, "r");
	int			fileNodeId;
	long long	fileReservedMs;
	int			matched;

	if (file == NULL)
	{
		if (errno == ENOENT)
			return true;
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", SNOWFLAKE_STATE_FILE)));
		return false;
	}
	matched = fscanf(file, SNOWFLAKE_STATE_HEADER " node_id %d reserved_until_ms %lld",
					 &fileNodeId, &fileReservedMs);
	FreeFile(file);

	if (matched != 2 ||
		fileNodeId < SNOWFLAKE_NODE_ID_AUTOMATIC || fileNodeId > SNOWFLAKE_MAX_NODE_ID ||
		fileReservedMs < 0 || fileReservedMs > SNOWFLAKE_MAX_MS)
	{
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid snowflake state file \"%s\"", SNOWFLAKE_STATE_FILE),
				 errdetail("snowflake_id() refuses to generate ids until the file is "
						   "repaired.")));
		return false;
	}
	*nodeId = fileNodeId;
	*reservedMs = (int64) fileReservedMs;
	return true;
}

/*
 * SnowflakeWriteStateFile replaces the state file atomically and durably:
 * temporary file, fsync, rename, fsync of the directory.  Problems are
 * reported at elevel; returns whether the file was written.  Callers other
 * than the postmaster at shutdown hold Snowflake->lock.
 */
static bool
SnowflakeWriteStateFile(int32 nodeId, int64 reservedMs, int elevel)
{
	char		buffer[128];
	int			length;
	int			fd;

	length = snprintf(buffer, sizeof(buffer),
					  SNOWFLAKE_STATE_HEADER "\nnode_id %d\nreserved_until_ms %lld\n",
					  nodeId, (long long) reservedMs);

	fd = OpenTransientFile(SNOWFLAKE_STATE_TEMP_FILE, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
	{
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", SNOWFLAKE_STATE_TEMP_FILE)));
		return false;
	}
	errno = 0;
	if (write(fd, buffer, length) != length)
	{
		/* a short write without errno is most likely a full disk */
		int			saveErrno = errno ? errno : ENOSPC;

		CloseTransientFile(fd);
		errno = saveErrno;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", SNOWFLAKE_STATE_TEMP_FILE)));
		return false;
	}
	if (pg_fsync(fd) != 0)
	{
		int			saveErrno = errno;

		CloseTransientFile(fd);
		errno = saveErrno;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not fsync file \"%s\": %m", SNOWFLAKE_STATE_TEMP_FILE)));
		return false;
	}
	if (CloseTransientFile(fd) != 0)
	{
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not close file \"%s\": %m", SNOWFLAKE_STATE_TEMP_FILE)));
		return false;
	}
	return durable_rename(SNOWFLAKE_STATE_TEMP_FILE, SNOWFLAKE_STATE_FILE, elevel) == 0;
}

/*
 * SnowflakeLock takes the lock that serialises state file writes and
 * returns true; with wait = false it only tries, and returns whether it got
 * the lock.  The tranche gets its name in this backend on first use, for
 * pg_stat_activity.
 */
static bool
SnowflakeLock(bool wait)
{
	static bool trancheRegistered = false;

	if (!trancheRegistered)
	{
		RegisterLWLockTrancheName(Snowflake->lockTrancheId, "shardext_snowflake");
		trancheRegistered = true;
	}
	if (!wait)
		return LWLockConditionalAcquire(&Snowflake->lock, LW_EXCLUSIVE);
	LWLockAcquire(&Snowflake->lock, LW_EXCLUSIVE);
	return true;
}

/*
 * SnowflakeReserve makes sure the high-water mark on disk covers ms, which
 * the caller is about to hand out, and moves it ahead when it comes close.
 * Only callers beyond the mark wait for the write; callers that are merely
 * close leave it to whoever holds the lock.
 */
static void
SnowflakeReserve(int64 ms)
{
	bool		mustCover = ms > (int64) pg_atomic_read_u64(&Snowflake->reservedUntilMs);

	if (!SnowflakeLock(mustCover))
		return;

	if (ms + SNOWFLAKE_RESERVE_MS / 2 > (int64) pg_atomic_read_u64(&Snowflake->reservedUntilMs))
	{
		int64		reservedMs = Min(ms + SNOWFLAKE_RESERVE_MS, SNOWFLAKE_MAX_MS);

		/* an error here releases the lock; the id is then never returned */
		SnowflakeWriteStateFile((int32) pg_atomic_read_u32(&Snowflake->registeredNodeId),
								reservedMs, ERROR);
		pg_atomic_write_u64(&Snowflake->reservedUntilMs, (uint64) reservedMs);
	}
	LWLockRelease(&Snowflake->lock);
}

/*
 * SnowflakeSetRegisteredNodeId stores the node id a coordinator assigned to
 * this server, in shared memory and in the state file, so that it survives
 * restarts.  The caller checked the range.  This is not transactional: if
 * the registration rolls back, the coordinator's sequence never hands out
 * the id again, so keeping it cannot cause a collision.
 */
void
SnowflakeSetRegisteredNodeId(int32 nodeId)
{
	int32		previous;

	Assert(nodeId >= 0 && nodeId <= SNOWFLAKE_MAX_NODE_ID);
	SnowflakeCheckUsable();

	(void) SnowflakeLock(true);
	previous = (int32) pg_atomic_read_u32(&Snowflake->registeredNodeId);
	if (previous != nodeId)
	{
		SnowflakeWriteStateFile(nodeId, (int64) pg_atomic_read_u64(&Snowflake->reservedUntilMs),
								ERROR);
		pg_atomic_write_u32(&Snowflake->registeredNodeId, (uint32) nodeId);
	}
	LWLockRelease(&Snowflake->lock);

	if (previous != nodeId && previous != SNOWFLAKE_NODE_ID_AUTOMATIC)
		ereport(LOG,
				(errmsg("snowflake node id of this server changed from %d to %d",
						previous, nodeId)));
	if (ShardextNodeId != SNOWFLAKE_NODE_ID_AUTOMATIC && ShardextNodeId != nodeId)
		ereport(WARNING,
				(errmsg("shardext.node_id = %d overrides node id %d assigned by the coordinator",
						ShardextNodeId, nodeId),
				 errhint("Snowflake ids of this server carry node id %d; make sure no other "
						 "node of the cluster uses it.", ShardextNodeId)));
}


/* ---------- generating ids ---------- */

/*
 * SnowflakeCheckUsable errors out where no id may be issued: without the
 * shared state, with an unreadable state file, and on a standby, which
 * shares its primary's node id.
 */
static inline void
SnowflakeCheckUsable(void)
{
	if (unlikely(Snowflake == NULL))
		elog(ERROR, "shardext snowflake shared memory is not initialized");
	if (unlikely(Snowflake->stateFileBroken))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("snowflake state file \"%s\" could not be read at server start",
						SNOWFLAKE_STATE_FILE),
				 errdetail("Without it this server cannot know which ids it issued before."),
				 errhint("Repair the file in the data directory (or remove it and set "
						 "shardext.node_id) and restart the server.")));
	if (unlikely(RecoveryInProgress()))
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot generate snowflake ids during recovery"),
				 errdetail("A standby has the node id of its primary.")));
}

/*
 * SnowflakeCurrentNodeId is the node id in ids of this server: the
 * shardext.node_id setting, else the id received on registration as a
 * worker, else 0 (a coordinator).
 */
int32
SnowflakeCurrentNodeId(void)
{
	int32		registered;

	if (ShardextNodeId != SNOWFLAKE_NODE_ID_AUTOMATIC)
		return ShardextNodeId;
	registered = (int32) pg_atomic_read_u32(&Snowflake->registeredNodeId);
	return registered != SNOWFLAKE_NODE_ID_AUTOMATIC ? registered : 0;
}

/*
 * SnowflakeNowMs reads the clock (shifted by the testing offset) as
 * milliseconds since the snowflake epoch.
 */
static inline int64
SnowflakeNowMs(void)
{
	int64		us = GetCurrentTimestamp() - SNOWFLAKE_EPOCH_US;

#ifdef SHARDEXT_TEST_HOOKS
	us += (int64) ShardextSnowflakeClockOffset * 1000;
#endif

	if (unlikely(us < 0 || us / 1000 > SNOWFLAKE_MAX_MS))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("system clock is outside the range of snowflake ids"),
				 errdetail("Snowflake ids cover times from 2024-01-01 00:00:00 UTC to "
						   "2093-09-06 15:47:35.551 UTC.")));
	return us / 1000;
}

/*
 * SnowflakeAdvance computes the state after lastState at clock nowMs:
 * SNOWFLAKE_NEXT with *nextState set, SNOWFLAKE_WAIT when the caller must
 * first wait until the clock reads *waitUntilMs, or SNOWFLAKE_BEHIND when
 * the clock is too far behind the last id.
 */
static inline SnowflakeStep
SnowflakeAdvance(uint64 lastState, int64 nowMs, uint64 *nextState, int64 *waitUntilMs)
{
	int64		lastMs = (int64) (lastState >> SNOWFLAKE_SEQUENCE_BITS);
	int64		behindMs = lastMs - nowMs;
	int64		maxSkewMs = ShardextSnowflakeMaxClockSkew;

	/* the usual case: a new millisecond */
	if (likely(behindMs < 0))
	{
		*nextState = (uint64) nowMs << SNOWFLAKE_SEQUENCE_BITS;
		return SNOWFLAKE_NEXT;
	}

	if (unlikely(behindMs > maxSkewMs))
	{
		/*
		 * Right after startup the high-water mark from disk may be up to a
		 * reservation ahead of the clock (after a crash, or a restart within
		 * a second): wait for the clock rather than fail.
		 */
		if (lastMs <= Snowflake->startupMs &&
			behindMs <= SNOWFLAKE_RESERVE_MS + maxSkewMs)
		{
			*waitUntilMs = lastMs - maxSkewMs;
			return SNOWFLAKE_WAIT;
		}
		return SNOWFLAKE_BEHIND;
	}

	/* same millisecond, or the clock stepped back within the bound */
	if ((lastState & SNOWFLAKE_MAX_SEQUENCE) < SNOWFLAKE_MAX_SEQUENCE)
	{
		*nextState = lastState + 1;
		return SNOWFLAKE_NEXT;
	}

	/*
	 * The millisecond is used up.  Behind the clock by less than the bound,
	 * borrow the next one; otherwise wait for the clock to tick.
	 */
	if (behindMs > 0 && behindMs < maxSkewMs && lastMs < SNOWFLAKE_MAX_MS)
	{
		*nextState = (uint64) (lastMs + 1) << SNOWFLAKE_SEQUENCE_BITS;
		return SNOWFLAKE_NEXT;
	}
	*waitUntilMs = nowMs + 1;
	return SNOWFLAKE_WAIT;
}

/*
 * SnowflakeClockBehindError reports a clock that stepped back further than
 * shardext.snowflake_max_clock_skew.
 */
static void
SnowflakeClockBehindError(uint64 lastState, int64 nowMs)
{
	int64		behindMs = (int64) (lastState >> SNOWFLAKE_SEQUENCE_BITS) - nowMs;

	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("system clock is behind the last snowflake id by more than "
					"shardext.snowflake_max_clock_skew"),
			 errdetail("The clock is " INT64_FORMAT " ms behind the last id issued by "
					   "this server; at most %d ms are tolerated.",
					   behindMs, ShardextSnowflakeMaxClockSkew),
			 errhint("Correct the system clock or wait until it has caught up; "
					 "a larger shardext.snowflake_max_clock_skew tolerates larger "
					 "steps back.")));
}

/*
 * SnowflakeWaitForClock waits until the clock reads at least targetMs.
 * Waits are short: a millisecond when a sequence is used up, at most a
 * reservation after startup.  A clock that steps back while it waits ends
 * the wait early: the caller looks again, and fails when the clock is
 * further behind than shardext.snowflake_max_clock_skew.
 */
static void
SnowflakeWaitForClock(int64 targetMs)
{
	int64		gapMs = targetMs - SnowflakeNowMs();

	for (;;)
	{
		int64		nowMs = SnowflakeNowMs();

		if (nowMs >= targetMs || targetMs - nowMs > gapMs)
			return;
		CHECK_FOR_INTERRUPTS();
		if (targetMs - nowMs > 1)
			pg_usleep(1000L);
		else
			pg_spin_delay();
	}
}

/*
 * SnowflakeAfterPromotion, at the first id of a server that was promoted
 * since it started (a standby that took over a worker or the
 * coordinator), moves the last state to snowflake_max_clock_skew past the
 * clock.  The standby has its primary's node id, and its state file is the
 * one copied when it was made, far behind what the primary issued since;
 * the primary issued no id beyond its clock (plus the skew it may borrow)
 * before it failed, and the promotion comes after that.  So with clocks
 * that agree within the time the failover took, the new primary's ids
 * come after the old one's.
 */
static void
SnowflakeAfterPromotion(void)
{
	if (PromoteIsTriggered())
	{
		uint64		floor = ((uint64) (SnowflakeNowMs() + ShardextSnowflakeMaxClockSkew) <<
							 SNOWFLAKE_SEQUENCE_BITS) | SNOWFLAKE_MAX_SEQUENCE;
		uint64		last = pg_atomic_read_u64(&Snowflake->lastState.value);

		while (last < floor &&
			   !pg_atomic_compare_exchange_u64(&Snowflake->lastState.value, &last, floor))
			;
	}
	pg_atomic_write_u32(&Snowflake->promotionChecked, 1);
}

/*
 * SnowflakeClaimState moves the shared state to the next id and returns
 * that state, (ms << 12 | sequence).
 *
 * The clock is read once per id.  A retry after a lost compare-and-swap
 * reuses that reading; it may then be older than the last state (if this
 * backend was descheduled in between), which is harmless except that it
 * must not count as the clock having stepped back: only a reading taken
 * after the state was read ("fresh") can raise that error.
 */
static inline uint64
SnowflakeClaimState(void)
{
	uint64		lastState = pg_atomic_read_u64(&Snowflake->lastState.value);
	int64		nowMs = SnowflakeNowMs();
	bool		freshClock = true;

	for (;;)
	{
		uint64		nextState = 0;
		int64		waitUntilMs = 0;

		switch (SnowflakeAdvance(lastState, nowMs, &nextState, &waitUntilMs))
		{
			case SNOWFLAKE_NEXT:
				/* on failure lastState is what another backend just stored */
				if (pg_atomic_compare_exchange_u64(&Snowflake->lastState.value,
												   &lastState, nextState))
					return nextState;
				freshClock = false;
				continue;
			case SNOWFLAKE_BEHIND:
				if (freshClock)
					SnowflakeClockBehindError(lastState, nowMs);
				break;
			case SNOWFLAKE_WAIT:
				SnowflakeWaitForClock(waitUntilMs);
				break;
		}
		lastState = pg_atomic_read_u64(&Snowflake->lastState.value);
		nowMs = SnowflakeNowMs();
		freshClock = true;
	}
}

/*
 * SnowflakeNextId returns the next id of this server: larger than every id
 * it issued before, in any session, and before any restart.
 */
int64
SnowflakeNextId(void)
{
	uint64		state;
	int64		ms;
	int32		nodeId;

	SnowflakeCheckUsable();
	if (unlikely(pg_atomic_read_u32(&Snowflake->promotionChecked) == 0))
		SnowflakeAfterPromotion();
	nodeId = SnowflakeCurrentNodeId();
	state = SnowflakeClaimState();

	/* the id may only leave once the high-water mark on disk covers it */
	ms = (int64) (state >> SNOWFLAKE_SEQUENCE_BITS);
	if (unlikely(ms + SNOWFLAKE_RESERVE_MS / 2 >
				 (int64) pg_atomic_read_u64(&Snowflake->reservedUntilMs)))
		SnowflakeReserve(ms);

	return (ms << (SNOWFLAKE_NODE_BITS + SNOWFLAKE_SEQUENCE_BITS)) |
		((int64) nodeId << SNOWFLAKE_SEQUENCE_BITS) |
		(int64) (state & SNOWFLAKE_MAX_SEQUENCE);
}


/* ---------- SQL functions ---------- */

/* snowflake_id() returns bigint: a new id */
Datum
snowflake_id(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(SnowflakeNextId());
}

/* snowflake_node_id() returns int: the node id in new ids */
Datum
snowflake_node_id(PG_FUNCTION_ARGS)
{
	if (Snowflake == NULL)
		elog(ERROR, "shardext snowflake shared memory is not initialized");
	PG_RETURN_INT32(SnowflakeCurrentNodeId());
}

/*
 * snowflake_parse(id bigint, OUT created_at timestamptz, OUT node_id int,
 * OUT sequence int) takes an id apart.  Every non-negative bigint is a
 * well-formed id.
 */
Datum
snowflake_parse(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);
	int64		ms;
	TupleDesc	tupleDesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	if (id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("snowflake id " INT64_FORMAT " is out of range", id),
				 errdetail("Snowflake ids are not negative.")));
	if (get_call_result_type(fcinfo, NULL, &tupleDesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupleDesc = BlessTupleDesc(tupleDesc);

	ms = id >> (SNOWFLAKE_NODE_BITS + SNOWFLAKE_SEQUENCE_BITS);
	values[0] = TimestampTzGetDatum(SNOWFLAKE_EPOCH_US + ms * 1000);
	values[1] = Int32GetDatum((int32) ((id >> SNOWFLAKE_SEQUENCE_BITS) & SNOWFLAKE_MAX_NODE_ID));
	values[2] = Int32GetDatum((int32) (id & SNOWFLAKE_MAX_SEQUENCE));

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupleDesc, values, nulls)));
}

/*
 * snowflake_from_time(ts timestamptz) returns the smallest id of the
 * millisecond ts falls in, so that "id >= snowflake_from_time(ts)" selects
 * the ids created at or after that millisecond.
 */
Datum
snowflake_from_time(PG_FUNCTION_ARGS)
{
	TimestampTz ts = PG_GETARG_TIMESTAMPTZ(0);
	int64		us;

	if (TIMESTAMP_NOT_FINITE(ts) || ts < SNOWFLAKE_EPOCH_US)
		SnowflakeTimeRangeError();
	us = ts - SNOWFLAKE_EPOCH_US;
	if (us / 1000 > SNOWFLAKE_MAX_MS)
		SnowflakeTimeRangeError();

	PG_RETURN_INT64((us / 1000) << (SNOWFLAKE_NODE_BITS + SNOWFLAKE_SEQUENCE_BITS));
}

static void
SnowflakeTimeRangeError(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
			 errmsg("timestamp out of range for snowflake ids"),
			 errdetail("Snowflake ids cover times from 2024-01-01 00:00:00 UTC to "
					   "2093-09-06 15:47:35.551 UTC.")));
}
