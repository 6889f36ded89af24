/* Unit test of analyzer/pystack.c: which files are folded (site-packages,
 * dist-packages, torch/ & co., the standard library), strings made safe,
 * the call site text (default and --full-stacks), and the same-site rule
 * (Python stacks when both calls have one, native ones otherwise). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ta_model.h"
#include "ta_site.h"

/* what pystack.c uses from the rest of tranalyze (symbolize.c) */
char *ta_native_site_text(ta_an *a, const ta_trace *t, int stack)
{
    (void)a;
    if (stack < 0 || stack >= t->nstacks) return xstrdup("an unknown call site");
    return xasprintf("native%d (x.c:%d)", stack, 10 + stack);
}
const char *ta_native_site_function(ta_an *a, const ta_trace *t, int stack)
{
    (void)a;
    return stack >= 0 && stack < t->nstacks ? "native" : NULL;
}

static int failed;
#define CHECK(c, ...) do { if (!(c)) { failed++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); putchar('\n'); } } while (0)

static void folded(void)
{
    static const struct { const char *f; int want; } v[] = {
        {"/job/llm/train.py", 0},
        {"train.py", 0},
        {"/opt/conda/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 1},
        {"/usr/lib/python3/dist-packages/numpy/core/numeric.py", 1},
        {"/home/u/.local/lib/python3.12/site-packages/accelerate/accelerator.py", 1},
        {"/src/pytorch/torch/distributed/c10d_logger.py", 1},          /* a source checkout */
        {"torch/nn/modules/module.py", 1},                               /* relative */
        {"/src/DeepSpeed/deepspeed/runtime/engine.py", 1},
        {"/src/ColossalAI/colossalai/booster/booster.py", 1},
        {"/src/Megatron-LM/megatron/core/distributed/ddp.py", 1},
        {"/src/nanotron/src/nanotron/trainer.py", 1},
        {"/usr/lib/python3.11/threading.py", 1},                         /* the standard library */
        {"/usr/lib64/python3.9/contextlib.py", 1},
        {"/opt/py/lib/python3.13t/concurrent/futures/thread.py", 1},     /* free-threaded build */
        {"/usr/local/lib/python3.10/multiprocessing/pool.py", 1},
        {"<frozen importlib._bootstrap>", 1},
        {"<string>", 0},
        {"/job/torchvision_utils/train.py", 0},                          /* "torch" not a whole folder */
        {"/job/mytorch/train.py", 0},
        {"/job/torch.py", 0},
        {"/job/lib/python3.x/train.py", 0},                               /* not python3.<digits> */
        {"/job/python3.11/train.py", 0},                                  /* not under lib/ */
        {"/job/megatron_tools/run.py", 0},
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        CHECK(ta_py_folded(v[i].f) == v[i].want, "ta_py_folded(%s) = %d, expected %d", v[i].f, ta_py_folded(v[i].f),
              v[i].want);
}

static void strings(void)
{
    CHECK(!strcmp(ta_py_intern("a\x01" "b\xff\xfe" "c\xc3\xa9", 100), "a?b??c\xc3\xa9"), "control and non-UTF-8 bytes");
    CHECK(!strcmp(ta_py_intern("abc\0def", 7), "abc"), "cut at the NUL");
    CHECK(!strcmp(ta_py_intern("abcdef", 3), "abc"), "at most n bytes");
    CHECK(!strcmp(ta_py_intern("\xe2\x82", 2), "??"), "a cut sequence");
    char *big = xmalloc(10001);
    memset(big, 'g', 10000);
    big[10000] = 0;
    const char *s = ta_py_intern(big, 10000);
    CHECK(strlen(s) == 4099 && !strcmp(s + 4096, "..."), "cut at 4096 bytes: %zu", strlen(s));
    free(big);
    ta_pycode c;
    ta_py_code_set(&c, "/a/b/train.py", 13, "Trainer.step", 12, 40);
    CHECK(!strcmp(c.base, "train.py") && !strcmp(c.file, "/a/b/train.py") && !strcmp(c.name, "Trainer.step"), "code");
    ta_py_code_set(&c, "", 0, "", 0, 1);
    CHECK(!strcmp(c.base, "?") && !strcmp(c.name, "?"), "empty strings: ?");
}

/* a trace whose codes are files[i] (function names[i]) and stacks the
 * given frame lists */
typedef struct { int code, line; } fr;
static ta_trace *mk(const char *const *files, const char *const *names, int ncodes, const fr *const *stacks,
                    const int *nfr, int nst)
{
    ta_trace *t = xcalloc(1, sizeof *t);
    t->npycodes = ncodes;
    t->pycodes = xcalloc((size_t)ncodes, sizeof *t->pycodes);
    for (int i = 0; i < ncodes; i++)
        ta_py_code_set(&t->pycodes[i], files[i], strlen(files[i]), names[i], strlen(names[i]), 1);
    t->npystacks = nst;
    t->pystacks = xcalloc((size_t)nst, sizeof *t->pystacks);
    for (int i = 0; i < nst; i++) {
        t->pystacks[i].nframes = nfr[i];
        t->pystacks[i].frames = xcalloc((size_t)nfr[i] + 1, sizeof(ta_pyframe));
        for (int k = 0; k < nfr[i]; k++) t->pystacks[i].frames[k] = (ta_pyframe){stacks[i][k].code, stacks[i][k].line};
    }
    t->nstacks = 3;
    t->stacks = xcalloc(3, sizeof *t->stacks);
    static ta_frame nf[3];
    for (int i = 0; i < 3; i++) {
        nf[i] = (ta_frame){0, (uint64_t)(0x100 * (i + 1)), NULL, 0};
        t->stacks[i] = (ta_stack){1, &nf[i]};
    }
    ta_py_prepare(t);
    return t;
}

static void sites(void)
{
    static const char *const files[] = {"/env/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py",
                                        "/usr/lib/python3.11/contextlib.py", "/job/train.py", "/job/train.py",
                                        "/job/train.py", "/env/lib/python3.11/site-packages/deepspeed/engine.py",
                                        "/elsewhere/train.py"};
    static const char *const names[] = {"all_reduce", "inner", "log_metrics", "train_step", "main", "report",
                                        "train_step"};
    static const fr grad[] = {{0, 2050}, {3, 212}, {4, 300}};
    static const fr metric[] = {{0, 2050}, {1, 81}, {2, 198}, {3, 214}, {4, 300}};
    static const fr grad2[] = {{0, 2051}, {1, 81}, {3, 212}, {4, 300}};   /* other library lines, same user frames */
    static const fr other_caller[] = {{0, 2050}, {3, 212}, {4, 310}};     /* same line, another caller */
    static const fr lib[] = {{0, 2050}, {5, 1874}};                        /* every frame folded */
    static const fr moved[] = {{0, 2050}, {6, 212}, {4, 300}};             /* train.py in another folder */
    static const fr unknown[] = {{2, -1}};
    const fr *st[] = {grad, metric, grad2, other_caller, lib, moved, unknown};
    int n[] = {3, 5, 4, 3, 2, 3, 1};
    ta_trace *t = mk(files, names, 7, st, n, 7);
    ta_an a;
    memset(&a, 0, sizeof a);
    struct { int p; const char *want; } txt[] = {
        {0, "train.py:212 in train_step"}, {1, "train.py:198 in log_metrics"}, {4, "distributed_c10d.py:2050 in all_reduce"},
        {6, "train.py:? in log_metrics"}, {-1, "native1 (x.c:11)"}, {99, "native1 (x.c:11)"}};
    for (size_t i = 0; i < sizeof txt / sizeof *txt; i++) {
        char *s = ta_site_text(&a, t, 1, txt[i].p);
        CHECK(!strcmp(s, txt[i].want), "site of pystack %d: %s, expected %s", txt[i].p, s, txt[i].want);
        free(s);
    }
    CHECK(!strcmp(ta_site_function(&a, t, 1, 1), "log_metrics"), "function");
    CHECK(!strcmp(ta_site_function(&a, t, 1, -1), "native"), "native function");
    a.full_stacks = 1;
    char *s = ta_site_text(&a, t, 2, 1);
    CHECK(!strcmp(s, "distributed_c10d.py:2050 in all_reduce <- contextlib.py:81 in inner <- train.py:198 in "
                     "log_metrics <- train.py:214 in train_step <- train.py:300 in main; native: native2 (x.c:12)"),
          "full stacks: %s", s);
    free(s);
    s = ta_site_text(&a, t, -1, 0);
    CHECK(!strcmp(s, "distributed_c10d.py:2050 in all_reduce <- train.py:212 in train_step <- train.py:300 in main"),
          "full stacks without a native stack: %s", s);
    free(s);
    a.full_stacks = 0;
    /* same site: Python stacks decide when both have one */
    ta_trace *u = mk(files, names, 7, st, n, 7);       /* another rank: the same stacks */
    CHECK(ta_site_equal(&a, t, 0, 0, u, 0, 0), "same stacks, two ranks");
    CHECK(!ta_site_equal(&a, t, 0, 0, u, 0, 1), "identical native stacks, different Python sites");
    CHECK(ta_site_equal(&a, t, 0, 0, u, 1, 2), "other library lines, same user frames, different native");
    CHECK(!ta_site_equal(&a, t, 0, 0, u, 0, 3), "the same line from another caller");
    CHECK(!ta_site_equal(&a, t, 0, 0, u, 0, 4), "user frames vs every frame folded");
    CHECK(ta_site_equal(&a, t, 0, 4, u, 0, 4), "every frame folded, the same");
    CHECK(ta_site_equal(&a, t, 0, 0, u, 0, 5), "the script in another folder");
    CHECK(ta_site_equal(&a, t, 0, 1, u, 0, -1), "mixed: native decides (same native)");
    CHECK(!ta_site_equal(&a, t, 0, 1, u, 1, -1), "mixed: native decides (different native)");
    CHECK(!ta_site_equal(&a, t, 0, -1, u, 2, -1), "no Python: native");
    CHECK(!ta_site_equal(&a, t, 0, 99, u, 1, 99), "a Python index out of range is none");
    ta_py_free(t);
    ta_py_free(u);
    free(t->stacks); free(u->stacks);
    free(t); free(u);
}

int main(void)
{
    folded();
    strings();
    sites();
    if (failed) { printf("%d failed\n", failed); return 1; }
    puts("ok: folding, strings, site text and same-site rules");
    return 0;
}
