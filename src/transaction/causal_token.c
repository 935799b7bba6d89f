/*-------------------------------------------------------------------------
 *
 * causal_token.c
 *	  Causal tokens: shardext_causal_token() hands out what a session has
 *	  committed where, and SET shardext.read_after = '<token>' makes another
 *	  session's reads see those writes (on replicas once they replayed
 *	  them, else on the primaries).
 *
 * A token reads
 *	  v1.<system identifier>.<database oid>.<node>:<lsn>_<node>:<lsn>...<mac>
 * (lsn in hex, "-" when there are no nodes).  The system identifier and
 * database oid name this coordinator database, so a token of another
 * cluster or database is refused; the mac is the first 16 bytes of the
 * HMAC-SHA256 of everything before it under the key in
 * shardext.token_secret, which users cannot read, so a changed token is
 * refused too.  The GUC check hook validates at SET time (a setting from
 * the configuration file, outside a transaction, is validated at its first
 * use instead).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "common/hmac.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "shardext/connection.h"
#include "shardext/guc.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/privileges.h"
#include "shardext/read_your_writes.h"
#include "shardext/remote_command.h"
#include "shardext/remote_xact.h"

#define TOKEN_VERSION "v1"
#define TOKEN_MAC_BYTES 16
#define TOKEN_MAX_NODES 1024

/* the parsed value of shardext.read_after (GUC "extra", malloc'd) */
typedef struct ReadAfterToken
{
	bool		verified;		/* mac and origin checked */
	char	   *text;			/* the token, for checking later */
	int			count;
	NodeLsn		entries[FLEXIBLE_ARRAY_MEMBER];
} ReadAfterToken;

static ReadAfterToken *currentToken = NULL;

PG_FUNCTION_INFO_V1(shardext_causal_token);

static char *TokenPrefix(void);
static bool TokenMac(const char *body, char *hexOut);
static bool ParseToken(const char *text, ReadAfterToken **tokenOut, char **whyOut);
static bool VerifyToken(const char *text, char **whyOut);
static void AddEntry(List **entries, int32 nodeId, XLogRecPtr lsn);
static XLogRecPtr CurrentNodeLsn(int32 nodeId);

/* "v1.<system identifier>.<database oid>." */
static char *
TokenPrefix(void)
{
	return psprintf(TOKEN_VERSION "." UINT64_FORMAT ".%u.", GetSystemIdentifier(),
					MyDatabaseId);
}

/*
 * TokenMac computes the mac of a token body into hexOut (2 *
 * TOKEN_MAC_BYTES + 1 bytes); false when the key is not available.
 */
static bool
TokenMac(const char *body, char *hexOut)
{
	bytea	   *secret = ReadTokenSecret();
	pg_hmac_ctx *ctx;
	uint8		digest[32];
	bool		ok;

	if (secret == NULL)
		return false;
	ctx = pg_hmac_create(PG_SHA256);
	if (ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	ok = pg_hmac_init(ctx, (uint8 *) VARDATA_ANY(secret), VARSIZE_ANY_EXHDR(secret)) == 0 &&
		pg_hmac_update(ctx, (const uint8 *) body, strlen(body)) == 0 &&
		pg_hmac_final(ctx, digest, sizeof(digest)) == 0;
	pg_hmac_free(ctx);
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not compute the mac of a causal token")));
	hex_encode((const char *) digest, TOKEN_MAC_BYTES, hexOut);
	hexOut[2 * TOKEN_MAC_BYTES] = '\0';
	return true;
}

/*
 * ParseToken reads the node entries of a token (without checking where it
 * comes from); false with the reason in *whyOut when it is malformed.  The
 * result is malloc'd, as GUC extras are.
 */
static bool
ParseToken(const char *text, ReadAfterToken **tokenOut, char **whyOut)
{
	const char *p = text;
	const char *lastDot = strrchr(text, '.');
	ReadAfterToken *token;
	int			dots = 0;

	for (const char *q = text; *q; q++)
		dots += (*q == '.');
	if (strncmp(text, TOKEN_VERSION ".", strlen(TOKEN_VERSION) + 1) != 0 || dots != 4 ||
		strlen(lastDot + 1) != 2 * TOKEN_MAC_BYTES)
	{
		*whyOut = "A causal token is what shardext_causal_token() returned.";
		return false;
	}
	/* skip version, system identifier and database */
	for (int i = 0; i < 3; i++)
		p = strchr(p, '.') + 1;

	/* one block, as the GUC machinery frees extras in one piece */
	{
		int			colons = 0;
		Size		entriesSize;

		for (const char *q = text; *q; q++)
			colons += (*q == ':');
		if (colons > TOKEN_MAX_NODES)
		{
			*whyOut = "It names too many nodes.";
			return false;
		}
		entriesSize = offsetof(ReadAfterToken, entries) + sizeof(NodeLsn) * Max(colons, 1);
		token = GucExtraAlloc(entriesSize + strlen(text) + 1);
		if (token == NULL)
			return false;
		token->text = ((char *) token) + entriesSize;
		strcpy(token->text, text);
	}
	token->verified = false;
	token->count = 0;
	if (*p == '-' && p + 1 == lastDot)
		p = lastDot;
	while (p < lastDot)
	{
		char	   *end;
		long		nodeId = strtol(p, &end, 10);
		unsigned long long lsn;

		if (end == p || *end != ':' || nodeId < 1 || nodeId > 1023)
			break;
		p = end + 1;
		lsn = strtoull(p, &end, 16);
		if (end == p || (*end != '_' && end != lastDot))
			break;
		token->entries[token->count].nodeId = (int32) nodeId;
		token->entries[token->count].lsn = (XLogRecPtr) lsn;
		token->count++;
		p = (end == lastDot) ? end : end + 1;
	}
	if (p != lastDot)
	{
		GucExtraFree(token);
		*whyOut = "Its list of nodes and positions is malformed.";
		return false;
	}
	*tokenOut = token;
	return true;
}

/*
 * VerifyToken checks that a token was made by this coordinator database
 * and not changed since; needs a transaction.
 */
static bool
VerifyToken(const char *text, char **whyOut)
{
	char	   *prefix = TokenPrefix();
	const char *lastDot = strrchr(text, '.');
	char	   *body;
	char		mac[2 * TOKEN_MAC_BYTES + 1];
	int			diff = 0;

	if (strncmp(text, prefix, strlen(prefix)) != 0)
	{
		*whyOut = psprintf("It was issued by another coordinator or database; this one "
						   "issues tokens starting with \"%s\".", prefix);
		return false;
	}
	body = pnstrdup(text, lastDot - text);
	if (!TokenMac(body, mac))
	{
		*whyOut = "shardext 1.1 is not installed in this database.";
		return false;
	}
	for (int i = 0; i < 2 * TOKEN_MAC_BYTES; i++)
		diff |= mac[i] ^ pg_ascii_tolower((unsigned char) lastDot[1 + i]);
	if (diff != 0)
	{
		*whyOut = "Its signature does not match: it was changed, or made for another "
			"cluster or before the database was restored.";
		return false;
	}
	return true;
}

/*
 * CheckReadAfterToken is the check hook of shardext.read_after: the empty
 * string clears it; anything else must be a valid token of this
 * coordinator database.
 */
bool
CheckReadAfterToken(char **newval, void **extra, GucSource source)
{
	ReadAfterToken *token;
	char	   *why = NULL;

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (!ParseToken(*newval, &token, &why))
	{
		GUC_check_errmsg("invalid causal token \"%s\"", *newval);
		if (why != NULL)
			GUC_check_errdetail("%s", why);
		return false;
	}
	if (IsTransactionState() && OidIsValid(MyDatabaseId) && ShardextExtensionLoaded())
	{
		if (!VerifyToken(*newval, &why))
		{
			GucExtraFree(token);
			GUC_check_errmsg("causal token \"%s\" is not valid here", *newval);
			GUC_check_errdetail("%s", why);
			GUC_check_errhint("Use a token that shardext_causal_token() returned on this "
							  "coordinator.");
			return false;
		}
		token->verified = true;
	}
	*extra = token;
	return true;
}

/* AssignReadAfterToken makes the checked token the session's */
void
AssignReadAfterToken(const char *newval, void *extra)
{
	currentToken = (ReadAfterToken *) extra;
}

/*
 * ReadAfterLsn returns the LSN shardext.read_after requires on a node
 * (InvalidXLogRecPtr when none).  A token that could not be checked when
 * it was set is checked now.
 */
XLogRecPtr
ReadAfterLsn(int32 nodeId)
{
	if (currentToken == NULL)
		return InvalidXLogRecPtr;
	if (!currentToken->verified)
	{
		char	   *why = NULL;

		if (!VerifyToken(currentToken->text, &why))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("causal token in shardext.read_after is not valid here"),
					 errdetail("%s", why),
					 errhint("Set shardext.read_after to a token that "
							 "shardext_causal_token() returned on this coordinator.")));
		currentToken->verified = true;
	}
	for (int i = 0; i < currentToken->count; i++)
	{
		if (currentToken->entries[i].nodeId == nodeId)
			return currentToken->entries[i].lsn;
	}
	return InvalidXLogRecPtr;
}

/* AddEntry raises a node's LSN in a list of NodeLsn */
static void
AddEntry(List **entries, int32 nodeId, XLogRecPtr lsn)
{
	ListCell   *cell;
	NodeLsn    *entry;

	foreach(cell, *entries)
	{
		entry = lfirst(cell);
		if (entry->nodeId == nodeId)
		{
			entry->lsn = Max(entry->lsn, lsn);
			return;
		}
	}
	entry = palloc(sizeof(NodeLsn));
	entry->nodeId = nodeId;
	entry->lsn = lsn;
	*entries = lappend(*entries, entry);
}

/*
 * CurrentNodeLsn asks a node for its insert LSN, which lies past every
 * commit made there so far (for writes whose commit LSN is not known).
 */
static XLogRecPtr
CurrentNodeLsn(int32 nodeId)
{
	WorkerNode *node = LookupWorkerNode(nodeId);
	NodeConnection *conn;
	XLogRecPtr	lsn = InvalidXLogRecPtr;

	if (node == NULL)
		return InvalidXLogRecPtr;	/* removed since */
	conn = OpenDedicatedConnection(node->host, node->port, false, true);
	PG_TRY();
	{
		lsn = ParseCommitLsn(ExecuteRemoteScalar(conn, CURRENT_LSN_QUERY, 0, NULL));
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(conn);
	}
	PG_END_TRY();
	return lsn;
}

/*
 * shardext_causal_token() returns a token of everything this session has
 * committed (and of the token it reads after, so that causality chains):
 * per node, an LSN past its commits there.
 */
Datum
shardext_causal_token(PG_FUNCTION_ARGS)
{
	List	   *unknown;
	List	   *entries;
	ListCell   *cell;
	StringInfoData token;
	char		mac[2 * TOKEN_MAC_BYTES + 1];

	EnsureShardextInstalled();
	if (RemoteTransactionWrote())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("shardext_causal_token() cannot cover the writes of the current transaction"),
				 errdetail("A token covers committed writes only."),
				 errhint("Call it after COMMIT.")));
	entries = SessionWriteLsns(&unknown);
	foreach(cell, unknown)
		AddEntry(&entries, lfirst_int(cell), CurrentNodeLsn(lfirst_int(cell)));
	if (currentToken != NULL)
	{
		(void) ReadAfterLsn(0);	/* checks it */
		for (int i = 0; i < currentToken->count; i++)
			AddEntry(&entries, currentToken->entries[i].nodeId, currentToken->entries[i].lsn);
	}

	initStringInfo(&token);
	appendStringInfoString(&token, TokenPrefix());
	foreach(cell, entries)
	{
		NodeLsn    *entry = lfirst(cell);

		if (XLogRecPtrIsInvalid(entry->lsn))
			continue;
		appendStringInfo(&token, "%s%d:%llX",
						 token.data[token.len - 1] == '.' ? "" : "_",
						 entry->nodeId, (unsigned long long) entry->lsn);
	}
	if (token.data[token.len - 1] == '.')
		appendStringInfoChar(&token, '-');
	if (!TokenMac(token.data, mac))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("causal tokens need shardext 1.1"),
				 errhint("Run ALTER EXTENSION shardext UPDATE.")));
	appendStringInfo(&token, ".%s", mac);
	PG_RETURN_TEXT_P(cstring_to_text(token.data));
}
