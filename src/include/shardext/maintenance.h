/*-------------------------------------------------------------------------
 *
 * maintenance.h
 *	  The maintenance daemon: a background worker per database that has
 *	  shardext, started by a launcher, running periodic work such as
 *	  prepared transaction recovery.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_MAINTENANCE_H
#define SHARDEXT_MAINTENANCE_H

extern Size MaintenanceShmemSize(void);
extern void MaintenanceShmemInit(void);
extern uint64 CoordinatorIncarnation(void);
extern void RegisterMaintenanceLauncher(void);
extern void EnsureMaintenanceDaemon(void);
extern void WakeMaintenanceDaemon(void);
extern void StopMaintenanceDaemon(Oid databaseId);

extern PGDLLEXPORT void ShardextMaintenanceLauncherMain(Datum arg);
extern PGDLLEXPORT void ShardextMaintenanceDaemonMain(Datum arg);

#endif							/* SHARDEXT_MAINTENANCE_H */
