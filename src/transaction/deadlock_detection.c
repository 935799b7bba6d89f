/*-------------------------------------------------------------------------
 *
 * deadlock_detection.c
 *	  Distributed deadlock detection.
 *
 * Two distributed transactions that update the same two rows on different
 * nodes in opposite order wait for each other, and no server sees a cycle:
 * node 1 sees A's backend wait for B's, node 2 sees B's backend wait for
 * A's.  Every shardext.distributed_deadlock_timeout the maintenance daemon
 * of each coordinator database looks for such cycles:
 *
 *	- Identity: a coordinator backend's connections to the nodes carry
 *	  application_name shardext_<system id>_<database oid>_<pid>, so a
 *	  node's backend (or a session shardext opened to the coordinator
 *	  itself) can be mapped to the coordinator backend (the distributed
 *	  transaction) it works for.  Backends without this prefix (local
 *	  clients of a node, other coordinators) stay vertices of their own.
 *	- Edges: the lock waits of the coordinator and of each node
 *	  (pg_stat_activity + pg_blocking_pids()), each mapped to vertices.  The
 *	  nodes are asked only when a coordinator statement has run for longer
 *	  than the timeout and waits for a node (every distributed deadlock has
 *	  one), over connections that are closed after the round, so that
 *	  nothing stays connected to the nodes' databases (wait_graph.c).
 *	- Cycles: a cycle is left alone when one server sees it whole (all its
 *	  waits on that server and each waiter the very backend the previous
 *	  wait is for): PostgreSQL's own detector resolves those.  Every other
 *	  cycle is a distributed deadlock.
 *	- Confirmation: the waits are read twice; only cycles whose waits are
 *	  in both readings, by the same coordinator transactions (local
 *	  transaction ids unchanged), count.  Real deadlocks persist; cycles
 *	  stitched together from waits of different moments do not.
 *	- Victim: of the coordinator transactions in the cycle that wait for a
 *	  node (there always is one), the youngest.  Its coordinator backend is
 *	  cancelled as a whole: a flag in shared memory plus its latch; the
 *	  backend's wait loops (CheckForDistributedDeadlockCancel) then raise
 *	  "canceling the transaction to resolve a distributed deadlock"
 *	  (40P01), the transaction aborts, and its remote transactions roll
 *	  back everywhere, which releases the locks.  A backend that does not
 *	  react by the next round gets a plain query cancel (SIGINT).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "shardext/deadlock_detection.h"
#include "shardext/pg_compat.h"
#include "shardext/remote_command.h"
#include "shardext/wait_graph.h"

#define DEADLOCK_DETAIL_LEN 1024
/* bound on the work of one cycle search */
#define CYCLE_SEARCH_STEPS 100000

/* a cancel request for one backend, indexed by pgprocno */
typedef struct DeadlockCancelSlot
{
	slock_t		mutex;
	bool		cancelRequested;
	LocalTransactionId lxid;	/* the transaction to cancel */
	char		detail[DEADLOCK_DETAIL_LEN];
} DeadlockCancelSlot;

typedef struct DeadlockShared
{
	int			slotCount;
	DeadlockCancelSlot slots[FLEXIBLE_ARRAY_MEMBER];
} DeadlockShared;

static DeadlockShared *Deadlock = NULL;
static NodeWaitCancel_hook_type prev_NodeWaitCancel_hook = NULL;

static int	DeadlockSlotCount(void);
static int	DetectDeadlocksOnce(void);
static List *ConfirmedEdges(WaitGraph *first, WaitGraph *second);
static CoordinatorBackend *FindBackend(List *backends, int32 pid);
static List *FindDistributedCycle(List *edges);
static bool CycleSeenByOneServer(List *cycle);
static bool VertexEquals(WaitVertex a, WaitVertex b);
static WaitEdge *ChooseVictim(List *cycle, List *backends);
static char *DescribeCycle(List *cycle, WaitEdge *victimEdge);
static char *DescribeVertex(WaitVertex vertex);
static void CancelVictim(CoordinatorBackend *victim, const char *detail);
static void DeadlockCancelWaitHook(void);

/* ---------------------------------------------------------------------
 * shared memory and the backend side
 * ---------------------------------------------------------------------
 */

/* regular backends and background workers have pgprocno < MaxBackends */
static int
DeadlockSlotCount(void)
{
	return MaxBackends;
}

Size
DistributedDeadlockShmemSize(void)
{
	return add_size(offsetof(DeadlockShared, slots),
					mul_size(DeadlockSlotCount(), sizeof(DeadlockCancelSlot)));
}

void
DistributedDeadlockShmemInit(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	Deadlock = ShmemInitStruct("shardext distributed deadlock detection",
							   DistributedDeadlockShmemSize(), &found);
	if (!found)
	{
		Deadlock->slotCount = DeadlockSlotCount();
		for (int i = 0; i < Deadlock->slotCount; i++)
		{
			SpinLockInit(&Deadlock->slots[i].mutex);
			Deadlock->slots[i].cancelRequested = false;
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * InitializeDistributedDeadlockDetection, called from _PG_init, makes the
 * connection layer's interruptible waits for nodes check for a cancel by
 * the detector (NodeWaitCancel_hook): a victim waits for a node.
 */
void
InitializeDistributedDeadlockDetection(void)
{
	prev_NodeWaitCancel_hook = NodeWaitCancel_hook;
	NodeWaitCancel_hook = DeadlockCancelWaitHook;
}

/* NodeWaitCancel_hook: the previous hook, then the detector's cancel */
static void
DeadlockCancelWaitHook(void)
{
	if (prev_NodeWaitCancel_hook)
		prev_NodeWaitCancel_hook();
	CheckForDistributedDeadlockCancel();
}

/*
 * CheckForDistributedDeadlockCancel raises the deadlock error when the
 * detector asked for it and this backend still runs the transaction it
 * chose.  Only where an error may be thrown: not while interrupts are held.
 */
void
CheckForDistributedDeadlockCancel(void)
{
	DeadlockCancelSlot *slot;
	bool		cancel;
	char		detail[DEADLOCK_DETAIL_LEN];

	if (Deadlock == NULL || MyProc == NULL || ProcNumberOf(MyProc) >= Deadlock->slotCount)
		return;
	slot = &Deadlock->slots[ProcNumberOf(MyProc)];
	if (likely(!((volatile DeadlockCancelSlot *) slot)->cancelRequested))
		return;
	if (InterruptHoldoffCount > 0 || CritSectionCount > 0)
		return;

	SpinLockAcquire(&slot->mutex);
	cancel = slot->cancelRequested && slot->lxid == ProcLocalXid(MyProc);
	slot->cancelRequested = false;
	strlcpy(detail, slot->detail, sizeof(detail));
	SpinLockRelease(&slot->mutex);

	if (cancel)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
				 errmsg("canceling the transaction to resolve a distributed deadlock"),
				 errdetail_internal("%s", detail),
				 errhint("Transactions that change the same rows in different orders "
						 "on different nodes can deadlock; retry the transaction, or "
						 "change rows in a consistent order.")));
}

/*
 * CancelVictim asks the victim's backend to cancel its transaction.  If an
 * earlier request for the same transaction is still pending, the backend is
 * not in a loop that checks it; it gets a plain query cancel then.
 */
static void
CancelVictim(CoordinatorBackend *victim, const char *detail)
{
	PGPROC	   *proc = BackendPidGetProc(victim->pid);
	DeadlockCancelSlot *slot;
	bool		pending;

	if (proc == NULL || ProcLocalXid(proc) != victim->lxid ||
		ProcNumberOf(proc) >= Deadlock->slotCount)
		return;
	slot = &Deadlock->slots[ProcNumberOf(proc)];

	SpinLockAcquire(&slot->mutex);
	pending = slot->cancelRequested && slot->lxid == victim->lxid;
	slot->lxid = victim->lxid;
	strlcpy(slot->detail, detail, sizeof(slot->detail));
	slot->cancelRequested = true;
	SpinLockRelease(&slot->mutex);

	ereport(LOG,
			(errmsg("shardext: canceling the transaction of process %d to resolve a "
					"distributed deadlock", victim->pid),
			 errdetail_internal("%s", detail)));
	if (pending)
		kill(victim->pid, SIGINT);
	else
		SetLatch(&proc->procLatch);
}

/* ---------------------------------------------------------------------
 * the detector (maintenance daemon)
 * ---------------------------------------------------------------------
 */

/*
 * DetectDistributedDeadlocks reads the wait graph, and when it has a
 * distributed cycle, reads it again and cancels one transaction of each
 * cycle that both readings show.  Runs its own transactions: call it
 * outside one.  Returns how many transactions it cancelled.  The
 * connections to the nodes are closed at the end.
 */
int
DetectDistributedDeadlocks(void)
{
	int			victims = 0;

	PG_TRY();
	{
		victims = DetectDeadlocksOnce();
	}
	PG_FINALLY();
	{
		CloseDetectorConnections();
	}
	PG_END_TRY();
	return victims;
}

/* DetectDeadlocksOnce is the work of DetectDistributedDeadlocks */
static int
DetectDeadlocksOnce(void)
{
	MemoryContext roundContext = AllocSetContextCreate(CurrentMemoryContext,
													   "shardext deadlock detection",
													   ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldContext = MemoryContextSwitchTo(roundContext);
	WaitGraph  *first;
	WaitGraph  *second;
	List	   *edges;
	List	   *cycle;
	int			victims = 0;

	first = ReadWaitGraph();
	if (first == NULL || !first->anyRemote || FindDistributedCycle(first->edges) == NIL)
	{
		MemoryContextSwitchTo(oldContext);
		MemoryContextDelete(roundContext);
		return 0;
	}

	second = ReadWaitGraph();
	if (second == NULL)
	{
		MemoryContextSwitchTo(oldContext);
		MemoryContextDelete(roundContext);
		return 0;
	}
	edges = ConfirmedEdges(first, second);

	while ((cycle = FindDistributedCycle(edges)) != NIL)
	{
		WaitEdge   *victimEdge = ChooseVictim(cycle, second->backends);
		CoordinatorBackend *victim;
		List	   *remaining = NIL;
		ListCell   *cell;

		if (victimEdge == NULL)
			break;				/* cannot happen, see ChooseVictim */
		victim = FindBackend(second->backends, victimEdge->waiter.pid);
		CancelVictim(victim, DescribeCycle(cycle, victimEdge));
		victims++;

		/* the victim's waits end with it; look for further cycles */
		foreach(cell, edges)
		{
			WaitEdge   *edge = lfirst(cell);

			if (!VertexEquals(edge->waiter, victimEdge->waiter) &&
				!VertexEquals(edge->holder, victimEdge->waiter))
				remaining = lappend(remaining, edge);
		}
		edges = remaining;
	}

	MemoryContextSwitchTo(oldContext);
	MemoryContextDelete(roundContext);
	return victims;
}

/*
 * ConfirmedEdges returns the waits of the second reading that the first
 * one showed too, between coordinator transactions that stayed the same.
 */
static List *
ConfirmedEdges(WaitGraph *first, WaitGraph *second)
{
	List	   *result = NIL;
	ListCell   *cell;

	foreach(cell, second->edges)
	{
		WaitEdge   *edge = lfirst(cell);
		bool		seen = false;
		ListCell   *other;

		foreach(other, first->edges)
		{
			WaitEdge   *old = lfirst(other);

			if (VertexEquals(old->waiter, edge->waiter) &&
				VertexEquals(old->holder, edge->holder) &&
				old->onNode == edge->onNode && old->waiterPid == edge->waiterPid &&
				old->holderPid == edge->holderPid)
				seen = true;
		}
		for (int end = 0; seen && end < 2; end++)
		{
			WaitVertex	vertex = end == 0 ? edge->waiter : edge->holder;
			CoordinatorBackend *before;
			CoordinatorBackend *after;

			if (vertex.nodeId != COORDINATOR_NODE)
				continue;
			before = FindBackend(first->backends, vertex.pid);
			after = FindBackend(second->backends, vertex.pid);
			/* a process of another database is known by its pid only */
			if ((before == NULL) != (after == NULL) ||
				(before != NULL && before->lxid != after->lxid))
				seen = false;
		}
		if (seen)
			result = lappend(result, edge);
	}
	return result;
}

static CoordinatorBackend *
FindBackend(List *backends, int32 pid)
{
	ListCell   *cell;

	foreach(cell, backends)
	{
		CoordinatorBackend *backend = lfirst(cell);

		if (backend->pid == pid)
			return backend;
	}
	return NULL;
}

static bool
VertexEquals(WaitVertex a, WaitVertex b)
{
	return a.nodeId == b.nodeId && a.pid == b.pid;
}

/* what a depth-first search from a vertex found */
typedef enum CycleSearchResult
{
	SEARCH_NOTHING,				/* no way back to the start */
	SEARCH_LOCAL_ONLY,			/* ways back, but only cycles one server sees */
	SEARCH_FOUND				/* a distributed cycle */
} CycleSearchResult;

static CycleSearchResult FindCycleFrom(List *edges, WaitVertex start, WaitVertex current,
									   List **path, List **dead, int *steps);

/*
 * FindDistributedCycle returns the edges of a wait cycle that no single
 * server sees (in order, each waiting for the next one's waiter), or NIL.
 */
static List *
FindDistributedCycle(List *edges)
{
	ListCell   *cell;
	int			steps = 0;

	foreach(cell, edges)
	{
		WaitEdge   *edge = lfirst(cell);
		List	   *path = NIL;
		List	   *dead = NIL;

		/* every such cycle has a wait by a coordinator transaction */
		if (edge->waiter.nodeId != COORDINATOR_NODE)
			continue;
		if (FindCycleFrom(edges, edge->waiter, edge->waiter, &path, &dead,
						  &steps) == SEARCH_FOUND)
			return path;
		if (steps > CYCLE_SEARCH_STEPS)
			break;
	}
	return NIL;
}

/*
 * FindCycleFrom extends the path (edges from start to current) depth first,
 * and returns SEARCH_FOUND with *path a distributed cycle back to start.
 * Vertices with no way back to start at all are remembered in *dead and
 * not explored again; the steps bound the rest.
 */
static CycleSearchResult
FindCycleFrom(List *edges, WaitVertex start, WaitVertex current, List **path,
			  List **dead, int *steps)
{
	CycleSearchResult best = SEARCH_NOTHING;
	ListCell   *cell;

	check_stack_depth();
	foreach(cell, edges)
	{
		WaitEdge   *edge = lfirst(cell);
		bool		isDead = false;
		bool		onPath = false;
		ListCell   *other;

		if (!VertexEquals(edge->waiter, current) || ++(*steps) > CYCLE_SEARCH_STEPS)
			continue;

		*path = lappend(*path, edge);
		if (VertexEquals(edge->holder, start))
		{
			if (!CycleSeenByOneServer(*path))
				return SEARCH_FOUND;
			best = SEARCH_LOCAL_ONLY;
			*path = list_delete_last(*path);
			continue;
		}
		foreach(other, *dead)
			isDead |= VertexEquals(*(WaitVertex *) lfirst(other), edge->holder);
		foreach(other, *path)
			onPath |= VertexEquals(((WaitEdge *) lfirst(other))->waiter, edge->holder);
		if (!isDead && !onPath)
		{
			CycleSearchResult found = FindCycleFrom(edges, start, edge->holder, path,
													dead, steps);

			if (found == SEARCH_FOUND)
				return SEARCH_FOUND;
			if (found == SEARCH_LOCAL_ONLY)
				best = SEARCH_LOCAL_ONLY;
			else
				*dead = lappend(*dead, &edge->holder);
		}
		*path = list_delete_last(*path);
	}
	return best;
}

/*
 * CycleSeenByOneServer: every wait of the cycle is on the same server, and
 * each waits for the very backend that waits next, so that server's own
 * deadlock detector sees the cycle.
 */
static bool
CycleSeenByOneServer(List *cycle)
{
	int			count = list_length(cycle);

	for (int i = 0; i < count; i++)
	{
		WaitEdge   *edge = list_nth(cycle, i);
		WaitEdge   *next = list_nth(cycle, (i + 1) % count);

		if (edge->onNode != next->onNode || edge->holderPid != next->waiterPid)
			return false;
	}
	return true;
}

/*
 * ChooseVictim returns the cycle's edge whose waiter is the youngest
 * coordinator transaction of this database that waits for a node.  There
 * always is one: a cycle no single server sees passes from one server to
 * another (or from one backend to another of the same session) only
 * through a coordinator transaction that waits for a node.
 */
static WaitEdge *
ChooseVictim(List *cycle, List *backends)
{
	WaitEdge   *victim = NULL;
	TimestampTz victimStart = 0;
	ListCell   *cell;

	foreach(cell, cycle)
	{
		WaitEdge   *edge = lfirst(cell);
		CoordinatorBackend *backend;

		if (edge->waiter.nodeId != COORDINATOR_NODE || edge->onNode == COORDINATOR_NODE)
			continue;
		backend = FindBackend(backends, edge->waiter.pid);
		if (backend == NULL)
			continue;
		if (victim == NULL || backend->xactStart > victimStart ||
			(backend->xactStart == victimStart && edge->waiter.pid > victim->waiter.pid))
		{
			victim = edge;
			victimStart = backend->xactStart;
		}
	}
	return victim;
}

/*
 * DescribeCycle says who waits for whom where, starting at the victim:
 * "Process 10 waits for process 11 on node 127.0.0.1:9702; process 11 waits
 * for process 10 on node 127.0.0.1:9701."  Coordinator processes are named
 * by their pid on the coordinator.
 */
static char *
DescribeCycle(List *cycle, WaitEdge *victimEdge)
{
	StringInfoData text;
	int			count = list_length(cycle);
	int			first = 0;

	for (int i = 0; i < count; i++)
	{
		if (list_nth(cycle, i) == victimEdge)
			first = i;
	}

	initStringInfo(&text);
	for (int i = 0; i < count; i++)
	{
		WaitEdge   *edge = list_nth(cycle, (first + i) % count);
		char	   *waiter = DescribeVertex(edge->waiter);

		if (i == 0)
			waiter[0] = pg_toupper((unsigned char) waiter[0]);
		appendStringInfo(&text, "%s%s waits for %s on %s",
						 i > 0 ? "; " : "", waiter, DescribeVertex(edge->holder),
						 WaitGraphServerName(edge->onNode));
	}
	appendStringInfoChar(&text, '.');
	return text.data;
}

static char *
DescribeVertex(WaitVertex vertex)
{
	if (vertex.nodeId == COORDINATOR_NODE)
		return psprintf("process %d", vertex.pid);
	return psprintf("process %d of %s", vertex.pid, WaitGraphServerName(vertex.nodeId));
}
