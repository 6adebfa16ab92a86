#!/usr/bin/env bash
# exec.sh — ctest gpu_exec: the PyTorch manifest through CUDA kernels.
#   tests/gpu/exec.sh GPU_EXEC OUTDIR FAKE_CUDA_DIR [gpu_exec build options]
# Builds every manifest kernel for CUDA (gpu_exec build; a kernel that
# does not compile or link fails the test) and, where clang 19 is found,
# each case's device module as host code too (--emu).  Then runs the
# cases on the GPU; where there is none (CI), runs them on the CPU
# instead: the stand-in driver in FAKE_CUDA_DIR (tests/unit/fake_libcuda.c)
# loads each case's emulated module and launches its kernels through
# tests/gpu/emu/emu.c, so the generated host code, the runtime and the
# device kernels' logic are all checked against PyTorch's results.
# Exit: 0 passed, 1 failed, 77 neither a GPU nor clang 19 (nor
# GPU_EXEC_EMU=0).
set -u
[[ $# -ge 3 ]] || { echo "usage: $0 GPU_EXEC OUTDIR FAKE_CUDA_DIR [build options]" >&2; exit 2; }
exe=$1 out=$2 fake=$3
shift 3
clang=
for c in clang-19 /usr/lib/llvm-19/bin/clang clang; do
  if command -v "$c" > /dev/null && "$c" --version 2>/dev/null | grep -q "version 19\."; then clang=$c; break; fi
done
emu=()
# GPU_EXEC_EMU=0 (the sanitizer build's ctest): build only, as with no clang
[[ -n $clang && ${GPU_EXEC_EMU:-1} != 0 ]] && command -v python3 > /dev/null && emu=(--emu "$clang")
"$exe" build "$out" "$@" "${emu[@]}" || exit 1
"$exe" run "$out" --device cuda
rc=$?
[[ $rc == 77 ]] || exit $rc
if [[ ${#emu[@]} == 0 ]]; then
  echo "exec.sh: skipped: no GPU, and no emulation (clang 19 and python3, GPU_EXEC_EMU unset)"
  exit 77
fi
echo "exec.sh: no GPU: the same cases on the CPU, through the stand-in driver and emu.c"
LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$exe" run "$out" --device cuda --jobs "$(nproc 2>/dev/null || echo 2)"
