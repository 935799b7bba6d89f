/*-------------------------------------------------------------------------
 *
 * repartition_exchange.c
 *	  The coordinator's side of a repartition join: before a distributed
 *	  scan with a RepartitionPlan runs its tasks (one per partition), its
 *	  exchange moves the rows of the moving tables worker to worker.
 *
 * The partitions are the shards of the table that stays (single
 * repartition and broadcast: a task per shard, on the shard's node), or
 * partitionCount new ones spread over the nodes in turn (dual).  Then:
 *	- map: a task per shard of each moving table runs the table's map
 *	  query on the shard's node, which writes the rows there, partitioned;
 *	  the tasks report rows and bytes per partition;
 *	- fetch: every node pulls, from every other node, the partitions it
 *	  holds that the other wrote rows of (a broadcast table's rows: all of
 *	  them), one task per pair of nodes and table;
 *	- the scan's tasks read the partitions and join them there.
 * The phases run through the executor like other remote work
 * (ExecuteRemoteTasks): on the transaction's connections when it has
 * remote transactions or a snapshot to keep, so that the map queries see
 * its writes and its snapshot; with the shared pool's connections
 * otherwise.  The files are removed when the scan ends; after an error or
 * a cancel the maintenance daemon removes them (repartition_registry.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/explain.h"
#if PG_VERSION_NUM >= 180000
#include "commands/explain_format.h"
#endif
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "shardext/deparser.h"
#include "shardext/distributed_executor.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/remote_sql.h"
#include "shardext/repartition.h"
#include "shardext/test_pause.h"

typedef struct RepartitionExchange
{
	RepartitionPlan *plan;
	char		id[EXCHANGE_ID_MAXLEN + 1];
	bool		running;		/* numbered, files not removed yet */
	bool		ran;			/* map and fetch ran (EXPLAIN ANALYZE shows them) */
	int			partitionCount;
	int32	   *partitionNodes; /* the node of each partition */
	int64	   *partitionShards;	/* with a stationary table: its shard of each */
	List	   *nodeIds;		/* the nodes that took part (hold files) */
	int			unitCount;
	int64	   *unitRows;		/* per unit: rows mapped */
	int64	   *unitNullKeys;	/* ... with a NULL key */
	bool	  **mapped;			/* per unit, [node index * partitionCount + p]: rows */
	int64	  **partitionBytes; /* per unit and partition: bytes mapped, all nodes */
	int64	   *unitBytes;		/* per unit: bytes mapped */
	int64		bytesMapped;
	int64		bytesMoved;
	double		mapMs;			/* how long the phases took */
	double		fetchMs;
	int64		limitBytes;		/* -1: none */
} RepartitionExchange;

/* what a map task is about (RemoteTask.taskPrivate) */
typedef struct MapTaskInfo
{
	int			unitIndex;
	int			nodeIndex;
} MapTaskInfo;

static RepartitionExchange *GetExchange(DistributedScanState *state);
static void PlanPartitions(RepartitionExchange *exchange);
static int	NodeIndex(RepartitionExchange *exchange, int32 nodeId);
static void RunMapPhase(DistributedScanState *state, RepartitionExchange *exchange);
static List *MapTasksOfUnit(DistributedScanState *state, RepartitionExchange *exchange,
							int unitIndex);
static void MapResult(RemoteTask *task, PGresult *row, void *arg);
static void RunFetchPhase(RepartitionExchange *exchange);
static RemoteTask *FetchTask(RepartitionExchange *exchange, int unitIndex, int32 target,
							 int32 source, List *partitions);
static void FetchResult(RemoteTask *task, PGresult *row, void *arg);
static void AddPartitionTasks(DistributedScanState *state, RepartitionExchange *exchange);
static char *PartitionTaskSql(DistributedScanState *state, RepartitionExchange *exchange,
							  int partition);
static RemoteTask *MakeTask(int32 nodeId, int64 shardId, const char *sql,
							RemoteParams *params, bool returnsRows);
static RemoteParams *TextParams(int count, const Oid *types, const char **values);
static char *TextArrayLiteral(List *strings);
static char *IntArrayLiteral(List *ints);
static int	UnitIndex(RepartitionPlan *plan, int unitId);
static char *MapSqlOfShard(MovedUnit *unit, int shardIndex);
static void MapParams(DistributedScanState *state, MovedUnit *unit, char **types,
					  char **values);
static List *LayoutBoundaries(RepartitionExchange *exchange, MovedUnit *unit);
static int64 ExpectedRows(RepartitionExchange *exchange, int unitIndex, int partition);

/* the exchange whose partition tasks' parameters are being evaluated */
static RepartitionExchange *FlagExchange = NULL;

/*
 * BuildRepartitionTasks makes the tasks of a repartition scan (one per
 * partition); with runExchange, it first runs the exchange that moves the
 * rows (EXPLAIN without ANALYZE only shows the tasks).
 */
void
BuildRepartitionTasks(DistributedScanState *state, bool runExchange)
{
	RepartitionExchange *exchange = GetExchange(state);

	if (runExchange && !exchange->ran)
	{
		TimestampTz start = GetCurrentTimestamp();

		StartExchange(exchange->id);
		exchange->running = true;
		RunMapPhase(state, exchange);
		exchange->mapMs = TimestampDifferenceMilliseconds(start, GetCurrentTimestamp());
		TEST_PAUSE_POINT("repartition after map");
		start = GetCurrentTimestamp();
		RunFetchPhase(exchange);
		exchange->fetchMs = TimestampDifferenceMilliseconds(start, GetCurrentTimestamp());
		TEST_PAUSE_POINT("repartition after fetch");
		exchange->ran = true;
	}
	AddPartitionTasks(state, exchange);
}

/* GetExchange returns the exchange of the scan, made and laid out once */
static RepartitionExchange *
GetExchange(DistributedScanState *state)
{
	RepartitionExchange *exchange = state->exchange;

	if (exchange != NULL)
		return exchange;
	exchange = palloc0(sizeof(RepartitionExchange));
	exchange->plan = RepartitionPlanFromList(state->job->repartition);
	strlcpy(exchange->id, "0", sizeof(exchange->id));	/* until it runs */
	exchange->limitBytes = ShardextMaxIntermediateResultSize < 0 ? -1 :
		(int64) ShardextMaxIntermediateResultSize * 1024;
	PlanPartitions(exchange);
	state->exchange = exchange;
	return exchange;
}

/*
 * PlanPartitions decides where the partitions are: the shards of the
 * stationary table (each where its shard is), or new ones spread over the
 * active nodes in node id order.  The layout holds for the whole exchange.
 */
static void
PlanPartitions(RepartitionExchange *exchange)
{
	RepartitionPlan *plan = exchange->plan;
	ListCell   *cell;

	exchange->unitCount = list_length(plan->units);
	if (OidIsValid(plan->layoutRelid))
	{
		DistTableCacheEntry *anchor = GetDistTableCacheEntry(plan->layoutRelid);

		if (anchor == NULL || anchor->method != DISTRIBUTE_BY_HASH)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"%s\" is no longer distributed",
							get_rel_name(plan->layoutRelid))));
		exchange->partitionCount = anchor->shardCount;
		exchange->partitionNodes = palloc(sizeof(int32) * Max(anchor->shardCount, 1));
		exchange->partitionShards = palloc(sizeof(int64) * Max(anchor->shardCount, 1));
		for (int p = 0; p < anchor->shardCount; p++)
		{
			ShardInterval *shard = &anchor->shards[p];

			if (shard->placementCount == 0)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("shard " INT64_FORMAT " of \"%s\" has no placement",
								shard->shardId, get_rel_name(plan->layoutRelid))));
			exchange->partitionNodes[p] = shard->placementNodeIds[0];
			exchange->partitionShards[p] = shard->shardId;
		}
	}
	else
	{
		List	   *nodes = WorkerNodeList(true);
		int			nodeCount = list_length(nodes);

		if (nodeCount == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("a repartition join needs an active node")));
		exchange->partitionCount = plan->partitionCount;
		exchange->partitionNodes = palloc(sizeof(int32) * Max(plan->partitionCount, 1));
		for (int p = 0; p < plan->partitionCount; p++)
			exchange->partitionNodes[p] = ((WorkerNode *) list_nth(nodes, p % nodeCount))->nodeId;
	}
	/* every active node may take part: it holds shards or partitions */
	foreach(cell, WorkerNodeList(true))
		exchange->nodeIds = lappend_int(exchange->nodeIds, ((WorkerNode *) lfirst(cell))->nodeId);
	exchange->unitRows = palloc0(sizeof(int64) * Max(exchange->unitCount, 1));
	exchange->unitNullKeys = palloc0(sizeof(int64) * Max(exchange->unitCount, 1));
	exchange->mapped = palloc0(sizeof(bool *) * Max(exchange->unitCount, 1));
	exchange->partitionBytes = palloc0(sizeof(int64 *) * Max(exchange->unitCount, 1));
	exchange->unitBytes = palloc0(sizeof(int64) * Max(exchange->unitCount, 1));
	for (int u = 0; u < exchange->unitCount; u++)
	{
		exchange->mapped[u] = palloc0(sizeof(bool) * list_length(exchange->nodeIds) *
									  Max(exchange->partitionCount, 1));
		exchange->partitionBytes[u] = palloc0(sizeof(int64) * Max(exchange->partitionCount, 1));
	}
}

/* the position of a node among the exchange's nodes */
static int
NodeIndex(RepartitionExchange *exchange, int32 nodeId)
{
	ListCell   *cell;

	foreach(cell, exchange->nodeIds)
	{
		if (lfirst_int(cell) == nodeId)
			return foreach_current_index(cell);
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("node %d is not an active node", nodeId),
			 errhint("Run the statement again.")));
	return -1;					/* keep compiler quiet */
}

/*
 * RunMapPhase runs the map tasks of every moving table, in parallel over
 * the nodes, and notes which partitions got rows where.
 */
static void
RunMapPhase(DistributedScanState *state, RepartitionExchange *exchange)
{
	List	   *tasks = NIL;

	for (int u = 0; u < exchange->unitCount; u++)
		tasks = list_concat(tasks, MapTasksOfUnit(state, exchange, u));
	ExecuteRemoteTasks(tasks, false, RemoteReadsInTransaction(), MapResult, exchange);
}

/*
 * MapTasksOfUnit makes the map tasks of one moving table: its map query
 * on each shard, and how to partition the rows.
 */
static List *
MapTasksOfUnit(DistributedScanState *state, RepartitionExchange *exchange, int unitIndex)
{
	MovedUnit  *unit = list_nth(exchange->plan->units, unitIndex);
	DistTableCacheEntry *entry = GetDistTableCacheEntry(unit->relid);
	List	   *tasks = NIL;
	char	   *paramTypeArray;
	char	   *paramValueArray;
	char	   *boundaryArray;

	if (entry == NULL || entry->method != DISTRIBUTE_BY_HASH)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is no longer distributed", get_rel_name(unit->relid))));
	MapParams(state, unit, &paramTypeArray, &paramValueArray);
	boundaryArray = IntArrayLiteral(LayoutBoundaries(exchange, unit));

	for (int s = 0; s < entry->shardCount; s++)
	{
		ShardInterval *shard = &entry->shards[s];
		MapTaskInfo *info = palloc(sizeof(MapTaskInfo));
		const char *values[11];
		Oid			types[11] = {TEXTOID, INT4OID, TEXTOID, TEXTOID, TEXTARRAYOID, TEXTARRAYOID,
		INT4OID, INT4OID, INT4OID, INT4ARRAYOID, INT8OID};
		RemoteTask *task;

		if (shard->placementCount == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("shard " INT64_FORMAT " of \"%s\" has no placement",
							shard->shardId, get_rel_name(unit->relid))));
		values[0] = exchange->id;
		values[1] = psprintf("%d", unit->unitId);
		values[2] = psprintf("s%d", s);
		values[3] = MapSqlOfShard(unit, s);
		values[4] = paramTypeArray;
		values[5] = paramValueArray;
		values[6] = psprintf("%d", unit->keyCount);
		values[7] = psprintf("%d", unit->layout);
		values[8] = psprintf("%d", exchange->partitionCount);
		values[9] = boundaryArray;
		values[10] = psprintf(INT64_FORMAT, exchange->limitBytes);
		task = MakeTask(shard->placementNodeIds[0], shard->shardId,
						"SELECT shardext.repartition_map($1, $2, $3, $4, $5, $6, $7, $8, $9, "
						"$10, $11)",
						TextParams(11, types, values), true);
		info->unitIndex = unitIndex;
		info->nodeIndex = NodeIndex(exchange, task->nodeId);
		task->taskPrivate = info;
		tasks = lappend(tasks, task);
	}
	return tasks;
}

/*
 * MapParams evaluates the parameters of a moving table's map query: the
 * text[] literals of their type names and of their values as text.
 */
static void
MapParams(DistributedScanState *state, MovedUnit *unit, char **types, char **values)
{
	List	   *typeNames = NIL;
	List	   *texts = NIL;
	ListCell   *cell;

	foreach(cell, unit->mapParams)
	{
		ExprState  *exprState = list_nth(state->insertExprStates, lfirst_int(cell));
		Oid			type = exprType((Node *) exprState->expr);
		bool		isnull;
		Datum		value = ExecEvalExpr(exprState, state->css.ss.ps.ps_ExprContext, &isnull);
		Oid			output;
		bool		isVarlena;

		typeNames = lappend(typeNames, format_type_be_qualified(type));
		if (isnull)
			texts = lappend(texts, NULL);
		else
		{
			int			nestLevel = BeginSafeDeparse();

			getTypeOutputInfo(type, &output, &isVarlena);
			texts = lappend(texts, OidOutputFunctionCall(output, value));
			EndSafeDeparse(nestLevel);
		}
	}
	*types = TextArrayLiteral(typeNames);
	*values = TextArrayLiteral(texts);
}

/*
 * LayoutBoundaries: for a table moving into the shards of the stationary
 * table, the lowest hash of each of them (the layout of the exchange).
 */
static List *
LayoutBoundaries(RepartitionExchange *exchange, MovedUnit *unit)
{
	DistTableCacheEntry *anchor;
	List	   *boundaries = NIL;

	if (unit->layout != LAYOUT_RANGES)
		return NIL;
	anchor = GetDistTableCacheEntry(exchange->plan->layoutRelid);
	if (anchor == NULL || anchor->shardCount != exchange->partitionCount)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shards of table \"%s\" changed during the statement",
						get_rel_name(exchange->plan->layoutRelid)),
				 errhint("Run the statement again.")));
	for (int p = 0; p < anchor->shardCount; p++)
		boundaries = lappend_int(boundaries, anchor->shards[p].hashMin);
	return boundaries;
}

/* MapSqlOfShard: a moving table's map query on one of its shards */
static char *
MapSqlOfShard(MovedUnit *unit, int shardIndex)
{
	List	   *names = NIL;
	ListCell   *cell;

	foreach(cell, unit->mapRelations)
	{
		Oid			relid = lfirst_oid(cell);
		DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);

		if (entry == NULL || (entry->method == DISTRIBUTE_BY_HASH && shardIndex >= entry->shardCount))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"%s\" is no longer distributed as it was planned",
							get_rel_name(relid)),
					 errhint("Run the statement again.")));
		names = lappend(names,
						QualifiedShardName(relid, entry->method == DISTRIBUTE_BY_HASH ?
										   entry->shards[shardIndex].shardId :
										   entry->shards[0].shardId));
	}
	return BuildTaskSql(unit->mapSqlParts, names);
}

/*
 * MapResult takes a map task's report, {rows, NULL keys, bytes of each
 * partition}, and stops the statement when the rows written exceed
 * shardext.max_intermediate_result_size.
 */
static void
MapResult(RemoteTask *task, PGresult *row, void *arg)
{
	RepartitionExchange *exchange = arg;
	MapTaskInfo *info = task->taskPrivate;
	char	   *text = pstrdup(PQgetvalue(row, 0, 0));
	char	   *cursor = text + 1;
	int			position = 0;
	int			layoutPartitions = exchange->partitionCount;

	while (*cursor != '\0' && *cursor != '}')
	{
		int64		value = strtoi64(cursor, &cursor, 10);

		if (position == 0)
			exchange->unitRows[info->unitIndex] += value;
		else if (position == 1)
			exchange->unitNullKeys[info->unitIndex] += value;
		else if (position - 2 < layoutPartitions)
		{
			if (value > 0)
				exchange->mapped[info->unitIndex][info->nodeIndex * layoutPartitions +
												  position - 2] = true;
			exchange->partitionBytes[info->unitIndex][position - 2] += value;
			exchange->unitBytes[info->unitIndex] += value;
			exchange->bytesMapped += value;
		}
		position++;
		if (*cursor == ',')
			cursor++;
	}
	pfree(text);
	if (exchange->limitBytes >= 0 && exchange->bytesMapped > exchange->limitBytes)
		ReportIntermediateResultLimit(exchange->limitBytes);
}

/*
 * RunFetchPhase makes every node pull the rows of its partitions that
 * other nodes mapped, in parallel.
 */
static void
RunFetchPhase(RepartitionExchange *exchange)
{
	List	   *tasks = NIL;
	ListCell   *targetCell;
	ListCell   *sourceCell;

	foreach(targetCell, exchange->nodeIds)
	{
		int32		target = lfirst_int(targetCell);

		foreach(sourceCell, exchange->nodeIds)
		{
			int32		source = lfirst_int(sourceCell);
			int			sourceIndex = foreach_current_index(sourceCell);

			if (source == target)
				continue;
			for (int u = 0; u < exchange->unitCount; u++)
			{
				MovedUnit  *unit = list_nth(exchange->plan->units, u);
				bool	   *mapped = exchange->mapped[u] + sourceIndex * exchange->partitionCount;
				List	   *partitions = NIL;
				bool		targetRuns = false;

				for (int p = 0; p < exchange->partitionCount; p++)
				{
					if (exchange->partitionNodes[p] != target)
						continue;
					targetRuns = true;
					if (unit->layout != LAYOUT_BROADCAST && mapped[p])
						partitions = lappend_int(partitions, p);
				}
				if (unit->layout == LAYOUT_BROADCAST && targetRuns && mapped[0])
					partitions = list_make1_int(0);
				if (partitions != NIL)
					tasks = lappend(tasks, FetchTask(exchange, u, target, source, partitions));
			}
		}
	}
	ExecuteRemoteTasks(tasks, false, RemoteReadsInTransaction(), FetchResult, exchange);
}

/* FetchTask: on target, pull some partitions of a unit from source */
static RemoteTask *
FetchTask(RepartitionExchange *exchange, int unitIndex, int32 target, int32 source,
		  List *partitions)
{
	MovedUnit  *unit = list_nth(exchange->plan->units, unitIndex);
	WorkerNode *node = GetWorkerNode(source);
	const char *values[7];
	Oid			types[7] = {TEXTOID, INT4OID, TEXTOID, TEXTOID, INT4OID, INT4ARRAYOID,
	TEXTARRAYOID};
	List	   *typeNames = NIL;
	ListCell   *cell;

	foreach(cell, unit->columnTypes)
		typeNames = lappend(typeNames, strVal(lfirst(cell)));
	values[0] = exchange->id;
	values[1] = psprintf("%d", unit->unitId);
	values[2] = psprintf("n%d", source);
	values[3] = node->host;
	values[4] = psprintf("%d", node->port);
	values[5] = IntArrayLiteral(partitions);
	values[6] = TextArrayLiteral(typeNames);
	return MakeTask(target, 0,
					"SELECT shardext.repartition_fetch($1, $2, $3, $4, $5, $6, $7)",
					TextParams(7, types, values), true);
}

static void
FetchResult(RemoteTask *task, PGresult *row, void *arg)
{
	RepartitionExchange *exchange = arg;

	exchange->bytesMoved += strtoi64(PQgetvalue(row, 0, 0), NULL, 10);
}

/* AddPartitionTasks makes the scan's tasks: one per partition */
static void
AddPartitionTasks(DistributedScanState *state, RepartitionExchange *exchange)
{
	DistributedJob *job = state->job;
	RemoteParams *params;

	/* NOT IN's flags are parameters: shardext.repartition_flag reads them */
	FlagExchange = exchange;
	PG_TRY();
	{
		params = EvaluateParams(state, state->paramExprStates, 0, job->paramCount);
	}
	PG_FINALLY();
	{
		FlagExchange = NULL;
	}
	PG_END_TRY();

	for (int p = 0; p < exchange->partitionCount; p++)
	{
		char	   *sql = PartitionTaskSql(state, exchange, p);

		state->tasks = lappend(state->tasks,
							   MakeTask(exchange->partitionNodes[p],
										exchange->partitionShards != NULL ?
										exchange->partitionShards[p] : 0,
										sql, params, true));
	}
}

/*
 * PartitionTaskSql fills the scan's template for one partition: the
 * stationary tables' shards of the partition, the reference tables, and
 * the reads of the moved tables' rows.
 */
static char *
PartitionTaskSql(DistributedScanState *state, RepartitionExchange *exchange, int partition)
{
	DistributedJob *job = state->job;
	StringInfoData sql;
	ListCell   *cell;

	initStringInfo(&sql);
	foreach(cell, job->sqlParts)
	{
		Node	   *part = lfirst(cell);

		if (IsA(part, String))
			appendStringInfoString(&sql, strVal(part));
		else if (IsA(part, Integer))
		{
			Oid			relid = list_nth_oid(job->relations, intVal(part));
			DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);
			int64		shardId;

			if (entry == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("table \"%s\" is no longer distributed", get_rel_name(relid))));
			if (entry->method == DISTRIBUTE_BY_REFERENCE)
				shardId = entry->shards[0].shardId;
			else if (exchange->partitionShards != NULL &&
					 entry->shardCount == exchange->partitionCount)
				shardId = entry->shards[partition].shardId;
			else
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("shards of table \"%s\" changed during the statement",
								get_rel_name(relid)),
						 errhint("Run the statement again.")));
			appendStringInfoString(&sql, QualifiedShardName(relid, shardId));
		}
		else
		{
			/* ("read", unit): the unit's rows of this partition, and how many */
			int			unitId = intVal(lsecond((List *) part));
			int			unitIndex = UnitIndex(exchange->plan, unitId);
			MovedUnit  *unit = list_nth(exchange->plan->units, unitIndex);
			int			readPartition = unit->layout == LAYOUT_BROADCAST ? 0 : partition;

			appendStringInfo(&sql, "%s, %d, %d, " INT64_FORMAT,
							 quote_literal_cstr(exchange->id), unitId, readPartition,
							 ExpectedRows(exchange, unitIndex, readPartition));
		}
	}
	return sql.data;
}

/* UnitIndex: the position of a unit in the plan */
static int
UnitIndex(RepartitionPlan *plan, int unitId)
{
	ListCell   *cell;

	foreach(cell, plan->units)
	{
		if (((MovedUnit *) lfirst(cell))->unitId == unitId)
			return foreach_current_index(cell);
	}
	elog(ERROR, "repartition unit %d is not in the plan", unitId);
	return -1;					/* keep compiler quiet */
}

/*
 * ExpectedRows: how many rows a partition of a unit holds, by its share of
 * the bytes mapped (the planner's estimate before the exchange ran), for
 * the nodes' planners.
 */
static int64
ExpectedRows(RepartitionExchange *exchange, int unitIndex, int partition)
{
	MovedUnit  *unit = list_nth(exchange->plan->units, unitIndex);

	if (!exchange->ran)
		return (int64) (unit->estimatedRows /
						(unit->layout == LAYOUT_BROADCAST ? 1 : Max(exchange->partitionCount, 1)));
	if (exchange->unitBytes[unitIndex] == 0)
		return 0;
	return (int64) ((double) exchange->unitRows[unitIndex] *
					exchange->partitionBytes[unitIndex][partition] /
					exchange->unitBytes[unitIndex]);
}

/*
 * EndRepartitionExchange removes the files of the scan's exchange from the
 * nodes, when it ran: the scan ended (or starts over).
 */
void
EndRepartitionExchange(DistributedScanState *state)
{
	RepartitionExchange *exchange = state->exchange;
	List	   *tasks = NIL;
	ListCell   *cell;

	if (exchange == NULL || !exchange->running)
		return;
	foreach(cell, exchange->nodeIds)
	{
		const char *values[1] = {exchange->id};
		Oid			types[1] = {TEXTOID};

		tasks = lappend(tasks, MakeTask(lfirst_int(cell), 0,
										"SELECT shardext.repartition_cleanup($1)",
										TextParams(1, types, values), false));
	}
	exchange->running = false;
	ExecuteRemoteTasks(tasks, false, RemoteReadsInTransaction(), NULL, NULL);
	EndExchange();
}

/*
 * ExplainRepartition shows how the scan moves rows: the strategy, the
 * partitions, the moving tables, and with ANALYZE what moved.  The tasks
 * are made (without running the exchange) when the scan did not run.
 */
void
ExplainRepartition(DistributedScanState *state, ExplainState *es)
{
	RepartitionExchange *exchange = GetExchange(state);
	RepartitionPlan *plan = exchange->plan;
	List	   *moved = NIL;
	ListCell   *cell;
	const char *strategy;

	if (!state->tasksBuilt)
	{
		MemoryContext oldContext = MemoryContextSwitchTo(state->execContext);

		BuildRepartitionTasks(state, false);
		state->tasksBuilt = true;
		MemoryContextSwitchTo(oldContext);
	}
	switch (plan->strategy)
	{
		case REPARTITION_SINGLE:
			strategy = psprintf("single repartition into the shards of %s",
								get_rel_name(plan->layoutRelid));
			break;
		case REPARTITION_BROADCAST:
			strategy = psprintf("broadcast to the shards of %s", get_rel_name(plan->layoutRelid));
			break;
		default:
			strategy = "dual repartition";
			break;
	}
	ExplainPropertyText("Join Strategy", strategy, es);
	ExplainPropertyInteger("Partitions", NULL, exchange->partitionCount, es);
	foreach(cell, plan->units)
	{
		MovedUnit  *unit = lfirst(cell);

		moved = lappend(moved, psprintf("%s%s", unit->description,
										unit->layout == LAYOUT_BROADCAST ? " (to every node)" : ""));
	}
	ExplainPropertyList("Moved", moved, es);
	/* what each moving table's map tasks run (on its first shard) */
	foreach(cell, plan->units)
		ExplainPropertyText("Map SQL", MapSqlOfShard(lfirst(cell), 0), es);
	if (es->analyze && exchange->ran)
	{
		int64		rows = 0;

		for (int u = 0; u < exchange->unitCount; u++)
			rows += exchange->unitRows[u];
		ExplainPropertyInteger("Rows Mapped", NULL, rows, es);
		ExplainPropertyInteger("Bytes Mapped", NULL, exchange->bytesMapped, es);
		ExplainPropertyInteger("Bytes Moved Between Workers", NULL, exchange->bytesMoved, es);
		if (es->timing)
		{
			ExplainPropertyFloat("Map Time", "ms", exchange->mapMs, 3, es);
			ExplainPropertyFloat("Fetch Time", "ms", exchange->fetchMs, 3, es);
		}
	}
}

PG_FUNCTION_INFO_V1(shardext_repartition_flag);

/*
 * shardext_repartition_flag(unit, kind) tells, while a repartition join
 * makes its partition tasks, whether a moved unit mapped no rows
 * (FLAG_UNIT_EMPTY) or a row with a NULL key (FLAG_UNIT_HAS_NULL_KEY):
 * what NOT IN needs to know of all partitions.  Without an exchange that
 * ran (EXPLAIN), false.
 */
Datum
shardext_repartition_flag(PG_FUNCTION_ARGS)
{
	int			unitId = PG_GETARG_INT32(0);
	int			kind = PG_GETARG_INT32(1);
	RepartitionExchange *exchange = FlagExchange;
	int			u;

	if (exchange == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("shardext.repartition_flag() can only be evaluated by a repartition join")));
	if (!exchange->ran)
		PG_RETURN_BOOL(false);
	u = UnitIndex(exchange->plan, unitId);
	if (kind == FLAG_UNIT_EMPTY)
		PG_RETURN_BOOL(exchange->unitRows[u] == 0);
	PG_RETURN_BOOL(exchange->unitNullKeys[u] > 0);
}

/* MakeTask makes a task that runs sql with params on a node */
static RemoteTask *
MakeTask(int32 nodeId, int64 shardId, const char *sql, RemoteParams *params, bool returnsRows)
{
	RemoteTask *task = palloc0(sizeof(RemoteTask));

	task->sql = pstrdup(sql);
	task->nodeId = nodeId;
	task->shardId = shardId;
	task->params = params;
	task->returnsRows = returnsRows;
	return task;
}

/* TextParams: parameters sent as text, of the given built-in types */
static RemoteParams *
TextParams(int count, const Oid *types, const char **values)
{
	RemoteParams *params = MakeRemoteParams(count);

	for (int i = 0; i < count; i++)
	{
		params->types[i] = types[i];
		params->values[i] = values[i];
		params->formats[i] = 0;
	}
	return params;
}

/* TextArrayLiteral: the text[] literal of strings (NULL elements are NULLs) */
static char *
TextArrayLiteral(List *strings)
{
	Datum	   *elements = palloc(sizeof(Datum) * Max(list_length(strings), 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(list_length(strings), 1));
	int			dims[1] = {list_length(strings)};
	int			lbs[1] = {1};
	ListCell   *cell;
	ArrayType  *array;

	foreach(cell, strings)
	{
		int			i = foreach_current_index(cell);

		nulls[i] = lfirst(cell) == NULL;
		elements[i] = nulls[i] ? (Datum) 0 : CStringGetTextDatum((char *) lfirst(cell));
	}
	if (strings == NIL)
		array = construct_empty_array(TEXTOID);
	else
		array = construct_md_array(elements, nulls, 1, dims, lbs, TEXTOID, -1, false,
								   TYPALIGN_INT);
	return OidOutputFunctionCall(F_ARRAY_OUT, PointerGetDatum(array));
}

/* IntArrayLiteral: the int4[] literal of a list of ints */
static char *
IntArrayLiteral(List *ints)
{
	StringInfoData buf;
	ListCell   *cell;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	foreach(cell, ints)
		appendStringInfo(&buf, "%s%d", cell == list_head(ints) ? "" : ",", lfirst_int(cell));
	appendStringInfoChar(&buf, '}');
	return buf.data;
}
