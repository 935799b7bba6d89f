/*-------------------------------------------------------------------------
 *
 * rebalancer.c
 *	  shardext_rebalance_plan(), shardext_rebalance() and
 *	  shardext_drain_node(): which shard groups to move where so that the
 *	  active nodes hold shares in proportion to their weights, and moving
 *	  them one after the other.
 *
 * The unit is a shard group (the co-located shards of one hash range).
 * by_shard_count balances the groups of each colocation group on its own,
 * so every table stays spread evenly; by_disk_size balances the bytes of all
 * groups together; by_load balances the statements routed to the groups
 * since the last shardext_stat_shards_reset() (shardext.stat_shards of this
 * coordinator), all groups together.  Each moves a group from the node furthest above its
 * share to the node furthest below, only while that strictly reduces the
 * imbalance (sum of squared differences from the shares).  Nodes above
 * their share only give and nodes below only receive, so after a node is
 * added the plan moves groups onto it and none between the old nodes.
 *
 * The shard group of an isolated tenant (hash_min = hash_max, see
 * shardext_isolate_tenant) counts towards its node's load but stays where
 * it is, unless shardext.rebalance_isolated_tenants is on or its node is
 * drained.  Each planned move carries the load (in the strategy's unit) of
 * its source and target before and after it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "shardext/array_literal.h"
#include "shardext/connection.h"
#include "shardext/distributed_plan.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/privileges.h"
#include "shardext/remote_command.h"
#include "shardext/shard_move.h"

/* safety net against a plan that does not converge */
#define MAX_PLANNED_MOVES 100000

PG_FUNCTION_INFO_V1(shardext_rebalance_plan);
PG_FUNCTION_INFO_V1(shardext_rebalance);
PG_FUNCTION_INFO_V1(shardext_drain_node);

typedef enum RebalanceStrategy
{
	REBALANCE_BY_SHARD_COUNT,
	REBALANCE_BY_DISK_SIZE,
	REBALANCE_BY_LOAD
} RebalanceStrategy;

/* columns of shardext_rebalance_plan(): 8 in 1.0, 13 since 1.1 */
#define REBALANCE_PLAN_COLUMNS 13

/* one shard group, named by the shard of its first table */
typedef struct ShardGroupInfo
{
	int64		shardId;
	Oid			relid;
	int32		colocationId;
	int			colocatedCount;
	int32		nodeId;			/* where it is (or would be, while planning) */
	int64		bytes;
	double		statements;		/* counted in shardext.stat_shards */
	bool		isolated;		/* a single hash value: an isolated tenant */
	List	   *shardNames;		/* quoted, qualified names on the node */
} ShardGroupInfo;

typedef struct PlannedMove
{
	ShardGroupInfo *group;
	int32		sourceNodeId;
	int32		targetNodeId;
	double		measure;		/* the group's load in the strategy's unit */
	double		sourceBefore;	/* loads of source and target, before and after */
	double		sourceAfter;
	double		targetBefore;
	double		targetAfter;
} PlannedMove;

/* a node while planning */
typedef struct NodeShare
{
	WorkerNode *node;
	bool		receives;		/* an active node that is not being drained */
	double		load;			/* groups or bytes */
	double		share;			/* what its weight entitles it to */
} NodeShare;

static RebalanceStrategy ParseStrategy(const char *strategy);
static List *CollectShardGroups(void);
static void MeasureShardGroups(List *groups);
static List *PlanRebalance(RebalanceStrategy strategy, int32 drainNodeId, List **groupsOut);
static void PlanColocationGroup(List *groups, NodeShare *nodes, int nodeCount,
								RebalanceStrategy strategy, int32 drainNodeId, List **moves);
static int	ExecutePlan(NodeConnection *local, List *plan, MoveMode mode);

static RebalanceStrategy
ParseStrategy(const char *strategy)
{
	if (strcmp(strategy, "by_shard_count") == 0)
		return REBALANCE_BY_SHARD_COUNT;
	if (strcmp(strategy, "by_disk_size") == 0)
		return REBALANCE_BY_DISK_SIZE;
	if (strcmp(strategy, "by_load") == 0)
		return REBALANCE_BY_LOAD;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid rebalance strategy \"%s\"", strategy),
			 errhint("Use 'by_shard_count', 'by_disk_size' or 'by_load'.")));
	return REBALANCE_BY_SHARD_COUNT;	/* keep compiler quiet */
}

/*
 * ShardWithRange returns the shard of a co-located table's cache entry that
 * covers the same hash range as shard, or NULL.  Co-located tables have
 * the same ranges in the same (hash) order, so it is the shard at the same
 * position (index); otherwise the sorted ranges are searched.
 */
static ShardInterval *
ShardWithRange(DistTableCacheEntry *entry, int index, ShardInterval *shard)
{
	int			low = 0;
	int			high = entry->shardCount - 1;

	if (index < entry->shardCount && entry->shards[index].hashMin == shard->hashMin &&
		entry->shards[index].hashMax == shard->hashMax)
		return &entry->shards[index];
	while (low <= high)
	{
		int			middle = low + (high - low) / 2;
		ShardInterval *candidate = &entry->shards[middle];

		if (candidate->hashMin == shard->hashMin)
			return candidate->hashMax == shard->hashMax ? candidate : NULL;
		if (candidate->hashMin < shard->hashMin)
			low = middle + 1;
		else
			high = middle - 1;
	}
	return NULL;
}

/*
 * CollectShardGroups returns the shard groups of every hash-distributed
 * colocation group, in colocation group and hash order.
 */
static List *
CollectShardGroups(void)
{
	List	   *groups = NIL;
	List	   *seenColocations = NIL;
	ListCell   *cell;

	foreach(cell, DistributedTableList())
	{
		DistTableCacheEntry *entry = GetDistTableCacheEntry(lfirst_oid(cell));
		List	   *tables;
		ListCell   *tableCell;

		if (entry == NULL || entry->method != DISTRIBUTE_BY_HASH ||
			list_member_int(seenColocations, entry->colocationId))
			continue;
		seenColocations = lappend_int(seenColocations, entry->colocationId);
		tables = ColocatedTableList(entry->colocationId);
		entry = GetDistTableCacheEntry(linitial_oid(tables));

		for (int i = 0; i < entry->shardCount; i++)
		{
			ShardInterval *shard = &entry->shards[i];
			ShardGroupInfo *group;

			if (shard->placementCount != 1)
				continue;
			group = palloc0(sizeof(ShardGroupInfo));
			group->shardId = shard->shardId;
			group->relid = entry->relid;
			group->colocationId = entry->colocationId;
			group->nodeId = shard->placementNodeIds[0];
			group->isolated = shard->hashMin == shard->hashMax;
			foreach(tableCell, tables)
			{
				Oid			relid = lfirst_oid(tableCell);
				DistTableCacheEntry *other = GetDistTableCacheEntry(relid);
				ShardInterval *same = other != NULL ? ShardWithRange(other, i, shard) : NULL;

				if (same == NULL)
					continue;
				group->shardNames = lappend(group->shardNames,
											QualifiedShardName(relid, same->shardId));
				group->statements += (double) ShardQueryCount(same->shardId);
				group->colocatedCount++;
			}
			groups = lappend(groups, group);
		}
	}
	return groups;
}

/* MeasureShardGroups asks each node for the size of its shard groups */
static void
MeasureShardGroups(List *groups)
{
	ListCell   *nodeCell;

	foreach(nodeCell, WorkerNodeList(false))
	{
		WorkerNode *node = lfirst(nodeCell);
		List	   *names = NIL;
		List	   *indexes = NIL;
		List	   *nodeGroups = NIL;
		ListCell   *cell;
		NodeConnection *conn;
		PGresult   *result;
		const char *params[2];

		foreach(cell, groups)
		{
			ShardGroupInfo *group = lfirst(cell);
			ListCell   *nameCell;

			if (group->nodeId != node->nodeId)
				continue;
			nodeGroups = lappend(nodeGroups, group);
			foreach(nameCell, group->shardNames)
			{
				names = lappend(names, lfirst(nameCell));
				indexes = lappend(indexes, psprintf("%d", list_length(nodeGroups) - 1));
			}
		}
		if (nodeGroups == NIL)
			continue;

		/*
		 * The shard tables are found by name in pg_class, not with regclass
		 * (which needs USAGE on their schemas): sizes are for anyone.
		 */
		conn = OpenDedicatedConnection(node->host, node->port, false, true);
		params[0] = TextArrayLiteral(names);
		params[1] = TextArrayLiteral(indexes);
		PG_TRY();
		{
			result = ExecuteRemoteQueryParams(conn,
											  "SELECT u.g::int, sum(coalesce(pg_catalog.pg_total_relation_size(c.oid), "
											  "  0))::int8 "
											  "FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), "
											  "  pg_catalog.unnest($2::pg_catalog.text[])) u(n, g) "
											  "LEFT JOIN LATERAL (SELECT c.oid FROM pg_catalog.pg_class c "
											  "  JOIN pg_catalog.pg_namespace s ON s.oid = c.relnamespace "
											  "  WHERE s.nspname = (pg_catalog.parse_ident(u.n))[1] "
											  "    AND c.relname = (pg_catalog.parse_ident(u.n))[2]) c ON true "
											  "GROUP BY 1",
											  2, params);
			for (int i = 0; i < PQntuples(result); i++)
			{
				int			index = pg_strtoint32(PQgetvalue(result, i, 0));

				((ShardGroupInfo *) list_nth(nodeGroups, index))->bytes =
					pg_strtoint64(PQgetvalue(result, i, 1));
			}
			PQclear(result);
		}
		PG_FINALLY();
		{
			CloseDedicatedConnection(conn);
		}
		PG_END_TRY();
	}
}

/* the node whose load is furthest above its share among those holding a group */
static int
MostLoaded(NodeShare *nodes, int nodeCount, int *groupCounts, int32 drainNodeId)
{
	int			best = -1;

	for (int i = 0; i < nodeCount; i++)
	{
		if (groupCounts[i] == 0 || (!nodes[i].receives && nodes[i].node->nodeId != drainNodeId))
			continue;
		if (nodes[i].node->nodeId == drainNodeId)
			return i;			/* a drained node gives first, whatever its load */
		if (best < 0 || nodes[i].load - nodes[i].share > nodes[best].load - nodes[best].share)
			best = i;
	}
	return best;
}

/* the receiving node furthest below its share */
static int
LeastLoaded(NodeShare *nodes, int nodeCount)
{
	int			best = -1;

	for (int i = 0; i < nodeCount; i++)
	{
		if (!nodes[i].receives)
			continue;
		if (best < 0 || nodes[i].load - nodes[i].share < nodes[best].load - nodes[best].share)
			best = i;
	}
	return best;
}

/* GroupMeasure is a shard group's load in the unit of the strategy */
static double
GroupMeasure(ShardGroupInfo *group, RebalanceStrategy strategy)
{
	if (strategy == REBALANCE_BY_DISK_SIZE)
		return (double) group->bytes;
	if (strategy == REBALANCE_BY_LOAD)
		return group->statements;
	return 1.0;
}

/*
 * GroupStays: the group of an isolated tenant keeps its node unless asked
 * (shardext.rebalance_isolated_tenants) or its node is being drained.
 */
static bool
GroupStays(ShardGroupInfo *group, int32 drainNodeId)
{
	return group->isolated && !ShardextRebalanceIsolatedTenants &&
		group->nodeId != drainNodeId;
}

/*
 * ChooseGroup picks the group to move from node from: when draining or
 * counting groups, the smallest; by bytes or load, the one whose measure is
 * closest to half the gap (and smaller than the gap), or NULL.
 */
static ShardGroupInfo *
ChooseGroup(List *groups, int32 fromNodeId, RebalanceStrategy strategy, bool draining,
			int32 drainNodeId, double gap)
{
	ShardGroupInfo *chosen = NULL;
	ListCell   *cell;

	foreach(cell, groups)
	{
		ShardGroupInfo *group = lfirst(cell);
		double		measure = GroupMeasure(group, strategy);

		if (group->nodeId != fromNodeId || GroupStays(group, drainNodeId))
			continue;
		if (strategy != REBALANCE_BY_SHARD_COUNT && !draining)
		{
			if (measure <= 0 || measure >= gap)
				continue;
			if (chosen == NULL ||
				fabs(measure - gap / 2) < fabs(GroupMeasure(chosen, strategy) - gap / 2))
				chosen = group;
		}
		else if (chosen == NULL || group->bytes < chosen->bytes)
			chosen = group;
	}
	return chosen;
}

/*
 * PlanColocationGroup plans the moves among groups (all of one colocation
 * group, or all groups for by_disk_size and by_load), appending
 * PlannedMoves to *moves.  A drained node gives away every group;
 * otherwise a group moves from the most to the least loaded node while
 * that strictly reduces the sum of squared differences from the shares: by
 * count, when their differences are more than one group apart; by bytes or
 * load, for the group closest to half the gap (see ChooseGroup).
 */
static void
PlanColocationGroup(List *groups, NodeShare *nodes, int nodeCount, RebalanceStrategy strategy,
					int32 drainNodeId, List **moves)
{
	int		   *groupCounts = palloc0(sizeof(int) * nodeCount);
	double		total = 0;
	double		totalWeight = 0;
	ListCell   *cell;

	for (int i = 0; i < nodeCount; i++)
	{
		nodes[i].load = 0;
		if (nodes[i].receives)
			totalWeight += nodes[i].node->weight;
	}
	foreach(cell, groups)
	{
		ShardGroupInfo *group = lfirst(cell);

		for (int i = 0; i < nodeCount; i++)
		{
			if (nodes[i].node->nodeId != group->nodeId)
				continue;
			if (!nodes[i].receives && group->nodeId != drainNodeId)
				break;			/* on an inactive node: it stays where it is */
			nodes[i].load += GroupMeasure(group, strategy);
			if (!GroupStays(group, drainNodeId))
				groupCounts[i]++;
			total += GroupMeasure(group, strategy);
		}
	}
	if (totalWeight <= 0)
		return;
	for (int i = 0; i < nodeCount; i++)
		nodes[i].share = nodes[i].receives ? total * nodes[i].node->weight / totalWeight : 0;

	for (int iteration = 0; iteration < MAX_PLANNED_MOVES; iteration++)
	{
		int			from = MostLoaded(nodes, nodeCount, groupCounts, drainNodeId);
		int			to = LeastLoaded(nodes, nodeCount);
		bool		draining;
		double		gap;
		double		measure;
		ShardGroupInfo *chosen;
		PlannedMove *move;

		if (from < 0 || to < 0 || from == to)
			break;
		draining = nodes[from].node->nodeId == drainNodeId;
		if (drainNodeId != 0 && !draining)
			break;				/* a drain moves nothing else */
		gap = (nodes[from].load - nodes[from].share) - (nodes[to].load - nodes[to].share);

		chosen = ChooseGroup(groups, nodes[from].node->nodeId, strategy, draining,
							 drainNodeId, gap);
		if (chosen == NULL ||
			(!draining && strategy == REBALANCE_BY_SHARD_COUNT && gap <= 1.0 + 1e-9))
			break;
		measure = GroupMeasure(chosen, strategy);

		move = palloc0(sizeof(PlannedMove));
		move->group = chosen;
		move->sourceNodeId = chosen->nodeId;
		move->targetNodeId = nodes[to].node->nodeId;
		move->measure = measure;
		move->sourceBefore = nodes[from].load;
		move->targetBefore = nodes[to].load;
		*moves = lappend(*moves, move);

		chosen->nodeId = nodes[to].node->nodeId;
		nodes[from].load -= measure;
		nodes[to].load += measure;
		move->sourceAfter = nodes[from].load;
		move->targetAfter = nodes[to].load;
		groupCounts[from]--;
		groupCounts[to]++;
	}
}

/*
 * PlanRebalance returns the PlannedMoves that balance the cluster (or that
 * empty drainNodeId); *groupsOut gets the shard groups, measured.
 */
static List *
PlanRebalance(RebalanceStrategy strategy, int32 drainNodeId, List **groupsOut)
{
	List	   *nodeList = WorkerNodeList(false);
	int			nodeCount = list_length(nodeList);
	NodeShare  *nodes = palloc0(sizeof(NodeShare) * Max(nodeCount, 1));
	List	   *groups = CollectShardGroups();
	List	   *moves = NIL;
	List	   *sourcePositions = NIL;
	ListCell   *cell;
	int			receivers = 0;

	foreach(cell, nodeList)
	{
		int			i = foreach_current_index(cell);

		nodes[i].node = lfirst(cell);
		nodes[i].receives = nodes[i].node->active && nodes[i].node->nodeId != drainNodeId;
		receivers += nodes[i].receives ? 1 : 0;
	}
	if (receivers == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no active node can receive shards"),
				 errhint("Add a node with shardext_add_node() first.")));

	MeasureShardGroups(groups);
	*groupsOut = groups;

	/* remember where each group is: planning moves them on paper */
	foreach(cell, groups)
		sourcePositions = lappend_int(sourcePositions, ((ShardGroupInfo *) lfirst(cell))->nodeId);

	if (strategy != REBALANCE_BY_SHARD_COUNT && drainNodeId == 0)
		PlanColocationGroup(groups, nodes, nodeCount, strategy, drainNodeId, &moves);
	else
	{
		List	   *colocations = NIL;

		foreach(cell, groups)
		{
			ShardGroupInfo *group = lfirst(cell);

			if (!list_member_int(colocations, group->colocationId))
				colocations = lappend_int(colocations, group->colocationId);
		}
		foreach(cell, colocations)
		{
			int32		colocationId = lfirst_int(cell);
			List	   *members = NIL;
			ListCell   *groupCell;

			foreach(groupCell, groups)
			{
				ShardGroupInfo *group = lfirst(groupCell);

				if (group->colocationId == colocationId)
					members = lappend(members, group);
			}
			PlanColocationGroup(members, nodes, nodeCount, REBALANCE_BY_SHARD_COUNT,
								drainNodeId, &moves);
		}
	}

	/* back to where the groups are */
	foreach(cell, groups)
		((ShardGroupInfo *) lfirst(cell))->nodeId =
			list_nth_int(sourcePositions, foreach_current_index(cell));
	return moves;
}

/*
 * shardext_rebalance_plan(strategy text) returns the moves that
 * shardext_rebalance() would make, in order.
 */
Datum
shardext_rebalance_plan(PG_FUNCTION_ARGS)
{
	RebalanceStrategy strategy = ParseStrategy(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	List	   *groups;
	List	   *plan;
	ListCell   *cell;

	EnsureShardextInstalled();
	plan = PlanRebalance(strategy, 0, &groups);

	InitMaterializedSRF(fcinfo, 0);
	foreach(cell, plan)
	{
		PlannedMove *move = lfirst(cell);
		Datum		values[REBALANCE_PLAN_COLUMNS];
		bool		nulls[REBALANCE_PLAN_COLUMNS] = {false};

		values[0] = Int64GetDatum(move->group->shardId);
		values[1] = Int32GetDatum(move->sourceNodeId);
		values[2] = Int32GetDatum(GetWorkerNode(move->sourceNodeId)->port);
		values[3] = Int32GetDatum(move->targetNodeId);
		values[4] = Int32GetDatum(GetWorkerNode(move->targetNodeId)->port);
		values[5] = ObjectIdGetDatum(move->group->relid);
		values[6] = Int32GetDatum(move->group->colocatedCount);
		values[7] = Int64GetDatum(move->group->bytes);
		values[8] = Float8GetDatum(move->measure);
		values[9] = Float8GetDatum(move->sourceBefore);
		values[10] = Float8GetDatum(move->sourceAfter);
		values[11] = Float8GetDatum(move->targetBefore);
		values[12] = Float8GetDatum(move->targetAfter);
		/* the 1.0 declaration has the first 8 columns only */
		if (rsinfo->setDesc->natts != 8 && rsinfo->setDesc->natts != REBALANCE_PLAN_COLUMNS)
			elog(ERROR, "shardext_rebalance_plan() is declared with %d columns",
				 rsinfo->setDesc->natts);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * ExecutePlan records the planned moves as pending (so that the progress
 * view shows the whole plan) and runs them one after the other.  A failure
 * or cancel stops the rebalance: the move in progress is rolled back, the
 * finished ones stay, the pending ones are recorded as cancelled.
 */
static int
ExecutePlan(NodeConnection *local, List *plan, MoveMode mode)
{
	List	   *moveIds = NIL;
	int64		jobId = 0;
	int			done = 0;
	ListCell   *cell;

	foreach(cell, plan)
	{
		PlannedMove *planned = lfirst(cell);
		ShardMoveState pending;
		MoveShard  *shard = palloc0(sizeof(MoveShard));
		int64		moveId;

		memset(&pending, 0, sizeof(pending));
		shard->relid = planned->group->relid;
		shard->shardId = planned->group->shardId;
		pending.operation = MOVE_OPERATION_MOVE;
		pending.mode = mode;
		pending.jobId = jobId;
		pending.shards = list_make1(shard);
		pending.source.nodeId = planned->sourceNodeId;
		pending.target.nodeId = planned->targetNodeId;
		pending.totalBytes = planned->group->bytes;
		moveId = InsertMoveRecord(local, &pending, "pending");
		if (jobId == 0)
			jobId = moveId;
		moveIds = lappend(moveIds, palloc(sizeof(int64)));
		*(int64 *) llast(moveIds) = moveId;
	}
	PG_TRY();
	{
		foreach(cell, plan)
		{
			PlannedMove *planned = lfirst(cell);
			int64		moveId = *(int64 *) list_nth(moveIds, foreach_current_index(cell));
			MemoryContext moveContext = AllocSetContextCreate(CurrentMemoryContext,
															  "shardext rebalance move",
															  ALLOCSET_DEFAULT_SIZES);
			MemoryContext oldContext = MemoryContextSwitchTo(moveContext);
			ShardMoveState *state;
			ListCell   *shardCell;

			ereport(NOTICE,
					(errmsg("rebalance: move %d of %d", foreach_current_index(cell) + 1,
							list_length(plan))));
			RunCleanup(local, 0, true, true, jobId, true);
			state = PrepareShardMove(planned->group->shardId, planned->targetNodeId,
									 mode, MOVE_OPERATION_MOVE, jobId, moveId);
			state->local = local;
			ExecuteShardMove(state);
			done++;

			/* the next move may be of other tables: let go of these */
			foreach(shardCell, state->shards)
				UnlockRelationOid(((MoveShard *) lfirst(shardCell))->relid,
								  ShareUpdateExclusiveLock);
			MemoryContextSwitchTo(oldContext);
			MemoryContextDelete(moveContext);
		}
	}
	PG_CATCH();
	{
		HOLD_INTERRUPTS();
		CancelPendingMoves(local, jobId);
		RESUME_INTERRUPTS();
		PG_RE_THROW();
	}
	PG_END_TRY();
	return done;
}

/*
 * RunRebalance plans the moves (drainNodeId: off that node, 0: to balance
 * by strategy) and makes them over a loopback connection of its own, after
 * cleaning up what earlier moves left; when there is nothing to move it
 * says so with nothingToMove.  Returns the number of moves made.
 */
static int
RunRebalance(RebalanceStrategy strategy, int32 drainNodeId, MoveMode mode,
			 const char *nothingToMove)
{
	NodeConnection *local = OpenLoopbackConnection(true);
	List	   *groups;
	List	   *plan;
	int			done = 0;

	PG_TRY();
	{
		RunCleanup(local, 0, true, true, 0, true);
		plan = PlanRebalance(strategy, drainNodeId, &groups);
		if (plan == NIL)
			ereport(NOTICE, (errmsg_internal("%s", nothingToMove)));
		else
			done = ExecutePlan(local, plan, mode);
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(local);
	}
	PG_END_TRY();
	return done;
}

/*
 * shardext_rebalance(strategy text, mode text) executes the plan and
 * returns the number of moves made.
 */
Datum
shardext_rebalance(PG_FUNCTION_ARGS)
{
	RebalanceStrategy strategy = ParseStrategy(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	MoveMode	mode = ParseMoveMode(text_to_cstring(PG_GETARG_TEXT_PP(1)));

	EnsureAdminAndShardext("shardext_rebalance");
	EnsureOutsideTransactionBlock("shardext_rebalance");
	PG_RETURN_INT32(RunRebalance(strategy, 0, mode,
								 _("the shards are balanced; nothing to move")));
}

/*
 * shardext_drain_node(host text, port int, mode text) moves every shard
 * group off a node, each to the receiving node furthest below its share,
 * and returns the number of moves made.
 */
Datum
shardext_drain_node(PG_FUNCTION_ARGS)
{
	char	   *host = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int32		port = PG_GETARG_INT32(1);
	MoveMode	mode = ParseMoveMode(text_to_cstring(PG_GETARG_TEXT_PP(2)));
	int32		nodeId;

	EnsureAdminAndShardext("shardext_drain_node");
	nodeId = GetWorkerNodeAt(host, port)->nodeId;
	EnsureOutsideTransactionBlock("shardext_drain_node");
	PG_RETURN_INT32(RunRebalance(REBALANCE_BY_SHARD_COUNT, nodeId, mode,
								 psprintf(_("node %s:%d holds no shards to move"),
										  host, port)));
}
