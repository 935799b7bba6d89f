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
 *	  A table that refers to other tables of the query laterally (one of a
 *	  LATERAL subquery, or one where a PlaceHolderVar with such references
 *	  is computed) is scanned once per row of those tables, as PostgreSQL
 *	  scans it: its path is parameterized by them, and their columns reach
 *	  the scan as nestloop parameters -- sent to the workers as parameters
 *	  in the quals, computed on the coordinator in the target list.
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
#include "optimizer/paramassign.h"
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
static double FallbackRows(PlannerInfo *root, RelOptInfo *rel, double rows,
						   ParamPathInfo *paramInfo);
static List *ScanClauses(PlannerInfo *root, List *clauses);
static Node *OuterRefsToParams(Node *node, PlannerInfo *root);
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
	ParamPathInfo *paramInfo = NULL;
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

	/*
	 * Like every path of PostgreSQL's own for a table with lateral
	 * references, the scan is parameterized by the tables it refers to: it
	 * then runs under a nested loop that sets their values.  (Unparameterized,
	 * the references would be read from this table's own row.)
	 */
	if (!bms_is_empty(rel->lateral_relids))
		paramInfo = get_baserel_parampathinfo(root, rel, rel->lateral_relids);

	path = makeNode(CustomPath);
	path->path.pathtype = T_CustomScan;
	path->path.parent = rel;
	path->path.pathtarget = rel->reltarget;
	path->path.param_info = paramInfo;
	path->path.parallel_aware = false;
	path->path.parallel_safe = false;
	path->path.parallel_workers = 0;
	path->path.rows = FallbackRows(root, rel, rel->rows, paramInfo);
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

/* the rows a scan returns: per run of a parameterized one */
static double
FallbackRows(PlannerInfo *root, RelOptInfo *rel, double rows, ParamPathInfo *paramInfo)
{
	if (paramInfo == NULL)
		return rows;
	return clamp_row_est(rows * clauselist_selectivity(root, paramInfo->ppi_clauses, rel->relid,
													   JOIN_INNER, NULL));
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

	/* a qual of this table's columns (and parameters) only can be shipped */
	foreach(cell, ScanClauses(root, clauses))
	{
		Node	   *clause = lfirst(cell);

		if (!contain_volatile_functions(clause) &&
			bms_is_subset(pull_varnos(root, clause), rel->relids) &&
			ExprIsShippable(clause, root->parse, true))
			remoteQuals = lappend(remoteQuals, clause);
		else
			localQuals = lappend(localQuals, clause);
	}

	/*
	 * The columns the scan's target list and local quals use.  The target
	 * list is the path's, made before the final scan/join target replaced
	 * rel->reltarget (which may need fewer columns); with no target list,
	 * the caller puts rel->reltarget's on the scan.
	 */
	pull_varattnos((Node *) tlist, rti, &attrs);
	pull_varattnos((Node *) best_path->path.pathtarget->exprs, rti, &attrs);
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
 * ScanClauses returns the clauses of the scan's RestrictInfos, without the
 * pseudoconstant ones (a gating Result checks those).  In a parameterized
 * scan the columns of the tables it refers to (join clauses moved down to
 * it, lateral references) become the nestloop parameters that carry them,
 * so that the quals on them can be shipped and prune the shards.
 */
static List *
ScanClauses(PlannerInfo *root, List *clauses)
{
	List	   *result = NIL;
	ListCell   *cell;

	foreach(cell, clauses)
	{
		RestrictInfo *rinfo = lfirst(cell);
		Node	   *clause = (Node *) rinfo->clause;

		if (rinfo->pseudoconstant)
			continue;
		if (!bms_is_empty(root->curOuterRels))
			clause = OuterRefsToParams(clause, root);
		result = lappend(result, clause);
	}
	return result;
}

/*
 * OuterRefsToParams replaces the Vars of the tables whose rows the
 * enclosing nested loops provide (root->curOuterRels), and the
 * PlaceHolderVars computed there, by nestloop parameters -- what
 * createplan.c does to a parameterized scan's quals after the scan is
 * planned, done before, so the quals can be deparsed.
 */
static Node *
OuterRefsToParams(Node *node, PlannerInfo *root)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;

		if (var->varlevelsup == 0 && !IS_SPECIAL_VARNO(var->varno) &&
			bms_is_member(var->varno, root->curOuterRels))
			return (Node *) replace_nestloop_param_var(root, var);
		return node;
	}
	if (IsA(node, PlaceHolderVar))
	{
		PlaceHolderVar *phv = (PlaceHolderVar *) node;
		ListCell   *cell;

		foreach(cell, root->placeholder_list)
		{
			PlaceHolderInfo *info = lfirst(cell);

			if (info->phid == phv->phid && phv->phlevelsup == 0 &&
				bms_is_subset(info->ph_eval_at, root->curOuterRels))
				return (Node *) replace_nestloop_param_placeholdervar(root, phv);
		}
		/* computed here or below: its contents may still refer outside */
	}
	return expression_tree_mutator(node, OuterRefsToParams, root);
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
