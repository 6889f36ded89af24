/* Prints the C layout of include/trshim/ring_format.h as JSON (offsets of
 * every field, sizes), for check_ring.py to compare with gen_ring.py's
 * Python struct formats: a change of the header that the test writer does
 * not follow fails the test instead of producing wrong files. */
#include <stddef.h>
#include <stdio.h>

#include "trshim/ring_format.h"

#define F(s, f) printf("%s\"%s\": %zu", first ? "" : ", ", #f, offsetof(s, f)), first = 0
#define BEGIN(name) printf("%s\"%s\": {", nstruct++ ? ", " : "", name), first = 1
#define END(s) printf(", \"_size\": %zu}", sizeof(s))

int main(void)
{
    int first, nstruct = 0;
    printf("{");
    BEGIN("header");
    F(trr_header, magic); F(trr_header, version); F(trr_header, header_bytes); F(trr_header, record_bytes);
    F(trr_header, comm_bytes); F(trr_header, capacity); F(trr_header, max_comms); F(trr_header, fp_interval);
    F(trr_header, off_comms); F(trr_header, off_records); F(trr_header, off_blobs); F(trr_header, blob_bytes);
    F(trr_header, file_bytes); F(trr_header, pid); F(trr_header, env_rank); F(trr_header, world_size);
    F(trr_header, local_rank); F(trr_header, start_realtime); F(trr_header, start_mono_ns); F(trr_header, host);
    F(trr_header, job_id); F(trr_header, job_source); F(trr_header, rank_source); F(trr_header, trshim_version);
    F(trr_header, stack_depth); F(trr_header, pad0); F(trr_header, head); F(trr_header, ncomms);
    F(trr_header, state); F(trr_header, signo); F(trr_header, writes); F(trr_header, heartbeat_ns);
    F(trr_header, end_ns); F(trr_header, blob_used); F(trr_header, stacks_dropped); F(trr_header, comms_dropped);
    F(trr_header, hang_sec); F(trr_header, stalls); F(trr_header, stall_ns); F(trr_header, stall_rec);
    F(trr_header, stall_since_ns); F(trr_header, pending); F(trr_header, pad2); F(trr_header, pending_since_ns);
    F(trr_header, pass_ns); F(trr_header, mem); F(trr_header, mem_devices_dropped);
    F(trr_header, lost_errno); F(trr_header, file_comms); F(trr_header, file_records);
    END(trr_header);
    BEGIN("mem");
    F(trr_mem, used); F(trr_mem, device); F(trr_mem, live); F(trr_mem, peak); F(trr_mem, allocs); F(trr_mem, frees);
    F(trr_mem, peak_ns); F(trr_mem, failures); F(trr_mem, fail_bytes); F(trr_mem, fail_live); F(trr_mem, fail_free);
    F(trr_mem, fail_total); F(trr_mem, fail_ns); F(trr_mem, fail_stack); F(trr_mem, fail_pystack);
    F(trr_mem, fail_code); F(trr_mem, fail_api);
    END(trr_mem);
    BEGIN("record");
    F(trr_record, stamp); F(trr_record, state); F(trr_record, op); F(trr_record, depth); F(trr_record, capturing);
    F(trr_record, gpu); F(trr_record, comm); F(trr_record, dtype); F(trr_record, redop); F(trr_record, root);
    F(trr_record, stack); F(trr_record, tid); F(trr_record, device); F(trr_record, rc); F(trr_record, group);
    F(trr_record, pystack); F(trr_record, seq); F(trr_record, count); F(trr_record, sendbuff);
    F(trr_record, recvbuff); F(trr_record, stream); F(trr_record, enter_ns); F(trr_record, exit_ns);
    F(trr_record, done_ns); F(trr_record, extra);
    END(trr_record);
    BEGIN("comm");
    F(trr_comm, valid); F(trr_comm, kind); F(trr_comm, id); F(trr_comm, parent_id); F(trr_comm, parent);
    F(trr_comm, blocking); F(trr_comm, has_color); F(trr_comm, color); F(trr_comm, key); F(trr_comm, group);
    F(trr_comm, init_enter); F(trr_comm, init_stack); F(trr_comm, from_uid); F(trr_comm, size); F(trr_comm, rank);
    F(trr_comm, device); F(trr_comm, init_done); F(trr_comm, init_rc); F(trr_comm, end_kind); F(trr_comm, init_exit);
    F(trr_comm, end_enter); F(trr_comm, end_exit); F(trr_comm, end_rc); F(trr_comm, pad); F(trr_comm, colls);
    F(trr_comm, fp_seq); F(trr_comm, fp_hash); F(trr_comm, fp_step); F(trr_comm, ncheckpoints);
    F(trr_comm, checkpoints); F(trr_comm, grow_uid); F(trr_comm, grow_ranks); F(trr_comm, suspended);
    F(trr_comm, suspends); F(trr_comm, pad1);
    END(trr_comm);
    BEGIN("module");
    F(trr_module, index); F(trr_module, path_len); F(trr_module, base); F(trr_module, lo); F(trr_module, hi);
    F(trr_module, build_id);
    END(trr_module);
    BEGIN("stack");
    F(trr_stack, index); F(trr_stack, n);
    END(trr_stack);
    BEGIN("blob");
    F(trr_blob, kind); F(trr_blob, bytes);
    END(trr_blob);
    BEGIN("pycode");
    F(trr_pycode, index); F(trr_pycode, firstlineno); F(trr_pycode, file_len); F(trr_pycode, name_len);
    END(trr_pycode);
    BEGIN("pystack");
    F(trr_pystack, index); F(trr_pystack, n);
    END(trr_pystack);
    BEGIN("pyframe");
    F(trr_pyframe, code); F(trr_pyframe, line);
    END(trr_pyframe);
    BEGIN("collconfig");
    F(trr_collconfig, index); F(trr_collconfig, is_null); F(trr_collconfig, min_ctas); F(trr_collconfig, max_ctas);
    F(trr_collconfig, nvls_ctas); F(trr_collconfig, cga_cluster_size); F(trr_collconfig, force_alg);
    F(trr_collconfig, cta_policy); F(trr_collconfig, user_tag); F(trr_collconfig, alg_len); F(trr_collconfig, pad);
    END(trr_collconfig);
    BEGIN("ncclinfo");
    F(trr_ncclinfo, version); F(trr_ncclinfo, exports); F(trr_ncclinfo, path_len); F(trr_ncclinfo, unknown_len);
    END(trr_ncclinfo);
    BEGIN("graph");
    F(trr_graph, index); F(trr_graph, ncalls); F(trr_graph, capture_id); F(trr_graph, stream); F(trr_graph, graph);
    F(trr_graph, stack); F(trr_graph, pystack); F(trr_graph, end_stack); F(trr_graph, end_pystack);
    F(trr_graph, dropped); F(trr_graph, base);
    END(trr_graph);
    BEGIN("graph_call");
    F(trr_graph_call, op); F(trr_graph_call, lane); F(trr_graph_call, pad); F(trr_graph_call, comm);
    F(trr_graph_call, dtype); F(trr_graph_call, redop); F(trr_graph_call, root); F(trr_graph_call, stack);
    F(trr_graph_call, pystack); F(trr_graph_call, pad2); F(trr_graph_call, count); F(trr_graph_call, sendbuff);
    F(trr_graph_call, recvbuff); F(trr_graph_call, stream); F(trr_graph_call, n); F(trr_graph_call, extra);
    END(trr_graph_call);
    printf(", \"constants\": {\"header_bytes\": %d, \"record_bytes\": %d, \"comm_bytes\": %d, \"checkpoints\": %d, "
           "\"version\": %d, \"magic\": \"%s\", \"blob_kinds\": [%d, %d, %d, %d, %d, %d, %d], "
           "\"lanes\": [%d, %d, %d, %d, %d], \"graph_max_calls\": %d, \"mem_devices\": %d}}\n",
           TRR_HEADER_BYTES, TRR_RECORD_BYTES, TRR_COMM_BYTES, TRR_COMM_CHECKPOINTS, TRSHIM_RING_VERSION,
           TRSHIM_RING_MAGIC, TRR_BLOB_MODULE, TRR_BLOB_STACK, TRR_BLOB_PYCODE, TRR_BLOB_PYSTACK,
           TRR_BLOB_COLLCONFIG, TRR_BLOB_NCCLINFO, TRR_BLOB_GRAPH, TRR_LANE_SEND, TRR_LANE_RECV, TRR_LANE_SIGNAL,
           TRR_LANE_WAIT, TRR_LANE_COLL, TRR_GRAPH_MAX_CALLS, TRR_MEM_DEVICES);
    return 0;
}
