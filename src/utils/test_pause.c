/*-------------------------------------------------------------------------
 *
 * test_pause.c
 *	  Named pause points for tests (see test_pause.h); compiled only into
 *	  test builds.
 *
 * The wait is a session-level ShareLock on the point's advisory lock,
 * released at once: it needs no transaction (points in commit callbacks
 * work), and where the caller holds interrupts (commit processing) it
 * cannot be cancelled, so a test releases every point it holds, or ends
 * the holding session.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#ifdef SHARDEXT_TEST_HOOKS

#include "catalog/pg_collation_d.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"

#include "shardext/guc.h"
#include "shardext/test_pause.h"

/* the pg_locks.objsubid of pg_advisory_lock(int4, int4) */
#define ADVISORY_INT4_PAIR 2

static bool PausePointListed(const char *name);

/*
 * TestPausePoint waits at the named point while another session holds its
 * advisory lock, when shardext.test_pause_points lists the name.
 */
void
TestPausePoint(const char *name)
{
	LOCKTAG		tag;
	int32		key;

	if (!PausePointListed(name))
		return;
	key = DatumGetInt32(DirectFunctionCall1Coll(hashtext, C_COLLATION_OID,
												CStringGetTextDatum(name)));
	elog(DEBUG1, "shardext: pause point \"%s\"", name);
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) SHARDEXT_TEST_PAUSE_KEY,
						 (uint32) key, ADVISORY_INT4_PAIR);
	(void) LockAcquire(&tag, ShareLock, true, false);
	LockRelease(&tag, ShareLock, true);
}

/* PausePointListed: shardext.test_pause_points (names, comma-separated) has name */
static bool
PausePointListed(const char *name)
{
	const char *list = ShardextTestPausePoints;
	size_t		length = strlen(name);

	if (list == NULL)
		return false;
	while (*list != '\0')
	{
		const char *end = strchr(list, ',');
		size_t		itemLength;

		if (end == NULL)
			end = list + strlen(list);
		while (list < end && *list == ' ')
			list++;
		itemLength = end - list;
		while (itemLength > 0 && list[itemLength - 1] == ' ')
			itemLength--;
		if (itemLength == length && strncmp(list, name, length) == 0)
			return true;
		list = (*end == ',') ? end + 1 : end;
	}
	return false;
}

#endif							/* SHARDEXT_TEST_HOOKS */
