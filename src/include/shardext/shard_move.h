/*-------------------------------------------------------------------------
 *
 * shard_move.h
 *	  Online shard moves and splits, their records and cleanup, and the
 *	  rebalancer built on them.
 *
 * A move (or split) works on a shard group: the shards of every table of a
 * colocation group that cover one hash range.  It runs over dedicated
 * connections that commit on their own: one to the source node, one to the
 * target, and a loopback connection to the coordinator's own database that
 * writes the records (shardext.move, shardext.cleanup_record) and, at the
 * end, holds the cutover locks and switches the catalog.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_SHARD_MOVE_H
#define SHARDEXT_SHARD_MOVE_H

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"
#include "shardext/connection.h"
#include "shardext/metadata.h"

typedef enum MoveOperation
{
	MOVE_OPERATION_MOVE,
	MOVE_OPERATION_SPLIT
} MoveOperation;

typedef enum MoveMode
{
	MOVE_MODE_ONLINE,
	MOVE_MODE_BLOCK_WRITES
} MoveMode;

/* one shard of the group being moved or split */
typedef struct MoveShard
{
	Oid			relid;
	int64		shardId;
	char	   *shardName;		/* quoted, qualified */
	char	   *columnList;		/* "(a, b)", quoted */
	char	   *distColumn;		/* quoted name of the distribution column */
	char	   *distColumnName; /* the same, not quoted */
	char		sourceIdentity; /* relreplident of the shard on the source */
	char		coordinatorIdentity;	/* relreplident of the distributed table */
	bool		needsFullIdentity;	/* no key for logical replication */
	/* splits: the new shards, one per piece, in hash order */
	int64		childIds[MAX_SPLIT_PIECES];
	char	   *childNames[MAX_SPLIT_PIECES];
} MoveShard;

/* everything a running move or split knows */
typedef struct ShardMoveState
{
	int64		moveId;
	int64		jobId;
	MoveOperation operation;
	MoveMode	mode;
	List	   *shards;			/* MoveShard *, in shard id order */
	WorkerNode	source;
	WorkerNode	target;
	int32		hashMin;
	int32		hashMax;
	int32		splitPoint;		/* splits: last hash value of the first piece */
	SplitPieces pieces;			/* splits: the new ranges */
	bool		inPlace;		/* splits onto the source node */
	char	   *objectName;		/* slot, publication and subscription */
	char	   *description;	/* for messages: "shard orders_102008 ..." */
	char	   *pluginLibraries;	/* splits: output_plugin_libraries to set, or NULL */
	int			markerSeq;
	int64		totalBytes;
	int64		rowsCopied;
	int64		bytesCopied;
	TimestampTz lastProgress;
	bool		flipped;		/* the catalog points at the target */

	/* dedicated connections, NULL when not open */
	NodeConnection *local;		/* loopback: records, autocommit */
	NodeConnection *lockConn;	/* loopback: holds the cutover locks, switches */
	NodeConnection *sourceConn;
	NodeConnection *targetConn;
	NodeConnection *sourceSnapshot; /* verification snapshots */
	NodeConnection *targetSnapshot;
	NodeConnection *replication;	/* creates the slot, exports its snapshot */
	MemoryContext context;
} ShardMoveState;

/* shard_move.c */
extern ShardMoveState *PrepareShardMove(int64 shardId, int32 targetNodeId, MoveMode mode,
										MoveOperation operation, int64 jobId, int64 moveId);
extern void ExecuteShardMove(ShardMoveState *state);
extern ShardMoveState *RunSingleShardMove(const char *function, int64 shardId,
										  int32 targetNodeId, MoveMode mode,
										  MoveOperation operation,
										  const SplitPieces *pieces);
extern void CheckTargetNodeIdArgument(int32 targetNodeId);
extern WorkerNode *CheckPlacementTarget(int32 nodeId);
extern MoveMode ParseMoveMode(const char *mode);
extern bool MoveWasCommitted(int64 moveId);
extern void EnsureOutsideTransactionBlock(const char *function);

/* move_steps.c: the remote work of a move, up to replication */
extern void MoveSetUpSource(ShardMoveState *state);
extern void MoveSetUpTarget(ShardMoveState *state);
extern void MoveCopyData(ShardMoveState *state, bool useSlotSnapshot);
extern void MoveBuildIndexes(ShardMoveState *state);
extern void MoveStartReplication(ShardMoveState *state);
extern void SplitHalfRange(ShardMoveState *state, int half, int32 *lo, int32 *hi);
extern char *BareColumnList(MoveShard *shard);

/* move_cutover.c: catching up, verification, the switch */
extern void MoveWaitForLag(ShardMoveState *state);
extern void MoveVerify(ShardMoveState *state, bool writesBlocked);
extern void MoveCutover(ShardMoveState *state);
extern void MoveBlockingCopyAndCutover(ShardMoveState *state);

/* move_records.c: records over the loopback connection, cleanup */
extern int64 InsertMoveRecord(NodeConnection *local, ShardMoveState *state, const char *status);
extern void SetMoveStatus(ShardMoveState *state, const char *status, const char *error);
extern void SetMovePhase(ShardMoveState *state, const char *phase);
#ifdef SHARDEXT_TEST_HOOKS
extern void MoveTestPause(ShardMoveState *state, const char *point);
#else
#define MoveTestPause(state, point) ((void) 0)
#endif
extern void ReportMoveProgress(ShardMoveState *state, bool force, int64 lagBytes);
extern void AddCleanupRecord(ShardMoveState *state, int32 nodeId, const char *objectType,
							 const char *objectName, int64 shardId, const char *restore,
							 const char *policy);
extern void MarkDeferredDropsNow(ShardMoveState *state);
extern int	RunCleanup(NodeConnection *local, int64 onlyMoveId, bool includeOnFailure,
					   bool includeDeferred, int64 currentJobId, bool quiet);
extern void CancelPendingMoves(NodeConnection *local, int64 jobId);
extern void WaitForOlderTransactions(NodeConnection *local, int64 moveId, int timeoutMs);
extern char *LocalCoordinatorQuery(NodeConnection *local, const char *query);
extern void MaintainShardMoves(void);


#endif							/* SHARDEXT_SHARD_MOVE_H */
