/*-------------------------------------------------------------------------
 *
 * maintenance.c
 *	  The maintenance daemon: one background worker per database that has
 *	  shardext, which resolves in-doubt prepared transactions every
 *	  shardext.recovery_interval (and once as soon as it starts), and looks
 *	  for distributed deadlocks every shardext.distributed_deadlock_timeout.
 *
 * How daemons find their databases: a launcher, registered as a static
 * background worker in _PG_init, starts with the server (and again after a
 * crash restart), lists the databases every few seconds and starts a daemon
 * (a dynamic background worker) for each database that has none.  A daemon
 * that finds no shardext in its database exits; the launcher tries that
 * database again only after a while, or at once when a backend asks for it:
 * CREATE EXTENSION shardext and every two-phase commit do
 * (EnsureMaintenanceDaemon, a few instructions when the daemon runs).  So
 * recovery after a coordinator restart needs no user action.
 *
 * A daemon stays connected to its database, which DROP DATABASE, CREATE
 * DATABASE ... TEMPLATE and ALTER DATABASE RENAME do not allow; the utility
 * hook stops the daemon first (StopMaintenanceDaemon) and keeps it away for
 * a short time.
 *
 * Those requests, and the shared memory they and the daemons use, are in
 * transaction/maintenance_control.c, below the layers that ask; this file,
 * which drives recovery, deadlock detection, replica polls and the cleanup
 * of shard moves, sits above all of them (src/daemon).
 *
 * Other periodic work belongs in the daemon's loop, each task in a
 * transaction of its own with its own error handling, like RunRecovery
 * (which also runs the cleanup after interrupted or finished shard moves,
 * MaintainShardMoves), RunDeadlockDetection, RunSagas (queued sagas,
 * and those a session left unfinished: saga_runner.c; a session that
 * queues one wakes the daemon, WakeMaintenanceDaemon), RunHealthChecks
 * (probes of the workers and automatic failover), RunRestorePoints and
 * RunRepartitionSweep (files repartition joins left on the nodes; a join
 * that failed asks for a sweep at once).  RunDaemonTask is their wrapper.
 *
 * A daemon has no statement_timeout, so each task bounds its waits for
 * nodes itself (SetRemoteCommandTimeout, on top of the bounds recovery and
 * the detector keep per node): a node that accepts connections but does
 * not answer cannot stop the daemon.  Its connections count in the
 * nodes' shared pools but never wait for a slot (SetPoolExempt).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "shardext/shardext.h"
#include "shardext/deadlock_detection.h"
#include "shardext/failover.h"
#include "shardext/guc.h"
#include "shardext/maintenance.h"
#include "shardext/metadata.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"
#include "shardext/repartition.h"
#include "shardext/saga.h"
#include "shardext/shard_move.h"
#include "shardext/shared_pool.h"

/* how often the launcher looks for new databases */
#define LAUNCHER_NAPTIME_MS 5000
/* how long a database without shardext is left alone unless asked */
#define NO_EXTENSION_RECHECK_MS (300 * 1000)
/* how often the files repartition joins left on the nodes are looked for */
#define REPARTITION_SWEEP_INTERVAL_MS (60 * 1000)
/* the longest a task of the daemon may wait for nodes in all */
#define TASK_REMOTE_TIMEOUT_MS (120 * 1000)

/* launcher-local: handles of the daemons it started, by slot */
static BackgroundWorkerHandle *daemonHandles[MAX_MAINTAINED_DATABASES];

static List *ConnectableDatabases(void);
static void StartDaemonsAsNeeded(void);
static bool StartDaemon(int slot, Oid databaseId);
static bool RunRecovery(void);
static void RunDeadlockDetection(void);
static TimestampTz RunReplicaPoll(MemoryContext loopContext);
static TimestampTz RunSagas(MemoryContext loopContext);
static TimestampTz RunRepartitionSweep(MemoryContext loopContext);
static void RunDaemonTask(MemoryContext loopContext, void (*task) (void *arg), void *arg,
						  bool withSnapshot);
static void ReplicaPollTask(void *arg);
static void SagaTask(void *arg);
static void SweepTask(void *arg);
static void HealthCheckTask(void *arg);
static void RestorePointTask(void *arg);
static TimestampTz RunHealthChecks(MemoryContext loopContext, TimestampTz *nextRecovery);
static TimestampTz RunRestorePoints(MemoryContext loopContext);
static void LogErrorAndAbort(void);
static bool CatalogOutdated(void);

/* the extension is of another version than the library: see CatalogOutdated */
static bool catalogOutdated = false;

/* RegisterMaintenanceLauncher registers the launcher; called from _PG_init */
void
RegisterMaintenanceLauncher(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 5;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "shardext");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "ShardextMaintenanceLauncherMain");
	snprintf(worker.bgw_name, BGW_MAXLEN, "shardext maintenance launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "shardext maintenance launcher");
	RegisterBackgroundWorker(&worker);
}

/*
 * ShardextMaintenanceLauncherMain: the launcher's main loop.  It is
 * connected to no database; it reads the shared catalog pg_database.
 */
void
ShardextMaintenanceLauncherMain(Datum arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	SpinLockAcquire(&Maintenance->mutex);
	Maintenance->launcherPid = MyProcPid;
	Maintenance->launcherLatch = MyLatch;
	/* after a restart of the launcher no daemon it knew of is trusted */
	for (int i = 0; i < MAX_MAINTAINED_DATABASES; i++)
		Maintenance->databases[i].starting = false;
	SpinLockRelease(&Maintenance->mutex);

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		StartDaemonsAsNeeded();

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 LAUNCHER_NAPTIME_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* the OIDs of the databases that accept connections and are no templates */
static List *
ConnectableDatabases(void)
{
	List	   *result = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tuple;
	MemoryContext callerContext = CurrentMemoryContext;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (HeapTupleIsValid(tuple = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database form = (Form_pg_database) GETSTRUCT(tuple);
		MemoryContext oldContext;

		if (!form->datallowconn || form->datistemplate)
			continue;
		oldContext = MemoryContextSwitchTo(callerContext);
		result = lappend_oid(result, form->oid);
		MemoryContextSwitchTo(oldContext);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return result;
}

/*
 * StartDaemonsAsNeeded notes daemons that ended and starts one for every
 * database that should have one.
 */
static void
StartDaemonsAsNeeded(void)
{
	List	   *databases = ConnectableDatabases();
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *cell;

	/* forget daemons that are gone, and databases that are gone */
	for (int i = 0; i < MAX_MAINTAINED_DATABASES; i++)
	{
		pid_t		pid;
		bool		stopped = false;

		if (daemonHandles[i] != NULL &&
			GetBackgroundWorkerPid(daemonHandles[i], &pid) == BGWH_STOPPED)
		{
			pfree(daemonHandles[i]);
			daemonHandles[i] = NULL;
			stopped = true;
		}
		SpinLockAcquire(&Maintenance->mutex);
		if (stopped)
		{
			Maintenance->databases[i].daemonPid = 0;
			Maintenance->databases[i].starting = false;
		}
		if (daemonHandles[i] == NULL && Maintenance->databases[i].databaseId != InvalidOid &&
			!list_member_oid(databases, Maintenance->databases[i].databaseId))
			Maintenance->databases[i].databaseId = InvalidOid;
		SpinLockRelease(&Maintenance->mutex);
	}

	foreach(cell, databases)
	{
		Oid			databaseId = lfirst_oid(cell);
		MaintainedDatabase *db;
		int			slot = -1;

		SpinLockAcquire(&Maintenance->mutex);
		db = FindOrAddMaintainedDatabase(databaseId);
		if (db != NULL && daemonHandles[db - Maintenance->databases] == NULL &&
			db->daemonPid == 0 && !db->starting &&
			db->pausedUntil <= now &&
			(db->wanted || db->noExtensionAt == 0 ||
			 TimestampDifferenceExceeds(db->noExtensionAt, now, NO_EXTENSION_RECHECK_MS)))
		{
			slot = db - Maintenance->databases;
			db->starting = true;
			db->wanted = false;
		}
		SpinLockRelease(&Maintenance->mutex);

		if (slot >= 0 && !StartDaemon(slot, databaseId))
		{
			SpinLockAcquire(&Maintenance->mutex);
			Maintenance->databases[slot].starting = false;
			SpinLockRelease(&Maintenance->mutex);
			break;				/* no free worker slot: try again later */
		}
	}
	list_free(databases);
}

/* StartDaemon registers the dynamic worker of one database */
static bool
StartDaemon(int slot, Oid databaseId)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	worker.bgw_main_arg = Int32GetDatum(slot);
	worker.bgw_notify_pid = MyProcPid;
	memcpy(worker.bgw_extra, &databaseId, sizeof(Oid));
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "shardext");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "ShardextMaintenanceDaemonMain");
	snprintf(worker.bgw_name, BGW_MAXLEN, "shardext maintenance daemon for database %u",
			 databaseId);
	snprintf(worker.bgw_type, BGW_MAXLEN, "shardext maintenance daemon");

	if (!RegisterDynamicBackgroundWorker(&worker, &daemonHandles[slot]))
	{
		ereport(LOG,
				(errmsg("shardext: no background worker slot for the maintenance "
						"daemon of database %u", databaseId),
				 errhint("Raise max_worker_processes.")));
		daemonHandles[slot] = NULL;
		return false;
	}
	return true;
}

/*
 * ShardextMaintenanceDaemonMain: the daemon of one database.  It exits
 * when the database has no shardext (or no longer has it).
 */
void
ShardextMaintenanceDaemonMain(Datum arg)
{
	int			slot = DatumGetInt32(arg);
	Oid			databaseId;
	MemoryContext loopContext;
	TimestampTz nextRecovery = 0;
	int			recoveryInterval = ShardextRecoveryInterval;	/* nextRecovery's */
	TimestampTz nextDeadlockCheck = 0;
	TimestampTz nextReplicaPoll = 0;
	TimestampTz nextSagaRound = 0;
	TimestampTz nextSweep = 0;
	uint64		sweepRequestsSeen = 0;
	TimestampTz nextHealthCheck = 0;
	TimestampTz nextRestorePoint = 0;

	memcpy(&databaseId, MyBgworkerEntry->bgw_extra, sizeof(Oid));
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	SpinLockAcquire(&Maintenance->mutex);
	if (Maintenance->databases[slot].databaseId != databaseId ||
		Maintenance->databases[slot].pausedUntil > GetCurrentTimestamp())
	{
		Maintenance->databases[slot].starting = false;
		SpinLockRelease(&Maintenance->mutex);
		proc_exit(0);
	}
	Maintenance->databases[slot].daemonPid = MyProcPid;
	Maintenance->databases[slot].starting = false;
	SpinLockRelease(&Maintenance->mutex);

	BackgroundWorkerInitializeConnectionByOid(databaseId, InvalidOid, 0);
	pgstat_report_appname("shardext maintenance daemon");
	SetPoolExempt(true);

	loopContext = AllocSetContextCreate(TopMemoryContext, "shardext maintenance",
										ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		TimestampTz now;
		long		timeout;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		/* a new shardext.recovery_interval counts from now, not from the last round */
		if (ShardextRecoveryInterval != recoveryInterval)
		{
			recoveryInterval = ShardextRecoveryInterval;
			if (recoveryInterval > 0)
				nextRecovery = Min(nextRecovery,
								   TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															   recoveryInterval));
		}

		now = GetCurrentTimestamp();
		if (now >= nextRecovery)
		{
			bool		hasExtension;

			ClearDaemonRequest(slot);
			MemoryContextSwitchTo(loopContext);
			hasExtension = RunRecovery();
			MemoryContextSwitchTo(TopMemoryContext);
			MemoryContextReset(loopContext);

			if (!hasExtension && DaemonMayExit(slot))
				proc_exit(0);
			/* asked for since it looked (CREATE EXTENSION committed): look again */
			if (!hasExtension)
				continue;
			/* with recovery disabled, only look every minute whether shardext went */
			nextRecovery = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   ShardextRecoveryInterval > 0 ?
													   ShardextRecoveryInterval : 60000);
		}

		if (ShardextDistributedDeadlockTimeout > 0 && now >= nextDeadlockCheck)
		{
			MemoryContextSwitchTo(loopContext);
			RunDeadlockDetection();
			MemoryContextSwitchTo(TopMemoryContext);
			MemoryContextReset(loopContext);
			nextDeadlockCheck = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															ShardextDistributedDeadlockTimeout);
		}

		if (now >= nextReplicaPoll)
			nextReplicaPoll = RunReplicaPoll(loopContext);
		if (now >= nextHealthCheck)
			nextHealthCheck = RunHealthChecks(loopContext, &nextRecovery);
		if (now >= nextRestorePoint)
			nextRestorePoint = RunRestorePoints(loopContext);

		if (now >= nextSagaRound)
			nextSagaRound = RunSagas(loopContext);

		/* at once when a repartition join failed, else now and then */
		if (RepartitionSweepRequests() != sweepRequestsSeen)
		{
			sweepRequestsSeen = RepartitionSweepRequests();
			nextSweep = 0;
		}
		if (now >= nextSweep)
			nextSweep = RunRepartitionSweep(loopContext);

		now = GetCurrentTimestamp();
		timeout = TimestampDifferenceMilliseconds(now, nextRecovery);
		timeout = Min(timeout, TimestampDifferenceMilliseconds(now, nextHealthCheck));
		timeout = Min(timeout, TimestampDifferenceMilliseconds(now, nextRestorePoint));
		if (ShardextDistributedDeadlockTimeout > 0)
			timeout = Min(timeout, TimestampDifferenceMilliseconds(now, nextDeadlockCheck));
		timeout = Min(timeout, TimestampDifferenceMilliseconds(now, nextReplicaPoll));
		timeout = Min(timeout, TimestampDifferenceMilliseconds(now, nextSagaRound));
		timeout = Min(timeout, TimestampDifferenceMilliseconds(now, nextSweep));
		/* a wake-up (a queued saga) runs the sagas at once */
		if (WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					  Max(timeout, 1), PG_WAIT_EXTENSION) & WL_LATCH_SET)
			nextSagaRound = 0;
		ResetLatch(MyLatch);
	}
}

/*
 * CatalogOutdated tells whether the extension in this database is of
 * another version than the library (a new library was installed, ALTER
 * EXTENSION shardext UPDATE has not run yet): then the daemon waits, and
 * says so in the log once, rather than reading a catalog it does not know.
 */
static bool
CatalogOutdated(void)
{
	static bool logged = false;

	catalogOutdated = !CatalogVersionMatches();
	if (catalogOutdated && !logged)
		ereport(LOG,
				(errmsg("shardext maintenance of database \"%s\" waits for ALTER EXTENSION "
						"shardext UPDATE", get_database_name(MyDatabaseId)),
				 errdetail("The library is shardext %s, the extension in the database %s.",
						   SHARDEXT_LIBRARY_VERSION, InstalledShardextVersion())));
	logged = catalogOutdated;
	return catalogOutdated;
}

/*
 * RunRecovery runs prepared transaction recovery (always in the first
 * round, then only when shardext.recovery_interval enables it) and the
 * cleanup after shard moves in a transaction of its own; errors are logged
 * and the next round tries again.  Returns false when shardext is not
 * installed in the database.
 */
static bool
RunRecovery(void)
{
	static bool firstRound = true;
	bool		hasExtension = true;

	SetRemoteCommandTimeout(TASK_REMOTE_TIMEOUT_MS);
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	PG_TRY();
	{
		hasExtension = OidIsValid(get_extension_oid(SHARDEXT_EXTENSION_NAME, true)) &&
			ShardextExtensionLoaded();
		/* until ALTER EXTENSION UPDATE, the daemon waits */
		if (hasExtension && !CatalogOutdated())
		{
			if (firstRound || ShardextRecoveryInterval > 0)
			{
				int			resolved = RecoverShardextPreparedTransactions(true);

				if (resolved > 0)
					ereport(LOG,
							(errmsg("shardext recovered %d prepared transactions", resolved)));
			}
			MaintainShardMoves();
			firstRound = false;
		}
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		LogErrorAndAbort();
	}
	PG_END_TRY();
	SetRemoteCommandTimeout(0);
	return hasExtension;
}

/*
 * RunDeadlockDetection runs one search for distributed deadlocks (which
 * manages its own transactions); errors are logged and the next round
 * tries again.
 */
static void
RunDeadlockDetection(void)
{
	if (catalogOutdated)
		return;
	SetRemoteCommandTimeout(TASK_REMOTE_TIMEOUT_MS);
	PG_TRY();
	{
		(void) DetectDistributedDeadlocks();
	}
	PG_CATCH();
	{
		LogErrorAndAbort();
	}
	PG_END_TRY();
	SetRemoteCommandTimeout(0);
}

/*
 * RunReplicaPoll polls the read replicas and their primaries once (see
 * replica_monitor.c) in a transaction of its own; errors are logged and
 * the next round tries again.  Returns when to poll next: after
 * shardext.replica_poll_interval, or a second when no replica is in use.
 */
static TimestampTz
RunReplicaPoll(MemoryContext loopContext)
{
	bool		replicas = false;

	/* a standby's daemon has nothing to route */
	if (!RecoveryInProgress() && !catalogOutdated)
		RunDaemonTask(loopContext, ReplicaPollTask, &replicas, false);
	return TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
									   replicas ? ShardextReplicaPollInterval :
									   Max(ShardextReplicaPollInterval, 1000));
}

/* ReplicaPollTask: RunReplicaPoll's task; arg is whether replicas are in use */
static void
ReplicaPollTask(void *arg)
{
	*(bool *) arg = PollReplicas();
}

/* SagaTask: RunSagas's task; arg is where to put how long to wait next */
static void
SagaTask(void *arg)
{
	*(long *) arg = RunDueSagas();
}

/*
 * RunSagas runs the sagas that are due (saga_runner.c); returns when to
 * run them next.
 */
static TimestampTz
RunSagas(MemoryContext loopContext)
{
	long		waitMs = 1000;

	if (!RecoveryInProgress() && !catalogOutdated)
		RunDaemonTask(loopContext, SagaTask, &waitMs, true);
	return TimestampTzPlusMilliseconds(GetCurrentTimestamp(), waitMs);
}

/*
 * RunRepartitionSweep removes from the nodes the files of repartition
 * joins of this database that no running query uses
 * (repartition_registry.c); returns when to sweep next.
 */
static TimestampTz
RunRepartitionSweep(MemoryContext loopContext)
{
	if (!RecoveryInProgress() && !catalogOutdated)
		RunDaemonTask(loopContext, SweepTask, NULL, true);
	return TimestampTzPlusMilliseconds(GetCurrentTimestamp(), REPARTITION_SWEEP_INTERVAL_MS);
}

/* SweepTask: RunRepartitionSweep's task */
static void
SweepTask(void *arg)
{
	SweepRepartitionLeftovers();
}

/*
 * RunDaemonTask runs task(arg) in a transaction of its own (with an active
 * snapshot if asked), when shardext is installed; errors are logged and
 * the next round tries again.
 */
static void
RunDaemonTask(MemoryContext loopContext, void (*task) (void *arg), void *arg,
			  bool withSnapshot)
{
	MemoryContextSwitchTo(loopContext);
	SetRemoteCommandTimeout(TASK_REMOTE_TIMEOUT_MS);
	StartTransactionCommand();
	if (withSnapshot)
		PushActiveSnapshot(GetTransactionSnapshot());
	PG_TRY();
	{
		if (ShardextExtensionLoaded())
			task(arg);
		if (withSnapshot)
			PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		LogErrorAndAbort();
	}
	PG_END_TRY();
	SetRemoteCommandTimeout(0);
	MemoryContextSwitchTo(TopMemoryContext);
	MemoryContextReset(loopContext);
}

/* what RunHealthChecks's task reports */
typedef struct HealthCheckRound
{
	bool		failedOver;
	TimestampTz nextCheck;
} HealthCheckRound;

static void
HealthCheckTask(void *arg)
{
	HealthCheckRound *round = (HealthCheckRound *) arg;

	round->failedOver = CheckNodeHealth(&round->nextCheck);
}

/*
 * RunHealthChecks probes the workers once and fails over those that are
 * unreachable (node_health.c, failover.c), with shardext.auto_failover on.
 * After a failover recovery runs at once (*nextRecovery).  Returns when to
 * probe next (earlier than the interval when a worker's failover_timeout
 * ends before).
 */
static TimestampTz
RunHealthChecks(MemoryContext loopContext, TimestampTz *nextRecovery)
{
	HealthCheckRound round;

	round.failedOver = false;
	round.nextCheck = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												  ShardextHealthCheckInterval);
	if (!ShardextAutoFailover || ShardextHealthCheckInterval == 0 ||
		RecoveryInProgress() || catalogOutdated)
	{
		ForgetNodeHealthConnections();
		return TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 1000);
	}
	RunDaemonTask(loopContext, HealthCheckTask, &round, true);
	if (round.failedOver)
		*nextRecovery = 0;
	return round.nextCheck;
}

static void
RestorePointTask(void *arg)
{
	CreatePeriodicRestorePoint();
}

/*
 * RunRestorePoints creates a cluster-wide restore point every
 * shardext.restore_point_interval (restore_point.c).  Returns when to
 * look again.
 */
static TimestampTz
RunRestorePoints(MemoryContext loopContext)
{
	if (ShardextRestorePointInterval == 0 || RecoveryInProgress() || catalogOutdated)
		return TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 1000);
	RunDaemonTask(loopContext, RestorePointTask, NULL, true);
	return TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
									   (int64) ShardextRestorePointInterval * 1000);
}

/*
 * LogErrorAndAbort, called in the daemon's PG_CATCH blocks, logs the error
 * and aborts the transaction, so that the daemon goes on with its next
 * round.
 */
static void
LogErrorAndAbort(void)
{
	HOLD_INTERRUPTS();
	EmitErrorReport();
	AbortCurrentTransaction();
	FlushErrorState();
	RESUME_INTERRUPTS();
}
