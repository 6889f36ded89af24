/* The GPU engine of the NaN/Inf check: loads tr_nangpu.cu's kernels (a
 * fatbin nvcc built, embedded in the shim as tr_nangpu_image) into the
 * context of each stream that needs them, and launches them.
 *
 * Only the driver API is used (libcuda.so.1, found at run time by
 * tr_cuda.c), so the
 * engine works whatever CUDA runtime version the application uses, and the
 * runtime's last-error state is never touched. Each check has a slot: its
 * running counts in device memory (per context; the scan kernel adds to
 * them with device atomics, only when it finds something) and its result
 * in mapped, portable pinned host memory (cuMemHostAlloc), which the
 * one-thread finish kernel fills with plain stores before it resets the
 * counts and publishes the slot's ticket after a system fence;
 * tr_nangpu_poll, called by the shim's background thread, reads the slots
 * whose ticket has arrived. No synchronization, no event, no host callback,
 * no atomic on host memory: the host only reads memory.
 *
 * Costs on the application's thread: the first check in a context loads
 * the module there (cuModuleLoadData) and allocates the counts (cuMemAlloc,
 * 32 KiB), once; each check is two cuLaunchKernel calls (three the first
 * time a slot is used in a context: a reset). On the stream: the scan at
 * memory bandwidth, then a one-thread kernel. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <cuda.h>

#include "tr_core.h"
#include "tr_nangpu.h"

#ifdef TR_NANGPU_IMAGE
extern const unsigned char tr_nangpu_image[];
int tr_nangpu_built(void) { return 1; }
#else
static const unsigned char *const tr_nangpu_image = NULL;
int tr_nangpu_built(void) { return 0; }
#endif

/* As struct tr_nan_slot and tr_nan_acc in tr_nangpu.cu. */
typedef struct {
    unsigned long long nan, inf, first_nan, first_inf;
    volatile unsigned int done;
    unsigned int pad[7];
} gslot;
_Static_assert(sizeof(gslot) == 64, "slot layout shared with tr_nangpu.cu");
#define ACC_BYTES 32

#define NSLOTS 1024
#define NCTX 64
#define BLOCK 256

static const tr_cudrv *drv;            /* the driver's functions (tr_cuda.h), once found (under g_mu) */

typedef struct {
    CUcontext ctx;
    int state;                         /* 1 ready, -1 failed */
    int err;
    CUmodule mod;
    CUfunction scan[6], finish, reset; /* scan[dtype - 6] */
    int sms;
    CUdeviceptr slots;                 /* g_slots as this context sees it */
    CUdeviceptr acc;                   /* NSLOTS running counts in this context */
    unsigned char acc_ready[NSLOTS];   /* reset once */
} ctx_ent;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static ctx_ent g_ctx[NCTX];
static int g_nctx;
static gslot *g_slots;                 /* NSLOTS, mapped into every context (portable) */
static struct {
    uint64_t tag;
    unsigned ticket;
    int busy;                          /* 1 in flight, 2 lost (its finish kernel never launched) */
} g_meta[NSLOTS];
static unsigned g_ticket;
static int g_inflight, g_hint;
static atomic_int g_stopped;

static const char *const scan_names[6] = {"tr_nan_scan_f16", "tr_nan_scan_f32", "tr_nan_scan_f64",
                                          "tr_nan_scan_bf16", "tr_nan_scan_e4m3", "tr_nan_scan_e5m2"};

/* Makes the stream's context current (pushing it when another one is);
 * under g_mu. */
static int enter_ctx(CUstream s, CUcontext *ctx, int *pushed, int *err)
{
    CUcontext cur = NULL;
    *pushed = 0;
    CUresult r = drv->stream_ctx(s, ctx);
    if (r != CUDA_SUCCESS || !*ctx) {
        *err = (int)r;
        return TR_NANGPU_CTX_FAILED;
    }
    if (drv->ctx_get(&cur) != CUDA_SUCCESS) cur = NULL;
    if (cur != *ctx) {
        if ((r = drv->ctx_push(*ctx)) != CUDA_SUCCESS) {
            *err = (int)r;
            return TR_NANGPU_CTX_FAILED;
        }
        *pushed = 1;
    }
    return TR_NANGPU_OK;
}

static void leave_ctx(int pushed)
{
    CUcontext dummy;
    if (pushed) drv->ctx_pop(&dummy);
}

/* The module in the current context ctx; under g_mu. */
static ctx_ent *ctx_load(CUcontext ctx)
{
    for (int i = 0; i < g_nctx; i++)
        if (g_ctx[i].ctx == ctx) return &g_ctx[i];
    if (g_nctx == NCTX) return NULL;
    ctx_ent *e = &g_ctx[g_nctx++];
    memset(e, 0, sizeof *e);
    e->ctx = ctx;
    e->state = -1;
    CUresult r = CUDA_SUCCESS;
    if (!g_slots) {
        void *p = NULL;
        r = drv->host_alloc(&p, NSLOTS * sizeof(gslot), CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
        if (r != CUDA_SUCCESS) {
            e->err = (int)r;
            e->state = -2;
            return e;
        }
        memset(p, 0, NSLOTS * sizeof(gslot));
        g_slots = p;
    }
    if ((r = drv->host_dptr(&e->slots, g_slots, 0)) != CUDA_SUCCESS) {
        e->err = (int)r;
        e->state = -2;
        return e;
    }
    if ((r = drv->mod_load(&e->mod, tr_nangpu_image)) != CUDA_SUCCESS) {
        e->err = (int)r;
        return e;
    }
    for (int k = 0; k < 6 && r == CUDA_SUCCESS; k++) r = drv->mod_fn(&e->scan[k], e->mod, scan_names[k]);
    if (r == CUDA_SUCCESS) r = drv->mod_fn(&e->finish, e->mod, "tr_nan_finish");
    if (r == CUDA_SUCCESS) r = drv->mod_fn(&e->reset, e->mod, "tr_nan_reset");
    if (r != CUDA_SUCCESS) {
        e->err = (int)r;
        return e;
    }
    if ((r = drv->mem_alloc(&e->acc, NSLOTS * ACC_BYTES)) != CUDA_SUCCESS) {
        e->err = (int)r;
        return e;
    }
    CUdevice dev;
    int sms = 0;
    if (drv->ctx_dev(&dev) != CUDA_SUCCESS ||
        drv->dev_attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != CUDA_SUCCESS || sms <= 0)
        sms = 16;
    e->sms = sms;
    e->state = 1;
    return e;
}

/* Under g_mu: the context entry of stream s, made current. */
static int prepare(CUstream s, ctx_ent **out, int *pushed, int *err)
{
    *pushed = 0;
    if (!tr_nangpu_built()) return TR_NANGPU_NOT_BUILT;
    if (!drv && !(drv = tr_cuda_drv())) return TR_NANGPU_NO_DRIVER;
    CUcontext ctx;
    int rc = enter_ctx(s, &ctx, pushed, err);
    if (rc != TR_NANGPU_OK) return rc;
    ctx_ent *e = ctx_load(ctx);
    if (!e || e->state != 1) {
        leave_ctx(*pushed);
        *pushed = 0;
        *err = e ? e->err : 0;
        return e && e->state == -2 ? TR_NANGPU_HOSTMEM_FAILED : TR_NANGPU_LOAD_FAILED;
    }
    *out = e;
    return TR_NANGPU_OK;
}

int tr_nangpu_ready(void *stream, int *err)
{
    *err = 0;
    if (!tr_nangpu_built()) return TR_NANGPU_NOT_BUILT;
    pthread_mutex_lock(&g_mu);
    ctx_ent *e;
    int pushed;
    int rc = prepare((CUstream)stream, &e, &pushed, err);
    if (rc == TR_NANGPU_OK) leave_ctx(pushed);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

int tr_nangpu_enqueue(void *stream, int dtype, const void *dev, uint64_t n, uint64_t tag, int *err)
{
    *err = 0;
    size_t es = tr_nanscan_esize(dtype);
    if (!es) return TR_NANGPU_LAUNCH_FAILED;
    if (!tr_nangpu_built()) return TR_NANGPU_NOT_BUILT;
    CUstream s = (CUstream)stream;
    pthread_mutex_lock(&g_mu);
    ctx_ent *e;
    int pushed;
    int rc = prepare(s, &e, &pushed, err);
    if (rc != TR_NANGPU_OK) {
        pthread_mutex_unlock(&g_mu);
        return rc;
    }
    int k = -1;
    for (int i = 0; i < NSLOTS; i++) {
        int j = (g_hint + i) % NSLOTS;
        if (!g_meta[j].busy) {
            k = j;
            break;
        }
    }
    if (k < 0) {
        leave_ctx(pushed);
        pthread_mutex_unlock(&g_mu);
        return TR_NANGPU_NO_SLOT;
    }
    g_hint = (k + 1) % NSLOTS;
    if (++g_ticket == 0) g_ticket = 1;
    unsigned ticket = g_ticket;
    gslot *h = &g_slots[k];
    h->done = 0;
    atomic_thread_fence(memory_order_seq_cst);   /* done is 0 before the launch can write it */

    CUdeviceptr slot = e->slots + (CUdeviceptr)k * sizeof(gslot);
    CUdeviceptr acc = e->acc + (CUdeviceptr)k * ACC_BYTES;
    CUresult r;
    if (!e->acc_ready[k]) {
        void *rargs[] = {&acc};
        if ((r = drv->launch(e->reset, 1, 1, 1, 1, 1, 1, 0, s, rargs, NULL)) != CUDA_SUCCESS) {
            leave_ctx(pushed);
            pthread_mutex_unlock(&g_mu);
            *err = (int)r;
            return TR_NANGPU_LAUNCH_FAILED;
        }
        e->acc_ready[k] = 1;       /* from now on each finish kernel resets it */
    }
    unsigned long long cnt = n;
    unsigned long long nvec = (unsigned long long)(n * es / 16);
    unsigned long long want = (nvec + BLOCK - 1) / BLOCK, cap = (unsigned long long)e->sms * 8;
    unsigned grid = (unsigned)(want < 1 ? 1 : want > cap ? cap : want);
    const void *p = dev;
    void *args[] = {(void *)&p, &cnt, &acc};
    r = drv->launch(e->scan[dtype - 6], grid, 1, 1, BLOCK, 1, 1, 0, s, args, NULL);
    if (r != CUDA_SUCCESS) {
        leave_ctx(pushed);
        pthread_mutex_unlock(&g_mu);
        *err = (int)r;
        return TR_NANGPU_LAUNCH_FAILED;
    }
    void *fargs[] = {&acc, &slot, &ticket};
    r = drv->launch(e->finish, 1, 1, 1, 1, 1, 1, 0, s, fargs, NULL);
    leave_ctx(pushed);
    if (r != CUDA_SUCCESS) {
        g_meta[k].busy = 2;            /* the scan may still write there: never reused */
        pthread_mutex_unlock(&g_mu);
        *err = (int)r;
        return TR_NANGPU_LAUNCH_FAILED;
    }
    g_meta[k].busy = 1;
    g_meta[k].tag = tag;
    g_meta[k].ticket = ticket;
    g_inflight++;
    pthread_mutex_unlock(&g_mu);
    return TR_NANGPU_OK;
}

int tr_nangpu_poll(void (*done)(uint64_t tag, const tr_nanscan_result *r, void *arg), void *arg)
{
    enum { BATCH = 64 };
    uint64_t tags[BATCH];
    tr_nanscan_result res[BATCH];
    int left;
    for (;;) {
        int got = 0;
        pthread_mutex_lock(&g_mu);
        if (atomic_load(&g_stopped)) {
            pthread_mutex_unlock(&g_mu);
            return 0;
        }
        for (int i = 0, seen = 0; i < NSLOTS && seen < g_inflight && got < BATCH; i++) {
            if (g_meta[i].busy != 1) continue;
            seen++;
            gslot *h = &g_slots[i];
            if (h->done != g_meta[i].ticket) continue;
            atomic_thread_fence(memory_order_acquire);
            tags[got] = g_meta[i].tag;
            res[got].nan = h->nan;
            res[got].inf = h->inf;
            res[got].first_nan = h->first_nan;
            res[got].first_inf = h->first_inf;
            got++;
            g_meta[i].busy = 0;
            g_inflight--;
        }
        left = g_inflight;
        pthread_mutex_unlock(&g_mu);
        for (int i = 0; i < got; i++) done(tags[i], &res[i], arg);
        if (got < BATCH) break;
    }
    return left;
}

void tr_nangpu_stop(void)
{
    pthread_mutex_lock(&g_mu);
    atomic_store(&g_stopped, 1);
    pthread_mutex_unlock(&g_mu);
}
