/*-------------------------------------------------------------------------
 *
 * distributed_plan.h
 *	  The distributed CustomScan: what the planner puts into it and how the
 *	  executor runs it.
 *
 * A DistributedJob describes the work of one CustomScan: per-shard SQL
 * (a template, see remote_sql.h), how to choose the shards at execution
 * (pruning values) and what to send as parameters.  Plans keep table OIDs
 * and SQL templates only; shards and their placements are looked up at
 * execution, so cached plans survive shard moves.
 *
 * custom_exprs of the CustomScan hold, in this order: pruneCount pruning
 * values, paramCount remote parameter expressions, and for INSERT
 * insertRowCount * insertColumnCount row values.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_DISTRIBUTED_PLAN_H
#define SHARDEXT_DISTRIBUTED_PLAN_H

#include "nodes/execnodes.h"
#include "nodes/extensible.h"
#include "nodes/plannodes.h"

#define SHARDEXT_SCAN_NAME "ShardextScan"

typedef enum DistributedJobKind
{
	JOB_SELECT = 1,				/* rows come back from every task */
	JOB_MODIFY,					/* UPDATE/DELETE, on every placement */
	JOB_INSERT					/* rows routed by their distribution value */
} DistributedJobKind;

/* how a pruning value restricts the shards */
#define PRUNE_EQUAL 0			/* distribution column = value */
#define PRUNE_ANY 1				/* distribution column = ANY (array value) */

typedef struct DistributedJob
{
	int			kind;			/* DistributedJobKind */
	List	   *sqlParts;		/* template; for INSERT the part before VALUES */
	List	   *sqlSuffix;		/* INSERT: the part after VALUES */
	List	   *relations;		/* OIDs of the tables in the template */
	int			anchor;			/* position of the hash table that defines the
								 * shards, -1 when all tables are reference tables */
	int			pruneCount;
	List	   *pruneKinds;		/* PRUNE_* per pruning value */
	int			paramCount;
	bool		hasReturning;	/* DML whose rows come back */
	bool		usePrepared;	/* prepare the statement on each connection */
	int			insertRowCount;
	int			insertColumnCount;
	int			insertDistColumn;	/* -1 for reference tables */
	List	   *scanAttnums;	/* scan-level job: attnos the remote columns fill */
	bool		pullFallback;	/* scan of one table under a local plan */
	bool		insertFromSubplan;	/* INSERT rows come from custom_plans */
	bool		locksRows;		/* SELECT ... FOR UPDATE/SHARE */
	bool		primaryOnly;	/* volatile functions: never on a read replica */
} DistributedJob;

/* planner side (distributed_scan.c) */
extern void InitDistributedJob(DistributedJob *job, DistributedJobKind kind,
							   List *sqlParts, List *relations, int paramCount);
extern CustomScan *MakeDistributedScan(DistributedJob *job, List *customExprs);
extern DistributedJob *DistributedJobFromScan(CustomScan *scan);
extern void RegisterDistributedScanMethods(void);
extern bool IsDistributedScan(Plan *plan);
extern void MarkPrimaryOnlyScans(PlannedStmt *plan, Query *parse);

/* executor side (distributed_executor.c) */
extern Node *CreateDistributedScanState(CustomScan *scan);
extern void InitializeDistributedExecutor(void);

/* statistics (shard_stats.c) */
extern void ShardStatsShmemRequest(void);
extern Size ShardStatsShmemSize(void);
extern void ShardStatsShmemInit(void);
extern void CountShardQuery(int64 shardId);
extern int64 ShardQueryCount(int64 shardId);

#endif							/* SHARDEXT_DISTRIBUTED_PLAN_H */
