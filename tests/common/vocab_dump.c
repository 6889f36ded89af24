/* trshim-vocab: prints the NCCL vocabulary (include/trshim/nccl_calls.h) and
 * the fields of a trace's rows (include/trshim/trace_format.h) as
 * the C compiler sees it, as JSON (the document tests/common/vocab.py's
 * as_json() builds by parsing the header): tests/nccl/check_vocab.py
 * compares the two, so the Python side cannot drift from the C one. */
#include <stdio.h>

#include "trshim/nccl_calls.h"
#include "trshim/trace_format.h"
#include "trshim/cuda_calls.h"

static void flag_list(unsigned f)
{
    static const char *const names[] = {"COLL", "ROOTED", "REDUCING", "P2P", "ONESIDED", "GROUP", "SENDS", "GRAPH"};
    /* printed in sorted order, as Python's sorted() does */
    static const int order[] = {0, 7, 5, 4, 3, 2, 1, 6};   /* COLL GRAPH GROUP ONESIDED P2P REDUCING ROOTED SENDS */
    int first = 1;
    putchar('[');
    for (int i = 0; i < 8; i++)
        if (f & (1u << order[i])) printf("%s\"%s\"", first ? "" : ", ", names[order[i]]), first = 0;
    putchar(']');
}

#define OP_NAME(suffix, name, flags, alias) name,
static const char *const op_names[] = {TR_NCCL_OPS(OP_NAME)};
#define OP_ROW(suffix, name, flags, alias)                                      \
    printf("%s{\"name\": \"%s\", \"flags\": ", n++ ? ", " : "", name);        \
    flag_list(flags);                                                           \
    printf(", \"alias\": \"%s\"}", op_names[TR_OP_##alias]);
#define KIND_ROW(k, desc) printf("%s\"%s\": \"%s\"", n++ ? ", " : "", #k, desc);
#define FUNC_ROW(name, op, kind, since, action)                                                            \
    printf("%s{\"name\": \"%s\", \"op\": ", n++ ? ", " : "", #name);                                      \
    if (TR_OP_##op == TR_OP_NONE) printf("null"); else printf("\"%s\"", op_names[TR_OP_##op]);            \
    printf(", \"kind\": \"%s\", \"since\": %d, \"action\": \"%s\"}", #kind, since, #action);

#define DTYPE_ROW(id, name, bytes, kind) \
    printf("%s\"%s\": {\"bytes\": %d, \"float\": %s}", n++ ? ", " : "", name, bytes, #kind[0] == 'F' ? "true" : "false");
#define CUDA_ROW(name, lib, about) \
    printf("%s\"%s\": {\"lib\": \"%s\", \"about\": \"%s\"}", n++ ? ", " : "", #name, #lib, #about);
#define REDOP_ROW(id, name) printf("%s\"%s\"", n++ ? ", " : "", name);
#define FIELD_ROW(id, name, read, since) \
    printf("%s{\"name\": \"%s\", \"read\": \"%s\", \"since\": \"%s\"}", n++ ? ", " : "", name, #read, #since);

/* one member of the document: key, then the table's rows inside open ... close */
#define MEMBER(first, key, open, table, row) \
    printf("%s\"%s\": %c", first ? "{" : ", ", key, open); \
    n = 0;                                                  \
    table(row)                                              \
    putchar(open == '[' ? ']' : '}');

int main(void)
{
    int n = 0;
    MEMBER(1, "ops", '[', TR_NCCL_OPS, OP_ROW)
    MEMBER(0, "kinds", '{', TR_NCCL_KINDS, KIND_ROW)
    MEMBER(0, "functions", '[', TR_NCCL_FUNCS, FUNC_ROW)
    MEMBER(0, "dtypes", '{', TR_NCCL_DTYPES, DTYPE_ROW)
    MEMBER(0, "redops", '[', TR_NCCL_REDOPS, REDOP_ROW)
    MEMBER(0, "cuda_functions", '{', TR_CUDA_FUNCS, CUDA_ROW)
    MEMBER(0, "call_fields", '[', TRSHIM_CALL_FIELDS, FIELD_ROW)
    MEMBER(0, "check_fields", '[', TRSHIM_CHECK_FIELDS, FIELD_ROW)
    printf("}\n");
    return 0;
}
