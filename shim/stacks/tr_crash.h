/* The rank that died: where it crashed and why (tr_crash.c). The fatal
 * signal's site, captured by the signal handler itself (the faulting
 * thread's native stack unwound from the signal context, the faulting
 * address and si_code, glibc's abort message, an uncaught C++ exception),
 * and the first sticky CUDA error and asynchronous NCCL error the rank saw.
 * Stored in the ring file (TRR_BLOB_CRASH, TRR_BLOB_ERROR) and in the JSON
 * trace ("crash", "errors"); docs/trace-format.md. Part of stacks/'s
 * boundary: included through tr_stacks.h. */
#ifndef TR_CRASH_H
#define TR_CRASH_H

#include <signal.h>
#include <stdint.h>

#include "tr_core.h"
#include "tr_python.h"

/* At activation, before the signal handlers are installed (tr_writer.c):
 * reserves the ring's crash record and looks up, once, what the handler
 * may read later (glibc's __abort_msg, libstdc++'s exception helpers). */
void tr_crash_init(void);
/* From the fatal-signal handler, first thing (tr_writer.c), for every
 * signal it takes: for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT, the
 * first crash of the process is captured into the ring's crash record
 * (async-signal-safe: no allocation, no lock; at most TRR_CRASH_FRAMES
 * frames). A fault inside the capture itself (a corrupt stack) ends the
 * capture there (siglongjmp back into it): it never returns then. */
void tr_crash_signal(int sig, siginfo_t *si, void *uc);
/* The writer thread, before a write: interns the crash stack (so that
 * "stacks" and the ring's stack blobs hold it). Cheap when no crash. */
void tr_crash_prepare(void);
/* "crash" (when a crash was captured) and "errors" (when any) members of
 * the open top-level object of a trace. */
void tr_crash_write_json(tr_json *j);

/* An error a call returned, for the first-error records: kind TRR_ERR_CUDA
 * (code a cudaError_t) or TRR_ERR_NCCL (an ncclResult_t); api the call,
 * name the error's name (NULL: looked up for CUDA), stack/pystack where the
 * call was made (-1), comm the ring's comm slot (-1). Only the first error
 * of each kind is kept (a sticky CUDA error, an asynchronous NCCL error);
 * 0 (success) and codes that are not errors of that kind are ignored. Not
 * async-signal-safe; cheap after the first. */
void tr_crash_error(int kind, int code, const char *name, const char *api, int32_t stack, int32_t pystack,
                    int32_t comm);
/* tr_pystack.c: a fatal signal's Python frames interned as a stack by
 * the writer thread; its index, -1 */
int32_t tr_pystack_intern_frames(const tr_py_frame *fr, int n);
/* Whether a cudaError_t is a sticky one (the context is unusable:
 * illegal address, launch failure, ECC, assert...). */
int tr_crash_cuda_sticky(int code);

#endif
