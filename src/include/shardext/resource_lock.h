/*-------------------------------------------------------------------------
 *
 * resource_lock.h
 *	  Coordinator-side locks on shards.
 *
 * Writers take a lock on every shard they write, in shard id order, before
 * they look up its placements; shard moves and splits take a conflicting
 * lock for their cutover, so writes wait (and then see the new placement)
 * while reads go on.  The locks are advisory-style heavyweight locks with
 * class SHARDEXT_LOCK_CLASS_SHARD, visible in pg_locks, released at the end
 * of the transaction.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_RESOURCE_LOCK_H
#define SHARDEXT_RESOURCE_LOCK_H

#include "storage/lockdefs.h"

/* pg_locks.objsubid of shardext's shard locks (1 and 2 are PostgreSQL's own) */
#define SHARDEXT_LOCK_CLASS_SHARD 10

/*
 * A statement that writes one placement of one shard takes
 * ShardWriteLockMode, which does not conflict with itself: such writers
 * only meet in the worker's row locks, where the worker's deadlock
 * detector sees them.  A statement that writes several shards or several
 * placements (a multi-shard UPDATE/DELETE, any write to a reference table)
 * could deadlock with another one across nodes, where no detector sees
 * it; it takes the self-conflicting ShardMultiWriteLockMode, so such
 * statements (and single-shard writers of the same shards) queue up on the
 * coordinator, in shard id order, instead.  A move's cutover takes
 * ShardCutoverLockMode, which conflicts with both, not with readers.
 */
#define ShardWriteLockMode RowExclusiveLock
#define ShardMultiWriteLockMode ShareRowExclusiveLock
#define ShardCutoverLockMode ExclusiveLock

extern void LockShardResource(int64 shardId, LOCKMODE mode);
extern void UnlockShardResource(int64 shardId, LOCKMODE mode);
extern void LockShardsInOrder(int64 *ids, int count, LOCKMODE mode);

#endif							/* SHARDEXT_RESOURCE_LOCK_H */
