/* Clock alignment (clocks.c): every rank's CLOCK_MONOTONIC put on one clock,
 * the reference ranks' wall clock, with how well each rank could be placed.
 * The rule is docs/analysis-format.md's "Clocks". Runs once per analysis,
 * after align.c built the communicator table; ta_wall() and the stragglers
 * read what it found.
 * (A part of align/'s boundary header, ta_align.h, which includes it.) */
#ifndef TA_CLOCK_H
#define TA_CLOCK_H

#include "model/ta_model.h"

/* How a clock domain was placed: one table, from which the enum and the names
 * --json writes come. Ranks compared on one clock domain are "monotonic" (the
 * stragglers' and comms' "clock"); between domains, the method's name. Listed
 * from the best placement to the worst. */
#define TA_CLOCK_METHODS(X)                                                                  \
    X(REFERENCE, "monotonic")    /* the reference domain (its own wall clock sample); a     \
                                    comparison within one domain */                        \
    X(REALTIME, "realtime")      /* same host: the host's realtime clock, which a time     \
                                    namespace does not change */                           \
    X(COMPLETION, "completion")  /* collective completions: members see one complete at    \
                                    about the same time */                                 \
    X(INIT, "init")              /* communicator inits: members leave them together */     \
    X(WALL, "wall")              /* the hosts' wall clocks (NTP), as causality allows */    \
    X(UNCHECKED, "unchecked")    /* wall clocks, nothing shared to check them against */
#define TA_CLOCK_ENUM_(id, name) TC_##id,
enum { TA_CLOCK_METHODS(TA_CLOCK_ENUM_) TC_N };
#undef TA_CLOCK_ENUM_
extern const char *const ta_clock_method_names[TC_N];

/* one clock domain: ranks whose CLOCK_MONOTONIC times compare as they are */
typedef struct {
    int *tr; int ntr;          /* trace indices, ascending rank */
    const char *host;
    int method;                /* TC_* */
    int64_t off_ns;            /* common time = CLOCK_MONOTONIC + off_ns */
    int64_t err_ns;            /* the placement's uncertainty against the reference (+-); -1 unknown */
    int64_t lo_ns, hi_ns;      /* what causality allows for off_ns - the wall sample's offset... as
                                  offsets relative to the chosen off_ns (lo <= 0 <= hi); INT64_MIN/MAX:
                                  unbounded */
    int64_t wall_skew_ns;      /* the rank's own wall sample minus where it was placed */
    int wall_refuted;          /* its wall clock contradicts what the collectives prove */
    int64_t samples;           /* collectives (or inits) the placement rests on */
    int split;                 /* taken out of its host's domain: its monotonic clock is not the others' */
    int64_t drift_ns;          /* largest change of a member's realtime - monotonic between its clock
                                  samples (an NTP step, a faked clock); 0 none seen */
} ta_clock_domain;

typedef struct ta_clocks {
    ta_clock_domain *d; int nd;
    int ref;                   /* index of the reference domain */
    int64_t max_err_ns;        /* the largest err_ns; -1 some domain unknown */
} ta_clocks;

void ta_clocks_align(ta_an *a);
void ta_clocks_free(ta_an *a);
/* the uncertainty between the clocks of traces x and y (0: one domain; -1 unknown) */
int64_t ta_clock_err(const ta_an *a, int x, int y);
/* one sentence on how the clocks were aligned; NULL when every rank shares one clock */
char *ta_clocks_text(const ta_an *a);

#endif
