/*-------------------------------------------------------------------------
 *
 * distributed_executor.h
 *	  Execution state of the distributed CustomScan, shared by the executor
 *	  and its EXPLAIN support.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_DISTRIBUTED_EXECUTOR_H
#define SHARDEXT_DISTRIBUTED_EXECUTOR_H

#include "access/xlogdefs.h"
#include "libpq-fe.h"
#include "nodes/execnodes.h"
#include "utils/tuplestore.h"

#include "shardext/connection.h"
#include "shardext/distributed_plan.h"
#include "shardext/metadata.h"

/* parameter values in the form libpq sends them */
typedef struct RemoteParams
{
	int			count;
	Oid		   *types;
	const char **values;
	int		   *lengths;
	int		   *formats;
} RemoteParams;

typedef struct TaskConnection TaskConnection;
typedef struct NodeTaskQueue NodeTaskQueue;

/* a shard of a unique global index that a task writes */
typedef struct UniqueShard
{
	char	   *relname;		/* the shard table's name */
	const char *indexName;
} UniqueShard;

/* one statement on one placement */
typedef struct RemoteTask
{
	char	   *sql;
	int32		nodeId;
	int64		shardId;
	bool		returnsRows;	/* its rows are part of the scan's result */
	RemoteParams *params;
	bool		sent;
	bool		done;
	uint64		affectedRows;
	Tuplestorestate *buffer;	/* rows read ahead to free the connection */
	TaskConnection *taskConn;
	/* INSERT ... RETURNING over several shards: the rows' places in the statement */
	int		   *rowPositions;
	int			rowCount;
	List	   *returnedRows;	/* MinimalTuples kept until every task is done */
	/* writes to unique global indexes: their violations go by the index name */
	List	   *uniqueShards;	/* UniqueShard * */
	/* global index maintenance: what it keeps per task (LockedRows ...) */
	void	   *taskPrivate;
	/* a write by ctid must change exactly the rows it was given */
	bool		checkRows;
	uint64		expectedRows;
	/* a read routed to a replica (nodeId) of a node: that node, else 0 */
	int32		primaryNodeId;
	XLogRecPtr	waitLsn;		/* the replica must have replayed this first */
	bool		waitPending;	/* the result of that wait is still to come */
	uint64		rowsSeen;		/* rows returned so far */
} RemoteTask;

/* a connection the scan uses */
struct TaskConnection
{
	NodeConnection *conn;
	NodeTaskQueue *node;		/* whose tasks it runs */
	RemoteTask *current;		/* sent; results not all read */
	List	   *batch;			/* sent after current in the same query string */
	int			batchSize;		/* how many tasks the next send may take */
	TimestampTz batchSent;		/* when the last send went out */
	int			connectEvents;	/* while conn->connecting: the socket events it needs */
	bool		socketReady;	/* ... and they happened */
};

/* the tasks of one node, taken by its connections as they become free */
struct NodeTaskQueue
{
	int32		nodeId;
	List	   *pending;		/* RemoteTask * not yet sent */
	List	   *taskConns;		/* TaskConnection * to the node */
	TimestampTz lastOpened;		/* when the scan last added a connection */
	int			burst;			/* connections the next slow start step may open */
	bool		poolFull;		/* the shared pool refused one: stop asking */
};

typedef struct DistributedScanState
{
	CustomScanState css;
	DistributedJob *job;
	List	   *pruneExprStates;
	List	   *paramExprStates;
	List	   *insertExprStates;
	MemoryContext execContext;	/* tasks, parameters; reset at rescan */
	MemoryContext rowContext;	/* converted values of the current row */
	bool		tasksBuilt;
	bool		started;
	bool		finished;
	bool		subplanDone;	/* INSERT ... SELECT read every row */
	/* INSERT ... SELECT reads all its rows before it writes any (see task_builder.c) */
	Tuplestorestate *sourceRows;
	TupleTableSlot *sourceSlot;
	MemoryContext batchContext; /* rows and tasks of one INSERT batch */
	bool		inTransaction;	/* tasks run inside remote transactions */
	bool		prepareWithTasks;	/* PREPARE goes with each connection's task */
	int			subxactLevel;	/* nesting level the execution started at */
	List	   *tasks;
	List	   *nodeQueues;		/* NodeTaskQueue *, by node id */
	List	   *taskConns;		/* TaskConnection *, of every node */
	List	   *bufferedTasks;	/* RemoteTask * whose buffer is still to read */
	int			nextConn;		/* round-robin start of the next poll */
	int			remoteColumns;
	AttrNumber *columnAttnos;	/* per remote column: attribute of the scan slot */
	FmgrInfo   *inputFunctions; /* per scan slot attribute */
	Oid		   *typioparams;
	int32	   *typmods;
	TupleTableSlot *bufferSlot;
	/* RETURNING rows of a multi-shard INSERT, handed out in the rows' order */
	bool		orderReturning;
	int			insertRowCount; /* rows of the statement or batch */
	MinimalTuple *orderedRows;	/* by position; NULL where a row returned nothing */
	int			orderedNext;
	uint64		affectedRows;
	double		explainTime;
	/* global indexes: changes to write at the end, and what EXPLAIN shows */
	struct GlobalIndexChanges *gindexChanges;
	List	   *lockTasks;		/* GINDEX_LOCK_THEN_UPDATE: the locking SELECTs */
	struct GlobalIndexLookupNote *lookupNote;
	struct TenantSample *tenantSample;	/* sampled for shardext.stat_tenants */
	/* JOB_ROUTED (routed_writes.c) */
	struct RoutedWriteState *routed;
	/* a repartition join's exchange (repartition_exchange.c) */
	struct RepartitionExchange *exchange;
	bool		rerouted;		/* a replica's task moved to its primary */
	/* rows kept for rescans that would send the same queries (scan_replay.c) */
	Bitmapset  *remoteParams;	/* executor parameters of custom_exprs */
	Tuplestorestate *keptRows;
	bool		keepRows;		/* this run's rows go to keptRows */
	bool		keptComplete;	/* keptRows holds a whole run */
	bool		replaying;		/* rows come from keptRows */
} DistributedScanState;

/* a row a task returned, handed to an ExecuteRemoteTasks callback */
typedef void (*RemoteRowCallback) (RemoteTask *task, PGresult *row, void *arg);

/* per-connection executor state (NodeConnection.executorState) */
typedef struct ConnectionExecState
{
	NodeConnection *conn;		/* whose executorState this is */
	HTAB	   *statements;		/* SQL hash -> prepared statement */
	int			statementCount; /* names used: sx1 .. sx<statementCount> */
	int			preparedCount;	/* statements prepared and in use */
	uint64		generation;		/* DistTableCacheGeneration they were made for */
	uint64		parsingKey;		/* the statement whose Parse is in flight */
	int			parsingNumber;	/* ... and its number; 0: none */
	DistributedScanState *owner;	/* scan whose task is in flight */
} ConnectionExecState;

/* how long a connection's leftover results may take to drain */
#define DRAIN_TIMEOUT_MS 30000

/* distributed_executor.c */
extern void BuildDistributedTasks(DistributedScanState *state);
extern char *FirstShardTaskSql(DistributedScanState *state);
extern void ReleaseConnection(NodeConnection *conn);
extern void ExecutorConnectionFailed(NodeConnection *conn);

/*
 * remote_scan_check.c: test and assert builds check that distributed scans
 * read only what their remote SQL fetches
 */
#if defined(SHARDEXT_TEST_HOOKS) || defined(USE_ASSERT_CHECKING)
#define SHARDEXT_CHECK_REMOTE_SCANS
extern void CheckRemoteScanColumns(DistributedScanState *state);
extern void CheckRemoteResultTypes(DistributedScanState *state, PGresult *result);
#endif

/* scan_replay.c */
extern void InitScanReplay(DistributedScanState *state);
extern bool RescanFromKeptRows(DistributedScanState *state);
extern bool ReplayKeptRow(DistributedScanState *state, TupleTableSlot *slot);
extern void KeepScanRow(DistributedScanState *state, TupleTableSlot *slot);
extern void KeptRowsComplete(DistributedScanState *state);
extern void EndScanReplay(DistributedScanState *state);

/* connection_state.c */
extern ConnectionExecState *GetConnectionExecState(NodeConnection *conn);
extern char *PreparedStatementName(NodeConnection *conn, const char *sql, RemoteParams *params,
								   bool *failed, PGresult **error);
extern char *StatementToRun(NodeConnection *conn, const char *sql, bool *parse);
extern void StatementParsed(NodeConnection *conn);
extern void ForgetStatementsIfStale(NodeConnection *conn, PGresult *result);
extern bool FlushOutput(NodeConnection *conn);
extern NodeConnection *SendTaskCommand(DistributedScanState *state, RemoteTask *task,
									   const char *command);
extern void ExecuteRemoteTasks(List *tasks, bool writes, bool inTransaction,
							   RemoteRowCallback callback, void *arg);
extern bool RemoteReadsInTransaction(void);

/* task_queues.c */
extern void AssignTasksToConnections(DistributedScanState *state);
extern bool AdvanceConnecting(TaskConnection *tc);
extern void OpenMoreConnections(DistributedScanState *state);
extern long NextExecutorTimeout(DistributedScanState *state);
extern int	TaskBatchSize(DistributedScanState *state, TaskConnection *tc);
extern void TaskBatchDone(TaskConnection *tc);
extern void RequeueTask(DistributedScanState *state, RemoteTask *task);

/* replica_routing.c */
extern void RouteReadsToReplicas(DistributedScanState *state);
extern void ConnectReplicaTasks(DistributedScanState *state);
extern char *ReplicaWaitCommand(RemoteTask *task);
extern void MoveTaskToPrimary(RemoteTask *task, bool replicaFailed);
extern bool RetryOnPrimary(DistributedScanState *state, TaskConnection *tc, RemoteTask *task,
						   PGresult *result, bool closeConnection);
extern void NoteAutocommitWrite(DistributedScanState *state, RemoteTask *task,
								NodeConnection *conn);

/* task_builder.c */
extern RemoteTask *AddShardTasks(DistributedScanState *state, ShardInterval *taskShard,
								 char *sql, RemoteParams *params, bool write);
extern void EncodeRemoteParam(RemoteParams *params, int i, Datum value, bool isnull, Oid type);
extern RemoteParams *MakeRemoteParams(int count);
extern RemoteParams *EvaluateParams(DistributedScanState *state, List *exprStates,
									 int first, int count);
extern void MaterializeSubplan(DistributedScanState *state);
extern bool NextSourceRow(DistributedScanState *state);
extern DistTableCacheEntry *LockAllShardsForWrite(Oid relid);
extern int	ShardIndexForRow(DistTableCacheEntry *entry, Datum value, bool isnull);

/* routed_writes.c */
extern void BuildRoutedTasks(DistributedScanState *state);
extern bool NextRoutedReturnedRow(DistributedScanState *state, TupleTableSlot *slot);
extern void ResetRoutedWrite(DistributedScanState *state);
extern RemoteParams *AddSourceArrayParams(DistributedScanState *state, RemoteParams *params);

/* distributed_explain.c */
extern void ExplainDistributedScan(CustomScanState *node, List *ancestors,
								   ExplainState *es);

#endif							/* SHARDEXT_DISTRIBUTED_EXECUTOR_H */
