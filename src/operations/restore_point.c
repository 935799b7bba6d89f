/*-------------------------------------------------------------------------
 *
 * restore_point.c
 *	  Cluster-wide restore points: shardext_create_restore_point(name) and
 *	  the maintenance daemon's periodic ones
 *	  (shardext.restore_point_interval).
 *
 * A restore point (pg_create_restore_point) is created on the coordinator
 * and on every worker while the commit gate is closed (commit_gate.c): no
 * distributed transaction decides to commit between the first point and
 * the last, so restoring every node to that name by point-in-time recovery
 * gives a cluster in which each distributed transaction is there on all of
 * its nodes or on none (recovery, once the restored cluster runs, commits
 * or rolls back the prepared parts by the restored decisions).
 *
 * Connections to every node are made, and each node checked (a primary,
 * with wal_level replica or logical, the caller allowed to create restore
 * points), before the gate closes, so that it stays closed only for one
 * round trip to the nodes, in parallel.  A node that cannot be reached
 * makes the function fail before any point is created: a restore point
 * that some node lacks cannot be restored to.  (A node that fails while
 * the points are created leaves the name on the others; create another.)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "utils/builtins.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "shardext/commit_gate.h"
#include "shardext/connection.h"
#include "shardext/failover.h"
#include "shardext/metadata.h"
#include "shardext/privileges.h"
#include "shardext/remote_command.h"

/* how long the gate may wait for the commit decisions under way */
#define GATE_TIMEOUT_MS 10000

/* what a node answers before the gate closes: '' when it can take a point */
#define NODE_READY_QUERY \
	"SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN 'it is a standby' " \
	"WHEN pg_catalog.current_setting('wal_level') = 'minimal' " \
	"THEN 'its wal_level is minimal' " \
	"WHEN NOT pg_catalog.has_function_privilege(" \
	"'pg_catalog.pg_create_restore_point(text)', 'EXECUTE') " \
	"THEN 'the user may not run pg_create_restore_point() there' ELSE '' END"

/* one node's restore point */
typedef struct NodePoint
{
	int32		nodeId;			/* 0: the coordinator */
	char	   *host;			/* NULL for the coordinator */
	int32		port;
	NodeConnection *conn;
	XLogRecPtr	lsn;
} NodePoint;

PG_FUNCTION_INFO_V1(shardext_create_restore_point);

static List *CreateClusterRestorePoint(const char *name);
static void CheckRestorePointName(const char *name);
static List *ConnectToEveryNode(void);
static void CheckNodeReady(NodePoint *point);
static void CreatePoints(List *points, const char *name);
static XLogRecPtr CreateLocalPoint(const char *name);
static void CloseNodePoints(List *points);

/*
 * shardext_create_restore_point(name) creates a consistent restore point
 * of that name on the coordinator and every worker and returns one row per
 * node: node_id (0 for the coordinator), node_host, node_port, lsn.
 */
Datum
shardext_create_restore_point(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ListCell   *cell;

	EnsureAdminAndShardext("shardext_create_restore_point");
	InitMaterializedSRF(fcinfo, 0);
	foreach(cell, CreateClusterRestorePoint(name))
	{
		NodePoint  *point = lfirst(cell);
		Datum		values[4];
		bool		nulls[4] = {false, point->host == NULL, false, false};

		values[0] = Int32GetDatum(point->nodeId);
		values[1] = point->host ? CStringGetTextDatum(point->host) : (Datum) 0;
		values[2] = Int32GetDatum(point->port);
		values[3] = LSNGetDatum(point->lsn);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * CreatePeriodicRestorePoint creates a restore point named
 * shardext_<UTC time> for the maintenance daemon, and logs it; a node that
 * cannot be reached makes it fail (the daemon logs the error) and skip this
 * one.
 */
void
CreatePeriodicRestorePoint(void)
{
	time_t		now = time(NULL);
	struct tm	utc;
	char		name[64];
	List	   *points;

	gmtime_r(&now, &utc);
	strftime(name, sizeof(name), "shardext_%Y%m%d_%H%M%S", &utc);
	points = CreateClusterRestorePoint(name);
	ereport(LOG,
			(errmsg("shardext: created restore point \"%s\" on %d nodes", name,
					list_length(points))));
}

/*
 * CreateClusterRestorePoint does the work (see the file header) and
 * returns the NodePoints, the coordinator's first.
 */
static List *
CreateClusterRestorePoint(const char *name)
{
	List	   *points;
	NodePoint  *local;

	CheckRestorePointName(name);
	points = ConnectToEveryNode();
	local = linitial(points);
	PG_TRY();
	{
		ListCell   *cell;
		TimestampTz closing;
		TimestampTz closed;

		foreach(cell, points)
		{
			if (lfirst(cell) != local)
				CheckNodeReady(lfirst(cell));
		}
		/* new decisions wait from here on, those under way finish first */
		closing = GetCurrentTimestamp();
		CloseCommitGate(GATE_TIMEOUT_MS);
		closed = GetCurrentTimestamp();
		CreatePoints(points, name);
		OpenCommitGate();
		ereport(DEBUG1,
				(errmsg_internal("shardext: commit decisions held back for %ld us (%ld us "
								 "waiting for those under way) for restore point \"%s\"",
								 (long) (GetCurrentTimestamp() - closing),
								 (long) (closed - closing), name)));
	}
	PG_FINALLY();
	{
		CloseNodePoints(points);
	}
	PG_END_TRY();
	return points;
}

/*
 * CheckRestorePointName checks the name and that this server can take a
 * restore point at all.
 */
static void
CheckRestorePointName(const char *name)
{
	if (name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a restore point needs a name")));
	if (strlen(name) >= MAXFNAMELEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("restore point name is too long"),
				 errdetail("It may have %d bytes at most.", MAXFNAMELEN - 1)));
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot create a restore point on a standby coordinator"),
				 errhint("Create it on the primary coordinator.")));
	if (!XLogIsNeeded())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot create a restore point: the coordinator's wal_level is "
						"minimal"),
				 errhint("Set wal_level to replica or logical and restart the coordinator.")));
}

/*
 * ConnectToEveryNode returns the coordinator's NodePoint and one per
 * worker, connected; a worker that cannot be reached is an error.
 */
static List *
ConnectToEveryNode(void)
{
	NodePoint  *local = palloc0(sizeof(NodePoint));
	List	   *points = list_make1(local);
	ListCell   *cell;

	local->port = PostPortNumber;
	PG_TRY();
	{
		foreach(cell, WorkerNodeList(false))
		{
			WorkerNode *node = lfirst(cell);
			NodePoint  *point = palloc0(sizeof(NodePoint));

			point->nodeId = node->nodeId;
			point->host = pstrdup(node->host);
			point->port = node->port;
			points = lappend(points, point);
			point->conn = OpenDedicatedConnection(node->host, node->port, false, false);
			if (point->conn == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
						 errmsg("cannot create a restore point while node %d (%s:%d) cannot "
								"be reached", node->nodeId, node->host, node->port),
						 errdetail("A restore point that a node lacks cannot be restored "
								   "to."),
						 errhint("Bring the node back, or fail it over to a replica, and "
								 "try again.")));
		}
	}
	PG_CATCH();
	{
		CloseNodePoints(points);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return points;
}

/* CheckNodeReady errors out unless a worker can take a restore point */
static void
CheckNodeReady(NodePoint *point)
{
	char	   *problem = ExecuteRemoteScalar(point->conn, NODE_READY_QUERY, 0, NULL);

	if (problem != NULL && problem[0] != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot create a restore point on node %d (%s:%d): %s",
						point->nodeId, point->host, point->port, problem)));
}

/*
 * CreatePoints creates the restore point on every worker (in parallel) and
 * on the coordinator, and notes each one's LSN.
 */
static void
CreatePoints(List *points, const char *name)
{
	const char *command = "SELECT pg_catalog.pg_create_restore_point($1)::text";
	const char *params[1] = {name};
	ListCell   *cell;

	foreach(cell, points)
	{
		NodePoint  *point = lfirst(cell);

		if (point->conn != NULL)
			SendRemoteCommandParams(point->conn, command, 1, NULL, params);
	}
	((NodePoint *) linitial(points))->lsn = CreateLocalPoint(name);
	foreach(cell, points)
	{
		NodePoint  *point = lfirst(cell);
		PGresult   *result;

		if (point->conn == NULL)
			continue;
		result = FinishRemoteQuery(point->conn, command);
		if (PQntuples(result) == 1)
			point->lsn = DatumGetLSN(DirectFunctionCall1(pg_lsn_in,
														 CStringGetDatum(PQgetvalue(result, 0, 0))));
		PQclear(result);
	}
}

/*
 * CreateLocalPoint creates the coordinator's point, through SQL so that
 * the caller's right to run pg_create_restore_point() is checked as on the
 * workers.
 */
static XLogRecPtr
CreateLocalPoint(const char *name)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};
	XLogRecPtr	lsn;
	bool		isnull;

	SPI_connect();
	if (SPI_execute_with_args("SELECT pg_catalog.pg_create_restore_point($1)", 1, argtypes,
							  values, NULL, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not create the coordinator's restore point");
	lsn = DatumGetLSN(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	return lsn;
}

/* CloseNodePoints closes the connections of the NodePoints */
static void
CloseNodePoints(List *points)
{
	ListCell   *cell;

	foreach(cell, points)
	{
		NodePoint  *point = lfirst(cell);

		CloseDedicatedConnection(point->conn);
		point->conn = NULL;
	}
}
