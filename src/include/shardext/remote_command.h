/*-------------------------------------------------------------------------
 *
 * remote_command.h
 *	  Sending commands to nodes and reading their results, interruptibly,
 *	  and relaying remote errors.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_REMOTE_COMMAND_H
#define SHARDEXT_REMOTE_COMMAND_H

#include "shardext/connection.h"

/* called by CopyBetweenNodes after each row it passed on */
typedef void (*CopyRowHook) (void *arg, int length);

/* what WaitForNodeUntil waits for */
typedef enum NodeWaitGoal
{
	NODE_WAIT_CONNECTED,		/* the connection attempt ended */
	NODE_WAIT_RESULT,			/* the next result can be read; output sent */
	NODE_WAIT_FLUSHED,			/* everything buffered was sent */
	NODE_WAIT_INPUT,			/* some input arrived (COPY data) */
	NODE_WAIT_CANCEL_SENT		/* conn->cancelRequest was delivered */
} NodeWaitGoal;

typedef enum NodeWaitResult
{
	NODE_WAIT_DONE,
	NODE_WAIT_TIMEOUT,
	NODE_WAIT_FAILED
} NodeWaitResult;

/*
 * NodeWaitCancel_hook, when set, runs in every interruptible wait for a
 * node after its latch was set, before interrupts are served, and may
 * throw.  Layers above the connection layer set it at _PG_init (the
 * distributed deadlock detector, to cancel its victims); chain to the
 * previous value.
 */
typedef void (*NodeWaitCancel_hook_type) (void);
extern PGDLLIMPORT NodeWaitCancel_hook_type NodeWaitCancel_hook;

extern void ServeNodeWaitInterrupts(void);

/* one command of TryRemotePipeline, with its parameters */
typedef struct PipelineCommand
{
	const char *sql;
	const char *statementName;	/* prepared on the connection, or NULL */
	int			nParams;
	const Oid  *types;
	const char *const *values;
	const int  *lengths;
	const int  *formats;
} PipelineCommand;

typedef enum PipelineOutcome
{
	PIPELINE_SUCCEEDED,
	PIPELINE_FAILED,
	PIPELINE_NOT_SENT,
	PIPELINE_NO_ANSWER
} PipelineOutcome;

extern NodeWaitResult WaitForNodeUntil(NodeConnection *conn, NodeWaitGoal goal,
									   TimestampTz deadline, bool interruptible);
extern void SetRemoteCommandTimeout(int timeoutMs);
extern PGresult *TryRemoteQuery(NodeConnection *conn, const char *query,
								int nParams, const char *const *params,
								int timeoutMs, char **failure);
extern const char *RemoteFailureSqlstate(void);
extern char *ExecuteStandbyScalar(NodeConnection *conn, const char *query,
								  TimestampTz deadline);
extern bool TryPrepareRemoteStatement(NodeConnection *conn, const char *name,
									  const char *sql, int nParams, const Oid *types,
									  int timeoutMs, char **failure);
extern PipelineOutcome TryRemotePipeline(NodeConnection *conn,
										 PipelineCommand *commands, int count,
										 int timeoutMs, int *failedIndex,
										 PGresult **error, char **failure);

/* remote_cancel.c */
extern List *SendNodeCancelRequests(List *conns, TimestampTz deadline);
extern pgsocket NodeWaitSocket(NodeConnection *conn);
extern void AdvanceCancelRequest(NodeConnection *conn);

extern void SyncRemoteTimeZone(NodeConnection *conn);
extern void SendRemoteCommand(NodeConnection *conn, const char *command);
extern void SendRemoteCommandParams(NodeConnection *conn, const char *command,
									int nParams, const Oid *paramTypes,
									const char *const *paramValues);
extern PGresult *GetRemoteResult(NodeConnection *conn);
extern int	WaitOnNodeConnection(NodeConnection *conn, int socketEvents, long timeoutMs);
extern void WaitForRemoteSocket(NodeConnection *conn, bool forWrite);
extern void ReleaseConnectionWaitSet(NodeConnection *conn);
extern void ExecuteRemoteCommand(NodeConnection *conn, const char *command);
extern PGresult *ReadRemoteResults(NodeConnection *conn, PGresult **firstError);
extern PGresult *FinishRemoteQuery(NodeConnection *conn, const char *command);
extern PGresult *ExecuteRemoteQuery(NodeConnection *conn, const char *query);
extern PGresult *ExecuteRemoteQueryParams(NodeConnection *conn, const char *query,
										  int nParams, const char *const *params);
extern char *ExecuteRemoteScalar(NodeConnection *conn, const char *query, int nParams,
								 const char *const *params);
extern void ExecuteRemoteCommandsInParallel(List *connections, List *commands);
extern void ReportRemoteError(NodeConnection *conn, PGresult *result, int elevel,
							  const char *command);
extern void ReportConnectionError(NodeConnection *conn, int elevel);
extern bool CancelRemoteCommand(NodeConnection *conn, int timeoutMs);
extern List *CancelRemoteCommands(List *conns, int timeoutMs);
extern bool DrainRemoteResults(NodeConnection *conn, int timeoutMs);
extern bool TryRemoteCommandNoInterrupts(NodeConnection *conn, const char *command,
										 int timeoutMs);
extern bool TryFinishRemoteCommandNoInterrupts(NodeConnection *conn, const char *command,
											   int timeoutMs);
extern PGresult *TryRemoteQueryNoInterrupts(NodeConnection *conn, const char *query,
											int timeoutMs);
extern bool RemoteResultReady(NodeConnection *conn);
extern void SendRemoteCopyData(NodeConnection *conn, const char *data, int length);
extern void EndRemoteCopy(NodeConnection *conn, const char *errorMessage);
extern void QueueRemoteCopyEnd(NodeConnection *conn);
extern bool TryFlushRemoteOutput(NodeConnection *conn);
extern void BeginRemoteCopy(NodeConnection *conn, const char *command,
							ExecStatusType copyStatus);
extern int	ReceiveRemoteCopyData(NodeConnection *conn, char **buffer);
extern void FreeRemoteCopyData(char *buffer);
extern void CopyBetweenNodes(NodeConnection *source, const char *copyOut,
							 NodeConnection *target, const char *copyIn,
							 CopyRowHook rowHook, void *hookArg);

#endif							/* SHARDEXT_REMOTE_COMMAND_H */
