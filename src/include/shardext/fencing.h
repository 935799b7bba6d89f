/*-------------------------------------------------------------------------
 *
 * fencing.h
 *	  Which server a node's address reaches: every server reports its
 *	  system identifier and timeline to each new connection
 *	  (shardext.server_identity), the catalog records those of each
 *	  worker's primary, and a connection to a server that reports others
 *	  (an old primary that a failover replaced) is refused.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_FENCING_H
#define SHARDEXT_FENCING_H

#include "shardext/connection.h"
#include "shardext/metadata.h"

/* what a server reports in shardext.server_identity; 0s when unknown */
typedef struct ServerIdentity
{
	uint64		systemId;
	uint32		timeline;
} ServerIdentity;

extern const char *ShowServerIdentity(void);
extern bool ParseServerIdentity(const char *text, ServerIdentity *identity);
extern bool ReportedServerIdentity(NodeConnection *conn, ServerIdentity *identity);
extern bool NodeIdentityMatches(WorkerNode *node, const ServerIdentity *identity);
extern bool CheckNodeConnectionIdentity(NodeConnection *conn, int elevel);
extern bool SetNodeIdentityCheck(bool enabled);
extern void RecordServerIdentity(int32 nodeId, NodeConnection *conn);
extern void RecordMissingIdentity(WorkerNode *node, NodeConnection *conn);
extern char *DescribeServerIdentity(const ServerIdentity *identity);

#endif							/* SHARDEXT_FENCING_H */
