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
end by itself within its seconds: PyTorch's watchdog aborts the hung
communicators (ncclCommAbort, checked in every rank's trace), then the
process; the answer must be the one the same job gets when SIGTERM ends it.
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

# name: launcher, ranks, the job, seconds before a hung job is stopped (None:
# it must exit by itself), environment, expected tranalyze answer. Findings:
# "site": TAG names the line marked `# planted: TAG` in the job script.
# PyTorch's watchdog (issue 30): the groups time out after 10 s; the dump PyTorch waits for before it
# aborts the process is cut to 2 s; TORCH_NCCL_ASYNC_ERROR_HANDLING=1 (tear down: the communicators
# aborted, then the process; the default, 3, may end the process before its watchdog thread aborts them)
WATCHDOG = {"PG_TIMEOUT": "10", "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "2000", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
# stage 0 of tp_pp skips its last send on both of its ranks: whichever pair's receive the analysis takes
# first is the root cause, the other pair's a consequence
TP_PP = {"kind": "p2p", "subkind": "recv_without_send", "seq": 12, "others_site": "recv_forward",
         "either": [{"ranks": [0], "others": [2]}, {"ranks": [1], "others": [3]}]}
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
    "groups_cycle": ("torchrun", 4, "groups.py", 25, {}, {"exit": 1, "findings": [
        {"kind": "divergence", "subkind": "skipped_call", "ranks": [3], "others": [1], "seq": 4,
         "site": "tp_forward", "others_site": "dp_grads"}]}),
    "pipeline": ("torchrun", 2, "pipeline.py", 25, {}, {"exit": 1, "findings": [
        {"kind": "p2p", "ranks": [1], "others": [0]}]}),
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
    # send never issued), a pipeline stage posting one receive fewer, a DP gradient all-reduce skipped
    # (same line, same size every time), the TP x DP wait cycle, a checkpoint's barrier pairing silently
    # with a 1-float loss all-reduce (deepspeed launcher); a clean job with the same short timeout
    "tp_pp": ("torchrun", 4, "tp_pp.py", 25, {}, {"exit": 1, "findings": [TP_PP]}),
    "tp_pp_watchdog": ("torchrun", 4, "tp_pp.py", 90, WATCHDOG, {"exit": 1, "end": "watchdog", "findings": [TP_PP]}),
    "pipeline_watchdog": ("torchrun", 2, "pipeline.py", 90, WATCHDOG, {"exit": 1, "end": "watchdog", "findings": [
        {"kind": "p2p", "ranks": [1], "others": [0]}]}),
    "dp_skip": ("torchrun", 4, "dp_skip.py", 25, {}, {"exit": 1, "findings": [
        {"kind": "divergence", "subkind": "different_call", "ranks": [2], "others": [0, 1, 3], "seq": 12,
         "site": "loss", "others_site": "grads"}]}),
    "dp_skip_watchdog": ("torchrun", 4, "dp_skip.py", 90, WATCHDOG, {"exit": 1, "end": "watchdog", "findings": [
        {"kind": "divergence", "subkind": "different_call", "ranks": [2], "others": [0, 1, 3], "seq": 12,
         "site": "loss", "others_site": "grads"}]}),
    "groups_cycle_watchdog": ("torchrun", 4, "groups.py", 90, WATCHDOG, {"exit": 1, "end": "watchdog", "findings": [
        {"kind": "divergence", "subkind": "skipped_call", "ranks": [3], "others": [1], "seq": 4,
         "site": "tp_forward", "others_site": "dp_grads"}]}),
    "zero1_checkpoint": ("deepspeed", 2, "zero1_checkpoint.py", 30, {}, {"exit": 1, "findings": [
        {"kind": "divergence", "ranks": [0], "others": [1], "seq": 4, "site": "ckpt_barrier",
         "others_site": "loss"}]}),
    "zero1_checkpoint_watchdog": ("deepspeed", 2, "zero1_checkpoint.py", 90, WATCHDOG, {
        "exit": 1, "end": "watchdog", "findings": [
            {"kind": "divergence", "ranks": [0], "others": [1], "seq": 4, "site": "ckpt_barrier",
             "others_site": "loss"}]}),
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
    t0 = time.time()
    p = subprocess.Popen(cmd, cwd=JOBS, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=hang_s or 150)
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
    if hang_s is None and (stopped or p.returncode != 0):
        fail("the job should end by itself with status 0", log)
    watchdog = exp.get("end") == "watchdog"
    if watchdog and (stopped or p.returncode == 0):
        fail("PyTorch's watchdog should have ended the hung job (status %s%s)" % (
            p.returncode, ", stopped by the harness" if stopped else ""), log)
    if hang_s is not None and not stopped and exp["findings"] and exp["findings"][0]["kind"] not in ("oom",) \
            and not exp.get("ends") and not watchdog:
        fail("the job should hang", log)
    q = subprocess.run([tranalyze, "--json", traces], capture_output=True, text=True, timeout=120)
    t = subprocess.run([tranalyze, traces], capture_output=True, text=True, timeout=120)
    log += "\n$ tranalyze %s: status %d\n%s%s" % (traces, t.returncode, t.stdout, t.stderr)
    if q.returncode != exp["exit"]:
        fail("tranalyze exit status %d, expected %d" % (q.returncode, exp["exit"]), log)
    got = json.loads(q.stdout)["findings"]
    if watchdog:      # issue 30: the watchdog's abort released the hung operations, and tranalyze says so
        aborted = json.loads(q.stdout).get("aborted") or {}
        if not aborted.get("released"):
            fail("no operation released by an abort in tranalyze's answer (aborted: %r)" % (aborted,), log)
        if "ENDED BY ABORT:" not in t.stdout:
            fail("the text report does not say the abort ended the job", log)
        ends = {}   # a rank the launcher killed once another one aborted may not have aborted itself
        for f in sorted(os.listdir(traces)):
            if f.endswith(".json"):
                with open(os.path.join(traces, f)) as fh:
                    ends[f] = [(c.get("end") or {}).get("kind") for c in json.load(fh).get("comms", [])]
        if not any("Abort" in k for k in ends.values()):
            fail("no communicator ended by ncclCommAbort in the traces: %r" % (ends,), log)
    if not exp["findings"] and got:
        fail("a clean job gave findings", log)
    if len(got) < len(exp["findings"]):
        fail("%d findings, expected at least %d" % (len(got), len(exp["findings"])), log)
    for i, w in enumerate(exp["findings"]):
        g = got[i]
        for key in ("kind", "subkind", "ranks", "others", "seq", "cause"):
            if key in w and g.get(key) != w[key]:
                fail("finding %d: %s is %r, expected %r" % (i, key, g.get(key), w[key]), log)
        if "either" in w and not any(all(g.get(k) == v for k, v in alt.items()) for alt in w["either"]):
            fail("finding %d: ranks %r, others %r, expected one of %r" % (i, g.get("ranks"), g.get("others"),
                                                                          w["either"]), log)
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
