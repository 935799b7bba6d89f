/*-------------------------------------------------------------------------
 *
 * array_literal.c
 *	  The text form of text[] and int8[] values, for parameters of SQL sent
 *	  to nodes.
 *
 * Names can hold quotes, commas, braces, backslashes and spaces, which the
 * array input syntax gives meanings of its own; an array literal pasted
 * together from names breaks on them ("malformed array literal") or worse.
 * These functions build the array with construct_array() and let array_out()
 * write it, so that the node's array_in() reads back exactly the elements.
 * The result is a parameter value; to embed it in SQL text, quote it with
 * quote_literal_cstr() like any other literal.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

#include "shardext/array_literal.h"

/* TextArrayLiteral: the text form of a text[] of the C strings of a List */
char *
TextArrayLiteral(List *strings)
{
	int			count = list_length(strings);
	Datum	   *elements = palloc(sizeof(Datum) * Max(count, 1));
	ListCell   *cell;
	ArrayType  *array;

	foreach(cell, strings)
		elements[foreach_current_index(cell)] = CStringGetTextDatum((char *) lfirst(cell));
	array = construct_array(elements, count, TEXTOID, -1, false, TYPALIGN_INT);
	return OidOutputFunctionCall(F_ARRAY_OUT, PointerGetDatum(array));
}

/* Int64ArrayLiteral: the text form of an int8[] */
char *
Int64ArrayLiteral(const int64 *values, int count)
{
	Datum	   *elements = palloc(sizeof(Datum) * Max(count, 1));
	ArrayType  *array;

	for (int i = 0; i < count; i++)
		elements[i] = Int64GetDatum(values[i]);
	array = construct_array(elements, count, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
							TYPALIGN_DOUBLE);
	return OidOutputFunctionCall(F_ARRAY_OUT, PointerGetDatum(array));
}
