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
 *	  which way to resolve each prepared transaction.
 * At abort every remote transaction is cancelled and rolled back (with
 * bounded waits; a connection that cannot be cleaned is closed).
 *
 * Subtransactions: a subtransaction that used a remote transaction and then
 * rolled back leaves remote work that cannot be undone alone, so the remote
 * transaction is marked failed and the top-level transaction cannot commit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "catalog/indexing.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "shardext/connection.h"
#include "shardext/metadata.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"

/* how long cleanup at abort or after commit waits for one node */
#define REMOTE_CLEANUP_TIMEOUT_MS 30000

static void RemoteXactCallback(XactEvent event, void *arg);
static void RemoteSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
								  SubTransactionId parentSubid, void *arg);
static List *ConnectionsInTransaction(void);
static void CommitRemoteTransactions(List *connections);
static void PrepareRemoteTransactions(List *connections);
static void FinishPreparedTransactions(List *connections);
static void AbortRemoteTransactions(void);
static void ResetRemoteTransaction(NodeConnection *conn);
static void RecordCommitDecision(NodeConnection *conn);

/* registers the transaction callbacks; called from _PG_init */
void
InitializeRemoteTransactions(void)
{
	RegisterXactCallback(RemoteXactCallback, NULL);
	RegisterSubXactCallback(RemoteSubXactCallback, NULL);
}

/*
 * RemoteTransactionBegin makes sure the connection is inside a remote
 * transaction that follows the local one, at the same isolation level.
 */
void
RemoteTransactionBegin(NodeConnection *conn)
{
	int			level = GetCurrentTransactionNestLevel();

	if (conn->xactState == REMOTE_XACT_FAILED)
		ereport(ERROR,
				(errcode(ERRCODE_IN_FAILED_SQL_TRANSACTION),
				 errmsg("remote transaction on node %s:%d is aborted",
						conn->host, conn->port),
				 errdetail("A rolled back subtransaction or a failed command left "
						   "remote work that cannot be undone on its own."),
				 errhint("Roll back the transaction.")));

	if (level > conn->lastUseNestLevel)
		conn->lastUseNestLevel = level;

	if (conn->xactState != REMOTE_XACT_NONE)
		return;

	if (XactIsoLevel == XACT_SERIALIZABLE)
		ExecuteRemoteCommand(conn, "BEGIN ISOLATION LEVEL SERIALIZABLE");
	else if (XactIsoLevel == XACT_REPEATABLE_READ)
		ExecuteRemoteCommand(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ");
	else
		ExecuteRemoteCommand(conn, "BEGIN");

	conn->xactState = REMOTE_XACT_OPEN;
	conn->xactSubLevel = level;
	conn->lastUseNestLevel = level;
}

/* RemoteTransactionMarkModified records that the connection wrote */
void
RemoteTransactionMarkModified(NodeConnection *conn)
{
	Assert(conn->xactState != REMOTE_XACT_NONE);
	conn->xactModified = true;
}

bool
RemoteTransactionInProgress(NodeConnection *conn)
{
	return conn->xactState != REMOTE_XACT_NONE;
}

/*
 * RemotePreparedGidPrefix returns the prefix of the gids this coordinator
 * database gives its prepared transactions: shardext_<system id>_<db oid>_
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
	List	   *all = AllNodeConnections();
	List	   *result = NIL;
	ListCell   *cell;

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
	List	   *connections;
	ListCell   *cell;
	int			modifiedCount = 0;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			connections = ConnectionsInTransaction();
			foreach(cell, connections)
			{
				NodeConnection *conn = lfirst(cell);

				if (conn->xactState == REMOTE_XACT_FAILED)
					RemoteTransactionBegin(conn);	/* throws */
				if (conn->xactModified)
					modifiedCount++;
			}
			if (modifiedCount <= 1)
				CommitRemoteTransactions(connections);
			else
				PrepareRemoteTransactions(connections);
			break;

		case XACT_EVENT_COMMIT:
			FinishPreparedTransactions(ConnectionsInTransaction());
			break;

		case XACT_EVENT_PRE_PREPARE:
			if (ConnectionsInTransaction() != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that used distributed tables")));
			break;

		case XACT_EVENT_ABORT:
			AbortRemoteTransactions();
			break;

		default:
			break;
	}
}

/*
 * CommitRemoteTransactions commits every open remote transaction, all at
 * once; at most one of them wrote, so no atomicity problem arises.
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
		ResetRemoteTransaction(lfirst(cell));
}

/*
 * PrepareRemoteTransactions runs phase one of two-phase commit on every
 * connection that wrote and records the commit decisions locally; the others
 * just commit.
 */
static void
PrepareRemoteTransactions(List *connections)
{
	List	   *prepareConns = NIL;
	List	   *commands = NIL;
	List	   *readOnlyConns = NIL;
	ListCell   *cell;
	char	   *prefix = RemotePreparedGidPrefix();
	TransactionId xid = GetTopTransactionId();

	foreach(cell, connections)
	{
		NodeConnection *conn = lfirst(cell);

		if (!conn->xactModified)
		{
			readOnlyConns = lappend(readOnlyConns, conn);
			continue;
		}
		snprintf(conn->preparedGid, sizeof(conn->preparedGid), "%s%u_%d",
				 prefix, xid, conn->serial);
		prepareConns = lappend(prepareConns, conn);
		commands = lappend(commands,
						   psprintf("PREPARE TRANSACTION %s",
									quote_literal_cstr(conn->preparedGid)));
	}

	/*
	 * Mark them prepared before sending: if any PREPARE fails, the abort
	 * callback then tries ROLLBACK PREPARED, which is harmless where the
	 * PREPARE did not happen (it falls back to closing the connection).
	 */
	foreach(cell, prepareConns)
		((NodeConnection *) lfirst(cell))->xactState = REMOTE_XACT_PREPARED;
	ExecuteRemoteCommandsInParallel(prepareConns, commands);

	foreach(cell, prepareConns)
		RecordCommitDecision(lfirst(cell));

	CommitRemoteTransactions(readOnlyConns);
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

/*
 * FinishPreparedTransactions runs after the local commit: COMMIT PREPARED on
 * every prepared connection.  Failures cannot undo anything now; they are
 * reported as warnings and left to recovery.
 */
static void
FinishPreparedTransactions(List *connections)
{
	ListCell   *cell;

	foreach(cell, connections)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn->xactState == REMOTE_XACT_PREPARED)
		{
			char	   *command = psprintf("COMMIT PREPARED %s",
										   quote_literal_cstr(conn->preparedGid));

			if (!ExecuteRemoteCommandWithTimeout(conn, command, REMOTE_CLEANUP_TIMEOUT_MS))
			{
				ereport(WARNING,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("could not commit prepared transaction %s on node %s:%d",
								conn->preparedGid, conn->host, conn->port),
						 errhint("It is committed by shardext_recover_prepared_transactions().")));
				CloseNodeConnection(conn);
			}
		}
		ResetRemoteTransaction(conn);
	}
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
	ListCell   *cell;

	foreach(cell, all)
	{
		NodeConnection *conn = lfirst(cell);
		bool		clean = true;

		conn->claimed = false;
		if (conn->pgConn == NULL)
		{
			ResetRemoteTransaction(conn);
			continue;
		}
		if (conn->queryInProgress)
			clean = CancelRemoteCommand(conn, REMOTE_CLEANUP_TIMEOUT_MS);

		if (clean && conn->xactState == REMOTE_XACT_PREPARED)
		{
			char	   *command = psprintf("ROLLBACK PREPARED %s",
										   quote_literal_cstr(conn->preparedGid));

			/* the PREPARE may not have happened; then roll back the plain way */
			if (!ExecuteRemoteCommandWithTimeout(conn, command, REMOTE_CLEANUP_TIMEOUT_MS))
				clean = ExecuteRemoteCommandWithTimeout(conn, "ROLLBACK",
														REMOTE_CLEANUP_TIMEOUT_MS);
		}
		else if (clean && conn->xactState != REMOTE_XACT_NONE)
			clean = ExecuteRemoteCommandWithTimeout(conn, "ROLLBACK",
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
	list_free(all);
}

static void
ResetRemoteTransaction(NodeConnection *conn)
{
	conn->xactState = REMOTE_XACT_NONE;
	conn->xactModified = false;
	conn->xactSubLevel = 0;
	conn->lastUseNestLevel = 0;
	conn->preparedGid[0] = '\0';
	conn->timeZoneSetInXact = false;
	conn->claimed = false;
}

/*
 * RemoteSubXactCallback: a rolled back subtransaction that used a remote
 * transaction poisons it (see the file header); a committed one hands its
 * use up to its parent.
 */
static void
RemoteSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	List	   *all;
	ListCell   *cell;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;

	all = AllNodeConnections();
	foreach(cell, all)
	{
		NodeConnection *conn = lfirst(cell);

		if (conn->xactState == REMOTE_XACT_NONE || conn->lastUseNestLevel < level)
			continue;

		if (event == SUBXACT_EVENT_COMMIT_SUB)
		{
			conn->lastUseNestLevel = level - 1;
			continue;
		}

		conn->claimed = false;
		if (conn->queryInProgress && !CancelRemoteCommand(conn, REMOTE_CLEANUP_TIMEOUT_MS))
		{
			/* the remote transaction is lost either way */
			if (conn->pgConn != NULL)
				PQfinish(conn->pgConn);
			conn->pgConn = NULL;
			conn->queryInProgress = false;
		}
		conn->xactState = REMOTE_XACT_FAILED;
	}
	list_free(all);
}
