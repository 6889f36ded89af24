#!/usr/bin/env python3
"""Runs one real PyTorch job of the torch suite on the simulated runtime,
under libtrshim.so, started by torchrun or by the DeepSpeed launcher as a
user would, then runs tranalyze --json on its traces and checks the answer:
exit status, and for each expected finding from the top its kind, culprit
ranks, others, sequence number and the exact line of the job script
(a `# planted: TAG` comment marks each line an expectation names).

    run_torch.py SHIM SIM_DIR TRANALYZE WORKDIR VENV_SH CASE

SIM_DIR holds libtrsim.so and driver/ (libcuda.so.1, libnvidia-ml.so.1);
VENV_SH (tests/pytorch/venv.sh) prints the virtual environment, installing it
once. The job runs in its own session; a job that must hang is stopped after
its case's seconds with SIGTERM to the whole session (every rank writes its
trace; launchers then kill what is left), a clean one must exit 0. A case
whose expectation says "end": "watchdog" runs with a short process-group
timeout (PG_TIMEOUT, passed to init_process_group and new_group) and must
end by itself within PG_TIMEOUT + 60 s (the harness having to stop it is a
failure): PyTorch's watchdog aborts the hung communicators (ncclCommAbort:
its timeout and abort in every rank's log, an Abort in every rank's trace),
then the process (SIGABRT); the answer must be the one the same job gets
when SIGTERM ends it. "comm_ranks" in an expected finding: the members of
its communicator.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.join(HERE, "jobs")
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from trace import load_trace  # noqa: E402

# name: launcher, ranks, the job, seconds before a hung job is stopped (None:
# it must exit by itself), environment, expected tranalyze answer. Findings:
# "site": TAG names the line marked `# planted: TAG` in the job script.
# PyTorch's watchdog (issue 30): a case whose answer says "end": "watchdog" gives the job a process-group
# timeout of PG_TIMEOUT seconds (common.setup() passes it to init_process_group, common.new_group to every
# new_group); on a hang PyTorch 2.15's ProcessGroupNCCL::timeoutWatchdog thread then calls ncclCommAbort on
# the timed-out group's communicator (handleWatchdogFailure -> abortNcclComm), waits
# TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC (15 s by default, 2 s here) for the flight recorder and aborts the
# process (SIGABRT); the launcher then stops the ranks still running. The abort is only called with
# TORCH_NCCL_ASYNC_ERROR_HANDLING=1, which torchrun sets for its workers unless it is set already and the
# DeepSpeed launcher does not (PyTorch's own default, 3, aborts the process without ncclCommAbort): set here
# for both. The harness waits PG_TIMEOUT + 60 s for the job to end by itself.
WATCHDOG = {"PG_TIMEOUT": "15", "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "2000", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
# The answers of issue 30's jobs, the same whichever way the hang ended (SIGTERM from the harness or the
# watchdog). "comm_ranks": the members of the finding's communicator (the world, a TP, PP or DP group).
# tp_pp: stage 0 (ranks 0 and 1, one TP pair) runs one micro-batch fewer in step 2: its last TP all-reduce
# and its last send (#12 of each pair, on the world communicator: p2p with a bound device goes through it)
# never issued; both are culprits, stage 1's ranks wait in the receive
TP_PP = {"kind": "p2p", "subkind": "recv_without_send", "ranks": [0, 1], "others": [2, 3], "seq": 12,
         "comm_ranks": [0, 1, 2, 3], "site": "final", "others_site": "recv_forward"}
# pipeline: rank 1 receives one micro-batch fewer in step 2: rank 0's send #16 (issued by
# batch_isend_irecv's line) has no receive, rank 1 went on to the final all-reduce
PIPELINE = {"kind": "p2p", "subkind": "send_without_recv", "ranks": [1], "others": [0], "seq": 16,
            "comm_ranks": [0, 1], "site": "final", "others_site": "batch"}
# p2p_fewer_recv: rank 0 posts one dist.recv fewer (step 1): rank 1's send #16 has no receive
P2P_FEWER_RECV = {"kind": "p2p", "subkind": "send_without_recv", "ranks": [0], "others": [1], "seq": 16,
                  "comm_ranks": [0, 1], "site": "final", "others_site": "send"}
# dp_skip: rank 2 skips one gradient all-reduce (same line, same size every time) in step 3; its calls are
# shifted from there on, but its sites first differ at #12, where it issues the loss all-reduce in place of
# its peers' last gradient one: it skipped a call
DP_SKIP = {"kind": "divergence", "subkind": "skipped_call", "ranks": [2], "others": [0, 1, 3], "seq": 12,
           "comm_ranks": [0, 1, 2, 3], "site": "loss", "others_site": "grads"}
# groups: rank 3 skips its DP all-reduce of step 3 (#4 of DP group {1, 3}); it issued the next TP one instead
GROUPS = {"kind": "divergence", "subkind": "skipped_call", "ranks": [3], "others": [1], "seq": 4,
          "comm_ranks": [1, 3], "site": "tp_forward", "others_site": "dp_grads"}
# zero1_checkpoint: rank 0 alone saves a checkpoint in step 1 (two calls more): its 1-float barrier #4 pairs
# silently with rank 1's 1-float loss all-reduce from another line, the first place their sites differ. The
# job hangs at #5 on the device, but its buffers are on the device from the start, so both ranks go on
# issuing their steps' calls: rank 0's #6-#14 are rank 1's #4-#12 (in the traces), its two calls were extra
ZERO1 = {"kind": "divergence", "subkind": "extra_call", "ranks": [0], "others": [1], "seq": 4, "comm_ranks": [0, 1],
         "site": "ckpt_barrier", "others_site": "loss"}
CASES = {
    "extra": ("torchrun", 4, "extra.py", 25, {}, {"exit": 1, "findings": [
        {"kind": "divergence", "ranks": [0], "others": [1, 2, 3], "seq": 7, "site": "extra",
         "others_site": "grads"}]}),
    "extra_nonblocking": ("torchrun", 4, "extra.py", 25, {"TORCH_NCCL_USE_COMM_NONBLOCKING": "1"}, {"exit": 1, "findings": [
        {"kind": "divergence", "ranks": [0], "others": [1, 2, 3], "seq": 7, "site": "extra"}]}),
    "config_ctypes": ("torchrun", 4, "config.py", 25, {}, {"exit": 1, "findings": [
        {"kind": "divergence", "ranks": [1], "others": [0, 2, 3], "seq": 7, "site": "config",
         "others_site": "grads"}]}),
    "uneven": ("torchrun", 4, "uneven.py", 25, {}, {"exit": 1, "findings": [
        {"kind": "divergence", "ranks": [2], "others": [0, 1, 3], "seq": 14, "site": "loss",
         "others_site": "grads"}]}),
    "checkpoint_deepspeed": ("deepspeed", 2, "checkpoint.py", 30, {}, {"exit": 1, "findings": [
        {"kind": "divergence", "ranks": [0], "others": [1], "seq": 6, "site": "checkpoint",
         "others_site": "grads"}]}),
    "groups_cycle": ("torchrun", 4, "groups.py", 25, {}, {"exit": 1, "findings": [GROUPS]}),
    "pipeline": ("torchrun", 2, "pipeline.py", 25, {}, {"exit": 1, "findings": [PIPELINE]}),
    "oom": ("torchrun", 4, "oom.py", 25, {"TRSIM_DEVICE_MEM": "256M"}, {"exit": 1, "findings": [
        {"kind": "oom", "ranks": [1], "site": "oom"}]}),
    "nan_input": ("torchrun", 4, "nan.py", None, {}, {"exit": 1, "findings": [
        {"kind": "nan", "ranks": [2], "seq": 4, "cause": "input", "site": "grads"}]}),
    "fp16_overflow": ("torchrun", 4, "fp16.py", None, {}, {"exit": 1, "findings": [
        {"kind": "nan", "ranks": [0, 1, 2, 3], "seq": 3, "cause": "overflow"}]}),
    "expandable_segments": ("torchrun", 2, "expandable.py", None,
                            {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                            {"exit": 0, "findings": [], "peaks": "PEAK_FILE"}),
    "clean": ("torchrun", 4, "clean.py", None, {}, {"exit": 0, "findings": []}),
    "graph_clean": ("torchrun", 4, "graph.py", None, {"REPLAYS": "300"}, {"exit": 0, "findings": []}),
    "graph_fewer": ("torchrun", 4, "graph.py", 25, {"REPLAYS": "42", "GRAPH_FEWER": "1"}, {"exit": 1, "findings": [
        {"kind": "missing", "ranks": [3], "seq": 43, "site": "captured"}]}),
    # issue 18: the user's code in folders named like a framework's, run from its own tree (not
    # installed): its lines are named, not folded (jobs/ on PYTHONPATH for common.py). A site
    # (FILE, TAG) names the line marked in FILE, another file than the script.
    "torch_folder": ("torchrun", 4, "torch/extra_in_torch.py", 25, {"PYTHONPATH": JOBS}, {"exit": 1, "findings": [
        {"kind": "divergence", "ranks": [0], "others": [1, 2, 3], "seq": 7, "site": "extra",
         "others_site": "grads"}]}),
    # issue 21: a rank whose Python exception ends its process: named with the exception and the
    # line that raised it (the launcher then stops the others: the job ends by itself, status not 0)
    "raise": ("torchrun", 4, "raise_exc.py", 25, {}, {"exit": 1, "ends": True, "findings": [
        {"kind": "missing", "ranks": [2], "others": [0, 1, 3], "seq": 7, "others_site": "grads"}],
        "python_exception": {"rank": 2, "type": "ValueError", "message": "bad batch 6", "site": "raise"}}),
    # issue 30: hung jobs ended by PyTorch's watchdog (ncclCommAbort, then SIGABRT) get the answer of the
    # same job ended by SIGTERM: a TP x PP pipeline whose stage 0 runs one micro-batch fewer (its last
    # send never issued), a pipeline stage posting one receive fewer (batch_isend_irecv; dist.send/recv), a
    # DP gradient all-reduce skipped (same line, same size every time), the TP x DP wait cycle, a
    # checkpoint's barrier pairing silently with a 1-float loss all-reduce (deepspeed launcher); a clean
    # job with the same short timeout
    "tp_pp": ("torchrun", 4, "tp_pp.py", 25, {}, {"exit": 1, "findings": [TP_PP]}),
    "tp_pp_watchdog": ("torchrun", 4, "tp_pp.py", None, WATCHDOG, {"exit": 1, "end": "watchdog", "findings": [TP_PP]}),
    "pipeline_watchdog": ("torchrun", 2, "pipeline.py", None, WATCHDOG, {"exit": 1, "end": "watchdog",
                                                                         "findings": [PIPELINE]}),
    "p2p_fewer_recv": ("torchrun", 2, "p2p_fewer_recv.py", 25, {}, {"exit": 1, "findings": [P2P_FEWER_RECV]}),
    "p2p_fewer_recv_watchdog": ("torchrun", 2, "p2p_fewer_recv.py", None, WATCHDOG, {
        "exit": 1, "end": "watchdog", "findings": [P2P_FEWER_RECV]}),
    "dp_skip": ("torchrun", 4, "dp_skip.py", 25, {}, {"exit": 1, "findings": [DP_SKIP]}),
    "dp_skip_watchdog": ("torchrun", 4, "dp_skip.py", None, WATCHDOG, {"exit": 1, "end": "watchdog",
                                                                       "findings": [DP_SKIP]}),
    "groups_cycle_watchdog": ("torchrun", 4, "groups.py", None, WATCHDOG, {"exit": 1, "end": "watchdog",
                                                                           "findings": [GROUPS]}),
    "zero1_checkpoint": ("deepspeed", 2, "zero1_checkpoint.py", 30, {}, {"exit": 1, "findings": [ZERO1]}),
    "zero1_checkpoint_watchdog": ("deepspeed", 2, "zero1_checkpoint.py", None, WATCHDOG, {
        "exit": 1, "end": "watchdog", "findings": [ZERO1]}),
    "clean_watchdog": ("torchrun", 4, "clean.py", None, WATCHDOG, {"exit": 0, "findings": []}),
    "megatron_tree": ("torchrun", 4, "Megatron-LM/pretrain_gpt.py", 25, {"PYTHONPATH": JOBS}, {"exit": 1, "findings": [
        {"kind": "divergence", "ranks": [0], "others": [1, 2, 3], "seq": 7,
         "site": ("Megatron-LM/megatron/training/training.py", "extra"),
         "others_site": ("Megatron-LM/megatron/training/training.py", "grads")}]}),
}


def fail(msg, log=""):
    print(log[-8000:])
    print("FAIL:", msg)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def marked_site(script, tag):
    """'script.py:LINE in FUNCTION' of the line marked `# planted: TAG` (a
    tag (FILE, TAG): of that line in FILE, a path under jobs/)"""
    if isinstance(tag, tuple):
        script, tag = tag
    func = "<module>"
    with open(os.path.join(JOBS, script)) as f:
        for n, line in enumerate(f, 1):
            if line.startswith("def "):
                func = line[4:line.index("(")]
            if line.rstrip().endswith("# planted: " + tag):
                return "%s:%d in %s" % (os.path.basename(script), n, func)
    raise SystemExit("no line marked '# planted: %s' in %s" % (tag, script))


def check_watchdog_end(traces, nranks, out, log):
    """a job PyTorch's watchdog ended: every rank logged the watchdog's timeout and its trace has a
    communicator ended by ncclCommAbort (entered: on the simulator an abort of a group whose operation waits
    behind another group's hung one on the stream does not return), some rank died of SIGABRT (the launcher
    may end the others) and each one that did logged the watchdog's abort of the process"""
    aborts, signals = {}, {}
    for f in sorted(os.listdir(traces)):
        if f.endswith(".json"):
            tr = load_trace(os.path.join(traces, f))
            aborts[tr["rank"]] = [(c.get("end") or {}).get("kind") for c in tr.get("comms", [])]
            signals[tr["rank"]] = (tr.get("end") or {}).get("signal")
    for r in range(nranks):
        mine = [line for line in out.splitlines() if line.startswith("[rank%d]:" % r)]
        if not any("Operation timed out after" in line for line in mine):
            fail("rank %d: no watchdog timeout in the job's log" % r, log)
        if signals.get(r) == signal.SIGABRT and \
                not any("Aborting process on rank" in line and "due to timeout" in line for line in mine):
            fail("rank %d died of SIGABRT, but not by the watchdog's abort of the process" % r, log)
        if "Abort" not in aborts.get(r, []):
            fail("rank %d: no communicator ended by ncclCommAbort in its trace (ends of its communicators: %r)" % (
                r, aborts.get(r)), log)
    if signal.SIGABRT not in signals.values():
        fail("no rank died of SIGABRT (signals: %r)" % (signals,), log)


def main():
    shim, simdir, tranalyze, work, venv_sh, case = sys.argv[1:7]
    launcher, nranks, script, hang_s, extra_env, exp = CASES[case]
    v = subprocess.run(["bash", venv_sh], capture_output=True, text=True)
    if v.returncode == 3:
        print(v.stderr.strip())
        sys.exit(77)                 # TRSHIM_TORCH=0: skipped
    if v.returncode != 0:
        fail("the torch suite's environment could not be installed: %s" % v.stderr[-2000:])
    venv = v.stdout.strip().splitlines()[-1]
    traces = os.path.join(work, case + "-traces")
    subprocess.run(["rm", "-rf", traces])
    os.makedirs(traces)
    env = dict(os.environ)
    env.update(extra_env)
    env.update({"TRSHIM_DIR": traces, "PATH": os.path.join(venv, "bin") + ":" + env.get("PATH", ""),
                "LD_PRELOAD": ":".join([shim, os.path.join(simdir, "libtrsim.so"),
                                        os.path.join(simdir, "driver", "libcuda.so.1"),
                                        os.path.join(simdir, "driver", "libnvidia-ml.so.1")]),
                "TRSIM_SHM_TAG": "torch%d" % os.getpid(), "PYTHONUNBUFFERED": "1",
                "OMP_NUM_THREADS": "1", "TORCH_NCCL_ENABLE_MONITORING": "0"})
    if "peaks" in exp:
        env["PEAK_FILE"] = os.path.join(work, case + "-peak")
    port = str(free_port())
    if launcher == "torchrun":
        cmd = [os.path.join(venv, "bin", "torchrun"), "--nproc-per-node", str(nranks), "--master-port", port,
               script]
    else:
        cmd = [os.path.join(venv, "bin", "deepspeed"), "--num_gpus", str(nranks), "--master_port", port, script]
    watchdog = exp.get("end") == "watchdog"
    limit = float(env["PG_TIMEOUT"]) + 60 if watchdog else hang_s or 150
    t0 = time.time()
    p = subprocess.Popen(cmd, cwd=JOBS, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=limit)
        stopped = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            out, _ = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
        stopped = True
    # the simulated NCCL's shared memory of a job killed mid-collective (trsim-launch removes it for its
    # jobs; torchrun and deepspeed know nothing of it)
    tag = "trsim.%s." % env["TRSIM_SHM_TAG"]
    for f in os.listdir("/dev/shm"):
        if f.startswith(tag):
            os.unlink(os.path.join("/dev/shm", f))
    log = "$ %s (%s, %d ranks): status %s after %.0f s%s\n%s" % (
        " ".join(cmd), case, nranks, p.returncode, time.time() - t0, ", stopped (hung)" if stopped else "", out)
    if watchdog and (stopped or p.returncode == 0):
        fail("PyTorch's watchdog should have ended the hung job within %.0f s (status %s%s)" % (
            limit, p.returncode, ", stopped by the harness" if stopped else ""), log)
    if watchdog:      # every rank's watchdog timed out and aborted a communicator, then a process died of SIGABRT
        check_watchdog_end(traces, nranks, out, log)
    if hang_s is None and not watchdog and (stopped or p.returncode != 0):
        fail("the job should end by itself with status 0", log)
    if hang_s is not None and not stopped and exp["findings"] and exp["findings"][0]["kind"] not in ("oom",) \
            and not exp.get("ends") and not watchdog:
        fail("the job should hang", log)
    q = subprocess.run([tranalyze, "--json", traces], capture_output=True, text=True, timeout=120)
    t = subprocess.run([tranalyze, traces], capture_output=True, text=True, timeout=120)
    log += "\n$ tranalyze %s: status %d\n%s%s" % (traces, t.returncode, t.stdout, t.stderr)
    if q.returncode != exp["exit"]:
        fail("tranalyze exit status %d, expected %d" % (q.returncode, exp["exit"]), log)
    got = json.loads(q.stdout)["findings"]
    if watchdog:      # issue 30: tranalyze says the abort released the hung operations
        aborted = json.loads(q.stdout).get("aborted") or {}
        if not aborted.get("released"):
            fail("no operation released by an abort in tranalyze's answer (aborted: %r)" % (aborted,), log)
        if "ENDED BY ABORT:" not in t.stdout:
            fail("the text report does not say the abort ended the job", log)
    if not exp["findings"] and got:
        fail("a clean job gave findings", log)
    if len(got) < len(exp["findings"]):
        fail("%d findings, expected at least %d" % (len(got), len(exp["findings"])), log)
    for i, w in enumerate(exp["findings"]):
        g = got[i]
        for key in ("kind", "subkind", "ranks", "others", "seq", "comm_ranks", "cause"):
            if key in w and g.get(key) != w[key]:
                fail("finding %d: %s is %r, expected %r" % (i, key, g.get(key), w[key]), log)
        for key, side in (("site", "call"), ("others_site", "others_call")):
            if key in w:
                want = marked_site(script, w[key])
                site = (g.get(side) or {}).get("site")
                if g["kind"] == "nan":
                    site = [m.get("site") for m in g.get("members", []) if m.get("rank") in g["ranks"]]
                    site = site[0] if site else None
                if site != want:
                    fail("finding %d: %s site %r, expected %r" % (i, side, site, want), log)
    if "python_exception" in exp:     # issue 21: the exception that ended a rank, and its raise site
        w = exp["python_exception"]
        ranks = {r["rank"]: r for r in json.loads(q.stdout)["ranks"]}
        pe = (ranks.get(w["rank"]) or {}).get("python_exception") or {}
        where = "%s:%s in %s" % (os.path.basename(pe.get("file") or ""), pe.get("line"), pe.get("function"))
        if pe.get("type") != w["type"] or pe.get("message") != w["message"] or where != marked_site(script, w["site"]):
            fail("rank %d: python_exception %r, expected %s: %s raised at %s" % (
                w["rank"], pe, w["type"], w["message"], marked_site(script, w["site"])), log)
        if pe.get("text", "\0") not in got[0]["message"]:
            fail("the root cause does not name the exception: %r" % got[0]["message"], log)
    # every rank's environment names the real torch (its version from the venv's metadata) and its launcher
    want_torch = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                                 "import importlib.metadata as m; print(m.version('torch'))"],
                                capture_output=True, text=True).stdout.strip()
    want_launcher = "torchelastic" if launcher == "torchrun" else "deepspeed"
    for r in json.loads(q.stdout)["ranks"]:
        sy = ((r.get("environment") or {}).get("system") or {}) if r["ended"]["state"] != "killed" else None
        if sy is None:
            continue
        if sy.get("packages", {}).get("torch") != want_torch:
            fail("rank %d: packages %r, expected torch %s" % (r["rank"], sy.get("packages"), want_torch), log)
        names = [x["name"] for x in sy.get("launchers", [])]
        if want_launcher not in names:
            fail("rank %d: launchers %r, expected %s among them" % (r["rank"], names, want_launcher), log)
    if "peaks" in exp:        # the trace's device peak is what PyTorch reserved, to the byte
        ranks = {r["rank"]: r for r in json.loads(q.stdout)["ranks"]}
        for r in range(nranks):
            with open("%s.%d" % (env["PEAK_FILE"], r)) as f:
                want = int(f.read())
            if ranks.get(r, {}).get("peak_bytes") != want:
                fail("rank %d: peak %r in the trace, PyTorch reserved %d" % (r, ranks.get(r, {}).get("peak_bytes"), want),
                     log)
            log += "rank %d: peak %d bytes, as PyTorch reserved\n" % (r, want)
    print(log)
    print("ok: %s" % case)


if __name__ == "__main__":
    main()
