/* The GPU engine of the NaN/Inf check: the loader of tr_nangpu.cu's kernels
 * (tr_nangpu.c). Uses only the CUDA driver API, found at run time
 * (libcuda.so.1), so it works whatever CUDA runtime the application uses;
 * it never calls the runtime, never synchronizes, and leaves the runtime's
 * error state alone (driver calls have no part in it). Private to nan/ (its
 * boundary: tr_nancheck.h). */
#ifndef TR_NANGPU_H
#define TR_NANGPU_H

#include <stdint.h>

#include "tr_core.h"
#include "tr_nanscan.h"

enum {
    TR_NANGPU_OK = 0,
    TR_NANGPU_NOT_BUILT,      /* the shim was built without nvcc */
    TR_NANGPU_NO_DRIVER,      /* a driver function is missing (no libcuda, the simulator) */
    TR_NANGPU_LOAD_FAILED,    /* cuModuleLoadData or cuModuleGetFunction failed in this context */
    TR_NANGPU_NO_SLOT,        /* every result slot is in flight */
    TR_NANGPU_HOSTMEM_FAILED, /* the mapped result memory could not be allocated */
    TR_NANGPU_CTX_FAILED,     /* the stream's context could not be found or made current */
    TR_NANGPU_LAUNCH_FAILED,  /* cuLaunchKernel failed */
};

/* 1 when the kernels are built into the shim. */
int tr_nangpu_built(void);

/* Whether the engine can run on stream's context (loads the module there
 * the first time: the only slow step, once per context). Returns
 * TR_NANGPU_OK or why not, with the CUresult in *err. */
int tr_nangpu_ready(void *stream, int *err);

/* Enqueues on stream the check of the n elements of dtype at dev: the scan
 * kernel, then the one-thread kernel that publishes the result into mapped
 * host memory. tag comes back with the result (tr_nangpu_poll). Returns
 * TR_NANGPU_OK or why it could not, with the CUresult in *err; after a
 * failure nothing of the check runs. */
int tr_nangpu_enqueue(void *stream, int dtype, const void *dev, uint64_t n, uint64_t tag, int *err);

/* Hands every check whose result has arrived to done(tag, result, arg);
 * returns the number still in flight. From one thread at a time. */
int tr_nangpu_poll(void (*done)(uint64_t tag, const tr_nanscan_result *r, void *arg), void *arg);

/* Stops polling for good (process exit: the mapped memory may go away). */
void tr_nangpu_stop(void);

/* The name of a CUresult ("CUDA_ERROR_..."), or NULL. */
static inline const char *tr_nangpu_error_name(int err) { return tr_cu_error_name(err); }

#endif
