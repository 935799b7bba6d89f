/*-------------------------------------------------------------------------
 *
 * utility_hook.c
 *	  The ProcessUtility hook.  Utility commands that would make the shell
 *	  table and its shards disagree are refused until they are propagated;
 *	  DROP EXTENSION is refused while distributed tables exist, because the
 *	  shards would be orphaned and the data lost with them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/lsyscache.h"

#include "shardext/shardext.h"
#include "shardext/metadata.h"
#include "shardext/utility_hook.h"

ProcessUtility_hook_type prev_ProcessUtility_hook = NULL;

static void CheckDropExtension(DropStmt *stmt);
static void RejectUnsupportedUtility(Node *parsetree);
static Oid	DistributedRelationOfRangeVar(RangeVar *relation);

void
ShardextProcessUtility(PlannedStmt *pstmt, const char *queryString,
					   bool readOnlyTree, ProcessUtilityContext context,
					   ParamListInfo params, QueryEnvironment *queryEnv,
					   DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (ShardextExtensionLoaded())
	{
		if (IsA(parsetree, DropStmt))
			CheckDropExtension((DropStmt *) parsetree);
		RejectUnsupportedUtility(parsetree);
	}

	if (prev_ProcessUtility_hook)
		prev_ProcessUtility_hook(pstmt, queryString, readOnlyTree, context,
								 params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
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

/* the distributed table a statement names, or InvalidOid */
static Oid
DistributedRelationOfRangeVar(RangeVar *relation)
{
	Oid			relid;

	if (relation == NULL)
		return InvalidOid;
	relid = RangeVarGetRelid(relation, NoLock, true);
	return (OidIsValid(relid) && IsDistributedTable(relid)) ? relid : InvalidOid;
}

/*
 * RejectUnsupportedUtility refuses utility commands on distributed tables
 * that shardext does not apply to the shards yet.
 */
static void
RejectUnsupportedUtility(Node *parsetree)
{
	Oid			relid = InvalidOid;
	const char *command = NULL;

	switch (nodeTag(parsetree))
	{
		case T_CopyStmt:
			relid = DistributedRelationOfRangeVar(((CopyStmt *) parsetree)->relation);
			command = "COPY";
			break;
		case T_AlterTableStmt:
			relid = DistributedRelationOfRangeVar(((AlterTableStmt *) parsetree)->relation);
			command = "ALTER TABLE";
			break;
		case T_IndexStmt:
			relid = DistributedRelationOfRangeVar(((IndexStmt *) parsetree)->relation);
			command = "CREATE INDEX";
			break;
		case T_RenameStmt:
			relid = DistributedRelationOfRangeVar(((RenameStmt *) parsetree)->relation);
			command = "ALTER ... RENAME";
			break;
		case T_AlterObjectSchemaStmt:
			relid = DistributedRelationOfRangeVar(((AlterObjectSchemaStmt *) parsetree)->relation);
			command = "ALTER ... SET SCHEMA";
			break;
		case T_TruncateStmt:
			{
				ListCell   *cell;

				foreach(cell, ((TruncateStmt *) parsetree)->relations)
				{
					relid = DistributedRelationOfRangeVar(lfirst(cell));
					if (OidIsValid(relid))
						break;
				}
				command = "TRUNCATE";
				break;
			}
		default:
			break;
	}

	if (OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s on distributed table \"%s\" is not supported yet",
						command, get_rel_name(relid)),
				 errhint("Use undistribute_table(), change the table, and distribute it again.")));
}
