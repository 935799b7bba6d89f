/*-------------------------------------------------------------------------
 *
 * fallback_scan.c
 *	  The pull fallback: when a query cannot be pushed down, the standard
 *	  planner plans it locally and each distributed or reference table in it
 *	  is scanned by a distributed scan that fetches only the columns the
 *	  query needs, of the rows that pass the quals the workers can evaluate,
 *	  from the shards those quals leave (like a postgres_fdw foreign scan).
 *	  Joins, aggregates, window functions, CTEs, subqueries -- everything
 *	  else -- then run on the coordinator, correctly.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/pg_inherits.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/restrictinfo.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "shardext/global_index.h"
#include "shardext/planner.h"
#include "shardext/remote_sql.h"

static List *FetchedColumns(Oid relid, Bitmapset *attrs);
static void DeparseFallbackScan(RemoteSql *sql, PlannerInfo *root, Index rti, List *attnums,
								List *remoteQuals);
static Plan *PlanFallbackPath(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
							  List *tlist, List *clauses, List *custom_plans);

static CustomPathMethods FallbackPathMethods = {
	"ShardextScan",
	PlanFallbackPath,
	NULL
};

/* the per-row cost of fetching a row from a worker, relative to cpu_tuple_cost */
#define FALLBACK_ROW_COST_FACTOR 10.0
#define FALLBACK_STARTUP_COST 100.0

/*
 * DistributedRelPathlist replaces the paths of a distributed or reference
 * table (an empty shell locally) by a distributed scan.
 */
void
DistributedRelPathlist(PlannerInfo *root, RelOptInfo *rel, Index rti, RangeTblEntry *rte)
{
	CustomPath *path;
	DistTableCacheEntry *entry;
	double		rows;

	if (prev_set_rel_pathlist_hook)
		prev_set_rel_pathlist_hook(root, rel, rti, rte);

	if (rte->rtekind != RTE_RELATION ||
		!ShardextExtensionLoaded() || IS_DUMMY_REL(rel))
		return;
	entry = GetDistTableCacheEntry(rte->relid);
	if (entry == NULL)
		return;
	if (rte->inh && has_subclass(rte->relid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("distributed table \"%s\" has inheritance children",
						get_rel_name(rte->relid)),
				 errhint("Query the table with ONLY.")));

	/*
	 * The local shell is empty, so its statistics say little; assume a fair
	 * number of rows per shard, keeping the selectivity of the quals.
	 */
	rows = Max(rel->tuples, 1000.0 * entry->shardCount);
	rel->rows = clamp_row_est(rows * (rel->tuples > 0 ? rel->rows / rel->tuples : 0.1));

	path = makeNode(CustomPath);
	path->path.pathtype = T_CustomScan;
	path->path.parent = rel;
	path->path.pathtarget = rel->reltarget;
	path->path.param_info = NULL;
	path->path.parallel_aware = false;
	path->path.parallel_safe = false;
	path->path.parallel_workers = 0;
	path->path.rows = rel->rows;
	path->path.startup_cost = FALLBACK_STARTUP_COST;
	path->path.total_cost = FALLBACK_STARTUP_COST +
		rows * cpu_tuple_cost * FALLBACK_ROW_COST_FACTOR;
	path->path.pathkeys = NIL;
	path->flags = 0;
	path->methods = &FallbackPathMethods;

	rel->pathlist = NIL;
	rel->partial_pathlist = NIL;
	rel->cheapest_parameterized_paths = NIL;
	add_path(rel, (Path *) path);
	set_cheapest(rel);
}

/*
 * PlanFallbackPath makes the CustomScan: remote SQL selecting the needed
 * columns with the shippable quals; the other quals stay local.
 */
static Plan *
PlanFallbackPath(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
				 List *tlist, List *clauses, List *custom_plans)
{
	Index		rti = rel->relid;
	RangeTblEntry *rte = planner_rt_fetch(rti, root);
	DistTableCacheEntry *entry = GetDistTableCacheEntry(rte->relid);
	List	   *remoteQuals = NIL;
	List	   *localQuals = NIL;
	Bitmapset  *attrs = NULL;
	List	   *attnums;
	List	   *values = NIL;
	List	   *kinds = NIL;
	List	   *indexes = NIL;
	RemoteSql	sql;
	DistributedJob job;
	CustomScan *scan;
	ListCell   *cell;

	foreach(cell, clauses)
	{
		RestrictInfo *rinfo = lfirst(cell);

		if (rinfo->pseudoconstant)
			continue;
		if (!contain_volatile_functions((Node *) rinfo->clause) &&
			ExprIsShippable((Node *) rinfo->clause, root->parse, true))
			remoteQuals = lappend(remoteQuals, rinfo->clause);
		else
			localQuals = lappend(localQuals, rinfo->clause);
	}

	/* the columns the plan above and the local quals use */
	pull_varattnos((Node *) rel->reltarget->exprs, rti, &attrs);
	pull_varattnos((Node *) localQuals, rti, &attrs);
	attnums = FetchedColumns(rte->relid, attrs);

	DeparseFallbackScan(&sql, root, rti, attnums, remoteQuals);
	FindPruningValues(root->parse, rti, entry, (Node *) remoteQuals, &values, &kinds);
	FindGlobalIndexPruning(root->parse, rti, entry, (Node *) remoteQuals, &values, &kinds,
						   &indexes);

	InitDistributedJob(&job, JOB_SELECT, sql.parts, sql.relations,
					   list_length(sql.paramExprs));
	job.anchor = entry->method == DISTRIBUTE_BY_HASH ? 0 : -1;
	job.pruneCount = list_length(values);
	job.pruneKinds = kinds;
	job.pruneIndexes = indexes;
	job.scanAttnums = attnums;
	job.pullFallback = true;

	scan = MakeDistributedScan(&job, list_concat(values, sql.paramExprs));
	scan->scan.scanrelid = rti;
	scan->scan.plan.targetlist = tlist;
	scan->scan.plan.qual = localQuals;
	scan->custom_scan_tlist = NIL;
	return (Plan *) scan;
}

/*
 * FetchedColumns returns the attribute numbers of the columns to fetch,
 * given the attributes used (pull_varattnos): all of them for a whole-row
 * reference; system columns cannot be read from the shards.
 */
static List *
FetchedColumns(Oid relid, Bitmapset *attrs)
{
	List	   *attnums = NIL;
	Relation	relation;
	int			natts;
	int			attno;

	relation = table_open(relid, NoLock);
	natts = RelationGetDescr(relation)->natts;
	if (bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, attrs))
	{
		for (attno = 1; attno <= natts; attno++)
		{
			if (!TupleDescAttr(RelationGetDescr(relation), attno - 1)->attisdropped)
				attnums = lappend_int(attnums, attno);
		}
	}
	else
	{
		int			member = -1;

		while ((member = bms_next_member(attrs, member)) >= 0)
		{
			attno = member + FirstLowInvalidHeapAttributeNumber;
			if (attno < 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("system columns of distributed table \"%s\" cannot be read",
								get_rel_name(relid)),
						 errhint("Rows of a distributed table live on several nodes; "
								 "use a key column instead of ctid or similar.")));
			if (attno > 0)
				attnums = lappend_int(attnums, attno);
		}
	}
	table_close(relation, NoLock);
	return attnums;
}

/*
 * DeparseFallbackScan deparses the scan of one distributed table (rti of
 * the query) that the shards run: the columns, and the quals they can
 * evaluate.
 */
static void
DeparseFallbackScan(RemoteSql *sql, PlannerInfo *root, Index rti, List *attnums,
					List *remoteQuals)
{
	RangeTblEntry *rte = planner_rt_fetch(rti, root);
	ListCell   *cell;

	InitRemoteSql(sql);
	sql->allowExecParams = true;
	RemoteSqlPushQuery(sql, root->parse);
	appendStringInfoString(&sql->buf, "SELECT ");
	foreach(cell, attnums)
	{
		appendStringInfo(&sql->buf, "%s%s.%s", cell == list_head(attnums) ? "" : ", ",
						 RemoteSqlAlias(sql, 0, rti),
						 quote_identifier(get_attname(rte->relid, lfirst_int(cell), false)));
	}
	appendStringInfoString(&sql->buf, " FROM ONLY ");
	RemoteSqlAppendRelation(sql, rte->relid);
	appendStringInfo(&sql->buf, " %s", RemoteSqlAlias(sql, 0, rti));
	foreach(cell, remoteQuals)
	{
		appendStringInfoString(&sql->buf, cell == list_head(remoteQuals) ? " WHERE " : " AND ");
		DeparseRemoteExpr(sql, lfirst(cell));
	}
	RemoteSqlPopQuery(sql);
	FinishRemoteSql(sql);
	if (sql->failed)
		elog(ERROR, "could not deparse a scan of \"%s\": %s",
			 get_rel_name(rte->relid), sql->failReason);
}
