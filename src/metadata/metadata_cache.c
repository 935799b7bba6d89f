/*-------------------------------------------------------------------------
 *
 * metadata_cache.c
 *	  Per-backend cache of shardext's catalog: which relations are
 *	  distributed, their shards and placements, and the worker nodes.
 *
 * Writers of the catalog send a relcache invalidation for the relation they
 * changed (or for a catalog table, meaning "everything"), so every backend
 * drops the entry at its next statement.  Rebuilt entries get fresh memory;
 * the memory of the entry they replace is released at the end of the
 * transaction, so pointers handed out stay valid until then.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "shardext/metadata.h"
#include "shardext/privileges.h"
#include "shardext/shardext.h"

/* column numbers of the catalog tables (see src/sql/install/00_catalog.sql) */
#define Anum_node_nodeid 1
#define Anum_node_host 2
#define Anum_node_port 3
#define Anum_node_weight 4
#define Anum_node_active 5

#define Anum_dist_table_logicalrelid 1
#define Anum_dist_table_method 2
#define Anum_dist_table_dist_attnum 3
#define Anum_dist_table_colocationid 4

#define Anum_shard_shardid 1
#define Anum_shard_logicalrelid 2
#define Anum_shard_hash_min 3
#define Anum_shard_hash_max 4

#define Anum_placement_shardid 1
#define Anum_placement_nodeid 2

/* shardext.global_index (1.1) */
#define Anum_global_index_indexrelid 1
#define Anum_global_index_index_name 2
#define Anum_global_index_baserelid 3
#define Anum_global_index_columns 4
#define Anum_global_index_is_unique 5

static MemoryContext MetadataCacheContext = NULL;
static MemoryContext StaleMetadataContext = NULL;
static HTAB *DistTableCache = NULL;

static bool extensionKnownLoaded = false;
static bool catalogVersionKnownCurrent = false;
static Oid	distTableCatalogRelid = InvalidOid;
static Oid	nodeCatalogRelid = InvalidOid;

/*
 * DistTableCacheGeneration counts invalidations of distributed tables (see
 * metadata.h): whatever was derived from a table's definition under an
 * older generation may be stale.
 */
uint64		DistTableCacheGeneration = 0;

static bool nodeCacheValid = false;
static MemoryContext NodeCacheContext = NULL;
static WorkerNode *nodeCache = NULL;
static int	nodeCacheCount = 0;
static bool nodeCacheHasActiveReplica = false;

static void MetadataRelcacheCallback(Datum arg, Oid relid);
static void MetadataXactCallback(XactEvent event, void *arg);
static void NamespaceSyscacheCallback(Datum arg, int cacheid, uint32 hashvalue);
static void BuildDistTableCacheEntry(DistTableCacheEntry *entry);
static void LoadShardIntervals(DistTableCacheEntry *entry);
static void LoadPlacements(ShardInterval *shard, MemoryContext context);
static void LoadGlobalIndexes(DistTableCacheEntry *entry);
static GlobalIndex *GlobalIndexFromTuple(HeapTuple tuple, TupleDesc desc,
										 MemoryContext context);
static Oid	GlobalIndexCatalogRelid(void);
static bool ShardsAreUniform(ShardInterval *shards, int count);
static void BuildNodeCache(void);
static void ReadNodeIdentity(WorkerNode *node, HeapTuple tuple, TupleDesc desc,
							 AttrNumber systemIdAttnum, AttrNumber timelineAttnum,
							 AttrNumber rebuildAttnum);
static List *ScanDistTableRelids(const char *indexName, int nkeys, ScanKey keys);
static void RetireContext(MemoryContext context);
static int	CompareShardIntervals(const void *a, const void *b);
static int	CompareInt32(const void *a, const void *b);

/*
 * InitializeMetadataCache registers the invalidation callbacks; it is called
 * once from _PG_init.
 */
void
InitializeMetadataCache(void)
{
	CacheRegisterRelcacheCallback(MetadataRelcacheCallback, (Datum) 0);
	CacheRegisterSyscacheCallback(NAMESPACEOID, NamespaceSyscacheCallback, (Datum) 0);
	RegisterXactCallback(MetadataXactCallback, NULL);
}

/*
 * MetadataRelcacheCallback marks cache entries stale.  It may run outside a
 * transaction, so it only sets flags.
 */
static void
MetadataRelcacheCallback(Datum arg, Oid relid)
{
	bool		all = (relid == InvalidOid || relid == distTableCatalogRelid);

	if (all || relid == nodeCatalogRelid)
		nodeCacheValid = false;

	if (all)
	{
		extensionKnownLoaded = false;
		catalogVersionKnownCurrent = false;
	}

	if (DistTableCache == NULL)
		return;

	if (all)
	{
		HASH_SEQ_STATUS status;
		DistTableCacheEntry *entry;

		hash_seq_init(&status, DistTableCache);
		while ((entry = hash_seq_search(&status)) != NULL)
			entry->isValid = false;
		DistTableCacheGeneration++;
	}
	else
	{
		DistTableCacheEntry *entry = hash_search(DistTableCache, &relid,
												 HASH_FIND, NULL);

		if (entry != NULL)
		{
			if (entry->isDistributed || !entry->isValid)
				DistTableCacheGeneration++;
			entry->isValid = false;
		}
	}
}

/* a schema changed: cached qualified shard names may be stale */
static void
NamespaceSyscacheCallback(Datum arg, int cacheid, uint32 hashvalue)
{
	ShardNameGeneration++;
}

/*
 * MetadataXactCallback frees the memory of entries replaced during the
 * transaction that just ended.
 */
static void
MetadataXactCallback(XactEvent event, void *arg)
{
	if ((event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		 event == XACT_EVENT_PREPARE || event == XACT_EVENT_PARALLEL_COMMIT ||
		 event == XACT_EVENT_PARALLEL_ABORT) && StaleMetadataContext != NULL)
		MemoryContextReset(StaleMetadataContext);
}

static void
EnsureCacheContexts(void)
{
	HASHCTL		info;

	if (MetadataCacheContext != NULL)
		return;

	MetadataCacheContext = AllocSetContextCreate(CacheMemoryContext,
												 "shardext metadata cache",
												 ALLOCSET_DEFAULT_SIZES);
	StaleMetadataContext = AllocSetContextCreate(MetadataCacheContext,
												 "shardext stale metadata",
												 ALLOCSET_SMALL_SIZES);

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(Oid);
	info.entrysize = sizeof(DistTableCacheEntry);
	info.hcxt = MetadataCacheContext;
	DistTableCache = hash_create("shardext distributed tables", 64, &info,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/* an entry's old memory lives until the end of the transaction */
static void
RetireContext(MemoryContext context)
{
	if (context != NULL)
		MemoryContextSetParent(context, StaleMetadataContext);
}

/*
 * ShardextExtensionLoaded returns whether shardext's catalog exists in the
 * current database and is complete.  The answer is cached while it is true;
 * a missing extension costs two syscache probes per call.  In a server that
 * pg_upgrade runs (binary upgrade mode), never: its restore creates the
 * catalog piece by piece, the rows come later with the files, and nothing
 * distributed may happen there.
 */
bool
ShardextExtensionLoaded(void)
{
	Oid			namespaceId;
	Oid			relid;

	if (extensionKnownLoaded)
		return true;

	if (!IsTransactionState() || IsBinaryUpgrade)
		return false;

	namespaceId = get_namespace_oid(SHARDEXT_SCHEMA_NAME, true);
	if (!OidIsValid(namespaceId))
		return false;

	/* dist_table is created after every table the cache reads */
	relid = get_relname_relid("dist_table", namespaceId);
	if (!OidIsValid(relid))
		return false;

	/* while CREATE EXTENSION shardext runs its script, stay out of the way */
	if (creating_extension &&
		CurrentExtensionObject == get_extension_oid(SHARDEXT_EXTENSION_NAME, true))
		return false;

	EnsureCacheContexts();
	distTableCatalogRelid = relid;
	nodeCatalogRelid = get_relname_relid("node", namespaceId);
	extensionKnownLoaded = true;
	return true;
}

/*
 * ReadShardextExtension reads shardext's row of pg_extension: it returns
 * the installed version (NULL when the extension is not installed) and
 * sets *owner to the extension's owner.
 */
static char *
ReadShardextExtension(Oid *owner)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	char	   *version = NULL;

	*owner = InvalidOid;
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum(SHARDEXT_EXTENSION_NAME));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		value = heap_getattr(tuple, Anum_pg_extension_extversion,
										 RelationGetDescr(rel), &isnull);

		*owner = ((Form_pg_extension) GETSTRUCT(tuple))->extowner;
		if (!isnull)
			version = TextDatumGetCString(value);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return version;
}

/*
 * ShardextExtensionOwner returns the role that owns the extension, and so
 * its catalog tables: catalog writes run with its rights (see catalog.c).
 */
Oid
ShardextExtensionOwner(void)
{
	Oid			owner;

	if (ReadShardextExtension(&owner) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"shardext\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION shardext.")));
	return owner;
}

/* InstalledShardextVersion: the version of the catalog, or NULL */
char *
InstalledShardextVersion(void)
{
	Oid			owner;

	return ReadShardextExtension(&owner);
}

/*
 * CatalogVersionMatches tells whether the extension installed in this
 * database (its catalog and SQL objects) is the version of this library.
 * After a new library was installed and the server restarted, they differ
 * until ALTER EXTENSION shardext UPDATE.  The answer is cached while it is
 * yes; while it is no, every call looks again, so the update is noticed.
 */
bool
CatalogVersionMatches(void)
{
	char	   *version;

	if (catalogVersionKnownCurrent)
		return true;
	if (!IsTransactionState())
		return false;
	version = InstalledShardextVersion();
	catalogVersionKnownCurrent = version != NULL &&
		strcmp(version, SHARDEXT_LIBRARY_VERSION) == 0;
	return catalogVersionKnownCurrent;
}

/*
 * EnsureCatalogVersionMatches errors out while the installed extension is
 * older (or newer) than the library: the library would misread the
 * catalog, so shardext refuses to work with distributed tables until the
 * extension is updated.  Queries on local tables are not affected.
 */
void
EnsureCatalogVersionMatches(void)
{
	char	   *version;

	if (CatalogVersionMatches() || !IsTransactionState())
		return;
	version = InstalledShardextVersion();
	if (version == NULL)
		return;					/* not installed: callers say so */
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("shardext library version %s does not match the installed extension "
					"version %s", SHARDEXT_LIBRARY_VERSION, version),
			 errdetail("The server loaded a newer shardext library than the version of the "
					   "extension in database \"%s\".", get_database_name(MyDatabaseId)),
			 errhint("Run ALTER EXTENSION shardext UPDATE in this database (and on every "
					 "worker node).")));
}

/* EnsureShardextInstalled errors out unless shardext is installed here */
void
EnsureShardextInstalled(void)
{
	if (!ShardextExtensionLoaded())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"shardext\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION shardext.")));
	EnsureCatalogVersionMatches();
}

/* EnsureAdminAndShardext: both of the above, in that order */
void
EnsureAdminAndShardext(const char *function)
{
	EnsureShardextAdmin(function);
	EnsureShardextInstalled();
}

/*
 * ShardextCatalogRelid returns the OID of a table or index in schema shardext.
 */
Oid
ShardextCatalogRelid(const char *relname)
{
	Oid			namespaceId = get_namespace_oid(SHARDEXT_SCHEMA_NAME, false);
	Oid			relid = get_relname_relid(relname, namespaceId);

	if (!OidIsValid(relid))
		elog(ERROR, "shardext catalog relation \"%s\" does not exist", relname);
	return relid;
}

/*
 * GetDistTableCacheEntry returns the cache entry of a distributed or
 * reference table, or NULL when relid is a local relation (or shardext is
 * not installed in this database).
 */
DistTableCacheEntry *
GetDistTableCacheEntry(Oid relid)
{
	DistTableCacheEntry *entry;
	bool		found;

	if (!ShardextExtensionLoaded())
		return NULL;

	entry = hash_search(DistTableCache, &relid, HASH_ENTER, &found);
	if (!found)
	{
		entry->context = NULL;
		entry->isValid = false;
	}
	if (!entry->isValid)
		BuildDistTableCacheEntry(entry);

	if (!entry->isDistributed)
		return NULL;
	EnsureCatalogVersionMatches();
	return entry;
}

bool
IsDistributedTable(Oid relid)
{
	return GetDistTableCacheEntry(relid) != NULL;
}

bool
IsHashDistributedTable(Oid relid)
{
	DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);

	return entry != NULL && entry->method == DISTRIBUTE_BY_HASH;
}

bool
IsReferenceTable(Oid relid)
{
	DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);

	return entry != NULL && entry->method == DISTRIBUTE_BY_REFERENCE;
}

/*
 * BuildDistTableCacheEntry (re)fills an entry from the catalog.  Catalog
 * errors leave the entry invalid, so the next call tries again.
 */
static void
BuildDistTableCacheEntry(DistTableCacheEntry *entry)
{
	Oid			relid = entry->relid;
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	bool		isnull;
	MemoryContext oldContext = entry->context;

	memset(((char *) entry) + sizeof(Oid), 0,
		   sizeof(DistTableCacheEntry) - sizeof(Oid));
	RetireContext(oldContext);

	rel = table_open(distTableCatalogRelid, AccessShareLock);
	ScanKeyInit(&key, Anum_dist_table_logicalrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, ShardextCatalogRelid("dist_table_pkey"),
							  true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		TupleDesc	desc = RelationGetDescr(rel);
		Datum		attnum;

		/* columns of a newer catalog are only read from a catalog that has them */
		EnsureCatalogVersionMatches();
		entry->isDistributed = true;
		entry->method = DatumGetChar(heap_getattr(tuple, Anum_dist_table_method,
												  desc, &isnull));
		attnum = heap_getattr(tuple, Anum_dist_table_dist_attnum, desc, &isnull);
		entry->distAttnum = isnull ? InvalidAttrNumber : DatumGetInt16(attnum);
		entry->colocationId =
			DatumGetInt32(heap_getattr(tuple, Anum_dist_table_colocationid,
									   desc, &isnull));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	if (entry->isDistributed)
	{
		entry->context = AllocSetContextCreate(MetadataCacheContext,
											   "shardext table entry",
											   ALLOCSET_SMALL_SIZES);
		MemoryContextCopyAndSetIdentifier(entry->context,
										  get_rel_name(relid) ? get_rel_name(relid) : "dropped");

		if (entry->distAttnum != InvalidAttrNumber)
		{
			TypeCacheEntry *typeEntry;

			get_atttypetypmodcoll(relid, entry->distAttnum, &entry->distType,
								  &entry->distTypmod, &entry->distCollation);
			typeEntry = lookup_type_cache(entry->distType,
										  TYPECACHE_HASH_PROC_FINFO);
			if (!OidIsValid(typeEntry->hash_proc_finfo.fn_oid))
				elog(ERROR, "type %u has no hash function", entry->distType);
			fmgr_info_copy(&entry->hashFunc, &typeEntry->hash_proc_finfo,
						   entry->context);
		}
		LoadShardIntervals(entry);
		LoadGlobalIndexes(entry);
	}

	entry->isValid = true;
}

/*
 * GlobalIndexCatalogRelid returns the OID of shardext.global_index, or
 * InvalidOid while the extension is still at version 1.0.
 */
static Oid
GlobalIndexCatalogRelid(void)
{
	Oid			namespaceId = get_namespace_oid(SHARDEXT_SCHEMA_NAME, true);

	if (!OidIsValid(namespaceId))
		return InvalidOid;
	return get_relname_relid("global_index", namespaceId);
}

/* GlobalIndexFromTuple copies a row of shardext.global_index into context */
static GlobalIndex *
GlobalIndexFromTuple(HeapTuple tuple, TupleDesc desc, MemoryContext context)
{
	GlobalIndex *index = MemoryContextAllocZero(context, sizeof(GlobalIndex));
	bool		isnull;
	ArrayType  *columns;
	Datum	   *elements;
	int			count;

	index->indexRelid = DatumGetObjectId(heap_getattr(tuple, Anum_global_index_indexrelid,
													  desc, &isnull));
	index->baseRelid = DatumGetObjectId(heap_getattr(tuple, Anum_global_index_baserelid,
													 desc, &isnull));
	index->name = MemoryContextStrdup(context,
									  TextDatumGetCString(heap_getattr(tuple,
																	   Anum_global_index_index_name,
																	   desc, &isnull)));
	index->isUnique = DatumGetBool(heap_getattr(tuple, Anum_global_index_is_unique,
												desc, &isnull));
	columns = DatumGetArrayTypeP(heap_getattr(tuple, Anum_global_index_columns, desc, &isnull));
	deconstruct_array(columns, INT2OID, sizeof(int16), true, TYPALIGN_SHORT,
					  &elements, NULL, &count);
	index->columnCount = count;
	index->baseAttnums = MemoryContextAlloc(context, sizeof(AttrNumber) * Max(count, 1));
	for (int i = 0; i < count; i++)
		index->baseAttnums[i] = DatumGetInt16(elements[i]);
	return index;
}

/*
 * LoadGlobalIndexes reads the global indexes of a table (and, for an index
 * table, which table it indexes), in index table OID order.
 */
static void
LoadGlobalIndexes(DistTableCacheEntry *entry)
{
	Oid			catalogRelid = GlobalIndexCatalogRelid();
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;

	if (!OidIsValid(catalogRelid))
		return;
	rel = table_open(catalogRelid, AccessShareLock);
	ScanKeyInit(&key, Anum_global_index_baserelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(entry->relid));
	scan = systable_beginscan(rel, ShardextCatalogRelid("global_index_baserelid_idx"),
							  true, NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		MemoryContext oldContext = MemoryContextSwitchTo(entry->context);

		entry->globalIndexes = lappend(entry->globalIndexes,
									   GlobalIndexFromTuple(tuple, RelationGetDescr(rel),
															entry->context));
		MemoryContextSwitchTo(oldContext);
	}
	systable_endscan(scan);

	ScanKeyInit(&key, Anum_global_index_indexrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(entry->relid));
	scan = systable_beginscan(rel, ShardextCatalogRelid("global_index_pkey"),
							  true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;

		entry->globalIndexBase =
			DatumGetObjectId(heap_getattr(tuple, Anum_global_index_baserelid,
										  RelationGetDescr(rel), &isnull));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
}

/*
 * TableGlobalIndexes returns the global indexes of a distributed table
 * (GlobalIndex *, owned by the cache: valid until the end of the
 * transaction), NIL for any other relation.
 */
List *
TableGlobalIndexes(Oid relid)
{
	DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);

	return entry != NULL ? entry->globalIndexes : NIL;
}

/* GlobalIndexRelids returns the index table OIDs of a list of GlobalIndex */
List *
GlobalIndexRelids(List *indexes)
{
	List	   *result = NIL;
	ListCell   *cell;

	foreach(cell, indexes)
		result = lappend_oid(result, ((GlobalIndex *) lfirst(cell))->indexRelid);
	return result;
}

/* is relid the index table of a global index? */
bool
IsGlobalIndexTable(Oid relid)
{
	DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);

	return entry != NULL && OidIsValid(entry->globalIndexBase);
}

/*
 * FindGlobalIndexByName returns the global index of that name (from its
 * base table's cache entry), or NULL.
 */
GlobalIndex *
FindGlobalIndexByName(const char *name)
{
	Oid			catalogRelid;
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	Oid			baseRelid = InvalidOid;
	ListCell   *cell;

	if (!ShardextExtensionLoaded() || !OidIsValid(catalogRelid = GlobalIndexCatalogRelid()))
		return NULL;
	rel = table_open(catalogRelid, AccessShareLock);
	ScanKeyInit(&key, Anum_global_index_index_name, BTEqualStrategyNumber,
				F_TEXTEQ, CStringGetTextDatum(name));
	/* a heap scan: the key's collation need not match the index's */
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;

		baseRelid = DatumGetObjectId(heap_getattr(tuple, Anum_global_index_baserelid,
												  RelationGetDescr(rel), &isnull));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	foreach(cell, TableGlobalIndexes(baseRelid))
	{
		GlobalIndex *index = lfirst(cell);

		if (strcmp(index->name, name) == 0)
			return index;
	}
	return NULL;
}

/*
 * LoadShardIntervals reads the shards of entry->relid and their placements,
 * sorted by hash range.
 */
static void
LoadShardIntervals(DistTableCacheEntry *entry)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	int			allocated = 8;
	int			count = 0;
	ShardInterval *shards;

	shards = MemoryContextAllocZero(entry->context,
									allocated * sizeof(ShardInterval));

	rel = table_open(ShardextCatalogRelid("shard"), AccessShareLock);
	ScanKeyInit(&key, Anum_shard_logicalrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(entry->relid));
	scan = systable_beginscan(rel, ShardextCatalogRelid("shard_logicalrelid_idx"),
							  true, NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		TupleDesc	desc = RelationGetDescr(rel);
		bool		isnull;
		Datum		value;
		ShardInterval *shard;

		if (count == allocated)
		{
			allocated *= 2;
			shards = repalloc(shards, allocated * sizeof(ShardInterval));
		}
		shard = &shards[count++];
		memset(shard, 0, sizeof(ShardInterval));
		shard->shardId = DatumGetInt64(heap_getattr(tuple, Anum_shard_shardid,
													desc, &isnull));
		value = heap_getattr(tuple, Anum_shard_hash_min, desc, &isnull);
		shard->hashMin = isnull ? PG_INT32_MIN : DatumGetInt32(value);
		value = heap_getattr(tuple, Anum_shard_hash_max, desc, &isnull);
		shard->hashMax = isnull ? PG_INT32_MAX : DatumGetInt32(value);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	qsort(shards, count, sizeof(ShardInterval), CompareShardIntervals);
	for (int i = 0; i < count; i++)
	{
		shards[i].shardIndex = i;
		LoadPlacements(&shards[i], entry->context);
	}

	entry->shards = shards;
	entry->shardCount = count;
	entry->uniformShards = entry->method == DISTRIBUTE_BY_HASH &&
		ShardsAreUniform(shards, count);
}

/* reads the node ids holding one shard */
static void
LoadPlacements(ShardInterval *shard, MemoryContext context)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	int			allocated = 4;

	shard->placementNodeIds = MemoryContextAlloc(context, allocated * sizeof(int32));
	shard->placementCount = 0;

	rel = table_open(ShardextCatalogRelid("placement"), AccessShareLock);
	ScanKeyInit(&key, Anum_placement_shardid, BTEqualStrategyNumber,
				F_INT8EQ, Int64GetDatum(shard->shardId));
	scan = systable_beginscan(rel, ShardextCatalogRelid("placement_pkey"),
							  true, NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		bool		isnull;

		if (shard->placementCount == allocated)
		{
			allocated *= 2;
			shard->placementNodeIds = repalloc(shard->placementNodeIds,
											   allocated * sizeof(int32));
		}
		shard->placementNodeIds[shard->placementCount++] =
			DatumGetInt32(heap_getattr(tuple, Anum_placement_nodeid,
									   RelationGetDescr(rel), &isnull));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	qsort(shard->placementNodeIds, shard->placementCount, sizeof(int32),
		  CompareInt32);
}

/* do the shards split the int4 space into equal consecutive ranges? */
static bool
ShardsAreUniform(ShardInterval *shards, int count)
{
	uint64		width;

	if (count == 0)
		return false;
	width = (UINT64CONST(1) << 32) / count;
	for (int i = 0; i < count; i++)
	{
		int64		expectedMin = (int64) PG_INT32_MIN + (int64) (width * i);
		int64		expectedMax = (i == count - 1) ? PG_INT32_MAX :
			expectedMin + (int64) width - 1;

		if (shards[i].hashMin != expectedMin || shards[i].hashMax != expectedMax)
			return false;
	}
	return true;
}

static int
CompareShardIntervals(const void *a, const void *b)
{
	const ShardInterval *left = a;
	const ShardInterval *right = b;

	if (left->hashMin != right->hashMin)
		return left->hashMin < right->hashMin ? -1 : 1;
	if (left->shardId != right->shardId)
		return left->shardId < right->shardId ? -1 : 1;
	return 0;
}

static int
CompareInt32(const void *a, const void *b)
{
	int32		left = *(const int32 *) a;
	int32		right = *(const int32 *) b;

	return (left > right) - (left < right);
}

/*
 * DistributedTableList returns the OIDs of all distributed and reference
 * tables, in OID order.
 */
List *
DistributedTableList(void)
{
	if (!ShardextExtensionLoaded())
		return NIL;
	return ScanDistTableRelids("dist_table_pkey", 0, NULL);
}

/*
 * ColocatedTableList returns the OIDs of the tables in a colocation group,
 * in OID order.
 */
List *
ColocatedTableList(int32 colocationId)
{
	ScanKeyData key;
	List	   *result;

	ScanKeyInit(&key, Anum_dist_table_colocationid, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(colocationId));
	result = ScanDistTableRelids("dist_table_colocationid_idx", 1, &key);
	list_sort(result, list_oid_cmp);
	return result;
}

/*
 * ScanDistTableRelids returns the table OIDs of the rows of
 * shardext.dist_table that match the keys, in the order of the index.
 */
static List *
ScanDistTableRelids(const char *indexName, int nkeys, ScanKey keys)
{
	List	   *result = NIL;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;

	rel = table_open(distTableCatalogRelid, AccessShareLock);
	scan = systable_beginscan(rel, ShardextCatalogRelid(indexName), true, NULL,
							  nkeys, keys);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		bool		isnull;

		result = lappend_oid(result,
							 DatumGetObjectId(heap_getattr(tuple, Anum_dist_table_logicalrelid,
														   RelationGetDescr(rel), &isnull)));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

/*
 * BuildNodeCache reads shardext.node into an array sorted by node id.
 */
static void
BuildNodeCache(void)
{
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	int			allocated = 8;
	MemoryContext context;
	AttrNumber	primaryAttnum;
	AttrNumber	systemIdAttnum;
	AttrNumber	timelineAttnum;
	AttrNumber	rebuildAttnum;

	RetireContext(NodeCacheContext);
	NodeCacheContext = NULL;
	nodeCache = NULL;
	nodeCacheCount = 0;
	nodeCacheHasActiveReplica = false;

	/* added in 1.1 (read replicas) and 1.2 (fencing): looked up by name */
	primaryAttnum = get_attnum(nodeCatalogRelid, "primary_nodeid");
	systemIdAttnum = get_attnum(nodeCatalogRelid, "system_identifier");
	timelineAttnum = get_attnum(nodeCatalogRelid, "timeline");
	rebuildAttnum = get_attnum(nodeCatalogRelid, "needs_rebuild");

	context = AllocSetContextCreate(MetadataCacheContext, "shardext node cache",
									ALLOCSET_SMALL_SIZES);
	nodeCache = MemoryContextAllocZero(context, allocated * sizeof(WorkerNode));

	rel = table_open(nodeCatalogRelid, AccessShareLock);
	scan = systable_beginscan(rel, ShardextCatalogRelid("node_pkey"),
							  true, NULL, 0, NULL);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		TupleDesc	desc = RelationGetDescr(rel);
		bool		isnull;
		WorkerNode *node;

		if (nodeCacheCount == allocated)
		{
			allocated *= 2;
			nodeCache = repalloc(nodeCache, allocated * sizeof(WorkerNode));
		}
		node = &nodeCache[nodeCacheCount++];
		node->nodeId = DatumGetInt32(heap_getattr(tuple, Anum_node_nodeid, desc, &isnull));
		node->host = MemoryContextStrdup(context,
										 TextDatumGetCString(heap_getattr(tuple, Anum_node_host,
																		  desc, &isnull)));
		node->port = DatumGetInt32(heap_getattr(tuple, Anum_node_port, desc, &isnull));
		node->weight = DatumGetFloat8(heap_getattr(tuple, Anum_node_weight, desc, &isnull));
		node->active = DatumGetBool(heap_getattr(tuple, Anum_node_active, desc, &isnull));
		node->primaryNodeId = 0;
		if (primaryAttnum != InvalidAttrNumber)
		{
			Datum		primary = heap_getattr(tuple, primaryAttnum, desc, &isnull);

			node->primaryNodeId = isnull ? 0 : DatumGetInt32(primary);
		}
		ReadNodeIdentity(node, tuple, desc, systemIdAttnum, timelineAttnum, rebuildAttnum);
		if (NodeIsReplica(node) && node->active)
			nodeCacheHasActiveReplica = true;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	NodeCacheContext = context;
	nodeCacheValid = true;
}

/*
 * ReadNodeIdentity fills in what fencing records of a node (the columns
 * exist from 1.2 on; InvalidAttrNumber when absent).
 */
static void
ReadNodeIdentity(WorkerNode *node, HeapTuple tuple, TupleDesc desc, AttrNumber systemIdAttnum,
				 AttrNumber timelineAttnum, AttrNumber rebuildAttnum)
{
	bool		isnull = true;
	Datum		value;

	node->systemId = 0;
	node->timeline = 0;
	node->needsRebuild = false;
	if (systemIdAttnum != InvalidAttrNumber)
	{
		value = heap_getattr(tuple, systemIdAttnum, desc, &isnull);
		node->systemId = isnull ? 0 : (uint64) DatumGetInt64(value);
	}
	if (timelineAttnum != InvalidAttrNumber)
	{
		value = heap_getattr(tuple, timelineAttnum, desc, &isnull);
		node->timeline = isnull ? 0 : (uint32) DatumGetInt32(value);
	}
	if (node->systemId == 0 || node->timeline == 0)
		node->systemId = node->timeline = 0;
	if (rebuildAttnum != InvalidAttrNumber)
	{
		value = heap_getattr(tuple, rebuildAttnum, desc, &isnull);
		node->needsRebuild = !isnull && DatumGetBool(value);
	}
}

static void
EnsureNodeCache(void)
{
	EnsureShardextInstalled();
	if (!nodeCacheValid)
		BuildNodeCache();
}

/*
 * WorkerNodeList returns the registered worker nodes (only active ones if
 * asked), sorted by node id: the primaries, which hold the placements.
 * Read replicas are not in it (see ReplicaNodeList), so that placement
 * logic, DDL, recovery and everything else that works on "the nodes" never
 * sees them.  The WorkerNode structs belong to the cache.
 */
List *
WorkerNodeList(bool activeOnly)
{
	List	   *result = NIL;

	EnsureNodeCache();
	for (int i = 0; i < nodeCacheCount; i++)
	{
		if ((!activeOnly || nodeCache[i].active) && !NodeIsReplica(&nodeCache[i]))
			result = lappend(result, &nodeCache[i]);
	}
	return result;
}

/*
 * ReplicaNodeList returns the read replicas of a node (of every node when
 * primaryNodeId is 0), only active ones if asked, sorted by node id.
 */
List *
ReplicaNodeList(int32 primaryNodeId, bool activeOnly)
{
	List	   *result = NIL;

	EnsureNodeCache();
	for (int i = 0; i < nodeCacheCount; i++)
	{
		WorkerNode *node = &nodeCache[i];

		if (NodeIsReplica(node) && (!activeOnly || node->active) &&
			(primaryNodeId == 0 || node->primaryNodeId == primaryNodeId))
			result = lappend(result, node);
	}
	return result;
}

/*
 * AnyActiveReplica tells cheaply whether any read replica is in use, so
 * that read routing costs nothing in clusters without replicas.
 */
bool
AnyActiveReplica(void)
{
	if (!ShardextExtensionLoaded())
		return false;
	EnsureNodeCache();
	return nodeCacheHasActiveReplica;
}

/* LookupWorkerNode returns the node with the given id, or NULL */
WorkerNode *
LookupWorkerNode(int32 nodeId)
{
	EnsureNodeCache();
	for (int i = 0; i < nodeCacheCount; i++)
	{
		if (nodeCache[i].nodeId == nodeId)
			return &nodeCache[i];
	}
	return NULL;
}

/* GetWorkerNode is LookupWorkerNode that errors out on an unknown id */
WorkerNode *
GetWorkerNode(int32 nodeId)
{
	WorkerNode *node = LookupWorkerNode(nodeId);

	if (node == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("node with id %d does not exist", nodeId)));
	return node;
}

/* FindWorkerNode returns the node at host:port, or NULL */
WorkerNode *
FindWorkerNode(const char *host, int32 port)
{
	EnsureNodeCache();
	for (int i = 0; i < nodeCacheCount; i++)
	{
		if (nodeCache[i].port == port && strcmp(nodeCache[i].host, host) == 0)
			return &nodeCache[i];
	}
	return NULL;
}

/*
 * GetWorkerNodeAt is FindWorkerNode that errors out on an unknown node, and
 * on a read replica: its callers manage worker nodes.
 */
WorkerNode *
GetWorkerNodeAt(const char *host, int32 port)
{
	WorkerNode *node = FindWorkerNode(host, port);

	if (node == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("node %s:%d is not registered", host, port)));
	if (NodeIsReplica(node))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("node %s:%d is a read replica of node %d", host, port,
						node->primaryNodeId),
				 errhint("Replicas hold no shards; manage them with shardext_add_replica(), "
						 "shardext_remove_replica() and shardext_promote_replica().")));
	return node;
}

/*
 * InvalidateDistTableCache makes every backend (this one at the next command
 * counter increment) reload the metadata of relid, or of every table when
 * relid is InvalidOid or no longer exists.
 */
void
InvalidateDistTableCache(Oid relid)
{
	if (OidIsValid(relid) && SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		CacheInvalidateRelcacheByRelid(relid);
	else
		CacheInvalidateRelcacheByRelid(ShardextCatalogRelid("dist_table"));
}

/* InvalidateNodeCache makes every backend reload the node list */
void
InvalidateNodeCache(void)
{
	CacheInvalidateRelcacheByRelid(ShardextCatalogRelid("node"));
}

/*
 * ReadTokenSecret returns the key of causal tokens (shardext.token_secret),
 * read once per backend, or NULL when the table does not exist (shardext
 * 1.0).  The table is read directly: its key is not readable by users, yet
 * every user can make and check tokens.
 */
bytea *
ReadTokenSecret(void)
{
	static bytea *secret = NULL;
	Oid			namespaceId;
	Oid			relid;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;

	if (secret != NULL)
		return secret;
	if (!ShardextExtensionLoaded())
		return NULL;
	namespaceId = get_namespace_oid(SHARDEXT_SCHEMA_NAME, false);
	relid = get_relname_relid("token_secret", namespaceId);
	if (!OidIsValid(relid))
		return NULL;

	rel = table_open(relid, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		value = heap_getattr(tuple, 2, RelationGetDescr(rel), &isnull);

		if (!isnull)
		{
			MemoryContext oldContext = MemoryContextSwitchTo(TopMemoryContext);

			secret = DatumGetByteaPCopy(value);
			MemoryContextSwitchTo(oldContext);
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return secret;
}
