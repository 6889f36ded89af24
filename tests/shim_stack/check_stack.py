#!/usr/bin/env python3
"""Checks of shim/stacks/tr_stack.c through stack_prog.c:

    check_stack.py basic  PROG   symbols of the innermost frames, dedup, one key
                                 with two stacks, threads, the fast path is used
    check_stack.py slow   PROG   TRSHIM_STACK_CACHE=0 gives the same stacks
    check_stack.py depth  PROG   TRSHIM_STACK_DEPTH caps the frames (0: no stacks)
    check_stack.py cap    PROG   65536 distinct stacks at most, then -1
    check_stack.py hazard PROG   PROG built without the frame-pointer check
                                 conflates the "vla" stacks (shows that the
                                 scenario needs the check)

Symbols of our own functions are checked against nm; the C library's frames
vary between systems and are not checked."""
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import Failure, check, shim_lines  # noqa: E402


CHAIN = ["leaf_d", "stat_c", "level_b", "level_a", "scenario_chain", "main"]
RECURSIVE = ["rec_bottom"] + ["recurse"] * 30 + ["scenario_recursive", "main"]


def run(prog, **env):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        e = dict(os.environ)
        for k in ("TRSHIM_STACK_CACHE", "TRSHIM_STACK_DEPTH"):
            e.pop(k, None)
        e.update(env)
        p = subprocess.run([prog, out], env=e, capture_output=True, text=True, timeout=100)
        check(p.returncode == 0, f"{prog} {env} exited {p.returncode}: {p.stderr}")
        check(not shim_lines(p.stderr), f"unexpected warning: {p.stderr}")
        with open(out) as f:
            return json.load(f)


def symbols(d, idx):
    check(0 <= idx < len(d["stacks"]), f"stack index {idx} out of range")
    return [f["symbol"] for f in d["stacks"][idx]["frames"]]


def frame_key(d, fr):
    path = d["modules"][fr["module"]]["path"] if fr["module"] >= 0 else None
    return (path, fr["offset"], fr["symbol"], fr["symbol_offset"])


def build_id(path):
    """GNU build id from the PT_NOTE segments of a 64-bit little-endian ELF file."""
    with open(path, "rb") as f:
        data = f.read()
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        ptype, _, off, _, _, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if ptype != 4:
            continue
        p, end = off, off + filesz
        while p + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", data, p)
            name = data[p + 12:p + 12 + namesz]
            desc_at = p + 12 + ((namesz + 3) & ~3)
            if ntype == 3 and name == b"GNU\0":
                return data[desc_at:desc_at + descsz].hex()
            p = desc_at + ((descsz + 3) & ~3)
    return None


def nm_symbols(path):
    out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            syms.setdefault(parts[2], int(parts[0], 16))
    return syms


def check_common(d, prog):
    r = d["results"]
    st = r["stats"]
    check(st["unwind_failed"] == 0 and st["dropped"] == 0, f"stats: {st}")
    check(r["threads_started"], "threads did not start")
    # the program's own module: path, build id, and every symbol against nm
    mods = d["modules"]
    check(len(mods) >= 1, "no modules")
    me = [i for i, m in enumerate(mods) if os.path.realpath(m["path"]) == os.path.realpath(prog)]
    check(len(me) == 1, f"program not among modules: {[m['path'] for m in mods]}")
    m = mods[me[0]]
    check(m["build_id"] == build_id(prog), f"build id {m['build_id']} != {build_id(prog)}")
    check(m["base"].startswith("0x") and int(m["base"], 16) > 0, f"base {m['base']}")
    nm = nm_symbols(prog)
    named = 0
    for s in d["stacks"]:
        check(len(s["frames"]) >= 1, "empty stack")
        for fr in s["frames"]:
            check(fr["offset"].startswith("0x"), f"offset {fr['offset']}")
            if fr["module"] != me[0] or fr["symbol"] is None:
                continue
            sym = fr["symbol"]
            check(sym in nm, f"symbol {sym} not in nm's list")
            off = int(fr["offset"], 16)
            check(nm[sym] + fr["symbol_offset"] == off,
                  f"{sym}+{fr['symbol_offset']} != offset {fr['offset']} (nm: {nm[sym]:#x})")
            check(0 < fr["symbol_offset"], f"{sym}: return address at the symbol's start")
            named += 1
    check(named > 0, "no frame of the program is named")


def expect_prefix(d, idx, names, what):
    got = symbols(d, idx)
    check(got[:len(names)] == names, f"{what}: innermost frames {got[:len(names) + 2]}, expected {names}")


def case_basic(prog):
    d = run(prog)
    check_common(d, prog)
    r = d["results"]
    chain = r["chain"]
    check(len(set(chain)) == 1 and chain[0] >= 0, f"same call site, different stacks: {chain}")
    check(r["chain_other"] >= 0 and r["chain_other"] != chain[0], f"other call site: {r['chain_other']}")
    expect_prefix(d, chain[0], CHAIN, "chain")
    expect_prefix(d, r["chain_other"], CHAIN, "chain (other site)")
    check(d["stacks"][chain[0]]["frames"][4]["offset"] != d["stacks"][r["chain_other"]]["frames"][4]["offset"],
          "the two call sites have the same offset")
    rec = r["recursive"]
    check(len(set(rec[0])) == 1 and len(set(rec[1])) == 1 and rec[0][0] != rec[1][0],
          f"recursion: {rec}")
    for k in (0, 1):
        expect_prefix(d, rec[k][0], RECURSIVE, "recursion")
    expect_prefix(d, r["helper"], ["scenario_helper", "main"], "capture from a helper")
    # one key (same return address and stack pointer of the wrapper's caller), two stacks
    check(r["shared_same_key"], "g1/g2 construction: the key differs, the case tests nothing")
    sh = r["shared"]
    check(sh[0] != sh[1] and sh[0::2] == [sh[0]] * 3 and sh[1::2] == [sh[1]] * 3, f"g1/g2: {sh}")
    expect_prefix(d, sh[0], ["f_shared", "g1", "pick", "scenario_shared", "main"], "g1 path")
    expect_prefix(d, sh[1], ["f_shared", "g2", "pick", "scenario_shared", "main"], "g2 path")
    check(r["vla_same_key"], "vla construction: the key differs, the case tests nothing")
    v = r["vla"]
    check(v[0] != v[1] and v[0::2] == [v[0]] * 3 and v[1::2] == [v[1]] * 3, f"vla paths conflated: {v}")
    expect_prefix(d, v[0], ["vla_leaf", "vla_mid", "vla_p1", "vla_via", "vla_call", "scenario_vla", "main"], "vla p1")
    expect_prefix(d, v[1], ["vla_leaf", "vla_mid", "vla_p2", "vla_via", "vla_call", "scenario_vla", "main"], "vla p2")
    # the fast path was taken: chain 5, recursion 10, g1/g2 4, vla 4 repeats
    # (23; a little less if stack addresses make keys collide in the cache)
    mt = r["main_thread"]
    check(mt["hits"] >= 15 and mt["uncacheable"] == 0, f"main thread cache: {mt}")
    # threads: the same stacks in every thread, every iteration
    th = r["threads"]
    first = th[0]
    for t in th:
        check(t["consistent"], f"a thread saw different indexes for one stack: {t}")
        check((t["chain"], t["recursive"], t["g1"], t["g2"]) ==
              (first["chain"], first["recursive"], first["g1"], first["g2"]), f"threads differ: {th}")
        check(t["misses"] == 4 and t["uncacheable"] == 0, f"thread cache: {t}")
    check(first["g1"] != first["g2"], "threads: g1/g2 conflated")
    expect_prefix(d, first["chain"], CHAIN[:4] + ["thread_main"], "thread chain")
    expect_prefix(d, first["recursive"], RECURSIVE[:31] + ["thread_main"], "thread recursion")
    expect_prefix(d, first["g1"], ["f_shared", "g1", "pick", "thread_main"], "thread g1")
    expect_prefix(d, first["g2"], ["f_shared", "g2", "pick", "thread_main"], "thread g2")
    ids = {first["chain"], first["recursive"], first["g1"], first["g2"]} | set(chain) | set(sh) | set(v)
    check(len(d["stacks"]) == r["stats"]["stacks"], "stacks written != stacks counted")
    check(max(ids) < len(d["stacks"]), "index beyond the table")


def comparable(d):
    r = dict(d["results"])
    r["main_thread"] = None
    r["threads"] = [{k: v for k, v in t.items() if k not in ("hits", "misses", "uncacheable")}
                    for t in r["threads"]]
    r["stats"] = {k: v for k, v in r["stats"].items() if k != "uncacheable"}
    stacks = [[frame_key(d, fr) for fr in s["frames"]] for s in d["stacks"]]
    return r, stacks, [(m["path"], m["build_id"]) for m in d["modules"]]


def case_slow(prog):
    fast = run(prog)
    slow = run(prog, TRSHIM_STACK_CACHE="0")
    check_common(slow, prog)
    check(slow["results"]["main_thread"]["hits"] == 0, "TRSHIM_STACK_CACHE=0 still hit the cache")
    check(all(t["hits"] == 0 for t in slow["results"]["threads"]), "threads hit the cache")
    check(fast["results"]["main_thread"]["hits"] > 0, "the cached run never hit")
    fr, fs, fm = comparable(fast)
    sr, ss, sm = comparable(slow)
    check(fr == sr, f"results differ:\nfast {fr}\nslow {sr}")
    check(fm == sm, f"modules differ:\nfast {fm}\nslow {sm}")
    check(fs == ss, "stacks differ between the cached and the uncached run")


def case_depth(prog):
    d = run(prog, TRSHIM_STACK_DEPTH="5")
    r = d["results"]
    for s in d["stacks"]:
        check(len(s["frames"]) <= 5, f"{len(s['frames'])} frames with depth 5")
    rec = r["recursive"]
    check(rec[0][0] == rec[1][0], f"stacks equal in their first 5 frames are one: {rec}")
    expect_prefix(d, rec[0][0], RECURSIVE[:5], "recursion at depth 5")
    check(len(symbols(d, rec[0][0])) == 5, "recursion: not 5 frames")
    expect_prefix(d, r["chain"][0], CHAIN[:5], "chain at depth 5")
    check(r["chain"][0] != r["chain_other"], "depth 5 still tells the call sites of scenario_chain apart")
    sh = r["shared"]
    check(sh[0] != sh[1], f"g1/g2 conflated at depth 5: {sh}")
    check(r["main_thread"]["hits"] >= 15, f"depth 5: cache not used: {r['main_thread']}")
    # depth 1: the wrapper's caller only; g1 and g2 are the same stack
    d = run(prog, TRSHIM_STACK_DEPTH="1")
    r = d["results"]
    check(all(len(s["frames"]) == 1 for s in d["stacks"]), "depth 1: more frames")
    check(len(set(r["shared"])) == 1, f"depth 1: {r['shared']}")
    expect_prefix(d, r["shared"][0], ["f_shared"], "depth 1")
    # depth 0: no stacks
    d = run(prog, TRSHIM_STACK_DEPTH="0")
    r = d["results"]
    check(d["stacks"] == [] and d["modules"] == [], "depth 0 captured stacks")
    check(set(r["chain"]) == {-1} and set(r["shared"]) == {-1} and r["helper"] == -1,
          f"depth 0 returned indexes: {r}")


def case_cap(prog):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        p = subprocess.run([prog, out, "cap"], capture_output=True, text=True, timeout=100)
        check(p.returncode == 0, f"cap run exited {p.returncode}: {p.stderr}")
        with open(out) as f:
            c = json.load(f)["results"]["cap"]
    check(c["dense"], "the first 65536 distinct stacks did not get indexes 0..65535")
    check(c["refused"], "stacks beyond the cap did not get -1")
    check(c["again"], "captured again, stacks got other indexes")
    check(c["stacks"] == 65536, f"stacks {c['stacks']}")
    # refused once each when first unwound, and again when re-unwound
    check(70000 - 65536 <= c["dropped"] <= 70000 - 65536 + 200, f"dropped {c['dropped']}")
    # No assertion on cache hits here: after 70000 distinct stacks the
    # bounded per-thread cache holds whichever keys survived eviction, which
    # depends on where the stacks land; hits are checked in the other cases.


def case_hazard(prog):
    d = run(prog)
    r = d["results"]
    check(r["vla_same_key"], "vla construction: the key differs")
    v = r["vla"]
    check(len(set(v)) == 1,
          f"without the frame-pointer check the vla paths were still told apart ({v}): the "
          "scenario no longer reproduces a stale return address; make it harder")


def main():
    case, prog = sys.argv[1], os.path.abspath(sys.argv[2])
    try:
        {"basic": case_basic, "slow": case_slow, "depth": case_depth, "cap": case_cap,
         "hazard": case_hazard}[case](prog)
    except Failure as e:
        print(f"FAIL {case}: {e}")
        return 1
    print(f"ok {case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
