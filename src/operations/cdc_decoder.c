/*-------------------------------------------------------------------------
 *
 * cdc_decoder.c
 *	  The output plugin wrappers of change data capture: a worker decodes
 *	  the changes of shards as changes of their distributed tables, through
 *	  the plugin names consumers know (pgoutput, test_decoding).
 *
 * shardext installs two tiny libraries named pgoutput and test_decoding in
 * $libdir/shardext_cdc (src/plugins/shardext_cdc), which workers put first
 * on dynamic_library_path.  Each calls shardext_cdc_plugin_init(), which
 * loads the real plugin from $libdir and wraps its callbacks:
 *
 * - A change of a shard (a table named <table>_<shard id>, next to the
 *   table's stand-in, see cdc_worker.c) is handed to the real plugin as a
 *   change of the stand-in, the rows converted to its layout: relation
 *   messages and output carry the distributed table's schema, name and
 *   columns.  A truncate of shards truncates their stand-ins (once each).
 * - Internal data movement is left out.  Shard moves and splits write
 *   their copies through sessions with a replication origin (the initial
 *   copy, move_steps.c) or through subscriptions (the catching up), so
 *   transactions with an origin are filtered whole.  Changes of
 *   shardext's own tables (schemas shardext and shardext_gidx: catalogs,
 *   move markers, commit decisions, global index tables) are dropped.
 * - A reference table's copies change on every node; only the node whose
 *   stand-in record says emits streams them.
 *
 * pgoutput consumers get this treatment only when one of their
 * publications is a publication of change data capture (recorded in
 * shardext.cdc_publication, looked up when decoding starts); everything
 * else, such as the subscriptions of shard moves, gets pgoutput as it is.
 * Changes decoded before the consumer's publications existed are skipped
 * (pgoutput would fail on them; they precede what was published).
 * test_decoding consumers always get it, in databases with shardext.
 *
 * Decoding runs with a historic snapshot: the records are read from
 * shardext.cdc_table (a user_catalog_table) and the system catalogs only,
 * as of each change, and cached until a relation cache invalidation of
 * the records, a shard or a stand-in comes along with the decoded WAL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "replication/reorderbuffer.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tupconvert.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "replication/logical.h"
#include "replication/origin.h"
#include "replication/output_plugin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#include "shardext/pg_compat.h"
#include "shardext/cdc.h"
#include "shardext/metadata.h"
#include "shardext/shardext.h"

/* how a decoded relation is treated */
typedef enum CdcRelationKind
{
	CDC_RELATION_OTHER,			/* not shardext's: decoded as it is */
	CDC_RELATION_HIDDEN,		/* internal, or a reference table another node streams */
	CDC_RELATION_SHARD			/* decoded as its stand-in */
} CdcRelationKind;

typedef struct CdcRelation
{
	Oid			relid;			/* hash key */
	bool		valid;
	CdcRelationKind kind;
	Oid			standin;
	bool		mapBuilt;
	TupleConversionMap *map;	/* shard row -> stand-in row; NULL when alike */
} CdcRelation;

/* a record of shardext.cdc_table */
typedef struct CdcStandin
{
	Oid			standin;		/* hash key */
	Oid			namespaceId;
	NameData	name;
	bool		emits;
} CdcStandin;

/* the state of the decoding context of this process */
typedef struct CdcDecoder
{
	OutputPluginCallbacks real; /* the wrapped plugin's */
	bool		isPgoutput;
	bool		active;			/* shards decode as their tables */
	List	   *publicationNames;	/* pgoutput: the consumer's publications */
	bool		publicationsExist;
	Oid			recordsRelid;	/* shardext.cdc_table */
	Oid			internalNamespaces[2];
	HTAB	   *relations;		/* CdcRelation by relid */
	HTAB	   *standins;		/* CdcStandin by stand-in OID; NULL: not read */
	MemoryContext context;		/* child of the decoding context */
	MemoryContext changeContext;	/* reset after each change */
} CdcDecoder;

static CdcDecoder cdc;
static bool relcacheCallbackRegistered = false;

static void CdcStartup(LogicalDecodingContext *ctx, OutputPluginOptions *options,
					   bool is_init);
static void CdcShutdown(LogicalDecodingContext *ctx);
static bool CdcFilterByOrigin(LogicalDecodingContext *ctx, ReplOriginId origin_id);
static void CdcChange(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
					  Relation relation, ReorderBufferChange *change);
static void CdcStreamChange(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
							Relation relation, ReorderBufferChange *change);
static void CdcTruncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, int nrelations,
						Relation relations[], ReorderBufferChange *change);
static void CdcStreamTruncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
							  int nrelations, Relation relations[],
							  ReorderBufferChange *change);
static void DecodeChange(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						 Relation relation, ReorderBufferChange *change,
						 LogicalDecodeChangeCB callback);
static void DecodeTruncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						   int nrelations, Relation relations[], ReorderBufferChange *change,
						   LogicalDecodeTruncateCB callback);
static bool DecidesActive(void);
static List *PublicationNames(List *options);
static CdcRelation *LookupRelation(Relation relation);
static CdcStandin *FindStandin(Relation relation);
static void ReadStandins(void);
static void CdcRelcacheCallback(Datum arg, Oid relid);
static void ForgetDecoderState(void *arg);

/*
 * shardext_cdc_plugin_init is the output plugin init function of the
 * wrapper named plugin: the real plugin's callbacks, with ours around
 * startup, changes, truncates and the origin filter.
 */
void
shardext_cdc_plugin_init(OutputPluginCallbacks *cb, const char *plugin)
{
	LogicalOutputPluginInit init;

	init = RealOutputPluginInit(plugin);
	memset(&cdc.real, 0, sizeof(cdc.real));
	init(&cdc.real);
	cdc.isPgoutput = strcmp(plugin, "pgoutput") == 0;

	*cb = cdc.real;
	cb->startup_cb = CdcStartup;
	cb->shutdown_cb = CdcShutdown;
	cb->filter_by_origin_cb = CdcFilterByOrigin;
	cb->change_cb = CdcChange;
	cb->truncate_cb = CdcTruncate;
	if (cdc.real.stream_change_cb != NULL)
		cb->stream_change_cb = CdcStreamChange;
	if (cdc.real.stream_truncate_cb != NULL)
		cb->stream_truncate_cb = CdcStreamTruncate;
}

/*
 * RealOutputPluginInit returns the init function of PostgreSQL's own
 * output plugin of that name (pgoutput, test_decoding), loaded from the
 * installation's library directory by its full path.  Not by
 * "$libdir/<plugin>": from PostgreSQL 18 on, that is looked up along
 * dynamic_library_path, where workers put the wrappers of the same names
 * first (a wrapper would load itself).
 */
LogicalOutputPluginInit
RealOutputPluginInit(const char *plugin)
{
	return (LogicalOutputPluginInit)
		load_external_function(psprintf("%s/%s", pkglib_path, plugin),
							   "_PG_output_plugin_init", true, NULL);
}

/*
 * CdcStartup starts the real plugin and decides whether this consumer gets
 * shards as their tables (not when a slot is being created: nothing is
 * decoded then).
 */
static void
CdcStartup(LogicalDecodingContext *ctx, OutputPluginOptions *options, bool is_init)
{
	MemoryContextCallback *callback;

	cdc.context = AllocSetContextCreate(ctx->context, "shardext change data capture",
										ALLOCSET_DEFAULT_SIZES);
	cdc.changeContext = AllocSetContextCreate(cdc.context, "shardext decoded change",
											  ALLOCSET_DEFAULT_SIZES);
	callback = MemoryContextAlloc(cdc.context, sizeof(MemoryContextCallback));
	callback->func = ForgetDecoderState;
	callback->arg = NULL;
	MemoryContextRegisterResetCallback(cdc.context, callback);
	cdc.relations = NULL;
	cdc.standins = NULL;
	cdc.publicationsExist = false;
	cdc.publicationNames = NIL;
	cdc.active = false;

	/*
	 * The consumer's publications, read before pgoutput's startup: that of
	 * PostgreSQL 16 to 18 splits the option's string in place, which leaves
	 * a quoted name (subscribers quote them) unreadable after it.
	 */
	if (!is_init && cdc.isPgoutput)
	{
		MemoryContext oldContext = MemoryContextSwitchTo(cdc.context);

		cdc.publicationNames = PublicationNames(ctx->output_plugin_options);
		MemoryContextSwitchTo(oldContext);
	}

	cdc.real.startup_cb(ctx, options, is_init);
	if (is_init)
		return;
	cdc.active = DecidesActive();
	if (cdc.active)
	{
		HASHCTL		info;

		memset(&info, 0, sizeof(info));
		info.keysize = sizeof(Oid);
		info.entrysize = sizeof(CdcRelation);
		info.hcxt = cdc.context;
		cdc.relations = hash_create("shardext decoded relations", 64, &info,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		if (!relcacheCallbackRegistered)
		{
			CacheRegisterRelcacheCallback(CdcRelcacheCallback, (Datum) 0);
			relcacheCallbackRegistered = true;
		}
	}
}

/* ForgetDecoderState: the decoding context is gone (also after an error) */
static void
ForgetDecoderState(void *arg)
{
	cdc.context = NULL;
	cdc.changeContext = NULL;
	cdc.relations = NULL;
	cdc.standins = NULL;
	cdc.publicationNames = NIL;
	cdc.active = false;
}

static void
CdcShutdown(LogicalDecodingContext *ctx)
{
	if (cdc.real.shutdown_cb != NULL)
		cdc.real.shutdown_cb(ctx);
}

/* PublicationNames returns the publication_names option of pgoutput */
static List *
PublicationNames(List *options)
{
	ListCell   *cell;

	foreach(cell, options)
	{
		DefElem    *option = lfirst(cell);
		List	   *names = NIL;

		if (strcmp(option->defname, "publication_names") != 0 || option->arg == NULL)
			continue;
		if (!SplitIdentifierString(pstrdup(strVal(option->arg)), ',', &names))
			return NIL;			/* pgoutput's startup refuses it */
		return names;
	}
	return NIL;
}

/*
 * DecidesActive reads, as the catalogs are now, whether shards decode as
 * their tables: shardext must be installed in the database (version 1.2 or
 * later) and, for pgoutput, one of the publications must be ours.  Decoding
 * starts outside a transaction in a WAL sender; one is opened for the
 * look-up then.
 */
static bool
DecidesActive(void)
{
	MemoryContext oldContext = CurrentMemoryContext;
	ResourceOwner oldOwner = CurrentResourceOwner;
	bool		startedXact = !IsTransactionState();
	bool		active = false;

	if (startedXact)
		StartTransactionCommand();
	cdc.recordsRelid = CdcCatalogRelid("cdc_table", true);
	cdc.internalNamespaces[0] = get_namespace_oid(SHARDEXT_SCHEMA_NAME, true);
	cdc.internalNamespaces[1] = get_namespace_oid("shardext_gidx", true);
	if (OidIsValid(cdc.recordsRelid))
	{
		if (!cdc.isPgoutput)
			active = true;
		else
		{
			Relation	rel = table_open(CdcCatalogRelid("cdc_publication", false),
										 AccessShareLock);
			SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
			HeapTuple	tuple;

			while (!active && HeapTupleIsValid(tuple = systable_getnext(scan)))
			{
				Name		pubname = (Name) GETSTRUCT(tuple);
				ListCell   *cell;

				foreach(cell, cdc.publicationNames)
					active |= strcmp(NameStr(*pubname), (char *) lfirst(cell)) == 0;
			}
			systable_endscan(scan);
			table_close(rel, AccessShareLock);
		}
	}
	if (startedXact)
		CommitTransactionCommand();
	MemoryContextSwitchTo(oldContext);
	CurrentResourceOwner = oldOwner;
	return active;
}

/*
 * CdcFilterByOrigin leaves out every transaction that has a replication
 * origin: on a worker, those are shardext's internal copies.
 */
static bool
CdcFilterByOrigin(LogicalDecodingContext *ctx, ReplOriginId origin_id)
{
	if (cdc.active && origin_id != InvalidReplOriginId)
		return true;
	return cdc.real.filter_by_origin_cb != NULL &&
		cdc.real.filter_by_origin_cb(ctx, origin_id);
}

static void
CdcChange(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, Relation relation,
		  ReorderBufferChange *change)
{
	DecodeChange(ctx, txn, relation, change, cdc.real.change_cb);
}

static void
CdcStreamChange(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, Relation relation,
				ReorderBufferChange *change)
{
	DecodeChange(ctx, txn, relation, change, cdc.real.stream_change_cb);
}

static void
CdcTruncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, int nrelations,
			Relation relations[], ReorderBufferChange *change)
{
	DecodeTruncate(ctx, txn, nrelations, relations, change, cdc.real.truncate_cb);
}

static void
CdcStreamTruncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, int nrelations,
				  Relation relations[], ReorderBufferChange *change)
{
	DecodeTruncate(ctx, txn, nrelations, relations, change, cdc.real.stream_truncate_cb);
}

/*
 * PublicationsExist tells whether every publication of the consumer exists
 * as of the decoded change (pgoutput fails on one that does not).
 */
static bool
PublicationsExist(void)
{
	ListCell   *cell;

	if (!cdc.isPgoutput || cdc.publicationsExist)
		return true;
	foreach(cell, cdc.publicationNames)
	{
		if (!SearchSysCacheExists1(PUBLICATIONNAME, CStringGetDatum((char *) lfirst(cell))))
			return false;
	}
	cdc.publicationsExist = true;
	return true;
}

/* DecodeChange: see the file header */
static void
DecodeChange(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, Relation relation,
			 ReorderBufferChange *change, LogicalDecodeChangeCB callback)
{
	CdcRelation *entry;
	Relation	standin;

	if (!cdc.active)
	{
		callback(ctx, txn, relation, change);
		return;
	}
	if (!PublicationsExist())
		return;
	entry = LookupRelation(relation);
	if (entry->kind == CDC_RELATION_OTHER)
	{
		callback(ctx, txn, relation, change);
		return;
	}
	if (entry->kind == CDC_RELATION_HIDDEN)
		return;

	standin = RelationIdGetRelation(entry->standin);
	if (!RelationIsValid(standin))
		elog(ERROR, "could not open the stand-in %u of \"%s\"", entry->standin,
			 RelationGetRelationName(relation));
	if (!entry->mapBuilt)
	{
		MemoryContext oldContext = MemoryContextSwitchTo(cdc.context);

		entry->map = convert_tuples_by_name(RelationGetDescr(relation),
											RelationGetDescr(standin));
		entry->mapBuilt = true;
		MemoryContextSwitchTo(oldContext);
	}
	if (entry->map == NULL)
		callback(ctx, txn, standin, change);
	else
	{
		MemoryContext oldContext = MemoryContextSwitchTo(cdc.changeContext);
		ReorderBufferChange copy = *change;

		copy.data.tp.oldtuple = ConvertDecodedTuple(change->data.tp.oldtuple, entry->map);
		copy.data.tp.newtuple = ConvertDecodedTuple(change->data.tp.newtuple, entry->map);
		MemoryContextSwitchTo(oldContext);
		callback(ctx, txn, standin, &copy);
		MemoryContextReset(cdc.changeContext);
	}
	RelationClose(standin);
}

/*
 * DecodeTruncate truncates the stand-ins of truncated shards (each once)
 * and the other relations as they are; internal ones are left out.
 */
static void
DecodeTruncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, int nrelations,
			   Relation relations[], ReorderBufferChange *change,
			   LogicalDecodeTruncateCB callback)
{
	Relation   *kept;
	bool	   *opened;
	int			count = 0;

	if (!cdc.active)
	{
		callback(ctx, txn, nrelations, relations, change);
		return;
	}
	if (!PublicationsExist())
		return;

	kept = palloc(sizeof(Relation) * nrelations);
	opened = palloc0(sizeof(bool) * nrelations);
	for (int i = 0; i < nrelations; i++)
	{
		CdcRelation *entry = LookupRelation(relations[i]);
		bool		seen = false;

		if (entry->kind == CDC_RELATION_OTHER)
			kept[count++] = relations[i];
		if (entry->kind != CDC_RELATION_SHARD)
			continue;
		for (int j = 0; j < count; j++)
			seen |= RelationGetRelid(kept[j]) == entry->standin;
		if (seen)
			continue;
		kept[count] = RelationIdGetRelation(entry->standin);
		if (!RelationIsValid(kept[count]))
			elog(ERROR, "could not open the stand-in %u of \"%s\"", entry->standin,
				 RelationGetRelationName(relations[i]));
		opened[count++] = true;
	}
	if (count > 0)
		callback(ctx, txn, count, kept, change);
	for (int i = 0; i < count; i++)
	{
		if (opened[i])
			RelationClose(kept[i]);
	}
	pfree(kept);
	pfree(opened);
}

/* LookupRelation returns how a relation is decoded, working it out once */
static CdcRelation *
LookupRelation(Relation relation)
{
	Oid			relid = RelationGetRelid(relation);
	Oid			namespaceId = RelationGetNamespace(relation);
	CdcRelation *entry;
	CdcStandin *standin;
	bool		found;

	entry = hash_search(cdc.relations, &relid, HASH_ENTER, &found);
	if (found && entry->valid)
		return entry;

	entry->valid = true;
	entry->standin = InvalidOid;
	entry->mapBuilt = false;
	entry->map = NULL;
	if (namespaceId == cdc.internalNamespaces[0] || namespaceId == cdc.internalNamespaces[1])
		entry->kind = CDC_RELATION_HIDDEN;
	else if ((standin = FindStandin(relation)) == NULL)
		entry->kind = CDC_RELATION_OTHER;
	else if (!standin->emits)
		entry->kind = CDC_RELATION_HIDDEN;
	else
	{
		entry->kind = CDC_RELATION_SHARD;
		entry->standin = standin->standin;
	}
	return entry;
}

/*
 * FindStandin returns the stand-in whose shard the relation is, or NULL:
 * the relation is named <stand-in name>_<shard id> (names too long for
 * that are clipped, see ShardNameFromParts) in the stand-in's schema.
 */
static CdcStandin *
FindStandin(Relation relation)
{
	const char *relname = RelationGetRelationName(relation);
	Oid			namespaceId = RelationGetNamespace(relation);
	const char *underscore = strrchr(relname, '_');
	char	   *prefix;
	char	   *end;
	int64		shardId;
	Oid			candidate;
	CdcStandin *standin;
	HASH_SEQ_STATUS status;

	if (cdc.standins == NULL)
		ReadStandins();
	if (hash_search(cdc.standins, &relation->rd_id, HASH_FIND, NULL) != NULL)
		return NULL;			/* a stand-in itself */
	if (underscore == NULL || underscore[1] < '1' || underscore[1] > '9')
		return NULL;
	errno = 0;
	shardId = strtoi64(underscore + 1, &end, 10);
	if (*end != '\0' || errno != 0)
		return NULL;

	prefix = pnstrdup(relname, underscore - relname);
	candidate = get_relname_relid(prefix, namespaceId);
	pfree(prefix);
	if (OidIsValid(candidate) &&
		(standin = hash_search(cdc.standins, &candidate, HASH_FIND, NULL)) != NULL)
		return standin;

	/* clipped names */
	if (strlen(relname) < NAMEDATALEN - MAX_MULTIBYTE_CHAR_LEN)
		return NULL;
	hash_seq_init(&status, cdc.standins);
	while ((standin = hash_seq_search(&status)) != NULL)
	{
		if (standin->namespaceId == namespaceId &&
			(strcmp(ClippedShardName(NameStr(standin->name), shardId, true), relname) == 0 ||
			 strcmp(ClippedShardName(NameStr(standin->name), shardId, false), relname) == 0))
		{
			hash_seq_term(&status);
			return standin;
		}
	}
	return NULL;
}

/*
 * ReadStandins reads the stand-in records of shardext.cdc_table as of the
 * change being decoded.
 */
static void
ReadStandins(void)
{
	HASHCTL		info;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(Oid);
	info.entrysize = sizeof(CdcStandin);
	info.hcxt = cdc.context;
	cdc.standins = hash_create("shardext stand-ins", 64, &info,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	rel = table_open(cdc.recordsRelid, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		bool		isnull;
		Oid			standinId = DatumGetObjectId(heap_getattr(tuple, 1, RelationGetDescr(rel),
															  &isnull));
		char	   *name = get_rel_name(standinId);
		CdcStandin *standin;

		if (name == NULL)
			continue;			/* not there at this point of the WAL */
		standin = hash_search(cdc.standins, &standinId, HASH_ENTER, NULL);
		standin->namespaceId = get_rel_namespace(standinId);
		namestrcpy(&standin->name, name);
		standin->emits = DatumGetBool(heap_getattr(tuple, 4, RelationGetDescr(rel), &isnull));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
}

/*
 * CdcRelcacheCallback forgets what it knew of an invalidated relation (as
 * a shard or as a stand-in), and everything when the records changed.
 */
static void
CdcRelcacheCallback(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	CdcRelation *entry;

	if (cdc.relations == NULL)
		return;
	if (!OidIsValid(relid) || relid == cdc.recordsRelid ||
		(cdc.standins != NULL && hash_search(cdc.standins, &relid, HASH_FIND, NULL) != NULL))
	{
		if (cdc.standins != NULL)
			hash_destroy(cdc.standins);
		cdc.standins = NULL;
	}
	hash_seq_init(&status, cdc.relations);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (cdc.standins == NULL || entry->relid == relid || entry->standin == relid)
		{
			if (entry->map != NULL)
				free_conversion_map(entry->map);
			entry->map = NULL;
			entry->valid = false;
		}
	}
}
