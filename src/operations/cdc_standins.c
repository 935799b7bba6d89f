/*-------------------------------------------------------------------------
 *
 * cdc_standins.c
 *	  The coordinator keeps the nodes' publications of change data capture
 *	  in step: the stand-in of each published table on every node, when a
 *	  publication is made, a table is distributed, changed or dropped, and
 *	  a node is added or removed.
 *
 * A stand-in is an empty table with the distributed table's schema, name,
 * columns and replica identity, owned by the table's owner, in the node's
 * publications (see cdc_worker.c and cdc_decoder.c).  Whenever a published
 * table changes, its stand-ins are made anew ("synced"): dropped, created
 * from the table as it is now, and added to every publication that
 * contains the table, in the transaction that changed the table, so
 * decoding sees the new stand-in exactly from the change on.
 *
 * Reference tables are streamed by one node: the active primary node with
 * the lowest id (the emitter).  Nodes get higher ids as they are added, so
 * it changes only when that node is removed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/rel.h"

#include "shardext/cdc.h"
#include "shardext/deparser.h"
#include "shardext/metadata.h"
#include "shardext/operations.h"
#include "shardext/remote_xact.h"

static char *StandinIdentityCommands(Relation rel, const char *standinName);
static char *IndexColumnList(Oid indexOid);

/* CdcNodeIds lists the active primary nodes, which hold stand-ins */
List *
CdcNodeIds(void)
{
	List	   *nodeIds = NIL;
	ListCell   *cell;

	foreach(cell, WorkerNodeList(true))
		nodeIds = lappend_int(nodeIds, ((WorkerNode *) lfirst(cell))->nodeId);
	list_sort(nodeIds, list_int_cmp);
	return nodeIds;
}

/* CdcReferenceEmitter returns the node that streams reference tables (0: none) */
int32
CdcReferenceEmitter(void)
{
	List	   *nodeIds = CdcNodeIds();

	return nodeIds == NIL ? 0 : linitial_int(nodeIds);
}

/*
 * CdcTablePublications returns the publications that contain a table: those
 * made for all tables and those that name it (none for global index
 * tables, which are shardext's own).
 */
List *
CdcTablePublications(Oid relid)
{
	if (IsGlobalIndexTable(relid) || !CdcPublicationsExist())
		return NIL;
	return CdcCatalogNames("SELECT pubname::text FROM shardext.cdc_publication WHERE all_tables "
						   "UNION SELECT pubname::text FROM shardext.cdc_publication_table "
						   "WHERE relid = $1 ORDER BY 1", relid);
}

/*
 * CdcCatalogNames returns the first column (text) of a query of shardext's
 * catalog, with the OID arg as $1 when valid.
 */
List *
CdcCatalogNames(const char *query, Oid arg)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(arg)};
	List	   *names = NIL;
	MemoryContext callerContext = CurrentMemoryContext;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(query, OidIsValid(arg) ? 1 : 0, argtypes, values, NULL, false, 0)
		!= SPI_OK_SELECT)
		elog(ERROR, "could not read shardext's catalog: %s", query);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		MemoryContext oldContext = MemoryContextSwitchTo(callerContext);

		names = lappend(names, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		MemoryContextSwitchTo(oldContext);
	}
	SPI_finish();
	return names;
}

/*
 * CdcStandinSyncCommand returns the commands that make the stand-in of a
 * table on a node anew and add it to the publications (a list of names);
 * without publications, they only drop it.
 */
char *
CdcStandinSyncCommand(Oid relid, List *publications, bool emits)
{
	StringInfoData buf;
	Relation	rel;
	char	   *standinName;
	int			nestLevel;
	bool		first = true;
	ListCell   *cell;

	initStringInfo(&buf);
	appendStringInfo(&buf, "SELECT shardext.cdc_worker_unpublish(%u);\n", relid);
	if (publications == NIL)
		return buf.data;

	rel = relation_open(relid, AccessShareLock);
	standinName = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
											 RelationGetRelationName(rel));
	nestLevel = BeginSafeDeparse();
	appendStringInfo(&buf, "%s;\nCREATE TABLE %s (", WorkerCreateSchemaCommand(relid),
					 standinName);
	for (int i = 0; i < RelationGetDescr(rel)->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(rel), i);

		if (attr->attisdropped)
			continue;
		appendStringInfoString(&buf, first ? "" : ", ");
		AppendColumnDefinition(&buf, rel, attr->attnum);
		first = false;
	}
	appendStringInfo(&buf, ");\nALTER TABLE %s OWNER TO %s;\n%s", standinName,
					 quote_identifier(GetUserNameFromId(rel->rd_rel->relowner, false)),
					 StandinIdentityCommands(rel, standinName));
	EndSafeDeparse(nestLevel);

	appendStringInfo(&buf, "SELECT shardext.cdc_worker_publish(%s::regclass, %u, '%c', %s, "
					 "ARRAY[", quote_literal_cstr(standinName), relid,
					 IsReferenceTable(relid) ? DISTRIBUTE_BY_REFERENCE : DISTRIBUTE_BY_HASH,
					 emits ? "true" : "false");
	foreach(cell, publications)
		appendStringInfo(&buf, "%s%s", foreach_current_index(cell) > 0 ? ", " : "",
						 quote_literal_cstr(lfirst(cell)));
	appendStringInfoString(&buf, "]::name[]);\n");
	relation_close(rel, AccessShareLock);
	return buf.data;
}

/*
 * StandinIdentityCommands gives a stand-in the table's replica identity
 * (its primary key, its identity index as a unique constraint, FULL or
 * NOTHING), which tells consumers the key columns of updates and deletes.
 */
static char *
StandinIdentityCommands(Relation rel, const char *standinName)
{
	char		identity = rel->rd_rel->relreplident;
	Oid			indexOid;

	if (identity == REPLICA_IDENTITY_FULL)
		return psprintf("ALTER TABLE %s REPLICA IDENTITY FULL;\n", standinName);
	if (identity == REPLICA_IDENTITY_NOTHING)
		return psprintf("ALTER TABLE %s REPLICA IDENTITY NOTHING;\n", standinName);
	indexOid = RelationGetReplicaIndex(rel);
	if (!OidIsValid(indexOid))
		return "";
	if (identity == REPLICA_IDENTITY_DEFAULT)
		return psprintf("ALTER TABLE %s ADD CONSTRAINT %s PRIMARY KEY (%s);\n", standinName,
						quote_identifier(get_rel_name(indexOid)), IndexColumnList(indexOid));
	return psprintf("ALTER TABLE %s ADD CONSTRAINT %s UNIQUE (%s);\n"
					"ALTER TABLE %s REPLICA IDENTITY USING INDEX %s;\n",
					standinName, quote_identifier(get_rel_name(indexOid)),
					IndexColumnList(indexOid), standinName,
					quote_identifier(get_rel_name(indexOid)));
}

/* IndexColumnList returns the quoted column names of a (plain) index */
static char *
IndexColumnList(Oid indexOid)
{
	Relation	index = index_open(indexOid, AccessShareLock);
	Oid			tableOid = index->rd_index->indrelid;
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < index->rd_index->indnkeyatts; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(get_attname(tableOid,
													  index->rd_index->indkey.values[i],
													  false)));
	index_close(index, AccessShareLock);
	return buf.data;
}

/*
 * SyncTablesOnNodes makes the stand-ins of the tables anew on the nodes,
 * in the local transaction.
 */
void
CdcSyncTablesOnNodes(List *relids, List *nodeIds)
{
	int32		emitter = CdcReferenceEmitter();
	List	   *commands = NIL;
	ListCell   *nodeCell;

	if (relids == NIL || nodeIds == NIL)
		return;
	foreach(nodeCell, nodeIds)
	{
		StringInfoData buf;
		ListCell   *cell;

		initStringInfo(&buf);
		foreach(cell, relids)
		{
			Oid			relid = lfirst_oid(cell);

			appendStringInfoString(&buf,
								   CdcStandinSyncCommand(relid, CdcTablePublications(relid),
														 !IsReferenceTable(relid) ||
														 lfirst_int(nodeCell) == emitter));
		}
		commands = lappend(commands, buf.data);
	}
	ExecuteOnNodesInTransaction(nodeIds, commands);
}

/*
 * CdcTableDistributed: a table that was just distributed (its shards exist,
 * its rows are not copied yet) joins the publications made for all tables.
 */
void
CdcTableDistributed(Oid relid)
{
	if (CdcTablePublications(relid) == NIL)
		return;
	CdcSyncTablesOnNodes(list_make1_oid(relid), CdcNodeIds());
}

/*
 * CdcTablesAltered: the schema of the tables changed (columns, name,
 * schema, owner, keys): their stand-ins follow.
 */
void
CdcTablesAltered(List *relids)
{
	List	   *published = NIL;
	ListCell   *cell;

	foreach(cell, relids)
	{
		if (CdcTablePublications(lfirst_oid(cell)) != NIL)
			published = lappend_oid(published, lfirst_oid(cell));
	}
	CdcSyncTablesOnNodes(published, CdcNodeIds());
}

/* CdcTablesDropped: the tables were dropped or undistributed: so are their stand-ins */
void
CdcTablesDropped(List *relids)
{
	List	   *commands = NIL;
	List	   *nodeIds;
	StringInfoData buf;
	ListCell   *cell;

	if (relids == NIL || !CdcPublicationsExist())
		return;
	initStringInfo(&buf);
	foreach(cell, relids)
		appendStringInfo(&buf, "SELECT shardext.cdc_worker_unpublish(%u);\n", lfirst_oid(cell));
	nodeIds = CdcNodeIds();
	foreach(cell, nodeIds)
		commands = lappend(commands, buf.data);
	ExecuteOnNodesInTransaction(nodeIds, commands);
}
