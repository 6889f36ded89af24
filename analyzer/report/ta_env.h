/* The environment in --json (out_env.c).
 * (Private to report/: its boundary header is ta_out.h.) */
#ifndef TA_ENV_H
#define TA_ENV_H

#include "findings/ta_finding.h"
#include "model/ta_model.h"

/* the "NAME=value" strings every rank with an environment shares (pointers
 * into the traces; the array is malloc'd), *n of them */
char **ta_env_shared(ta_an *a, int *n);
/* the top-level "environment": the shared variables */
void ta_json_env_shared(ta_jw *w, char **shared, int n);
/* a rank's "environment": its system, its variables not shared, the shared
 * ones it lacks, its env_changes */
void ta_json_env_rank(ta_jw *w, const ta_trace *t, char **shared, int n);

#endif
