/* One rank of real NCCL on GPU 0 under the shim (tests/gpu/run.sh):
 *   nan_gpu check   planted non-finite values, checked by check_gpu.py:
 *     1 float32 AllReduce out of place, 1M elements, a NaN at 123
 *     2 float16 AllReduce of finite inputs (60000 at 100..109, 1 elsewhere)
 *       with PreMulSum x2: the reduction overflows to Inf at 100..109
 *     3 bfloat16 AllReduce in place inside a group, a NaN at 7
 *     4 float32 AllReduce, 64 MiB, clean
 *     5 float32 AllReduce with a CUDA error pending in the application:
 *       prints NCCL's result and the error found after the call
 *       ("pending_error NAME nccl_rc N pending_error_after_call NAME"), to
 *       compare with a run without the shim (TRSHIM=0)
 *   nan_gpu time N  N in-place float32 AllReduces of 64 MiB, back to back on
 *                   one stream after a warm-up: "allreduce_us X" per call
 *                   (events), for the added time per collective
 * Single rank: the sum is a copy, hence the PreMulSum to overflow fp16. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <nccl.h>

#define CK(call)                                                                                     \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "nan_gpu: %s: %s\n", #call, cudaGetErrorName(e_));                       \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)
#define NK(call)                                                                                     \
    do {                                                                                             \
        ncclResult_t r_ = (call);                                                                    \
        if (r_ != ncclSuccess) {                                                                     \
            fprintf(stderr, "nan_gpu: %s: %s\n", #call, ncclGetErrorString(r_));                     \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

static cudaStream_t s;
static ncclComm_t comm;

static void *upload(const void *h, size_t bytes)
{
    void *d;
    CK(cudaMalloc(&d, bytes));
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

static void run_check(void)
{
    /* 1 */
    size_t n1 = 1u << 20;
    float *h1 = malloc(n1 * 4);
    for (size_t i = 0; i < n1; i++) h1[i] = 1.0f;
    h1[123] = NAN;
    float *s1 = upload(h1, n1 * 4), *r1;
    CK(cudaMalloc((void **)&r1, n1 * 4));
    NK(ncclAllReduce(s1, r1, n1, ncclFloat32, ncclSum, comm, s));

    /* 2 */
    unsigned short h2[4096];
    for (int i = 0; i < 4096; i++) h2[i] = i >= 100 && i < 110 ? 0x7b53 /* 60000 */ : 0x3c00 /* 1 */;
    void *s2 = upload(h2, sizeof h2), *r2;
    CK(cudaMalloc(&r2, sizeof h2));
    ncclRedOp_t twice;
    unsigned short two = 0x4000;    /* 2.0 in half */
    NK(ncclRedOpCreatePreMulSum(&twice, &two, ncclFloat16, ncclScalarHostImmediate, comm));
    NK(ncclAllReduce(s2, r2, 4096, ncclFloat16, twice, comm, s));

    /* 3 */
    unsigned short h3[1000];
    for (int i = 0; i < 1000; i++) h3[i] = 0x3f80;   /* 1.0 */
    h3[7] = 0x7fc0;
    void *b3 = upload(h3, sizeof h3);
    NK(ncclGroupStart());
    NK(ncclAllReduce(b3, b3, 1000, ncclBfloat16, ncclSum, comm, s));
    NK(ncclGroupEnd());

    /* 4 */
    size_t n4 = 16u << 20;
    float *b4;
    CK(cudaMalloc((void **)&b4, n4 * 4));
    CK(cudaMemset(b4, 0, n4 * 4));
    NK(ncclAllReduce(b4, b4, n4, ncclFloat32, ncclSum, comm, s));
    CK(cudaStreamSynchronize(s));
    NK(ncclRedOpDestroy(twice, comm));

    /* 5 */
    cudaError_t set = cudaSetDevice(9999);
    ncclResult_t r5 = ncclAllReduce(s1, r1, 16, ncclFloat32, ncclSum, comm, s);   /* NCCL may refuse it */
    cudaError_t after = cudaGetLastError();
    printf("pending_error %s nccl_rc %d pending_error_after_call %s\n", cudaGetErrorName(set), (int)r5,
           cudaGetErrorName(after));
    CK(cudaStreamSynchronize(s));
    free(h1);
}

static void run_time(int iters)
{
    size_t n = 16u << 20;
    float *b;
    CK(cudaMalloc((void **)&b, n * 4));
    CK(cudaMemset(b, 0, n * 4));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) NK(ncclAllReduce(b, b, n, ncclFloat32, ncclSum, comm, s));
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < iters; i++) NK(ncclAllReduce(b, b, n, ncclFloat32, ncclSum, comm, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    printf("allreduce_us %.1f\n", ms * 1e3 / iters);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "check";
    CK(cudaSetDevice(0));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int dev = 0;
    NK(ncclCommInitAll(&comm, 1, &dev));
    if (!strcmp(what, "check")) run_check();
    else if (!strcmp(what, "time")) run_time(argc > 2 ? atoi(argv[2]) : 50);
    else {
        fprintf(stderr, "usage: nan_gpu check | time [N]\n");
        return 2;
    }
    CK(cudaStreamSynchronize(s));
    NK(ncclCommDestroy(comm));
    return 0;
}
