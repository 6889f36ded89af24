/* The NCCL vocabulary: every NCCL host function trshim knows (2.18 to 2.32)
 * and every operation a trace records. One table, read by the shim (its
 * wrappers' names, trshim.map), the analyzer (names, predicates), the
 * simulator's coverage test and, through tests/common/vocab.py (which
 * parses this file; `trshim-vocab` dumps it as JSON and a test compares
 * the two), the Python generators and checks.
 *
 * Adding a function: one line in TR_NCCL_FUNCS, its wrapper in shim/ when
 * its action is WRAP (tr_nccl.c, tr_lifecycle.c or tr_memory.c: the build
 * fails when a WRAP row has no wrapper, tr_nccl.c's check), its prototype in
 * trshim/nccl_abi.h, the simulator's implementation (tests/sim) and tests.
 * A function the loaded libnccl exports that is in neither list is named
 * in the trace ("unknown NCCL functions") and by tranalyze.
 */
#ifndef TRSHIM_NCCL_CALLS_H
#define TRSHIM_NCCL_CALLS_H

/* Operation flags (TR_NCCL_OPS' third column) */
#define TR_OPF_COLL 0x01        /* a collective: numbered per communicator (seq) */
#define TR_OPF_ROOTED 0x02      /* has a root */
#define TR_OPF_REDUCING 0x04    /* has a reduction op */
#define TR_OPF_P2P 0x08         /* two-sided send/receive: numbered per (communicator, peer, direction) */
#define TR_OPF_ONESIDED 0x10    /* one-sided signal/wait: numbered per (communicator, peer, direction) */
#define TR_OPF_GROUP 0x20       /* group bracket: no communicator */
#define TR_OPF_SENDS 0x40       /* the sending side of a P2P/ONESIDED pair */
#define TR_OPF_GRAPH 0x80       /* a CUDA graph launch replaying captured calls (not an NCCL call) */

/* Operations a record can hold. The numbering is the ring file's
 * (record.op) and never changes: new operations are appended.
 * X(ENUM SUFFIX, JSON name, flags, the operation it is an alias of) */
#define TR_NCCL_OPS(X)                                                                        \
    X(ALLREDUCE, "AllReduce", TR_OPF_COLL | TR_OPF_REDUCING, ALLREDUCE)                       \
    X(BROADCAST, "Broadcast", TR_OPF_COLL | TR_OPF_ROOTED, BROADCAST)                         \
    X(BCAST, "Bcast", TR_OPF_COLL | TR_OPF_ROOTED, BROADCAST)                                 \
    X(REDUCE, "Reduce", TR_OPF_COLL | TR_OPF_ROOTED | TR_OPF_REDUCING, REDUCE)                \
    X(ALLGATHER, "AllGather", TR_OPF_COLL, ALLGATHER)                                         \
    X(REDUCESCATTER, "ReduceScatter", TR_OPF_COLL | TR_OPF_REDUCING, REDUCESCATTER)           \
    X(ALLTOALL, "AlltoAll", TR_OPF_COLL, ALLTOALL)                                            \
    X(GATHER, "Gather", TR_OPF_COLL | TR_OPF_ROOTED, GATHER)                                  \
    X(SCATTER, "Scatter", TR_OPF_COLL | TR_OPF_ROOTED, SCATTER)                               \
    X(SEND, "Send", TR_OPF_P2P | TR_OPF_SENDS, SEND)                                          \
    X(RECV, "Recv", TR_OPF_P2P, RECV)                                                         \
    X(GROUPSTART, "GroupStart", TR_OPF_GROUP, GROUPSTART)                                     \
    X(GROUPEND, "GroupEnd", TR_OPF_GROUP, GROUPEND)                                           \
    X(PUTSIGNAL, "PutSignal", TR_OPF_ONESIDED | TR_OPF_SENDS, PUTSIGNAL)                      \
    X(SIGNAL, "Signal", TR_OPF_ONESIDED | TR_OPF_SENDS, SIGNAL)                               \
    X(WAITSIGNAL, "WaitSignal", TR_OPF_ONESIDED, WAITSIGNAL)                                  \
    X(GROUPSIMULATEEND, "GroupSimulateEnd", TR_OPF_GROUP, GROUPSIMULATEEND)                  \
    X(GRAPHLAUNCH, "GraphLaunch", TR_OPF_GRAPH, GRAPHLAUNCH)

/* Element types, in ncclDataType_t's order (a type's value is its row's
 * place; traces name it): X(ENUM SUFFIX, JSON name, bytes, FLOAT or INT) */
#define TR_NCCL_DTYPES(X)                 \
    X(INT8, "int8", 1, INT)               \
    X(UINT8, "uint8", 1, INT)             \
    X(INT32, "int32", 4, INT)             \
    X(UINT32, "uint32", 4, INT)           \
    X(INT64, "int64", 8, INT)             \
    X(UINT64, "uint64", 8, INT)           \
    X(FLOAT16, "float16", 2, FLOAT)       \
    X(FLOAT32, "float32", 4, FLOAT)       \
    X(FLOAT64, "float64", 8, FLOAT)       \
    X(BFLOAT16, "bfloat16", 2, FLOAT)     \
    X(FP8E4M3, "float8e4m3", 1, FLOAT)    \
    X(FP8E5M2, "float8e5m2", 1, FLOAT)

/* Reduction operations, in ncclRedOp_t's order (those made by
 * ncclRedOpCreatePreMulSum come after: "premulsum(N)"): X(ENUM SUFFIX, JSON name) */
#define TR_NCCL_REDOPS(X) X(SUM, "sum") X(PROD, "prod") X(MAX, "max") X(MIN, "min") X(AVG, "avg")

/* Kinds of NCCL host functions (TR_NCCL_FUNCS' third column) */
#define TR_NCCL_KINDS(X)                                                                      \
    X(COLL, "collective")        /* records a collective operation */                         \
    X(P2P, "p2p")                /* two-sided send/receive */                                 \
    X(ONESIDED, "one-sided")     /* signals, put with signal, waits */                        \
    X(GROUP, "group")                                                                          \
    X(COMM, "comm lifecycle")    /* creates, grows, splits, suspends or ends a communicator */ \
    X(MEMORY, "memory")          /* allocation and buffer/window registration */              \
    X(QUERY, "query")            /* reads a property or an error, changes nothing */          \
    X(PARAM, "parameter")        /* NCCL parameters (environment-like settings) */            \
    X(DEVICE, "device API")      /* host-side set-up of the device-initiated API */           \
    X(OTHER, "other")            /* reduction-op objects, debug and security settings */

/* Every NCCL host function of 2.18 to 2.32.
 * X(name, operation recorded (an op SUFFIX, or NONE), kind, NCCL version
 *   code of the first release that exports it (21800: 2.18 or older),
 *   WRAP (the shim wraps it) or PASS (called through unchanged: it cannot
 *   change what the communicators' sequence numbers or memory mean)) */
#define TR_NCCL_FUNCS(X)                                                                   \
    X(ncclAllReduce, ALLREDUCE, COLL, 21800, WRAP)                                          \
    X(ncclBroadcast, BROADCAST, COLL, 21800, WRAP)                                          \
    X(ncclBcast, BCAST, COLL, 21800, WRAP)                                                  \
    X(ncclReduce, REDUCE, COLL, 21800, WRAP)                                                \
    X(ncclAllGather, ALLGATHER, COLL, 21800, WRAP)                                          \
    X(ncclReduceScatter, REDUCESCATTER, COLL, 21800, WRAP)                                  \
    X(ncclAlltoAll, ALLTOALL, COLL, 22800, WRAP)                                            \
    X(ncclGather, GATHER, COLL, 22800, WRAP)                                                \
    X(ncclScatter, SCATTER, COLL, 22800, WRAP)                                              \
    X(ncclAllReduceConfig, ALLREDUCE, COLL, 23100, WRAP)                                    \
    X(ncclBroadcastConfig, BROADCAST, COLL, 23100, WRAP)                                    \
    X(ncclReduceConfig, REDUCE, COLL, 23100, WRAP)                                          \
    X(ncclAllGatherConfig, ALLGATHER, COLL, 23100, WRAP)                                    \
    X(ncclReduceScatterConfig, REDUCESCATTER, COLL, 23100, WRAP)                            \
    X(ncclAlltoAllConfig, ALLTOALL, COLL, 23100, WRAP)                                      \
    X(ncclGatherConfig, GATHER, COLL, 23100, WRAP)                                          \
    X(ncclScatterConfig, SCATTER, COLL, 23100, WRAP)                                        \
    X(ncclSend, SEND, P2P, 21800, WRAP)                                                     \
    X(ncclRecv, RECV, P2P, 21800, WRAP)                                                     \
    X(ncclPutSignal, PUTSIGNAL, ONESIDED, 22900, WRAP)                                      \
    X(ncclSignal, SIGNAL, ONESIDED, 22900, WRAP)                                            \
    X(ncclWaitSignal, WAITSIGNAL, ONESIDED, 22900, WRAP)                                    \
    X(ncclGroupStart, GROUPSTART, GROUP, 21800, WRAP)                                       \
    X(ncclGroupEnd, GROUPEND, GROUP, 21800, WRAP)                                           \
    X(ncclGroupSimulateEnd, GROUPSIMULATEEND, GROUP, 22200, WRAP)                           \
    X(ncclCommInitRank, NONE, COMM, 21800, WRAP)                                            \
    X(ncclCommInitRankConfig, NONE, COMM, 21800, WRAP)                                      \
    X(ncclCommInitAll, NONE, COMM, 21800, WRAP)                                             \
    X(ncclCommInitRankScalable, NONE, COMM, 22300, WRAP)                                    \
    X(ncclCommSplit, NONE, COMM, 21800, WRAP)                                               \
    X(ncclCommShrink, NONE, COMM, 22700, WRAP)                                              \
    X(ncclCommGrow, NONE, COMM, 22900, WRAP)                                                \
    X(ncclCommSuspend, NONE, COMM, 22900, WRAP)                                             \
    X(ncclCommResume, NONE, COMM, 22900, WRAP)                                              \
    X(ncclCommFinalize, NONE, COMM, 21800, WRAP)                                            \
    X(ncclCommDestroy, NONE, COMM, 21800, WRAP)                                             \
    X(ncclCommAbort, NONE, COMM, 21800, WRAP)                                               \
    X(ncclCommRevoke, NONE, COMM, 22800, WRAP)                                              \
    X(ncclMemAlloc, NONE, MEMORY, 21900, WRAP)                                              \
    X(ncclMemFree, NONE, MEMORY, 21900, WRAP)                                               \
    X(ncclCommRegister, NONE, MEMORY, 21900, PASS)                                          \
    X(ncclCommDeregister, NONE, MEMORY, 21900, PASS)                                        \
    X(ncclCommWindowRegister, NONE, MEMORY, 22700, PASS)                                    \
    X(ncclCommWindowDeregister, NONE, MEMORY, 22700, PASS)                                  \
    X(ncclWinGetUserPtr, NONE, MEMORY, 22900, PASS)                                         \
    X(ncclGetVersion, NONE, QUERY, 21800, PASS)                                             \
    X(ncclGetUniqueId, NONE, QUERY, 21800, PASS)                                            \
    X(ncclCommGetUniqueId, NONE, QUERY, 22900, PASS)                                        \
    X(ncclGetErrorString, NONE, QUERY, 21800, PASS)                                         \
    X(ncclGetLastError, NONE, QUERY, 21800, PASS)                                           \
    X(ncclCommGetAsyncError, NONE, QUERY, 21800, WRAP)                                      \
    X(ncclCommCount, NONE, QUERY, 21800, PASS)                                              \
    X(ncclCommCuDevice, NONE, QUERY, 21800, PASS)                                           \
    X(ncclCommUserRank, NONE, QUERY, 21800, PASS)                                           \
    X(ncclCommMemStats, NONE, QUERY, 22900, PASS)                                           \
    X(ncclCommQueryProperties, NONE, QUERY, 22900, PASS)                                    \
    X(ncclParamBind, NONE, PARAM, 23000, PASS)                                              \
    X(ncclParamDumpAll, NONE, PARAM, 23000, PASS)                                           \
    X(ncclParamGet, NONE, PARAM, 23000, PASS)                                               \
    X(ncclParamGetAllParameterKeys, NONE, PARAM, 23000, PASS)                               \
    X(ncclParamGetI8, NONE, PARAM, 23000, PASS)                                             \
    X(ncclParamGetI16, NONE, PARAM, 23000, PASS)                                            \
    X(ncclParamGetI32, NONE, PARAM, 23000, PASS)                                            \
    X(ncclParamGetI64, NONE, PARAM, 23000, PASS)                                            \
    X(ncclParamGetU8, NONE, PARAM, 23000, PASS)                                             \
    X(ncclParamGetU16, NONE, PARAM, 23000, PASS)                                            \
    X(ncclParamGetU32, NONE, PARAM, 23000, PASS)                                            \
    X(ncclParamGetU64, NONE, PARAM, 23000, PASS)                                            \
    X(ncclParamGetStr, NONE, PARAM, 23000, PASS)                                            \
    X(ncclParamGetParameter, NONE, PARAM, 23000, PASS)                                      \
    X(ncclDevCommCreate, NONE, DEVICE, 22800, PASS)                                         \
    X(ncclDevCommDestroy, NONE, DEVICE, 22800, PASS)                                        \
    X(ncclGetLsaDevicePointer, NONE, DEVICE, 22900, PASS)                                   \
    X(ncclGetLsaMultimemDevicePointer, NONE, DEVICE, 22900, PASS)                           \
    X(ncclGetMultimemDevicePointer, NONE, DEVICE, 22900, PASS)                              \
    X(ncclGetPeerDevicePointer, NONE, DEVICE, 22900, PASS)                                  \
    X(ncclGetCftDeviceLeInfo, NONE, DEVICE, 23100, PASS)                                    \
    X(ncclGetMultimemDeviceLeInfo, NONE, DEVICE, 23100, PASS)                               \
    X(ncclGetPeerDeviceLeInfo, NONE, DEVICE, 23100, PASS)                                   \
    X(ncclGinBarrierCreateRequirement, NONE, DEVICE, 22800, PASS)                           \
    X(ncclGinInboxA2ACreateRequirement, NONE, DEVICE, 22900, PASS)                          \
    X(ncclGinOutboxCreateRequirement, NONE, DEVICE, 22900, PASS)                            \
    X(ncclLLA2ACalcSlots, NONE, DEVICE, 22800, PASS)                                        \
    X(ncclLLA2ACreateRequirement, NONE, DEVICE, 22800, PASS)                                \
    X(ncclLsaBarrierCreateRequirement, NONE, DEVICE, 22800, PASS)                           \
    X(ncclTeamCft, NONE, DEVICE, 23100, PASS)                                               \
    X(ncclTeamCftMultimem, NONE, DEVICE, 23100, PASS)                                       \
    X(ncclTeamLsa, NONE, DEVICE, 22800, PASS)                                               \
    X(ncclTeamRail, NONE, DEVICE, 22800, PASS)                                              \
    X(ncclTeamRankToLsa, NONE, DEVICE, 22800, PASS)                                         \
    X(ncclTeamRankToWorld, NONE, DEVICE, 22800, PASS)                                       \
    X(ncclTeamWorld, NONE, DEVICE, 22800, PASS)                                             \
    X(ncclRedOpCreatePreMulSum, NONE, OTHER, 21800, PASS)                                   \
    X(ncclRedOpDestroy, NONE, OTHER, 21800, PASS)                                           \
    X(ncclResetDebugInit, NONE, OTHER, 22400, PASS)                                         \
    X(ncclResetDebugInitInternal, NONE, OTHER, 22800, PASS)                                 \
    X(ncclSetEncryption, NONE, OTHER, 23200, PASS)

/* ---- C views of the tables (not for the linker map, which includes only the lists) ---- */
#ifndef TR_NCCL_LISTS_ONLY

#define TR_OP_ENUM_(suffix, name, flags, alias) TR_OP_##suffix,
enum { TR_NCCL_OPS(TR_OP_ENUM_) TR_OP_N, TR_OP_NONE = -1 };
#undef TR_OP_ENUM_

#define TR_KIND_ENUM_(k, name) TR_NK_##k,
enum { TR_NCCL_KINDS(TR_KIND_ENUM_) TR_NK_N };
#undef TR_KIND_ENUM_

enum { TR_NA_WRAP, TR_NA_PASS };
#endif

#endif
