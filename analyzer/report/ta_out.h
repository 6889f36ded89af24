/* The documents: --json (out_json.c, docs/analysis-format.md), text
 * (out_text.c), --markdown (out_md.c), and --anonymize over any of them
 * (anon.c).
 * report/'s boundary header: outside report/, the one to include. */
#ifndef TA_OUT_H
#define TA_OUT_H

#include <stdio.h>

#include "findings/ta_finding.h"

void ta_out_text(ta_an *a, FILE *o);
void ta_out_json(ta_an *a, FILE *o);
struct ta_jw;
void ta_json_clocks(struct ta_jw *w, const ta_an *a);   /* out_clocks.c: --json's "clocks" */
void ta_out_markdown(ta_an *a, FILE *o);   /* at most TA_MD_LIMIT characters, whatever the job */
#define TA_MD_LIMIT 60000
/* --reports PREFIX (out_reports.c): PREFIX.txt (text: ta_text_capture's, the document stdout got),
 * .json, .md; 0, or -1 (a message said so) */
int ta_out_reports(ta_an *a, const char *prefix, const char *text);
/* one finding's lines, text (md 0) or Markdown; top: a root cause (out_text.c) */
/* top: 0 not a root cause, else which root cause (1 the first) */
void ta_out_finding(ta_an *a, FILE *o, const ta_finding *f, int md, int top);
/* why this job of several is the one analysed: "this one was asked for with --job" or "this one is
 * the newest (...)" (out_text.c; the header of text, --markdown and --html) */
const char *ta_job_choice(const ta_an *a);

/* --anonymize (anon.c): ta_anon_begin() holds back what the program writes on
 * its standard output and error; ta_anon_end() writes it there with host
 * names replaced (host1, host2, ... in order of first rank), home folders
 * made ~ (/home/<user>, /Users/<user>, /root) and those users' names made
 * user1, user2, ... (json: the document's keys are left alone), and the
 * same in the --html and --timeline files written (html, timeline: NULL
 * none). ta_anon_begin: 0 done;
 * -1: ta_anon_begin could not hold the output back (a message said so). ta_anon_end: 0, or -1 when
 * a file could not be rewritten (a message said so; standard output: the caller checks it). */
int ta_anon_begin(void);
int ta_anon_end(ta_an *a, int json, const char *html, const char *timeline);

/* a file tranalyze writes where it is told (out_file.c): made new under a temporary name (*tmp),
 * mode 0600, no link followed (NULL: errno says why), then ta_file_commit: closed and renamed over
 * path when whole (0), else removed (-1, errno says why); tmp freed either way */
FILE *ta_file_create(const char *path, char **tmp);
int ta_file_commit(FILE *o, const char *path, char *tmp);
/* standard output flushed: 1 when what was written to it is not whole, said once on stderr
 * ("tranalyze: cannot write the report to standard output: <errno's text>"; ta_stdout_said: err's);
 * ta_stdout_open (first thing): stdout made a stream that keeps the errno of its first failed write */
void ta_stdout_open(void);
int ta_stdout_failed(void);
int ta_stdout_done(void);     /* ... and a file system's error at close (stdout stays open): -1, else 0 */
void ta_stdout_said(int err);

/* --timeline FILE (out_timeline.c): the Chrome/Perfetto trace-event JSON; --html FILE
 * (out_html.c): one self-contained page, its diagnosis the text document (text: from
 * ta_text_capture, which runs ta_out_text: once per run, as it numbers the root causes).
 * 0, or -1 when FILE could not be written (a message said so). */
int ta_out_timeline(ta_an *a, const char *path);
char *ta_text_capture(ta_an *a);
int ta_out_html(ta_an *a, const char *path, const char *text);
/* what they share (out_timeline.c): a trace's monotonic ns on the wall clock (ns, by its own
 * realtime sample; saturated), its last sign of life (write, ring heartbeat; INT64_MIN: none),
 * and per trace the call it is stuck in first (-1: none; <= -2: the init of comm -2-v) */
int64_t ta_tl_wall_ns(const ta_trace *t, int64_t ns);
/* the first call of t entered at or after wall time w (calls are in the order they entered) */
int64_t ta_tl_call_at_time(const ta_trace *t, int64_t w);
/* a root finding's call on trace t (the culprit's, or its call at the finding's seq), -1 none */
int64_t ta_tl_root_call(ta_an *a, const ta_finding *f, int t);
int64_t ta_tl_last_ns(const ta_trace *t);
int64_t *ta_tl_stuck(ta_an *a);

#endif
