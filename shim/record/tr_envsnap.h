/* The environment each communicator was created in (tr_envsnap.c). Part of
 * record/'s boundary: included through tr_record.h. */
#ifndef TR_ENVSNAP_H
#define TR_ENVSNAP_H

#include <stdint.h>

#include "tr_core.h"

/* The live environment's wanted variables, redacted, kept when they differ
 * from the last kept ones; comm_id: the communicator being created (0:
 * not known yet). */
void tr_env_capture(uint64_t comm_id);
/* The trace's "env", "env_changes" and "env_changes_dropped". */
void tr_env_write_json(tr_json *j);

#endif
