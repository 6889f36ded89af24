// shim/nan/tr_nangpu.cu's kernels run on the CPU (cuda_emu.h) against the host
// scanner (shim/nan/tr_nanscan.c, itself checked against a reference by
// unit_nanscan): random sizes from 0 to ~30000 elements, every datatype,
// misaligned starts (head), tails, NaN/Inf at the first and last element,
// grids of 1 to 3 blocks of 256 threads (grid stride, block reductions,
// atomics of several blocks), then the finish kernel's copy and reset.
#include "cuda_emu.h"


thread_local emu_dim threadIdx, blockIdx;
emu_dim blockDim, gridDim;
pthread_barrier_t emu_bar;
int emu_or;
unsigned long long emu_shfl[1024];

#include "tr_nangpu.cu"

extern "C" {
#include "tr_nanscan.h"
}
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*kernel)(const unsigned char *, unsigned long long, tr_nan_acc *);
struct thread_arg {
    kernel f;
    const unsigned char *p;
    unsigned long long n;
    tr_nan_acc *acc;
    unsigned block, thread;
};

static void *thread_main(void *x)
{
    thread_arg *a = (thread_arg *)x;
    blockIdx.x = a->block;
    threadIdx.x = a->thread;
    a->f(a->p, a->n, a->acc);
    return NULL;
}

static void launch(kernel f, unsigned grid, const unsigned char *p, unsigned long long n, tr_nan_acc *acc)
{
    gridDim.x = grid;
    blockDim.x = TR_NAN_BLOCK;
    pthread_barrier_init(&emu_bar, NULL, TR_NAN_BLOCK);
    for (unsigned b = 0; b < grid; b++) {
        pthread_t th[TR_NAN_BLOCK];
        thread_arg a[TR_NAN_BLOCK];
        for (unsigned t = 0; t < TR_NAN_BLOCK; t++) {
            a[t] = {f, p, n, acc, b, t};
            if (pthread_create(&th[t], NULL, thread_main, &a[t]) != 0) {
                fprintf(stderr, "pthread_create failed\n");
                exit(2);
            }
        }
        for (unsigned t = 0; t < TR_NAN_BLOCK; t++) pthread_join(th[t], NULL);
    }
    pthread_barrier_destroy(&emu_bar);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next()
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main()
{
    kernel kernels[6] = {tr_nan_scan_f16, tr_nan_scan_f32, tr_nan_scan_f64,
                         tr_nan_scan_bf16, tr_nan_scan_e4m3, tr_nan_scan_e5m2};
    static unsigned char buf[1 << 18] __attribute__((aligned(64)));
    int bad = 0, cases = 0;
    for (int round = 0; round < 72; round++) {
        int dt = 6 + round % 6;
        size_t es = tr_nanscan_esize(dt);
        size_t mis = (next() % 16) / es * es;
        size_t n = next() % (round % 3 == 0 ? 40 : 30000 / es);
        unsigned char *p = buf + mis;
        memset(p, 0x3c, n * es);                      // finite in every datatype
        for (int j = 0, k = (int)(next() % 6); j < k && n; j++) {
            uint64_t v = next();                      // random bits: some NaN or Inf
            memcpy(p + (next() % n) * es, &v, es);
        }
        uint64_t ones = ~0ull;                        // a NaN in every datatype
        if (n && round % 5 == 0) memcpy(p + (n - 1) * es, &ones, es);
        if (n && round % 7 == 0) memcpy(p, &ones, es);
        tr_nan_acc acc;
        tr_nan_slot slot;
        memset(&slot, 0, sizeof slot);
        tr_nan_reset(&acc);
        unsigned grid = 1 + (unsigned)(next() % 3);
        launch(kernels[dt - 6], grid, p, n, &acc);
        tr_nan_finish(&acc, &slot, 42);
        tr_nanscan_result want;
        tr_nanscan_init(&want);
        tr_nanscan(dt, p, n, 0, &want);
        cases++;
        if (slot.done != 42 || slot.nan != want.nan || slot.inf != want.inf || slot.first_nan != want.first_nan ||
            slot.first_inf != want.first_inf || acc.nan || acc.inf || acc.first_nan != ~0ull ||
            acc.first_inf != ~0ull) {
            bad++;
            printf("FAIL datatype %d, %zu elements from offset %zu, %u blocks: got nan %llu inf %llu first %lld/%lld,"
                   " want nan %llu inf %llu first %lld/%lld\n",
                   dt, n, mis, grid, slot.nan, slot.inf, (long long)slot.first_nan, (long long)slot.first_inf,
                   (unsigned long long)want.nan, (unsigned long long)want.inf, (long long)want.first_nan,
                   (long long)want.first_inf);
        }
    }
    printf("emu_nangpu: %d cases, %d wrong\n", cases, bad);
    return bad != 0;
}
