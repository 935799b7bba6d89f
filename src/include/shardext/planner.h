/*-------------------------------------------------------------------------
 *
 * planner.h
 *	  The planner hook and distributed planning.
 *
 * Queries on distributed or reference tables are planned, in this order:
 *	- router (router_planner.c): every distributed table pinned to one shard
 *	  (by the distribution column = a constant or parameter): the whole
 *	  statement goes to one node, without the standard planner;
 *	- DML (router_planner.c, insert_planner.c, insert_select.c): INSERT
 *	  routed row by row (or INSERT ... SELECT pushed down between co-located
 *	  tables), UPDATE/DELETE on the shards their WHERE clause leaves, with
 *	  uncorrelated subqueries computed first (sublink_params.c); MERGE
 *	  (merge_planner.c) pushed down where it is correct shard by shard;
 *	  otherwise UPDATE/DELETE/MERGE of a hash table through the coordinator
 *	  (coordinator_modify.c: a row source finds the rows by shard ctid, the
 *	  executor's routed_writes.c changes them), and MERGE into a reference
 *	  table from source rows the coordinator ships (merge_shipped_source.c);
 *	- multi-shard pushdown (pushdown_planner.c): a per-shard query plus a
 *	  coordinator "combine" step planned by the standard planner;
 *	- recursive planning (recursive_planner.c): subqueries, CTEs and set
 *	  operation branches that can be distributed on their own are, and the
 *	  rest of the query is planned locally;
 *	- pull fallback (fallback_scan.c): the standard planner plans the query
 *	  locally and every distributed table is scanned by fetching the needed
 *	  columns of the matching rows.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_PLANNER_H
#define SHARDEXT_PLANNER_H

#include "nodes/pathnodes.h"
#include "optimizer/paths.h"
#include "optimizer/planner.h"

#include "shardext/distributed_plan.h"
#include "shardext/metadata.h"
#include "shardext/remote_sql.h"

extern planner_hook_type prev_planner_hook;
extern set_rel_pathlist_hook_type prev_set_rel_pathlist_hook;

extern struct ExplainState *PlannerExplainState;
#if PG_VERSION_NUM >= 190000
extern PlannedStmt *ShardextPlannerHook(Query *parse, const char *queryString,
										int cursorOptions, ParamListInfo boundParams,
										struct ExplainState *es);
#else
extern PlannedStmt *ShardextPlannerHook(Query *parse, const char *queryString,
										int cursorOptions, ParamListInfo boundParams);
#endif
extern PlannedStmt *ShardextPlanner(Query *parse, const char *queryString,
									int cursorOptions, ParamListInfo boundParams);
extern bool QueryReferencesDistributedTable(Node *node);

/* planner_hook.c */
extern PlannedStmt *ShardextLocalPlanner(Query *parse, const char *queryString,
										 int cursorOptions, ParamListInfo boundParams);
extern PlannedStmt *MakeDistributedPlannedStmt(Query *query, CustomScan *scan,
											   List *remoteTargetList);
extern void SetDistributedScanTargetList(CustomScan *scan, List *remoteTargetList);
extern List *RemoteScanTargetList(List *remoteTargetList);
extern void CollectRelations(Query *query, List **relids, List **rtes);
extern void AppendRelationsForChecks(Query *target, Query *source, bool nestedOnly);

/* router_planner.c */
extern PlannedStmt *PlanRouterQuery(Query *query);
extern PlannedStmt *PlanDistributedModify(Query *query, int cursorOptions,
										  ParamListInfo boundParams);
extern PlannedStmt *PlanDistributedInsert(Query *query, int cursorOptions,
										  ParamListInfo boundParams);
extern void FindPruningValues(Query *query, Index rtindex, DistTableCacheEntry *entry,
							  Node *quals, List **values, List **kinds);
extern void FindColumnPruningValues(Index rtindex, AttrNumber attno, DistTableCacheEntry *entry,
									Node *quals, List **values, List **kinds);
extern bool IsHashEquality(Oid opno, DistTableCacheEntry *entry);
extern bool ReturnsRowOfNoInput(Query *query);
extern Node *StripRelabel(Node *node);
extern bool ContainsAnyVar(Node *node);
extern bool IsDistColumnVar(Node *node, Query *query, int levelsUp, Index *rtindex);
extern void CollectConjuncts(Node *node, List **conjuncts);
extern void CollectJoinTreeQuals(Node *jtnode, bool innerOnly, List **conjuncts);
extern List *TopLevelConjuncts(Query *query);
extern int	RelationPosition(List *relations, Oid relid);
extern Node *DistributionPinValue(Node *clause, Index rtindex, int levelsUp,
								  DistTableCacheEntry *entry, int *kind);

/* insert_planner.c */
extern void DeparseInsertStatement(Query *query, DistTableCacheEntry *entry,
								   List *columns, RemoteSql *prefix, RemoteSql *suffix);
extern List *InsertColumns(Query *query, DistTableCacheEntry *entry, int *distColumn);
extern void InitInsertJob(DistributedJob *job, Query *query, DistTableCacheEntry *entry,
						  List *columns, int distColumn, List **paramExprs);
extern void DeparseInsertStatementWith(Query *query, bool withOnConflict,
									   DistTableCacheEntry *entry, List *columns,
									   RemoteSql *prefix, RemoteSql *suffix);

/* insert_select.c */
extern PlannedStmt *PlanInsertSelect(Query *query, int cursorOptions,
									 ParamListInfo boundParams);

/* pushdown_analysis.c */
typedef struct PushdownInfo
{
	Oid			anchorRelid;
	int32		colocationId;
	List	   *hashRtindexes;	/* hash tables of the top level */
	List	   *distVars;		/* their distribution column Vars */
} PushdownInfo;

extern bool AnalyzePushdownFrom(Query *query, PushdownInfo *info);
extern bool SubqueryIsColocated(RangeTblEntry *rte, Index rtindex, PushdownInfo *info,
								bool *readsHashTables);
extern bool IsDistColumnOf(Node *node, Query *query, PushdownInfo *info);
extern bool GroupedByDistColumn(Query *query, PushdownInfo *info);
extern bool WindowsPartitionedByDistColumn(Query *query, PushdownInfo *info);

/* pushdown_planner.c */
extern PlannedStmt *PlanMultiShardSelect(Query *query, int cursorOptions,
										 ParamListInfo boundParams);
/* builds the distributed scan that runs the per-shard SQL of a pushdown */
typedef CustomScan *(*PushdownScanBuilder) (Query *query, PushdownInfo *info,
											RemoteSql *sql, void *arg);
extern PlannedStmt *PlanPushdownSelect(Query *query, PushdownInfo *info,
									   PushdownScanBuilder makeScan, void *arg,
									   int cursorOptions, ParamListInfo boundParams);

/* recursive_planner.c */
typedef PlannedStmt *(*LocalPlannerFunction) (Query *, const char *, int, ParamListInfo);
extern Query *InlineSingleUseCtes(Query *parse);
extern PlannedStmt *PlanRecursively(Query *parse, const char *queryString, int cursorOptions,
									ParamListInfo boundParams, LocalPlannerFunction localPlanner);
extern PlannedStmt *PlanRecursivelyForcing(Query *parse, const char *queryString,
										   int cursorOptions, ParamListInfo boundParams,
										   LocalPlannerFunction localPlanner,
										   Index forcedRtindex);

/* coordinator_modify.c */

/*
 * One thing a write through the coordinator does to a row of its row
 * source: UPDATE or DELETE the target row the row names (matched), or
 * INSERT a new row (not matched, MERGE only), or nothing; MERGE has one
 * per WHEN clause, tried in order.
 */
typedef struct RoutedAction
{
	bool		matched;		/* for rows that name a target row */
	CmdType		commandType;	/* CMD_UPDATE, CMD_DELETE, CMD_INSERT, CMD_NOTHING */
	Node	   *qual;			/* the WHEN clause's AND condition, or NULL */
	List	   *attnos;			/* UPDATE: columns set; INSERT: columns given */
	List	   *values;			/* their values, over the row source's columns */
	int			distPosition;	/* INSERT: the distribution column among attnos, or -1 */
} RoutedAction;

extern PlannedStmt *PlanCoordinatorModify(Query *query, int cursorOptions,
										  ParamListInfo boundParams);
extern PlannedStmt *PlanRoutedWrite(Query *query, Query *source, Index targetIndex,
									List *actions, List *returning, int cursorOptions,
									ParamListInfo boundParams);
extern PlannedStmt *PlanRowSource(Query *source, Index targetIndex, int cursorOptions,
								  ParamListInfo boundParams);
extern AttrNumber ReadTargetThroughRowsQuery(Query *source, Index rtindex, Bitmapset *attnos,
											 List *quals);
extern Bitmapset *TargetColumns(Node *node, Index rtindex, Oid relid, Bitmapset *attnos);
extern List *PushableTargetConditions(List *conjuncts, Index rtindex, RangeTblEntry *target);
/* the columns a write through the coordinator carries through its row source */
typedef struct RowSourceColumns
{
	List	  **targetList;		/* of the row source, extended as needed */
	List	   *carried;		/* expressions carried ... */
	List	   *carriedRefs;	/* ... and their row source columns */
} RowSourceColumns;

extern Node *AddRowSourceColumn(List **targetList, Expr *expr, const char *name);
extern Node *CarryRowSourceColumn(RowSourceColumns *columns, Node *expr);
extern void CheckDistributionColumnUnchanged(DistTableCacheEntry *entry, AttrNumber attno);
extern void RejectShardCtidReferences(Query *query);

/* sublink_params.c */
extern Query *ExtractSublinkParams(Query *query, List **columns);
extern PlannedStmt *PlanWithSublinkParams(Query *query, List *columns, CustomScan *scan,
										  List *remoteTargetList, int cursorOptions,
										  ParamListInfo boundParams);

/* merge_planner.c */
extern PlannedStmt *PlanDistributedMerge(Query *query, int cursorOptions,
										 ParamListInfo boundParams);
extern void DeparseMergeAction(RemoteSql *sql, Query *query, MergeAction *action);

/* merge_shipped_source.c */
extern PlannedStmt *PlanMergeWithShippedSource(Query *query, int cursorOptions,
											   ParamListInfo boundParams);

/* fallback_scan.c */
extern void DistributedRelPathlist(PlannerInfo *root, RelOptInfo *rel, Index rti,
								   RangeTblEntry *rte);

#endif							/* SHARDEXT_PLANNER_H */
