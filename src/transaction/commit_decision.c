/*-------------------------------------------------------------------------
 *
 * commit_decision.c
 *	  The worker side of last-participant commit:
 *	  shardext.record_commit_decision().
 *
 * A distributed transaction that wrote on several nodes may commit its
 * last participant in one phase instead of preparing it (remote_xact.c):
 * the other nodes prepare, then the last one runs
 * shardext.record_commit_decision(<coordinator>, <incarnation>, <xid>) and
 * COMMIT.  The
 * row it inserts into shardext.commit_decision commits or aborts with that
 * node's work, so it is the transaction's commit decision; recovery reads
 * it (shardext.resolve_commit_decision) to resolve the prepared parts.
 *
 * The row carries the role that runs the transaction, and recovery only
 * takes decisions of the role that owns the prepared transaction: a role
 * cannot decide for another role's transactions (it can always COMMIT
 * PREPARED its own).  The insert bypasses the table's privileges, which
 * grant writes to nobody, so that no role can write arbitrary decisions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "shardext/cdc.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/remote_xact.h"

PG_FUNCTION_INFO_V1(shardext_record_commit_decision);

#ifdef SHARDEXT_TEST_HOOKS
/* the transaction recorded a decision (test fault exit_after_decision) */
static bool decisionRecorded = false;

/*
 * DecisionXactCallback kills the backend right after a transaction that
 * recorded a decision committed, before its client hears of it, when
 * shardext.test_fault asks for it (tests of a decider's lost answer).
 */
static void
DecisionXactCallback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT && decisionRecorded &&
		ShardextTestFault == TEST_FAULT_EXIT_AFTER_DECISION)
	{
		ereport(LOG, (errmsg("shardext.test_fault: killing the backend after its decision")));
		kill(MyProcPid, SIGKILL);
		pg_usleep(10L * 1000000L);	/* SIGKILL arrives before this ends */
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT)
		decisionRecorded = false;
}
#endif

/* registers the test build's callback; called from _PG_init */
void
InitializeCommitDecisions(void)
{
#ifdef SHARDEXT_TEST_HOOKS
	RegisterXactCallback(DecisionXactCallback, NULL);
#endif
}

/*
 * shardext_record_commit_decision(coordinator text, incarnation bigint,
 * xid bigint) inserts
 * the commit decision of a distributed transaction in the caller's
 * transaction.  A tombstone that recovery wrote first makes it fail with a
 * unique violation, so that the transaction aborts as recovery decided.
 */
Datum
shardext_record_commit_decision(PG_FUNCTION_ARGS)
{
	Relation	rel = table_open(ShardextCatalogRelid("commit_decision"), RowExclusiveLock);
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};
	NameData	owner;
	HeapTuple	tuple;

	namestrcpy(&owner, GetUserNameFromId(GetUserId(), false));
	values[0] = PG_GETARG_DATUM(0);
	values[1] = PG_GETARG_DATUM(1);
	values[2] = PG_GETARG_DATUM(2);
	values[3] = NameGetDatum(&owner);
	values[4] = BoolGetDatum(true);
	tuple = heap_form_tuple(RelationGetDescr(rel), values, nulls);
	CatalogTupleInsert(rel, tuple);
	heap_freetuple(tuple);
	table_close(rel, NoLock);

	/* this part of the distributed transaction names it, as prepared parts do */
	CdcLogDistributedTransaction(psprintf("%s" INT64_FORMAT,
										  text_to_cstring(PG_GETARG_TEXT_PP(0)),
										  PG_GETARG_INT64(2)));
#ifdef SHARDEXT_TEST_HOOKS
	decisionRecorded = true;
#endif
	PG_RETURN_VOID();
}
