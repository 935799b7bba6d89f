/*-------------------------------------------------------------------------
 *
 * concurrent_index.c
 *	  CREATE INDEX CONCURRENTLY and DROP INDEX CONCURRENTLY on distributed
 *	  and reference tables.
 *
 * The command runs on the coordinator's (empty) table as PostgreSQL runs
 * it, then on every shard placement with CONCURRENTLY as well, so writes
 * to the shards go on while the indexes are built.  CONCURRENTLY cannot
 * run inside a transaction, so the shard commands run one at a time per
 * node, outside remote transactions, with the nodes in parallel.
 *
 * Like PostgreSQL's own, such a command is not atomic: when a shard fails
 * (a duplicate under a unique index, a cancel), the coordinator's index
 * and the shard indexes built so far remain, the failed one INVALID, as
 * PostgreSQL leaves it.  DROP INDEX removes them all (on the shards with
 * IF EXISTS), after which the command can be run again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "shardext/connection.h"
#include "shardext/ddl.h"
#include "shardext/deparser.h"
#include "shardext/metadata.h"
#include "shardext/remote_command.h"

static char *ConcurrentShardIndexCommand(Oid relid, int64 shardId, void *arg);
static char *ConcurrentShardIndexDrop(Oid relid, int64 shardId, void *arg);

/* the indexes a table has now, to find the one a CREATE INDEX adds */
List *
TableIndexes(Oid relid)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	List	   *indexes = list_copy(RelationGetIndexList(rel));

	relation_close(rel, AccessShareLock);
	return indexes;
}

/*
 * CreateShardIndexesConcurrently builds, with CREATE INDEX CONCURRENTLY on
 * every shard placement, the index that the coordinator's CREATE INDEX
 * CONCURRENTLY just added to relid (none when IF NOT EXISTS found one).
 */
void
CreateShardIndexesConcurrently(Oid relid, List *indexesBefore)
{
	List	   *indexes;
	ListCell   *cell;

	/* as PostgreSQL's own build does: writes go on, schema changes wait */
	LockRelationOid(relid, ShareUpdateExclusiveLock);
	indexes = TableIndexes(relid);
	foreach(cell, indexes)
	{
		Oid			indexOid = lfirst_oid(cell);

		if (!list_member_oid(indexesBefore, indexOid))
		{
			List	   *commands = ShardPlacementCommands(relid, ConcurrentShardIndexCommand,
														  &indexOid);

			RunPlacementCommandsOneAtATime(commands);
		}
	}
}

/* CREATE INDEX CONCURRENTLY of index arg for one shard of relid */
static char *
ConcurrentShardIndexCommand(Oid relid, int64 shardId, void *arg)
{
	return ShardIndexCommand(*(Oid *) arg, QualifiedShardName(relid, shardId), shardId, true);
}

/* DROP INDEX CONCURRENTLY of index arg for one shard */
static char *
ConcurrentShardIndexDrop(Oid relid, int64 shardId, void *arg)
{
	Oid			indexOid = *(Oid *) arg;

	return psprintf("DROP INDEX CONCURRENTLY IF EXISTS %s",
					quote_qualified_identifier(get_namespace_name(get_rel_namespace(indexOid)),
											   ShardNameFromParts(get_rel_name(indexOid),
																  shardId)));
}

/*
 * DropShardIndexCommands returns, before a DROP INDEX CONCURRENTLY of an
 * index of relid runs, what drops the index on every shard placement.
 */
List *
DropShardIndexCommands(Oid relid, Oid indexOid)
{
	return ShardPlacementCommands(relid, ConcurrentShardIndexDrop, &indexOid);
}

/*
 * RunPlacementCommandsOneAtATime runs each command on its node outside a
 * remote transaction: in rounds, each round one command on every node that
 * has one left, the nodes in parallel.  The first failure is raised.
 */
void
RunPlacementCommandsOneAtATime(List *placementCommands)
{
	List	   *pending = list_copy(placementCommands);

	while (pending != NIL)
	{
		List	   *nodeIds = NIL;
		List	   *connections = NIL;
		List	   *commands = NIL;
		List	   *later = NIL;
		ListCell   *cell;

		foreach(cell, pending)
		{
			PlacementCommand *placementCommand = lfirst(cell);

			if (list_member_int(nodeIds, placementCommand->nodeId))
			{
				later = lappend(later, placementCommand);
				continue;
			}
			nodeIds = lappend_int(nodeIds, placementCommand->nodeId);
			connections = lappend(connections, GetNodeConnection(placementCommand->nodeId));
			commands = lappend(commands, placementCommand->command);
		}
		ExecuteRemoteCommandsInParallel(connections, commands);
		pending = later;
	}
}
