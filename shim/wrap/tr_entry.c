/* The CUDA entry-point lookups: cuGetProcAddress (the driver's; v1 and
 * _v2) and cudaGetDriverEntryPoint / cudaGetDriverEntryPointByVersion (the
 * runtime's, and their _ptsz names). Frameworks reach driver functions this
 * way (PyTorch's expandable segments get cuMemCreate through
 * cudaGetDriverEntryPoint), past the preloaded wrappers. Each wrapper calls
 * the real lookup and returns what it returns, except that when the lookup
 * succeeded with a driver function the shim wraps, the pointer handed out
 * is the shim's wrapper of exactly that version:
 *
 *   - by address: the lookup returned the very function a wrapper forwards
 *     to (symbol "cuMemAlloc" at version 3020 or later gives the driver's
 *     cuMemAlloc_v2: the shim's cuMemAlloc_v2; before 3020, the legacy
 *     cuMemAlloc, which the shim does not wrap: the real one);
 *   - by version, when the driver hands out addresses of its own that are
 *     not its exported functions: the versions of the wrapped functions
 *     below (as cuda.h documents them), for requested versions up to the
 *     cuda.h the shim was built with (a newer one may have a newer version
 *     of the function), and only for an address inside the driver library
 *     that exports that version.
 *
 * Anything else, a failed lookup, a lookup from the CUDA runtime, the
 * driver or NCCL themselves (tr_lookup_may_wrap), or TRSHIM=0: exactly what
 * the real lookup returned. The status out-parameters are never touched. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "tr_core.h"
#include "tr_dlsym.h"
#include "trshim/cuda_calls.h"

#undef cuGetProcAddress    /* cuda.h: the _v2 name; the shim defines both */

typedef CUresult (*fn_cuGetProcAddress)(const char *, void **, int, cuuint64_t);
typedef CUresult (*fn_cuGetProcAddress_v2)(const char *, void **, int, cuuint64_t,
                                           CUdriverProcAddressQueryResult *);
typedef cudaError_t (*fn_cudaGetDriverEntryPoint)(const char *, void **, unsigned long long,
                                                  enum cudaDriverEntryPointQueryResult *);
typedef cudaError_t (*fn_cudaGetDriverEntryPointByVersion)(const char *, void **, unsigned int,
                                                           unsigned long long,
                                                           enum cudaDriverEntryPointQueryResult *);

TR_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
TR_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                                                enum cudaDriverEntryPointQueryResult *driverStatus);
TR_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr,
                                                         unsigned int cudaVersion, unsigned long long flags,
                                                         enum cudaDriverEntryPointQueryResult *driverStatus);

/* The versions of the driver functions the shim wraps: from which CUDA
 * version the lookup of symbol returns name (trshim/cuda_calls.h). */
static const struct {
    const char *symbol;
    int since;
    const char *name;
} drv_versions[] = {
#define LOOKUP_ROW(symbol, since, name) {#symbol, since, #name},
    TR_CUDA_LOOKUPS(LOOKUP_ROW)
#undef LOOKUP_ROW
};

/* The wrapped version of symbol whose real function is p, if any. */
static void *by_address(const char *symbol, void *p)
{
    static const char *const versions[] = {"", "_v2", "_v3", "_v4", "_v5", "_v6", "_v7", "_v8", "_v9"};
    static const char *const streams[] = {"", "_ptsz", "_ptds"};
    char name[256];
    if (strlen(symbol) > 200) return NULL;
    for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++)
        for (size_t s = 0; s < sizeof streams / sizeof streams[0]; s++) {
            snprintf(name, sizeof name, "%s%s%s", symbol, versions[v], streams[s]);
            if (!tr_self_func(name)) continue;
            void *w = tr_lookup_wrapper(name, p, 0);
            if (w) return w;
        }
    return NULL;
}

/* version -1: the runtime's (cudaGetDriverEntryPoint) */
static void *by_version(const char *symbol, void *p, int version)
{
    int known = 0;
    for (size_t i = 0; i < sizeof drv_versions / sizeof drv_versions[0]; i++)
        known |= !strcmp(drv_versions[i].symbol, symbol);
    if (!known) return NULL;
    if (version == -1) version = tr_cuda_runtime_version();   /* what cudaGetDriverEntryPoint asks for */
    if (version <= 0 || version > CUDA_VERSION) return NULL;
    int best = -1;
    for (int i = 0; i < (int)(sizeof drv_versions / sizeof drv_versions[0]); i++)
        if (!strcmp(drv_versions[i].symbol, symbol) && drv_versions[i].since <= version &&
            (best < 0 || drv_versions[i].since > drv_versions[best].since))
            best = i;
    if (best < 0) return NULL;
    void *w = tr_self_func(drv_versions[best].name);
    struct link_map *lm = tr_map_of(p);
    if (!w || !lm || lm == tr_self_map() || !(tr_lib_families(lm) & (1u << TR_LIB_CUDA))) return NULL;
    void *r = tr_real(drv_versions[best].name, TR_LIB_CUDA);
    if (!r || tr_map_of(r) != lm) return NULL;
    return w;
}

/* The lookup of symbol at version (0: unknown, -1: the runtime's) by caller succeeded with
 * *pfn: hand out the shim's wrapper where there is one. errno unchanged. */
static void entry_done(const char *symbol, void **pfn, int version, const void *caller)
{
    if (!symbol || !pfn || !*pfn || symbol[0] != 'c' || symbol[1] != 'u') return;
    int saved = errno;
    if (tr_lookup_may_wrap(caller)) {
        void *w = by_address(symbol, *pfn);
        if (!w) w = by_version(symbol, *pfn, version);
        if (w) *pfn = w;
    }
    errno = saved;
}

#define ENTRY_MISSING_DRV(name)                                                \
    do {                                                                       \
        tr_warn("entry points: no real " name " found");                      \
        return CUDA_ERROR_NOT_INITIALIZED;                                    \
    } while (0)
#define ENTRY_MISSING_RT(name)                                                 \
    do {                                                                       \
        tr_warn("entry points: no real " name " found");                      \
        return cudaErrorInitializationError;                                  \
    } while (0)

TR_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    const void *caller = __builtin_return_address(0);
    TR_REAL(real, fn_cuGetProcAddress, "cuGetProcAddress", TR_LIB_CUDA);
    if (!real)
        ENTRY_MISSING_DRV("cuGetProcAddress");
    CUresult r = real(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS)
        entry_done(symbol, pfn, cudaVersion, caller);
    return r;
}

TR_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *symbolStatus)
{
    const void *caller = __builtin_return_address(0);
    TR_REAL(real, fn_cuGetProcAddress_v2, "cuGetProcAddress_v2", TR_LIB_CUDA);
    if (!real)
        ENTRY_MISSING_DRV("cuGetProcAddress_v2");
    CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS)
        entry_done(symbol, pfn, cudaVersion, caller);
    return r;
}

/* CUDA 11 declared cudaGetDriverEntryPoint without driverStatus: it is
 * passed on as it came and never read. */
TR_API cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                                           enum cudaDriverEntryPointQueryResult *driverStatus)
{
    const void *caller = __builtin_return_address(0);
    TR_REAL(real, fn_cudaGetDriverEntryPoint, "cudaGetDriverEntryPoint", TR_LIB_CUDART);
    if (!real)
        ENTRY_MISSING_RT("cudaGetDriverEntryPoint");
    cudaError_t r = real(symbol, funcPtr, flags, driverStatus);
    if (r == cudaSuccess && funcPtr && *funcPtr)
        entry_done(symbol, funcPtr, -1, caller);
    return r;
}

TR_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                                                enum cudaDriverEntryPointQueryResult *driverStatus)
{
    const void *caller = __builtin_return_address(0);
    TR_REAL(real, fn_cudaGetDriverEntryPoint, "cudaGetDriverEntryPoint_ptsz", TR_LIB_CUDART);
    if (!real)
        ENTRY_MISSING_RT("cudaGetDriverEntryPoint_ptsz");
    cudaError_t r = real(symbol, funcPtr, flags, driverStatus);
    if (r == cudaSuccess && funcPtr && *funcPtr)
        entry_done(symbol, funcPtr, -1, caller);
    return r;
}

TR_API cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                                    unsigned long long flags,
                                                    enum cudaDriverEntryPointQueryResult *driverStatus)
{
    const void *caller = __builtin_return_address(0);
    TR_REAL(real, fn_cudaGetDriverEntryPointByVersion, "cudaGetDriverEntryPointByVersion", TR_LIB_CUDART);
    if (!real)
        ENTRY_MISSING_RT("cudaGetDriverEntryPointByVersion");
    cudaError_t r = real(symbol, funcPtr, cudaVersion, flags, driverStatus);
    if (r == cudaSuccess)
        entry_done(symbol, funcPtr, cudaVersion > 0x7fffffffu ? 0 : (int)cudaVersion, caller);
    return r;
}

TR_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr,
                                                         unsigned int cudaVersion, unsigned long long flags,
                                                         enum cudaDriverEntryPointQueryResult *driverStatus)
{
    const void *caller = __builtin_return_address(0);
    TR_REAL(real, fn_cudaGetDriverEntryPointByVersion, "cudaGetDriverEntryPointByVersion_ptsz",
            TR_LIB_CUDART);
    if (!real)
        ENTRY_MISSING_RT("cudaGetDriverEntryPointByVersion_ptsz");
    cudaError_t r = real(symbol, funcPtr, cudaVersion, flags, driverStatus);
    if (r == cudaSuccess)
        entry_done(symbol, funcPtr, cudaVersion > 0x7fffffffu ? 0 : (int)cudaVersion, caller);
    return r;
}
