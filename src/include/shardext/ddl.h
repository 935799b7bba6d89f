/*-------------------------------------------------------------------------
 *
 * ddl.h
 *	  Propagating DDL on distributed and reference tables to their shards.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_DDL_H
#define SHARDEXT_DDL_H

#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "tcop/utility.h"

/* what a table looked like before a utility command (ddl_propagation.c) */
typedef struct TableSchemaState TableSchemaState;

extern List *CaptureTableStates(List *relids);
extern void PropagateTableChanges(List *beforeStates, List *usingExpressions);
extern List *RelatedDistributedTables(Oid relid);
extern void ExecuteOnShardPlacements(List *placementCommands);

/* one command for one placement (node) */
typedef struct PlacementCommand
{
	int32		nodeId;
	char	   *command;
} PlacementCommand;

extern PlacementCommand *MakePlacementCommand(int32 nodeId, char *command);
extern void *MakeUsingExpression(Oid relid, AttrNumber attnum, char *expression);

/* concurrent_index.c */
extern List *TableIndexes(Oid relid);
extern void CreateShardIndexesConcurrently(Oid relid, List *indexesBefore);
extern List *DropShardIndexCommands(Oid relid, Oid indexOid);
extern void RunPlacementCommandsOneAtATime(List *placementCommands);

/* vacuum_commands.c */
extern List *VacuumShardCommands(VacuumStmt *stmt);
extern List *ReindexShardCommands(ReindexStmt *stmt);

/* ddl_commands.c */
extern List *ShardPlacementCommands(Oid relid,
									char *(*build) (Oid relid, int64 shardId, void *arg),
									void *arg);
extern bool ShardextPreprocessUtility(PlannedStmt *pstmt, const char *queryString,
									  bool readOnlyTree, ProcessUtilityContext context,
									  ParamListInfo params, QueryEnvironment *queryEnv,
									  DestReceiver *dest, QueryCompletion *qc);

#endif							/* SHARDEXT_DDL_H */
