/*-------------------------------------------------------------------------
 *
 * global_index_lookup.c
 *	  Choosing the shards of a query by a global index: WHERE email = $1 (or
 *	  = ANY / IN) on a table with a global index on email first asks the
 *	  index shard that holds the value which distribution values have it,
 *	  then the query runs on the shards of those values only.
 *
 * The index shard answers with the shards, not the distribution values:
 * the position of each value's hash among the shards' hash ranges (passed
 * as the array of their lower bounds), each once -- a value that many rows
 * have costs no more than one that few have.
 *
 * The lookup is a read like the query's own: inside the remote
 * transactions when the transaction has one (it sees its own writes) or
 * keeps a snapshot, otherwise with a fresh snapshot of the index shard's
 * node.  The query on the base shards still tests the condition itself,
 * so a lookup can only make it skip shards, never return wrong rows.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "shardext/distributed_executor.h"
#include "shardext/global_index.h"
#include "shardext/metadata.h"
#include "shardext/remote_sql.h"

/* what the row callback needs */
typedef struct LookupContext
{
	DistTableCacheEntry *anchor;
	bool	   *matches;
	int			found;
} LookupContext;

static GlobalIndex *IndexOfTable(Oid indexRelid);
static RemoteTask *LookupTask(GlobalIndex *index, DistTableCacheEntry *anchor,
							  ShardInterval *shard, bool any, Datum *values, int count);
static void NoteShard(RemoteTask *task, PGresult *row, void *arg);

/* the global index whose index table is indexRelid */
static GlobalIndex *
IndexOfTable(Oid indexRelid)
{
	DistTableCacheEntry *entry = GetDistTableCacheEntry(indexRelid);
	ListCell   *cell;

	if (entry != NULL && OidIsValid(entry->globalIndexBase))
	{
		foreach(cell, TableGlobalIndexes(entry->globalIndexBase))
		{
			GlobalIndex *index = lfirst(cell);

			if (index->indexRelid == indexRelid)
				return index;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("global index with index table %u no longer exists", indexRelid),
			 errhint("Run the statement again.")));
	return NULL;
}

/*
 * LookupTask: SELECT DISTINCT width_bucket(hash of the distribution value,
 * lower bounds of anchor's shards) FROM <index shard> WHERE <indexed
 * columns> = the values (any: the first column = ANY of an array of count
 * values).  Parameter 1 is the array of bounds.
 */
static RemoteTask *
LookupTask(GlobalIndex *index, DistTableCacheEntry *anchor, ShardInterval *shard, bool any,
		   Datum *values, int count)
{
	Oid			baseRelid = index->baseRelid;
	DistTableCacheEntry *base = GetDistTableCacheEntry(baseRelid);
	RemoteTask *task = palloc0(sizeof(RemoteTask));
	Datum	   *bounds = palloc(sizeof(Datum) * Max(anchor->shardCount, 1));
	StringInfoData sql;

	for (int i = 0; i < anchor->shardCount; i++)
		bounds[i] = Int32GetDatum(anchor->shards[i].hashMin);
	task->params = MakeRemoteParams(1 + (any ? 1 : index->columnCount));
	EncodeRemoteParam(task->params, 0,
					  PointerGetDatum(construct_array(bounds, anchor->shardCount, INT4OID,
													  sizeof(int32), true, TYPALIGN_INT)),
					  false, INT4ARRAYOID);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT DISTINCT pg_catalog.width_bucket(shardext.worker_hash_value(%s), "
					 "$1::pg_catalog.int4[]) FROM ONLY %s WHERE ",
					 quote_identifier(get_attname(baseRelid, base->distAttnum, false)),
					 QualifiedShardName(index->indexRelid, shard->shardId));
	if (any)
	{
		Oid			type = get_atttype(baseRelid, index->baseAttnums[0]);
		Oid			arrayType = get_array_type(type);
		int16		typlen;
		bool		typbyval;
		char		typalign;

		get_typlenbyvalalign(type, &typlen, &typbyval, &typalign);
		appendStringInfo(&sql, "%s %s ANY ($2::%s)",
						 quote_identifier(get_attname(baseRelid, index->baseAttnums[0], false)),
						 QualifiedEqualityOperator(type), RemoteTypeName(arrayType, -1));
		EncodeRemoteParam(task->params, 1,
						  PointerGetDatum(construct_array(values, count, type, typlen,
														  typbyval, typalign)),
						  false, arrayType);
	}
	else
	{
		for (int c = 0; c < index->columnCount; c++)
		{
			Oid			type = get_atttype(baseRelid, index->baseAttnums[c]);

			appendStringInfo(&sql, "%s%s %s $%d::%s", c > 0 ? " AND " : "",
							 quote_identifier(get_attname(baseRelid, index->baseAttnums[c], false)),
							 QualifiedEqualityOperator(type), c + 2, RemoteTypeName(type, -1));
			EncodeRemoteParam(task->params, c + 1, values[c], false, type);
		}
	}
	task->sql = sql.data;
	task->shardId = shard->shardId;
	task->nodeId = shard->placementNodeIds[0];
	task->returnsRows = true;
	return task;
}

/* row callback: a shard (1-based position in anchor) that holds matches */
static void
NoteShard(RemoteTask *task, PGresult *row, void *arg)
{
	LookupContext *context = arg;
	int			position;

	if (PQgetisnull(row, 0, 0))
		return;
	position = atoi(PQgetvalue(row, 0, 0));
	if (position < 1 || position > context->anchor->shardCount)
		elog(ERROR, "global index lookup returned shard position %d of %d", position,
			 context->anchor->shardCount);
	context->matches[position - 1] = true;
	context->found++;
}

/*
 * LookupGlobalIndex sets matches[i] for the shards (by position in anchor,
 * whose shards line up with the indexed table's) that hold rows with the
 * values: kind PRUNE_GINDEX_EQUAL with one value per indexed column, or
 * PRUNE_GINDEX_ANY with one array for a one-column index.  A NULL value
 * matches nothing.
 */
void
LookupGlobalIndex(DistributedScanState *state, DistTableCacheEntry *anchor, Oid indexRelid,
				  int kind, Datum *values, bool *nulls, bool *matches)
{
	GlobalIndex *index = IndexOfTable(indexRelid);
	DistTableCacheEntry *entry = GetDistTableCacheEntry(indexRelid);
	List	   *tasks = NIL;
	LookupContext context;

	if (kind == PRUNE_GINDEX_ANY)
	{
		ArrayType  *array;
		int16		typlen;
		bool		typbyval;
		char		typalign;
		Datum	   *elements;
		bool	   *elementNulls;
		int			count;

		if (nulls[0])
			return;
		array = DatumGetArrayTypeP(values[0]);
		get_typlenbyvalalign(ARR_ELEMTYPE(array), &typlen, &typbyval, &typalign);
		deconstruct_array(array, ARR_ELEMTYPE(array), typlen, typbyval, typalign,
						  &elements, &elementNulls, &count);
		for (int s = 0; s < entry->shardCount; s++)
		{
			Datum	   *shardValues = palloc(sizeof(Datum) * Max(count, 1));
			int			n = 0;

			for (int i = 0; i < count; i++)
			{
				if (!elementNulls[i] &&
					FindShardForValue(entry, elements[i])->shardIndex == s)
					shardValues[n++] = elements[i];
			}
			if (n > 0)
				tasks = lappend(tasks, LookupTask(index, anchor, &entry->shards[s], true,
												  shardValues, n));
		}
	}
	else
	{
		for (int c = 0; c < index->columnCount; c++)
		{
			if (nulls[c])
				return;
		}
		tasks = list_make1(LookupTask(index, anchor, FindShardForValue(entry, values[0]), false,
									  values, index->columnCount));
	}

	memset(&context, 0, sizeof(context));
	context.anchor = anchor;
	context.matches = matches;
	ExecuteRemoteTasks(tasks, false, RemoteReadsInTransaction(), NoteShard, &context);

	if (state->lookupNote == NULL)
	{
		state->lookupNote = palloc0(sizeof(GlobalIndexLookupNote));
		state->lookupNote->indexName = pstrdup(index->name);
		if (tasks != NIL)
			state->lookupNote->sql = ((RemoteTask *) linitial(tasks))->sql;
	}
	state->lookupNote->lookups += list_length(tasks);
	state->lookupNote->matches += context.found;
}
