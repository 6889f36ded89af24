/* The trace's "system" object (tr_sysinfo.c). Part of record/'s boundary:
 * included through tr_record.h. */
#ifndef TR_SYSINFO_H
#define TR_SYSINFO_H

#include "tr_core.h"

/* A communicator is being made on device dev (the application's thread):
 * its name, UUID and PCI bus id are asked once. */
void tr_sysinfo_note_device(int dev);
/* "system": versions as strings (from the integers the writer asked),
 * the kernel driver, the devices noted, the frameworks loaded, the
 * launchers. */
void tr_sysinfo_write_json(tr_json *j, int nccl, int cuda_runtime, int cuda_driver);

#endif
