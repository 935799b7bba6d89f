/*-------------------------------------------------------------------------
 *
 * read_your_writes.h
 *	  What a session has written where (commit LSNs per node), what it was
 *	  told to read after (causal tokens), and what that requires of a
 *	  replica before reads may use it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_READ_YOUR_WRITES_H
#define SHARDEXT_READ_YOUR_WRITES_H

#include "access/xlogdefs.h"
#include "utils/guc.h"

#include "shardext/connection.h"

/* the SQL that returns a node's WAL insert position */
#define CURRENT_LSN_QUERY "SELECT pg_catalog.pg_current_wal_insert_lsn()"

/* read_your_writes.c */
extern void InitializeReadYourWrites(void);
extern void NoteNodeWrite(int32 nodeId, XLogRecPtr commitLsn);
extern XLogRecPtr ReportedCommitLsn(NodeConnection *conn);
extern XLogRecPtr ParseCommitLsn(const char *text);
extern bool ReplicaRequirement(int32 primaryNodeId, XLogRecPtr *requiredLsn);
extern List *SessionWriteLsns(List **unknownNodeIds);

/* causal_token.c */
extern bool CheckReadAfterToken(char **newval, void **extra, GucSource source);
extern void AssignReadAfterToken(const char *newval, void *extra);
extern XLogRecPtr ReadAfterLsn(int32 nodeId);

/* a (node, LSN) pair, as kept in lists of SessionWriteLsns */
typedef struct NodeLsn
{
	int32		nodeId;
	XLogRecPtr	lsn;
} NodeLsn;

#endif							/* SHARDEXT_READ_YOUR_WRITES_H */
