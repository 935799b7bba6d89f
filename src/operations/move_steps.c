/*-------------------------------------------------------------------------
 *
 * move_steps.c
 *	  The remote work of an online shard move or split up to the moment
 *	  the target follows the source: setting up both sides, the bulk copy,
 *	  the indexes and the subscription.
 *
 * Online: the source gets a publication of the shard group (and, for a
 * table without a key, REPLICA IDENTITY FULL for the duration), a logical
 * replication slot whose exported snapshot the bulk copy reads, so that the
 * copy and the change stream meet exactly; the target gets the tables
 * without indexes, the copy (streamed through this backend), then the
 * indexes, then a subscription that applies the changes made since the
 * snapshot.  Splits use shardext's own output plugin (split_decoder.c),
 * which sends each change to the half that holds the row.  What follows,
 * catching up, verification and the switch, is in move_cutover.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "commands/dbcommands.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "shardext/cdc.h"
#include "shardext/connection.h"
#include "shardext/deparser.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/privileges.h"
#include "shardext/remote_command.h"
#include "shardext/shard_move.h"

static void CopyOneTable(ShardMoveState *state, const char *copyOut, const char *copyIn);
static void CountCopiedRow(void *arg, int length);
static char *SubscriptionConninfo(ShardMoveState *state);
static void AppendSplitMapEntry(ShardMoveState *state, MoveShard *shard, StringInfo map);
static void AppendConninfoValue(StringInfo buf, const char *keyword, const char *value);
static void AppendOwnerCommand(StringInfo command, Oid relid, const char *shardName);
static char *MoveCreateSlotSnapshot(ShardMoveState *state);
static char *SplitMapText(ShardMoveState *state);

/* SplitHalfRange returns the hash range of a piece of a split (0: the first) */
void
SplitHalfRange(ShardMoveState *state, int half, int32 *lo, int32 *hi)
{
	*lo = state->pieces.hashMin[half];
	*hi = state->pieces.hashMax[half];
}

/* BareColumnList is the shard's column list without its parentheses */
char *
BareColumnList(MoveShard *shard)
{
	return pnstrdup(shard->columnList + 1, strlen(shard->columnList) - 2);
}

/*
 * MoveSetUpSource prepares the source for logical replication: REPLICA
 * IDENTITY FULL for tables that have no key (UPDATE and DELETE would fail
 * on a published table without one, and the change stream needs the old
 * rows), the tables of a split's halves (the real ones for a split in
 * place, empty stand-ins that name the halves otherwise), and the
 * publication.
 */
void
MoveSetUpSource(ShardMoveState *state)
{
	bool		split = state->operation == MOVE_OPERATION_SPLIT;
	StringInfoData tables;
	ListCell   *cell;

	initStringInfo(&tables);
	foreach(cell, state->shards)
	{
		MoveShard  *shard = lfirst(cell);

		if (shard->needsFullIdentity)
		{
			char		restore[2] = {shard->sourceIdentity, '\0'};

			AddCleanupRecord(state, state->source.nodeId, "replica_identity",
							 shard->shardName, 0, restore, "on_failure");
			ExecuteRemoteCommand(state->sourceConn,
								 psprintf("ALTER TABLE %s REPLICA IDENTITY FULL",
										  shard->shardName));
		}
		if (!split)
		{
			appendStringInfo(&tables, "%s, ", shard->shardName);
			continue;
		}

		for (int half = 0; half < state->pieces.count; half++)
		{
			StringInfoData create;

			AddCleanupRecord(state, state->source.nodeId, "table", shard->childNames[half],
							 shard->childIds[half], NULL,
							 state->inPlace ? "on_failure" : "always");
			initStringInfo(&create);
			appendStringInfo(&create, "%s;\n%s", WorkerCreateSchemaCommand(shard->relid),
							 ShardCreateTableCommand(shard->relid, shard->childIds[half]));

			/*
			 * pgoutput describes a half by its identity as of each change,
			 * and the half gets its key only after the copy: until then
			 * FULL identifies its rows (the subscriber finds them by its
			 * own key).  A half in place gets its identity back after.
			 */
			if (state->inPlace && shard->coordinatorIdentity != 'f')
				AddCleanupRecord(state, state->source.nodeId, "replica_identity",
								 shard->childNames[half], 0, "d", "always");
			appendStringInfo(&create, "ALTER TABLE %s REPLICA IDENTITY FULL;\n",
							 shard->childNames[half]);
			ExecuteRemoteCommand(state->sourceConn, create.data);
			appendStringInfo(&tables, "%s, ", shard->childNames[half]);
		}
	}

	AddCleanupRecord(state, state->source.nodeId, "marker",
					 psprintf(INT64_FORMAT, state->moveId), 0, NULL, "always");
	AddCleanupRecord(state, state->target.nodeId, "marker",
					 psprintf(INT64_FORMAT, state->moveId), 0, NULL, "always");
	AddCleanupRecord(state, state->source.nodeId, "publication", state->objectName, 0,
					 NULL, "always");
	ExecuteRemoteCommand(state->sourceConn,
						 psprintf("CREATE PUBLICATION %s FOR TABLE %s%s WHERE (move_id = "
								  INT64_FORMAT ")",
								  quote_identifier(state->objectName), tables.data,
								  split ? "shardext.move_marker_applied" :
								  "shardext.move_marker",
								  state->moveId));
}

/*
 * MoveSetUpTarget creates the target tables without their indexes (a split
 * in place created them on the source already).
 */
void
MoveSetUpTarget(ShardMoveState *state)
{
	StringInfoData command;
	ListCell   *cell;

	if (state->operation == MOVE_OPERATION_SPLIT && state->inPlace)
		return;

	initStringInfo(&command);
	appendStringInfo(&command, "%s;\n",
					 WorkerCreateSchemaCommand(((MoveShard *) linitial(state->shards))->relid));
	foreach(cell, state->shards)
	{
		MoveShard  *shard = lfirst(cell);

		if (state->operation == MOVE_OPERATION_MOVE)
		{
			AddCleanupRecord(state, state->target.nodeId, "table", shard->shardName,
							 shard->shardId, NULL, "on_failure");
			appendStringInfoString(&command, ShardCreateTableCommand(shard->relid,
																	 shard->shardId));
			AppendOwnerCommand(&command, shard->relid, shard->shardName);
			continue;
		}
		for (int half = 0; half < state->pieces.count; half++)
		{
			AddCleanupRecord(state, state->target.nodeId, "table", shard->childNames[half],
							 shard->childIds[half], NULL, "on_failure");
			appendStringInfoString(&command,
								   ShardCreateTableCommand(shard->relid, shard->childIds[half]));
			AppendOwnerCommand(&command, shard->relid, shard->childNames[half]);
		}
	}
	ExecuteRemoteCommand(state->targetConn, command.data);
}

/*
 * AppendOwnerCommand gives a new shard table its table's owner: the move
 * runs as an administrator, whose tables the owner could not use.
 */
static void
AppendOwnerCommand(StringInfo command, Oid relid, const char *shardName)
{
	Oid			owner = RelationOwner(relid);

	if (owner != GetUserId())
		appendStringInfo(command, ";\nALTER TABLE %s OWNER TO %s;\n", shardName,
						 quote_identifier(GetUserNameFromId(owner, false)));
}

/*
 * MoveCreateSlotSnapshot creates the replication slot on the source over a
 * replication connection and returns the name of the snapshot it exported.
 * That connection stays open: the snapshot, from which the copy reads,
 * lives until its next command.
 */
static char *
MoveCreateSlotSnapshot(ShardMoveState *state)
{
	PGresult   *result;
	char	   *snapshot;

	AddCleanupRecord(state, state->source.nodeId, "replication_slot", state->objectName,
					 0, NULL, "always");
	state->replication = OpenDedicatedConnection(state->source.host, state->source.port,
												 true, true);
	if (state->pluginLibraries != NULL)
	{
		StringInfoData set;
		char	   *copy = pstrdup(state->pluginLibraries);
		char	   *save = NULL;

		initStringInfo(&set);
		appendStringInfoString(&set, "SET output_plugin_libraries = ");
		for (char *name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save))
			appendStringInfo(&set, "%s%s", name == copy ? "" : ", ", quote_literal_cstr(name));
		ExecuteRemoteCommand(state->replication, set.data);
	}
	/* the slot keeps the split map of the session that creates it (split_decoder.c) */
	if (state->operation == MOVE_OPERATION_SPLIT)
		ExecuteRemoteCommand(state->replication,
							 psprintf("SET shardext.split_map = %s",
									  quote_literal_cstr(SplitMapText(state))));
	result = ExecuteRemoteQueryParams(state->replication,
									  psprintf("CREATE_REPLICATION_SLOT %s LOGICAL %s (SNAPSHOT 'export')",
											   quote_identifier(state->objectName),
											   state->operation == MOVE_OPERATION_SPLIT ?
											   "shardext" : "pgoutput"),
									  0, NULL);
	if (PQntuples(result) != 1 || PQnfields(result) < 3 || PQgetisnull(result, 0, 2))
	{
		PQclear(result);
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("node %s:%d did not export a snapshot for replication slot \"%s\"",
						state->source.host, state->source.port, state->objectName)));
	}
	snapshot = pstrdup(PQgetvalue(result, 0, 2));
	PQclear(result);
	return snapshot;
}

/*
 * CopyOneTable streams one table (or one half of it) from the source to the
 * target: COPY TO STDOUT there, COPY FROM STDIN here, row by row.
 */
static void
CopyOneTable(ShardMoveState *state, const char *copyOut, const char *copyIn)
{
	CopyBetweenNodes(state->sourceConn, copyOut, state->targetConn, copyIn,
					 CountCopiedRow, state);
}

/* counts a copied row, and records the progress now and then */
static void
CountCopiedRow(void *arg, int length)
{
	ShardMoveState *state = arg;

	state->rowsCopied++;
	state->bytesCopied += length;
	if ((state->rowsCopied & 1023) == 0)
	{
		CHECK_FOR_INTERRUPTS();
		ReportMoveProgress(state, false, -1);
	}
}

/*
 * MoveCopyData copies the rows of the shard group (a split: of each half)
 * from the source to the target in one repeatable read transaction on the
 * source; online, it reads the snapshot the slot exported.
 */
void
MoveCopyData(ShardMoveState *state, bool useSlotSnapshot)
{
	ListCell   *cell;
	bool		internalOrigin;

	/*
	 * Where change data capture publishes, the copy is internal data
	 * movement: a replication origin of the move's name marks it (see
	 * cdc_decoder.c); the subscription's cleanup drops the origin too.
	 */
	AddCleanupRecord(state, state->target.nodeId, "subscription", state->objectName, 0,
					 NULL, "always");
	internalOrigin = CdcBeginInternalWrites(state->targetConn, state->objectName);

	if (useSlotSnapshot)
	{
		char	   *snapshot = MoveCreateSlotSnapshot(state);

		ExecuteRemoteCommand(state->sourceConn,
							 psprintf("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
									  "SET TRANSACTION SNAPSHOT %s",
									  quote_literal_cstr(snapshot)));
		/* the copy holds the snapshot now; the slot lives on without us */
		CloseDedicatedConnection(state->replication);
		state->replication = NULL;
	}
	else
		ExecuteRemoteCommand(state->sourceConn,
							 "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");

	SetMovePhase(state, "copying");
	foreach(cell, state->shards)
	{
		MoveShard  *shard = lfirst(cell);

		if (state->operation == MOVE_OPERATION_MOVE)
		{
			CopyOneTable(state,
						 psprintf("COPY %s %s TO STDOUT", shard->shardName, shard->columnList),
						 psprintf("COPY %s %s FROM STDIN", shard->shardName, shard->columnList));
			continue;
		}
		for (int half = 0; half < state->pieces.count; half++)
		{
			int32		lo;
			int32		hi;

			SplitHalfRange(state, half, &lo, &hi);
			CopyOneTable(state,
						 psprintf("COPY (SELECT %s FROM %s WHERE "
								  "shardext.worker_hash_value(%s) BETWEEN %d AND %d) TO STDOUT",
								  BareColumnList(shard), shard->shardName,
								  shard->distColumn, lo, hi),
						 psprintf("COPY %s %s FROM STDIN", shard->childNames[half],
								  shard->columnList));
		}
	}
	ExecuteRemoteCommand(state->sourceConn, "COMMIT");
	if (internalOrigin)
		CdcEndInternalWrites(state->targetConn, state->objectName);
	ReportMoveProgress(state, true, -1);
}

/* which half of a split a foreign key of the other half references */
typedef struct SplitHalfLookup
{
	ShardMoveState *state;
	int			half;
} SplitHalfLookup;

/*
 * SplitHalfOf names, for a foreign key of a split's half, the same half of
 * the referenced (co-located) table: the catalog does not know the halves
 * yet.
 */
static int64
SplitHalfOf(Oid referencedRelid, void *arg)
{
	SplitHalfLookup *lookup = arg;
	ListCell   *cell;

	foreach(cell, lookup->state->shards)
	{
		MoveShard  *shard = lfirst(cell);

		if (shard->relid == referencedRelid)
			return shard->childIds[lookup->half];
	}
	elog(ERROR, "table %u is not co-located with the shard being split", referencedRelid);
	return 0;					/* keep compiler quiet */
}

/*
 * MoveBuildIndexes adds the primary keys, unique constraints and indexes to
 * the copied tables, then their foreign keys (which need the keys of the
 * tables they reference, co-located ones included), and analyzes them.
 */
void
MoveBuildIndexes(ShardMoveState *state)
{
	StringInfoData command;
	ListCell   *cell;
	bool		split = state->operation == MOVE_OPERATION_SPLIT;

	SetMovePhase(state, "building indexes");
	initStringInfo(&command);
	for (int pass = 0; pass < 2; pass++)
	{
		foreach(cell, state->shards)
		{
			MoveShard  *shard = lfirst(cell);

			for (int half = 0; half < (split ? state->pieces.count : 1); half++)
			{
				int64		shardId = split ? shard->childIds[half] : shard->shardId;
				SplitHalfLookup lookup = {state, half};

				if (pass == 0)
					appendStringInfoString(&command,
										   ShardCreateIndexCommands(shard->relid, shardId));
				else
				{
					appendStringInfoString(&command,
										   ShardCreateForeignKeyCommands(shard->relid, shardId,
																		 split ? SplitHalfOf : NULL,
																		 &lookup));
					appendStringInfo(&command, "ANALYZE %s;\n",
									 split ? shard->childNames[half] : shard->shardName);
				}
			}
		}
	}
	ExecuteRemoteCommand(state->targetConn, command.data);
}

/* appends keyword='value' to a libpq connection string, escaped */
static void
AppendConninfoValue(StringInfo buf, const char *keyword, const char *value)
{
	appendStringInfo(buf, "%s%s='", buf->len > 0 ? " " : "", keyword);
	for (const char *p = value; *p; p++)
	{
		if (*p == '\'' || *p == '\\')
			appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, *p);
	}
	appendStringInfoChar(buf, '\'');
}

/*
 * AppendSplitMapEntry appends the split_map entry of one shard of a split
 * (see split_decoder.c): the source's OID and distribution column number,
 * then each piece's OID and hash range, looked up on the source.
 */
static void
AppendSplitMapEntry(ShardMoveState *state, MoveShard *shard, StringInfo map)
{
	const char *params[2] = {shard->shardName, shard->distColumnName};
	char	   *value;

	value = ExecuteRemoteScalar(state->sourceConn,
								"SELECT pg_catalog.format('%s:%s', $1::regclass::oid, "
								"(SELECT attnum FROM pg_catalog.pg_attribute "
								"  WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped))",
								2, params);
	if (value == NULL || strstr(value, "::") != NULL || value[strlen(value) - 1] == ':')
		elog(ERROR, "could not map the pieces of shard " INT64_FORMAT, shard->shardId);
	appendStringInfo(map, "%s%s", map->len > 0 ? ";" : "", value);
	for (int piece = 0; piece < state->pieces.count; piece++)
	{
		const char *pieceParams[1] = {shard->childNames[piece]};

		value = ExecuteRemoteScalar(state->sourceConn, "SELECT $1::regclass::oid", 1,
									pieceParams);
		if (value == NULL)
			elog(ERROR, "could not map the pieces of shard " INT64_FORMAT, shard->shardId);
		appendStringInfo(map, ":%s:%d:%d", value, state->pieces.hashMin[piece],
						 state->pieces.hashMax[piece]);
	}
}

/*
 * SubscriptionConninfo is how the target connects to the source: the
 * node's registered address, our database and user, shardext.node_conninfo,
 * and for splits the map of the halves for the output plugin.
 */
static char *
SubscriptionConninfo(ShardMoveState *state)
{
	StringInfoData buf;

	initStringInfo(&buf);
	if (ShardextNodeConninfo != NULL && ShardextNodeConninfo[0] != '\0')
		appendStringInfo(&buf, "%s", ShardextNodeConninfo);
	AppendConninfoValue(&buf, "host", state->source.host);
	AppendConninfoValue(&buf, "port", psprintf("%d", state->source.port));
	AppendConninfoValue(&buf, "dbname", get_database_name(MyDatabaseId));
	AppendConninfoValue(&buf, "user", GetUserNameFromId(GetUserId(), false));
	AppendConninfoValue(&buf, "application_name", state->objectName);
	if (state->operation == MOVE_OPERATION_SPLIT)
		AppendConninfoValue(&buf, "options",
							psprintf("-c shardext.split_map=%s%s%s", SplitMapText(state),
									 state->pluginLibraries ? " -c output_plugin_libraries=" : "",
									 state->pluginLibraries ? state->pluginLibraries : ""));
	return buf.data;
}

/*
 * SplitMapText is the split map of the split's shards (split_decoder.c):
 * source:attnum:piece:lo:hi[:piece:lo:hi]...;... in relation OIDs of the
 * source.
 */
static char *
SplitMapText(ShardMoveState *state)
{
	StringInfoData map;
	ListCell   *cell;

	initStringInfo(&map);
	foreach(cell, state->shards)
		AppendSplitMapEntry(state, lfirst(cell), &map);
	return map.data;
}

/*
 * MoveStartReplication subscribes the target to the publication, starting
 * at the slot's snapshot (no initial copy: that is done).
 */
void
MoveStartReplication(ShardMoveState *state)
{
	AddCleanupRecord(state, state->target.nodeId, "subscription", state->objectName, 0,
					 NULL, "always");
	ExecuteRemoteCommand(state->targetConn,
						 psprintf("CREATE SUBSCRIPTION %s CONNECTION %s PUBLICATION %s "
								  "WITH (create_slot = false, slot_name = %s, copy_data = false, "
								  "enabled = true)",
								  quote_identifier(state->objectName),
								  quote_literal_cstr(SubscriptionConninfo(state)),
								  quote_identifier(state->objectName),
								  quote_literal_cstr(state->objectName)));
}
