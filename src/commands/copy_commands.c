/*-------------------------------------------------------------------------
 *
 * copy_commands.c
 *	  COPY into and out of distributed and reference tables.
 *
 * COPY FROM routes each row to its shard and streams the shards over COPY
 * on the workers (shard_copy.c), inside the local transaction: a bad row
 * anywhere fails the whole COPY and leaves no row behind.  FREEZE follows
 * PostgreSQL's rules on the local table and then freezes on the shards.  Text and CSV
 * input without DEFAULT expressions to evaluate and without WHERE take the
 * fast path: each line is split off the input (copy_split.c reads only up
 * to the distribution column's field; where it cannot, PostgreSQL's reader
 * splits the line into fields), the distribution column is converted to
 * find the shard, and the line itself is forwarded with the same format
 * options.  Everything else (binary input, DEFAULT
 * expressions for missing columns, which are evaluated here once per row,
 * WHERE) is parsed into rows here and sent as text.  Errors name the input
 * line as PostgreSQL does ("COPY t, line 3, column x: ..."), also when a
 * worker finds them.
 *
 * COPY t TO streams COPY ... TO STDOUT of every shard in hash order (one
 * placement of a reference table) to the client or the file, with the
 * format, encoding and date/interval/float/bytea output settings of the
 * local session.  COPY (SELECT ...) TO is a query like any other.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "commands/copy.h"
#include "commands/copyfrom_internal.h"
#include "executor/executor.h"
#include "libpq/pqformat.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parse_collate.h"
#include "parser/parse_expr.h"
#include "parser/parse_relation.h"
#include "storage/fd.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/portal.h"

#include "shardext/connection.h"
#include "shardext/distributed_executor.h"
#include "shardext/global_index.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"
#include "shardext/shard_copy.h"

static void CheckCopyPermissions(CopyStmt *stmt, Relation rel);
static void RejectNewCopyOptions(CopyFormatOptions *opts, Relation rel);
static uint64 CopyIntoShards(CopyStmt *stmt, Relation rel, const char *queryString);
static void CheckCopyFreeze(Relation rel);
static Node *TransformCopyWhere(ParseState *pstate, Relation rel, Node *where);
static uint64 CopyFastPath(CopyFromState cstate, ShardCopyState *copyState,
						   Relation rel, char *distAttname);
static uint64 CopySlowPath(CopyFromState cstate, ShardCopyState *copyState,
						   Relation rel, Node *whereClause, GlobalIndexChanges *gindexChanges);
static bool SlotValue(AttrNumber attnum, Datum *value, void *arg);
static char *RemoteCopyOptions(CopyFormatOptions *opts, bool forOutput, int encoding);
static char *NameListString(List *names);
static char *AttnumListString(Relation rel, List *attnums);
static uint64 CopyOutOfShards(CopyStmt *stmt, Relation rel, const char *queryString);

/*
 * ShardextCopy runs COPY on a distributed or reference table and returns
 * true; it returns false for every other COPY.
 */
bool
ShardextCopy(CopyStmt *stmt, PlannedStmt *pstmt, const char *queryString,
			 QueryCompletion *qc)
{
	Oid			relid;
	Relation	rel;
	uint64		processed;

	if (stmt->relation == NULL)
		return false;
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (!OidIsValid(relid) || !IsDistributedTable(relid))
		return false;

	if (stmt->is_from)
		RejectIndexTableWrite(relid, "COPY into");
	rel = table_open(relid, stmt->is_from ? RowExclusiveLock : AccessShareLock);
	CheckCopyPermissions(stmt, rel);
	if (stmt->is_from)
		processed = CopyIntoShards(stmt, rel, queryString);
	else
		processed = CopyOutOfShards(stmt, rel, queryString);
	table_close(rel, NoLock);

	if (qc)
		SetQueryCompletion(qc, CMDTAG_COPY, processed);
	return true;
}

/*
 * CheckCopyPermissions does the checks of DoCopy: server files and programs
 * need the corresponding roles; the table needs INSERT or SELECT; row level
 * security is not supported on distributed tables.
 */
static void
CheckCopyPermissions(CopyStmt *stmt, Relation rel)
{
	AclResult	aclresult;

	if (stmt->filename != NULL)
	{
		if (stmt->is_program)
		{
			if (!has_privs_of_role(GetUserId(), ROLE_PG_EXECUTE_SERVER_PROGRAM))
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("must be superuser or have privileges of the "
								"pg_execute_server_program role to COPY to or from "
								"an external program")));
		}
		else if (stmt->is_from &&
				 !has_privs_of_role(GetUserId(), ROLE_PG_READ_SERVER_FILES))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("must be superuser or have privileges of the "
							"pg_read_server_files role to COPY from a file")));
		else if (!stmt->is_from &&
				 !has_privs_of_role(GetUserId(), ROLE_PG_WRITE_SERVER_FILES))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("must be superuser or have privileges of the "
							"pg_write_server_files role to COPY to a file")));
	}

	aclresult = pg_class_aclcheck(RelationGetRelid(rel), GetUserId(),
								  stmt->is_from ? ACL_INSERT : ACL_SELECT);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_TABLE, RelationGetRelationName(rel));

	if (check_enable_rls(RelationGetRelid(rel), InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("COPY is not supported on distributed table \"%s\" with row-level "
						"security", RelationGetRelationName(rel))));
	if (stmt->is_from && XactReadOnly)
		PreventCommandIfReadOnly("COPY FROM");
}

/*
 * RejectNewCopyOptions refuses the COPY options of newer PostgreSQL
 * versions that the distributed COPY does not implement: ON_ERROR other
 * than stop (17; REJECT_LIMIT needs it), FORMAT json (19).
 */
static void
RejectNewCopyOptions(CopyFormatOptions *opts, Relation rel)
{
#if PG_VERSION_NUM >= 170000
	if (opts->on_error != COPY_ON_ERROR_STOP)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("COPY ... ON_ERROR on distributed table \"%s\" is not supported",
						RelationGetRelationName(rel)),
				 errhint("COPY into a local table with ON_ERROR, then INSERT ... SELECT "
						 "from it.")));
#endif
#if PG_VERSION_NUM >= 190000
	if (opts->format == COPY_FORMAT_JSON)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("COPY ... FORMAT json on distributed table \"%s\" is not supported",
						RelationGetRelationName(rel)),
				 errhint("Use COPY (SELECT ... FROM %s) TO ... WITH (FORMAT json).",
						 quote_identifier(RelationGetRelationName(rel)))));
#endif
}

/*
 * CopyIntoShards runs COPY FROM into the shards and returns the number of
 * rows loaded.
 */
static uint64
CopyIntoShards(CopyStmt *stmt, Relation rel, const char *queryString)
{
	ParseState *pstate = make_parsestate(NULL);
	Node	   *whereClause = NULL;
	CopyFromState cstate;
	ShardCopyState *copyState;
	DistTableCacheEntry *entry = GetDistTableCacheEntry(RelationGetRelid(rel));
	ErrorContextCallback errcallback;
	bool		fastPath;
	uint64		processed;
	char	   *distAttname = NULL;
	GlobalIndexChanges *gindexChanges = NULL;

	pstate->p_sourcetext = queryString;
	if (stmt->whereClause != NULL)
		whereClause = TransformCopyWhere(pstate, rel, stmt->whereClause);

	cstate = BeginCopyFrom(pstate, rel, whereClause, stmt->filename, stmt->is_program,
						   NULL, stmt->attlist, stmt->options);
	RejectNewCopyOptions(&cstate->opts, rel);
	if (cstate->opts.freeze)
		CheckCopyFreeze(rel);

	if (entry->method == DISTRIBUTE_BY_HASH)
	{
		distAttname = get_attname(RelationGetRelid(rel), entry->distAttnum, false);
		fastPath = list_member_int(cstate->attnumlist, entry->distAttnum);
	}
	else
		fastPath = true;
	/*
	 * Global indexes need the values of their columns: rows are parsed here,
	 * and their entries are written once the rows are in, on the same
	 * connections (one per node).
	 */
	if (entry->globalIndexes != NIL)
		gindexChanges = StartGlobalIndexChanges(RelationGetRelid(rel),
												GlobalIndexRelids(entry->globalIndexes));
	fastPath = fastPath && !CopyFormatIsBinary(&cstate->opts) && whereClause == NULL &&
		cstate->num_defaults == 0 && CopyDefaultMarker(&cstate->opts) == NULL &&
		gindexChanges == NULL;

	if (fastPath)
		copyState = BeginShardCopy(RelationGetRelid(rel), ShardextMaxConnectionsPerNode,
								   AttnumListString(rel, cstate->attnumlist),
								   RemoteCopyOptions(&cstate->opts, false, -1));
	else
		copyState = BeginShardCopy(RelationGetRelid(rel),
								   gindexChanges != NULL ? 1 : ShardextMaxConnectionsPerNode,
								   NULL, NULL);

	if (cstate->opts.freeze)
		ShardCopyFreeze(copyState);

	errcallback.callback = CopyFromErrorCallback;
	errcallback.arg = (void *) cstate;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	if (fastPath)
		processed = CopyFastPath(cstate, copyState, rel, distAttname);
	else
		processed = CopySlowPath(cstate, copyState, rel, whereClause, gindexChanges);

	/* errors from here on are the workers', which name their own line */
	error_context_stack = errcallback.previous;
	EndShardCopy(copyState);
	if (gindexChanges != NULL)
	{
		ApplyGlobalIndexChanges(gindexChanges, NULL);
		EndGlobalIndexChanges(gindexChanges);
	}
	EndCopyFrom(cstate);
	return processed;
}

/*
 * CheckCopyFreeze applies PostgreSQL's conditions for COPY FREEZE to the
 * local table, with PostgreSQL's errors: no earlier snapshot or cursor of
 * the transaction may still see the table, and the table must have been
 * created or truncated in the current subtransaction.  Its shards were
 * then created or truncated by the same remote transactions, in the same
 * remote subtransaction, which the COPY uses (inside a transaction block
 * it uses each node's one transaction connection), so FREEZE holds there
 * too.
 */
static void
CheckCopyFreeze(Relation rel)
{
	if (!ThereAreNoPriorRegisteredSnapshots() || !ThereAreNoReadyPortals())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot perform COPY FREEZE because of prior transaction activity")));
	if (rel->rd_createSubid != GetCurrentSubTransactionId() &&
		RelationNewFileSubid(rel) != GetCurrentSubTransactionId())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot perform COPY FREEZE because the table was not created or truncated in the current subtransaction")));
}

/* TransformCopyWhere does what DoCopy does with a WHERE clause */
static Node *
TransformCopyWhere(ParseState *pstate, Relation rel, Node *where)
{
	ParseNamespaceItem *nsitem;
	Node	   *whereClause;

	nsitem = addRangeTableEntryForRelation(pstate, rel, RowExclusiveLock, NULL, false, false);
	addNSItemToQuery(pstate, nsitem, false, true, true);
	whereClause = transformExpr(pstate, where, EXPR_KIND_COPY_WHERE);
	whereClause = coerce_to_boolean(pstate, whereClause, "WHERE");
	assign_expr_collations(pstate, whereClause);
	whereClause = eval_const_expressions(NULL, whereClause);
	whereClause = (Node *) canonicalize_qual((Expr *) whereClause, false);
	return (Node *) make_ands_implicit((Expr *) whereClause);
}

/* what routing a forwarded line needs: the distribution column's input */
typedef struct LineRouting
{
	ShardCopyState *copyState;
	DistTableCacheEntry *entry;
	int			distField;		/* its input field, -1: not hashed */
	char	   *distAttname;
	FmgrInfo	inputFunction;
	Oid			typioparam;
} LineRouting;

static void InitLineRouting(LineRouting *routing, CopyFromState cstate,
							ShardCopyState *copyState, Relation rel, char *distAttname);
static ShardInterval *RouteLine(LineRouting *routing, CopyFromState cstate, char *string);
static bool NextParsedLine(CopyFromState cstate, int distField,
						   const char **line, int *length, char **string);

/*
 * CopyFastPath forwards input lines: only the distribution column is
 * converted, to choose the shard; the workers parse the rest.  The lines
 * come from the splitter (copy_split.c) when it can read the input, else
 * (and after it handed over) from PostgreSQL's reader.
 */
static uint64
CopyFastPath(CopyFromState cstate, ShardCopyState *copyState, Relation rel,
			 char *distAttname)
{
	LineRouting routing;
	CopySplitter *splitter = NULL;
	CopySplitResult result = COPY_SPLIT_HANDED_OVER;
	MemoryContext rowContext = AllocSetContextCreate(CurrentMemoryContext,
													 "shardext copy line",
													 ALLOCSET_DEFAULT_SIZES);
	uint64		processed = 0;

	InitLineRouting(&routing, cstate, copyState, rel, distAttname);
	if (CopySplitterUsable(cstate))
	{
		splitter = BeginCopySplit(cstate, routing.distField);
		result = COPY_SPLIT_LINE;
	}

	for (;;)
	{
		MemoryContext oldContext = MemoryContextSwitchTo(rowContext);
		const char *line = NULL;
		int			length = 0;
		char	   *string = NULL;

		if (result != COPY_SPLIT_HANDED_OVER)
			result = CopySplitNext(splitter, &line, &length, &string);
		if (result == COPY_SPLIT_END ||
			(result == COPY_SPLIT_HANDED_OVER &&
			 !NextParsedLine(cstate, routing.distField, &line, &length, &string)))
		{
			MemoryContextSwitchTo(oldContext);
			break;
		}
		ShardCopySendLine(copyState, RouteLine(&routing, cstate, string), line, length,
						  cstate->cur_lineno);
		processed++;
		MemoryContextSwitchTo(oldContext);
		MemoryContextReset(rowContext);
		CHECK_FOR_INTERRUPTS();
	}
	if (splitter != NULL)
		EndCopySplit(splitter);
	MemoryContextDelete(rowContext);
	return processed;
}

/* InitLineRouting looks up the distribution column's field and input function */
static void
InitLineRouting(LineRouting *routing, CopyFromState cstate, ShardCopyState *copyState,
				Relation rel, char *distAttname)
{
	ListCell   *cell;
	Oid			inputOid;

	memset(routing, 0, sizeof(LineRouting));
	routing->copyState = copyState;
	routing->entry = GetDistTableCacheEntry(RelationGetRelid(rel));
	routing->distField = -1;
	routing->distAttname = distAttname;
	if (routing->entry->method != DISTRIBUTE_BY_HASH)
		return;
	foreach(cell, cstate->attnumlist)
	{
		if (lfirst_int(cell) == routing->entry->distAttnum)
			routing->distField = foreach_current_index(cell);
	}
	getTypeInputInfo(routing->entry->distType, &inputOid, &routing->typioparam);
	fmgr_info(inputOid, &routing->inputFunction);
}

/*
 * RouteLine returns the shard of a line whose distribution column field is
 * string (NULL: SQL NULL), converting it as NextCopyFrom would.
 */
static ShardInterval *
RouteLine(LineRouting *routing, CopyFromState cstate, char *string)
{
	DistTableCacheEntry *entry = routing->entry;
	Datum		value = (Datum) 0;
	ShardInterval *shard;

	if (routing->distField < 0)
		return &entry->shards[0];

	/* FORCE_NOT_NULL / FORCE_NULL as NextCopyFrom applies them */
	if (CopyFormatIsCsv(&cstate->opts))
	{
		if (string == NULL && cstate->opts.force_notnull_flags[entry->distAttnum - 1])
			string = cstate->opts.null_print;
		else if (string != NULL && cstate->opts.force_null_flags[entry->distAttnum - 1] &&
				 strcmp(string, cstate->opts.null_print) == 0)
			string = NULL;
	}
	cstate->cur_attname = routing->distAttname;
	cstate->cur_attval = string;
	if (string != NULL)
		value = InputFunctionCall(&routing->inputFunction, string, routing->typioparam,
								  entry->distTypmod);
	shard = ShardCopyShardForValue(routing->copyState, value, string == NULL);
	cstate->cur_attname = NULL;
	cstate->cur_attval = NULL;
	return shard;
}

/*
 * NextParsedLine reads the next line with PostgreSQL's reader, checks its
 * number of fields, and returns it with its distribution column field;
 * false at the end of the input.
 */
static bool
NextParsedLine(CopyFromState cstate, int distField,
			   const char **line, int *length, char **string)
{
	int			fieldCount = list_length(cstate->attnumlist);
	char	  **fields;
	int			nfields;

	if (!NextCopyFromRawFields(cstate, &fields, &nfields))
		return false;
	if (nfields > fieldCount)
		ereport(ERROR,
				(errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				 errmsg("extra data after last expected column")));
	if (nfields < fieldCount)
		ReportMissingCopyColumn(cstate, nfields);
	*line = cstate->line_buf.data;
	*length = cstate->line_buf.len;
	*string = distField >= 0 ? fields[distField] : NULL;
	return true;
}

/* BaseValueFunction over a row in a slot */
static bool
SlotValue(AttrNumber attnum, Datum *value, void *arg)
{
	TupleTableSlot *slot = arg;

	*value = slot->tts_values[attnum - 1];
	return !slot->tts_isnull[attnum - 1];
}

/*
 * CopySlowPath parses rows here (evaluating DEFAULT expressions of missing
 * columns once per row, and WHERE) and sends them as text; with global
 * indexes, it adds each row's entries to gindexChanges.
 */
static uint64
CopySlowPath(CopyFromState cstate, ShardCopyState *copyState, Relation rel,
			 Node *whereClause, GlobalIndexChanges *gindexChanges)
{
	EState	   *estate = CreateExecutorState();
	ExprContext *econtext = GetPerTupleExprContext(estate);
	TupleTableSlot *slot = MakeSingleTupleTableSlot(RelationGetDescr(rel),
													&TTSOpsVirtual);
	ExprState  *qual = NULL;
	uint64		processed = 0;

	if (whereClause != NULL)
		qual = ExecInitQual(castNode(List, whereClause), NULL);

	for (;;)
	{
		ResetPerTupleExprContext(estate);
		ExecClearTuple(slot);
		if (!NextCopyFrom(cstate, econtext, slot->tts_values, slot->tts_isnull))
			break;
		ExecStoreVirtualTuple(slot);
		econtext->ecxt_scantuple = slot;
		if (qual != NULL && !ExecQual(qual, econtext))
			continue;
		ShardCopySendSlot(copyState, slot, cstate->cur_lineno);
		if (gindexChanges != NULL)
			AddGlobalIndexRow(gindexChanges, SlotValue, slot, 1);
		processed++;
		CHECK_FOR_INTERRUPTS();
	}
	ExecDropSingleTupleTableSlot(slot);
	FreeExecutorState(estate);
	return processed;
}

/*
 * RemoteCopyOptions returns the WITH clause that makes a worker read (or
 * write) the same format as the input (or output).  encoding >= 0 asks the
 * worker to write in that encoding.
 */
static char *
RemoteCopyOptions(CopyFormatOptions *opts, bool forOutput, int encoding)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "WITH (FORMAT %s", CopyFormatIsBinary(opts) ? "binary" :
					 CopyFormatIsCsv(opts) ? "csv" : "text");
	if (!CopyFormatIsBinary(opts))
	{
		appendStringInfo(&buf, ", DELIMITER %s, NULL %s", quote_literal_cstr(opts->delim),
						 quote_literal_cstr(opts->null_print));
		if (CopyFormatIsCsv(opts))
		{
			appendStringInfo(&buf, ", QUOTE %s, ESCAPE %s", quote_literal_cstr(opts->quote),
							 quote_literal_cstr(opts->escape));
			if (!forOutput && CopyForceNotNullAll(opts))
				appendStringInfoString(&buf, ", FORCE_NOT_NULL *");
			else if (!forOutput && opts->force_notnull != NIL)
				appendStringInfo(&buf, ", FORCE_NOT_NULL %s",
								 NameListString(opts->force_notnull));
			if (!forOutput && CopyForceNullAll(opts))
				appendStringInfoString(&buf, ", FORCE_NULL *");
			else if (!forOutput && opts->force_null != NIL)
				appendStringInfo(&buf, ", FORCE_NULL %s", NameListString(opts->force_null));
			if (forOutput && opts->force_quote_all)
				appendStringInfoString(&buf, ", FORCE_QUOTE *");
			else if (forOutput && opts->force_quote != NIL)
				appendStringInfo(&buf, ", FORCE_QUOTE %s", NameListString(opts->force_quote));
		}
	}
	if (encoding >= 0)
		appendStringInfo(&buf, ", ENCODING %s",
						 quote_literal_cstr(pg_encoding_to_char(encoding)));
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/* "(a, b)" of a list of column names */
static char *
NameListString(List *names)
{
	StringInfoData buf;
	ListCell   *cell;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	foreach(cell, names)
		appendStringInfo(&buf, "%s%s", foreach_current_index(cell) > 0 ? ", " : "",
						 quote_identifier(strVal(lfirst(cell))));
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/* "(a, b)" of a list of attribute numbers */
static char *
AttnumListString(Relation rel, List *attnums)
{
	StringInfoData buf;
	ListCell   *cell;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	foreach(cell, attnums)
		appendStringInfo(&buf, "%s%s", foreach_current_index(cell) > 0 ? ", " : "",
						 quote_identifier(NameStr(TupleDescAttr(RelationGetDescr(rel),
																lfirst_int(cell) - 1)->attname)));
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/* where COPY TO writes: the client or a file/program */
typedef struct CopyOutput
{
	FILE	   *file;			/* NULL: the client */
	bool		isProgram;
	bool		binary;
} CopyOutput;

/* where CopyShardOut is in a shard's COPY TO STDOUT data */
typedef struct ShardCopyOutState
{
	bool		binary;
	int			skip;			/* bytes of the binary header still to skip */
	bool		headerDone;
	char		held[2];		/* bytes held back: maybe the binary trailer */
	int			heldLength;
} ShardCopyOutState;

static uint64 CopyShardOut(CopyOutput *output, NodeConnection *conn, const char *command,
						   bool binary);
static void PassCopyData(CopyOutput *output, ShardCopyOutState *state, char *data,
						 int length);

static void
WriteCopyOutput(CopyOutput *output, const char *data, int length)
{
	if (length <= 0)
		return;
	if (output->file == NULL)
	{
		StringInfoData message;

		pq_beginmessage(&message, 'd');
		pq_sendbytes(&message, data, length);
		pq_endmessage(&message);
	}
	else if (fwrite(data, 1, length, output->file) != (size_t) length)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write to COPY %s: %m",
						output->isProgram ? "program" : "file")));
}

/* BeginCopyOutput opens the destination, or tells the client COPY starts */
static void
BeginCopyOutput(CopyOutput *output, CopyStmt *stmt, int natts)
{
	output->isProgram = stmt->is_program;
	if (stmt->filename == NULL)
	{
		StringInfoData buf;

		pq_beginmessage(&buf, 'H');
		pq_sendbyte(&buf, output->binary ? 1 : 0);
		pq_sendint16(&buf, natts);
		for (int i = 0; i < natts; i++)
			pq_sendint16(&buf, output->binary ? 1 : 0);
		pq_endmessage(&buf);
		output->file = NULL;
	}
	else if (stmt->is_program)
	{
		output->file = OpenPipeStream(stmt->filename, PG_BINARY_W);
		if (output->file == NULL)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not execute command \"%s\": %m", stmt->filename)));
	}
	else
	{
		mode_t		oldumask;

		if (!is_absolute_path(stmt->filename))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_NAME),
					 errmsg("relative path not allowed for COPY to file")));
		oldumask = umask(S_IWGRP | S_IWOTH);
		PG_TRY();
		{
			output->file = AllocateFile(stmt->filename, PG_BINARY_W);
		}
		PG_FINALLY();
		{
			umask(oldumask);
		}
		PG_END_TRY();
		if (output->file == NULL)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not open file \"%s\" for writing: %m", stmt->filename)));
	}
}

static void
EndCopyOutput(CopyOutput *output, CopyStmt *stmt)
{
	if (output->file == NULL)
	{
		pq_putemptymessage('c');
		return;
	}
	if (output->isProgram)
	{
		int			rc = ClosePipeStream(output->file);

		if (rc != 0)
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("program \"%s\" failed", stmt->filename)));
	}
	else if (FreeFile(output->file))
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not close file \"%s\": %m", stmt->filename)));
}

/*
 * AppendHeaderLine appends the column names as COPY's HEADER option writes
 * them (quoted for CSV when needed).
 */
static void
AppendHeaderLine(StringInfo buf, Relation rel, List *attnums, CopyFormatOptions *opts)
{
	ListCell   *cell;

	foreach(cell, attnums)
	{
		const char *name = NameStr(TupleDescAttr(RelationGetDescr(rel),
												 lfirst_int(cell) - 1)->attname);

		if (foreach_current_index(cell) > 0)
			appendStringInfoString(buf, opts->delim);
		if (CopyFormatIsCsv(opts) &&
			(strpbrk(name, "\r\n") != NULL || strchr(name, opts->delim[0]) != NULL ||
			 strchr(name, opts->quote[0]) != NULL || strcmp(name, opts->null_print) == 0))
		{
			appendStringInfoChar(buf, opts->quote[0]);
			for (const char *p = name; *p; p++)
			{
				if (*p == opts->quote[0] || *p == opts->escape[0])
					appendStringInfoChar(buf, opts->escape[0]);
				appendStringInfoChar(buf, *p);
			}
			appendStringInfoChar(buf, opts->quote[0]);
		}
		else if (CopyFormatIsCsv(opts))
			appendStringInfoString(buf, name);
		else
			AppendCopyTextValue(buf, name);
	}
	appendStringInfoChar(buf, '\n');
}

/*
 * CopyOutOfShards streams COPY TO STDOUT of every shard to the destination
 * and returns the number of rows.  Binary output of each shard starts with
 * the 19-byte (plus extension) header and ends with the 2-byte trailer;
 * those are written once for the whole COPY.
 */
static uint64
CopyOutOfShards(CopyStmt *stmt, Relation rel, const char *queryString)
{
	ParseState *pstate = make_parsestate(NULL);
	CopyFormatOptions opts;
	DistTableCacheEntry *entry = GetDistTableCacheEntry(RelationGetRelid(rel));
	List	   *attnums;
	CopyOutput	output;
	char	   *remoteOptions;
	char	   *setCommand;
	char	   *resetCommand;
	int			encoding;
	uint64		processed = 0;
	static const char binaryHeader[] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";

	pstate->p_sourcetext = queryString;
	memset(&opts, 0, sizeof(opts));
	ProcessCopyOptions(pstate, &opts, false, stmt->options);
	RejectNewCopyOptions(&opts, rel);
	attnums = CopyGetAttnums(RelationGetDescr(rel), rel, stmt->attlist);
	encoding = opts.file_encoding >= 0 ? opts.file_encoding : pg_get_client_encoding();
	remoteOptions = RemoteCopyOptions(&opts, true,
									  encoding != GetDatabaseEncoding() ? encoding : -1);
	FormatSettingCommands(&setCommand, &resetCommand);

	memset(&output, 0, sizeof(output));
	output.binary = CopyFormatIsBinary(&opts);
	BeginCopyOutput(&output, stmt, list_length(attnums));

	if (CopyFormatIsBinary(&opts))
		WriteCopyOutput(&output, binaryHeader, 19);
	else if (opts.header_line != COPY_HEADER_FALSE)
	{
		StringInfoData header;
		char	   *converted;

		initStringInfo(&header);
		AppendHeaderLine(&header, rel, attnums, &opts);
		converted = pg_server_to_any(header.data, header.len, encoding);
		WriteCopyOutput(&output, converted, strlen(converted));
	}

	for (int i = 0; i < entry->shardCount; i++)
	{
		ShardInterval *shard = &entry->shards[i];
		NodeConnection *conn = GetNodeConnection(shard->placementNodeIds[0]);
		char	   *command;

		if (entry->method == DISTRIBUTE_BY_REFERENCE && i > 0)
			break;
		RemoteTransactionBegin(conn);
		command = psprintf("%sCOPY %s %s TO STDOUT %s", setCommand ? setCommand : "",
						   QualifiedShardName(RelationGetRelid(rel), shard->shardId),
						   AttnumListString(rel, attnums), remoteOptions);
		processed += CopyShardOut(&output, conn, command, CopyFormatIsBinary(&opts));
		if (resetCommand != NULL)
			ExecuteRemoteCommand(conn, resetCommand);
	}

	if (CopyFormatIsBinary(&opts))
	{
		int16		trailer = pg_hton16(-1);

		WriteCopyOutput(&output, (char *) &trailer, 2);
	}
	EndCopyOutput(&output, stmt);
	return processed;
}

/*
 * CopyShardOut runs a COPY ... TO STDOUT of one shard and passes its data
 * on to the client's output; binary data loses the header and trailer of
 * each shard (the caller writes one of each).  Returns the rows copied.
 */
static uint64
CopyShardOut(CopyOutput *output, NodeConnection *conn, const char *command, bool binary)
{
	PGresult   *result;
	uint64		processed;
	ShardCopyOutState state = {binary, binary ? 19 : 0, !binary, {0, 0}, 0};
	char	   *volatile data = NULL;

	BeginRemoteCopy(conn, command, PGRES_COPY_OUT);

	/* libpq's buffer of the row being passed on is freed on errors too */
	PG_TRY();
	{
		for (;;)
		{
			char	   *row;
			int			length = PQgetCopyData(conn->pgConn, &row, 1);

			if (length == 0)
			{
				WaitForRemoteSocket(conn, false);
				continue;
			}
			if (length < 0)
				break;
			data = row;
			PassCopyData(output, &state, data, length);
			data = NULL;
			PQfreemem(row);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		if (data != NULL)
			PQfreemem(data);
		PG_RE_THROW();
	}
	PG_END_TRY();
	result = FinishRemoteQuery(conn, command);
	processed = strtou64(PQcmdTuples(result), NULL, 10);
	PQclear(result);
	return processed;
}

/*
 * PassCopyData passes one CopyData message of a shard's COPY TO STDOUT on
 * to the client's output: for binary data without the shard's header
 * (signature, flags, extension area) and with the last two bytes held back
 * (the trailer, which only the last message of a shard ends with).
 */
static void
PassCopyData(CopyOutput *output, ShardCopyOutState *state, char *data, int length)
{
	char	   *p = data;

	if (!state->headerDone)
	{
		int			n = Min(state->skip, length);

		if (state->skip == 19 && length >= 19)
		{
			uint32		extension;

			memcpy(&extension, data + 15, 4);
			state->skip += pg_ntoh32(extension);
			n = Min(state->skip, length);
		}
		p += n;
		length -= n;
		state->skip -= n;
		state->headerDone = (state->skip == 0);
	}
	if (!state->binary)
	{
		WriteCopyOutput(output, p, length);
		return;
	}
	WriteCopyOutput(output, state->held, state->heldLength);
	if (length >= 2)
	{
		WriteCopyOutput(output, p, length - 2);
		memcpy(state->held, p + length - 2, 2);
		state->heldLength = 2;
	}
	else
	{
		memcpy(state->held, p, length);
		state->heldLength = length;
	}
}
