/* The kinds of findings: one table, one row per kind (kinds.c holds it as
 * ta_kinds[], and runs and ranks by it). A new kind is a row here, its
 * functions' prototypes below the table, and its own file (added to
 * analyzer/meson.build); nothing else names kinds one by one.
 *
 * Columns:
 *   id      the kind is K_<id>
 *   name    "kind" in --json, the headings of text and Markdown (ta_kind_names)
 *   rank    its place in the ordering of findings, lower first (ties: in
 *           the order found). 0 and 1 are taken: 0 for a TA_KF_ROOT_RANK
 *           finding whose culprit is a root rank of the hang, 1 for every
 *           root cause of the hang analysis
 *   flags   TA_KF_ROOT_RANK: such a finding is a root cause, first of all
 *             (an out-of-memory failure of a rank the others wait for)
 *           TA_KF_NEVER_ROOT: never the root cause of a job where nothing
 *             hung, even when first (slow is not broken)
 *   detect  void (ta_an *a, int look): adds the kind's findings. NULL: only
 *           the hang analysis (rootcause.c) makes them. Detectors run after
 *           the hang analysis, in the order of the rows, twice: look
 *           TA_LOOK_CALLS, the scans of the calls, then TA_LOOK_FINDINGS,
 *           what defers to every finding of the first look (a rank already
 *           named, a communicator already explained); a detector sees the
 *           findings made before it, and acts in the looks it wants (nan
 *           and straggler in the second, after every divergence: no
 *           detector defers to them)
 *   json    void (ta_jw *w, ta_an *a, const ta_finding *f): the kind's own
 *           members of a finding's object (after "stuck_at", before
 *           "consequences"); NULL: none
 *   text    void (ta_tx *x, const ta_finding *f): the heading (ta_tx_head)
 *           and the kind's own lines, text and Markdown; NULL: the heading
 *           and message alone
 *   drop    void (void *data): frees the kind's own data (ta_finding.data) and
 *           what it holds; NULL: data, when set, is one block (free)
 * The common parts of a finding (culprit and others, message, hint, where
 * the job stopped, the members of a stuck collective, consequences) are
 * written by out_json.c and out_text.c for every kind.
 * (A part of findings/' boundary header, ta_finding.h, which includes it.) */
#ifndef TA_KINDS_H
#define TA_KINDS_H

#include <stddef.h>

#define TA_KF_ROOT_RANK 1u
#define TA_KF_NEVER_ROOT 2u
enum { TA_LOOK_CALLS, TA_LOOK_FINDINGS, TA_LOOKS };

/*   id           name                rank flags              detect                 json                 text                 drop */
#define TA_KINDS(X)                                                                                                                               \
    X(OOM,        "oom",              3,   TA_KF_ROOT_RANK,   ta_detect_oom,         ta_json_oom,         ta_text_memory,      NULL)              \
    X(IMBALANCE,  "memory_imbalance", 7,   0,                 ta_detect_imbalance,   ta_json_imbalance,   ta_text_memory,      NULL)              \
    X(DIVERGENCE, "divergence",       4,   0,                 ta_detect_divergence,  ta_json_divergence,  ta_text_divergence,  NULL)              \
    X(P2P,        "p2p",              5,   0,                 ta_detect_p2p,         NULL,                ta_text_p2p,         NULL)              \
    X(NAN,        "nan",              2,   0,                 ta_detect_nan,         ta_json_nan,         ta_text_nan,         ta_drop_nan)       \
    X(STRAGGLER,  "straggler",        9,   TA_KF_NEVER_ROOT,  ta_detect_straggler,   ta_json_straggler,   ta_text_straggler,   ta_drop_straggler) \
    X(MISSING,    "missing",          8,   0,                 NULL,                  NULL,                ta_text_missing,     NULL)              \
    X(INIT,       "init",             6,   0,                 NULL,                  NULL,                ta_text_init,        NULL)              \
    X(NO_TRACE,   "no_trace",         8,   0,                 NULL,                  NULL,                NULL,                NULL)              \
    X(SIGNAL,     "signal",           5,   0,                 NULL,                  ta_json_signal,      ta_text_signal,      NULL)              \
    X(CONFIG,     "config_mismatch",  6,   0,                 ta_detect_config,      ta_json_config,      ta_text_config,      ta_drop_config)    \
    X(TRACE_LOST, "trace_lost",       10,  TA_KF_NEVER_ROOT,  ta_detect_lost,        ta_json_lost,        ta_text_lost,        ta_drop_lost)      \
    X(DEAD,       "dead",             3,   0,                 ta_detect_dead,        ta_json_dead,        ta_text_dead,        NULL)

#define TA_KIND_ENUM_(id, name, rank, flags, detect, json, text, drop) K_##id,
enum { TA_KINDS(TA_KIND_ENUM_) K_N };
#undef TA_KIND_ENUM_

/* Subkinds: what kind of divergence, hang, loss... a finding is ("subkind"
 * in --json, after "/" in headings). One table: X(ID, name); SK_NONE, none. */
#define TA_SUBKINDS(X)                                                                      \
    X(NONE, "")                                                                             \
    X(EXTRA_CALL, "extra_call") X(SKIPPED_CALL, "skipped_call") X(DIFFERENT_CALL, "different_call") \
    X(ORDER, "order") X(ONE_SIDED, "one_sided") X(CONFIG, "config") X(BEFORE_WINDOW, "before_window") \
    X(SUSPENDED, "suspended") X(NEVER_SENT, "never_sent") X(NOT_RUN, "not_run")            \
    X(SIZE_MISMATCH, "size_mismatch") X(RECV_WITHOUT_SEND, "recv_without_send")             \
    X(SEND_WITHOUT_RECV, "send_without_recv") X(VERSION, "version") X(ENV, "env")           \
    X(DISK_FULL, "disk_full") X(WRITE_FAILED, "write_failed")                                \
    X(INPUT, "input") X(OVERFLOW, "overflow") X(UNKNOWN, "unknown")

#define TA_SUBKIND_ENUM_(id, name) SK_##id,
enum { TA_SUBKINDS(TA_SUBKIND_ENUM_) SK_N };
#undef TA_SUBKIND_ENUM_
extern const char *const ta_subkind_names[SK_N];   /* findings.c */

struct ta_an;
struct ta_finding;
struct ta_jw;
struct ta_tx;
typedef struct {
    int rank;
    unsigned flags;
    void (*detect)(struct ta_an *a, int look);
    void (*json)(struct ta_jw *w, struct ta_an *a, const struct ta_finding *f);
    void (*text)(struct ta_tx *x, const struct ta_finding *f);
    void (*drop)(void *data);
} ta_kind;
extern const ta_kind ta_kinds[K_N];      /* kinds.c: the rows' rank, flags and functions */
extern const char *const ta_kind_names[K_N];   /* findings.c: their names (below the writers, which use them) */

/* kinds.c: the detectors in the order of the rows (done: called after each
 * one with its kind's name, NULL), then the findings ordered, root causes
 * first: a->f sorted by rank; where nothing hung, the first is the root
 * cause (unless TA_KF_NEVER_ROOT) */
void ta_kinds_detect(struct ta_an *a, void (*done)(const char *what));
void ta_kinds_rank(struct ta_an *a);
/* kinds.c: every finding freed, with its kind's data (drop) */
void ta_findings_free(struct ta_an *a);

/* ---- the kinds' functions, by file ---- */
/* kind_memory.c */
void ta_detect_oom(struct ta_an *a, int look);
void ta_detect_imbalance(struct ta_an *a, int look);
void ta_json_oom(struct ta_jw *w, struct ta_an *a, const struct ta_finding *f);
void ta_json_imbalance(struct ta_jw *w, struct ta_an *a, const struct ta_finding *f);
void ta_text_memory(struct ta_tx *x, const struct ta_finding *f);
/* kind_divergence.c (with mispair.c and fingerprint.c) */
void ta_detect_divergence(struct ta_an *a, int look);
void ta_json_divergence(struct ta_jw *w, struct ta_an *a, const struct ta_finding *f);
void ta_text_divergence(struct ta_tx *x, const struct ta_finding *f);
void ta_findings_mispair(struct ta_an *a);       /* mispair.c: shifted calls although nothing hung */
void ta_findings_fingerprint(struct ta_an *a);   /* fingerprint.c: divergences older than the ring windows */
/* kind_config.c */
void ta_detect_config(struct ta_an *a, int look);
void ta_json_config(struct ta_jw *w, struct ta_an *a, const struct ta_finding *f);
void ta_text_config(struct ta_tx *x, const struct ta_finding *f);
void ta_drop_config(void *data);
/* kind_p2p.c */
void ta_detect_p2p(struct ta_an *a, int look);
void ta_text_p2p(struct ta_tx *x, const struct ta_finding *f);
/* nan.c; nan_out.c (its --json and text) */
void ta_detect_nan(struct ta_an *a, int look);
void ta_json_nan(struct ta_jw *w, struct ta_an *a, const struct ta_finding *f);
void ta_text_nan(struct ta_tx *x, const struct ta_finding *f);
void ta_drop_nan(void *data);
/* straggler.c */
void ta_detect_straggler(struct ta_an *a, int look);
void ta_json_straggler(struct ta_jw *w, struct ta_an *a, const struct ta_finding *f);
void ta_text_straggler(struct ta_tx *x, const struct ta_finding *f);
void ta_drop_straggler(void *data);
/* kind_lost.c: calls the full trace folder could not take */
void ta_detect_lost(struct ta_an *a, int look);
void ta_json_lost(struct ta_jw *w, struct ta_an *a, const struct ta_finding *f);
void ta_text_lost(struct ta_tx *x, const struct ta_finding *f);
void ta_drop_lost(void *data);
/* kind_dead.c: a rank that died outside the hang */
void ta_detect_dead(struct ta_an *a, int look);
void ta_json_dead(struct ta_jw *w, struct ta_an *a, const struct ta_finding *f);
void ta_text_dead(struct ta_tx *x, const struct ta_finding *f);
/* kind_hang.c: the kinds only the hang analysis finds */
void ta_text_missing(struct ta_tx *x, const struct ta_finding *f);
void ta_text_init(struct ta_tx *x, const struct ta_finding *f);
void ta_json_signal(struct ta_jw *w, struct ta_an *a, const struct ta_finding *f);
void ta_text_signal(struct ta_tx *x, const struct ta_finding *f);

#endif
