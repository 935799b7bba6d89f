/*-------------------------------------------------------------------------
 *
 * global_index.h
 *	  Global secondary indexes: index tables that map indexed values of a
 *	  distributed table's rows to their distribution values (see
 *	  operations/global_index.c), kept in step by every write
 *	  (executor/global_index_writes.c) and used to route queries that pin
 *	  the indexed columns (planner/global_index_planner.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_GLOBAL_INDEX_H
#define SHARDEXT_GLOBAL_INDEX_H

#include "nodes/parsenodes.h"
#include "shardext/metadata.h"

#define GLOBAL_INDEX_SCHEMA_NAME "shardext_gidx"

/*
 * Above 0 while shardext itself writes or changes index tables (building,
 * dropping, privileges); users' own writes to index tables are refused.
 */
extern int	GlobalIndexInternalWriteDepth;

/* planner/global_index_planner.c */
extern void RejectIndexTableWrite(Oid relid, const char *command);

/* operations/global_index.c */
extern void EnsureGlobalIndexCatalog(void);
extern char *GlobalIndexCountColumn(Oid baseRelid, AttrNumber *attnums, int count);
extern void DropGlobalIndexTable(GlobalIndex *index);
extern void DropGlobalIndexesOfTable(Oid baseRelid);
extern void SyncGlobalIndexPrivileges(Oid baseRelid);
extern void RenameGlobalIndexColumn(Oid baseRelid, AttrNumber attnum, const char *oldName,
									const char *newName);
extern void RejectIndexedColumnChange(Oid baseRelid, const char *column, const char *what);

#endif							/* SHARDEXT_GLOBAL_INDEX_H */
