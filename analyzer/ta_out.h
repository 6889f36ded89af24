/* The documents: --json (out_json.c, docs/analysis-format.md), text and
 * --markdown (out_text.c). */
#ifndef TA_OUT_H
#define TA_OUT_H

#include <stdio.h>

#include "ta_model.h"

void ta_out_text(ta_an *a, FILE *o);
void ta_out_json(ta_an *a, FILE *o);
void ta_out_markdown(ta_an *a, FILE *o);

#endif
