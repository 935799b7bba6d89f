/*-------------------------------------------------------------------------
 *
 * repartition_worker.c
 *	  The SQL functions that run a repartition exchange on the nodes (see
 *	  repartition.h for how the coordinator uses them).  They run as the
 *	  caller and only touch the caller's own exchange files on the node.
 *
 *	- shardext.repartition_map runs a query (a shard's rows, with the
 *	  filters and key expressions of the join) and writes its rows,
 *	  partitioned by a hash of the keys, into a file of the exchange;
 *	- shardext.repartition_blocks returns the blocks of some partitions of
 *	  this node's map files, in the form rows travel between nodes;
 *	- shardext.repartition_fetch pulls such blocks from another node, over
 *	  a connection of its own as the caller, into a file here;
 *	- shardext.repartition_read returns the rows of one partition;
 *	- shardext.repartition_cleanup removes the caller's exchange files;
 *	- shardext.repartition_sweep (administrators) removes what exchanges
 *	  of a coordinator that ended without cleaning up left behind.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/supportnodes.h"
#include "port/pg_bswap.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/tuplestore.h"
#include "utils/typcache.h"

#include "shardext/connection.h"
#include "shardext/deparser.h"
#include "shardext/pg_compat.h"
#include "shardext/privileges.h"
#include "shardext/remote_command.h"
#include "shardext/repartition.h"

/* the first bytes of every chunk repartition_blocks returns */
#define WIRE_CHUNK_MAGIC 0x53585731 /* 'SXW1' */
#define WIRE_CHUNK_HEADER 12	/* magic, partition, rows */

/* the signature of COPY ... (FORMAT binary) */
static const char CopyBinarySignature[11] = "PGCOPY\n\377\r\n\0";

/* a map task's destination for its query's rows */
typedef struct MapReceiver
{
	DestReceiver pub;
	MemoryContext context;		/* outlives the query: the writer */
	MemoryContext rowContext;	/* reset for every row */
	const char *exchangeId;
	const char *fileName;
	int			keyCount;		/* the last keyCount columns are the keys */
	int			layout;			/* LAYOUT_* */
	int			partitionCount;
	int32	   *boundaries;		/* LAYOUT_RANGES: each partition's lowest hash */
	int64		limit;
	PartitionWriter *writer;
	int			columnCount;	/* the columns written */
	FmgrInfo   *hashFunctions;
	Oid		   *hashCollations;
	int64		rows;
	int64		nullKeys;
} MapReceiver;

/* where the parse of a binary COPY stream has got to */
typedef struct CopyStream
{
	NodeConnection *conn;
	StringInfoData pending;		/* received, not parsed yet */
	bool		headerRead;
	bool		ended;			/* the trailer came */
} CopyStream;

static void MapStartup(DestReceiver *self, int operation, TupleDesc typeinfo);
static bool MapReceiveSlot(TupleTableSlot *slot, DestReceiver *self);
static void MapShutdown(DestReceiver *self);
static void MapDestroy(DestReceiver *self);
static int	PartitionOfRow(MapReceiver *receiver, TupleTableSlot *slot);
static Oid *TypeOidsOfNames(ArrayType *names, int *count);
static ParamListInfo MakeParams(Oid *types, ArrayType *values, int count);
static TupleDesc DescOfTypes(Oid *types, int count);
static void ReceiveCopiedChunks(NodeConnection *conn, PartitionWriter *writer,
								TupleDesc desc, Bitmapset *partitions, int64 *bytes);
static bool NextCopiedChunk(CopyStream *stream, char **chunk, uint32 *size);
static void WriteChunkRows(PartitionWriter *writer, TupleDesc desc, const char *chunk,
						   int length, Bitmapset *partitions, FmgrInfo *inputs,
						   Oid *ioparams, MemoryContext rowContext);
static Bitmapset *PartitionSet(ArrayType *partitions, int *maxPartition);
static Datum Int8ArrayDatum(int64 *values, int count);

PG_FUNCTION_INFO_V1(shardext_repartition_map);
PG_FUNCTION_INFO_V1(shardext_repartition_blocks);
PG_FUNCTION_INFO_V1(shardext_repartition_fetch);
PG_FUNCTION_INFO_V1(shardext_repartition_read);
PG_FUNCTION_INFO_V1(shardext_repartition_read_support);
PG_FUNCTION_INFO_V1(shardext_repartition_cleanup);
PG_FUNCTION_INFO_V1(shardext_repartition_sweep);

/*
 * shardext_repartition_map(exchange, unit, tag, query, param_types,
 * param_values, key_count, layout, partition_count, boundaries, limit)
 * runs query (with its parameters, typed by name) and writes its rows,
 * but for the last key_count columns (the keys), into the exchange's
 * file "<unit>.m<tag>", each in the partition its keys hash to; a row with
 * a NULL key goes to partition 0, where it can only be an unmatched row.
 * Returns {rows, rows with a NULL key, bytes of partition 0, 1 ...}.
 */
Datum
shardext_repartition_map(PG_FUNCTION_ARGS)
{
	char	   *exchangeId = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int			unitId = PG_GETARG_INT32(1);
	char	   *tag = text_to_cstring(PG_GETARG_TEXT_PP(2));
	char	   *query = text_to_cstring(PG_GETARG_TEXT_PP(3));
	ArrayType  *boundaries = PG_GETARG_ARRAYTYPE_P(9);
	MapReceiver *receiver = palloc0(sizeof(MapReceiver));
	SPIExecuteOptions options;
	Oid		   *paramTypes;
	int			paramCount;
	int64	   *bytes;
	int64	   *result;

	CheckExchangeId(exchangeId);
	if (strspn(tag, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(tag))
		elog(ERROR, "invalid map tag \"%s\"", tag);
	receiver->exchangeId = exchangeId;
	receiver->fileName = psprintf("%d.m%s", unitId, tag);
	receiver->keyCount = PG_GETARG_INT32(6);
	receiver->layout = PG_GETARG_INT32(7);
	receiver->partitionCount = PG_GETARG_INT32(8);
	receiver->limit = PG_GETARG_INT64(10);
	receiver->context = CurrentMemoryContext;
	receiver->rowContext = AllocSetContextCreate(CurrentMemoryContext, "shardext map row",
												 ALLOCSET_DEFAULT_SIZES);
	if (receiver->layout == LAYOUT_RANGES)
	{
		receiver->boundaries = (int32 *) ARR_DATA_PTR(boundaries);
		receiver->partitionCount = ArrayGetNItems(ARR_NDIM(boundaries), ARR_DIMS(boundaries));
		if (ARR_HASNULL(boundaries) || ARR_ELEMTYPE(boundaries) != INT4OID ||
			receiver->keyCount != 1)
			elog(ERROR, "invalid shard ranges for a repartition map");
	}
	else if (receiver->layout == LAYOUT_BROADCAST)
		receiver->partitionCount = 1;
	if (receiver->partitionCount < 1 || receiver->partitionCount > MAX_PARTITIONS ||
		receiver->keyCount < 0 || receiver->keyCount > 32 ||
		receiver->layout < LAYOUT_MODULO || receiver->layout > LAYOUT_BROADCAST)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid repartition layout")));
	receiver->pub.receiveSlot = MapReceiveSlot;
	receiver->pub.rStartup = MapStartup;
	receiver->pub.rShutdown = MapShutdown;
	receiver->pub.rDestroy = MapDestroy;
	receiver->pub.mydest = DestNone;

	paramTypes = TypeOidsOfNames(PG_GETARG_ARRAYTYPE_P(4), &paramCount);
	memset(&options, 0, sizeof(options));
	options.params = MakeParams(paramTypes, PG_GETARG_ARRAYTYPE_P(5), paramCount);
	options.read_only = true;
	options.dest = (DestReceiver *) receiver;

	SPI_connect();
	{
		SPIPlanPtr	plan = SPI_prepare(query, paramCount, paramTypes);
		int			rc;

		if (plan == NULL)
			elog(ERROR, "could not prepare a repartition map query: %s",
				 SPI_result_code_string(SPI_result));
		if (!SPI_is_cursor_plan(plan))
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("a repartition map query must be a SELECT")));
		rc = SPI_execute_plan_extended(plan, &options);
		if (rc < 0)
			elog(ERROR, "a repartition map query failed: %s", SPI_result_code_string(rc));
	}
	SPI_finish();
	if (receiver->writer == NULL)
		elog(ERROR, "the repartition map query returned no row description");

	bytes = EndPartitionWriter(receiver->writer);
	result = palloc(sizeof(int64) * (receiver->partitionCount + 2));
	result[0] = receiver->rows;
	result[1] = receiver->nullKeys;
	memcpy(result + 2, bytes, sizeof(int64) * receiver->partitionCount);
	PG_RETURN_DATUM(Int8ArrayDatum(result, receiver->partitionCount + 2));
}

/* MapStartup opens the file for the columns before the keys */
static void
MapStartup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	MapReceiver *receiver = (MapReceiver *) self;
	MemoryContext oldContext = MemoryContextSwitchTo(receiver->context);
	TupleDesc	desc;

	receiver->columnCount = typeinfo->natts - receiver->keyCount;
	if (receiver->columnCount < 0)
		elog(ERROR, "a repartition map query returned fewer columns than keys");
	desc = CreateTemplateTupleDesc(receiver->columnCount);
	for (int i = 0; i < receiver->columnCount; i++)
		TupleDescCopyEntry(desc, i + 1, typeinfo, i + 1);
	FinishTupleDesc(desc);
	receiver->hashFunctions = palloc0(sizeof(FmgrInfo) * Max(receiver->keyCount, 1));
	receiver->hashCollations = palloc0(sizeof(Oid) * Max(receiver->keyCount, 1));
	for (int k = 0; k < receiver->keyCount; k++)
	{
		Form_pg_attribute attr = TupleDescAttr(typeinfo, receiver->columnCount + k);
		TypeCacheEntry *typentry = lookup_type_cache(attr->atttypid,
													 TYPECACHE_HASH_PROC_FINFO);

		if (!OidIsValid(typentry->hash_proc))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("could not identify a hash function for type %s",
							format_type_be(attr->atttypid))));
		fmgr_info_copy(&receiver->hashFunctions[k], &typentry->hash_proc_finfo,
					   receiver->context);
		receiver->hashCollations[k] = attr->attcollation;
	}
	receiver->writer = BeginPartitionWriter(receiver->exchangeId, receiver->fileName, desc,
											receiver->partitionCount, receiver->limit);
	MemoryContextSwitchTo(oldContext);
}

static bool
MapReceiveSlot(TupleTableSlot *slot, DestReceiver *self)
{
	MapReceiver *receiver = (MapReceiver *) self;
	MemoryContext oldContext = MemoryContextSwitchTo(receiver->rowContext);
	int			partition;

	slot_getallattrs(slot);
	partition = PartitionOfRow(receiver, slot);
	WritePartitionRow(receiver->writer, partition, slot->tts_values, slot->tts_isnull);
	receiver->rows++;
	MemoryContextSwitchTo(oldContext);
	MemoryContextReset(receiver->rowContext);
	return true;
}

static void
MapShutdown(DestReceiver *self)
{
}

static void
MapDestroy(DestReceiver *self)
{
}

/*
 * PartitionOfRow hashes the keys of a row with their types' standard hash
 * functions (those of shards and hash joins; values equal by a hash
 * equality of the family hash alike, whatever their types), and maps the
 * hash to a partition of the layout: a shard's range, or a partition by
 * modulo.
 */
static int
PartitionOfRow(MapReceiver *receiver, TupleTableSlot *slot)
{
	uint32		hash = 0;
	int			low = 0;
	int			high;

	for (int k = 0; k < receiver->keyCount; k++)
	{
		int			column = receiver->columnCount + k;
		uint32		keyHash;

		if (slot->tts_isnull[column])
		{
			receiver->nullKeys++;
			return 0;
		}
		keyHash = DatumGetUInt32(FunctionCall1Coll(&receiver->hashFunctions[k],
												   receiver->hashCollations[k],
												   slot->tts_values[column]));
		hash = (k == 0) ? keyHash : hash_combine(hash, keyHash);
	}
	if (receiver->layout == LAYOUT_BROADCAST)
		return 0;
	/*
	 * Mixed again first: a hash join of the partition hashes its rows with
	 * the same function and takes its buckets from the low bits, which the
	 * plain modulo would make alike for every row of a partition.
	 */
	if (receiver->layout == LAYOUT_MODULO)
		return murmurhash32(hash) % (uint32) receiver->partitionCount;

	/* the last partition whose lowest hash is at most the row's */
	high = receiver->partitionCount - 1;
	while (low < high)
	{
		int			middle = low + (high - low + 1) / 2;

		if (receiver->boundaries[middle] <= (int32) hash)
			low = middle;
		else
			high = middle - 1;
	}
	return low;
}

/*
 * shardext_repartition_blocks(exchange, unit, partitions) returns, one
 * bytea per block, the rows of the given partitions that the map tasks of
 * unit wrote on this node, in the form of repartition_wire.c after a
 * header (magic, partition, rows).
 */
Datum
shardext_repartition_blocks(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;
	PartitionReader *reader;
	int			partition;
	char	   *payload;
	uint32		length;
	uint32		rows;

	if (SRF_IS_FIRSTCALL())
	{
		char	   *exchangeId = text_to_cstring(PG_GETARG_TEXT_PP(0));
		MemoryContext oldContext;

		funcctx = SRF_FIRSTCALL_INIT();
		oldContext = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		funcctx->user_fctx = BeginPartitionReader(exchangeId, PG_GETARG_INT32(1), "m", NULL,
												  PartitionSet(PG_GETARG_ARRAYTYPE_P(2), NULL));
		MemoryContextSwitchTo(oldContext);
	}
	funcctx = SRF_PERCALL_SETUP();
	reader = funcctx->user_fctx;
	if (NextPartitionBlock(reader, &partition, &payload, &length, &rows))
	{
		TupleDesc	desc = PartitionReaderDesc(reader);
		FmgrInfo   *outputs = palloc0(sizeof(FmgrInfo) * Max(desc->natts, 1));
		TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
		StringInfoData chunk;
		uint32		header[3];
		int			nestLevel = BeginSafeDeparse();
		uint32		offset = 0;

		PrepareWireOutputs(desc, outputs);
		initStringInfo(&chunk);
		appendStringInfoSpaces(&chunk, VARHDRSZ);
		header[0] = pg_hton32(WIRE_CHUNK_MAGIC);
		header[1] = pg_hton32((uint32) partition);
		header[2] = pg_hton32(rows);
		appendBinaryStringInfo(&chunk, (char *) header, sizeof(header));
		for (uint32 r = 0; r < rows; r++)
		{
			MinimalTuple tuple = NextBlockTuple(payload, offset);

			if (offset + sizeof(uint32) > length || offset + tuple->t_len > length)
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("a block of a partition file holds fewer rows than it says")));
			AppendWireRow(&chunk, desc, tuple, slot, outputs);
			offset += MAXALIGN(tuple->t_len);
		}
		EndSafeDeparse(nestLevel);
		ExecDropSingleTupleTableSlot(slot);
		SET_VARSIZE(chunk.data, chunk.len);
		SRF_RETURN_NEXT(funcctx, PointerGetDatum(chunk.data));
	}
	EndPartitionReader(reader);
	SRF_RETURN_DONE(funcctx);
}

/*
 * shardext_repartition_fetch(exchange, unit, tag, host, port, partitions,
 * column_types) pulls the rows of the given partitions that map tasks of
 * unit wrote on the node at host:port into this node's file
 * "<unit>.f<tag>", over a connection of its own to that node as the
 * current user (counted in this node's shared pool).  Returns the bytes
 * received.
 */
Datum
shardext_repartition_fetch(PG_FUNCTION_ARGS)
{
	char	   *exchangeId = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int			unitId = PG_GETARG_INT32(1);
	char	   *tag = text_to_cstring(PG_GETARG_TEXT_PP(2));
	char	   *host = text_to_cstring(PG_GETARG_TEXT_PP(3));
	int			port = PG_GETARG_INT32(4);
	ArrayType  *partitionArray = PG_GETARG_ARRAYTYPE_P(5);
	int			typeCount;
	Oid		   *types = TypeOidsOfNames(PG_GETARG_ARRAYTYPE_P(6), &typeCount);
	TupleDesc	desc = DescOfTypes(types, typeCount);
	int			maxPartition;
	Bitmapset  *partitions = PartitionSet(partitionArray, &maxPartition);
	NodeConnection *conn;
	PartitionWriter *writer;
	StringInfoData command;
	int64		bytes = 0;

	CheckExchangeId(exchangeId);
	if (strspn(tag, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(tag))
		elog(ERROR, "invalid fetch tag \"%s\"", tag);
	if (port < 1 || port > 65535)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid port %d", port)));
	initStringInfo(&command);
	appendStringInfo(&command,
					 "COPY (SELECT shardext.repartition_blocks(%s, %d, %s::pg_catalog.int4[])) "
					 "TO STDOUT (FORMAT binary)",
					 quote_literal_cstr(exchangeId), unitId,
					 quote_literal_cstr(OidOutputFunctionCall(F_ARRAY_OUT,
															   PointerGetDatum(partitionArray))));
	writer = BeginPartitionWriter(exchangeId, psprintf("%d.f%s", unitId, tag), desc,
								  maxPartition + 1, -1);
	conn = OpenDedicatedConnection(host, port, false, true);
	BeginRemoteCopy(conn, command.data, PGRES_COPY_OUT);
	ReceiveCopiedChunks(conn, writer, desc, partitions, &bytes);
	PQclear(FinishRemoteQuery(conn, command.data));
	CloseDedicatedConnection(conn);
	(void) EndPartitionWriter(writer);
	PG_RETURN_INT64(bytes);
}

/*
 * ReceiveCopiedChunks reads a binary COPY of one bytea column (the chunks
 * of repartition_blocks) and writes their rows; *bytes counts what came.
 * The stream is parsed as a stream: a row may come in pieces.
 */
static void
ReceiveCopiedChunks(NodeConnection *conn, PartitionWriter *writer, TupleDesc desc,
					Bitmapset *partitions, int64 *bytes)
{
	CopyStream	stream;
	FmgrInfo   *inputs = palloc0(sizeof(FmgrInfo) * Max(desc->natts, 1));
	Oid		   *ioparams = palloc0(sizeof(Oid) * Max(desc->natts, 1));
	MemoryContext rowContext = AllocSetContextCreate(CurrentMemoryContext,
													 "shardext fetched row",
													 ALLOCSET_DEFAULT_SIZES);
	char	   *buffer;
	int			length;
	char	   *chunk;
	uint32		size;

	PrepareWireInputs(desc, inputs, ioparams);
	memset(&stream, 0, sizeof(stream));
	stream.conn = conn;
	initStringInfo(&stream.pending);
	while ((length = ReceiveRemoteCopyData(conn, &buffer)) >= 0)
	{
		appendBinaryStringInfo(&stream.pending, buffer, length);
		FreeRemoteCopyData(buffer);
		*bytes += length;
		while (NextCopiedChunk(&stream, &chunk, &size))
			WriteChunkRows(writer, desc, chunk, size, partitions, inputs, ioparams, rowContext);
		/* keep only what is not parsed yet */
		if (stream.pending.cursor > 0)
		{
			memmove(stream.pending.data, stream.pending.data + stream.pending.cursor,
					stream.pending.len - stream.pending.cursor);
			stream.pending.len -= stream.pending.cursor;
			stream.pending.data[stream.pending.len] = '\0';
			stream.pending.cursor = 0;
		}
	}
	if (!stream.ended || stream.pending.len != 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("the rows from node %s:%d ended early", conn->host, conn->port)));
	MemoryContextDelete(rowContext);
}

/*
 * NextCopiedChunk takes the next complete row (a chunk) of the binary COPY
 * stream, past its header; false when more must come first (or it ended).
 */
static bool
NextCopiedChunk(CopyStream *stream, char **chunk, uint32 *size)
{
	StringInfo	pending = &stream->pending;
	int16		fields;

	if (!stream->headerRead)
	{
		uint32		extension;

		if (pending->len - pending->cursor < 19)
			return false;
		if (memcmp(pending->data + pending->cursor, CopyBinarySignature, 11) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("node %s:%d did not send a binary COPY", stream->conn->host,
							stream->conn->port)));
		memcpy(&extension, pending->data + pending->cursor + 15, 4);
		pending->cursor += 19 + pg_ntoh32(extension);
		stream->headerRead = true;
	}
	if (stream->ended || pending->len - pending->cursor < 2)
		return false;
	memcpy(&fields, pending->data + pending->cursor, 2);
	fields = (int16) pg_ntoh16((uint16) fields);
	if (fields == -1)
	{
		stream->ended = true;
		pending->cursor += 2;
		return false;
	}
	if (fields != 1)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("node %s:%d sent a row of %d columns", stream->conn->host,
						stream->conn->port, fields)));
	if (pending->len - pending->cursor < 6)
		return false;
	memcpy(size, pending->data + pending->cursor + 2, 4);
	*size = pg_ntoh32(*size);
	if (*size == (uint32) -1 || *size > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("node %s:%d sent an invalid block", stream->conn->host,
						stream->conn->port)));
	if ((uint64) (pending->len - pending->cursor) < 6 + (uint64) *size)
		return false;
	*chunk = pending->data + pending->cursor + 6;
	pending->cursor += 6 + *size;
	return true;
}

/* WriteChunkRows writes the rows of one chunk of repartition_blocks */
static void
WriteChunkRows(PartitionWriter *writer, TupleDesc desc, const char *chunk, int length,
			   Bitmapset *partitions, FmgrInfo *inputs, Oid *ioparams,
			   MemoryContext rowContext)
{
	const char *end = chunk + length;
	uint32		header[3];
	int			partition;
	Datum	   *values = palloc(sizeof(Datum) * Max(desc->natts, 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(desc->natts, 1));

	if (length < WIRE_CHUNK_HEADER)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("a block from another node is truncated")));
	memcpy(header, chunk, sizeof(header));
	partition = (int) pg_ntoh32(header[1]);
	if (pg_ntoh32(header[0]) != WIRE_CHUNK_MAGIC || partition < 0 ||
		!bms_is_member(partition, partitions))
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("another node sent a block of a partition that was not asked for")));
	chunk += WIRE_CHUNK_HEADER;
	for (uint32 r = pg_ntoh32(header[2]); r > 0; r--)
	{
		MemoryContext oldContext = MemoryContextSwitchTo(rowContext);

		chunk = ReadWireRow(chunk, end, desc, inputs, ioparams, values, nulls);
		WritePartitionRow(writer, partition, values, nulls);
		MemoryContextSwitchTo(oldContext);
		MemoryContextReset(rowContext);
	}
	if (chunk != end)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("a block from another node holds more than its rows")));
	pfree(values);
	pfree(nulls);
}

/*
 * shardext_repartition_read(exchange, unit, partition, expected_rows)
 * returns the rows of one partition of unit on this node (written by map tasks here and
 * fetched from other nodes), as the record its column definition list
 * describes: the types must be those the rows were written with.
 */
Datum
shardext_repartition_read(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *exchangeId = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int			partition = PG_GETARG_INT32(2);
	PartitionReader *reader;
	TupleTableSlot *slot;
	int			blockPartition;
	char	   *payload;
	uint32		length;
	uint32		rows;

	CheckExchangeId(exchangeId);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	reader = BeginPartitionReader(exchangeId, PG_GETARG_INT32(1), "mf", rsinfo->setDesc,
								  bms_make_singleton(partition));
	slot = MakeSingleTupleTableSlot(rsinfo->setDesc, &TTSOpsMinimalTuple);
	while (NextPartitionBlock(reader, &blockPartition, &payload, &length, &rows))
	{
		uint32		offset = 0;

		for (uint32 r = 0; r < rows; r++)
		{
			MinimalTuple tuple = NextBlockTuple(payload, offset);

			if (offset + sizeof(uint32) > length || offset + tuple->t_len > length ||
				HeapTupleHeaderGetNatts(tuple) > rsinfo->setDesc->natts)
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("a block of a partition file is corrupted")));
			ExecStoreMinimalTuple(tuple, slot, false);
			tuplestore_puttupleslot(rsinfo->setResult, slot);
			ExecClearTuple(slot);
			offset += MAXALIGN(tuple->t_len);
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	EndPartitionReader(reader);
	return (Datum) 0;
}

/*
 * shardext_repartition_read_support tells the node's planner how many rows
 * a read returns: what the coordinator expects (its last argument), from
 * what the map tasks wrote.
 */
Datum
shardext_repartition_read_support(PG_FUNCTION_ARGS)
{
	Node	   *request = (Node *) PG_GETARG_POINTER(0);

	if (IsA(request, SupportRequestRows))
	{
		SupportRequestRows *rows = (SupportRequestRows *) request;
		FuncExpr   *call = (FuncExpr *) rows->node;
		Const	   *expected;

		if (call != NULL && IsA(call, FuncExpr) && list_length(call->args) == 4 &&
			IsA(lfourth(call->args), Const) && !((Const *) lfourth(call->args))->constisnull)
		{
			expected = lfourth(call->args);
			rows->rows = Max(1.0, (double) DatumGetInt64(expected->constvalue));
			PG_RETURN_POINTER(rows);
		}
	}
	PG_RETURN_POINTER(NULL);
}

/*
 * shardext_repartition_cleanup(exchange) removes the current user's files
 * of an exchange on this node; false when there were none.
 */
Datum
shardext_repartition_cleanup(PG_FUNCTION_ARGS)
{
	char	   *exchangeId = text_to_cstring(PG_GETARG_TEXT_PP(0));

	PG_RETURN_BOOL(RemoveExchangeDirectory(exchangeId, GetUserId()));
}

/*
 * shardext_repartition_sweep(prefix, incarnation, keep_from) removes the
 * exchange files (of any user) of a coordinator database (prefix:
 * "<system id>_<database oid>_") that no running exchange uses: those of
 * other incarnations than the coordinator's current one, and of this one
 * those numbered below keep_from.  Returns how many exchanges it removed.
 * Administrators only.
 */
Datum
shardext_repartition_sweep(PG_FUNCTION_ARGS)
{
	char	   *prefix = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *incarnation = text_to_cstring(PG_GETARG_TEXT_PP(1));
	int64		keepFrom = PG_GETARG_INT64(2);

	EnsureShardextAdmin("shardext.repartition_sweep");
	if (strspn(prefix, "0123456789_") != strlen(prefix) ||
		strspn(incarnation, "0123456789") != strlen(incarnation) || *incarnation == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid exchange prefix or incarnation")));
	PG_RETURN_INT32(SweepExchangeDirectories(prefix, incarnation, (uint64) keepFrom));
}

/* TypeOidsOfNames resolves an array of type names (text) on this node */
static Oid *
TypeOidsOfNames(ArrayType *names, int *count)
{
	Datum	   *elements;
	bool	   *nulls;
	Oid		   *types;

	deconstruct_array(names, TEXTOID, -1, false, TYPALIGN_INT, &elements, &nulls, count);
	types = palloc(sizeof(Oid) * Max(*count, 1));
	for (int i = 0; i < *count; i++)
	{
		if (nulls[i])
			elog(ERROR, "a type name is NULL");
		types[i] = DatumGetObjectId(DirectFunctionCall1(regtypein,
														CStringGetDatum(TextDatumGetCString(elements[i]))));
	}
	return types;
}

/* MakeParams turns text values (NULL elements are NULLs) into parameters */
static ParamListInfo
MakeParams(Oid *types, ArrayType *values, int count)
{
	ParamListInfo params = makeParamList(count);
	Datum	   *elements;
	bool	   *nulls;
	int			valueCount;

	deconstruct_array(values, TEXTOID, -1, false, TYPALIGN_INT, &elements, &nulls, &valueCount);
	if (valueCount != count)
		elog(ERROR, "%d parameter values for %d parameters", valueCount, count);
	for (int i = 0; i < count; i++)
	{
		ParamExternData *param = &params->params[i];
		Oid			inputFunction;
		Oid			ioparam;

		getTypeInputInfo(types[i], &inputFunction, &ioparam);
		param->ptype = types[i];
		param->pflags = PARAM_FLAG_CONST;
		param->isnull = nulls[i];
		param->value = nulls[i] ? (Datum) 0 :
			OidInputFunctionCall(inputFunction, TextDatumGetCString(elements[i]), ioparam, -1);
	}
	return params;
}

/* DescOfTypes: a row of columns of these types */
static TupleDesc
DescOfTypes(Oid *types, int count)
{
	TupleDesc	desc = CreateTemplateTupleDesc(count);

	for (int i = 0; i < count; i++)
		TupleDescInitEntry(desc, i + 1, NULL, types[i], -1, 0);
	FinishTupleDesc(desc);
	return desc;
}

/* PartitionSet: the partitions of an int4 array; *maxPartition the largest */
static Bitmapset *
PartitionSet(ArrayType *partitions, int *maxPartition)
{
	Datum	   *elements;
	bool	   *nulls;
	int			count;
	Bitmapset  *set = NULL;

	deconstruct_array(partitions, INT4OID, 4, true, TYPALIGN_INT, &elements, &nulls, &count);
	if (maxPartition != NULL)
		*maxPartition = 0;
	for (int i = 0; i < count; i++)
	{
		int			partition = DatumGetInt32(elements[i]);

		if (nulls[i] || partition < 0 || partition >= MAX_PARTITIONS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid partition number")));
		set = bms_add_member(set, partition);
		if (maxPartition != NULL)
			*maxPartition = Max(*maxPartition, partition);
	}
	return set;
}

static Datum
Int8ArrayDatum(int64 *values, int count)
{
	Datum	   *elements = palloc(sizeof(Datum) * Max(count, 1));

	for (int i = 0; i < count; i++)
		elements[i] = Int64GetDatum(values[i]);
	return PointerGetDatum(construct_array(elements, count, INT8OID, 8, FLOAT8PASSBYVAL,
										   TYPALIGN_DOUBLE));
}
