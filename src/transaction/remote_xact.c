/*-------------------------------------------------------------------------
 *
 * remote_xact.c
 *	  Remote transactions that follow the coordinator's transaction.
 *
 * Callers run RemoteTransactionBegin(conn) before every command that belongs
 * to the local transaction, and RemoteTransactionMarkModified(conn) when the
 * command writes.  At commit:
 *	- if at most one connection wrote, every open remote transaction is
 *	  committed before the local commit (one round trip);
 *	- otherwise each writing connection runs PREPARE TRANSACTION, a commit
 *	  record per prepared transaction is inserted into shardext.transaction
 *	  in the local transaction, and COMMIT PREPARED follows the local commit.
 *	  If the coordinator dies in between, the commit records tell recovery
 *	  which way to resolve each prepared transaction;
 *	- or, when the coordinator wrote nothing itself (shardext.
 *	  last_participant_commit), one writing connection is left unprepared
 *	  (the decider): the others prepare, then the decider runs
 *	  shardext.record_commit_decision() and COMMIT in one round trip, and
 *	  COMMIT PREPARED follows.  The decision row commits with the decider's
 *	  work, so the decider's commit is the transaction's; the other gids
 *	  name the decider's node and the coordinator's incarnation (suffix
 *	  _d<node id>_<incarnation>) for recovery, and no
 *	  commit record is written (one prepared transaction and two flushes
 *	  fewer than the full protocol).  Should the decider's answer be lost,
 *	  the outcome is in doubt: the prepared parts are left to recovery,
 *	  which asks the decider's node (commit_decision.c).  A write of an
 *	  implicit transaction on several nodes has its connections prepared
 *	  by the executor together with their statements
 *	  (RemoteTransactionPrepareCommand): pre-commit then only records
 *	  their commit decisions; such a connection takes no further command.
 * At abort every remote transaction is cancelled and rolled back (with
 * bounded waits; a connection that cannot be cleaned is closed).
 *
 * The coordinator's own writes count as a participant: a transaction that
 * wrote locally (it has an xid: DDL, catalog changes) and on one connection
 * also commits in two phases, so both sides agree.
 *
 * Subtransactions (SAVEPOINT, PL/pgSQL exception blocks) are mirrored by
 * remote savepoints, created lazily: only when a connection is used inside
 * a subtransaction does it get "SAVEPOINT shardext_sp_<level>" for every
 * level it lacks, sent together with the next command's preparation.  A
 * rolled back subtransaction runs ROLLBACK TO SAVEPOINT on the connections
 * it used; a committed one leaves its savepoint to be released with the
 * connection's next command.  Exception blocks that touch nothing remote
 * cost nothing.  A connection that cannot be rolled back to its savepoint
 * (it broke) marks the remote transaction failed: the top-level transaction
 * then cannot commit.
 *
 * shardext.multi_node_commit = 'reject' makes a transaction fail as soon as
 * it would write on a second node, before that node is written.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xloginsert.h"
#include "catalog/pg_type.h"
#include "catalog/indexing.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "shardext/commit_gate.h"
#include "shardext/connection.h"
#include "shardext/guc.h"
#include "shardext/maintenance.h"
#include "shardext/metadata.h"
#include "shardext/remote_command.h"
#include "shardext/read_your_writes.h"
#include "shardext/remote_xact.h"
#include "shardext/replica_state.h"
#include "shardext/test_pause.h"
#include <signal.h>

/* how long cleanup at abort or after commit waits for one node */
#define REMOTE_CLEANUP_TIMEOUT_MS 30000

/* number of connections in a remote transaction; 0 makes callbacks cheap */
static int	connectionsInTransaction = 0;

/*
 * Read replicas: whether the transaction changed shards' schemas, which
 * raises the replica barrier of the nodes it wrote, and those nodes (in
 * TopTransactionContext; see replica_state.c).
 */
static bool schemaChangeInXact = false;
static List *changedNodeIds = NIL;	/* BeginReplicaChange done for these */

/*
 * Last-participant commit: the connection that commits in one phase after
 * the others prepared (NULL while none is chosen), and what is known of
 * its commit.
 */
typedef enum DeciderState
{
	DECIDER_OPEN,				/* not committed (or rolled back) */
	DECIDER_IN_DOUBT,			/* COMMIT sent, no answer */
	DECIDER_COMMITTED
} DeciderState;

static NodeConnection *decider = NULL;
static DeciderState deciderState = DECIDER_OPEN;

static void RemoteXactCallback(XactEvent event, void *arg);
static void RemoteSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
								  SubTransactionId parentSubid, void *arg);
static List *ConnectionsInTransaction(void);
static void PreCommitRemoteTransactions(void);
static void CommitRemoteTransactions(List *connections);
static void PrepareRemoteTransactions(List *connections, bool recordDecisions);
static bool LastParticipantAllowed(void);
static bool ChooseDecider(List *connections);
static void CommitDecider(void);
static void CommitAfterLocalFailure(void);
static void FinishPreparedTransactions(List *connections);
static void GiveUpCommitPrepared(NodeConnection *conn);
static void AbortRemoteTransactions(void);
static void ResetRemoteTransaction(NodeConnection *conn);
static void LeavePreparedToRecovery(NodeConnection *conn);
static void RecordCommitDecision(NodeConnection *conn);
static void RollbackRemoteSubtransaction(NodeConnection *conn, int level, bool clean);
#ifdef SHARDEXT_TEST_HOOKS
static void InjectTestFault(int fault);
#else
#define InjectTestFault(fault) ((void) 0)
#endif
static bool AnyConnectionPrepared(List *connections);
static void MarkSchemaChangesCommitting(List *connections);
static void ForgetCommitLsns(void);

/* registers the transaction callbacks; called from _PG_init */
void
InitializeRemoteTransactions(void)
{
	RegisterXactCallback(RemoteXactCallback, NULL);
	RegisterSubXactCallback(RemoteSubXactCallback, NULL);
}

/*
 * RemoteTransactionBegin makes sure the connection is inside a remote
 * transaction that follows the local one, at the same isolation level, and
 * that it has a savepoint for every local subtransaction level up to the
 * current one.  Whatever is missing is sent in one round trip.
 */
void
RemoteTransactionBegin(NodeConnection *conn)
{
	char	   *command = RemoteTransactionBeginCommand(conn);

	if (command != NULL)
	{
		ExecuteRemoteCommand(conn, command);
		pfree(command);
	}
}

/*
 * RemoteTransactionBeginCommand returns the commands (';'-separated) that
 * RemoteTransactionBegin would run, or NULL when none are needed, and
 * records the connection's state as if they had run.  A caller that takes
 * the commands must send them ahead of its own statement in the same simple
 * query (which saves a round trip) before anything else is sent on the
 * connection; their results (command tags without rows) come first.  If the
 * send fails, the error aborts the (sub)transaction and the abort callbacks
 * clean up the connection as usual.
 */
char *
RemoteTransactionBeginCommand(NodeConnection *conn)
{
	int			level = GetCurrentTransactionNestLevel();
	StringInfoData command;

	if (conn->xactState == REMOTE_XACT_FAILED)
		ereport(ERROR,
				(errcode(ERRCODE_IN_FAILED_SQL_TRANSACTION),
				 errmsg("remote transaction on node %s:%d is aborted",
						conn->host, conn->port),
				 errdetail("The connection to the node broke inside the transaction, "
						   "or its work could not be rolled back to a savepoint."),
				 errhint("Roll back the transaction.")));

	/* prepared with the last statement of an implicit transaction */
	if (conn->xactState == REMOTE_XACT_PREPARED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot run another command on node %s:%d after its part of "
						"the transaction was prepared", conn->host, conn->port),
				 errdetail("The statement's write on the node was prepared for "
						   "two-phase commit together with the statement."),
				 errhint("Run the statements in an explicit transaction block.")));
	if (conn->xactState != REMOTE_XACT_NONE && conn->remoteLevel >= level &&
		conn->pendingReleaseLevel == 0)
		return NULL;

	initStringInfo(&command);
	if (conn->xactState == REMOTE_XACT_NONE)
	{
		if (XactIsoLevel == XACT_SERIALIZABLE)
			appendStringInfoString(&command, "BEGIN ISOLATION LEVEL SERIALIZABLE");
		else if (XactIsoLevel == XACT_REPEATABLE_READ)
			appendStringInfoString(&command, "BEGIN ISOLATION LEVEL REPEATABLE READ");
		else
			appendStringInfoString(&command, "BEGIN");
		conn->remoteLevel = 1;
		conn->pendingReleaseLevel = 0;
	}
	if (conn->pendingReleaseLevel > 0)
		appendStringInfo(&command, "%sRELEASE SAVEPOINT shardext_sp_%d",
						 command.len > 0 ? ";" : "", conn->pendingReleaseLevel);
	for (int k = conn->remoteLevel + 1; k <= level; k++)
		appendStringInfo(&command, "%sSAVEPOINT shardext_sp_%d",
						 command.len > 0 ? ";" : "", k);

	if (conn->xactState == REMOTE_XACT_NONE)
	{
		/* from here on, abort processing takes care of the connection */
		conn->xactState = REMOTE_XACT_OPEN;
		connectionsInTransaction++;
	}
	conn->pendingReleaseLevel = 0;
	conn->remoteLevel = Max(conn->remoteLevel, level);
	return command.data;
}

/*
 * RemoteTransactionMarkModified records that the connection writes (never
 * from a standby coordinator).  With
 * shardext.multi_node_commit = 'reject' it refuses a write on a second node;
 * callers mark before they send the write, and may mark before
 * RemoteTransactionBeginCommand, so that a refusal changes nothing.
 */
void
RemoteTransactionMarkModified(NodeConnection *conn)
{
	/* a standby coordinator only reads: its catalog may be behind */
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot write on node %s:%d from a standby coordinator",
						conn->host, conn->port),
				 errhint("Write through the primary coordinator.")));
	if (!conn->xactModified && ShardextMultiNodeCommit == MULTI_NODE_COMMIT_REJECT)
	{
		List	   *connections = ConnectionsInTransaction();
		ListCell   *cell;

		foreach(cell, connections)
		{
			NodeConnection *other = lfirst(cell);

			if (other->xactModified && other->nodeId != conn->nodeId)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot write on node %s:%d because this transaction "
								"already wrote on node %s:%d",
								conn->host, conn->port, other->host, other->port),
						 errdetail("shardext.multi_node_commit is 'reject', so a "
								   "transaction may write on one node only."),
						 errhint("Split the work into single-node transactions, or "
								 "SET shardext.multi_node_commit TO '2pc'.")));
		}
		list_free(connections);
	}
	conn->xactModified = true;
}

/*
 * NodeHasOtherConnectionInTransaction tells whether a connection of the
 * current user to the node other than exceptIndex is in the transaction.
 */
bool
NodeHasOtherConnectionInTransaction(int32 nodeId, int exceptIndex)
{
	List	   *connections;
	ListCell   *cell;
	bool		found = false;

	if (connectionsInTransaction == 0)
		return false;
	connections = NodeConnectionList(nodeId);
	foreach(cell, connections)
	{
		NodeConnection *conn = lfirst(cell);

		if (foreach_current_index(cell) != exceptIndex &&
			conn->xactState != REMOTE_XACT_NONE)
			found = true;
	}
	list_free(connections);
	return found;
}

/* RemoteTransactionWrote tells whether this transaction wrote on a node */
bool
RemoteTransactionWrote(void)
{
	List	   *connections = ConnectionsInTransaction();
	ListCell   *cell;
	bool		wrote = false;

	foreach(cell, connections)
		wrote |= ((NodeConnection *) lfirst(cell))->xactModified;
	list_free(connections);
	return wrote;
}

/*
 * RemotePreparedGidPrefix returns the prefix of the gids this coordinator
 * database gives its prepared transactions: shardext_<system id>_<db oid>_
 * The full gid is <prefix><full xid>_<connection serial>.
 */
char *
RemotePreparedGidPrefix(void)
{
	return psprintf("shardext_" UINT64_FORMAT "_%u_", GetSystemIdentifier(),
					MyDatabaseId);
}

static List *
ConnectionsInTransaction(void)
{
	List	   *all;
	List	   *result = NIL;
	ListCell   *cell;

	if (connectionsInTransaction == 0)
		return NIL;

	all = AllNodeConnections();
	foreach(cell, all)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn->xactState != REMOTE_XACT_NONE)
			result = lappend(result, conn);
	}
	list_free(all);
	return result;
}

static void
RemoteXactCallback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			PreCommitRemoteTransactions();
			break;

		case XACT_EVENT_COMMIT:
			LeaveCommitDecision();
			if (connectionsInTransaction > 0)
			{
				List	   *connections = ConnectionsInTransaction();

				/*
				 * The commit record must be durable before any node commits,
				 * also with synchronous_commit = off: recovery decides by it.
				 * Flush up to the end of our commit record, which exists:
				 * only a transaction with an xid prepares.  (The current
				 * insert position is no valid flush target: it may lie past
				 * what was written, and an error here is a PANIC.)
				 */
				if (deciderState != DECIDER_COMMITTED &&
					AnyConnectionPrepared(connections) &&
					!XLogRecPtrIsInvalid(XactLastCommitEnd))
					XLogFlush(XactLastCommitEnd);
				InjectTestFault(TEST_FAULT_CRASH_AFTER_LOCAL_COMMIT);
				TEST_PAUSE_POINT("after local commit");
				FinishPreparedTransactions(connections);
			}
			connectionsInTransaction = 0;
			decider = NULL;
			deciderState = DECIDER_OPEN;
			ForgetCommitLsns();
			ConnectionsAtTransactionEnd();
			break;

		case XACT_EVENT_PRE_PREPARE:
			if (ConnectionsInTransaction() != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that used distributed tables")));
			break;

		case XACT_EVENT_ABORT:
			LeaveCommitDecision();
			if (deciderState == DECIDER_COMMITTED)
				CommitAfterLocalFailure();
			else
				AbortRemoteTransactions();
			connectionsInTransaction = 0;
			decider = NULL;
			deciderState = DECIDER_OPEN;
			ForgetCommitLsns();
			ConnectionsAtTransactionEnd();
			break;

		default:
			break;
	}
}

/*
 * PreCommitRemoteTransactions runs phase one: one-phase commit when at most
 * one participant wrote (the local transaction counts as one when it has an
 * xid); otherwise PREPARE TRANSACTION on all writers but the decider, which
 * then commits (last-participant commit), or, where that is not allowed,
 * PREPARE on all of them plus commit records.  The commit decision (the
 * decider's commit, or the local commit that follows) is made inside the
 * commit gate (commit_gate.c), which restore points close.
 */
static void
PreCommitRemoteTransactions(void)
{
	List	   *connections = ConnectionsInTransaction();
	ListCell   *cell;
	int			modifiedCount = 0;

	if (connections == NIL)
		return;

	foreach(cell, connections)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn->xactState == REMOTE_XACT_FAILED)
			RemoteTransactionBegin(conn);	/* throws */
		if (conn->queryInProgress)
			elog(ERROR, "connection to node %s:%d is still busy at commit",
				 conn->host, conn->port);
		if (conn->xactModified)
			modifiedCount++;
	}

	MarkSchemaChangesCommitting(connections);
	if (modifiedCount == 0 ||
		(modifiedCount == 1 && !TransactionIdIsValid(GetTopTransactionIdIfAny())))
		CommitRemoteTransactions(connections);
	else if (ChooseDecider(connections))
	{
		PrepareRemoteTransactions(connections, false);
		InjectTestFault(TEST_FAULT_CRASH_AFTER_PREPARE);
		TEST_PAUSE_POINT("after prepare");
		EnterCommitDecision();
		CommitDecider();
	}
	else
	{
		PrepareRemoteTransactions(connections, true);
		InjectTestFault(TEST_FAULT_CRASH_AFTER_PREPARE);
		TEST_PAUSE_POINT("after prepare");
		/* until the local commit record is written (XACT_EVENT_COMMIT) */
		EnterCommitDecision();
	}
}

/*
 * LastParticipantAllowed tells whether the transaction may commit with a
 * decider: the setting allows it, and the coordinator has no transaction
 * id, so no local write whose commit would then not be atomic with the
 * nodes' (local writes commit with commit records instead).  WAL written
 * without a transaction id -- pruning a page or a hint bit's full page
 * image while reading -- commits nothing and does not count.
 */
static bool
LastParticipantAllowed(void)
{
	return ShardextLastParticipantCommit &&
		!TransactionIdIsValid(GetTopTransactionIdIfAny());
}

/*
 * ChooseDecider, at pre-commit, keeps the decider the executor chose or
 * chooses a writer that is not prepared yet, and tells whether the
 * transaction commits with it.  When that is not allowed (any more), the
 * decider is forgotten: the gids already prepared that name its node are
 * then decided by the commit records, which recovery reads first.
 */
static bool
ChooseDecider(List *connections)
{
	ListCell   *cell;

	if (!LastParticipantAllowed())
	{
		decider = NULL;
		return false;
	}
	if (decider != NULL)
		return true;
	foreach(cell, connections)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn->xactModified && conn->xactState == REMOTE_XACT_OPEN)
		{
			decider = conn;
			return true;
		}
	}
	return false;
}

/*
 * RemoteTransactionPrepareWithStatement is RemoteTransactionPrepareCommand
 * for a connection whose statement ends an implicit transaction that
 * writes on several nodes (see SendTask), except that the first such
 * connection becomes the decider where last-participant commit is
 * allowed: it returns NULL for it, and the connection stays open to commit
 * last.
 */
char *
RemoteTransactionPrepareWithStatement(NodeConnection *conn)
{
	if (decider == NULL && LastParticipantAllowed())
	{
		decider = conn;
		return NULL;
	}
	return RemoteTransactionPrepareCommand(conn);
}

/*
 * CommitDecider commits the decider together with the transaction's commit
 * decision, once every other writer prepared.  An error the node reports
 * (the connection still up) means its transaction rolled back: the error
 * aborts the transaction as usual.  A connection lost before the answer --
 * libpq then reports an error of its own and the connection is bad -- or
 * a wait cut short leaves the outcome in doubt (see
 * AbortRemoteTransactions): the node may have committed.
 */
static void
CommitDecider(void)
{
	NodeConnection *conn = decider;
	char	   *prefix = RemotePreparedGidPrefix();
	char	   *command;
	PGresult   *error = NULL;

	command = psprintf("SELECT shardext.record_commit_decision(%s, '" UINT64_FORMAT "', '"
					   UINT64_FORMAT "');COMMIT",
					   quote_literal_cstr(prefix), CoordinatorIncarnation(),
					   U64FromFullTransactionId(GetTopFullTransactionId()));
	deciderState = DECIDER_IN_DOUBT;
	SendRemoteCommand(conn, command);
#ifdef SHARDEXT_TEST_HOOKS
	if (ShardextTestFault == TEST_FAULT_LOSE_DECIDER_ANSWER)
	{
		ereport(LOG, (errmsg("shardext.test_fault: dropping the decider's connection")));
		(void) WaitOnNodeConnection(conn, WL_SOCKET_READABLE, 5000);
		CloseNodeConnection(conn);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("shardext.test_fault: lost the connection to the deciding node")));
	}
#endif
	PQclear(ReadRemoteResults(conn, &error));
	if (error != NULL && PQstatus(conn->pgConn) == CONNECTION_BAD)
	{
		PQclear(error);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("lost the connection to node %s:%d while it committed the transaction",
						conn->host, conn->port)));
	}
	if (error != NULL)
	{
		deciderState = DECIDER_OPEN;
		ReportRemoteError(conn, error, ERROR, command);
	}
	deciderState = DECIDER_COMMITTED;
	NoteNodeWrite(conn->nodeId, ReportedCommitLsn(conn));
	ResetRemoteTransaction(conn);
	pfree(command);
	pfree(prefix);
}

/*
 * CommitAfterLocalFailure: the local transaction failed after the decider
 * committed (the rest of the local commit raised an error).  The nodes'
 * outcome is decided already and the coordinator wrote nothing, so the
 * prepared parts are committed too.
 */
static void
CommitAfterLocalFailure(void)
{
	ereport(WARNING,
			(errcode(ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN),
			 errmsg("the transaction's writes on the nodes were committed although its local commit failed")));
	FinishPreparedTransactions(ConnectionsInTransaction());
	AbortRemoteTransactions();	/* what is left open: nothing that wrote */
}

/*
 * CommitRemoteTransactions commits every open remote transaction, all at
 * once; at most one of them wrote, so no atomicity problem arises.  The
 * writer's commit LSN arrives with the COMMIT (see read_your_writes.c).
 */
static void
CommitRemoteTransactions(List *connections)
{
	List	   *commands = NIL;
	ListCell   *cell;

	if (connections == NIL)
		return;

	foreach(cell, connections)
		commands = lappend(commands, "COMMIT");
	ExecuteRemoteCommandsInParallel(connections, commands);

	foreach(cell, connections)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn->xactModified)
			NoteNodeWrite(conn->nodeId, ReportedCommitLsn(conn));
		ResetRemoteTransaction(conn);
	}
}

/*
 * MarkSchemaChangesCommitting, at pre-commit of a transaction that changed
 * shards' schemas, marks the change as committing on the nodes it wrote:
 * their replicas are not read until they replayed it (replica_state.c).
 */
static void
MarkSchemaChangesCommitting(List *connections)
{
	ListCell   *cell;
	MemoryContext oldContext;

	if (!schemaChangeInXact)
		return;
	oldContext = MemoryContextSwitchTo(TopTransactionContext);
	foreach(cell, connections)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn->xactModified && !list_member_int(changedNodeIds, conn->nodeId))
		{
			BeginReplicaChange(conn->nodeId);
			changedNodeIds = lappend_int(changedNodeIds, conn->nodeId);
		}
	}
	MemoryContextSwitchTo(oldContext);
}

/*
 * ForgetCommitLsns resets the per-transaction replica state once the
 * transaction is over: schema changes it committed (or not) on nodes raise
 * their replica barriers.
 */
static void
ForgetCommitLsns(void)
{
	ListCell   *cell;

	foreach(cell, changedNodeIds)
		EndReplicaChange(lfirst_int(cell));
	changedNodeIds = NIL;
	schemaChangeInXact = false;
}

/*
 * RemoteTransactionMarkSchemaChange records that the transaction changes
 * the schema of shards (DDL, shards created or dropped): once committed,
 * replicas of the nodes it wrote are not read before they replayed it.
 */
void
RemoteTransactionMarkSchemaChange(void)
{
	schemaChangeInXact = true;
}

/*
 * ExecuteOnNodesInTransaction runs one command per node on the node's
 * first connection, as a write in the local transaction, all in parallel.
 */
void
ExecuteOnNodesInTransaction(List *nodeIds, List *commands)
{
	List	   *connections = NIL;
	ListCell   *cell;

	foreach(cell, nodeIds)
	{
		NodeConnection *conn = GetNodeConnection(lfirst_int(cell));

		RemoteTransactionBegin(conn);
		RemoteTransactionMarkModified(conn);
		connections = lappend(connections, conn);
	}
	/* schemas of shards change: replicas are read only once they replayed it */
	RemoteTransactionMarkSchemaChange();
	ExecuteRemoteCommandsInParallel(connections, commands);
}

/*
 * PrepareRemoteTransactions runs phase one of two-phase commit on every
 * connection that wrote, except the decider, and with recordDecisions
 * records the commit decisions locally; the others just commit, in the
 * same round trip (they wrote nothing, so their outcome does not matter to
 * atomicity).
 */
static void
PrepareRemoteTransactions(List *connections, bool recordDecisions)
{
	List	   *targets = NIL;
	List	   *commands = NIL;
	ListCell   *cell;

	foreach(cell, connections)
	{
		NodeConnection *conn = lfirst(cell);

		/* prepared with its statement already (RemoteTransactionPrepareCommand) */
		if (conn->xactState == REMOTE_XACT_PREPARED || conn == decider)
			continue;
		targets = lappend(targets, conn);
		if (!conn->xactModified)
			commands = lappend(commands, "COMMIT");
		else
			commands = lappend(commands, RemoteTransactionPrepareCommand(conn));
	}
	if (targets != NIL)
		ExecuteRemoteCommandsInParallel(targets, commands);
	list_free(targets);

	foreach(cell, connections)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn == decider)
			continue;
		if (conn->xactState != REMOTE_XACT_PREPARED)
			ResetRemoteTransaction(conn);
		else if (recordDecisions)
			RecordCommitDecision(conn);
	}

	/* make sure recovery runs in this database should we not get to finish */
	EnsureMaintenanceDaemon();
}

/*
 * RemoteTransactionPrepareCommand returns the PREPARE TRANSACTION command
 * of a connection that wrote, gives the connection its gid and marks it
 * prepared (which assigns the local transaction its xid, part of the gid).
 * The caller must send the command next on the connection and raise an
 * error if it fails.  Being marked before the command runs is what makes a
 * failure safe: the abort callback then tries ROLLBACK PREPARED, which is
 * harmless where the PREPARE did not happen (it falls back to a plain
 * ROLLBACK).  Pre-commit records the commit decision of every prepared
 * connection, including those the executor prepared together with the
 * last statement of an implicit transaction (see SendTask).
 */
char *
RemoteTransactionPrepareCommand(NodeConnection *conn)
{
	FullTransactionId xid = GetTopFullTransactionId();
	char	   *prefix = RemotePreparedGidPrefix();

	Assert(conn->xactModified && conn->xactState == REMOTE_XACT_OPEN && conn != decider);
	if (decider != NULL)
		snprintf(conn->preparedGid, sizeof(conn->preparedGid),
				 "%s" UINT64_FORMAT "_%d_d%d_" UINT64_FORMAT, prefix,
				 U64FromFullTransactionId(xid), conn->serial, decider->nodeId,
				 CoordinatorIncarnation());
	else
		snprintf(conn->preparedGid, sizeof(conn->preparedGid), "%s" UINT64_FORMAT "_%d",
				 prefix, U64FromFullTransactionId(xid), conn->serial);
	pfree(prefix);
	conn->xactState = REMOTE_XACT_PREPARED;
	return psprintf("PREPARE TRANSACTION %s", quote_literal_cstr(conn->preparedGid));
}

/*
 * RemoteTransactionPrepareFailed records that the PREPARE TRANSACTION sent
 * with a connection's statement did not happen: the statement failed (the
 * rest of its query was skipped) or PREPARE itself did.  The abort callback
 * then rolls the connection back the plain way.
 */
void
RemoteTransactionPrepareFailed(NodeConnection *conn)
{
	Assert(conn->xactState == REMOTE_XACT_PREPARED);
	conn->xactState = REMOTE_XACT_OPEN;
	conn->preparedGid[0] = '\0';
}

/*
 * RecordCommitDecision inserts the commit record of one prepared
 * transaction.  This runs at pre-commit, where no snapshot is active, so it
 * writes the heap and index directly instead of going through SPI.
 */
static void
RecordCommitDecision(NodeConnection *conn)
{
	Relation	rel = table_open(ShardextCatalogRelid("transaction"), RowExclusiveLock);
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	HeapTuple	tuple;

	values[0] = CStringGetTextDatum(conn->preparedGid);
	values[1] = Int32GetDatum(conn->nodeId);
	values[2] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	tuple = heap_form_tuple(RelationGetDescr(rel), values, nulls);
	CatalogTupleInsert(rel, tuple);
	heap_freetuple(tuple);
	table_close(rel, NoLock);
}

/* does any of the connections have a prepared transaction? */
static bool
AnyConnectionPrepared(List *connections)
{
	ListCell   *cell;

	foreach(cell, connections)
	{
		if (((NodeConnection *) lfirst(cell))->xactState == REMOTE_XACT_PREPARED)
			return true;
	}
	return false;
}

/*
 * FinishPreparedTransactions runs after the local commit: COMMIT PREPARED on
 * every prepared connection, all nodes at once.  Failures cannot undo
 * anything now; they are reported as warnings and left to recovery.
 */
static void
FinishPreparedTransactions(List *connections)
{
	List	   *prepared = NIL;
	ListCell   *cell;

	foreach(cell, connections)
	{
		NodeConnection *conn = lfirst(cell);
		char	   *command;

		if (conn->xactState != REMOTE_XACT_PREPARED)
		{
			ResetRemoteTransaction(conn);
			continue;
		}
		command = psprintf("COMMIT PREPARED %s", quote_literal_cstr(conn->preparedGid));
		if (conn->pgConn != NULL && PQstatus(conn->pgConn) == CONNECTION_OK &&
			!conn->queryInProgress && PQsendQuery(conn->pgConn, command))
		{
			conn->queryInProgress = true;
			prepared = lappend(prepared, conn);
		}
		else
		{
			GiveUpCommitPrepared(conn);
			NoteNodeWrite(conn->nodeId, InvalidXLogRecPtr);
		}
	}

	foreach(cell, prepared)
	{
		NodeConnection *conn = lfirst(cell);
		bool		committed = TryFinishRemoteCommandNoInterrupts(conn, "COMMIT PREPARED",
																   REMOTE_CLEANUP_TIMEOUT_MS);

		/* committed now, with its LSN, or later by recovery */
		NoteNodeWrite(conn->nodeId, committed ? ReportedCommitLsn(conn) : InvalidXLogRecPtr);
		if (!committed)
			GiveUpCommitPrepared(conn);
		ResetRemoteTransaction(conn);
	}
}

/*
 * GiveUpCommitPrepared warns that the prepared transaction of a connection
 * could not be committed now (recovery commits it later: the commit record
 * is written) and closes the connection, whose state is unknown.
 */
static void
GiveUpCommitPrepared(NodeConnection *conn)
{
	ereport(WARNING,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("could not commit prepared transaction %s on node %s:%d",
					conn->preparedGid, conn->host, conn->port),
			 errhint("It is committed by shardext_recover_prepared_transactions().")));
	CloseNodeConnection(conn);
}

/*
 * AbortRemoteTransactions cancels what is running and rolls back every
 * remote transaction.  It never throws: each wait is bounded, and a
 * connection that cannot be brought back to a clean state is closed.
 */
static void
AbortRemoteTransactions(void)
{
	List	   *all = AllNodeConnections();
	List	   *busy = NIL;
	List	   *notCancelled;
	ListCell   *cell;

	/* all cancels at once: hung nodes cost one wait, not one per connection */
	foreach(cell, all)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn->pgConn != NULL && conn->queryInProgress)
			busy = lappend(busy, conn);
	}
	notCancelled = CancelRemoteCommands(busy, REMOTE_CLEANUP_TIMEOUT_MS);

	foreach(cell, all)
	{
		NodeConnection *conn = lfirst(cell);
		bool		clean = !list_member_ptr(notCancelled, conn);

		if (conn->pgConn == NULL)
		{
			ResetRemoteTransaction(conn);
			continue;
		}
		if (deciderState == DECIDER_IN_DOUBT && conn->xactState == REMOTE_XACT_PREPARED &&
			!list_member_ptr(busy, conn) && PQtransactionStatus(conn->pgConn) == PQTRANS_IDLE)
		{
			LeavePreparedToRecovery(conn);
			continue;
		}

		/*
		 * A PREPARE sent with a statement that was cancelled may not have
		 * run: then the remote transaction block is still open.
		 */
		if (clean && conn->xactState == REMOTE_XACT_PREPARED &&
			PQtransactionStatus(conn->pgConn) != PQTRANS_IDLE)
			clean = TryRemoteCommandNoInterrupts(conn, "ROLLBACK",
												 REMOTE_CLEANUP_TIMEOUT_MS);
		else if (clean && conn->xactState == REMOTE_XACT_PREPARED)
		{
			char	   *command = psprintf("ROLLBACK PREPARED %s",
										   quote_literal_cstr(conn->preparedGid));

			/*
			 * The PREPARE may not have happened; then roll back the plain
			 * way.  Where neither works, recovery rolls the prepared
			 * transaction back (it has no commit record).
			 */
			if (!TryRemoteCommandNoInterrupts(conn, command, REMOTE_CLEANUP_TIMEOUT_MS))
				clean = TryRemoteCommandNoInterrupts(conn, "ROLLBACK",
													 REMOTE_CLEANUP_TIMEOUT_MS);
		}
		else if (clean && conn->xactState != REMOTE_XACT_NONE)
			clean = TryRemoteCommandNoInterrupts(conn, "ROLLBACK",
												 REMOTE_CLEANUP_TIMEOUT_MS);

		if (!clean)
			CloseNodeConnection(conn);
		else
		{
			if (conn->timeZoneSetInXact)
				conn->remoteTimeZone = NULL;
			ResetRemoteTransaction(conn);
		}
	}
	list_free(notCancelled);
	list_free(busy);
	list_free(all);
}

/*
 * LeavePreparedToRecovery leaves a prepared transaction whose decider did
 * not answer its commit for recovery to resolve the way the decider's node
 * decided; the connection itself is idle and stays usable.
 */
static void
LeavePreparedToRecovery(NodeConnection *conn)
{
	ereport(WARNING,
			(errcode(ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN),
			 errmsg("the outcome of prepared transaction %s on node %s:%d is not known yet",
					conn->preparedGid, conn->host, conn->port),
			 errdetail("The node that decides the transaction did not answer its commit."),
			 errhint("shardext_recover_prepared_transactions() commits or rolls it back "
					 "as that node decided, once it can be reached.")));
	EnsureMaintenanceDaemon();
	ResetRemoteTransaction(conn);
}

static void
ResetRemoteTransaction(NodeConnection *conn)
{
	conn->xactState = REMOTE_XACT_NONE;
	conn->xactModified = false;
	conn->remoteLevel = 0;
	conn->pendingReleaseLevel = 0;
	conn->preparedGid[0] = '\0';
	conn->timeZoneSetInXact = false;
}

/*
 * RemoteSubXactCallback mirrors the end of a subtransaction on the
 * connections that have a savepoint for it (see the file header).
 */
static void
RemoteSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	int			level;
	List	   *connections;
	List	   *busy = NIL;
	ListCell   *cell;

	if (connectionsInTransaction == 0 ||
		(event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB))
		return;

	level = GetCurrentTransactionNestLevel();
	connections = ConnectionsInTransaction();
	foreach(cell, connections)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn->xactState != REMOTE_XACT_OPEN || conn->remoteLevel < level)
			continue;

		if (event == SUBXACT_EVENT_COMMIT_SUB)
		{
			/* its savepoint and any deeper dead ones go at the next command */
			conn->remoteLevel = level - 1;
			conn->pendingReleaseLevel = level;
		}
		else if (conn->queryInProgress)
			busy = lappend(busy, conn);
	}
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		/* all cancels at once: hung nodes cost one wait, not one per connection */
		List	   *notCancelled = CancelRemoteCommands(busy, REMOTE_CLEANUP_TIMEOUT_MS);

		foreach(cell, connections)
		{
			NodeConnection *conn = lfirst(cell);

			if (conn->xactState == REMOTE_XACT_OPEN && conn->remoteLevel >= level)
				RollbackRemoteSubtransaction(conn, level,
											 !list_member_ptr(notCancelled, conn));
		}
		list_free(notCancelled);
	}
	list_free(busy);
	list_free(connections);
}

/*
 * RollbackRemoteSubtransaction undoes the remote work of the subtransaction
 * at the given level once what ran was cancelled (clean: the caller's
 * cancel succeeded or nothing ran): ROLLBACK TO its savepoint (which also
 * discards deeper ones) and release it.  If that fails the remote
 * transaction is lost and marked failed; it never throws.
 */
static void
RollbackRemoteSubtransaction(NodeConnection *conn, int level, bool clean)
{
	char	   *command;

	if (clean)
	{
		command = psprintf("ROLLBACK TO SAVEPOINT shardext_sp_%d;"
						   "RELEASE SAVEPOINT shardext_sp_%d", level, level);
		clean = TryRemoteCommandNoInterrupts(conn, command, REMOTE_CLEANUP_TIMEOUT_MS);
		pfree(command);
	}

	if (clean)
	{
		conn->remoteLevel = level - 1;
		conn->pendingReleaseLevel = 0;
		return;
	}

	/* the remote transaction is lost either way; keep the state FAILED */
	DisconnectNodeConnection(conn);
	conn->queryInProgress = false;
	conn->xactState = REMOTE_XACT_FAILED;
}

#ifdef SHARDEXT_TEST_HOOKS
/*
 * InjectTestFault kills this backend when shardext.test_fault asks for it
 * at this point of the commit (tests of crash recovery only).  SIGKILL
 * makes the postmaster reinitialise, as if the coordinator crashed.  (A
 * test that needs the backend to stop at such a point uses the pause
 * points next to these calls, test_pause.h.)
 */
static void
InjectTestFault(int fault)
{
	if (ShardextTestFault != fault)
		return;
	ereport(LOG, (errmsg("shardext.test_fault: killing the backend")));
	kill(MyProcPid, SIGKILL);
	pg_usleep(10L * 1000000L);	/* SIGKILL arrives before this ends */
}
#endif
