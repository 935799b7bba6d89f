/*-------------------------------------------------------------------------
 *
 * wait_graph.h
 *	  The lock waits the distributed deadlock detector reads (wait_graph.c)
 *	  and searches for cycles (deadlock_detection.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_WAIT_GRAPH_H
#define SHARDEXT_WAIT_GRAPH_H

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"
#include "storage/lock.h"

/* the coordinator itself in WaitVertex.nodeId and WaitEdge.onNode */
#define COORDINATOR_NODE 0

/*
 * A vertex of the wait graph: a coordinator backend (nodeId 0; for the
 * backends of this database's shardext sessions, their distributed
 * transaction) or a backend on a node that no coordinator session of ours
 * owns.
 */
typedef struct WaitVertex
{
	int32		nodeId;
	int32		pid;
} WaitVertex;

/* a lock wait: waiter waits for holder, on server onNode */
typedef struct WaitEdge
{
	WaitVertex	waiter;
	WaitVertex	holder;
	int32		onNode;
	int32		waiterPid;		/* the backends on that server */
	int32		holderPid;
} WaitEdge;

/* a coordinator backend seen in a reading: its transaction and its age */
typedef struct CoordinatorBackend
{
	int32		pid;
	LocalTransactionId lxid;
	TimestampTz xactStart;
} CoordinatorBackend;

/* one reading of the wait graph */
typedef struct WaitGraph
{
	List	   *edges;			/* WaitEdge * */
	List	   *backends;		/* CoordinatorBackend * */
	bool		anyRemote;		/* an edge on a node */
	bool		longRemoteWait; /* a coordinator statement waits for a node */
} WaitGraph;

/* wait_graph.c */
extern WaitGraph *ReadWaitGraph(void);
extern void CloseDetectorConnections(void);
extern char *WaitGraphServerName(int32 nodeId);

#endif							/* SHARDEXT_WAIT_GRAPH_H */
