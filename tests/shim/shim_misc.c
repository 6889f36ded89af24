/* Single-process cases of test_shim.py, one per mode:
 *   basic      a 1-rank communicator, five AllReduces, destroy
 *   nocuda     never calls CUDA or NCCL (forks and execs /bin/true too)
 *   fork       records, then forks: one child calls NCCL and exits, one
 *              kills itself with SIGTERM; neither may write a trace
 *   forkfirst  forks before any CUDA call: the child records on its own
 *   sigign     SIGINT set to SIG_IGN before the first CUDA call stays ignored
 *   chdir      changes folder after its first call: traces still go to the
 *              TRSHIM_DIR of the start
 *   lifecycle  (under trsim-launch) InitRankScalable, InitRankConfig + Abort,
 *              InitRank + Destroy twice (NCCL may hand the same handle
 *              out again), Revoke
 *   loop N     N AllReduces of counts 1..N, destroy
 *   killme N   N AllReduces of counts 1..N, then writes N into the marker
 *              "killme" (TRSHIM_TEST_MARKERS) and sleeps until killed
 *   unblock    after its first CUDA call (the shim's activation) removes the
 *              file TRSHIM_TEST_BLOCKER, which stood where TRSHIM_DIR's
 *              parent folder should be; then three AllReduces
 *   fsize N    as basic, but lowers its file-size limit (RLIMIT_FSIZE, soft)
 *              to N bytes after the AllReduces: the trace writes at destroy
 *              and exit would cross it
 *   envchange  sets NCCL_ALGO=Tree, makes a communicator (AllReduce), then
 *              sets NCCL_PROTO=Simple and unsets NCCL_ALGO, makes a second
 *              one (AllReduce); destroys both
 *   fill N     100 AllReduces, then fills the file system of the file
 *              TRSHIM_TEST_FILLER (written until ENOSPC), N more, removes
 *              the filler and finishes as basic
 * Prints "pid N" for each process that records. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include "../common/trtest.h"

#define NOINLINE __attribute__((noinline))

static ncclComm_t comm;
static float *buf;
static size_t buf_bytes = 4096;    /* the largest count misc_allreduce is given, x 4 */
static cudaStream_t stream;

NOINLINE void misc_init(void)
{
    ncclUniqueId id;
    NCCLCHECK(ncclGetUniqueId(&id));
    CUDACHECK(cudaStreamCreate(&stream));
    CUDACHECK(cudaMalloc((void **)&buf, buf_bytes));
    NCCLCHECK(ncclCommInitRank(&comm, 1, id, 0));
}

NOINLINE void misc_allreduce(int count)
{
    NCCLCHECK(ncclAllReduce(buf, buf, (size_t)count, ncclFloat32, ncclSum, comm, stream));
}

NOINLINE void misc_finish(void)
{
    CUDACHECK(cudaStreamSynchronize(stream));
    NCCLCHECK(ncclCommDestroy(comm));
    CUDACHECK(cudaFree(buf));
    printf("pid %d\n", (int)getpid());
    fflush(stdout);
}

static int wait_child(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) FAIL("waitpid: %s", strerror(errno));
    return status;
}

NOINLINE void misc_lifecycle(void)
{
    int rank, world;
    trtest_init(&rank, &world);
    CUDACHECK(cudaStreamCreate(&stream));
    CUDACHECK(cudaMalloc((void **)&buf, 4096));
    ncclUniqueId ids[2], id;
    trtest_exchange_id(&ids[0], rank == 0, "s1");
    trtest_exchange_id(&ids[1], rank == 0, "s2");
    ncclComm_t a, b, c, d;
    NCCLCHECK(ncclCommInitRankScalable(&a, world, rank, 2, ids, NULL));
    NCCLCHECK(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, a, stream));
    trtest_exchange_id(&id, rank == 0, "c");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    NCCLCHECK(ncclCommInitRankConfig(&b, world, id, rank, &config));
    NCCLCHECK(ncclAllReduce(buf, buf, 2, ncclFloat32, ncclSum, b, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    trtest_file_barrier("before-abort", rank, world);
    NCCLCHECK(ncclCommAbort(b));
    trtest_exchange_id(&id, rank == 0, "d1");
    NCCLCHECK(ncclCommInitRank(&c, world, id, rank));
    NCCLCHECK(ncclAllReduce(buf, buf, 3, ncclFloat32, ncclSum, c, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    NCCLCHECK(ncclCommDestroy(c));
    trtest_exchange_id(&id, rank == 0, "d2");
    NCCLCHECK(ncclCommInitRank(&d, world, id, rank));
    printf("handle reused: %d\n", c == d);
    NCCLCHECK(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, d, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    NCCLCHECK(ncclCommDestroy(d));
    trtest_file_barrier("before-revoke", rank, world);
    NCCLCHECK(ncclCommRevoke(a, NCCL_REVOKE_DEFAULT));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "basic";
    trtest_rank = 0;
    if (!strcmp(mode, "basic")) {
        misc_init();
        for (int i = 1; i <= 5; i++) misc_allreduce(i);
        misc_finish();
    } else if (!strcmp(mode, "nocuda")) {
        void *p = malloc(1000);
        free(p);
        pid_t pid = fork();
        if (pid == 0) {
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        int st = wait_child(pid);
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "/bin/true gave %d", st);
    } else if (!strcmp(mode, "fork")) {
        misc_init();
        misc_allreduce(1);
        CUDACHECK(cudaStreamSynchronize(stream));
        fflush(stdout);
        pid_t a = fork();
        if (a == 0) {
            /* NCCL's group calls need no device: safe in a child */
            if (ncclGroupStart() != ncclSuccess || ncclGroupEnd() != ncclSuccess) _exit(3);
            exit(0);     /* atexit handlers run: the shim's must not write */
        }
        int st = wait_child(a);
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child exited with %d", st);
        pid_t b = fork();
        if (b == 0) {
            raise(SIGTERM);   /* the inherited handler must not write either */
            _exit(4);
        }
        st = wait_child(b);
        EXPECT(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "child status %d", st);
        misc_allreduce(2);
        misc_finish();
    } else if (!strcmp(mode, "forkfirst")) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            misc_init();
            misc_allreduce(3);
            misc_finish();
            exit(0);
        }
        int st = wait_child(pid);
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child exited with %d", st);
    } else if (!strcmp(mode, "sigign")) {
        signal(SIGINT, SIG_IGN);
        misc_init();
        struct sigaction sa;
        sigaction(SIGINT, NULL, &sa);
        EXPECT(!(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_IGN, "SIGINT is no longer ignored");
        sigaction(SIGTERM, NULL, &sa);
        EXPECT((sa.sa_flags & SA_SIGINFO) || sa.sa_handler != SIG_DFL, "the shim has no SIGTERM handler");
        raise(SIGINT);
        misc_allreduce(4);
        misc_finish();
    } else if (!strcmp(mode, "lifecycle")) {
        misc_lifecycle();
    } else if (!strcmp(mode, "loop") || !strcmp(mode, "killme")) {
        int n = argc > 2 ? atoi(argv[2]) : 0;
        if ((size_t)n * sizeof(float) > buf_bytes) buf_bytes = (size_t)n * sizeof(float);
        misc_init();
        for (int i = 1; i <= n; i++) misc_allreduce(i);
        if (!strcmp(mode, "loop")) {
            misc_finish();
        } else {
            CUDACHECK(cudaStreamSynchronize(stream));
            printf("pid %d\n", (int)getpid());
            fflush(stdout);
            const char *dir = getenv("TRSHIM_TEST_MARKERS");
            char path[4096], tmp[4200];
            snprintf(path, sizeof path, "%s/killme", dir ? dir : ".");
            snprintf(tmp, sizeof tmp, "%s.tmp", path);
            FILE *f = fopen(tmp, "w");
            if (!f || fprintf(f, "%d\n", n) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
                FAIL("cannot write %s", path);
            for (;;) pause();
        }
    } else if (!strcmp(mode, "unblock")) {
        misc_init();
        const char *blocker = getenv("TRSHIM_TEST_BLOCKER");
        if (!blocker || unlink(blocker) != 0) FAIL("cannot remove TRSHIM_TEST_BLOCKER");
        for (int i = 1; i <= 3; i++) misc_allreduce(i);
        misc_finish();
    } else if (!strcmp(mode, "fsize")) {
        misc_init();
        for (int i = 1; i <= 5; i++) misc_allreduce(i);
        struct rlimit rl;
        if (getrlimit(RLIMIT_FSIZE, &rl) != 0) FAIL("getrlimit: %s", strerror(errno));
        rl.rlim_cur = argc > 2 ? (rlim_t)atoll(argv[2]) : 0;
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) FAIL("setrlimit: %s", strerror(errno));
        misc_finish();
    } else if (!strcmp(mode, "envchange")) {
        setenv("NCCL_ALGO", "Tree", 1);
        misc_init();
        misc_allreduce(1);
        CUDACHECK(cudaStreamSynchronize(stream));
        setenv("NCCL_PROTO", "Simple", 1);
        unsetenv("NCCL_ALGO");
        ncclUniqueId id;
        ncclComm_t second;
        NCCLCHECK(ncclGetUniqueId(&id));
        NCCLCHECK(ncclCommInitRank(&second, 1, id, 0));
        NCCLCHECK(ncclAllReduce(buf, buf, 2, ncclFloat32, ncclSum, second, stream));
        CUDACHECK(cudaStreamSynchronize(stream));
        NCCLCHECK(ncclCommDestroy(second));
        misc_finish();
    } else if (!strcmp(mode, "fill")) {
        int n = argc > 2 ? atoi(argv[2]) : 0;
        const char *filler = getenv("TRSHIM_TEST_FILLER");
        if (!filler) FAIL("TRSHIM_TEST_FILLER is not set");
        misc_init();
        for (int i = 1; i <= 100; i++) misc_allreduce(1 + i % 64);
        int fd = open(filler, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (fd < 0) FAIL("cannot create %s: %s", filler, strerror(errno));
        static char block[65536];
        for (size_t chunk = sizeof block; chunk;) {
            if (write(fd, block, chunk) < 0) {
                if (errno != ENOSPC) FAIL("writing %s: %s", filler, strerror(errno));
                chunk /= 2;
            }
        }
        close(fd);
        for (int i = 1; i <= n; i++) misc_allreduce(1 + i % 64);
        if (unlink(filler) != 0) FAIL("cannot remove %s: %s", filler, strerror(errno));
        misc_finish();
    } else if (!strcmp(mode, "chdir")) {
        misc_init();
        misc_allreduce(1);
        if (chdir("/") != 0) FAIL("chdir: %s", strerror(errno));
        misc_finish();
    } else {
        FAIL("unknown mode %s", mode);
    }
    return 0;
}
