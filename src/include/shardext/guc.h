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
extern int	ShardextMaxSharedPoolSize;
extern int	ShardextConnectionWaitTimeout;
extern int	ShardextMaxCachedConnectionsPerNode;
extern int	ShardextConnectionLifetime;
extern int	ShardextConnectionShareInterval;
extern int	ShardextExecutorSlowStartInterval;
extern char *ShardextNodeConninfo;
extern bool ShardextEnableDDLPropagation;
extern bool ShardextExplainAllTasks;
extern bool ShardextEnablePushdown;
extern bool ShardextEnableRepartitionJoins;
extern int	ShardextRepartitionJoinMinRows;
extern int	ShardextBroadcastJoinMaxRows;
extern int	ShardextRepartitionJoinPartitions;
extern int	ShardextMaxIntermediateResultSize;
extern int	ShardextMultiNodeCommit;
extern bool ShardextLastParticipantCommit;
extern int	ShardextRecoveryInterval;
extern int	ShardextDistributedDeadlockTimeout;
extern int	ShardextSagaMaxRetries;
extern int	ShardextSagaRetention;

/* shardext.multi_node_commit */
#define MULTI_NODE_COMMIT_2PC 0
#define MULTI_NODE_COMMIT_REJECT 1

extern int	ShardextMoveMaxLag;
extern int	ShardextMoveLockTimeout;
extern int	ShardextMoveCutoverTimeout;
extern int	ShardextMoveCatchUpTimeout;
extern int	ShardextMoveDropTimeout;
extern int	ShardextMinFreeDiskSpace;
extern bool ShardextMoveVerify;
extern char *ShardextSplitMap;
extern int	ShardextNodeId;
extern int	ShardextSnowflakeMaxClockSkew;

/*
 * Test-only settings: they exist only in a test build (make
 * SHARDEXT_TEST_BUILD=1), and so does the code that reads them.
 */
#ifdef SHARDEXT_TEST_HOOKS
/* shardext.test_fault */
#define TEST_FAULT_NONE 0
#define TEST_FAULT_CRASH_AFTER_PREPARE 1
#define TEST_FAULT_CRASH_AFTER_LOCAL_COMMIT 2
#define TEST_FAULT_LOSE_DECIDER_ANSWER 4
#define TEST_FAULT_EXIT_AFTER_DECISION 5
extern int	ShardextTestFault;
/* shardext.saga_test_fault: where a saga's runner crashes (saga_steps.c) */
#define TEST_SAGA_NONE 0
#define TEST_SAGA_CRASH_BEFORE_STEP 1
#define TEST_SAGA_CRASH_AFTER_STEP 2
#define TEST_SAGA_CRASH_BEFORE_COMPENSATION 3
#define TEST_SAGA_CRASH_AFTER_COMPENSATION 4
#define TEST_SAGA_LOSE_STEP_ANSWER 5
extern int	ShardextSagaTestFault;
extern int	ShardextSagaTestFaultStep;
extern char *ShardextMoveTestPausePhase;
extern int	ShardextMoveTestPauseMs;
extern int	ShardextSnowflakeClockOffset;
extern char *ShardextTestPausePoints;
#endif
extern int	ShardextStatTenantsLimit;
extern int	ShardextStatTenantsPeriod;
extern double ShardextStatTenantsSampleRate;
extern bool ShardextRebalanceIsolatedTenants;

extern bool ShardextReplicaReads;
extern int	ShardextMaxReplicaLag;
extern int	ShardextReadYourWrites;
extern int	ShardextPinWindow;
extern char *ShardextReadAfter;
extern int	ShardextReplicaWaitTimeout;
extern int	ShardextReplicaPollInterval;
extern int	ShardextReplicaConnectTimeout;
extern char *ShardextCommitLsn;

extern bool ShardextAutoFailover;
extern int	ShardextHealthCheckInterval;
extern int	ShardextFailoverTimeout;
extern int	ShardextFailoverMaxLag;
extern int	ShardextRestorePointInterval;
extern char *ShardextServerIdentity;

/* shardext.read_your_writes */
#define READ_YOUR_WRITES_LSN 0
#define READ_YOUR_WRITES_TIME 1
#define READ_YOUR_WRITES_OFF 2

extern void RegisterShardextGucs(void);

#endif							/* SHARDEXT_GUC_H */
