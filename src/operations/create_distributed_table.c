/*-------------------------------------------------------------------------
 *
 * create_distributed_table.c
 *	  create_distributed_table() and create_reference_table(): turn a local
 *	  table into shards on the workers.
 *
 * The whole operation is one transaction: the catalog rows are written
 * locally, the shard tables are created and filled inside remote
 * transactions that commit with the local one (two-phase when several nodes
 * take part), and the local table is truncated, so it stays as an empty
 * shell that queries are planned against.  Any failure rolls everything
 * back on every node.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/catalog.h"
#include "catalog/heap.h"
#include "catalog/namespace.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_inherits.h"
#include "commands/tablecmds.h"
#include "executor/executor.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/typcache.h"

#include "shardext/cdc.h"
#include "shardext/privileges.h"
#include "shardext/shardext.h"
#include "shardext/connection.h"
#include "shardext/ddl.h"
#include "shardext/deparser.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/operations.h"
#include "shardext/pg_compat.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"
#include "shardext/shard_copy.h"

PG_FUNCTION_INFO_V1(create_distributed_table);
PG_FUNCTION_INFO_V1(create_reference_table);

static void EnsureTableCanBeDistributed(Relation rel);
static bool TableHasUserTriggers(Relation rel);
static AttrNumber ResolveDistributionColumn(Oid relid, const char *columnName,
											Oid *typeOut, Oid *collationOut);
static void EnsureUniquenessIncludesColumn(Relation rel, AttrNumber distAttnum);
static int32 ResolveColocation(Oid relid, const char *colocateWith, int shardCount,
							   bool shardCountGiven, Oid distType, Oid distCollation,
							   List **layoutsOut);
static List *LayoutOfColocationGroup(int32 colocationId);
static void DistributeTable(Oid relid, char method, AttrNumber distAttnum,
							int32 colocationId, List *layouts);
static void MoveLocalRowsToShards(Relation rel);

/*
 * create_distributed_table(table_name regclass, distribution_column text,
 *	 distribution_type text DEFAULT 'hash', colocate_with text DEFAULT 'default',
 *	 shard_count int DEFAULT NULL)
 */
Datum
create_distributed_table(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *columnName;
	char	   *distributionType;
	char	   *colocateWith;
	int			shardCount = ShardextShardCount;
	bool		shardCountGiven = !PG_ARGISNULL(4);
	Relation	rel;
	AttrNumber	distAttnum;
	Oid			distType;
	Oid			distCollation;
	int32		colocationId;
	List	   *layouts = NIL;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table_name and distribution_column must not be NULL")));

	relid = PG_GETARG_OID(0);
	columnName = text_to_cstring(PG_GETARG_TEXT_PP(1));
	distributionType = PG_ARGISNULL(2) ? "hash" : text_to_cstring(PG_GETARG_TEXT_PP(2));
	colocateWith = PG_ARGISNULL(3) ? "default" : text_to_cstring(PG_GETARG_TEXT_PP(3));
	if (shardCountGiven)
		shardCount = PG_GETARG_INT32(4);

	EnsureShardextReady();

	if (pg_strcasecmp(distributionType, "hash") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("distribution type \"%s\" is not supported", distributionType),
				 errhint("Use 'hash', or create_reference_table() for a table "
						 "copied to every node.")));
	if (shardCount < 1 || shardCount > 64000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("shard_count must be between 1 and 64000, not %d", shardCount)));

	rel = table_open(relid, AccessExclusiveLock);
	EnsureTableCanBeDistributed(rel);
	distAttnum = ResolveDistributionColumn(relid, columnName, &distType, &distCollation);
	EnsureUniquenessIncludesColumn(rel, distAttnum);
	table_close(rel, NoLock);

	colocationId = ResolveColocation(relid, colocateWith, shardCount, shardCountGiven,
									 distType, distCollation, &layouts);
	DistributeTable(relid, DISTRIBUTE_BY_HASH, distAttnum, colocationId, layouts);

	PG_RETURN_VOID();
}

/*
 * create_reference_table(table_name regclass): one shard, a placement on
 * every active node.
 */
Datum
create_reference_table(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Relation	rel;
	int32		colocationId;
	ShardLayout *layout = palloc0(sizeof(ShardLayout));
	ListCell   *cell;

	EnsureShardextReady();

	rel = table_open(relid, AccessExclusiveLock);
	EnsureTableCanBeDistributed(rel);
	table_close(rel, NoLock);

	colocationId = FindColocationGroup(1, InvalidOid, InvalidOid);
	if (colocationId == 0)
		colocationId = InsertColocationGroup(1, InvalidOid, InvalidOid);

	foreach(cell, WorkerNodeList(true))
		layout->nodeIds = lappend_int(layout->nodeIds, ((WorkerNode *) lfirst(cell))->nodeId);
	DistributeTable(relid, DISTRIBUTE_BY_REFERENCE, InvalidAttrNumber, colocationId,
					list_make1(layout));

	PG_RETURN_VOID();
}

/*
 * EnsureShardextReady checks that the extension is installed here and that
 * at least one active node is registered.
 */
void
EnsureShardextReady(void)
{
	EnsureShardextInstalled();
	if (WorkerNodeList(true) == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no worker nodes are registered"),
				 errhint("Add worker nodes with shardext_add_node(host, port).")));
}

/*
 * EnsureTableCanBeDistributed rejects what shardext cannot shard: other
 * relation kinds, temporary tables, inheritance, foreign keys that point at
 * the table, tables that are already distributed, and tables the user does
 * not own.  (Its own foreign keys are checked once its distribution is
 * known: see DistributeTable.)
 */
static void
EnsureTableCanBeDistributed(Relation rel)
{
	Oid			relid = RelationGetRelid(rel);
	const char *relname = RelationGetRelationName(rel);
	char		relkind = rel->rd_rel->relkind;

	EnsureTableOwnerWithSchemaAccess(relid);

	if (get_rel_namespace(relid) == get_namespace_oid(SHARDEXT_SCHEMA_NAME, false) ||
		IsCatalogRelation(rel))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot distribute catalog table \"%s\"", relname)));

	if (IsDistributedTable(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is already distributed", relname),
				 errhint("Use undistribute_table() first to change how it is distributed.")));

	if (relkind == RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot distribute partitioned table \"%s\"", relname),
				 errhint("Distribute a regular table; shards already split the data by hash.")));
	if (relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("cannot distribute \"%s\" because it is not a regular table", relname),
				 errhint("Only tables (not views, foreign tables, sequences or "
						 "materialized views) can be distributed.")));
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot distribute temporary table \"%s\"", relname),
				 errhint("Temporary tables exist only in this session; use a regular table.")));
	if (rel->rd_rel->relrowsecurity || rel->rd_rel->relforcerowsecurity)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot distribute table \"%s\" because it has row level security enabled",
						relname),
				 errdetail("Row security policies would not apply to the shards the queries read."),
				 errhint("Disable row level security (ALTER TABLE ... DISABLE ROW LEVEL SECURITY) first.")));
	if (TableHasUserTriggers(rel))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot distribute table \"%s\" because it has triggers", relname),
				 errdetail("Triggers on the coordinator's table would not fire for rows stored "
						   "in the shards."),
				 errhint("Drop the triggers first.")));
	if (has_superclass(relid) || has_subclass(relid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot distribute table \"%s\" because it uses inheritance", relname),
				 errhint("Remove the inheritance (ALTER TABLE ... NO INHERIT) first.")));
	if (heap_truncate_find_FKs(list_make1_oid(relid)) != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot distribute table \"%s\" because foreign keys reference it",
						relname),
				 errhint("Drop the foreign keys, distribute the tables, and add them again.")));
}

/* does the table have triggers other than those behind foreign keys? */
static bool
TableHasUserTriggers(Relation rel)
{
	TriggerDesc *triggers = rel->trigdesc;

	for (int i = 0; triggers != NULL && i < triggers->numtriggers; i++)
	{
		if (!triggers->triggers[i].tgisinternal)
			return true;
	}
	return false;
}

/*
 * ResolveDistributionColumn finds the column by its exact name and checks
 * that its type can be hashed.
 */
static AttrNumber
ResolveDistributionColumn(Oid relid, const char *columnName, Oid *typeOut,
						  Oid *collationOut)
{
	AttrNumber	attnum = get_attnum(relid, columnName);
	int32		typmod;
	TypeCacheEntry *typeEntry;

	if (attnum == InvalidAttrNumber || attnum < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						columnName, get_rel_name(relid)),
				 errhint("The distribution column name is case sensitive and not quoted.")));

	get_atttypetypmodcoll(relid, attnum, typeOut, &typmod, collationOut);
	typeEntry = lookup_type_cache(*typeOut, TYPECACHE_HASH_PROC);
	if (!OidIsValid(typeEntry->hash_proc))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("cannot distribute by column \"%s\" of type %s",
						columnName, format_type_be(*typeOut)),
				 errdetail("The type has no default hash operator class."),
				 errhint("Choose a column whose type can be hashed, such as an integer, "
						 "text or uuid column.")));
	return attnum;
}

/*
 * EnsureUniquenessIncludesColumn: a shard can only enforce uniqueness among
 * its own rows, so every unique or exclusion constraint and unique index
 * must include the distribution column.
 */
static void
EnsureUniquenessIncludesColumn(Relation rel, AttrNumber distAttnum)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *cell;

	foreach(cell, indexes)
	{
		Relation	index = index_open(lfirst_oid(cell), AccessShareLock);
		bool		unique = index->rd_index->indisunique ||
			index->rd_index->indisexclusion;
		bool		found = false;

		for (int i = 0; i < index->rd_index->indnkeyatts; i++)
		{
			if (index->rd_index->indkey.values[i] == distAttnum)
				found = true;
		}
		if (unique && !found)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot distribute table \"%s\": unique index \"%s\" does not "
							"include distribution column \"%s\"",
							RelationGetRelationName(rel),
							RelationGetRelationName(index),
							get_attname(RelationGetRelid(rel), distAttnum, false)),
					 errdetail("Each shard enforces uniqueness only among its own rows."),
					 errhint("Add the distribution column to the primary key or unique "
							 "constraint, or distribute by a column it contains.")));
		index_close(index, AccessShareLock);
	}
}

/*
 * ResolveColocation picks the colocation group ('default': an existing
 * group with the same shard count and type, or a new one; 'none': a new one;
 * otherwise the group of the named table) and returns the shard layout the
 * new table must follow.
 */
static int32
ResolveColocation(Oid relid, const char *colocateWith, int shardCount,
				  bool shardCountGiven, Oid distType, Oid distCollation,
				  List **layoutsOut)
{
	int32		colocationId = 0;

	if (pg_strcasecmp(colocateWith, "default") == 0)
		colocationId = FindColocationGroup(shardCount, distType, distCollation);
	else if (pg_strcasecmp(colocateWith, "none") != 0)
	{
		List	   *names = StringToQualifiedNameList(colocateWith);
		Oid			otherRelid = RangeVarGetRelid(makeRangeVarFromNameList(names),
												  AccessShareLock, false);
		DistTableCacheEntry *other = GetDistTableCacheEntry(otherRelid);

		if (other == NULL || other->method != DISTRIBUTE_BY_HASH)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cannot colocate with \"%s\" because it is not a hash-distributed table",
							colocateWith)));
		if (other->distType != distType || other->distCollation != distCollation)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("cannot colocate \"%s\" with \"%s\": distribution column types differ",
							get_rel_name(relid), colocateWith),
					 errdetail("\"%s\" is distributed by a column of type %s, the new column has type %s.",
							   colocateWith, format_type_be(other->distType),
							   format_type_be(distType)),
					 errhint("Co-located tables need distribution columns of the same type "
							 "and collation.")));
		if (shardCountGiven && other->shardCount != shardCount)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cannot colocate \"%s\" with \"%s\": shard counts differ (%d and %d)",
							get_rel_name(relid), colocateWith, shardCount, other->shardCount),
					 errhint("Leave shard_count out to use the shard count of \"%s\".",
							 colocateWith)));
		colocationId = other->colocationId;
	}

	if (colocationId != 0)
	{
		*layoutsOut = LayoutOfColocationGroup(colocationId);
		if (*layoutsOut != NIL)
			return colocationId;
		/* a group whose tables are all gone: start afresh in it */
	}
	else
		colocationId = InsertColocationGroup(shardCount, distType, distCollation);

	*layoutsOut = WeightedShardLayout(shardCount, WorkerNodeList(true));
	return colocationId;
}

/* the ranges and nodes of the shards of an existing colocation group */
static List *
LayoutOfColocationGroup(int32 colocationId)
{
	List	   *tables = ColocatedTableList(colocationId);
	DistTableCacheEntry *entry;
	List	   *layouts = NIL;

	if (tables == NIL)
		return NIL;
	entry = GetDistTableCacheEntry(linitial_oid(tables));
	for (int i = 0; i < entry->shardCount; i++)
	{
		ShardLayout *layout = palloc0(sizeof(ShardLayout));
		ShardInterval *shard = &entry->shards[i];

		layout->hashMin = shard->hashMin;
		layout->hashMax = shard->hashMax;
		for (int j = 0; j < shard->placementCount; j++)
			layout->nodeIds = lappend_int(layout->nodeIds, shard->placementNodeIds[j]);
		layouts = lappend(layouts, layout);
	}
	return layouts;
}

/*
 * WeightedShardLayout splits the int4 hash space into shardCount equal
 * ranges and assigns them to nodes in proportion to node weight, with
 * smooth weighted round robin: each node's share is within one shard of
 * its exact proportion, and consecutive shards alternate between nodes.
 */
List *
WeightedShardLayout(int shardCount, List *nodes)
{
	int			nodeCount = list_length(nodes);
	double	   *current = palloc0(nodeCount * sizeof(double));
	double		totalWeight = 0;
	uint64		width = (UINT64CONST(1) << 32) / shardCount;
	List	   *layouts = NIL;
	ListCell   *cell;

	foreach(cell, nodes)
		totalWeight += ((WorkerNode *) lfirst(cell))->weight;

	for (int i = 0; i < shardCount; i++)
	{
		ShardLayout *layout = palloc0(sizeof(ShardLayout));
		int			best = 0;

		layout->hashMin = (int32) ((int64) PG_INT32_MIN + (int64) (width * i));
		layout->hashMax = (i == shardCount - 1) ? PG_INT32_MAX :
			(int32) ((int64) layout->hashMin + (int64) width - 1);

		foreach(cell, nodes)
		{
			int			n = foreach_current_index(cell);

			current[n] += ((WorkerNode *) lfirst(cell))->weight;
			if (current[n] > current[best])
				best = n;
		}
		current[best] -= totalWeight;
		layout->nodeIds = list_make1_int(((WorkerNode *) list_nth(nodes, best))->nodeId);
		layouts = lappend(layouts, layout);
	}
	return layouts;
}

/*
 * DistributeTable records the table and its shards in the catalog, creates
 * the shard tables and moves the local rows into them.
 */
static void
DistributeTable(Oid relid, char method, AttrNumber distAttnum, int32 colocationId,
				List *layouts)
{
	List	   *shardIds = NIL;
	ListCell   *cell;
	Relation	rel;

	InsertDistTable(relid, method, distAttnum, colocationId);
	foreach(cell, layouts)
	{
		ShardLayout *layout = lfirst(cell);
		int64		shardId = NextShardId();
		ListCell   *nodeCell;

		InsertShard(shardId, relid, method == DISTRIBUTE_BY_HASH,
					layout->hashMin, layout->hashMax);
		foreach(nodeCell, layout->nodeIds)
			InsertPlacement(shardId, lfirst_int(nodeCell));
		shardIds = lappend(shardIds, (void *) palloc(sizeof(int64)));
		*(int64 *) llast(shardIds) = shardId;
	}
	CommandCounterIncrement();

	/* its foreign keys must point at reference tables or co-located shards */
	CheckForeignKeysOfNewTable(relid);

	CreateShardTablesOnNodes(relid, shardIds, layouts);

	/* before its rows arrive, so that change data capture streams them */
	CdcTableDistributed(relid);

	rel = table_open(relid, AccessExclusiveLock);
	MoveLocalRowsToShards(rel);
	table_close(rel, NoLock);
}

/*
 * CreateShardTablesOnNodes creates the shard tables, one multi-statement
 * command per node, all nodes in parallel, inside the local transaction.
 * shardIds holds int64 pointers matching layouts.
 */
void
CreateShardTablesOnNodes(Oid relid, List *shardIds, List *layouts)
{
	List	   *nodeIds = NIL;
	List	   *buffers = NIL;
	List	   *commands = NIL;
	ListCell   *idCell;
	ListCell   *layoutCell;
	char	   *createSchema = WorkerCreateSchemaCommand(relid);

	forboth(idCell, shardIds, layoutCell, layouts)
	{
		int64		shardId = *(int64 *) lfirst(idCell);
		ShardLayout *layout = lfirst(layoutCell);
		char	   *create = ShardCreateCommand(relid, shardId);
		ListCell   *nodeCell;

		foreach(nodeCell, layout->nodeIds)
		{
			int32		nodeId = lfirst_int(nodeCell);
			StringInfo	buffer = NULL;
			ListCell   *existing;

			foreach(existing, nodeIds)
			{
				if (lfirst_int(existing) == nodeId)
					buffer = list_nth(buffers, foreach_current_index(existing));
			}
			if (buffer == NULL)
			{
				buffer = makeStringInfo();
				appendStringInfo(buffer, "%s;\n", createSchema);
				nodeIds = lappend_int(nodeIds, nodeId);
				buffers = lappend(buffers, buffer);
			}
			appendStringInfoString(buffer, create);
		}
	}

	foreach(idCell, buffers)
		commands = lappend(commands, ((StringInfo) lfirst(idCell))->data);
	ExecuteOnNodesInTransaction(nodeIds, commands);
}

/*
 * MoveLocalRowsToShards copies the rows of the (still local) table into its
 * shards and truncates the local table.  The DDL of the shards ran on each
 * node's first connection, so the copy must use that connection too.
 */
static void
MoveLocalRowsToShards(Relation rel)
{
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	TableScanDesc scan = BeginTableScan(rel, snapshot, 0, NULL);
	ShardCopyState *copyState = NULL;
	uint64		rowCount = 0;

	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		if (copyState == NULL)
			copyState = BeginShardCopy(RelationGetRelid(rel), 1, NULL, NULL);
		ShardCopySendSlot(copyState, slot, 0);
		CHECK_FOR_INTERRUPTS();
	}
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	ExecDropSingleTupleTableSlot(slot);

	if (copyState == NULL)
		return;

	rowCount = EndShardCopy(copyState);
	TruncateRelations(list_make1(rel), list_make1_oid(RelationGetRelid(rel)),
					  NIL, DROP_RESTRICT, false);
	ereport(NOTICE,
			(errmsg("moved " UINT64_FORMAT " rows of \"%s\" into its shards",
					rowCount, RelationGetRelationName(rel))));
}
