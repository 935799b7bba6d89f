/*-------------------------------------------------------------------------
 *
 * remote_xact.h
 *	  Remote transactions that follow the local one: BEGIN on first use,
 *	  one-phase commit when one connection wrote, two-phase commit when
 *	  several did, rollback everywhere on abort.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_REMOTE_XACT_H
#define SHARDEXT_REMOTE_XACT_H

#include "shardext/connection.h"

extern void InitializeRemoteTransactions(void);
extern void RemoteTransactionBegin(NodeConnection *conn);
extern char *RemoteTransactionBeginCommand(NodeConnection *conn);
extern char *RemoteTransactionPrepareCommand(NodeConnection *conn);
extern char *RemoteTransactionPrepareWithStatement(NodeConnection *conn);
extern void RemoteTransactionPrepareFailed(NodeConnection *conn);
extern void RemoteTransactionMarkModified(NodeConnection *conn);
extern void RemoteTransactionMarkSchemaChange(void);
extern void ExecuteOnNodesInTransaction(List *nodeIds, List *commands);
extern bool NodeHasOtherConnectionInTransaction(int32 nodeId, int exceptIndex);
extern bool RemoteTransactionWrote(void);
extern char *RemotePreparedGidPrefix(void);

/* commit_decision.c */
extern void InitializeCommitDecisions(void);

/* recovery.c */
extern int	RecoverShardextPreparedTransactions(bool skipFailing);

#endif							/* SHARDEXT_REMOTE_XACT_H */
