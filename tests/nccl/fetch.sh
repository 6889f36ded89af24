#!/usr/bin/env bash
# NCCL 2.32.3 from PyPI (nvidia-nccl-cu13, the newest there) for the version
# matrix (tests/versions), fetched once:
#   bash tests/nccl/fetch.sh      prints the folder (include/, lib/); exit 0 when ready
# The folder: $TRSHIM_NCCL_CACHE, else ~/.cache/trshim/nccl-2.32.3 (outside
# the source tree: ~360 MB). TRSHIM_NCCL_FETCH=0: nothing is fetched (exit 3;
# the tests that need it then skip, or fail under CI=true).
set -u
ver=2.32.3
dest=${TRSHIM_NCCL_CACHE:-$HOME/.cache/trshim/nccl-$ver}
say() { echo "tests/nccl/fetch.sh: $*" >&2; }
if [ "${TRSHIM_NCCL_FETCH:-1}" = 0 ]; then say "TRSHIM_NCCL_FETCH=0: not fetching NCCL $ver"; exit 3; fi
if [ -f "$dest/.complete" ]; then echo "$dest"; exit 0; fi
mkdir -p "$(dirname "$dest")" || exit 1
# one fetcher at a time (tests run two at once)
exec 9>"$dest.lock"
flock 9
if [ -f "$dest/.complete" ]; then echo "$dest"; exit 0; fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
py=$(command -v python3) || { say "no python3"; exit 1; }
# Debian's python3 has no pip: a throw-away venv (python3-venv) has one
if ! "$py" -m pip --version >/dev/null 2>&1; then
    "$py" -m venv "$tmp/venv" || { say "python3 -m venv failed (Debian: python3-venv)"; exit 1; }
    py=$tmp/venv/bin/python
fi
say "fetching nvidia-nccl-cu13==$ver into $dest (once)"
"$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary :all: \
    "nvidia-nccl-cu13==$ver" -d "$tmp/wheel" >&2 || { say "pip download failed"; exit 1; }
"$py" -m zipfile -e "$tmp"/wheel/*.whl "$tmp/x" || { say "unzip failed"; exit 1; }
rm -rf "$dest" && mkdir -p "$dest" &&
    cp -r "$tmp/x/nvidia/nccl/include" "$tmp/x/nvidia/nccl/lib" "$dest/" || { say "copy failed"; exit 1; }
touch "$dest/.complete"
echo "$dest"
