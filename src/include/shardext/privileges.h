/*-------------------------------------------------------------------------
 *
 * privileges.h
 *	  Preconditions of shardext's administrative SQL functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_PRIVILEGES_H
#define SHARDEXT_PRIVILEGES_H

extern void EnsureCalledBySuperuser(const char *function);
extern void EnsureShardextInstalled(void);
extern void EnsureSuperuserAndShardext(const char *function);

#endif							/* SHARDEXT_PRIVILEGES_H */
