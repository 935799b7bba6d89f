/*-------------------------------------------------------------------------
 *
 * test_pause.h
 *	  Named pause points for tests (test builds only).
 *
 * TEST_PAUSE_POINT("after prepare") marks a place in the code where a test
 * can stop a backend: a backend whose shardext.test_pause_points lists the
 * name waits there while another session holds the point's advisory lock,
 * pg_advisory_lock(SHARDEXT_TEST_PAUSE_KEY, hashtext(name)), and goes on
 * when that session releases it (or ends).  The wait is an ordinary
 * heavyweight lock wait: pg_locks and pg_stat_activity show it, and
 * isolationtester sees the paused session as blocked by the holder, so a
 * spec's permutation decides when the backend passes the point.  In a
 * normal build the macro is empty, and neither the setting nor the code
 * exists.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_TEST_PAUSE_H
#define SHARDEXT_TEST_PAUSE_H

/* the first key of a pause point's advisory lock ('SXTP'); the second is hashtext(name) */
#define SHARDEXT_TEST_PAUSE_KEY 1398297680

#ifdef SHARDEXT_TEST_HOOKS
extern void TestPausePoint(const char *name);

#define TEST_PAUSE_POINT(name) TestPausePoint(name)
#else
#define TEST_PAUSE_POINT(name) ((void) 0)
#endif

#endif							/* SHARDEXT_TEST_PAUSE_H */
