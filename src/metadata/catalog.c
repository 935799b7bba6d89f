/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  Writers of shardext's catalog tables.
 *
 * Writes go through SPI so that the tables' constraints and foreign keys are
 * checked; they are rare (DDL-like operations), so the cost does not matter.
 * Every writer invalidates the cache entries its change affects.
 *
 * The catalog belongs to the extension's owner and only it may write there:
 * a table owner who distributes a table is not a superuser, and must not
 * be able to change the catalog at will.  So every statement here runs with
 * the extension owner's rights (SetUserIdAndSecContext, as SECURITY DEFINER
 * functions do), under search_path = pg_catalog, pg_temp so that no object
 * of the caller's takes part; the callers check the caller's rights first
 * (ownership of the table, shardext_admin, ...).  Remote work never runs
 * here: it stays the calling user's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "shardext/metadata.h"

/*
 * BeginCatalogAccess switches to the extension owner's rights and a safe
 * search_path, for statements on the catalog tables; EndCatalogAccess
 * switches back.  An error in between switches back too (and the
 * transaction's abort would as well).  Pairs nest.
 */
void
BeginCatalogAccess(CatalogAccess *access)
{
	Oid			owner = ShardextExtensionOwner();

	GetUserIdAndSecContext(&access->savedUserId, &access->savedSecContext);
	SetUserIdAndSecContext(owner, access->savedSecContext |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	access->gucNestLevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
}

void
EndCatalogAccess(CatalogAccess *access)
{
	AtEOXact_GUC(true, access->gucNestLevel);
	SetUserIdAndSecContext(access->savedUserId, access->savedSecContext);
}

/* AbortCatalogAccess undoes BeginCatalogAccess on an error path */
static void
AbortCatalogAccess(CatalogAccess *access)
{
	AtEOXact_GUC(false, access->gucNestLevel);
	SetUserIdAndSecContext(access->savedUserId, access->savedSecContext);
}

/*
 * RunCatalogSPI runs one parameterised statement with the extension
 * owner's rights and returns SPI_processed.  When the statement returns a
 * row, *result gets its first column (copied into the caller's memory
 * context) if result is not NULL.
 */
uint64
RunCatalogSPI(const char *sql, int nargs, Oid *argtypes, Datum *values,
			  const char *nulls, int expectedResult, Datum *result, bool *resultIsNull)
{
	CatalogAccess access;
	uint64		processed = 0;

	BeginCatalogAccess(&access);
	PG_TRY();
	{
		int			rc;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");

		rc = SPI_execute_with_args(sql, nargs, argtypes, values, nulls, false, 0);
		if (rc != expectedResult)
			elog(ERROR, "catalog statement failed (%d): %s", rc, sql);

		processed = SPI_processed;
		if (result != NULL)
		{
			bool		isnull = true;

			*result = (Datum) 0;
			if (processed > 0)
			{
				Form_pg_attribute attr = TupleDescAttr(SPI_tuptable->tupdesc, 0);

				*result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
										1, &isnull);
				if (!isnull && !attr->attbyval)
					*result = SPI_datumTransfer(*result, false, attr->attlen);
			}
			if (resultIsNull)
				*resultIsNull = isnull;
		}

		SPI_finish();
	}
	PG_CATCH();
	{
		AbortCatalogAccess(&access);
		PG_RE_THROW();
	}
	PG_END_TRY();
	EndCatalogAccess(&access);
	return processed;
}

/*
 * InsertNode records a node (a read replica of primaryNodeId when that is
 * not 0) and returns its new node id.
 */
static int32
InsertNode(const char *host, int32 port, double weight, int32 primaryNodeId)
{
	Oid			argtypes[4] = {TEXTOID, INT4OID, FLOAT8OID, INT4OID};
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', primaryNodeId == 0 ? 'n' : ' '};
	Datum		nodeId;

	values[0] = CStringGetTextDatum(host);
	values[1] = Int32GetDatum(port);
	values[2] = Float8GetDatum(weight);
	values[3] = Int32GetDatum(primaryNodeId);
	RunCatalogSPI("INSERT INTO shardext.node (host, port, weight, primary_nodeid) "
				  "VALUES ($1, $2, $3, $4) RETURNING nodeid",
				  4, argtypes, values, nulls, SPI_OK_INSERT_RETURNING, &nodeId, NULL);
	InvalidateNodeCache();
	return DatumGetInt32(nodeId);
}

/*
 * InsertWorkerNode records a node and returns its new node id.
 */
int32
InsertWorkerNode(const char *host, int32 port, double weight)
{
	return InsertNode(host, port, weight, 0);
}

/* DeleteWorkerNode forgets a node; the caller checked it holds nothing */
void
DeleteWorkerNode(int32 nodeId)
{
	Oid			argtypes[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(nodeId)};

	RunCatalogSPI("DELETE FROM shardext.node WHERE nodeid = $1",
				  1, argtypes, values, NULL, SPI_OK_DELETE, NULL, NULL);
	InvalidateNodeCache();
}

/* UpdateWorkerNodeWeight changes the weight used for future placements */
void
UpdateWorkerNodeWeight(int32 nodeId, double weight)
{
	Oid			argtypes[2] = {INT4OID, FLOAT8OID};
	Datum		values[2] = {Int32GetDatum(nodeId), Float8GetDatum(weight)};

	RunCatalogSPI("UPDATE shardext.node SET weight = $2 WHERE nodeid = $1",
				  2, argtypes, values, NULL, SPI_OK_UPDATE, NULL, NULL);
	InvalidateNodeCache();
}

/*
 * FindColocationGroup returns the oldest colocation group with the given
 * shard count and distribution column type, whose tables still have that
 * many shards, or 0 when there is none.
 */
int32
FindColocationGroup(int shardCount, Oid distType, Oid distCollation)
{
	Oid			argtypes[3] = {INT4OID, OIDOID, OIDOID};
	Datum		values[3];
	Datum		result;
	bool		isnull;

	char		nulls[3] = {' ', ' ', ' '};

	values[0] = Int32GetDatum(shardCount);
	values[1] = ObjectIdGetDatum(distType);
	values[2] = ObjectIdGetDatum(distCollation);
	if (!OidIsValid(distType))
		nulls[1] = 'n';
	RunCatalogSPI("SELECT colocationid FROM shardext.colocation "
				  "WHERE shard_count = $1 AND dist_type::oid IS NOT DISTINCT FROM $2 "
				  "AND dist_collation = $3 ORDER BY colocationid LIMIT 1",
				  3, argtypes, values, nulls, SPI_OK_SELECT, &result, &isnull);
	return isnull ? 0 : DatumGetInt32(result);
}

/*
 * InsertColocationGroup creates a colocation group; distType is InvalidOid
 * for the group of reference tables.
 */
int32
InsertColocationGroup(int shardCount, Oid distType, Oid distCollation)
{
	Oid			argtypes[3] = {INT4OID, OIDOID, OIDOID};
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};
	Datum		result;

	values[0] = Int32GetDatum(shardCount);
	values[1] = ObjectIdGetDatum(distType);
	values[2] = ObjectIdGetDatum(distCollation);
	if (!OidIsValid(distType))
		nulls[1] = 'n';
	RunCatalogSPI("INSERT INTO shardext.colocation (shard_count, dist_type, dist_collation) "
				  "VALUES ($1, $2::oid::regtype, $3) RETURNING colocationid",
				  3, argtypes, values, nulls, SPI_OK_INSERT_RETURNING, &result, NULL);
	return DatumGetInt32(result);
}

/*
 * ColocationGroupShardCount returns the shard count of a group and its
 * distribution type and collation, or -1 when the group does not exist.
 */
int
ColocationGroupShardCount(int32 colocationId, Oid *distType, Oid *distCollation)
{
	int			result = -1;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	{
		Oid			argtypes[1] = {INT4OID};
		Datum		values[1] = {Int32GetDatum(colocationId)};

		if (SPI_execute_with_args("SELECT shard_count, dist_type::oid, dist_collation "
								  "FROM shardext.colocation WHERE colocationid = $1",
								  1, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read colocation group %d", colocationId);
		if (SPI_processed == 1)
		{
			HeapTuple	tuple = SPI_tuptable->vals[0];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			Datum		value;

			result = DatumGetInt32(SPI_getbinval(tuple, desc, 1, &isnull));
			value = SPI_getbinval(tuple, desc, 2, &isnull);
			*distType = isnull ? InvalidOid : DatumGetObjectId(value);
			*distCollation = DatumGetObjectId(SPI_getbinval(tuple, desc, 3, &isnull));
		}
	}
	SPI_finish();
	return result;
}

/* InsertDistTable records a distributed or reference table */
void
InsertDistTable(Oid relid, char method, AttrNumber distAttnum, int32 colocationId)
{
	Oid			argtypes[4] = {OIDOID, CHAROID, INT2OID, INT4OID};
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};

	values[0] = ObjectIdGetDatum(relid);
	values[1] = CharGetDatum(method);
	values[2] = Int16GetDatum(distAttnum);
	values[3] = Int32GetDatum(colocationId);
	if (distAttnum == InvalidAttrNumber)
		nulls[2] = 'n';
	RunCatalogSPI("INSERT INTO shardext.dist_table (logicalrelid, method, dist_attnum, colocationid) "
				  "VALUES ($1::oid::regclass, $2, $3, $4)",
				  4, argtypes, values, nulls, SPI_OK_INSERT, NULL, NULL);
	InvalidateDistTableCache(relid);
}

/*
 * DeleteDistTable removes a table, its shards and their placements from the
 * catalog (the foreign keys cascade), and an empty colocation group.
 */
void
DeleteDistTable(Oid relid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};

	RunCatalogSPI("WITH d AS (DELETE FROM shardext.dist_table WHERE logicalrelid = $1::oid::regclass "
				  "          RETURNING colocationid) "
				  "DELETE FROM shardext.colocation c USING d "
				  "WHERE c.colocationid = d.colocationid AND NOT EXISTS "
				  "  (SELECT 1 FROM shardext.dist_table t "
				  "   WHERE t.colocationid = c.colocationid AND t.logicalrelid <> $1::oid::regclass)",
				  1, argtypes, values, NULL, SPI_OK_DELETE, NULL, NULL);
	InvalidateDistTableCache(InvalidOid);
}

/* NextShardId draws a new shard id */
int64
NextShardId(void)
{
	Datum		result;

	RunCatalogSPI("SELECT nextval('shardext.shard_shardid_seq')",
				  0, NULL, NULL, NULL, SPI_OK_SELECT, &result, NULL);
	return DatumGetInt64(result);
}

/* InsertShard records a shard; reference shards have no range */
void
InsertShard(int64 shardId, Oid relid, bool hasRange, int32 hashMin, int32 hashMax)
{
	Oid			argtypes[4] = {INT8OID, OIDOID, INT4OID, INT4OID};
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};

	values[0] = Int64GetDatum(shardId);
	values[1] = ObjectIdGetDatum(relid);
	values[2] = Int32GetDatum(hashMin);
	values[3] = Int32GetDatum(hashMax);
	if (!hasRange)
		nulls[2] = nulls[3] = 'n';
	RunCatalogSPI("INSERT INTO shardext.shard (shardid, logicalrelid, hash_min, hash_max) "
				  "VALUES ($1, $2::oid::regclass, $3, $4)",
				  4, argtypes, values, nulls, SPI_OK_INSERT, NULL, NULL);
	InvalidateDistTableCache(relid);
}

/*
 * InvalidateShardTable invalidates the table that owns a shard.  Relcache
 * invalidation of the table also invalidates cached plans that use it.
 */
void
InvalidateShardTable(int64 shardId)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(shardId)};
	Datum		relid;
	bool		isnull;

	RunCatalogSPI("SELECT logicalrelid::oid FROM shardext.shard WHERE shardid = $1",
				  1, argtypes, values, NULL, SPI_OK_SELECT, &relid, &isnull);
	InvalidateDistTableCache(isnull ? InvalidOid : DatumGetObjectId(relid));
}

/* InsertPlacement records that a node holds a shard */
void
InsertPlacement(int64 shardId, int32 nodeId)
{
	Oid			argtypes[2] = {INT8OID, INT4OID};
	Datum		values[2] = {Int64GetDatum(shardId), Int32GetDatum(nodeId)};

	RunCatalogSPI("INSERT INTO shardext.placement (shardid, nodeid) VALUES ($1, $2)",
				  2, argtypes, values, NULL, SPI_OK_INSERT, NULL, NULL);
	InvalidateShardTable(shardId);
}

/* DeletePlacement forgets that a node holds a shard */
void
DeletePlacement(int64 shardId, int32 nodeId)
{
	Oid			argtypes[2] = {INT8OID, INT4OID};
	Datum		values[2] = {Int64GetDatum(shardId), Int32GetDatum(nodeId)};

	RunCatalogSPI("DELETE FROM shardext.placement WHERE shardid = $1 AND nodeid = $2",
				  2, argtypes, values, NULL, SPI_OK_DELETE, NULL, NULL);
	InvalidateShardTable(shardId);
}

/* NodePlacementCount returns how many shard placements a node holds */
int64
NodePlacementCount(int32 nodeId)
{
	Oid			argtypes[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(nodeId)};
	Datum		result;

	RunCatalogSPI("SELECT count(*) FROM shardext.placement WHERE nodeid = $1",
				  1, argtypes, values, NULL, SPI_OK_SELECT, &result, NULL);
	return DatumGetInt64(result);
}

/* DeleteShard removes a shard (a split replaced it); placements cascade */
void
DeleteShard(int64 shardId)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(shardId)};
	Datum		relid;
	bool		isnull;

	RunCatalogSPI("DELETE FROM shardext.shard WHERE shardid = $1 "
				  "RETURNING logicalrelid::oid",
				  1, argtypes, values, NULL, SPI_OK_DELETE_RETURNING, &relid, &isnull);
	InvalidateDistTableCache(isnull ? InvalidOid : DatumGetObjectId(relid));
}

/*
 * IncrementColocationShardCount: a split added shards (added to every table)
 * to a group
 */
void
IncrementColocationShardCount(int32 colocationId, int added)
{
	Oid			argtypes[2] = {INT4OID, INT4OID};
	Datum		values[2] = {Int32GetDatum(colocationId), Int32GetDatum(added)};

	RunCatalogSPI("UPDATE shardext.colocation SET shard_count = shard_count + $2 "
				  "WHERE colocationid = $1",
				  2, argtypes, values, NULL, SPI_OK_UPDATE, NULL, NULL);
	InvalidateDistTableCache(InvalidOid);
}

/*
 * ReadSplitPoints fills move->pieces from the split_points of its record
 * (the last hash value of each piece but the last), or from split_point
 * (two halves) when it has none, which is how records written before
 * split_points existed look; read inside ReadRunningMoveRecord's SPI
 * connection, after the split's other columns.  The pieces' outer bounds
 * are the shard's, filled in when the shard is switched.
 */
static void
ReadSplitPoints(MoveRecord *move, MemoryContext callerContext)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(move->moveId)};
	bool		isnull = true;
	Datum	   *points;
	int			count = 0;

	if (SPI_execute_with_args("SELECT split_points FROM shardext.move WHERE move_id = $1",
							  1, argtypes, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the split points of move " INT64_FORMAT, move->moveId);
	memset(&move->pieces, 0, sizeof(SplitPieces));
	if (SPI_processed == 1)
	{
		Datum		value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										  &isnull);

		MemoryContextSwitchTo(callerContext);
		if (!isnull)
			deconstruct_array(DatumGetArrayTypePCopy(value), INT4OID, 4, true, TYPALIGN_INT,
							  &points, NULL, &count);
	}
	if (isnull)
	{
		move->pieces.count = 2;
		move->pieces.hashMax[0] = move->splitPoint;
	}
	else
	{
		if (count < 1 || count >= MAX_SPLIT_PIECES)
			elog(ERROR, "move " INT64_FORMAT " has %d split points", move->moveId, count);
		move->pieces.count = count + 1;
		for (int i = 0; i < count; i++)
			move->pieces.hashMax[i] = DatumGetInt32(points[i]);
	}
	for (int i = 1; i < move->pieces.count; i++)
		move->pieces.hashMin[i] = move->pieces.hashMax[i - 1] + 1;
}

/*
 * ReadRunningMoveRecord reads and locks (FOR UPDATE) the record of a
 * running move or split into *move, allocated in the caller's memory
 * context; it errors out when the move is not running any more.
 */
void
ReadRunningMoveRecord(int64 moveId, MoveRecord *move)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(moveId)};
	MemoryContext callerContext = CurrentMemoryContext;
	CatalogAccess access;

	memset(move, 0, sizeof(MoveRecord));
	move->moveId = moveId;
	BeginCatalogAccess(&access);
	PG_TRY();
	{
		HeapTuple	tuple;
		TupleDesc	desc;
		bool		isnull;
		int			newCount = 0;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		if (SPI_execute_with_args("SELECT operation = 'split', shard_ids, source_node_id, "
								  "target_node_id, split_point, new_shard_ids "
								  "FROM shardext.move WHERE move_id = $1 AND status = 'running' "
								  "FOR UPDATE", 1, argtypes, args, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read move " INT64_FORMAT, moveId);
		if (SPI_processed != 1)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("move " INT64_FORMAT " is not running", moveId)));
		tuple = SPI_tuptable->vals[0];
		desc = SPI_tuptable->tupdesc;

		MemoryContextSwitchTo(callerContext);
		move->split = DatumGetBool(SPI_getbinval(tuple, desc, 1, &isnull));
		deconstruct_array(DatumGetArrayTypePCopy(SPI_getbinval(tuple, desc, 2, &isnull)),
						  INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &move->shardIds, NULL,
						  &move->shardCount);
		move->sourceNodeId = DatumGetInt32(SPI_getbinval(tuple, desc, 3, &isnull));
		move->targetNodeId = DatumGetInt32(SPI_getbinval(tuple, desc, 4, &isnull));
		if (move->split)
		{
			move->splitPoint = DatumGetInt32(SPI_getbinval(tuple, desc, 5, &isnull));
			deconstruct_array(DatumGetArrayTypePCopy(SPI_getbinval(tuple, desc, 6, &isnull)),
							  INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &move->newShardIds,
							  NULL, &newCount);
			ReadSplitPoints(move, callerContext);
			if (newCount != move->pieces.count * move->shardCount)
				elog(ERROR, "move " INT64_FORMAT " has %d new shards for %d shards", moveId,
					 newCount, move->shardCount);
		}
		SPI_finish();
	}
	PG_CATCH();
	{
		AbortCatalogAccess(&access);
		PG_RE_THROW();
	}
	PG_END_TRY();
	EndCatalogAccess(&access);
}

/*
 * RecordDeferredShardDrop records that a moved shard's old table on a node
 * is to be dropped once no transaction older than the switch runs.
 */
void
RecordDeferredShardDrop(int64 moveId, int32 nodeId, const char *shardName, int64 shardId)
{
	Oid			argtypes[4] = {INT8OID, INT4OID, TEXTOID, INT8OID};
	Datum		values[4];

	values[0] = Int64GetDatum(moveId);
	values[1] = Int32GetDatum(nodeId);
	values[2] = CStringGetTextDatum(shardName);
	values[3] = Int64GetDatum(shardId);
	RunCatalogSPI("INSERT INTO shardext.cleanup_record (move_id, node_id, "
				  "object_type, object_name, shard_id, policy) "
				  "VALUES ($1, $2, 'table', $3, $4, 'deferred')",
				  4, argtypes, values, NULL, SPI_OK_INSERT, NULL, NULL);
}

/*
 * MarkMoveSwitched records that a move's placements were switched: what it
 * created on the target stays, and the move is cleaning up.
 */
void
MarkMoveSwitched(int64 moveId)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(moveId)};

	RunCatalogSPI("DELETE FROM shardext.cleanup_record WHERE move_id = $1 "
				  "AND policy = 'on_failure'",
				  1, argtypes, values, NULL, SPI_OK_DELETE, NULL, NULL);
	RunCatalogSPI("UPDATE shardext.move SET phase = 'cleaning up', "
				  "phase_started_at = clock_timestamp() WHERE move_id = $1",
				  1, argtypes, values, NULL, SPI_OK_UPDATE, NULL, NULL);
}

/*
 * RegisterLocalIdentity records, on a worker, the coordinator database this
 * database serves, refusing a second coordinator.
 */
void
RegisterLocalIdentity(const char *coordinatorId, int32 nodeId)
{
	Oid			argtypes[2] = {TEXTOID, INT4OID};
	Datum		values[2];
	Datum		current;
	bool		isnull;

	RunCatalogSPI("SELECT coordinator_id FROM shardext.local_identity FOR UPDATE",
				  0, NULL, NULL, NULL, SPI_OK_SELECT, &current, &isnull);
	if (!isnull)
	{
		char	   *currentId = TextDatumGetCString(current);

		if (strcmp(currentId, coordinatorId) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("this database already serves another coordinator"),
					 errdetail("It serves coordinator %s, not %s.", currentId, coordinatorId),
					 errhint("Remove it from that coordinator with shardext_remove_node() "
							 "first.")));
	}

	values[0] = CStringGetTextDatum(coordinatorId);
	values[1] = Int32GetDatum(nodeId);
	RunCatalogSPI("INSERT INTO shardext.local_identity (coordinator_id, node_id) "
				  "VALUES ($1, $2) ON CONFLICT (only_row) DO UPDATE "
				  "SET coordinator_id = EXCLUDED.coordinator_id, "
				  "node_id = EXCLUDED.node_id",
				  2, argtypes, values, NULL, SPI_OK_INSERT, NULL, NULL);
}

/* UnregisterLocalIdentity forgets, on a worker, the coordinator it served */
void
UnregisterLocalIdentity(const char *coordinatorId)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(coordinatorId)};

	RunCatalogSPI("DELETE FROM shardext.local_identity WHERE coordinator_id = $1",
				  1, argtypes, values, NULL, SPI_OK_DELETE, NULL, NULL);
}

/*
 * InsertGlobalIndex records a global index; its index table is already a
 * distributed table.
 */
void
InsertGlobalIndex(Oid indexRelid, const char *name, Oid baseRelid, int columnCount,
				  AttrNumber *attnums, bool isUnique)
{
	Oid			argtypes[5] = {OIDOID, TEXTOID, OIDOID, INT2ARRAYOID, BOOLOID};
	Datum		values[5];
	Datum	   *elements = palloc(sizeof(Datum) * columnCount);

	for (int i = 0; i < columnCount; i++)
		elements[i] = Int16GetDatum(attnums[i]);
	values[0] = ObjectIdGetDatum(indexRelid);
	values[1] = CStringGetTextDatum(name);
	values[2] = ObjectIdGetDatum(baseRelid);
	values[3] = PointerGetDatum(construct_array(elements, columnCount, INT2OID,
												sizeof(int16), true, TYPALIGN_SHORT));
	values[4] = BoolGetDatum(isUnique);
	RunCatalogSPI("INSERT INTO shardext.global_index "
				  "(indexrelid, index_name, baserelid, columns, is_unique) "
				  "VALUES ($1::oid::regclass, $2, $3::oid::regclass, $4, $5)",
				  5, argtypes, values, NULL, SPI_OK_INSERT, NULL, NULL);
	InvalidateDistTableCache(baseRelid);
	InvalidateDistTableCache(indexRelid);
}

/*
 * InsertReplicaNode records a read replica of a node and returns its node
 * id (from the same sequence as worker node ids).
 */
int32
InsertReplicaNode(const char *host, int32 port, int32 primaryNodeId)
{
	return InsertNode(host, port, 1.0, primaryNodeId);
}

/* SetNodeActive marks a node (in practice a replica) in or out of use */
void
SetNodeActive(int32 nodeId, bool active)
{
	Oid			argtypes[2] = {INT4OID, BOOLOID};
	Datum		values[2] = {Int32GetDatum(nodeId), BoolGetDatum(active)};

	RunCatalogSPI("UPDATE shardext.node SET active = $2 WHERE nodeid = $1",
				  2, argtypes, values, NULL, SPI_OK_UPDATE, NULL, NULL);
	InvalidateNodeCache();
}

/* UpdateNodeAddress points a node at another server */
void
UpdateNodeAddress(int32 nodeId, const char *host, int32 port)
{
	Oid			argtypes[3] = {INT4OID, TEXTOID, INT4OID};
	Datum		values[3];

	values[0] = Int32GetDatum(nodeId);
	values[1] = CStringGetTextDatum(host);
	values[2] = Int32GetDatum(port);
	RunCatalogSPI("UPDATE shardext.node SET host = $2, port = $3 WHERE nodeid = $1",
				  3, argtypes, values, NULL, SPI_OK_UPDATE, NULL, NULL);
	InvalidateNodeCache();
}

/*
 * DeactivateReplicasOf takes every replica of a node out of use (after its
 * primary changed, they may follow the wrong server).
 */
void
DeactivateReplicasOf(int32 primaryNodeId)
{
	Oid			argtypes[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(primaryNodeId)};

	RunCatalogSPI("UPDATE shardext.node SET active = false WHERE primary_nodeid = $1",
				  1, argtypes, values, NULL, SPI_OK_UPDATE, NULL, NULL);
	InvalidateNodeCache();
}

/*
 * SetNodeIdentity records the system identifier and timeline of the server
 * a node runs on (fencing.c); 0s forget them.
 */
void
SetNodeIdentity(int32 nodeId, uint64 systemId, uint32 timeline)
{
	Oid			argtypes[3] = {INT4OID, INT8OID, INT4OID};
	Datum		values[3];
	char		nulls[3] = {' ', systemId == 0 ? 'n' : ' ', timeline == 0 ? 'n' : ' '};

	values[0] = Int32GetDatum(nodeId);
	values[1] = Int64GetDatum((int64) systemId);
	values[2] = Int32GetDatum((int32) timeline);
	RunCatalogSPI("UPDATE shardext.node SET system_identifier = $2, timeline = $3 "
				  "WHERE nodeid = $1",
				  3, argtypes, values, nulls, SPI_OK_UPDATE, NULL, NULL);
	InvalidateNodeCache();
}

/*
 * SetNodeNeedsRebuild marks the record of an old primary that a failover
 * replaced (or clears the mark once it is a standby again).
 */
void
SetNodeNeedsRebuild(int32 nodeId, bool needsRebuild)
{
	Oid			argtypes[2] = {INT4OID, BOOLOID};
	Datum		values[2] = {Int32GetDatum(nodeId), BoolGetDatum(needsRebuild)};

	RunCatalogSPI("UPDATE shardext.node SET needs_rebuild = $2 WHERE nodeid = $1",
				  2, argtypes, values, NULL, SPI_OK_UPDATE, NULL, NULL);
	InvalidateNodeCache();
}

/*
 * SwapNodeAddresses exchanges the host and port of two node rows, so that
 * a promoted replica takes over the node id (and with it the placements)
 * of its primary.  (host, port) is unique and checked row by row, hence the
 * detour over a name no server has.
 */
void
SwapNodeAddresses(int32 nodeId, int32 otherNodeId)
{
	WorkerNode *node = GetWorkerNode(nodeId);
	WorkerNode *other = GetWorkerNode(otherNodeId);
	char	   *host = pstrdup(node->host);
	int32		port = node->port;
	char	   *otherHost = pstrdup(other->host);
	int32		otherPort = other->port;

	UpdateNodeAddress(otherNodeId, psprintf("%s (swapping)", otherHost), otherPort);
	UpdateNodeAddress(nodeId, otherHost, otherPort);
	UpdateNodeAddress(otherNodeId, host, port);
}
