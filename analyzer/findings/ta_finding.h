/* The findings: what tranalyze reports, each of a kind (ta_kinds.h), with
 * the parts every kind shares (culprit and others, message, hint, where
 * the job stopped, consequences); a kind's own data hangs off it (data:
 * defined by the kind's file). The constructors and messages
 * (findings.c), the members of a stuck collective (members.c), a
 * culprit's earliest divergence (diverge.c), the hang analysis
 * (rootcause.c).
 * findings/' boundary header, with its parts ta_kinds.h, ta_jw.h, ta_tx.h and
 * ta_crash_out.h (it includes them): outside findings/, the one to include. */
#ifndef TA_FINDING_H
#define TA_FINDING_H

#include "model/ta_model.h"
#include "ta_kinds.h"

typedef struct {             /* one side of a finding: ranks and their call */
    int *ranks; int nranks;
    int trace;               /* representative trace index, -1 */
    int64_t call;            /* call index in that trace, -1 */
    int stack;               /* stack index in that trace, -1 */
    int pystack;             /* Python stack index in that trace, -1 */
    char *what;              /* describes the call, e.g. "AllReduce(1 x float32, sum)" */
} ta_side;

typedef struct {
    int g; uint32_t seq; int op; char *what;
    int *waiting; int nwaiting;
    int *waitfor; int nwaitfor;
} ta_conseq;

/* a hang's stuck collective: what one member did there (members.c) */
/* suspended: no record of it, and the communicator is suspended on that rank (ncclCommSuspend, not resumed) */
enum { MS_BLOCKED_INSIDE, MS_NEVER_ISSUED, MS_COMPLETED, MS_UNKNOWN, MS_SUSPENDED, MS_N };
extern const char *const ta_mstate_names[MS_N];
typedef struct {
    int place;               /* place in the communicator */
    int rank, trace;         /* -1: no trace */
    int64_t call;            /* its call at (comm, seq), -1 */
    int state;               /* MS_* */
    double pending_s;        /* blocked_inside and gpu pending: seconds from enqueue to the trace's
                                last write (or last sign of life); < 0: not known */
    int lost;                /* unknown because the seq is older than the rank's ring window */
} ta_member;

/* divergence / before_window: the members' fingerprints at the first checkpoint that differs */
typedef struct { uint64_t hash; int *ranks; int nranks; } ta_fpgroup;

/* graph_launches.c: the ranks launched the CUDA graph of the finding's
 * replayed call a different number of times */
typedef struct { int *ranks; int n; int64_t count; } ta_glgroup;
typedef struct {
    int gid;                 /* the job's graph (ta_an.graphs) */
    int trace; int64_t call; /* the replayed call the summary is about */
    int side;                /* 0: the waiting side's call, 1: the culprit's */
    ta_glgroup *groups; int ngroups;   /* ranks by launches, the culprits' group first */
} ta_glaunch;

typedef struct ta_finding {
    int kind;                /* K_* (ta_kinds.h) */
    int root;                /* 1: a root cause (top of the list) */
    int g;                   /* global comm, -1 */
    int64_t seq;             /* -1: none */
    int subkind;             /* SK_* (ta_kinds.h): SK_EXTRA_CALL, SK_SKIPPED_CALL, ...; SK_NONE */
    ta_side culprit, other;
    char *message, *hint;
    ta_conseq *cons; int ncons;
    /* memory */
    int64_t bytes, live, peak, median;
    int64_t peak_ns;
    int stack2;              /* peak stack (oom, imbalance) in culprit trace */
    int pystack2;            /* its Python stack, -1 */
    /* where the job stopped, when the finding moved earlier */
    int stop_g; int64_t stop_seq;
    double t;                /* wall time of the event, for ordering */
    void *data;              /* the kind's own data, defined by its file (nan: ta_nanfinding, straggler:
                                ta_straggler); NULL */
    int root_ranks;          /* as the root cause of a job where nothing hung, its culprit ranks are
                                the root ranks of the rank table (nan: the ranks it was born on) */
    /* a hang's stuck collective (at_g, at_seq) and its members (nmem 0: none) */
    int at_g; int64_t at_seq;
    ta_member *mem; int nmem;
    /* divergence / before_window: diverged within seqs (win_after, win_upto] */
    int64_t win_after, win_upto;
    ta_fpgroup *fpg; int nfpg;   /* ranks by fingerprint hash at win_upto, minority first */
    int fp_tie;                  /* the smallest groups are of equal size */
    /* divergence / skipped_call: the culprit's call before the gap (culprit.call
     * is the one after it; -1 none); mis_call: the culprit's own (g, seq),
     * issued later with the peers' arguments, so NCCL reduced it with the
     * peers' call of another step (-1: none); mis_prev, mis_peer_prev: the
     * calls on another communicator that precede it in the culprit's trace
     * and the peers' (g, seq) in other.trace (-1 none) */
    int64_t gap_before, mis_call, mis_prev, mis_peer_prev;
    /* signal: the waiter waits for signal #seq from the culprit, who sent sig_sent of them to it
     * (-1: not known) */
    int64_t sig_sent;
    ta_glaunch *glaunch;     /* NULL: no replayed call, or every rank launched its graph as often */
} ta_finding;

/* findings.c */
ta_finding *ta_finding_new(ta_an *a, int kind);                    /* added to a's findings */
void ta_finding_init(ta_finding *f, int kind);                       /* a finding of one's own, empty */
ta_finding *ta_finding_add(ta_an *a, const ta_finding *f);          /* a copy of f added (f's strings move) */
void ta_side_set(ta_side *s, const int *ranks, int n, int trace, int64_t call);
/* kinds.c: what f holds (not f), its kind's data by the table's drop */
void ta_finding_free(ta_finding *f);
void ta_finding_describe(ta_an *a, ta_finding *f);                  /* message and hint (divergence, missing, p2p, signal) */
void ta_warnings_nccl(ta_an *a);            /* NCCL host functions the shim does not record */

/* members.c: what each member did at a hang's stuck collective */
void ta_members_at(ta_an *a, ta_finding *f, int g, uint32_t seq, uint8_t **stuck_calls);
/* observed inside: gpu pending, or the host call had not returned (not on a communicator the
 * trace says is suspended: NCCL suspends idle communicators, a pending there is not a wait) */
int ta_call_waiting(const ta_trace *t, const ta_call *c);
double ta_pending_s(const ta_trace *t, const ta_call *c);   /* gpu pending since enqueue, to the trace's last sign */

/* diverge.c: the earliest divergence of culprit trace r from its peers */
int ta_diverges(ta_an *a, int r, const int *peers, int npeers);          /* 1: r's order differs somewhere */
/* how strongly r's order differs: the peers compared that agree on where r
 * first differs (0: r does not differ), *compared of them, counting only
 * peers in step with r over its first calls (not another pipeline stage's
 * program); *t: when r's call there was entered (wall time). peers: the
 * nearest first (they are examined in that order, 64 at most) */
int ta_divergence_evidence(ta_an *a, int r, const int *peers, int npeers, int *compared, double *t);
/* moves f to r's earliest divergence (kind divergence), keeping where the job stopped (stop_g/stop_seq);
 * 0: r does not diverge, f unchanged */
int ta_move_earlier(ta_an *a, ta_finding *f, int r, const int *peers, int npeers, int g_stop);
/* f's other side: the members of g that are not among the culprit traces */
void ta_others_of(ta_an *a, ta_finding *f, int g, const int *cul_t, int ncul, int rep_t, int64_t rep_c);
void ta_diverge_done(ta_an *a);   /* frees what the comparisons cached */


/* graph_launches.c: adds to each finding whose call is a CUDA graph's replay,
 * when the ranks launched that graph a different number of times, who
 * launched it how often (message, glaunch) */
void ta_graph_launches(ta_an *a);

/* rootcause.c: the hang analysis (the wait-for graph across communicators):
 * its findings, root causes marked, and a->stuck, a->root */
void ta_rootcause(ta_an *a);
/* kind_hang.c: ranks below the world size without a trace (kind no_trace; the hang analysis calls it) */
void ta_findings_no_trace(ta_an *a);

/* the folder's other parts, the writers every kind and report uses */
#include "ta_crash_out.h"
#include "ta_jw.h"
#include "ta_tx.h"

#endif
