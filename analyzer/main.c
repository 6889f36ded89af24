/* tranalyze DIR|FILES... : reads the traces of every rank, diffs them and
 * names the root cause of a hang, an out-of-memory failure or a NaN/Inf.
 * Exit status: 0 nothing found, 1 findings, 2 could not analyse, or an
 * output could not be written whole (a message on stderr names it). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "align/ta_align.h"
#include "findings/ta_finding.h"
#include "load/ta_load.h"
#include "model/ta_model.h"
#include "report/ta_out.h"
#include "site/ta_site.h"
#include "watch/ta_watch.h"

static double t_start;
static int timing;
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
static void phase(const char *what)
{
    if (timing) fprintf(stderr, "tranalyze: %-10s %.3f s\n", what, now() - t_start);
}

/* ---- standard output: what could not be written whole is said, and the status is 2 ----
 * A closed descriptor 0, 1 or 2 is held by /dev/null (1: opened for reading, so that writing the
 * report fails, EBADF, and no file tranalyze opens later takes its place); SIGPIPE is ignored, so
 * that a reader that stops early (| head) is a write that failed (EPIPE) and the files asked for
 * are still written. */
static void hold_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int n = open("/dev/null", fd == 2 ? O_WRONLY : O_RDONLY);
            if (n >= 0 && n != fd) { dup2(n, fd); close(n); }
        }
    signal(SIGPIPE, SIG_IGN);
    ta_stdout_open();
}

/* the status, 2 when standard output could not be written whole */
static int finish(int rc) { return ta_stdout_done() < 0 ? 2 : rc; }

static int cmp_note(const void *x, const void *y)
{
    const ta_note *a = x, *b = y;
    if (!a->file || !b->file) return (a->file == NULL) - (b->file == NULL);
    return strcmp(a->file, b->file);
}

static void usage(FILE *o)
{
    fputs("usage: tranalyze [options] DIR|FILE...\n"
          "Reads the trshim traces below DIR (every trshim.*.json, recursively) or the given files,\n"
          "and names the root cause of a hang, divergence, out-of-memory failure or NaN/Inf.\n\n"
          "  --job ID                   analyse job ID (default: the newest job found)\n"
          "  --json                     machine-readable output (docs/analysis-format.md)\n"
          "  --markdown                 a summary to paste into a bug report\n"
          "  --anonymize                host names as host1, host2..., home folders as ~, their users'\n"
          "                             names as user1... in everything printed (with any output)\n"
          "  --timeline FILE            also write FILE: the job as trace events for ui.perfetto.dev or\n"
          "                             chrome://tracing (a track per rank, root cause and hang marked)\n"
          "  --html FILE                also write FILE: one self-contained page, the diagnosis with a\n"
          "                             timeline around the root cause and peak memory per rank\n"
          "  --modules DIR              also look for the job's modules (executables, libraries) in DIR\n"
          "  --full-stacks              every frame of the stacks in --json (default: 8), and call sites\n"
          "                             with every Python frame (innermost first) and the native site\n"
          "  --fold DIR                 Python files under DIR are a library's: folded from call sites\n"
          "                             (absolute: that folder; relative, e.g. megatron: any folder so named)\n"
          "  --no-fold DIR              Python files under DIR are the user's, wherever they are installed\n"
          "                             (by default files of the standard library and of installed\n"
          "                             distributions are folded, as each rank's shim recorded them)\n"
          "  --imbalance-threshold F    report a rank whose peak memory exceeds the median of the\n"
          "                             others by more than F (fraction, default 0.25)\n"
          "  --straggler-ms MS          report a rank that enters a communicator's collectives late by a\n"
          "                             median of at least MS milliseconds (default 50)\n"
          "  --straggler-fraction F     ... and by at least F of the median interval between the\n"
          "                             communicator's collectives (default 0.1)\n"
          "  --max-trace-mb MB          skip a JSON trace larger than MB MiB (default 4096): what one\n"
          "                             damaged or foreign file may cost is bounded\n"
          "  --max-calls N              the call budget: hold at most N calls of the whole job (default\n"
          "                             8000000; each trace its share, at least 64: its newest calls; the\n"
          "                             older ones count as lost from its window); 0: every call\n"
          "  --reports PREFIX           also write the text, --json and --markdown reports whole into\n"
          "                             PREFIX.txt, PREFIX.json and PREFIX.md (mode 0600)\n"
          "  --version                  print the version and exit\n\n"
          "tranalyze --watch [options] DIR: the answer while the job runs (docs/live.md). Reads the\n"
          "ring files of the job in DIR about once a second; when an operation of a rank has waited\n"
          "longer than the hang threshold, or a rank's process is gone while the others wait, prints\n"
          "the root cause on stderr (lines prefixed \"trshim:\") and writes the reports into DIR as\n"
          "tranalyze.JOB.hangN.{txt,json,md}; at the job's end (every rank gone, SIGINT, SIGTERM)\n"
          "the final reports tranalyze.JOB.{txt,json,md} and one verdict line.\n"
          "  --hang-sec S               the hang threshold (default: the ranks' TRSHIM_HANG_SEC, 300)\n"
          "  --on-hang report|abort     abort: end the job right after the report (SIGTERM to\n"
          "                             --signal-pid, else to the job's ranks on this host)\n"
          "  --signal-pid PID           the process --on-hang abort ends (trshim run: the launcher)\n"
          "  --settle S                 after a trigger, the other ranks' time to catch up (default 2)\n"
          "  --end-on-eof               the job has ended when standard input ends (trshim run)\n"
          "  -h, --help                 this help\n\n"
          "Exit status: 0 nothing found, 1 findings, 2 could not analyse, or an output (standard output,\n"
          "a --html, --timeline or --reports file) could not be written whole: a message on stderr names it\n"
          "(a reader that stops early, `tranalyze DIR | head`, is one: the other outputs are still written).\n", o);
}

/* optarg as a number in [0, max]: 0 (with a message) when it is not one */
static int number_arg(const char *opt, const char *wants, double max, double *out)
{
    char *end;
    double v = strtod(optarg, &end);
    if (end == optarg || *end || !(v >= 0) || v > max) {
        ta_esc_printf(stderr, "tranalyze: %s wants %s, not \"%s\"\n", opt, wants, optarg);
        return 0;
    }
    *out = v;
    return 1;
}

/* Reads the traces and analyses them: 0, or ta_load's failure (nothing usable). */
static int analyse(ta_an *a, char **paths, int npaths)
{
    int lrc = ta_load(a, paths, npaths);
    phase("load");
    if (a->nnotes > 1) qsort(a->notes, (size_t)a->nnotes, sizeof *a->notes, cmp_note);   /* files in name order (threads) */
    if (lrc != 0) return lrc;
    ta_align(a);
    phase("align");
    ta_clocks_free(a);               /* a second reading places them anew */
    ta_clocks_align(a);              /* every rank's clock on one (clocks.c) */
    phase("clocks");
    ta_simulate(a);                  /* what could complete (simulate.c): for the root cause and the timeline */
    phase("simulate");
    ta_rootcause(a);
    phase("rootcause");
    ta_kinds_detect(a, phase);       /* each kind's detector, in the table's order (ta_kinds.h) */
    ta_kinds_rank(a);                /* root cause first */
    ta_graph_launches(a);            /* CUDA graphs the ranks launched a different number of times */
    return 0;
}

/* everything an analysis made, stage by stage (the options stay) */
static void analysis_free(ta_an *a)
{
    ta_findings_free(a);
    ta_clocks_free(a);
    ta_align_free(a);
    ta_load_free(a);
    ta_model_free(a);
    free(a->anchors);
    a->anchors = NULL;
    a->nanchors = 0;
}

/* The call budget left out the calls of a divergence the fingerprints placed
 * (docs/analysis-format.md, "Memory: the call budget"): the traces are read
 * once more with their windows widened back to it, for the calls themselves.
 * Once: a second reading asks for nothing more. */
static int wants_second_reading(ta_an *a)
{
    if (a->nanchors) return 0;
    int cut = 0;
    for (int i = 0; i < a->ntr && !cut; i++) cut = a->tr[i]->unloaded > 0;
    if (!cut) return 0;
    for (int i = 0; i < a->nf; i++) {
        const ta_finding *f = &a->f[i];
        if (f->kind != K_DIVERGENCE || f->subkind != SK_BEFORE_WINDOW || f->g < 0 || f->win_after < 0) continue;
        a->anchors = xrealloc(a->anchors, sizeof *a->anchors * (size_t)(a->nanchors + 1));
        a->anchors[a->nanchors++] = (struct ta_anchor){a->gc[f->g].id,
                                                       f->win_after > UINT32_MAX ? UINT32_MAX : (uint32_t)f->win_after};
    }
    return a->nanchors > 0;
}

int main(int argc, char **argv)
{
    hold_std_fds();
    ta_an a;
    memset(&a, 0, sizeof a);
    a.imbalance = 0.25;
    a.imbalance_min = 1 << 20;
    a.straggler_ns = 50000000;
    a.straggler_frac = 0.1;
    a.max_trace_bytes = 4096ull << 20;
    a.max_calls = TA_BUDGET_DEFAULT;
    static const struct option opts[] = {
        {"job", required_argument, 0, 'j'}, {"json", no_argument, 0, 'J'}, {"markdown", no_argument, 0, 'm'},
        {"modules", required_argument, 0, 'M'}, {"full-stacks", no_argument, 0, 'F'},
        {"imbalance-threshold", required_argument, 0, 'i'}, {"straggler-ms", required_argument, 0, 'S'},
        {"straggler-fraction", required_argument, 0, 'f'}, {"max-trace-mb", required_argument, 0, 'X'},
        {"max-calls", required_argument, 0, 'C'},
        {"timeline", required_argument, 0, 'T'}, {"html", required_argument, 0, 'H'},
        {"anonymize", no_argument, 0, 'A'}, {"fold", required_argument, 0, 'D'}, {"no-fold", required_argument, 0, 'U'},
        {"reports", required_argument, 0, 'R'}, {"watch", no_argument, 0, 'W'},
        {"hang-sec", required_argument, 0, 1001}, {"on-hang", required_argument, 0, 1002},
        {"signal-pid", required_argument, 0, 1003}, {"settle", required_argument, 0, 1004},
        {"end-on-eof", no_argument, 0, 1005}, {"poll", required_argument, 0, 1006},
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0}};
    int anonymize = 0;                                     /* --anonymize */
    const char *timeline_path = NULL, *html_path = NULL;   /* --timeline, --html */
    const char *reports = NULL;                            /* --reports */
    int watch = 0;
    ta_watch_opts wo = {.hang_sec = -1, .settle_sec = 2, .poll_sec = 1};
    wo.pass = xmalloc(sizeof(char *) * (size_t)(2 * argc + 1));
    int c, li = -1;
    while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
        /* the analysis' own options, for the analyses a watcher runs */
        if (li >= 0 && strchr("MFiSfXCDU", c) && c < 128) {
            char *o = xmalloc(strlen(opts[li].name) + 3);
            sprintf(o, "--%s", opts[li].name);
            wo.pass[wo.npass++] = o;
            if (optarg) wo.pass[wo.npass++] = xstrdup(optarg);
        }
        li = -1;
        switch (c) {
        case 'R': reports = optarg; break;
        case 'W': watch = 1; break;
        case 1001:
            if (!number_arg("--hang-sec", "seconds such as 60", 604800, &wo.hang_sec)) return 2;
            if (wo.hang_sec <= 0) { fputs("tranalyze: --hang-sec wants more than 0 seconds\n", stderr); return 2; }
            break;
        case 1002:
            if (strcmp(optarg, "report") && strcmp(optarg, "abort")) {
                ta_esc_printf(stderr, "tranalyze: --on-hang wants report or abort, not \"%s\"\n", optarg);
                return 2;
            }
            wo.abort = !strcmp(optarg, "abort");
            break;
        case 1003: {
            double v;
            if (!number_arg("--signal-pid", "a process id", 4194304, &v) || v < 1) return 2;
            wo.signal_pid = (pid_t)v;
            break;
        }
        case 1004:
            if (!number_arg("--settle", "seconds such as 2", 3600, &wo.settle_sec)) return 2;
            break;
        case 1005: wo.end_on_eof = 1; break;
        case 1006:
            if (!number_arg("--poll", "seconds such as 1", 60, &wo.poll_sec) || wo.poll_sec < 0.01) return 2;
            break;
        case 'j': a.job_wanted = optarg; break;
        case 'J': a.json = 1; break;
        case 'm': a.markdown = 1; break;
        case 'A': anonymize = 1; break;
        case 'T': timeline_path = optarg; break;
        case 'H': html_path = optarg; break;
        case 'F': a.full_stacks = 1; break;
        case 'D':
        case 'U':
            if (ta_py_fold_option(optarg, c == 'D') < 0) {
                ta_esc_printf(stderr, "tranalyze: --%s wants a folder, not \"%s\"\n", c == 'D' ? "fold" : "no-fold", optarg);
                return 2;
            }
            break;
        case 'M':
            a.module_dirs = xrealloc(a.module_dirs, sizeof(char *) * (size_t)(a.nmodule_dirs + 1));
            a.module_dirs[a.nmodule_dirs++] = optarg;
            break;
        case 'i':
            if (!number_arg("--imbalance-threshold", "a fraction such as 0.25", 1000, &a.imbalance)) return 2;
            break;
        case 'S': {
            double ms;
            if (!number_arg("--straggler-ms", "milliseconds such as 50", 1e9, &ms)) return 2;
            a.straggler_ns = (int64_t)(ms * 1e6 + 0.5);
            break;
        }
        case 'f':
            if (!number_arg("--straggler-fraction", "a fraction such as 0.1", 1000, &a.straggler_frac)) return 2;
            break;
        case 'X': {
            double mb = 0;
            if (!number_arg("--max-trace-mb", "MiB such as 4096", 1 << 30, &mb)) return 2;
            if (mb < 1) { fputs("tranalyze: --max-trace-mb wants at least 1\n", stderr); return 2; }
            a.max_trace_bytes = (uint64_t)mb << 20;
            break;
        }
        case 'C': {
            double n = 0;
            if (!number_arg("--max-calls", "a number of calls such as 8000000 (0: no budget)", 1e15, &n)) return 2;
            a.max_calls = (int64_t)n;
            break;
        }
        case 'h': usage(stdout); return finish(0);
        case 'V': puts("tranalyze " TA_VERSION); return finish(0);
        default: usage(stderr); return 2;
        }
    }
    if (optind >= argc) { usage(stderr); return 2; }
    if (watch) {
        if (optind != argc - 1 || a.json || a.markdown || reports || timeline_path || html_path || anonymize) {
            fputs("tranalyze: --watch takes one folder, and none of --json, --markdown, --reports, --timeline, "
                  "--html, --anonymize (the reports are written into the folder)\n", stderr);
            return 2;
        }
        wo.dir = argv[optind];
        wo.job = a.job_wanted;
        return ta_watch(&wo);
    }
    if (reports && anonymize) { fputs("tranalyze: --reports and --anonymize exclude each other\n", stderr); return 2; }
    if (a.json && a.markdown) { fputs("tranalyze: --json and --markdown exclude each other\n", stderr); return 2; }
    if (anonymize && ta_anon_begin() < 0) return 2;      /* what is printed is held back until the end */

    timing = getenv("TRANALYZE_TIMING") != NULL;
    t_start = now();
    ta_an given = a;                 /* the options alone: a second reading starts from them */
    int rc, lrc = analyse(&a, argv + optind, argc - optind);
    if (lrc == 0 && wants_second_reading(&a)) {
        ta_an b = given;
        b.anchors = a.anchors;
        b.nanchors = a.nanchors;
        a.anchors = NULL;
        analysis_free(&a);           /* the first reading */
        a = b;
        lrc = analyse(&a, argv + optind, argc - optind);
    }
    if (lrc != 0) {
        if (a.json) {
            ta_out_json(&a, stdout);
        } else {
            fprintf(stderr, "tranalyze: nothing usable to analyse (%d file%s read)\n", a.nfiles, a.nfiles == 1 ? "" : "s");
            for (int i = 0; i < a.nnotes; i++)      /* file names and texts from the traces: escaped (ta_esc.h) */
                ta_esc_printf(stderr, "  %s%s%s\n", a.notes[i].file ? a.notes[i].file : "", a.notes[i].file ? ": " : "",
                              a.notes[i].text ? a.notes[i].text : "");
        }
        if (anonymize) ta_anon_end(&a, a.json, NULL, NULL);
        rc = finish(2);
        goto done;
    }
    ta_module_notes(&a);
    ta_warnings_nccl(&a);
    char *text = html_path || reports ? ta_text_capture(&a) : NULL;   /* the text document once: --html's, --reports' and stdout's */
    if (a.json) ta_out_json(&a, stdout);
    else if (a.markdown) ta_out_markdown(&a, stdout);
    else if (text) fputs(text, stdout);
    else ta_out_text(&a, stdout);
    int vis = 0;                     /* --timeline, --html, --reports, standard output: 2 when not written whole */
    if (!anonymize && ta_stdout_failed()) vis = 2;     /* (--anonymize writes it at its end) */
    if (html_path && ta_out_html(&a, html_path, text) < 0) vis = 2, html_path = NULL;
    if (timeline_path && ta_out_timeline(&a, timeline_path) < 0) vis = 2, timeline_path = NULL;
    if (reports && ta_out_reports(&a, reports, text) < 0) vis = 2;
    free(text);
    phase("output");
    if (anonymize && ta_anon_end(&a, a.json, html_path, timeline_path) < 0) vis = 2;   /* the files written too */
    rc = finish(vis ? vis : a.nf ? 1 : 0);
done:
    /* nothing outlives the analysis: main may run again in one process (the fuzzer's harness) */
    ta_symbolize_done();
    analysis_free(&a);
    ta_py_fold_reset();
    ta_intern_reset();
    for (int i = 0; i < wo.npass; i++) free(wo.pass[i]);
    free(wo.pass);
    return rc;
}
