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
 * EnsureMaintenanceDaemon asks for a daemon in the current database if none
 * runs.  Cheap enough to call at every two-phase commit.
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
	if (db != NULL && db->daemonPid == 0 && !db->starting && !db->wanted)
	{
		db->wanted = true;
		db->noExtensionAt = 0;
		latch = Maintenance->launcherLatch;
	}
	SpinLockRelease(&Maintenance->mutex);

	if (latch != NULL)
		SetLatch(latch);
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
	if (pid != 0)
		kill(pid, SIGUSR1);		/* a background worker's SIGUSR1 sets its latch */
	else
		EnsureMaintenanceDaemon();
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
