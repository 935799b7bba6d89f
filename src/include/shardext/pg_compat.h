/*-------------------------------------------------------------------------
 *
 * pg_compat.h
 *	  The calls of PostgreSQL's internal API whose form changes between
 *	  major versions, in one place.
 *
 * shardext is built from one source tree for PostgreSQL 15 to 19.  Code
 * that uses an internal call, field or header that changed between those
 * versions goes through a macro or small inline function of this header,
 * named after what it does; each says which version changed what.  Most
 * are macros, so that this header needs few includes: the caller includes
 * the header that declares what the macro expands to, as it did before.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_PG_COMPAT_H
#define SHARDEXT_PG_COMPAT_H

#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "optimizer/optimizer.h"
#include "utils/acl.h"

#if PG_VERSION_NUM < 150000
#error "shardext needs PostgreSQL 15 or later"
#endif

#if PG_VERSION_NUM >= 160000
#include "parser/parse_relation.h"
#include "rewrite/rewriteManip.h"
#endif

/* ==== ownership and ACL checks of one object ==== */

/*
 * 16 replaced pg_class_ownercheck() and friends by object_ownercheck() and
 * object_aclcheck().
 */
#if PG_VERSION_NUM >= 160000
#define pg_class_ownercheck(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#define pg_namespace_aclcheck(nspid, roleid, mode) \
	object_aclcheck(NamespaceRelationId, (nspid), (roleid), (mode))
#define pg_database_aclcheck(dbid, roleid, mode) \
	object_aclcheck(DatabaseRelationId, (dbid), (roleid), (mode))
#endif

/* ==== permissions of range table entries ==== */

/*
 * 16 moved the permissions to check for a relation out of RangeTblEntry
 * (requiredPerms, checkAsUser, selectedCols ...) into an RTEPermissionInfo
 * in the Query's rteperminfos list (PlannedStmt's permInfos), which the
 * entry names by perminfoindex; the executor checks every RTEPermissionInfo
 * of the plan, whatever the kind of entry that names it (a view is a
 * subquery entry naming one).  Up to 15 it checks every RTE_RELATION entry
 * with requiredPerms.  The functions below keep the checks the same on
 * every version when shardext rearranges range tables.
 */

/*
 * RteWrappedInSubquery: rte, a relation of query, becomes a subquery
 * reading the relation through inner (a copy of rte, the only entry of the
 * subquery's range table).  The relation's permissions are then checked
 * on inner, and not on rte: 15 checks RTE_RELATION entries; 16+ checks the
 * RTEPermissionInfo that an entry names in its query's rteperminfos, which
 * moves to the subquery's.  Call it before changing rte.
 */
static inline void
RteWrappedInSubquery(Query *query, RangeTblEntry *rte, Query *subquery, RangeTblEntry *inner)
{
#if PG_VERSION_NUM >= 160000
	Index		removed = rte->perminfoindex;
	ListCell   *cell;

	inner->perminfoindex = 0;
	if (removed == 0)
		return;
	subquery->rteperminfos = list_make1(list_nth(query->rteperminfos, removed - 1));
	inner->perminfoindex = 1;
	query->rteperminfos = list_delete_nth_cell(query->rteperminfos, removed - 1);
	rte->perminfoindex = 0;
	foreach(cell, query->rtable)
	{
		RangeTblEntry *other = lfirst(cell);

		if (other->perminfoindex > removed)
			other->perminfoindex--;
	}
#else
	rte->requiredPerms = 0;
	rte->checkAsUser = InvalidOid;
	rte->selectedCols = NULL;
	rte->insertedCols = NULL;
	rte->updatedCols = NULL;
	rte->extraUpdatedCols = NULL;
#endif
}

/*
 * RteForgetPermissions: a copy of a relation's entry checks nothing (the
 * original, kept elsewhere in the range table, does).
 */
#if PG_VERSION_NUM >= 160000
#define RteForgetPermissions(rte) ((rte)->perminfoindex = 0)
#else
#define RteForgetPermissions(rte) \
	((rte)->requiredPerms = 0, (rte)->checkAsUser = InvalidOid, (rte)->selectedCols = NULL)
#endif

/* NsItemRequirePermissions: the relation needs these rights of the current user */
#if PG_VERSION_NUM >= 160000
#define NsItemRequirePermissions(nsitem, mode) \
	((nsitem)->p_perminfo->requiredPerms = (mode))
#else
#define NsItemRequirePermissions(nsitem, mode) \
	((nsitem)->p_rte->requiredPerms = (mode))
#endif

/* the rteperminfos list of a query (none before 16), and a deep copy of it */
#if PG_VERSION_NUM >= 160000
#define QueryPermInfos(query) ((query)->rteperminfos)
#define CopyQueryPermInfos(target, source) \
	((target)->rteperminfos = copyObject((source)->rteperminfos))
#else
#define QueryPermInfos(query) NIL
#define CopyQueryPermInfos(target, source) ((void) 0)
#endif

/*
 * RteNeedsPermissionCheck: does the executor check permissions for this
 * entry (a relation, or on 16+ also a view, which is a subquery entry)?
 */
#if PG_VERSION_NUM >= 160000
#define RteNeedsPermissionCheck(rte) ((rte)->perminfoindex != 0)
#else
#define RteNeedsPermissionCheck(rte) ((rte)->rtekind == RTE_RELATION)
#endif

/*
 * AppendRteWithPermissions appends to target's range table a copy of rte,
 * an entry of a query whose rteperminfos list is permInfos (unused before
 * 16), with its permission checks, and returns the copy.  The copy carries
 * no subquery and no security quals (whose Vars would name other entries):
 * it is there to be checked, locked and to invalidate plans.
 */
static inline RangeTblEntry *
AppendRteWithPermissions(Query *target, RangeTblEntry *rte, List *permInfos)
{
	RangeTblEntry flat = *rte;
	RangeTblEntry *copy;

	flat.subquery = NULL;
	flat.securityQuals = NIL;
	copy = copyObject(&flat);
	copy->inh = false;
	target->rtable = lappend(target->rtable, copy);
#if PG_VERSION_NUM >= 160000
	if (rte->perminfoindex != 0)
	{
		RTEPermissionInfo *perminfo = getRTEPermissionInfo(permInfos, rte);

		copy->perminfoindex = 0;
		*addRTEPermissionInfo(&target->rteperminfos, copy) = *perminfo;
	}
#endif
	return copy;
}

/*
 * SetPlannedStmtRangeTable gives a plan that shardext made without the
 * standard planner the range table of query, as standard_planner's
 * set_plan_references would: with the permissions to check (16), the
 * indexes of the relations that no pruning can remove (18), and the origin
 * of the plan (19).
 */
static inline void
SetPlannedStmtRangeTable(PlannedStmt *stmt, Query *query)
{
	stmt->rtable = query->rtable;
#if PG_VERSION_NUM >= 160000
	stmt->permInfos = query->rteperminfos;
#endif
#if PG_VERSION_NUM >= 180000
	{
		ListCell   *cell;

		stmt->unprunableRelids = NULL;
		foreach(cell, query->rtable)
		{
			RangeTblEntry *rte = lfirst(cell);

			if (rte->rtekind == RTE_RELATION ||
				(rte->rtekind == RTE_SUBQUERY && OidIsValid(rte->relid)))
				stmt->unprunableRelids = bms_add_member(stmt->unprunableRelids,
														foreach_current_index(cell) + 1);
		}
	}
#endif
#if PG_VERSION_NUM >= 190000
	stmt->planOrigin = PLAN_STMT_STANDARD;
#endif
}

/*
 * MarkNullableByJoin: the Vars of relation varno in node are above an
 * outer join (range table index joinIndex) that can null-extend them.  16
 * records that in each Var (varnullingrels), and its planner relies on it;
 * before, nothing is to be done.
 */
#if PG_VERSION_NUM >= 160000
#define MarkNullableByJoin(node, varno, joinIndex) \
	add_nulling_relids((node), bms_make_singleton(varno), bms_make_singleton(joinIndex))
#else
#define MarkNullableByJoin(node, varno, joinIndex) ((void) (varno), (void) (joinIndex), (node))
#endif

/* ==== GUCs ==== */

/*
 * The memory of a check hook's extra, which the GUC machinery frees: 16
 * keeps GUC memory in a memory context (guc_malloc, guc_free), before it
 * was malloc's.  NULL when out of memory.
 */
#if PG_VERSION_NUM >= 160000
#define GucExtraAlloc(size) guc_malloc(LOG, (size))
#define GucExtraFree(ptr) guc_free(ptr)
#else
#define GucExtraAlloc(size) malloc(size)
#define GucExtraFree(ptr) free(ptr)
#endif

/* ==== the planner ==== */

/* 19 gave the planner (and its hook) the ExplainState of an EXPLAIN, or NULL */
#if PG_VERSION_NUM >= 190000
#define StandardPlanner(parse, queryString, cursorOptions, boundParams, es) \
	standard_planner((parse), (queryString), (cursorOptions), (boundParams), (es))
#define CallPlannerHook(hook, parse, queryString, cursorOptions, boundParams, es) \
	(hook)((parse), (queryString), (cursorOptions), (boundParams), (es))
#else
#define StandardPlanner(parse, queryString, cursorOptions, boundParams, es) \
	standard_planner((parse), (queryString), (cursorOptions), (boundParams))
#define CallPlannerHook(hook, parse, queryString, cursorOptions, boundParams, es) \
	(hook)((parse), (queryString), (cursorOptions), (boundParams))
#endif

/*
 * PlanQueryCompat: pg_plan_query, which PostgreSQL 19 gives the EXPLAIN
 * state of the statement (none here).
 */
#if PG_VERSION_NUM >= 190000
#define PlanQueryCompat(query, sql, cursorOptions, params) \
	pg_plan_query((query), (sql), (cursorOptions), (params), NULL)
#else
#define PlanQueryCompat(query, sql, cursorOptions, params) \
	pg_plan_query((query), (sql), (cursorOptions), (params))
#endif

/* ==== expressions of a parsed query ==== */

/*
 * FlattenAliasVars returns node (an expression of query) with the Vars
 * that name a JOIN's output columns replaced by the expressions they stand
 * for, as deparsing and analysis need them.  16 added the PlannerInfo
 * argument (NULL when there is none, as in the parser); 18 made grouped
 * expressions above GROUP BY Vars of an RTE_GROUP entry, which are replaced
 * too (first: grouped expressions may use JOIN columns).
 */
static inline Node *
FlattenAliasVars(Query *query, Node *node)
{
#if PG_VERSION_NUM >= 180000
	if (query->hasGroupRTE)
		node = flatten_group_exprs(NULL, query, node);
#endif
#if PG_VERSION_NUM >= 160000
	return flatten_join_alias_vars(NULL, query, node);
#else
	return flatten_join_alias_vars(query, node);
#endif
}

/*
 * RteIsGroup: the RTE_GROUP entry that 18 adds to a query with GROUP BY; it
 * names no table (FlattenAliasVars replaces its Vars).
 */
#if PG_VERSION_NUM >= 180000
#define RteIsGroup(rte) ((rte)->rtekind == RTE_GROUP)
#else
#define RteIsGroup(rte) false
#endif

/*
 * FlattenJoinAliasVars is FlattenAliasVars for JOIN output columns only
 * (16 added the PlannerInfo argument).
 */
#if PG_VERSION_NUM >= 160000
#define FlattenJoinAliasVars(query, node) flatten_join_alias_vars(NULL, (query), (node))
#else
#define FlattenJoinAliasVars(query, node) flatten_join_alias_vars((query), (node))
#endif

/*
 * ReplaceVarsFromTargetListOf: ReplaceVarsFromTargetList, which 18 gave
 * the index of the result relation (for Vars of RETURNING OLD/NEW).
 */
#if PG_VERSION_NUM >= 180000
#define ReplaceVarsFromTargetListOf(node, varno, up, rte, tl, resultRel, opt, nomatch, sl) \
	ReplaceVarsFromTargetList((node), (varno), (up), (rte), (tl), (resultRel), (opt), \
							  (nomatch), (sl))
#else
#define ReplaceVarsFromTargetListOf(node, varno, up, rte, tl, resultRel, opt, nomatch, sl) \
	ReplaceVarsFromTargetList((node), (varno), (up), (rte), (tl), (opt), (nomatch), (sl))
#endif

/*
 * VarReturnsOldOrNew: does a Var of a RETURNING list ask for the old or the
 * new row explicitly (RETURNING OLD.x / NEW.x, 18)?
 */
#if PG_VERSION_NUM >= 180000
#define VarReturnsOldOrNew(var) ((var)->varreturningtype != VAR_RETURNING_DEFAULT)
#else
#define VarReturnsOldOrNew(var) false
#endif

/* F_RANDOM_NO_ARGS: random(); 17 added random(min, max), so it is F_RANDOM_ */
#if PG_VERSION_NUM >= 170000
#define F_RANDOM_NO_ARGS F_RANDOM_
#else
#define F_RANDOM_NO_ARGS F_RANDOM
#endif

/* ==== MERGE ==== */

/*
 * 17 moved the ON condition of MERGE from jointree->quals to
 * mergeJoinCondition, replaced mergeUseOuterJoin by the kinds of the WHEN
 * clauses, and MergeAction's matched by matchKind (adding WHEN NOT MATCHED
 * BY SOURCE).
 */
#if PG_VERSION_NUM >= 170000
#define MergeJoinCondition(query) ((query)->mergeJoinCondition)
#define MergeActionIsMatched(action) ((action)->matchKind == MERGE_WHEN_MATCHED)
#define MergeActionBySource(action) ((action)->matchKind == MERGE_WHEN_NOT_MATCHED_BY_SOURCE)
#else
#define MergeJoinCondition(query) ((query)->jointree->quals)
#define MergeActionIsMatched(action) ((action)->matched)
#define MergeActionBySource(action) false
#endif

/*
 * MergeKeepsUnmatchedSourceRows: does a WHEN NOT MATCHED [BY TARGET] clause
 * need the source rows that match no target row?
 */
static inline bool
MergeKeepsUnmatchedSourceRows(Query *query)
{
#if PG_VERSION_NUM >= 170000
	ListCell   *cell;

	foreach(cell, query->mergeActionList)
	{
		if (((MergeAction *) lfirst(cell))->matchKind == MERGE_WHEN_NOT_MATCHED_BY_TARGET)
			return true;
	}
	return false;
#else
	return query->mergeUseOuterJoin;
#endif
}

/*
 * MergeBecomesSelect turns a copy of a MERGE into the SELECT of its source:
 * no WHEN clauses, and no ON condition (the caller builds its own join).
 */
static inline void
MergeBecomesSelect(Query *query)
{
	query->commandType = CMD_SELECT;
	query->resultRelation = 0;
	query->mergeActionList = NIL;
	MergeJoinCondition(query) = NULL;
#if PG_VERSION_NUM >= 170000
	query->mergeTargetRelation = 0;
#else
	query->mergeUseOuterJoin = false;
#endif
}

/* ==== table definitions ==== */

/*
 * 18 records each NOT NULL as a named constraint (pg_constraint contype
 * 'n'); shardext gives the shards the table's names, with the columns.
 * (17's headers define CONSTRAINT_NOTNULL, but it has no such constraints.)
 */
#if PG_VERSION_NUM >= 180000
#define ConstraintIsNotNull(contype) ((contype) == CONSTRAINT_NOTNULL)
#else
#define ConstraintIsNotNull(contype) false
#endif

/* a virtual generated column (18), computed when read */
#if PG_VERSION_NUM >= 180000
#define ColumnIsVirtual(attr) ((attr)->attgenerated == ATTRIBUTE_GENERATED_VIRTUAL)
#else
#define ColumnIsVirtual(attr) false
#endif

/* ==== COPY ==== */

/* 19 replaced CopyFormatOptions' binary and csv_mode by format */
#if PG_VERSION_NUM >= 190000
#define CopyFormatIsBinary(opts) ((opts)->format == COPY_FORMAT_BINARY)
#define CopyFormatIsCsv(opts) ((opts)->format == COPY_FORMAT_CSV)
#else
#define CopyFormatIsBinary(opts) ((opts)->binary)
#define CopyFormatIsCsv(opts) ((opts)->csv_mode)
#endif

/* the DEFAULT marker of COPY FROM (16), or NULL */
#if PG_VERSION_NUM >= 160000
#define CopyDefaultMarker(opts) ((opts)->default_print)
#else
#define CopyDefaultMarker(opts) ((char *) NULL)
#endif

/* FORCE_NOT_NULL * and FORCE_NULL * (17) */
#if PG_VERSION_NUM >= 170000
#define CopyForceNotNullAll(opts) ((opts)->force_notnull_all)
#define CopyForceNullAll(opts) ((opts)->force_null_all)
#else
#define CopyForceNotNullAll(opts) false
#define CopyForceNullAll(opts) false
#endif

/* ==== relations, tuples, scans ==== */

/* 16 renamed relfilenodes relfilelocators */
#if PG_VERSION_NUM >= 160000
#define RelationNewFileSubid(rel) ((rel)->rd_newRelfilelocatorSubid)
#else
#define RelationNewFileSubid(rel) ((rel)->rd_newRelfilenodeSubid)
#endif

/* 19 wants TupleDescFinalize() on a TupleDesc built entry by entry, before use */
#if PG_VERSION_NUM >= 190000
#define FinishTupleDesc(desc) TupleDescFinalize(desc)
#else
#define FinishTupleDesc(desc) ((void) (desc))
#endif

/* 18 added the size of extra space to allocate after the tuple */
#if PG_VERSION_NUM >= 180000
#define FormMinimalTuple(desc, values, nulls) heap_form_minimal_tuple((desc), (values), (nulls), 0)
#else
#define FormMinimalTuple(desc, values, nulls) heap_form_minimal_tuple((desc), (values), (nulls))
#endif

/* 19 added flags (none here) */
#if PG_VERSION_NUM >= 190000
#define BeginTableScan(rel, snapshot, nkeys, keys) \
	table_beginscan((rel), (snapshot), (nkeys), (keys), SO_NONE)
#define AllocTableSlot(tupleTable, desc, ops) ExecAllocTableSlot((tupleTable), (desc), (ops), 0)
#else
#define BeginTableScan(rel, snapshot, nkeys, keys) \
	table_beginscan((rel), (snapshot), (nkeys), (keys))
#define AllocTableSlot(tupleTable, desc, ops) ExecAllocTableSlot((tupleTable), (desc), (ops))
#endif

/*
 * TruncateRelations: ExecuteTruncateGuts as the current user (16 added
 * run_as_table_owner, for logical replication's apply workers).
 */
#if PG_VERSION_NUM >= 160000
#define TruncateRelations(rels, relids, logged, behavior, restartSeqs) \
	ExecuteTruncateGuts((rels), (relids), (logged), (behavior), (restartSeqs), false)
#else
#define TruncateRelations(rels, relids, logged, behavior, restartSeqs) \
	ExecuteTruncateGuts((rels), (relids), (logged), (behavior), (restartSeqs))
#endif

/* 16 added a soft-error context: none here, errors are thrown */
#if PG_VERSION_NUM >= 160000
#define StringToQualifiedNameList(string) stringToQualifiedNameList((string), NULL)
#else
#define StringToQualifiedNameList(string) stringToQualifiedNameList(string)
#endif

/*
 * ParseLsn reads an LSN from text; *failed says whether it was one.  19
 * replaced pg_lsn_in_internal by pg_lsn_in_safe, with a soft-error context.
 */
#if PG_VERSION_NUM >= 190000
#include "nodes/miscnodes.h"
#endif
#include "utils/pg_lsn.h"
static inline XLogRecPtr
ParseLsn(const char *text, bool *failed)
{
#if PG_VERSION_NUM >= 190000
	ErrorSaveContext escontext = {T_ErrorSaveContext};
	XLogRecPtr	lsn = pg_lsn_in_safe(text, (Node *) &escontext);

	*failed = escontext.error_occurred;
	return lsn;
#else
	return pg_lsn_in_internal(text, failed);
#endif
}

/* ==== processes, transactions, locks, shared memory ==== */

/*
 * 17 moved PGPROC's lxid into vxid and replaced pgprocno by
 * GetNumberFromPGProc().
 */
#if PG_VERSION_NUM >= 170000
#define ProcLocalXid(proc) ((proc)->vxid.lxid)
#define ProcNumberOf(proc) ((int) GetNumberFromPGProc(proc))
#else
#define ProcLocalXid(proc) ((proc)->lxid)
#define ProcNumberOf(proc) ((proc)->pgprocno)
#endif

/*
 * OldestActiveXid: the oldest xid still running in any database (19 added
 * the choices of only those committing and of one database).
 */
#if PG_VERSION_NUM >= 190000
#define OldestActiveXid() GetOldestActiveTransactionId(false, true)
#else
#define OldestActiveXid() GetOldestActiveTransactionId()
#endif

/* 18 added whether to log a failure to get the lock (log_lock_failures) */
#if PG_VERSION_NUM >= 180000
#define TryXactLockTableWait(xid) ConditionalXactLockTableWait((xid), false)
#else
#define TryXactLockTableWait(xid) ConditionalXactLockTableWait(xid)
#endif

/*
 * 19 names a tranche when it is created (shared, for every backend);
 * before, each backend registers the name of the tranche id.
 */
#if PG_VERSION_NUM >= 190000
#define NewLWLockTranche(name) LWLockNewTrancheId(name)
#define RegisterLWLockTrancheName(id, name) ((void) 0)
#else
#define NewLWLockTranche(name) LWLockNewTrancheId()
#define RegisterLWLockTrancheName(id, name) LWLockRegisterTranche((id), (name))
#endif

/* a shared hash table of a fixed number of entries (19 merged init and max size) */
#if PG_VERSION_NUM >= 190000
#define ShmemInitFixedHash(name, size, info, flags) ShmemInitHash((name), (size), (info), (flags))
#else
#define ShmemInitFixedHash(name, size, info, flags) \
	ShmemInitHash((name), (size), (size), (info), (flags))
#endif

/*
 * 17 ties a WaitEventSet to a resource owner (NULL: freed only by the
 * caller) instead of a memory context.
 */
#if PG_VERSION_NUM >= 170000
#define CreateLongLivedWaitEventSet(nevents) CreateWaitEventSet(NULL, (nevents))
#define CreateTransientWaitEventSet(nevents) CreateWaitEventSet(CurrentResourceOwner, (nevents))
#else
#define CreateLongLivedWaitEventSet(nevents) CreateWaitEventSet(TopMemoryContext, (nevents))
#define CreateTransientWaitEventSet(nevents) CreateWaitEventSet(CurrentMemoryContext, (nevents))
#endif

/* the status of backend i (1-based) of the local snapshot (renamed in 17) */
#if PG_VERSION_NUM >= 170000
#define LocalBackendStatus(i) pgstat_get_local_beentry_by_index(i)
#else
#define LocalBackendStatus(i) pgstat_fetch_stat_local_beentry(i)
#endif

/* ==== logical decoding ==== */

/*
 * 17 hands decoded rows to output plugins as HeapTuples (before, a
 * ReorderBufferTupleBuf holding one).  For files that include
 * replication/reorderbuffer.h.
 */
#ifdef REORDERBUFFER_H
#if PG_VERSION_NUM >= 170000
typedef HeapTuple DecodedTuple;
#define DecodedHeapTuple(tuple) (tuple)
#define MakeDecodedTuple(heapTuple) (heapTuple)
#else
typedef ReorderBufferTupleBuf *DecodedTuple;
#define DecodedHeapTuple(tuple) (&(tuple)->tuple)
static inline DecodedTuple
MakeDecodedTuple(HeapTuple heapTuple)
{
	ReorderBufferTupleBuf *tuple = palloc0(sizeof(ReorderBufferTupleBuf));

	tuple->tuple = *heapTuple;
	return tuple;
}
#endif

#include "access/tupconvert.h"

/*
 * ConvertDecodedTuple returns a decoded row in another relation's layout
 * (column order, dropped columns: map from convert_tuples_by_name), the row
 * itself when there is no map (same layout) or no row, in the current
 * memory context.
 */
static inline DecodedTuple
ConvertDecodedTuple(DecodedTuple tuple, TupleConversionMap *map)
{
	if (tuple == NULL || map == NULL)
		return tuple;
	return MakeDecodedTuple(execute_attr_map_tuple(DecodedHeapTuple(tuple), map));
}
#endif							/* REORDERBUFFER_H */

/*
 * LogLogicalMessageCompat: a logical decoding message (17 added whether
 * to flush the WAL at once; never here, it is written with its
 * transaction).
 */
#if PG_VERSION_NUM >= 170000
#define LogLogicalMessageCompat(prefix, message, size, transactional) \
	LogLogicalMessage((prefix), (message), (size), (transactional), false)
#else
#define LogLogicalMessageCompat(prefix, message, size, transactional) \
	LogLogicalMessage((prefix), (message), (size), (transactional))
#endif

/*
 * 19 renamed RepOriginId, the id of a replication origin, ReplOriginId
 * (access/xlogdefs.h), and InvalidRepOriginId InvalidReplOriginId
 * (replication/origin.h).  shardext uses the new names.
 */
#if PG_VERSION_NUM < 190000
#include "access/xlogdefs.h"
typedef RepOriginId ReplOriginId;
#define InvalidReplOriginId InvalidRepOriginId
#endif

/* ==== the client connection ==== */

/*
 * The look at the next protocol message from the client, which the
 * executor uses to tell a lone extended-protocol Execute from a pipeline:
 * the pq_* functions of libpq/libpq.h, which cannot be included by code
 * that includes libpq-fe.h (it pulls in the server build's GSSAPI headers).
 * 17 replaced pq_buffer_has_data() by pq_buffer_remaining_data().
 */
#if PG_VERSION_NUM >= 170000
extern ssize_t pq_buffer_remaining_data(void);
#define pq_buffer_has_data() (pq_buffer_remaining_data() > 0)
#else
extern bool pq_buffer_has_data(void);
#endif
extern void pq_startmsgread(void);
extern int	pq_peekbyte(void);
extern void pq_endmsgread(void);

/* and what COPY FROM STDIN reads the client's CopyData with (copy_split.c) */
extern int	pq_getbyte(void);
extern int	pq_getmessage(StringInfo s, int maxlen);
#ifndef PQ_SMALL_MESSAGE_LIMIT
#define PQ_SMALL_MESSAGE_LIMIT	10000
#define PQ_LARGE_MESSAGE_LIMIT	(MaxAllocSize - 1)
#endif

/*
 * PeekClientMessageType returns the type byte of the next message the
 * client has already sent (without consuming it), or -1 when none is
 * buffered.  Only valid in a backend serving a client, between messages.
 */
static inline int
PeekClientMessageType(void)
{
	int			next;

	if (!pq_buffer_has_data())
		return -1;
	pq_startmsgread();
	next = pq_peekbyte();
	pq_endmsgread();
	return next;
}

#endif							/* SHARDEXT_PG_COMPAT_H */
