/*-------------------------------------------------------------------------
 *
 * global_index.h
 *	  Global secondary indexes: index tables that map indexed values of a
 *	  distributed table's rows to their distribution values (see
 *	  operations/global_index.c), kept in step by every write
 *	  (executor/global_index_writes.c) and used to route queries that pin
 *	  the indexed columns (planner/global_index_planner.c).  Every function
 *	  of the feature is declared here; its catalog (the GlobalIndex entries
 *	  of the metadata cache) is in metadata.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_GLOBAL_INDEX_H
#define SHARDEXT_GLOBAL_INDEX_H

#include "nodes/parsenodes.h"
#include "shardext/distributed_executor.h"
#include "shardext/metadata.h"
#include "shardext/planner.h"

#define GLOBAL_INDEX_SCHEMA_NAME "shardext_gidx"

/*
 * Above 0 while shardext itself writes or changes index tables (building,
 * dropping, privileges); users' own writes to index tables are refused.
 */
extern int	GlobalIndexInternalWriteDepth;

/* planner/global_index_planner.c */
extern void RejectIndexTableWrite(Oid relid, const char *command);
extern void RejectMergeWithGlobalIndexes(Oid relid);
extern OnConflictExpr *PlanGlobalIndexInsert(Query *query, DistTableCacheEntry *entry,
											 List *columns, DistributedJob *job);
extern char *HiddenInsertReturning(Query *query, DistributedJob *job, const char *alias);
extern void PlanGlobalIndexModify(Query *query, DistTableCacheEntry *entry,
								  DistributedJob *job);
extern void AppendHiddenReturning(RemoteSql *sql, Query *query, DistributedJob *job);
extern void DeparseLockingSelect(RemoteSql *sql, Query *query, DistributedJob *job);
extern Node *LockedCtidsParam(void);
extern void FindGlobalIndexPruning(Query *query, Index rtindex, DistTableCacheEntry *entry,
								   Node *quals, List **values, List **kinds, List **indexes);

/* executor/global_index_writes.c */
typedef struct GlobalIndexChanges GlobalIndexChanges;
typedef bool (*BaseValueFunction) (AttrNumber attnum, Datum *value, void *arg);
extern GlobalIndexChanges *StartGlobalIndexChanges(Oid baseRelid, List *indexRelids);
extern void AddGlobalIndexRow(GlobalIndexChanges *changes, BaseValueFunction values,
							  void *arg, int64 delta);
extern void ApplyGlobalIndexChanges(GlobalIndexChanges *changes, List **lastRound);
extern void EndGlobalIndexChanges(GlobalIndexChanges *changes);
extern bool *ArbiterIndexAdmits(Oid baseRelid, Oid indexRelid, int rowCount,
								BaseValueFunction values, void **rowArgs);
extern void ReportUniqueViolation(NodeConnection *conn, PGresult *result, RemoteTask *task);
extern List *MergeIndexTasks(List *indexTasks, List *tasks);

/* executor/global_index_lookup.c */
typedef struct GlobalIndexLookupNote
{
	char	   *indexName;
	char	   *sql;			/* of the first lookup */
	int			lookups;		/* index shards asked */
	int			matches;		/* shards found */
} GlobalIndexLookupNote;
extern void LookupGlobalIndex(DistributedScanState *state, DistTableCacheEntry *anchor,
							  Oid indexRelid, int kind, Datum *values, bool *nulls,
							  bool *matches);

/* executor/global_index_maintenance.c: the executor's side of GINDEX_* */
extern void BeginGlobalIndexMaintenance(DistributedScanState *state);
extern void CaptureHiddenColumns(DistributedScanState *state, RemoteTask *task,
								 PGresult *result);
extern void FinishGlobalIndexMaintenance(DistributedScanState *state);
extern bool *AdmitInsertRows(DistributedScanState *state, int rowCount, int columns,
							 Datum *values, bool *nulls);
extern List *AddInsertRowsToIndexes(DistributedScanState *state, int rowCount, int columns,
								   Datum *values, bool *nulls, bool *admitted);
extern void LockRowsBeforeUpdate(DistributedScanState *state);

/* deparser/table_ddl.c */
extern char *GlobalIndexCountColumn(Oid baseRelid, AttrNumber *attnums, int count);

/* operations/global_index.c */
extern void EnsureGlobalIndexCatalog(void);
extern void DropGlobalIndexTable(GlobalIndex *index);
extern void DropGlobalIndexesOfTable(Oid baseRelid);
extern void SyncGlobalIndexPrivileges(Oid baseRelid);
extern void RenameGlobalIndexColumn(Oid baseRelid, AttrNumber attnum, const char *oldName,
									const char *newName);
extern void RejectIndexedColumnChange(Oid baseRelid, const char *column, const char *what);

#endif							/* SHARDEXT_GLOBAL_INDEX_H */
