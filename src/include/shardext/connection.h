/*-------------------------------------------------------------------------
 *
 * connection.h
 *	  Per-backend cache of libpq connections to worker nodes.
 *
 * Connections are keyed by (node, user): remote work always runs as the
 * user who runs the local statement, in the database of the same name.
 * A session opens at most shardext.max_connections_per_node connections to
 * one node, each holding a slot of the node's shared pool (shared_pool.c);
 * shardext.max_cached_connections_per_node of them stay open across
 * transactions, more while the node's pool can spare them (see
 * ConnectionsAtTransactionEnd).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_CONNECTION_H
#define SHARDEXT_CONNECTION_H

#include "libpq-fe.h"
#include "nodes/pg_list.h"
#include "utils/guc.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "shardext/shared_pool.h"

/* state of the remote transaction on one connection (see remote_xact.c) */
typedef enum RemoteXactState
{
	REMOTE_XACT_NONE = 0,		/* not in a remote transaction block */
	REMOTE_XACT_OPEN,			/* BEGIN done */
	REMOTE_XACT_PREPARED,		/* PREPARE TRANSACTION done */
	REMOTE_XACT_FAILED			/* an error happened inside the block */
} RemoteXactState;

/* where the results of a pipelined BEGIN and statement have got to */
typedef enum RemotePipelineStage
{
	PIPELINE_NONE,				/* not in pipeline mode */
	PIPELINE_BEGIN,				/* reading the results of BEGIN and Parse */
	PIPELINE_STATEMENT,			/* reading the statement's results */
	PIPELINE_PREPARE,			/* reading the result of PREPARE TRANSACTION */
	PIPELINE_SYNC				/* waiting for the end of the pipeline */
} RemotePipelineStage;

typedef struct NodeConnection
{
	int32		nodeId;
	Oid			userId;
	char	   *host;			/* copies, valid while the connection lives */
	int32		port;
	PGconn	   *pgConn;
	int			serial;			/* distinguishes connections of one backend */

	/* set while a command was sent and its results are not all read */
	bool		queryInProgress;
	/*
	 * BEGIN and a statement's Parse sent in one pipeline with the statement
	 * (and PREPARE TRANSACTION): see SendTask.  pipelineLeading counts the
	 * commands ahead of the statement whose results are still to come.
	 */
	RemotePipelineStage pipelineStage;
	int			pipelineLeading;
	/*
	 * Local transaction that last asked for the connection: connections
	 * handed out in the running transaction are never closed to make room
	 * in the shared pool (their users may still hold them).
	 */
	LocalTransactionId lastUsedLxid;

	/* remote transaction state, owned by remote_xact.c */
	RemoteXactState xactState;
	bool		xactModified;	/* wrote (DML or DDL) in this transaction */

	/*
	 * Remote savepoints mirror the local subtransactions that used the
	 * connection: savepoints exist remotely for local nesting levels
	 * 2..remoteLevel (1 = just BEGIN).  pendingReleaseLevel, when not 0, is
	 * the lowest level whose savepoint belongs to a committed subtransaction
	 * and is released lazily with the next command.
	 */
	int			remoteLevel;
	int			pendingReleaseLevel;
	char		preparedGid[200];

	/* session settings last sent to the node */
	char	   *remoteTimeZone;	/* NULL: unknown, send before next command */
	bool		timeZoneSetInXact;

	/* for the executor: its per-connection state (prepared statements) */
	void	   *executorState;
	/*
	 * Statements prepared on the node that the executor no longer uses (the
	 * tables they read changed): past a limit the connection is closed at
	 * the end of a transaction, which frees them on the node.
	 */
	int			abandonedStatements;

	/*
	 * WaitEventSet of the waits for this connection (latch, postmaster
	 * death, this socket), kept while pgConn lives when keepWaitSet is set
	 * (connections of the cache): creating one per wait costs an epoll
	 * instance per round trip.  Whoever closes pgConn calls
	 * ReleaseConnectionWaitSet.
	 */
	bool		keepWaitSet;
	void	   *waitSet;
	int			waitSetEvents;	/* the socket events it waits for */

	/* the node's shared count, and whether this connection holds a slot */
	PoolEntry  *poolEntry;
	bool		holdsSlot;
	bool		learnLimit;		/* ask the node its limit once connected */
	TimestampTz openedAt;

	/* set while the connection is being opened (StartNodeConnection) */
	bool		connecting;
	PostgresPollingStatusType pollStatus;
	bool		tcpEstablished; /* the attempt got past the TCP connection */
	TimestampTz connectDeadline;
	int			connectTimeoutMs;	/* 0: shardext.connect_timeout */

	/*
	 * Set while SendNodeCancelRequests sends a cancel request with libpq's
	 * non-blocking cancel API (remote_cancel.c): its PGcancelConn, and how
	 * far it got; the waits for the connection watch its socket then.
	 */
	void	   *cancelRequest;
	PostgresPollingStatusType cancelPollStatus;

	/*
	 * Dedicated connections (OpenDedicatedConnection) are closed when the
	 * resource owner that was current when they were opened is released,
	 * unless the caller closed them first or took them over
	 * (KeepConnectionAcrossTransactions).
	 */
	bool		dedicated;
	ResourceOwner owner;
} NodeConnection;

/* how far ProbeNodeConnection got */
typedef enum NodeProbeOutcome
{
	NODE_PROBE_CONNECTED,		/* ready for commands */
	NODE_PROBE_UNREACHABLE,		/* no TCP connection: refused, or not in time */
	NODE_PROBE_NOT_ANSWERING,	/* TCP connected, startup not finished in time */
	NODE_PROBE_REJECTED			/* TCP connected, the server refused or closed */
} NodeProbeOutcome;

extern void InitializeConnections(void);
extern NodeConnection *GetNodeConnection(int32 nodeId);
extern NodeConnection *GetNodeConnectionByIndex(int32 nodeId, int index);
extern NodeConnection *GetOptionalNodeConnection(int32 nodeId, int index);
extern NodeConnection *TryGetNodeConnectionByIndex(int32 nodeId, int index, int timeoutMs,
												   bool *unreachable);
extern NodeConnection *StartNodeConnection(int32 nodeId, int index, PoolSlotKind kind);
extern List *StartFirstNodeConnections(List *nodeIds);
extern bool CachedConnectionIsOpen(int32 nodeId, int index);
extern int	ContinueNodeConnection(NodeConnection *conn, bool socketReady);
extern void FinishNodeConnection(NodeConnection *conn);
extern void AdvanceConnect(NodeConnection *conn);
extern List *NodeConnectionList(int32 nodeId);
extern List *AllNodeConnections(void);
extern void CloseNodeConnection(NodeConnection *conn);
extern void DisconnectNodeConnection(NodeConnection *conn);
extern void ConnectionsAtTransactionEnd(void);
extern NodeConnection *OpenDedicatedConnection(const char *host, int32 port,
												bool replication, bool errorOnFailure);
extern NodeConnection *OpenDedicatedConnectionTo(const char *host, int32 port,
												  const char *dbname, bool errorOnFailure);
extern NodeConnection *OpenDedicatedConnectionWithTimeout(const char *host, int32 port,
														  int timeoutMs);
extern NodeConnection *OpenLoopbackConnection(bool errorOnFailure);
extern NodeConnection *ProbeNodeConnection(const char *host, int32 port, int timeoutMs,
										   NodeProbeOutcome *outcome, char **detail);
extern NodeConnection *OpenSideConnection(NodeConnection *conn, TimestampTz deadline);
extern void CloseDedicatedConnection(NodeConnection *conn);
extern void KeepConnectionAcrossTransactions(NodeConnection *conn);
extern bool LastConnectionTimedOut(void);
extern char *RemoteApplicationName(void);
extern char *RemoteApplicationNamePrefix(void);
extern void FormatSettingCommands(char **setCommand, char **resetCommand);

/* shardext.node_conninfo: check and assign hooks (guc.c) */
extern bool CheckNodeConninfo(char **newval, void **extra, GucSource source);
extern void AssignNodeConninfo(const char *newval, void *extra);

#endif							/* SHARDEXT_CONNECTION_H */
