/*-------------------------------------------------------------------------
 *
 * deparser.h
 *	  Producing SQL text that workers run.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_DEPARSER_H
#define SHARDEXT_DEPARSER_H

#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "utils/relcache.h"

/* table_ddl.c */
extern char *ShardCreateCommand(Oid relid, int64 shardId);
extern char *ShardDropCommand(const char *schemaName, const char *relname,
							  int64 shardId);
extern char *WorkerCreateSchemaCommand(Oid relid);
extern char *ColumnListString(Oid relid);
extern void AppendColumnDefinition(StringInfo buf, Relation rel, AttrNumber attnum);
extern char *ShardColumnDefault(Relation rel, AttrNumber attnum);
extern char *ShardConstraintName(const char *name, bool indexBacked, int64 shardId);
extern char *ShardConstraintCommand(Oid constraintOid, const char *shardName, int64 shardId);
extern char *ShardIndexCommand(Oid indexOid, const char *shardName, int64 shardId,
							   bool concurrently);
extern int	BeginSafeDeparse(void);
extern void EndSafeDeparse(int nestLevel);

#endif							/* SHARDEXT_DEPARSER_H */
