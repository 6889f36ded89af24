/* Copies and memsets of every kind: data, validation, 2D, peers, and when
 * the calling thread waits (pageable sources are staged; copies into
 * pageable memory are synchronous; the rest is asynchronous). */
#include "rttest.h"

#define N 4096

static void fill(unsigned char *p, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7 + (size_t)seed);
}

static int check(const unsigned char *p, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 7 + (size_t)seed))
            return 0;
    return 1;
}

static void set_flag_later(void *arg)
{
    rt_sleep_ms(50);
    atomic_store((atomic_int *)arg, 1);
}

static void test_kinds(void)
{
    unsigned char *pageable = malloc(N), *pageable2 = malloc(N), *pinned, *d1, *d2, *managed;
    CUDACHECK(cudaMallocHost((void **)&pinned, N));
    CUDACHECK(cudaMalloc((void **)&d1, N));
    CUDACHECK(cudaMalloc((void **)&d2, N));
    CUDACHECK(cudaMallocManaged((void **)&managed, N, cudaMemAttachGlobal));

    fill(pageable, N, 1);
    CUDACHECK(cudaMemcpy(d1, pageable, N, cudaMemcpyHostToDevice));
    CUDACHECK(cudaMemcpy(d2, d1, N, cudaMemcpyDeviceToDevice));
    CUDACHECK(cudaMemcpy(pinned, d2, N, cudaMemcpyDeviceToHost));
    EXPECT(check(pinned, N, 1), "H2D, D2D, D2H");
    CUDACHECK(cudaMemcpy(pageable2, pinned, N, cudaMemcpyHostToHost));
    EXPECT(check(pageable2, N, 1), "H2H");

    fill(pageable, N, 2);
    CUDACHECK(cudaMemcpy(d1, pageable, N, cudaMemcpyDefault));
    CUDACHECK(cudaMemcpy(managed, d1, N, cudaMemcpyDefault));
    CUDACHECK(cudaMemcpy(pageable2, managed, N, cudaMemcpyDefault));
    EXPECT(check(pageable2, N, 2), "cudaMemcpyDefault through device and managed memory");
    CUDACHECK(cudaMemcpy(pageable2 + 1, d1 + 1, 100, cudaMemcpyDeviceToHost));   /* interior */
    CUDACHECK(cudaMemcpy(d2, pageable, 0, cudaMemcpyHostToDevice));             /* nothing */
    CUDACHECK(cudaMemcpy(NULL, NULL, 0, cudaMemcpyDefault));

    /* Validation. */
    int local[4];
    EXPECT_ERR(cudaMemcpy(d1, pageable, N, (enum cudaMemcpyKind)5), cudaErrorInvalidMemcpyDirection);
    EXPECT_ERR(cudaMemcpy(d1, pageable, N, (enum cudaMemcpyKind)-1), cudaErrorInvalidMemcpyDirection);
    EXPECT_ERR(cudaMemcpy(pageable, local, sizeof local, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(local, pageable, sizeof local, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(d1, local, sizeof local, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(d1 + 1, d2, N, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(pageable, d1 + 10, N, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(NULL, d1, 10, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpyAsync(d1, d2, N, cudaMemcpyDefault, (cudaStream_t)0x12345670),
               cudaErrorInvalidResourceHandle);

    /* Memsets. */
    CUDACHECK(cudaMemset(d1, 0xab, N));
    CUDACHECK(cudaMemset(d1 + 10, 0x1cd, 5));   /* only the low byte counts */
    CUDACHECK(cudaMemcpy(pageable2, d1, N, cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        EXPECT(pageable2[i] == ((i >= 10 && i < 15) ? 0xcd : 0xab), "memset byte %d: %#x", i, pageable2[i]);
    CUDACHECK(cudaMemset(pinned, 7, N));        /* pinned target: synchronous */
    for (int i = 0; i < N; i++)
        EXPECT(pinned[i] == 7, "memset of pinned memory");
    EXPECT_ERR(cudaMemset(pageable, 0, N), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemset(d1, 0, N + 1), cudaErrorInvalidValue);
    CUDACHECK(cudaMemset(NULL, 0, 0));
    CUDACHECK(cudaMemsetAsync(managed, 3, N, 0));
    CUDACHECK(cudaStreamSynchronize(0));
    EXPECT(managed[N - 1] == 3, "async memset of managed memory");

    CUDACHECK(cudaFree(d1));
    CUDACHECK(cudaFree(d2));
    CUDACHECK(cudaFree(managed));
    CUDACHECK(cudaFreeHost(pinned));
    free(pageable);
    free(pageable2);
    (void)cudaGetLastError();
}

static void test_2d(void)
{
    enum { W = 100, H = 7, SP = 128 };
    unsigned char src[SP * H], out[W * H];
    unsigned char *d;
    size_t pitch;
    fill(src, sizeof src, 3);
    CUDACHECK(cudaMallocPitch((void **)&d, &pitch, W, H));
    CUDACHECK(cudaMemset2D(d, pitch, 0, pitch, H));
    CUDACHECK(cudaMemcpy2D(d, pitch, src, SP, W, H, cudaMemcpyHostToDevice));
    CUDACHECK(cudaMemcpy2D(out, W, d, pitch, W, H, cudaMemcpyDeviceToHost));
    for (int r = 0; r < H; r++)
        EXPECT(memcmp(out + r * W, src + r * SP, W) == 0, "row %d", r);
    CUDACHECK(cudaMemset2D(d, pitch, 0x55, 10, H));
    CUDACHECK(cudaMemcpy2DAsync(out, W, d, pitch, W, H, cudaMemcpyDeviceToHost, 0));
    for (int r = 0; r < H; r++)
        EXPECT(out[r * W + 9] == 0x55 && out[r * W + 10] == src[r * SP + 10], "row %d", r);
    EXPECT_ERR(cudaMemcpy2D(d, pitch, src, 50, W, H, cudaMemcpyHostToDevice), cudaErrorInvalidPitchValue);
    EXPECT_ERR(cudaMemcpy2D(d, 64, src, SP, W, H, cudaMemcpyHostToDevice), cudaErrorInvalidPitchValue);
    EXPECT_ERR(cudaMemset2D(d, 64, 0, W, H), cudaErrorInvalidPitchValue);
    EXPECT_ERR(cudaMemcpy2D(d, pitch, src, SP, W, H + 1, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    CUDACHECK(cudaFree(d));
    (void)cudaGetLastError();
}

static void test_peer(void)
{
    unsigned char host[N], *d0, *d1;
    CUDACHECK(cudaSetDevice(0));
    CUDACHECK(cudaMalloc((void **)&d0, N));
    CUDACHECK(cudaSetDevice(1));
    CUDACHECK(cudaMalloc((void **)&d1, N));
    CUDACHECK(cudaSetDevice(0));
    fill(host, N, 4);
    CUDACHECK(cudaMemcpy(d0, host, N, cudaMemcpyHostToDevice));
    CUDACHECK(cudaMemcpyPeer(d1, 1, d0, 0, N));
    memset(host, 0, N);
    CUDACHECK(cudaMemcpy(host, d1, N, cudaMemcpyDeviceToHost));
    EXPECT(check(host, N, 4), "peer copy");
    CUDACHECK(cudaMemset(d1, 0, N));
    CUDACHECK(cudaMemcpyPeerAsync(d1, 1, d0, 0, N, 0));
    CUDACHECK(cudaMemcpy(host, d1, N, cudaMemcpyDeviceToHost));
    EXPECT(check(host, N, 4), "async peer copy");
    EXPECT_ERR(cudaMemcpyPeer(d1, 9, d0, 0, N), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaMemcpyPeer(host, 1, d0, 0, N), cudaErrorInvalidValue);
    CUDACHECK(cudaFree(d0));
    CUDACHECK(cudaFree(d1));
    (void)cudaGetLastError();
}

/* A pageable source is staged before cudaMemcpyAsync returns: overwriting
 * it while the stream is still held does not change what arrives. */
static void test_pageable_staging(void)
{
    cudaStream_t s;
    rt_gate gate;
    unsigned char *buf = malloc(N), *d, *pinned;
    rt_gate_init(&gate);
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDACHECK(cudaMalloc((void **)&d, N));
    CUDACHECK(cudaMallocHost((void **)&pinned, N));

    CUDACHECK(cudaLaunchHostFunc(s, rt_gate_pass, &gate));
    fill(buf, N, 5);
    CUDACHECK(cudaMemcpyAsync(d, buf, N, cudaMemcpyHostToDevice, s));
    memset(buf, 0xee, N);                        /* reuse at once */
    CUDACHECK(cudaMemcpyAsync(pinned, d, N, cudaMemcpyDeviceToHost, s));   /* pinned: async */
    EXPECT(cudaStreamQuery(s) == cudaErrorNotReady, "still held");
    (void)cudaGetLastError();
    rt_gate_open(&gate);
    CUDACHECK(cudaStreamSynchronize(s));
    EXPECT(check(pinned, N, 5), "the staged data arrived, not the overwritten buffer");

    /* Device to pageable host: returns only when the copy is done (and so
     * after everything queued before it). */
    atomic_int flag = 0;
    CUDACHECK(cudaLaunchHostFunc(s, set_flag_later, &flag));
    memset(buf, 0, N);
    CUDACHECK(cudaMemcpyAsync(buf, d, N, cudaMemcpyDeviceToHost, s));
    EXPECT(atomic_load(&flag) == 1, "copy into pageable memory returned early");
    EXPECT(check(buf, N, 5), "copy into pageable memory is complete on return");

    /* Synchronous D2H waits likewise, on the legacy stream. */
    atomic_store(&flag, 0);
    CUDACHECK(cudaLaunchHostFunc(0, set_flag_later, &flag));
    CUDACHECK(cudaMemcpy(pinned, d, N, cudaMemcpyDeviceToHost));
    EXPECT(atomic_load(&flag) == 1, "cudaMemcpy returned before earlier legacy work");

    CUDACHECK(cudaStreamDestroy(s));
    CUDACHECK(cudaFree(d));
    CUDACHECK(cudaFreeHost(pinned));
    free(buf);
}

int main(void)
{
    rt_watchdog(40);
    test_kinds();
    test_2d();
    test_peer();
    test_pageable_staging();
    EXPECT(cudaGetLastError() == cudaSuccess, "no stray error");
    printf("memcpy OK\n");
    return 0;
}
