/* Two host functions of an NCCL newer than trshim knows (test_shim.py case
 * "newer_nccl"): the shim must name them in the trace, and tranalyze warn
 * that calls through them are missing. Loud, like every function the
 * simulator cannot do. */
#include <stdio.h>

__attribute__((visibility("default"))) int ncclFutureAllReduce(void)
{
    fputs("trsim: ncclFutureAllReduce is not supported by the simulator\n", stderr);
    return 5;   /* ncclInvalidUsage */
}

__attribute__((visibility("default"))) int ncclFutureQuery(void)
{
    fputs("trsim: ncclFutureQuery is not supported by the simulator\n", stderr);
    return 5;
}
