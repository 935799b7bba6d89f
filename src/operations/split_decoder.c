/*-------------------------------------------------------------------------
 *
 * split_decoder.c
 *	  The logical decoding output plugin "shardext" that online splits
 *	  replicate with: pgoutput, with each change of a shard being split
 *	  sent as a change of the half that holds the row.
 *
 * A subscription applies changes to the table of the same name, and a
 * split's halves have new names (on the source node itself, for a split in
 * place).  So the plugin wraps pgoutput and, before pgoutput sees a change,
 * swaps the relation: the source shard becomes the half whose hash range
 * holds the row's distribution value (an update that moves a row between
 * halves becomes a delete and an insert), and the split's marker table
 * shardext.move_marker becomes shardext.move_marker_applied.  Changes of
 * any other table are dropped: among them, the halves' own changes, which
 * the subscription of a split in place makes on this very node.  The halves
 * exist on the source (as empty stand-ins when the split goes to another
 * node) and are in the publication, so pgoutput describes and filters them
 * as usual.
 *
 * The map, in relation OIDs of the source:
 *	 source:distattnum:piece:lo:hi:piece:lo:hi[:piece:lo:hi][;...]
 * (two halves, or three pieces when a tenant is isolated), is the setting
 * shardext.split_map of the session that creates the slot, kept in a file
 * of the slot's directory (so it lives and dies with the slot).  The split
 * also puts it in its subscription's connection options, which older
 * slots read; those do not reach the server on every version
 * (libpqwalreceiver of 16beta2 to 18beta1 replaces them with its own).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "access/detoast.h"
#include "access/htup_details.h"
#include "access/tupconvert.h"
#include "catalog/namespace.h"
#include "fmgr.h"
#include "replication/logical.h"
#include "replication/output_plugin.h"
#include "replication/reorderbuffer.h"
#include "storage/fd.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "shardext/shardext.h"
#include "shardext/cdc.h"
#include "shardext/guc.h"
#include "shardext/pg_compat.h"
#include "shardext/shard_move.h"

typedef struct SplitHalf
{
	Oid			relid;
	int32		hashMin;
	int32		hashMax;
	bool		mapBuilt;
	TupleConversionMap *map;	/* source row -> half row; NULL when alike */
} SplitHalf;

typedef struct SplitSource
{
	Oid			relid;			/* hash key */
	AttrNumber	distAttnum;
	bool		hashReady;
	FmgrInfo	hashFunc;
	Oid			collation;
	int			pieceCount;
	SplitHalf	halves[MAX_SPLIT_PIECES];
} SplitSource;

extern PGDLLEXPORT void _PG_output_plugin_init(OutputPluginCallbacks *cb);

static OutputPluginCallbacks pgoutputCallbacks;
static HTAB *splitSources = NULL;
static MemoryContext splitContext = NULL;
static MemoryContext changeContext = NULL;
static Oid	markerRelid = InvalidOid;
static SplitHalf markerTarget;

static void SplitDecoderStartup(LogicalDecodingContext *ctx, OutputPluginOptions *options,
								bool is_init);
static void SplitDecoderChange(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
							   Relation relation, ReorderBufferChange *change);
static void SplitDecoderStreamChange(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
									 Relation relation, ReorderBufferChange *change);
static void SplitDecoderTruncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
								 int nrelations, Relation relations[],
								 ReorderBufferChange *change);
static void SplitDecoderStreamTruncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
									   int nrelations, Relation relations[],
									   ReorderBufferChange *change);
static void RouteChange(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						Relation relation, ReorderBufferChange *change,
						LogicalDecodeChangeCB callback);
static void RouteTruncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						  int nrelations, Relation relations[], ReorderBufferChange *change,
						  LogicalDecodeTruncateCB callback);
static void SaveSplitMap(LogicalDecodingContext *ctx);
static char *LoadSplitMap(LogicalDecodingContext *ctx);
static void ParseSplitMap(const char *mapText);
static void ParseSplitMapEntry(char *entry);

/* the file of a slot's directory that holds its split map */
#define SPLIT_MAP_FILE "shardext_split_map"

/*
 * _PG_output_plugin_init: pgoutput's callbacks, with the change and
 * truncate callbacks (streamed or not) and startup replaced by ours.
 */
void
_PG_output_plugin_init(OutputPluginCallbacks *cb)
{
	LogicalOutputPluginInit pgoutputInit;

	/* the real pgoutput, not the wrapper of change data capture */
	pgoutputInit = RealOutputPluginInit("pgoutput");
	pgoutputInit(&pgoutputCallbacks);

	*cb = pgoutputCallbacks;
	cb->startup_cb = SplitDecoderStartup;
	cb->change_cb = SplitDecoderChange;
	cb->truncate_cb = SplitDecoderTruncate;
	cb->stream_change_cb = SplitDecoderStreamChange;
	cb->stream_truncate_cb = SplitDecoderStreamTruncate;
}

/*
 * SplitDecoderStartup starts pgoutput; when the slot is created it keeps
 * the split map of the session, else it reads the slot's map.  Decoding
 * without one is an error, so that a misconfigured split fails instead of
 * replicating nothing.
 */
static void
SplitDecoderStartup(LogicalDecodingContext *ctx, OutputPluginOptions *options, bool is_init)
{
	char	   *mapText;

	pgoutputCallbacks.startup_cb(ctx, options, is_init);
	if (is_init)
	{
		if (ShardextSplitMap != NULL && ShardextSplitMap[0] != '\0')
			SaveSplitMap(ctx);
		return;
	}

	if (splitContext == NULL)
		splitContext = AllocSetContextCreate(TopMemoryContext, "shardext split decoder",
											 ALLOCSET_DEFAULT_SIZES);
	if (changeContext == NULL)
		changeContext = AllocSetContextCreate(splitContext, "shardext split change",
											  ALLOCSET_DEFAULT_SIZES);
	mapText = LoadSplitMap(ctx);
	ParseSplitMap(mapText != NULL ? mapText : ShardextSplitMap);
}

/* the path of the slot's split map file */
static char *
SplitMapPath(LogicalDecodingContext *ctx)
{
	return psprintf("pg_replslot/%s/%s", NameStr(ctx->slot->data.name), SPLIT_MAP_FILE);
}

/* SaveSplitMap writes shardext.split_map into the new slot's directory, durably */
static void
SaveSplitMap(LogicalDecodingContext *ctx)
{
	char	   *path = SplitMapPath(ctx);
	size_t		length = strlen(ShardextSplitMap);
	int			fd;

	fd = OpenTransientFile(path, O_CREAT | O_TRUNC | O_WRONLY | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", path)));
	errno = 0;
	if (write(fd, ShardextSplitMap, length) != length)
	{
		if (errno == 0)
			errno = ENOSPC;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", path)));
	}
	if (pg_fsync(fd) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not fsync file \"%s\": %m", path)));
	if (CloseTransientFile(fd) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not close file \"%s\": %m", path)));
}

/* LoadSplitMap returns the slot's split map, or NULL when it has none */
static char *
LoadSplitMap(LogicalDecodingContext *ctx)
{
	char	   *path = SplitMapPath(ctx);
	StringInfoData map;
	FILE	   *file = AllocateFile(path, PG_BINARY_R);
	char		chunk[1024];
	size_t		count;

	if (file == NULL)
	{
		if (errno == ENOENT)
			return NULL;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", path)));
	}
	initStringInfo(&map);
	while ((count = fread(chunk, 1, sizeof(chunk), file)) > 0)
		appendBinaryStringInfo(&map, chunk, count);
	if (ferror(file))
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\": %m", path)));
	FreeFile(file);
	return map.data;
}

/*
 * ParseSplitMapEntry adds one source shard of shardext.split_map to
 * splitSources: source:distattnum, then two or three piece:lo:hi.
 */
static void
ParseSplitMapEntry(char *entry)
{
	char	   *copy = pstrdup(entry);
	char	   *save = NULL;
	long		fields[2 + 3 * MAX_SPLIT_PIECES];
	int			count = 0;
	SplitSource *split;
	Oid			source;
	bool		found;

	for (char *field = strtok_r(copy, ":", &save); field != NULL;
		 field = strtok_r(NULL, ":", &save))
	{
		char	   *end;

		if (count == lengthof(fields))
		{
			count++;			/* too many fields */
			break;
		}
		errno = 0;
		fields[count] = strtol(field, &end, 10);
		if (*end != '\0' || end == field || errno != 0)
		{
			count = lengthof(fields) + 1;
			break;
		}
		count++;
	}
	if (count > lengthof(fields) || count < 2 + 3 * 2 || (count - 2) % 3 != 0 ||
		fields[1] <= 0 || fields[1] > MaxAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid entry \"%s\" in shardext.split_map", entry)));

	source = (Oid) fields[0];
	split = hash_search(splitSources, &source, HASH_ENTER, &found);
	memset(((char *) split) + sizeof(Oid), 0, sizeof(SplitSource) - sizeof(Oid));
	split->distAttnum = (AttrNumber) fields[1];
	split->pieceCount = (count - 2) / 3;
	for (int i = 0; i < split->pieceCount; i++)
	{
		split->halves[i].relid = (Oid) fields[2 + 3 * i];
		split->halves[i].hashMin = (int32) fields[3 + 3 * i];
		split->halves[i].hashMax = (int32) fields[4 + 3 * i];
	}
	pfree(copy);
}

/* ParseSplitMap fills splitSources from the split map */
static void
ParseSplitMap(const char *mapText)
{
	HASHCTL		info;
	char	   *copy;
	char	   *entry;
	char	   *save = NULL;
	int			count = 0;

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(Oid);
	info.entrysize = sizeof(SplitSource);
	info.hcxt = splitContext;
	splitSources = hash_create("shardext split sources", 16, &info,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	copy = MemoryContextStrdup(splitContext, mapText ? mapText : "");
	for (entry = strtok_r(copy, ";", &save); entry != NULL; entry = strtok_r(NULL, ";", &save))
	{
		ParseSplitMapEntry(entry);
		count++;
	}
	if (count == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the output plugin \"%s\" needs shardext.split_map",
						SHARDEXT_EXTENSION_NAME),
				 errdetail("Only shard splits decode changes with this plugin.")));
}

static void
SplitDecoderChange(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
				   Relation relation, ReorderBufferChange *change)
{
	RouteChange(ctx, txn, relation, change, pgoutputCallbacks.change_cb);
}

static void
SplitDecoderStreamChange(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						 Relation relation, ReorderBufferChange *change)
{
	RouteChange(ctx, txn, relation, change, pgoutputCallbacks.stream_change_cb);
}

static void
SplitDecoderTruncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, int nrelations,
					 Relation relations[], ReorderBufferChange *change)
{
	RouteTruncate(ctx, txn, nrelations, relations, change, pgoutputCallbacks.truncate_cb);
}

static void
SplitDecoderStreamTruncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, int nrelations,
						   Relation relations[], ReorderBufferChange *change)
{
	RouteTruncate(ctx, txn, nrelations, relations, change,
				  pgoutputCallbacks.stream_truncate_cb);
}

/* the OID of shardext.move_marker, looked up once */
static Oid
MarkerRelid(void)
{
	if (!OidIsValid(markerRelid))
	{
		Oid			namespaceId = get_namespace_oid(SHARDEXT_SCHEMA_NAME, false);

		markerTarget.relid = get_relname_relid("move_marker_applied", namespaceId);
		markerRelid = get_relname_relid("move_marker", namespaceId);
		if (!OidIsValid(markerRelid) || !OidIsValid(markerTarget.relid))
			elog(ERROR, "shardext's marker tables are missing");
	}
	return markerRelid;
}

/*
 * HalfForTuple returns the half whose hash range holds the distribution
 * value of a row of the source shard.
 */
static SplitHalf *
HalfForTuple(SplitSource *split, Relation relation, DecodedTuple tuple)
{
	TupleDesc	desc = RelationGetDescr(relation);
	Datum		value;
	bool		isnull;
	int32		hash;

	if (!split->hashReady)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, split->distAttnum - 1);
		TypeCacheEntry *typeEntry = lookup_type_cache(attr->atttypid,
													  TYPECACHE_HASH_PROC_FINFO);

		if (!OidIsValid(typeEntry->hash_proc_finfo.fn_oid))
			elog(ERROR, "type %u has no hash function", attr->atttypid);
		fmgr_info_copy(&split->hashFunc, &typeEntry->hash_proc_finfo, splitContext);
		split->collation = attr->attcollation;
		split->hashReady = true;
	}

	value = heap_getattr(DecodedHeapTuple(tuple), split->distAttnum, desc, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("cannot split \"%s\": a row has a NULL distribution value",
						RelationGetRelationName(relation))));
	if (TupleDescAttr(desc, split->distAttnum - 1)->attlen == -1 &&
		VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(value)))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot split \"%s\": a distribution value is stored out of line",
						RelationGetRelationName(relation)),
				 errhint("Distribution values this long cannot be routed by a split.")));

	hash = DatumGetInt32(FunctionCall1Coll(&split->hashFunc, split->collation, value));
	for (int i = 0; i < split->pieceCount; i++)
	{
		if (hash >= split->halves[i].hashMin && hash <= split->halves[i].hashMax)
			return &split->halves[i];
	}
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("row of \"%s\" with hash %d is outside the shard's hash range",
					RelationGetRelationName(relation), hash)));
	return NULL;				/* keep compiler quiet */
}

/*
 * Forward hands one change to pgoutput as a change of the half's table,
 * with the given action and rows converted to its layout.
 */
static void
Forward(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, Relation source, SplitHalf *half,
		ReorderBufferChange *change, ReorderBufferChangeType action,
		DecodedTuple oldTuple, DecodedTuple newTuple,
		LogicalDecodeChangeCB callback)
{
	Relation	target = RelationIdGetRelation(half->relid);
	MemoryContext oldContext;
	ReorderBufferChange copy;

	if (!RelationIsValid(target))
		elog(ERROR, "could not open relation %u, a half of \"%s\"", half->relid,
			 RelationGetRelationName(source));

	if (!half->mapBuilt)
	{
		oldContext = MemoryContextSwitchTo(splitContext);
		half->map = convert_tuples_by_name(RelationGetDescr(source), RelationGetDescr(target));
		half->mapBuilt = true;
		MemoryContextSwitchTo(oldContext);
	}

	oldContext = MemoryContextSwitchTo(changeContext);
	copy = *change;
	copy.action = action;
	copy.data.tp.oldtuple = ConvertDecodedTuple(oldTuple, half->map);
	copy.data.tp.newtuple = ConvertDecodedTuple(newTuple, half->map);
	MemoryContextSwitchTo(oldContext);

	callback(ctx, txn, target, &copy);

	RelationClose(target);
	MemoryContextReset(changeContext);
}

/* RouteChange: see the file header */
static void
RouteChange(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, Relation relation,
			ReorderBufferChange *change, LogicalDecodeChangeCB callback)
{
	Oid			relid = RelationGetRelid(relation);
	DecodedTuple oldTuple = change->data.tp.oldtuple;
	DecodedTuple newTuple = change->data.tp.newtuple;
	SplitSource *split;
	SplitHalf  *oldHalf;
	SplitHalf  *newHalf;

	if (relid == MarkerRelid())
	{
		Forward(ctx, txn, relation, &markerTarget, change, change->action, oldTuple,
				newTuple, callback);
		return;
	}

	split = hash_search(splitSources, &relid, HASH_FIND, NULL);
	if (split == NULL)
		return;

	switch (change->action)
	{
		case REORDER_BUFFER_CHANGE_INSERT:
			Forward(ctx, txn, relation, HalfForTuple(split, relation, newTuple), change,
					change->action, NULL, newTuple, callback);
			break;

		case REORDER_BUFFER_CHANGE_UPDATE:
			newHalf = HalfForTuple(split, relation, newTuple);
			oldHalf = oldTuple ? HalfForTuple(split, relation, oldTuple) : newHalf;
			if (oldHalf == newHalf)
				Forward(ctx, txn, relation, newHalf, change, change->action, oldTuple,
						newTuple, callback);
			else
			{
				Forward(ctx, txn, relation, oldHalf, change, REORDER_BUFFER_CHANGE_DELETE,
						oldTuple, NULL, callback);
				Forward(ctx, txn, relation, newHalf, change, REORDER_BUFFER_CHANGE_INSERT,
						NULL, newTuple, callback);
			}
			break;

		case REORDER_BUFFER_CHANGE_DELETE:
			if (oldTuple == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("cannot split \"%s\": a deleted row was logged without its key",
								RelationGetRelationName(relation))));
			Forward(ctx, txn, relation, HalfForTuple(split, relation, oldTuple), change,
					change->action, oldTuple, NULL, callback);
			break;

		default:
			elog(ERROR, "unexpected change type %d in a shard split", change->action);
	}
}

/*
 * RouteTruncate: a truncated source shard truncates all its pieces; other
 * tables are dropped as for changes.
 */
static void
RouteTruncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, int nrelations,
			  Relation relations[], ReorderBufferChange *change,
			  LogicalDecodeTruncateCB callback)
{
	Relation   *halves = palloc(sizeof(Relation) * nrelations * MAX_SPLIT_PIECES);
	int			count = 0;

	for (int i = 0; i < nrelations; i++)
	{
		Oid			relid = RelationGetRelid(relations[i]);
		SplitSource *split = hash_search(splitSources, &relid, HASH_FIND, NULL);

		if (split == NULL)
			continue;
		for (int half = 0; half < split->pieceCount; half++)
		{
			Relation	target = RelationIdGetRelation(split->halves[half].relid);

			if (!RelationIsValid(target))
				elog(ERROR, "could not open relation %u", split->halves[half].relid);
			halves[count++] = target;
		}
	}
	if (count > 0)
		callback(ctx, txn, count, halves, change);
	for (int i = 0; i < count; i++)
		RelationClose(halves[i]);
	pfree(halves);
}
