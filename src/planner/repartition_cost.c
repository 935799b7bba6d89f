/*-------------------------------------------------------------------------
 *
 * repartition_cost.c
 *	  How a repartition join runs: which units stay in their shards, move
 *	  (hash-partitioned by their key) or are copied to every node, or
 *	  whether the join is left to the coordinator; from estimates of the
 *	  rows each unit moves.
 *
 * The estimates: a table's rows are the sum over its shards of what the
 * nodes' statistics say (pg_class, scaled to the shards' current size;
 * by size alone for shards never analyzed), asked once per table and kept
 * for STATS_MAX_AGE_MS in the backend; the conditions a unit's map query
 * evaluates are counted with PostgreSQL's default selectivities.  The
 * cost of a plan is the bytes it writes to move rows (a broadcast table's
 * once per node); the cheapest valid plan wins.  Inputs estimated at
 * fewer than shardext.repartition_join_min_rows rows in all are left to
 * the coordinator, which pulls them (no exchange to set up).
 *
 * A plan is valid when every join runs partition by partition (see
 * ValidateRoles): each join of two partitioned sides joins them by an
 * equality of the partitioning keys, and a side read whole by every
 * partition (reference and broadcast tables) is never a preserved side
 * of an outer join (its unmatched rows would come once per partition).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/selfuncs.h"
#include "utils/timestamp.h"

#include "shardext/distributed_executor.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/planner.h"
#include "shardext/repartition.h"

/* how long a table's row estimate is kept */
#define STATS_MAX_AGE_MS 30000
/* bytes a row takes in a partition file beyond its columns */
#define ROW_OVERHEAD 24
/* the rows of a shard the nodes know nothing about */
#define UNKNOWN_SHARD_ROWS 1000.0

typedef struct TableStats
{
	Oid			relid;			/* hash key */
	double		rows;
	TimestampTz fetchedAt;
} TableStats;

static HTAB *StatsCache = NULL;

/* one way to run the join, while it is being compared */
typedef struct RoleChoice
{
	UnitRole   *roles;
	Node	  **keys;
	int			keyClass;
	int			strategy;
	Oid			layoutRelid;
	double		cost;
} RoleChoice;

static double TableRows(Oid relid);
static void FetchTableRows(List *relids);
static RemoteTask *TableRowsTask(int32 nodeId, List *indexes, List *names);
static void TableRowsResult(RemoteTask *task, PGresult *row, void *arg);
static double RowWidth(JoinUnit *unit);
static double ConjunctSelectivity(Node *node);
static bool ChooseKeyClass(RepartitionContext *context, int keyClass, RoleChoice *choice);
static void ChooseKeys(RepartitionContext *context, int keyClass, Node **keys);
static int32 StayingGroup(RepartitionContext *context, Node **keys);
static bool MayStay(JoinUnit *unit, Node *key);
static bool ChooseBroadcast(RepartitionContext *context, JoinUnit *stays, RoleChoice *choice);
static bool MayBroadcast(JoinUnit *unit);
static bool IsDistributionColumn(JoinUnit *unit, Node *expr);
static void ApplyChoice(RepartitionContext *context, RoleChoice *choice);
static int	PartitionCount(RepartitionContext *context);
static bool ValidateJoinTree(RepartitionContext *context, Node *jtnode, Bitmapset **partitioned);
static bool ValidateOuterJoin(RepartitionContext *context, JoinExpr *join, Bitmapset **partitioned);
static bool ValidateInnerRegion(RepartitionContext *context, Node *jtnode,
								Bitmapset **partitioned);
static void ConnectItems(List *itemSets, int *component, KeyEdge *edge);
static void InnerRegion(Node *jtnode, List **items, List **conjuncts);
static bool IsPartitioned(JoinUnit *unit);
static bool IsKeyEdge(RepartitionContext *context, KeyEdge *edge);

/*
 * EstimateUnits estimates each unit's rows (after the conditions its map
 * query would evaluate) and the bytes per row it would move.
 */
void
EstimateUnits(RepartitionContext *context)
{
	List	   *missing = NIL;
	ListCell   *cell;

	foreach(cell, context->units)
	{
		JoinUnit   *unit = lfirst(cell);
		TableStats *stats = StatsCache == NULL ? NULL :
			hash_search(StatsCache, &unit->relid, HASH_FIND, NULL);

		if (stats == NULL ||
			TimestampDifferenceExceeds(stats->fetchedAt, GetCurrentTimestamp(), STATS_MAX_AGE_MS))
			missing = list_append_unique_oid(missing, unit->relid);
	}
	if (missing != NIL)
		FetchTableRows(missing);
	foreach(cell, context->units)
	{
		JoinUnit   *unit = lfirst(cell);
		double		selectivity = 1.0;
		ListCell   *conjunct;

		foreach(conjunct, unit->pushed)
			selectivity *= ConjunctSelectivity(lfirst(conjunct));
		unit->tableRows = TableRows(unit->relid);
		unit->rows = clamp_row_est(unit->tableRows * selectivity);
		if (unit->tableRows == 0)
			unit->rows = 0;
		unit->width = RowWidth(unit) + ROW_OVERHEAD;
	}
}

/* TableRows: the cached estimate of a table's rows */
static double
TableRows(Oid relid)
{
	TableStats *stats = StatsCache == NULL ? NULL :
		hash_search(StatsCache, &relid, HASH_FIND, NULL);

	if (stats == NULL)
	{
		DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);

		return entry != NULL ? entry->shardCount * UNKNOWN_SHARD_ROWS : UNKNOWN_SHARD_ROWS;
	}
	return stats->rows;
}

/*
 * FetchTableRows asks the nodes for the size and statistics of the shards
 * of some tables (one query per node, in parallel) and caches each
 * table's row estimate.
 */
static void
FetchTableRows(List *relids)
{
	List	   *nodeIds = NIL;
	List	   *nodeIndexes = NIL;	/* per node: a List of table indexes */
	List	   *nodeNames = NIL;	/* per node: a List of shard names */
	List	   *tasks = NIL;
	double	   *rows = palloc0(sizeof(double) * list_length(relids));
	ListCell   *cell;

	if (StatsCache == NULL)
	{
		HASHCTL		info;

		memset(&info, 0, sizeof(info));
		info.keysize = sizeof(Oid);
		info.entrysize = sizeof(TableStats);
		info.hcxt = TopMemoryContext;
		StatsCache = hash_create("shardext table row estimates", 64, &info,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	foreach(cell, relids)
	{
		DistTableCacheEntry *entry = GetDistTableCacheEntry(lfirst_oid(cell));

		for (int s = 0; entry != NULL && s < entry->shardCount; s++)
		{
			ShardInterval *shard = &entry->shards[s];
			int			position;

			if (shard->placementCount == 0)
				continue;
			position = ListIntPosition(nodeIds, shard->placementNodeIds[0]);
			if (position < 0)
			{
				nodeIds = lappend_int(nodeIds, shard->placementNodeIds[0]);
				nodeIndexes = lappend(nodeIndexes, NIL);
				nodeNames = lappend(nodeNames, NIL);
				position = list_length(nodeIds) - 1;
			}
			list_nth_cell(nodeIndexes, position)->ptr_value =
				lappend_int(list_nth(nodeIndexes, position), foreach_current_index(cell));
			list_nth_cell(nodeNames, position)->ptr_value =
				lappend(list_nth(nodeNames, position),
						QualifiedShardName(entry->relid, shard->shardId));
		}
	}
	foreach(cell, nodeIds)
		tasks = lappend(tasks, TableRowsTask(lfirst_int(cell),
											 list_nth(nodeIndexes, foreach_current_index(cell)),
											 list_nth(nodeNames, foreach_current_index(cell))));
	ExecuteRemoteTasks(tasks, false, RemoteReadsInTransaction(), TableRowsResult, rows);

	foreach(cell, relids)
	{
		Oid			relid = lfirst_oid(cell);
		TableStats *stats = hash_search(StatsCache, &relid, HASH_ENTER, NULL);

		stats->rows = rows[foreach_current_index(cell)];
		stats->fetchedAt = GetCurrentTimestamp();
	}
}

/*
 * TableRowsTask: the query of one node for the shards it holds (names, and
 * the index of each one's table): per table, the rows its statistics
 * give, scaled to the shards' current size, and the size of the shards it
 * has no statistics of.
 */
static RemoteTask *
TableRowsTask(int32 nodeId, List *indexes, List *names)
{
	RemoteTask *task = palloc0(sizeof(RemoteTask));
	StringInfoData indexArray;
	ArrayBuildState *nameArray = NULL;
	ListCell   *cell;

	initStringInfo(&indexArray);
	appendStringInfoChar(&indexArray, '{');
	foreach(cell, indexes)
		appendStringInfo(&indexArray, "%s%d", indexArray.len > 1 ? "," : "", lfirst_int(cell));
	appendStringInfoChar(&indexArray, '}');
	foreach(cell, names)
		nameArray = accumArrayResult(nameArray, CStringGetTextDatum(lfirst(cell)), false,
									 TEXTOID, CurrentMemoryContext);
	task->sql = "SELECT t.i, "
		"pg_catalog.sum(CASE WHEN c.reltuples >= 0 AND c.relpages > 0 THEN c.reltuples / c.relpages "
		"* (pg_catalog.pg_relation_size(c.oid) / pg_catalog.current_setting('block_size')::float8) "
		"ELSE 0 END), "
		"pg_catalog.sum(CASE WHEN c.reltuples >= 0 AND c.relpages > 0 THEN 0 "
		"ELSE pg_catalog.pg_relation_size(c.oid) END) "
		"FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int4[]), "
		"pg_catalog.unnest($2::pg_catalog.text[])) AS t(i, n) "
		"JOIN pg_catalog.pg_class c ON c.oid = pg_catalog.to_regclass(t.n) GROUP BY t.i";
	task->nodeId = nodeId;
	task->returnsRows = true;
	task->params = MakeRemoteParams(2);
	task->params->types[0] = INT4ARRAYOID;
	task->params->types[1] = TEXTARRAYOID;
	task->params->values[0] = indexArray.data;
	task->params->values[1] = OidOutputFunctionCall(F_ARRAY_OUT,
													makeArrayResult(nameArray, CurrentMemoryContext));
	return task;
}

/* TableRowsResult adds a node's estimate for a table (unknown shards by size) */
static void
TableRowsResult(RemoteTask *task, PGresult *row, void *arg)
{
	double	   *rows = arg;
	int			index = atoi(PQgetvalue(row, 0, 0));
	double		known = strtod(PQgetvalue(row, 0, 1), NULL);
	double		unknownBytes = strtod(PQgetvalue(row, 0, 2), NULL);

	rows[index] += known + unknownBytes / 64.0;
}

/* RowWidth: the average bytes of the columns of a unit that would move */
static double
RowWidth(JoinUnit *unit)
{
	double		width = 0;
	ListCell   *cell;

	foreach(cell, unit->columns)
	{
		Oid			type;
		int32		typmod;
		Oid			collation;

		UnitColumnType(unit, lfirst_int(cell), &type, &typmod, &collation);
		width += get_typavgwidth(type, typmod);
	}
	return width;
}

/*
 * ConjunctSelectivity: PostgreSQL's defaults for a condition on a table
 * without statistics (the coordinator's table is an empty shell).
 */
static double
ConjunctSelectivity(Node *node)
{
	if (IsA(node, OpExpr))
	{
		RegProcedure estimator = get_oprrest(((OpExpr *) node)->opno);

		if (estimator == F_EQSEL)
			return DEFAULT_EQ_SEL;
		if (estimator == F_NEQSEL)
			return 1.0 - DEFAULT_EQ_SEL;
		if (estimator == F_SCALARLTSEL || estimator == F_SCALARLESEL ||
			estimator == F_SCALARGTSEL || estimator == F_SCALARGESEL)
			return DEFAULT_INEQ_SEL;
		return 0.1;
	}
	if (IsA(node, ScalarArrayOpExpr))
		return Min(0.5, DEFAULT_EQ_SEL * 4);
	if (IsA(node, NullTest))
		return ((NullTest *) node)->nulltesttype == IS_NULL ? DEFAULT_EQ_SEL : 1.0 - DEFAULT_EQ_SEL;
	if (IsA(node, BoolExpr))
	{
		BoolExpr   *expr = (BoolExpr *) node;
		double		result = expr->boolop == OR_EXPR ? 0.0 : 1.0;
		ListCell   *cell;

		if (expr->boolop == NOT_EXPR)
			return 1.0 - ConjunctSelectivity(linitial(expr->args));
		foreach(cell, expr->args)
		{
			double		s = ConjunctSelectivity(lfirst(cell));

			result = expr->boolop == OR_EXPR ? result + s - result * s : result * s;
		}
		return result;
	}
	return 0.5;
}

/*
 * ChooseRepartitionStrategy chooses the cheapest valid way to run the
 * join (see the file header) and sets the units' roles and keys; false
 * when the coordinator should do it.
 */
bool
ChooseRepartitionStrategy(RepartitionContext *context)
{
	int			count = list_length(context->nodeUnits);
	RoleChoice	best;
	double		rows = 0;
	ListCell   *cell;

	memset(&best, 0, sizeof(best));
	best.cost = -1;
	context->nodeCount = list_length(WorkerNodeList(true));
	if (context->nodeCount == 0)
		return false;
	foreach(cell, context->units)
		rows += ((JoinUnit *) lfirst(cell))->rows;
	if (rows < ShardextRepartitionJoinMinRows)
		return false;

	for (int node = 0; node < count; node++)
	{
		RoleChoice	choice;

		if (context->nodeClass[node] != node)
			continue;			/* one try per class */
		if (ChooseKeyClass(context, node, &choice) &&
			(best.cost < 0 || choice.cost < best.cost))
			best = choice;
	}
	foreach(cell, context->units)
	{
		RoleChoice	choice;

		if (ChooseBroadcast(context, lfirst(cell), &choice) &&
			(best.cost < 0 || choice.cost < best.cost))
			best = choice;
	}
	if (best.cost < 0)
		return false;
	ApplyChoice(context, &best);
	/* nothing to move: the query is co-located, planned another way */
	foreach(cell, context->units)
	{
		if (((JoinUnit *) lfirst(cell))->role != UNIT_STATIONARY)
			return true;
	}
	return false;
}

/*
 * ChooseKeyClass: the units partitioned by their expressions of one key
 * class.  Units whose distribution column is in it, of the colocation
 * group that would move the fewest bytes, stay; the others with a key
 * move into their shards (or, with none staying, into new partitions);
 * units without a key of the class are copied to every node.
 */
static bool
ChooseKeyClass(RepartitionContext *context, int keyClass, RoleChoice *choice)
{
	int			unitCount = list_length(context->units);
	int32		group;
	double		largest = -1;
	ListCell   *cell;

	memset(choice, 0, sizeof(RoleChoice));
	choice->roles = palloc0(sizeof(UnitRole) * unitCount);
	choice->keys = palloc0(sizeof(Node *) * unitCount);
	choice->keyClass = keyClass;
	ChooseKeys(context, keyClass, choice->keys);
	group = StayingGroup(context, choice->keys);
	choice->strategy = group >= 0 ? REPARTITION_SINGLE : REPARTITION_DUAL;
	foreach(cell, context->units)
	{
		JoinUnit   *unit = lfirst(cell);
		int			u = foreach_current_index(cell);

		if (choice->keys[u] == NULL)
		{
			if (!MayBroadcast(unit))
				return false;
			choice->roles[u] = UNIT_BROADCAST;
			choice->cost += unit->rows * unit->width * context->nodeCount;
		}
		else if (group >= 0 && unit->entry->colocationId == group &&
				 MayStay(unit, choice->keys[u]))
		{
			choice->roles[u] = UNIT_STATIONARY;
			if (unit->tableRows > largest)
			{
				largest = unit->tableRows;
				choice->layoutRelid = unit->relid;
			}
		}
		else
		{
			choice->roles[u] = UNIT_MOVED;
			choice->cost += unit->rows * unit->width;
		}
	}
	ApplyChoice(context, choice);
	return ValidateRoles(context);
}

/*
 * ChooseKeys sets each unit's key of a class: its distribution column if
 * that is in the class, else any of its expressions there (or NULL).
 */
static void
ChooseKeys(RepartitionContext *context, int keyClass, Node **keys)
{
	ListCell   *cell;

	foreach(cell, context->units)
	{
		JoinUnit   *unit = lfirst(cell);
		int			u = foreach_current_index(cell);
		ListCell   *unitCell;
		ListCell   *exprCell;

		forboth(unitCell, context->nodeUnits, exprCell, context->nodeExprs)
		{
			int			node = foreach_current_index(unitCell);

			if (lfirst(unitCell) != unit || context->nodeClass[node] != keyClass)
				continue;
			if (keys[u] == NULL || IsDistributionColumn(unit, lfirst(exprCell)))
				keys[u] = lfirst(exprCell);
		}
	}
}

/*
 * StayingGroup: the colocation group whose tables that may stay (keyed by
 * their distribution column) are the largest, or -1 when there is none.
 */
static int32
StayingGroup(RepartitionContext *context, Node **keys)
{
	int32		bestGroup = -1;
	double		bestStaying = -1;
	ListCell   *cell;

	foreach(cell, context->units)
	{
		JoinUnit   *unit = lfirst(cell);
		double		staying = 0;
		ListCell   *other;

		if (!MayStay(unit, keys[foreach_current_index(cell)]))
			continue;
		foreach(other, context->units)
		{
			JoinUnit   *peer = lfirst(other);

			if (peer->entry->colocationId == unit->entry->colocationId &&
				MayStay(peer, keys[foreach_current_index(other)]))
				staying += peer->rows * peer->width;
		}
		if (staying > bestStaying)
		{
			bestStaying = staying;
			bestGroup = unit->entry->colocationId;
		}
	}
	return bestGroup;
}

/*
 * MayStay: a unit keyed by its distribution column may stay in its shards,
 * but for NOT IN's table, whose map phase counts its rows and NULLs.
 */
static bool
MayStay(JoinUnit *unit, Node *key)
{
	return IsDistributionColumn(unit, key) && unit->nullKey == NULL;
}

/*
 * ChooseBroadcast: one unit stays in its shards, every other is copied
 * to every node.
 */
static bool
ChooseBroadcast(RepartitionContext *context, JoinUnit *stays, RoleChoice *choice)
{
	int			unitCount = list_length(context->units);
	ListCell   *cell;

	memset(choice, 0, sizeof(RoleChoice));
	choice->roles = palloc0(sizeof(UnitRole) * unitCount);
	choice->keys = palloc0(sizeof(Node *) * unitCount);
	choice->keyClass = -1;
	choice->strategy = REPARTITION_BROADCAST;
	choice->layoutRelid = stays->relid;
	foreach(cell, context->units)
	{
		JoinUnit   *unit = lfirst(cell);
		int			u = foreach_current_index(cell);

		if (unit == stays)
		{
			if (unit->level != 0)
				return false;
			choice->roles[u] = UNIT_STATIONARY;
			continue;
		}
		if (!MayBroadcast(unit))
			return false;
		choice->roles[u] = UNIT_BROADCAST;
		choice->cost += unit->rows * unit->width * context->nodeCount;
	}
	ApplyChoice(context, choice);
	return ValidateRoles(context);
}

static bool
MayBroadcast(JoinUnit *unit)
{
	return ShardextBroadcastJoinMaxRows > 0 && unit->rows <= ShardextBroadcastJoinMaxRows;
}

/* is expr a distribution column of the unit (its table's, or its subquery's)? */
static bool
IsDistributionColumn(JoinUnit *unit, Node *expr)
{
	Var		   *var = (Var *) StripRelabel(expr);

	return var != NULL && IsA(var, Var) && var->varlevelsup == 0 &&
		var->varno == unit->rtindex && list_member_int(unit->distColumns, var->varattno);
}

/* ApplyChoice sets the roles and keys of a choice on the units */
static void
ApplyChoice(RepartitionContext *context, RoleChoice *choice)
{
	ListCell   *cell;

	foreach(cell, context->units)
	{
		JoinUnit   *unit = lfirst(cell);

		unit->role = choice->roles[foreach_current_index(cell)];
		/* a copy: the query's expressions change when the plan is made */
		unit->key = copyObject(choice->keys[foreach_current_index(cell)]);
	}
	context->keyClass = choice->keyClass;
	context->strategy = choice->strategy;
	context->layoutRelid = choice->layoutRelid;
	context->partitionCount = choice->strategy == REPARTITION_DUAL ? PartitionCount(context) : 0;
}

/*
 * PartitionCount: the partitions of a dual repartition: at least as many
 * as the tables have shards (and nodes), more when the smaller side would
 * not fit in work_mem per partition.
 */
static int
PartitionCount(RepartitionContext *context)
{
	double		smallest = -1;
	int			count = context->nodeCount;
	ListCell   *cell;

	if (ShardextRepartitionJoinPartitions > 0)
		return ShardextRepartitionJoinPartitions;
	foreach(cell, context->units)
	{
		JoinUnit   *unit = lfirst(cell);
		double		bytes = unit->rows * unit->width;

		count = Max(count, unit->entry->shardCount);
		if (unit->role == UNIT_MOVED && (smallest < 0 || bytes < smallest))
			smallest = bytes;
	}
	if (smallest > 0)
		count = Max(count, (int) Min(1024.0, ceil(smallest / (work_mem * 1024.0))));
	/* as many on every node */
	return ((count + context->nodeCount - 1) / context->nodeCount) * context->nodeCount;
}

/*
 * ValidateRoles: does the query run partition by partition with the
 * units' roles and keys?  Every join of two partitioned sides must join
 * them by an edge of the key class; a side read whole by every partition
 * must not be a preserved side of an outer join; semi and anti joins of a
 * partitioned table must be correlated by such an edge; and the FROM
 * clause must have a partitioned table.
 */
bool
ValidateRoles(RepartitionContext *context)
{
	Bitmapset  *partitioned = NULL;
	ListCell   *cell;

	if (!ValidateJoinTree(context, (Node *) context->query->jointree, &partitioned) ||
		partitioned == NULL)
		return false;
	foreach(cell, context->sublinks)
	{
		SublinkJoin *join = lfirst(cell);
		ListCell   *edgeCell;
		bool		correlated = false;

		if (!IsPartitioned(join->unit))
			continue;
		foreach(edgeCell, context->edges)
		{
			KeyEdge    *edge = lfirst(edgeCell);
			JoinUnit   *other = edge->left == join->unit ? edge->right :
				edge->right == join->unit ? edge->left : NULL;

			if (other != NULL && other->level == 0 && IsKeyEdge(context, edge))
				correlated = true;
		}
		if (!correlated)
			return false;
	}
	return true;
}

/*
 * ValidateJoinTree checks a FROM clause node (see ValidateRoles) and sets
 * *partitioned to the ids of its partitioned units.
 */
static bool
ValidateJoinTree(RepartitionContext *context, Node *jtnode, Bitmapset **partitioned)
{
	*partitioned = NULL;
	if (IsA(jtnode, RangeTblRef))
	{
		JoinUnit   *unit = UnitOfRtindex(context, context->query,
										 ((RangeTblRef *) jtnode)->rtindex);

		if (unit != NULL && IsPartitioned(unit))
			*partitioned = bms_make_singleton(unit->unitId);
		return true;
	}
	if (IsA(jtnode, JoinExpr) && ((JoinExpr *) jtnode)->jointype != JOIN_INNER)
		return ValidateOuterJoin(context, (JoinExpr *) jtnode, partitioned);
	return ValidateInnerRegion(context, jtnode, partitioned);
}

/*
 * ValidateOuterJoin: an outer join of two partitioned sides must join them
 * by a key edge; a side without partitioned units may only be the side
 * that is null-extended (read whole in every partition, a preserved side
 * would give its unmatched rows once per partition).
 */
static bool
ValidateOuterJoin(RepartitionContext *context, JoinExpr *join, Bitmapset **partitioned)
{
	Bitmapset  *left;
	Bitmapset  *right;
	List	   *conjuncts = NIL;
	ListCell   *cell;

	if (!ValidateJoinTree(context, join->larg, &left) ||
		!ValidateJoinTree(context, join->rarg, &right))
		return false;
	*partitioned = bms_union(left, right);
	if (left == NULL || right == NULL)
		return (join->jointype == JOIN_LEFT && right == NULL) ||
			(join->jointype == JOIN_RIGHT && left == NULL) ||
			(left == NULL && right == NULL);
	CollectConjuncts(join->quals, &conjuncts);
	foreach(cell, context->edges)
	{
		KeyEdge    *edge = lfirst(cell);

		if (list_member_ptr(conjuncts, edge->clause) && IsKeyEdge(context, edge) &&
			((bms_is_member(edge->left->unitId, left) &&
			  bms_is_member(edge->right->unitId, right)) ||
			 (bms_is_member(edge->left->unitId, right) &&
			  bms_is_member(edge->right->unitId, left))))
			return true;
	}
	return false;
}

/*
 * ValidateInnerRegion: the items of a region of inner joins that have
 * partitioned units must be connected by key edges of the region's
 * conditions.
 */
static bool
ValidateInnerRegion(RepartitionContext *context, Node *jtnode, Bitmapset **partitioned)
{
	List	   *items = NIL;
	List	   *conjuncts = NIL;
	List	   *itemSets = NIL;
	int		   *component;
	int			first = -1;
	ListCell   *cell;

	InnerRegion(jtnode, &items, &conjuncts);
	component = palloc(sizeof(int) * Max(list_length(items), 1));
	foreach(cell, items)
	{
		Bitmapset  *set;

		if (!ValidateJoinTree(context, lfirst(cell), &set))
			return false;
		itemSets = lappend(itemSets, set);
		*partitioned = bms_union(*partitioned, set);
		component[foreach_current_index(cell)] = foreach_current_index(cell);
	}
	foreach(cell, context->edges)
	{
		KeyEdge    *edge = lfirst(cell);

		if (list_member_ptr(conjuncts, edge->clause) && IsKeyEdge(context, edge))
			ConnectItems(itemSets, component, edge);
	}
	foreach(cell, itemSets)
	{
		int			i = foreach_current_index(cell);

		if (lfirst(cell) == NULL)
			continue;
		if (first >= 0 && component[i] != first)
			return false;
		first = component[i];
	}
	return true;
}

/* ConnectItems merges the components of the two items an edge joins */
static void
ConnectItems(List *itemSets, int *component, KeyEdge *edge)
{
	int			left = -1;
	int			right = -1;
	ListCell   *cell;

	foreach(cell, itemSets)
	{
		if (bms_is_member(edge->left->unitId, lfirst(cell)))
			left = foreach_current_index(cell);
		if (bms_is_member(edge->right->unitId, lfirst(cell)))
			right = foreach_current_index(cell);
	}
	if (left < 0 || right < 0)
		return;
	left = component[left];
	right = component[right];
	for (int i = 0; i < list_length(itemSets); i++)
	{
		if (component[i] == left)
			component[i] = right;
	}
}

/*
 * InnerRegion collects the items of the region of inner joins rooted at
 * jtnode (the nodes below it that are not inner joins) and its conditions.
 */
static void
InnerRegion(Node *jtnode, List **items, List **conjuncts)
{
	if (IsA(jtnode, FromExpr))
	{
		ListCell   *cell;

		CollectConjuncts(((FromExpr *) jtnode)->quals, conjuncts);
		foreach(cell, ((FromExpr *) jtnode)->fromlist)
		{
			Node	   *child = lfirst(cell);

			if (IsA(child, FromExpr) ||
				(IsA(child, JoinExpr) && ((JoinExpr *) child)->jointype == JOIN_INNER))
				InnerRegion(child, items, conjuncts);
			else
				*items = lappend(*items, child);
		}
	}
	else if (IsA(jtnode, JoinExpr) && ((JoinExpr *) jtnode)->jointype == JOIN_INNER)
	{
		JoinExpr   *join = (JoinExpr *) jtnode;

		CollectConjuncts(join->quals, conjuncts);
		InnerRegion(join->larg, items, conjuncts);
		InnerRegion(join->rarg, items, conjuncts);
	}
	else
		*items = lappend(*items, jtnode);
}

static bool
IsPartitioned(JoinUnit *unit)
{
	return unit->role == UNIT_STATIONARY || unit->role == UNIT_MOVED;
}

/*
 * IsKeyEdge: does the edge equate the keys of two partitioned units (so
 * that the rows it joins are in one partition)?
 */
static bool
IsKeyEdge(RepartitionContext *context, KeyEdge *edge)
{
	return context->keyClass >= 0 &&
		context->nodeClass[edge->leftNode] == context->keyClass &&
		context->nodeClass[edge->rightNode] == context->keyClass &&
		IsPartitioned(edge->left) && IsPartitioned(edge->right) &&
		edge->left->key != NULL && edge->right->key != NULL &&
		equal(edge->left->key, edge->leftExpr) && equal(edge->right->key, edge->rightExpr);
}
