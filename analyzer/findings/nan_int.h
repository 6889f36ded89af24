/* The nan kind's parts (nan.c: detection and the finding; nan_event.c: one
 * non-finite point analysed and described; nan_out.c: --json and text).
 * (Private to findings/.) */
#ifndef TA_NAN_INT_H
#define TA_NAN_INT_H

#include "align/ta_align.h"
#include "ta_finding.h"

/* nan: one member of the communicator at the non-finite (comm, seq) */
typedef struct {
    int place;               /* place in the communicator */
    int rank;                /* global rank; -1: no trace */
    int trace;               /* -1: no trace */
    int64_t call;            /* -1: the rank never issued it, or (lost) its record is gone */
    int64_t in, out;         /* index into the trace's checks, -1 none */
    int source;              /* its input was non-finite */
    int earlier;             /* ... with no finite check kept before it (UR_EARLIER): not counted a source */
    int lost;                /* it issued it before its ring window (ring_lost > 0): call, checks unknown */
} ta_nanmember;

/* nan: a group of later non-finite collectives of one communicator */
typedef struct { int g; uint32_t from_seq; int64_t count; } ta_nanlater;

/* nan: a non-finite (comm, seq) analysed (the first one, or an independent one) */
enum { NC_INPUT, NC_OVERFLOW, NC_UNKNOWN };
extern const int ta_nan_cause_subkinds[3];   /* a cause is its finding's subkind */
typedef struct ta_nanev {
    int g; uint32_t seq;
    int op, dtype, redop;
    int cause;               /* NC_* */
    char *reason;            /* NC_UNKNOWN: why; NULL */
    int *ranks; int nranks;  /* sources (input), all members (overflow), unchecked (unknown) */
    int *unchecked; int nunchecked;   /* traced members whose input is not known */
    char *unknown_text;      /* why those inputs are not known; NULL */
    ta_nanmember *mem; int nmem;
    int ref;                 /* index into mem: the member whose output is quoted (-1) */
    double t;
} ta_nanev;

typedef struct {
    ta_nanev ev;
    ta_nanlater *later; int nlater;
    int64_t later_count;     /* non-finite collectives causally after it */
    ta_nanev *indep; int nindep;   /* first non-finite points not after it */
    int64_t unchecked_before;      /* reductions before it on its members without a usable check */
} ta_nanfinding;


/* nan_event.c */
int64_t ta_check_find(const ta_trace *t, int64_t call, int buffer);   /* index into checks, -1 */
ta_check ta_check_at(const ta_trace *t, int64_t k);                    /* a check, whole */
double ta_nan_limit(int dt);                 /* the datatype's largest finite value, 0 */
const char *ta_nan_limit_text(int dt);
char *ta_nan_join(char *a, const char *sep, char *b);   /* a sep b, either NULL; frees them */
void ta_nan_event(ta_an *a, int g, uint32_t seq, ta_nanev *ev);       /* (comm g, seq) analysed */
char *ta_nan_describe(ta_an *a, const ta_nanev *ev, char **hint);     /* its message (and hint) */

#endif
