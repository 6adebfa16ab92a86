#!/usr/bin/env bash
# bench/gpu/build.sh — builds the self-contained GPU benchmark directory
# (bench/README.md, "GPU"), here, where tdslc is; the GPU machine needs
# only python3 with numpy and torch.
#
# Usage: bench/gpu/build.sh OUTDIR [--target T]
#   T: cuda:sm_90 (default), any cuda:sm_NN, or host (a CPU library for
#   `bench_gpu.py --device cpu`, the dry run).
# Environment: TDSLC (default: build/tdslc of this source tree, else
#   tdslc on PATH), TDSLC_OPTIONS (more tdslc options, e.g. -O3).
#
# Writes OUTDIR/kernels_cuda.so (kernels_host.so for --target host) with
# every kernel of bench/kernels.tdsl that tdslc compiles for T (each is
# probed alone first: a refused kernel is left out and its message kept
# in OUTDIR/build.txt, where bench_gpu.py shows it; none compiled: exit
# status 1), the report beside it
# (kernels_cuda.report.json, for tdsl.load), OUTDIR/tdsl/ (the Python
# package) and OUTDIR/bench_gpu.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
out=${1:?usage: build.sh OUTDIR [--target T]}
shift
target=cuda:sm_90
while [ $# -gt 0 ]; do
  case $1 in
    --target) target=${2:?--target needs a value}; shift 2 ;;
    --target=*) target=${1#--target=}; shift ;;
    *) echo "build.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
case $target in cuda | cuda:*) lib=kernels_cuda ;; *) lib=kernels_host ;; esac
tdslc=${TDSLC:-}
if [ -z "$tdslc" ]; then
  if [ -x "$src/build/tdslc" ]; then tdslc=$src/build/tdslc; else tdslc=$(command -v tdslc || true); fi
fi
if [ -z "$tdslc" ] || [ ! -x "$tdslc" ]; then echo "build.sh: no tdslc (set TDSLC)" >&2; exit 2; fi
read -r -a opts <<<"${TDSLC_OPTIONS:-}"

mkdir -p "$out"
out=$(cd "$out" && pwd)
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
kernels=$(sed -n 's/^kernel \([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' "$src/bench/kernels.tdsl")
log=$out/build.txt
{
  echo "# tdslc: $("$tdslc" --version | head -1)"
  echo "# target: $target"
  echo "# source: $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?')"
} >"$log"
keep=()
for k in $kernels; do
  if msg=$("$tdslc" "$src/bench/kernels.tdsl" --kernel="$k" --target="$target" "${opts[@]}" \
      --emit=so -o "$probe/$k.so" 2>&1); then
    keep+=("--kernel=$k")
    echo "ok $k" >>"$log"
  else
    echo "refused $k: $(echo "$msg" | head -3 | tr '\n' ' ')" >>"$log"
    echo "build.sh: tdslc refuses $k for $target: $(echo "$msg" | head -1)" >&2
  fi
done
rm -f "$out/$lib.so" "$out/$lib.report.json"
if [ ${#keep[@]} -gt 0 ]; then
  "$tdslc" "$src/bench/kernels.tdsl" "${keep[@]}" --target="$target" "${opts[@]}" \
    --emit=so,report-json -o "$out/$lib"
fi
rm -rf "$out/tdsl"
mkdir -p "$out/tdsl"
cp "$src"/python/tdsl/*.py "$out/tdsl/"
cp "$here/bench_gpu.py" "$out/"
if [ ${#keep[@]} -eq 0 ]; then
  echo "build.sh: tdslc compiled none of the kernels for $target (see $log);" \
    "$out holds only the script and the package" >&2
  exit 1
fi
echo "build.sh: $out: ${#keep[@]} kernels in $lib.so ($(du -sh "$out" | cut -f1))"
