/*-------------------------------------------------------------------------
 *
 * repartition_registry.c
 *	  Which repartition exchanges of this coordinator are running, so that
 *	  the files of those that are not can be removed from the nodes.
 *
 * Every exchange takes a number from a counter in shared memory (its id is
 * <system id>_<database oid>_<incarnation>_<number>) and, in the same step,
 * marks its backend's slot as running exchanges from that number on.  An
 * exchange that ends removes its files itself; one that fails or is
 * cancelled leaves that to the maintenance daemon, which the abort wakes
 * (the remote commands are cancelled by then).  The daemon asks every node
 * to remove the exchange files of this coordinator database that no
 * running exchange can use: those of another incarnation (the coordinator
 * restarted, after a crash too), and those numbered below the oldest
 * running exchange (or below the counter when none runs).  Taking a number
 * and marking the slot happen under one lock, which the daemon takes to
 * read both, so an exchange that starts while the daemon sweeps is never
 * swept.  A node's own restart removes its exchange files with its other
 * temporary files.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/memutils.h"

#include "shardext/connection.h"
#include "shardext/maintenance.h"
#include "shardext/metadata.h"
#include "shardext/pg_compat.h"
#include "shardext/remote_command.h"
#include "shardext/repartition.h"

/* how long the daemon waits for a node to sweep */
#define SWEEP_TIMEOUT_MS 10000

typedef struct ExchangeSlot
{
	uint64		oldest;			/* the oldest running exchange of the backend */
	int			running;		/* how many run (0: oldest means nothing) */
} ExchangeSlot;

typedef struct ExchangeRegistry
{
	slock_t		mutex;
	uint64		counter;		/* the last number taken */
	uint64		sweepRequests;	/* aborts that left files to the daemons */
	int			slotCount;
	ExchangeSlot slots[FLEXIBLE_ARRAY_MEMBER];
} ExchangeRegistry;

static ExchangeRegistry *Registry = NULL;

/* this backend's running exchanges, to give back at abort and exit */
static int	runningHere = 0;
static bool exitCallbackSet = false;

static Size RegistrySize(void);
static ExchangeSlot *MySlot(void);
static void ForgetExchangesAtExit(int code, Datum arg);
static void RegistryXactCallback(XactEvent event, void *arg);
static void SweepNode(WorkerNode *node, const char *prefix, const char *incarnation,
					  uint64 keepFrom);

static Size
RegistrySize(void)
{
	return add_size(offsetof(ExchangeRegistry, slots),
					mul_size(sizeof(ExchangeSlot), MaxBackends));
}

void
RepartitionShmemRequest(void)
{
	RequestAddinShmemSpace(RegistrySize());
}

void
RepartitionShmemInit(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	Registry = ShmemInitStruct("shardext repartition exchanges", RegistrySize(), &found);
	if (!found)
	{
		memset(Registry, 0, RegistrySize());
		SpinLockInit(&Registry->mutex);
		Registry->slotCount = MaxBackends;
	}
	LWLockRelease(AddinShmemInitLock);
}

/* registers the abort callback; called from _PG_init */
void
InitializeRepartitionExchange(void)
{
	RegisterXactCallback(RegistryXactCallback, NULL);
}

static ExchangeSlot *
MySlot(void)
{
	int			index = MyProc != NULL ? ProcNumberOf(MyProc) : -1;

	if (Registry == NULL || index < 0 || index >= Registry->slotCount)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("this process cannot run repartition joins")));
	return &Registry->slots[index];
}

/*
 * StartExchange numbers a new exchange of this backend, marks it running
 * and writes its id into exchangeId (EXCHANGE_ID_MAXLEN + 1 bytes).
 */
uint64
StartExchange(char *exchangeId)
{
	ExchangeSlot *slot = MySlot();
	uint64		seq;

	if (!exitCallbackSet)
	{
		before_shmem_exit(ForgetExchangesAtExit, (Datum) 0);
		exitCallbackSet = true;
	}
	SpinLockAcquire(&Registry->mutex);
	seq = ++Registry->counter;
	if (slot->running == 0)
		slot->oldest = seq;
	slot->running++;
	SpinLockRelease(&Registry->mutex);
	runningHere++;
	snprintf(exchangeId, EXCHANGE_ID_MAXLEN + 1, UINT64_FORMAT "_%u_" UINT64_FORMAT "_" UINT64_FORMAT,
			 GetSystemIdentifier(), MyDatabaseId, CoordinatorIncarnation(), seq);
	return seq;
}

/*
 * EndExchange notes that an exchange of this backend no longer runs (its
 * files are gone, or are left to the daemon).
 */
void
EndExchange(void)
{
	ExchangeSlot *slot = MySlot();

	if (runningHere == 0)
		return;
	runningHere--;
	SpinLockAcquire(&Registry->mutex);
	if (slot->running > 0)
		slot->running--;
	if (slot->running == 0)
		slot->oldest = 0;
	SpinLockRelease(&Registry->mutex);
}

/*
 * At abort, the exchanges that ran are over, and their remote commands
 * were cancelled or read to the end by the executor's abort callbacks: the
 * daemon removes their files.
 */
static void
RegistryXactCallback(XactEvent event, void *arg)
{
	if ((event != XACT_EVENT_ABORT && event != XACT_EVENT_PARALLEL_ABORT) || runningHere == 0)
		return;
	while (runningHere > 0)
		EndExchange();
	SpinLockAcquire(&Registry->mutex);
	Registry->sweepRequests++;
	SpinLockRelease(&Registry->mutex);
	WakeMaintenanceDaemon();
}

/*
 * RepartitionSweepRequests counts the aborted exchanges so far; a daemon
 * that sees the count grow sweeps at once.
 */
uint64
RepartitionSweepRequests(void)
{
	uint64		requests;

	if (Registry == NULL)
		return 0;
	SpinLockAcquire(&Registry->mutex);
	requests = Registry->sweepRequests;
	SpinLockRelease(&Registry->mutex);
	return requests;
}

static void
ForgetExchangesAtExit(int code, Datum arg)
{
	while (runningHere > 0)
		EndExchange();
}

/*
 * SweepRepartitionLeftovers, run by the maintenance daemon, removes from
 * every node the exchange files of this coordinator database that no
 * running exchange uses (see the file header).  A node that cannot be
 * reached is left for the next round.
 */
void
SweepRepartitionLeftovers(void)
{
	char	   *prefix = psprintf(UINT64_FORMAT "_%u_", GetSystemIdentifier(), MyDatabaseId);
	char	   *incarnation = psprintf(UINT64_FORMAT, CoordinatorIncarnation());
	uint64		keepFrom = 0;
	ListCell   *cell;

	if (Registry == NULL)
		return;
	SpinLockAcquire(&Registry->mutex);
	keepFrom = Registry->counter + 1;
	for (int i = 0; i < Registry->slotCount; i++)
	{
		if (Registry->slots[i].running > 0)
			keepFrom = Min(keepFrom, Registry->slots[i].oldest);
	}
	SpinLockRelease(&Registry->mutex);

	foreach(cell, WorkerNodeList(true))
		SweepNode(lfirst(cell), prefix, incarnation, keepFrom);
}

/* SweepNode asks one node to remove the files no running exchange uses */
static void
SweepNode(WorkerNode *node, const char *prefix, const char *incarnation, uint64 keepFrom)
{
	NodeConnection *conn = OpenDedicatedConnectionWithTimeout(node->host, node->port,
															  SWEEP_TIMEOUT_MS);
	const char *params[3] = {prefix, incarnation, psprintf(UINT64_FORMAT, keepFrom)};
	char	   *failure = NULL;
	PGresult   *result;

	if (conn == NULL)
		return;
	PG_TRY();
	{
		result = TryRemoteQuery(conn, "SELECT shardext.repartition_sweep($1, $2, $3)",
								3, params, SWEEP_TIMEOUT_MS, &failure);
		if (result == NULL)
			ereport(LOG,
					(errmsg("could not remove repartition join files on node %s:%d: %s",
							node->host, node->port, failure != NULL ? failure : "no answer")));
		else if (PQntuples(result) == 1 && atoi(PQgetvalue(result, 0, 0)) > 0)
			ereport(DEBUG1,
					(errmsg("removed the files of %s repartition joins on node %s:%d",
							PQgetvalue(result, 0, 0), node->host, node->port)));
		PQclear(result);
	}
	PG_FINALLY();
	{
		CloseDedicatedConnection(conn);
	}
	PG_END_TRY();
}
