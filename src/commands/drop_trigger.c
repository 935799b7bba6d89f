/*-------------------------------------------------------------------------
 *
 * drop_trigger.c
 *	  The sql_drop event trigger: when distributed or reference tables are
 *	  dropped (DROP TABLE, DROP SCHEMA ... CASCADE, DROP OWNED), their shard
 *	  tables are dropped on the workers in the same transaction, and their
 *	  catalog rows are removed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"

#include "shardext/cdc.h"
#include "shardext/deparser.h"
#include "shardext/metadata.h"
#include "shardext/remote_xact.h"

PG_FUNCTION_INFO_V1(shardext_drop_trigger);

typedef struct DroppedShard
{
	Oid			relid;
	char	   *schemaName;
	char	   *relname;
	int64		shardId;
	int32		nodeId;
} DroppedShard;

static List *DroppedShardPlacements(List **relids);

Datum
shardext_drop_trigger(PG_FUNCTION_ARGS)
{
	List	   *relids = NIL;
	List	   *placements;
	List	   *nodeIds = NIL;
	List	   *commands = NIL;
	ListCell   *cell;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shardext.drop_trigger() must be called as an event trigger")));

	if (!ShardextExtensionLoaded())
		PG_RETURN_NULL();

	placements = DroppedShardPlacements(&relids);
	foreach(cell, placements)
	{
		DroppedShard *dropped = lfirst(cell);
		char	   *drop = ShardDropCommand(dropped->schemaName, dropped->relname,
											dropped->shardId);
		int			position = -1;
		ListCell   *nodeCell;

		foreach(nodeCell, nodeIds)
		{
			if (lfirst_int(nodeCell) == dropped->nodeId)
				position = foreach_current_index(nodeCell);
		}
		if (position < 0)
		{
			nodeIds = lappend_int(nodeIds, dropped->nodeId);
			commands = lappend(commands, makeStringInfo());
			position = list_length(commands) - 1;
		}
		appendStringInfo(list_nth(commands, position), "%s;\n", drop);
	}

	CdcTablesDropped(relids);
	foreach(cell, relids)
		DeleteDistTable(lfirst_oid(cell));

	foreach(cell, commands)
		lfirst(cell) = ((StringInfo) lfirst(cell))->data;
	if (nodeIds != NIL)
		ExecuteOnNodesInTransaction(nodeIds, commands);

	PG_RETURN_NULL();
}

/*
 * DroppedShardPlacements lists the placements of the distributed tables the
 * current command dropped, and their OIDs in *relids.
 */
static List *
DroppedShardPlacements(List **relids)
{
	List	   *result = NIL;
	MemoryContext callerContext = CurrentMemoryContext;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	if (SPI_execute("SELECT d.logicalrelid::oid, o.schema_name, o.object_name, "
					"       s.shardid, p.nodeid "
					"FROM pg_catalog.pg_event_trigger_dropped_objects() o "
					"JOIN shardext.dist_table d ON d.logicalrelid::oid = o.objid "
					"LEFT JOIN shardext.shard s ON s.logicalrelid = d.logicalrelid "
					"LEFT JOIN shardext.placement p ON p.shardid = s.shardid "
					"WHERE o.classid = 'pg_catalog.pg_class'::regclass AND o.objsubid = 0 "
					"ORDER BY 1, 4, 5",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not list dropped distributed tables");

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Oid			relid = DatumGetObjectId(SPI_getbinval(tuple, desc, 1, &isnull));
		MemoryContext oldContext = MemoryContextSwitchTo(callerContext);

		if (!list_member_oid(*relids, relid))
			*relids = lappend_oid(*relids, relid);

		(void) SPI_getbinval(tuple, desc, 5, &isnull);
		if (!isnull)
		{
			DroppedShard *dropped = palloc0(sizeof(DroppedShard));

			dropped->relid = relid;
			dropped->schemaName = SPI_getvalue(tuple, desc, 2);
			dropped->relname = SPI_getvalue(tuple, desc, 3);
			dropped->shardId = DatumGetInt64(SPI_getbinval(tuple, desc, 4, &isnull));
			dropped->nodeId = DatumGetInt32(SPI_getbinval(tuple, desc, 5, &isnull));
			result = lappend(result, dropped);
		}
		MemoryContextSwitchTo(oldContext);
	}
	SPI_finish();
	return result;
}
