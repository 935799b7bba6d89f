/*-------------------------------------------------------------------------
 *
 * shardext.h
 *	  Declarations shared by every part of shardext.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_H
#define SHARDEXT_H

#define SHARDEXT_EXTENSION_NAME "shardext"
#define SHARDEXT_SCHEMA_NAME "shardext"

/* the shared memory pieces of each module (shardext.c sums and initialises them) */
extern Size SnowflakeShmemSize(void);
extern void SnowflakeShmemInit(void);

#endif							/* SHARDEXT_H */
