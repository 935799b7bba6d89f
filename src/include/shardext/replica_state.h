/*-------------------------------------------------------------------------
 *
 * replica_state.h
 *	  What the coordinator knows about the replay progress of read replicas,
 *	  in shared memory: the maintenance daemon polls the nodes, backends
 *	  read it when they route reads (no round trip per statement).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_REPLICA_STATE_H
#define SHARDEXT_REPLICA_STATE_H

#include "access/xlogdefs.h"
#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

/* a replica's state as the routing of reads sees it */
typedef struct ReplicaView
{
	bool		healthy;		/* the last poll succeeded: a standby of its primary */
	bool		caughtUp;		/* at the last poll it was at most one primary sample behind */
	XLogRecPtr	replayLsn;		/* replayed up to here at the last poll */
	TimestampTz sampleTime;		/* when that was */
	TimestampTz freshAsOf;		/* it has every commit made before this time (0: unknown) */
	TimestampTz failedUntil;	/* a backend could not use it: avoid it until then */
} ReplicaView;

/* a row of shardext.replica_status() */
typedef struct ReplicaStatusRow
{
	int32		nodeId;
	int32		primaryNodeId;	/* 0 for a primary */
	bool		healthy;
	XLogRecPtr	lsn;			/* replay LSN of a replica, insert LSN of a primary */
	TimestampTz sampleTime;
	TimestampTz freshAsOf;
	uint64		replicaReads;
	uint64		fallbacks;
	uint64		primaryReads;
} ReplicaStatusRow;

extern Size ReplicaStateShmemSize(void);
extern void ReplicaStateShmemRequest(void);
extern void ReplicaStateShmemInit(void);

/* backends */
extern bool GetReplicaView(int32 replicaNodeId, ReplicaView *view);
extern XLogRecPtr GetReplicaBarrier(int32 primaryNodeId);
extern void RaiseReplicaBarrier(int32 primaryNodeId);
extern void BeginReplicaChange(int32 primaryNodeId);
extern void EndReplicaChange(int32 primaryNodeId);
extern XLogRecPtr PrimaryLsnSampledAfter(int32 primaryNodeId, TimestampTz when);
extern void NoteReplicaFailure(int32 replicaNodeId, int forMs);
extern void CountReplicaRead(int32 replicaNodeId);
extern void CountReplicaFallback(int32 replicaNodeId);
extern void CountPrimaryRead(int32 primaryNodeId);
extern List *ReplicaStatusRows(void);

/* the maintenance daemon */
extern void ReportPrimarySample(int32 nodeId, uint32 addressHash, bool ok, XLogRecPtr lsn,
								TimestampTz sampleTime);
extern void ReportReplicaSample(int32 nodeId, int32 primaryNodeId, uint32 addressHash,
								bool ok, XLogRecPtr replayLsn, TimestampTz sampleTime);
extern void ForgetReplicaSlots(List *keepNodeIds);

#endif							/* SHARDEXT_REPLICA_STATE_H */
