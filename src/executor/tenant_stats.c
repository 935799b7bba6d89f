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
 * over is at its root) and a shared hash table finds a tenant's entry.  One
 * LWLock guards both; it is taken, exclusively, only by sampled
 * statements (shardext.stat_tenants_sample_rate; each sampled statement
 * counts 1 / rate), and by readers of the view.
 *
 * Colocation group ids are per database, so the database is part of a
 * tenant's key.  Each database has one more entry, never taken over, that
 * counts all its sampled statements: the total that shares are taken of.
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

#include "shardext/guc.h"
#include "shardext/tenant_stats.h"

#define TENANT_STATS_COLUMNS 15

typedef struct TenantKey
{
	Oid			databaseId;
	int32		colocationId;	/* TOTAL_COLOCATION_ID: the database's total */
	int32		hash;
} TenantKey;

/* colocation ids start at 1; this one names a database's total entry */
#define TOTAL_COLOCATION_ID 0

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

typedef struct TenantStatsShared
{
	LWLock	   *lock;
	int			capacity;
	int			count;
	TimestampTz periodStart;
	TenantEntry *heap[FLEXIBLE_ARRAY_MEMBER];
} TenantStatsShared;

static TenantStatsShared *TenantStats = NULL;
static HTAB *TenantStatsHash = NULL;

PG_FUNCTION_INFO_V1(shardext_stat_tenants);
PG_FUNCTION_INFO_V1(shardext_stat_tenants_reset);

static Size
TenantStatsStructSize(void)
{
	return add_size(offsetof(TenantStatsShared, heap),
					mul_size(sizeof(TenantEntry *), ShardextStatTenantsLimit));
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
		TenantStats->lock = &(GetNamedLWLockTranche("shardext tenant stats"))->lock;
		TenantStats->capacity = ShardextStatTenantsLimit;
		TenantStats->count = 0;
		TenantStats->periodStart = GetCurrentTimestamp();
	}
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(TenantKey);
	info.entrysize = sizeof(TenantEntry);
	TenantStatsHash = ShmemInitHash("shardext tenant stats hash",
									ShardextStatTenantsLimit, ShardextStatTenantsLimit,
									&info, HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
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
	sample->type = entry->distType;
	get_typlenbyval(entry->distType, &sample->typeLength, &sample->typeByValue);
	sample->value = datumCopy(value, sample->typeByValue, sample->typeLength);
	sample->start = GetCurrentTimestamp();
	return sample;
}

/* SampleValueText writes the text of a sample's value, cut to fit, into buf */
static void
SampleValueText(TenantSample *sample, char *buf)
{
	Oid			outputFunction;
	bool		isVarlena;
	char	   *text;
	int			length;

	getTypeOutputInfo(sample->type, &outputFunction, &isVarlena);
	text = OidOutputFunctionCall(outputFunction, sample->value);
	length = pg_mbcliplen(text, strlen(text), TENANT_VALUE_LEN - 1);
	memcpy(buf, text, length);
	buf[length] = '\0';
	pfree(text);
}

/*
 * EntryBelow orders the heap: by Space-Saving counter, ties by the previous
 * period; a database's total entry is above every tenant.
 */
static inline bool
EntryBelow(TenantEntry *a, TenantEntry *b)
{
	double		left;
	double		right;

	if (a->key.colocationId == TOTAL_COLOCATION_ID || b->key.colocationId == TOTAL_COLOCATION_ID)
		return b->key.colocationId == TOTAL_COLOCATION_ID &&
			a->key.colocationId != TOTAL_COLOCATION_ID;
	left = a->current.reads + a->current.writes + a->current.error;
	right = b->current.reads + b->current.writes + b->current.error;
	if (left != right)
		return left < right;
	return a->previous.reads + a->previous.writes < b->previous.reads + b->previous.writes;
}

static inline void
HeapSet(int index, TenantEntry *entry)
{
	TenantStats->heap[index] = entry;
	entry->heapIndex = index;
}

/* moves the entry at index towards the root while it is below its parent */
static void
HeapSiftUp(int index)
{
	TenantEntry *entry = TenantStats->heap[index];

	while (index > 0)
	{
		int			parent = (index - 1) / 2;

		if (!EntryBelow(entry, TenantStats->heap[parent]))
			break;
		HeapSet(index, TenantStats->heap[parent]);
		index = parent;
	}
	HeapSet(index, entry);
}

/* moves the entry at index towards the leaves while a child is below it */
static void
HeapSiftDown(int index)
{
	TenantEntry *entry = TenantStats->heap[index];
	int			count = TenantStats->count;

	for (;;)
	{
		int			child = 2 * index + 1;

		if (child >= count)
			break;
		if (child + 1 < count && EntryBelow(TenantStats->heap[child + 1],
											TenantStats->heap[child]))
			child++;
		if (!EntryBelow(TenantStats->heap[child], entry))
			break;
		HeapSet(index, TenantStats->heap[child]);
		index = child;
	}
	HeapSet(index, entry);
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
		TenantEntry *entry = TenantStats->heap[i];

		if (keepPrevious)
			entry->previous = entry->current;
		else
			memset(&entry->previous, 0, sizeof(TenantCounts));
		memset(&entry->current, 0, sizeof(TenantCounts));
	}
	TenantStats->periodStart += (elapsed / periodUs) * periodUs;
	for (int i = TenantStats->count / 2 - 1; i >= 0; i--)
		HeapSiftDown(i);
}

/*
 * TrackedEntry returns the entry of a key, taking one over when it is not
 * tracked yet: a free one, or the one with the smallest counter, whose
 * counter the newcomer inherits as its error.  NULL when only database
 * totals are left to take over.
 */
static TenantEntry *
TrackedEntry(TenantKey *key, Oid relid, const char *value)
{
	TenantEntry *entry;
	double		inherited = 0;
	bool		found;
	int			index;

	entry = hash_search(TenantStatsHash, key, HASH_FIND, NULL);
	if (entry != NULL)
		return entry;

	if (TenantStats->count < TenantStats->capacity)
		index = TenantStats->count++;
	else
	{
		TenantEntry *smallest = TenantStats->heap[0];

		if (smallest->key.colocationId == TOTAL_COLOCATION_ID)
			return NULL;
		index = 0;
		inherited = smallest->current.reads + smallest->current.writes +
			smallest->current.error;
		hash_search(TenantStatsHash, &smallest->key, HASH_REMOVE, NULL);
	}
	entry = hash_search(TenantStatsHash, key, HASH_ENTER_NULL, &found);
	if (entry == NULL)
		elog(ERROR, "shardext tenant statistics are out of entries");
	memset(((char *) entry) + sizeof(TenantKey), 0, sizeof(TenantEntry) - sizeof(TenantKey));
	entry->relid = relid;
	entry->current.error = inherited;
	strlcpy(entry->value, value, TENANT_VALUE_LEN);
	HeapSet(index, entry);
	if (index > 0)
		HeapSiftUp(index);
	else
		HeapSiftDown(index);
	return entry;
}

/* AddCounts adds one sampled statement to an entry and restores the heap */
static void
AddCounts(TenantEntry *entry, TenantSample *sample, double elapsedMs)
{
	if (sample->write)
		entry->current.writes += sample->weight;
	else
		entry->current.reads += sample->weight;
	entry->current.elapsedMs += sample->weight * elapsedMs;
	HeapSiftDown(entry->heapIndex);
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
	TenantKey	totalKey;
	TenantEntry *entry;
	double		elapsedMs;
	char		text[TENANT_VALUE_LEN] = "";

	if (TenantStats == NULL || sample == NULL)
		return;
	now = GetCurrentTimestamp();
	elapsedMs = (double) (now - sample->start) / 1000.0;
	key.databaseId = totalKey.databaseId = MyDatabaseId;
	key.colocationId = sample->colocationId;
	key.hash = sample->hash;
	totalKey.colocationId = TOTAL_COLOCATION_ID;
	totalKey.hash = 0;

	/* a tenant not tracked needs its text: made without the lock held */
	LWLockAcquire(TenantStats->lock, LW_EXCLUSIVE);
	entry = hash_search(TenantStatsHash, &key, HASH_FIND, NULL);
	if (entry == NULL)
	{
		LWLockRelease(TenantStats->lock);
		SampleValueText(sample, text);
		LWLockAcquire(TenantStats->lock, LW_EXCLUSIVE);
	}
	RotatePeriods(now);
	entry = TrackedEntry(&totalKey, InvalidOid, "");
	if (entry != NULL)
		AddCounts(entry, sample, elapsedMs);
	entry = TrackedEntry(&key, sample->relid, text);
	if (entry != NULL)
		AddCounts(entry, sample, elapsedMs);
	LWLockRelease(TenantStats->lock);
}

/* rounds a weighted count for display */
static Datum
CountDatum(double count)
{
	return Int64GetDatum((int64) (count + 0.5));
}

/*
 * shardext_stat_tenants() returns one row per tracked tenant: colocation
 * group, table, hash, value, the current and previous period's counts, and
 * the totals the shares are taken of.
 */
Datum
shardext_stat_tenants(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TenantKey	totalKey = {MyDatabaseId, TOTAL_COLOCATION_ID, 0};
	TenantEntry *total;

	InitMaterializedSRF(fcinfo, 0);
	if (TenantStats == NULL)
		PG_RETURN_VOID();

	/* exclusive: reading may start a new period */
	LWLockAcquire(TenantStats->lock, LW_EXCLUSIVE);
	RotatePeriods(GetCurrentTimestamp());
	total = hash_search(TenantStatsHash, &totalKey, HASH_FIND, NULL);
	for (int i = 0; i < TenantStats->count; i++)
	{
		TenantEntry *entry = TenantStats->heap[i];
		Datum		values[TENANT_STATS_COLUMNS];
		bool		nulls[TENANT_STATS_COLUMNS] = {false};

		if (entry->key.databaseId != MyDatabaseId ||
			entry->key.colocationId == TOTAL_COLOCATION_ID)
			continue;
		if (entry->current.reads + entry->current.writes +
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
		values[12] = CountDatum(total ? total->current.reads + total->current.writes : 0);
		values[13] = CountDatum(total ? total->previous.reads + total->previous.writes : 0);
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
	Oid		   *seen = palloc(sizeof(Oid) * Max(TenantStats->capacity, 1));
	int			seenCount = 0;
	Oid		   *dropped;

	LWLockAcquire(TenantStats->lock, LW_SHARED);
	for (int i = 0; i < TenantStats->count; i++)
	{
		Oid			databaseId = TenantStats->heap[i]->key.databaseId;
		bool		known = false;

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
		TenantEntry *entry = TenantStats->heap[i];
		bool		forget = entry->key.databaseId == MyDatabaseId;

		for (int j = 0; j < droppedCount && !forget; j++)
			forget = entry->key.databaseId == dropped[j];
		if (forget)
			hash_search(TenantStatsHash, &entry->key, HASH_REMOVE, NULL);
		else
			HeapSet(kept++, entry);
	}
	TenantStats->count = kept;
	for (int i = kept / 2 - 1; i >= 0; i--)
		HeapSiftDown(i);
	LWLockRelease(TenantStats->lock);
	PG_RETURN_VOID();
}
