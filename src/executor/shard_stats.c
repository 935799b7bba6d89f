/*-------------------------------------------------------------------------
 *
 * shard_stats.c
 *	  Per-shard counters of the statements routed to each shard, kept in
 *	  shared memory so every backend's work shows up in one place
 *	  (view shardext.stat_shards; reset with shardext_stat_shards_reset()).
 *
 * The table is a fixed-size shared hash; a shard seen for the first time
 * takes the lock exclusively once, later counts take it shared and bump
 * an atomic counter.  When the table is full, new shards are not counted.
 * Shard ids are per database (each coordinator database has its own
 * sequence), so the database is part of the key.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "shardext/distributed_plan.h"
#include "shardext/pg_compat.h"

#define MAX_COUNTED_SHARDS 20000

typedef struct ShardStatsKey
{
	int64		shardId;
	Oid			databaseId;
	int32		padding;		/* zero: the key is hashed as bytes */
} ShardStatsKey;

typedef struct ShardStatsEntry
{
	ShardStatsKey key;			/* hash key */
	pg_atomic_uint64 queries;
} ShardStatsEntry;

typedef struct ShardStatsShared
{
	LWLock	   *lock;
	pg_atomic_uint64 resetTime; /* TimestampTz of the last reset */
} ShardStatsShared;

static ShardStatsShared *ShardStats = NULL;
static HTAB *ShardStatsHash = NULL;

PG_FUNCTION_INFO_V1(shardext_stat_shards);
PG_FUNCTION_INFO_V1(shardext_stat_shards_reset);

/* ShardStatsShmemRequest reserves the counters and their lock */
void
ShardStatsShmemRequest(void)
{
	RequestAddinShmemSpace(ShardStatsShmemSize());
	RequestNamedLWLockTranche("shardext shard stats", 1);
}

Size
ShardStatsShmemSize(void)
{
	return add_size(MAXALIGN(sizeof(ShardStatsShared)),
					hash_estimate_size(MAX_COUNTED_SHARDS, sizeof(ShardStatsEntry)));
}

/* creates or attaches to the counters; also requests the lock tranche */
void
ShardStatsShmemInit(void)
{
	bool		found;
	HASHCTL		info;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	ShardStats = ShmemInitStruct("shardext shard stats", sizeof(ShardStatsShared), &found);
	if (!found)
	{
		ShardStats->lock = &(GetNamedLWLockTranche("shardext shard stats"))->lock;
		pg_atomic_init_u64(&ShardStats->resetTime, (uint64) GetCurrentTimestamp());
	}
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(ShardStatsKey);
	info.entrysize = sizeof(ShardStatsEntry);
	ShardStatsHash = ShmemInitFixedHash("shardext shard stats hash", MAX_COUNTED_SHARDS,
										&info, HASH_ELEM | HASH_BLOBS);
	LWLockRelease(AddinShmemInitLock);
}

/* the key of a shard of this database */
static inline ShardStatsKey
ShardKey(int64 shardId)
{
	ShardStatsKey key;

	memset(&key, 0, sizeof(key));
	key.shardId = shardId;
	key.databaseId = MyDatabaseId;
	return key;
}

/* CountShardQuery adds one statement to a shard's counter */
void
CountShardQuery(int64 shardId)
{
	ShardStatsEntry *entry;
	ShardStatsKey key = ShardKey(shardId);
	bool		found;

	if (ShardStats == NULL || shardId <= 0)
		return;					/* no shard: a repartition join's partition */
	LWLockAcquire(ShardStats->lock, LW_SHARED);
	entry = hash_search(ShardStatsHash, &key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		pg_atomic_fetch_add_u64(&entry->queries, 1);
		LWLockRelease(ShardStats->lock);
		return;
	}
	LWLockRelease(ShardStats->lock);

	LWLockAcquire(ShardStats->lock, LW_EXCLUSIVE);
	entry = hash_search(ShardStatsHash, &key, HASH_ENTER_NULL, &found);
	if (entry != NULL)
	{
		if (!found)
			pg_atomic_init_u64(&entry->queries, 0);
		pg_atomic_fetch_add_u64(&entry->queries, 1);
	}
	LWLockRelease(ShardStats->lock);
}

/*
 * ShardQueryCount returns the statements counted for a shard since the
 * last reset (0 when it was not counted); the rebalancer's by_load reads it.
 */
int64
ShardQueryCount(int64 shardId)
{
	ShardStatsEntry *entry;
	ShardStatsKey key = ShardKey(shardId);
	int64		count = 0;

	if (ShardStats == NULL)
		return 0;
	LWLockAcquire(ShardStats->lock, LW_SHARED);
	entry = hash_search(ShardStatsHash, &key, HASH_FIND, NULL);
	if (entry != NULL)
		count = (int64) pg_atomic_read_u64(&entry->queries);
	LWLockRelease(ShardStats->lock);
	return count;
}

/* shardext_stat_shards() returns (shard_id, queries, since) for counted shards */
Datum
shardext_stat_shards(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASH_SEQ_STATUS status;
	ShardStatsEntry *entry;
	TimestampTz since;

	InitMaterializedSRF(fcinfo, 0);
	if (ShardStats == NULL)
		PG_RETURN_VOID();
	since = (TimestampTz) pg_atomic_read_u64(&ShardStats->resetTime);

	LWLockAcquire(ShardStats->lock, LW_SHARED);
	hash_seq_init(&status, ShardStatsHash);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		if (entry->key.databaseId != MyDatabaseId)
			continue;
		values[0] = Int64GetDatum(entry->key.shardId);
		values[1] = Int64GetDatum((int64) pg_atomic_read_u64(&entry->queries));
		values[2] = TimestampTzGetDatum(since);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(ShardStats->lock);
	PG_RETURN_VOID();
}

/* shardext_stat_shards_reset() forgets the counters of this database */
Datum
shardext_stat_shards_reset(PG_FUNCTION_ARGS)
{
	HASH_SEQ_STATUS status;
	ShardStatsEntry *entry;

	if (ShardStats == NULL)
		PG_RETURN_VOID();
	LWLockAcquire(ShardStats->lock, LW_EXCLUSIVE);
	hash_seq_init(&status, ShardStatsHash);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (entry->key.databaseId == MyDatabaseId)
			hash_search(ShardStatsHash, &entry->key, HASH_REMOVE, NULL);
	}
	pg_atomic_write_u64(&ShardStats->resetTime, (uint64) GetCurrentTimestamp());
	LWLockRelease(ShardStats->lock);
	PG_RETURN_VOID();
}
