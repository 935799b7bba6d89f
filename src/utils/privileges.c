/*-------------------------------------------------------------------------
 *
 * privileges.c
 *	  The preconditions that shardext's administrative SQL functions check
 *	  first: a superuser calls them, and the extension is installed in
 *	  the current database.
 *
 * Node management, shard moves, cleanup, recovery and shardext_run_on_*
 * act on the workers with the rights of whoever calls them and change the
 * cluster's layout for every user, so only superusers may call them; moves
 * also need a superuser for logical replication.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "shardext/metadata.h"
#include "shardext/privileges.h"

/*
 * EnsureCalledBySuperuser errors out unless the current user is a
 * superuser; function is the SQL name of the caller, for the message.
 */
void
EnsureCalledBySuperuser(const char *function)
{
	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("only superusers can call %s()", function)));
}

/* EnsureShardextInstalled errors out unless shardext is installed here */
void
EnsureShardextInstalled(void)
{
	if (!ShardextExtensionLoaded())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"shardext\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION shardext.")));
}

/* EnsureSuperuserAndShardext: both of the above, in that order */
void
EnsureSuperuserAndShardext(const char *function)
{
	EnsureCalledBySuperuser(function);
	EnsureShardextInstalled();
}
