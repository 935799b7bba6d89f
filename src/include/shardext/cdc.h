/*-------------------------------------------------------------------------
 *
 * cdc.h
 *	  Change data capture: publications of distributed tables on every
 *	  node (cdc_publication.c, cdc_standins.c), their worker side
 *	  (cdc_worker.c, transaction/cdc_messages.c), and the output plugin
 *	  wrappers that decode shards as their tables (cdc_decoder.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_CDC_H
#define SHARDEXT_CDC_H

#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "nodes/pg_list.h"
#include "replication/output_plugin.h"
#include "shardext/connection.h"

/* the logical decoding message that names a distributed transaction */
#define CDC_TRANSACTION_MESSAGE_PREFIX "shardext.distributed_transaction"

/* the directory, under $libdir, of the wrapper plugins */
#define CDC_PLUGIN_DIRECTORY "shardext_cdc"

/* the entry point the wrapper plugins call (src/plugins/shardext_cdc) */
typedef void (*CdcPluginInit) (OutputPluginCallbacks *cb, const char *plugin);
extern PGDLLEXPORT void shardext_cdc_plugin_init(OutputPluginCallbacks *cb,
												 const char *plugin);
extern LogicalOutputPluginInit RealOutputPluginInit(const char *plugin);

/* cdc_standins.c: the coordinator keeps the nodes' stand-ins in step */
extern List *CdcCatalogNames(const char *query, Oid arg);
extern List *CdcNodeIds(void);
extern int32 CdcReferenceEmitter(void);
extern List *CdcTablePublications(Oid relid);
extern char *CdcStandinSyncCommand(Oid relid, List *publications, bool emits);
extern void CdcSyncTablesOnNodes(List *relids, List *nodeIds);
extern void CdcTableDistributed(Oid relid);
extern void CdcTablesAltered(List *relids);
extern void CdcTablesDropped(List *relids);

/* cdc_publication.c: publications, and the nodes that come and go */
extern void CdcPrepareNewNode(NodeConnection *conn, const char *host, int32 port);
extern void CdcSetUpNewNode(int32 nodeId);
extern void CdcNodeRemoved(int32 nodeId);
extern bool CdcBeginInternalWrites(NodeConnection *conn, const char *originName);
extern void CdcEndInternalWrites(NodeConnection *conn, const char *originName);

/* cdc_worker.c */
extern char *CdcStandinCopyQuery(CopyStmt *stmt);
extern PlannedStmt *CdcCopyStatement(const char *query);

/* cdc_messages.c (transaction layer): what a worker logs by itself */
extern Oid	CdcCatalogRelid(const char *relname, bool missingOk);
extern bool CdcPublicationsExist(void);
extern void CdcNotePreparedTransaction(TransactionStmt *stmt);
extern void CdcLogDistributedTransaction(const char *transactionId);

#endif							/* SHARDEXT_CDC_H */
