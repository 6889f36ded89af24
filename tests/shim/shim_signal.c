/* Signals under the shim (test_shim.py cases "signal-*", "snapshot-*"): one
 * process, a 1-rank communicator, three AllReduces from signal_work, then
 *   abort [handler]   abort() (handler: its own SIGABRT handler, which
 *                     returns, so abort() ends the process anyway)
 *   segv [handler]    a real store through a null pointer (handler: an
 *                     SA_SIGINFO | SA_RESETHAND handler that notes the
 *                     fault's si_code and address and returns: the store
 *                     faults again and the default action ends it)
 *   overflow [alt]    unbounded recursion into the stack guard page (alt: an
 *                     alternate signal stack and an SA_ONSTACK handler that
 *                     notes it runs on it)
 *   bus               a read of a mapped page past the end of its (empty) file
 *   fpe               an integer division by zero
 *   usr1 [handler]    creates $TRSHIM_TEST_MARKERS/ready, waits for
 *                     .../go (the test sends SIGUSR1 meanwhile), then two
 *                     more AllReduces from signal_more, and exits 0
 * Every handler of the program's own is installed before its first CUDA
 * call (so the shim, which installs its handlers then, finds and chains
 * it) and creates the marker apphandler.<signal>[.detail]. After its first
 * CUDA call the program prints "usr1: default|ignored|handler", the
 * disposition of SIGUSR1 it sees then. Before faulting it waits 200 ms so
 * that the shim's poller has seen its AllReduces complete. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include "../common/trtest.h"

#define NOINLINE __attribute__((noinline))

static ncclComm_t comm;
static float *buf;
static cudaStream_t stream;

static void plain_handler(int sig)
{
    trtest_marker(sig == SIGABRT ? "apphandler.6" : sig == SIGUSR1 ? "apphandler.10" : "apphandler.other");
}

static void segv_handler(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    /* "apphandler.11.<si_code>.<null address>" */
    char name[64] = "apphandler.11.";
    size_t n = strlen(name);
    name[n++] = (char)('0' + (si->si_code % 10));
    name[n++] = '.';
    name[n++] = si->si_addr == NULL ? '1' : '0';
    name[n] = 0;
    trtest_marker(sig == SIGSEGV ? name : "apphandler.other");
}

static void overflow_handler(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    stack_t ss;
    int on_alt = sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK);
    trtest_marker(sig != SIGSEGV ? "apphandler.other" : on_alt ? "apphandler.11.altstack" : "apphandler.11.mainstack");
}

static void install(int sig, void (*plain)(int), void (*info)(int, siginfo_t *, void *), int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    if (info) {
        sa.sa_sigaction = info;
        sa.sa_flags = SA_SIGINFO | flags;
    } else {
        sa.sa_handler = plain;
        sa.sa_flags = flags;
    }
    if (sigaction(sig, &sa, NULL) != 0) FAIL("sigaction %d", sig);
}

NOINLINE void signal_work(int n)
{
    for (int i = 0; i < n; i++)
        NCCLCHECK(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, stream));
}

NOINLINE void signal_more(void)
{
    for (int i = 0; i < 2; i++)
        NCCLCHECK(ncclAllReduce(buf, buf, 32, ncclFloat32, ncclSum, comm, stream));
}

NOINLINE void signal_abort(void)
{
    abort();
}

int *volatile null_pointer;      /* NULL, but the compiler cannot know it */

NOINLINE void signal_segv(void)
{
    *(volatile int *)null_pointer = 1;
}

static volatile int sink;

static volatile int forever = 1;

NOINLINE int signal_recurse(int depth)
{
    volatile char pad[4096];
    pad[0] = (char)depth;
    pad[sizeof pad - 1] = (char)depth;
    int r = forever ? signal_recurse(depth + 1) : 0;   /* not a tail call: pad is used after it */
    return r + pad[0] + pad[sizeof pad - 1];
}

NOINLINE void signal_bus(void)
{
    char path[] = "/tmp/shim_signal_bus.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) FAIL("mkstemp: %s", strerror(errno));
    unlink(path);
    volatile char *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) FAIL("mmap: %s", strerror(errno));
    sink = p[0];                 /* past the end of the empty file */
}

NOINLINE void signal_fpe(void)
{
    volatile int zero = 0, one = 1;   /* a real division, not one the compiler folded */
    sink = one / zero;
}

static void wait_marker(const char *name)
{
    const char *dir = getenv("TRSHIM_TEST_MARKERS");
    if (!dir) FAIL("TRSHIM_TEST_MARKERS is not set");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    for (int i = 0; i < 6000 && access(path, F_OK) != 0; i++) trtest_sleep_ms(10);
    if (access(path, F_OK) != 0) FAIL("no %s after 60 s", path);
}

int main(int argc, char **argv)
{
    if (argc < 2) FAIL("usage: shim_signal MODE [handler|alt]");
    const char *mode = argv[1];
    int own = argc > 2;          /* the program's own handler */
    trtest_rank = 0;
    if (own && !strcmp(mode, "abort")) install(SIGABRT, plain_handler, NULL, 0);
    if (own && !strcmp(mode, "segv")) install(SIGSEGV, NULL, segv_handler, SA_RESETHAND);
    if (own && !strcmp(mode, "usr1")) install(SIGUSR1, plain_handler, NULL, SA_RESTART);
    static char altstack[256 << 10];
    if (own && !strcmp(mode, "overflow")) {
        stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
        if (sigaltstack(&ss, NULL) != 0) FAIL("sigaltstack: %s", strerror(errno));
        install(SIGSEGV, NULL, overflow_handler, SA_ONSTACK | SA_RESETHAND);
    }

    ncclUniqueId id;
    NCCLCHECK(ncclGetUniqueId(&id));
    CUDACHECK(cudaStreamCreate(&stream));
    CUDACHECK(cudaMalloc((void **)&buf, 4096));
    NCCLCHECK(ncclCommInitRank(&comm, 1, id, 0));
    struct sigaction cur;
    sigaction(SIGUSR1, NULL, &cur);
    printf("usr1: %s\n", cur.sa_handler == SIG_DFL ? "default" : cur.sa_handler == SIG_IGN ? "ignored" : "handler");
    fflush(stdout);
    signal_work(3);
    CUDACHECK(cudaStreamSynchronize(stream));
    trtest_sleep_ms(200);

    if (!strcmp(mode, "abort")) signal_abort();
    else if (!strcmp(mode, "segv")) signal_segv();
    else if (!strcmp(mode, "overflow")) sink = signal_recurse(0);
    else if (!strcmp(mode, "bus")) signal_bus();
    else if (!strcmp(mode, "fpe")) signal_fpe();
    else if (!strcmp(mode, "usr1")) {
        trtest_marker("ready");
        wait_marker("go");
        signal_more();
        CUDACHECK(cudaStreamSynchronize(stream));
        NCCLCHECK(ncclCommDestroy(comm));
        return 0;
    } else {
        FAIL("unknown mode %s", mode);
    }
    FAIL("mode %s: still alive", mode);
}
