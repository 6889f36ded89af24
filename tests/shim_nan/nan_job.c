/* A 4-rank job under the shim whose every NaN and infinity is planted on a
 * known rank at a known element (tests/shim_nan/check_nan.py knows them):
 *   nan_job main   NaN born on one rank (float32 out of place, bfloat16 in
 *                  place), an fp16 overflow from finite inputs, float8
 *                  e4m3/e5m2, float64 NaN + Inf, groups (a NaN written into
 *                  the send buffer inside the group, after the call: only a
 *                  check ordered at ncclGroupEnd sees it), nested groups, two
 *                  communicators, ReduceScatter, Reduce (output on the root
 *                  only), an integer type (no checks), a CUDA error pending
 *                  in the application (no checks, error left as it was), a
 *                  non-blocking communicator, then a clean collective
 *   nan_job clean  every checked datatype, op and kind of call, all finite
 *                  (largest finite values, e4m3 448, subnormals, -0)
 *   nan_job big    one 4 MiB float32 AllReduce with NaNs at 100 and 900000,
 *                  then a small one (for TRSHIM_NANCHECK_MAX_MB and _POOL_MB)
 * Every rank prints its threads' names last ("threads: ...").
 * Stream-ordered everything: device buffers are written with cudaMemcpyAsync
 * on the collectives' stream. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include "../common/trtest.h"

static int rank, world;
static cudaStream_t stream;
static ncclComm_t comm, half;

/* ---- element values (bits) ---- */
#define H_ONE 0x3c00u
#define H_60000 0x7b53u
#define H_MAX 0x7bffu      /* 65504 */
#define H_SUBN 0x0001u
#define BF_ONE 0x3f80u
#define BF_NAN 0x7fc0u
#define BF_MAX 0x7f7fu
#define E4_ONE 0x38u
#define E4_NAN 0x7fu
#define E4_MAX 0x7eu       /* 448: not a NaN */
#define E5_ONE 0x3cu
#define E5_NAN 0x7eu
#define E5_MAX 0x7bu       /* 57344 */

static void *dev_alloc(size_t bytes)
{
    void *p;
    CUDACHECK(cudaMalloc(&p, bytes));
    return p;
}

/* n elements of esize bytes, all = fill (bits), uploaded in stream order */
static void *make(size_t n, size_t esize, uint64_t fill)
{
    unsigned char *h = malloc(n * esize);
    if (!h) FAIL("malloc");
    for (size_t i = 0; i < n; i++) memcpy(h + i * esize, &fill, esize);   /* little endian */
    void *d = dev_alloc(n * esize);
    CUDACHECK(cudaMemcpyAsync(d, h, n * esize, cudaMemcpyHostToDevice, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    free(h);
    return d;
}

/* element i of a device buffer := bits, in stream order */
static void poke(void *d, size_t i, size_t esize, uint64_t bits)
{
    static uint64_t staged[64];
    static int next;
    uint64_t *h = &staged[next++ % 64];   /* pageable: staged by the copy itself */
    *h = bits;
    CUDACHECK(cudaMemcpyAsync((char *)d + i * esize, h, esize, cudaMemcpyHostToDevice, stream));
}

static uint64_t f32bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t f64bits(double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    return u;
}

static void sync_all(void) { CUDACHECK(cudaStreamSynchronize(stream)); }

static void init_world(void)
{
    ncclUniqueId id;
    trtest_exchange_id(&id, rank == 0, "world");
    NCCLCHECK(ncclCommInitRank(&comm, world, id, rank));
}

static void wait_ready(ncclComm_t c)
{
    ncclResult_t st;
    do NCCLCHECK(ncclCommGetAsyncError(c, &st)); while (st == ncclInProgress);
    if (st != ncclSuccess) FAIL("non-blocking communicator: %s", ncclGetErrorString(st));
}

/* ---- main ---- */

static void run_main(void)
{
    /* 1: float32, out of place, a NaN born on rank 2 at 123 */
    float *s1 = make(1000, 4, f32bits(1.0f)), *r1 = make(1000, 4, 0);
    if (rank == 2) poke(s1, 123, 4, f32bits(NAN));
    NCCLCHECK(ncclAllReduce(s1, r1, 1000, ncclFloat32, ncclSum, comm, stream));

    /* 2: bfloat16, in place, a NaN born on rank 2 at 123 */
    void *b2 = make(1000, 2, BF_ONE);
    if (rank == 2) poke(b2, 123, 2, BF_NAN);
    NCCLCHECK(ncclAllReduce(b2, b2, 1000, ncclBfloat16, ncclSum, comm, stream));

    /* 3: float16 overflow: 60000 on ranks 0 and 1 at 500..509, all finite */
    void *s3 = make(1000, 2, H_ONE), *r3 = make(1000, 2, 0);
    if (rank <= 1)
        for (int i = 500; i < 510; i++) poke(s3, (size_t)i, 2, H_60000);
    NCCLCHECK(ncclAllReduce(s3, r3, 1000, ncclFloat16, ncclSum, comm, stream));

    /* 4: float8 e4m3, a NaN on rank 1 at 5 */
    void *s4 = make(64, 1, E4_ONE), *r4 = make(64, 1, 0);
    if (rank == 1) poke(s4, 5, 1, E4_NAN);
    NCCLCHECK(ncclAllReduce(s4, r4, 64, ncclFloat8e4m3, ncclSum, comm, stream));

    /* 5: float8 e5m2, a NaN on rank 3 at 20 */
    void *s5 = make(64, 1, E5_ONE), *r5 = make(64, 1, 0);
    if (rank == 3) poke(s5, 20, 1, E5_NAN);
    NCCLCHECK(ncclAllReduce(s5, r5, 64, ncclFloat8e5m2, ncclSum, comm, stream));

    /* 6: float64: rank 0 +Inf at 3 and -Inf at 7, rank 1 NaN at 3 */
    double *s6 = make(10, 8, f64bits(1.0)), *r6 = make(10, 8, 0);
    if (rank == 0) {
        poke(s6, 3, 8, f64bits(INFINITY));
        poke(s6, 7, 8, f64bits(-INFINITY));
    }
    if (rank == 1) poke(s6, 3, 8, f64bits(NAN));
    NCCLCHECK(ncclAllReduce(s6, r6, 10, ncclFloat64, ncclSum, comm, stream));

    /* 7: a group: the NaN enters rank 0's send buffer after the call, before
     * ncclGroupEnd (the collective runs at GroupEnd, so it sums it) */
    float *s7 = make(256, 4, f32bits(1.0f)), *r7 = make(256, 4, 0);
    float *rs_in = make(256, 4, f32bits(2.0f)), *rs_out = make(64, 4, 0);
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(s7, r7, 256, ncclFloat32, ncclSum, comm, stream));
    if (rank == 0) poke(s7, 42, 4, f32bits(NAN));
    NCCLCHECK(ncclReduceScatter(rs_in, rs_out, 64, ncclFloat32, ncclSum, comm, stream));
    NCCLCHECK(ncclGroupEnd());

    /* 8: nested groups, in place, a NaN on rank 3 at 0 */
    float *b8 = make(32, 4, f32bits(0.5f));
    if (rank == 3) poke(b8, 0, 4, f32bits(NAN));
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(b8, b8, 32, ncclFloat32, ncclMax, comm, stream));
    NCCLCHECK(ncclGroupEnd());
    NCCLCHECK(ncclGroupEnd());

    /* 9: two communicators: halves by parity; a NaN on rank 2 at 99 reaches
     * ranks 0 and 2 only; then a clean world collective */
    NCCLCHECK(ncclCommSplit(comm, rank % 2, rank, &half, NULL));
    float *s9 = make(100, 4, f32bits(1.0f)), *r9 = make(100, 4, 0), *w9 = make(100, 4, f32bits(3.0f));
    if (rank == 2) poke(s9, 99, 4, f32bits(NAN));
    NCCLCHECK(ncclAllReduce(s9, r9, 100, ncclFloat32, ncclSum, half, stream));
    NCCLCHECK(ncclAllReduce(w9, w9, 100, ncclFloat32, ncclSum, comm, stream));

    /* 10: ReduceScatter: rank 3's send element 250 is rank 2's output 50 */
    float *s10 = make(400, 4, f32bits(1.0f)), *r10 = make(100, 4, 0);
    if (rank == 3) poke(s10, 250, 4, f32bits(NAN));
    NCCLCHECK(ncclReduceScatter(s10, r10, 100, ncclFloat32, ncclSum, comm, stream));

    /* 11: Reduce to root 1: +Inf on rank 0 at 77 */
    float *s11 = make(100, 4, f32bits(1.0f)), *r11 = make(100, 4, 0);
    if (rank == 0) poke(s11, 77, 4, f32bits(INFINITY));
    NCCLCHECK(ncclReduce(s11, r11, 100, ncclFloat32, ncclSum, 1, comm, stream));

    /* 12: an integer type: no checks */
    void *i12 = make(10, 4, 7);
    NCCLCHECK(ncclAllReduce(i12, i12, 10, ncclInt32, ncclSum, comm, stream));

    /* 13: the application has a CUDA error pending: nothing is checked and
     * the error is still there, unchanged, after the call */
    sync_all();
    EXPECT(cudaSetDevice(9999) == cudaErrorInvalidDevice, "cudaSetDevice(9999)");
    float *b13 = make(10, 4, f32bits(1.0f));   /* make() synchronizes: the error stays pending */
    NCCLCHECK(ncclAllReduce(b13, b13, 10, ncclFloat32, ncclSum, comm, stream));
    cudaError_t e = cudaGetLastError();
    EXPECT(e == cudaErrorInvalidDevice, "pending error after the collective: %s", cudaGetErrorName(e));
    e = cudaGetLastError();
    EXPECT(e == cudaSuccess, "error state after clearing: %s", cudaGetErrorName(e));

    /* 14: a non-blocking communicator: a NaN on rank 1 at 11 */
    ncclUniqueId id;
    trtest_exchange_id(&id, rank == 0, "nb");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t nb;
    ncclResult_t r = ncclCommInitRankConfig(&nb, world, id, rank, &config);
    EXPECT(r == ncclSuccess || r == ncclInProgress, "non-blocking init gave %d", r);
    wait_ready(nb);
    float *s14 = make(100, 4, f32bits(1.0f)), *r14 = make(100, 4, 0);
    if (rank == 1) poke(s14, 11, 4, f32bits(NAN));
    r = ncclAllReduce(s14, r14, 100, ncclFloat32, ncclSum, nb, stream);
    EXPECT(r == ncclInProgress || r == ncclSuccess, "collective on a non-blocking communicator gave %d", r);
    wait_ready(nb);

    /* 15: clean, in place, avg */
    float *b15 = make(4096, 4, f32bits(0.25f));
    NCCLCHECK(ncclAllReduce(b15, b15, 4096, ncclFloat32, ncclAvg, comm, stream));

    sync_all();
    /* the output check of 14 is enqueued by the shim's thread: give it the
     * moment it needs before the communicator goes */
    struct timespec ts = {0, 200 * 1000000};
    nanosleep(&ts, NULL);
    sync_all();
    NCCLCHECK(ncclCommDestroy(nb));
    NCCLCHECK(ncclCommDestroy(half));
}

/* ---- clean ---- */

static void run_clean(void)
{
    struct { ncclDataType_t dt; size_t es; uint64_t one, big; } t[] = {
        {ncclFloat32, 4, 0x3f800000u, 0x7f7fffffu}, {ncclFloat16, 2, H_ONE, H_MAX},
        {ncclBfloat16, 2, BF_ONE, BF_MAX},         {ncclFloat64, 8, 0x3ff0000000000000ull, 0x7fefffffffffffffull},
        {ncclFloat8e4m3, 1, E4_ONE, E4_MAX},       {ncclFloat8e5m2, 1, E5_ONE, E5_MAX},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        size_t n = 5000, es = t[k].es;
        /* rank 0 holds the largest finite value, -0, a subnormal; the others zeros and ones */
        void *s = make(n, es, rank == 0 ? t[k].one : 0), *d = make(n, es, 0);
        if (rank == 0) {
            poke(s, 0, es, t[k].big);
            poke(s, 1, es, 1ull << (8 * es - 1));       /* -0 */
            poke(s, 2, es, 1);                          /* smallest subnormal */
            poke(s, n - 1, es, t[k].big | (1ull << (8 * es - 1)));   /* -max */
        }
        NCCLCHECK(ncclAllReduce(s, d, n, t[k].dt, ncclSum, comm, stream));      /* out of place */
        NCCLCHECK(ncclAllReduce(d, d, n, t[k].dt, ncclMax, comm, stream));      /* in place */
        void *rs = make(n * (size_t)world, es, 0);
        NCCLCHECK(ncclReduceScatter(rs, d, n, t[k].dt, ncclSum, comm, stream));
        NCCLCHECK(ncclReduce(s, d, n, t[k].dt, ncclMin, world - 1, comm, stream));
        NCCLCHECK(ncclGroupStart());
        NCCLCHECK(ncclAllReduce(s, d, 17, t[k].dt, ncclSum, comm, stream));
        NCCLCHECK(ncclReduceScatter(rs, d, 3, t[k].dt, ncclSum, comm, stream));
        NCCLCHECK(ncclGroupEnd());
    }
}

/* ---- big ---- */

static void run_big(void)
{
    size_t n = 1u << 20;
    float *b = make(n, 4, f32bits(1.0f));
    if (rank == 0) {
        poke(b, 100, 4, f32bits(NAN));
        poke(b, 900000, 4, f32bits(NAN));
    }
    NCCLCHECK(ncclAllReduce(b, b, n, ncclFloat32, ncclSum, comm, stream));
    float *c = make(1000, 4, f32bits(1.0f));
    NCCLCHECK(ncclAllReduce(c, c, 1000, ncclFloat32, ncclSum, comm, stream));
}

static void print_threads(void)
{
    char line[4096] = "threads:";
    DIR *d = opendir("/proc/self/task");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[300], name[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(name, sizeof name, f)) name[strcspn(name, "\n")] = 0;
            fclose(f);
        }
        strncat(line, " ", sizeof line - strlen(line) - 1);
        strncat(line, name, sizeof line - strlen(line) - 1);
    }
    if (d) closedir(d);
    printf("rank %d %s\n", rank, line);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "main";
    trtest_init(&rank, &world);
    CUDACHECK(cudaStreamCreate(&stream));
    init_world();
    if (!strcmp(what, "main")) run_main();
    else if (!strcmp(what, "clean")) run_clean();
    else if (!strcmp(what, "big")) run_big();
    else FAIL("unknown scenario %s", what);
    sync_all();
    print_threads();
    fflush(stdout);
    NCCLCHECK(ncclCommDestroy(comm));
    return 0;
}
