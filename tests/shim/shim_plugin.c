/* A library the application dlopen()s with RTLD_LOCAL (test_shim.py case
 * "dlopen"), linked against a libnccl.so.2 that therefore never reaches the
 * global scope: the shim must still find the real functions. Only NCCL's
 * wrapped functions and unwrapped runtime calls are used (the runtime's
 * wrapped ones live under libcudart's soname, which this library lacks). */
#include <stdio.h>
#include <cuda_runtime.h>
#include <nccl.h>

__attribute__((visibility("default"))) int plugin_run(void)
{
    ncclUniqueId id;
    ncclComm_t comm;
    float in[4] = {1, 2, 3, 4}, out[4] = {0, 0, 0, 0};
    if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
    if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) return 2;
    for (int i = 0; i < 3; i++)
        if (ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess) return 3;
    if (cudaStreamSynchronize(NULL) != cudaSuccess) return 4;
    for (int i = 0; i < 4; i++)
        if (out[i] != in[i]) return 5;
    if (ncclCommDestroy(comm) != ncclSuccess) return 6;
    return 0;
}
