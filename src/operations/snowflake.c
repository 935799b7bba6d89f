/*-------------------------------------------------------------------------
 *
 * snowflake.c
 *	  Snowflake ids (placeholder until the generator lands).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shardext/shardext.h"

Size
SnowflakeShmemSize(void)
{
	return 0;
}

void
SnowflakeShmemInit(void)
{
}
