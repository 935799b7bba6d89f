/*-------------------------------------------------------------------------
 *
 * cdc_worker.c
 *	  The worker side of change data capture: the functions the
 *	  coordinator calls to keep a worker's publications and stand-ins in
 *	  step.
 *
 * A worker's publications of change data capture contain stand-ins: empty
 * tables with the schema, name, columns and replica identity of the
 * distributed tables, recorded in shardext.cdc_table.  The output plugin
 * wrappers (cdc_decoder.c) decode the changes of each shard as changes of
 * its stand-in.  Publications and stand-ins are changed here with the
 * extension owner's rights (a table owner who distributes a table must be
 * able to add it to a publication made for all tables), after checking
 * the caller's.  Every change of the records invalidates shardext.cdc_table
 * in the relation cache, which is how decoding sessions learn of it: the
 * invalidation is part of the transaction's WAL.
 *
 * Every part of a distributed transaction that prepares on this node, or
 * commits here as its last participant, carries a transactional logical
 * decoding message (prefix shardext.distributed_transaction) with the
 * transaction's name, so that a consumer can group the parts that several
 * nodes stream.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/plannodes.h"
#include "parser/parser.h"
#include "replication/walsender.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "shardext/cdc.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/privileges.h"
#include "shardext/shardext.h"

PG_FUNCTION_INFO_V1(shardext_cdc_worker_add_publication);
PG_FUNCTION_INFO_V1(shardext_cdc_worker_drop_publication);
PG_FUNCTION_INFO_V1(shardext_cdc_worker_publish);
PG_FUNCTION_INFO_V1(shardext_cdc_worker_unpublish);
PG_FUNCTION_INFO_V1(shardext_cdc_worker_set_emitter);

static void InvalidateCdcRecords(void);
static bool IsCdcPublication(const char *pubname);
static void CheckShardOwners(Oid standin);
static void DropStandin(Oid standin);

/* InvalidateCdcRecords tells decoding sessions that the records changed */
static void
InvalidateCdcRecords(void)
{
	CacheInvalidateRelcacheByRelid(CdcCatalogRelid("cdc_table", false));
}

/* IsCdcPublication: is pubname a publication of change data capture here? */
static bool
IsCdcPublication(const char *pubname)
{
	Oid			argtypes[1] = {NAMEOID};
	Datum		values[1];

	values[0] = CStringGetDatum(pubname);
	values[0] = DirectFunctionCall1(namein, values[0]);
	return RunCatalogSPI("SELECT 1 FROM shardext.cdc_publication WHERE pubname = $1",
						 1, argtypes, values, NULL, SPI_OK_SELECT, NULL, NULL) > 0;
}

/*
 * shardext.cdc_worker_add_publication(pubname name, all_tables bool,
 * create_slot bool): creates the publication, without tables yet, and
 * records it.
 */
Datum
shardext_cdc_worker_add_publication(PG_FUNCTION_ARGS)
{
	char	   *pubname = NameStr(*PG_GETARG_NAME(0));
	Oid			argtypes[3] = {NAMEOID, BOOLOID, BOOLOID};
	Datum		values[3];

	EnsureShardextAdmin("shardext.cdc_worker_add_publication");
	values[0] = PG_GETARG_DATUM(0);
	values[1] = PG_GETARG_DATUM(1);
	values[2] = PG_GETARG_DATUM(2);
	RunCatalogSPI(psprintf("CREATE PUBLICATION %s", quote_identifier(pubname)),
				  0, NULL, NULL, NULL, SPI_OK_UTILITY, NULL, NULL);
	RunCatalogSPI("INSERT INTO shardext.cdc_publication VALUES ($1, $2, $3)",
				  3, argtypes, values, NULL, SPI_OK_INSERT, NULL, NULL);
	CacheInvalidateRelcacheByRelid(CdcCatalogRelid("cdc_publication", false));
	PG_RETURN_VOID();
}

/*
 * shardext.cdc_worker_drop_publication(pubname name): drops the
 * publication and forgets it; stand-ins that no other publication
 * contains go too.
 */
Datum
shardext_cdc_worker_drop_publication(PG_FUNCTION_ARGS)
{
	char	   *pubname = NameStr(*PG_GETARG_NAME(0));
	Oid			argtypes[1] = {NAMEOID};
	Datum		values[1];
	Datum		standin;
	bool		isnull;

	EnsureShardextAdmin("shardext.cdc_worker_drop_publication");
	values[0] = PG_GETARG_DATUM(0);
	if (RunCatalogSPI("DELETE FROM shardext.cdc_publication WHERE pubname = $1",
					  1, argtypes, values, NULL, SPI_OK_DELETE, NULL, NULL) > 0)
		RunCatalogSPI(psprintf("DROP PUBLICATION IF EXISTS %s", quote_identifier(pubname)),
					  0, NULL, NULL, NULL, SPI_OK_UTILITY, NULL, NULL);

	/* the stand-ins left in no publication of ours, one at a time */
	while (RunCatalogSPI("SELECT t.standin FROM shardext.cdc_table t "
						 "WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication_rel r "
						 "  JOIN pg_catalog.pg_publication p ON p.oid = r.prpubid "
						 "  JOIN shardext.cdc_publication c ON c.pubname = p.pubname "
						 "  WHERE r.prrelid = t.standin) LIMIT 1",
						 0, NULL, NULL, NULL, SPI_OK_SELECT, &standin, &isnull) > 0)
		DropStandin(DatumGetObjectId(standin));
	CacheInvalidateRelcacheByRelid(CdcCatalogRelid("cdc_publication", false));
	InvalidateCdcRecords();
	PG_RETURN_VOID();
}

/* DropStandin drops a stand-in and its record */
static void
DropStandin(Oid standin)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(standin)};
	char	   *name = get_rel_name(standin);

	if (name != NULL)
		RunCatalogSPI(psprintf("DROP TABLE IF EXISTS %s",
							   quote_qualified_identifier(get_namespace_name(get_rel_namespace(standin)),
														  name)),
					  0, NULL, NULL, NULL, SPI_OK_UTILITY, NULL, NULL);
	RunCatalogSPI("DELETE FROM shardext.cdc_table WHERE standin = $1",
				  1, argtypes, values, NULL, SPI_OK_DELETE, NULL, NULL);
}

/*
 * CheckShardOwners refuses a stand-in whose caller does not own the
 * shards that would be decoded as it (tables named <stand-in>_<digits> of
 * its schema): nobody may publish another role's rows under a table of
 * theirs.  Administrators may.
 */
static void
CheckShardOwners(Oid standin)
{
	Oid			argtypes[3] = {OIDOID, OIDOID, TEXTOID};
	Datum		values[3];
	char	   *name = get_rel_name(standin);

	if (IsShardextAdmin(GetUserId()))
		return;
	values[0] = ObjectIdGetDatum(get_rel_namespace(standin));
	values[1] = ObjectIdGetDatum(GetUserId());
	values[2] = CStringGetTextDatum(name);
	if (RunCatalogSPI("SELECT 1 FROM pg_catalog.pg_class c WHERE c.relnamespace = $1 "
					  "AND c.relowner <> $2 "
					  "AND pg_catalog.left(c.relname::text, pg_catalog.length($3)) = $3 "
					  "AND pg_catalog.substr(c.relname::text, pg_catalog.length($3) + 1) "
					  "    OPERATOR(pg_catalog.~) '^_[0-9]+$'",
					  3, argtypes, values, NULL, SPI_OK_SELECT, NULL, NULL) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must own the shards of table \"%s\" to publish it", name)));
}

/*
 * shardext.cdc_worker_publish(standin regclass, table_id oid, method
 * "char", emits bool, publications name[]): records the stand-in of a
 * table (replacing a former one) and adds it to the publications.  The
 * caller must own the stand-in (and its shards).
 */
Datum
shardext_cdc_worker_publish(PG_FUNCTION_ARGS)
{
	Oid			standin = PG_GETARG_OID(0);
	Oid			tableId = PG_GETARG_OID(1);
	ArrayType  *publications = PG_GETARG_ARRAYTYPE_P(4);
	Oid			argtypes[4] = {OIDOID, OIDOID, CHAROID, BOOLOID};
	Datum		values[4];
	Datum		former;
	bool		isnull;
	Datum	   *names;
	int			count;

	if (!pg_class_ownercheck(standin, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(standin));
	CheckShardOwners(standin);

	values[0] = ObjectIdGetDatum(tableId);
	if (RunCatalogSPI("SELECT standin FROM shardext.cdc_table WHERE table_id = $1",
					  1, argtypes, values, NULL, SPI_OK_SELECT, &former, &isnull) > 0 &&
		DatumGetObjectId(former) != standin)
		DropStandin(DatumGetObjectId(former));

	values[0] = ObjectIdGetDatum(standin);
	values[1] = ObjectIdGetDatum(tableId);
	values[2] = PG_GETARG_DATUM(2);
	values[3] = PG_GETARG_DATUM(3);
	RunCatalogSPI("DELETE FROM shardext.cdc_table WHERE standin = $1",
				  1, argtypes, values, NULL, SPI_OK_DELETE, NULL, NULL);
	RunCatalogSPI("INSERT INTO shardext.cdc_table VALUES ($1, $2, $3, $4)",
				  4, argtypes, values, NULL, SPI_OK_INSERT, NULL, NULL);

	deconstruct_array(publications, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR,
					  &names, NULL, &count);
	for (int i = 0; i < count; i++)
	{
		char	   *pubname = NameStr(*DatumGetName(names[i]));

		if (!IsCdcPublication(pubname))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("\"%s\" is not a publication of change data capture", pubname)));
		RunCatalogSPI(psprintf("ALTER PUBLICATION %s ADD TABLE %s",
							   quote_identifier(pubname),
							   quote_qualified_identifier(get_namespace_name(get_rel_namespace(standin)),
														  get_rel_name(standin))),
					  0, NULL, NULL, NULL, SPI_OK_UTILITY, NULL, NULL);
	}
	InvalidateCdcRecords();
	PG_RETURN_VOID();
}

/*
 * shardext.cdc_worker_unpublish(table_id oid): drops the table's stand-in,
 * which leaves every publication with it.
 */
Datum
shardext_cdc_worker_unpublish(PG_FUNCTION_ARGS)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {PG_GETARG_DATUM(0)};
	Datum		standin;
	bool		isnull;

	if (RunCatalogSPI("SELECT standin FROM shardext.cdc_table WHERE table_id = $1",
					  1, argtypes, values, NULL, SPI_OK_SELECT, &standin, &isnull) == 0)
		PG_RETURN_VOID();
	if (get_rel_name(DatumGetObjectId(standin)) != NULL &&
		!pg_class_ownercheck(DatumGetObjectId(standin), GetUserId()) &&
		!IsShardextAdmin(GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE,
					   get_rel_name(DatumGetObjectId(standin)));
	DropStandin(DatumGetObjectId(standin));
	InvalidateCdcRecords();
	PG_RETURN_VOID();
}

/*
 * shardext.cdc_worker_set_emitter(emits bool): whether this node streams
 * the changes of reference tables (exactly one node does).
 */
Datum
shardext_cdc_worker_set_emitter(PG_FUNCTION_ARGS)
{
	Oid			argtypes[1] = {BOOLOID};
	Datum		values[1] = {PG_GETARG_DATUM(0)};

	EnsureShardextAdmin("shardext.cdc_worker_set_emitter");
	RunCatalogSPI("UPDATE shardext.cdc_table SET emits = $1 WHERE method = 'r'",
				  1, argtypes, values, NULL, SPI_OK_UPDATE, NULL, NULL);
	InvalidateCdcRecords();
	PG_RETURN_VOID();
}

/*
 * CdcStandinCopyQuery returns, for COPY <stand-in> [(columns)] TO STDOUT
 * in a WAL sender (how a subscriber's initial table synchronization reads
 * a published table), a COPY of this node's shards of the table instead
 * of the empty stand-in, in the snapshot of the synchronization's slot;
 * NULL for any other COPY.  A node that does not stream a reference table
 * copies its (empty) stand-in.  Shards with clipped names are not found.
 */
char *
CdcStandinCopyQuery(CopyStmt *stmt)
{
	Oid			argtypes[3] = {OIDOID, OIDOID, TEXTOID};
	Datum		values[3];
	Oid			standin;
	Datum		emits;
	bool		isnull;
	StringInfoData columns;
	StringInfoData query;
	ListCell   *cell;
	uint64		shardCount;

	if (!am_walsender || stmt->is_from || stmt->relation == NULL || stmt->filename != NULL ||
		!OidIsValid(CdcCatalogRelid("cdc_table", true)))
		return NULL;
	standin = RangeVarGetRelid(stmt->relation, AccessShareLock, true);
	values[0] = ObjectIdGetDatum(standin);
	if (!OidIsValid(standin) ||
		RunCatalogSPI("SELECT emits FROM shardext.cdc_table WHERE standin = $1", 1, argtypes,
					  values, NULL, SPI_OK_SELECT, &emits, &isnull) == 0 ||
		!DatumGetBool(emits))
		return NULL;

	initStringInfo(&columns);
	if (stmt->attlist != NIL)
	{
		foreach(cell, stmt->attlist)
			appendStringInfo(&columns, "%s%s", columns.len > 0 ? ", " : "",
							 quote_identifier(strVal(lfirst(cell))));
	}
	else
	{
		Relation	rel = relation_open(standin, AccessShareLock);
		TupleDesc	desc = RelationGetDescr(rel);

		for (int i = 0; i < desc->natts; i++)
		{
			if (!TupleDescAttr(desc, i)->attisdropped)
				appendStringInfo(&columns, "%s%s", columns.len > 0 ? ", " : "",
								 quote_identifier(NameStr(TupleDescAttr(desc, i)->attname)));
		}
		relation_close(rel, AccessShareLock);
	}

	values[0] = ObjectIdGetDatum(get_rel_namespace(standin));
	values[1] = ObjectIdGetDatum(standin);
	values[2] = CStringGetTextDatum(get_rel_name(standin));
	initStringInfo(&query);
	appendStringInfo(&query, "COPY (SELECT %s FROM ONLY %s WHERE false", columns.data,
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(standin)),
												get_rel_name(standin)));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT pg_catalog.quote_ident(n.nspname) || '.' || "
							  "pg_catalog.quote_ident(c.relname) FROM pg_catalog.pg_class c "
							  "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
							  "WHERE c.relnamespace = $1 AND c.oid <> $2 AND c.relkind = 'r' "
							  "AND pg_catalog.left(c.relname::text, pg_catalog.length($3)) = $3 "
							  "AND pg_catalog.substr(c.relname::text, pg_catalog.length($3) + 1) "
							  "    OPERATOR(pg_catalog.~) '^_[1-9][0-9]*$' ORDER BY 1",
							  3, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not list the shards of \"%s\"", get_rel_name(standin));
	shardCount = SPI_processed;
	for (uint64 i = 0; i < shardCount; i++)
		appendStringInfo(&query, " UNION ALL SELECT %s FROM ONLY %s", columns.data,
						 SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	SPI_finish();
	appendStringInfoString(&query, ") TO STDOUT");
	return query.data;
}

/* CdcCopyStatement makes the utility statement of a COPY query text */
PlannedStmt *
CdcCopyStatement(const char *query)
{
	RawStmt    *raw = linitial_node(RawStmt, raw_parser(query, RAW_PARSE_DEFAULT));
	PlannedStmt *pstmt = makeNode(PlannedStmt);

	pstmt->commandType = CMD_UTILITY;
	pstmt->canSetTag = true;
	pstmt->utilityStmt = raw->stmt;
	pstmt->stmt_location = 0;
	pstmt->stmt_len = strlen(query);
	return pstmt;
}
