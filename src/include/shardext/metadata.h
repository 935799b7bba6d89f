/*-------------------------------------------------------------------------
 *
 * metadata.h
 *	  The coordinator's view of nodes, distributed tables, shards and
 *	  placements: catalog writers and a per-backend cache of the catalog.
 *
 * Every change to the catalog must invalidate the tables it affects
 * (InvalidateDistTableCache(relid) / InvalidateShardTable(shardId)): the
 * relcache invalidation of a table both refreshes this cache in every
 * backend and invalidates cached plans that use the table.
 *
 * Cache entries are rebuilt after an invalidation, and the memory of a stale
 * entry is kept until the end of the transaction, so a pointer obtained from
 * the cache is valid until the end of the current transaction; never keep one
 * longer (for example in a cached plan): keep relation OIDs and shard ids.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_METADATA_H
#define SHARDEXT_METADATA_H

#include "access/attnum.h"
#include "fmgr.h"
#include "nodes/pg_list.h"

#define DISTRIBUTE_BY_HASH		'h'
#define DISTRIBUTE_BY_REFERENCE 'r'

/* a worker node as recorded in shardext.node */
typedef struct WorkerNode
{
	int32		nodeId;
	char	   *host;
	int32		port;
	double		weight;
	bool		active;
	int32		primaryNodeId;	/* a read replica: the node it replicates; else 0 */
	uint64		systemId;		/* the server's recorded identity (fencing.c); */
	uint32		timeline;		/* 0 when not recorded */
	bool		needsRebuild;	/* an old primary a failover replaced */
} WorkerNode;

#define NodeIsReplica(node) ((node)->primaryNodeId != 0)

/* one shard of a table: a hash range and the nodes that hold it */
typedef struct ShardInterval
{
	int64		shardId;
	int32		hashMin;		/* inclusive; unused for reference tables */
	int32		hashMax;		/* inclusive */
	int			shardIndex;		/* position in DistTableCacheEntry.shards */
	int			placementCount;
	int32	   *placementNodeIds;	/* sorted by node id */
	char	   *qualifiedName;	/* cached by CachedQualifiedShardName, or NULL */
	uint64		nameGeneration; /* ShardNameGeneration it was made under */
} ShardInterval;

/*
 * a global index of a distributed table (shardext.global_index): the index
 * table holds the indexed columns (1..columnCount), then the base row's
 * distribution value, then for an index that is not unique the number of
 * base rows with those values
 */
typedef struct GlobalIndex
{
	Oid			indexRelid;		/* the index table */
	char	   *name;
	Oid			baseRelid;
	bool		isUnique;
	int			columnCount;
	AttrNumber *baseAttnums;	/* indexed columns of the base table */
} GlobalIndex;

/* everything the planner and executor need to know about one table */
typedef struct DistTableCacheEntry
{
	Oid			relid;			/* hash key */
	bool		isValid;
	bool		isDistributed;	/* false: a negative entry, a local table */
	char		method;			/* DISTRIBUTE_BY_HASH or DISTRIBUTE_BY_REFERENCE */
	AttrNumber	distAttnum;		/* InvalidAttrNumber for reference tables */
	Oid			distType;
	int32		distTypmod;
	Oid			distCollation;
	int32		colocationId;
	int			shardCount;
	ShardInterval *shards;		/* sorted by hashMin */
	bool		uniformShards;	/* equal-width ranges: O(1) lookup */
	FmgrInfo	hashFunc;		/* the type's standard hash support function */
	List	   *globalIndexes;	/* GlobalIndex * of this table */
	Oid			globalIndexBase;	/* of an index table: its base table */
	MemoryContext context;		/* owns all memory of this entry */
} DistTableCacheEntry;

/* the record of a running move or split (shardext.move) */
/* a split cuts a range in two halves, or in up to three to isolate a tenant */
#define MAX_SPLIT_PIECES 3

/* the ranges a split makes, in hash order, covering the shard's range */
typedef struct SplitPieces
{
	int			count;
	int32		hashMin[MAX_SPLIT_PIECES];
	int32		hashMax[MAX_SPLIT_PIECES];
} SplitPieces;

typedef struct MoveRecord
{
	int64		moveId;
	bool		split;
	int32		sourceNodeId;
	int32		targetNodeId;
	int32		splitPoint;		/* splits: last hash value of the first piece */
	SplitPieces pieces;			/* splits: where the pieces end (their outer
								 * bounds are the shard's) */
	int			shardCount;
	Datum	   *shardIds;
	Datum	   *newShardIds;	/* splits: first pieces, then second pieces, ... */
} MoveRecord;

/* what BeginCatalogAccess saved, for EndCatalogAccess */
typedef struct CatalogAccess
{
	Oid			savedUserId;
	int			savedSecContext;
	int			gucNestLevel;
} CatalogAccess;

/* metadata_cache.c */

/*
 * DistTableCacheGeneration goes up with every invalidation of a distributed
 * table (its definition, shards or placements may have changed); caches
 * of things derived from them (statements prepared on the nodes) compare it.
 */
extern uint64 DistTableCacheGeneration;

extern void InitializeMetadataCache(void);
extern bool ShardextExtensionLoaded(void);
extern Oid	ShardextExtensionOwner(void);
extern char *InstalledShardextVersion(void);
extern bool CatalogVersionMatches(void);
extern void EnsureCatalogVersionMatches(void);
extern DistTableCacheEntry *GetDistTableCacheEntry(Oid relid);
extern bool IsDistributedTable(Oid relid);
extern bool IsHashDistributedTable(Oid relid);
extern bool IsReferenceTable(Oid relid);
extern List *DistributedTableList(void);
extern List *ColocatedTableList(int32 colocationId);
extern List *WorkerNodeList(bool activeOnly);
extern WorkerNode *LookupWorkerNode(int32 nodeId);
extern WorkerNode *GetWorkerNode(int32 nodeId);
extern WorkerNode *FindWorkerNode(const char *host, int32 port);
extern WorkerNode *GetWorkerNodeAt(const char *host, int32 port);
extern List *ReplicaNodeList(int32 primaryNodeId, bool activeOnly);
extern bool AnyActiveReplica(void);
extern Oid	ShardextCatalogRelid(const char *relname);
extern void InvalidateDistTableCache(Oid relid);
extern void InvalidateNodeCache(void);
extern List *TableGlobalIndexes(Oid relid);
extern bool IsGlobalIndexTable(Oid relid);
extern GlobalIndex *FindGlobalIndexByName(const char *name);
extern List *GlobalIndexRelids(List *indexes);

/* shard_lookup.c */
extern int32 HashDistributionValue(DistTableCacheEntry *entry, Datum value);
extern ShardInterval *FindShardIntervalForHash(DistTableCacheEntry *entry, int32 hash);
extern ShardInterval *FindShardForValue(DistTableCacheEntry *entry, Datum value);
extern ShardInterval *FindShardById(int64 shardId, DistTableCacheEntry **entryOut);
extern char *ShardTableName(Oid relid, int64 shardId);
extern char *QualifiedShardName(Oid relid, int64 shardId);
extern char *CachedQualifiedShardName(DistTableCacheEntry *entry, ShardInterval *shard);
extern uint64 ShardNameGeneration;
extern char *ShardNameFromParts(const char *relname, int64 shardId);
extern char *ClippedShardName(const char *relname, int64 shardId, bool hashed);

/* catalog.c: writers; each invalidates the cache entries it affects */
extern int32 InsertWorkerNode(const char *host, int32 port, double weight);
extern void DeleteWorkerNode(int32 nodeId);
extern void UpdateWorkerNodeWeight(int32 nodeId, double weight);
extern int32 FindColocationGroup(int shardCount, Oid distType, Oid distCollation);
extern int32 InsertColocationGroup(int shardCount, Oid distType, Oid distCollation);
extern int	ColocationGroupShardCount(int32 colocationId, Oid *distType, Oid *distCollation);
extern void InsertDistTable(Oid relid, char method, AttrNumber distAttnum, int32 colocationId);
extern void DeleteDistTable(Oid relid);
extern int64 NextShardId(void);
extern void InsertShard(int64 shardId, Oid relid, bool hasRange, int32 hashMin, int32 hashMax);
extern void InsertPlacement(int64 shardId, int32 nodeId);
extern void DeletePlacement(int64 shardId, int32 nodeId);
extern int64 NodePlacementCount(int32 nodeId);
extern int32 InsertReplicaNode(const char *host, int32 port, int32 primaryNodeId);
extern void SetNodeActive(int32 nodeId, bool active);
extern void UpdateNodeAddress(int32 nodeId, const char *host, int32 port);
extern void DeactivateReplicasOf(int32 primaryNodeId);
extern void SwapNodeAddresses(int32 nodeId, int32 otherNodeId);
extern void SetNodeIdentity(int32 nodeId, uint64 systemId, uint32 timeline);
extern void SetNodeNeedsRebuild(int32 nodeId, bool needsRebuild);
extern void InvalidateShardTable(int64 shardId);
extern bytea *ReadTokenSecret(void);
extern void DeleteShard(int64 shardId);
extern void IncrementColocationShardCount(int32 colocationId, int added);
extern void ReadRunningMoveRecord(int64 moveId, MoveRecord *move);
extern void RecordDeferredShardDrop(int64 moveId, int32 nodeId, const char *shardName,
									int64 shardId);
extern void MarkMoveSwitched(int64 moveId);
extern void RegisterLocalIdentity(const char *coordinatorId, int32 nodeId);
extern void UnregisterLocalIdentity(const char *coordinatorId);
extern void BeginCatalogAccess(CatalogAccess *access);
extern uint64 RunCatalogSPI(const char *sql, int nargs, Oid *argtypes, Datum *values,
							const char *nulls, int expectedResult, Datum *result,
							bool *resultIsNull);
extern void EndCatalogAccess(CatalogAccess *access);
extern void InsertGlobalIndex(Oid indexRelid, const char *name, Oid baseRelid,
							  int columnCount, AttrNumber *attnums, bool isUnique);

#endif							/* SHARDEXT_METADATA_H */
