/*-------------------------------------------------------------------------
 *
 * cdc_publication.c
 *	  Change data capture on the coordinator: shardext_create_publication(),
 *	  shardext_drop_publication(), the view shardext.cdc_slots, and what
 *	  nodes that are added or removed need.
 *
 * A publication of change data capture exists on every active primary
 * node, with the stand-ins of its tables (cdc_standins.c); consumers
 * subscribe to it on every node.  shardext_create_publication() checks
 * every node before it creates anything (wal_level, the wrapper plugins
 * first on dynamic_library_path, the name, free replication slots, tables
 * in the way of stand-ins), creates the optional slots over connections of
 * their own (creating a logical slot waits for the transactions running on
 * the node, ours included, so it cannot come after our writes), then the
 * publications and stand-ins in the local transaction.  Slots of a
 * failed call are dropped again; like CREATE SUBSCRIPTION ... WITH
 * (create_slot), a call that creates slots cannot run in a transaction
 * block.
 *
 * A node added later gets the slots while it is being registered (before
 * any shard or write reaches it), and the publications and stand-ins in
 * the transaction of shardext_add_node(), which tells with a NOTICE that
 * consumers must subscribe to it too.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

#include "shardext/array_literal.h"
#include "shardext/cdc.h"
#include "shardext/connection.h"
#include "shardext/metadata.h"
#include "shardext/operations.h"
#include "shardext/privileges.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"
#include "shardext/subtransaction.h"

PG_FUNCTION_INFO_V1(shardext_create_publication);
PG_FUNCTION_INFO_V1(shardext_drop_publication);
PG_FUNCTION_INFO_V1(shardext_cdc_slot_status);

/* what SetUpPublication creates */
typedef struct PublicationSetup
{
	const char *name;
	bool		allTables;
	bool		createSlot;
	List	   *relids;
} PublicationSetup;

static bool PublicationRecorded(const char *name, bool *createSlot);
static List *AllPublishableTables(void);
static List *NamedTables(ArrayType *tables);
static void WarnWithoutIdentity(List *relids);
static void CheckNode(NodeConnection *conn, WorkerNode *node, const char *name,
					  int slotsNeeded, List *slotNames, List *relids);
static bool RunSlotCommand(WorkerNode *node, const char *sql, const char *name,
						   char **failure);
static List *CreateSlots(List *nodes, const char *name);
static void DropSlots(List *nodes, const char *name);
static void SetUpPublication(void *arg);
static List *SlotPublications(void);
static List *PublishedTables(void);

/*
 * shardext_create_publication(name text, tables regclass[] DEFAULT NULL,
 * create_slot boolean DEFAULT false)
 */
Datum
shardext_create_publication(PG_FUNCTION_ARGS)
{
	PublicationSetup setup;
	List	   *nodes;
	List	   *slotNodes = NIL;
	ErrorData  *edata;
	ListCell   *cell;

	EnsureAdminAndShardext("shardext_create_publication");
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the publication name must not be NULL")));
	setup.name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (setup.name[0] == '\0' || strlen(setup.name) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid publication name \"%s\"", setup.name),
				 errdetail("A publication name has 1 to %d bytes.", NAMEDATALEN - 1)));
	setup.allTables = PG_ARGISNULL(1);
	setup.createSlot = !PG_ARGISNULL(2) && PG_GETARG_BOOL(2);
	if (setup.createSlot)
		PreventInTransactionBlock(true, "shardext_create_publication() with create_slot");

	/* one publication change at a time; no node comes or goes meanwhile */
	LockRelationOid(CdcCatalogRelid("cdc_publication", false), ShareRowExclusiveLock);
	LockRelationOid(ShardextCatalogRelid("node"), ShareLock);
	if (PublicationRecorded(setup.name, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("publication \"%s\" already exists", setup.name)));
	setup.relids = setup.allTables ? AllPublishableTables() :
		NamedTables(PG_GETARG_ARRAYTYPE_P(1));
	EnsureShardextReady();
	nodes = WorkerNodeList(true);

	foreach(cell, nodes)
	{
		WorkerNode *node = lfirst(cell);
		NodeConnection *conn = OpenDedicatedConnection(node->host, node->port, false, true);

		CheckNode(conn, node, setup.name, setup.createSlot ? 1 : 0,
				  setup.createSlot ? list_make1((char *) setup.name) : NIL, setup.relids);
		CloseDedicatedConnection(conn);
	}
	WarnWithoutIdentity(setup.relids);

	if (setup.createSlot)
		slotNodes = CreateSlots(nodes, setup.name);
	edata = RunInSubtransaction(SetUpPublication, &setup);
	if (edata != NULL)
	{
		DropSlots(slotNodes, setup.name);
		ReThrowError(edata);
	}
	PG_RETURN_VOID();
}

/*
 * SetUpPublication records the publication and creates it, with the
 * stand-ins of its tables, on every node in the local transaction.
 */
static void
SetUpPublication(void *arg)
{
	PublicationSetup *setup = arg;
	Oid			argtypes[3] = {NAMEOID, BOOLOID, BOOLOID};
	Datum		values[3];
	List	   *nodeIds = CdcNodeIds();
	List	   *commands = NIL;
	char	   *command;
	ListCell   *cell;

	values[0] = DirectFunctionCall1(namein, CStringGetDatum(setup->name));
	values[1] = BoolGetDatum(setup->allTables);
	values[2] = BoolGetDatum(setup->createSlot);
	RunCatalogSPI("INSERT INTO shardext.cdc_publication VALUES ($1, $2, $3)",
				  3, argtypes, values, NULL, SPI_OK_INSERT, NULL, NULL);
	foreach(cell, setup->allTables ? NIL : setup->relids)
	{
		Oid			tableArgtypes[2] = {NAMEOID, OIDOID};
		Datum		tableValues[2] = {values[0], ObjectIdGetDatum(lfirst_oid(cell))};

		RunCatalogSPI("INSERT INTO shardext.cdc_publication_table VALUES ($1, $2)",
					  2, tableArgtypes, tableValues, NULL, SPI_OK_INSERT, NULL, NULL);
	}
	CommandCounterIncrement();

	command = psprintf("SELECT shardext.cdc_worker_add_publication(%s, %s, %s)",
					   quote_literal_cstr(setup->name), setup->allTables ? "true" : "false",
					   setup->createSlot ? "true" : "false");
	foreach(cell, nodeIds)
		commands = lappend(commands, command);
	ExecuteOnNodesInTransaction(nodeIds, commands);
	CdcSyncTablesOnNodes(setup->relids, nodeIds);
}

/* PublicationRecorded: is there a publication of that name (and does it have slots)? */
static bool
PublicationRecorded(const char *name, bool *createSlot)
{
	Oid			argtypes[1] = {NAMEOID};
	Datum		values[1];
	Datum		result;
	bool		isnull;

	values[0] = DirectFunctionCall1(namein, CStringGetDatum(name));
	if (RunCatalogSPI("SELECT create_slot FROM shardext.cdc_publication WHERE pubname = $1",
					  1, argtypes, values, NULL, SPI_OK_SELECT, &result, &isnull) == 0)
		return false;
	if (createSlot != NULL)
		*createSlot = DatumGetBool(result);
	return true;
}

/*
 * AllPublishableTables lists the distributed and reference tables a
 * publication for all tables contains: not global index tables, not
 * unlogged ones (nothing of them reaches the WAL), as PostgreSQL's FOR ALL
 * TABLES.
 */
static List *
AllPublishableTables(void)
{
	List	   *relids = NIL;
	ListCell   *cell;

	foreach(cell, DistributedTableList())
	{
		Oid			relid = lfirst_oid(cell);

		if (!IsGlobalIndexTable(relid) &&
			get_rel_persistence(relid) == RELPERSISTENCE_PERMANENT)
			relids = lappend_oid(relids, relid);
	}
	return relids;
}

/* NamedTables checks the tables a publication is made for */
static List *
NamedTables(ArrayType *tables)
{
	Datum	   *values;
	bool	   *nulls;
	int			count;
	List	   *relids = NIL;

	deconstruct_array(tables, REGCLASSOID, sizeof(Oid), true, TYPALIGN_INT,
					  &values, &nulls, &count);
	if (count == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a publication needs at least one table"),
				 errhint("Pass NULL (the default) to publish every distributed and "
						 "reference table.")));
	for (int i = 0; i < count; i++)
	{
		Oid			relid = nulls[i] ? InvalidOid : DatumGetObjectId(values[i]);

		if (!OidIsValid(relid))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("the tables of a publication must not be NULL")));
		if (!IsDistributedTable(relid) || IsGlobalIndexTable(relid))
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("\"%s\" is not a distributed or reference table",
							get_rel_name(relid) ? get_rel_name(relid) : "?"),
					 errhint("Distribute it with create_distributed_table() or "
							 "create_reference_table() first.")));
		if (get_rel_persistence(relid) != RELPERSISTENCE_PERMANENT)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot publish unlogged table \"%s\"", get_rel_name(relid)),
					 errdetail("The changes of unlogged tables are not written to the WAL.")));
		relids = list_append_unique_oid(relids, relid);
	}
	return relids;
}

/*
 * WarnWithoutIdentity warns of tables whose updates and deletes consumers
 * cannot apply: no primary key and no other replica identity.
 */
static void
WarnWithoutIdentity(List *relids)
{
	ListCell   *cell;

	foreach(cell, relids)
	{
		Relation	rel = relation_open(lfirst_oid(cell), AccessShareLock);

		if (rel->rd_rel->relreplident != REPLICA_IDENTITY_FULL &&
			!OidIsValid(RelationGetReplicaIndex(rel)))
			ereport(WARNING,
					(errmsg("table \"%s\" has no replica identity",
							RelationGetRelationName(rel)),
					 errdetail("Its updates and deletes reach consumers without the key "
							   "of the changed row."),
					 errhint("Give the table a primary key before publishing it.")));
		relation_close(rel, AccessShareLock);
	}
}

/*
 * CheckNode checks, before anything is created, that a node can take the
 * publication: wal_level, the wrapper plugins first on dynamic_library_path,
 * shardext 1.2, the publication name and slot names unused, enough free
 * replication slots, and no table in the way of a stand-in.
 */
static void
CheckNode(NodeConnection *conn, WorkerNode *node, const char *name, int slotsNeeded,
		  List *slotNames, List *relids)
{
	const char *params[2];
	PGresult   *result;
	char	   *value;
	List	   *standins = NIL;
	ListCell   *cell;

	params[0] = name;
	result = ExecuteRemoteQueryParams(conn,
									  "SELECT pg_catalog.current_setting('wal_level'), "
									  "pg_catalog.split_part(pg_catalog.current_setting('dynamic_library_path'), ':', 1), "
									  "pg_catalog.to_regclass('shardext.cdc_table') IS NOT NULL, "
									  "EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = $1), "
									  "pg_catalog.current_setting('max_replication_slots')::int - "
									  "(SELECT pg_catalog.count(*) FROM pg_catalog.pg_replication_slots)",
									  1, params);
	if (PQresultStatus(result) != PGRES_TUPLES_OK || PQntuples(result) != 1)
		ReportRemoteError(conn, result, ERROR, "checking the node for change data capture");
	if (strcmp(PQgetvalue(result, 0, 0), "logical") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wal_level on node %s:%d is \"%s\"; change data capture needs \"logical\"",
						node->host, node->port, PQgetvalue(result, 0, 0)),
				 errhint("Set wal_level = logical on the node and restart it.")));
	value = PQgetvalue(result, 0, 1);
	if (strlen(value) < strlen(CDC_PLUGIN_DIRECTORY) ||
		strcmp(value + strlen(value) - strlen(CDC_PLUGIN_DIRECTORY), CDC_PLUGIN_DIRECTORY) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dynamic_library_path on node %s:%d does not begin with shardext's "
						"output plugins", node->host, node->port),
				 errdetail("Consumers would get the shards' own changes instead of the "
						   "tables'."),
				 errhint("Set dynamic_library_path = '$libdir/" CDC_PLUGIN_DIRECTORY ":$libdir' "
						 "on the node and reload its configuration.")));
	if (strcmp(PQgetvalue(result, 0, 2), "t") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shardext on node %s:%d is older than 1.2", node->host, node->port),
				 errhint("Run ALTER EXTENSION shardext UPDATE on the node.")));
	if (strcmp(PQgetvalue(result, 0, 3), "t") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("publication \"%s\" already exists on node %s:%d", name,
						node->host, node->port)));
	if (atoi(PQgetvalue(result, 0, 4)) < slotsNeeded)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("node %s:%d has %s free replication slots, %d needed", node->host,
						node->port, PQgetvalue(result, 0, 4), slotsNeeded),
				 errhint("Raise max_replication_slots on the node and restart it.")));
	PQclear(result);

	foreach(cell, slotNames)
	{
		params[0] = lfirst(cell);
		if (ExecuteRemoteScalar(conn, "SELECT 1 FROM pg_catalog.pg_replication_slots "
								"WHERE slot_name = $1", 1, params) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("replication slot \"%s\" already exists on node %s:%d",
							(char *) lfirst(cell), node->host, node->port),
					 errhint("Drop it there (pg_drop_replication_slot) or choose another "
							 "publication name.")));
	}

	/* a table of a stand-in's name that is no stand-in */
	foreach(cell, relids)
		standins = lappend(standins,
						   quote_qualified_identifier(get_namespace_name(get_rel_namespace(lfirst_oid(cell))),
													  get_rel_name(lfirst_oid(cell))));
	params[0] = TextArrayLiteral(standins);
	value = ExecuteRemoteScalar(conn,
								"SELECT pg_catalog.string_agg(n, ', ') FROM pg_catalog.unnest($1::text[]) n "
								"WHERE pg_catalog.to_regclass(n) IS NOT NULL AND NOT EXISTS "
								"(SELECT 1 FROM shardext.cdc_table t "
								" WHERE t.standin = pg_catalog.to_regclass(n)::oid)",
								1, params);
	if (value != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("node %s:%d has a table of the name of a published table: %s",
						node->host, node->port, value),
				 errdetail("Each node gets an empty table of the published table's name, "
						   "which consumers see."),
				 errhint("Rename or drop that table on the node.")));
}

/*
 * RunSlotCommand runs a statement about the slot name on a node over a
 * connection of its own and tells whether it succeeded (*failure: why not).
 */
static bool
RunSlotCommand(WorkerNode *node, const char *sql, const char *name, char **failure)
{
	NodeConnection *conn = OpenDedicatedConnection(node->host, node->port, false, false);
	const char *params[1] = {name};
	PGresult   *result = NULL;

	*failure = NULL;
	if (conn != NULL)
	{
		result = TryRemoteQuery(conn, sql, 1, params, 0, failure);
		CloseDedicatedConnection(conn);
	}
	PQclear(result);
	return result != NULL;
}

/*
 * CreateSlots creates a logical replication slot (plugin pgoutput) of the
 * publication's name on every node and returns the nodes; when one fails,
 * the slots made so far are dropped before the error is raised.
 */
static List *
CreateSlots(List *nodes, const char *name)
{
	List	   *created = NIL;
	ListCell   *cell;

	foreach(cell, nodes)
	{
		WorkerNode *node = lfirst(cell);
		char	   *failure;

		if (!RunSlotCommand(node, "SELECT pg_catalog.pg_create_logical_replication_slot($1, 'pgoutput')",
							name, &failure))
		{
			DropSlots(created, name);
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not create replication slot \"%s\" on node %s:%d",
							name, node->host, node->port),
					 failure ? errdetail_internal("%s", failure) : 0));
		}
		created = lappend(created, node);
	}
	return created;
}

/* DropSlots drops the slots of a publication on the nodes, warning of failures */
static void
DropSlots(List *nodes, const char *name)
{
	ListCell   *cell;

	foreach(cell, nodes)
	{
		WorkerNode *node = lfirst(cell);
		char	   *failure;

		if (!RunSlotCommand(node, "SELECT pg_catalog.pg_drop_replication_slot(slot_name) "
							"FROM pg_catalog.pg_replication_slots WHERE slot_name = $1",
							name, &failure))
			ereport(WARNING,
					(errmsg("could not drop replication slot \"%s\" on node %s:%d",
							name, node->host, node->port),
					 errhint("Drop it there with pg_drop_replication_slot().")));
	}
}

/*
 * shardext_drop_publication(name text): drops the publication, its slots
 * and the stand-ins no other publication needs, on every node.
 */
Datum
shardext_drop_publication(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	bool		createSlot = false;
	Oid			argtypes[1] = {NAMEOID};
	Datum		values[1];
	List	   *nodeIds;
	List	   *commands = NIL;
	char	   *command;

	EnsureAdminAndShardext("shardext_drop_publication");
	LockRelationOid(CdcCatalogRelid("cdc_publication", false), ShareRowExclusiveLock);
	LockRelationOid(ShardextCatalogRelid("node"), ShareLock);
	if (!PublicationRecorded(name, &createSlot))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("publication \"%s\" does not exist", name),
				 errhint("shardext_drop_publication() drops publications made by "
						 "shardext_create_publication().")));

	values[0] = DirectFunctionCall1(namein, CStringGetDatum(name));
	RunCatalogSPI("DELETE FROM shardext.cdc_publication WHERE pubname = $1",
				  1, argtypes, values, NULL, SPI_OK_DELETE, NULL, NULL);

	/* an active slot makes the node's transaction fail: nothing is dropped */
	command = psprintf("SELECT shardext.cdc_worker_drop_publication(%s);%s",
					   quote_literal_cstr(name),
					   createSlot ?
					   psprintf("SELECT pg_catalog.pg_drop_replication_slot(slot_name) "
								"FROM pg_catalog.pg_replication_slots WHERE slot_name = %s "
								"AND database = pg_catalog.current_database()",
								quote_literal_cstr(name)) : "");
	nodeIds = CdcNodeIds();
	for (int i = 0; i < list_length(nodeIds); i++)
		commands = lappend(commands, command);
	ExecuteOnNodesInTransaction(nodeIds, commands);
	PG_RETURN_VOID();
}

/* SlotPublications lists the names of the publications that have slots */
static List *
SlotPublications(void)
{
	return CdcCatalogNames("SELECT pubname::text FROM shardext.cdc_publication WHERE create_slot "
						   "ORDER BY 1", InvalidOid);
}

/*
 * CdcPrepareNewNode, while a node is being registered (conn: its
 * connection of its own), checks that it can take the publications and
 * creates their slots there, before any shard or write reaches it.
 */
void
CdcPrepareNewNode(NodeConnection *conn, const char *host, int32 port)
{
	List	   *slots;
	WorkerNode	node;
	ListCell   *cell;

	if (!CdcPublicationsExist())
		return;
	slots = SlotPublications();
	memset(&node, 0, sizeof(node));
	node.host = (char *) host;
	node.port = port;
	CheckNode(conn, &node, "", list_length(slots), slots, NIL);
	foreach(cell, slots)
	{
		const char *params[1] = {lfirst(cell)};

		PQclear(ExecuteRemoteQueryParams(conn,
										 "SELECT pg_catalog.pg_create_logical_replication_slot($1, 'pgoutput')",
										 1, params));
	}
}

/* PublishedTables lists the tables some publication contains */
static List *
PublishedTables(void)
{
	List	   *relids = NIL;
	ListCell   *cell;

	foreach(cell, DistributedTableList())
	{
		if (CdcTablePublications(lfirst_oid(cell)) != NIL)
			relids = lappend_oid(relids, lfirst_oid(cell));
	}
	return relids;
}

/*
 * CdcSetUpNewNode gives a newly registered node the publications and the
 * stand-ins of their tables, in the local transaction, and tells that
 * consumers must subscribe to it.
 */
void
CdcSetUpNewNode(int32 nodeId)
{
	WorkerNode *node = GetWorkerNode(nodeId);
	StringInfoData command;
	StringInfoData names;

	if (!CdcPublicationsExist())
		return;
	initStringInfo(&command);
	initStringInfo(&names);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute("SELECT pubname::text, all_tables, create_slot "
					"FROM shardext.cdc_publication ORDER BY 1", false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read shardext.cdc_publication");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *pubname = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		char	   *allTables = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		char	   *createSlot = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3);

		appendStringInfo(&command,
						 "SELECT shardext.cdc_worker_add_publication(%s, %s, %s);\n",
						 quote_literal_cstr(pubname),
						 strcmp(allTables, "t") == 0 ? "true" : "false",
						 strcmp(createSlot, "t") == 0 ? "true" : "false");
		appendStringInfo(&names, "%s\"%s\"", i > 0 ? ", " : "", pubname);
	}
	SPI_finish();

	ExecuteOnNodesInTransaction(list_make1_int(nodeId), list_make1(command.data));
	CdcSyncTablesOnNodes(PublishedTables(), list_make1_int(nodeId));
	ereport(NOTICE,
			(errmsg("node %s:%d publishes the changes of publications %s",
					node->host, node->port, names.data),
			 errdetail("Change data capture streams every node's changes from that node."),
			 errhint("Consumers of these publications must subscribe to the new node too "
					 "(shardext.cdc_slots lists the slots of every node).")));
}

/*
 * CdcNodeRemoved, before a node is removed: when it streams the changes
 * of reference tables, the next node takes over, while writes to
 * reference tables wait.
 */
void
CdcNodeRemoved(int32 nodeId)
{
	List	   *nodeIds;
	int32		successor;
	ListCell   *cell;

	if (!CdcPublicationsExist() || CdcReferenceEmitter() != nodeId)
		return;
	nodeIds = list_delete_int(CdcNodeIds(), nodeId);
	if (nodeIds == NIL)
		return;
	successor = linitial_int(nodeIds);
	foreach(cell, DistributedTableList())
	{
		if (IsReferenceTable(lfirst_oid(cell)))
			LockRelationOid(lfirst_oid(cell), ExclusiveLock);
	}
	ExecuteOnNodesInTransaction(list_make1_int(successor),
								list_make1("SELECT shardext.cdc_worker_set_emitter(true)"));
	ereport(NOTICE,
			(errmsg("node %d streams the changes of reference tables from now on", successor)));
}

/*
 * shardext.cdc_slot_status(): every active primary node's logical slots
 * (but those of shard moves and of subscribers' initial copies), one row
 * without slot for a node that has none or cannot be reached.
 */
Datum
shardext_cdc_slot_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ListCell   *cell;

	EnsureAdminAndShardext("shardext.cdc_slot_status");
	InitMaterializedSRF(fcinfo, 0);
	foreach(cell, WorkerNodeList(true))
	{
		WorkerNode *node = lfirst(cell);
		NodeConnection *conn = OpenDedicatedConnection(node->host, node->port, false, false);
		PGresult   *result = NULL;
		char	   *failure = NULL;
		int			rows = 0;

		if (conn != NULL)
		{
			result = TryRemoteQuery(conn,
									"SELECT slot_name, plugin, active, confirmed_flush_lsn, "
									"pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), "
									"  confirmed_flush_lsn)::bigint "
									"FROM pg_catalog.pg_replication_slots "
									"WHERE slot_type = 'logical' "
									"AND database = pg_catalog.current_database() "
									"AND slot_name NOT LIKE 'shardext\\_move\\_%' "
									"AND slot_name OPERATOR(pg_catalog.!~) '^pg_[0-9]+_sync_' "
									"ORDER BY slot_name",
									0, NULL, 0, &failure);
			CloseDedicatedConnection(conn);
		}
		if (result == NULL)
			ereport(WARNING,
					(errmsg("could not read the replication slots of node %s:%d",
							node->host, node->port)));
		else
			rows = PQntuples(result);
		for (int i = 0; i < Max(rows, 1); i++)
		{
			Datum		values[8];
			bool		nulls[8] = {false, false, false, true, true, true, true, true};

			values[0] = Int32GetDatum(node->nodeId);
			values[1] = CStringGetTextDatum(node->host);
			values[2] = Int32GetDatum(node->port);
			for (int column = 0; column < 5 && i < rows; column++)
			{
				char	   *value = PQgetvalue(result, i, column);

				nulls[3 + column] = PQgetisnull(result, i, column);
				if (nulls[3 + column])
					continue;
				if (column <= 1)
					values[3 + column] = DirectFunctionCall1(namein, CStringGetDatum(value));
				else if (column == 2)
					values[3 + column] = BoolGetDatum(value[0] == 't');
				else if (column == 3)
					values[3 + column] = DirectFunctionCall1(pg_lsn_in, CStringGetDatum(value));
				else
					values[3 + column] = Int64GetDatum(pg_strtoint64(value));
			}
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		PQclear(result);
		CHECK_FOR_INTERRUPTS();
	}
	return (Datum) 0;
}

/*
 * CdcBeginInternalWrites marks the writes of a node connection as internal
 * data movement, which change data capture leaves out, when the node
 * publishes changes: the session takes a replication origin of the given
 * name (CdcEndInternalWrites drops it).  Returns whether it did.
 */
bool
CdcBeginInternalWrites(NodeConnection *conn, const char *originName)
{
	const char *params[1] = {originName};
	char	   *publishes;

	publishes = ExecuteRemoteScalar(conn, "SELECT pg_catalog.to_regclass('shardext.cdc_publication') "
									"IS NOT NULL", 0, NULL);
	if (publishes == NULL || strcmp(publishes, "t") != 0 ||
		ExecuteRemoteScalar(conn, "SELECT 1 FROM shardext.cdc_publication LIMIT 1",
							0, NULL) == NULL)
		return false;
	PQclear(ExecuteRemoteQueryParams(conn, "SELECT pg_catalog.pg_replication_origin_create($1)",
									 1, params));
	PQclear(ExecuteRemoteQueryParams(conn,
									 "SELECT pg_catalog.pg_replication_origin_session_setup($1)",
									 1, params));
	return true;
}

/* CdcEndInternalWrites ends what CdcBeginInternalWrites began */
void
CdcEndInternalWrites(NodeConnection *conn, const char *originName)
{
	const char *params[1] = {originName};

	PQclear(ExecuteRemoteQueryParams(conn, "SELECT pg_catalog.pg_replication_origin_session_reset()",
									 0, NULL));
	PQclear(ExecuteRemoteQueryParams(conn, "SELECT pg_catalog.pg_replication_origin_drop($1)",
									 1, params));
}
