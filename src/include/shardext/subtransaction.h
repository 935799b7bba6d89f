/*-------------------------------------------------------------------------
 *
 * subtransaction.h
 *	  Running a piece of work in an internal subtransaction and keeping its
 *	  error.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_SUBTRANSACTION_H
#define SHARDEXT_SUBTRANSACTION_H

typedef void (*SubtransactionPart) (void *arg);

extern ErrorData *RunInSubtransaction(SubtransactionPart part, void *arg);

#endif							/* SHARDEXT_SUBTRANSACTION_H */
