/*-------------------------------------------------------------------------
 *
 * commit_gate.h
 *	  The commit decision gate: distributed transactions pass it shared
 *	  while they decide to commit, a cluster-wide restore point closes it
 *	  (see commit_gate.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_COMMIT_GATE_H
#define SHARDEXT_COMMIT_GATE_H

/* pg_locks.objsubid of the gate's advisory-style lock (see resource_lock.h) */
#define SHARDEXT_LOCK_CLASS_COMMIT_GATE 11

extern void EnterCommitDecision(void);
extern void LeaveCommitDecision(void);
extern void CloseCommitGate(int timeoutMs);
extern void OpenCommitGate(void);

#endif							/* SHARDEXT_COMMIT_GATE_H */
