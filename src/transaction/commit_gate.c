/*-------------------------------------------------------------------------
 *
 * commit_gate.c
 *	  The commit decision gate, which makes cluster-wide restore points
 *	  consistent.
 *
 * A distributed transaction commits at one moment, its commit decision:
 * the coordinator's commit record (two-phase commit), or the deciding
 * node's commit (last-participant commit, remote_xact.c).  Every
 * participant commits only after it (COMMIT PREPARED), and recovery
 * resolves prepared parts by it.  A restore point on every node
 * (restore_point.c) is consistent when no decision falls between the
 * points of two nodes: then each decision is before all of them or after
 * all of them, and restoring every node to that name leaves each
 * distributed transaction committed on all its nodes (recovery finishes
 * the prepared parts by the restored decision) or on none (prepared parts
 * without a decision roll back).
 *
 * So committers take the gate's lock in share mode from after their
 * PREPAREs until their decision is made and durable (the end of the local
 * commit, or the decider's answer), and recovery takes it around each
 * COMMIT PREPARED that it bases on a decider's decision (the decision may
 * have been committed late by a decider whose coordinator gave up
 * waiting).  A restore point takes it in exclusive mode for the few
 * milliseconds the points take: commit decisions wait meanwhile, nothing
 * else does.  The lock is a heavyweight lock (fair: a waiting restore point
 * holds back new committers instead of starving behind them), one per
 * coordinator server, since the workers' servers may hold the databases
 * of several coordinator databases.  Transactions that write on one node
 * only commit in one phase and never take it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/guc.h"

#include "shardext/commit_gate.h"

/* the gate's lock is held (shared) by this backend's transaction */
static bool decisionEntered = false;

/* SetGateLockTag: one lock per server (database 0) */
static void
SetGateLockTag(LOCKTAG *tag)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, 0, 0, SHARDEXT_LOCK_CLASS_COMMIT_GATE);
}

/*
 * EnterCommitDecision takes the gate in share mode, waiting while a
 * restore point is made, until LeaveCommitDecision or the end of the
 * transaction.
 */
void
EnterCommitDecision(void)
{
	LOCKTAG		tag;

	if (decisionEntered)
		return;
	SetGateLockTag(&tag);
	(void) LockAcquire(&tag, ShareLock, false, false);
	decisionEntered = true;
}

/*
 * LeaveCommitDecision releases the share lock once the decision is made;
 * safe to call when it is not held (the end of the transaction releases it
 * anyway).
 */
void
LeaveCommitDecision(void)
{
	LOCKTAG		tag;

	if (!decisionEntered)
		return;
	decisionEntered = false;
	SetGateLockTag(&tag);
	(void) LockRelease(&tag, ShareLock, false);
}

/*
 * CloseCommitGate takes the gate in exclusive mode, waiting at most
 * timeoutMs (lock_timeout for the wait) for the decisions under way, until
 * OpenCommitGate or the end of the transaction.
 */
void
CloseCommitGate(int timeoutMs)
{
	LOCKTAG		tag;
	int			nestLevel = NewGUCNestLevel();
	char		timeout[32];

	snprintf(timeout, sizeof(timeout), "%d", timeoutMs);
	(void) set_config_option("lock_timeout", timeout, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	SetGateLockTag(&tag);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	AtEOXact_GUC(true, nestLevel);
}

/* OpenCommitGate lets commit decisions through again */
void
OpenCommitGate(void)
{
	LOCKTAG		tag;

	SetGateLockTag(&tag);
	(void) LockRelease(&tag, ExclusiveLock, false);
}
