/*-------------------------------------------------------------------------
 *
 * guc.h
 *	  Configuration variables of shardext (all named shardext.*).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_GUC_H
#define SHARDEXT_GUC_H

extern int	ShardextShardCount;
extern int	ShardextConnectTimeout;
extern int	ShardextMaxConnectionsPerNode;
extern char *ShardextNodeConninfo;
extern bool ShardextEnableDDLPropagation;
extern bool ShardextExplainAllTasks;
extern bool ShardextEnablePushdown;

extern void RegisterShardextGucs(void);

#endif							/* SHARDEXT_GUC_H */
