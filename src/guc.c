/*-------------------------------------------------------------------------
 *
 * guc.c
 *	  Every configuration variable of shardext, defined in one place.
 *
 * Modules read the C variables declared in shardext/guc.h; nothing else
 * calls DefineCustom*Variable.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"

#include "shardext/guc.h"

int			ShardextShardCount = 32;
int			ShardextConnectTimeout = 5000;
int			ShardextMaxConnectionsPerNode = 4;
char	   *ShardextNodeConninfo = NULL;
bool		ShardextEnableDDLPropagation = true;
bool		ShardextExplainAllTasks = false;
bool		ShardextEnablePushdown = true;

/*
 * RegisterShardextGucs defines all shardext.* variables and reserves the
 * prefix so that a misspelt setting is reported instead of ignored.
 */
void
RegisterShardextGucs(void)
{
	DefineCustomIntVariable("shardext.shard_count",
							"Number of shards create_distributed_table() creates when shard_count is not given.",
							NULL,
							&ShardextShardCount,
							32, 1, 64000,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.connect_timeout",
							"Time to wait for a connection to a node before giving up.",
							NULL,
							&ShardextConnectTimeout,
							5000, 1000, 3600 * 1000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("shardext.max_connections_per_node",
							"Maximum number of connections one session opens to one node.",
							"Multi-shard statements run their shard tasks over up to this many "
							"connections per node in parallel.",
							&ShardextMaxConnectionsPerNode,
							4, 1, 1000,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("shardext.node_conninfo",
							   "Extra libpq connection options used for connections to nodes.",
							   "For example \"sslmode=require\". Passwords belong in a password "
							   "file, not here.",
							   &ShardextNodeConninfo,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	DefineCustomBoolVariable("shardext.enable_ddl_propagation",
							 "Apply DDL on distributed tables to their shards.",
							 NULL,
							 &ShardextEnableDDLPropagation,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("shardext.explain_all_tasks",
							 "EXPLAIN shows every task of a distributed query, not only one.",
							 NULL,
							 &ShardextExplainAllTasks,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("shardext.enable_pushdown",
							 "Push joins, aggregates, sorting and limits down to the shards.",
							 "When off, every query on distributed tables pulls the rows it "
							 "needs to the coordinator (for testing).",
							 &ShardextEnablePushdown,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	MarkGUCPrefixReserved("shardext");
}
