#!/usr/bin/env python3
"""The trshim command's package as a house (suite 'install', test install-python-modules).

    check_modules.py

Every module of python/trshim/ opens with a docstring (what it owns), imports its siblings as
trshim.NAME (or .NAME) and only those that exist, and the imports between them make no circle:
each module can be read knowing only the ones below it. Prints the modules in that order."""
import ast
import os
import sys

SOURCE = os.environ["TRSHIM_SOURCE_ROOT"]
PACKAGE = os.path.join(SOURCE, "python", "trshim")


def siblings(tree):
    """the package's modules that a module's code imports (trshim.NAME, .NAME, from trshim import NAME)"""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 0 and mod.startswith("trshim."):
                out.add(mod.split(".")[1])
            elif node.level == 1 and mod:
                out.add(mod.split(".")[0])
            elif (node.level == 0 and mod == "trshim") or (node.level == 1 and not mod):
                out |= {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("trshim.")}
    return out


def layers(deps):
    """(the modules, each after those it imports; None, or the modules left in a circle)"""
    order, done = [], set()
    while len(done) < len(deps):
        ready = sorted(n for n in deps if n not in done and deps[n] <= done)
        if not ready:
            return order, sorted(set(deps) - done)
        order += ready
        done |= set(ready)
    return order, None


def main():
    names = {f[:-3] for f in os.listdir(PACKAGE) if f.endswith(".py")}
    problems, deps = [], {}
    for n in sorted(names):
        with open(os.path.join(PACKAGE, n + ".py")) as f:
            tree = ast.parse(f.read())
        if not ast.get_docstring(tree):
            problems.append("%s.py: no docstring first (what the module owns)" % n)
        deps[n] = siblings(tree) - {n}
        if deps[n] - names:
            problems.append("%s.py imports %s: not modules of the package" % (n, sorted(deps[n] - names)))
            deps[n] &= names
    if layers({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) != (["d"], ["a", "b", "c"]):
        problems.append("layers() does not find a circle of three")
    order, circle = layers(deps)
    if circle:
        problems.append("the imports make a circle among %s: %s" % (circle, {n: sorted(deps[n]) for n in circle}))
    for p in problems:
        print("FAIL " + p)
    if problems:
        return 1
    print("install-python-modules: ok: %d modules, each after the ones it imports: %s" % (len(order), " ".join(order)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
