/*-------------------------------------------------------------------------
 *
 * remote_sql.h
 *	  Deparsing query trees into the SQL that runs on shards.
 *
 * The SQL is kept as a template: a list of parts, each either a String
 * (SQL text), an Integer (the position of a distributed or reference
 * table in RemoteSql.relations) or a List (that position and the name of
 * one of its index-backed constraints), so one deparse serves every shard:
 * the executor pastes each task's shard names (and shard constraint
 * names) into the gaps.  Everything the
 * coordinator must evaluate (parameters, stable functions, expressions of
 * non-built-in functions without column references) goes to the workers as
 * a parameter $n whose expression is RemoteSql.paramExprs[n - 1].  With
 * constantsAsParams, constants of common built-in types are sent that way
 * too, so that statements differing only in their constants share a text.
 *
 * A deparse that meets a construct it cannot ship sets failed (and
 * failReason); callers then plan the query another way.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_REMOTE_SQL_H
#define SHARDEXT_REMOTE_SQL_H

#include "lib/stringinfo.h"
#include "nodes/parsenodes.h"
#include "nodes/primnodes.h"

typedef struct RemoteSql
{
	StringInfoData buf;			/* text not yet moved to parts */
	List	   *parts;			/* String / Integer, see above */
	List	   *relations;		/* OIDs, by position */
	List	   *paramExprs;		/* Expr *, sent as $1, $2 ... */
	bool		failed;
	const char *failReason;
	List	   *levels;			/* DeparseLevel *, innermost first */
	int			nextLevelId;
	int			gucNestLevel;	/* > 0 while safe output settings are in force */
	Index		exclRelIndex;	/* INSERT ... ON CONFLICT: the EXCLUDED entry */
	bool		allowExecParams;	/* scan quals: init plan and nestloop values */
	bool		constantsAsParams;	/* plain constants go as parameters too (a
									 * single-shard statement: one text, prepared
									 * once per connection, serves every value) */
	List	   *caseOperands;	/* operands of the CASEs being printed, innermost first */
} RemoteSql;

extern void InitRemoteSql(RemoteSql *sql);
extern void FinishRemoteSql(RemoteSql *sql);
extern void RemoteSqlFail(RemoteSql *sql, const char *reason);
extern void RemoteSqlAppendRelation(RemoteSql *sql, Oid relid);
extern void RemoteSqlPushQuery(RemoteSql *sql, Query *query);
extern void RemoteSqlPopQuery(RemoteSql *sql);
extern char *RemoteSqlAlias(RemoteSql *sql, int levelsUp, Index rtindex);
extern void DeparseRemoteExpr(RemoteSql *sql, Node *node);
extern void DeparseSortGroupExpr(RemoteSql *sql, Node *expr);
/* how a SELECT list was printed, for GROUP BY / ORDER BY by column number */
#define SORT_POSITIONS_NONE		0
#define SORT_POSITIONS_VISIBLE	1
#define SORT_POSITIONS_ALL		2
extern void DeparseSortGroupItem(RemoteSql *sql, SortGroupClause *sgc, List *targetList,
								 int positions);
extern void DeparseRemoteSelect(RemoteSql *sql, Query *query);
extern void DeparseRemoteTargetList(RemoteSql *sql, List *targetList, bool withJunk);
extern void DeparseRemoteFromItem(RemoteSql *sql, Node *item);
extern void DeparseRemoteOrderBy(RemoteSql *sql, Query *query, List *sortClause,
								 List *targetList);
extern char *RemoteTypeName(Oid typid, int32 typmod);
extern char *QualifiedEqualityOperator(Oid type);
extern char *BuildTaskSql(List *parts, List *shardNames);
extern char *BuildShardTaskSql(List *parts, List *shardNames, List *shardIds);
extern void RemoteSqlAppendShardConstraintName(RemoteSql *sql, Oid relid, const char *name);
extern void RemoteSqlDeparseExprList(RemoteSql *sql, List *exprs);
extern void RemoteSqlDeparseOperator(RemoteSql *sql, Oid opno);
extern void RemoteSqlDeparseSortClause(RemoteSql *sql, List *sortClause, List *targetList);
extern char *RemoteSqlFunctionName(Oid funcid);
extern int	RepartitionReadUnit(RangeTblEntry *rte);
extern void SetDeparseShardCtid(bool allow);
extern bool IsReceivableType(Oid type);
extern Param *MakeSubplanValueParam(int column, Oid type, int32 typmod, Oid collation);
extern bool IsSubplanValueParam(Node *node);
extern Node *SubplanValueExpr(Node *node);
extern Node *SubplanValueExprs(Node *node);

/* remote_expr.c */
extern void DeparseCaseExpr(RemoteSql *sql, CaseExpr *c);
extern void DeparseCaseTestExpr(RemoteSql *sql, CaseTestExpr *test);
extern void DeparseRowExpr(RemoteSql *sql, RowExpr *row);
extern void DeparseRowCompareExpr(RemoteSql *sql, RowCompareExpr *rc);
extern void DeparseFieldSelect(RemoteSql *sql, FieldSelect *fs);
extern void DeparseSubscriptingRef(RemoteSql *sql, SubscriptingRef *ref);
extern void RemoteSqlDeparseSubscripts(RemoteSql *sql, SubscriptingRef *ref);
extern void DeparseArrayCoerceExpr(RemoteSql *sql, ArrayCoerceExpr *ac);
extern void DeparseCoerceToDomain(RemoteSql *sql, CoerceToDomain *cd);
extern void DeparseNamedArgExpr(RemoteSql *sql, NamedArgExpr *arg);
extern void DeparseGroupingFunc(RemoteSql *sql, GroupingFunc *gf);
extern void DeparseMultiDimArray(RemoteSql *sql, ArrayExpr *a);
extern void DeparseWindowFrame(RemoteSql *sql, WindowClause *clause);
extern void DeparseOrderedSetAggregate(RemoteSql *sql, Aggref *aggref);
extern void DeparseValuesFromItem(RemoteSql *sql, RangeTblEntry *rte, Index rtindex);

/* shippable.c */
extern bool IsBuiltinObject(Oid oid);
extern bool ExprNeedsRows(Node *node, bool allowExecParams);
extern bool ExprNeedsCoordinator(Node *node);
extern bool ExprIsShippable(Node *node, Query *query, bool allowExecParams);

#endif							/* SHARDEXT_REMOTE_SQL_H */
