/*-------------------------------------------------------------------------
 *
 * shared_pool.h
 *	  The shared count of connections to each node across all backends of
 *	  the coordinator (shardext.max_shared_pool_size).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_SHARED_POOL_H
#define SHARDEXT_SHARED_POOL_H

#include "postgres.h"

typedef struct PoolEntry PoolEntry;

/* what a backend asks the pool for */
typedef enum PoolSlotKind
{
	POOL_SLOT_REQUIRED,			/* the first connection to a node: waits */
	POOL_SLOT_OPTIONAL			/* one more for parallelism: only if the pool has room */
} PoolSlotKind;

extern void SharedPoolShmemRequest(void);
extern void SharedPoolShmemInit(void);

extern PoolEntry *GetPoolEntry(const char *host, int32 port);
extern bool TryAcquirePoolSlot(PoolEntry *entry, PoolSlotKind kind);
extern void WaitForPoolSlot(PoolEntry *entry, const char *host, int32 port);
extern void ReleasePoolSlot(PoolEntry *entry);
extern int	PoolWaiters(PoolEntry *entry);
extern bool PoolHasSpareRoom(PoolEntry *entry);
extern bool PoolYieldRequested(PoolEntry *entry);
extern void SetPoolNodeLimit(PoolEntry *entry, int nodeLimit);
extern bool PoolNodeLimitFresh(PoolEntry *entry, int maxAgeMs);
extern void SetPoolExempt(bool exempt);

#endif							/* SHARDEXT_SHARED_POOL_H */
