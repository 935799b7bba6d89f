/*-------------------------------------------------------------------------
 *
 * foreign_keys.c
 *	  Which foreign keys the shards of distributed and reference tables can
 *	  enforce: checked when a table is distributed (create_distributed_table,
 *	  create_reference_table) and when DDL adds a foreign key
 *	  (ddl_propagation.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_constraint.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "shardext/metadata.h"
#include "shardext/operations.h"

/*
 * CheckForeignKeyAllowed refuses foreign keys shards cannot enforce.  A
 * shard can check a foreign key only against rows on its own node: the
 * referenced table must be a reference table (a copy on every node), or a
 * distributed table co-located with the referencing one whose distribution
 * column the key maps to the referencing table's distribution column.
 */
void
CheckForeignKeyAllowed(Oid constraintOid)
{
	HeapTuple	tuple = SearchSysCache1(CONSTROID, ObjectIdGetDatum(constraintOid));
	Form_pg_constraint con;
	Oid			referencingId;
	Oid			referencedId;
	DistTableCacheEntry *referencing;
	DistTableCacheEntry *referenced;
	char	   *name;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for constraint %u", constraintOid);
	con = (Form_pg_constraint) GETSTRUCT(tuple);
	referencingId = con->conrelid;
	referencedId = con->confrelid;
	name = pstrdup(NameStr(con->conname));
	referencing = GetDistTableCacheEntry(referencingId);
	referenced = GetDistTableCacheEntry(referencedId);

	if (referencing == NULL && referenced == NULL)
	{
		ReleaseSysCache(tuple);
		return;
	}
	if (referencing == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot create foreign key \"%s\" from local table \"%s\" to "
						"distributed table \"%s\"", name, get_rel_name(referencingId),
						get_rel_name(referencedId)),
				 errdetail("The rows of \"%s\" live on the worker nodes, where a local "
						   "table cannot check them.", get_rel_name(referencedId)),
				 errhint("Distribute \"%s\" as well (co-located, or as a reference table).",
						 get_rel_name(referencingId))));
	if (referenced == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot create foreign key \"%s\" from distributed table \"%s\" "
						"to local table \"%s\"", name, get_rel_name(referencingId),
						get_rel_name(referencedId)),
				 errdetail("Shards can only check foreign keys against rows on their "
						   "own node."),
				 errhint("Make \"%s\" a reference table with create_reference_table().",
						 get_rel_name(referencedId))));

	if (referenced->method == DISTRIBUTE_BY_REFERENCE)
	{
		ReleaseSysCache(tuple);
		return;
	}
	if (referencing->method == DISTRIBUTE_BY_REFERENCE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot create foreign key \"%s\" from reference table \"%s\" "
						"to distributed table \"%s\"", name, get_rel_name(referencingId),
						get_rel_name(referencedId)),
				 errdetail("Each node holds all rows of a reference table but only some "
						   "rows of a distributed table."),
				 errhint("Make \"%s\" a reference table too, or distribute \"%s\".",
						 get_rel_name(referencedId), get_rel_name(referencingId))));

	if (referencing->colocationId != referenced->colocationId)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot create foreign key \"%s\" between tables \"%s\" and \"%s\" "
						"that are not co-located", name, get_rel_name(referencingId),
						get_rel_name(referencedId)),
				 errdetail("Shards can only check foreign keys against rows on their "
						   "own node, which co-located tables guarantee."),
				 errhint("Distribute \"%s\" with colocate_with => '%s'.",
						 get_rel_name(referencingId), get_rel_name(referencedId))));

	{
		bool		isnull;
		Datum		conkeyDatum = SysCacheGetAttr(CONSTROID, tuple,
												  Anum_pg_constraint_conkey, &isnull);
		Datum		confkeyDatum = SysCacheGetAttr(CONSTROID, tuple,
												   Anum_pg_constraint_confkey, &isnull);
		ArrayType  *conkey = DatumGetArrayTypeP(conkeyDatum);
		ArrayType  *confkey = DatumGetArrayTypeP(confkeyDatum);
		int16	   *keys = (int16 *) ARR_DATA_PTR(conkey);
		int16	   *fkeys = (int16 *) ARR_DATA_PTR(confkey);
		bool		paired = false;

		for (int i = 0; i < ARR_DIMS(conkey)[0]; i++)
		{
			if (keys[i] == referencing->distAttnum && fkeys[i] == referenced->distAttnum)
				paired = true;
		}
		if (!paired)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot create foreign key \"%s\" from \"%s\" to \"%s\"", name,
							get_rel_name(referencingId), get_rel_name(referencedId)),
					 errdetail("A foreign key between distributed tables must map the "
							   "distribution column \"%s\" to the distribution column "
							   "\"%s\", so that the referenced row is on the same node.",
							   get_attname(referencingId, referencing->distAttnum, false),
							   get_attname(referencedId, referenced->distAttnum, false)),
					 errhint("Include both distribution columns in the foreign key.")));
	}
	ReleaseSysCache(tuple);
}

/*
 * CheckForeignKeysOfNewTable checks the foreign keys of a table that has
 * just been recorded as distributed (create_distributed_table and
 * create_reference_table).
 */
void
CheckForeignKeysOfNewTable(Oid relid)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	List	   *foreignKeys = RelationGetFKeyList(rel);
	ListCell   *cell;

	foreach(cell, foreignKeys)
		CheckForeignKeyAllowed(((ForeignKeyCacheInfo *) lfirst(cell))->conoid);
	relation_close(rel, AccessShareLock);
}
