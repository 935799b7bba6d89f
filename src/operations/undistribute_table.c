/*-------------------------------------------------------------------------
 *
 * undistribute_table.c
 *	  undistribute_table(): bring every row of a distributed or reference
 *	  table back into the local table and drop its shards, atomically.
 *
 * Each shard is read with COPY ... TO STDOUT from one placement and fed to
 * the local table through COPY FROM's data source callback, so rows stream
 * without being materialised and local constraints and triggers apply.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/heap.h"
#include "commands/copy.h"
#include "miscadmin.h"
#include "parser/parse_relation.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "shardext/cdc.h"
#include "shardext/connection.h"
#include "shardext/deparser.h"
#include "shardext/global_index.h"
#include "shardext/metadata.h"
#include "shardext/operations.h"
#include "shardext/pg_compat.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"

PG_FUNCTION_INFO_V1(undistribute_table);

/* the remote COPY that the data source callback is reading from */
typedef struct RemoteCopySource
{
	NodeConnection *conn;
	char	   *pending;		/* libpq buffer not yet handed to COPY */
	int			pendingLength;
	int			pendingOffset;
	bool		done;
} RemoteCopySource;

static RemoteCopySource *currentSource = NULL;

static int	ReadFromRemoteCopy(void *outbuf, int minread, int maxread);
static void CopyShardToLocal(Relation rel, ShardInterval *shard);
static void EnsureNoForeignKeys(Relation rel);

Datum
undistribute_table(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Relation	rel;
	DistTableCacheEntry *entry;
	List	   *nodeIds = NIL;
	List	   *commands = NIL;
	char	   *schemaName;
	char	   *relname;
	ShardInterval *shards;
	int			shardCount;

	rel = table_open(relid, AccessExclusiveLock);
	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, RelationGetRelationName(rel));

	entry = GetDistTableCacheEntry(relid);
	if (entry == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is not distributed", RelationGetRelationName(rel))));

	EnsureNoForeignKeys(rel);
	if (OidIsValid(entry->globalIndexBase))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is the index table of a global index",
						RelationGetRelationName(rel)),
				 errhint("Use shardext_drop_global_index() to drop it.")));
	/* a local table has no global indexes: they go first */
	DropGlobalIndexesOfTable(relid);
	entry = GetDistTableCacheEntry(relid);

	schemaName = get_namespace_name(RelationGetNamespace(rel));
	relname = pstrdup(RelationGetRelationName(rel));
	shardCount = entry->shardCount;
	shards = palloc(shardCount * sizeof(ShardInterval));
	memcpy(shards, entry->shards, shardCount * sizeof(ShardInterval));

	for (int i = 0; i < shardCount; i++)
	{
		CopyShardToLocal(rel, &shards[i]);
		for (int j = 0; j < shards[i].placementCount; j++)
		{
			int32		nodeId = shards[i].placementNodeIds[j];
			char	   *drop = ShardDropCommand(schemaName, relname, shards[i].shardId);
			int			position = -1;
			ListCell   *cell;

			foreach(cell, nodeIds)
			{
				if (lfirst_int(cell) == nodeId)
					position = foreach_current_index(cell);
			}
			if (position < 0)
			{
				nodeIds = lappend_int(nodeIds, nodeId);
				commands = lappend(commands, drop);
			}
			else
			{
				ListCell   *commandCell = list_nth_cell(commands, position);

				lfirst(commandCell) = psprintf("%s;\n%s", (char *) lfirst(commandCell), drop);
			}
		}
	}

	CdcTablesDropped(list_make1_oid(relid));
	DeleteDistTable(relid);
	ExecuteOnNodesInTransaction(nodeIds, commands);
	table_close(rel, NoLock);

	PG_RETURN_VOID();
}

/*
 * EnsureNoForeignKeys refuses tables in foreign keys: the rows coming back
 * would be checked against tables whose rows stay in shards (or the other
 * way round).
 */
static void
EnsureNoForeignKeys(Relation rel)
{
	if (RelationGetFKeyList(rel) != NIL ||
		heap_truncate_find_FKs(list_make1_oid(RelationGetRelid(rel))) != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot undistribute table \"%s\" because it has foreign keys",
						RelationGetRelationName(rel)),
				 errdetail("The foreign keys connect it to tables whose rows stay in shards."),
				 errhint("Drop the foreign keys first, and add them again afterwards.")));
}

/*
 * CopyShardToLocal appends the rows of one shard (read from its first
 * placement) to the local table.
 */
static void
CopyShardToLocal(Relation rel, ShardInterval *shard)
{
	NodeConnection *conn = GetNodeConnection(shard->placementNodeIds[0]);
	char	   *columns = ColumnListString(RelationGetRelid(rel));
	char	   *command = psprintf("COPY %s %s TO STDOUT",
								   QualifiedShardName(RelationGetRelid(rel), shard->shardId),
								   columns);
	RemoteCopySource source;
	CopyFromState copyState;
	List	   *columnNames = NIL;
	TupleDesc	desc = RelationGetDescr(rel);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		if (!attr->attisdropped && !attr->attgenerated)
			columnNames = lappend(columnNames, makeString(pstrdup(NameStr(attr->attname))));
	}

	RemoteTransactionBegin(conn);
	BeginRemoteCopy(conn, command, PGRES_COPY_OUT);

	memset(&source, 0, sizeof(source));
	source.conn = conn;
	currentSource = &source;
	PG_TRY();
	{
		/* COPY FROM needs a range table holding the target, as DoCopy builds */
		ParseState *pstate = make_parsestate(NULL);
		ParseNamespaceItem *nsitem = addRangeTableEntryForRelation(pstate, rel,
																   RowExclusiveLock,
																   NULL, false, false);

		NsItemRequirePermissions(nsitem, ACL_INSERT);
		copyState = BeginCopyFrom(pstate, rel, NULL, NULL, false, ReadFromRemoteCopy,
								  columnNames, NIL);
		CopyFrom(copyState);
		EndCopyFrom(copyState);
	}
	PG_FINALLY();
	{
		currentSource = NULL;
		if (source.pending != NULL)
			PQfreemem(source.pending);
	}
	PG_END_TRY();

	/* the COPY's own result */
	PQclear(FinishRemoteQuery(conn, command));
}

/*
 * ReadFromRemoteCopy is COPY FROM's data source: it hands over the rows of
 * the remote COPY TO STDOUT, waiting for them interruptibly.  Returns 0 at
 * the end of the data.
 */
static int
ReadFromRemoteCopy(void *outbuf, int minread, int maxread)
{
	RemoteCopySource *source = currentSource;
	int			copied = 0;

	while (copied < minread && !source->done)
	{
		if (source->pending == NULL)
		{
			char	   *buffer = NULL;
			int			length = PQgetCopyData(source->conn->pgConn, &buffer, 1);

			if (length == 0)
			{
				WaitForRemoteSocket(source->conn, false);
				continue;
			}
			if (length == -1)
			{
				source->done = true;
				break;
			}
			if (length == -2)
				ReportConnectionError(source->conn, ERROR);
			source->pending = buffer;
			source->pendingLength = length;
			source->pendingOffset = 0;
		}

		{
			int			available = source->pendingLength - source->pendingOffset;
			int			take = Min(available, maxread - copied);

			memcpy((char *) outbuf + copied, source->pending + source->pendingOffset, take);
			copied += take;
			source->pendingOffset += take;
			if (source->pendingOffset == source->pendingLength)
			{
				PQfreemem(source->pending);
				source->pending = NULL;
			}
		}
		if (copied >= maxread)
			break;
	}
	return copied;
}
