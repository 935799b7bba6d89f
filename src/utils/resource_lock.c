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

/*
 * UnlockShardResource releases one hold of a shard lock taken with
 * LockShardResource before the end of the transaction (a hold the
 * transaction had before stays).
 */
void
UnlockShardResource(int64 shardId, LOCKMODE mode)
{
	LOCKTAG		tag;

	SetShardLockTag(&tag, shardId);
	LockRelease(&tag, mode, false);
}

/*
 * LockShardsInOrder locks each of count shards (sorting ids in place) in
 * shard id order, the order every writer and move uses, so that two of them
 * never wait for each other's locks.
 */
void
LockShardsInOrder(int64 *ids, int count, LOCKMODE mode)
{
	for (int i = 1; i < count; i++)
	{
		int64		key = ids[i];
		int			j = i - 1;

		while (j >= 0 && ids[j] > key)
		{
			ids[j + 1] = ids[j];
			j--;
		}
		ids[j + 1] = key;
	}
	for (int i = 0; i < count; i++)
		LockShardResource(ids[i], mode);
}
