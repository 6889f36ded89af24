/* Catalog (issue 20): a rank skips one collective on one communicator of a
 * tensor x pipeline x data-parallel mesh and the job hangs only much later.
 * 8 or 16 ranks, tensor-parallel pairs, two pipeline stages, data-parallel
 * groups of world / 4, split from the world communicator in Megatron's
 * order (rank = stage * 2 * D + d * 2 + t). Each step: embedding_forward
 * (stage 0 only: the stages run different programs), tp_forward, the
 * activations sent from stage 0 to stage 1, tp_backward, and the gradient
 * AllReduce of the data-parallel group, of the same size every step; after
 * the last step, reduce_final_loss on the world communicator.
 *
 * MESH_STEPS: steps (default 10); MESH_WORK_US: CPU work per step (default
 * 0). The clean job runs longer and works, so that 16 ranks sharing 2
 * cores show the scheduler's noise: ranks late by milliseconds, at random,
 * which is no straggler.
 * MESH_MODE (default clean):
 *   clean  no failure: no finding
 *   skip   the data loader gives rank 11 (rank 5 with 8 ranks) no batch in
 *          step 5 (step 3): it skips that step's gradient AllReduce, its
 *          next ones pair with its peers' previous ones (same size), and at
 *          the end its data-parallel peers wait in their last gradient
 *          AllReduce while it waits in reduce_final_loss: a wait cycle
 *   break  rank 6 leaves its loop one iteration early on the data-parallel
 *          communicator (its last step has no gradient AllReduce)
 *   two    rank 11 skips its gradient AllReduce in step 3 and rank 8 its
 *          tp_backward in step 6 (16 ranks) */
#include "job.h"

static int STEPS = 10;       /* MESH_STEPS */
static ncclComm_t tp, pp, dp;
static int stage;
static const char *mode;

static NOINLINE void embedding_forward(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, tp, stream));
}

static NOINLINE void tp_forward(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 4096, ncclFloat32, ncclSum, tp, stream));
}

static NOINLINE void tp_backward(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 4096, ncclFloat32, ncclSum, tp, stream));
}

static NOINLINE void send_activations(void)
{
    NCCLCHECK(ncclSend(buf + (1 << 19), 8192, ncclFloat32, 1, pp, stream));
}

static NOINLINE void recv_activations(void)
{
    NCCLCHECK(ncclRecv(buf + (1 << 19), 8192, ncclFloat32, 0, pp, stream));
}

static NOINLINE void allreduce_gradients(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 65536, ncclFloat32, ncclSum, dp, stream));
}

static NOINLINE void reduce_final_loss(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, wcomm, stream));
}

/* the step's computation: spins for us microseconds of CPU time */
static NOINLINE void compute(int us)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

/* the planted failures: which steps a rank runs each part of */
static NOINLINE int has_batch(int step)
{
    if (!strcmp(mode, "skip")) return !(rank == (world == 16 ? 11 : 5) && step == (world == 16 ? 5 : 3));
    if (!strcmp(mode, "break")) return !(rank == 6 && step == STEPS - 1);
    if (!strcmp(mode, "two")) return !(rank == 11 && step == 3);
    return 1;
}

static NOINLINE int runs_backward(int step)
{
    return !(!strcmp(mode, "two") && rank == 8 && step == 6);
}

int main(void)
{
    mode = getenv("MESH_MODE") && *getenv("MESH_MODE") ? getenv("MESH_MODE") : "clean";
    STEPS = trtest_env_int("MESH_STEPS", 10);
    int work_us = trtest_env_int("MESH_WORK_US", 0);
    job_setup();
    if (world != 8 && world != 16) FAIL("run with 8 or 16 ranks");
    int d_size = world / 4, t = rank % 2, d = (rank / 2) % d_size;
    stage = rank / (2 * d_size);
    NCCLCHECK(ncclCommSplit(wcomm, stage * d_size + d, rank, &tp, NULL));
    NCCLCHECK(ncclCommSplit(wcomm, d * 2 + t, rank, &pp, NULL));
    NCCLCHECK(ncclCommSplit(wcomm, t + 2 * stage, rank, &dp, NULL));
    for (int step = 0; step < STEPS; step++) {
        if (work_us > 0) compute(work_us);
        if (stage == 0) embedding_forward();
        tp_forward();
        if (stage == 0) send_activations();
        else recv_activations();
        if (runs_backward(step)) tp_backward();
        if (has_batch(step)) allreduce_gradients();
        job_sync();
    }
    reduce_final_loss();
    job_sync();
    trtest_file_barrier("done", rank, world);
    NCCLCHECK(ncclCommDestroy(tp));
    NCCLCHECK(ncclCommDestroy(pp));
    NCCLCHECK(ncclCommDestroy(dp));
    NCCLCHECK(ncclCommDestroy(wcomm));
    return 0;
}
