/*-------------------------------------------------------------------------
 *
 * ddl_propagation.c
 *	  Applying schema changes of distributed and reference tables to their
 *	  shards, by comparing the table's catalog entries before and after the
 *	  local command.
 *
 * The utility hook (ddl_commands.c) captures the state of every affected
 * table (columns, defaults, NOT NULL, constraints, indexes, name, schema,
 * owner), runs the command locally, captures again and calls
 * PropagateTableChanges, which derives per-shard SQL from the difference:
 * everything it sends is deparsed from the catalog with search_path =
 * pg_catalog, so names and expressions mean on the workers what they mean
 * here, and unnamed constraints and indexes get the names PostgreSQL chose
 * locally (plus the shard id where names must be unique per schema).  The
 * commands run on each node's first connection inside the local
 * transaction, so two-phase commit makes the change atomic across nodes.
 *
 * The same comparison enforces what shards cannot do: unique indexes and
 * constraints must contain the distribution column, foreign keys must pair
 * co-located shards or point at a reference table, and the distribution
 * column cannot be dropped or change its type.  Such an error rolls back
 * the local change with everything else.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_index.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"

#include "shardext/cdc.h"
#include "shardext/connection.h"
#include "shardext/ddl.h"
#include "shardext/deparser.h"
#include "shardext/metadata.h"
#include "shardext/operations.h"
#include "shardext/pg_compat.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"

typedef struct ColumnState
{
	char	   *name;
	bool		dropped;
	Oid			type;
	int32		typmod;
	Oid			collation;
	bool		notnull;
	char	   *defaultExpr;	/* as the shard has it, or NULL */
} ColumnState;

typedef struct ConstraintState
{
	Oid			oid;
	char	   *name;
	char		contype;
	bool		validated;
	Oid			indexOid;
} ConstraintState;

typedef struct IndexState
{
	Oid			oid;
	char	   *name;
	bool		constraintBacked;
} IndexState;

struct TableSchemaState
{
	Oid			relid;
	char	   *relname;
	char	   *schemaName;
	Oid			owner;
	int			natts;
	ColumnState *columns;		/* by attnum - 1 */
	List	   *constraints;	/* ConstraintState * */
	List	   *indexes;		/* IndexState * */
};

/* a USING expression of ALTER COLUMN TYPE, deparsed before execution */
typedef struct UsingExpression
{
	Oid			relid;
	AttrNumber	attnum;
	char	   *expression;
} UsingExpression;

static TableSchemaState *CaptureTableState(Oid relid);
static void CheckTableChanges(TableSchemaState *before, TableSchemaState *after);
static List *ShardMoveAndRenameCommands(TableSchemaState *before, TableSchemaState *after,
										int64 shardId, char **shardNameOut);
static List *ShardRemovedObjectCommands(TableSchemaState *before, TableSchemaState *after,
										int64 shardId, const char *shardName);
static List *ShardAddedObjectCommands(TableSchemaState *before, TableSchemaState *after,
									  int64 shardId, const char *shardName);
static List *ShardChangeCommands(TableSchemaState *before, TableSchemaState *after,
								 int64 shardId, List *usingExpressions);
static void AppendColumnChanges(StringInfo buf, const char *shardName,
								TableSchemaState *before, TableSchemaState *after,
								List *usingExpressions);
static ConstraintState *FindConstraint(List *constraints, Oid oid);
static IndexState *FindIndex(List *indexes, Oid oid);
static bool IndexContainsColumn(Oid indexOid, AttrNumber attnum);
static char *UsingExpressionFor(List *usingExpressions, Oid relid, AttrNumber attnum);

PlacementCommand *
MakePlacementCommand(int32 nodeId, char *command)
{
	PlacementCommand *placementCommand = palloc(sizeof(PlacementCommand));

	placementCommand->nodeId = nodeId;
	placementCommand->command = command;
	return placementCommand;
}

/*
 * CaptureTableStates returns the states of the given tables, to be passed
 * to PropagateTableChanges once the command ran.
 */
List *
CaptureTableStates(List *relids)
{
	List	   *states = NIL;
	ListCell   *cell;

	foreach(cell, relids)
		states = lappend(states, CaptureTableState(lfirst_oid(cell)));
	return states;
}

static TableSchemaState *
CaptureTableState(Oid relid)
{
	TableSchemaState *state = palloc0(sizeof(TableSchemaState));
	Relation	rel = relation_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	Relation	conRel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	List	   *indexes;
	ListCell   *cell;
	int			nestLevel = BeginSafeDeparse();

	state->relid = relid;
	state->relname = pstrdup(RelationGetRelationName(rel));
	state->schemaName = get_namespace_name(RelationGetNamespace(rel));
	state->owner = rel->rd_rel->relowner;
	state->natts = desc->natts;
	state->columns = palloc0(desc->natts * sizeof(ColumnState));
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);
		ColumnState *column = &state->columns[i];

		column->name = pstrdup(NameStr(attr->attname));
		column->dropped = attr->attisdropped;
		column->type = attr->atttypid;
		column->typmod = attr->atttypmod;
		column->collation = attr->attcollation;
		column->notnull = attr->attnotnull;
		if (!attr->attisdropped)
			column->defaultExpr = ShardColumnDefault(rel, attr->attnum);
	}
	EndSafeDeparse(nestLevel);

	conRel = table_open(ConstraintRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_constraint_conrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(conRel, ConstraintRelidTypidNameIndexId, true,
							  NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_constraint con = (Form_pg_constraint) GETSTRUCT(tuple);
		ConstraintState *constraint = palloc0(sizeof(ConstraintState));

		constraint->oid = con->oid;
		constraint->name = pstrdup(NameStr(con->conname));
		constraint->contype = con->contype;
		constraint->validated = con->convalidated;
		constraint->indexOid = con->contype == CONSTRAINT_FOREIGN ? InvalidOid : con->conindid;
		state->constraints = lappend(state->constraints, constraint);
	}
	systable_endscan(scan);
	table_close(conRel, AccessShareLock);

	indexes = RelationGetIndexList(rel);
	foreach(cell, indexes)
	{
		IndexState *index = palloc0(sizeof(IndexState));

		index->oid = lfirst_oid(cell);
		index->name = get_rel_name(index->oid);
		index->constraintBacked = OidIsValid(get_index_constraint(index->oid));
		state->indexes = lappend(state->indexes, index);
	}
	relation_close(rel, AccessShareLock);
	return state;
}

/*
 * PropagateTableChanges compares each captured table with its current
 * state, checks that the change is one shards can follow, and applies it
 * to every shard placement in the local transaction.
 */
void
PropagateTableChanges(List *beforeStates, List *usingExpressions)
{
	List	   *placementCommands = NIL;
	List	   *changed = NIL;
	ListCell   *cell;

	CommandCounterIncrement();
	foreach(cell, beforeStates)
	{
		TableSchemaState *before = lfirst(cell);
		TableSchemaState *after;
		DistTableCacheEntry *entry;

		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(before->relid)))
			continue;			/* dropped: the drop trigger took care */
		entry = GetDistTableCacheEntry(before->relid);
		if (entry == NULL)
			continue;
		after = CaptureTableState(before->relid);
		CheckTableChanges(before, after);

		for (int i = 0; i < entry->shardCount; i++)
		{
			ShardInterval *shard = &entry->shards[i];
			List	   *commands = ShardChangeCommands(before, after, shard->shardId,
													   usingExpressions);
			StringInfoData buf;
			ListCell   *commandCell;

			if (commands == NIL)
				break;			/* nothing changed for any shard */
			if (i == 0)
				changed = lappend_oid(changed, before->relid);
			initStringInfo(&buf);
			foreach(commandCell, commands)
				appendStringInfo(&buf, "%s;\n", (char *) lfirst(commandCell));
			for (int j = 0; j < shard->placementCount; j++)
				placementCommands = lappend(placementCommands,
											MakePlacementCommand(shard->placementNodeIds[j],
																 buf.data));
		}
	}
	ExecuteOnShardPlacements(placementCommands);
	CdcTablesAltered(changed);
}

/*
 * ExecuteOnShardPlacements runs the commands on their nodes, one
 * multi-statement command per node on its first connection, all nodes in
 * parallel, as writes in the local transaction.  DDL must see (and must
 * not wait for) what this transaction did before on the node, so it is
 * refused after work that used further connections to the node.
 */
void
ExecuteOnShardPlacements(List *placementCommands)
{
	List	   *nodeIds = NIL;
	List	   *buffers = NIL;
	List	   *commands = NIL;
	ListCell   *cell;

	foreach(cell, placementCommands)
	{
		PlacementCommand *placementCommand = lfirst(cell);
		StringInfo	buffer = NULL;
		ListCell   *nodeCell;

		foreach(nodeCell, nodeIds)
		{
			if (lfirst_int(nodeCell) == placementCommand->nodeId)
				buffer = list_nth(buffers, foreach_current_index(nodeCell));
		}
		if (buffer == NULL)
		{
			buffer = makeStringInfo();
			nodeIds = lappend_int(nodeIds, placementCommand->nodeId);
			buffers = lappend(buffers, buffer);
		}
		appendStringInfoString(buffer, placementCommand->command);
		if (buffer->len > 0 && buffer->data[buffer->len - 1] != '\n')
			appendStringInfoString(buffer, ";\n");
	}
	if (nodeIds == NIL)
		return;

	foreach(cell, nodeIds)
	{
		int32		nodeId = lfirst_int(cell);

		if (NodeHasOtherConnectionInTransaction(nodeId, 0))
		{
			WorkerNode *node = GetWorkerNode(nodeId);

			ereport(ERROR,
					(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
					 errmsg("cannot change distributed tables on node %s:%d after a "
							"parallel operation in the same transaction",
							node->host, node->port),
					 errdetail("An earlier command of this transaction (for example a "
							   "COPY) used several connections to the node, and schema "
							   "changes run on one of them."),
					 errhint("Run the schema change in its own transaction, or before "
							 "the other commands.")));
		}
	}
	foreach(cell, buffers)
		commands = lappend(commands, ((StringInfo) lfirst(cell))->data);
	ExecuteOnNodesInTransaction(nodeIds, commands);
}

/*
 * CheckTableChanges refuses changes shards cannot follow (see file header).
 */
static void
CheckTableChanges(TableSchemaState *before, TableSchemaState *after)
{
	DistTableCacheEntry *entry = GetDistTableCacheEntry(after->relid);
	ListCell   *cell;

	if (entry->method == DISTRIBUTE_BY_HASH)
	{
		AttrNumber	distAttnum = entry->distAttnum;
		ColumnState *old = &before->columns[distAttnum - 1];
		ColumnState *new = &after->columns[distAttnum - 1];

		if (new->dropped)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot drop distribution column \"%s\" of table \"%s\"",
							old->name, after->relname),
					 errdetail("The rows are placed in shards by this column."),
					 errhint("Use undistribute_table() first.")));
		if (new->type != old->type || new->typmod != old->typmod ||
			new->collation != old->collation)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot change the type of distribution column \"%s\" of table \"%s\"",
							old->name, after->relname),
					 errdetail("The shard of each row is computed from the value of "
							   "this column in its type; a new type would move rows "
							   "between shards."),
					 errhint("Use undistribute_table(), change the type, and distribute "
							 "the table again.")));

		foreach(cell, after->indexes)
		{
			IndexState *index = lfirst(cell);
			HeapTuple	tuple;
			bool		unique;

			if (FindIndex(before->indexes, index->oid) != NULL)
				continue;
			tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(index->oid));
			unique = ((Form_pg_index) GETSTRUCT(tuple))->indisunique ||
				((Form_pg_index) GETSTRUCT(tuple))->indisexclusion;
			ReleaseSysCache(tuple);
			if (unique && !IndexContainsColumn(index->oid, distAttnum))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot create unique index or constraint \"%s\" on table \"%s\"",
								index->name, after->relname),
						 errdetail("A unique index or constraint on a distributed table must "
								   "contain the distribution column \"%s\": each shard can "
								   "only enforce uniqueness among its own rows.",
								   new->name),
						 errhint("Add column \"%s\" to the index or constraint, or create a "
								 "globally unique index with shardext_create_global_index(table, "
								 "columns, is_unique => true).", new->name)));
		}
	}

	foreach(cell, after->constraints)
	{
		ConstraintState *constraint = lfirst(cell);

		if (constraint->contype == CONSTRAINT_FOREIGN &&
			FindConstraint(before->constraints, constraint->oid) == NULL)
			CheckForeignKeyAllowed(constraint->oid);
	}
}

/*
 * RelatedDistributedTables returns relid and the distributed tables that
 * reference it or that it references by foreign key: a change of one (a
 * dropped primary key, CASCADE) may change the others.
 */
List *
RelatedDistributedTables(Oid relid)
{
	List	   *result = list_make1_oid(relid);
	Relation	conRel = table_open(ConstraintRelationId, AccessShareLock);
	SysScanDesc scan;
	HeapTuple	tuple;

	scan = systable_beginscan(conRel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_constraint con = (Form_pg_constraint) GETSTRUCT(tuple);
		Oid			other = InvalidOid;

		if (con->contype != CONSTRAINT_FOREIGN)
			continue;
		if (con->confrelid == relid)
			other = con->conrelid;
		else if (con->conrelid == relid)
			other = con->confrelid;
		if (OidIsValid(other) && IsDistributedTable(other))
			result = list_append_unique_oid(result, other);
	}
	systable_endscan(scan);
	table_close(conRel, AccessShareLock);
	return result;
}

/*
 * ShardChangeCommands returns the commands that bring one shard from the
 * before state to the after state.  Renames come first, so later commands
 * use the new names; then drops, column changes, and additions.
 */
static List *
ShardChangeCommands(TableSchemaState *before, TableSchemaState *after, int64 shardId,
					List *usingExpressions)
{
	List	   *commands = NIL;
	char	   *shardName;
	StringInfoData buf;

	commands = ShardMoveAndRenameCommands(before, after, shardId, &shardName);
	commands = list_concat(commands, ShardRemovedObjectCommands(before, after, shardId,
																shardName));
	initStringInfo(&buf);
	AppendColumnChanges(&buf, shardName, before, after, usingExpressions);
	if (buf.len > 0)
		commands = lappend(commands, buf.data);
	commands = list_concat(commands, ShardAddedObjectCommands(before, after, shardId,
															  shardName));
	if (before->owner != after->owner)
		commands = lappend(commands,
						   psprintf("ALTER TABLE %s OWNER TO %s", shardName,
									quote_identifier(GetUserNameFromId(after->owner, false))));
	return commands;
}

/*
 * ShardMoveAndRenameCommands: the shard follows its table to another schema
 * and to a new name.  *shardNameOut is the shard's (quoted, qualified) name
 * after them.
 */
static List *
ShardMoveAndRenameCommands(TableSchemaState *before, TableSchemaState *after, int64 shardId,
						   char **shardNameOut)
{
	List	   *commands = NIL;
	char	   *shardName = quote_qualified_identifier(before->schemaName,
													   ShardNameFromParts(before->relname, shardId));

	if (strcmp(before->schemaName, after->schemaName) != 0)
	{
		commands = lappend(commands, WorkerEnsureSchemaCommand(after->schemaName));
		commands = lappend(commands, psprintf("ALTER TABLE %s SET SCHEMA %s", shardName,
											  quote_identifier(after->schemaName)));
		shardName = quote_qualified_identifier(after->schemaName,
											   ShardNameFromParts(before->relname, shardId));
	}
	if (strcmp(before->relname, after->relname) != 0)
	{
		commands = lappend(commands,
						   psprintf("ALTER TABLE %s RENAME TO %s", shardName,
									quote_identifier(ShardNameFromParts(after->relname,
																		shardId))));
		shardName = quote_qualified_identifier(after->schemaName,
											   ShardNameFromParts(after->relname, shardId));
	}

	*shardNameOut = shardName;
	return commands;
}

/*
 * ShardRemovedObjectCommands drops (or renames) the shard's constraints and
 * indexes that went away (or were renamed) on the table.
 */
static List *
ShardRemovedObjectCommands(TableSchemaState *before, TableSchemaState *after, int64 shardId,
						   const char *shardName)
{
	List	   *commands = NIL;
	ListCell   *cell;

	foreach(cell, before->constraints)
	{
		ConstraintState *old = lfirst(cell);
		ConstraintState *new = FindConstraint(after->constraints, old->oid);
		bool		indexBacked = OidIsValid(old->indexOid);

		/* a dropped NOT NULL constraint (18) goes with its column's change */
		if (new == NULL && ConstraintIsNotNull(old->contype))
			continue;
		if (new == NULL)
			commands = lappend(commands,
							   psprintf("ALTER TABLE %s DROP CONSTRAINT IF EXISTS %s", shardName,
										quote_identifier(ShardConstraintName(old->name, indexBacked,
																			 shardId))));
		else if (strcmp(old->name, new->name) != 0)
			commands = lappend(commands,
							   psprintf("ALTER TABLE %s RENAME CONSTRAINT %s TO %s", shardName,
										quote_identifier(ShardConstraintName(old->name, indexBacked,
																			 shardId)),
										quote_identifier(ShardConstraintName(new->name, indexBacked,
																			 shardId))));
	}
	foreach(cell, before->indexes)
	{
		IndexState *old = lfirst(cell);
		IndexState *new = FindIndex(after->indexes, old->oid);

		if (old->constraintBacked)
			continue;
		if (new == NULL)
			commands = lappend(commands,
							   psprintf("DROP INDEX IF EXISTS %s",
										quote_qualified_identifier(after->schemaName,
																   ShardNameFromParts(old->name, shardId))));
		else if (strcmp(old->name, new->name) != 0 && !new->constraintBacked)
			commands = lappend(commands,
							   psprintf("ALTER INDEX %s RENAME TO %s",
										quote_qualified_identifier(after->schemaName,
																   ShardNameFromParts(old->name, shardId)),
										quote_identifier(ShardNameFromParts(new->name, shardId))));
	}
	return commands;
}

/*
 * ShardAddedObjectCommands adds the table's new indexes, then its new
 * constraints (which may use an existing index), and validates the ones
 * validated since.
 */
static List *
ShardAddedObjectCommands(TableSchemaState *before, TableSchemaState *after, int64 shardId,
						 const char *shardName)
{
	List	   *commands = NIL;
	ListCell   *cell;

	foreach(cell, after->indexes)
	{
		IndexState *new = lfirst(cell);

		if (new->constraintBacked || FindIndex(before->indexes, new->oid) != NULL)
			continue;
		commands = lappend(commands, ShardIndexCommand(new->oid, shardName, shardId, false));
	}
	foreach(cell, after->constraints)
	{
		ConstraintState *new = lfirst(cell);
		ConstraintState *old = FindConstraint(before->constraints, new->oid);
		IndexState *formerIndex;

		/* a new NOT NULL constraint (18) comes with its column's change */
		if (old == NULL && ConstraintIsNotNull(new->contype))
			continue;
		if (old != NULL)
		{
			if (!old->validated && new->validated)
				commands = lappend(commands,
								   psprintf("ALTER TABLE %s VALIDATE CONSTRAINT %s", shardName,
											quote_identifier(ShardConstraintName(new->name,
																				 OidIsValid(new->indexOid),
																				 shardId))));
			continue;
		}

		/* ADD CONSTRAINT ... USING INDEX turns an existing index into it */
		formerIndex = OidIsValid(new->indexOid) ?
			FindIndex(before->indexes, new->indexOid) : NULL;
		if (formerIndex != NULL && !formerIndex->constraintBacked)
			commands = lappend(commands,
							   psprintf("ALTER TABLE %s ADD CONSTRAINT %s %s USING INDEX %s",
										shardName,
										quote_identifier(ShardNameFromParts(new->name, shardId)),
										new->contype == CONSTRAINT_PRIMARY ? "PRIMARY KEY" : "UNIQUE",
										quote_identifier(ShardNameFromParts(formerIndex->name,
																			shardId))));
		else
			commands = lappend(commands, ShardConstraintCommand(new->oid, shardName, shardId));
	}
	return commands;
}

/*
 * AppendColumnChanges appends one ALTER TABLE with the column changes:
 * drops, renames, additions, type, default and NOT NULL changes.
 */
static void
AppendColumnChanges(StringInfo buf, const char *shardName, TableSchemaState *before,
					TableSchemaState *after, List *usingExpressions)
{
	Relation	rel = relation_open(after->relid, AccessShareLock);
	int			nestLevel = BeginSafeDeparse();
	StringInfoData actions;

	initStringInfo(&actions);
#define ADD_ACTION(...) \
	do { \
		if (actions.len > 0) \
			appendStringInfoString(&actions, ", "); \
		appendStringInfo(&actions, __VA_ARGS__); \
	} while (0)

	for (int i = 0; i < after->natts; i++)
	{
		ColumnState *new = &after->columns[i];
		ColumnState *old = i < before->natts ? &before->columns[i] : NULL;
		const char *name = quote_identifier(new->name);

		if (old == NULL || old->dropped)
		{
			StringInfoData definition;

			if (new->dropped)
				continue;
			initStringInfo(&definition);
			AppendColumnDefinition(&definition, rel, i + 1);
			ADD_ACTION("ADD COLUMN %s", definition.data);
			continue;
		}
		if (new->dropped)
		{
			ADD_ACTION("DROP COLUMN IF EXISTS %s", quote_identifier(old->name));
			continue;
		}
		if (new->type != old->type || new->typmod != old->typmod ||
			new->collation != old->collation)
		{
			char	   *usingExpression = UsingExpressionFor(usingExpressions, after->relid, i + 1);

			ADD_ACTION("ALTER COLUMN %s TYPE %s%s%s%s%s", quote_identifier(old->name),
					   format_type_extended(new->type, new->typmod,
											FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY),
					   OidIsValid(new->collation) ? " COLLATE " : "",
					   OidIsValid(new->collation) ? generate_collation_name(new->collation) : "",
					   usingExpression ? " USING " : "",
					   usingExpression ? usingExpression : "");
		}
		if ((old->defaultExpr == NULL) != (new->defaultExpr == NULL) ||
			(new->defaultExpr != NULL && strcmp(old->defaultExpr, new->defaultExpr) != 0))
		{
			if (new->defaultExpr != NULL)
				ADD_ACTION("ALTER COLUMN %s SET DEFAULT %s", quote_identifier(old->name),
						   new->defaultExpr);
			else
				ADD_ACTION("ALTER COLUMN %s DROP DEFAULT", quote_identifier(old->name));
		}
		if (old->notnull != new->notnull)
		{
			char	   *constraintName = new->notnull ?
				NotNullConstraintName(after->relid, i + 1) : NULL;

			/* 18 names the constraint: the shard's gets the table's name */
			if (constraintName != NULL)
				ADD_ACTION("ADD CONSTRAINT %s NOT NULL %s", quote_identifier(constraintName),
						   quote_identifier(old->name));
			else
				ADD_ACTION("ALTER COLUMN %s %s NOT NULL", quote_identifier(old->name),
						   new->notnull ? "SET" : "DROP");
		}
		if (strcmp(old->name, new->name) != 0)
		{
			/* RENAME cannot share an ALTER TABLE with other actions */
			if (actions.len > 0)
				appendStringInfo(buf, "ALTER TABLE %s %s;\n", shardName, actions.data);
			resetStringInfo(&actions);
			appendStringInfo(buf, "ALTER TABLE %s RENAME COLUMN %s TO %s;\n", shardName,
							 quote_identifier(old->name), name);
		}
	}
#undef ADD_ACTION
	if (actions.len > 0)
		appendStringInfo(buf, "ALTER TABLE %s %s", shardName, actions.data);
	EndSafeDeparse(nestLevel);
	relation_close(rel, AccessShareLock);
}

static ConstraintState *
FindConstraint(List *constraints, Oid oid)
{
	ListCell   *cell;

	foreach(cell, constraints)
	{
		if (((ConstraintState *) lfirst(cell))->oid == oid)
			return lfirst(cell);
	}
	return NULL;
}

static IndexState *
FindIndex(List *indexes, Oid oid)
{
	ListCell   *cell;

	foreach(cell, indexes)
	{
		if (((IndexState *) lfirst(cell))->oid == oid)
			return lfirst(cell);
	}
	return NULL;
}

/* does the index have the column among its key columns? */
static bool
IndexContainsColumn(Oid indexOid, AttrNumber attnum)
{
	HeapTuple	tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexOid));
	Form_pg_index index = (Form_pg_index) GETSTRUCT(tuple);
	bool		found = false;

	for (int i = 0; i < index->indnkeyatts; i++)
	{
		if (index->indkey.values[i] == attnum)
			found = true;
	}
	ReleaseSysCache(tuple);
	return found;
}

static char *
UsingExpressionFor(List *usingExpressions, Oid relid, AttrNumber attnum)
{
	ListCell   *cell;

	foreach(cell, usingExpressions)
	{
		UsingExpression *using = lfirst(cell);

		if (using->relid == relid && using->attnum == attnum)
			return using->expression;
	}
	return NULL;
}

/*
 * MakeUsingExpression records a deparsed USING expression (see
 * ddl_commands.c, which analyses it before the command runs).
 */
void *
MakeUsingExpression(Oid relid, AttrNumber attnum, char *expression)
{
	UsingExpression *using = palloc(sizeof(UsingExpression));

	using->relid = relid;
	using->attnum = attnum;
	using->expression = expression;
	return using;
}
