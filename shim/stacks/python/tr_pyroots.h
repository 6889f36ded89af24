/* Python's install folders (tr_pyroots.c, issue 18): where the process's
 * interpreter keeps its standard library and its installed distributions,
 * and the source trees of editable installs, recorded once per process so
 * that tranalyze tells a library's frame from the user's by where its file
 * was installed, not by the name of its folder. In stacks/python/, next to
 * tr_pystack.c, which writes them into the trace; the writer thread
 * collects them. Part of stacks/python/'s boundary: included through
 * tr_python.h. */
#ifndef TR_PYROOTS_H
#define TR_PYROOTS_H

#include "tr_core.h"

/* Collects the folders (file-system reads only, never the interpreter):
 * once per process, when a supported interpreter was found and Python
 * stacks are on; later calls return at once. Stores them in the ring file
 * (TRR_BLOB_PYROOTS). Called by the writer thread when it starts: its reads
 * (a few stat calls, pyvenv.cfg, /proc/self/cmdline, the .pth files of each
 * site folder, all bounded) never run on an application thread. */
void tr_pyroots_collect(void);

/* Writes "roots": {"stdlib": [...], "site": [...], "editable": [...]} into
 * the open "python" object once tr_pyroots_collect finished (nothing
 * before, nor without an interpreter). Async-signal-safe reads only. */
void tr_pyroots_write_json(tr_json *j);

#endif
