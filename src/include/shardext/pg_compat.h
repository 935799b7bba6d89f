/*-------------------------------------------------------------------------
 *
 * pg_compat.h
 *	  The calls of PostgreSQL's internal API whose form changes between
 *	  major versions, in one place.
 *
 * shardext is built and tested against PostgreSQL 15.  Code that uses one
 * of the calls below goes through this header, so that supporting another
 * major version means changing this file rather than hunting for them:
 *
 * - ownership and ACL checks of one object (PostgreSQL 16 replaced
 *   pg_class_ownercheck() and friends by object_ownercheck() and
 *   object_aclcheck());
 * - the permissions of a range table entry (PostgreSQL 16 moved them out of
 *   RangeTblEntry into RTEPermissionInfo);
 * - logical decoding: LogLogicalMessage() and the rows of a decoded change
 *   (see below);
 * - the look at the next protocol message from the client, which the
 *   executor uses to tell a lone extended-protocol Execute from a pipeline
 *   (the pq_* functions of libpq/libpq.h, which cannot be included by code
 *   that includes libpq-fe.h: it pulls in the server build's GSSAPI
 *   headers).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SHARDEXT_PG_COMPAT_H
#define SHARDEXT_PG_COMPAT_H

#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"

#if PG_VERSION_NUM < 150000
#error "shardext needs PostgreSQL 15 or later"
#endif

#if PG_VERSION_NUM >= 160000
#define pg_class_ownercheck(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#define pg_namespace_aclcheck(nspid, roleid, mode) \
	object_aclcheck(NamespaceRelationId, (nspid), (roleid), (mode))
#define pg_database_aclcheck(dbid, roleid, mode) \
	object_aclcheck(DatabaseRelationId, (dbid), (roleid), (mode))
#endif

#if PG_VERSION_NUM < 160000

/*
 * RteClearPermissions: the entry needs no permission checks (it was turned
 * into something else after the checks were made on the original).
 */
static inline void
RteClearPermissions(RangeTblEntry *rte)
{
	rte->requiredPerms = 0;
	rte->checkAsUser = InvalidOid;
	rte->selectedCols = NULL;
	rte->insertedCols = NULL;
	rte->updatedCols = NULL;
	rte->extraUpdatedCols = NULL;
}

/* RteRequirePermissions: the entry needs these rights of the current user */
static inline void
RteRequirePermissions(RangeTblEntry *rte, AclMode mode)
{
	rte->requiredPerms = mode;
}

#endif

/* from libpq/libpq.h (see above) */
extern bool pq_buffer_has_data(void);
extern void pq_startmsgread(void);
extern int	pq_peekbyte(void);
extern void pq_endmsgread(void);

/*
 * PeekClientMessageType returns the type byte of the next message the
 * client has already sent (without consuming it), or -1 when none is
 * buffered.  Only valid in a backend serving a client, between messages.
 */
static inline int
PeekClientMessageType(void)
{
	int			next;

	if (!pq_buffer_has_data())
		return -1;
	pq_startmsgread();
	next = pq_peekbyte();
	pq_endmsgread();
	return next;
}

/*
 * LogLogicalMessageCompat: PostgreSQL 17 added the flush argument to
 * LogLogicalMessage().
 */
#if PG_VERSION_NUM >= 170000
#define LogLogicalMessageCompat(prefix, message, size, transactional) \
	LogLogicalMessage((prefix), (message), (size), (transactional), false)
#else
#define LogLogicalMessageCompat(prefix, message, size, transactional) \
	LogLogicalMessage((prefix), (message), (size), (transactional))
#endif

/*
 * The rows of a decoded change (ReorderBufferChange.data.tp.oldtuple and
 * newtuple): PostgreSQL 17 replaced ReorderBufferTupleBuf by a plain
 * HeapTuple.  ChangeTuple is the field's type, ChangeTupleHeap() the row
 * as a HeapTuple, ChangeTupleFromHeap() a field value made from one.
 * Available to files that include replication/reorderbuffer.h first.
 */
#ifdef REORDERBUFFER_H
#if PG_VERSION_NUM >= 170000
typedef HeapTuple ChangeTuple;
#define ChangeTupleHeap(tuple) (tuple)
#define ChangeTupleFromHeap(heapTuple) (heapTuple)
#else
typedef ReorderBufferTupleBuf *ChangeTuple;
#define ChangeTupleHeap(tuple) (&(tuple)->tuple)
static inline ReorderBufferTupleBuf *
ChangeTupleFromHeap(HeapTuple heapTuple)
{
	ReorderBufferTupleBuf *tuple = palloc0(sizeof(ReorderBufferTupleBuf));

	tuple->tuple = *heapTuple;
	return tuple;
}
#endif
#endif							/* REORDERBUFFER_H */

#endif							/* SHARDEXT_PG_COMPAT_H */
