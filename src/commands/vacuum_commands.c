/*-------------------------------------------------------------------------
 *
 * vacuum_commands.c
 *	  VACUUM and ANALYZE of distributed and reference tables reach their
 *	  shards.
 *
 * The command runs on the coordinator's table as usual, then the same
 * command, with the same options and columns, on every shard placement:
 * outside remote transactions (VACUUM cannot run in one), one shard at a
 * time per node and the nodes in parallel.  A VACUUM or ANALYZE without a
 * table list stays local: each node's own autovacuum and maintenance see
 * to its whole database.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
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
static char *VacuumShardCommand(Oid relid, int64 shardId, void *arg);

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
	ListCell   *cell;

	initStringInfo(&buf);
	appendStringInfoString(&buf, stmt->is_vacuumcmd ? "VACUUM" : "ANALYZE");
	foreach(cell, stmt->options)
	{
		DefElem    *option = lfirst(cell);

		appendStringInfoString(&buf, cell == list_head(stmt->options) ? " (" : ", ");
		appendStringInfoString(&buf, quote_identifier(option->defname));
		if (option->arg == NULL)
			continue;
		if (IsA(option->arg, Integer) || IsA(option->arg, Float) || IsA(option->arg, Boolean))
			appendStringInfo(&buf, " %s", defGetString(option));
		else
			appendStringInfo(&buf, " %s", quote_literal_cstr(defGetString(option)));
	}
	if (stmt->options != NIL)
		appendStringInfoChar(&buf, ')');
	return buf.data;
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
