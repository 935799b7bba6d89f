/*-------------------------------------------------------------------------
 *
 * privileges.h
 *	  Preconditions of shardext's SQL functions: who may call them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_PRIVILEGES_H
#define SHARDEXT_PRIVILEGES_H

/* members of this role may call the administrative functions */
#define SHARDEXT_ADMIN_ROLE "shardext_admin"

/* privileges.c */
extern bool IsShardextAdmin(Oid roleId);
extern void EnsureShardextAdmin(const char *function);
extern void EnsureTableOwnerWithSchemaAccess(Oid relid);
extern Oid	RelationOwner(Oid relid);

/* metadata_cache.c: they read the catalog */
extern void EnsureShardextInstalled(void);
extern void EnsureAdminAndShardext(const char *function);

/*
 * The names of 1.0, for code written against them: administrative
 * functions were for superusers only, now also for shardext_admin.
 */
#define EnsureCalledBySuperuser(function) EnsureShardextAdmin(function)
#define EnsureSuperuserAndShardext(function) EnsureAdminAndShardext(function)

#endif							/* SHARDEXT_PRIVILEGES_H */
