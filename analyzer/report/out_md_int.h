/* --markdown (out_md.c): what its parts share (out_md_text.c: the buffers,
 * text, rank lists; out_md_env.c writes the system and the environment)
 * (Private to report/.) */
#ifndef OUT_MD_INT_H
#define OUT_MD_INT_H

#include <stdio.h>

#include "ta_out.h"

/* budgets of the parts, in bytes (a character is at least one): 59,000 in all */
enum { B_HEAD = 1500, B_FIND = 19500, B_WARN = 2500, B_RANKS = 14000, B_SYS = 4500, B_ENV = 13000, B_NOTES = 4000 };
_Static_assert(B_HEAD + B_FIND + B_WARN + B_RANKS + B_SYS + B_ENV + B_NOTES < TA_MD_LIMIT, "the parts fit the limit");
enum {
    MD_ELEMS = 12,          /* elements of a rank list in running text */
    MD_CELL_ELEMS = 8,      /* ... in a table cell */
    MD_ROOTS = 4,           /* root causes shown */
    MD_OTHERS_OPEN = 3,     /* other findings shown open, */
    MD_OTHERS = 15,         /* ... in all (the rest of them in <details>) */
    B_ROOT = 8000,          /* one root cause's lines */
    B_OTHER = 3000,         /* one other finding's */
    MD_WARNS = 5,
    MD_NOTES = 12,
    MD_OTHER_JOBS = 8,
    MD_PER_RANK = 24,       /* up to this many ranks: a row each */
    MD_ROWS = 24,           /* rows of ranks that ended alike */
    MD_MISSING_ROWS = 8,    /* rows of ranks without a trace */
    MD_DETAILS_ROWS = 12,   /* a longer rank table goes in <details> */
    MD_ENV_SHARED = 40,     /* variables every rank shares */
    MD_ENV_DIFF = 16,       /* variables that differ */
    MD_ENV_VALUES = 3,      /* other values of one that differs */
    MD_SYS_VALUES = 2,      /* ... of a version that differs (### System) */
    MD_SYS_PACKAGES = 8,    /* frameworks other than PyTorch and DeepSpeed (system.packages) */
};

/* a part written to memory, then placed within its budget */
typedef struct { char *s; size_t n; FILE *f; } mbuf;
FILE *ta_md_open(mbuf *m);
void ta_md_close(mbuf *m);
/* (out_md_text.c) s[0, n) into o, at most cap bytes: cut after a line when longer, saying so; its bytes */
size_t ta_md_capped(FILE *o, const char *s, size_t n, size_t cap);
/* the part into o (as ta_md_capped), freed */
size_t ta_md_part(FILE *o, mbuf *m, size_t cap);
/* s as text of a line or a table cell (cell: '|' escaped), at most max bytes */
void ta_md_text(FILE *o, const char *s, size_t max, int cell);
/* s[0, len) as code, at most max bytes */
void ta_md_code(FILE *o, const char *s, size_t len, size_t max, int cell);
/* ranks r[0..n) (ascending) as a short list, maxp elements at most */
char *ta_md_ranks(const int *r, int n, int maxp);

/* out_md_env.c: ### System (what maintainers ask first) and ### Environment */
void ta_md_system(ta_an *a, FILE *o);
void ta_md_environment(ta_an *a, FILE *o);

#endif
