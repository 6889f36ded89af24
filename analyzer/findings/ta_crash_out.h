/* The rank that died (issue 21), said: crash_out.c writes a rank's crash,
 * its uncaught Python exception and its first CUDA / NCCL errors (read by
 * load/crash.c) in the root cause's messages and --json, over jw;
 * aborted_out.c a job its communicators' abort ended.
 * (A part of findings/' boundary header, ta_finding.h, which includes it.) */
#ifndef TA_CRASH_OUT_H
#define TA_CRASH_OUT_H

#include "model/ta_model.h"

/* ---- crash_out.c ---- */
/* "crashed with SIGSEGV (address 0xc, SEGV_MAPERR) in f (x.c:1) <- g (x.c:2) <- main (x.c:3)[ on thread "n"][: message]";
 * NULL when t has no crash */
char *ta_crash_text(ta_an *a, const ta_trace *t);
/* "exited with an uncaught Python exception ValueError: bad batch 6 (raised at train.py:12 in load_batch)"
 * (or how it ended, then ", after an uncaught Python exception ..."); NULL when t has none */
char *ta_pyexc_text(ta_an *a, const ta_trace *t);
/* the first error of kind (TRR_ERR_CUDA, TRR_ERR_NCCL), NULL */
const ta_error *ta_first_error(const ta_trace *t, int kind);
/* "CUDA error cudaErrorIllegalAddress (700) returned by cudaStreamSynchronize at sync_step (x.c:130)" */
char *ta_error_text(ta_an *a, const ta_trace *t, const ta_error *e);

/* ", after CUDA error ... returned by ..." for each kind of error t saw; "" none */
char *ta_errors_suffix(ta_an *a, const ta_trace *t);

/* "; ranks 0, 1, 3's NCCL reported a remote error (ncclRemoteError) after rank 2 died: ncclCommGetAsyncError at
 * f (x.c:1)": the first NCCL errors of the ranks that are not among the culprits (traces cul_t), one sentence per
 * error; "" none */
char *ta_peer_errors_text(ta_an *a, const int *cul_t, int ncul);

struct ta_jw;
/* --json (out_json.c): a rank's "crash" (null: none), "python_exception" (null: none) and "errors" ([] none) */
void ta_crash_json_out(struct ta_jw *w, ta_an *a, const ta_trace *t);

/* ---- aborted_out.c: a job its communicators' abort ended (the operations it released, aborted.c) ---- */
/* "the job was ended by ncclCommAbort (...): ranks 0-3 aborted their communicators at ..., 15.0 s after the
 * oldest of them was enqueued; the 4 operations ..."; NULL when no abort released an operation */
char *ta_abort_text(const ta_an *a);
/* --json: "aborted": {ranks, time, released, waited_s, message} or null */
void ta_abort_json(struct ta_jw *w, const ta_an *a);

#endif
