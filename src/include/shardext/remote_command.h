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

extern void SyncRemoteTimeZone(NodeConnection *conn);
extern void SendRemoteCommand(NodeConnection *conn, const char *command);
extern void SendRemoteCommandParams(NodeConnection *conn, const char *command,
									int nParams, const Oid *paramTypes,
									const char *const *paramValues);
extern PGresult *GetRemoteResult(NodeConnection *conn);
extern void WaitForRemoteSocket(NodeConnection *conn, bool forWrite);
extern void ExecuteRemoteCommand(NodeConnection *conn, const char *command);
extern PGresult *ExecuteRemoteQuery(NodeConnection *conn, const char *query);
extern void ExecuteRemoteCommandsInParallel(List *connections, List *commands);
extern void ReportRemoteError(NodeConnection *conn, PGresult *result, int elevel,
							  const char *command);
extern void ReportConnectionError(NodeConnection *conn, int elevel);
extern bool CancelRemoteCommand(NodeConnection *conn, int timeoutMs);
extern bool DrainRemoteResults(NodeConnection *conn, int timeoutMs);
extern bool ExecuteRemoteCommandWithTimeout(NodeConnection *conn, const char *command,
											int timeoutMs);
extern bool FinishRemoteCommandWithTimeout(NodeConnection *conn, const char *command,
										   int timeoutMs);
extern void SendRemoteCopyData(NodeConnection *conn, const char *data, int length);
extern void EndRemoteCopy(NodeConnection *conn, const char *errorMessage);

#endif							/* SHARDEXT_REMOTE_COMMAND_H */
