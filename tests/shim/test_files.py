#!/usr/bin/env python3
"""The files libtrshim.so writes, in a folder it cannot trust (project issue
12): test_files.py CASE. Paths come from the environment meson sets
(TRSHIM_LIB, SHIM_MISC, TRANALYZE).

The shim never writes through a link planted in its folder, never follows a
link of another user, refuses a folder others can change, makes its folders
0700 and its files 0600, never kills the job with SIGXFSZ under a file-size
limit, and leaves a marker when a trace cannot be written (disk full). Each
refusal or failure is one "trshim:" line and the job goes on as without the
shim (same exit status, same output).

The cases run as root (the test machine's user): "another user" is uid 65533
(the attacker) or 65534 (nobody, the job's user where root would be
trusted), through setpriv; a case that needs setpriv or mount (tmpfs) and
cannot have it exits 77 (skipped). Stdlib only."""
import errno
import json
import os
import re
import resource
import shutil
import socket
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from checks import Failure, Skip, check, eq, path_of, run_case, shim_lines  # noqa: E402
import ring  # noqa: E402
from trace import load_trace as read_trace  # noqa: E402  (calls and checks of either version, unpacked)

ATTACKER = 65533
NOBODY = 65534

SCRUB = re.compile(r"^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|OMPI_.*|PMI_.*|PMIX_.*|"
                   r"SLURM_.*|TRSHIM.*|TORCHELASTIC_RUN_ID|TRSIM_LAUNCH_TIMEOUT|TRSIM_TIMEOUT_SEC|"
                   r"LD_PRELOAD|LD_LIBRARY_PATH|NCCL_.*)$")
JOB = "tfiles"


def host_clean():
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname())


def trace_name(pid):
    """The name of the one trace of shim_misc basic (1-rank communicator)."""
    return "trshim.%s.r0.%s.%d.json" % (JOB, host_clean(), pid)


def ring_name(pid):
    return "trshim.%s.%s.%d.ring" % (JOB, host_clean(), pid)


def marker_name(pid):
    return "trshim.%s.r0.%s.%d.write-failed" % (JOB, host_clean(), pid)


def warnings(stderr):
    return shim_lines(stderr)


def mode_of(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def snapshot(path):
    """What a victim file is: bytes, mode, owner, type (never follows a link)."""
    st = os.lstat(path)
    data = open(path, "rb").read() if stat.S_ISREG(st.st_mode) else os.readlink(path)
    return (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, data)


def need_setpriv():
    if not shutil.which("setpriv"):
        raise Skip("no setpriv")
    if os.geteuid() != 0:
        raise Skip("not root: cannot act as another user")


def as_user(uid, argv):
    return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"] + argv


class Case:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="trshim-files-")
        os.chmod(self.tmp, 0o755)          # other users (nobody, the attacker) pass through
        self.mounts = []

    def env(self, traces, extra=None, preload=True):
        env = {k: v for k, v in os.environ.items() if not SCRUB.match(k)}
        env["TRSHIM_DIR"] = traces
        env["TRSHIM_JOB_ID"] = JOB
        env["TRSHIM_KEEP_RING"] = "1"       # the cases look at the ring file after the exit
        if preload:
            env["LD_PRELOAD"] = path_of("TRSHIM_LIB")
        for k, v in (extra or {}).items():
            env[k] = v
        return env

    def run(self, cmd, traces, extra=None, preload=True, preexec=None, want_rc=0):
        p = subprocess.run(cmd, env=self.env(traces, extra, preload), capture_output=True, text=True,
                           timeout=180, preexec_fn=preexec, cwd=self.tmp)
        sys.stdout.write("$ %s\nrc=%d\n--- stdout\n%s--- stderr\n%s\n" % (" ".join(cmd), p.returncode, p.stdout,
                                                                          p.stderr))
        if want_rc is not None:
            eq(p.returncode, want_rc, "exit status of %s" % " ".join(cmd))
        return p

    def job(self, traces, mode=("basic",), extra=None, preexec=None, user=None, plant=None):
        """shim_misc MODE with the shim, run by user (None: root) through a
        shell whose pid the job keeps (exec), after `plant` (shell commands,
        $$ the job's pid) ran. Returns (process, pid)."""
        prog = [path_of("SHIM_MISC")] + list(mode)
        drop = " ".join(as_user(user, [])) + " " if user is not None else ""
        script = (plant or ":") + '; exec ' + drop + 'env LD_PRELOAD="$TRSHIM_PRELOAD" "$@"'
        cmd = ["sh", "-c", script, "sh"] + prog
        ex = dict(extra or {})
        ex["TRSHIM_PRELOAD"] = path_of("TRSHIM_LIB")
        p = self.run(cmd, traces, ex, preload=False, preexec=preexec)
        m = re.search(r"^pid (\d+)$", p.stdout, re.M)
        check(m, "the job printed no pid")
        return p, int(m.group(1))

    def plain(self, mode=("basic",), preexec=None, user=None):
        """The same job without the shim: its exit status and output."""
        cmd = [path_of("SHIM_MISC")] + list(mode)
        if user is not None:
            cmd = as_user(user, cmd)
        return self.run(cmd, os.path.join(self.tmp, "unused"), preload=False, preexec=preexec, want_rc=None)

    def mount_tmpfs(self, path, size):
        os.makedirs(path)
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0700" % size, "tmpfs", path],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise Skip("cannot mount a tmpfs: %s" % p.stderr.strip())
        self.mounts.append(path)

    def cleanup(self):
        for m in self.mounts:
            subprocess.run(["umount", m], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


def same_output(p, plain, what):
    eq(p.returncode, plain.returncode, what + ": exit status as without the shim")
    eq(re.sub(r"pid \d+", "pid", p.stdout), re.sub(r"pid \d+", "pid", plain.stdout), what + ": output")


def load_trace(path, pid):
    check(not os.path.islink(path) and os.path.isfile(path), "%s is not a regular file" % path)
    t = read_trace(path, Failure)
    eq((t["format"], t["pid"], t["job"]["id"], t["rank"]), ("trshim-trace", pid, JOB, 0), "trace of %s" % path)
    eq([c[0] for c in t["calls"]], ["AllReduce"] * 5, "the calls of the trace")
    eq(t["end"]["reason"], "exit", "end.reason")
    return t


def check_ring(path, pid, uid=0):
    check(not os.path.islink(path) and os.path.isfile(path), "%s is not a regular file" % path)
    st = os.lstat(path)
    eq((stat.S_IMODE(st.st_mode), st.st_uid), (0o600, uid), "mode and owner of the ring file %s" % path)
    r = ring.read_ring(path)
    eq((r["header"]["pid"], r["header"]["state"], r["header"]["head"]), (pid, 2, 5),
       "ring header pid, state (exited), records")
    return r


RANDOM_RING = r"^trshim\." + JOB + r"\.%s\.%d\.[A-Za-z0-9]{8}\.ring$"


# ---- links planted in the folder --------------------------------------------------------------------

def case_links(c, where):
    """Links planted at every name the shim used to write through: the old
    temporary name <trace>.tmp.<pid>, the trace's final name and the ring's
    name, each pointing at a file of the victim (root). 'shared': a 1777
    folder, the links made by another user (the attack); 'private': the
    job's own 0700 folder, the links made by root itself (the kernel's
    protected_symlinks would not stop the old code there either)."""
    if where == "shared":
        need_setpriv()
    victims = os.path.join(c.tmp, "victim")
    os.makedirs(victims)
    targets = {}
    for k in ("tmp", "final", "ring"):
        targets[k] = os.path.join(victims, k)
        with open(targets[k], "wb") as f:
            f.write(b"the victim's %s file\n" % k.encode())
        os.chmod(targets[k], 0o644)
    d = os.path.join(c.tmp, "traces")
    os.makedirs(d)
    os.chmod(d, 0o1777 if where == "shared" else 0o700)
    before = {k: snapshot(v) for k, v in targets.items()}
    ln = "ln -s %s \"$TRSHIM_DIR\"/%s"
    plant = "; ".join([ln % (targets["tmp"], "trshim.%s.r0.%s.$$.json.tmp.$$" % (JOB, host_clean())),
                       ln % (targets["final"], "trshim.%s.r0.%s.$$.json" % (JOB, host_clean())),
                       ln % (targets["ring"], "trshim.%s.%s.$$.ring" % (JOB, host_clean()))])
    if where == "shared":
        plant = " ".join(as_user(ATTACKER, ["sh", "-c", "'%s'" % plant.replace("$$", "$PPID")]))
    plain = c.plain()
    p, pid = c.job(d, plant=plant)
    same_output(p, plain, "links")
    for k, v in targets.items():
        eq(snapshot(v), before[k], "the victim's %s file (written through a link?)" % k)
    names = sorted(os.listdir(d))
    tmp_link = trace_name(pid) + ".tmp.%d" % pid
    check(tmp_link in names and os.readlink(os.path.join(d, tmp_link)) == targets["tmp"],
          "the link at the old temporary name is left as it was: %s" % names)
    check(ring_name(pid) in names and os.readlink(os.path.join(d, ring_name(pid))) == targets["ring"],
          "the link at the ring name is left as it was: %s" % names)
    rings = [n for n in names if re.match(RANDOM_RING % (re.escape(host_clean()), pid), n)]
    eq(len(rings), 1, "a ring file under another name (%s)" % names)
    eq(sorted(names), sorted([tmp_link, ring_name(pid), trace_name(pid), rings[0]]), "the folder's files")
    t = load_trace(os.path.join(d, trace_name(pid)), pid)
    eq(mode_of(os.path.join(d, trace_name(pid))), 0o600, "trace mode")
    eq(t["ring"]["file"], os.path.join(d, rings[0]), "ring.file of the trace")
    check_ring(os.path.join(d, rings[0]), pid)
    w = warnings(p.stderr)
    eq(len(w), 1, "one trshim: line (%s)" % w)
    check(ring_name(pid) in w[0] and rings[0] in w[0] and "taken" in w[0], "the line names both rings: %s" % w)


def case_ring_taken(c):
    """The job (nobody) in a 1777 folder where another user (the attacker)
    made a file at its ring's name first: the ring goes to another name,
    the attacker's file stays as it was, tranalyze reads the ring."""
    need_setpriv()
    d = os.path.join(c.tmp, "traces")
    os.makedirs(d)
    os.chmod(d, 0o1777)
    plant = " ".join(as_user(ATTACKER, ["sh", "-c", "'echo planted > \"$TRSHIM_DIR\"/trshim.%s.%s.$PPID.ring; "
                                                    "chmod 666 \"$TRSHIM_DIR\"/trshim.%s.%s.$PPID.ring'"
                                        % (JOB, host_clean(), JOB, host_clean())]))
    plain = c.plain(user=NOBODY)
    p, pid = c.job(d, plant=plant, user=NOBODY)
    same_output(p, plain, "ring taken")
    planted = os.path.join(d, ring_name(pid))
    eq(snapshot(planted), (stat.S_IFREG, 0o666, ATTACKER, b"planted\n"), "the attacker's file")
    names = sorted(os.listdir(d))
    rings = [n for n in names if re.match(RANDOM_RING % (re.escape(host_clean()), pid), n)]
    eq(len(rings), 1, "a ring file under another name (%s)" % names)
    eq(names, sorted([ring_name(pid), trace_name(pid), rings[0]]), "the folder's files")
    t = load_trace(os.path.join(d, trace_name(pid)), pid)
    st = os.lstat(os.path.join(d, trace_name(pid)))
    eq((stat.S_IMODE(st.st_mode), st.st_uid), (0o600, NOBODY), "trace mode and owner")
    eq(t["ring"]["file"], os.path.join(d, rings[0]), "ring.file of the trace")
    check_ring(os.path.join(d, rings[0]), pid, NOBODY)
    w = warnings(p.stderr)
    eq(len(w), 1, "one trshim: line (%s)" % w)
    check(ring_name(pid) in w[0] and rings[0] in w[0], "the line names both rings: %s" % w)
    # what tranalyze finds in the folder with the trace moved away: the ring alone, by its other name
    os.unlink(os.path.join(d, trace_name(pid)))
    os.unlink(planted)
    a = subprocess.run([path_of("TRANALYZE"), "--json", d], capture_output=True, text=True, timeout=120)
    sys.stdout.write("$ tranalyze --json %s\nrc=%d\n%s%s\n" % (d, a.returncode, a.stdout[:3000], a.stderr))
    check(a.returncode in (0, 1), "tranalyze could not analyse the folder (rc %d)" % a.returncode)
    r = json.loads(a.stdout)["ranks"]
    eq([(x["pid"], x["calls"], os.path.basename(x["ring"]["file"] or "")) for x in r], [(pid, 5, rings[0])],
       "tranalyze's ranks")


# ---- the folder --------------------------------------------------------------------------------------

def case_modes(c):
    """A folder the shim makes (three levels) is 0700 at each level, its
    files 0600, whatever the umask (0 here)."""
    d = os.path.join(c.tmp, "a", "b", "traces")
    p, pid = c.job(d, preexec=lambda: os.umask(0))
    eq(warnings(p.stderr), [], "warnings")
    for sub in ("a", "a/b", "a/b/traces"):
        eq(oct(mode_of(os.path.join(c.tmp, sub))), oct(0o700), "mode of the folder %s" % sub)
    eq(sorted(os.listdir(d)), sorted([trace_name(pid), ring_name(pid)]), "the folder's files")
    for n in os.listdir(d):
        eq(oct(mode_of(os.path.join(d, n))), oct(0o600), "mode of %s" % n)
    load_trace(os.path.join(d, trace_name(pid)), pid)
    check_ring(os.path.join(d, ring_name(pid)), pid)


def check_refused(c, d, p, plain, want, reason):
    same_output(p, plain, "refused folder")
    w = warnings(p.stderr)
    eq(len(w), 1, "one trshim: line (%s)" % w)
    check(w[0].startswith("trshim: refusing the trace folder %s: " % d) and reason in w[0]
          and "no trace is written" in w[0], "the line: %s" % w)
    eq(sorted(os.listdir(d)) if os.path.isdir(d) else None, want, "the folder's files")


def case_refuse(c, kind):
    """A folder others can change: refused at activation, one line, nothing
    written, the job as without the shim."""
    d = os.path.join(c.tmp, "traces")
    plain = c.plain()
    if kind == "0777":                   # writable by everyone, no sticky bit
        os.makedirs(d)
        os.chmod(d, 0o777)
        p, pid = c.job(d)
        check_refused(c, d, p, plain, [], "writable by group and others and has no sticky bit (mode 0777)")
    elif kind == "0770":                 # by the group
        os.makedirs(d)
        os.chmod(d, 0o770)
        p, pid = c.job(d)
        check_refused(c, d, p, plain, [], "writable by group and has no sticky bit (mode 0770)")
    elif kind == "owner":                # another user's folder (root must not write through it either)
        need_setpriv()
        os.makedirs(d)
        os.chmod(d, 0o700)
        os.chown(d, NOBODY, NOBODY)
        p, pid = c.job(d)
        check_refused(c, d, p, plain, [], "owned by uid %d, not by this user (uid 0) or root" % NOBODY)
    elif kind == "link":                 # a link another user planted in a shared folder
        need_setpriv()
        shared = os.path.join(c.tmp, "shared")
        os.makedirs(shared)
        os.chmod(shared, 0o1777)
        own = os.path.join(c.tmp, "own")
        os.makedirs(own)
        os.chmod(own, 0o700)
        d = os.path.join(shared, "traces")
        subprocess.run(as_user(ATTACKER, ["ln", "-s", own, d]), check=True)
        p, pid = c.job(d)
        check_refused(c, d, p, plain, [], "%s is a symbolic link owned by uid %d" % (d, ATTACKER))
        eq(os.listdir(own), [], "files written where the link points")
    else:
        raise Failure("unknown kind %s" % kind)


def case_sticky(c):
    """A 1777 folder (as /tmp) owned by root works, for root and for
    another user."""
    d = os.path.join(c.tmp, "traces")
    os.makedirs(d)
    os.chmod(d, 0o1777)
    p, pid = c.job(d)
    eq(warnings(p.stderr), [], "warnings")
    jobs = [(pid, os.geteuid())]
    if shutil.which("setpriv") and os.geteuid() == 0:
        p2, pid2 = c.job(d, user=NOBODY)
        eq(warnings(p2.stderr), [], "warnings (nobody)")
        jobs.append((pid2, NOBODY))
    eq(sorted(os.listdir(d)), sorted(n for q, _ in jobs for n in (trace_name(q), ring_name(q))), "the folder's files")
    for q, uid in jobs:
        load_trace(os.path.join(d, trace_name(q)), q)
        check_ring(os.path.join(d, ring_name(q)), q, uid)
        st = os.lstat(os.path.join(d, trace_name(q)))
        eq((stat.S_IMODE(st.st_mode), st.st_uid), (0o600, uid), "trace mode and owner")


# ---- file-size limit and full disk -------------------------------------------------------------------

FSIZE = 2 << 20        # the simulated runtime needs ~1.3 MB of file size itself


def limit_fsize(n):
    def f():
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    return f


def case_fsize(c):
    """ulimit -f 2048 (KiB): the job runs as without the shim (exit 0, no
    SIGXFSZ); the ring file is made smaller to fit (one line), the trace is
    complete."""
    d = os.path.join(c.tmp, "traces")
    plain = c.plain(preexec=limit_fsize(FSIZE))
    eq(plain.returncode, 0, "the job without the shim under the limit")
    p, pid = c.job(d, preexec=limit_fsize(FSIZE))
    same_output(p, plain, "fsize")
    w = warnings(p.stderr)
    eq(len(w), 1, "one trshim: line (%s)" % w)
    check(w[0].startswith("trshim: the file-size limit (ulimit -f: %d bytes) makes the ring file smaller: " % FSIZE),
          "the line: %s" % w)
    eq(sorted(os.listdir(d)), sorted([trace_name(pid), ring_name(pid)]), "the folder's files")
    t = load_trace(os.path.join(d, trace_name(pid)), pid)
    rp = os.path.join(d, ring_name(pid))
    r = check_ring(rp, pid)
    h = r["header"]
    check(os.path.getsize(rp) <= FSIZE, "ring file of %d bytes past the limit" % os.path.getsize(rp))
    eq(h["file_bytes"], os.path.getsize(rp), "header file_bytes")
    check(h["capacity"] < 131072 and h["capacity"] >= 64, "capacity %d" % h["capacity"])
    eq(t["ring"]["capacity"], h["capacity"], "ring.capacity of the trace")
    eq("%d calls, %d communicators, %d bytes of stacks" % (h["capacity"], h["max_comms"], h["blob_bytes"]),
       w[0].split("smaller: ")[1], "the line's sizes")
    eq([ring.OPS[x["op"]] for x in r["records"]], ["AllReduce"] * 5, "records in the ring")


def check_marker(path, pid, err, reason=None):
    check(not os.path.islink(path) and os.path.isfile(path), "no marker %s" % path)
    eq(mode_of(path), 0o600, "marker mode")
    raw = open(path, "rb").read()
    check(raw.endswith(b"\n") and raw.count(b"\n") == 1, "the marker is one line: %r" % raw)
    m = json.loads(raw.decode("utf-8"))
    eq(sorted(m), sorted(["format", "version", "job", "job_source", "rank", "host", "pid", "trace", "reason", "time",
                          "errno", "error", "bytes"]), "marker members")
    eq((m["format"], m["version"], m["job"], m["job_source"], m["rank"], m["host"], m["pid"], m["trace"]),
       ("trshim-write-failed", 1, JOB, "TRSHIM_JOB_ID", 0, socket.gethostname(), pid, trace_name(pid)), "marker")
    eq((m["errno"], m["error"]), (err, os.strerror(err)), "marker error")
    check(m["reason"] in ("comm_end", "exit") and (reason is None or m["reason"] == reason),
          "marker reason %s" % m["reason"])
    check(isinstance(m["bytes"], int) and m["bytes"] >= 0 and isinstance(m["time"], float), "bytes, time: %s" % m)
    return m


def case_fsize_trace(c):
    """The job lowers its file-size limit to 2048 bytes after its calls: the
    trace writes (at destroy, at exit from the main thread) would cross it.
    No SIGXFSZ, exit 0, one line, the marker says EFBIG."""
    d = os.path.join(c.tmp, "traces")
    plain = c.plain(mode=("fsize", "2048"))
    eq(plain.returncode, 0, "the job without the shim")
    p, pid = c.job(d, mode=("fsize", "2048"))
    same_output(p, plain, "fsize-trace")
    w = warnings(p.stderr)
    eq(len(w), 1, "one trshim: line (%s)" % w)
    check(w[0].startswith("trshim: cannot write trace %s/%s: File too large (after " % (d, trace_name(pid)))
          and w[0].endswith("; marker %s left" % marker_name(pid)), "the line: %s" % w)
    eq(sorted(os.listdir(d)), sorted([ring_name(pid), marker_name(pid)]), "the folder's files (no temporary left)")
    m = check_marker(os.path.join(d, marker_name(pid)), pid, errno.EFBIG, "exit")
    check(m["bytes"] <= 2048, "bytes written past the limit: %d" % m["bytes"])
    check_ring(os.path.join(d, ring_name(pid)), pid)


def case_full(c):
    """A full file system (a tmpfs with one free page once the ring file is
    made): the trace (made larger than a page by a long NCCL_ variable)
    cannot be written; its temporary file goes, the marker fits in its place;
    one line; the job as without the shim."""
    mnt = os.path.join(c.tmp, "mnt")
    c.mount_tmpfs(mnt, 4 << 20)
    d = os.path.join(mnt, "traces")
    # TRSHIM_RING=64: the ring's backed part is header + 16 communicator slots + 64 records,
    # and the blob area's first 64 KiB (the loaded NCCL's description, at the first communicator);
    # no stacks: it grows no further
    ring_bytes = 4096 + 16 * 1024 + 64 * 128 + (64 << 10)
    st = os.statvfs(mnt)
    free = st.f_bavail * st.f_frsize
    with open(os.path.join(mnt, "filler"), "wb") as f:
        f.write(b"\0" * (free - ring_bytes - 4096))
    st = os.statvfs(mnt)
    eq(st.f_bavail * st.f_frsize, ring_bytes + 4096, "free bytes before the job")
    extra = {"TRSHIM_RING": "64", "TRSHIM_STACK_DEPTH": "0", "NCCL_TEST_PAD": "x" * 9000}
    plain = c.plain()
    p, pid = c.job(d, extra=extra)
    same_output(p, plain, "full")
    w = warnings(p.stderr)
    eq(len(w), 1, "one trshim: line (%s)" % w)
    check(w[0].startswith("trshim: cannot write trace %s/%s: No space left on device (after " % (d, trace_name(pid))),
          "the line: %s" % w)
    check(marker_name(pid) in w[0], "the line names the marker: %s" % w)
    eq(sorted(os.listdir(d)), sorted([ring_name(pid), marker_name(pid)]), "the folder's files (no temporary left)")
    m = check_marker(os.path.join(d, marker_name(pid)), pid, errno.ENOSPC)
    check(m["bytes"] >= 4096 or m["reason"] == "exit", "bytes %d" % m["bytes"])
    check_ring(os.path.join(d, ring_name(pid)), pid)



def case_ring_full(c):
    """The disk fills while the ring file grows (a tmpfs filled by the job
    itself after 100 calls, freed before its end): one line, the newer
    records go to memory instead of a hole (a store there would be
    SIGBUS), the trace holds every call, the ring file the ones it could."""
    mnt = os.path.join(c.tmp, "mnt")
    c.mount_tmpfs(mnt, 8 << 20)
    d = os.path.join(mnt, "traces")
    n = 5000
    extra = {"TRSHIM_TEST_FILLER": os.path.join(mnt, "filler")}
    plain = c.plain(("loop", "0"))
    p, pid = c.job(d, mode=("fill", str(n)), extra=extra)
    eq(p.returncode, plain.returncode, "exit status as without the shim")
    w = warnings(p.stderr)
    eq(len(w), 1, "one trshim: line (%s)" % w)
    path = os.path.join(d, ring_name(pid))
    eq(w[0], "trshim: the trace folder %s is full (No space left on device): the ring file %s cannot grow: newer "
       "calls are kept in memory only, lost unless room is made before this process's traces are written (a trace "
       "that cannot be written leaves a .write-failed marker)" % (d, path), "the line")
    eq(sorted(os.listdir(d)), sorted([ring_name(pid), trace_name(pid)]), "the folder's files")
    t = read_trace(os.path.join(d, trace_name(pid)), Failure)
    eq(len(t["calls"]), 100 + n, "calls in the trace")
    seq = t["call_fields"].index("seq")
    eq([x[seq] for x in t["calls"]], list(range(1, 101 + n)), "their sequence numbers")
    eq(t["ring"]["lost"], 0, "ring.lost")
    r = ring.read_ring(path)
    eq((r["header"]["state"], r["header"]["head"]), (2, 100 + n), "ring header state (exited), records")
    idx = [x["index"] for x in r["records"]]
    # the first REC_STEP (2048) slots are backed at activation, more as
    # the ring fills; the slots past the last backed step stay holes
    check(idx and idx == list(range(len(idx))) and len(idx) % 2048 == 0 and len(idx) < 100 + n,
          "ring records: %d, from %s to %s" % (len(idx), idx[:1], idx[-1:]))


CASES = {
    "links": case_links,
    "ring-taken": case_ring_taken,
    "modes": case_modes,
    "refuse": case_refuse,
    "sticky": case_sticky,
    "fsize": case_fsize,
    "fsize-trace": case_fsize_trace,
    "full": case_full,
    "ring-full": case_ring_full,
}


def unmount(c):
    for m in c.mounts:
        subprocess.run(["umount", m], capture_output=True)


def main():
    return run_case(CASES, Case, sys.argv, "test_files.py", on_failure=unmount)


if __name__ == "__main__":
    sys.exit(main())
