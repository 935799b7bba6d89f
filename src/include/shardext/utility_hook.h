/*-------------------------------------------------------------------------
 *
 * utility_hook.h
 *	  The ProcessUtility hook: DDL and COPY on distributed tables.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_UTILITY_HOOK_H
#define SHARDEXT_UTILITY_HOOK_H

#include "tcop/utility.h"

extern ProcessUtility_hook_type prev_ProcessUtility_hook;

extern void ShardextProcessUtility(PlannedStmt *pstmt, const char *queryString,
								   bool readOnlyTree, ProcessUtilityContext context,
								   ParamListInfo params, QueryEnvironment *queryEnv,
								   DestReceiver *dest, QueryCompletion *qc);

#endif							/* SHARDEXT_UTILITY_HOOK_H */
