/*-------------------------------------------------------------------------
 *
 * tenant_stats.c
 *	  Per-tenant statement counters (view shardext.stat_tenants; reset with
 *	  shardext_stat_tenants_reset()): which distribution column values of a
 *	  colocation group receive the most single-shard statements.
 *
 * A tenant is a hash value of the distribution column within a colocation
 * group (the unit a shard can be cut down to, see shardext_isolate_tenant).
 * Millions of tenants must cost a fixed amount of memory, so the counters
 * follow the Space-Saving algorithm (Metwally, Agrawal, El Abbadi 2005):
 * shardext.stat_tenants_limit (K) entries in shared memory; a tenant not
 * tracked takes over the entry with the smallest counter, inheriting that
 * counter as its error.  Every tenant whose true count exceeds N / K (N
 * the statements counted in the period) is tracked, and a tracked tenant's
 * true count lies between its observed count and observed count + error,
 * where error <= N / K.  The view shows the error with each entry.
 *
 * The entries form a binary min-heap on their counters (the entry to take
 * over is at its root; each heap slot carries a copy of its entry's
 * counters, so that sifting reads one compact array) and a shared hash
 * table finds a tenant's entry.  One LWLock guards both; it is taken,
 * exclusively, only by sampled statements (shardext.stat_tenants_sample_rate;
 * each sampled statement counts 1 / rate), and by readers of the view.
 *
 * Colocation group ids are per database, so the database is part of a
 * tenant's key, and all databases share the K entries (N above counts the
 * statements of every database).  Each database's total of counted
 * statements, which shares are taken of, is kept beside the heap.
 *
 * Counts are kept for the current period (shardext.stat_tenants_period) and
 * the previous one: when a period ends, the current counts become the
 * previous ones and counting starts again from zero (the heap then orders
 * entries by the previous counts, so last period's hot tenants stay).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/pg_prng.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "shardext/guc.h"
#include "shardext/pg_compat.h"
#include "shardext/tenant_stats.h"

#define TENANT_STATS_COLUMNS 15

/* databases whose totals are kept (beyond, shares are not shown) */
#define MAX_COUNTED_DATABASES 64

typedef struct TenantKey
{
	Oid			databaseId;
	int32		colocationId;
	int32		hash;
} TenantKey;

/* counts of one period */
typedef struct TenantCounts
{
	double		reads;
	double		writes;
	double		error;			/* Space-Saving overestimate bound */
	double		elapsedMs;
} TenantCounts;

typedef struct TenantEntry
{
	TenantKey	key;			/* hash key */
	int			heapIndex;
	Oid			relid;
	TenantCounts current;
	TenantCounts previous;
	char		value[TENANT_VALUE_LEN];
} TenantEntry;

/* a heap slot: the entry and a copy of what the heap is ordered by */
typedef struct HeapSlot
{
	double		counter;		/* reads + writes + error, current period */
	double		previous;		/* reads + writes, previous period */
	TenantEntry *entry;
} HeapSlot;

/* statements counted for one database */
typedef struct DatabaseTotal
{
	Oid			databaseId;		/* InvalidOid: a free slot */
	double		current;
	double		previous;
} DatabaseTotal;

typedef struct TenantStatsShared
{
	LWLock	   *lock;
	int			capacity;
	int			count;
	uint64		takeovers;		/* entries made so far: tells that the hash changed */
	TimestampTz periodStart;
	DatabaseTotal totals[MAX_COUNTED_DATABASES];
	HeapSlot	heap[FLEXIBLE_ARRAY_MEMBER];
} TenantStatsShared;

static TenantStatsShared *TenantStats = NULL;
static HTAB *TenantStatsHash = NULL;

/* what this backend knows of the last distribution column type it sampled */
static struct
{
	Oid			type;
	int16		length;
	bool		byValue;
	FmgrInfo	output;
}			SampledType = {InvalidOid};

PG_FUNCTION_INFO_V1(shardext_stat_tenants);
PG_FUNCTION_INFO_V1(shardext_stat_tenants_reset);

static Size
TenantStatsStructSize(void)
{
	return add_size(offsetof(TenantStatsShared, heap),
					mul_size(sizeof(HeapSlot), ShardextStatTenantsLimit));
}

/* TenantStatsShmemSize: the fixed size of the counters, from the limit */
Size
TenantStatsShmemSize(void)
{
	if (ShardextStatTenantsLimit <= 0)
		return 0;
	return add_size(MAXALIGN(TenantStatsStructSize()),
					hash_estimate_size(ShardextStatTenantsLimit, sizeof(TenantEntry)));
}

/* TenantStatsShmemRequest reserves the counters and their lock */
void
TenantStatsShmemRequest(void)
{
	if (ShardextStatTenantsLimit <= 0)
		return;
	RequestAddinShmemSpace(TenantStatsShmemSize());
	RequestNamedLWLockTranche("shardext tenant stats", 1);
}

/* TenantStatsShmemInit creates or attaches to the counters */
void
TenantStatsShmemInit(void)
{
	bool		found;
	HASHCTL		info;

	if (ShardextStatTenantsLimit <= 0)
		return;
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	TenantStats = ShmemInitStruct("shardext tenant stats", TenantStatsStructSize(), &found);
	if (!found)
	{
		memset(TenantStats, 0, offsetof(TenantStatsShared, heap));
		TenantStats->lock = &(GetNamedLWLockTranche("shardext tenant stats"))->lock;
		TenantStats->capacity = ShardextStatTenantsLimit;
		TenantStats->periodStart = GetCurrentTimestamp();
	}
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(TenantKey);
	info.entrysize = sizeof(TenantEntry);
	TenantStatsHash = ShmemInitFixedHash("shardext tenant stats hash",
										 ShardextStatTenantsLimit, &info,
										 HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	LWLockRelease(AddinShmemInitLock);
}

/*
 * TenantStatsSampleNext decides whether the statement being planned into
 * tasks is sampled; cheap when it is not (no lock, no allocation).
 */
bool
TenantStatsSampleNext(void)
{
	if (TenantStats == NULL || ShardextStatTenantsSampleRate <= 0)
		return false;
	return ShardextStatTenantsSampleRate >= 1.0 ||
		pg_prng_double(&pg_global_prng_state) < ShardextStatTenantsSampleRate;
}

/*
 * TenantSampleBegin notes the tenant of a sampled single-shard statement:
 * the hash of its distribution value and a copy of the value (its text is
 * made only for a tenant not tracked yet).  Allocated in the current
 * memory context, which must live until TenantSampleEnd.
 */
TenantSample *
TenantSampleBegin(DistTableCacheEntry *entry, Datum value, bool write)
{
	TenantSample *sample = palloc(sizeof(TenantSample));

	sample->relid = entry->relid;
	sample->colocationId = entry->colocationId;
	sample->hash = HashDistributionValue(entry, value);
	sample->write = write;
	sample->weight = ShardextStatTenantsSampleRate >= 1.0 ? 1.0 :
		1.0 / ShardextStatTenantsSampleRate;
	if (SampledType.type != entry->distType)
	{
		Oid			outputFunction;
		bool		isVarlena;

		SampledType.type = InvalidOid;
		get_typlenbyval(entry->distType, &SampledType.length, &SampledType.byValue);
		getTypeOutputInfo(entry->distType, &outputFunction, &isVarlena);
		fmgr_info_cxt(outputFunction, &SampledType.output, TopMemoryContext);
		SampledType.type = entry->distType;
	}
	sample->type = entry->distType;
	sample->typeLength = SampledType.length;
	sample->typeByValue = SampledType.byValue;
	sample->value = datumCopy(value, sample->typeByValue, sample->typeLength);
	sample->start = GetCurrentTimestamp();
	return sample;
}

/* SampleValueText writes the text of a sample's value, cut to fit, into buf */
static void
SampleValueText(TenantSample *sample, char *buf)
{
	char	   *text;
	int			length;

	if (SampledType.type == sample->type)
		text = OutputFunctionCall(&SampledType.output, sample->value);
	else
	{
		/* a nested statement sampled another type meanwhile */
		Oid			outputFunction;
		bool		isVarlena;

		getTypeOutputInfo(sample->type, &outputFunction, &isVarlena);
		text = OidOutputFunctionCall(outputFunction, sample->value);
	}
	length = pg_mbcliplen(text, strlen(text), TENANT_VALUE_LEN - 1);
	memcpy(buf, text, length);
	buf[length] = '\0';
	pfree(text);
}

/* SlotBelow orders the heap: by counter, ties by the previous period */
static inline bool
SlotBelow(const HeapSlot *a, const HeapSlot *b)
{
	if (a->counter != b->counter)
		return a->counter < b->counter;
	return a->previous < b->previous;
}

/* HeapSet puts a slot at index and tells its entry where it is */
static inline void
HeapSet(int index, HeapSlot slot)
{
	TenantStats->heap[index] = slot;
	slot.entry->heapIndex = index;
}

/* SyncSlot copies an entry's counters into its heap slot */
static inline void
SyncSlot(TenantEntry *entry)
{
	HeapSlot   *slot = &TenantStats->heap[entry->heapIndex];

	slot->counter = entry->current.reads + entry->current.writes + entry->current.error;
	slot->previous = entry->previous.reads + entry->previous.writes;
}

/* moves the slot at index towards the root while it is below its parent */
static void
HeapSiftUp(int index)
{
	HeapSlot	slot = TenantStats->heap[index];

	while (index > 0)
	{
		int			parent = (index - 1) / 2;

		if (!SlotBelow(&slot, &TenantStats->heap[parent]))
			break;
		HeapSet(index, TenantStats->heap[parent]);
		index = parent;
	}
	HeapSet(index, slot);
}

/* moves the slot at index towards the leaves while a child is below it */
static void
HeapSiftDown(int index)
{
	HeapSlot	slot = TenantStats->heap[index];
	HeapSlot   *heap = TenantStats->heap;
	int			count = TenantStats->count;

	for (;;)
	{
		int			child = 2 * index + 1;

		if (child >= count)
			break;
		if (child + 1 < count && SlotBelow(&heap[child + 1], &heap[child]))
			child++;
		if (!SlotBelow(&heap[child], &slot))
			break;
		HeapSet(index, heap[child]);
		index = child;
	}
	HeapSet(index, slot);
}

/* DatabaseTotalOf returns this database's total, creating it (or NULL when full) */
static DatabaseTotal *
DatabaseTotalOf(Oid databaseId, bool create)
{
	DatabaseTotal *free = NULL;

	for (int i = 0; i < MAX_COUNTED_DATABASES; i++)
	{
		DatabaseTotal *total = &TenantStats->totals[i];

		if (total->databaseId == databaseId)
			return total;
		if (free == NULL && total->databaseId == InvalidOid)
			free = total;
	}
	if (create && free != NULL)
	{
		free->databaseId = databaseId;
		free->current = free->previous = 0;
		return free;
	}
	return NULL;
}

/*
 * RotatePeriods starts a new period when the current one is over (with the
 * lock held exclusively): current counts become the previous ones, or
 * nothing is kept when more than a whole period passed without a rotation.
 */
static void
RotatePeriods(TimestampTz now)
{
	int64		periodUs = (int64) ShardextStatTenantsPeriod * USECS_PER_SEC;
	int64		elapsed = now - TenantStats->periodStart;
	bool		keepPrevious = elapsed < 2 * periodUs;

	if (elapsed < periodUs)
		return;
	for (int i = 0; i < TenantStats->count; i++)
	{
		TenantEntry *entry = TenantStats->heap[i].entry;

		if (keepPrevious)
			entry->previous = entry->current;
		else
			memset(&entry->previous, 0, sizeof(TenantCounts));
		memset(&entry->current, 0, sizeof(TenantCounts));
		SyncSlot(entry);
	}
	for (int i = 0; i < MAX_COUNTED_DATABASES; i++)
	{
		TenantStats->totals[i].previous = keepPrevious ? TenantStats->totals[i].current : 0;
		TenantStats->totals[i].current = 0;
	}
	TenantStats->periodStart += (elapsed / periodUs) * periodUs;
	for (int i = TenantStats->count / 2 - 1; i >= 0; i--)
		HeapSiftDown(i);
}

/*
 * TakeOverEntry makes an entry for a key that is not tracked: a free one,
 * or the one with the smallest counter, whose counter the newcomer inherits
 * as its error.
 */
static TenantEntry *
TakeOverEntry(TenantKey *key, Oid relid, const char *value)
{
	TenantEntry *entry;
	double		inherited = 0;
	bool		found;
	int			index;

	TenantStats->takeovers++;
	if (TenantStats->count < TenantStats->capacity)
	{
		index = TenantStats->count++;
		entry = hash_search(TenantStatsHash, key, HASH_ENTER_NULL, &found);
		if (entry == NULL)
			elog(ERROR, "shardext tenant statistics are out of entries");
	}
	else
	{
		/* the smallest entry changes hands: one hash operation */
		index = 0;
		entry = TenantStats->heap[0].entry;
		inherited = TenantStats->heap[0].counter;
		if (!hash_update_hash_key(TenantStatsHash, entry, key))
			elog(ERROR, "shardext tenant statistics track a tenant twice");
	}
	memset(((char *) entry) + sizeof(TenantKey), 0, sizeof(TenantEntry) - sizeof(TenantKey));
	entry->relid = relid;
	entry->current.error = inherited;
	strlcpy(entry->value, value, TENANT_VALUE_LEN);
	TenantStats->heap[index].entry = entry;
	entry->heapIndex = index;
	SyncSlot(entry);
	if (index > 0)
		HeapSiftUp(index);
	return entry;
}

/*
 * TenantSampleEnd counts a sampled statement that finished: one (weighted)
 * read or write for its tenant and the time since TenantSampleBegin.
 */
void
TenantSampleEnd(TenantSample *sample)
{
	TimestampTz now;
	TenantKey	key;
	TenantEntry *entry;
	DatabaseTotal *total;
	double		elapsedMs;
	char		text[TENANT_VALUE_LEN] = "";

	if (TenantStats == NULL || sample == NULL)
		return;
	now = GetCurrentTimestamp();
	elapsedMs = (double) (now - sample->start) / 1000.0;
	key.databaseId = MyDatabaseId;
	key.colocationId = sample->colocationId;
	key.hash = sample->hash;

	LWLockAcquire(TenantStats->lock, LW_EXCLUSIVE);
	entry = hash_search(TenantStatsHash, &key, HASH_FIND, NULL);
	if (entry == NULL)
	{
		/* a tenant not tracked needs its text: made without the lock */
		uint64		takeovers = TenantStats->takeovers;

		LWLockRelease(TenantStats->lock);
		SampleValueText(sample, text);
		LWLockAcquire(TenantStats->lock, LW_EXCLUSIVE);
		if (TenantStats->takeovers != takeovers)
			entry = hash_search(TenantStatsHash, &key, HASH_FIND, NULL);
	}
	RotatePeriods(now);
	total = DatabaseTotalOf(MyDatabaseId, true);
	if (total != NULL)
		total->current += sample->weight;
	if (entry == NULL)
		entry = TakeOverEntry(&key, sample->relid, text);
	if (sample->write)
		entry->current.writes += sample->weight;
	else
		entry->current.reads += sample->weight;
	entry->current.elapsedMs += sample->weight * elapsedMs;
	SyncSlot(entry);
	HeapSiftDown(entry->heapIndex);
	LWLockRelease(TenantStats->lock);
}

/* rounds a weighted count for display */
static Datum
CountDatum(double count)
{
	return Int64GetDatum((int64) (count + 0.5));
}

/*
 * shardext_stat_tenants() returns one row per tracked tenant of this
 * database: colocation group, table, hash, value, the current and previous
 * period's counts, and the totals the shares are taken of.
 */
Datum
shardext_stat_tenants(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DatabaseTotal *total;

	InitMaterializedSRF(fcinfo, 0);
	if (TenantStats == NULL)
		PG_RETURN_VOID();

	/* exclusive: reading may start a new period */
	LWLockAcquire(TenantStats->lock, LW_EXCLUSIVE);
	RotatePeriods(GetCurrentTimestamp());
	total = DatabaseTotalOf(MyDatabaseId, false);
	for (int i = 0; i < TenantStats->count; i++)
	{
		TenantEntry *entry = TenantStats->heap[i].entry;
		Datum		values[TENANT_STATS_COLUMNS];
		bool		nulls[TENANT_STATS_COLUMNS] = {false};

		if (entry->key.databaseId != MyDatabaseId ||
			entry->current.reads + entry->current.writes +
			entry->previous.reads + entry->previous.writes <= 0)
			continue;
		values[0] = Int32GetDatum(entry->key.colocationId);
		values[1] = ObjectIdGetDatum(entry->relid);
		values[2] = Int32GetDatum(entry->key.hash);
		values[3] = CStringGetTextDatum(entry->value);
		values[4] = CountDatum(entry->current.reads);
		values[5] = CountDatum(entry->current.writes);
		values[6] = CountDatum(entry->current.error);
		values[7] = Float8GetDatum(entry->current.elapsedMs);
		values[8] = CountDatum(entry->previous.reads);
		values[9] = CountDatum(entry->previous.writes);
		values[10] = CountDatum(entry->previous.error);
		values[11] = Float8GetDatum(entry->previous.elapsedMs);
		values[12] = CountDatum(total ? total->current : 0);
		values[13] = CountDatum(total ? total->previous : 0);
		nulls[12] = nulls[13] = (total == NULL);
		values[14] = TimestampTzGetDatum(TenantStats->periodStart);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(TenantStats->lock);
	PG_RETURN_VOID();
}

/*
 * DroppedDatabases returns the databases that tenants are counted for but
 * that no longer exist (palloc'd, *count of them).  The lock is not held
 * while the catalog is read.
 */
static Oid *
DroppedDatabases(int *count)
{
	Oid		   *seen = palloc(sizeof(Oid) * (MAX_COUNTED_DATABASES + TenantStats->capacity));
	int			seenCount = 0;
	Oid		   *dropped;

	LWLockAcquire(TenantStats->lock, LW_SHARED);
	for (int i = 0; i < MAX_COUNTED_DATABASES + TenantStats->count; i++)
	{
		Oid			databaseId = i < MAX_COUNTED_DATABASES ? TenantStats->totals[i].databaseId :
			TenantStats->heap[i - MAX_COUNTED_DATABASES].entry->key.databaseId;
		bool		known = databaseId == InvalidOid;

		for (int j = 0; j < seenCount && !known; j++)
			known = seen[j] == databaseId;
		if (!known)
			seen[seenCount++] = databaseId;
	}
	LWLockRelease(TenantStats->lock);

	dropped = palloc(sizeof(Oid) * Max(seenCount, 1));
	*count = 0;
	for (int j = 0; j < seenCount; j++)
	{
		if (!SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(seen[j])))
			dropped[(*count)++] = seen[j];
	}
	return dropped;
}

/* ForgetDatabase: whether a reset removes the counts of a database */
static bool
ForgetDatabase(Oid databaseId, Oid *dropped, int droppedCount)
{
	if (databaseId == MyDatabaseId)
		return true;
	for (int j = 0; j < droppedCount; j++)
	{
		if (databaseId == dropped[j])
			return true;
	}
	return false;
}

/*
 * shardext_stat_tenants_reset() forgets every tenant of this database (and
 * its total), and those of databases dropped since they were counted; the
 * periods go on.
 */
Datum
shardext_stat_tenants_reset(PG_FUNCTION_ARGS)
{
	int			kept = 0;
	int			droppedCount;
	Oid		   *dropped;

	if (TenantStats == NULL)
		PG_RETURN_VOID();
	dropped = DroppedDatabases(&droppedCount);
	LWLockAcquire(TenantStats->lock, LW_EXCLUSIVE);
	for (int i = 0; i < TenantStats->count; i++)
	{
		HeapSlot	slot = TenantStats->heap[i];

		if (ForgetDatabase(slot.entry->key.databaseId, dropped, droppedCount))
			hash_search(TenantStatsHash, &slot.entry->key, HASH_REMOVE, NULL);
		else
			HeapSet(kept++, slot);
	}
	TenantStats->count = kept;
	TenantStats->takeovers++;
	for (int i = kept / 2 - 1; i >= 0; i--)
		HeapSiftDown(i);
	for (int i = 0; i < MAX_COUNTED_DATABASES; i++)
	{
		if (ForgetDatabase(TenantStats->totals[i].databaseId, dropped, droppedCount))
			memset(&TenantStats->totals[i], 0, sizeof(DatabaseTotal));
	}
	LWLockRelease(TenantStats->lock);
	PG_RETURN_VOID();
}
