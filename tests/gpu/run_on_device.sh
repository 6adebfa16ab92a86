#!/usr/bin/env bash
# run_on_device.sh — runs the CUDA cases on a GPU machine that has no
# compiler, no LLVM and no network, only libcuda.so.1:
#   tests/gpu/run_on_device.sh [GPU_EXEC [CASES_DIR [gpu_exec run options]]]
#
# GPU_EXEC (default build/tests/gpu/gpu_exec) and CASES_DIR (default
# build/gpu-cases, what `gpu_exec build CASES_DIR` wrote: caseNNN.so,
# data/, cases.txt) are built on the development machine and carried over
# as plain files.  Prints the GPU (nvidia-smi, when there), then runs
# `GPU_EXEC run CASES_DIR --device cuda` and exits with its status: 0 all
# passed, 1 failures, 77 no usable GPU, 2 usage or missing files.
set -u
cd "$(dirname "$0")/../.." || exit 2
exe=${1:-build/tests/gpu/gpu_exec}
dir=${2:-build/gpu-cases}
shift $(($# < 2 ? $# : 2))
for f in "$exe" "$dir/cases.txt"; do
  if [[ ! -e $f ]]; then
    echo "run_on_device.sh: $f is missing (build it with gpu_exec build, then carry it)" >&2
    exit 2
  fi
done
command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$exe" run "$dir" --device cuda "$@"
