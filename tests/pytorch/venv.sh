#!/usr/bin/env bash
# Installs the torch suite's virtual environment once and reuses it:
#   bash tests/pytorch/venv.sh        prints the venv's folder; exit 0 when ready
# The folder: $TRSHIM_TORCH_VENV, else ~/.cache/trshim/torch-venv (outside the
# source tree: ~5 GB). A venv whose requirements differ from
# tests/pytorch/requirements.txt is reinstalled. TRSHIM_TORCH=0: nothing is
# installed (exit 3; the torch tests then skip).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=${TRSHIM_TORCH_VENV:-$HOME/.cache/trshim/torch-venv}
req=$here/requirements.txt
say() { echo "tests/pytorch/venv.sh: $*" >&2; }
if [ "${TRSHIM_TORCH:-1}" = 0 ]; then say "TRSHIM_TORCH=0: not installing PyTorch"; exit 3; fi
stamp=$venv/.trshim-requirements
if [ -x "$venv/bin/python" ] && cmp -s "$req" "$stamp"; then echo "$venv"; exit 0; fi
# one installer at a time (tests run two at once)
mkdir -p "$(dirname "$venv")" || exit 1
exec 9>"$venv.lock"
flock 9
if [ -x "$venv/bin/python" ] && cmp -s "$req" "$stamp"; then echo "$venv"; exit 0; fi
py=$(command -v python3) || { say "no python3"; exit 1; }
say "installing $(grep -v '^#' "$req" | tr '\n' ' ')into $venv (once; ~5 GB)"
rm -rf "$venv"
"$py" -m venv "$venv" || { say "python3 -m venv failed (Debian: python3-venv)"; exit 1; }
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" >&2 || { say "pip install failed"; exit 1; }
cp "$req" "$stamp"
echo "$venv"
