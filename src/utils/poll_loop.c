/*-------------------------------------------------------------------------
 *
 * poll_loop.c
 *	  Polling loops with a deadline, a cancel check and no allocation
 *	  that outlives a pass (see poll_loop.h for the pattern).
 *
 * What a pass asks (a query on a node, a catalog read) allocates in the
 * pass's own memory context, which is reset before the next pass: a wait
 * of minutes at a pass a millisecond does not pile up in the caller's
 * context.  A value the caller keeps after the loop must be copied into
 * poll->callerContext.  The pass context is a child of the caller's, so an
 * error in a pass frees it with the caller's context.  Between passes the
 * backend sleeps on its latch and serves interrupts: a cancel or
 * statement_timeout ends the loop with the usual error.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "shardext/poll_loop.h"

/*
 * StartPollLoop prepares a loop that passes every intervalMs until
 * timeoutMs from now.
 */
void
StartPollLoop(PollLoop *poll, long timeoutMs, long intervalMs)
{
	Assert(timeoutMs >= 0 && intervalMs > 0);
	poll->deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeoutMs);
	poll->intervalMs = intervalMs;
	poll->passes = 0;
	poll->timedOut = false;
	poll->callerContext = CurrentMemoryContext;
	poll->passContext = AllocSetContextCreate(CurrentMemoryContext, "shardext poll loop",
											  ALLOCSET_SMALL_SIZES);
}

/*
 * PollAgain begins the next pass and returns true, after sleeping the
 * interval (not before the first pass); it returns false, in the caller's
 * memory context, once the deadline has passed.  Interrupts are served
 * while it sleeps.
 */
bool
PollAgain(PollLoop *poll)
{
	if (poll->passes > 0)
	{
		long		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
																poll->deadline);

		MemoryContextSwitchTo(poll->callerContext);
		if (remaining <= 0)
		{
			poll->timedOut = true;
			return false;
		}
		SleepInterruptibly(Min(remaining, poll->intervalMs));
		MemoryContextReset(poll->passContext);
	}
	poll->passes++;
	MemoryContextSwitchTo(poll->passContext);
	return true;
}

/*
 * EndPollLoop ends the loop (after a break or once PollAgain said no):
 * back in the caller's memory context, the pass's memory freed.  Returns
 * false when the loop ended because the deadline passed.
 */
bool
EndPollLoop(PollLoop *poll)
{
	MemoryContextSwitchTo(poll->callerContext);
	MemoryContextDelete(poll->passContext);
	poll->passContext = NULL;
	return !poll->timedOut;
}

/* SleepInterruptibly sleeps on the latch, then serves interrupts */
void
SleepInterruptibly(long milliseconds)
{
	int			rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							   milliseconds, PG_WAIT_EXTENSION);

	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}
