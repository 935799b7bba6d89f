/*-------------------------------------------------------------------------
 *
 * vacuum_commands.c
 *	  VACUUM, ANALYZE and REINDEX of distributed and reference tables reach
 *	  their shards.
 *
 * The command runs on the coordinator's table as usual, then the same
 * command, with the same options (and columns), on every shard placement:
 * outside remote transactions (VACUUM cannot run in one), one shard at a
 * time per node and the nodes in parallel.  A VACUUM or ANALYZE without a
 * table list stays local: each node's own autovacuum and maintenance see
 * to its whole database.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "shardext/ddl.h"
#include "shardext/metadata.h"

typedef struct VacuumShardArgs
{
	const char *command;		/* "VACUUM (...)" or "ANALYZE (...)" */
	List	   *columns;		/* String nodes, or NIL */
} VacuumShardArgs;

static char *VacuumCommandPrefix(VacuumStmt *stmt);
static void AppendOptionList(StringInfo buf, List *options);
static char *VacuumShardCommand(Oid relid, int64 shardId, void *arg);
static char *ReindexShardCommand(Oid relid, int64 shardId, void *arg);

/*
 * VacuumShardCommands returns the commands that VACUUM or ANALYZE the
 * shards of the distributed and reference tables a statement names, or
 * NIL when it names none.
 */
List *
VacuumShardCommands(VacuumStmt *stmt)
{
	List	   *commands = NIL;
	char	   *prefix = NULL;
	ListCell   *cell;

	foreach(cell, stmt->rels)
	{
		VacuumRelation *rel = lfirst(cell);
		Oid			relid;
		VacuumShardArgs *args;

		if (rel->relation == NULL)
			continue;
		relid = RangeVarGetRelid(rel->relation, NoLock, true);
		if (!OidIsValid(relid) || !IsDistributedTable(relid))
			continue;
		if (prefix == NULL)
			prefix = VacuumCommandPrefix(stmt);
		args = palloc(sizeof(VacuumShardArgs));
		args->command = prefix;
		args->columns = rel->va_cols;
		commands = list_concat(commands,
							   ShardPlacementCommands(relid, VacuumShardCommand, args));
	}
	return commands;
}

/* "VACUUM (option value, ...)" of the statement, ready for a table name */
static char *
VacuumCommandPrefix(VacuumStmt *stmt)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, stmt->is_vacuumcmd ? "VACUUM" : "ANALYZE");
	AppendOptionList(&buf, stmt->options);
	return buf.data;
}

/* appends " (option value, ...)" when there are options */
static void
AppendOptionList(StringInfo buf, List *options)
{
	ListCell   *cell;

	foreach(cell, options)
	{
		DefElem    *option = lfirst(cell);

		appendStringInfoString(buf, cell == list_head(options) ? " (" : ", ");
		appendStringInfoString(buf, quote_identifier(option->defname));
		if (option->arg == NULL)
			continue;
		if (IsA(option->arg, Integer) || IsA(option->arg, Float) || IsA(option->arg, Boolean))
			appendStringInfo(buf, " %s", defGetString(option));
		else
			appendStringInfo(buf, " %s", quote_literal_cstr(defGetString(option)));
	}
	if (options != NIL)
		appendStringInfoChar(buf, ')');
}

static char *
VacuumShardCommand(Oid relid, int64 shardId, void *arg)
{
	VacuumShardArgs *args = arg;
	StringInfoData buf;
	ListCell   *cell;

	initStringInfo(&buf);
	appendStringInfo(&buf, "%s %s", args->command, QualifiedShardName(relid, shardId));
	foreach(cell, args->columns)
	{
		appendStringInfoString(&buf, cell == list_head(args->columns) ? " (" : ", ");
		appendStringInfoString(&buf, quote_identifier(strVal(lfirst(cell))));
	}
	if (args->columns != NIL)
		appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * ReindexShardCommands returns the commands that REINDEX the shards of a
 * REINDEX TABLE or REINDEX INDEX of a distributed or reference table, or
 * NIL for every other REINDEX.
 */
List *
ReindexShardCommands(ReindexStmt *stmt)
{
	Oid			relid;
	Oid			indexOid = InvalidOid;
	StringInfo	prefix = makeStringInfo();

	if (stmt->relation == NULL ||
		(stmt->kind != REINDEX_OBJECT_TABLE && stmt->kind != REINDEX_OBJECT_INDEX))
		return NIL;
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (OidIsValid(relid) && stmt->kind == REINDEX_OBJECT_INDEX)
	{
		indexOid = relid;
		relid = get_rel_relkind(indexOid) == RELKIND_INDEX ?
			IndexGetRelation(indexOid, false) : InvalidOid;
	}
	if (!OidIsValid(relid) || !IsDistributedTable(relid))
		return NIL;

	appendStringInfoString(prefix, "REINDEX");
	AppendOptionList(prefix, stmt->params);
	appendStringInfoString(prefix, OidIsValid(indexOid) ? " INDEX " : " TABLE ");
	return ShardPlacementCommands(relid, ReindexShardCommand,
								  list_make2(prefix->data, OidIsValid(indexOid) ?
											 (void *) &indexOid : NULL));
}

/* arg: the command up to the name, and the index or NULL for the table */
static char *
ReindexShardCommand(Oid relid, int64 shardId, void *arg)
{
	const char *prefix = linitial((List *) arg);
	Oid		   *indexOid = lsecond((List *) arg);

	if (indexOid == NULL)
		return psprintf("%s%s", prefix, QualifiedShardName(relid, shardId));
	return psprintf("%s%s", prefix,
					quote_qualified_identifier(get_namespace_name(get_rel_namespace(*indexOid)),
											   ShardNameFromParts(get_rel_name(*indexOid),
																  shardId)));
}
