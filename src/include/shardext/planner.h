/*-------------------------------------------------------------------------
 *
 * planner.h
 *	  The planner hook and distributed planning.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_PLANNER_H
#define SHARDEXT_PLANNER_H

#include "optimizer/planner.h"

extern planner_hook_type prev_planner_hook;

extern PlannedStmt *ShardextPlanner(Query *parse, const char *queryString,
									int cursorOptions, ParamListInfo boundParams);
extern bool QueryReferencesDistributedTable(Node *node);

#endif							/* SHARDEXT_PLANNER_H */
