/* tranalyze --watch DIR (watch.c, watch_ring.c): the answer while the job
 * still hangs. The ranks' ring files are read, never written or locked,
 * about once a second; when a rank's operation has waited longer than the
 * hang threshold, or a rank's process is gone while the others wait, the
 * same analysis as tranalyze's runs on the live files and its root cause is
 * printed on stderr, each line prefixed "trshim:", with the full reports
 * written into DIR (docs/live.md). Top layer: called by main.c alone.
 * watch/'s boundary header. */
#ifndef TA_WATCH_H
#define TA_WATCH_H

#include <stdint.h>
#include <sys/types.h>

#include "trshim/ring_format.h"

typedef struct {
    const char *dir;
    const char *job;          /* NULL: the newest job whose rings are in dir */
    double hang_sec;          /* < 0: the ranks' own threshold (TRSHIM_HANG_SEC, as each ring says), else 300 */
    double settle_sec;        /* after a trigger, the time the other ranks get to catch up */
    double poll_sec;          /* between two readings of the rings */
    int abort;                /* --on-hang abort: the job is ended right after the report */
    pid_t signal_pid;         /* ... by SIGTERM to this process (trshim run's launcher); 0: to the ranks of this host */
    int end_on_eof;           /* the job ended when standard input ends (trshim run holds its other end) */
    char **pass; int npass;   /* tranalyze's own options, for the analyses */
} ta_watch_opts;

int ta_watch(const ta_watch_opts *o);

/* ---- the rings of one job (watch_ring.c) ---------------------------------------- */

enum { TW_ALIVE, TW_EXITED, TW_SIGNALED, TW_KILLED, TW_SILENT };

typedef struct {
    char *name;               /* file name in the folder */
    const trr_header *map;    /* the header page, mapped read-only */
    trr_header h;             /* as last read */
    int same_host;            /* the process runs on this host: its pid can be asked */
    uint64_t beat;            /* the rank's last sign of life (heartbeat or poller pass), its clock */
    double beat_at;           /* when this watcher saw it change (its own clock, s) */
    int beat_moved;           /* it changed once at least: the rank keeps a heartbeat */
    int gone;                 /* TW_* */
    double gone_at;
    uint32_t t_pending;       /* at the trigger: pending operations, the oldest's enqueue time */
    uint64_t t_since;
} tw_rank;

typedef struct {
    int dirfd;
    char *job;                /* the job watched; NULL until one is seen */
    int job_fixed;            /* given by --job */
    tw_rank *r; int n;
    char **seen; int nseen;   /* every ring file name looked at (sorted): each is opened once */
    char host[256];
    uid_t uid;
    double scanned_at;
} tw_set;

int tw_open(tw_set *s, const char *dir, const char *job);   /* 0, or -1 (a message said why) */
void tw_scan(tw_set *s, double now);          /* new ring files of the job */
void tw_read(tw_set *s, double now);          /* every rank's header, its liveness */
uint64_t tw_rank_now(const tw_rank *r, double now);   /* the rank's clock now, extrapolated from its beat */
int tw_rank_of(const tw_rank *r);             /* the rank (environment's), -1 */
void tw_close(tw_set *s);

#endif
