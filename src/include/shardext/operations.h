/*-------------------------------------------------------------------------
 *
 * operations.h
 *	  Helpers shared by the SQL-callable operations (create/undistribute
 *	  table, node management).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_OPERATIONS_H
#define SHARDEXT_OPERATIONS_H

#include "fmgr.h"
#include "nodes/pg_list.h"
#include "shardext/connection.h"

/* one shard to create: its range and the nodes that get a placement */
typedef struct ShardLayout
{
	int32		hashMin;
	int32		hashMax;
	List	   *nodeIds;		/* int list */
} ShardLayout;

/* create_distributed_table.c */
extern void EnsureShardextReady(void);
extern List *WeightedShardLayout(int shardCount, List *nodes);
extern void CreateShardTablesOnNodes(Oid relid, List *shardIds, List *layouts);

/* foreign_keys.c */
extern void CheckForeignKeyAllowed(Oid constraintOid);
extern void CheckForeignKeysOfNewTable(Oid relid);

/* node_checks.c */
extern void CheckNewNode(const char *host, int32 port);

/* node_management.c */
struct NodeConnection;
extern void ReplicateReferenceTablesToNode(int32 nodeId);
extern void CheckSameMajorVersion(struct NodeConnection *conn, const char *host, int32 port);
extern char *CoordinatorId(void);

/* replica_management.c */
extern Datum shardext_update_node(PG_FUNCTION_ARGS);

#endif							/* SHARDEXT_OPERATIONS_H */
