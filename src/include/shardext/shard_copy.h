/*-------------------------------------------------------------------------
 *
 * shard_copy.h
 *	  Streaming rows into the shards of a table over COPY.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_SHARD_COPY_H
#define SHARDEXT_SHARD_COPY_H

#include "commands/copy.h"
#include "executor/tuptable.h"
#include "lib/stringinfo.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "tcop/cmdtag.h"
#include "shardext/metadata.h"

typedef struct ShardCopyState ShardCopyState;

extern ShardCopyState *BeginShardCopy(Oid relid, int connectionsPerNode,
									  const char *columnList, const char *copyOptions);
extern ShardInterval *ShardCopyShardForValue(ShardCopyState *state, Datum value,
											 bool isnull);
extern void ShardCopySendSlot(ShardCopyState *state, TupleTableSlot *slot, uint64 line);
extern void ShardCopySendLine(ShardCopyState *state, ShardInterval *shard,
							  const char *line, int length, uint64 lineNumber);
extern uint64 EndShardCopy(ShardCopyState *state);
extern void ShardCopyFreeze(ShardCopyState *state);
extern void AppendCopyTextValue(StringInfo buf, const char *value);

/* copy_split.c */
typedef struct CopySplitter CopySplitter;
typedef enum CopySplitResult
{
	COPY_SPLIT_LINE,
	COPY_SPLIT_END,
	COPY_SPLIT_HANDED_OVER
} CopySplitResult;

extern bool CopySplitterUsable(CopyFromState cstate);
extern CopySplitter *BeginCopySplit(CopyFromState cstate, int distField);
extern CopySplitResult CopySplitNext(CopySplitter *splitter, const char **line,
									 int *length, char **value);
extern void ReportMissingCopyColumn(CopyFromState cstate, int field);
extern void EndCopySplit(CopySplitter *splitter);

/* copy_commands.c */
extern bool ShardextCopy(CopyStmt *stmt, PlannedStmt *pstmt, const char *queryString,
						 QueryCompletion *qc);

#endif							/* SHARDEXT_SHARD_COPY_H */
