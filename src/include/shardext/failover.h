/*-------------------------------------------------------------------------
 *
 * failover.h
 *	  Self-healing: the maintenance daemon's health probes of the workers
 *	  (node_health.c), automatic failover to a replica (failover.c), the
 *	  promotion both it and shardext_promote_replica use
 *	  (replica_management.c), and cluster-wide restore points
 *	  (restore_point.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_FAILOVER_H
#define SHARDEXT_FAILOVER_H

#include "datatype/timestamp.h"

#include "shardext/metadata.h"

/* what the daemon knows of a worker when it considers failing it over */
typedef struct FailoverCandidateNode
{
	WorkerNode *node;			/* the primary that cannot be reached */
	TimestampTz lastAlive;		/* when a probe last reached it */
	TimestampTz syncSampledAt;	/* when syncStandbys was read (0: never) */
	const char *syncStandbys;	/* ','-joined names of its synchronous standbys */
} FailoverCandidateNode;

/* node_health.c */
extern Size NodeHealthShmemSize(void);
extern void NodeHealthShmemInit(void);
extern bool CheckNodeHealth(TimestampTz *nextCheck);
extern void ForgetNodeHealthConnections(void);

/* failover.c */
extern bool FailOverNode(FailoverCandidateNode *candidate, char **waitReason);

/* replica_management.c */
extern int32 PromoteReplicaNode(WorkerNode *replica, int waitSeconds);

/* restore_point.c */
extern void CreatePeriodicRestorePoint(void);

#endif							/* SHARDEXT_FAILOVER_H */
