/*-------------------------------------------------------------------------
 *
 * repartition_wire.c
 *	  How the rows of a repartition exchange travel from one node to
 *	  another: a row is its columns, each an int32 length (-1: NULL) and
 *	  bytes in one of three forms, chosen by the column's type alone, so
 *	  that both ends agree:
 *	- raw: fixed-size values for which every bit pattern is valid (integers,
 *	  floats, dates and times, bool), in network byte order;
 *	- binary: other built-in types, in their send/receive format (built-in
 *	  type OIDs are the same on every node);
 *	- text: every other type (enums, domains, composites, arrays of them,
 *	  types of extensions), in its output/input form under the settings
 *	  remote sessions use; OIDs in their binary forms differ between nodes.
 *
 * The receiving node makes every value with its own receive or input
 * functions, which check what they are given: a node never trusts the
 * bytes another server sent (the address to fetch from comes from the
 * caller of shardext.repartition_fetch).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "shardext/repartition.h"

/*
 * IsRawWireType: a fixed-size pass-by-value type whose every bit pattern
 * is a valid value.
 */
bool
IsRawWireType(Oid type)
{
	switch (type)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case FLOAT4OID:
		case FLOAT8OID:
		case OIDOID:
		case DATEOID:
		case TIMEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
		case BOOLOID:
		case CASHOID:
			return true;
		default:
			return false;
	}
}

/*
 * IsBinaryWireType: a built-in type (not raw) whose send/receive format
 * means the same on every node.
 */
bool
IsBinaryWireType(Oid type)
{
	char		typtype;

	if (type >= FirstGenbkiObjectId || IsRawWireType(type))
		return false;
	typtype = get_typtype(type);
	return typtype == TYPTYPE_BASE || typtype == TYPTYPE_RANGE ||
		typtype == TYPTYPE_MULTIRANGE;
}

/* PrepareWireOutputs looks up the send or output function of each column */
void
PrepareWireOutputs(TupleDesc desc, FmgrInfo *outputs)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Oid			type = TupleDescAttr(desc, i)->atttypid;
		Oid			function;
		bool		isVarlena;

		if (IsRawWireType(type))
			continue;
		if (IsBinaryWireType(type))
			getTypeBinaryOutputInfo(type, &function, &isVarlena);
		else
			getTypeOutputInfo(type, &function, &isVarlena);
		fmgr_info(function, &outputs[i]);
	}
}

/* PrepareWireInputs looks up the receive or input function of each column */
void
PrepareWireInputs(TupleDesc desc, FmgrInfo *inputs, Oid *ioparams)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Oid			type = TupleDescAttr(desc, i)->atttypid;
		Oid			function;

		if (IsRawWireType(type))
			continue;
		if (IsBinaryWireType(type))
			getTypeBinaryInputInfo(type, &function, &ioparams[i]);
		else
			getTypeInputInfo(type, &function, &ioparams[i]);
		fmgr_info(function, &inputs[i]);
	}
}

/* a raw value in network byte order */
static void
AppendRawValue(StringInfo buf, Form_pg_attribute attr, Datum value)
{
	switch (attr->attlen)
	{
		case 1:
			{
				uint32		length = pg_hton32(1);
				char		byte = DatumGetBool(value) ? 1 : 0;

				appendBinaryStringInfo(buf, (char *) &length, 4);
				appendBinaryStringInfo(buf, &byte, 1);
				break;
			}
		case 2:
			{
				uint32		length = pg_hton32(2);
				uint16		v = pg_hton16((uint16) DatumGetInt16(value));

				appendBinaryStringInfo(buf, (char *) &length, 4);
				appendBinaryStringInfo(buf, (char *) &v, 2);
				break;
			}
		case 4:
			{
				uint32		length = pg_hton32(4);
				uint32		v;

				if (attr->atttypid == FLOAT4OID)
				{
					float4		f = DatumGetFloat4(value);

					memcpy(&v, &f, 4);
				}
				else
					v = (uint32) DatumGetInt32(value);
				v = pg_hton32(v);
				appendBinaryStringInfo(buf, (char *) &length, 4);
				appendBinaryStringInfo(buf, (char *) &v, 4);
				break;
			}
		case 8:
			{
				uint32		length = pg_hton32(8);
				uint64		v;

				if (attr->atttypid == FLOAT8OID)
				{
					float8		f = DatumGetFloat8(value);

					memcpy(&v, &f, 8);
				}
				else
					v = (uint64) DatumGetInt64(value);
				v = pg_hton64(v);
				appendBinaryStringInfo(buf, (char *) &length, 4);
				appendBinaryStringInfo(buf, (char *) &v, 8);
				break;
			}
		default:
			elog(ERROR, "unexpected length %d of a raw wire type", attr->attlen);
	}
}

/*
 * AppendWireRow appends the row tuple (of desc) to buf; slot is a minimal
 * tuple slot of desc to deform it in, outputs the functions of
 * PrepareWireOutputs.  Values are made in the current memory context.
 */
void
AppendWireRow(StringInfo buf, TupleDesc desc, MinimalTuple tuple, TupleTableSlot *slot,
			  FmgrInfo *outputs)
{
	ExecStoreMinimalTuple(tuple, slot, false);
	slot_getallattrs(slot);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);
		uint32		length;

		if (slot->tts_isnull[i])
		{
			length = pg_hton32((uint32) -1);
			appendBinaryStringInfo(buf, (char *) &length, 4);
		}
		else if (IsRawWireType(attr->atttypid))
			AppendRawValue(buf, attr, slot->tts_values[i]);
		else if (IsBinaryWireType(attr->atttypid))
		{
			bytea	   *bytes = SendFunctionCall(&outputs[i], slot->tts_values[i]);

			length = pg_hton32(VARSIZE(bytes) - VARHDRSZ);
			appendBinaryStringInfo(buf, (char *) &length, 4);
			appendBinaryStringInfo(buf, VARDATA(bytes), VARSIZE(bytes) - VARHDRSZ);
		}
		else
		{
			char	   *text = OutputFunctionCall(&outputs[i], slot->tts_values[i]);
			size_t		textLength = strlen(text);

			length = pg_hton32((uint32) textLength);
			appendBinaryStringInfo(buf, (char *) &length, 4);
			appendBinaryStringInfo(buf, text, textLength);
		}
	}
	ExecClearTuple(slot);
}

/* ReadRawValue makes a raw value of attr from length bytes at data */
static Datum
ReadRawValue(Form_pg_attribute attr, const char *data, uint32 length)
{
	if ((int) length != attr->attlen)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("a %s value of %u bytes arrived from another node",
						format_type_be(attr->atttypid), length)));
	switch (attr->attlen)
	{
		case 1:
			return BoolGetDatum(data[0] != 0);
		case 2:
			{
				uint16		v;

				memcpy(&v, data, 2);
				return Int16GetDatum((int16) pg_ntoh16(v));
			}
		case 4:
			{
				uint32		v;

				memcpy(&v, data, 4);
				v = pg_ntoh32(v);
				if (attr->atttypid == FLOAT4OID)
				{
					float4		f;

					memcpy(&f, &v, 4);
					return Float4GetDatum(f);
				}
				return Int32GetDatum((int32) v);
			}
		default:
			{
				uint64		v;

				memcpy(&v, data, 8);
				v = pg_ntoh64(v);
				if (attr->atttypid == FLOAT8OID)
				{
					float8		f;

					memcpy(&f, &v, 8);
					return Float8GetDatum(f);
				}
				return Int64GetDatum((int64) v);
			}
	}
}

/*
 * ReadWireRow reads one row of desc from data (at most up to end) into
 * values and nulls, with the functions of PrepareWireInputs; values are
 * made in the current memory context.  Returns where the row ends.
 */
const char *
ReadWireRow(const char *data, const char *end, TupleDesc desc, FmgrInfo *inputs,
			Oid *ioparams, Datum *values, bool *nulls)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);
		uint32		length;

		if (end - data < 4)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					 errmsg("a row from another node ends early")));
		memcpy(&length, data, 4);
		length = pg_ntoh32(length);
		data += 4;
		nulls[i] = (length == (uint32) -1);
		if (nulls[i])
		{
			values[i] = (Datum) 0;
			continue;
		}
		if ((uint64) length > (uint64) (end - data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					 errmsg("a value from another node ends early")));
		if (IsRawWireType(attr->atttypid))
			values[i] = ReadRawValue(attr, data, length);
		else if (IsBinaryWireType(attr->atttypid))
		{
			StringInfoData buf;

			initStringInfo(&buf);
			appendBinaryStringInfo(&buf, data, length);
			values[i] = ReceiveFunctionCall(&inputs[i], &buf, ioparams[i], attr->atttypmod);
			if (buf.cursor != buf.len)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
						 errmsg("incorrect binary data format of a %s value from another node",
								format_type_be(attr->atttypid))));
			pfree(buf.data);
		}
		else
		{
			char	   *text = palloc(length + 1);

			memcpy(text, data, length);
			text[length] = '\0';
			if (strlen(text) != length)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
						 errmsg("a %s value from another node contains a zero byte",
								format_type_be(attr->atttypid))));
			values[i] = InputFunctionCall(&inputs[i], text, ioparams[i], attr->atttypmod);
		}
		data += length;
	}
	return data;
}
