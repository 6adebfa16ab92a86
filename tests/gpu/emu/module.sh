#!/usr/bin/env bash
# module.sh — a CUDA device module as host code for the stand-in driver:
#   tests/gpu/emu/module.sh CLANG OUT.emu.so TDSLC FILE.tdsl [tdslc options]
# runs `TDSLC FILE.tdsl [options] --emit=llvm` (options name the cuda
# target), makes the device IR x86-64 (to_host.py) and links it with
# emu.c into the shared object OUT.emu.so, which tests/unit/fake_libcuda.c
# loads as the module when FAKE_CUDA_EMU names it.  CLANG must be clang 19
# (the IR's LLVM).  Used by gpu_exec --emu, test_random (cuda) and the
# example_preprocess_cuda_emu test.
set -eu
[[ $# -ge 4 ]] || { echo "usage: $0 CLANG OUT.emu.so TDSLC FILE.tdsl [tdslc options]" >&2; exit 2; }
clang=$1 out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$@" --emit=llvm -o "$tmp/dev.ll"
python3 "$here/to_host.py" "$tmp/dev.ll" "$tmp/host.ll"
"$clang" -O1 -shared -fPIC -w "$tmp/host.ll" "$here/emu.c" -o "$out"
