/* What tr_ring.c (the file, records, communicators) shares with
 * tr_ring_blobs.c (the blob area) and tr_ring_live.c (the header's live
 * fields: hang, pending operations, memory) and nothing else. */
#ifndef TR_RING_INT_H
#define TR_RING_INT_H

#include "tr_ring.h"

typedef struct {
    trr_header *hdr;
    char *base;                 /* the blob area: hdr->off_blobs into the mapping */
    uint64_t bytes;             /* its size */
} tr_blob_area;

/* NULL while there is no ring. */
const tr_blob_area *tr_ring_blob_area(void);
/* The mapped header, NULL while there is no ring. */
trr_header *tr_ring_header(void);
/* [off, off + len) of the ring file backed on disk before anything is
 * stored there: 0 (also when the ring is not a file, or its file system
 * allocates no blocks ahead), else the error. */
int tr_ring_back_file(uint64_t off, uint64_t len);

#endif
