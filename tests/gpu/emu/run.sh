#!/usr/bin/env bash
# run.sh — CUDA kernels on the CPU (emu.c): the row-group kernels
# (rows.c) or the tensor-core matmuls (mma.c, mma.tdsl):
#   tests/gpu/emu/run.sh TDSLC [SOURCE_DIR [rows|mma]]
# compiles each kernel the test checks with `--target=cuda:sm_90
# --emit=llvm`, makes the device IR x86-64 (to_host.py), builds it with
# the test and emu.c using clang 19 (the IR's LLVM) and runs the checks.
# Without clang 19 or python3: "run.sh: skipped: ...", exit 77.
set -u
[[ $# -ge 1 && $# -le 3 ]] || { echo "usage: $0 TDSLC [SOURCE_DIR [rows|mma]]" >&2; exit 2; }
suite=${3:-rows}
tdslc=$1
case $tdslc in /*) ;; */*) tdslc=$PWD/$tdslc ;; esac
src=${2:-$(cd "$(dirname "$0")/../../.." && pwd)}
here=$src/tests/gpu/emu
clang=
for c in clang-19 /usr/lib/llvm-19/bin/clang clang; do
  if command -v "$c" > /dev/null && "$c" --version 2>/dev/null | grep -q "version 19\."; then clang=$c; break; fi
done
[[ -n $clang ]] || { echo "run.sh: skipped: clang 19 not found"; exit 77; }
command -v python3 > /dev/null || { echo "run.sh: skipped: python3 not found"; exit 77; }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
lls=()
while read -r file kernel; do
  out=$tmp/$kernel
  "$tdslc" "$src/$file" --kernel="$kernel" --target=cuda:sm_90 --emit=llvm -o "$out.dev.ll" || exit 1
  python3 "$here/to_host.py" "$out.dev.ll" "$out.ll" || exit 1
  lls+=("$out.ll")
done < <(if [[ $suite == mma ]]; then # every kernel of mma.tdsl
  sed -n 's/^kernel \([A-Za-z0-9_]*\).*/tests\/gpu\/emu\/mma.tdsl \1/p' "$here/mma.tdsl"
else cat << 'LIST'
bench/kernels.tdsl softmax_last
bench/kernels.tdsl softmax_hand
bench/kernels.tdsl layer_norm_last
bench/kernels.tdsl layernorm_hand
bench/kernels.tdsl rmsnorm_hand
tests/pytorch/cases/rowfuse_views.tdsl rowfuse_two_dims
tests/pytorch/cases/rowfuse_views.tdsl rowfuse_f16
tests/pytorch/cases/stats_logsumexp.tdsl lse_wide
tests/pytorch/cases/layers_norm.tdsl gn_basic
LIST
fi)
"$clang" -O1 -w -o "$tmp/$suite" "$here/$suite.c" "$here/emu.c" "${lls[@]}" -lm || exit 1
"$tmp/$suite"
