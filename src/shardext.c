/*-------------------------------------------------------------------------
 *
 * shardext.c
 *	  Module entry point: refuses to load outside shared_preload_libraries,
 *	  defines the GUCs, installs the hooks and reserves shared memory.
 *
 * Nothing else lives here; each hook's body is in the module that owns it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "optimizer/planner.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "tcop/utility.h"

#include "shardext/shardext.h"
#include "shardext/connection.h"
#include "shardext/deadlock_detection.h"
#include "shardext/failover.h"
#include "shardext/guc.h"
#include "shardext/maintenance.h"
#include "shardext/distributed_plan.h"
#include "shardext/metadata.h"
#include "shardext/planner.h"
#include "shardext/read_your_writes.h"
#include "shardext/remote_xact.h"
#include "shardext/replica_state.h"
#include "shardext/repartition.h"
#include "shardext/shared_pool.h"
#include "shardext/tenant_stats.h"
#include "shardext/utility_hook.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void ShardextShmemRequest(void);
static void ShardextShmemStartup(void);

/*
 * _PG_init is called when the library is loaded.  shardext changes how the
 * server plans and executes queries and keeps state in shared memory, so it
 * only works when preloaded; anything else is a configuration error.
 */
void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shardext must be loaded via shared_preload_libraries"),
				 errhint("Add shardext to shared_preload_libraries in postgresql.conf "
						 "and restart the server.")));

	RegisterShardextGucs();

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = ShardextShmemRequest;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = ShardextShmemStartup;

	prev_planner_hook = planner_hook;
	planner_hook = ShardextPlannerHook;
	prev_set_rel_pathlist_hook = set_rel_pathlist_hook;
	set_rel_pathlist_hook = DistributedRelPathlist;

	prev_ProcessUtility_hook = ProcessUtility_hook;
	ProcessUtility_hook = ShardextProcessUtility;

	InitializeMetadataCache();
	InitializeConnections();
	/* first: its abort callback runs after those that cancel remote commands */
	InitializeRepartitionExchange();
	InitializeRemoteTransactions();
	InitializeDistributedDeadlockDetection();
	InitializeCommitDecisions();
	RegisterMaintenanceLauncher();
	InitializeDistributedExecutor();
	InitializeReadYourWrites();
}

/*
 * ShardextShmemRequest reserves the shared memory of every module.
 */
static void
ShardextShmemRequest(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();

	RequestAddinShmemSpace(SnowflakeShmemSize());
	RequestAddinShmemSpace(MaintenanceShmemSize());
	RequestAddinShmemSpace(DistributedDeadlockShmemSize());
	RequestAddinShmemSpace(NodeHealthShmemSize());
	ShardStatsShmemRequest();
	ReplicaStateShmemRequest();
	SharedPoolShmemRequest();
	TenantStatsShmemRequest();
	RepartitionShmemRequest();
}

/*
 * ShardextShmemStartup attaches to (or creates) each module's shared state.
 */
static void
ShardextShmemStartup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	SnowflakeShmemInit();
	MaintenanceShmemInit();
	DistributedDeadlockShmemInit();
	NodeHealthShmemInit();
	ShardStatsShmemInit();
	ReplicaStateShmemInit();
	SharedPoolShmemInit();
	TenantStatsShmemInit();
	RepartitionShmemInit();
}
