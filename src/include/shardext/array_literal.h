/*-------------------------------------------------------------------------
 *
 * array_literal.h
 *	  Array values for SQL sent to nodes, made by the server's own array
 *	  code rather than by hand.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_ARRAY_LITERAL_H
#define SHARDEXT_ARRAY_LITERAL_H

#include "nodes/pg_list.h"

extern char *TextArrayLiteral(List *strings);
extern char *Int64ArrayLiteral(const int64 *values, int count);

#endif							/* SHARDEXT_ARRAY_LITERAL_H */
