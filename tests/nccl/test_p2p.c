/* Send/recv: a ring inside a group (would deadlock outside one), a pipeline
 * of blocking sends, messages far larger than a channel's slot, several
 * messages on one pair kept in order, send-to-self, zero-count, and an
 * all-to-all built from grouped sends and receives. */
#include "../common/trtest.h"

static int rank, world;
static ncclComm_t comm;
static cudaStream_t stream;

static int32_t *dev_ints(size_t n)
{
    int32_t *p;
    CUDACHECK(cudaMalloc((void **)&p, n * sizeof *p + 4));
    return p;
}

static void put(int32_t *dev, size_t n, int32_t base)
{
    int32_t *h = malloc(n * sizeof *h + 4);
    for (size_t i = 0; i < n; i++) h[i] = base + (int32_t)i;
    CUDACHECK(cudaMemcpy(dev, h, n * sizeof *h, cudaMemcpyHostToDevice));
    free(h);
}

static void expect_ints(const int32_t *dev, size_t n, int32_t base, const char *what)
{
    int32_t *h = malloc(n * sizeof *h + 4);
    CUDACHECK(cudaMemcpy(h, dev, n * sizeof *h, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (h[i] != base + (int32_t)i) FAIL("%s: element %zu is %d, expected %d", what, i, h[i], base + (int32_t)i);
    free(h);
}

int main(void)
{
    comm = trtest_world_comm(&rank, &world, "p2p");
    CUDACHECK(cudaStreamCreate(&stream));
    int right = (rank + 1) % world, left = (rank + world - 1) % world;
    /* 3 MiB: many times the channel slot (TRSIM_P2P_CHUNK_BYTES) */
    size_t big = 3 * 1024 * 1024 / 4 + 17;
    int32_t *a = dev_ints(big), *b = dev_ints(big);

    /* ring: everyone sends right and receives from the left at once */
    put(a, big, rank * 1000);
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(a, big, ncclInt32, right, comm, stream));
    NCCLCHECK(ncclRecv(b, big, ncclInt32, left, comm, stream));
    NCCLCHECK(ncclGroupEnd());
    CUDACHECK(cudaStreamSynchronize(stream));
    expect_ints(b, big, left * 1000, "ring");

    /* pipeline: rank 0 -> 1 -> 2 ... each stage adds nothing but forwards */
    if (rank == 0) put(a, 1000, 777);
    if (rank > 0) NCCLCHECK(ncclRecv(a, 1000, ncclInt32, rank - 1, comm, stream));
    if (rank < world - 1) NCCLCHECK(ncclSend(a, 1000, ncclInt32, rank + 1, comm, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    expect_ints(a, 1000, 777, "pipeline");

    /* three messages on one pair, different sizes, kept in order */
    if (rank == 0) {
        for (int m = 0; m < 3; m++) {
            put(a + m * 100000, 1000 * (m + 1), m * 10);
            NCCLCHECK(ncclSend(a + m * 100000, 1000 * (m + 1), ncclInt32, world - 1, comm, stream));
        }
    } else if (rank == world - 1) {
        for (int m = 0; m < 3; m++) NCCLCHECK(ncclRecv(b + m * 100000, 1000 * (m + 1), ncclInt32, 0, comm, stream));
    }
    CUDACHECK(cudaStreamSynchronize(stream));
    if (rank == world - 1)
        for (int m = 0; m < 3; m++) expect_ints(b + m * 100000, 1000 * (m + 1), m * 10, "ordered messages");

    /* send to self inside a group; zero-count send/recv are no-ops */
    put(a, 5000, 42 + rank);
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(a, 5000, ncclInt32, rank, comm, stream));
    NCCLCHECK(ncclRecv(b, 5000, ncclInt32, rank, comm, stream));
    NCCLCHECK(ncclSend(a, 0, ncclInt32, right, comm, stream));
    NCCLCHECK(ncclGroupEnd());
    CUDACHECK(cudaStreamSynchronize(stream));
    expect_ints(b, 5000, 42 + rank, "self send");

    /* all-to-all from grouped p2p: block q of b comes from rank q */
    size_t blk = 20000;
    int32_t *s = dev_ints(blk * world), *r = dev_ints(blk * world);
    for (int q = 0; q < world; q++) put(s + q * blk, blk, rank * 100000 + q * 1000);
    NCCLCHECK(ncclGroupStart());
    for (int q = 0; q < world; q++) {
        NCCLCHECK(ncclSend(s + q * blk, blk, ncclInt32, q, comm, stream));
        NCCLCHECK(ncclRecv(r + q * blk, blk, ncclInt32, q, comm, stream));
    }
    NCCLCHECK(ncclGroupEnd());
    CUDACHECK(cudaStreamSynchronize(stream));
    for (int q = 0; q < world; q++) expect_ints(r + q * blk, blk, q * 100000 + rank * 1000, "grouped all-to-all");

    /* a send outside any group keeps its stream busy until the peer
     * receives: rank 1 posts its receive only after rank 0 has seen that */
    char flag[4096];
    snprintf(flag, sizeof flag, "%s/p2p-send-pending", getenv("TRSIM_RDZV"));
    if (rank == 0) {
        put(a, 10, 9);
        NCCLCHECK(ncclSend(a, 10, ncclInt32, 1, comm, stream));
        trtest_sleep_ms(100);
        EXPECT(cudaStreamQuery(stream) == cudaErrorNotReady, "send completed without a receiver");
        FILE *f = fopen(flag, "w");
        if (!f) FAIL("cannot create %s", flag);
        fclose(f);
    }
    if (rank == 1) {
        trtest_wait_file(flag, 5);
        NCCLCHECK(ncclRecv(b, 10, ncclInt32, 0, comm, stream));
    }
    CUDACHECK(cudaStreamSynchronize(stream));
    if (rank == 1) expect_ints(b, 10, 9, "late receiver");

    NCCLCHECK(ncclCommDestroy(comm));
    if (rank == 0) printf("p2p on %d ranks: ok\n", world);
    return 0;
}
