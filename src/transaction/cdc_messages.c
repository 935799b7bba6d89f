/*-------------------------------------------------------------------------
 *
 * cdc_messages.c
 *	  What a worker adds to its WAL for change data capture by itself: the
 *	  logical decoding message that names the distributed transaction of
 *	  each of its parts.
 *
 * Every part of a distributed transaction that prepares on a worker, or
 * commits there as its last participant (commit_decision.c), carries a
 * transactional logical decoding message with prefix
 * shardext.distributed_transaction and the transaction's name
 * (shardext_<coordinator system id>_<database oid>_<xid>, the common part
 * of its gids), when the node has a publication of change data capture.
 * Consumers group the parts that several nodes stream by it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "replication/message.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/rel.h"

#include "shardext/cdc.h"
#include "shardext/pg_compat.h"
#include "shardext/shardext.h"

/*
 * CdcCatalogRelid returns the OID of one of shardext's catalog tables, or
 * InvalidOid when missingOk and it does not exist (shardext is not
 * installed in this database, or an older version is).
 */
Oid
CdcCatalogRelid(const char *relname, bool missingOk)
{
	Oid			namespaceId = get_namespace_oid(SHARDEXT_SCHEMA_NAME, true);
	Oid			relid = OidIsValid(namespaceId) ?
		get_relname_relid(relname, namespaceId) : InvalidOid;

	if (!OidIsValid(relid) && !missingOk)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shardext.%s does not exist", relname),
				 errhint("Update the extension: ALTER EXTENSION shardext UPDATE.")));
	return relid;
}

/*
 * CdcPublicationsExist: does this database (a coordinator's or a
 * worker's) have a publication of change data capture?  False while its
 * catalog is older than 1.2.
 */
bool
CdcPublicationsExist(void)
{
	Oid			relid = CdcCatalogRelid("cdc_publication", true);
	Relation	rel;
	SysScanDesc scan;
	Snapshot	snapshot;
	bool		found;

	if (!OidIsValid(relid))
		return false;
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	rel = table_open(relid, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
	found = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	UnregisterSnapshot(snapshot);
	return found;
}

/*
 * CdcNotePreparedTransaction, for PREPARE TRANSACTION of a part of a
 * distributed transaction (gid shardext_<system id>_<db oid>_<xid>_...),
 * logs the transaction's name in it when this node publishes changes.
 */
void
CdcNotePreparedTransaction(TransactionStmt *stmt)
{
	const char *gid = stmt->gid;
	const char *end;
	int			underscores = 0;

	if (stmt->kind != TRANS_STMT_PREPARE || gid == NULL ||
		strncmp(gid, SHARDEXT_EXTENSION_NAME "_", strlen(SHARDEXT_EXTENSION_NAME) + 1) != 0)
		return;

	for (end = gid; *end != '\0'; end++)
	{
		if (*end == '_' && ++underscores == 4)
			break;
	}
	CdcLogDistributedTransaction(pnstrdup(gid, end - gid));
}

/*
 * CdcLogDistributedTransaction logs the name of the distributed
 * transaction the current transaction belongs to, as a transactional
 * logical decoding message, when this node publishes changes.
 */
void
CdcLogDistributedTransaction(const char *transactionId)
{
	if (!XLogLogicalInfoActive() || !CdcPublicationsExist())
		return;
	(void) LogLogicalMessageCompat(CDC_TRANSACTION_MESSAGE_PREFIX, transactionId,
								   strlen(transactionId), true);
}
