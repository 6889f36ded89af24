/* The rank that died (issue 21; test_crash.py): a 4-rank training loop,
 * each step load_batch() then allreduce_grads(); rank CRASH_RANK (default
 * 2) dies at step CRASH_STEP (default 6) inside load_batch, the way MODE
 * says:
 *   segv            a load through a null pointer, two calls deep
 *                   (load_batch -> read_sample)
 *   bus             a read of a truncated file's mapping (read_mapped)
 *   abort           a failed assert() in check_batch
 *   overflow        unbounded recursion (recurse_parse) on a thread with
 *                   an alternate signal stack (as Python's faulthandler
 *                   installs one)
 *   thread          the segv of read_sample on a "loader" thread, while
 *                   the main thread waits for it
 *   before          segv, with the program's own SIGSEGV handler installed
 *                   before its first CUDA call (SA_RESETHAND; it creates
 *                   the marker apphandler.11 and returns: the fault comes
 *                   back and kills the process)
 *   after           segv, with the program's own SIGSEGV handler installed
 *                   after the shim's (at step 1), which creates the marker
 *                   apphandler.after and calls the handler it replaced
 *                   (as faulthandler does), then returns
 *   remote          segv, and the other ranks wait for each step the way
 *                   PyTorch's watchdog does: cudaStreamQuery and
 *                   ncclCommGetAsyncError every 10 ms; once the simulated
 *                   NCCL reports the dead peer (ncclRemoteError), they
 *                   ncclCommAbort and exit 1 (the test runs the launcher
 *                   with --no-kill-on-fail)
 *   illegal         the simulator's sticky CUDA error (TRSIM_INJECT_ERROR,
 *                   set by the test for that rank): cudaStreamSynchronize
 *                   in sync_step returns cudaErrorIllegalAddress, and the
 *                   program exits 1 as a CUDACHECK would
 * The other ranks then wait in their next AllReduce until the launcher
 * ends them (rank 2 sleeps 0.3 s before it dies, so that they are all in
 * it by then). Line numbers of the crash sites are asserted by the test
 * (marked CRASH-SITE-<name> below: the test finds them in this file). */
#include <assert.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include "../common/trtest.h"

#define NOINLINE __attribute__((noinline))

static int rank, world;
static ncclComm_t comm;
static cudaStream_t stream;
static float *grads;
static const char *mode;
static volatile int sink;
int *volatile null_sample;           /* NULL, the compiler cannot know it */

NOINLINE int read_sample(const int *sample)
{
    return sample[3];                                   /* CRASH-SITE-read_sample */
}

NOINLINE int read_mapped(void)
{
    char path[] = "/tmp/crash_job_bus.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) FAIL("mkstemp: %s", strerror(errno));
    if (ftruncate(fd, 8192) != 0) FAIL("ftruncate: %s", strerror(errno));
    volatile char *p = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) FAIL("mmap: %s", strerror(errno));
    if (ftruncate(fd, 100) != 0) FAIL("ftruncate: %s", strerror(errno));    /* truncated meanwhile */
    unlink(path);
    return p[4096];                                     /* CRASH-SITE-read_mapped */
}

NOINLINE void check_batch(const int *batch)
{
    assert(batch != NULL);                              /* CRASH-SITE-check_batch */
}

static volatile int forever = 1;

NOINLINE int recurse_parse(int depth)
{
    volatile char pad[2048];
    pad[0] = (char)depth;
    int r = forever ? recurse_parse(depth + 1) : 0;    /* CRASH-SITE-recurse_parse */
    return r + pad[0];
}

static void *loader_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "loader");
    sink = read_sample(null_sample);                    /* CRASH-SITE-loader_main */
    return NULL;
}

static void *overflow_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "parser");
    static char alt[256 << 10];
    stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) FAIL("sigaltstack: %s", strerror(errno));
    sink = recurse_parse(0);
    return NULL;
}

static struct sigaction replaced;

static void own_before(int sig)
{
    (void)sig;
    trtest_marker("apphandler.11");
}

static void own_after(int sig, siginfo_t *si, void *uc)
{
    trtest_marker("apphandler.after");
    if (replaced.sa_flags & SA_SIGINFO) replaced.sa_sigaction(sig, si, uc);
    else if (replaced.sa_handler != SIG_DFL && replaced.sa_handler != SIG_IGN) replaced.sa_handler(sig);
    else signal(sig, SIG_DFL);
}

NOINLINE void load_batch(int step)
{
    if (rank != trtest_env_int("CRASH_RANK", 2) || step != trtest_env_int("CRASH_STEP", 6)) return;
    usleep(300 * 1000);     /* the peers in AllReduce #6 first: the launcher ends them as soon as this rank dies */
    if (!strcmp(mode, "segv") || !strcmp(mode, "before") || !strcmp(mode, "after") || !strcmp(mode, "remote")) {
        sink = read_sample(null_sample);                /* CRASH-SITE-load_batch */
    } else if (!strcmp(mode, "bus")) {
        sink = read_mapped();                           /* CRASH-SITE-load_batch_bus */
    } else if (!strcmp(mode, "abort")) {
        check_batch(null_sample);                       /* CRASH-SITE-load_batch_abort */
    } else if (!strcmp(mode, "overflow") || !strcmp(mode, "thread")) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setstacksize(&a, 1 << 20);
        if (pthread_create(&t, &a, !strcmp(mode, "thread") ? loader_main : overflow_main, NULL) != 0)
            FAIL("pthread_create");
        pthread_join(t, NULL);
    }
}

/* a watchdog's wait: the stream, or the communicator's asynchronous error */
NOINLINE void watch_step(void)
{
    for (;;) {
        cudaError_t q = cudaStreamQuery(stream);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) FAIL("cudaStreamQuery: %s", cudaGetErrorString(q));
        ncclResult_t ae = ncclSuccess;
        NCCLCHECK(ncclCommGetAsyncError(comm, &ae));       /* CRASH-SITE-watch_step */
        if (ae != ncclSuccess && ae != ncclInProgress) {
            fprintf(stderr, "rank %d: NCCL error: %s\n", rank, ncclGetErrorString(ae));
            ncclCommAbort(comm);
            exit(1);
        }
        usleep(10 * 1000);
    }
}

NOINLINE void sync_step(void)
{
    if (!strcmp(mode, "remote")) {
        watch_step();
        return;
    }
    cudaError_t e = cudaStreamSynchronize(stream);      /* CRASH-SITE-sync_step */
    if (e != cudaSuccess) {
        fprintf(stderr, "rank %d: cudaStreamSynchronize: %s\n", rank, cudaGetErrorString(e));
        exit(1);
    }
}

NOINLINE void allreduce_grads(void)
{
    NCCLCHECK(ncclAllReduce(grads, grads, 1024, ncclFloat32, ncclSum, comm, stream));   /* CRASH-SITE-allreduce */
}

int main(int argc, char **argv)
{
    if (argc < 2) FAIL("usage: crash_job MODE [STEPS]");
    mode = argv[1];
    int steps = argc > 2 ? atoi(argv[2]) : 10;
    if (!strcmp(mode, "before")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = own_before;
        sa.sa_flags = SA_RESETHAND;
        sigaction(SIGSEGV, &sa, NULL);
    }
    comm = trtest_world_comm(&rank, &world, "crash");
    CUDACHECK(cudaStreamCreate(&stream));
    CUDACHECK(cudaMalloc((void **)&grads, 1024 * sizeof(float)));
    for (int step = 1; step <= steps; step++) {
        if (step == 1 && !strcmp(mode, "after")) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_sigaction = own_after;
            sa.sa_flags = SA_SIGINFO;
            sigaction(SIGSEGV, &sa, &replaced);
        }
        load_batch(step);                               /* CRASH-SITE-main */
        allreduce_grads();
        sync_step();
    }
    NCCLCHECK(ncclCommDestroy(comm));
    return 0;
}
