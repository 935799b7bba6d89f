/*-------------------------------------------------------------------------
 *
 * global_index.c
 *	  shardext_create_global_index(), shardext_drop_global_index() and
 *	  shardext_check_global_index(): global secondary indexes of
 *	  distributed tables.
 *
 * A global index is a hidden distributed table in schema shardext_gidx
 * (the index table), distributed by the first indexed column, that maps
 * the indexed values of the base table's rows to their distribution
 * values: one row per distinct (indexed values, distribution value), plus
 * the number of base rows behind it for an index that is not unique.  Rows
 * whose indexed values contain a NULL have no entry (they match no
 * equality and, as in PostgreSQL, never conflict).  The index table's
 * primary key (the indexed columns of a unique index; those and the
 * distribution value otherwise) makes its shards enforce uniqueness: all
 * entries of one value are in one shard.  Every write path keeps it in
 * step within the same distributed transaction (executor/
 * global_index_writes.c); queries that pin the indexed columns look the
 * value up there first (planner/global_index_planner.c).
 *
 * The index table belongs to the base table's owner and its privileges
 * follow the base table's (SyncGlobalIndexPrivileges): writers of the base
 * table may write it, readers read it, since remote work runs as the
 * calling user.  shardext refuses direct writes to it through the
 * coordinator.  It depends on the indexed columns (pg_depend, automatic),
 * so DROP TABLE and ALTER TABLE ... DROP COLUMN drop it with them, and the
 * drop event trigger drops its shards.
 *
 * Building takes a SHARE lock on the base table: reads go on, writes
 * through the coordinator wait until the build commits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
#include "utils/varlena.h"

#include "shardext/distributed_executor.h"
#include "shardext/global_index.h"
#include "shardext/metadata.h"
#include "shardext/operations.h"
#include "shardext/pg_compat.h"
#include "shardext/privileges.h"

PG_FUNCTION_INFO_V1(shardext_create_global_index);
PG_FUNCTION_INFO_V1(shardext_drop_global_index);
PG_FUNCTION_INFO_V1(shardext_check_global_index);

static DistTableCacheEntry *CheckBaseTable(Relation rel);
static int	ResolveIndexColumns(Relation rel, DistTableCacheEntry *entry, const char *columns,
								AttrNumber *attnums);
static char *ChooseGlobalIndexName(Relation rel, AttrNumber *attnums, int count,
								   const char *requested);
static Oid	CreateIndexTable(Relation rel, DistTableCacheEntry *entry, const char *name,
							 AttrNumber *attnums, int count, bool isUnique);
static void FillIndexTable(Relation rel, GlobalIndex *index);
static void RunSPI(const char *sql, int expected);
static void RunIndexTableSPI(const char *sql, int expected);
static char *ColumnDefinition(Relation rel, AttrNumber attnum);
static char *IndexTableName(const char *name);
static char *KeyColumnList(Oid baseRelid, GlobalIndex *index, const char *prefix);
static void SyncIndexPrivileges(Oid baseRelid, GlobalIndex *index);
static List *IndexPrivilegeCommands(Oid baseRelid, GlobalIndex *index);
static void NoteMissingLocalIndex(Relation rel, AttrNumber attnum);

/*
 * shardext_create_global_index(table_name regclass, columns text,
 *	 is_unique boolean DEFAULT false, index_name text DEFAULT NULL) -> text
 */
Datum
shardext_create_global_index(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *columns;
	bool		isUnique;
	Relation	rel;
	DistTableCacheEntry *entry;
	AttrNumber	attnums[INDEX_MAX_KEYS];
	int			count;
	char	   *name;
	Oid			indexRelid;
	GlobalIndex index;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table_name, columns and is_unique must not be NULL")));
	relid = PG_GETARG_OID(0);
	columns = text_to_cstring(PG_GETARG_TEXT_PP(1));
	isUnique = PG_GETARG_BOOL(2);

	EnsureShardextReady();
	EnsureGlobalIndexCatalog();

	/* readers go on; writers through this coordinator wait for the build */
	rel = table_open(relid, ShareLock);
	entry = CheckBaseTable(rel);
	count = ResolveIndexColumns(rel, entry, columns, attnums);
	name = ChooseGlobalIndexName(rel, attnums, count,
								 PG_ARGISNULL(3) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(3)));

	indexRelid = CreateIndexTable(rel, entry, name, attnums, count, isUnique);
	InsertGlobalIndex(indexRelid, name, relid, count, attnums, isUnique);
	CommandCounterIncrement();

	memset(&index, 0, sizeof(index));
	index.indexRelid = indexRelid;
	index.name = name;
	index.baseRelid = relid;
	index.isUnique = isUnique;
	index.columnCount = count;
	index.baseAttnums = attnums;
	SyncIndexPrivileges(relid, &index);
	FillIndexTable(rel, &index);
	NoteMissingLocalIndex(rel, attnums[0]);

	table_close(rel, NoLock);
	PG_RETURN_TEXT_P(cstring_to_text(name));
}

/*
 * CheckBaseTable: the caller owns the table, it is hash-distributed, and it
 * is no index table itself.
 */
static DistTableCacheEntry *
CheckBaseTable(Relation rel)
{
	Oid			relid = RelationGetRelid(rel);
	DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);

	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, RelationGetRelationName(rel));
	if (entry == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is not distributed", RelationGetRelationName(rel)),
				 errhint("A local table can have a unique index of its own: use CREATE UNIQUE INDEX.")));
	if (entry->method != DISTRIBUTE_BY_HASH)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot create a global index on reference table \"%s\"",
						RelationGetRelationName(rel)),
				 errdetail("Every node holds all rows of a reference table."),
				 errhint("Use CREATE [UNIQUE] INDEX: each copy enforces it for all rows.")));
	if (OidIsValid(entry->globalIndexBase))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is the index table of a global index",
						RelationGetRelationName(rel))));
	return entry;
}

/*
 * ResolveIndexColumns parses a column list as CREATE INDEX spells it
 * (identifiers separated by commas, quoted ones keep their case) into
 * attribute numbers, and checks each column; returns how many.
 */
static int
ResolveIndexColumns(Relation rel, DistTableCacheEntry *entry, const char *columns,
					AttrNumber *attnums)
{
	char	   *copy = pstrdup(columns);
	List	   *names = NIL;
	ListCell   *cell;
	int			count = 0;

	if (!SplitIdentifierString(copy, ',', &names) || names == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid column list \"%s\"", columns),
				 errhint("List the columns separated by commas, for example 'email' or "
						 "'tenant_id, external_ref'.")));
	if (list_length(names) > INDEX_MAX_KEYS - 1)
		ereport(ERROR,
				(errcode(ERRCODE_TOO_MANY_COLUMNS),
				 errmsg("cannot use more than %d columns in a global index", INDEX_MAX_KEYS - 1)));

	foreach(cell, names)
	{
		const char *name = lfirst(cell);
		AttrNumber	attnum = get_attnum(RelationGetRelid(rel), name);
		Form_pg_attribute attr;
		TypeCacheEntry *type;

		if (attnum <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of relation \"%s\" does not exist",
							name, RelationGetRelationName(rel))));
		attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
		for (int i = 0; i < count; i++)
		{
			if (attnums[i] == attnum)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("column \"%s\" appears twice in the global index", name)));
		}
		if (attnum == entry->distAttnum)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot include distribution column \"%s\" in a global index", name),
					 errdetail("Rows with the same distribution value are in the same shard already."),
					 errhint("Use CREATE [UNIQUE] INDEX with the distribution column: each shard "
							 "enforces it.")));
		if (attr->attgenerated)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot create a global index on generated column \"%s\"", name),
					 errdetail("Its values are computed on the workers.")));
		type = lookup_type_cache(attr->atttypid, TYPECACHE_EQ_OPR | TYPECACHE_CMP_PROC |
								 TYPECACHE_HASH_PROC);
		if (!OidIsValid(type->cmp_proc) || !OidIsValid(type->eq_opr) ||
			(count == 0 && !OidIsValid(type->hash_proc)))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("cannot create a global index on column \"%s\" of type %s",
							name, format_type_be(attr->atttypid)),
					 errdetail(count == 0 ?
							   "The first column of a global index needs a type with default hash "
							   "and btree operator classes: the index is distributed by it." :
							   "The type has no default btree operator class."),
					 errhint("Index a column whose type can be hashed and compared, such as "
							 "text, an integer or uuid.")));
		attnums[count++] = attnum;
	}
	return count;
}

/*
 * ChooseGlobalIndexName returns the requested name after checking it is
 * free, or one made like PostgreSQL names indexes (table_columns_gidx).
 * Global index names are unique in the database: they name the index table
 * in schema shardext_gidx.
 */
static char *
ChooseGlobalIndexName(Relation rel, AttrNumber *attnums, int count, const char *requested)
{
	Oid			namespaceId = get_namespace_oid(GLOBAL_INDEX_SCHEMA_NAME, false);
	StringInfoData columns;

	if (requested != NULL)
	{
		if (requested[0] == '\0' || strlen(requested) >= NAMEDATALEN)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_NAME),
					 errmsg("invalid global index name \"%s\"", requested),
					 errhint("Use a name of 1 to %d bytes.", NAMEDATALEN - 1)));
		if (FindGlobalIndexByName(requested) != NULL ||
			OidIsValid(get_relname_relid(requested, namespaceId)))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("global index \"%s\" already exists", requested)));
		return pstrdup(requested);
	}

	initStringInfo(&columns);
	for (int i = 0; i < count; i++)
	{
		if (i > 0)
			appendStringInfoChar(&columns, '_');
		appendStringInfoString(&columns,
							   NameStr(TupleDescAttr(RelationGetDescr(rel), attnums[i] - 1)->attname));
	}
	return ChooseRelationName(RelationGetRelationName(rel), columns.data, "gidx",
							  namespaceId, false);
}

/* "name type COLLATE collation NOT NULL" of a column of rel */
static char *
ColumnDefinition(Relation rel, AttrNumber attnum)
{
	Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "%s %s", quote_identifier(NameStr(attr->attname)),
					 format_type_extended(attr->atttypid, attr->atttypmod,
										  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
	if (OidIsValid(attr->attcollation))
		appendStringInfo(&buf, " COLLATE %s", generate_collation_name(attr->attcollation));
	appendStringInfoString(&buf, " NOT NULL");
	return buf.data;
}

/* the quoted, qualified name of the index table of a global index */
static char *
IndexTableName(const char *name)
{
	return quote_qualified_identifier(GLOBAL_INDEX_SCHEMA_NAME, name);
}

/*
 * CreateIndexTable creates the index table (locally, then distributed with
 * the base table's shard count), gives it the base table's owner and makes
 * it depend on the indexed columns.  Returns its OID.
 */
static Oid
CreateIndexTable(Relation rel, DistTableCacheEntry *entry, const char *name,
				 AttrNumber *attnums, int count, bool isUnique)
{
	Oid			relid = RelationGetRelid(rel);
	char	   *tableName = IndexTableName(name);
	StringInfoData sql;
	StringInfoData key;
	Oid			indexRelid;
	ObjectAddress indexObject;

	initStringInfo(&sql);
	initStringInfo(&key);
	appendStringInfo(&sql, "CREATE TABLE %s (", tableName);
	for (int i = 0; i < count; i++)
	{
		appendStringInfo(&sql, "%s, ", ColumnDefinition(rel, attnums[i]));
		appendStringInfo(&key, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(get_attname(relid, attnums[i], false)));
	}
	appendStringInfoString(&sql, ColumnDefinition(rel, entry->distAttnum));
	if (!isUnique)
	{
		appendStringInfo(&sql, ", %s pg_catalog.int8 NOT NULL",
						 quote_identifier(GlobalIndexCountColumn(relid, attnums, count)));
		appendStringInfo(&key, ", %s",
						 quote_identifier(get_attname(relid, entry->distAttnum, false)));
	}
	appendStringInfo(&sql, ", PRIMARY KEY (%s))", key.data);

	GlobalIndexInternalWriteDepth++;
	PG_TRY();
	{
		RunSPI(sql.data, SPI_OK_UTILITY);
		resetStringInfo(&sql);
		appendStringInfo(&sql, "SELECT pg_catalog.create_distributed_table(%s, %s, "
						 "colocate_with => 'default', shard_count => %d)",
						 quote_literal_cstr(tableName),
						 quote_literal_cstr(get_attname(relid, attnums[0], false)),
						 entry->shardCount);
		RunSPI(sql.data, SPI_OK_SELECT);
		indexRelid = get_relname_relid(name, get_namespace_oid(GLOBAL_INDEX_SCHEMA_NAME, false));
		if (get_rel_relkind(indexRelid) != RELKIND_RELATION)
			elog(ERROR, "index table \"%s\" was not created", name);
		if (rel->rd_rel->relowner != GetUserId())
		{
			resetStringInfo(&sql);
			appendStringInfo(&sql, "ALTER TABLE %s OWNER TO %s", tableName,
							 quote_identifier(GetUserNameFromId(rel->rd_rel->relowner, false)));
			RunSPI(sql.data, SPI_OK_UTILITY);
		}
	}
	PG_FINALLY();
	{
		GlobalIndexInternalWriteDepth--;
	}
	PG_END_TRY();

	/* DROP TABLE or DROP COLUMN of the base table drops the index table */
	ObjectAddressSet(indexObject, RelationRelationId, indexRelid);
	for (int i = 0; i < count; i++)
	{
		ObjectAddress column;

		ObjectAddressSubSet(column, RelationRelationId, relid, attnums[i]);
		recordDependencyOn(&indexObject, &column, DEPENDENCY_AUTO);
	}
	return indexRelid;
}

/* "prefix.a, prefix.b" of the indexed columns (prefix may be NULL) */
static char *
KeyColumnList(Oid baseRelid, GlobalIndex *index, const char *prefix)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < index->columnCount; i++)
		appendStringInfo(&buf, "%s%s%s%s", i > 0 ? ", " : "",
						 prefix ? prefix : "", prefix ? "." : "",
						 quote_identifier(get_attname(baseRelid, index->baseAttnums[i], false)));
	return buf.data;
}

/*
 * FillIndexTable writes the entries of the existing rows: one INSERT ...
 * SELECT through the distributed planner.  A unique index over duplicate
 * values fails with PostgreSQL's own error, naming the global index.
 */
static void
FillIndexTable(Relation rel, GlobalIndex *index)
{
	Oid			relid = RelationGetRelid(rel);
	DistTableCacheEntry *entry = GetDistTableCacheEntry(relid);
	char	   *keys = KeyColumnList(relid, index, NULL);
	const char *dist = quote_identifier(get_attname(relid, entry->distAttnum, false));
	StringInfoData sql;
	MemoryContext callerContext = CurrentMemoryContext;

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s SELECT %s, %s%s FROM ONLY %s WHERE ",
					 IndexTableName(index->name), keys, dist,
					 index->isUnique ? "" : ", pg_catalog.count(*)",
					 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												RelationGetRelationName(rel)));
	for (int i = 0; i < index->columnCount; i++)
		appendStringInfo(&sql, "%s%s IS NOT NULL", i > 0 ? " AND " : "",
						 quote_identifier(get_attname(relid, index->baseAttnums[i], false)));
	if (!index->isUnique)
		appendStringInfo(&sql, " GROUP BY %s, %s", keys, dist);

	GlobalIndexInternalWriteDepth++;
	PG_TRY();
	{
		RunSPI(sql.data, SPI_OK_INSERT);
	}
	PG_CATCH();
	{
		ErrorData  *error;

		GlobalIndexInternalWriteDepth--;
		MemoryContextSwitchTo(callerContext);
		error = CopyErrorData();
		if (error->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
			PG_RE_THROW();
		FlushErrorState();
		/* the shard's message names its constraint: name the global index */
		error->message = psprintf("duplicate key value violates unique constraint \"%s\"",
								  index->name);
		error->constraint_name = index->name;
		error->table_name = pstrdup(RelationGetRelationName(rel));
		error->schema_name = get_namespace_name(RelationGetNamespace(rel));
		error->context = NULL;
		ReThrowError(error);
	}
	PG_END_TRY();
	GlobalIndexInternalWriteDepth--;
}

/*
 * NoteMissingLocalIndex: a lookup through the global index finds the shards
 * that hold the value; within each, the query still searches the rows, so
 * without an index of the table that starts with the column it scans them.
 */
static void
NoteMissingLocalIndex(Relation rel, AttrNumber attnum)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *cell;

	foreach(cell, indexes)
	{
		Relation	index = index_open(lfirst_oid(cell), AccessShareLock);
		bool		leads = index->rd_index->indkey.values[0] == attnum &&
			index->rd_rel->relam == BTREE_AM_OID;

		index_close(index, AccessShareLock);
		if (leads)
			return;
	}
	ereport(NOTICE,
			(errmsg("table \"%s\" has no index on column \"%s\"", RelationGetRelationName(rel),
					get_attname(RelationGetRelid(rel), attnum, false)),
			 errdetail("Queries routed by the global index scan the shards they are sent to."),
			 errhint("Create one with CREATE INDEX ON %s (%s).",
					 quote_identifier(RelationGetRelationName(rel)),
					 quote_identifier(get_attname(RelationGetRelid(rel), attnum, false)))));
}

/*
 * EnsureGlobalIndexCatalog errors out while the extension is still at 1.0
 * (the library is newer than the installed SQL objects).
 */
void
EnsureGlobalIndexCatalog(void)
{
	Oid			namespaceId = get_namespace_oid("shardext", false);

	if (!OidIsValid(get_relname_relid("global_index", namespaceId)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("global indexes need shardext 1.1"),
				 errhint("Run ALTER EXTENSION shardext UPDATE.")));
}

/* RunSPI runs one statement and checks its result code */
static void
RunSPI(const char *sql, int expected)
{
	int			rc;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	rc = SPI_execute(sql, false, 0);
	if (rc != expected)
		elog(ERROR, "statement failed (%d): %s", rc, sql);
	SPI_finish();
}

/*
 * RunIndexTableSPI runs one statement on an index table: as an internal
 * write, which the guards against direct writes to index tables let pass.
 */
static void
RunIndexTableSPI(const char *sql, int expected)
{
	GlobalIndexInternalWriteDepth++;
	PG_TRY();
	{
		RunSPI(sql, expected);
	}
	PG_FINALLY();
	{
		GlobalIndexInternalWriteDepth--;
	}
	PG_END_TRY();
}

/*
 * shardext_drop_global_index(index_name text): drops the index table (the
 * drop event trigger drops its shards and its catalog rows).
 */
Datum
shardext_drop_global_index(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	GlobalIndex *index;

	EnsureShardextReady();
	index = FindGlobalIndexByName(name);
	if (index == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("global index \"%s\" does not exist", name),
				 errhint("shardext.global_indexes lists the global indexes.")));
	if (!pg_class_ownercheck(index->baseRelid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(index->baseRelid));
	DropGlobalIndexTable(index);
	PG_RETURN_VOID();
}

/* DropGlobalIndexTable drops the index table of a global index */
void
DropGlobalIndexTable(GlobalIndex *index)
{
	char	   *sql = psprintf("DROP TABLE %s", IndexTableName(index->name));

	/* lock the base table first, as its writers do */
	LockRelationOid(index->baseRelid, ShareRowExclusiveLock);
	RunIndexTableSPI(sql, SPI_OK_UTILITY);
}

/*
 * DropGlobalIndexesOfTable drops every global index of a table (before
 * undistribute_table turns it into a local table).
 */
void
DropGlobalIndexesOfTable(Oid baseRelid)
{
	List	   *indexes = list_copy(TableGlobalIndexes(baseRelid));
	ListCell   *cell;

	foreach(cell, indexes)
	{
		GlobalIndex *index = lfirst(cell);

		ereport(NOTICE,
				(errmsg("dropping global index \"%s\" of table \"%s\"", index->name,
						get_rel_name(baseRelid))));
		DropGlobalIndexTable(index);
	}
}

/*
 * shardext_check_global_index(index_name text) -> bigint compares the index
 * with its table both ways under a SHARE lock on the table (writers wait):
 * for every (indexed values, distribution value), the number of base rows
 * against the index entry.  Returns the number of missing plus dangling
 * entries (a wrong row count counts its difference), 0 when they agree.
 */
Datum
shardext_check_global_index(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	GlobalIndex *index;
	Oid			relid;
	const char *dist;
	const char *n;
	StringInfoData sql;
	StringInfoData join;
	int64		mismatches;
	bool		isnull;

	EnsureShardextReady();
	index = FindGlobalIndexByName(name);
	if (index == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("global index \"%s\" does not exist", name),
				 errhint("shardext.global_indexes lists the global indexes.")));
	relid = index->baseRelid;
	LockRelationOid(relid, ShareLock);
	dist = quote_identifier(get_attname(relid, GetDistTableCacheEntry(relid)->distAttnum, false));

	initStringInfo(&join);
	for (int i = 0; i < index->columnCount; i++)
	{
		const char *column = quote_identifier(get_attname(relid, index->baseAttnums[i], false));

		appendStringInfo(&join, "b.%s %s i.%s AND ", column,
						 QualifiedEqualityOperator(get_atttype(relid, index->baseAttnums[i])),
						 column);
	}
	appendStringInfo(&join, "b.%s %s i.%s", dist,
					 QualifiedEqualityOperator(GetDistTableCacheEntry(relid)->distType), dist);

	/* the row count column's name is free among the columns */
	n = quote_identifier(GlobalIndexCountColumn(relid, index->baseAttnums, index->columnCount));
	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "SELECT pg_catalog.sum(CASE WHEN b.%s IS NULL OR i.%s IS NULL OR b.%s <> i.%s "
					 "THEN GREATEST(pg_catalog.abs(coalesce(b.%s, 0) - coalesce(i.%s, 0)), 1) "
					 "ELSE 0 END)::pg_catalog.int8 "
					 "FROM (SELECT %s, %s, pg_catalog.count(*) AS %s FROM ONLY %s WHERE ",
					 n, n, n, n, n, n, KeyColumnList(relid, index, NULL), dist, n,
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
												get_rel_name(relid)));
	for (int i = 0; i < index->columnCount; i++)
		appendStringInfo(&sql, "%s%s IS NOT NULL", i > 0 ? " AND " : "",
						 quote_identifier(get_attname(relid, index->baseAttnums[i], false)));
	appendStringInfo(&sql, " GROUP BY %s, %s) b FULL JOIN (SELECT %s, %s, %s AS %s FROM %s) i ON %s",
					 KeyColumnList(relid, index, NULL), dist,
					 KeyColumnList(relid, index, NULL), dist,
					 index->isUnique ? "1::pg_catalog.int8" : n, n,
					 IndexTableName(index->name), join.data);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(sql.data, true, 0) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not check global index \"%s\"", name);
	mismatches = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
											 1, &isnull));
	SPI_finish();
	PG_RETURN_INT64(isnull ? 0 : mismatches);
}

/*
 * SyncGlobalIndexPrivileges gives the index tables of a table its owner and
 * privileges mapped from the table's (and its columns'): a role that may
 * read the table may read them (queries look values up there), a role that
 * may write it may read and write them (its writes maintain them), TRUNCATE
 * follows TRUNCATE.  Called after GRANT, REVOKE and owner changes of the
 * table; the statements reach the shards as DDL does.
 */
void
SyncGlobalIndexPrivileges(Oid baseRelid)
{
	ListCell   *cell;

	/* see the privileges the command just changed */
	CommandCounterIncrement();
	foreach(cell, TableGlobalIndexes(baseRelid))
		SyncIndexPrivileges(baseRelid, lfirst(cell));
}

/*
 * Who may do what on a table ($1), by its table and column privileges
 * (aclexplode), for every role that appears there or in the index table's
 * privileges ($2), its owner left out: reads, writes, truncates.
 */
static const char *const IndexPrivilegesQuery =
"WITH b AS (SELECT (pg_catalog.aclexplode(relacl)).* FROM pg_catalog.pg_class "
"           WHERE oid = $1 AND relacl IS NOT NULL "
"           UNION ALL "
"           SELECT (pg_catalog.aclexplode(attacl)).* FROM pg_catalog.pg_attribute "
"           WHERE attrelid = $1 AND attacl IS NOT NULL), "
"     i AS (SELECT (pg_catalog.aclexplode(relacl)).* FROM pg_catalog.pg_class "
"           WHERE oid = $2 AND relacl IS NOT NULL) "
"SELECT g.grantee, "
"       coalesce(pg_catalog.bool_or(b.privilege_type IN ('SELECT', 'INSERT', 'UPDATE', "
"                                                         'DELETE')), false), "
"       coalesce(pg_catalog.bool_or(b.privilege_type IN ('INSERT', 'UPDATE', 'DELETE')), "
"                false), "
"       coalesce(pg_catalog.bool_or(b.privilege_type = 'TRUNCATE'), false) "
"FROM (SELECT grantee FROM b UNION SELECT grantee FROM i) g "
"LEFT JOIN b ON b.grantee OPERATOR(pg_catalog.=) g.grantee "
"WHERE g.grantee OPERATOR(pg_catalog.<>) "
"      (SELECT relowner FROM pg_catalog.pg_class WHERE oid = $1) "
"GROUP BY g.grantee ORDER BY g.grantee";

/*
 * IndexPrivilegeCommands returns the GRANT and REVOKE statements that give
 * the index table of a global index the privileges that follow from its
 * table's (in the caller's memory).
 */
static List *
IndexPrivilegeCommands(Oid baseRelid, GlobalIndex *index)
{
	char	   *tableName = IndexTableName(index->name);
	Oid			argtypes[2] = {OIDOID, OIDOID};
	Datum		values[2] = {ObjectIdGetDatum(baseRelid), ObjectIdGetDatum(index->indexRelid)};
	MemoryContext callerContext = CurrentMemoryContext;
	List	   *commands = NIL;

	/* the owner may do everything; every other role what it may on the table */
	commands = lappend(commands,
					   psprintf("GRANT ALL ON TABLE %s TO %s", tableName,
								quote_identifier(GetUserNameFromId(RelationOwner(baseRelid),
																   false))));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(IndexPrivilegesQuery, 2, argtypes, values, NULL, false, 0) !=
		SPI_OK_SELECT)
		elog(ERROR, "could not read the privileges of table \"%s\"", get_rel_name(baseRelid));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Oid			grantee = DatumGetObjectId(SPI_getbinval(tuple, desc, 1, &isnull));
		bool		reads = DatumGetBool(SPI_getbinval(tuple, desc, 2, &isnull));
		bool		writes = DatumGetBool(SPI_getbinval(tuple, desc, 3, &isnull));
		bool		truncates = DatumGetBool(SPI_getbinval(tuple, desc, 4, &isnull));
		MemoryContext spiContext = MemoryContextSwitchTo(callerContext);
		char	   *role = grantee == InvalidOid ? "PUBLIC" :
			pstrdup(quote_identifier(GetUserNameFromId(grantee, false)));
		StringInfoData privileges;

		commands = lappend(commands, psprintf("REVOKE ALL ON TABLE %s FROM %s", tableName, role));
		initStringInfo(&privileges);
		if (reads || writes)
			appendStringInfoString(&privileges, "SELECT");
		if (writes)
			appendStringInfoString(&privileges, ", INSERT, UPDATE, DELETE");
		if (truncates)
			appendStringInfo(&privileges, "%sTRUNCATE", privileges.len > 0 ? ", " : "");
		if (privileges.len > 0)
			commands = lappend(commands, psprintf("GRANT %s ON TABLE %s TO %s",
												  privileges.data, tableName, role));
		MemoryContextSwitchTo(spiContext);
	}
	SPI_finish();
	return commands;
}

/*
 * SyncIndexPrivileges gives an index table its table's owner, then the
 * privileges that follow from the table's (see SyncGlobalIndexPrivileges).
 */
static void
SyncIndexPrivileges(Oid baseRelid, GlobalIndex *index)
{
	Oid			baseOwner = RelationOwner(baseRelid);
	ListCell   *cell;

	GlobalIndexInternalWriteDepth++;
	PG_TRY();
	{
		if (RelationOwner(index->indexRelid) != baseOwner)
			RunSPI(psprintf("ALTER TABLE %s OWNER TO %s", IndexTableName(index->name),
							quote_identifier(GetUserNameFromId(baseOwner, false))),
				   SPI_OK_UTILITY);
		foreach(cell, IndexPrivilegeCommands(baseRelid, index))
			RunSPI(lfirst(cell), SPI_OK_UTILITY);
	}
	PG_FINALLY();
	{
		GlobalIndexInternalWriteDepth--;
	}
	PG_END_TRY();
}

/*
 * RenameGlobalIndexColumn renames a column of the index tables after the
 * same column of their table was renamed (attnum): the index tables carry
 * the table's column names, which shardext uses to write them and which
 * unique violations report.
 */
void
RenameGlobalIndexColumn(Oid baseRelid, AttrNumber attnum, const char *oldName,
						const char *newName)
{
	DistTableCacheEntry *entry = GetDistTableCacheEntry(baseRelid);
	ListCell   *cell;

	foreach(cell, entry->globalIndexes)
	{
		GlobalIndex *index = lfirst(cell);
		bool		covered = (attnum == entry->distAttnum);
		char	   *sql;

		for (int i = 0; i < index->columnCount; i++)
			covered |= (index->baseAttnums[i] == attnum);
		if (!covered)
			continue;
		if (strncmp(newName, "shardext_count", strlen("shardext_count")) == 0 && !index->isUnique)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_COLUMN),
					 errmsg("column name \"%s\" is reserved for the row counts of global index \"%s\"",
							newName, index->name)));
		sql = psprintf("ALTER TABLE %s RENAME COLUMN %s TO %s", IndexTableName(index->name),
					   quote_identifier(oldName), quote_identifier(newName));
		RunIndexTableSPI(sql, SPI_OK_UTILITY);
	}
}

/*
 * RejectIndexedColumnChange refuses an ALTER TABLE that would change an
 * indexed column of a global index (its values' hashes place the entries).
 */
void
RejectIndexedColumnChange(Oid baseRelid, const char *column, const char *what)
{
	AttrNumber	attnum = get_attnum(baseRelid, column);
	ListCell   *cell;

	foreach(cell, TableGlobalIndexes(baseRelid))
	{
		GlobalIndex *index = lfirst(cell);

		for (int i = 0; i < index->columnCount; i++)
		{
			if (index->baseAttnums[i] == attnum)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot %s column \"%s\" of global index \"%s\"",
								what, column, index->name),
						 errhint("Drop the global index with shardext_drop_global_index(), "
								 "change the column and create the index again.")));
		}
	}
}
