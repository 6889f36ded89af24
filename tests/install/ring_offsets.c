/* Prints, as JSON, the parts of include/trshim/ring_format.h that trshim's
 * own ring reader uses (python/trshim/ringfile.py, trshim bundle), as the
 * compiler lays them out: each field's offset, size and kind, in the
 * struct's order, the structs' sizes and the constants the reader checks.
 * check_ring_header.py compares them with ringfile.py's tables, so that a
 * change of the header that the Python reader does not follow fails a test
 * instead of bundling misread rings. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trshim/ring_format.h"

/* u, i: unsigned, signed integer; f: floating point; s: characters (an
 * array of char is a char * in a generic selection) */
#define KIND(e)                                                                \
    _Generic((e), char *: "s", int8_t: "i", int16_t: "i", int32_t: "i",       \
             int64_t: "i", uint8_t: "u", uint16_t: "u", uint32_t: "u",         \
             uint64_t: "u", float: "f", double: "f", default: "?")
#define FIELD(s, f)                                                            \
    field(#f, offsetof(s, f), sizeof(((s *)0)->f), KIND(((s *)0)->f))

static int nparts, nfields;

/* a struct's list of fields, "name": [[field, offset, size, kind], ...] */
static void part(const char *name)
{
    printf("%s\"%s\": [", nparts++ ? "], " : "{", name);
    nfields = 0;
}

static void field(const char *name, size_t off, size_t size, const char *kind)
{
    printf("%s[\"%s\", %zu, %zu, \"%s\"]", nfields++ ? ", " : "", name, off, size, kind);
}

int main(void)
{
    /* trr_header from its start to comms_dropped: the fields ringfile.py unpacks and packs again */
    part("header");
    FIELD(trr_header, magic); FIELD(trr_header, version); FIELD(trr_header, header_bytes);
    FIELD(trr_header, record_bytes); FIELD(trr_header, comm_bytes); FIELD(trr_header, capacity);
    FIELD(trr_header, max_comms); FIELD(trr_header, fp_interval); FIELD(trr_header, off_comms);
    FIELD(trr_header, off_records); FIELD(trr_header, off_blobs); FIELD(trr_header, blob_bytes);
    FIELD(trr_header, file_bytes); FIELD(trr_header, pid); FIELD(trr_header, env_rank);
    FIELD(trr_header, world_size); FIELD(trr_header, local_rank); FIELD(trr_header, start_realtime);
    FIELD(trr_header, start_mono_ns); FIELD(trr_header, host); FIELD(trr_header, job_id);
    FIELD(trr_header, job_source); FIELD(trr_header, rank_source); FIELD(trr_header, trshim_version);
    FIELD(trr_header, stack_depth); FIELD(trr_header, pad0); FIELD(trr_header, head);
    FIELD(trr_header, ncomms); FIELD(trr_header, state); FIELD(trr_header, signo); FIELD(trr_header, writes);
    FIELD(trr_header, heartbeat_ns); FIELD(trr_header, end_ns); FIELD(trr_header, blob_used);
    FIELD(trr_header, stacks_dropped); FIELD(trr_header, comms_dropped);
    /* trr_comm from its start to rank */
    part("comm");
    FIELD(trr_comm, valid); FIELD(trr_comm, kind); FIELD(trr_comm, id); FIELD(trr_comm, parent_id);
    FIELD(trr_comm, parent); FIELD(trr_comm, blocking); FIELD(trr_comm, has_color); FIELD(trr_comm, color);
    FIELD(trr_comm, key); FIELD(trr_comm, group); FIELD(trr_comm, init_enter); FIELD(trr_comm, init_stack);
    FIELD(trr_comm, from_uid); FIELD(trr_comm, size); FIELD(trr_comm, rank);
    part("blob");
    FIELD(trr_blob, kind); FIELD(trr_blob, bytes);
    printf("], \"sizes\": {\"header\": %zu, \"comm\": %zu, \"blob\": %zu}", sizeof(trr_header), sizeof(trr_comm),
           sizeof(trr_blob));
    printf(", \"constants\": {\"TRSHIM_RING_MAGIC\": \"%s\", \"TRSHIM_RING_VERSION\": %d, \"TRR_HEADER_BYTES\": %d, "
           "\"TRR_RECORD_BYTES\": %d, \"TRR_COMM_BYTES\": %d, \"TRR_RUNNING\": %d, \"TRR_EXITED\": %d, "
           "\"TRR_SIGNALED\": %d, \"TRR_BLOB_END\": %d}",
           TRSHIM_RING_MAGIC, TRSHIM_RING_VERSION, TRR_HEADER_BYTES, TRR_RECORD_BYTES, TRR_COMM_BYTES, TRR_RUNNING,
           TRR_EXITED, TRR_SIGNALED, TRR_BLOB_END);
    printf("}\n");
    return 0;
}
