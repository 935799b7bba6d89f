/*-------------------------------------------------------------------------
 *
 * poll_loop.h
 *	  Loops that ask for something again and again until it holds: with a
 *	  deadline, serving interrupts between passes, and allocating nothing
 *	  that outlives a pass.
 *
 *	PollLoop	poll;
 *
 *	StartPollLoop(&poll, timeoutMs, intervalMs);
 *	while (PollAgain(&poll))
 *	{
 *		... ask (allocations go to the pass's memory context) ...
 *		if (done)
 *			break;
 *	}
 *	EndPollLoop(&poll);		(false: the deadline passed)
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_POLL_LOOP_H
#define SHARDEXT_POLL_LOOP_H

#include "datatype/timestamp.h"
#include "utils/palloc.h"

typedef struct PollLoop
{
	TimestampTz deadline;
	long		intervalMs;
	int			passes;			/* begun so far */
	bool		timedOut;
	MemoryContext callerContext;
	MemoryContext passContext;	/* current during a pass, reset before the next */
} PollLoop;

extern void StartPollLoop(PollLoop *poll, long timeoutMs, long intervalMs);
extern bool PollAgain(PollLoop *poll);
extern bool EndPollLoop(PollLoop *poll);
extern void SleepInterruptibly(long milliseconds);

#endif							/* SHARDEXT_POLL_LOOP_H */
