/*-------------------------------------------------------------------------
 *
 * repartition.h
 *	  Repartition joins: joins of distributed tables that are not co-located
 *	  on the join key run on the workers, with the rows of one or both sides
 *	  hash-partitioned by the key and moved worker to worker.
 *
 * The planner (planner/repartition_planner.c, with the estimates of
 * planner/repartition_cost.c) rewrites a query whose distributed tables
 * are joined by equalities into one that is correct partition by
 * partition: the tables that must move are replaced by reads of their
 * partitions, and the multi-shard pushdown planner plans the rest (per
 * partition queries, aggregates combined on the coordinator).  The plan is
 * a distributed scan whose job carries a RepartitionPlan.
 *
 * At execution (executor/repartition_exchange.c) an "exchange" runs
 * before the scan's tasks:
 *	1. map: a task per shard of each moving table runs its query on the
 *	   shard's node and writes the rows, partitioned by a hash of the join
 *	   key, into block files on that node (shardext.repartition_map);
 *	2. fetch: every node pulls the blocks of its partitions from every
 *	   other node over a connection of its own (shardext.repartition_fetch,
 *	   reading shardext.repartition_blocks on the other side);
 *	3. the scan's tasks, one per partition on the partition's node, read
 *	   the partitions (shardext.repartition_read) and stream the joined
 *	   rows to the coordinator;
 *	4. the files are removed (shardext.repartition_cleanup) when the scan
 *	   ends, on error and cancel; the maintenance daemon removes what a
 *	   crash left behind (shardext.repartition_sweep).
 * The files of an exchange live in one directory per node and user,
 * base/pgsql_tmp/pgsql_tmp_shardext_<exchange id>_<user oid>, which a
 * restart of the node removes with its other temporary files.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_REPARTITION_H
#define SHARDEXT_REPARTITION_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/bitmapset.h"
#include "nodes/params.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "nodes/primnodes.h"

/*
 * The exchange id: <system identifier>_<database oid>_<incarnation>_<seq>
 * of the coordinator (see NewExchangeId); only digits and underscores.
 */
#define EXCHANGE_ID_MAXLEN 80
#define EXCHANGE_DIR_PREFIX "pgsql_tmp_shardext_"

/* the most partitions an exchange has (a layout's shards, or new ones) */
#define MAX_PARTITIONS 65536

/* how a map task assigns rows to partitions */
#define LAYOUT_MODULO 0			/* hash modulo the partition count */
#define LAYOUT_RANGES 1			/* the shard ranges of a table: hash in [min_i, min_i+1) */
#define LAYOUT_BROADCAST 2		/* every row to partition 0, copied to every node */

/* the strategy of a repartition join, as EXPLAIN names it */
#define REPARTITION_SINGLE 1	/* one side moves into the other's shards */
#define REPARTITION_DUAL 2		/* both sides move into new partitions */
#define REPARTITION_BROADCAST 3 /* the small side is copied to every node */

/*
 * A table (or query) whose rows move: its map query returns the columns
 * the partition queries read, then the key expressions.
 */
typedef struct MovedUnit
{
	int			unitId;			/* names its files and reads */
	Oid			relid;			/* the table whose shards the map tasks read */
	List	   *mapSqlParts;	/* the map query, a template over mapRelations */
	List	   *mapRelations;	/* OIDs */
	int			mapParamCount;	/* the job's parameters the map query uses ($1..) */
	List	   *mapParams;		/* their positions among the job's parameters */
	int			columnCount;	/* columns read by the partition queries */
	List	   *columnTypes;	/* their type names (qualified), for the nodes */
	int			keyCount;		/* key expressions after the columns */
	int			layout;			/* LAYOUT_* */
	double		estimatedRows;	/* for EXPLAIN */
	char	   *description;	/* "orders o by o.merchant_id", for EXPLAIN */
} MovedUnit;

/* what the executor needs to run the exchange of a scan */
typedef struct RepartitionPlan
{
	int			strategy;		/* REPARTITION_* */
	int			partitionCount; /* LAYOUT_MODULO: the partition count */
	Oid			layoutRelid;	/* LAYOUT_RANGES: the table whose shards are the partitions */
	Oid			anchorRelid;	/* broadcast only: the table whose shards make the tasks */
	List	   *units;			/* MovedUnit * */
	List	   *notInFlags;		/* per NOT IN: (unit id, flag kind) */
} RepartitionPlan;

/* flags a partition query gets from the map phase (NOT IN's NULL semantics) */
#define FLAG_UNIT_EMPTY 1		/* the unit mapped no rows */
#define FLAG_UNIT_HAS_NULL_KEY 2	/* a row of the unit had a NULL key */

/* repartition_plan.c: the plan in the scan's custom_private */
extern List *RepartitionPlanToList(RepartitionPlan *plan);
extern RepartitionPlan *RepartitionPlanFromList(List *list);

/* partition_files.c: the files of an exchange on a node */
typedef struct PartitionWriter PartitionWriter;
typedef struct PartitionReader PartitionReader;

extern void CheckExchangeId(const char *exchangeId);
extern void ReportIntermediateResultLimit(int64 limitBytes);
extern char *ExchangeDirectory(const char *exchangeId, Oid userId);
extern PartitionWriter *BeginPartitionWriter(const char *exchangeId, const char *fileName,
											 TupleDesc desc, int partitionCount,
											 int64 limitBytes);
extern void WritePartitionRow(PartitionWriter *writer, int partition, Datum *values,
							  bool *nulls);
extern int64 *EndPartitionWriter(PartitionWriter *writer);
extern PartitionReader *BeginPartitionReader(const char *exchangeId, int unitId,
											 const char *kinds, TupleDesc expected,
											 Bitmapset *partitions);
extern bool NextPartitionBlock(PartitionReader *reader, int *partition, char **payload,
							   uint32 *length, uint32 *rows);
extern TupleDesc PartitionReaderDesc(PartitionReader *reader);
extern void EndPartitionReader(PartitionReader *reader);
extern bool RemoveExchangeDirectory(const char *exchangeId, Oid userId);
extern int	SweepExchangeDirectories(const char *prefix, const char *currentIncarnation,
									 uint64 keepFrom);

/* MAXALIGN'ed MinimalTuples follow each other in a block's payload */
#define NextBlockTuple(payload, offset) ((MinimalTuple) ((payload) + (offset)))

/* repartition_wire.c: rows between nodes */
extern bool IsRawWireType(Oid type);
extern bool IsBinaryWireType(Oid type);
extern void AppendWireRow(StringInfo buf, TupleDesc desc, MinimalTuple tuple,
						  TupleTableSlot *slot, FmgrInfo *outputs);
extern void PrepareWireOutputs(TupleDesc desc, FmgrInfo *outputs);
extern void PrepareWireInputs(TupleDesc desc, FmgrInfo *inputs, Oid *ioparams);
extern const char *ReadWireRow(const char *data, const char *end, TupleDesc desc,
							   FmgrInfo *inputs, Oid *ioparams, Datum *values, bool *nulls);

/* repartition_registry.c: the running exchanges of this coordinator */
extern void RepartitionShmemRequest(void);
extern void RepartitionShmemInit(void);
extern void InitializeRepartitionExchange(void);
extern uint64 StartExchange(char *exchangeId);
extern void EndExchange(void);
extern void SweepRepartitionLeftovers(void);
extern uint64 RepartitionSweepRequests(void);

/* repartition_exchange.c: the coordinator's side */
struct DistributedScanState;
struct ExplainState;
struct PlannedStmt;
extern void BuildRepartitionTasks(struct DistributedScanState *state, bool runExchange);
extern void EndRepartitionExchange(struct DistributedScanState *state);
extern void ExplainRepartition(struct DistributedScanState *state, struct ExplainState *es);

/*
 * The planner's view of a query it repartitions (planner/repartition_*.c).
 * A unit is a distributed table of the query: of its FROM clause (level 0)
 * or of an EXISTS / IN subquery of its WHERE clause (level 1).
 */
typedef enum UnitRole
{
	UNIT_STATIONARY,			/* stays in its shards: they are the partitions */
	UNIT_MOVED,					/* hash-partitioned by its key and moved */
	UNIT_BROADCAST				/* copied whole to every node */
} UnitRole;

typedef struct JoinUnit
{
	int			unitId;			/* 1-based */
	Query	   *owner;			/* the query whose range table holds it */
	int			level;			/* 0: the top query's FROM; 1: a subquery's */
	Index		rtindex;
	Oid			relid;			/* its table; of a subquery, the table whose
								 * shards it runs on */
	struct DistTableCacheEntry *entry;	/* that table's */
	Query	   *subquery;		/* a subquery of co-located tables, or NULL */
	List	   *distColumns;	/* its columns that are distribution columns */
	Node	   *key;			/* its expression in the chosen key class */
	Node	   *nullKey;		/* NOT IN: the subquery's column, whose NULLs count */
	UnitRole	role;
	List	   *pushed;			/* conjuncts its map query evaluates */
	List	   *columns;		/* attnos the partition queries read */
	double		tableRows;		/* estimates */
	double		rows;
	double		width;
} JoinUnit;

/* an equality between expressions of two units: a way to partition both */
typedef struct KeyEdge
{
	JoinUnit   *left;
	Node	   *leftExpr;		/* at the level of left's query */
	JoinUnit   *right;
	Node	   *rightExpr;
	Node	   *clause;			/* the conjunct it comes from */
	int			leftNode;		/* key nodes (see RepartitionContext) */
	int			rightNode;
} KeyEdge;

/* an EXISTS / NOT EXISTS / IN of the WHERE clause: a semi or anti join */
typedef struct SublinkJoin
{
	Node	   *conjunct;		/* the WHERE conjunct */
	SubLink    *sublink;
	JoinUnit   *unit;			/* the table it reads */
} SublinkJoin;

typedef struct RepartitionContext
{
	Query	   *query;			/* the copy being planned */
	List	   *units;			/* JoinUnit * */
	List	   *edges;			/* KeyEdge * */
	List	   *sublinks;		/* SublinkJoin * */
	List	   *flagConjuncts;	/* conditions on the map phase's flags (NOT IN) */
	/* key nodes: (unit, expression) pairs, merged into classes by edges */
	List	   *nodeUnits;
	List	   *nodeExprs;
	int		   *nodeClass;
	int			keyClass;		/* the class the partitions follow, or -1 */
	/* the choice */
	int			strategy;		/* REPARTITION_* */
	Oid			layoutRelid;
	int			partitionCount;
	int			nodeCount;
	/* the plan being made (repartition_rewrite.c) */
	List	   *movedUnits;		/* MovedUnit * */
	List	   *mapParamExprs;	/* the parameters of their map queries */
} RepartitionContext;

/* repartition_planner.c */
extern struct PlannedStmt *PlanRepartitionSelect(Query *query, int cursorOptions,
												 ParamListInfo boundParams);
extern bool ReadsRepartitionedRows(Query *query);
extern struct PlannedStmt *PlanPartitionQuery(Query *query, const char *queryString,
											  int cursorOptions, ParamListInfo boundParams);
extern JoinUnit *UnitOfRtindex(RepartitionContext *context, Query *owner, Index rtindex);
extern int	ListIntPosition(List *ints, int value);
extern JoinUnit *ExpressionUnit(RepartitionContext *context, Node *expr, int levelsUp,
								Query *owner);

/* repartition_group.c */
extern void GroupColocatedTables(Query *query);

/* repartition_cost.c */
extern void EstimateUnits(RepartitionContext *context);
extern bool ChooseRepartitionStrategy(RepartitionContext *context);
extern bool ValidateRoles(RepartitionContext *context);

/* repartition_rewrite.c */
extern void UnitColumnType(JoinUnit *unit, AttrNumber attno, Oid *type, int32 *typmod,
						   Oid *collation);
extern void FindPushedConjuncts(RepartitionContext *context);
extern bool IsConjunctOfUnit(RepartitionContext *context, Node *conjunct, Query *subquery,
							 JoinUnit *unit);
extern struct PlannedStmt *PlanRepartitionedQuery(RepartitionContext *context,
												  Query *original, int cursorOptions,
												  ParamListInfo boundParams);

#endif							/* SHARDEXT_REPARTITION_H */
