/* The Python exception a rank exits with (tr_pyexit.c, issue 21): read at
 * CPython's "sys.excepthook" audit event through a C audit hook registered
 * before the interpreter starts; stored in the ring (TRR_BLOB_PYEXC) and
 * the JSON trace ("python_exception"); docs/trace-format.md. Part of
 * stacks/python/'s boundary: included through tr_python.h. */
#ifndef TR_PYEXIT_H
#define TR_PYEXIT_H

#include "tr_core.h"

/* From the shim's constructor (tr_pyexit.c's, after tr_core.c's has read the settings):
 * in a process whose CPython interpreter is not initialized yet (a python
 * executable before its main), registers the audit hook
 * (PySys_AddAuditHook, found with dlsym). Nothing anywhere else: no
 * PySys_AddAuditHook in the process, Py_IsInitialized missing or true,
 * TRSHIM=0, TRSHIM_PYSTACK_DEPTH=0. */
void tr_pyexit_early(void);
/* At activation, after the ring is open (tr_init.c): reserves the ring's
 * record when the hook is registered. */
void tr_pyexit_init(void);
/* "python_exception" of the open top-level object of a trace, when one was seen. */
void tr_pyexit_write_json(tr_json *j);

#endif
