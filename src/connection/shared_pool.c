/*-------------------------------------------------------------------------
 *
 * shared_pool.c
 *	  The shared count of connections to each node: every backend of the
 *	  coordinator (and every maintenance daemon) counts the connections it
 *	  holds to a node in shared memory, so that together they stay within
 *	  shardext.max_shared_pool_size connections per node instead of running
 *	  the node out of connection slots ("too many clients").
 *
 * Nodes are counted by address (host and port), so one count covers every
 * database of the coordinator and every node id that points at the same
 * server (a replica registered as a node of its own has its own address,
 * hence its own count).  The limit, when not set, is derived from the node
 * itself: 90% of its max_connections less superuser_reserved_connections,
 * asked on new connections at most once a second (until the first answer,
 * the coordinator's own max_connections stands in).
 *
 * A backend's first connection to a node is "required": when the pool is
 * full it waits, on a condition variable, for up to
 * shardext.connection_wait_timeout, then fails with
 * 53300 too_many_connections.  Holders give connections back at the end
 * of their transactions while others wait (connection.c decides when), and
 * keep more than their first connections only while the pool is at most
 * half full (PoolHasSpareRoom); a
 * waiter that has waited a third of the timeout asks for one connection
 * to be given back at once (PoolYieldRequested), so that nobody waits in
 * vain while slots turn over slowly.  Further connections (parallelism of
 * multi-shard statements, COPY) are "optional": taken only while the pool
 * has room and nobody waits.  Maintenance daemons are counted but never
 * wait or get refused, so recovery and deadlock detection never starve;
 * the automatic limit leaves them (and other clients of the node) a tenth
 * of the node's slots.
 *
 * Every slot a backend holds is also counted in backend-local memory, and
 * a before_shmem_exit callback gives back what is still held when the
 * backend exits (also on FATAL).  A backend that crashes makes the
 * postmaster reinitialise shared memory, which resets every count.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"

#include "shardext/guc.h"
#include "shardext/pg_compat.h"
#include "shardext/shared_pool.h"

#define MAX_POOL_NODES 1024
#define POOL_HOST_LEN 256
/* how often a waiter looks again even without a wakeup */
#define POOL_RECHECK_MS 1000

typedef struct PoolKey
{
	char		host[POOL_HOST_LEN];
	int32		port;
} PoolKey;

struct PoolEntry
{
	PoolKey		key;			/* hash key */
	int			connections;	/* held by all backends */
	int			waiters;		/* backends waiting for a slot */
	int			yieldRequests;	/* waiters that waited long: holders give one back each */
	int			nodeLimit;		/* the node's usable max_connections; 0: unknown */
	TimestampTz learnedAt;		/* when nodeLimit was last asked */
	uint64		waits;			/* times a backend had to wait */
	uint64		timeouts;		/* waits that ended in an error */
	ConditionVariable slotFreed;
};

typedef struct SharedPoolState
{
	LWLock	   *lock;			/* protects the hash and every entry */
} SharedPoolState;

/* slots this backend holds, per entry */
typedef struct HeldSlots
{
	PoolEntry  *entry;
	int			count;
} HeldSlots;

static SharedPoolState *PoolState = NULL;
static HTAB *PoolHash = NULL;
static HeldSlots *heldSlots = NULL;
static int	heldSlotsLength = 0;
static bool exitCallbackRegistered = false;
static PoolEntry *waitingOn = NULL;
static bool poolExempt = false;
static bool warnedFull = false;
/* the exit callback gave everything back: later releases must not count */
static bool releasedAtExit = false;

PG_FUNCTION_INFO_V1(shardext_connection_stats);

static Size SharedPoolShmemSize(void);
static int	PoolLimit(PoolEntry *entry);
static void NoteHeldSlot(PoolEntry *entry, int delta);
static void ReleaseSlotsAtExit(int code, Datum arg);
static void StopWaiting(void);

/* SharedPoolShmemRequest reserves the counts and their lock */
void
SharedPoolShmemRequest(void)
{
	RequestAddinShmemSpace(SharedPoolShmemSize());
	RequestNamedLWLockTranche("shardext shared pool", 1);
}

static Size
SharedPoolShmemSize(void)
{
	return add_size(MAXALIGN(sizeof(SharedPoolState)),
					hash_estimate_size(MAX_POOL_NODES, sizeof(PoolEntry)));
}

/* SharedPoolShmemInit creates or attaches to the counts */
void
SharedPoolShmemInit(void)
{
	bool		found;
	HASHCTL		info;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	PoolState = ShmemInitStruct("shardext shared pool", sizeof(SharedPoolState), &found);
	if (!found)
		PoolState->lock = &(GetNamedLWLockTranche("shardext shared pool"))->lock;
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(PoolKey);
	info.entrysize = sizeof(PoolEntry);
	PoolHash = ShmemInitFixedHash("shardext shared pool hash", MAX_POOL_NODES,
								  &info, HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	LWLockRelease(AddinShmemInitLock);
}

/*
 * GetPoolEntry returns the count of a node address, creating it on first
 * use.  NULL (the node is not counted) when the table is full or shared
 * memory is not set up (a backend outside shared_preload_libraries).
 */
PoolEntry *
GetPoolEntry(const char *host, int32 port)
{
	PoolKey		key;
	PoolEntry  *entry;
	bool		found;

	if (PoolHash == NULL)
		return NULL;
	memset(&key, 0, sizeof(key));
	strlcpy(key.host, host, sizeof(key.host));
	key.port = port;

	LWLockAcquire(PoolState->lock, LW_SHARED);
	entry = hash_search(PoolHash, &key, HASH_FIND, NULL);
	LWLockRelease(PoolState->lock);
	if (entry != NULL)
		return entry;

	LWLockAcquire(PoolState->lock, LW_EXCLUSIVE);
	entry = hash_search(PoolHash, &key, HASH_ENTER_NULL, &found);
	if (entry != NULL && !found)
	{
		entry->connections = 0;
		entry->waiters = 0;
		entry->yieldRequests = 0;
		entry->nodeLimit = 0;
		entry->learnedAt = 0;
		entry->waits = 0;
		entry->timeouts = 0;
		ConditionVariableInit(&entry->slotFreed);
	}
	LWLockRelease(PoolState->lock);

	if (entry == NULL && !warnedFull)
	{
		warnedFull = true;
		ereport(LOG,
				(errmsg("shardext: the shared connection count is full (%d node addresses); "
						"connections to node %s:%d are not counted", MAX_POOL_NODES, host, port)));
	}
	return entry;
}

/*
 * PoolLimit is the number of connections to the node that backends may
 * hold together; the caller holds the lock.
 */
static int
PoolLimit(PoolEntry *entry)
{
	int			available;

	if (ShardextMaxSharedPoolSize < 0)
		return INT_MAX;
	if (ShardextMaxSharedPoolSize > 0)
		return ShardextMaxSharedPoolSize;
	available = entry->nodeLimit > 0 ? entry->nodeLimit : MaxConnections;
	return Max(1, available - available / 10);
}

/*
 * TryAcquirePoolSlot takes a slot of the node if the pool allows it now,
 * without waiting.  A required slot is granted while the count is below the
 * limit and nobody waits (so newcomers queue behind waiters); an optional
 * one only below nine tenths of the limit, which keeps room for other
 * sessions' first connections.  Maintenance daemons always get one.
 */
bool
TryAcquirePoolSlot(PoolEntry *entry, PoolSlotKind kind)
{
	bool		granted;

	if (entry == NULL || releasedAtExit)
		return true;

	LWLockAcquire(PoolState->lock, LW_EXCLUSIVE);
	if (poolExempt)
		granted = true;
	else
	{
		int			limit = PoolLimit(entry);

		if (kind == POOL_SLOT_OPTIONAL && limit != INT_MAX)
			limit -= limit / 10;
		granted = entry->waiters == 0 && entry->connections < limit;
	}
	if (granted)
		entry->connections++;
	LWLockRelease(PoolState->lock);

	if (granted)
		NoteHeldSlot(entry, 1);
	return granted;
}

/*
 * WaitForPoolSlot waits until a slot of the node is free and takes it, for
 * up to shardext.connection_wait_timeout; interrupts (cancel,
 * statement_timeout) are served while waiting.  Fails with
 * 53300 too_many_connections when the time is up.
 */
void
WaitForPoolSlot(PoolEntry *entry, const char *host, int32 port)
{
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz deadline = TimestampTzPlusMilliseconds(start, ShardextConnectionWaitTimeout);
	TimestampTz urgent = TimestampTzPlusMilliseconds(start, ShardextConnectionWaitTimeout / 3);
	bool		granted = false;
	bool		requested = false;
	int			limit = 0;

	if (entry == NULL || releasedAtExit)
		return;

	LWLockAcquire(PoolState->lock, LW_EXCLUSIVE);
	entry->waiters++;
	entry->waits++;
	waitingOn = entry;
	LWLockRelease(PoolState->lock);

	PG_TRY();
	{
		ConditionVariablePrepareToSleep(&entry->slotFreed);
		for (;;)
		{
			long		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
																	deadline);

			LWLockAcquire(PoolState->lock, LW_EXCLUSIVE);
			limit = PoolLimit(entry);
			if (entry->connections < limit)
			{
				entry->connections++;
				entry->waiters--;
				waitingOn = NULL;
				granted = true;
				/* a request not yet taken up is not needed any more */
				if (requested && entry->yieldRequests > 0)
					entry->yieldRequests--;
			}
			else if (remaining <= 0)
				entry->timeouts++;
			else if (!requested && GetCurrentTimestamp() >= urgent)
			{
				entry->yieldRequests++;
				requested = true;
			}
			LWLockRelease(PoolState->lock);

			if (granted || remaining <= 0)
				break;
			(void) ConditionVariableTimedSleep(&entry->slotFreed,
											   Min(remaining, POOL_RECHECK_MS),
											   PG_WAIT_EXTENSION);
		}
	}
	PG_FINALLY();
	{
		StopWaiting();
	}
	PG_END_TRY();

	if (granted)
	{
		NoteHeldSlot(entry, 1);
		/* more may be free: pass the wakeup on */
		ConditionVariableSignal(&entry->slotFreed);
		return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
			 errmsg("no connection to node %s:%d became free within %d ms",
					host, port, ShardextConnectionWaitTimeout),
			 errdetail("The sessions of this coordinator hold all %d connections to the node "
					   "that shardext.max_shared_pool_size allows.", limit),
			 errhint("Retry, use fewer client connections (a pooler such as pgbouncer in "
					 "front of the coordinator), or raise shardext.max_shared_pool_size "
					 "together with max_connections on the node.")));
}

/* StopWaiting ends this backend's wait for a slot, if any */
static void
StopWaiting(void)
{
	ConditionVariableCancelSleep();
	if (waitingOn != NULL)
	{
		LWLockAcquire(PoolState->lock, LW_EXCLUSIVE);
		waitingOn->waiters--;
		LWLockRelease(PoolState->lock);
		waitingOn = NULL;
	}
}

/* ReleasePoolSlot gives a slot back and wakes a waiter */
void
ReleasePoolSlot(PoolEntry *entry)
{
	int			waiters;

	if (entry == NULL || releasedAtExit)
		return;

	LWLockAcquire(PoolState->lock, LW_EXCLUSIVE);
	if (entry->connections > 0)
		entry->connections--;
	waiters = entry->waiters;
	LWLockRelease(PoolState->lock);
	NoteHeldSlot(entry, -1);

	if (waiters > 0)
		ConditionVariableSignal(&entry->slotFreed);
}

/*
 * PoolYieldRequested tells a holder at the end of a transaction that a
 * waiter has waited long and takes up the request: the caller gives a
 * connection to the node back.
 */
bool
PoolYieldRequested(PoolEntry *entry)
{
	bool		taken = false;

	if (entry == NULL || ((volatile PoolEntry *) entry)->yieldRequests == 0)
		return false;
	LWLockAcquire(PoolState->lock, LW_EXCLUSIVE);
	if (entry->yieldRequests > 0)
	{
		entry->yieldRequests--;
		taken = true;
	}
	LWLockRelease(PoolState->lock);
	return taken;
}

/*
 * PoolHasSpareRoom tells whether the node's pool can spare the slots of
 * connections a backend keeps beyond its first ones between transactions
 * (see connection.c): nobody waits and at most half of the slots are
 * taken, so that idle sessions keeping them can never hold more than half
 * of a node's slots.  Unlimited pools and nodes not counted always can.
 */
bool
PoolHasSpareRoom(PoolEntry *entry)
{
	bool		spare;
	int			limit;

	if (entry == NULL || releasedAtExit)
		return true;
	LWLockAcquire(PoolState->lock, LW_SHARED);
	limit = PoolLimit(entry);
	spare = entry->waiters == 0 &&
		(limit == INT_MAX || entry->connections <= limit / 2);
	LWLockRelease(PoolState->lock);
	return spare;
}

/*
 * PoolWaiters returns how many backends wait for a slot of the node; read
 * without the lock, as a hint (the connection cache gives idle connections
 * back at transaction end when others wait).
 */
int
PoolWaiters(PoolEntry *entry)
{
	if (entry == NULL)
		return 0;
	return ((volatile PoolEntry *) entry)->waiters;
}

/*
 * SetPoolNodeLimit records the node's usable connection slots (its
 * max_connections less superuser_reserved_connections); 0 forgets them,
 * so that the next connection learns them again.
 */
void
SetPoolNodeLimit(PoolEntry *entry, int nodeLimit)
{
	if (entry == NULL)
		return;
	LWLockAcquire(PoolState->lock, LW_EXCLUSIVE);
	entry->nodeLimit = Max(nodeLimit, 0);
	entry->learnedAt = GetCurrentTimestamp();
	LWLockRelease(PoolState->lock);
}

/*
 * PoolNodeLimitFresh: was the node's limit asked within the last maxAgeMs
 * (by any backend)?  Read without the lock, as a hint.
 */
bool
PoolNodeLimitFresh(PoolEntry *entry, int maxAgeMs)
{
	TimestampTz learnedAt;

	if (entry == NULL)
		return true;
	learnedAt = ((volatile PoolEntry *) entry)->learnedAt;
	return learnedAt != 0 &&
		!TimestampDifferenceExceeds(learnedAt, GetCurrentTimestamp(), maxAgeMs);
}

/*
 * SetPoolExempt makes this backend's connections count without waiting or
 * being refused (the maintenance daemons).
 */
void
SetPoolExempt(bool exempt)
{
	poolExempt = exempt;
}

/*
 * NoteHeldSlot keeps the backend-local count of held slots, which the exit
 * callback gives back.
 */
static void
NoteHeldSlot(PoolEntry *entry, int delta)
{
	int			i;

	if (!exitCallbackRegistered)
	{
		before_shmem_exit(ReleaseSlotsAtExit, (Datum) 0);
		exitCallbackRegistered = true;
	}
	for (i = 0; i < heldSlotsLength; i++)
	{
		if (heldSlots[i].entry == entry)
			break;
	}
	if (i == heldSlotsLength)
	{
		for (i = 0; i < heldSlotsLength; i++)
		{
			if (heldSlots[i].count == 0)
				break;
		}
		if (i == heldSlotsLength)
		{
			int			newLength = Max(8, heldSlotsLength * 2);

			if (heldSlots == NULL)
				heldSlots = MemoryContextAllocZero(TopMemoryContext,
												   newLength * sizeof(HeldSlots));
			else
			{
				heldSlots = repalloc(heldSlots, newLength * sizeof(HeldSlots));
				memset(heldSlots + heldSlotsLength, 0,
					   (newLength - heldSlotsLength) * sizeof(HeldSlots));
			}
			heldSlotsLength = newLength;
		}
		heldSlots[i].entry = entry;
		heldSlots[i].count = 0;
	}
	heldSlots[i].count += delta;
	Assert(heldSlots[i].count >= 0);
}

/*
 * ReleaseSlotsAtExit gives back every slot the exiting backend still holds
 * (its sockets close with the process) and ends a wait it was in.
 */
static void
ReleaseSlotsAtExit(int code, Datum arg)
{
	if (PoolState == NULL)
		return;
	StopWaiting();
	LWLockAcquire(PoolState->lock, LW_EXCLUSIVE);
	for (int i = 0; i < heldSlotsLength; i++)
	{
		PoolEntry  *entry = heldSlots[i].entry;

		if (entry == NULL || heldSlots[i].count == 0)
			continue;
		entry->connections = Max(entry->connections - heldSlots[i].count, 0);
		heldSlots[i].count = 0;
		if (entry->waiters > 0)
			ConditionVariableBroadcast(&entry->slotFreed);
	}
	LWLockRelease(PoolState->lock);
	releasedAtExit = true;
}

/*
 * shardext_connection_stats() returns one row per node address this
 * coordinator has connected to: connections held by all its backends,
 * backends waiting for one, the limit in force, how often backends waited
 * or gave up waiting, and the connections the calling session holds.
 */
Datum
shardext_connection_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASH_SEQ_STATUS status;
	PoolEntry  *entry;

	InitMaterializedSRF(fcinfo, 0);
	if (PoolHash == NULL)
		return (Datum) 0;

	LWLockAcquire(PoolState->lock, LW_SHARED);
	hash_seq_init(&status, PoolHash);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		Datum		values[8];
		bool		nulls[8] = {false, false, false, false, false, false, false, false};
		int			limit = PoolLimit(entry);
		int			own = 0;

		for (int i = 0; i < heldSlotsLength; i++)
		{
			if (heldSlots[i].entry == entry)
				own = heldSlots[i].count;
		}
		values[0] = CStringGetTextDatum(entry->key.host);
		values[1] = Int32GetDatum(entry->key.port);
		values[2] = Int32GetDatum(entry->connections);
		values[3] = Int32GetDatum(entry->waiters);
		if (limit == INT_MAX)
			nulls[4] = true;
		else
			values[4] = Int32GetDatum(limit);
		values[5] = Int64GetDatum((int64) entry->waits);
		values[6] = Int64GetDatum((int64) entry->timeouts);
		values[7] = Int32GetDatum(own);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(PoolState->lock);
	return (Datum) 0;
}
