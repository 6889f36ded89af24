/* Communicator lifecycle: split (with keys that reorder ranks, NOCOLOR,
 * nested), shrink, non-blocking init and split, finalize/destroy, queries,
 * PreMulSum reduction ops, ncclMemAlloc, argument errors. */
#include "../common/trtest.h"

static int rank, world;
static cudaStream_t stream;

static int allreduce_int(ncclComm_t comm, int v, ncclRedOp_t op)
{
    int *d;
    CUDACHECK(cudaMalloc((void **)&d, sizeof(int)));
    CUDACHECK(cudaMemcpy(d, &v, sizeof v, cudaMemcpyHostToDevice));
    NCCLCHECK(ncclAllReduce(d, d, 1, ncclInt32, op, comm, stream));
    /* no explicit sync: cudaMemcpy on the legacy stream waits for the
     * blocking stream the collective runs on */
    CUDACHECK(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost));
    CUDACHECK(cudaFree(d));
    return v;
}

static void wait_ready(ncclComm_t comm, const char *what)
{
    ncclResult_t state;
    do {
        NCCLCHECK(ncclCommGetAsyncError(comm, &state));
    } while (state == ncclInProgress);
    if (state != ncclSuccess) FAIL("%s: %s", what, ncclGetErrorString(state));
}

int main(void)
{
    trtest_init(&rank, &world);
    CUDACHECK(cudaStreamCreate(&stream));
    ncclUniqueId id;
    trtest_exchange_id(&id, rank == 0, "comm");

    /* non-blocking init: returns ncclInProgress, then becomes ready */
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t world_comm;
    ncclResult_t r = ncclCommInitRankConfig(&world_comm, world, id, rank, &config);
    EXPECT(r == ncclInProgress || r == ncclSuccess, "non-blocking init returned %d", r);
    wait_ready(world_comm, "non-blocking init");
    int n, me, dev, cur;
    NCCLCHECK(ncclCommCount(world_comm, &n));
    NCCLCHECK(ncclCommUserRank(world_comm, &me));
    NCCLCHECK(ncclCommCuDevice(world_comm, &dev));
    CUDACHECK(cudaGetDevice(&cur));
    EXPECT(n == world && me == rank && dev == cur, "count %d rank %d device %d", n, me, dev);
    /* collectives on a non-blocking communicator may say ncclInProgress */
    {
        int *d;
        CUDACHECK(cudaMalloc((void **)&d, sizeof(int)));
        int v = rank + 1;
        CUDACHECK(cudaMemcpy(d, &v, sizeof v, cudaMemcpyHostToDevice));
        r = ncclAllReduce(d, d, 1, ncclInt32, ncclSum, world_comm, stream);
        EXPECT(r == ncclSuccess || r == ncclInProgress, "AllReduce returned %d", r);
        wait_ready(world_comm, "non-blocking AllReduce");
        CUDACHECK(cudaStreamSynchronize(stream));
        CUDACHECK(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost));
        EXPECT(v == world * (world + 1) / 2, "sum %d", v);
        CUDACHECK(cudaFree(d));
    }
    NCCLCHECK(ncclCommDestroy(world_comm));

    /* blocking world communicator for the rest */
    ncclComm_t comm;
    trtest_exchange_id(&id, rank == 0, "comm2");
    NCCLCHECK(ncclCommInitRank(&comm, world, id, rank));

    /* split by parity, key reverses the order inside each half */
    ncclComm_t half;
    NCCLCHECK(ncclCommSplit(comm, rank % 2, -rank, &half, NULL));
    int hn, hr;
    NCCLCHECK(ncclCommCount(half, &hn));
    NCCLCHECK(ncclCommUserRank(half, &hr));
    int members = (world - rank % 2 + 1) / 2;
    EXPECT(hn == members, "half has %d ranks, expected %d", hn, members);
    EXPECT(hr == members - 1 - rank / 2, "rank %d got split rank %d", rank, hr);
    /* the sum of global ranks of my half */
    int want = 0;
    for (int q = rank % 2; q < world; q += 2) want += q;
    EXPECT(allreduce_int(half, rank, ncclSum) == want, "sum over the half");
    int want_max = 0;
    for (int q = rank % 2; q < world; q += 2) want_max = q;
    EXPECT(allreduce_int(half, rank, ncclMax) == want_max, "max over the half");

    /* NOCOLOR: rank 0 stays out */
    ncclComm_t rest;
    NCCLCHECK(ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 7, 0, &rest, NULL));
    if (rank == 0) EXPECT(rest == NULL, "NOCOLOR must give NULL");
    else EXPECT(allreduce_int(rest, 1, ncclSum) == world - 1, "rest sum");

    /* nested split of the half, then traffic on all levels interleaved */
    ncclComm_t quarter;
    NCCLCHECK(ncclCommSplit(half, hr / 2, 0, &quarter, NULL));
    int qn;
    NCCLCHECK(ncclCommCount(quarter, &qn));
    EXPECT(qn >= 1 && qn <= 2, "quarter of %d", qn);
    EXPECT(allreduce_int(comm, 1, ncclSum) == world, "world after splits");
    EXPECT(allreduce_int(quarter, 1, ncclSum) == qn, "quarter");

    /* non-blocking split: handle valid at once, ready later */
    ncclComm_t nb;
    r = ncclCommSplit(comm, 0, rank, &nb, &config);
    EXPECT(r == ncclInProgress || r == ncclSuccess, "non-blocking split returned %d", r);
    EXPECT(nb != NULL, "non-blocking split gave no handle");
    wait_ready(nb, "non-blocking split");
    NCCLCHECK(ncclCommCount(nb, &n));
    EXPECT(n == world, "non-blocking split size %d", n);
    {
        int *d;
        CUDACHECK(cudaMalloc((void **)&d, sizeof(int)));
        CUDACHECK(cudaMemcpy(d, &rank, sizeof rank, cudaMemcpyHostToDevice));
        r = ncclAllReduce(d, d, 1, ncclInt32, ncclMax, nb, stream);
        EXPECT(r == ncclSuccess || r == ncclInProgress, "AllReduce on nb returned %d", r);
        CUDACHECK(cudaStreamSynchronize(stream));
        int v;
        CUDACHECK(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost));
        EXPECT(v == world - 1, "max %d", v);
        CUDACHECK(cudaFree(d));
    }

    /* shrink: drop the last rank; it does not take part */
    if (rank != world - 1) {
        ncclComm_t shrunk;
        int excl = world - 1;
        NCCLCHECK(ncclCommShrink(comm, &excl, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT));
        NCCLCHECK(ncclCommCount(shrunk, &n));
        NCCLCHECK(ncclCommUserRank(shrunk, &me));
        EXPECT(n == world - 1 && me == rank, "shrunk %d/%d", me, n);
        EXPECT(allreduce_int(shrunk, 1, ncclSum) == world - 1, "shrunk sum");
        NCCLCHECK(ncclCommDestroy(shrunk));
    }

    /* PreMulSum with a host scalar and with a device scalar */
    {
        float scale = 0.5f, *dscale, *d, v = (float)(rank + 1);
        ncclRedOp_t hop, dop;
        NCCLCHECK(ncclRedOpCreatePreMulSum(&hop, &scale, ncclFloat32, ncclScalarHostImmediate, comm));
        scale = 100;   /* host-immediate: the value at creation counts */
        CUDACHECK(cudaMalloc((void **)&d, sizeof(float)));
        CUDACHECK(cudaMalloc((void **)&dscale, sizeof(float)));
        CUDACHECK(cudaMemcpy(d, &v, sizeof v, cudaMemcpyHostToDevice));
        NCCLCHECK(ncclAllReduce(d, d, 1, ncclFloat32, hop, comm, stream));
        CUDACHECK(cudaStreamSynchronize(stream));
        CUDACHECK(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost));
        EXPECT(v == 0.5f * world * (world + 1) / 2, "host PreMulSum gave %g", v);
        float two = 2;
        CUDACHECK(cudaMemcpy(dscale, &two, sizeof two, cudaMemcpyHostToDevice));
        NCCLCHECK(ncclRedOpCreatePreMulSum(&dop, dscale, ncclFloat32, ncclScalarDevice, comm));
        v = 1;
        CUDACHECK(cudaMemcpy(d, &v, sizeof v, cudaMemcpyHostToDevice));
        NCCLCHECK(ncclAllReduce(d, d, 1, ncclFloat32, dop, comm, stream));
        CUDACHECK(cudaStreamSynchronize(stream));
        CUDACHECK(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost));
        EXPECT(v == 2.0f * world, "device PreMulSum gave %g", v);
        EXPECT(ncclAllReduce(d, d, 1, ncclFloat64, dop, comm, stream) == ncclInvalidArgument,
               "op created for float32 used with float64");
        NCCLCHECK(ncclRedOpDestroy(hop, comm));
        NCCLCHECK(ncclRedOpDestroy(dop, comm));
        EXPECT(ncclRedOpDestroy(hop, comm) == ncclInvalidArgument, "double destroy");
        CUDACHECK(cudaFree(d));
        CUDACHECK(cudaFree(dscale));
    }

    /* argument errors, as NCCL reports them */
    {
        void *buf;
        NCCLCHECK(ncclMemAlloc(&buf, 4096));
        EXPECT(ncclBroadcast(buf, buf, 1, ncclInt32, world, comm, stream) == ncclInvalidArgument, "bad root");
        EXPECT(ncclAllReduce(buf, buf, 1, (ncclDataType_t)ncclNumTypes, ncclSum, comm, stream) == ncclInvalidArgument,
               "bad datatype");
        EXPECT(ncclAllReduce(buf, buf, 1, ncclInt32, (ncclRedOp_t)ncclNumOps, comm, stream) == ncclInvalidArgument,
               "bad op");
        EXPECT(ncclSend(buf, 1, ncclInt32, -1, comm, stream) == ncclInvalidArgument, "bad peer");
        EXPECT(ncclAllReduce(NULL, buf, 4, ncclInt32, ncclSum, comm, stream) == ncclInvalidArgument, "NULL buffer");
        EXPECT(ncclAllReduce(buf, buf, 1, ncclInt32, ncclSum, NULL, stream) == ncclInvalidArgument, "NULL comm");
        NCCLCHECK(ncclGroupStart());
        EXPECT(ncclBroadcast(buf, buf, 1, ncclInt32, -5, comm, stream) == ncclInvalidArgument, "bad root in group");
        EXPECT(ncclGroupEnd() == ncclInvalidArgument, "group with an invalid call must fail");
        EXPECT(ncclGroupEnd() == ncclInvalidUsage, "unbalanced GroupEnd");
        NCCLCHECK(ncclMemFree(buf));
        int version;
        NCCLCHECK(ncclGetVersion(&version));
        /* the simulator is NCCL 2.32.3, newer than the header this is built with */
        EXPECT(version == NCCL_VERSION(2, 32, 3) && version >= NCCL_VERSION_CODE, "version %d", version);
        EXPECT(strcmp(ncclGetErrorString(ncclInvalidArgument), ncclGetErrorString(ncclSuccess)) != 0, "error strings");
    }

    /* still in step after all of the above */
    EXPECT(allreduce_int(comm, 1, ncclSum) == world, "world at the end");
    NCCLCHECK(ncclCommFinalize(comm));
    NCCLCHECK(ncclCommDestroy(quarter));
    NCCLCHECK(ncclCommDestroy(half));
    if (rest) NCCLCHECK(ncclCommDestroy(rest));
    NCCLCHECK(ncclCommDestroy(nb));
    NCCLCHECK(ncclCommDestroy(comm));
    if (rank == 0) printf("communicators on %d ranks: ok\n", world);
    return 0;
}
