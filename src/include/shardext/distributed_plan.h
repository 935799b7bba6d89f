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
 * insertRowCount * insertColumnCount row values (for a repartition join,
 * the parameters of its map queries instead); for JOB_ROUTED, per
 * action its condition and its values, then the RETURNING expressions
 * (all over the subplan's rows, as OUTER_VAR Vars).
 *
 * A write to a table with global indexes also maintains them (gindex*):
 * see executor/global_index_writes.c.
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
	JOB_INSERT,					/* rows routed by their distribution value */
	JOB_ROUTED					/* UPDATE/DELETE/MERGE of rows a subplan found */
} DistributedJobKind;

/* how a pruning value restricts the shards */
#define PRUNE_EQUAL 0			/* distribution column = value */
#define PRUNE_ANY 1				/* distribution column = ANY (array value) */
#define PRUNE_GINDEX_EQUAL 2	/* first column of a global index = value */
#define PRUNE_GINDEX_NEXT 3		/* a further column of that index = value */
#define PRUNE_GINDEX_ANY 4		/* one-column global index = ANY (array value) */

/*
 * How a write keeps the global indexes of its table in step (see
 * executor/global_index_writes.c).
 */
#define GINDEX_NONE 0
#define GINDEX_INSERT_ROWS 1	/* entries from the rows the coordinator routes */
#define GINDEX_ARBITER_FIRST 2	/* INSERT ... ON CONFLICT (global unique cols) DO
								 * NOTHING: index entries first, rows they admit */
#define GINDEX_RETURNED 3		/* entries from hidden columns the tasks return */
#define GINDEX_LOCK_THEN_UPDATE 4	/* UPDATE of indexed columns: old values read
									 * and locked first, then rows updated by ctid */

/* the first hidden column, before the hidden base columns */
#define GINDEX_LEAD_NONE 0
#define GINDEX_LEAD_INSERTED 1	/* bool: the row was inserted (ON CONFLICT) */
#define GINDEX_LEAD_OLD_POSITION 2	/* int: the row's place among the locked rows */

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
	List	   *pruneIndexes;	/* per pruning value: index table OID of a global
								 * index lookup, InvalidOid otherwise */
	/* global index maintenance of a write (GINDEX_*) */
	int			gindexMode;
	List	   *gindexRelids;	/* index tables the write maintains */
	Oid			gindexArbiter;	/* GINDEX_ARBITER_FIRST: its index table */
	List	   *insertAttnums;	/* INSERT: base attribute of each row column */
	int			hiddenLead;		/* GINDEX_LEAD_* */
	List	   *hiddenAttnums;	/* base columns returned after the visible ones */
	List	   *lockSqlParts;	/* GINDEX_LOCK_THEN_UPDATE: the locking SELECT */
	int			lockParamCount; /* its parameters: the first ones of the job's */
	/* JOB_ROUTED (routed_writes.c): */
	int			routedCommand;	/* CMD_UPDATE, CMD_DELETE or CMD_MERGE */
	bool		routedStrict;	/* a target row changed twice is an error (MERGE) */
	bool		routedDedupe;	/* a target row can come twice (joins): change it once */
	List	   *routedActions;	/* per action: (matched, command, attnos, dist position) */
	bool		paramsFromSubplan;	/* parameters read the one row of custom_plans */
	int			sourceArrayCount;	/* more parameters: custom_plans' columns as arrays */
	bool		emptyInputRow;	/* a read that returns a row of no input (aggregates) */
	List	   *repartition;	/* a repartition join: its RepartitionPlan as a list
								 * (repartition.h); the template's reads fill in */
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
