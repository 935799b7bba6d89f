/*-------------------------------------------------------------------------
 *
 * utility_hook.c
 *	  The ProcessUtility hook: COPY on distributed tables goes to the
 *	  shards (copy_commands.c), DDL is applied to the shards as well
 *	  (ddl_commands.c), DROP EXTENSION is refused while distributed tables
 *	  exist (the shards would be orphaned and the data lost with them), and
 *	  commands that need a database without other connections stop its
 *	  maintenance daemon first.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/lsyscache.h"

#include "shardext/cdc.h"
#include "shardext/shardext.h"
#include "shardext/ddl.h"
#include "shardext/guc.h"
#include "shardext/maintenance.h"
#include "shardext/metadata.h"
#include "shardext/shard_copy.h"
#include "shardext/utility_hook.h"

ProcessUtility_hook_type prev_ProcessUtility_hook = NULL;

static void CheckDropExtension(DropStmt *stmt);
static void StopDaemonForDatabaseCommand(Node *parsetree);

void
ShardextProcessUtility(PlannedStmt *pstmt, const char *queryString,
					   bool readOnlyTree, ProcessUtilityContext context,
					   ParamListInfo params, QueryEnvironment *queryEnv,
					   DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	char	   *copyQuery;

	StopDaemonForDatabaseCommand(parsetree);

	if (ShardextExtensionLoaded())
	{
		if (IsA(parsetree, DropStmt))
			CheckDropExtension((DropStmt *) parsetree);

		/* a part of a distributed transaction names it for change data capture */
		if (IsA(parsetree, TransactionStmt))
			CdcNotePreparedTransaction((TransactionStmt *) parsetree);

		/* a subscriber's initial copy of a published table reads its shards */
		if (IsA(parsetree, CopyStmt) &&
			(copyQuery = CdcStandinCopyQuery((CopyStmt *) parsetree)) != NULL)
		{
			pstmt = CdcCopyStatement(copyQuery);
			queryString = copyQuery;
			parsetree = pstmt->utilityStmt;
		}

		if (IsA(parsetree, CopyStmt) &&
			ShardextCopy((CopyStmt *) parsetree, pstmt, queryString, qc))
			return;

		if (ShardextEnableDDLPropagation &&
			ShardextPreprocessUtility(pstmt, queryString, readOnlyTree, context,
									  params, queryEnv, dest, qc))
			return;
	}

	if (prev_ProcessUtility_hook)
		prev_ProcessUtility_hook(pstmt, queryString, readOnlyTree, context,
								 params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);

	if (IsA(parsetree, CreateExtensionStmt) &&
		strcmp(((CreateExtensionStmt *) parsetree)->extname, SHARDEXT_EXTENSION_NAME) == 0)
		EnsureMaintenanceDaemonAtCommit();
}

/*
 * StopDaemonForDatabaseCommand stops the maintenance daemon of a database
 * that DROP DATABASE, CREATE DATABASE ... TEMPLATE or ALTER DATABASE RENAME
 * needs without other connections.
 */
static void
StopDaemonForDatabaseCommand(Node *parsetree)
{
	const char *dbname = NULL;

	if (IsA(parsetree, DropdbStmt))
		dbname = ((DropdbStmt *) parsetree)->dbname;
	else if (IsA(parsetree, RenameStmt) &&
			 ((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
		dbname = ((RenameStmt *) parsetree)->subname;
	else if (IsA(parsetree, CreatedbStmt))
	{
		ListCell   *cell;

		foreach(cell, ((CreatedbStmt *) parsetree)->options)
		{
			DefElem    *option = lfirst(cell);

			if (strcmp(option->defname, "template") == 0 && option->arg != NULL)
				dbname = defGetString(option);
		}
	}
	if (dbname != NULL && OidIsValid(get_database_oid(dbname, true)))
		StopMaintenanceDaemon(get_database_oid(dbname, true));
}

/* DROP EXTENSION shardext with distributed tables left would orphan shards */
static void
CheckDropExtension(DropStmt *stmt)
{
	ListCell   *cell;

	if (stmt->removeType != OBJECT_EXTENSION)
		return;

	foreach(cell, stmt->objects)
	{
		List	   *tables;

		if (strcmp(strVal(lfirst(cell)), SHARDEXT_EXTENSION_NAME) != 0)
			continue;
		tables = DistributedTableList();
		if (tables != NIL)
			ereport(ERROR,
					(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
					 errmsg("cannot drop extension shardext because %d distributed "
							"tables exist", list_length(tables)),
					 errdetail("Their rows live in shards on the worker nodes, for "
							   "example table \"%s\".", get_rel_name(linitial_oid(tables))),
					 errhint("Drop the tables or bring them back with "
							 "undistribute_table() first.")));
	}
}

