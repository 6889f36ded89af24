/* What the wrappers keep and the writer reads: record/'s boundary, the one
 * header of the folder a file outside it includes. Its parts: the NCCL
 * state (tr_nccl_int.h: communicators, groups, the last collective, the
 * vocabulary and the loaded library, *Config collectives' configs), GPU
 * completion and the hang watchdog (tr_complete.h), the environment of
 * each communicator (tr_envsnap.h), the system (tr_sysinfo.h), CUDA graphs
 * (tr_graphs.h) and memory accounting (tr_memtable.h, tr_memory_int.h). */
#ifndef TR_RECORD_H
#define TR_RECORD_H

#include "tr_core.h"
#include "tr_nccl_int.h"
#include "tr_complete.h"
#include "tr_envsnap.h"
#include "tr_sysinfo.h"
#include "tr_graphs.h"
#include "tr_memtable.h"
#include "tr_memory_int.h"

#endif
