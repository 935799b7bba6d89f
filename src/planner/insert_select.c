/*-------------------------------------------------------------------------
 *
 * insert_select.c
 *	  INSERT ... SELECT into distributed and reference tables.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "parser/parsetree.h"
#include "utils/lsyscache.h"

#include "shardext/planner.h"

PlannedStmt *
PlanInsertSelect(Query *query, int cursorOptions, ParamListInfo boundParams)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("INSERT ... SELECT into distributed table \"%s\" is not supported yet",
					get_rel_name(rt_fetch(query->resultRelation, query->rtable)->relid)),
			 errhint("Use INSERT ... VALUES or COPY.")));
	return NULL;
}
