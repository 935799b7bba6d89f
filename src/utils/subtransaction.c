/*-------------------------------------------------------------------------
 *
 * subtransaction.c
 *	  Running a piece of work in an internal subtransaction and keeping its
 *	  error, for callers that must clean up (or go on) after a failure
 *	  instead of only propagating it: a shard move that aborts on the
 *	  nodes, a publication that drops the slots it created.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "shardext/subtransaction.h"

/*
 * RunInSubtransaction runs part(arg) in an internal subtransaction and
 * returns NULL, or the error that rolled the subtransaction back, copied
 * into the caller's memory context with the error state flushed: the
 * caller decides what follows (ReThrowError, a warning ...).  The work of
 * a failed part is rolled back, on the nodes too (their savepoints follow
 * the subtransaction).  The caller's memory context and resource owner are
 * current again on return.
 */
ErrorData *
RunInSubtransaction(SubtransactionPart part, void *arg)
{
	MemoryContext oldContext = CurrentMemoryContext;
	ResourceOwner oldOwner = CurrentResourceOwner;
	ErrorData  *edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldContext);
	PG_TRY();
	{
		part(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldContext);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldContext);
	CurrentResourceOwner = oldOwner;
	return edata;
}
