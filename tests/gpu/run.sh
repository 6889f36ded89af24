#!/usr/bin/env bash
# tests/gpu/run.sh: the NaN/Inf checks and Python call sites of libtrshim.so on a real GPU.
#
# One prepared script for a lent GPU machine (nvcc, NCCL and PyTorch there,
# no package registry, no meson needed). It
#   1. builds libtrshim.so with gcc and the GPU kernel with nvcc (for the
#      GPU's own architecture), as shim/nan/meson.build does;
#   2. runs tests/gpu/nan_gpu.c (one rank of real NCCL) under the shim: a NaN
#      born on the rank, an fp16 overflow from finite inputs (PreMulSum x2),
#      bfloat16 in place in a group, 64 MiB clean, a CUDA error pending in
#      the application; check_gpu.py checks the trace, with the GPU engine
#      and again with TRSHIM_NANCHECK_ENGINE=host;
#   3. measures the kernel against a device-to-device copy (bench/nangpu_bench)
#      and the added time per 64 MiB all-reduce (no shim / checks off / GPU
#      engine / host engine);
#   4. runs a real single-process PyTorch job with the NCCL backend under the
#      shim (tests/gpu/torch_nan.py) and checks its trace;
#   5. runs tests/gpu/torch_sites.py (a rank-specific dist.all_reduce under
#      `if rank == 0:`, one from a nested function, one from a thread) and
#      checks that each call's Python stack names its exact line;
#   6. prints a short table; the last line is "RESULT: PASS" or "RESULT: FAIL".
# Every step runs under `timeout`; the whole takes about a minute or two.
# Results (log, traces, table) go to $OUT when set (the device tool's output
# folder), else to a temporary folder.
#
# What must come with the tree. The shim links LLVM's libunwind statically
# (Debian libunwind-14-dev: /usr/lib/llvm-14/lib/libunwind.a and the headers
# in /usr/include/libunwind), and is written against NCCL 2.28's nccl.h;
# the GPU machine has neither and no package registry. On the machine that
# calls the device tool, first:
#     bash tests/gpu/run.sh --prepare-carry
# which copies them into .gpu-carry/ (ignored by git: never commit binaries),
# then run there, carrying that folder:
#     device tool run, carry [".gpu-carry"], command: bash tests/gpu/run.sh
# (or copy .gpu-carry/ to shared/trshim-carry/, or point TRSHIM_GPU_CARRY at
# any folder with the same layout: libunwind.a, include/libunwind/*.h,
# include/nccl.h). Without libunwind.a the script stops at once and says so.
#
# To work on this script without a GPU: TRSHIM_GPU_SIM=path/to/libtrsim.so
# preloads the simulated runtime after the shim (and a fake nvidia-smi must
# be on PATH); the kernel cannot run there, so checks are expected from the
# host engine and the kernel benchmark and PyTorch are skipped.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
CARRY=${TRSHIM_GPU_CARRY:-}
if [ -z "$CARRY" ]; then
    CARRY=.gpu-carry
    [ -d "$CARRY" ] || [ ! -d shared/trshim-carry ] || CARRY=shared/trshim-carry
fi

say() { echo "gpu/run.sh: $*"; }

# ---- --prepare-carry: on the calling machine ----
if [ "${1:-}" = --prepare-carry ]; then
    dst=.gpu-carry
    mkdir -p "$dst/include" || exit 1
    a=""
    for c in /usr/lib/llvm-16/lib/libunwind.a /usr/lib/llvm-15/lib/libunwind.a /usr/lib/llvm-14/lib/libunwind.a; do
        [ -f "$c" ] && { a=$c; break; }
    done
    [ -n "$a" ] || { say "no LLVM libunwind.a here (install libunwind-14-dev)"; exit 1; }
    [ -f /usr/include/libunwind/libunwind.h ] || { say "no /usr/include/libunwind/libunwind.h"; exit 1; }
    cuda=${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}
    [ -f "$cuda/include/nccl.h" ] || { say "no $cuda/include/nccl.h"; exit 1; }
    cp "$a" "$dst/libunwind.a" && cp -r /usr/include/libunwind "$dst/include/" &&
        cp "$cuda/include/nccl.h" "$dst/include/" || exit 1
    say "prepared $dst ($(du -sh "$dst" | cut -f1)): carry it, e.g. carry [\"$dst\"]"
    exit 0
fi

SIM=${TRSHIM_GPU_SIM:-}
OUT=${OUT:-$(mktemp -d)}
W=$OUT/trshim-gpu
B=$W/build
rm -rf "$W" && mkdir -p "$B" || exit 1
LOG=$W/log.txt
TABLE=$W/table.md
exec > >(tee -a "$LOG") 2>&1
T0=$SECONDS
fail=0
rows=()
row() { rows+=("| $1 | $2 |"); }
bad() { say "FAIL: $*"; fail=1; }
finish() {
    echo
    {
        echo "## tests/gpu/run.sh ($((SECONDS - T0)) s)"
        echo
        echo "| step | result |"
        echo "|---|---|"
        printf '%s\n' "${rows[@]}"
    } | tee "$TABLE"
    [ "$fail" = 0 ] && echo "RESULT: PASS" || echo "RESULT: FAIL"
    exit "$fail"
}
stop() { bad "$*"; row "stopped" "$*"; finish; }

# ---- what is here ----
CUDA=${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}
NVCC=$(command -v nvcc || echo "$CUDA/bin/nvcc")
[ -x "$NVCC" ] || stop "no nvcc (CUDA_HOME=$CUDA)"
command -v gcc >/dev/null || stop "no gcc"
command -v python3 >/dev/null || stop "no python3"
GPU=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -n 1)
[ -n "$GPU" ] || stop "nvidia-smi sees no GPU"
say "GPU: $GPU; nvcc: $("$NVCC" --version | tail -n 1)"
row "machine" "$GPU; $("$NVCC" --version | grep -o 'release [0-9.]*')"

# ---- carried pieces ----
UNWIND_A=""
for c in /usr/lib/llvm-16/lib/libunwind.a /usr/lib/llvm-15/lib/libunwind.a /usr/lib/llvm-14/lib/libunwind.a \
         "$CARRY/libunwind.a"; do
    [ -f "$c" ] && { UNWIND_A=$c; break; }
done
[ -n "$UNWIND_A" ] || stop "LLVM libunwind.a not found: /usr/lib/llvm-14/lib/libunwind.a is missing and was not carried ($CARRY/libunwind.a). Run 'bash tests/gpu/run.sh --prepare-carry' where libunwind-14-dev is installed and carry .gpu-carry (see the header of this script)."
UNWIND_INC=""
for c in /usr/include/libunwind "$CARRY/include/libunwind"; do
    [ -f "$c/libunwind.h" ] && { UNWIND_INC=$c; break; }
done
[ -n "$UNWIND_INC" ] || stop "libunwind headers not found (/usr/include/libunwind or $CARRY/include/libunwind)"
NCCL_INC=""
for c in "$CARRY/include" "$CUDA/include" /usr/include; do
    [ -f "$c/nccl.h" ] && { NCCL_INC=$c; break; }
done
[ -n "$NCCL_INC" ] || stop "nccl.h not found (carry it: $CARRY/include/nccl.h)"
say "libunwind: $UNWIND_A; nccl.h: $NCCL_INC/nccl.h"

# the real libraries the test programs link
NCCL_SO=""
pynccl=$(timeout 60 python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
for c in ${NCCL_HOME:+$NCCL_HOME/lib/libnccl.so.2} "$CUDA/lib64/libnccl.so.2" /usr/lib/x86_64-linux-gnu/libnccl.so.2 \
         /usr/lib64/libnccl.so.2 ${pynccl:+$pynccl/libnccl.so.2}; do
    [ -f "$c" ] && { NCCL_SO=$c; break; }
done
[ -n "$NCCL_SO" ] || stop "libnccl.so.2 not found (NCCL_HOME, $CUDA/lib64, /usr/lib, PyTorch's nvidia.nccl)"
CUDART_DIR=$CUDA/lib64
[ -f "$CUDART_DIR/libcudart.so" ] || stop "no $CUDART_DIR/libcudart.so"
say "libnccl: $NCCL_SO"

# ---- 1. build ----
t=$SECONDS
cap=$(echo "$GPU" | awk -F', ' '{ print $NF }' | tr -d '.')
case "$cap" in
    [0-9][0-9]|[0-9][0-9][0-9]) ARCH=(-gencode "arch=compute_$cap,code=sm_$cap") ;;
    *) ARCH=(-arch=native) ;;
esac
timeout 300 "$NVCC" --fatbin -O3 "${ARCH[@]}" -o "$B/tr_nangpu.fatbin" shim/nan/tr_nangpu.cu ||
    stop "nvcc could not build shim/nan/tr_nangpu.cu (${ARCH[*]})"
python3 shim/nan/embed_fatbin.py "$B/tr_nangpu.fatbin" "$B/tr_nangpu_image.c" || stop "embed_fatbin.py failed"
CFLAGS=(-std=c11 -O2 -g -D_GNU_SOURCE -fno-strict-aliasing -fPIC -Wall -Wextra
        -isystem "$NCCL_INC" -isystem "$CUDA/include")
SHIM_INC=(-Ishim -Ishim/base -Ishim/ring -Ishim/stacks/python -Ishim/stacks -Ishim/record -Ishim/nan -Ishim/write
          -Ishim/wrap)   # every folder of the shim (shim/meson.build's trshim_folders)
SHIM_FLAGS=(-fvisibility=hidden -fno-omit-frame-pointer -DUNW_LOCAL_ONLY -DTR_NANGPU_IMAGE -isystem "$UNWIND_INC"
            "${SHIM_INC[@]}")
objs=()
pids=()
for f in shim/*.c shim/*/*.c shim/*/*/*.c "$B/tr_nangpu_image.c"; do
    o=$B/$(basename "${f%.c}").o
    objs+=("$o")
    timeout 300 gcc "${CFLAGS[@]}" "${SHIM_FLAGS[@]}" -c "$f" -o "$o" 2>"$o.err" &
    pids+=($!)
done
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { cat "${objs[$i]}.err"; stop "gcc failed on ${objs[$i]%.o}.c"; }
done
SHIM=$B/libtrshim.so
PRE=$SHIM${SIM:+ $SIM}        # what LD_PRELOAD holds for a run under the shim
GPU_ENGINE=gpu
[ -z "$SIM" ] || GPU_ENGINE=host
timeout 120 gcc -shared -o "$SHIM" "${objs[@]}" "$UNWIND_A" -Wl,--exclude-libs,ALL \
    -Wl,--version-script=shim/trshim.map -Wl,-z,defs -lpthread -ldl -lm || stop "linking libtrshim.so failed"
LINK=(-L"$CUDART_DIR" "-Wl,-rpath,$CUDART_DIR" -lcudart "$NCCL_SO" "-Wl,-rpath,$(dirname "$NCCL_SO")")
timeout 120 gcc "${CFLAGS[@]}" tests/gpu/nan_gpu.c -o "$B/nan_gpu" "${LINK[@]}" -lm || stop "building nan_gpu failed"
timeout 120 gcc "${CFLAGS[@]}" -DTR_NANGPU_IMAGE "${SHIM_INC[@]}" bench/nangpu_bench.c shim/nan/tr_nangpu.c shim/base/tr_real.c \
    shim/base/tr_dlreal.c shim/base/tr_dynsym.c \
    shim/nan/tr_nanscan.c "$B/tr_nangpu_image.c" -o "$B/nangpu_bench" "${LINK[@]}" -ldl -lpthread -lm ||
    stop "building nangpu_bench failed"
row "build: gcc + nvcc ${ARCH[*]}" "ok ($((SECONDS - t)) s)"

# ---- 2. nan_gpu under the shim ----
run_nan() {  # name, engine, then env assignments
    local name=$1 engine=$2
    shift 2
    rm -rf "${W:?}/$name"
    if ! env "$@" TRSHIM_DIR="$W/$name" LD_PRELOAD="$PRE" timeout 120 "$B/nan_gpu" check >"$W/$name.out" 2>&1; then
        cat "$W/$name.out"
        bad "nan_gpu ($name) failed"
        row "nan_gpu, $engine engine" "FAIL: the program failed"
        return
    fi
    cat "$W/$name.out"
    if timeout 60 python3 tests/gpu/check_gpu.py nan "$W/$name" "$engine" >"$W/$name.check" 2>&1; then
        row "nan_gpu, $engine engine: $(grep -c ^PASS "$W/$name.check") facts" "PASS"
    else
        bad "nan_gpu ($name): trace check failed"
        row "nan_gpu, $engine engine" "FAIL: $(grep ^FAIL "$W/$name.check" | head -n 3 | tr '\n' ';')"
    fi
    cat "$W/$name.check"
}
run_nan nan-gpu "$GPU_ENGINE"
run_nan nan-host host TRSHIM_NANCHECK_ENGINE=host
# the application's error state: as without the shim
base=$(env TRSHIM=0 LD_PRELOAD="$PRE" timeout 120 "$B/nan_gpu" check 2>&1 | grep ^pending_error)
with=$(grep ^pending_error "$W/nan-gpu.out")
if [ -n "$base" ] && [ "$base" = "$with" ]; then
    row "CUDA error pending in the application" "kept as without the shim ($with)"
else
    bad "error state differs: without the shim '$base', with it '$with'"
    row "CUDA error pending in the application" "FAIL: without '$base', with '$with'"
fi

# ---- 3. speed ----
if [ -n "$SIM" ]; then
    row "kernel benchmark" "skipped (simulator)"
elif timeout 180 "$B/nangpu_bench" 256 50 >"$W/bench.out" 2>&1; then
    cat "$W/bench.out"
    mem=$(awk '$2 == "copy" { print $7 }' "$W/bench.out")
    row "device-to-device copy, 256 MiB" "$(awk '$2 == "copy" { print $5 }' "$W/bench.out") GB/s (memory traffic $mem GB/s)"
    while read -r _ _ dt _ _ g _ r; do
        ok=$(awk -v r="$r" 'BEGIN { print (r >= 0.8) ? "ok" : "MISSED" }')
        [ "$ok" = ok ] || bad "kernel $dt: $r x the copy's memory bandwidth (target 0.8)"
        row "kernel scan $dt, 256 MiB" "$g GB/s = $r x copy traffic (target >= 0.8: $ok)"
    done < <(grep '^nangpu scan' "$W/bench.out")
    row "one 4 KiB check (2 launches)" "$(awk '$2 == "launch_us" { print $3 }' "$W/bench.out") us on the stream"
    grep -q '^nangpu verify ok' "$W/bench.out" || { bad "nangpu_bench answers wrong"; row "kernel answers" "FAIL"; }
else
    cat "$W/bench.out"
    bad "nangpu_bench failed"
    row "kernel benchmark" "FAIL: $(tail -n 1 "$W/bench.out")"
fi
us() {  # env assignments (LD_PRELOAD= for no shim)
    local v
    v=$(env "$@" TRSHIM_DIR="$W/time" timeout 120 "$B/nan_gpu" time 30 2>&1 | awk '$1 == "allreduce_us" { print $2 }')
    echo "${v:-?}"
}
t_none=$(us LD_PRELOAD="$SIM")
t_off=$(us LD_PRELOAD="$PRE" TRSHIM_NANCHECK=off)
t_gpu=$(us LD_PRELOAD="$PRE")
t_host=$(us LD_PRELOAD="$PRE" TRSHIM_NANCHECK_ENGINE=host)
row "64 MiB float32 all-reduce in place, us per call: no shim / checks off / GPU engine / host engine" \
    "$t_none / $t_off / $t_gpu / $t_host"

# ---- 4. PyTorch ----
if [ -n "$SIM" ]; then
    row "PyTorch job" "skipped (simulator)"
elif timeout 120 python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
    rm -rf "$W/torch"
    if TRSHIM_DIR="$W/torch" LD_PRELOAD="$SHIM" timeout 240 python3 tests/gpu/torch_nan.py >"$W/torch.out" 2>&1; then
        cat "$W/torch.out"
        premul=$(grep -q 'torch_nan premul yes' "$W/torch.out" && echo yes || echo no)
        ver=$(grep 'torch_nan torch' "$W/torch.out" | cut -d' ' -f2-)
        if timeout 60 python3 tests/gpu/check_gpu.py torch "$W/torch" gpu "$premul" >"$W/torch.check" 2>&1; then
            row "PyTorch job, NCCL backend ($ver; fp16 overflow: $premul)" "PASS ($(grep -c ^PASS "$W/torch.check") facts)"
        else
            bad "PyTorch trace check failed"
            row "PyTorch job ($ver)" "FAIL: $(grep ^FAIL "$W/torch.check" | head -n 3 | tr '\n' ';')"
        fi
        cat "$W/torch.check"
    else
        cat "$W/torch.out"
        bad "torch_nan.py failed under the shim"
        row "PyTorch job" "FAIL: $(tail -n 1 "$W/torch.out")"
    fi
else
    row "PyTorch job" "skipped: no PyTorch with CUDA here"
fi

# ---- 5. PyTorch call sites: the Python line of each collective ----
if [ -n "$SIM" ]; then
    row "PyTorch call sites" "skipped (simulator)"
elif timeout 120 python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
    rm -rf "$W/sites"
    if TRSHIM_DIR="$W/sites" LD_PRELOAD="$SHIM" timeout 240 python3 tests/gpu/torch_sites.py >"$W/sites.out" 2>&1; then
        cat "$W/sites.out"
        if timeout 60 python3 tests/gpu/check_gpu.py sites "$W/sites" tests/gpu/torch_sites.py >"$W/sites.check" 2>&1; then
            row "PyTorch call sites (rank-specific all_reduce, nested, thread)" "PASS ($(grep -c ^PASS "$W/sites.check") facts)"
        else
            bad "PyTorch call-site check failed"
            row "PyTorch call sites" "FAIL: $(grep ^FAIL "$W/sites.check" | head -n 3 | tr '\n' ';')"
        fi
        cat "$W/sites.check"
    else
        cat "$W/sites.out"
        bad "torch_sites.py failed under the shim"
        row "PyTorch call sites" "FAIL: $(tail -n 1 "$W/sites.out")"
    fi
else
    row "PyTorch call sites" "skipped: no PyTorch with CUDA here"
fi
finish
