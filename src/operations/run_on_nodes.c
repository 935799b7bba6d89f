/*-------------------------------------------------------------------------
 *
 * run_on_nodes.c
 *	  shardext_run_on_nodes(command) and shardext_run_on_shards(table,
 *	  command): run a command on every registered node, or on every shard
 *	  placement of a table, outside the local transaction, and report what
 *	  each returned.
 *
 * Meant for administration and for checking the workers' state; it uses
 * fresh connections that commit on their own, so it sees what is
 * committed, not what the calling transaction changed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

#include "shardext/connection.h"
#include "shardext/metadata.h"
#include "shardext/privileges.h"
#include "shardext/remote_command.h"

PG_FUNCTION_INFO_V1(shardext_run_on_nodes);
PG_FUNCTION_INFO_V1(shardext_run_on_shards);

static char *RunOnConnection(NodeConnection *conn, const char *command, bool *success);
static char *ReplaceShardPlaceholder(const char *command, const char *shardName);

/*
 * RunOnNodeDirect runs one command on a node over a new connection and
 * returns the first value of its last result, or the error message;
 * *success says which.  The connection is closed on every path.
 */
static char *
RunOnNodeDirect(WorkerNode *node, const char *command, bool *success)
{
	NodeConnection *conn = OpenDedicatedConnection(node->host, node->port, false, false);
	char	   *value;

	if (conn == NULL)
	{
		*success = false;
		return psprintf("could not connect to node %s:%d", node->host, node->port);
	}
	PG_TRY();
	{
		value = RunOnConnection(conn, command, success);
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(conn);
	}
	PG_END_TRY();
	return value;
}

/*
 * RunOnConnection runs a command on an open connection (see
 * RunOnNodeDirect): interruptibly, bounded by statement_timeout.
 */
static char *
RunOnConnection(NodeConnection *conn, const char *command, bool *success)
{
	char	   *failure = NULL;
	PGresult   *result = TryRemoteQuery(conn, command, 0, NULL, 0, &failure);
	char	   *value;

	*success = (result != NULL);
	if (result == NULL)
		return failure;
	if (PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) > 0 &&
		PQnfields(result) > 0)
		value = PQgetisnull(result, 0, 0) ? NULL : pstrdup(PQgetvalue(result, 0, 0));
	else
		value = pstrdup(PQcmdStatus(result));
	PQclear(result);
	return value;
}

Datum
shardext_run_on_nodes(PG_FUNCTION_ARGS)
{
	char	   *command = text_to_cstring(PG_GETARG_TEXT_PP(0));
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ListCell   *cell;

	EnsureShardextAdmin("shardext_run_on_nodes");
	InitMaterializedSRF(fcinfo, 0);
	foreach(cell, WorkerNodeList(false))
	{
		WorkerNode *node = lfirst(cell);
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};
		bool		success;
		char	   *value = RunOnNodeDirect(node, command, &success);

		values[0] = Int32GetDatum(node->nodeId);
		values[1] = CStringGetTextDatum(node->host);
		values[2] = Int32GetDatum(node->port);
		values[3] = BoolGetDatum(success);
		if (value == NULL)
			nulls[4] = true;
		else
			values[4] = CStringGetTextDatum(value);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		CHECK_FOR_INTERRUPTS();
	}
	return (Datum) 0;
}

/*
 * shardext_run_on_shards(table_name regclass, command text): runs the
 * command once per shard placement, with each %s in it replaced by the
 * quoted, qualified shard name.
 */
Datum
shardext_run_on_shards(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	char	   *command = text_to_cstring(PG_GETARG_TEXT_PP(1));
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DistTableCacheEntry *entry;
	ListCell   *cell;

	EnsureShardextAdmin("shardext_run_on_shards");
	entry = GetDistTableCacheEntry(relid);
	if (entry == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("table \"%s\" is not distributed", get_rel_name(relid))));

	InitMaterializedSRF(fcinfo, 0);
	foreach(cell, WorkerNodeList(false))
	{
		WorkerNode *node = lfirst(cell);
		NodeConnection *volatile conn = NULL;

		PG_TRY();
		{
			for (int i = 0; i < entry->shardCount; i++)
			{
				ShardInterval *shard = &entry->shards[i];
				Datum		values[4];
				bool		nulls[4] = {false, false, false, false};
				bool		success = false;
				char	   *value;
				bool		placed = false;

				for (int j = 0; j < shard->placementCount; j++)
					placed |= (shard->placementNodeIds[j] == node->nodeId);
				if (!placed)
					continue;

				if (conn == NULL)
					conn = OpenDedicatedConnection(node->host, node->port, false, true);
				value = RunOnConnection(conn,
										ReplaceShardPlaceholder(command,
																QualifiedShardName(relid, shard->shardId)),
										&success);
				values[0] = Int64GetDatum(shard->shardId);
				values[1] = Int32GetDatum(node->nodeId);
				values[2] = BoolGetDatum(success);
				if (value == NULL)
					nulls[3] = true;
				else
					values[3] = CStringGetTextDatum(value);
				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
				CHECK_FOR_INTERRUPTS();
			}
		}
		PG_FINALLY();
		{
			CloseDedicatedConnection(conn);
		}
		PG_END_TRY();
	}
	return (Datum) 0;
}

/* ReplaceShardPlaceholder replaces every %s of command by shardName */
static char *
ReplaceShardPlaceholder(const char *command, const char *shardName)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (const char *p = command; *p; p++)
	{
		if (p[0] == '%' && p[1] == 's')
		{
			appendStringInfoString(&buf, shardName);
			p++;
		}
		else
			appendStringInfoChar(&buf, *p);
	}
	return buf.data;
}
