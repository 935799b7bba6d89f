/*-------------------------------------------------------------------------
 *
 * privileges.c
 *	  The preconditions that shardext's SQL functions check first: who may
 *	  call them.  That the extension is installed in the current database
 *	  (EnsureShardextInstalled) reads the catalog, so it is in
 *	  metadata_cache.c, a layer up.
 *
 * Node management, shard moves, splits, rebalancing, cleanup, recovery and
 * shardext_run_on_* change the cluster's layout for every user, so they are
 * for administrators: superusers, and members of the role shardext_admin
 * (created by the extension script, granted by a superuser).  The checks
 * use has_privs_of_role, so membership through other roles counts as it
 * does for GRANT.  Table-level functions (create_distributed_table, ...)
 * check ownership of the table instead; see their callers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "shardext/pg_compat.h"
#include "shardext/privileges.h"

/*
 * IsShardextAdmin tells whether a role may call shardext's administrative
 * functions: a superuser, or a role with the privileges of shardext_admin.
 */
bool
IsShardextAdmin(Oid roleId)
{
	Oid			adminRole;

	if (superuser_arg(roleId))
		return true;
	adminRole = get_role_oid(SHARDEXT_ADMIN_ROLE, true);
	return OidIsValid(adminRole) && has_privs_of_role(roleId, adminRole);
}

/*
 * EnsureShardextAdmin errors out unless the current user is an
 * administrator (see IsShardextAdmin) and the server is not a standby;
 * function is the SQL name of the caller, for the message.
 */
void
EnsureShardextAdmin(const char *function)
{
	if (!IsShardextAdmin(GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for function %s", function),
				 errdetail("Only superusers and members of role \"%s\" can call %s().",
						   SHARDEXT_ADMIN_ROLE, function),
				 errhint("A superuser can grant the role: GRANT %s TO <role>.",
						 SHARDEXT_ADMIN_ROLE)));
	/* they change the nodes or the catalog, which a standby coordinator may not */
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot run %s() on a standby coordinator", function),
				 errhint("Run it on the primary coordinator.")));
}

/*
 * EnsureTableOwnerWithSchemaAccess checks what a table's owner must have to
 * distribute it or bring it back: ownership, and USAGE and CREATE on its
 * schema (shards are new tables in that schema, on the nodes too).  The
 * checks are on the calling user, even though shardext then writes its
 * catalog with the extension owner's rights.
 */
void
EnsureTableOwnerWithSchemaAccess(Oid relid)
{
	Oid			namespaceId = get_rel_namespace(relid);
	AclResult	aclresult;

	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(relid));

	aclresult = pg_namespace_aclcheck(namespaceId, GetUserId(), ACL_USAGE | ACL_CREATE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_SCHEMA, get_namespace_name(namespaceId));
}

/*
 * RelationOwner returns the owner of a relation (an error if it is gone).
 */
Oid
RelationOwner(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}
