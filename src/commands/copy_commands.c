#include "postgres.h"
#include "shardext/shard_copy.h"
bool
ShardextCopy(CopyStmt *stmt, PlannedStmt *pstmt, const char *queryString,
			 QueryCompletion *qc)
{
	return false;
}
