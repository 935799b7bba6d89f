/*-------------------------------------------------------------------------
 *
 * resource_lock.c
 *	  Coordinator-side heavyweight locks on shards (see resource_lock.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/inval.h"

#include "shardext/resource_lock.h"

static void
SetShardLockTag(LOCKTAG *tag, int64 shardId)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) ((uint64) shardId >> 32),
						 (uint32) shardId, SHARDEXT_LOCK_CLASS_SHARD);
}

/*
 * LockShardResource takes a transaction-level lock on a shard, waiting if
 * needed.  A wait may have let a concurrent move or split commit, so the
 * caller looks up placements only after this returns; invalidations that
 * arrived while waiting are processed here.
 */
void
LockShardResource(int64 shardId, LOCKMODE mode)
{
	LOCKTAG		tag;

	SetShardLockTag(&tag, shardId);
	if (LockAcquire(&tag, mode, false, false) != LOCKACQUIRE_ALREADY_HELD)
		AcceptInvalidationMessages();
}

/* TryLockShardResource is LockShardResource without waiting */
bool
TryLockShardResource(int64 shardId, LOCKMODE mode)
{
	LOCKTAG		tag;

	SetShardLockTag(&tag, shardId);
	return LockAcquire(&tag, mode, false, true) != LOCKACQUIRE_NOT_AVAIL;
}

void
UnlockShardResource(int64 shardId, LOCKMODE mode)
{
	LOCKTAG		tag;

	SetShardLockTag(&tag, shardId);
	LockRelease(&tag, mode, false);
}
