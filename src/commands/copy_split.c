/*-------------------------------------------------------------------------
 *
 * copy_split.c
 *	  Splits the text or CSV input of COPY FROM into lines without parsing
 *	  their fields, for the coordinator to forward to the shards.
 *
 * PostgreSQL's own reader looks at every byte of the input twice, through
 * a loop with a branch per character (finding the end of the line, then
 * splitting it into fields); that is most of what the coordinator spends
 * on a COPY, and about what parsing and inserting the line costs a local
 * table.  The splitter finds a line's end with memchr and looks at the
 * bytes of a line one by one only when the line has a quote (CSV) or a
 * backslash (text); it splits fields only up to the distribution column,
 * whose value it returns unescaped.  The workers parse the lines in full.
 *
 * It reads the input itself (the file or program BeginCopyFrom opened, or
 * CopyData messages from the client, exactly as PostgreSQL reads them),
 * and only when no encoding conversion is needed.  Whatever it does not
 * handle -- a line with the end-of-copy marker \. or an escaped line end,
 * an end of line other than the first line's or than \n or \r\n, a last
 * line without an end of line, HEADER MATCH -- it hands over to
 * PostgreSQL's reader, from that line on: the CopyFromState then reads,
 * through a callback, what the splitter holds and then the rest of the
 * input, knowing the line number and the end-of-line style so far.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/copy.h"
#include "commands/copyfrom_internal.h"
#include "commands/progress.h"
#include "libpq/pqformat.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/memutils.h"

#include "shardext/pg_compat.h"
#include "shardext/shard_copy.h"

#define SPLIT_READ_SIZE (256 * 1024)

#define ISOCTAL(c) (((c) >= '0') && ((c) <= '7'))

struct CopySplitter
{
	CopyFromState cstate;
	char	   *buf;			/* input not yet split: [start, end) */
	int			size;
	int			start;
	int			end;
	bool		fromClient;		/* the source is the client, else a file or program */
	bool		sourceDone;		/* the source has no more input */
	bool		handedOver;		/* PostgreSQL's reader reads from here on */
	bool		csv;
	char		delim;
	char		quote;
	char		escape;
	int			distField;		/* field of the distribution column, -1: none */
	bool		verifyInput;	/* PostgreSQL verifies the input's encoding */
	EolType		eol;
	uint64		bytesRead;
	const char *line;			/* the line being split, for error contexts */
	int			lineLength;
	StringInfoData value;		/* the distribution column's value, unescaped */
};

/* the splitter a handed-over CopyFromState reads from (one COPY at a time) */
static CopySplitter *feedingSplitter = NULL;

static int	ReadSource(CopySplitter *splitter, char *target, int maxread);
static int	ReadFrontend(CopyFromState cstate, char *target, int maxread);
static bool FillBuffer(CopySplitter *splitter);
static int	FindLineEnd(CopySplitter *splitter, int *embedded);
static int	FindQuotedLineEnd(CopySplitter *splitter, int from, int *embedded);
static int	FindEscapedLineEnd(CopySplitter *splitter, int from);
static bool EolMatches(CopySplitter *splitter, int newline);
static bool CsvField(CopySplitter *splitter, const char **p, const char *end, bool *isnull);
static bool TextField(CopySplitter *splitter, const char **p, const char *end, bool *isnull);
static int	HexValue(char c);
static void VerifyValue(CopySplitter *splitter);
static bool BytesAreAscii(const char *bytes, int length);
static void SetErrorLine(CopySplitter *splitter);
static void HandOver(CopySplitter *splitter, int headerLeft);
static int	FeedHandedOver(void *outbuf, int minread, int maxread);

/*
 * CopySplitterUsable says whether the splitter can read a COPY's input:
 * text or CSV from a file, a program or the client, in the database
 * encoding, without HEADER MATCH.
 */
bool
CopySplitterUsable(CopyFromState cstate)
{
	return !CopyFormatIsBinary(&cstate->opts) && !cstate->need_transcoding &&
		(cstate->copy_src == COPY_FILE || cstate->copy_src == COPY_FRONTEND) &&
		cstate->opts.header_line != COPY_HEADER_MATCH;
}

/*
 * BeginCopySplit starts splitting the input of cstate; distField is the
 * input field of the distribution column (-1: none is needed).  Header
 * lines are skipped.
 */
CopySplitter *
BeginCopySplit(CopyFromState cstate, int distField)
{
	CopySplitter *splitter = palloc0(sizeof(CopySplitter));
	int			headerLines;

	Assert(CopySplitterUsable(cstate));
	splitter->cstate = cstate;
	splitter->fromClient = (cstate->copy_src == COPY_FRONTEND);
	splitter->size = SPLIT_READ_SIZE * 2;
	splitter->buf = palloc(splitter->size);
	splitter->csv = CopyFormatIsCsv(&cstate->opts);
	splitter->delim = cstate->opts.delim[0];
	splitter->quote = splitter->csv ? cstate->opts.quote[0] : '\0';
	splitter->escape = splitter->csv ? cstate->opts.escape[0] : '\0';
	splitter->distField = distField;
	splitter->verifyInput = (cstate->file_encoding != PG_SQL_ASCII);
	splitter->eol = EOL_UNKNOWN;
	initStringInfo(&splitter->value);

	headerLines = cstate->opts.header_line;
	for (int i = 0; i < headerLines; i++)
	{
		const char *line;
		int			length;
		CopySplitResult result = CopySplitNext(splitter, &line, &length, NULL);

		if (result == COPY_SPLIT_HANDED_OVER)
		{
			/* PostgreSQL skips the header lines left (counting from 1 again) */
			HandOver(splitter, headerLines - i);
			return splitter;
		}
		if (result == COPY_SPLIT_END)
			break;
	}
	cstate->opts.header_line = COPY_HEADER_FALSE;
	return splitter;
}

/*
 * CopySplitNext returns the next input line (without its end of line) in
 * *line and *length, and, when a distribution field was given and value is
 * not NULL, that field's value in *value (NULL for SQL NULL; FORCE_NULL and
 * FORCE_NOT_NULL are the caller's).  It returns COPY_SPLIT_LINE, or
 * COPY_SPLIT_END at the end of the input, or COPY_SPLIT_HANDED_OVER once
 * the rest is for PostgreSQL's reader (NextCopyFromRawFields) to read.
 * The line stays valid until the next call.
 */
CopySplitResult
CopySplitNext(CopySplitter *splitter, const char **line, int *length, char **value)
{
	CopyFromState cstate = splitter->cstate;
	int			embedded = 0;
	int			newline;
	const char *p;
	const char *lineEnd;
	bool		isnull = false;

	if (splitter->handedOver)
		return COPY_SPLIT_HANDED_OVER;
	while ((newline = FindLineEnd(splitter, &embedded)) == -1)
	{
		if (!FillBuffer(splitter))
		{
			if (splitter->start == splitter->end)
				return COPY_SPLIT_END;
			/* a last line without end of line: PostgreSQL's rules */
			HandOver(splitter, 0);
			return COPY_SPLIT_HANDED_OVER;
		}
	}
	if (newline == -2 || !EolMatches(splitter, newline))
	{
		HandOver(splitter, 0);
		return COPY_SPLIT_HANDED_OVER;
	}

	p = splitter->buf + splitter->start;
	lineEnd = splitter->buf + newline - (splitter->eol == EOL_CRNL ? 1 : 0);
	*line = p;
	*length = lineEnd - p;
	splitter->line = p;
	splitter->lineLength = lineEnd - p;
	cstate->cur_lineno += 1 + embedded;
	splitter->start = newline + 1;

	if (value == NULL || splitter->distField < 0)
		return COPY_SPLIT_LINE;
	for (int field = 0; field <= splitter->distField; field++)
	{
		bool		more;

		resetStringInfo(&splitter->value);
		more = splitter->csv ? CsvField(splitter, &p, lineEnd, &isnull) :
			TextField(splitter, &p, lineEnd, &isnull);
		if (!more && field < splitter->distField)
		{
			SetErrorLine(splitter);
			ReportMissingCopyColumn(cstate, field + 1);
		}
	}
	*value = isnull ? NULL : splitter->value.data;
	return COPY_SPLIT_LINE;
}

/*
 * ReportMissingCopyColumn raises PostgreSQL's error for an input line that
 * ends before field number 'field' (0-based).
 */
void
ReportMissingCopyColumn(CopyFromState cstate, int field)
{
	Relation	rel = cstate->rel;
	AttrNumber	attnum = list_nth_int(cstate->attnumlist, field);

	ereport(ERROR,
			(errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
			 errmsg("missing data for column \"%s\"",
					NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname))));
}

/* SetErrorLine shows the line being split in error contexts, as PostgreSQL does */
static void
SetErrorLine(CopySplitter *splitter)
{
	CopyFromState cstate = splitter->cstate;

	resetStringInfo(&cstate->line_buf);
	appendBinaryStringInfo(&cstate->line_buf, splitter->line, splitter->lineLength);
	cstate->line_buf_valid = true;
}

/*
 * EndCopySplit reads what the client still sends after PostgreSQL's
 * reader stopped at an end-of-copy marker: it drains the client only when
 * it reads from it itself.
 */
void
EndCopySplit(CopySplitter *splitter)
{
	char		discard[8192];

	while (splitter->fromClient && !splitter->sourceDone &&
		   ReadSource(splitter, discard, sizeof(discard)) > 0)
		;
	feedingSplitter = NULL;
}

/*
 * FindLineEnd returns the offset of the \n that ends the line at
 * splitter->start, -1 when the buffer ends first, -2 when the line is one
 * for PostgreSQL's reader.  *embedded counts line ends inside quoted CSV
 * fields (PostgreSQL counts them as lines).
 */
static int
FindLineEnd(CopySplitter *splitter, int *embedded)
{
	char	   *begin = splitter->buf + splitter->start;
	int			available = splitter->end - splitter->start;
	char	   *newline;
	char	   *special;

	*embedded = 0;
	if (available == 0)
		return -1;
	/* \. at the start of a CSV line may be an end-of-copy marker */
	if (splitter->csv && begin[0] == '\\')
	{
		if (available < 2)
			return -1;
		if (begin[1] == '.')
			return -2;
	}
	newline = memchr(begin, '\n', available);
	if (newline == NULL)
		return -1;
	special = memchr(begin, splitter->csv ? splitter->quote : '\\', newline - begin);
	if (special == NULL)
		return newline - splitter->buf;
	if (splitter->csv)
		return FindQuotedLineEnd(splitter, splitter->start, embedded);
	return FindEscapedLineEnd(splitter, special - splitter->buf);
}

/*
 * FindQuotedLineEnd finds the end of a CSV line with quotes as
 * PostgreSQL's reader does: a \n inside a quoted field is data.
 */
static int
FindQuotedLineEnd(CopySplitter *splitter, int from, int *embedded)
{
	bool		inQuote = false;
	bool		lastWasEscape = false;
	char		embeddedEnd = splitter->eol == EOL_NL ? '\n' : '\r';
	/* an escape that is the quote character is just a quote here */
	char		escape = splitter->escape == splitter->quote ? '\0' : splitter->escape;

	for (int i = from; i < splitter->end; i++)
	{
		char		c = splitter->buf[i];

		if (inQuote && c == escape)
			lastWasEscape = !lastWasEscape;
		if (c == splitter->quote && !lastWasEscape)
			inQuote = !inQuote;
		if (c != escape)
			lastWasEscape = false;
		if (!inQuote && c == '\n')
			return i;
		if (inQuote && c == embeddedEnd)
			(*embedded)++;
		/* an unquoted \r decides the end-of-line style: PostgreSQL's rules */
		if (!inQuote && c == '\r' && splitter->eol == EOL_UNKNOWN &&
			(i + 1 >= splitter->end || splitter->buf[i + 1] != '\n'))
			return i + 1 >= splitter->end ? -1 : -2;
	}
	return -1;
}

/*
 * FindEscapedLineEnd finds the end of a text-format line from its first
 * backslash on: the character after a backslash is data.  A backslash
 * before a line end or a period (the end-of-copy marker) is for
 * PostgreSQL's reader.
 */
static int
FindEscapedLineEnd(CopySplitter *splitter, int from)
{
	for (int i = from; i < splitter->end; i++)
	{
		char		c = splitter->buf[i];

		if (c == '\n')
			return i;
		if (c != '\\')
			continue;
		if (i + 1 >= splitter->end)
			return -1;
		c = splitter->buf[++i];
		if (c == '.' || c == '\n' || c == '\r')
			return -2;
	}
	return -1;
}

/*
 * EolMatches checks the end of line at 'newline' against the first line's
 * (\n or \r\n, which it records); anything else is for PostgreSQL's reader,
 * which reports it.  In text format, a \r elsewhere on the first line may
 * be its end of line too.
 */
static bool
EolMatches(CopySplitter *splitter, int newline)
{
	bool		crnl = newline > splitter->start && splitter->buf[newline - 1] == '\r';

	if (splitter->eol == EOL_UNKNOWN)
	{
		int			length = newline - splitter->start - (crnl ? 1 : 0);

		if (memchr(splitter->buf + splitter->start, '\r', length) != NULL)
			return false;
		splitter->eol = crnl ? EOL_CRNL : EOL_NL;
		splitter->cstate->eol_type = splitter->eol;
		return true;
	}
	return crnl == (splitter->eol == EOL_CRNL);
}

/*
 * CsvField reads one CSV field at *p into splitter->value as
 * CopyReadAttributesCSV does, and returns whether a delimiter followed it.
 */
static bool
CsvField(CopySplitter *splitter, const char **p, const char *end, bool *isnull)
{
	const char *cur = *p;
	const char *start = cur;
	const char *fieldEnd;
	bool		sawQuote = false;
	bool		more = false;
	CopyFromState cstate = splitter->cstate;
	int			length = splitter->value.len;

	for (;;)
	{
		/* not in quotes */
		for (;;)
		{
			char		c;

			fieldEnd = cur;
			if (cur >= end)
				goto done;
			c = *cur++;
			if (c == splitter->delim)
			{
				more = true;
				goto done;
			}
			if (c == splitter->quote)
			{
				sawQuote = true;
				break;
			}
			appendStringInfoChar(&splitter->value, c);
		}
		/* in quotes */
		for (;;)
		{
			char		c;

			fieldEnd = cur;
			if (cur >= end)
			{
				SetErrorLine(splitter);
				ereport(ERROR,
						(errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
						 errmsg("unterminated CSV quoted field")));
			}
			c = *cur++;
			if (c == splitter->escape && cur < end &&
				(*cur == splitter->escape || *cur == splitter->quote))
			{
				appendStringInfoChar(&splitter->value, *cur++);
				continue;
			}
			if (c == splitter->quote)
				break;
			appendStringInfoChar(&splitter->value, c);
		}
	}
done:
	*isnull = !sawQuote && fieldEnd - start == cstate->opts.null_print_len &&
		strncmp(start, cstate->opts.null_print, fieldEnd - start) == 0;
	if (!*isnull && splitter->verifyInput &&
		!BytesAreAscii(splitter->value.data + length, splitter->value.len - length))
		VerifyValue(splitter);
	*p = cur;
	return more;
}

/*
 * TextField reads one text-format field at *p into splitter->value,
 * undoing backslash escapes as CopyReadAttributesText does, and returns
 * whether a delimiter followed it.
 */
static bool
TextField(CopySplitter *splitter, const char **p, const char *end, bool *isnull)
{
	const char *cur = *p;
	const char *start = cur;
	const char *fieldEnd;
	bool		sawNonAscii = false;
	bool		more = false;
	CopyFromState cstate = splitter->cstate;

	for (;;)
	{
		char		c;

		fieldEnd = cur;
		if (cur >= end)
			break;
		c = *cur++;
		if (c == splitter->delim)
		{
			more = true;
			break;
		}
		if (c == '\\')
		{
			if (cur >= end)
				break;
			c = *cur++;
			switch (c)
			{
				case '0':
				case '1':
				case '2':
				case '3':
				case '4':
				case '5':
				case '6':
				case '7':
					{
						int			val = c - '0';

						for (int digits = 1; digits < 3 && cur < end && ISOCTAL(*cur); digits++)
							val = (val << 3) + (*cur++ - '0');
						c = val & 0377;
						if (c == '\0' || IS_HIGHBIT_SET(c))
							sawNonAscii = true;
					}
					break;
				case 'x':
					if (cur < end && isxdigit((unsigned char) *cur))
					{
						int			val = HexValue(*cur++);

						if (cur < end && isxdigit((unsigned char) *cur))
							val = (val << 4) + HexValue(*cur++);
						c = val & 0xff;
						if (c == '\0' || IS_HIGHBIT_SET(c))
							sawNonAscii = true;
					}
					break;
				case 'b':
					c = '\b';
					break;
				case 'f':
					c = '\f';
					break;
				case 'n':
					c = '\n';
					break;
				case 'r':
					c = '\r';
					break;
				case 't':
					c = '\t';
					break;
				case 'v':
					c = '\v';
					break;
				default:
					/* any other character stands for itself */
					break;
			}
		}
		if (IS_HIGHBIT_SET(c) && splitter->verifyInput)
			sawNonAscii = true;
		appendStringInfoChar(&splitter->value, c);
	}
	*isnull = fieldEnd - start == cstate->opts.null_print_len &&
		strncmp(start, cstate->opts.null_print, fieldEnd - start) == 0;
	if (!*isnull && sawNonAscii)
		VerifyValue(splitter);
	*p = cur;
	return more;
}

/*
 * VerifyValue checks that the distribution column's value is valid in the
 * database encoding, before its input function sees it: PostgreSQL checks
 * the whole input (unless it comes as SQL_ASCII) and what escapes make.
 */
static void
VerifyValue(CopySplitter *splitter)
{
	SetErrorLine(splitter);
	pg_verifymbstr(splitter->value.data, splitter->value.len, false);
	splitter->cstate->line_buf_valid = false;
}

/* pg_is_ascii over bytes that need not end in a zero */
static bool
BytesAreAscii(const char *bytes, int length)
{
	for (int i = 0; i < length; i++)
	{
		if (IS_HIGHBIT_SET(bytes[i]))
			return false;
	}
	return true;
}

/* the value of a hexadecimal digit */
static int
HexValue(char c)
{
	if (isdigit((unsigned char) c))
		return c - '0';
	return tolower((unsigned char) c) - 'a' + 10;
}

/*
 * FillBuffer moves the unsplit input to the front of the buffer and reads
 * more after it (growing the buffer for a long line); false at the end of
 * the input.
 */
static bool
FillBuffer(CopySplitter *splitter)
{
	int			kept = splitter->end - splitter->start;
	int			count;

	if (splitter->sourceDone)
		return false;
	if (splitter->start > 0)
		memmove(splitter->buf, splitter->buf + splitter->start, kept);
	splitter->start = 0;
	splitter->end = kept;
	if (splitter->size - kept < SPLIT_READ_SIZE)
	{
		if ((Size) splitter->size * 2 > MaxAllocSize)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("COPY input line is too long")));
		splitter->size *= 2;
		splitter->buf = repalloc(splitter->buf, splitter->size);
	}
	count = ReadSource(splitter, splitter->buf + kept, splitter->size - kept);
	splitter->end += count;
	CHECK_FOR_INTERRUPTS();
	return count > 0;
}

/*
 * ReadSource reads up to maxread bytes of input, 0 at its end; as
 * CopyGetData does, with progress reporting as CopyLoadRawBuf does.
 */
static int
ReadSource(CopySplitter *splitter, char *target, int maxread)
{
	CopyFromState cstate = splitter->cstate;
	int			count;

	if (splitter->sourceDone)
		return 0;
	if (!splitter->fromClient)
	{
		count = fread(target, 1, maxread, cstate->copy_file);
		if (ferror(cstate->copy_file))
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read from COPY file: %m")));
	}
	else
		count = ReadFrontend(cstate, target, maxread);
	if (count == 0)
		splitter->sourceDone = true;
	splitter->bytesRead += count;
	pgstat_progress_update_param(PROGRESS_COPY_BYTES_PROCESSED, splitter->bytesRead);
	return count;
}

/*
 * ReadFrontend reads CopyData from the client as CopyGetData does: at least
 * one byte, 0 after CopyDone; Flush and Sync are ignored.
 */
static int
ReadFrontend(CopyFromState cstate, char *target, int maxread)
{
	StringInfo	msgbuf = cstate->fe_msgbuf;
	int			available;

	while (msgbuf->cursor >= msgbuf->len)
	{
		int			mtype;
		int			maxmsglen;

		HOLD_CANCEL_INTERRUPTS();
		pq_startmsgread();
		mtype = pq_getbyte();
		if (mtype == EOF)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("unexpected EOF on client connection with an open transaction")));
		switch (mtype)
		{
			case 'd':
				maxmsglen = PQ_LARGE_MESSAGE_LIMIT;
				break;
			case 'c':
			case 'f':
			case 'H':
			case 'S':
				maxmsglen = PQ_SMALL_MESSAGE_LIMIT;
				break;
			default:
				ereport(ERROR,
						(errcode(ERRCODE_PROTOCOL_VIOLATION),
						 errmsg("unexpected message type 0x%02X during COPY from stdin",
								mtype)));
				maxmsglen = 0;	/* keep compiler quiet */
				break;
		}
		if (pq_getmessage(msgbuf, maxmsglen))
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("unexpected EOF on client connection with an open transaction")));
		RESUME_CANCEL_INTERRUPTS();
		if (mtype == 'c')
			return 0;
		if (mtype == 'f')
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("COPY from stdin failed: %s", pq_getmsgstring(msgbuf))));
		if (mtype != 'd')
			resetStringInfo(msgbuf);	/* Flush, Sync: ignored */
	}
	available = Min(msgbuf->len - msgbuf->cursor, maxread);
	pq_copymsgbytes(msgbuf, target, available);
	return available;
}

/*
 * HandOver makes PostgreSQL's reader read the rest: the input the splitter
 * holds from the current line on, then the source's, with the line number
 * and end-of-line style it has seen, and headerLeft header lines to skip.
 */
static void
HandOver(CopySplitter *splitter, int headerLeft)
{
	CopyFromState cstate = splitter->cstate;

	splitter->handedOver = true;
	if (headerLeft > 0)
		cstate->cur_lineno = 0;
	cstate->opts.header_line = headerLeft;
	cstate->eol_type = splitter->eol;
	cstate->copy_src = COPY_CALLBACK;
	cstate->data_source_cb = FeedHandedOver;
	feedingSplitter = splitter;
}

/* the data source of a handed-over CopyFromState */
static int
FeedHandedOver(void *outbuf, int minread, int maxread)
{
	CopySplitter *splitter = feedingSplitter;
	int			count = 0;

	Assert(splitter != NULL);
	while (count < minread)
	{
		int			held = splitter->end - splitter->start;
		int			n;

		if (held > 0)
		{
			n = Min(held, maxread - count);
			memcpy((char *) outbuf + count, splitter->buf + splitter->start, n);
			splitter->start += n;
		}
		else
			n = ReadSource(splitter, (char *) outbuf + count, maxread - count);
		if (n == 0)
			break;
		count += n;
	}
	return count;
}
