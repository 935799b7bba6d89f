/*-------------------------------------------------------------------------
 *
 * move_records.c
 *	  The records of shard moves and splits, and shardext_cleanup().
 *
 * A move cannot keep its records in the caller's transaction: an error or a
 * cancel would roll them back together with the knowledge of what to
 * remove, and other sessions could not watch its progress.  So every record
 * is written over a loopback connection to the coordinator's own database,
 * in its own (autocommit) transaction.  A cleanup record is written before
 * the object it describes is created, so a crash between the two leaves
 * a record of an object that does not exist, which cleanup skips; never an
 * object without a record.
 *
 * Cleanup only uses waits bounded in time, so that it can run in error
 * paths with interrupts held.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "shardext/array_literal.h"
#include "shardext/connection.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/poll_loop.h"
#include "shardext/privileges.h"
#include "shardext/remote_command.h"
#include "shardext/shard_move.h"
#include "shardext/test_pause.h"

/* how long cleanup waits for one command on one node */
#define CLEANUP_COMMAND_TIMEOUT_MS 30000

PG_FUNCTION_INFO_V1(shardext_cleanup);
PG_FUNCTION_INFO_V1(shardext_backend_is_alive);
PG_FUNCTION_INFO_V1(shardext_cancel_rebalance);

static char *CleanupCommand(const char *objectType, const char *objectName,
							const char *restore);
static NodeConnection *CleanupConnection(List **connections, int32 nodeId, bool quiet);

/*
 * LocalCoordinatorQuery runs a query over the loopback connection with a
 * bounded wait and returns the first value of its result (NULL when there is
 * none or the query failed).
 */
char *
LocalCoordinatorQuery(NodeConnection *local, const char *query)
{
	PGresult   *result = TryRemoteQueryNoInterrupts(local, query,
													CLEANUP_COMMAND_TIMEOUT_MS);
	char	   *value = NULL;

	if (result == NULL)
		return NULL;
	if (PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) > 0 &&
		!PQgetisnull(result, 0, 0))
		value = pstrdup(PQgetvalue(result, 0, 0));
	PQclear(result);
	return value;
}

/* the text form of the int8[] of the shard ids of a move */
static char *
ShardIdArray(ShardMoveState *state)
{
	int64	   *ids = palloc(sizeof(int64) * list_length(state->shards));
	ListCell   *cell;

	foreach(cell, state->shards)
		ids[foreach_current_index(cell)] = ((MoveShard *) lfirst(cell))->shardId;
	return Int64ArrayLiteral(ids, list_length(state->shards));
}

/* the new shard ids of a split: first pieces, then second pieces, ... */
static char *
NewShardIdArray(ShardMoveState *state)
{
	int			count = list_length(state->shards);
	int64	   *ids = palloc(sizeof(int64) * state->pieces.count * count);
	ListCell   *cell;

	foreach(cell, state->shards)
	{
		MoveShard  *shard = lfirst(cell);

		for (int piece = 0; piece < state->pieces.count; piece++)
			ids[piece * count + foreach_current_index(cell)] = shard->childIds[piece];
	}
	return Int64ArrayLiteral(ids, state->pieces.count * count);
}

/* where a split cuts: the last hash value of each piece but the last */
static char *
SplitPointArray(ShardMoveState *state)
{
	int64		points[MAX_SPLIT_PIECES];

	for (int piece = 0; piece < state->pieces.count - 1; piece++)
		points[piece] = state->pieces.hashMax[piece];
	return Int64ArrayLiteral(points, state->pieces.count - 1);
}

/*
 * InsertMoveRecord records a move in shardext.move with the given status
 * ('pending' for the planned moves of a rebalance, 'running' for the one
 * that starts) and returns its id.  When state->moveId is set already, the
 * (pending) row is updated instead.  Errors are thrown: nothing has been
 * done yet.
 */
int64
InsertMoveRecord(NodeConnection *local, ShardMoveState *state, const char *status)
{
	const char *params[15];
	char	   *value;
	bool		split = state->operation == MOVE_OPERATION_SPLIT;

	params[0] = state->moveId > 0 ? psprintf(INT64_FORMAT, state->moveId) : NULL;
	params[1] = state->jobId > 0 ? psprintf(INT64_FORMAT, state->jobId) : NULL;
	params[2] = split ? "split" : "move";
	params[3] = state->mode == MOVE_MODE_ONLINE ? "online" : "block_writes";
	params[4] = psprintf("%u", ((MoveShard *) linitial(state->shards))->relid);
	params[5] = ShardIdArray(state);
	params[6] = psprintf("%d", state->source.nodeId);
	params[7] = psprintf("%d", state->target.nodeId);
	params[8] = split ? psprintf("%d", state->splitPoint) : NULL;
	params[9] = split ? NewShardIdArray(state) : NULL;
	params[10] = status;
	params[11] = psprintf("%d", MyProcPid);
	params[12] = timestamptz_to_str(MyStartTimestamp);
	params[13] = psprintf(INT64_FORMAT, state->totalBytes);
	params[14] = split ? SplitPointArray(state) : NULL;

	/* split_points only for splits: moves also work before the 1.1 catalog */
	value = ExecuteRemoteScalar(local,
								psprintf("WITH id AS (SELECT coalesce($1::int8, "
								"              pg_catalog.nextval('shardext.move_move_id_seq')) AS v), "
								"upd AS (UPDATE shardext.move m SET operation = $3, mode = $4, "
								"          relid = $5::oid, shard_ids = $6::int8[], source_node_id = $7::int4, "
								"          target_node_id = $8::int4, split_point = $9::int4, "
								"          new_shard_ids = $10::int8[], status = $11, "
								"          owner_pid = $12::int4, owner_start = $13::timestamptz, "
								"          total_bytes = $14::int8%s, "
								"          started_at = CASE WHEN $11 = 'running' THEN now() END, "
								"          phase = CASE WHEN $11 = 'running' THEN 'setting up' END, "
								"          phase_started_at = CASE WHEN $11 = 'running' THEN now() END "
								"        FROM id WHERE m.move_id = id.v RETURNING m.move_id), "
								"ins AS (INSERT INTO shardext.move (move_id, job_id, operation, mode, relid, "
								"          shard_ids, source_node_id, target_node_id, split_point, "
								"          new_shard_ids, status, owner_pid, owner_start, total_bytes, "
								"          started_at, phase, phase_started_at%s) "
								"        SELECT v, coalesce($2::int8, v), $3, $4, $5::oid, $6::int8[], "
								"          $7::int4, $8::int4, $9::int4, $10::int8[], $11, $12::int4, "
								"          $13::timestamptz, $14::int8, "
								"          CASE WHEN $11 = 'running' THEN now() END, "
								"          CASE WHEN $11 = 'running' THEN 'setting up' END, "
								"          CASE WHEN $11 = 'running' THEN now() END%s "
								"        FROM id WHERE NOT EXISTS (SELECT 1 FROM upd) RETURNING move_id) "
								"SELECT move_id FROM upd UNION ALL SELECT move_id FROM ins",
										 split ? ", split_points = $15::int4[]" : "",
										 split ? ", split_points" : "",
										 split ? ", $15::int4[]" : ""),
								split ? 15 : 14, params);
	if (value == NULL)
		elog(ERROR, "could not record the move");
	return pg_strtoint64(value);
}

/*
 * SetMoveStatus records how a move ended.  Used in error paths: never
 * throws, waits a bounded time.
 */
void
SetMoveStatus(ShardMoveState *state, const char *status, const char *error)
{
	char	   *command;

	if (state->local == NULL || state->moveId <= 0)
		return;
	command = psprintf("UPDATE shardext.move SET status = %s, error = %s, "
					   "finished_at = now(), replication_lag_bytes = NULL%s "
					   "WHERE move_id = " INT64_FORMAT,
					   quote_literal_cstr(status),
					   error ? quote_literal_cstr(error) : "NULL",
					   strcmp(status, "done") == 0 ? ", phase = NULL" : "", state->moveId);
	(void) TryRemoteCommandNoInterrupts(state->local, command, CLEANUP_COMMAND_TIMEOUT_MS);
}

/*
 * SetMovePhase records the phase a move enters and tells the calling
 * session with a NOTICE.
 */
void
SetMovePhase(ShardMoveState *state, const char *phase)
{
	const char *params[2];

	params[0] = psprintf(INT64_FORMAT, state->moveId);
	params[1] = phase;
	(void) ExecuteRemoteScalar(state->local,
							   "UPDATE shardext.move SET phase = $2, phase_started_at = clock_timestamp() "
							   "WHERE move_id = $1::int8", 2, params);
	ereport(NOTICE, (errmsg("%s: %s", state->description, phase)));
	MoveTestPause(state, phase);
}

#ifdef SHARDEXT_TEST_HOOKS
/*
 * MoveTestPause: fault tests set shardext.move_test_pause_phase to a phase
 * (or to "writes paused", the point where a move holds the cutover locks)
 * to interrupt a move there; the move records the point as its phase and
 * sleeps for shardext.move_test_pause_ms.  It is also the pause point
 * "move: <point>" (test_pause.h), which a test releases instead.
 */
void
MoveTestPause(ShardMoveState *state, const char *point)
{
	TimestampTz end;
	const char *params[2];

	TestPausePoint(psprintf("move: %s", point));
	if (ShardextMoveTestPausePhase == NULL || strcmp(ShardextMoveTestPausePhase, point) != 0)
		return;
	params[0] = psprintf(INT64_FORMAT, state->moveId);
	params[1] = point;
	(void) ExecuteRemoteScalar(state->local,
							   "UPDATE shardext.move SET phase = $2 WHERE move_id = $1::int8", 2, params);
	end = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ShardextMoveTestPauseMs);
	while (GetCurrentTimestamp() < end)
		SleepInterruptibly(10);
}
#endif

/*
 * ReportMoveProgress records rows and bytes copied and the replication lag
 * (pass -1 when unknown), at most twice a second unless force.
 */
void
ReportMoveProgress(ShardMoveState *state, bool force, int64 lagBytes)
{
	TimestampTz now = GetCurrentTimestamp();
	const char *params[4];

	if (!force && !TimestampDifferenceExceeds(state->lastProgress, now, 500))
		return;
	state->lastProgress = now;
	params[0] = psprintf(INT64_FORMAT, state->moveId);
	params[1] = psprintf(INT64_FORMAT, state->rowsCopied);
	params[2] = psprintf(INT64_FORMAT, state->bytesCopied);
	params[3] = lagBytes >= 0 ? psprintf(INT64_FORMAT, lagBytes) : NULL;
	(void) ExecuteRemoteScalar(state->local,
							   "UPDATE shardext.move SET rows_copied = $2::int8, bytes_copied = $3::int8, "
							   "replication_lag_bytes = $4::int8 WHERE move_id = $1::int8", 4, params);
}

/*
 * AddCleanupRecord records an object that the move is about to create
 * (call it before creating the object).
 */
void
AddCleanupRecord(ShardMoveState *state, int32 nodeId, const char *objectType,
				 const char *objectName, int64 shardId, const char *restore,
				 const char *policy)
{
	const char *params[7];

	params[0] = psprintf(INT64_FORMAT, state->moveId);
	params[1] = psprintf("%d", nodeId);
	params[2] = objectType;
	params[3] = objectName;
	params[4] = shardId > 0 ? psprintf(INT64_FORMAT, shardId) : NULL;
	params[5] = restore;
	params[6] = policy;
	(void) ExecuteRemoteScalar(state->local,
							   "INSERT INTO shardext.cleanup_record (move_id, node_id, object_type, "
							   "object_name, shard_id, restore, policy) "
							   "VALUES ($1::int8, $2::int4, $3, $4, $5::int8, $6, $7)", 7, params);
}

/*
 * MarkDeferredDropsNow stamps the deferred drops of a move with the time at
 * which its catalog switch was visible: transactions that began before may
 * still use the old placement.
 */
void
MarkDeferredDropsNow(ShardMoveState *state)
{
	char	   *command = psprintf("UPDATE shardext.cleanup_record SET created_at = clock_timestamp() "
								   "WHERE move_id = " INT64_FORMAT " AND policy = 'deferred'",
								   state->moveId);

	(void) TryRemoteCommandNoInterrupts(state->local, command, CLEANUP_COMMAND_TIMEOUT_MS);
}

/* CancelPendingMoves marks the moves of a rebalance that did not start */
void
CancelPendingMoves(NodeConnection *local, int64 jobId)
{
	char	   *command = psprintf("UPDATE shardext.move SET status = 'cancelled', "
								   "finished_at = now() WHERE job_id = " INT64_FORMAT
								   " AND status = 'pending'", jobId);

	(void) TryRemoteCommandNoInterrupts(local, command, CLEANUP_COMMAND_TIMEOUT_MS);
}

/*
 * The condition under which a transaction of the coordinator database may
 * still use the placement a deferred record drops: it began before the
 * record's time.  Our own loopback session and the calling session (which
 * is the mover itself) do not count.
 */
#define OLDER_TRANSACTIONS_EXIST(createdAt) \
	"EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a " \
	"WHERE a.datname = pg_catalog.current_database() " \
	"AND a.backend_type = 'client backend' " \
	"AND a.pid <> pg_catalog.pg_backend_pid() AND a.pid <> %d " \
	"AND a.xact_start < " createdAt ")"

/*
 * WaitForOlderTransactions waits (polling, at most timeoutMs) until no
 * transaction that began before the deferred drops of a move runs any more.
 */
void
WaitForOlderTransactions(NodeConnection *local, int64 moveId, int timeoutMs)
{
	char	   *query = psprintf("SELECT " OLDER_TRANSACTIONS_EXIST("(SELECT max(created_at) "
																	"FROM shardext.cleanup_record "
																	"WHERE policy = 'deferred' "
																	"AND move_id = " INT64_FORMAT ")"),
								 MyProcPid, moveId);
	PollLoop	poll;

	StartPollLoop(&poll, timeoutMs, 20);
	while (PollAgain(&poll))
	{
		char	   *exists = LocalCoordinatorQuery(local, query);

		if (exists == NULL || strcmp(exists, "f") == 0)
			break;
	}
	EndPollLoop(&poll);
	pfree(query);
}

/*
 * CleanupCommand returns the command that removes one recorded object on
 * its node; every command is harmless when the object is gone already.
 */
static char *
CleanupCommand(const char *objectType, const char *objectName, const char *restore)
{
	if (strcmp(objectType, "subscription") == 0)
		return psprintf("DO $shardext$ BEGIN "
						"IF EXISTS (SELECT 1 FROM pg_catalog.pg_subscription s "
						"  JOIN pg_catalog.pg_database d ON d.oid = s.subdbid "
						"  WHERE s.subname = %s AND d.datname = pg_catalog.current_database()) THEN "
						"  ALTER SUBSCRIPTION %s DISABLE; "
						"  ALTER SUBSCRIPTION %s SET (slot_name = NONE); "
						"  DROP SUBSCRIPTION %s; "
						"END IF; "
						"PERFORM pg_catalog.pg_replication_origin_drop(roname) "
						"  FROM pg_catalog.pg_replication_origin WHERE roname = %s; "
						"END $shardext$",
						quote_literal_cstr(objectName), quote_identifier(objectName),
						quote_identifier(objectName), quote_identifier(objectName),
						quote_literal_cstr(objectName));
	if (strcmp(objectType, "replication_slot") == 0)
		return psprintf("DO $shardext$ BEGIN "
						"FOR i IN 1..200 LOOP "
						"  PERFORM pg_catalog.pg_terminate_backend(active_pid) "
						"    FROM pg_catalog.pg_replication_slots "
						"    WHERE slot_name = %s AND active_pid IS NOT NULL; "
						"  BEGIN "
						"    PERFORM pg_catalog.pg_drop_replication_slot(slot_name) "
						"      FROM pg_catalog.pg_replication_slots WHERE slot_name = %s; "
						"    RETURN; "
						"  EXCEPTION WHEN object_in_use OR undefined_object THEN "
						"    PERFORM pg_catalog.pg_sleep(0.05); "
						"  END; "
						"END LOOP; "
						"RAISE EXCEPTION 'replication slot %% is still in use', %s; "
						"END $shardext$",
						quote_literal_cstr(objectName), quote_literal_cstr(objectName),
						quote_literal_cstr(objectName));
	if (strcmp(objectType, "publication") == 0)
		return psprintf("DROP PUBLICATION IF EXISTS %s", quote_identifier(objectName));
	if (strcmp(objectType, "marker") == 0)
		return psprintf("DELETE FROM shardext.move_marker WHERE move_id = %s::int8; "
						"DELETE FROM shardext.move_marker_applied WHERE move_id = %s::int8",
						quote_literal_cstr(objectName), quote_literal_cstr(objectName));
	if (strcmp(objectType, "replica_identity") == 0)
		return psprintf("ALTER TABLE IF EXISTS %s REPLICA IDENTITY %s", objectName,
						restore && restore[0] == 'n' ? "NOTHING" :
						restore && restore[0] == 'f' ? "FULL" : "DEFAULT");
	if (strcmp(objectType, "table") == 0)
		return psprintf("DROP TABLE IF EXISTS %s", objectName);
	elog(ERROR, "unknown cleanup object type \"%s\"", objectType);
	return NULL;				/* keep compiler quiet */
}

/*
 * CleanupConnection returns a dedicated connection to a node for cleanup,
 * opening it on first use (connections are kept in *connections, one per
 * node, NULL when the node could not be reached).  Returns NULL when the
 * node is unknown or unreachable.
 */
typedef struct CleanupNodeConnection
{
	int32		nodeId;
	NodeConnection *conn;
} CleanupNodeConnection;

static int	CleanupRecords(NodeConnection *local, PGresult *records, List **connections,
						   bool quiet);

static NodeConnection *
CleanupConnection(List **connections, int32 nodeId, bool quiet)
{
	ListCell   *cell;
	CleanupNodeConnection *entry;
	WorkerNode *node;

	foreach(cell, *connections)
	{
		entry = lfirst(cell);
		if (entry->nodeId == nodeId)
			return entry->conn;
	}

	entry = palloc0(sizeof(CleanupNodeConnection));
	entry->nodeId = nodeId;
	node = LookupWorkerNode(nodeId);
	if (node != NULL)
	{
		entry->conn = OpenDedicatedConnection(node->host, node->port, false, false);
		if (entry->conn == NULL)
			ereport(WARNING,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to node %s:%d to clean up after a shard move",
							node->host, node->port),
					 errhint("Run shardext_cleanup() once the node is reachable.")));
		else
			(void) TryRemoteCommandNoInterrupts(entry->conn,
												"SET lock_timeout = '10s'",
												CLEANUP_COMMAND_TIMEOUT_MS);
	}
	*connections = lappend(*connections, entry);
	return entry->conn;
}

/*
 * RunCleanup removes recorded objects and returns how many it removed.
 *
 * With onlyMoveId, it handles that move's records: those with policy
 * 'always', and 'on_failure' / 'deferred' ones when asked.  Otherwise it
 * first marks the moves whose session is gone (or that this session left
 * behind, except the pending moves of currentJobId) as ended, and then
 * handles every record of every ended move; deferred drops only when no
 * older transaction runs.  A table is never dropped from a node that the
 * catalog says holds its shard.  Records of objects that could not be
 * removed stay for the next run.  Waits are bounded; remote failures are
 * warnings.
 */
int
RunCleanup(NodeConnection *local, int64 onlyMoveId, bool includeOnFailure,
		   bool includeDeferred, int64 currentJobId, bool quiet)
{
	StringInfoData query;
	PGresult   *records;
	List	   *connections = NIL;
	ListCell   *cell;
	int			removed = 0;

	if (onlyMoveId <= 0)
	{
		char	   *command =
			psprintf("UPDATE shardext.move SET "
					 "status = CASE WHEN phase = 'cleaning up' THEN 'done' "
					 "              WHEN status = 'pending' THEN 'cancelled' ELSE 'failed' END, "
					 "error = CASE WHEN phase = 'cleaning up' OR status = 'pending' THEN error "
					 "             ELSE coalesce(error, 'interrupted') END, "
					 "phase = CASE WHEN phase = 'cleaning up' THEN NULL ELSE phase END, "
					 "finished_at = now(), replication_lag_bytes = NULL "
					 "WHERE status IN ('pending', 'running') "
					 "AND (NOT shardext.backend_is_alive(owner_pid, owner_start) "
					 "     OR (owner_pid = %d AND owner_start = %s::timestamptz "
					 "         AND job_id <> " INT64_FORMAT "))",
					 MyProcPid, quote_literal_cstr(timestamptz_to_str(MyStartTimestamp)),
					 currentJobId);

		(void) TryRemoteCommandNoInterrupts(local, command, CLEANUP_COMMAND_TIMEOUT_MS);
	}

	initStringInfo(&query);
	appendStringInfo(&query,
					 "SELECT r.record_id, r.node_id, r.object_type, r.object_name, r.restore, "
					 "r.shard_id IS NOT NULL AND EXISTS (SELECT 1 FROM shardext.placement p "
					 "  WHERE p.shardid = r.shard_id AND p.nodeid = r.node_id) AS placed, "
					 "r.policy <> 'deferred' OR NOT " OLDER_TRANSACTIONS_EXIST("r.created_at")
					 " AS ready "
					 "FROM shardext.cleanup_record r "
					 "LEFT JOIN shardext.move m ON m.move_id = r.move_id ",
					 MyProcPid);
	if (onlyMoveId > 0)
		appendStringInfo(&query,
						 "WHERE r.move_id = " INT64_FORMAT " AND (r.policy = 'always' "
						 "OR (r.policy = 'on_failure' AND %s) OR (r.policy = 'deferred' AND %s)) ",
						 onlyMoveId, includeOnFailure ? "true" : "false",
						 includeDeferred ? "true" : "false");
	else
		appendStringInfoString(&query,
							   "WHERE m.move_id IS NULL OR m.status NOT IN ('pending', 'running') ");
	appendStringInfoString(&query,
						   "ORDER BY CASE r.object_type WHEN 'subscription' THEN 1 "
						   "WHEN 'replication_slot' THEN 2 WHEN 'publication' THEN 3 "
						   "WHEN 'marker' THEN 4 WHEN 'replica_identity' THEN 5 ELSE 6 END, "
						   "r.record_id");

	records = TryRemoteQueryNoInterrupts(local, query.data, CLEANUP_COMMAND_TIMEOUT_MS);
	if (records == NULL)
		return 0;

	/* the result and the connections are freed also when an interrupt ends this */
	PG_TRY();
	{
		removed = CleanupRecords(local, records, &connections, quiet);
	}
	PG_FINALLY();
	{
		PQclear(records);
		foreach(cell, connections)
			CloseDedicatedConnection(((CleanupNodeConnection *) lfirst(cell))->conn);
	}
	PG_END_TRY();
	return removed;
}

/*
 * CleanupRecords removes what the cleanup records of RunCleanup's query
 * name, on connections it adds to *connections, and returns how many
 * objects it removed.
 */
static int
CleanupRecords(NodeConnection *local, PGresult *records, List **connections, bool quiet)
{
	int			removed = 0;

	for (int i = 0; i < PQntuples(records); i++)
	{
		char	   *recordId = PQgetvalue(records, i, 0);
		int32		nodeId = pg_strtoint32(PQgetvalue(records, i, 1));
		char	   *objectType = PQgetvalue(records, i, 2);
		char	   *objectName = PQgetvalue(records, i, 3);
		char	   *restore = PQgetisnull(records, i, 4) ? NULL : PQgetvalue(records, i, 4);
		bool		placed = strcmp(PQgetvalue(records, i, 5), "t") == 0;
		bool		ready = strcmp(PQgetvalue(records, i, 6), "t") == 0;
		bool		done = false;

		if (!ready)
			continue;

		if (placed || LookupWorkerNode(nodeId) == NULL)
			done = true;		/* the node holds the shard now, or is gone */
		else
		{
			NodeConnection *conn = CleanupConnection(connections, nodeId, quiet);

			if (conn != NULL)
			{
				done = TryRemoteCommandNoInterrupts(conn,
													CleanupCommand(objectType, objectName,
																   restore),
													CLEANUP_COMMAND_TIMEOUT_MS);
				if (done)
					removed++;
			}
		}

		if (done)
			(void) TryRemoteCommandNoInterrupts(local,
												psprintf("DELETE FROM shardext.cleanup_record "
														 "WHERE record_id = %s", recordId),
												CLEANUP_COMMAND_TIMEOUT_MS);
	}
	return removed;
}

/*
 * shardext_cleanup() removes what ended moves and splits left on the nodes:
 * subscriptions, replication slots, publications, markers, changed replica
 * identities, the target tables of failed moves and the source tables of
 * finished ones.  Returns the number of objects removed.
 */
Datum
shardext_cleanup(PG_FUNCTION_ARGS)
{
	NodeConnection *local;
	int			removed;

	EnsureAdminAndShardext("shardext_cleanup");
	local = OpenLoopbackConnection(true);
	PG_TRY();
	{
		removed = RunCleanup(local, 0, true, true, 0, false);
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(local);
	}
	PG_END_TRY();
	PG_RETURN_INT32(removed);
}

/*
 * MaintainShardMoves is the maintenance daemon's share of the cleanup: when
 * a move that is no longer running left records, or ended without saying
 * so, it runs the cleanup (over a loopback connection as the daemon's
 * user, a superuser).  Called in a transaction.
 */
void
MaintainShardMoves(void)
{
	bool		needed = false;
	NodeConnection *local;
	int			removed = 0;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute("SELECT EXISTS (SELECT 1 FROM shardext.cleanup_record r "
					"  LEFT JOIN shardext.move m ON m.move_id = r.move_id "
					"  WHERE m.move_id IS NULL OR m.status NOT IN ('pending', 'running') "
					"  OR NOT shardext.backend_is_alive(m.owner_pid, m.owner_start)) "
					"OR EXISTS (SELECT 1 FROM shardext.move "
					"  WHERE status IN ('pending', 'running') "
					"  AND NOT shardext.backend_is_alive(owner_pid, owner_start))",
					true, 1) == SPI_OK_SELECT && SPI_processed == 1)
	{
		bool		isnull;

		needed = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
											1, &isnull));
	}
	SPI_finish();
	if (!needed)
		return;

	local = OpenLoopbackConnection(false);
	if (local == NULL)
	{
		ereport(LOG,
				(errmsg("shardext could not connect to its own database to clean up "
						"after shard moves")));
		return;
	}
	PG_TRY();
	{
		removed = RunCleanup(local, 0, true, true, 0, true);
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(local);
	}
	PG_END_TRY();
	if (removed > 0)
		ereport(LOG,
				(errmsg("shardext removed %d objects left by shard moves", removed)));
}

/*
 * shardext_backend_is_alive(pid int, backend_start timestamptz) tells
 * whether the server process that started at backend_start still runs
 * (process ids are reused; the pair is not).
 */
Datum
shardext_backend_is_alive(PG_FUNCTION_ARGS)
{
	int32		pid = PG_GETARG_INT32(0);
	TimestampTz start = PG_GETARG_TIMESTAMPTZ(1);
	int			count;

	if (pid == MyProcPid)
		PG_RETURN_BOOL(start == MyStartTimestamp);

	/* the backend status snapshot lives until the end of the transaction */
	pgstat_clear_snapshot();
	count = pgstat_fetch_stat_numbackends();
	for (int i = 1; i <= count; i++)
	{
		LocalPgBackendStatus *local = LocalBackendStatus(i);

		if (local != NULL && local->backendStatus.st_procpid == pid)
			PG_RETURN_BOOL(local->backendStatus.st_proc_start_timestamp == start);
	}
	PG_RETURN_BOOL(false);
}

/*
 * shardext_cancel_rebalance() sends a cancel to every session of this
 * database that runs a move, split or rebalance; each stops cleanly (the
 * move in progress is rolled back, finished ones stay).
 */
Datum
shardext_cancel_rebalance(PG_FUNCTION_ARGS)
{
	NodeConnection *local;
	char	   *count;

	EnsureAdminAndShardext("shardext_cancel_rebalance");
	local = OpenLoopbackConnection(true);
	count = LocalCoordinatorQuery(local,
								  "SELECT count(*) FILTER (WHERE pg_catalog.pg_cancel_backend(pid)) "
								  "FROM (SELECT DISTINCT owner_pid AS pid FROM shardext.move "
								  "      WHERE status = 'running' "
								  "      AND shardext.backend_is_alive(owner_pid, owner_start)) p");
	CloseDedicatedConnection(local);
	PG_RETURN_INT32(count ? pg_strtoint32(count) : 0);
}
