/*-------------------------------------------------------------------------
 *
 * maintenance_control.c
 *	  The shared memory of the maintenance daemons (daemon/maintenance.c),
 *	  and what backends of every layer do with it: ask for a daemon in
 *	  their database (every two-phase commit does, so that recovery runs),
 *	  wake it (sagas were queued), stop one (DROP DATABASE and its kind), and read the coordinator's
 *	  incarnation, which names prepared transactions.
 *
 * These live below the daemon, which drives recovery, deadlock detection
 * and the cleanup of shard moves and so sits above all of them: the
 * transaction layer and the layers above it call down to here, the
 * launcher and the daemons read the same struct (maintenance.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "shardext/maintenance.h"

/* how long a stopped daemon is kept away (DROP DATABASE and the like) */
#define STOP_PAUSE_MS (30 * 1000)

MaintenanceShared *Maintenance = NULL;

Size
MaintenanceShmemSize(void)
{
	return MAXALIGN(sizeof(MaintenanceShared));
}

void
MaintenanceShmemInit(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	Maintenance = ShmemInitStruct("shardext maintenance", MaintenanceShmemSize(), &found);
	if (!found)
	{
		memset(Maintenance, 0, MaintenanceShmemSize());
		SpinLockInit(&Maintenance->mutex);
		Maintenance->incarnation = (uint64) GetCurrentTimestamp();
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * CoordinatorIncarnation identifies this lifetime of the server's shared
 * memory: the time it was set up, new after every (crash) restart.  An xid
 * that reached no WAL may be handed out again after a crash; together with
 * the incarnation it names one transaction for good.
 */
uint64
CoordinatorIncarnation(void)
{
	return Maintenance->incarnation;
}

/* the slot of a database, adding it if needed; caller holds the mutex */
MaintainedDatabase *
FindOrAddMaintainedDatabase(Oid databaseId)
{
	MaintainedDatabase *free = NULL;

	for (int i = 0; i < MAX_MAINTAINED_DATABASES; i++)
	{
		MaintainedDatabase *db = &Maintenance->databases[i];

		if (db->databaseId == databaseId)
			return db;
		if (free == NULL && db->databaseId == InvalidOid)
			free = db;
	}
	if (free != NULL)
	{
		memset(free, 0, sizeof(MaintainedDatabase));
		free->databaseId = databaseId;
	}
	return free;
}

/*
 * EnsureMaintenanceDaemon asks for a daemon in the current database.
 * Cheap enough to call at every two-phase commit.
 *
 * The request is kept (wanted) even while a daemon starts or runs: a daemon
 * clears it before it looks for shardext, and one that then finds no
 * shardext but a request that came since looks again rather than exit (see
 * DaemonMayExit).  Without that, a daemon that the launcher had started
 * just before CREATE EXTENSION committed saw no extension and left, and the
 * database had no daemon for minutes.
 */
void
EnsureMaintenanceDaemon(void)
{
	MaintainedDatabase *db;
	Latch	   *latch = NULL;

	if (Maintenance == NULL || !OidIsValid(MyDatabaseId))
		return;

	SpinLockAcquire(&Maintenance->mutex);
	db = FindOrAddMaintainedDatabase(MyDatabaseId);
	if (db != NULL && !db->wanted)
	{
		db->wanted = true;
		db->noExtensionAt = 0;
		if (db->daemonPid == 0 && !db->starting)
			latch = Maintenance->launcherLatch;
	}
	SpinLockRelease(&Maintenance->mutex);

	if (latch != NULL)
		SetLatch(latch);
}

/*
 * AtCommitRequest: what the current transaction asks of the daemon when it
 * commits (EnsureMaintenanceDaemonAtCommit, WakeMaintenanceDaemonAtCommit).
 */
typedef enum AtCommitRequest
{
	AT_COMMIT_NOTHING = 0,
	AT_COMMIT_ENSURE,
	AT_COMMIT_WAKE
} AtCommitRequest;

static AtCommitRequest atCommitRequest = AT_COMMIT_NOTHING;

static void
MaintenanceXactCallback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT && atCommitRequest == AT_COMMIT_WAKE)
		WakeMaintenanceDaemon();
	else if (event == XACT_EVENT_COMMIT && atCommitRequest == AT_COMMIT_ENSURE)
		EnsureMaintenanceDaemon();
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
		atCommitRequest = AT_COMMIT_NOTHING;
}

static void
RequestAtCommit(AtCommitRequest request)
{
	static bool callbackRegistered = false;

	if (!callbackRegistered)
	{
		RegisterXactCallback(MaintenanceXactCallback, NULL);
		callbackRegistered = true;
	}
	if (request > atCommitRequest)
		atCommitRequest = request;
}

/*
 * EnsureMaintenanceDaemonAtCommit asks for a daemon once the current
 * transaction commits (CREATE EXTENSION shardext): a daemon started before
 * would not see the extension yet.
 */
void
EnsureMaintenanceDaemonAtCommit(void)
{
	RequestAtCommit(AT_COMMIT_ENSURE);
}

/*
 * WakeMaintenanceDaemonAtCommit wakes the daemon (or asks for one) once the
 * current transaction commits: it queued sagas.
 */
void
WakeMaintenanceDaemonAtCommit(void)
{
	RequestAtCommit(AT_COMMIT_WAKE);
}

/*
 * DaemonMayExit, called by a daemon that found no shardext in its database,
 * tells whether it may exit: not when a backend asked for a daemon since
 * the daemon last looked (ClearDaemonRequest), then it must look again.
 * When it may, the slot notes that the database has no shardext.
 */
bool
DaemonMayExit(int slot)
{
	MaintainedDatabase *db = &Maintenance->databases[slot];
	bool		mayExit;

	SpinLockAcquire(&Maintenance->mutex);
	mayExit = !db->wanted;
	if (mayExit)
	{
		db->noExtensionAt = GetCurrentTimestamp();
		db->daemonPid = 0;
	}
	SpinLockRelease(&Maintenance->mutex);
	return mayExit;
}

/* ClearDaemonRequest: a daemon is about to look for shardext */
void
ClearDaemonRequest(int slot)
{
	SpinLockAcquire(&Maintenance->mutex);
	Maintenance->databases[slot].wanted = false;
	SpinLockRelease(&Maintenance->mutex);
}

/*
 * WakeMaintenanceDaemon makes the daemon of the current database start its
 * next round now (or asks for a daemon if none runs): sagas were queued.
 */
void
WakeMaintenanceDaemon(void)
{
	pid_t		pid = 0;

	if (Maintenance == NULL)
		return;
	SpinLockAcquire(&Maintenance->mutex);
	for (int i = 0; i < MAX_MAINTAINED_DATABASES; i++)
	{
		if (Maintenance->databases[i].databaseId == MyDatabaseId)
			pid = Maintenance->databases[i].daemonPid;
	}
	SpinLockRelease(&Maintenance->mutex);
	EnsureMaintenanceDaemon();
	if (pid != 0)
		kill(pid, SIGUSR1);		/* a background worker's SIGUSR1 sets its latch */
}

/*
 * StopMaintenanceDaemon ends the daemon of a database (which keeps a
 * connection to it) and keeps it away for a while, so that DROP DATABASE
 * and its kind can proceed.  They wait a few seconds for the daemon to go.
 */
void
StopMaintenanceDaemon(Oid databaseId)
{
	pid_t		pid = 0;

	if (Maintenance == NULL)
		return;

	SpinLockAcquire(&Maintenance->mutex);
	for (int i = 0; i < MAX_MAINTAINED_DATABASES; i++)
	{
		MaintainedDatabase *db = &Maintenance->databases[i];

		if (db->databaseId != databaseId)
			continue;
		db->pausedUntil = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), STOP_PAUSE_MS);
		db->wanted = false;
		pid = db->daemonPid;
	}
	SpinLockRelease(&Maintenance->mutex);

	if (pid != 0)
		kill(pid, SIGTERM);
}
