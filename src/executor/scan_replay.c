/*-------------------------------------------------------------------------
 *
 * scan_replay.c
 *	  Rescans of a read-only distributed scan whose remote queries would be
 *	  the same again replay the rows of its last complete run.
 *
 * PostgreSQL rescans the inner side of a nested loop, or what a Sort or
 * a subquery re-reads (a LATERAL subquery with ORDER BY / LIMIT that
 * refers to the outer row only in its target list), once per outer row.
 * A local scan does that cheaply; a distributed one would send its queries
 * to the workers again each time.  When none of the parameters its remote
 * queries use (pruning values and parameters: custom_exprs) has changed,
 * the rows are those of the last run: they are kept in a tuplestore from
 * the first rescan that did not change those parameters (a one-time scan
 * keeps nothing), and replayed from then on.  A run its reader stopped
 * early (under a LIMIT) goes on where it stopped once the kept rows are
 * replayed, like a Material node reading its subplan.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "optimizer/clauses.h"

#include "shardext/distributed_executor.h"

/* may the scan's rows be kept and replayed at all? */
static bool
ScanCanReplay(DistributedScanState *state)
{
	CustomScan *scan = (CustomScan *) state->css.ss.ps.plan;

	return state->job->kind == JOB_SELECT && !state->job->locksRows &&
		scan->custom_plans == NIL;
}

/*
 * InitScanReplay notes the executor parameters the scan's remote queries
 * depend on.
 */
void
InitScanReplay(DistributedScanState *state)
{
	CustomScan *scan = (CustomScan *) state->css.ss.ps.plan;

	state->remoteParams = pull_paramids((Expr *) scan->custom_exprs);
}

/*
 * RescanFromKeptRows decides, at a rescan, whether the scan replays the
 * kept rows (true: the caller leaves the run as it is) or runs again
 * (false), keeping this run's rows when the rescan did not change its
 * remote queries.
 */
bool
RescanFromKeptRows(DistributedScanState *state)
{
	bool		sameQueries = !bms_overlap(state->css.ss.ps.chgParam, state->remoteParams);

	if (state->keepRows && sameQueries)
	{
		tuplestore_rescan(state->keptRows);
		state->replaying = true;
		return true;
	}
	state->replaying = false;
	state->keptComplete = false;
	if (state->keptRows != NULL)
		tuplestore_clear(state->keptRows);
	state->keepRows = sameQueries && ScanCanReplay(state);
	if (state->keepRows && state->keptRows == NULL)
	{
		MemoryContext oldContext = MemoryContextSwitchTo(state->css.ss.ps.state->es_query_cxt);

		state->keptRows = tuplestore_begin_heap(false, false, work_mem);
		MemoryContextSwitchTo(oldContext);
	}
	return false;
}

/*
 * ReplayKeptRow puts the next kept row into the scan slot (an empty slot
 * after the last row of a complete run) and returns true; false when the
 * rows come from the workers: the scan is not replaying, or has replayed
 * all the rows of a run that goes on (its next rows are kept too).
 */
bool
ReplayKeptRow(DistributedScanState *state, TupleTableSlot *slot)
{
	if (!state->replaying)
		return false;
	ExecClearTuple(slot);
	if (tuplestore_gettupleslot(state->keptRows, true, false, state->bufferSlot))
	{
		ExecCopySlot(slot, state->bufferSlot);
		return true;
	}
	if (state->keptComplete)
		return true;
	/* at the end of the tuplestore: rows appended now are read past */
	state->replaying = false;
	return false;
}

/* KeepScanRow keeps a row the scan returns, when this run's rows are kept */
void
KeepScanRow(DistributedScanState *state, TupleTableSlot *slot)
{
	if (state->keepRows && !TupIsNull(slot))
		tuplestore_puttupleslot(state->keptRows, slot);
}

/* KeptRowsComplete: the run ended; its kept rows are all of them */
void
KeptRowsComplete(DistributedScanState *state)
{
	if (state->keepRows)
		state->keptComplete = true;
}

void
EndScanReplay(DistributedScanState *state)
{
	if (state->keptRows != NULL)
		tuplestore_end(state->keptRows);
	state->keptRows = NULL;
}
