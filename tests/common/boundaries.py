#!/usr/bin/env python3
"""A tree's folders seen from outside only through their boundary headers.

    boundaries.py ROOT FOLDER:HEADER... [-I DIR]... [--also FILE]...

ROOT is a source tree; each FOLDER (a path below ROOT) has one boundary
header, HEADER (a file name in FOLDER): the one header of the folder that a
file outside it may include. A folder holds its subfolders (unless they are
listed themselves), so a file in a subfolder is inside it. Every .c and .h
file below ROOT, and each --also FILE (a test that compiles the tree's
sources, say), is read for its #include "..." lines; each is resolved as the
compiler would (next to the including file, then each -I DIR in order; ROOT
when no -I is given) and, when it lands in a listed folder the including
file is not inside, must be that folder's boundary header. An include that
resolves outside every listed folder (another tree, a system header, a
generated one) is not judged.

Prints each include that breaks the rule (the file, its line, the header and
the folder's boundary) and one summary line. Exit status 1 when there is
one, 0 when there is none, 2 on a usage error (a boundary header that does
not exist). Python 3 standard library only."""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def folder_of(rel, folders):
    """the longest of folders (paths below the root) that holds rel (a path below the root), None"""
    best = None
    for f in folders:
        if rel.startswith(f + "/") and (best is None or len(f) > len(best)):
            best = f
    return best


def resolve(name, including, dirs):
    """the path #include "name" in the file including reads (next to it, then dirs), None when none"""
    for d in [os.path.dirname(including)] + dirs:
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(p):
            return p
    return None


def tree_files(root):
    out = []
    for d, subs, files in os.walk(root):
        subs.sort()
        out += [os.path.join(d, f) for f in sorted(files) if f.endswith((".c", ".h"))]
    return out


def main(argv):
    root, bounds, dirs, also = None, {}, [], []
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(__doc__)
            return 0
        if a == "-I" and i + 1 < len(argv):
            dirs.append(os.path.abspath(argv[i + 1]))
            i += 1
        elif a == "--also" and i + 1 < len(argv):
            also.append(os.path.abspath(argv[i + 1]))
            i += 1
        elif root is None:
            root = os.path.abspath(a)
        elif ":" in a:
            f, h = a.rsplit(":", 1)
            bounds[os.path.normpath(f)] = h
        else:
            sys.stderr.write("boundaries: %s: not FOLDER:HEADER\n" % a)
            return 2
        i += 1
    if root is None or not bounds:
        sys.stderr.write("boundaries: usage: boundaries.py ROOT FOLDER:HEADER... [-I DIR]... [--also FILE]...\n")
        return 2
    for f, h in sorted(bounds.items()):
        if not os.path.isfile(os.path.join(root, f, h)):
            sys.stderr.write("boundaries: %s: no boundary header %s in %s\n" % (root, h, f))
            return 2
    dirs = dirs or [root]
    bad, seen = 0, 0
    for path in tree_files(root) + also:
        rel_from = os.path.relpath(path, root)
        home = folder_of(rel_from, bounds) if not rel_from.startswith("..") else None
        with open(path, errors="replace") as fh:
            lines = fh.read().splitlines()
        for no, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = resolve(m.group(1), path, dirs)
            if target is None:
                continue
            rel = os.path.relpath(target, root)
            if rel.startswith(".."):
                continue
            f = folder_of(rel, bounds)
            if f is None or f == home or (home is not None and home.startswith(f + "/")):
                continue
            seen += 1
            if rel != f + "/" + bounds[f]:
                print("boundaries: %s:%d includes %s: outside %s/ only its boundary %s may be included" %
                      (os.path.relpath(path, os.path.dirname(root)), no, rel, f, bounds[f]))
                bad += 1
    print("boundaries: %s: %d folder%s, %d include%s across folders, %d not of a boundary header" %
          (os.path.basename(root), len(bounds), "" if len(bounds) == 1 else "s", seen, "" if seen == 1 else "s", bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
