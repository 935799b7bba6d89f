/*-------------------------------------------------------------------------
 *
 * replica_state.c
 *	  Shared memory state of read replicas: how far each replica has
 *	  replayed, how fresh its data is, and read counters.
 *
 * The maintenance daemon of each database polls the primaries that have
 * replicas (their WAL insert position) and the replicas (their replay
 * position) every shardext.replica_poll_interval and reports here; the
 * backends read it when they route a read, so choosing a replica costs no
 * round trip.
 *
 * Freshness: a primary's samples are kept as a ring of (LSN, first seen,
 * last seen).  Everything committed on the primary before time t has its
 * commit record below the insert LSN sampled at t, so a replica that has
 * replayed a sampled LSN has every commit made before the sample's "last
 * seen" time: that is its freshAsOf, and now - freshAsOf bounds how stale
 * its data is (also when the daemon stops reporting, since the bound only
 * grows).  A replica whose replay position is older than the whole ring is
 * of unknown freshness and is not used.
 *
 * Barriers: changes that other sessions must never miss on a replica (DDL,
 * shards arriving on a node by a move) raise the node's barrier LSN, and a
 * replica is used only once it has replayed the barrier.  A change marks
 * the barrier pending; the first primary sample taken after the change
 * finished (and after every change committing meanwhile finished) becomes
 * the barrier; until then no replica of the node is used.  When the daemon
 * first samples a primary, the barrier becomes that LSN, which covers
 * everything done before the coordinator (re)started.
 *
 * Slots are keyed by (database, node id) and found by a scan (there are
 * few); the key of a slot in use never changes, except when the daemon
 * frees the slots of nodes that left the catalog, so readers check the key
 * under the slot's spinlock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "shardext/replica_state.h"

#define MAX_REPLICA_SLOTS 128
#define PRIMARY_SAMPLES 128
/* a slot not polled for this long may be taken over when none is free */
#define SLOT_REUSE_AFTER_MS (3600 * 1000)

typedef struct LsnSample
{
	XLogRecPtr	lsn;
	TimestampTz firstSeen;
	TimestampTz lastSeen;
} LsnSample;

typedef struct ReplicaSlot
{
	slock_t		mutex;
	Oid			databaseId;		/* InvalidOid: free */
	int32		nodeId;
	int32		primaryNodeId;	/* 0 for a primary */
	uint32		addressHash;	/* host and port last polled */
	bool		sampled;		/* the daemon reported at least once */
	bool		healthy;
	bool		caughtUp;		/* replica: at most one primary sample behind */
	XLogRecPtr	lsn;			/* replica: replayed; primary: insert position */
	TimestampTz sampleTime;
	TimestampTz freshAsOf;
	TimestampTz failedUntil;
	XLogRecPtr	barrierLsn;		/* primaries */
	int			changesInProgress;	/* schema changes committing now */
	TimestampTz barrierPendingSince;	/* the next sample after it raises the barrier */
	int			sampleCount;
	int			sampleHead;		/* index of the newest sample */
	LsnSample	samples[PRIMARY_SAMPLES];
	pg_atomic_uint64 replicaReads;
	pg_atomic_uint64 fallbacks;
	pg_atomic_uint64 primaryReads;
} ReplicaSlot;

typedef struct ReplicaStateShared
{
	LWLock	   *lock;			/* taken to allocate or free slots */
	ReplicaSlot slots[MAX_REPLICA_SLOTS];
} ReplicaStateShared;

static ReplicaStateShared *ReplicaState = NULL;

/* this backend's guess of where each node's slot is (checked before use) */
#define SLOT_GUESSES 64
static int32 guessNodeIds[SLOT_GUESSES];
static int16 guessSlots[SLOT_GUESSES];

static ReplicaSlot *FindSlot(int32 nodeId, bool create);
static void ResetSlotData(ReplicaSlot *slot);
static TimestampTz FreshnessOf(int32 primaryNodeId, XLogRecPtr replayLsn, bool *caughtUp);

Size
ReplicaStateShmemSize(void)
{
	return MAXALIGN(sizeof(ReplicaStateShared));
}

void
ReplicaStateShmemRequest(void)
{
	RequestAddinShmemSpace(ReplicaStateShmemSize());
	RequestNamedLWLockTranche("shardext replica state", 1);
}

void
ReplicaStateShmemInit(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	ReplicaState = ShmemInitStruct("shardext replica state", ReplicaStateShmemSize(), &found);
	if (!found)
	{
		memset(ReplicaState, 0, ReplicaStateShmemSize());
		ReplicaState->lock = &(GetNamedLWLockTranche("shardext replica state"))->lock;
		for (int i = 0; i < MAX_REPLICA_SLOTS; i++)
		{
			ReplicaSlot *slot = &ReplicaState->slots[i];

			SpinLockInit(&slot->mutex);
			pg_atomic_init_u64(&slot->replicaReads, 0);
			pg_atomic_init_u64(&slot->fallbacks, 0);
			pg_atomic_init_u64(&slot->primaryReads, 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/* forgets what a slot knew (its node now is another server) */
static void
ResetSlotData(ReplicaSlot *slot)
{
	slot->sampled = false;
	slot->healthy = false;
	slot->caughtUp = false;
	slot->lsn = InvalidXLogRecPtr;
	slot->sampleTime = 0;
	slot->freshAsOf = 0;
	slot->sampleCount = 0;
	slot->sampleHead = 0;
}

/*
 * FindSlot returns the slot of a node of this database, creating it when
 * asked (NULL when every slot is taken).  The key is read without the lock:
 * it only changes under the LWLock, and callers recheck it under the
 * slot's spinlock (SlotMatches).
 */
static ReplicaSlot *
FindSlot(int32 nodeId, bool create)
{
	ReplicaSlot *reuse = NULL;
	TimestampTz now;
	int			guess = (uint32) nodeId % SLOT_GUESSES;

	if (ReplicaState == NULL)
		return NULL;
	if (guessNodeIds[guess] == nodeId)
	{
		ReplicaSlot *slot = &ReplicaState->slots[guessSlots[guess]];

		if (slot->databaseId == MyDatabaseId && slot->nodeId == nodeId)
			return slot;
	}
	for (int i = 0; i < MAX_REPLICA_SLOTS; i++)
	{
		ReplicaSlot *slot = &ReplicaState->slots[i];

		if (slot->databaseId == MyDatabaseId && slot->nodeId == nodeId)
		{
			guessNodeIds[guess] = nodeId;
			guessSlots[guess] = i;
			return slot;
		}
	}
	if (!create)
		return NULL;

	LWLockAcquire(ReplicaState->lock, LW_EXCLUSIVE);
	now = GetCurrentTimestamp();
	for (int i = 0; i < MAX_REPLICA_SLOTS; i++)
	{
		ReplicaSlot *slot = &ReplicaState->slots[i];

		if (slot->databaseId == MyDatabaseId && slot->nodeId == nodeId)
		{
			LWLockRelease(ReplicaState->lock);
			return slot;
		}
		if (reuse == NULL && (slot->databaseId == InvalidOid ||
							  TimestampDifferenceExceeds(slot->sampleTime, now,
														 SLOT_REUSE_AFTER_MS)))
			reuse = slot;
	}
	if (reuse != NULL)
	{
		SpinLockAcquire(&reuse->mutex);
		ResetSlotData(reuse);
		reuse->primaryNodeId = 0;
		reuse->addressHash = 0;
		reuse->failedUntil = 0;
		reuse->barrierLsn = InvalidXLogRecPtr;
		reuse->changesInProgress = 0;
		reuse->barrierPendingSince = 0;
		reuse->sampleTime = now;	/* not taken over again at once */
		pg_atomic_write_u64(&reuse->replicaReads, 0);
		pg_atomic_write_u64(&reuse->fallbacks, 0);
		pg_atomic_write_u64(&reuse->primaryReads, 0);
		reuse->nodeId = nodeId;
		reuse->databaseId = MyDatabaseId;
		SpinLockRelease(&reuse->mutex);
	}
	LWLockRelease(ReplicaState->lock);
	return reuse;
}

/* SlotMatches: call with the slot's spinlock held */
static inline bool
SlotMatches(ReplicaSlot *slot, int32 nodeId)
{
	return slot->databaseId == MyDatabaseId && slot->nodeId == nodeId;
}

/*
 * GetReplicaView copies what is known of a replica; false when the daemon
 * has not reported on it yet.
 */
bool
GetReplicaView(int32 replicaNodeId, ReplicaView *view)
{
	ReplicaSlot *slot = FindSlot(replicaNodeId, false);
	bool		known = false;

	memset(view, 0, sizeof(ReplicaView));
	if (slot == NULL)
		return false;
	SpinLockAcquire(&slot->mutex);
	if (SlotMatches(slot, replicaNodeId))
	{
		known = slot->sampled;
		view->healthy = slot->healthy;
		view->caughtUp = slot->caughtUp;
		view->replayLsn = slot->lsn;
		view->sampleTime = slot->sampleTime;
		view->freshAsOf = slot->freshAsOf;
		view->failedUntil = slot->failedUntil;
	}
	SpinLockRelease(&slot->mutex);
	return known;
}

/*
 * GetReplicaBarrier returns the LSN every replica of the node must have
 * replayed before reads use it.  While it is unknown (the daemon has not
 * sampled the primary, or since a change) it is the largest LSN: no
 * replica qualifies.
 */
XLogRecPtr
GetReplicaBarrier(int32 primaryNodeId)
{
	ReplicaSlot *slot = FindSlot(primaryNodeId, false);
	XLogRecPtr	barrier = PG_UINT64_MAX;

	if (slot == NULL)
		return barrier;
	SpinLockAcquire(&slot->mutex);
	if (SlotMatches(slot, primaryNodeId) && slot->sampled &&
		slot->changesInProgress == 0 && slot->barrierPendingSince == 0)
		barrier = slot->barrierLsn;
	SpinLockRelease(&slot->mutex);
	return barrier;
}

/*
 * RaiseReplicaBarrier marks that a change on the node just finished that
 * its replicas must replay before reads use them (see the file header).
 */
void
RaiseReplicaBarrier(int32 primaryNodeId)
{
	ReplicaSlot *slot = FindSlot(primaryNodeId, true);
	TimestampTz now = GetCurrentTimestamp();

	if (slot == NULL)
		return;					/* untracked: its replicas are never used */
	SpinLockAcquire(&slot->mutex);
	if (SlotMatches(slot, primaryNodeId))
		slot->barrierPendingSince = Max(slot->barrierPendingSince, now);
	SpinLockRelease(&slot->mutex);
}

/*
 * BeginReplicaChange marks that a change the replicas of the node must not
 * be read without is committing; EndReplicaChange, called once it
 * committed or aborted, raises the barrier past it.
 */
void
BeginReplicaChange(int32 primaryNodeId)
{
	ReplicaSlot *slot = FindSlot(primaryNodeId, true);

	if (slot == NULL)
		return;
	SpinLockAcquire(&slot->mutex);
	if (SlotMatches(slot, primaryNodeId))
		slot->changesInProgress++;
	SpinLockRelease(&slot->mutex);
}

void
EndReplicaChange(int32 primaryNodeId)
{
	ReplicaSlot *slot = FindSlot(primaryNodeId, false);

	if (slot == NULL)
		return;
	SpinLockAcquire(&slot->mutex);
	if (SlotMatches(slot, primaryNodeId) && slot->changesInProgress > 0)
		slot->changesInProgress--;
	SpinLockRelease(&slot->mutex);
	RaiseReplicaBarrier(primaryNodeId);
}

/*
 * PrimaryLsnSampledAfter returns the insert LSN the daemon sampled on a
 * primary after the given time (the earliest such sample), or
 * InvalidXLogRecPtr when there is none yet.  Every commit that finished
 * before that time lies below it: that stands in for a commit LSN that was
 * not captured.
 */
XLogRecPtr
PrimaryLsnSampledAfter(int32 primaryNodeId, TimestampTz when)
{
	ReplicaSlot *slot = FindSlot(primaryNodeId, false);
	XLogRecPtr	result = InvalidXLogRecPtr;

	if (slot == NULL)
		return InvalidXLogRecPtr;
	SpinLockAcquire(&slot->mutex);
	if (SlotMatches(slot, primaryNodeId))
	{
		for (int k = 0; k < slot->sampleCount; k++)
		{
			LsnSample  *sample = &slot->samples[(slot->sampleHead - k + PRIMARY_SAMPLES) %
												 PRIMARY_SAMPLES];

			if (sample->lastSeen <= when)
				break;
			result = sample->lsn;
		}
	}
	SpinLockRelease(&slot->mutex);
	return result;
}

/*
 * NoteReplicaFailure keeps every backend away from a replica for forMs
 * after one could not connect to it or use it.
 */
void
NoteReplicaFailure(int32 replicaNodeId, int forMs)
{
	ReplicaSlot *slot = FindSlot(replicaNodeId, true);
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), forMs);

	if (slot == NULL)
		return;
	SpinLockAcquire(&slot->mutex);
	if (SlotMatches(slot, replicaNodeId) && until > slot->failedUntil)
		slot->failedUntil = until;
	SpinLockRelease(&slot->mutex);
}

void
CountReplicaRead(int32 replicaNodeId)
{
	ReplicaSlot *slot = FindSlot(replicaNodeId, true);

	if (slot != NULL)
		pg_atomic_fetch_add_u64(&slot->replicaReads, 1);
}

void
CountReplicaFallback(int32 replicaNodeId)
{
	ReplicaSlot *slot = FindSlot(replicaNodeId, true);

	if (slot != NULL)
		pg_atomic_fetch_add_u64(&slot->fallbacks, 1);
}

void
CountPrimaryRead(int32 primaryNodeId)
{
	ReplicaSlot *slot = FindSlot(primaryNodeId, true);

	if (slot != NULL)
		pg_atomic_fetch_add_u64(&slot->primaryReads, 1);
}

/*
 * ReportPrimarySample records the daemon's poll of a primary: its insert
 * LSN (when ok), with the time the poll was sent (every commit finished
 * before it lies below the LSN).  A new address (the node was repointed)
 * starts afresh.
 */
void
ReportPrimarySample(int32 nodeId, uint32 addressHash, bool ok, XLogRecPtr lsn,
					TimestampTz sampleTime)
{
	ReplicaSlot *slot = FindSlot(nodeId, true);

	if (slot == NULL)
		return;
	SpinLockAcquire(&slot->mutex);
	if (!SlotMatches(slot, nodeId))
	{
		SpinLockRelease(&slot->mutex);
		return;
	}
	if (slot->addressHash != addressHash)
	{
		ResetSlotData(slot);
		slot->addressHash = addressHash;
	}
	slot->primaryNodeId = 0;
	slot->healthy = ok;
	slot->sampleTime = sampleTime;
	if (ok)
	{
		LsnSample  *newest = &slot->samples[slot->sampleHead];

		if (!slot->sampled)
			slot->barrierLsn = Max(slot->barrierLsn, lsn);
		/* a sample taken after the last change finished covers it */
		if (slot->barrierPendingSince != 0 && slot->changesInProgress == 0 &&
			sampleTime > slot->barrierPendingSince)
		{
			slot->barrierLsn = Max(slot->barrierLsn, lsn);
			slot->barrierPendingSince = 0;
		}
		slot->sampled = true;
		slot->lsn = lsn;
		if (slot->sampleCount > 0 && newest->lsn == lsn)
			newest->lastSeen = sampleTime;
		else if (slot->sampleCount == 0 || lsn > newest->lsn)
		{
			slot->sampleHead = (slot->sampleHead + 1) % PRIMARY_SAMPLES;
			newest = &slot->samples[slot->sampleHead];
			newest->lsn = lsn;
			newest->firstSeen = sampleTime;
			newest->lastSeen = sampleTime;
			slot->sampleCount = Min(slot->sampleCount + 1, PRIMARY_SAMPLES);
		}
		else
		{
			/* the insert position went back: another server; start over */
			slot->sampleCount = 1;
			newest->lsn = lsn;
			newest->firstSeen = sampleTime;
			newest->lastSeen = sampleTime;
			slot->barrierLsn = lsn;
		}
	}
	SpinLockRelease(&slot->mutex);
}

/*
 * FreshnessOf returns the time before which every commit of the primary
 * is in a replica that replayed up to replayLsn (0 when the primary's
 * samples do not reach back that far), and whether it has the newest
 * sample.
 */
static TimestampTz
FreshnessOf(int32 primaryNodeId, XLogRecPtr replayLsn, bool *caughtUp)
{
	ReplicaSlot *slot = FindSlot(primaryNodeId, false);
	TimestampTz fresh = 0;

	*caughtUp = false;
	if (slot == NULL)
		return 0;
	SpinLockAcquire(&slot->mutex);
	if (SlotMatches(slot, primaryNodeId))
	{
		for (int k = 0; k < slot->sampleCount; k++)
		{
			LsnSample  *sample = &slot->samples[(slot->sampleHead - k + PRIMARY_SAMPLES) %
												 PRIMARY_SAMPLES];

			if (sample->lsn <= replayLsn)
			{
				fresh = sample->lastSeen;
				/* at most one change behind the primary: it streams without delay */
				*caughtUp = (k <= 1);
				break;
			}
		}
	}
	SpinLockRelease(&slot->mutex);
	return fresh;
}

/*
 * ReportReplicaSample records the daemon's poll of a replica (ok: it
 * answered, is in recovery and belongs to its primary), right after the
 * poll of its primary.
 */
void
ReportReplicaSample(int32 nodeId, int32 primaryNodeId, uint32 addressHash, bool ok,
					XLogRecPtr replayLsn, TimestampTz sampleTime)
{
	ReplicaSlot *slot = FindSlot(nodeId, true);
	bool		caughtUp = false;
	TimestampTz fresh = ok ? FreshnessOf(primaryNodeId, replayLsn, &caughtUp) : 0;

	if (slot == NULL)
		return;
	SpinLockAcquire(&slot->mutex);
	if (!SlotMatches(slot, nodeId))
	{
		SpinLockRelease(&slot->mutex);
		return;
	}
	if (slot->addressHash != addressHash || slot->primaryNodeId != primaryNodeId)
	{
		ResetSlotData(slot);
		slot->addressHash = addressHash;
		slot->primaryNodeId = primaryNodeId;
	}
	slot->sampled = true;
	slot->healthy = ok;
	slot->sampleTime = sampleTime;
	if (ok)
	{
		slot->lsn = replayLsn;
		slot->caughtUp = caughtUp;
		slot->freshAsOf = Max(slot->freshAsOf, fresh);
	}
	SpinLockRelease(&slot->mutex);
}

/* ReplicaStatusRows lists every slot of this database (shardext.replica_status()) */
List *
ReplicaStatusRows(void)
{
	List	   *rows = NIL;

	if (ReplicaState == NULL)
		return NIL;
	for (int i = 0; i < MAX_REPLICA_SLOTS; i++)
	{
		ReplicaSlot *slot = &ReplicaState->slots[i];
		ReplicaStatusRow *row;

		if (slot->databaseId != MyDatabaseId)
			continue;
		row = palloc0(sizeof(ReplicaStatusRow));
		SpinLockAcquire(&slot->mutex);
		row->nodeId = slot->nodeId;
		row->primaryNodeId = slot->primaryNodeId;
		row->healthy = slot->sampled && slot->healthy;
		row->lsn = slot->lsn;
		row->sampleTime = slot->sampleTime;
		row->freshAsOf = slot->freshAsOf;
		if (slot->databaseId != MyDatabaseId)
			row->nodeId = 0;
		SpinLockRelease(&slot->mutex);
		row->replicaReads = pg_atomic_read_u64(&slot->replicaReads);
		row->fallbacks = pg_atomic_read_u64(&slot->fallbacks);
		row->primaryReads = pg_atomic_read_u64(&slot->primaryReads);
		if (row->nodeId != 0)
			rows = lappend(rows, row);
	}
	return rows;
}

/*
 * ForgetReplicaSlots frees the slots of this database's nodes that are not
 * in keepNodeIds (nodes removed from the catalog); the daemon calls it.
 */
void
ForgetReplicaSlots(List *keepNodeIds)
{
	if (ReplicaState == NULL)
		return;
	LWLockAcquire(ReplicaState->lock, LW_EXCLUSIVE);
	for (int i = 0; i < MAX_REPLICA_SLOTS; i++)
	{
		ReplicaSlot *slot = &ReplicaState->slots[i];

		if (slot->databaseId != MyDatabaseId || list_member_int(keepNodeIds, slot->nodeId))
			continue;
		SpinLockAcquire(&slot->mutex);
		slot->databaseId = InvalidOid;
		slot->nodeId = 0;
		SpinLockRelease(&slot->mutex);
	}
	LWLockRelease(ReplicaState->lock);
}
