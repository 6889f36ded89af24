/* Trace files (tr_writer.c): write/'s boundary, the one header of the
 * folder a file outside it includes. */
#ifndef TR_WRITE_H
#define TR_WRITE_H

/* Starts the writer thread, which serves the write queue, and installs the
 * signal handlers (at activation: tr_init.c). */
void tr_writer_start(void);
/* The exit-time write: synchronous, from the exiting thread (tr_init.c's
 * atexit handler). */
void tr_writer_exit(void);

#endif
