/*-------------------------------------------------------------------------
 *
 * deadlock_detection.h
 *	  Distributed deadlock detection: the maintenance daemon collects the
 *	  lock waits of the coordinator and of every node, maps the nodes'
 *	  backends to the coordinator backends whose transactions they run,
 *	  finds wait cycles no single server sees, and cancels the youngest
 *	  transaction of each.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_DEADLOCK_DETECTION_H
#define SHARDEXT_DEADLOCK_DETECTION_H

/* shared memory for cancel requests (shardext.c sums and initialises it) */
extern Size DistributedDeadlockShmemSize(void);
extern void DistributedDeadlockShmemInit(void);

/* installs the cancel check into the waits for nodes (_PG_init) */
extern void InitializeDistributedDeadlockDetection(void);

/*
 * CheckForDistributedDeadlockCancel raises ERRCODE_T_R_DEADLOCK_DETECTED
 * when the detector picked this backend's transaction as a victim.  Called
 * by the loops that wait for nodes, after their latch was set (the
 * connection layer's through NodeWaitCancel_hook).
 */
extern void CheckForDistributedDeadlockCancel(void);

/* one round of detection (maintenance daemon); returns the victims */
extern int	DetectDistributedDeadlocks(void);

#endif							/* SHARDEXT_DEADLOCK_DETECTION_H */
