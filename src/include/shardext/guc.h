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
extern int	ShardextMoveMaxLag;
extern int	ShardextMoveLockTimeout;
extern int	ShardextMoveCutoverTimeout;
extern int	ShardextMoveDropTimeout;
extern int	ShardextMinFreeDiskSpace;
extern bool ShardextMoveVerify;
extern char *ShardextSplitMap;
extern char *ShardextMoveTestPausePhase;
extern int	ShardextMoveTestPauseMs;
extern int	ShardextNodeId;
extern int	ShardextSnowflakeMaxClockSkew;
extern int	ShardextSnowflakeClockOffset;

extern void RegisterShardextGucs(void);

#endif							/* SHARDEXT_GUC_H */
