/*-------------------------------------------------------------------------
 *
 * guc.c
 *	  Every configuration variable of shardext, defined in one place.
 *
 * Modules read the C variables declared in shardext/guc.h; nothing else
 * calls DefineCustom*Variable.  The variables are defined in groups, one
 * function per area.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "utils/guc.h"

#include "shardext/connection.h"
#include "shardext/fencing.h"
#include "shardext/guc.h"
#include "shardext/read_your_writes.h"
#include "shardext/shardext.h"
#include "shardext/snowflake.h"

int			ShardextShardCount = 32;
int			ShardextConnectTimeout = 5000;
int			ShardextMaxConnectionsPerNode = 4;
int			ShardextMaxSharedPoolSize = 0;
int			ShardextConnectionWaitTimeout = 30000;
int			ShardextMaxCachedConnectionsPerNode = 1;
int			ShardextConnectionLifetime = 600000;
int			ShardextConnectionShareInterval = 10000;
int			ShardextExecutorSlowStartInterval = 10;
char	   *ShardextNodeConninfo = NULL;
bool		ShardextEnableDDLPropagation = true;
bool		ShardextExplainAllTasks = false;
bool		ShardextEnablePushdown = true;
bool		ShardextEnableRepartitionJoins = true;
int			ShardextRepartitionJoinMinRows = 10000;
int			ShardextBroadcastJoinMaxRows = 100000;
int			ShardextRepartitionJoinPartitions = 0;
int			ShardextMaxIntermediateResultSize = 1024 * 1024;
int			ShardextMultiNodeCommit = MULTI_NODE_COMMIT_2PC;
bool		ShardextLastParticipantCommit = true;
int			ShardextRecoveryInterval = 10000;
int			ShardextDistributedDeadlockTimeout = 1000;
int			ShardextSagaMaxRetries = 10;
int			ShardextSagaRetention = 7 * 24 * 3600;
int			ShardextMoveMaxLag = 1024;
int			ShardextMoveLockTimeout = 1000;
int			ShardextMoveCutoverTimeout = 10000;
int			ShardextMoveCatchUpTimeout = 3600 * 1000;
int			ShardextMoveDropTimeout = 10000;
int			ShardextMinFreeDiskSpace = 100;
bool		ShardextMoveVerify = true;
char	   *ShardextSplitMap = NULL;
int			ShardextNodeId = SNOWFLAKE_NODE_ID_AUTOMATIC;
int			ShardextSnowflakeMaxClockSkew = 100;
bool		ShardextReplicaReads = false;
int			ShardextMaxReplicaLag = 5000;
int			ShardextReadYourWrites = READ_YOUR_WRITES_LSN;
int			ShardextPinWindow = 5000;
char	   *ShardextReadAfter = NULL;
int			ShardextReplicaWaitTimeout = 20;
int			ShardextReplicaPollInterval = 100;
int			ShardextReplicaConnectTimeout = 1000;
char	   *ShardextCommitLsn = NULL;
char	   *ShardextServerIdentity = NULL;
bool		ShardextAutoFailover = false;
int			ShardextHealthCheckInterval = 1000;
int			ShardextFailoverTimeout = 10000;
int			ShardextFailoverMaxLag = 0;
int			ShardextRestorePointInterval = 0;

#ifdef SHARDEXT_TEST_HOOKS
int			ShardextTestFault = TEST_FAULT_NONE;
int			ShardextSagaTestFault = TEST_SAGA_NONE;
int			ShardextSagaTestFaultStep = 0;
char	   *ShardextMoveTestPausePhase = NULL;
int			ShardextMoveTestPauseMs = 60000;
int			ShardextSnowflakeClockOffset = 0;
char	   *ShardextTestPausePoints = NULL;
#endif

int			ShardextStatTenantsLimit = 1000;
int			ShardextStatTenantsPeriod = 60;
double		ShardextStatTenantsSampleRate = 0.1;
bool		ShardextRebalanceIsolatedTenants = false;

static const struct config_enum_entry multi_node_commit_options[] = {
	{"2pc", MULTI_NODE_COMMIT_2PC, false},
	{"reject", MULTI_NODE_COMMIT_REJECT, false},
	{NULL, 0, false}
};

static const struct config_enum_entry read_your_writes_options[] = {
	{"lsn", READ_YOUR_WRITES_LSN, false},
	{"time", READ_YOUR_WRITES_TIME, false},
	{"off", READ_YOUR_WRITES_OFF, false},
	{NULL, 0, false}
};

#ifdef SHARDEXT_TEST_HOOKS
static const struct config_enum_entry test_fault_options[] = {
	{"none", TEST_FAULT_NONE, false},
	{"crash_after_prepare", TEST_FAULT_CRASH_AFTER_PREPARE, false},
	{"crash_after_local_commit", TEST_FAULT_CRASH_AFTER_LOCAL_COMMIT, false},
	{"lose_decider_answer", TEST_FAULT_LOSE_DECIDER_ANSWER, false},
	{"exit_after_decision", TEST_FAULT_EXIT_AFTER_DECISION, false},
	{NULL, 0, false}
};

static const struct config_enum_entry saga_test_fault_options[] = {
	{"none", TEST_SAGA_NONE, false},
	{"crash_before_step", TEST_SAGA_CRASH_BEFORE_STEP, false},
	{"crash_after_step", TEST_SAGA_CRASH_AFTER_STEP, false},
	{"crash_before_compensation", TEST_SAGA_CRASH_BEFORE_COMPENSATION, false},
	{"crash_after_compensation", TEST_SAGA_CRASH_AFTER_COMPENSATION, false},
	{"lose_step_answer", TEST_SAGA_LOSE_STEP_ANSWER, false},
	{NULL, 0, false}
};
#endif

static void RegisterConnectionGucs(void);
static void RegisterTableGucs(void);
static void RegisterPlannerGucs(void);
static void RegisterTransactionGucs(void);
static void RegisterSagaGucs(void);
static void RegisterMoveGucs(void);
static void RegisterSnowflakeGucs(void);
static void RegisterReplicaGucs(void);
static void RegisterFailoverGucs(void);
static void RegisterVersionGuc(void);
static void RegisterTenantGucs(void);
#ifdef SHARDEXT_TEST_HOOKS
static void RegisterTestGucs(void);
#endif

/*
 * RegisterShardextGucs defines all shardext.* variables and reserves the
 * prefix so that a misspelt setting is reported instead of ignored.
 */
void
RegisterShardextGucs(void)
{
	RegisterConnectionGucs();
	RegisterTableGucs();
	RegisterPlannerGucs();
	RegisterTransactionGucs();
	RegisterSagaGucs();
	RegisterMoveGucs();
	RegisterSnowflakeGucs();
	RegisterReplicaGucs();
	RegisterFailoverGucs();
	RegisterVersionGuc();
	RegisterTenantGucs();
#ifdef SHARDEXT_TEST_HOOKS
	RegisterTestGucs();
#endif
	MarkGUCPrefixReserved("shardext");
}

/* the settings of the connections to the nodes */
static void
RegisterConnectionGucs(void)
{
	DefineCustomIntVariable("shardext.connect_timeout",
							"Time to wait for a connection to a node before giving up.",
							NULL,
							&ShardextConnectTimeout,
							5000, 1000, 3600 * 1000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.max_connections_per_node",
							"Maximum number of connections one session opens to one node.",
							"Multi-shard statements start with one connection per node and "
							"open more, up to this many, while tasks wait and the node's "
							"shared pool has room.",
							&ShardextMaxConnectionsPerNode,
							4, 1, 64,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.max_shared_pool_size",
							"Maximum number of connections to one node from all sessions "
							"of this coordinator.",
							"0 derives it from the node: 90% of its max_connections less "
							"superuser_reserved_connections; -1 means no limit. A session "
							"that needs its first connection to a node waits for a free one.",
							&ShardextMaxSharedPoolSize,
							0, -1, 100000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.connection_wait_timeout",
							"Time a session waits for a free connection to a node before "
							"it gives up.",
							NULL,
							&ShardextConnectionWaitTimeout,
							30000, 0, 3600 * 1000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.max_cached_connections_per_node",
							"Maximum number of connections to one node a session keeps "
							"open between transactions.",
							NULL,
							&ShardextMaxCachedConnectionsPerNode,
							1, 0, 64,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.connection_lifetime",
							"Connections to nodes older than this are closed at the end "
							"of a transaction.",
							"0 keeps them for the whole session.",
							&ShardextConnectionLifetime,
							600000, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.connection_share_interval",
							"When sessions wait for a connection to a node, a session that "
							"has held one this long gives it back at the end of its "
							"transaction.",
							NULL,
							&ShardextConnectionShareInterval,
							10000, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.executor_slow_start_interval",
							"Time a multi-shard statement waits with tasks queued for a "
							"node before it opens another connection to it.",
							NULL,
							&ShardextExecutorSlowStartInterval,
							10, 0, 60000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomStringVariable("shardext.node_conninfo",
							   "Extra libpq connection options used for connections to nodes.",
							   "For example \"sslmode=require\". Only security and network "
							   "options are accepted; passwords belong in a password file.",
							   &ShardextNodeConninfo,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   CheckNodeConninfo, AssignNodeConninfo, NULL);
}

/* the settings of distributed tables and their DDL */
static void
RegisterTableGucs(void)
{
	DefineCustomIntVariable("shardext.shard_count",
							"Number of shards create_distributed_table() creates when shard_count is not given.",
							NULL,
							&ShardextShardCount,
							32, 1, 64000,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("shardext.enable_ddl_propagation",
							 "Apply DDL on distributed tables to their shards.",
							 NULL,
							 &ShardextEnableDDLPropagation,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}

/* the settings of planning and EXPLAIN */
static void
RegisterPlannerGucs(void)
{
	DefineCustomBoolVariable("shardext.explain_all_tasks",
							 "EXPLAIN shows every task of a distributed query, not only one.",
							 NULL,
							 &ShardextExplainAllTasks,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("shardext.enable_pushdown",
							 "Push joins, aggregates, sorting and limits down to the shards.",
							 "When off, every query on distributed tables pulls the rows it "
							 "needs to the coordinator (for testing).",
							 &ShardextEnablePushdown,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("shardext.enable_repartition_joins",
							 "Join distributed tables that are not co-located on the join key "
							 "on the workers, moving rows between them.",
							 "When off, such joins pull the rows to the coordinator.",
							 &ShardextEnableRepartitionJoins,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.repartition_join_min_rows",
							"Joins whose distributed tables together are estimated to "
							"return fewer rows are done on the coordinator.",
							"Below this, pulling the rows costs less than moving them "
							"between workers; 0 moves even the smallest inputs.",
							&ShardextRepartitionJoinMinRows,
							10000, 0, INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.broadcast_join_max_rows",
							"The most rows (estimated) a side of a join may have to be "
							"copied to every node instead of repartitioned.",
							"Broadcasting is chosen only where it moves fewer rows; 0 never "
							"broadcasts.",
							&ShardextBroadcastJoinMaxRows,
							100000, 0, INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.repartition_join_partitions",
							"The number of partitions of a dual repartition join.",
							"0 chooses from the tables' shard counts and estimated size.",
							&ShardextRepartitionJoinPartitions,
							0, 0, 4096,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.max_intermediate_result_size",
							"The most data a repartition join may write to move rows "
							"between workers.",
							"A query that would write more fails; -1 means no limit.",
							&ShardextMaxIntermediateResultSize,
							1024 * 1024, -1, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
}

/* the settings of distributed transactions, their recovery and deadlock detection */
static void
RegisterTransactionGucs(void)
{
	DefineCustomEnumVariable("shardext.multi_node_commit",
							 "How a transaction that wrote on several nodes commits.",
							 "'2pc' commits it with two-phase commit; 'reject' makes a "
							 "transaction fail as soon as it would write on a second node.",
							 &ShardextMultiNodeCommit,
							 MULTI_NODE_COMMIT_2PC,
							 multi_node_commit_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("shardext.last_participant_commit",
							 "Commits one node of a multi-node write in one phase, as the last "
							 "participant.",
							 "The other nodes prepare, then that node commits together with the "
							 "transaction's commit decision, which recovery reads there; this "
							 "saves a prepared transaction and the coordinator's commit record. "
							 "Transactions that also wrote on the coordinator use the full "
							 "two-phase commit in any case.",
							 &ShardextLastParticipantCommit,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.recovery_interval",
							"Time between two runs of prepared transaction recovery by the "
							"maintenance daemon.",
							"-1 disables the periodic recovery; it still runs once when the "
							"daemon starts.",
							&ShardextRecoveryInterval,
							10000, -1, 24 * 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.distributed_deadlock_timeout",
							"Time between two searches for distributed deadlocks by the "
							"maintenance daemon.",
							"A deadlock between transactions that wait for each other on "
							"different nodes is resolved within about this time by "
							"canceling the youngest transaction. -1 disables the search.",
							&ShardextDistributedDeadlockTimeout,
							1000, -1, 24 * 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
}

/* the settings of sagas (operations/saga_runner.c) */
static void
RegisterSagaGucs(void)
{
	DefineCustomIntVariable("shardext.saga_max_retries",
							"How often a saga step or compensation is tried again after a "
							"transient error.",
							"Transient errors are lost connections, serialization failures, "
							"deadlocks and the like; attempts are spaced by a growing delay. A "
							"step that keeps failing is compensated; a compensation that keeps "
							"failing leaves its saga failed, needing attention.",
							&ShardextSagaMaxRetries,
							10, 0, 1000,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.saga_retention",
							"How long the maintenance daemon keeps sagas that ended "
							"(completed, compensated or abandoned).",
							"-1 keeps them. Failed sagas are kept until retried or abandoned.",
							&ShardextSagaRetention,
							7 * 24 * 3600, -1, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
}

/* the settings of shard moves and splits */
static void
RegisterMoveGucs(void)
{
	DefineCustomIntVariable("shardext.move_max_lag",
							"Replication lag below which an online shard move goes on to "
							"verification and cutover.",
							NULL,
							&ShardextMoveMaxLag,
							1024, 16, INT_MAX / 1024,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.move_lock_timeout",
							"Time a shard move waits for writes in flight before it pauses "
							"writes; on timeout it lets queued writes run and tries again.",
							NULL,
							&ShardextMoveLockTimeout,
							1000, 1, 3600 * 1000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.move_cutover_timeout",
							"Longest time writes stay paused while the target of an online "
							"shard move catches up; past it the move fails and the source "
							"stays authoritative.",
							NULL,
							&ShardextMoveCutoverTimeout,
							10000, 10, 3600 * 1000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.move_catchup_timeout",
							"Longest time the target of an online shard move or split may "
							"take to catch up with the writes to the source before writes "
							"pause; past it the move fails and the source stays "
							"authoritative.",
							NULL,
							&ShardextMoveCatchUpTimeout,
							3600 * 1000, 100, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.move_drop_timeout",
							"Time a finished shard move waits for older transactions before "
							"it leaves the drop of the source to shardext_cleanup().",
							NULL,
							&ShardextMoveDropTimeout,
							10000, 0, 3600 * 1000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.min_free_disk_space",
							"Free disk space a shard move leaves on its target node, beyond "
							"the size of the shards it copies there.",
							NULL,
							&ShardextMinFreeDiskSpace,
							100, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("shardext.move_verify",
							 "Compare row counts and checksums of source and target before "
							 "a shard move switches to the target.",
							 NULL,
							 &ShardextMoveVerify,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("shardext.split_map",
							   "Internal: the shard halves a split's replication connection "
							   "sends changes to.",
							   NULL,
							   &ShardextSplitMap,
							   "",
							   PGC_SUSET,
							   GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE,
							   NULL, NULL, NULL);
}

/* the settings of snowflake ids */
static void
RegisterSnowflakeGucs(void)
{
	DefineCustomIntVariable("shardext.node_id",
							"Node id that snowflake_id() puts into the ids of this server.",
							"-1 (the default) takes the node id the coordinator assigned when it "
							"registered this server as a worker, or 0 on a coordinator. Every "
							"node of a cluster needs a different node id.",
							&ShardextNodeId,
							SNOWFLAKE_NODE_ID_AUTOMATIC, SNOWFLAKE_NODE_ID_AUTOMATIC,
							SNOWFLAKE_MAX_NODE_ID,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.snowflake_max_clock_skew",
							"How far the system clock may step back before snowflake_id() fails.",
							"Within this bound ids continue from the last one issued; beyond "
							"it snowflake_id() raises an error rather than risk a duplicate.",
							&ShardextSnowflakeMaxClockSkew,
							100, 0, 3600 * 1000,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
}

/* the settings of read replicas: routing of reads, read-your-writes */
static void
RegisterReplicaGucs(void)
{
	DefineCustomBoolVariable("shardext.replica_reads",
							 "Run statements that only read on read replicas of the nodes.",
							 "A replica is used only when it is healthy, its data is at most "
							 "shardext.max_replica_lag old and it has what "
							 "shardext.read_your_writes and shardext.read_after require; "
							 "otherwise the read runs on the primary.",
							 &ShardextReplicaReads,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.max_replica_lag",
							"How old the data of a replica may be for reads to use it.",
							NULL,
							&ShardextMaxReplicaLag,
							5000, 0, 3600 * 1000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("shardext.read_your_writes",
							 "How a session is kept from reading older data than it wrote.",
							 "'lsn': a replica is used only once it replayed the session's "
							 "commits on its node; 'time': a node the session wrote is read "
							 "on its primary for shardext.pin_window; 'off': no guarantee.",
							 &ShardextReadYourWrites,
							 READ_YOUR_WRITES_LSN,
							 read_your_writes_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.pin_window",
							"With read_your_writes = 'time': how long a node the session "
							"wrote is read on its primary.",
							NULL,
							&ShardextPinWindow,
							5000, 0, 3600 * 1000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomStringVariable("shardext.read_after",
							   "A causal token (from shardext_causal_token()) whose writes "
							   "this session's reads must see.",
							   NULL,
							   &ShardextReadAfter,
							   "",
							   PGC_USERSET,
							   0,
							   CheckReadAfterToken, AssignReadAfterToken, NULL);

	DefineCustomIntVariable("shardext.replica_wait_timeout",
							"How long a replica that streams without delay may take to "
							"replay a session's last commit before the read runs on the "
							"primary instead.",
							"0 sends such reads to the primary at once.",
							&ShardextReplicaWaitTimeout,
							20, 0, 60 * 1000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.replica_poll_interval",
							"Time between two polls of the replicas' replay positions by "
							"the maintenance daemon.",
							NULL,
							&ShardextReplicaPollInterval,
							100, 10, 60 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	/* set by a node at commit, reported to the coordinator: read_your_writes.c */
	DefineCustomStringVariable("shardext.commit_lsn",
							   "The end of this session's last commit that wrote WAL (for "
							   "coordinators, which read it from the connection).",
							   NULL,
							   &ShardextCommitLsn,
							   "",
							   PGC_INTERNAL,
							   GUC_REPORT | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE |
							   GUC_DISALLOW_IN_FILE,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.replica_connect_timeout",
							"Time to wait for a connection to a replica before reading on "
							"the primary instead.",
							NULL,
							&ShardextReplicaConnectTimeout,
							1000, 10, 3600 * 1000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
}

/*
 * the settings of automatic failover, fencing and restore points (see
 * node_health.c, failover.c, fencing.c and restore_point.c)
 */
static void
RegisterFailoverGucs(void)
{
	DefineCustomBoolVariable("shardext.auto_failover",
							 "Promotes a replica of a worker that has been unreachable for "
							 "shardext.failover_timeout.",
							 "Only a replica that has every commit the worker acknowledged (a "
							 "synchronous one) or lagged at most shardext.failover_max_lag is "
							 "promoted; otherwise the maintenance daemon logs why it waits.",
							 &ShardextAutoFailover,
							 false,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.health_check_interval",
							"Time between two probes of every worker by the maintenance "
							"daemon; each probe waits this long at most.",
							"0 disables the probes (and automatic failover).",
							&ShardextHealthCheckInterval,
							1000, 0, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.failover_timeout",
							"How long a worker must have been unreachable before automatic "
							"failover promotes one of its replicas.",
							"Unreachable: its address refuses TCP connections or does not "
							"complete one within the probe's time.  A worker that completes "
							"the TCP connection but answers slowly or not at all is never "
							"failed over automatically.",
							&ShardextFailoverTimeout,
							10000, 1000, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.failover_max_lag",
							"How far behind an asynchronous replica may have been for "
							"automatic failover to promote it.",
							"0 promotes only replicas that were synchronous standbys of the "
							"worker, which lose no acknowledged commit.",
							&ShardextFailoverMaxLag,
							0, 0, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.restore_point_interval",
							"Time between two cluster-wide restore points created by the "
							"maintenance daemon.",
							"0 disables them; shardext_create_restore_point() creates one "
							"at any time.",
							&ShardextRestorePointInterval,
							0, 0, 7 * 24 * 3600,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	/* on every node: which server this is, reported to each new connection */
	DefineCustomStringVariable("shardext.server_identity",
							   "System identifier and timeline of this server, "
							   "<system identifier>/<timeline> (for coordinators, which check "
							   "it on every new connection to a node).",
							   NULL,
							   &ShardextServerIdentity,
							   "",
							   PGC_INTERNAL,
							   GUC_REPORT | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE |
							   GUC_DISALLOW_IN_FILE,
							   NULL, NULL, ShowServerIdentity);
}

/*
 * RegisterVersionGuc defines shardext.version, the read-only version of the
 * loaded library (as server_version is the server's), which nodes compare
 * with the installed extension's version and with each other's.
 */
static void
RegisterVersionGuc(void)
{
	static char *libraryVersion = NULL;

	DefineCustomStringVariable("shardext.version",
							   "Shows the version of the loaded shardext library.",
							   NULL,
							   &libraryVersion,
							   SHARDEXT_LIBRARY_VERSION,
							   PGC_INTERNAL,
							   GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE,
							   NULL, NULL, NULL);
}

/* the settings of tenant statistics and of load-aware rebalancing */
static void
RegisterTenantGucs(void)
{
	DefineCustomIntVariable("shardext.stat_tenants_limit",
							"Number of tenants shardext.stat_tenants tracks (K of its top-K).",
							"The counters take a fixed amount of shared memory for this many "
							"tenants; 0 turns tenant statistics off.",
							&ShardextStatTenantsLimit,
							1000, 0, 1000000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.stat_tenants_period",
							"Length of a period of shardext.stat_tenants.",
							"The view shows the counts of the current period and of the "
							"previous one.",
							&ShardextStatTenantsPeriod,
							60, 1, 7 * 24 * 3600,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomRealVariable("shardext.stat_tenants_sample_rate",
							 "Fraction of single-shard statements counted in shardext.stat_tenants.",
							 "Each sampled statement counts as 1 / rate statements; 0 stops "
							 "counting.",
							 &ShardextStatTenantsSampleRate,
							 0.1, 0.0, 1.0,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("shardext.rebalance_isolated_tenants",
							 "Let the rebalancer move the shards of isolated tenants.",
							 "An isolated tenant's shard (hash_min = hash_max) stays on the node "
							 "it was given unless this is on; shardext_drain_node() moves it "
							 "anyway.",
							 &ShardextRebalanceIsolatedTenants,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}

#ifdef SHARDEXT_TEST_HOOKS
/*
 * RegisterTestGucs defines the settings that only tests use (crash
 * injection, pauses, a shifted clock).  They exist only in a test build
 * (make SHARDEXT_TEST_BUILD=1, which scripts/test uses), as do their C
 * variables and the code that reads them; in the installed library the
 * settings are unknown.
 */
static void
RegisterTestGucs(void)
{
	DefineCustomEnumVariable("shardext.test_fault",
							 "Test only: makes the backend crash at a point of two-phase commit.",
							 NULL,
							 &ShardextTestFault,
							 TEST_FAULT_NONE,
							 test_fault_options,
							 PGC_SUSET,
							 GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("shardext.saga_test_fault",
							 "Test only: makes a saga's runner crash at a step boundary, or "
							 "lose the answer of a step's node.",
							 NULL,
							 &ShardextSagaTestFault,
							 TEST_SAGA_NONE,
							 saga_test_fault_options,
							 PGC_SUSET,
							 GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.saga_test_fault_step",
							"Test only: the step at which shardext.saga_test_fault strikes "
							"(0: every step).",
							NULL,
							&ShardextSagaTestFaultStep,
							0, 0, 1000,
							PGC_SUSET,
							GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);

	DefineCustomStringVariable("shardext.move_test_pause_phase",
							   "For testing only: a shard move pauses when it enters this phase.",
							   "Lets fault tests interrupt a move at a chosen phase.",
							   &ShardextMoveTestPausePhase,
							   "",
							   PGC_SUSET,
							   GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.move_test_pause_ms",
							"For testing only: how long shardext.move_test_pause_phase pauses.",
							NULL,
							&ShardextMoveTestPauseMs,
							60000, 0, 3600 * 1000,
							PGC_SUSET,
							GUC_UNIT_MS | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);

	DefineCustomStringVariable("shardext.test_pause_points",
							   "For testing only: the pause points this session waits at.",
							   "Names, separated by commas, of points in the code where the session "
							   "waits while another session holds the point's advisory lock.",
							   &ShardextTestPausePoints,
							   "",
							   PGC_SUSET,
							   GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.snowflake_clock_offset",
							"Shifts the clock that snowflake_id() reads back by this amount; for testing only.",
							"Lets tests simulate a system clock that stepped backwards.",
							&ShardextSnowflakeClockOffset,
							0, -86400 * 1000, 0,
							PGC_SUSET,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
}
#endif
