"""Runs the Python frame tests (test_frames.py, test_break.py) with every
CPython 3.MINOR interpreter found on this machine (pythons.py):

    run_version.py MINOR libpyprobe.so libpyprobe_hooks.so

Exit status 77 (meson: skipped) with a message when none is found."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pythons  # noqa: E402


def main():
    minor, probe, hooks = int(sys.argv[1]), os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    found = pythons.find(minor)
    if not found:
        print("skip: no CPython 3.%d on this machine (looked on PATH, /usr/bin, /usr/local/bin, pyenv; "
              "TRSHIM_PYTHONS to name one)" % minor)
        return 77
    failed = 0
    for path, ver in found:
        if "free-threaded" in ver:
            print("== %s %s: free-threaded build, not supported: expecting no frames" % (path, ver))
        for script, lib in (("test_frames.py", probe), ("test_break.py", hooks)):
            print("== %s (%s): %s" % (path, ver, script), flush=True)
            rc = subprocess.run([path, os.path.join(HERE, script), lib], timeout=600).returncode
            if rc != 0:
                print("== FAILED: %s %s: exit status %d" % (path, script, rc))
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
