/*-------------------------------------------------------------------------
 *
 * deparser.h
 *	  Producing SQL text that workers run.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_DEPARSER_H
#define SHARDEXT_DEPARSER_H

#include "nodes/pg_list.h"

/* table_ddl.c */
extern char *ShardCreateCommand(Oid relid, int64 shardId);
extern char *ShardCreateTableCommand(Oid relid, int64 shardId);
extern char *ShardCreateIndexCommands(Oid relid, int64 shardId);
extern char *ShardDropCommand(const char *schemaName, const char *relname,
							  int64 shardId);
extern char *WorkerCreateSchemaCommand(Oid relid);
extern char *ColumnListString(Oid relid);
extern int	BeginSafeDeparse(void);
extern void EndSafeDeparse(int nestLevel);

#endif							/* SHARDEXT_DEPARSER_H */
