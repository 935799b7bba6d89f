/*-------------------------------------------------------------------------
 *
 * table_ddl.c
 *	  The SQL that creates a shard table on a worker: the columns,
 *	  defaults, constraints, indexes and storage options of the local table,
 *	  under the shard's name.
 *
 * Expressions are deparsed with search_path = pg_catalog (the setting of
 * remote sessions), so every object outside pg_catalog comes out
 * schema-qualified.  Sequence defaults and identity columns are left off the
 * shard: the coordinator evaluates them, so values stay unique across
 * shards.  Index and index-backed constraint names get the shard id appended,
 * because index names are unique per schema and several shards of a table
 * share a schema on one worker.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/pg_am.h"
#include "catalog/pg_attrdef.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "nodes/nodeFuncs.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"

#include "shardext/deparser.h"
#include "shardext/global_index.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"

static void AppendColumnDefinitions(StringInfo buf, Relation rel);
static char *ForeignKeyShardDefinition(Form_pg_constraint con, const char *definition,
									   int64 shardId, ReferencedShardFunction referencedShard,
									   void *arg);
static char *ColumnDefaultExpression(Relation rel, AttrNumber attnum, bool *usesSequence);
static void AppendStorageOptions(StringInfo buf, Relation rel);
static char *ShardCreateCommandParts(Oid relid, int64 shardId, int parts,
									 ReferencedShardFunction referencedShard, void *arg);
static char *ShardConstraintCommandExtended(Oid constraintOid, const char *shardName,
											int64 shardId,
											ReferencedShardFunction referencedShard,
											void *arg);
static void AppendConstraintCommands(StringInfo buf, Relation rel, const char *shardName,
									 int64 shardId, int parts,
									 ReferencedShardFunction referencedShard, void *arg);
static void AppendIndexCommands(StringInfo buf, Relation rel, const char *shardName,
								int64 shardId);
static bool ContainsNextval(Node *node, void *context);
static bool IndexIsUnique(Oid indexOid);

/*
 * BeginSafeDeparse switches, until EndSafeDeparse, to the settings remote
 * sessions use: search_path = pg_catalog, so deparsed expressions qualify
 * their objects, and the ISO/postgres styles with full float precision, so
 * constants deparsed as text are read back as the same values whatever the
 * local session's DateStyle.
 */
int
BeginSafeDeparse(void)
{
	int			nestLevel = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("datestyle", "ISO",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("intervalstyle", "postgres",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("extra_float_digits", "3",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nestLevel;
}

void
EndSafeDeparse(int nestLevel)
{
	AtEOXact_GUC(true, nestLevel);
}

/*
 * ShardCreateCommand returns the commands (';'-separated) that create the
 * shard table of relid with id shardId, with its constraints and indexes.
 */
char *
ShardCreateCommand(Oid relid, int64 shardId)
{
	return ShardCreateCommandParts(relid, shardId, SHARD_DDL_ALL, NULL, NULL);
}

/*
 * ShardCreateTableCommand is the part of ShardCreateCommand that builds the
 * table without its keys and indexes (CHECK constraints and the replica
 * identity included), so that a bulk copy need not maintain them.
 */
char *
ShardCreateTableCommand(Oid relid, int64 shardId)
{
	return ShardCreateCommandParts(relid, shardId, SHARD_DDL_TABLE, NULL, NULL);
}

/*
 * ShardCreateIndexCommands returns the primary key, unique and exclusion
 * constraints and the indexes of a shard made by ShardCreateTableCommand.
 */
char *
ShardCreateIndexCommands(Oid relid, int64 shardId)
{
	return ShardCreateCommandParts(relid, shardId, SHARD_DDL_INDEXES, NULL, NULL);
}

/*
 * ShardCreateForeignKeyCommands returns the foreign keys of a shard, which
 * come after the keys of every table they reference.  referencedShard, when
 * not NULL, names the shard of a referenced distributed table (for shards
 * the catalog does not know yet, such as the halves of a split); otherwise
 * the catalog pairs them.
 */
char *
ShardCreateForeignKeyCommands(Oid relid, int64 shardId,
							  ReferencedShardFunction referencedShard, void *arg)
{
	return ShardCreateCommandParts(relid, shardId, SHARD_DDL_FOREIGN_KEYS,
								   referencedShard, arg);
}

/* the parts of a shard's DDL that ShardCreateCommandParts returns */
static char *
ShardCreateCommandParts(Oid relid, int64 shardId, int parts,
						ReferencedShardFunction referencedShard, void *arg)
{
	StringInfoData buf;
	Relation	rel = relation_open(relid, AccessShareLock);
	char	   *shardName = QualifiedShardName(relid, shardId);
	int			nestLevel = BeginSafeDeparse();

	initStringInfo(&buf);
	if (parts & SHARD_DDL_TABLE)
	{
		appendStringInfo(&buf, "CREATE %sTABLE %s (",
						 rel->rd_rel->relpersistence == RELPERSISTENCE_UNLOGGED ?
						 "UNLOGGED " : "", shardName);
		AppendColumnDefinitions(&buf, rel);
		appendStringInfoChar(&buf, ')');

		if (rel->rd_rel->relam != HEAP_TABLE_AM_OID && OidIsValid(rel->rd_rel->relam))
			appendStringInfo(&buf, " USING %s",
							 quote_identifier(get_am_name(rel->rd_rel->relam)));
		AppendStorageOptions(&buf, rel);
		appendStringInfoString(&buf, ";\n");
	}
	AppendConstraintCommands(&buf, rel, shardName, shardId, parts, referencedShard, arg);
	if (parts & SHARD_DDL_INDEXES)
		AppendIndexCommands(&buf, rel, shardName, shardId);

	if ((parts & SHARD_DDL_TABLE) && rel->rd_rel->relreplident == REPLICA_IDENTITY_FULL)
		appendStringInfo(&buf, "ALTER TABLE %s REPLICA IDENTITY FULL;\n", shardName);

	EndSafeDeparse(nestLevel);
	relation_close(rel, AccessShareLock);
	return buf.data;
}

/*
 * ShardDropCommand returns the command that drops a shard table, given the
 * table's schema and name (which survive the table in a drop trigger).
 */
char *
ShardDropCommand(const char *schemaName, const char *relname, int64 shardId)
{
	return psprintf("DROP TABLE IF EXISTS %s CASCADE",
					quote_qualified_identifier(schemaName,
											   ShardNameFromParts(relname, shardId)));
}

/* WorkerCreateSchemaCommand makes sure the table's schema exists on a worker */
char *
WorkerCreateSchemaCommand(Oid relid)
{
	return WorkerEnsureSchemaCommand(get_namespace_name(get_rel_namespace(relid)));
}

/*
 * WorkerEnsureSchemaCommand returns a command that creates a schema on a
 * node unless it exists there.  Not CREATE SCHEMA IF NOT EXISTS: that
 * checks the CREATE privilege on the database even when the schema
 * exists, and a table owner without it must still be able to distribute a
 * table of a schema that exists on the nodes.  The name travels as a
 * literal inside a dollar-quoted block whose tag does not occur in it.
 */
char *
WorkerEnsureSchemaCommand(const char *schemaName)
{
	char	   *literal = quote_literal_cstr(schemaName);
	char	   *tag = pstrdup("$shardext$");

	for (int i = 1; strstr(literal, tag) != NULL; i++)
		tag = psprintf("$shardext%d$", i);
	return psprintf("DO %s BEGIN "
					"IF NOT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = %s) THEN "
					"EXECUTE pg_catalog.format('CREATE SCHEMA IF NOT EXISTS %%I', %s::pg_catalog.text); "
					"END IF; END %s",
					tag, literal, literal, tag);
}

/* ColumnListString returns "(a, b, c)" of the live columns, quoted */
char *
ColumnListString(Oid relid)
{
	StringInfoData buf;
	Relation	rel = relation_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	bool		first = true;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		if (attr->attisdropped || attr->attgenerated)
			continue;
		appendStringInfo(&buf, "%s%s", first ? "" : ", ",
						 quote_identifier(NameStr(attr->attname)));
		first = false;
	}
	appendStringInfoChar(&buf, ')');
	relation_close(rel, AccessShareLock);
	return buf.data;
}

static void
AppendColumnDefinitions(StringInfo buf, Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	bool		first = true;

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		if (attr->attisdropped)
			continue;
		if (!first)
			appendStringInfoString(buf, ", ");
		first = false;
		AppendColumnDefinition(buf, rel, attr->attnum);
	}
}

/*
 * NotNullConstraintName returns the name of a column's NOT NULL constraint
 * (PostgreSQL 18 names them), or NULL.
 */
char *
NotNullConstraintName(Oid relid, AttrNumber attnum)
{
#if PG_VERSION_NUM >= 180000
	HeapTuple	tuple = findNotNullConstraintAttnum(relid, attnum);

	if (HeapTupleIsValid(tuple))
		return pstrdup(NameStr(((Form_pg_constraint) GETSTRUCT(tuple))->conname));
#endif
	return NULL;
}

/*
 * AppendColumnDefinition appends "name type [COLLATE c] [DEFAULT e |
 * GENERATED ALWAYS AS (e) STORED | VIRTUAL] [[CONSTRAINT n] NOT NULL]" of
 * one column as shards have it: sequence defaults stay on the coordinator;
 * a NOT NULL constraint has the table's name (18).  The caller has set up
 * safe deparsing (BeginSafeDeparse).
 */
void
AppendColumnDefinition(StringInfo buf, Relation rel, AttrNumber attnum)
{
	Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);

	appendStringInfo(buf, "%s %s", quote_identifier(NameStr(attr->attname)),
					 format_type_extended(attr->atttypid, attr->atttypmod,
										  FORMAT_TYPE_TYPEMOD_GIVEN |
										  FORMAT_TYPE_FORCE_QUALIFY));

	if (OidIsValid(attr->attcollation) &&
		attr->attcollation != get_typcollation(attr->atttypid))
		appendStringInfo(buf, " COLLATE %s",
						 generate_collation_name(attr->attcollation));

	if (attr->atthasdef)
	{
		char	   *expression = ShardColumnDefault(rel, attnum);

		if (attr->attgenerated == ATTRIBUTE_GENERATED_STORED)
			appendStringInfo(buf, " GENERATED ALWAYS AS (%s) STORED", expression);
		else if (ColumnIsVirtual(attr))
			appendStringInfo(buf, " GENERATED ALWAYS AS (%s) VIRTUAL", expression);
		else if (expression != NULL)
			appendStringInfo(buf, " DEFAULT %s", expression);
	}

	if (attr->attnotnull)
	{
		char	   *name = NotNullConstraintName(RelationGetRelid(rel), attnum);

		if (name != NULL)
			appendStringInfo(buf, " CONSTRAINT %s", quote_identifier(name));
		appendStringInfoString(buf, " NOT NULL");
	}
}

/*
 * ShardColumnDefault returns the deparsed default (or generation)
 * expression a shard gets for a column, or NULL when it gets none (no
 * default, or one that draws from a sequence).
 */
char *
ShardColumnDefault(Relation rel, AttrNumber attnum)
{
	bool		usesSequence = false;
	char	   *expression;

	if (!TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atthasdef)
		return NULL;
	expression = ColumnDefaultExpression(rel, attnum, &usesSequence);
	if (usesSequence &&
		TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attgenerated == '\0')
		return NULL;
	return expression;
}

/*
 * ColumnDefaultExpression deparses a column's default (or generation)
 * expression and says whether it draws from a sequence.
 */
static char *
ColumnDefaultExpression(Relation rel, AttrNumber attnum, bool *usesSequence)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;

	for (int i = 0; constr != NULL && i < constr->num_defval; i++)
	{
		AttrDefault *def = &constr->defval[i];
		Node	   *expr;

		if (def->adnum != attnum)
			continue;
		expr = stringToNode(def->adbin);
		*usesSequence = ContainsNextval(expr, NULL);
		return deparse_expression(expr,
								  deparse_context_for(RelationGetRelationName(rel),
													  RelationGetRelid(rel)),
								  false, false);
	}
	elog(ERROR, "default of column %d of \"%s\" not found", attnum,
		 RelationGetRelationName(rel));
	return NULL;				/* keep compiler quiet */
}

static bool
ContainsNextval(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, FuncExpr) && ((FuncExpr *) node)->funcid == F_NEXTVAL)
		return true;
	return expression_tree_walker(node, ContainsNextval, context);
}

/* appends WITH (storage options) from pg_class.reloptions */
static void
AppendStorageOptions(StringInfo buf, Relation rel)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(RelationGetRelid(rel)));
	Datum		options;
	bool		isnull;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", RelationGetRelid(rel));

	options = SysCacheGetAttr(RELOID, tuple, Anum_pg_class_reloptions, &isnull);
	if (!isnull)
	{
		Datum	   *elements;
		int			count;

		deconstruct_array(DatumGetArrayTypeP(options), TEXTOID, -1, false,
						  TYPALIGN_INT, &elements, NULL, &count);
		appendStringInfoString(buf, " WITH (");
		for (int i = 0; i < count; i++)
		{
			char	   *option = TextDatumGetCString(elements[i]);
			char	   *equals = strchr(option, '=');

			if (equals == NULL)
				continue;
			*equals = '\0';
			appendStringInfo(buf, "%s%s = %s", i > 0 ? ", " : "",
							 quote_identifier(option), quote_literal_cstr(equals + 1));
		}
		appendStringInfoChar(buf, ')');
	}
	ReleaseSysCache(tuple);
}

/*
 * AppendConstraintCommands adds the table's constraints of the given parts:
 * CHECK (SHARD_DDL_TABLE), PRIMARY KEY, UNIQUE and EXCLUDE
 * (SHARD_DDL_INDEXES), FOREIGN KEY (SHARD_DDL_FOREIGN_KEYS).  (NOT NULL is
 * part of the column definitions, also where 18 makes it a constraint.)
 */
static void
AppendConstraintCommands(StringInfo buf, Relation rel, const char *shardName,
						 int64 shardId, int parts,
						 ReferencedShardFunction referencedShard, void *arg)
{
	Relation	conRel = table_open(ConstraintRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;

	ScanKeyInit(&key, Anum_pg_constraint_conrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(RelationGetRelid(rel)));
	scan = systable_beginscan(conRel, ConstraintRelidTypidNameIndexId, true,
							  NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_constraint con = (Form_pg_constraint) GETSTRUCT(tuple);
		int			part = con->contype == CONSTRAINT_FOREIGN ? SHARD_DDL_FOREIGN_KEYS :
			OidIsValid(con->conindid) ? SHARD_DDL_INDEXES : SHARD_DDL_TABLE;

		if ((parts & part) == 0 || ConstraintIsNotNull(con->contype))
			continue;
		appendStringInfo(buf, "%s;\n",
						 ShardConstraintCommandExtended(con->oid, shardName, shardId,
														referencedShard, arg));
	}
	systable_endscan(scan);
	table_close(conRel, AccessShareLock);
}

/*
 * ShardConstraintName returns the name a constraint has on shard shardId:
 * index-backed constraints get the shard id appended (index names are
 * unique per schema), the others keep their name.
 */
char *
ShardConstraintName(const char *name, bool indexBacked, int64 shardId)
{
	return indexBacked ? ShardNameFromParts(name, shardId) : pstrdup(name);
}

/*
 * ShardConstraintCommand returns "ALTER TABLE <shard> ADD CONSTRAINT ..."
 * for one constraint of a distributed or reference table.  A foreign key
 * references the shard of the referenced table that covers the same hash
 * range (co-located tables) or the single shard of a reference table; the
 * caller has checked that the foreign key is one shardext supports.
 */
char *
ShardConstraintCommand(Oid constraintOid, const char *shardName, int64 shardId)
{
	return ShardConstraintCommandExtended(constraintOid, shardName, shardId, NULL, NULL);
}

/*
 * ShardConstraintCommandExtended is ShardConstraintCommand with the shard a
 * foreign key references named by referencedShard (see
 * ShardCreateForeignKeyCommands).
 */
static char *
ShardConstraintCommandExtended(Oid constraintOid, const char *shardName, int64 shardId,
							   ReferencedShardFunction referencedShard, void *arg)
{
	HeapTuple	tuple = SearchSysCache1(CONSTROID, ObjectIdGetDatum(constraintOid));
	Form_pg_constraint con;
	char	   *definition;
	char	   *name;
	int			nestLevel = BeginSafeDeparse();

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for constraint %u", constraintOid);
	con = (Form_pg_constraint) GETSTRUCT(tuple);

	definition = TextDatumGetCString(DirectFunctionCall1(pg_get_constraintdef,
														 ObjectIdGetDatum(constraintOid)));
	name = ShardConstraintName(NameStr(con->conname), OidIsValid(con->conindid) &&
							   con->contype != CONSTRAINT_FOREIGN, shardId);
	if (con->contype == CONSTRAINT_FOREIGN)
		definition = ForeignKeyShardDefinition(con, definition, shardId, referencedShard, arg);
	ReleaseSysCache(tuple);
	EndSafeDeparse(nestLevel);

	return psprintf("ALTER TABLE %s ADD CONSTRAINT %s %s", shardName,
					quote_identifier(name), definition);
}

/*
 * ForeignKeyShardDefinition rewrites the "REFERENCES <table>(" of a foreign
 * key definition (deparsed with search_path = pg_catalog, so the name is
 * qualified) to the shard of the referenced table that pairs with shardId.
 */
static char *
ForeignKeyShardDefinition(Form_pg_constraint con, const char *definition, int64 shardId,
						  ReferencedShardFunction referencedShard, void *arg)
{
	DistTableCacheEntry *referencing;
	DistTableCacheEntry *referenced = GetDistTableCacheEntry(con->confrelid);
	ShardInterval *shard;
	int64		targetShardId;
	char	   *tableName;
	char	   *pattern;
	const char *match;
	StringInfoData buf;

	if (referenced == NULL || referenced->shardCount == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("foreign key \"%s\" references table \"%s\", which is not distributed",
						NameStr(con->conname), get_rel_name(con->confrelid))));
	if (referenced->method == DISTRIBUTE_BY_REFERENCE)
		targetShardId = referenced->shards[0].shardId;
	else if (referencedShard != NULL)
		targetShardId = referencedShard(con->confrelid, arg);
	else if ((shard = FindShardById(shardId, &referencing)) != NULL &&
			 shard->shardIndex < referenced->shardCount)
		targetShardId = referenced->shards[shard->shardIndex].shardId;
	else
		elog(ERROR, "no co-located shard for shard " INT64_FORMAT, shardId);

	tableName = quote_qualified_identifier(get_namespace_name(get_rel_namespace(con->confrelid)),
										   get_rel_name(con->confrelid));
	pattern = psprintf(" REFERENCES %s(", tableName);
	match = strstr(definition, pattern);
	if (match == NULL)
		elog(ERROR, "unexpected foreign key definition: %s", definition);

	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, definition, match - definition);
	appendStringInfo(&buf, " REFERENCES %s(",
					 QualifiedShardName(con->confrelid, targetShardId));
	appendStringInfoString(&buf, match + strlen(pattern));
	return buf.data;
}

/*
 * AppendIndexCommands adds the indexes that do not back a constraint.
 */
static void
AppendIndexCommands(StringInfo buf, Relation rel, const char *shardName, int64 shardId)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *cell;

	foreach(cell, indexes)
	{
		Oid			indexOid = lfirst_oid(cell);

		if (OidIsValid(get_index_constraint(indexOid)))
			continue;
		appendStringInfo(buf, "%s;\n", ShardIndexCommand(indexOid, shardName, shardId, false));
	}
	list_free(indexes);
}

/*
 * ShardIndexCommand returns the CREATE INDEX of one index for a shard.
 * pg_get_indexdef_string() starts with "CREATE [UNIQUE ]INDEX <name> ON
 * <schema>.<table> "; we rebuild that prefix with the shard's names.
 */
char *
ShardIndexCommand(Oid indexOid, const char *shardName, int64 shardId, bool concurrently)
{
	Oid			tableOid = IndexGetRelation(indexOid, false);
	char	   *indexName = get_rel_name(indexOid);
	bool		unique = IndexIsUnique(indexOid);
	char	   *definition;
	char	   *prefix;
	int			nestLevel = BeginSafeDeparse();

	definition = pg_get_indexdef_string(indexOid);
	EndSafeDeparse(nestLevel);
	prefix = psprintf("CREATE %sINDEX %s ON %s ", unique ? "UNIQUE " : "",
					  quote_identifier(indexName),
					  quote_qualified_identifier(get_namespace_name(get_rel_namespace(tableOid)),
												 get_rel_name(tableOid)));
	if (strncmp(definition, prefix, strlen(prefix)) != 0)
		elog(ERROR, "unexpected index definition: %s", definition);

	return psprintf("CREATE %sINDEX %s%s ON %s %s", unique ? "UNIQUE " : "",
					concurrently ? "CONCURRENTLY " : "",
					quote_identifier(ShardNameFromParts(indexName, shardId)),
					shardName, definition + strlen(prefix));
}

static bool
IndexIsUnique(Oid indexOid)
{
	HeapTuple	tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexOid));
	bool		unique;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for index %u", indexOid);
	unique = ((Form_pg_index) GETSTRUCT(tuple))->indisunique;
	ReleaseSysCache(tuple);
	return unique;
}

/*
 * GlobalIndexCountColumn names the row count column of a non-unique index
 * table: shardext_count, unless an indexed column has that name.
 */
char *
GlobalIndexCountColumn(Oid baseRelid, AttrNumber *attnums, int count)
{
	for (int suffix = 0;; suffix++)
	{
		char	   *name = suffix == 0 ? pstrdup("shardext_count") :
			psprintf("shardext_count_%d", suffix);
		bool		taken = false;

		for (int i = 0; i < count; i++)
		{
			if (strcmp(get_attname(baseRelid, attnums[i], false), name) == 0)
				taken = true;
		}
		if (!taken && strcmp(name, get_attname(baseRelid,
												GetDistTableCacheEntry(baseRelid)->distAttnum,
												false)) != 0)
			return name;
	}
}
