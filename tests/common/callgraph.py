#!/usr/bin/env python3
"""The file-level call graph of a program's objects, and its circles.

    callgraph.py [--nm NM] [--edges] [--order DIR,DIR,... [--root ROOT]] OBJ.o... | --target BUILD/PATH/TARGET

An object calls (or reads the data of) another when one of its undefined
symbols (nm: U) is a global symbol the other defines (T, D, B, R, ...,
and weak ones). Local symbols (t, d, b: static functions and data, and a
header's static inline functions where the compiler kept a copy) link
nothing across files, so they are not edges; what such an inline function
calls in another file is (its U symbols are in the object that includes
it). Symbols no object defines (libc, other libraries) are ignored.

The strongly connected components (Tarjan) of two or more files are the
circles: each is printed with one shortest cycle through it, the pairs of
its files that call each other, and every call between its files (the
calls that close it). Exit status 1 when there is one,
0 when there is none, 2 on a usage or nm error.

--target PATH: the objects of the meson target PATH (its private folder
PATH.p/*.o), only those the build's compile_commands.json still lists
(an object of a source removed since stays behind in the folder).
--edges: also print the whole graph (file -> file: symbols).
--order DIR,DIR,... (lowest first; with --root ROOT, else the folder all the
sources are in): the folders of a tree in their layers' order, each a path
below ROOT ("." for ROOT's own files, not its subfolders; a folder holds
its subfolders unless they are listed). Each object is put in the folder of its source (from the
build's compile_commands.json; a source generated in the build folder is in
the folder of the same path in the source tree); a call from a file into a folder above its
own, or a source in none of the folders, is printed (the call, both files)
and the exit status is 1.
Python 3 standard library and binutils' nm only."""
import glob
import json
import os
import subprocess
import sys
from collections import deque

# nm letters of global definitions (uppercase; V/W weak, u unique global, i indirect)
DEFINES = set("ABCDGIRSTVWiu")


def nm_symbols(nm, path):
    """(defined globals, undefined) symbol names of one object"""
    try:
        out = subprocess.run([nm, "-P", "--defined-only", path], capture_output=True, text=True, check=True).stdout
        und = subprocess.run([nm, "-P", "--undefined-only", path], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("callgraph: %s %s: %s" % (nm, path, getattr(e, "stderr", None) or e))
    defined = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 2 and f[1] in DEFINES:
            defined.add(f[0])
    undefined = set()
    for line in und.splitlines():
        f = line.split()
        if len(f) >= 2 and f[1] in ("U", "w", "v"):
            undefined.add(f[0])
    return defined, undefined


def node_name(path):
    """align.c.o -> align.c; meson's mangled names of sources elsewhere kept as they are"""
    b = os.path.basename(path)
    return b[:-2] if b.endswith(".o") else b


def graph(nm, objects):
    """{file: {file: sorted symbols}} and the definers of duplicated symbols"""
    defs, unds, owner, dups = {}, {}, {}, {}
    for p in objects:
        n = node_name(p)
        defs[n], unds[n] = nm_symbols(nm, p)
        for s in defs[n]:
            if s in owner and owner[s] != n:
                dups.setdefault(s, {owner[s]}).add(n)
            owner.setdefault(s, n)
    g = {n: {} for n in defs}
    for n, u in unds.items():
        for s in u:
            m = owner.get(s)
            if m is not None and m != n:
                g[n].setdefault(m, []).append(s)
    for n in g:
        for m in g[n]:
            g[n][m].sort()
    return g, dups


def tarjan(g):
    """strongly connected components, each a sorted list (iterative: no recursion limit)"""
    index, low, onstack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        onstack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    onstack.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    advanced = True
                    break
                if w in onstack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    onstack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
    return comps


def shortest_cycle(g, comp):
    """a shortest cycle within comp through its first file: [a, b, ..., a]"""
    inside = set(comp)
    start = comp[0]
    prev = {}
    q = deque([start])
    while q:
        v = q.popleft()
        for w in sorted(g[v]):
            if w not in inside:
                continue
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, v, start]
            if w not in prev:
                prev[w] = v
                q.append(w)
    return [start]


def syms_text(syms, most=6):
    return ", ".join(syms[:most]) + (", ... (%d more)" % (len(syms) - most) if len(syms) > most else "")


def target_objects(target):
    """the objects of meson target path `target` that its build still compiles"""
    objs = sorted(glob.glob(glob.escape(target) + ".p/*.o"))
    d = os.path.dirname(os.path.abspath(target))
    while True:
        cc = os.path.join(d, "compile_commands.json")
        if os.path.isfile(cc):
            break
        up = os.path.dirname(d)
        if up == d:
            return objs
        d = up
    with open(cc) as f:
        listed = {os.path.normpath(os.path.join(e.get("directory", d), e["output"]))
                  for e in json.load(f) if "output" in e}
    return [o for o in objs if os.path.normpath(os.path.abspath(o)) in listed]


def compile_db(start):
    """the entries of the compile_commands.json in start or the nearest folder above it ([] none)"""
    d = os.path.abspath(start)
    while True:
        cc = os.path.join(d, "compile_commands.json")
        if os.path.isfile(cc):
            with open(cc) as f:
                return [dict(e, directory=e.get("directory", d)) for e in json.load(f)]
        up = os.path.dirname(d)
        if up == d:
            return []
        d = up


def generated_source(src, build):
    """src, or for a source generated in meson build folder build (its meson-info/meson-info.json
    names the source tree) the path of the same name in the source tree: its folder is the folder of
    the meson.build that made it"""
    try:
        with open(os.path.join(build, "meson-info", "meson-info.json")) as f:
            tree = json.load(f)["directories"]["source"]
    except (OSError, ValueError, KeyError, TypeError):
        return src
    rel = os.path.relpath(src, build)
    return src if rel.startswith("..") else os.path.normpath(os.path.join(tree, rel))


def object_sources(objects):
    """{node name: absolute path of its source} for the objects the build's compile_commands.json lists"""
    srcs, dbs = {}, {}
    for o in objects:
        d = os.path.dirname(os.path.abspath(o))
        if d not in dbs:
            dbs[d] = {os.path.normpath(os.path.join(e["directory"], e["output"])):
                      generated_source(os.path.normpath(os.path.join(e["directory"], e["file"])), e["directory"])
                      for e in compile_db(d) if "output" in e and "file" in e}
        src = dbs[d].get(os.path.normpath(os.path.abspath(o)))
        if src is not None:
            srcs[node_name(o)] = src
    return srcs


def folder_of(rel, folders):
    """the longest of folders (paths below the root, "." the root's own files) that holds rel, None"""
    best = None
    for f in folders:
        inside = "/" not in rel if f == "." else rel.startswith(f.rstrip("/") + "/")
        if inside and (best is None or best == "." or len(f) > len(best)):
            best = f
    return best


def order_check(g, objects, order, root):
    """prints each call into a folder above the caller's (order: folders, lowest first) and each
    source in none of them; returns how many there were"""
    srcs = object_sources(objects)
    if root is None:
        root = os.path.commonpath([os.path.dirname(p) for p in srcs.values()]) if srcs else "."
    root = os.path.abspath(root)
    rank = {f: i for i, f in enumerate(order)}
    where, bad = {}, 0
    for n in sorted(g):
        src = srcs.get(n)
        if src is None:
            print("callgraph: %s: no source in compile_commands.json (its folder is not known)" % n)
            bad += 1
            continue
        rel = os.path.relpath(src, root)
        f = folder_of(rel, order) if not rel.startswith("..") else None
        if f is None:
            print("callgraph: %s is in none of the folders of --order (%s, below %s)" % (rel, ",".join(order), root))
            bad += 1
            continue
        where[n] = (rel, f)
    for n in sorted(where):
        for m in sorted(g[n]):
            if m in where and rank[where[m][1]] > rank[where[n][1]]:
                print("callgraph: %s (folder %s) calls %s (folder %s, above its own): %s" %
                      (where[n][0], where[n][1], where[m][0], where[m][1], syms_text(g[n][m])))
                bad += 1
    print("callgraph: folders %s (lowest first): %d file%s placed, %d call%s or file%s out of order" %
          (" < ".join(order), len(where), "" if len(where) == 1 else "s", bad, "" if bad == 1 else "s",
           "" if bad == 1 else "s"))
    return bad


def main(argv):
    nm = os.environ.get("NM", "nm")
    edges = False
    order, root = None, None
    objects = []
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--nm" and i + 1 < len(argv):
            nm = argv[i + 1]
            i += 1
        elif a == "--edges":
            edges = True
        elif a == "--order" and i + 1 < len(argv):
            order = [f.strip().rstrip("/") or "." for f in argv[i + 1].split(",") if f.strip()]
            i += 1
        elif a == "--root" and i + 1 < len(argv):
            root = argv[i + 1]
            i += 1
        elif a == "--target" and i + 1 < len(argv):
            objects += target_objects(argv[i + 1])
            i += 1
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            objects.append(a)
        i += 1
    if not objects:
        sys.stderr.write("callgraph: no objects (usage: callgraph.py [--nm NM] [--edges] [--order DIR,... [--root ROOT]] "
                         "OBJ.o... | --target PATH)\n")
        return 2
    g, dups = graph(nm, objects)
    nedges = sum(len(v) for v in g.values())
    if edges:
        for n in sorted(g):
            for m in sorted(g[n]):
                print("  %s -> %s: %s" % (n, m, syms_text(g[n][m])))
    for s in sorted(dups):
        print("callgraph: %s is defined by %s" % (s, ", ".join(sorted(dups[s]))))
    circles = [c for c in tarjan(g) if len(c) > 1]
    for c in circles:
        cyc = shortest_cycle(g, c)
        print("circle of %d files: %s" % (len(c), ", ".join(c)))
        print("  e.g. %s" % " -> ".join(cyc))
        pairs = sorted((n, m) for n in c for m in g[n] if m in c and n < m and n in g[m])
        if pairs:
            print("  calling each other: %s" % ", ".join("%s <-> %s" % p for p in pairs))
        for n in c:
            for m in sorted(g[n]):
                if m in c:
                    print("  %s -> %s: %s" % (n, m, syms_text(g[n][m])))
    print("callgraph: %d files, %d calls between files, %d circle%s" %
          (len(g), nedges, len(circles), "" if len(circles) == 1 else "s"))
    misplaced = order_check(g, objects, order, root) if order else 0
    return 1 if circles or misplaced else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
