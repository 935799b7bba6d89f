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

/*
 * The extension version this library implements: default_version of
 * shardext.control.  The library refuses to work with distributed tables
 * while the installed extension has another version (see
 * EnsureCatalogVersionMatches); SHOW shardext.version shows it.
 */
#define SHARDEXT_LIBRARY_VERSION "1.2"

/* the shared memory pieces of each module (shardext.c sums and initialises them) */
extern Size SnowflakeShmemSize(void);
extern void SnowflakeShmemInit(void);

#endif							/* SHARDEXT_H */
