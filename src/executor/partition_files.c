/*-------------------------------------------------------------------------
 *
 * partition_files.c
 *	  The files of a repartition exchange on one node: rows partitioned by
 *	  a map task, or fetched from another node, waiting to be read by the
 *	  partition queries.
 *
 * An exchange has one directory per node and user,
 * base/pgsql_tmp/pgsql_tmp_shardext_<exchange id>_<user oid>: the user in
 * the name keeps one role from reading or removing another's rows, and the
 * prefix makes PostgreSQL remove the directory with its own temporary
 * files when the node restarts.  A file "<unit>.<tag>" holds rows of one
 * unit: its header names the column types, then blocks follow, each of
 * one partition: a block header and MinimalTuples, each at a MAXALIGN'ed
 * offset, so that readers use them in place.  Writers keep one block in
 * memory per partition (at most PARTITION_BUFFER_MEMORY in all) and append
 * it to the file when it is full: rows never all sit in memory.  Files are
 * temporary files of fd.c, counted against temp_file_limit.
 *
 * Files are trusted: only this server writes them, from rows its own
 * executor produced (map) or that its input functions made from what
 * another node sent (repartition_wire.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include "access/detoast.h"
#include "access/htup_details.h"
#include "common/file_utils.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "shardext/pg_compat.h"
#include "shardext/repartition.h"

#define PARTITION_FILE_MAGIC 0x53585046 /* 'SXPF' */
#define PARTITION_BLOCK_MAGIC 0x53584246	/* 'SXBF' */
#define PARTITION_FILE_VERSION 1
/* what the block buffers of one writer may take in all, and their bounds */
#define PARTITION_BUFFER_MEMORY (2 * 1024 * 1024)
#define MIN_BLOCK_SIZE 8192
#define MAX_BLOCK_SIZE 65536

typedef struct PartitionFileHeader
{
	uint32		magic;
	uint16		version;
	uint16		natts;
	/* natts type OIDs follow, then padding to MAXALIGN */
} PartitionFileHeader;

typedef struct PartitionBlockHeader
{
	uint32		magic;
	int32		partition;
	uint32		length;			/* payload bytes */
	uint32		rows;
} PartitionBlockHeader;

struct PartitionWriter
{
	MemoryContext context;
	File		file;
	char	   *path;
	off_t		offset;			/* where the next block goes */
	TupleDesc	desc;
	int			partitionCount;
	int			blockSize;
	char	  **buffers;		/* per partition, allocated on first use */
	uint32	   *used;
	uint32	   *rows;
	int64	   *bytes;			/* per partition: payload written */
	int64		total;
	int64		limit;			/* bytes; -1: none */
	Datum	   *flatValues;		/* a row with external values detoasted */
};

struct PartitionReader
{
	MemoryContext context;
	char	   *directory;
	List	   *files;			/* names still to read */
	TupleDesc	expected;		/* the types the reader wants, or NULL: the files' */
	Bitmapset  *partitions;		/* wanted partitions; NULL: all */
	File		file;			/* the file being read, or -1 */
	off_t		offset;
	off_t		size;
	char	   *payload;		/* the current block */
	uint32		payloadSize;
};

static int	HeaderSize(int natts);
static void WriteFileHeader(PartitionWriter *writer);
static void FlushBlock(PartitionWriter *writer, int partition);
static void WriteAt(File file, const char *path, char *data, uint32 length, off_t offset);
static void ReadAt(File file, const char *path, char *data, uint32 length, off_t offset);
static bool OpenNextFile(PartitionReader *reader);
static void CheckFileTypes(PartitionReader *reader, const char *name, Oid *types, int natts);

/*
 * CheckExchangeId refuses an exchange id that is not one the coordinator
 * makes: the id becomes part of a path.
 */
void
CheckExchangeId(const char *exchangeId)
{
	size_t		length = strlen(exchangeId);

	if (length == 0 || length > EXCHANGE_ID_MAXLEN ||
		strspn(exchangeId, "0123456789_") != length)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid repartition exchange id \"%s\"", exchangeId)));
}

/* the directory of an exchange's files of a user on this node */
char *
ExchangeDirectory(const char *exchangeId, Oid userId)
{
	CheckExchangeId(exchangeId);
	return psprintf("base/%s/%s%s_%u", PG_TEMP_FILES_DIR, EXCHANGE_DIR_PREFIX, exchangeId,
					userId);
}

/* the size of a file header with natts types, MAXALIGN'ed */
static int
HeaderSize(int natts)
{
	return MAXALIGN(sizeof(PartitionFileHeader) + natts * sizeof(Oid));
}

/*
 * BeginPartitionWriter creates the file fileName of the exchange's
 * directory (the directory too, when needed) for rows of desc in
 * partitionCount partitions.  limitBytes (-1: none) bounds what the
 * writer writes in all.
 */
PartitionWriter *
BeginPartitionWriter(const char *exchangeId, const char *fileName, TupleDesc desc,
					 int partitionCount, int64 limitBytes)
{
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext,
												  "shardext partition writer",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldContext = MemoryContextSwitchTo(context);
	PartitionWriter *writer = palloc0(sizeof(PartitionWriter));
	char	   *directory = ExchangeDirectory(exchangeId, GetUserId());

	if (strspn(fileName, "abcdefghijklmnopqrstuvwxyz0123456789.") != strlen(fileName))
		elog(ERROR, "invalid partition file name \"%s\"", fileName);
	writer->context = context;
	writer->desc = CreateTupleDescCopy(desc);
	writer->partitionCount = partitionCount;
	writer->blockSize = MAXALIGN_DOWN(Max(MIN_BLOCK_SIZE,
										  Min(MAX_BLOCK_SIZE,
											  PARTITION_BUFFER_MEMORY / Max(partitionCount, 1))));
	writer->buffers = palloc0(sizeof(char *) * partitionCount);
	writer->used = palloc0(sizeof(uint32) * partitionCount);
	writer->rows = palloc0(sizeof(uint32) * partitionCount);
	writer->bytes = palloc0(sizeof(int64) * partitionCount);
	writer->flatValues = palloc(sizeof(Datum) * Max(desc->natts, 1));
	writer->limit = limitBytes;
	writer->path = psprintf("%s/%s", directory, fileName);

	PathNameCreateTemporaryDir(psprintf("base/%s", PG_TEMP_FILES_DIR), directory);
	writer->file = PathNameCreateTemporaryFile(writer->path, true);
	WriteFileHeader(writer);
	MemoryContextSwitchTo(oldContext);
	return writer;
}

static void
WriteFileHeader(PartitionWriter *writer)
{
	int			natts = writer->desc->natts;
	int			size = HeaderSize(natts);
	char	   *header = palloc0(size);
	PartitionFileHeader *fields = (PartitionFileHeader *) header;
	Oid		   *types = (Oid *) (header + sizeof(PartitionFileHeader));

	fields->magic = PARTITION_FILE_MAGIC;
	fields->version = PARTITION_FILE_VERSION;
	fields->natts = natts;
	for (int i = 0; i < natts; i++)
		types[i] = TupleDescAttr(writer->desc, i)->atttypid;
	WriteAt(writer->file, writer->path, header, size, 0);
	writer->offset = size;
	pfree(header);
}

/*
 * WritePartitionRow adds a row to its partition's block, as a MinimalTuple
 * formed in place (as heap_form_minimal_tuple would); values stored
 * outside the row (TOAST) are fetched first, since the row outlives the
 * snapshot that could read them.
 */
void
WritePartitionRow(PartitionWriter *writer, int partition, Datum *values, bool *nulls)
{
	TupleDesc	desc = writer->desc;
	bool		hasNull = false;
	Size		headerLength;
	Size		dataLength;
	Size		length;
	MinimalTuple tuple;
	MemoryContext oldContext = MemoryContextSwitchTo(writer->context);

	Assert(partition >= 0 && partition < writer->partitionCount);
	for (int i = 0; i < desc->natts; i++)
	{
		writer->flatValues[i] = values[i];
		if (nulls[i])
			hasNull = true;
		else if (TupleDescAttr(desc, i)->attlen == -1 &&
				 VARATT_IS_EXTERNAL(DatumGetPointer(values[i])))
			writer->flatValues[i] =
				PointerGetDatum(detoast_external_attr((struct varlena *) DatumGetPointer(values[i])));
	}
	headerLength = SizeofMinimalTupleHeader + (hasNull ? BITMAPLEN(desc->natts) : 0);
	headerLength = MAXALIGN(headerLength);
	dataLength = heap_compute_data_size(desc, writer->flatValues, nulls);
	length = headerLength + dataLength;

	if (writer->buffers[partition] != NULL &&
		writer->used[partition] + MAXALIGN(length) > writer->blockSize)
		FlushBlock(writer, partition);
	if (writer->buffers[partition] == NULL || MAXALIGN(length) > writer->blockSize)
	{
		/* a row bigger than a block gets a block of its own size */
		Size		size = Max(writer->blockSize, MAXALIGN(length));

		if (writer->buffers[partition] != NULL)
			pfree(writer->buffers[partition]);
		writer->buffers[partition] = palloc(size);
	}

	tuple = NextBlockTuple(writer->buffers[partition], writer->used[partition]);
	memset(tuple, 0, length);
	tuple->t_len = length;
	HeapTupleHeaderSetNatts(tuple, desc->natts);
	tuple->t_hoff = headerLength + MINIMAL_TUPLE_OFFSET;
	heap_fill_tuple(desc, writer->flatValues, nulls, (char *) tuple + headerLength, dataLength,
					&tuple->t_infomask, hasNull ? tuple->t_bits : NULL);
	writer->used[partition] += MAXALIGN(length);
	writer->rows[partition]++;
	if (writer->used[partition] >= writer->blockSize)
		FlushBlock(writer, partition);

	/* detoasted copies are freed with the row */
	for (int i = 0; i < desc->natts; i++)
	{
		if (writer->flatValues[i] != values[i])
			pfree(DatumGetPointer(writer->flatValues[i]));
	}
	MemoryContextSwitchTo(oldContext);
}

/*
 * ReportIntermediateResultLimit raises the error of an exchange that wrote
 * more than shardext.max_intermediate_result_size (limitBytes).
 */
void
ReportIntermediateResultLimit(int64 limitBytes)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("the intermediate results of a repartition join exceed "
					"shardext.max_intermediate_result_size (" INT64_FORMAT " kB)",
					limitBytes / 1024),
			 errhint("Filter the joined tables further, raise "
					 "shardext.max_intermediate_result_size, or set "
					 "shardext.enable_repartition_joins to off to join on the coordinator.")));
}

/* FlushBlock appends a partition's block to the file and empties it */
static void
FlushBlock(PartitionWriter *writer, int partition)
{
	PartitionBlockHeader header;
	uint32		length = writer->used[partition];

	if (length == 0)
		return;
	writer->total += length;
	if (writer->limit >= 0 && writer->total > writer->limit)
		ReportIntermediateResultLimit(writer->limit);
	header.magic = PARTITION_BLOCK_MAGIC;
	header.partition = partition;
	header.length = length;
	header.rows = writer->rows[partition];
	WriteAt(writer->file, writer->path, (char *) &header, sizeof(header), writer->offset);
	WriteAt(writer->file, writer->path, writer->buffers[partition], length,
			writer->offset + sizeof(header));
	writer->offset += sizeof(header) + length;
	writer->bytes[partition] += length;
	writer->used[partition] = 0;
	writer->rows[partition] = 0;
	CHECK_FOR_INTERRUPTS();
}

/*
 * EndPartitionWriter writes what the blocks still hold, closes the file
 * and returns the bytes written per partition (in the caller's memory).
 */
int64 *
EndPartitionWriter(PartitionWriter *writer)
{
	int64	   *bytes = palloc(sizeof(int64) * Max(writer->partitionCount, 1));

	for (int p = 0; p < writer->partitionCount; p++)
		FlushBlock(writer, p);
	FileClose(writer->file);
	memcpy(bytes, writer->bytes, sizeof(int64) * writer->partitionCount);
	MemoryContextDelete(writer->context);
	return bytes;
}

static void
WriteAt(File file, const char *path, char *data, uint32 length, off_t offset)
{
	int			written = FileWrite(file, data, length, offset, WAIT_EVENT_BUFFILE_WRITE);

	if (written != (int) length)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write %u bytes to file \"%s\": %m", length, path)));
}

static void
ReadAt(File file, const char *path, char *data, uint32 length, off_t offset)
{
	int			read = FileRead(file, data, length, offset, WAIT_EVENT_BUFFILE_READ);

	if (read != (int) length)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("could not read %u bytes at offset " INT64_FORMAT " of file \"%s\"",
						length, (int64) offset, path)));
}

/*
 * BeginPartitionReader reads the blocks of the given partitions (NULL:
 * all) of unitId in the exchange's files of the current user whose tag
 * starts with one of the letters in kinds ("m": written by map tasks, "f":
 * fetched from other nodes).  Every file must hold rows of the types of
 * expected; when expected is NULL the files' own types are taken (and must
 * agree).  A node without files of the unit reads nothing.
 */
PartitionReader *
BeginPartitionReader(const char *exchangeId, int unitId, const char *kinds,
					 TupleDesc expected, Bitmapset *partitions)
{
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext,
												  "shardext partition reader",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldContext = MemoryContextSwitchTo(context);
	PartitionReader *reader = palloc0(sizeof(PartitionReader));
	char	   *prefix = psprintf("%d.", unitId);
	DIR		   *dir;
	struct dirent *entry;

	reader->context = context;
	reader->directory = ExchangeDirectory(exchangeId, GetUserId());
	reader->expected = expected != NULL ? CreateTupleDescCopy(expected) : NULL;
	reader->partitions = bms_copy(partitions);
	reader->file = -1;

	dir = AllocateDir(reader->directory);
	if (dir == NULL && errno != ENOENT)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open directory \"%s\": %m", reader->directory)));
	while (dir != NULL && (entry = ReadDir(dir, reader->directory)) != NULL)
	{
		size_t		prefixLength = strlen(prefix);

		if (strncmp(entry->d_name, prefix, prefixLength) == 0 &&
			entry->d_name[prefixLength] != '\0' &&
			strchr(kinds, entry->d_name[prefixLength]) != NULL)
			reader->files = lappend(reader->files, pstrdup(entry->d_name));
	}
	if (dir != NULL)
		FreeDir(dir);
	MemoryContextSwitchTo(oldContext);
	return reader;
}

/*
 * OpenNextFile opens the next file of the reader and checks its header;
 * false when there is none.
 */
static bool
OpenNextFile(PartitionReader *reader)
{
	char	   *name;
	char	   *path;
	PartitionFileHeader header;
	Oid		   *types;

	if (reader->file >= 0)
	{
		FileClose(reader->file);
		reader->file = -1;
	}
	if (reader->files == NIL)
		return false;
	name = linitial(reader->files);
	reader->files = list_delete_first(reader->files);
	path = psprintf("%s/%s", reader->directory, name);
	reader->file = PathNameOpenTemporaryFile(path, O_RDONLY | PG_BINARY);
	reader->size = FileSize(reader->file);
	if (reader->size < (off_t) sizeof(header))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("partition file \"%s\" is truncated", path)));
	ReadAt(reader->file, path, (char *) &header, sizeof(header), 0);
	if (header.magic != PARTITION_FILE_MAGIC || header.version != PARTITION_FILE_VERSION ||
		reader->size < HeaderSize(header.natts))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("\"%s\" is not a partition file of this version", path)));
	types = palloc(sizeof(Oid) * Max(header.natts, 1));
	ReadAt(reader->file, path, (char *) types, header.natts * sizeof(Oid), sizeof(header));
	CheckFileTypes(reader, path, types, header.natts);
	reader->offset = HeaderSize(header.natts);
	return true;
}

/*
 * CheckFileTypes: a file's rows can only be read with the types they were
 * written with.  Without expected types, the first file's become them.
 */
static void
CheckFileTypes(PartitionReader *reader, const char *path, Oid *types, int natts)
{
	if (reader->expected == NULL)
	{
		TupleDesc	desc = CreateTemplateTupleDesc(natts);

		for (int i = 0; i < natts; i++)
			TupleDescInitEntry(desc, i + 1, NULL, types[i], -1, 0);
		FinishTupleDesc(desc);
		reader->expected = desc;
		return;
	}
	if (reader->expected->natts != natts)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("partition file \"%s\" has %d columns where %d were expected",
						path, natts, reader->expected->natts)));
	for (int i = 0; i < natts; i++)
	{
		if (TupleDescAttr(reader->expected, i)->atttypid != types[i])
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column %d of partition file \"%s\" is of type %s, not %s",
							i + 1, path, format_type_be(types[i]),
							format_type_be(TupleDescAttr(reader->expected, i)->atttypid))));
	}
}

/*
 * NextPartitionBlock returns the next block of a wanted partition: its
 * partition, payload (valid until the next call), length and row count;
 * false when all files are read.
 */
bool
NextPartitionBlock(PartitionReader *reader, int *partition, char **payload, uint32 *length,
				   uint32 *rows)
{
	MemoryContext oldContext = MemoryContextSwitchTo(reader->context);

	for (;;)
	{
		PartitionBlockHeader header;
		char	   *path;

		if (reader->file < 0 || reader->offset >= reader->size)
		{
			if (!OpenNextFile(reader))
			{
				MemoryContextSwitchTo(oldContext);
				return false;
			}
			continue;
		}
		path = reader->directory;
		if (reader->offset + (off_t) sizeof(header) > reader->size)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("a partition file in \"%s\" ends inside a block", path)));
		ReadAt(reader->file, path, (char *) &header, sizeof(header), reader->offset);
		if (header.magic != PARTITION_BLOCK_MAGIC ||
			reader->offset + (off_t) sizeof(header) + header.length > reader->size)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("a partition file in \"%s\" has a broken block", path)));
		reader->offset += sizeof(header);
		if (reader->partitions != NULL && !bms_is_member(header.partition, reader->partitions))
		{
			reader->offset += header.length;
			continue;
		}
		if (header.length > reader->payloadSize)
		{
			if (reader->payload != NULL)
				pfree(reader->payload);
			reader->payloadSize = Max(header.length, MAX_BLOCK_SIZE);
			reader->payload = palloc(reader->payloadSize);
		}
		ReadAt(reader->file, path, reader->payload, header.length, reader->offset);
		reader->offset += header.length;
		*partition = header.partition;
		*payload = reader->payload;
		*length = header.length;
		*rows = header.rows;
		CHECK_FOR_INTERRUPTS();
		MemoryContextSwitchTo(oldContext);
		return true;
	}
}

/* the types of the rows read (the expected ones, or those of the first file) */
TupleDesc
PartitionReaderDesc(PartitionReader *reader)
{
	return reader->expected;
}

void
EndPartitionReader(PartitionReader *reader)
{
	if (reader->file >= 0)
		FileClose(reader->file);
	MemoryContextDelete(reader->context);
}

/*
 * RemoveExchangeDirectory removes the files of an exchange of a user on
 * this node; false when there were none.
 */
bool
RemoveExchangeDirectory(const char *exchangeId, Oid userId)
{
	char	   *directory = ExchangeDirectory(exchangeId, userId);
	struct stat st;

	if (stat(directory, &st) != 0)
		return false;
	if (!rmtree(directory, true))
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("could not remove all files of \"%s\"", directory)));
	return true;
}

/*
 * SweepExchangeDirectories removes the exchange directories (of every
 * user) whose id starts with prefix (a coordinator database's) and that no
 * exchange of it uses any more: those of another incarnation than
 * currentIncarnation, and those of this incarnation numbered below
 * keepFrom.  Returns how many it removed.
 */
int
SweepExchangeDirectories(const char *prefix, const char *currentIncarnation, uint64 keepFrom)
{
	char	   *base = psprintf("base/%s", PG_TEMP_FILES_DIR);
	char	   *namePrefix = psprintf("%s%s", EXCHANGE_DIR_PREFIX, prefix);
	size_t		prefixLength = strlen(namePrefix);
	size_t		incarnationLength = strlen(currentIncarnation);
	DIR		   *dir = AllocateDir(base);
	struct dirent *entry;
	int			removed = 0;

	if (dir == NULL)
		return 0;				/* no temporary files at all */
	while ((entry = ReadDir(dir, base)) != NULL)
	{
		const char *rest = entry->d_name + prefixLength;
		bool		stale = true;

		if (strncmp(entry->d_name, namePrefix, prefixLength) != 0)
			continue;
		/* the rest is <incarnation>_<number>_<user> */
		if (strncmp(rest, currentIncarnation, incarnationLength) == 0 &&
			rest[incarnationLength] == '_' &&
			strtou64(rest + incarnationLength + 1, NULL, 10) >= keepFrom)
			stale = false;
		if (stale && rmtree(psprintf("%s/%s", base, entry->d_name), true))
			removed++;
	}
	FreeDir(dir);
	return removed;
}
