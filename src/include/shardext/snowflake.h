/*-------------------------------------------------------------------------
 *
 * snowflake.h
 *	  Snowflake ids: layout constants and the calls other modules make.
 *
 * An id is a positive bigint:
 *
 *	  0 | 41 bits: ms since 2024-01-01 00:00 UTC | 10 bits: node | 12 bits: sequence
 *
 * (SnowflakeShmemSize and SnowflakeShmemInit are declared in shardext.h.)
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_SNOWFLAKE_H
#define SHARDEXT_SNOWFLAKE_H

#define SNOWFLAKE_SEQUENCE_BITS 12
#define SNOWFLAKE_NODE_BITS 10
#define SNOWFLAKE_TIME_BITS 41

#define SNOWFLAKE_MAX_SEQUENCE ((1 << SNOWFLAKE_SEQUENCE_BITS) - 1)
#define SNOWFLAKE_MAX_NODE_ID ((1 << SNOWFLAKE_NODE_BITS) - 1)
#define SNOWFLAKE_MAX_MS ((INT64CONST(1) << SNOWFLAKE_TIME_BITS) - 1)

/* shardext.node_id: -1 means "take the node id from registration, else 0" */
#define SNOWFLAKE_NODE_ID_AUTOMATIC (-1)

/* the next id of this server; errors out rather than ever repeat one */
extern int64 SnowflakeNextId(void);

/* node id stamped into the ids of this server right now */
extern int32 SnowflakeCurrentNodeId(void);

/* record (in shared memory and on disk) the node id a coordinator gave us */
extern void SnowflakeSetRegisteredNodeId(int32 nodeId);

#endif							/* SHARDEXT_SNOWFLAKE_H */
