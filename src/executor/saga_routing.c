/*-------------------------------------------------------------------------
 *
 * saga_routing.c
 *	  Routing the statements of a saga step: each is planned with the
 *	  step's parameter values by shardext's own planner and its tasks are
 *	  built as the executor builds them (as EXPLAIN does, without running
 *	  them), so a step goes exactly where the same statement would go, with
 *	  the same shard SQL and parameter encoding.  A statement is accepted
 *	  only when it is a router statement: one task, on one shard placement,
 *	  that the executor would send as it is (no rows routed through the
 *	  coordinator, no global index to maintain on another node, no
 *	  subquery computed on the coordinator first).
 *
 * Writes lock their shard on the coordinator as the executor does (the
 * lock keeps a shard move from switching placements under the step); the
 * caller holds the lock until the step is done.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/params.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

#include "shardext/distributed_executor.h"
#include "shardext/distributed_plan.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/resource_lock.h"
#include "shardext/saga.h"

/* what an error while routing a statement is about */
typedef struct SagaStatementContext
{
	const char *sql;
	const char *what;
} SagaStatementContext;

static void SagaStatementErrorCallback(void *arg);
static RoutedStatement *RouteOneStatement(RawStmt *raw, const char *sql, SagaStatementRole role,
										  const char *what, int nParams, char **paramValues,
										  int64 expectRows);
static Query *AnalyzeStatement(RawStmt *raw, const char *sql, const char *what,
							   int nParams, Oid **paramTypes, int *typeCount);
static ParamListInfo StepParams(const char *what, int nParams, char **paramValues,
								Oid *types, int typeCount);
static DistributedJob *CheckRouterPlan(PlannedStmt *plan, const char *what);
static RoutedStatement *BuildRoutedStatement(PlannedStmt *plan, const char *sql,
											 ParamListInfo params, const char *what);
static void RefuseStatement(const char *what, const char *reason, const char *hint);
static const char *RoleName(SagaStatementRole role);

/*
 * RouteSagaStatements plans the statements of sql (one, or several
 * separated by semicolons; a check is one query of one boolean) with the
 * step's parameters and returns a RoutedStatement per statement, in order.
 * A statement that does not go to exactly one shard placement is refused
 * with an error that names the step and says why.  With expectRows >= 0,
 * each statement must change (or return) that many rows.
 */
List *
RouteSagaStatements(const char *sql, SagaStatementRole role, int stepNumber, int nParams,
					char **paramValues, int64 expectRows)
{
	char	   *what = psprintf("%s of saga step %d", RoleName(role), stepNumber);
	SagaStatementContext context = {sql, what};
	ErrorContextCallback errorContext;
	List	   *rawList;
	List	   *result = NIL;
	ListCell   *cell;

	errorContext.callback = SagaStatementErrorCallback;
	errorContext.arg = &context;
	errorContext.previous = error_context_stack;
	error_context_stack = &errorContext;
	rawList = raw_parser(sql, RAW_PARSE_DEFAULT);
	error_context_stack = errorContext.previous;

	if (rawList == NIL)
		RefuseStatement(what, "it is empty", "Give each step a statement and a compensation.");
	if (role == SAGA_CHECK && list_length(rawList) > 1)
		RefuseStatement(what, "it has several statements",
						"A check is one query that returns one boolean.");
	errorContext.callback = SagaStatementErrorCallback;
	errorContext.arg = &context;
	errorContext.previous = error_context_stack;
	error_context_stack = &errorContext;
	foreach(cell, rawList)
	{
		RawStmt    *raw = lfirst_node(RawStmt, cell);

		result = lappend(result, RouteOneStatement(raw, sql, role, what, nParams, paramValues,
												   role == SAGA_STATEMENT ? expectRows : -1));
	}
	error_context_stack = errorContext.previous;
	return result;
}

/*
 * SagaStatementErrorCallback names the statement an error is about, and
 * points a syntax error's position into the statement's own text (as SPI
 * does for the queries of functions).
 */
static void
SagaStatementErrorCallback(void *arg)
{
	SagaStatementContext *context = arg;
	int			position = geterrposition();

	if (position > 0)
	{
		errposition(0);
		internalerrposition(position);
		internalerrquery(context->sql);
	}
	errcontext("%s", context->what);
}

static const char *
RoleName(SagaStatementRole role)
{
	switch (role)
	{
		case SAGA_STATEMENT:
			return "statement";
		case SAGA_COMPENSATION:
			return "compensation";
		case SAGA_CHECK:
			return "check query";
	}
	return "statement";
}

/* RefuseStatement raises the error of a statement that cannot be a step */
static void
RefuseStatement(const char *what, const char *reason, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s cannot run as a saga step", what),
			 errdetail("A saga step runs on one node in one local transaction, but %s.", reason),
			 hint ? errhint("%s", hint) : 0));
}

/* RouteOneStatement plans and routes one raw statement */
static RoutedStatement *
RouteOneStatement(RawStmt *raw, const char *sql, SagaStatementRole role, const char *what,
				  int nParams, char **paramValues, int64 expectRows)
{
	Oid		   *paramTypes = NULL;
	int			typeCount = 0;
	Query	   *query = AnalyzeStatement(raw, sql, what, nParams, &paramTypes, &typeCount);
	ParamListInfo params = StepParams(what, nParams, paramValues, paramTypes, typeCount);
	List	   *rewritten;
	PlannedStmt *plan;
	DistributedJob *job;
	RoutedStatement *routed;

	if (role == SAGA_CHECK)
	{
		List	   *visible = NIL;
		ListCell   *cell;

		foreach(cell, query->targetList)
		{
			TargetEntry *entry = lfirst_node(TargetEntry, cell);

			if (!entry->resjunk)
				visible = lappend(visible, entry);
		}
		if (query->commandType != CMD_SELECT || list_length(visible) != 1 ||
			exprType((Node *) ((TargetEntry *) linitial(visible))->expr) != BOOLOID)
			RefuseStatement(what, "it does not return one boolean column",
							"Write the check as a SELECT of one boolean, true when the step succeeded.");
	}
	else if (expectRows >= 0 && query->commandType != CMD_SELECT && query->returningList == NIL)
	{
		/* the rows are counted on the node: have the statement return them */
		Const	   *one = makeConst(INT4OID, -1, InvalidOid, sizeof(int32), Int32GetDatum(1),
									false, true);

		query->returningList = list_make1(makeTargetEntry((Expr *) one, 1, "saga_row", false));
	}

	rewritten = pg_rewrite_query(query);
	if (list_length(rewritten) != 1)
		RefuseStatement(what, "rules turn it into several statements", NULL);
	query = linitial_node(Query, rewritten);
	plan = PlanQueryCompat(query, sql, 0, params);
	job = CheckRouterPlan(plan, what);
	routed = BuildRoutedStatement(plan, sql, params, what);
	routed->relid = list_nth_oid(job->relations, Max(job->anchor, 0));
	routed->writes = query->commandType != CMD_SELECT;

	if (role == SAGA_CHECK)
		routed->sql = psprintf("SELECT shardext.saga_check((%s))", routed->sql);
	else if (expectRows >= 0)
		routed->sql = psprintf("WITH saga_rows AS (%s) SELECT shardext.saga_expect_rows("
							   "pg_catalog.count(*), " INT64_FORMAT ") FROM saga_rows",
							   routed->sql, expectRows);
	return routed;
}

/*
 * AnalyzeStatement parses one statement with parameters whose types it
 * infers (as PREPARE without types does) and checks that it is a plain
 * SELECT, INSERT, UPDATE or DELETE that uses only the step's parameters.
 */
static Query *
AnalyzeStatement(RawStmt *raw, const char *sql, const char *what, int nParams,
				 Oid **paramTypes, int *typeCount)
{
	Query	   *query;

	switch (nodeTag(raw->stmt))
	{
		case T_SelectStmt:
		case T_InsertStmt:
		case T_UpdateStmt:
		case T_DeleteStmt:
			break;
		default:
			RefuseStatement(what, "it is not a SELECT, INSERT, UPDATE or DELETE",
							"Steps are router statements on distributed tables.");
	}
	query = parse_analyze_varparams(raw, sql, paramTypes, typeCount, NULL);
	if (*typeCount > nParams)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_PARAMETER),
				 errmsg("%s uses $%d, but the step has %d parameters", what, *typeCount,
						nParams),
				 errhint("Give the step's parameters in its params array.")));
	for (int i = 0; i < *typeCount; i++)
	{
		if ((*paramTypes)[i] == UNKNOWNOID)
			ereport(ERROR,
					(errcode(ERRCODE_INDETERMINATE_DATATYPE),
					 errmsg("could not determine data type of parameter $%d of the %s",
							i + 1, what),
					 errhint("Cast the parameter, for example $%d::int.", i + 1)));
	}
	if (query->hasModifyingCTE)
		RefuseStatement(what, "it has a data-modifying WITH", NULL);
	return query;
}

/*
 * StepParams converts the step's text parameters to the types the
 * statement gives them, as constants of this execution (so that the
 * planner routes by their values).
 */
static ParamListInfo
StepParams(const char *what, int nParams, char **paramValues, Oid *types, int typeCount)
{
	ParamListInfo params = makeParamList(typeCount);

	for (int i = 0; i < typeCount; i++)
	{
		ParamExternData *param = &params->params[i];
		Oid			type = OidIsValid(types[i]) ? types[i] : TEXTOID;
		Oid			input;
		Oid			ioparam;

		getTypeInputInfo(type, &input, &ioparam);
		param->ptype = type;
		param->pflags = PARAM_FLAG_CONST;
		param->isnull = paramValues[i] == NULL;
		param->value = param->isnull ? (Datum) 0 :
			OidInputFunctionCall(input, paramValues[i], ioparam, -1);
	}
	return params;
}

/*
 * CheckRouterPlan returns the job of a plan that is one distributed scan
 * the executor sends as it is, and refuses anything else.
 */
static DistributedJob *
CheckRouterPlan(PlannedStmt *plan, const char *what)
{
	CustomScan *scan;
	DistributedJob *job;

	if (!IsDistributedScan(plan->planTree))
		RefuseStatement(what, "it does not run on a distributed table as a whole",
						"Steps read and write distributed tables, pinned to one value of "
						"the distribution column.");
	scan = (CustomScan *) plan->planTree;
	job = DistributedJobFromScan(scan);
	if (job->kind == JOB_ROUTED || job->pullFallback || job->insertFromSubplan ||
		scan->custom_plans != NIL || plan->subplans != NIL)
		RefuseStatement(what, "the coordinator would take part in it row by row",
						"Pin every distributed table of the statement to one value of its "
						"distribution column, and compute subqueries first.");
	if (job->gindexMode != GINDEX_NONE)
		RefuseStatement(what, "it maintains global indexes, which can live on other nodes",
						NULL);
	return job;
}

/*
 * BuildRoutedStatement builds the plan's tasks as execution would and
 * returns its one task, copied into the caller's memory.
 */
static RoutedStatement *
BuildRoutedStatement(PlannedStmt *plan, const char *sql, ParamListInfo params,
					 const char *what)
{
	MemoryContext callerContext = CurrentMemoryContext;
	RoutedStatement *routed = palloc0(sizeof(RoutedStatement));
	QueryDesc  *queryDesc;
	DistributedScanState *state;
	RemoteTask *task = NULL;
	bool		pushed = !ActiveSnapshotSet();
	ListCell   *cell;

	if (pushed)
		PushActiveSnapshot(GetTransactionSnapshot());
	queryDesc = CreateQueryDesc(plan, sql, GetActiveSnapshot(), InvalidSnapshot,
								None_Receiver, params, NULL, 0);
	ExecutorStart(queryDesc, EXEC_FLAG_EXPLAIN_ONLY);
	state = (DistributedScanState *) queryDesc->planstate;
	BuildDistributedTasks(state);

	foreach(cell, state->tasks)
	{
		RemoteTask *other = lfirst(cell);
		int32		node = other->primaryNodeId != 0 ? other->primaryNodeId : other->nodeId;

		if (task == NULL)
		{
			task = other;
			routed->nodeId = node;
			routed->shardId = other->shardId;
		}
		else if (other->shardId != routed->shardId || node != routed->nodeId)
			RefuseStatement(what, psprintf("it touches %d shard placements",
										   list_length(state->tasks)),
							"Pin the distribution column to one value; reference tables have "
							"a copy on every node.");
	}
	if (task == NULL)
		RefuseStatement(what, "it touches no shard (its distribution value is NULL)", NULL);

	MemoryContextSwitchTo(callerContext);
	routed->sql = pstrdup(task->sql);
	routed->nParams = task->params != NULL ? task->params->count : 0;
	routed->types = palloc0(sizeof(Oid) * Max(routed->nParams, 1));
	routed->values = palloc0(sizeof(char *) * Max(routed->nParams, 1));
	routed->lengths = palloc0(sizeof(int) * Max(routed->nParams, 1));
	routed->formats = palloc0(sizeof(int) * Max(routed->nParams, 1));
	for (int i = 0; i < routed->nParams; i++)
	{
		RemoteParams *remote = task->params;
		int			length = remote->lengths != NULL ? remote->lengths[i] : 0;
		bool		binary = remote->formats != NULL && remote->formats[i] == 1;

		routed->types[i] = remote->types != NULL ? remote->types[i] : InvalidOid;
		routed->formats[i] = binary ? 1 : 0;
		routed->lengths[i] = length;
		if (remote->values[i] == NULL)
			routed->values[i] = NULL;
		else if (binary)
		{
			char	   *copy = palloc(Max(length, 1));

			memcpy(copy, remote->values[i], length);
			routed->values[i] = copy;
		}
		else
			routed->values[i] = pstrdup(remote->values[i]);
	}

	ExecutorEnd(queryDesc);
	FreeQueryDesc(queryDesc);
	if (pushed)
		PopActiveSnapshot();
	return routed;
}

/*
 * LockRoutedStatements locks the shards that statements routed earlier
 * write, as the executor would, and tells whether each is still where it
 * was routed to (no move or split came in between); if not, it releases
 * the locks again and the caller routes the statements anew.
 */
bool
LockRoutedStatements(List *statements)
{
	ListCell   *cell;

	foreach(cell, statements)
	{
		RoutedStatement *routed = lfirst(cell);

		if (routed->writes)
			LockShardResource(routed->shardId, ShardWriteLockMode);
	}
	foreach(cell, statements)
	{
		RoutedStatement *routed = lfirst(cell);
		DistTableCacheEntry *entry = GetDistTableCacheEntry(routed->relid);
		bool		found = false;

		for (int i = 0; entry != NULL && i < entry->shardCount; i++)
		{
			ShardInterval *shard = &entry->shards[i];

			if (shard->shardId == routed->shardId)
				found = shard->placementCount == 1 &&
					shard->placementNodeIds[0] == routed->nodeId;
		}
		if (!found)
		{
			UnlockRoutedStatements(statements);
			return false;
		}
	}
	return true;
}

/* UnlockRoutedStatements releases what LockRoutedStatements took */
void
UnlockRoutedStatements(List *statements)
{
	ListCell   *cell;

	foreach(cell, statements)
	{
		RoutedStatement *routed = lfirst(cell);

		if (routed->writes)
			UnlockShardResource(routed->shardId, ShardWriteLockMode);
	}
}
