/* A data-parallel training job written for real GPUs: only the public CUDA
 * runtime and NCCL API, ranks from the launcher's environment (torchrun
 * style), the NCCL unique id handed from rank 0 to the others over TCP
 * (MASTER_ADDR/MASTER_PORT). It fits y = w.x with SGD: each rank computes the
 * gradient of its own shard, the gradients are averaged with ncclAllReduce,
 * and every rank applies the same update. At the end the ranks check, with
 * an AllGather, that they hold identical weights.
 *
 * Built against the real libcudart/libnccl, it runs on GPUs as it is; under
 * LD_PRELOAD=libtrsim.so it runs on the simulator, unchanged.
 *
 * Usage: train_dp [steps] [dim]
 *
 * TRAIN_DP_PLANT=log_metrics plants the most common hang of the failure
 * catalog: at step 10, rank 0 alone all-reduces a metric for logging, so its
 * next collective pairs with its peers' gradient all-reduce and the job
 * hangs (the README's main command shows tranalyze naming that line). */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include <nccl.h>

#define CUDA_OK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, cudaGetErrorString(e_)); exit(1); } } while (0)
#define NCCL_OK(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) { \
    fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, ncclGetErrorString(r_)); exit(1); } } while (0)

static int rank = -1;

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static void die(const char *what)
{
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, strerror(errno));
    exit(1);
}

/* Rank 0 serves the id to world-1 connections; the others connect (retrying
 * while rank 0 starts up) and read it. */
static void share_unique_id(ncclUniqueId *id, int world)
{
    const char *host = getenv("MASTER_ADDR") ? getenv("MASTER_ADDR") : "127.0.0.1";
    const char *port = getenv("MASTER_PORT") ? getenv("MASTER_PORT") : "29500";
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, port, &hints, &ai) != 0) die("getaddrinfo");
    if (rank == 0) {
        NCCL_OK(ncclGetUniqueId(id));
        int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(s, ai->ai_addr, ai->ai_addrlen) != 0 || listen(s, world) != 0) die("bind/listen");
        for (int served = 1; served < world; served++) {
            int c = accept(s, NULL, NULL);
            if (c < 0) die("accept");
            if (write(c, id, sizeof *id) != (ssize_t)sizeof *id) die("write");
            close(c);
        }
        close(s);
    } else {
        for (int tries = 0;; tries++) {
            int s = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(s, ai->ai_addr, ai->ai_addrlen) == 0) {
                size_t got = 0;
                while (got < sizeof *id) {
                    ssize_t n = read(s, (char *)id + got, sizeof *id - got);
                    if (n <= 0) die("read");
                    got += (size_t)n;
                }
                close(s);
                break;
            }
            close(s);
            if (tries > 3000) die("connect");
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    freeaddrinfo(ai);
}

/* Rank 0 averages its loss over the ranks for the log line... but only rank 0
 * calls it when the plant is on: an extra collective the others never issue. */
__attribute__((noinline)) void log_metrics(int step, float loss, float *metric_dev, ncclComm_t comm,
                                           cudaStream_t stream)
{
    CUDA_OK(cudaMemcpyAsync(metric_dev, &loss, sizeof loss, cudaMemcpyHostToDevice, stream));
    NCCL_OK(ncclAllReduce(metric_dev, metric_dev, 1, ncclFloat32, ncclAvg, comm, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    printf("step %3d  metric logged\n", step);
}

/* Deterministic synthetic data: sample k of the whole dataset. */
static float feature(long k, int j) { return (float)(((k * 31 + j * 17) % 13) - 6) / 6.0f; }
static float target(long k, int dim)
{
    float y = 0;
    for (int j = 0; j < dim; j++) y += feature(k, j) * (float)((j % 5) - 2) * 0.5f;
    return y;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 40;
    int dim = argc > 2 ? atoi(argv[2]) : 256;
    rank = env_int("RANK", 0);
    int world = env_int("WORLD_SIZE", 1), local = env_int("LOCAL_RANK", rank);
    int ndev = 0;
    CUDA_OK(cudaGetDeviceCount(&ndev));
    CUDA_OK(cudaSetDevice(local % ndev));

    ncclUniqueId id;
    share_unique_id(&id, world);
    ncclComm_t comm;
    NCCL_OK(ncclCommInitRank(&comm, world, id, rank));
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    const int per_rank = 64;
    float *w, *grad_host, *w_dev, *grad_dev, *loss_dev, *all_w;
    CUDA_OK(cudaMallocHost((void **)&w, dim * sizeof(float)));
    CUDA_OK(cudaMallocHost((void **)&grad_host, (dim + 1) * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&w_dev, dim * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&grad_dev, (dim + 1) * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&loss_dev, sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&all_w, (size_t)world * dim * sizeof(float)));

    /* rank 0 initialises, everyone starts from its weights */
    for (int j = 0; j < dim; j++) w[j] = rank == 0 ? 0.01f * (float)(j % 7) : 0.0f;
    CUDA_OK(cudaMemcpyAsync(w_dev, w, dim * sizeof(float), cudaMemcpyHostToDevice, stream));
    NCCL_OK(ncclBroadcast(w_dev, w_dev, dim, ncclFloat32, 0, comm, stream));
    CUDA_OK(cudaMemcpyAsync(w, w_dev, dim * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));

    /* features lie in [-1, 1]: a step of 1/dim keeps SGD stable at any width */
    const float lr = 1.0f / (float)dim;
    float first_loss = -1, loss = 0;
    const char *plant = getenv("TRAIN_DP_PLANT");
    int plant_log_metrics = plant && strcmp(plant, "log_metrics") == 0;
    for (int step = 0; step < steps; step++) {
        if (plant_log_metrics && rank == 0 && step == 10) log_metrics(step, loss, loss_dev, comm, stream);
        /* local gradient of the mean squared error on this rank's shard;
         * the last slot carries the shard's loss along with it */
        memset(grad_host, 0, (dim + 1) * sizeof(float));
        for (int s = 0; s < per_rank; s++) {
            long k = ((long)step * world + rank) * per_rank + s;
            float pred = 0;
            for (int j = 0; j < dim; j++) pred += w[j] * feature(k, j);
            float err = pred - target(k, dim);
            for (int j = 0; j < dim; j++) grad_host[j] += 2 * err * feature(k, j) / per_rank;
            grad_host[dim] += err * err / per_rank;
        }
        CUDA_OK(cudaMemcpyAsync(grad_dev, grad_host, (dim + 1) * sizeof(float), cudaMemcpyHostToDevice, stream));
        NCCL_OK(ncclAllReduce(grad_dev, grad_dev, dim + 1, ncclFloat32, ncclAvg, comm, stream));
        CUDA_OK(cudaMemcpyAsync(grad_host, grad_dev, (dim + 1) * sizeof(float), cudaMemcpyDeviceToHost, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        for (int j = 0; j < dim; j++) w[j] -= lr * grad_host[j];
        loss = grad_host[dim];
        if (first_loss < 0) first_loss = loss;
        if (rank == 0 && (step % 10 == 0 || step == steps - 1))
            printf("step %3d  loss %.6f\n", step, loss);
    }

    /* every rank must hold the same weights, bit for bit */
    CUDA_OK(cudaMemcpyAsync(w_dev, w, dim * sizeof(float), cudaMemcpyHostToDevice, stream));
    NCCL_OK(ncclAllGather(w_dev, all_w, dim, ncclFloat32, comm, stream));
    float *gathered = malloc((size_t)world * dim * sizeof(float));
    CUDA_OK(cudaMemcpyAsync(gathered, all_w, (size_t)world * dim * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    int consistent = 1;
    for (int q = 0; q < world; q++)
        if (memcmp(gathered + (size_t)q * dim, w, dim * sizeof(float)) != 0) consistent = 0;
    free(gathered);

    NCCL_OK(ncclCommDestroy(comm));
    CUDA_OK(cudaStreamDestroy(stream));
    if (!consistent) {
        fprintf(stderr, "rank %d: weights differ between ranks\n", rank);
        return 1;
    }
    if (!(loss < first_loss)) {
        fprintf(stderr, "rank %d: loss did not decrease (%g -> %g)\n", rank, first_loss, loss);
        return 1;
    }
    if (rank == 0) printf("trained %d steps on %d ranks: loss %.4f -> %.4f, weights identical on all ranks\n",
                          steps, world, first_loss, loss);
    return 0;
}
