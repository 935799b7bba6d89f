/*-------------------------------------------------------------------------
 *
 * tenant_stats.h
 *	  Per-tenant statement statistics (shardext.stat_tenants): the busiest
 *	  distribution column values of each colocation group, kept with the
 *	  Space-Saving top-K algorithm in a fixed amount of shared memory.
 *
 * The executor samples single-shard statements (TenantSampleBegin, when
 * the tasks are built) and counts the sampled ones when they finish
 * (TenantSampleEnd).  Statements that touch several shards are not
 * attributed to a tenant.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_TENANT_STATS_H
#define SHARDEXT_TENANT_STATS_H

#include "datatype/timestamp.h"
#include "shardext/metadata.h"

/* longest tenant value text kept, in bytes (longer ones are cut) */
#define TENANT_VALUE_LEN 64

/* what a sampled statement remembers until it finishes */
typedef struct TenantSample
{
	Oid			relid;			/* the statement's distributed table */
	int32		colocationId;
	int32		hash;			/* hash of the distribution value */
	bool		write;
	double		weight;			/* 1 / sample rate when sampled */
	TimestampTz start;
	Oid			type;			/* of the distribution column */
	Datum		value;			/* a copy, turned into text only when needed */
	bool		typeByValue;
	int16		typeLength;
} TenantSample;

extern Size TenantStatsShmemSize(void);
extern void TenantStatsShmemRequest(void);
extern void TenantStatsShmemInit(void);
extern bool TenantStatsSampleNext(void);
extern TenantSample *TenantSampleBegin(DistTableCacheEntry *entry, Datum value, bool write);
extern void TenantSampleEnd(TenantSample *sample);

#endif							/* SHARDEXT_TENANT_STATS_H */
