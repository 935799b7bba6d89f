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

/* a router write / a move's cutover */
#define ShardWriteLockMode RowExclusiveLock
#define ShardCutoverLockMode ExclusiveLock

extern void LockShardResource(int64 shardId, LOCKMODE mode);
extern bool TryLockShardResource(int64 shardId, LOCKMODE mode);
extern void UnlockShardResource(int64 shardId, LOCKMODE mode);

#endif							/* SHARDEXT_RESOURCE_LOCK_H */
