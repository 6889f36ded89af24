/* The hang watchdog (TRSHIM_HANG_SEC, 0: off), run by the completion
 * poller thread (tr_complete.c); everything here is that thread's.
 *
 * A call is stuck when, hang_sec after it
 *   - returned, its operation has not completed on the GPU (the oldest
 *     pending operation of its stream: the ones behind it wait for it);
 *   - entered, it has not returned (a wrapped call blocked on the host: the
 *     ncclGroupEnd of a grouped init, a collective NCCL blocks in);
 *   - a communicator's init, or its finalize/destroy/abort/revoke, entered,
 *     it has not returned.
 * The first stuck call found starts a hang: the writer is asked for the
 * trace (end.reason "hang") and one "trshim:" line on stderr names the
 * rank, the call, its communicator, its sequence number, its call site and
 * how long it has waited. Calls found stuck while that hang lasts are in
 * the trace but get no line of their own (one line per hang of a rank; GPU
 * operations are looked at before host calls, with the same clock, so of
 * two calls stuck together the older, the cause, is the one named). Once
 * nothing is stuck any more, the next stuck call starts a new hang. Each
 * stuck call is reported once. The job goes on.
 *
 * The ring header says the current hang (tr_ring_stall: the stuck call's
 * record, when it began to wait, when it was found; stall_ns 0 once it is
 * over) and counts hangs (stalls), for a watcher reading the ring. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tr_complete.h"
#include "tr_core.h"
#include "tr_nccl_int.h"
#include "tr_ring.h"
#include "tr_stacks.h"

#define SCAN_MAX 65536            /* records looked at per host scan, newest */
#define STUCK_MAX 64              /* records remembered as stuck on the host */
#define MAX_COMMS 1024            /* ring comm slots */

static const char *const init_names[] = {"ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitRankScalable",
                                         "ncclCommInitAll", "ncclCommSplit", "ncclCommShrink", "ncclCommGrow"};
static const char *const end_names[] = {"ncclComm?", "ncclCommFinalize", "ncclCommDestroy", "ncclCommAbort",
                                        "ncclCommRevoke"};

static int g_in_hang;                       /* a line was printed for the current hang */
static uint64_t g_scan_from;                /* records below: returned, or remembered in g_stuck */
static uint64_t g_stuck[STUCK_MAX];
static int g_nstuck;
static uint64_t g_init_seen[MAX_COMMS];     /* init_enter of an init reported stuck */
static uint64_t g_end_seen[MAX_COMMS];      /* end_enter of an end reported stuck */

static uint64_t hang_limit_ns(void) { return (uint64_t)tr_cfg()->hang_sec * 1000000000ull; }

static const trr_comm *comm_of(int32_t slot)
{
    const trr_comm *c = tr_ring_comm_at(slot);
    return c && __atomic_load_n(&c->valid, __ATOMIC_ACQUIRE) ? c : NULL;
}

/* "rank N": the environment's rank, else the rank in communicator c. */
static void rank_text(char *out, size_t cap, const trr_comm *c)
{
    int r = tr_proc()->env_rank;
    if (r < 0 && c) r = __atomic_load_n(&c->rank, __ATOMIC_RELAXED);
    if (r >= 0) snprintf(out, cap, "rank %d", r);
    else snprintf(out, cap, "pid %d (rank unknown)", (int)getpid());
}

/* Starts a hang (the ring header's stall, asks for the trace, prints the
 * line) or, inside one, does nothing: the trace of the hang's write has the
 * call. site: NULL when the ring keeps none (a communicator's end). rec1:
 * the stuck record's index + 1, 0 for a communicator's init or end; it has
 * waited since since_ns, now is now_ns. */
static void report(const char *rank, const char *what, const char *site, const char *state, uint64_t rec1,
                   uint64_t since_ns, uint64_t now_ns)
{
    if (g_in_hang) return;
    g_in_hang = 1;
    tr_ring_stall(rec1, since_ns, now_ns);
    tr_write_request(TR_WRITE_HANG);
    uint64_t waited_ns = now_ns > since_ns ? now_ns - since_ns : 0;
    char line[1024];
    int n = snprintf(line, sizeof line,
                     "trshim: hang: %s: %s%s%s%s %s after %llu s; trace written with end.reason \"hang\", "
                     "the job goes on\n",
                     rank, what, site ? " (called from " : "", site ? site : "", site ? ")" : "", state,
                     (unsigned long long)(waited_ns / 1000000000ull));
    if (n < 0) return;
    if ((size_t)n >= sizeof line) {
        n = sizeof line - 1;
        line[n - 1] = '\n';
    }
    ssize_t w;
    do w = write(2, line, (size_t)n); while (w < 0 && errno == EINTR);
}

/* "AllReduce seq 4 on communicator 0x…", "Send seq 2 to peer 3 on …", "GroupEnd" */
static void call_text(char *out, size_t cap, const trr_record *r, const trr_comm *c)
{
    const char *op = r->op < TR_OP_N ? tr_op_names[r->op] : "call";
    if (tr_op_has(r->op, TR_OPF_GROUP)) {
        snprintf(out, cap, "%s", op);
        return;
    }
    char peer[48] = "";
    if (tr_op_has(r->op, TR_OPF_P2P | TR_OPF_ONESIDED) && r->root != TRR_NONE)
        snprintf(peer, sizeof peer, " %s peer %d", tr_op_has(r->op, TR_OPF_SENDS) ? "to" : "from", r->root);
    uint64_t seq = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);
    if (c)
        snprintf(out, cap, "%s seq %llu%s on communicator 0x%llx", op, (unsigned long long)seq, peer,
                 (unsigned long long)c->id);
    else
        snprintf(out, cap, "%s%s on a communicator the shim did not see created", op, peer);
}

static void report_record(uint64_t rec, uint64_t since_ns, uint64_t now_ns, int on_gpu)
{
    if (g_in_hang) return;
    trr_record r;
    if (!tr_ring_read(rec, &r)) return;
    const trr_comm *c = comm_of(r.comm);
    char rank[64], what[256], site[320];
    rank_text(rank, sizeof rank, c);
    call_text(what, sizeof what, &r, c);
    tr_symbols_site(r.stack, site, sizeof site);
    report(rank, what, site, on_gpu ? "has not completed on the GPU" : "has not returned", rec + 1, since_ns,
           now_ns);
}

int tr_watchdog_pending(int *stalled, uint64_t rec, uint64_t exit_ns, uint64_t now)
{
    uint64_t limit = hang_limit_ns();
    if (!limit || now < exit_ns || now - exit_ns < limit) return 0;
    if (!*stalled) {
        *stalled = 1;
        report_record(rec, exit_ns, now, 1);
    }
    return 1;
}

static void report_comm(const trr_comm *c, int end, uint64_t since_ns, uint64_t now_ns)
{
    if (g_in_hang) return;
    char rank[64], what[256], site[320];
    rank_text(rank, sizeof rank, c);
    if (end) {
        int k = __atomic_load_n(&c->end_kind, __ATOMIC_RELAXED);
        snprintf(what, sizeof what, "%s of communicator 0x%llx",
                 end_names[k > 0 && k < (int)(sizeof end_names / sizeof end_names[0]) ? k : 0],
                 (unsigned long long)c->id);
    } else {
        const char *fn = c->kind >= 0 && c->kind < (int)(sizeof init_names / sizeof init_names[0])
                             ? init_names[c->kind] : "init";
        if (c->parent >= 0)
            snprintf(what, sizeof what, "%s of communicator 0x%llx (new communicator 0x%llx)", fn,
                     (unsigned long long)c->parent_id, (unsigned long long)c->id);
        else
            snprintf(what, sizeof what, "%s of communicator 0x%llx", fn, (unsigned long long)c->id);
    }
    /* the init's call site; the ring keeps none of an end */
    if (!end) tr_symbols_site(c->init_stack, site, sizeof site);
    report(rank, what, end ? NULL : site, "has not returned", 0, since_ns, now_ns);
}

/* Wrapped calls that entered and have not returned. */
static int scan_records(uint64_t now, uint64_t limit)
{
    int overdue = 0;
    /* the ones already reported: still stuck? */
    for (int i = 0; i < g_nstuck;) {
        trr_record *r = tr_ring_get(g_stuck[i]);
        if (r && __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == TRR_REC_ENTERED) {
            overdue = 1;
            i++;
        } else {
            g_stuck[i] = g_stuck[--g_nstuck];
        }
    }
    uint64_t head = tr_ring_head(), cap = tr_ring_capacity();
    if (!cap) return overdue;
    uint64_t lo = g_scan_from;
    if (head > cap && lo < head - cap) lo = head - cap;
    if (head - lo > SCAN_MAX) lo = head - SCAN_MAX;
    int advance = 1;                /* every record below i is returned or remembered */
    for (uint64_t i = lo; i < head; i++) {
        trr_record *r = tr_ring_get(i);
        if (!r) {                   /* being filled right now */
            advance = 0;
            continue;
        }
        uint32_t st = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
        uint64_t enter = r->enter_ns;
        if (st != TRR_REC_ENTERED || tr_ring_get(i) != r) {
            if (advance) g_scan_from = i + 1;
            continue;
        }
        if (now <= enter || now - enter < limit || g_nstuck == STUCK_MAX) {
            advance = 0;
            continue;
        }
        overdue = 1;
        g_stuck[g_nstuck++] = i;
        if (advance) g_scan_from = i + 1;
        report_record(i, enter, now, 0);
    }
    return overdue;
}

/* Communicator inits and ends that entered and have not returned. */
static int scan_comms(uint64_t now, uint64_t limit)
{
    int overdue = 0;
    for (int32_t slot = 0; slot < MAX_COMMS; slot++) {
        trr_comm *any = tr_ring_comm_at(slot);
        if (!any) break;
        const trr_comm *c = comm_of(slot);
        if (!c) continue;
        uint64_t t = c->init_enter;
        if (!__atomic_load_n(&c->init_done, __ATOMIC_ACQUIRE) && t && now > t && now - t >= limit) {
            overdue = 1;
            if (g_init_seen[slot] != t) {
                g_init_seen[slot] = t;
                report_comm(c, 0, t, now);
            }
        }
        t = __atomic_load_n(&c->end_enter, __ATOMIC_ACQUIRE);
        if (t && !__atomic_load_n(&c->end_exit, __ATOMIC_ACQUIRE) && now > t && now - t >= limit) {
            overdue = 1;
            if (g_end_seen[slot] != t) {
                g_end_seen[slot] = t;
                report_comm(c, 1, t, now);
            }
        }
    }
    return overdue;
}

int tr_watchdog_host(uint64_t now)
{
    uint64_t limit = hang_limit_ns();
    if (!limit) return 0;
    int overdue = scan_records(now, limit);
    overdue |= scan_comms(now, limit);
    return overdue;
}

void tr_watchdog_settle(int overdue)
{
    if (overdue || !g_in_hang) return;
    g_in_hang = 0;              /* the hang is over */
    tr_ring_stall_over();
}
