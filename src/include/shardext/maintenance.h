/*-------------------------------------------------------------------------
 *
 * maintenance.h
 *	  The maintenance daemon: a background worker per database that has
 *	  shardext, started by a launcher, running periodic work such as
 *	  prepared transaction recovery, and the backends' side of it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_MAINTENANCE_H
#define SHARDEXT_MAINTENANCE_H

#include "datatype/timestamp.h"
#include "storage/latch.h"
#include "storage/spin.h"

#define MAX_MAINTAINED_DATABASES 128

/* the daemons' shared state (transaction/maintenance_control.c) */
typedef struct MaintainedDatabase
{
	Oid			databaseId;		/* InvalidOid: free slot */
	pid_t		daemonPid;		/* 0: no daemon runs */
	bool		starting;		/* the launcher started one that did not report yet */
	bool		wanted;			/* a backend asked for a daemon since one last
								 * looked for shardext */
	TimestampTz noExtensionAt;	/* when a daemon found no shardext, or 0 */
	TimestampTz pausedUntil;	/* no daemon before this time */
} MaintainedDatabase;

typedef struct MaintenanceShared
{
	slock_t		mutex;
	pid_t		launcherPid;
	Latch	   *launcherLatch;
	MaintainedDatabase databases[MAX_MAINTAINED_DATABASES];
	uint64		incarnation;	/* see CoordinatorIncarnation */
} MaintenanceShared;

extern MaintenanceShared *Maintenance;

/* transaction/maintenance_control.c: what backends of every layer call */
extern Size MaintenanceShmemSize(void);
extern void MaintenanceShmemInit(void);
extern uint64 CoordinatorIncarnation(void);
extern MaintainedDatabase *FindOrAddMaintainedDatabase(Oid databaseId);
extern void EnsureMaintenanceDaemon(void);
extern void EnsureMaintenanceDaemonAtCommit(void);
extern void WakeMaintenanceDaemon(void);
extern void WakeMaintenanceDaemonAtCommit(void);
extern void ClearDaemonRequest(int slot);
extern bool DaemonMayExit(int slot);
extern void StopMaintenanceDaemon(Oid databaseId);

/* daemon/maintenance.c: the launcher and the daemons */
extern void RegisterMaintenanceLauncher(void);
extern PGDLLEXPORT void ShardextMaintenanceLauncherMain(Datum arg);
extern PGDLLEXPORT void ShardextMaintenanceDaemonMain(Datum arg);

/* daemon/replica_monitor.c */
extern bool PollReplicas(void);

#endif							/* SHARDEXT_MAINTENANCE_H */
