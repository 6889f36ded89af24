/* bench/nangpu_bench: speed of the GPU engine of the NaN/Inf check
 * (shim/nan/tr_nangpu.cu, launched through shim/nan/tr_nangpu.c exactly as the shim
 * does) against a device-to-device copy on the same GPU. Needs a GPU; built
 * only when nvcc is found (tests/gpu/run.sh builds and runs it).
 *
 * The copy (cudaMemcpyAsync device to device of the buffer) reads and
 * writes every byte: its memory bandwidth is 2 x bytes / time, the best a
 * kernel that reads can hope for. The scan reads every byte once: bytes /
 * time. Both are timed with events over ITERS back-to-back operations on
 * one stream, after a warm-up. Then it checks the answers: a float32 NaN
 * planted at element 12345 and float16 infinities from 777 on are found with
 * the right counts and first index.
 *
 * Output:
 *   nangpu copy MIB gbps G mem_gbps M
 *   nangpu scan DTYPE MIB gbps G ratio R       (R = G / M)
 *   nangpu launch_us U                         (a 4 KiB check: the fixed cost)
 *   nangpu verify ok
 * Usage: nangpu_bench [MiB [iters]]  (default 256 MiB, 50) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>

#include "tr_nangpu.h"

#define CK(call)                                                                                 \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "nangpu_bench: %s: %s\n", #call, cudaGetErrorName(e_));             \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

static int ndone;
static tr_nanscan_result last;

static void done(uint64_t tag, const tr_nanscan_result *r, void *arg)
{
    (void)tag;
    (void)arg;
    ndone++;
    last = *r;
}

/* waits (this is a benchmark) until every enqueued check has reported */
static void drain(cudaStream_t s, int want)
{
    CK(cudaStreamSynchronize(s));
    for (int i = 0; i < 100000 && ndone < want; i++) tr_nangpu_poll(done, NULL);
    if (ndone < want) {
        fprintf(stderr, "nangpu_bench: %d of %d results arrived\n", ndone, want);
        exit(1);
    }
}

static void enqueue(cudaStream_t s, int dt, const void *p, uint64_t n)
{
    int err = 0, rc = tr_nangpu_enqueue((void *)s, dt, p, n, 1, &err);
    if (rc != TR_NANGPU_OK) {
        const char *name = tr_nangpu_error_name(err);
        fprintf(stderr, "nangpu_bench: enqueue failed (%d, %s)\n", rc, name ? name : "?");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 256;
    int iters = argc > 2 ? atoi(argv[2]) : 50;
    if (!mib || iters <= 0 || iters > 500) {
        fprintf(stderr, "usage: nangpu_bench [MiB [iters <= 500]]\n");
        return 2;
    }
    if (!tr_nangpu_built()) {
        fprintf(stderr, "nangpu_bench: built without the kernel\n");
        return 1;
    }
    size_t bytes = mib << 20;
    CK(cudaSetDevice(0));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned char *src, *dst;
    CK(cudaMalloc((void **)&src, bytes));
    CK(cudaMalloc((void **)&dst, bytes));
    CK(cudaMemset(src, 0x3c, bytes));      /* finite in every datatype (0x3c3c..., e4m3/e5m2 0x3c) */
    CK(cudaDeviceSynchronize());
    int err = 0, rc = tr_nangpu_ready((void *)s, &err);
    if (rc != TR_NANGPU_OK) {
        const char *name = tr_nangpu_error_name(err);
        fprintf(stderr, "nangpu_bench: the kernel cannot run here (%d, %s)\n", rc, name ? name : "?");
        return 1;
    }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float ms = 0;

    /* device-to-device copy */
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < iters; i++) CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    double copy = (double)bytes * iters / (ms * 1e-3) / 1e9, mem = 2 * copy;
    printf("nangpu copy %zu gbps %.1f mem_gbps %.1f\n", mib, copy, mem);

    static const int dts[] = {TR_NS_FLOAT32, TR_NS_FLOAT16, TR_NS_BFLOAT16, TR_NS_FLOAT64, TR_NS_E4M3, TR_NS_E5M2};
    static const char *const names[] = {"float32", "float16", "bfloat16", "float64", "float8e4m3", "float8e5m2"};
    int want = 0;
    for (int k = 0; k < 6; k++) {
        uint64_t n = bytes / tr_nanscan_esize(dts[k]);
        enqueue(s, dts[k], src, n);               /* warm-up */
        want++;
        CK(cudaEventRecord(e0, s));
        for (int i = 0; i < iters; i++) enqueue(s, dts[k], src, n);
        CK(cudaEventRecord(e1, s));
        want += iters;
        drain(s, want);
        CK(cudaEventElapsedTime(&ms, e0, e1));
        double g = (double)bytes * iters / (ms * 1e-3) / 1e9;
        if (last.nan || last.inf) {
            fprintf(stderr, "nangpu_bench: a NaN or Inf in a finite buffer (%s)\n", names[k]);
            return 1;
        }
        printf("nangpu scan %s %zu gbps %.1f ratio %.2f\n", names[k], mib, g, g / mem);
    }

    /* the fixed cost: checks of 4 KiB */
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < 200; i++) enqueue(s, TR_NS_FLOAT32, src, 1024);
    CK(cudaEventRecord(e1, s));
    want += 200;
    drain(s, want);
    CK(cudaEventElapsedTime(&ms, e0, e1));
    printf("nangpu launch_us %.2f\n", ms * 1e3 / 200);

    /* answers */
    float nanv = NAN;
    CK(cudaMemcpy(src + 12345 * 4, &nanv, 4, cudaMemcpyHostToDevice));
    enqueue(s, TR_NS_FLOAT32, src + 4, bytes / 4 - 1);    /* misaligned start: element 12344 */
    drain(s, ++want);
    int ok = last.nan == 1 && last.inf == 0 && last.first_nan == 12344;
    unsigned short inf16 = 0x7c00;
    CK(cudaMemset(src, 0x3c, bytes));
    for (int i = 0; i < 3; i++) CK(cudaMemcpy(src + (777 + 1000 * i) * 2, &inf16, 2, cudaMemcpyHostToDevice));
    enqueue(s, TR_NS_FLOAT16, src, bytes / 2);
    drain(s, ++want);
    ok = ok && last.nan == 0 && last.inf == 3 && last.first_inf == 777;
    printf("nangpu verify %s\n", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
