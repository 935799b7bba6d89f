/*-------------------------------------------------------------------------
 *
 * ddl_commands.c
 *	  Which utility commands on distributed and reference tables shardext
 *	  applies to the shards, and how: ALTER TABLE (columns, defaults, NOT
 *	  NULL, constraints, owner), CREATE/DROP INDEX, renames, SET SCHEMA,
 *	  TRUNCATE, COMMENT and GRANT/REVOKE.  Everything else that would make
 *	  the shards differ from the table is refused with a clear error.
 *
 * Schema changes run locally first and are then derived from the catalog
 * (ddl_propagation.c); TRUNCATE, COMMENT and GRANT are rebuilt from the
 * statement.  All of it runs in the local transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/parse_coerce.h"
#include "parser/parse_expr.h"
#include "parser/parse_relation.h"
#include "parser/parse_type.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"

#include "shardext/ddl.h"
#include "shardext/deparser.h"
#include "shardext/global_index.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/utility_hook.h"

static bool HandleAlterTable(AlterTableStmt *stmt, List **relids, List **usings);
static void CheckAlterTableCommand(Oid relid, AlterTableCmd *cmd, List **usings);
static char *DeparseUsingExpression(Oid relid, AlterTableCmd *cmd);
static void RejectForeignKeysToDistributed(RangeVar *relation, List *elements);
static Oid	DistributedRelation(RangeVar *relation);
static void RejectOnDistributedTable(RangeVar *relation, const char *command,
									 const char *detail);
static List *DistributedTablesOfIndexes(DropStmt *stmt);
static List *IndexStmtRelations(IndexStmt *stmt);
static List *DropIndexConcurrentlyCommands(DropStmt *stmt);
static MemoryContext StatementContext(void);
static List *DropIndexRelations(DropStmt *stmt);
static List *RenameRelations(RenameStmt *stmt);
static List *SetSchemaRelations(AlterObjectSchemaStmt *stmt);
static void PropagateTruncate(TruncateStmt *stmt, List *relids);
static void PropagateComment(CommentStmt *stmt);
static void PropagateGrant(GrantStmt *stmt);
static void RejectIndexTableUtility(Node *parsetree);
static void FollowWithGlobalIndexes(Node *parsetree);
static void RunStandard(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
						ProcessUtilityContext context, ParamListInfo params,
						QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc);
static void SkipLocalForeignKeyValidation(AlterTableStmt *stmt);

/*
 * RunStandard runs the command locally, on the coordinator's shells.
 *
 * Nothing is switched off meanwhile: queries that run during the command
 * (event triggers, functions the command calls) see distributed tables as
 * they are.  The one query PostgreSQL itself would run on the shells is the
 * validation of a foreign key that ALTER TABLE adds; the shells are empty,
 * so the constraint is added locally as validated without that query
 * (SkipLocalForeignKeyValidation), and each shard validates it when the
 * command reaches the shards.
 */
static void
RunStandard(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
			ProcessUtilityContext context, ParamListInfo params,
			QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	if (IsA(pstmt->utilityStmt, AlterTableStmt))
	{
		if (readOnlyTree)
			pstmt = copyObject(pstmt);
		readOnlyTree = false;
		SkipLocalForeignKeyValidation((AlterTableStmt *) pstmt->utilityStmt);
	}

	if (prev_ProcessUtility_hook)
		prev_ProcessUtility_hook(pstmt, queryString, readOnlyTree, context,
								 params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

/*
 * SkipLocalForeignKeyValidation marks the foreign keys that an ALTER TABLE
 * of distributed tables adds (as constraints or with new columns) as not
 * to be checked against the existing rows, while still valid, as CREATE
 * TABLE does for a new table: the local table is an empty shell.  NOT
 * VALID constraints stay not valid.
 */
static void
SkipLocalForeignKeyValidation(AlterTableStmt *stmt)
{
	ListCell   *cell;

	foreach(cell, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst(cell);
		List	   *constraints = NIL;
		ListCell   *constraintCell;

		if (cmd->subtype == AT_AddConstraint && IsA(cmd->def, Constraint))
			constraints = list_make1(cmd->def);
		else if (cmd->subtype == AT_AddColumn && IsA(cmd->def, ColumnDef))
			constraints = ((ColumnDef *) cmd->def)->constraints;

		foreach(constraintCell, constraints)
		{
			Constraint *constraint = lfirst(constraintCell);

			if (IsA(constraint, Constraint) && constraint->contype == CONSTR_FOREIGN)
				constraint->skip_validation = true;
		}
	}
}

/*
 * IndexStmtRelations: the distributed table a CREATE INDEX is for, as a
 * list, or NIL when it is not for one.
 */
static List *
IndexStmtRelations(IndexStmt *stmt)
{
	Oid			relid = DistributedRelation(stmt->relation);

	if (!OidIsValid(relid))
		return NIL;
	return list_make1_oid(relid);
}

/*
 * DropIndexRelations: the distributed tables whose indexes a DROP INDEX
 * drops, or NIL (also for other DROP statements).
 */
static List *
DropIndexRelations(DropStmt *stmt)
{
	if (stmt->removeType != OBJECT_INDEX)
		return NIL;
	return DistributedTablesOfIndexes(stmt);
}

/*
 * RenameRelations: the distributed tables a rename concerns (with those
 * related to them, see RelatedDistributedTables), or NIL when it concerns
 * none.  Renaming a schema that holds distributed tables is rejected.
 */
static List *
RenameRelations(RenameStmt *stmt)
{
	Oid			relid;

	if (stmt->renameType == OBJECT_SCHEMA)
	{
		Oid			namespaceId = get_namespace_oid(stmt->subname, true);
		ListCell   *cell;

		foreach(cell, DistributedTableList())
		{
			if (get_rel_namespace(lfirst_oid(cell)) == namespaceId)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot rename schema \"%s\" because it contains "
								"distributed table \"%s\"", stmt->subname,
								get_rel_name(lfirst_oid(cell))),
						 errhint("Move the tables to another schema with ALTER "
								 "TABLE ... SET SCHEMA first.")));
		}
		return NIL;
	}
	if (stmt->relation == NULL)
		return NIL;
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (OidIsValid(relid) && get_rel_relkind(relid) == RELKIND_INDEX)
		relid = IndexGetRelation(relid, false);
	if (!OidIsValid(relid) || !IsDistributedTable(relid))
		return NIL;
	if (stmt->renameType != OBJECT_TABLE && stmt->renameType != OBJECT_COLUMN &&
		stmt->renameType != OBJECT_TABCONSTRAINT &&
		stmt->renameType != OBJECT_INDEX)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("this rename is not supported on distributed table \"%s\"",
						get_rel_name(relid))));
	return RelatedDistributedTables(relid);
}

/*
 * SetSchemaRelations: the distributed table an ALTER ... SET SCHEMA moves,
 * as a list, or NIL when it moves none.
 */
static List *
SetSchemaRelations(AlterObjectSchemaStmt *stmt)
{
	Oid			relid = DistributedRelation(stmt->relation);

	if (!OidIsValid(relid))
		return NIL;
	if (stmt->objectType != OBJECT_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("ALTER ... SET SCHEMA is only supported for distributed "
						"tables themselves")));
	return list_make1_oid(relid);
}

/*
 * StatementContext is where what must outlive the transactions a command
 * commits on its own (CONCURRENTLY, VACUUM) is kept: the portal's memory.
 */
static MemoryContext
StatementContext(void)
{
	return PortalContext != NULL ? PortalContext : CurrentMemoryContext;
}

/*
 * ShardextPreprocessUtility handles a utility command that concerns
 * distributed tables: it runs the command locally and applies it to the
 * shards, and returns true.  It returns false (having done nothing) for
 * every other command.
 */
bool
ShardextPreprocessUtility(PlannedStmt *pstmt, const char *queryString,
						  bool readOnlyTree, ProcessUtilityContext context,
						  ParamListInfo params, QueryEnvironment *queryEnv,
						  DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	List	   *relids = NIL;
	List	   *usings = NIL;
	List	   *states;

	RejectIndexTableUtility(parsetree);
	switch (nodeTag(parsetree))
	{
		case T_AlterTableStmt:
			if (!HandleAlterTable((AlterTableStmt *) parsetree, &relids, &usings))
				return false;
			break;

		case T_CreateStmt:
			{
				CreateStmt *stmt = (CreateStmt *) parsetree;

				RejectForeignKeysToDistributed(stmt->relation, stmt->tableElts);
				RejectForeignKeysToDistributed(stmt->relation, stmt->constraints);
				return false;
			}

		case T_IndexStmt:
			relids = IndexStmtRelations((IndexStmt *) parsetree);
			if (relids == NIL)
				return false;
			if (((IndexStmt *) parsetree)->concurrent)
			{
				Oid			relid = linitial_oid(relids);
				MemoryContext oldContext = MemoryContextSwitchTo(StatementContext());
				List	   *before = TableIndexes(relid);

				MemoryContextSwitchTo(oldContext);
				RunStandard(pstmt, queryString, readOnlyTree, context, params, queryEnv,
							dest, qc);
				CreateShardIndexesConcurrently(relid, before);
				return true;
			}
			break;

		case T_DropStmt:
			relids = DropIndexRelations((DropStmt *) parsetree);
			if (relids == NIL)
				return false;
			if (((DropStmt *) parsetree)->concurrent)
			{
				MemoryContext oldContext = MemoryContextSwitchTo(StatementContext());
				List	   *commands = DropIndexConcurrentlyCommands((DropStmt *) parsetree);

				MemoryContextSwitchTo(oldContext);
				RunStandard(pstmt, queryString, readOnlyTree, context, params, queryEnv,
							dest, qc);
				RunPlacementCommandsOneAtATime(commands);
				return true;
			}
			break;

		case T_RenameStmt:
			relids = RenameRelations((RenameStmt *) parsetree);
			if (relids == NIL)
				return false;
			break;

		case T_AlterObjectSchemaStmt:
			relids = SetSchemaRelations((AlterObjectSchemaStmt *) parsetree);
			if (relids == NIL)
				return false;
			break;

		case T_TruncateStmt:
			{
				TruncateStmt *stmt = (TruncateStmt *) parsetree;
				ListCell   *cell;

				foreach(cell, stmt->relations)
				{
					Oid			relid = DistributedRelation(lfirst(cell));

					if (OidIsValid(relid))
						relids = list_append_unique_oid(relids, relid);
				}
				if (relids == NIL)
					return false;
				RunStandard(pstmt, queryString, readOnlyTree, context, params, queryEnv,
							dest, qc);
				/* the global indexes of the tables are emptied with them */
				foreach(cell, list_copy(relids))
					relids = list_concat_unique_oid(relids,
													GlobalIndexRelids(TableGlobalIndexes(lfirst_oid(cell))));
				PropagateTruncate(stmt, relids);
				return true;
			}

		case T_VacuumStmt:
		case T_ReindexStmt:
			{
				MemoryContext oldContext = MemoryContextSwitchTo(StatementContext());
				List	   *commands = IsA(parsetree, VacuumStmt) ?
					VacuumShardCommands((VacuumStmt *) parsetree) :
					ReindexShardCommands((ReindexStmt *) parsetree);

				MemoryContextSwitchTo(oldContext);
				if (commands == NIL)
					return false;
				RunStandard(pstmt, queryString, readOnlyTree, context, params, queryEnv,
							dest, qc);
				RunPlacementCommandsOneAtATime(commands);
				return true;
			}

		case T_CommentStmt:
			RunStandard(pstmt, queryString, readOnlyTree, context, params, queryEnv,
						dest, qc);
			PropagateComment((CommentStmt *) parsetree);
			return true;

		case T_GrantStmt:
			RunStandard(pstmt, queryString, readOnlyTree, context, params, queryEnv,
						dest, qc);
			PropagateGrant((GrantStmt *) parsetree);
			return true;

		case T_CreateTrigStmt:
			RejectOnDistributedTable(((CreateTrigStmt *) parsetree)->relation, "CREATE TRIGGER",
									 "Triggers on the coordinator's table would not fire for rows "
									 "stored in the shards.");
			return false;

		case T_CreatePolicyStmt:
			RejectOnDistributedTable(((CreatePolicyStmt *) parsetree)->table, "CREATE POLICY",
									 "Row security policies on the coordinator's table would not "
									 "apply to the shards the queries read.");
			return false;

		case T_RuleStmt:
			RejectOnDistributedTable(((RuleStmt *) parsetree)->relation, "CREATE RULE",
									 "Rules on the coordinator's table would not apply to the shards.");
			return false;

		default:
			return false;
	}

	states = CaptureTableStates(relids);
	RunStandard(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	PropagateTableChanges(states, usings);
	FollowWithGlobalIndexes(parsetree);
	return true;
}

/*
 * RejectIndexTableUtility refuses DDL, TRUNCATE and GRANT on the index
 * table of a global index (shardext issues its own); DROP TABLE of it is
 * shardext_drop_global_index().
 */
static void
RejectIndexTableUtility(Node *parsetree)
{
	RangeVar   *relation = NULL;
	List	   *relations = NIL;
	ListCell   *cell;

	if (GlobalIndexInternalWriteDepth > 0)
		return;
	switch (nodeTag(parsetree))
	{
		case T_AlterTableStmt:
			relation = ((AlterTableStmt *) parsetree)->relation;
			break;
		case T_RenameStmt:
			relation = ((RenameStmt *) parsetree)->relation;
			break;
		case T_AlterObjectSchemaStmt:
			relation = ((AlterObjectSchemaStmt *) parsetree)->relation;
			break;
		case T_IndexStmt:
			relation = ((IndexStmt *) parsetree)->relation;
			break;
		case T_TruncateStmt:
			relations = ((TruncateStmt *) parsetree)->relations;
			break;
		case T_GrantStmt:
			if (((GrantStmt *) parsetree)->objtype == OBJECT_TABLE &&
				((GrantStmt *) parsetree)->targtype == ACL_TARGET_OBJECT)
				relations = ((GrantStmt *) parsetree)->objects;
			break;
		default:
			break;
	}
	if (relation != NULL)
		relations = list_make1(relation);
	foreach(cell, relations)
	{
		Oid			relid = DistributedRelation(lfirst(cell));

		if (OidIsValid(relid))
			RejectIndexTableWrite(relid, "change");
	}
}

/*
 * FollowWithGlobalIndexes brings the global indexes of a table along after
 * DDL on it: a renamed column is renamed in the index tables too, and owner
 * changes carry over (as privileges do, see PropagateGrant).
 */
static void
FollowWithGlobalIndexes(Node *parsetree)
{
	if (IsA(parsetree, RenameStmt) && ((RenameStmt *) parsetree)->renameType == OBJECT_COLUMN)
	{
		RenameStmt *stmt = (RenameStmt *) parsetree;
		Oid			relid = RangeVarGetRelid(stmt->relation, NoLock, true);

		if (OidIsValid(relid) && TableGlobalIndexes(relid) != NIL)
			RenameGlobalIndexColumn(relid, get_attnum(relid, stmt->newname), stmt->subname,
									stmt->newname);
	}
	else if (IsA(parsetree, AlterTableStmt))
	{
		AlterTableStmt *stmt = (AlterTableStmt *) parsetree;
		Oid			relid = RangeVarGetRelid(stmt->relation, NoLock, true);
		ListCell   *cell;

		foreach(cell, stmt->cmds)
		{
			if (((AlterTableCmd *) lfirst(cell))->subtype == AT_ChangeOwner &&
				OidIsValid(relid) && TableGlobalIndexes(relid) != NIL)
				SyncGlobalIndexPrivileges(relid);
		}
	}
}

/*
 * RejectOnDistributedTable refuses a command whose effect would silently not
 * reach the shards of a distributed table.
 */
static void
RejectOnDistributedTable(RangeVar *relation, const char *command, const char *detail)
{
	Oid			relid = DistributedRelation(relation);

	if (OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s is not supported on distributed table \"%s\"",
						command, get_rel_name(relid)),
				 errdetail("%s", detail),
				 errhint("Use undistribute_table() to make it a local table again.")));
}

/* the distributed table a statement names, or InvalidOid */
static Oid
DistributedRelation(RangeVar *relation)
{
	Oid			relid;

	if (relation == NULL)
		return InvalidOid;
	relid = RangeVarGetRelid(relation, NoLock, true);
	return (OidIsValid(relid) && IsDistributedTable(relid)) ? relid : InvalidOid;
}

/*
 * HandleAlterTable decides about an ALTER TABLE: false when it does not
 * concern distributed tables (after refusing foreign keys from a local
 * table to a distributed one); otherwise it checks every subcommand and
 * returns the tables to compare in *relids.
 */
static bool
HandleAlterTable(AlterTableStmt *stmt, List **relids, List **usings)
{
	Oid			relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	ListCell   *cell;

	if (!OidIsValid(relid))
		return false;

	if (stmt->objtype == OBJECT_INDEX)
	{
		if (get_rel_relkind(relid) == RELKIND_INDEX &&
			IsDistributedTable(IndexGetRelation(relid, false)))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("ALTER INDEX is not supported on indexes of distributed tables"),
					 errhint("Only ALTER INDEX ... RENAME is propagated to the shards.")));
		return false;
	}

	if (!IsDistributedTable(relid))
	{
		foreach(cell, stmt->cmds)
		{
			AlterTableCmd *cmd = lfirst(cell);

			if (cmd->def != NULL && IsA(cmd->def, ColumnDef))
				RejectForeignKeysToDistributed(stmt->relation,
											   ((ColumnDef *) cmd->def)->constraints);
			else if (cmd->def != NULL && IsA(cmd->def, Constraint))
				RejectForeignKeysToDistributed(stmt->relation, list_make1(cmd->def));
		}
		return false;
	}

	foreach(cell, stmt->cmds)
		CheckAlterTableCommand(relid, lfirst(cell), usings);
	*relids = RelatedDistributedTables(relid);
	return true;
}

/*
 * CheckAlterTableCommand refuses subcommands shardext does not apply to
 * shards, and deparses the USING expression of ALTER COLUMN TYPE (which the
 * catalog does not keep) while the old column types are still in place.
 */
static void
CheckAlterTableCommand(Oid relid, AlterTableCmd *cmd, List **usings)
{
	const char *what = NULL;

	switch (cmd->subtype)
	{
		case AT_DropColumn:
			if (IsHashDistributedTable(relid) && cmd->name != NULL &&
				get_attnum(relid, cmd->name) == GetDistTableCacheEntry(relid)->distAttnum)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot drop distribution column \"%s\" of table \"%s\"",
								cmd->name, get_rel_name(relid)),
						 errdetail("The rows are placed in shards by this column."),
						 errhint("Use undistribute_table() first.")));
			return;
		case AT_AddColumn:
		case AT_ColumnDefault:
		case AT_DropNotNull:
		case AT_SetNotNull:
		case AT_AddConstraint:
		case AT_DropConstraint:
		case AT_ValidateConstraint:
		case AT_ChangeOwner:
			return;
		case AT_AlterColumnType:
			{
				char	   *expression;

				RejectIndexedColumnChange(relid, cmd->name, "change the type of");
				expression = DeparseUsingExpression(relid, cmd);

				if (expression != NULL)
				{
					AttrNumber	attnum = get_attnum(relid, cmd->name);

					*usings = lappend(*usings, MakeUsingExpression(relid, attnum, expression));
				}
				return;
			}
		case AT_AddIdentity:
		case AT_SetIdentity:
		case AT_DropIdentity:
			what = "identity columns";
			break;
		case AT_AttachPartition:
		case AT_DetachPartition:
		case AT_DetachPartitionFinalize:
		case AT_AddInherit:
		case AT_DropInherit:
			what = "partitioning and inheritance";
			break;
		case AT_EnableTrig:
		case AT_EnableAlwaysTrig:
		case AT_EnableReplicaTrig:
		case AT_DisableTrig:
		case AT_EnableTrigAll:
		case AT_DisableTrigAll:
		case AT_EnableTrigUser:
		case AT_DisableTrigUser:
			what = "triggers";
			break;
		default:
			what = "this subcommand";
			break;
	}
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("ALTER TABLE with %s is not supported on distributed table \"%s\"",
					what, get_rel_name(relid)),
			 errdetail("shardext applies column, default, NOT NULL, constraint, index, "
					   "owner and name changes to the shards."),
			 errhint("Use undistribute_table(), change the table, and distribute it again.")));
}

/*
 * DeparseUsingExpression analyses the USING expression of an ALTER COLUMN
 * TYPE the way ALTER TABLE will, and deparses it qualified; NULL when there
 * is none or it does not analyse (ALTER TABLE then reports the problem).
 */
static char *
DeparseUsingExpression(Oid relid, AlterTableCmd *cmd)
{
	ColumnDef  *def = (ColumnDef *) cmd->def;
	ParseState *pstate;
	Relation	rel;
	ParseNamespaceItem *nsitem;
	Node	   *transform;
	Oid			targetType;
	int32		targetTypmod;
	char	   *result;
	int			nestLevel;

	if (def == NULL || def->raw_default == NULL)
		return NULL;

	pstate = make_parsestate(NULL);
	rel = relation_open(relid, AccessShareLock);
	nsitem = addRangeTableEntryForRelation(pstate, rel, AccessShareLock, NULL, false, true);
	addNSItemToQuery(pstate, nsitem, false, true, true);
	transform = transformExpr(pstate, copyObject(def->raw_default),
							  EXPR_KIND_ALTER_COL_TRANSFORM);
	typenameTypeIdAndMod(pstate, def->typeName, &targetType, &targetTypmod);
	transform = coerce_to_target_type(pstate, transform, exprType(transform),
									  targetType, targetTypmod, COERCION_ASSIGNMENT,
									  COERCE_IMPLICIT_CAST, -1);
	if (transform == NULL)
	{
		relation_close(rel, AccessShareLock);
		return NULL;
	}
	nestLevel = BeginSafeDeparse();
	result = deparse_expression(transform,
								deparse_context_for(RelationGetRelationName(rel), relid),
								false, false);
	EndSafeDeparse(nestLevel);
	relation_close(rel, AccessShareLock);
	free_parsestate(pstate);
	return result;
}

/*
 * RejectForeignKeysToDistributed refuses foreign keys of a local table (in
 * CREATE TABLE or ALTER TABLE) that reference a distributed table.
 */
static void
RejectForeignKeysToDistributed(RangeVar *relation, List *elements)
{
	ListCell   *cell;

	foreach(cell, elements)
	{
		Node	   *element = lfirst(cell);
		Oid			referenced;

		if (IsA(element, ColumnDef))
		{
			RejectForeignKeysToDistributed(relation, ((ColumnDef *) element)->constraints);
			continue;
		}
		if (!IsA(element, Constraint) || ((Constraint *) element)->contype != CONSTR_FOREIGN)
			continue;
		referenced = DistributedRelation(((Constraint *) element)->pktable);
		if (OidIsValid(referenced))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot create foreign key from local table \"%s\" to "
							"distributed table \"%s\"", relation->relname,
							get_rel_name(referenced)),
					 errdetail("The rows of \"%s\" live on the worker nodes, where a local "
							   "table cannot check them.", get_rel_name(referenced)),
					 errhint("Create the table without the foreign key, distribute it, "
							 "and add the foreign key then.")));
	}
}

/*
 * DropIndexConcurrentlyCommands: what drops the index of a DROP INDEX
 * CONCURRENTLY (one index, PostgreSQL checks) on the shards, worked out
 * before it is gone.
 */
static List *
DropIndexConcurrentlyCommands(DropStmt *stmt)
{
	RangeVar   *relation = makeRangeVarFromNameList((List *) linitial(stmt->objects));
	Oid			indexId = RangeVarGetRelid(relation, NoLock, true);

	if (!OidIsValid(indexId))
		return NIL;
	return DropShardIndexCommands(IndexGetRelation(indexId, false), indexId);
}

/* the distributed tables whose indexes a DROP INDEX names */
static List *
DistributedTablesOfIndexes(DropStmt *stmt)
{
	List	   *relids = NIL;
	ListCell   *cell;

	foreach(cell, stmt->objects)
	{
		RangeVar   *relation = makeRangeVarFromNameList((List *) lfirst(cell));
		Oid			indexId = RangeVarGetRelid(relation, NoLock, true);
		Oid			relid;

		if (!OidIsValid(indexId) || get_rel_relkind(indexId) != RELKIND_INDEX)
			continue;
		relid = IndexGetRelation(indexId, false);
		if (IsDistributedTable(relid))
			relids = list_append_unique_oid(relids, relid);
	}
	return relids;
}

/*
 * ShardPlacementCommands builds one command per shard with build() and
 * returns it for every placement of the shard.
 */
List *
ShardPlacementCommands(Oid relid, char *(*build) (Oid relid, int64 shardId, void *arg),
					   void *arg)
{
	DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);
	List	   *result = NIL;

	for (int i = 0; entry != NULL && i < entry->shardCount; i++)
	{
		ShardInterval *shard = &entry->shards[i];
		char	   *command = build(relid, shard->shardId, arg);

		for (int j = 0; j < shard->placementCount; j++)
			result = lappend(result, MakePlacementCommand(shard->placementNodeIds[j],
														  command));
	}
	return result;
}

/*
 * PropagateTruncate truncates the shards of the named distributed tables,
 * one TRUNCATE per node.  CASCADE is passed on: the shards' foreign keys
 * mirror the tables', so the same tables are truncated on every node.
 */
static void
PropagateTruncate(TruncateStmt *stmt, List *relids)
{
	List	   *placementCommands = NIL;
	List	   *nodeIds = NIL;
	List	   *buffers = NIL;
	ListCell   *cell;

	foreach(cell, relids)
	{
		DistTableCacheEntry *entry = GetDistTableCacheEntry(lfirst_oid(cell));

		for (int i = 0; entry != NULL && i < entry->shardCount; i++)
		{
			ShardInterval *shard = &entry->shards[i];

			for (int j = 0; j < shard->placementCount; j++)
			{
				StringInfo	buffer = NULL;
				ListCell   *nodeCell;

				foreach(nodeCell, nodeIds)
				{
					if (lfirst_int(nodeCell) == shard->placementNodeIds[j])
						buffer = list_nth(buffers, foreach_current_index(nodeCell));
				}
				if (buffer == NULL)
				{
					buffer = makeStringInfo();
					appendStringInfoString(buffer, "TRUNCATE TABLE ");
					nodeIds = lappend_int(nodeIds, shard->placementNodeIds[j]);
					buffers = lappend(buffers, buffer);
				}
				else
					appendStringInfoString(buffer, ", ");
				appendStringInfoString(buffer, QualifiedShardName(entry->relid, shard->shardId));
			}
		}
	}
	foreach(cell, buffers)
	{
		StringInfo	buffer = lfirst(cell);

		if (stmt->behavior == DROP_CASCADE)
			appendStringInfoString(buffer, " CASCADE");
		placementCommands = lappend(placementCommands,
									MakePlacementCommand(list_nth_int(nodeIds,
																	  foreach_current_index(cell)),
														 buffer->data));
	}
	ExecuteOnShardPlacements(placementCommands);
}

typedef struct CommentArgs
{
	CommentStmt *stmt;
	char	   *subject;		/* column, index or constraint name */
	bool		indexBacked;
} CommentArgs;

static char *
BuildShardComment(Oid relid, int64 shardId, void *arg)
{
	CommentArgs *args = arg;
	char	   *shardName = QualifiedShardName(relid, shardId);
	const char *comment = args->stmt->comment ?
		quote_literal_cstr(args->stmt->comment) : "NULL";

	switch (args->stmt->objtype)
	{
		case OBJECT_TABLE:
			return psprintf("COMMENT ON TABLE %s IS %s", shardName, comment);
		case OBJECT_COLUMN:
			return psprintf("COMMENT ON COLUMN %s.%s IS %s", shardName,
							quote_identifier(args->subject), comment);
		case OBJECT_INDEX:
			return psprintf("COMMENT ON INDEX %s IS %s",
							quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
													   ShardNameFromParts(args->subject, shardId)),
							comment);
		default:
			return psprintf("COMMENT ON CONSTRAINT %s ON %s IS %s",
							quote_identifier(ShardConstraintName(args->subject,
																 args->indexBacked, shardId)),
							shardName, comment);
	}
}

/* PropagateComment copies COMMENT ON TABLE/COLUMN/INDEX/CONSTRAINT to shards */
static void
PropagateComment(CommentStmt *stmt)
{
	CommentArgs args = {stmt, NULL, false};
	List	   *names;
	Oid			relid;

	if (stmt->objtype != OBJECT_TABLE && stmt->objtype != OBJECT_COLUMN &&
		stmt->objtype != OBJECT_INDEX && stmt->objtype != OBJECT_TABCONSTRAINT)
		return;

	names = list_copy(castNode(List, stmt->object));
	if (stmt->objtype == OBJECT_COLUMN || stmt->objtype == OBJECT_TABCONSTRAINT)
	{
		args.subject = strVal(llast(names));
		names = list_truncate(names, list_length(names) - 1);
	}
	relid = RangeVarGetRelid(makeRangeVarFromNameList(names), NoLock, false);
	if (stmt->objtype == OBJECT_INDEX)
	{
		args.subject = get_rel_name(relid);
		relid = IndexGetRelation(relid, false);
	}
	if (!IsDistributedTable(relid))
		return;
	if (stmt->objtype == OBJECT_TABCONSTRAINT)
	{
		Oid			constraintOid = get_relation_constraint_oid(relid, args.subject, false);
		Oid			indexOid = get_constraint_index(constraintOid);

		args.indexBacked = OidIsValid(indexOid);
	}
	ExecuteOnShardPlacements(ShardPlacementCommands(relid, BuildShardComment, &args));
}

/* the GRANT/REVOKE text after "ON TABLE <name> " is built by DeparseGrant */
static char *
DeparseGrant(GrantStmt *stmt, const char *shardName)
{
	StringInfoData buf;
	ListCell   *cell;

	initStringInfo(&buf);
	appendStringInfoString(&buf, stmt->is_grant ? "GRANT " : "REVOKE ");
	if (!stmt->is_grant && stmt->grant_option)
		appendStringInfoString(&buf, "GRANT OPTION FOR ");
	if (stmt->privileges == NIL)
		appendStringInfoString(&buf, "ALL PRIVILEGES");
	foreach(cell, stmt->privileges)
	{
		AccessPriv *priv = lfirst(cell);

		if (foreach_current_index(cell) > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoString(&buf, priv->priv_name ? priv->priv_name : "ALL");
		if (priv->cols != NIL)
		{
			ListCell   *colCell;

			appendStringInfoString(&buf, " (");
			foreach(colCell, priv->cols)
				appendStringInfo(&buf, "%s%s", foreach_current_index(colCell) > 0 ? ", " : "",
								 quote_identifier(strVal(lfirst(colCell))));
			appendStringInfoChar(&buf, ')');
		}
	}
	appendStringInfo(&buf, " ON TABLE %s %s ", shardName, stmt->is_grant ? "TO" : "FROM");
	foreach(cell, stmt->grantees)
	{
		RoleSpec   *role = lfirst(cell);

		if (foreach_current_index(cell) > 0)
			appendStringInfoString(&buf, ", ");
		switch (role->roletype)
		{
			case ROLESPEC_CSTRING:
				appendStringInfoString(&buf, quote_identifier(role->rolename));
				break;
			case ROLESPEC_CURRENT_ROLE:
				appendStringInfoString(&buf, "CURRENT_ROLE");
				break;
			case ROLESPEC_CURRENT_USER:
				appendStringInfoString(&buf, "CURRENT_USER");
				break;
			case ROLESPEC_SESSION_USER:
				appendStringInfoString(&buf, "SESSION_USER");
				break;
			case ROLESPEC_PUBLIC:
				appendStringInfoString(&buf, "PUBLIC");
				break;
		}
	}
	if (stmt->is_grant && stmt->grant_option)
		appendStringInfoString(&buf, " WITH GRANT OPTION");
	if (!stmt->is_grant && stmt->behavior == DROP_CASCADE)
		appendStringInfoString(&buf, " CASCADE");
	return buf.data;
}

static char *
BuildShardGrant(Oid relid, int64 shardId, void *arg)
{
	return DeparseGrant((GrantStmt *) arg, QualifiedShardName(relid, shardId));
}

/*
 * PropagateGrant applies GRANT/REVOKE on tables (named, or ALL TABLES IN
 * SCHEMA) to the shards of the distributed ones.  GRANTED BY is refused:
 * remote work runs as the current user.
 */
static void
PropagateGrant(GrantStmt *stmt)
{
	List	   *relids = NIL;
	List	   *placementCommands = NIL;
	ListCell   *cell;

	if (stmt->objtype != OBJECT_TABLE)
		return;
	if (stmt->targtype == ACL_TARGET_OBJECT)
	{
		foreach(cell, stmt->objects)
		{
			Oid			relid = DistributedRelation(lfirst(cell));

			if (OidIsValid(relid))
				relids = lappend_oid(relids, relid);
		}
	}
	else if (stmt->targtype == ACL_TARGET_ALL_IN_SCHEMA)
	{
		foreach(cell, stmt->objects)
		{
			Oid			namespaceId = get_namespace_oid(strVal(lfirst(cell)), false);
			ListCell   *tableCell;

			foreach(tableCell, DistributedTableList())
			{
				if (get_rel_namespace(lfirst_oid(tableCell)) == namespaceId)
					relids = lappend_oid(relids, lfirst_oid(tableCell));
			}
		}
	}
	if (relids == NIL)
		return;
	if (stmt->grantor != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("GRANTED BY is not supported on distributed tables")));

	foreach(cell, relids)
		placementCommands = list_concat(placementCommands,
										ShardPlacementCommands(lfirst_oid(cell),
															   BuildShardGrant, stmt));
	ExecuteOnShardPlacements(placementCommands);

	/* the index tables of global indexes follow the tables' privileges */
	foreach(cell, relids)
		SyncGlobalIndexPrivileges(lfirst_oid(cell));
}
