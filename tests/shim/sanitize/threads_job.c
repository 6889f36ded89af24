/* A multi-threaded rank under the shim, for ThreadSanitizer (tests/sanitize
 * runs it on the TSan build; test_threads.py checks it everywhere): the
 * shim's threads (writer, NaN checks, completion and watchdog) and its
 * signal handler run while the application's threads use it at once.
 *
 * Each rank splits its world communicator THREADS times, then:
 *   - THREADS threads, each on its own communicator and stream, issue ITERS
 *     float32 AllReduces (sum, in place), the buffer refilled from the host
 *     before each one; the NaN/Inf checks look at every input and output.
 *     On rank 1, thread 0 plants a NaN at element NAN_AT of its input in
 *     iteration NAN_ITER (one non-finite collective: tranalyze names rank 1);
 *   - one thread allocates and frees device memory (cudaMalloc/cudaFree,
 *     cudaMallocAsync/cudaFreeAsync) until they are done;
 *   - one thread sends the process the snapshot signal (SIGUSR1) every few
 *     milliseconds until they are done.
 * Then the main thread waits until this rank's trace on disk is a snapshot
 * (end.reason "snapshot"), destroys the communicators (while the NaN thread
 * may still be asking NCCL about them) and prints "ok rank R: N snapshot
 * signals". */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include "../../common/trtest.h"

#define THREADS 3
#define ITERS 150
#define ELEMS 1024
#define NAN_ITER 75
#define NAN_AT 123

static int rank, world, device;
static ncclComm_t world_comm, comms[THREADS];
static atomic_int done;

static void *nccl_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    float host[ELEMS], *buf;
    cudaStream_t s;
    CUDACHECK(cudaSetDevice(device));
    CUDACHECK(cudaStreamCreate(&s));
    CUDACHECK(cudaMalloc((void **)&buf, sizeof host));
    for (int i = 0; i < ITERS; i++) {
        for (int k = 0; k < ELEMS; k++) host[k] = (float)(rank + t + k % 7);
        if (rank == 1 && t == 0 && i == NAN_ITER) host[NAN_AT] = NAN;
        CUDACHECK(cudaMemcpyAsync(buf, host, sizeof host, cudaMemcpyHostToDevice, s));
        NCCLCHECK(ncclAllReduce(buf, buf, ELEMS, ncclFloat32, ncclSum, comms[t], s));
        CUDACHECK(cudaStreamSynchronize(s));
    }
    CUDACHECK(cudaFree(buf));
    CUDACHECK(cudaStreamDestroy(s));
    return NULL;
}

static void *alloc_thread(void *arg)
{
    (void)arg;
    cudaStream_t s;
    CUDACHECK(cudaSetDevice(device));
    CUDACHECK(cudaStreamCreate(&s));
    for (int i = 0; !atomic_load(&done); i++) {
        void *a, *b;
        CUDACHECK(cudaMalloc(&a, (size_t)(1 + i % 13) << 12));
        CUDACHECK(cudaMallocAsync(&b, (size_t)(1 + i % 5) << 16, s));
        CUDACHECK(cudaFreeAsync(b, s));
        CUDACHECK(cudaFree(a));
        if (i % 8 == 0) CUDACHECK(cudaStreamSynchronize(s));
        trtest_sleep_ms(1);
    }
    CUDACHECK(cudaStreamSynchronize(s));
    CUDACHECK(cudaStreamDestroy(s));
    return NULL;
}

static atomic_int signals;

static void *snapshot_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&done)) {
        kill(getpid(), SIGUSR1);
        atomic_fetch_add(&signals, 1);
        trtest_sleep_ms(2);
    }
    return NULL;
}

/* 1 when this process's trace in TRSHIM_DIR was last written as a snapshot */
static int trace_is_snapshot(void)
{
    const char *dir = getenv("TRSHIM_DIR");
    char suffix[32], path[4096];
    snprintf(suffix, sizeof suffix, ".%d.json", (int)getpid());
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) {
        size_t n = strlen(e->d_name), k = strlen(suffix);
        if (strncmp(e->d_name, "trshim.", 7) != 0 || n <= k || strcmp(e->d_name + n - k, suffix) != 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        char *text = malloc(8 << 20);
        size_t got = text ? fread(text, 1, (8 << 20) - 1, f) : 0;
        fclose(f);
        if (!text) continue;
        text[got] = 0;
        found = strstr(text, "\"end\":{\"reason\":\"snapshot\"") != NULL;
        free(text);
    }
    closedir(d);
    return found;
}

int main(void)
{
    trtest_init(&rank, &world);
    CUDACHECK(cudaGetDevice(&device));
    ncclUniqueId id;
    trtest_exchange_id(&id, rank == 0, "world");
    NCCLCHECK(ncclCommInitRank(&world_comm, world, id, rank));
    for (int t = 0; t < THREADS; t++) NCCLCHECK(ncclCommSplit(world_comm, 0, rank, &comms[t], NULL));

    pthread_t th[THREADS], alloc, snap;
    if (pthread_create(&alloc, NULL, alloc_thread, NULL) != 0 ||
        pthread_create(&snap, NULL, snapshot_thread, NULL) != 0)
        FAIL("pthread_create");
    for (int t = 0; t < THREADS; t++)
        if (pthread_create(&th[t], NULL, nccl_thread, (void *)(intptr_t)t) != 0) FAIL("pthread_create");
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    atomic_store(&done, 1);
    pthread_join(alloc, NULL);
    pthread_join(snap, NULL);
    EXPECT(atomic_load(&signals) > 0, "no snapshot signal sent");

    /* the last signal's snapshot is written by the shim's writer thread */
    int waited = 0;
    kill(getpid(), SIGUSR1);
    while (!trace_is_snapshot()) {
        EXPECT(waited < 20000, "no snapshot trace of pid %d in %s after 20 s", (int)getpid(), getenv("TRSHIM_DIR"));
        trtest_sleep_ms(10);
        waited += 10;
    }

    for (int t = 0; t < THREADS; t++) NCCLCHECK(ncclCommDestroy(comms[t]));
    NCCLCHECK(ncclCommDestroy(world_comm));
    printf("ok rank %d: %d snapshot signals\n", rank, atomic_load(&signals));
    return 0;
}
