/*-------------------------------------------------------------------------
 *
 * repartition_plan.c
 *	  The RepartitionPlan of a distributed scan as a list of plain nodes,
 *	  so that it travels in custom_private (copyObject for plan caching,
 *	  outfuncs for debug output), and back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/value.h"

#include "shardext/repartition.h"

#define IntNode(x) ((Node *) makeInteger(x))
#define TextNode(x) ((Node *) makeString(pstrdup((x) != NULL ? (x) : "")))

static List *MovedUnitToList(MovedUnit *unit);
static MovedUnit *MovedUnitFromList(List *list);

List *
RepartitionPlanToList(RepartitionPlan *plan)
{
	List	   *units = NIL;
	ListCell   *cell;

	foreach(cell, plan->units)
		units = lappend(units, MovedUnitToList(lfirst(cell)));
	return list_make5(IntNode(plan->strategy), IntNode(plan->partitionCount),
					  IntNode(plan->layoutRelid), units, plan->notInFlags);
}

RepartitionPlan *
RepartitionPlanFromList(List *list)
{
	RepartitionPlan *plan = palloc0(sizeof(RepartitionPlan));
	ListCell   *cell;

	plan->strategy = intVal(linitial(list));
	plan->partitionCount = intVal(lsecond(list));
	plan->layoutRelid = (Oid) intVal(lthird(list));
	foreach(cell, (List *) lfourth(list))
		plan->units = lappend(plan->units, MovedUnitFromList(lfirst(cell)));
	plan->notInFlags = (List *) list_nth(list, 4);
	return plan;
}

static List *
MovedUnitToList(MovedUnit *unit)
{
	List	   *list = NIL;

	list = lappend(list, IntNode(unit->unitId));
	list = lappend(list, IntNode(unit->relid));
	list = lappend(list, unit->mapSqlParts);
	list = lappend(list, unit->mapRelations);
	list = lappend(list, IntNode(unit->mapParamCount));
	list = lappend(list, unit->mapParams);
	list = lappend(list, IntNode(unit->columnCount));
	list = lappend(list, unit->columnTypes);
	list = lappend(list, IntNode(unit->keyCount));
	list = lappend(list, IntNode(unit->layout));
	list = lappend(list, TextNode(psprintf("%.0f", unit->estimatedRows)));
	list = lappend(list, TextNode(unit->description));
	return list;
}

static MovedUnit *
MovedUnitFromList(List *list)
{
	MovedUnit  *unit = palloc0(sizeof(MovedUnit));
	int			i = 0;

	unit->unitId = intVal(list_nth(list, i++));
	unit->relid = (Oid) intVal(list_nth(list, i++));
	unit->mapSqlParts = list_nth(list, i++);
	unit->mapRelations = list_nth(list, i++);
	unit->mapParamCount = intVal(list_nth(list, i++));
	unit->mapParams = list_nth(list, i++);
	unit->columnCount = intVal(list_nth(list, i++));
	unit->columnTypes = list_nth(list, i++);
	unit->keyCount = intVal(list_nth(list, i++));
	unit->layout = intVal(list_nth(list, i++));
	unit->estimatedRows = strtod(strVal(list_nth(list, i++)), NULL);
	unit->description = strVal(list_nth(list, i++));
	return unit;
}
