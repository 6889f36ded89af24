/* Every collective x every datatype x every reduction, out-of-place and in
 * place, checked element by element against values computed here on the
 * host. Inputs are small integers so that every partial result is exactly
 * representable in every type (fp8 included): any difference is a bug, not
 * rounding. Run with TRSIM_CHUNK_BYTES small to exercise multi-step
 * transfers. */
#include "../common/trtest.h"
#include "refdtype.h"

static int rank, world;
static cudaStream_t stream;
static ncclComm_t comm;

/* Input of rank r at element i for a reduction op on type t. */
static double input_value(int r, size_t i, int t, int op)
{
    size_t k = (size_t)r + 2 * i;
    if (op == ncclProd) {
        if (ref_is_unsigned(t)) return (double)(1 + k % 3);
        static const double v[] = {1, 2, -1};
        return v[k % 3];
    }
    if (ref_is_unsigned(t)) return (double)(k % 3);
    return (double)(k % 3) - 1;
}

static double expected_reduce(size_t i, int t, int op)
{
    double acc = input_value(0, i, t, op);
    for (int r = 1; r < world; r++) {
        double v = input_value(r, i, t, op);
        switch (op) {
        case ncclSum: case ncclAvg: acc += v; break;
        case ncclProd: acc *= v; break;
        case ncclMax: acc = v > acc ? v : acc; break;
        case ncclMin: acc = v < acc ? v : acc; break;
        }
    }
    if (op == ncclAvg) acc = ref_is_float(t) ? acc / world : trunc(acc / world);
    return ref_wrap(acc, t);
}

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    CUDACHECK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

static void fill(void *dev, size_t n, int t, double (*value)(size_t i, int t, int arg), int arg)
{
    size_t es = ref_size(t);
    unsigned char *host = malloc(n * es + 1);
    for (size_t i = 0; i < n; i++)
        if (!ref_set(host, i, t, value(i, t, arg))) FAIL("cannot encode %g as %s", value(i, t, arg), ref_type_name(t));
    CUDACHECK(cudaMemcpy(dev, host, n * es, cudaMemcpyHostToDevice));
    free(host);
}

static void check(const void *dev, size_t n, int t, double (*want)(size_t i, int t, int arg), int arg,
                  const char *what)
{
    size_t es = ref_size(t);
    unsigned char *host = malloc(n * es + 1);
    CUDACHECK(cudaMemcpy(host, dev, n * es, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) {
        double got = ref_get(host, i, t), w = want(i, t, arg);
        if (!(got == w))
            FAIL("%s %s: element %zu is %g, expected %g", what, ref_type_name(t), i, got, w);
    }
    free(host);
}

/* Value helpers: arg packs (rank or op). */
static double in_rank_op(size_t i, int t, int arg) { return input_value(arg & 0xff, i, t, arg >> 8); }
static double want_reduce(size_t i, int t, int op) { return expected_reduce(i, t, op); }
static double block_value(size_t i, int t, int src) { (void)t; return (double)((src * 3 + (int)i) % 7); }
static double sentinel(size_t i, int t, int arg) { (void)i; (void)t; (void)arg; return 5; }

/* Whole buffer of n*world elements where block b was produced by src(b). */
static int gather_count;
static double want_gathered(size_t i, int t, int arg)
{
    (void)arg;
    int src = (int)(i / (size_t)gather_count);
    return block_value(i % (size_t)gather_count, t, src);
}

static void sync_stream(void) { CUDACHECK(cudaStreamSynchronize(stream)); }

static void test_reductions(int t, size_t count)
{
    static const int ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
    size_t es = ref_size(t);
    for (int oi = 0; oi < 5; oi++) {
        int op = ops[oi];
        char what[64];
        void *send = dev_alloc(count * world * es), *recv = dev_alloc(count * world * es);

        snprintf(what, sizeof what, "AllReduce op %d", op);
        fill(send, count, t, in_rank_op, rank | op << 8);
        NCCLCHECK(ncclAllReduce(send, recv, count, t, op, comm, stream));
        sync_stream();
        check(recv, count, t, want_reduce, op, what);
        check(send, count, t, in_rank_op, rank | op << 8, "AllReduce left its input alone");

        snprintf(what, sizeof what, "in-place AllReduce op %d", op);
        NCCLCHECK(ncclAllReduce(send, send, count, t, op, comm, stream));
        sync_stream();
        check(send, count, t, want_reduce, op, what);

        int root = world - 1;
        snprintf(what, sizeof what, "Reduce op %d root %d", op, root);
        fill(send, count, t, in_rank_op, rank | op << 8);
        fill(recv, count, t, sentinel, 0);
        NCCLCHECK(ncclReduce(send, recv, count, t, op, root, comm, stream));
        sync_stream();
        if (rank == root) check(recv, count, t, want_reduce, op, what);
        else check(recv, count, t, sentinel, 0, "Reduce leaves non-root output untouched");

        /* ReduceScatter: rank r gets block r of the reduction of all inputs.
         * Input block b of rank q holds input_value(q, b*count + i). */
        snprintf(what, sizeof what, "ReduceScatter op %d", op);
        fill(send, count * world, t, in_rank_op, rank | op << 8);
        NCCLCHECK(ncclReduceScatter(send, recv, count, t, op, comm, stream));
        sync_stream();
        {
            unsigned char *host = malloc(count * es + 1);
            CUDACHECK(cudaMemcpy(host, recv, count * es, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < count; i++) {
                double w = expected_reduce((size_t)rank * count + i, t, op);
                if (ref_get(host, i, t) != w)
                    FAIL("%s %s: element %zu is %g, expected %g", what, ref_type_name(t), i, ref_get(host, i, t), w);
            }
            free(host);
        }
        snprintf(what, sizeof what, "in-place ReduceScatter op %d", op);
        fill(send, count * world, t, in_rank_op, rank | op << 8);
        NCCLCHECK(ncclReduceScatter(send, (char *)send + (size_t)rank * count * es, count, t, op, comm, stream));
        sync_stream();
        {
            unsigned char *host = malloc(count * es + 1);
            CUDACHECK(cudaMemcpy(host, (char *)send + (size_t)rank * count * es, count * es, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < count; i++) {
                double w = expected_reduce((size_t)rank * count + i, t, op);
                if (ref_get(host, i, t) != w)
                    FAIL("%s %s: element %zu is %g, expected %g", what, ref_type_name(t), i, ref_get(host, i, t), w);
            }
            free(host);
        }
        CUDACHECK(cudaFree(send));
        CUDACHECK(cudaFree(recv));
    }
}

static void test_movement(int t, size_t count)
{
    size_t es = ref_size(t), total = count * world;
    void *send = dev_alloc(total * es), *recv = dev_alloc(total * es);
    gather_count = (int)count;

    /* Broadcast from rank 1 (out of place), Bcast from rank 0 (in place). */
    int root = 1 % world;
    fill(send, count, t, block_value, rank == root ? 100 : rank);
    NCCLCHECK(ncclBroadcast(send, recv, count, t, root, comm, stream));
    sync_stream();
    check(recv, count, t, block_value, 100, "Broadcast");
    fill(send, count, t, block_value, rank == 0 ? 50 : rank);
    NCCLCHECK(ncclBcast(send, count, t, 0, comm, stream));
    sync_stream();
    check(send, count, t, block_value, 50, "Bcast");

    /* AllGather: block q of the output is rank q's input. */
    fill(send, count, t, block_value, rank);
    NCCLCHECK(ncclAllGather(send, recv, count, t, comm, stream));
    sync_stream();
    check(recv, total, t, want_gathered, 0, "AllGather");
    /* in place: rank's input already sits at its block of the output */
    fill(recv, total, t, sentinel, 0);
    fill((char *)recv + (size_t)rank * count * es, count, t, block_value, rank);
    NCCLCHECK(ncclAllGather((char *)recv + (size_t)rank * count * es, recv, count, t, comm, stream));
    sync_stream();
    check(recv, total, t, want_gathered, 0, "in-place AllGather");

    /* Gather to the last rank. */
    int groot = world - 1;
    fill(send, count, t, block_value, rank);
    fill(recv, total, t, sentinel, 0);
    NCCLCHECK(ncclGather(send, recv, count, t, groot, comm, stream));
    sync_stream();
    if (rank == groot) check(recv, total, t, want_gathered, 0, "Gather");
    else check(recv, total, t, sentinel, 0, "Gather leaves non-root output untouched");

    /* Scatter from rank 0: rank r receives block r of root's buffer. */
    if (rank == 0) fill(send, total, t, want_gathered, 0);
    NCCLCHECK(ncclScatter(send, recv, count, t, 0, comm, stream));
    sync_stream();
    check(recv, count, t, block_value, rank, "Scatter");

    /* AlltoAll: block q of rank r's output is block r of rank q's input.
     * Rank q's input block b holds block_value(q * world + b). */
    {
        unsigned char *host = malloc(total * es + 1);
        for (int b = 0; b < world; b++)
            for (size_t i = 0; i < count; i++)
                ref_set(host, (size_t)b * count + i, t, block_value(i, t, rank * world + b));
        CUDACHECK(cudaMemcpy(send, host, total * es, cudaMemcpyHostToDevice));
        NCCLCHECK(ncclAlltoAll(send, recv, count, t, comm, stream));
        sync_stream();
        CUDACHECK(cudaMemcpy(host, recv, total * es, cudaMemcpyDeviceToHost));
        for (int q = 0; q < world; q++)
            for (size_t i = 0; i < count; i++) {
                double w = block_value(i, t, q * world + rank);
                if (ref_get(host, (size_t)q * count + i, t) != w)
                    FAIL("AlltoAll %s: block %d element %zu is %g, expected %g", ref_type_name(t), q, i,
                         ref_get(host, (size_t)q * count + i, t), w);
            }
        free(host);
    }
    CUDACHECK(cudaFree(send));
    CUDACHECK(cudaFree(recv));
}

int main(int argc, char **argv)
{
    size_t count = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
    comm = trtest_world_comm(&rank, &world, "world");
    CUDACHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int ti = 0; ti < REF_NTYPES; ti++) {
        test_reductions(ref_types[ti], count);
        test_movement(ref_types[ti], count);
    }
    /* count 0 is legal and moves nothing */
    NCCLCHECK(ncclAllReduce(NULL, NULL, 0, ncclFloat32, ncclSum, comm, stream));
    sync_stream();
    NCCLCHECK(ncclCommDestroy(comm));
    CUDACHECK(cudaStreamDestroy(stream));
    if (rank == 0) printf("collectives: %d types x all ops on %d ranks, count %zu: ok\n", REF_NTYPES, world, count);
    return 0;
}
