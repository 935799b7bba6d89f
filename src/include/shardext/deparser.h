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

/* the parts of a shard's DDL (table_ddl.c) */
#define SHARD_DDL_TABLE			0x01	/* table, CHECK constraints, replica identity */
#define SHARD_DDL_INDEXES		0x02	/* keys, unique and exclusion constraints, indexes */
#define SHARD_DDL_FOREIGN_KEYS	0x04
#define SHARD_DDL_ALL			0x07

/* names the shard of a referenced distributed table (see ShardCreateForeignKeyCommands) */
typedef int64 (*ReferencedShardFunction) (Oid referencedRelid, void *arg);

/* table_ddl.c */
extern char *ShardCreateCommand(Oid relid, int64 shardId);
extern char *ShardCreateTableCommand(Oid relid, int64 shardId);
extern char *ShardCreateIndexCommands(Oid relid, int64 shardId);
extern char *ShardCreateForeignKeyCommands(Oid relid, int64 shardId,
										   ReferencedShardFunction referencedShard, void *arg);
extern char *ShardDropCommand(const char *schemaName, const char *relname,
							  int64 shardId);
extern char *WorkerCreateSchemaCommand(Oid relid);
extern char *WorkerEnsureSchemaCommand(const char *schemaName);
extern char *ColumnListString(Oid relid);
extern void AppendColumnDefinition(StringInfo buf, Relation rel, AttrNumber attnum);
extern char *ShardColumnDefault(Relation rel, AttrNumber attnum);
extern char *NotNullConstraintName(Oid relid, AttrNumber attnum);
extern char *ShardConstraintName(const char *name, bool indexBacked, int64 shardId);
extern char *ShardConstraintCommand(Oid constraintOid, const char *shardName, int64 shardId);
extern char *ShardIndexCommand(Oid indexOid, const char *shardName, int64 shardId,
							   bool concurrently);
extern int	BeginSafeDeparse(void);
extern void EndSafeDeparse(int nestLevel);

#endif							/* SHARDEXT_DEPARSER_H */
