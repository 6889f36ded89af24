/* The init room: activation on the first recorded call and the exit write,
 * shim/'s own file, above every folder but wrap/ (tr_core.h), whose wrappers
 * call it (tr_enter, tr_init.h). It calls down into the trace folder, the
 * ring, the Python stacks, the completion poller and the writer; nothing
 * below calls it. */
#include <pthread.h>
#include <stdlib.h>

#include "tr_record.h"
#include "tr_core.h"
#include "tr_init.h"
#include "tr_stacks.h"
#include "tr_ring.h"
#include "tr_write.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void at_exit(void)
{
    if (!tr_is_forked_child()) tr_writer_exit();
}

/* One line per job and host, so that a run recording to an unexpected
 * place (or not at all) is noticed: printed by local rank 0, or by a
 * process no launcher numbered; not when the folder was refused (its own
 * line said so) or TRSHIM_QUIET=1. */
static void say_recording(void)
{
    const tr_process *proc = tr_proc();
    int first_here = proc->local_rank >= 0 ? proc->local_rank == 0 : proc->env_rank <= 0;
    if (tr_cfg()->quiet || !first_here || tr_dir_refused()) return;
    char job[300];
    const char *source;
    tr_job_id(job, sizeof job, &source, 0);
    if (proc->job_source) tr_warn("recording to %s (job %s)", tr_dir_path(), job);
    else tr_warn("recording to %s (job named by its first communicator)", tr_dir_path());
}

static void activate_once(void)
{
    tr_print_setting_warnings();
    tr_dir_setup();      /* TRSHIM_DIR against the folder of the first call; checked by tr_ring_open */
    tr_ring_open();      /* before anything records: the file behind every record */
    say_recording();
    tr_pystack_init();   /* the CPython interpreter, if any (before the first capture) */
    tr_pyexit_init();    /* the ring's record of the exiting Python exception (tr_pyexit.c) */
    tr_complete_start(); /* the completion poller: heartbeat, GPU completion, watchdog */
    tr_writer_start();
    atexit(at_exit);
    tr_mark_active();
}

void tr_activate(void)
{
    if (!tr_cfg()->enabled || tr_is_forked_child()) return;
    pthread_once(&g_once, activate_once);
}
