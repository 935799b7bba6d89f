/*-------------------------------------------------------------------------
 *
 * pg_upgrade.c
 *	  Major-version upgrades of a cluster, pg_upgrade on every node:
 *	  shardext_check_pg_upgrade() says what must be done before,
 *	  shardext_finish_pg_upgrade() makes the upgraded nodes one cluster again.
 *
 * pg_upgrade carries every table, shardext's catalogs included, to the new
 * server, but gives it a new system identifier, and shardext names servers
 * by theirs: a worker database records the coordinator database it serves
 * as "<system identifier>:<database oid>" (shardext.local_identity, checked
 * when a replica or a server is accepted for a node), and the coordinator
 * records each worker's system identifier and timeline (fencing.c).  After
 * the upgrade the coordinator refuses every worker (SQLSTATE 08004) until
 * shardext_finish_pg_upgrade() registers the workers with the coordinator's
 * new identity and records theirs (shardext_update_node(), which also
 * deactivates the nodes' read replicas: they are made anew from the
 * upgraded primaries).  A worker is accepted only when its database serves
 * this coordinator database (the same database oid, which pg_upgrade keeps,
 * and the same node id) under one earlier identity, the same on every
 * worker.
 *
 * What pg_upgrade cannot carry is checked before: prepared transactions
 * (pg_upgrade refuses a server that has any), commit records that recovery
 * still needs (their gids name the old identity), moves, splits and sagas
 * in progress, and logical replication slots (dropped by pg_upgrade before
 * PostgreSQL 17).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "shardext/connection.h"
#include "shardext/fencing.h"
#include "shardext/metadata.h"
#include "shardext/operations.h"
#include "shardext/privileges.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"

PG_FUNCTION_INFO_V1(shardext_check_pg_upgrade);
PG_FUNCTION_INFO_V1(shardext_finish_pg_upgrade);

/* how long a node gets to answer one query */
#define UPGRADE_QUERY_TIMEOUT_MS 30000

static void PutCheck(ReturnSetInfo *rsinfo, WorkerNode *node, const char *name,
					 bool error, char *detail);
static int64 CountCoordinatorRows(const char *query);
static void CheckCoordinator(ReturnSetInfo *rsinfo);
static void CheckWorker(ReturnSetInfo *rsinfo, WorkerNode *node);
static void PutPendingChecks(ReturnSetInfo *rsinfo, WorkerNode *node, int64 prepared,
							 int64 ours, int64 slots);
static char *RegisterWithNewIdentity(WorkerNode *node, char **previous);

/*
 * shardext_check_pg_upgrade() returns one row per check and node (the
 * coordinator is node 0): node_id, node_host, node_port, check_name,
 * status ('ok', 'warning' or 'error'), detail.  Every error must be gone
 * before the nodes are stopped for pg_upgrade.
 */
Datum
shardext_check_pg_upgrade(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ListCell   *cell;

	EnsureAdminAndShardext("shardext_check_pg_upgrade");
	InitMaterializedSRF(fcinfo, 0);
	CheckCoordinator(rsinfo);
	foreach(cell, WorkerNodeList(false))
	{
		WorkerNode *node = lfirst(cell);

		CheckWorker(rsinfo, node);
		ListCell   *replicaCell;

		foreach(replicaCell, ReplicaNodeList(node->nodeId, false))
			PutCheck(rsinfo, lfirst(replicaCell), "read_replica", false,
					 psprintf("A standby cannot be upgraded by pg_upgrade: after the upgrade of "
							  "node %d, make it anew from a base backup of the upgraded primary "
							  "(or by rsync as pg_upgrade's documentation describes), then run "
							  "shardext_add_replica() for it.", node->nodeId));
	}
	return (Datum) 0;
}

/* PutCheck adds a row; node NULL is the coordinator; detail NULL is "ok" */
static void
PutCheck(ReturnSetInfo *rsinfo, WorkerNode *node, const char *name, bool error, char *detail)
{
	Datum		values[6];
	bool		nulls[6] = {false, node == NULL, false, false, false, false};
	bool		warning = detail != NULL && !error;

	values[0] = Int32GetDatum(node ? node->nodeId : 0);
	values[1] = node ? CStringGetTextDatum(node->host) : (Datum) 0;
	values[2] = Int32GetDatum(node ? node->port : PostPortNumber);
	values[3] = CStringGetTextDatum(name);
	values[4] = CStringGetTextDatum(error ? "error" : warning ? "warning" : "ok");
	values[5] = CStringGetTextDatum(detail ? detail : "Nothing pending.");
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* CountCoordinatorRows runs a count(*) query on the coordinator */
static int64
CountCoordinatorRows(const char *query)
{
	bool		isnull;
	int64		count;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(query, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not run \"%s\"", query);
	count = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										&isnull));
	SPI_finish();
	return count;
}

/*
 * CheckCoordinator: prepared transactions of the coordinator server, the
 * commit records recovery still needs, moves and sagas that have not ended.
 */
static void
CheckCoordinator(ReturnSetInfo *rsinfo)
{
	int64		records = CountCoordinatorRows("SELECT count(*) FROM shardext.transaction");
	int64		moves = CountCoordinatorRows("SELECT count(*) FROM shardext.move "
											 "WHERE status IN ('pending', 'running')");
	int64		sagas = CountCoordinatorRows("SELECT count(*) FROM shardext.saga WHERE state "
											 "IN ('queued', 'running', 'compensating')");

	PutPendingChecks(rsinfo, NULL,
					 CountCoordinatorRows("SELECT count(*) FROM pg_catalog.pg_prepared_xacts"),
					 0,
					 CountCoordinatorRows("SELECT count(*) FROM pg_catalog.pg_replication_slots "
										  "WHERE slot_type = 'logical'"));
	PutCheck(rsinfo, NULL, "two_phase_commit_records", records > 0, records == 0 ? NULL :
			 psprintf(INT64_FORMAT " commit records of two-phase commits wait for recovery, "
					  "whose transactions name the server's current identity. Run SELECT "
					  "shardext_recover_prepared_transactions() until this check passes.",
					  records));
	PutCheck(rsinfo, NULL, "moves", moves > 0, moves == 0 ? NULL :
			 psprintf(INT64_FORMAT " shard moves or splits have not ended. Wait for them "
					  "(shardext.moves) or cancel them (shardext_cancel_rebalance()), then "
					  "run shardext_cleanup().", moves));
	PutCheck(rsinfo, NULL, "sagas", sagas > 0, sagas == 0 ? NULL :
			 psprintf(INT64_FORMAT " sagas have not ended; their step records on the nodes "
					  "name the server's current identity. Let them end, or abandon them "
					  "(shardext_abandon_saga()).", sagas));
}

/* CheckWorker: prepared transactions and logical slots of a worker */
static void
CheckWorker(ReturnSetInfo *rsinfo, WorkerNode *node)
{
	const char *params[1] = {RemotePreparedGidPrefix()};
	NodeConnection *conn;
	PGresult   *result = NULL;
	char	   *failure = NULL;

	conn = OpenDedicatedConnectionWithTimeout(node->host, node->port,
											  UPGRADE_QUERY_TIMEOUT_MS);
	if (conn != NULL)
	{
		PG_TRY();
		{
			result = TryRemoteQuery(conn,
									"SELECT (SELECT count(*) FROM pg_catalog.pg_prepared_xacts), "
									"(SELECT count(*) FROM pg_catalog.pg_prepared_xacts "
									"WHERE left(gid, length($1)) = $1), "
									"(SELECT count(*) FROM pg_catalog.pg_replication_slots "
									"WHERE slot_type = 'logical')",
									1, params, UPGRADE_QUERY_TIMEOUT_MS, &failure);
		}
		PG_FINALLY();
		{
			CloseDedicatedConnection(conn);
		}
		PG_END_TRY();
	}
	if (result == NULL || PQresultStatus(result) != PGRES_TUPLES_OK || PQntuples(result) != 1)
	{
		PutCheck(rsinfo, node, "reachable", true,
				 psprintf("The node could not be asked%s%s. Every node must run for the checks.",
						  failure ? ": " : "", failure ? failure : ""));
		PQclear(result);
		return;
	}
	PutPendingChecks(rsinfo, node, strtoi64(PQgetvalue(result, 0, 0), NULL, 10),
					 strtoi64(PQgetvalue(result, 0, 1), NULL, 10),
					 strtoi64(PQgetvalue(result, 0, 2), NULL, 10));
	PQclear(result);
}

/*
 * PutPendingChecks reports a server's prepared transactions (ours of them
 * are shardext's, which recovery resolves) and logical replication slots.
 */
static void
PutPendingChecks(ReturnSetInfo *rsinfo, WorkerNode *node, int64 prepared, int64 ours,
				 int64 slots)
{
	PutCheck(rsinfo, node, "prepared_transactions", prepared > 0, prepared == 0 ? NULL :
			 psprintf(INT64_FORMAT " prepared transactions are pending (" INT64_FORMAT " of them "
					  "shardext's two-phase commits); pg_upgrade refuses a server that has any. "
					  "Run SELECT shardext_recover_prepared_transactions() on the coordinator, "
					  "and COMMIT PREPARED or ROLLBACK PREPARED those of other applications "
					  "(pg_prepared_xacts).", prepared, ours));
	PutCheck(rsinfo, node, "logical_replication_slots", false, slots == 0 ? NULL :
			 psprintf(INT64_FORMAT " logical replication slots: pg_upgrade drops them when it "
					  "upgrades from PostgreSQL 16 or older, and from 17 on carries only those "
					  "that consumed all WAL. Subscribers of change data capture start anew "
					  "after the upgrade.", slots));
}

/*
 * shardext_finish_pg_upgrade(), after pg_upgrade of every node, registers
 * every worker with the coordinator's new identity and records the
 * worker's (shardext_update_node()); returns a row per worker: node_id,
 * node_host, node_port, detail.
 */
Datum
shardext_finish_pg_upgrade(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *previous = NULL;
	List	   *nodes = NIL;
	List	   *details = NIL;
	ListCell   *cell;
	ListCell   *detailCell;
	bool		identityCheck;

	EnsureAdminAndShardext("shardext_finish_pg_upgrade");
	InitMaterializedSRF(fcinfo, 0);
	LockRelationOid(ShardextCatalogRelid("node"), ShareRowExclusiveLock);

	/* the node list changes as nodes are updated: copy it first */
	foreach(cell, WorkerNodeList(false))
	{
		WorkerNode *node = lfirst(cell);
		WorkerNode *copy = palloc(sizeof(WorkerNode));

		*copy = *node;
		copy->host = pstrdup(node->host);
		nodes = lappend(nodes, copy);
	}
	foreach(cell, nodes)
		details = lappend(details, RegisterWithNewIdentity(lfirst(cell), &previous));

	/*
	 * Every worker now holds what its node's catalog says: record their
	 * identities.  Each shardext_update_node() ends with a recovery of
	 * prepared transactions on every node, whose connections would refuse
	 * the workers not recorded yet: the check stays off meanwhile.
	 */
	identityCheck = SetNodeIdentityCheck(false);
	PG_TRY();
	{
		forboth(cell, nodes, detailCell, details)
		{
			WorkerNode *node = lfirst(cell);
			Datum		values[4];
			bool		nulls[4] = {false, false, false, false};

			DirectFunctionCall3(shardext_update_node, Int32GetDatum(node->nodeId),
								CStringGetTextDatum(node->host), Int32GetDatum(node->port));
			values[0] = Int32GetDatum(node->nodeId);
			values[1] = CStringGetTextDatum(node->host);
			values[2] = Int32GetDatum(node->port);
			values[3] = CStringGetTextDatum(lfirst(detailCell));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	PG_FINALLY();
	{
		SetNodeIdentityCheck(identityCheck);
	}
	PG_END_TRY();
	return (Datum) 0;
}

/*
 * RegisterWithNewIdentity makes the worker's database serve this
 * coordinator database under its current identity, when it served it
 * under *previous (or, *previous being NULL, under any earlier identity,
 * which becomes *previous).  Returns what it did.
 */
static char *
RegisterWithNewIdentity(WorkerNode *node, char **previous)
{
	char	   *current = CoordinatorId();
	char	   *suffix = psprintf(":%u/%d", MyDatabaseId, node->nodeId);
	bool		identityCheck = SetNodeIdentityCheck(false);
	NodeConnection *volatile conn = NULL;
	char	   *served = NULL;
	char	   *old = NULL;

	PG_TRY();
	{
		conn = OpenDedicatedConnection(node->host, node->port, false, true);
		CheckSameMajorVersion(conn, node->host, node->port);
		served = ExecuteStandbyScalar(conn, "SELECT coordinator_id || '/' || node_id "
									  "FROM shardext.local_identity",
									  TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
																  UPGRADE_QUERY_TIMEOUT_MS));
		if (served != NULL && strcmp(served, psprintf("%s/%d", current, node->nodeId)) != 0 &&
			strlen(served) > strlen(suffix) &&
			strcmp(served + strlen(served) - strlen(suffix), suffix) == 0)
			old = pnstrdup(served, strchr(served, '/') - served);
		if (old != NULL && *previous != NULL && strcmp(old, *previous) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("node %d (%s:%d) serves coordinator %s, another node %s",
							node->nodeId, node->host, node->port, old, *previous),
					 errdetail("Every worker of an upgraded cluster serves the coordinator's "
							   "identity from before the upgrade.")));
		if (old != NULL)
		{
			const char *params[3] = {old, current, psprintf("%d", node->nodeId)};

			PQclear(ExecuteRemoteQueryParams(conn,
											 "SELECT shardext.worker_register($2, $3::int) "
											 "FROM (SELECT shardext.worker_unregister($1)) u",
											 3, params));
			*previous = old;
		}
		else if (served == NULL || strcmp(served, psprintf("%s/%d", current, node->nodeId)) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("node %d (%s:%d) does not hold the data of node %d of this "
							"coordinator database", node->nodeId, node->host, node->port,
							node->nodeId),
					 errdetail("Its database serves %s, not %s/%d.",
							   served ? served : "no coordinator", current, node->nodeId),
					 errhint("Upgrade every node with pg_upgrade, keeping its address.")));
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(conn);
		SetNodeIdentityCheck(identityCheck);
	}
	PG_END_TRY();
	if (old == NULL)
		return psprintf("serves coordinator %s already; identity recorded", current);
	return psprintf("serves coordinator %s now (was %s); identity recorded", current, old);
}
