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
# status 1), the report beside it (kernels_cuda.report.json, for tdsl.load),
# OUTDIR/tdsl/ (the Python package), OUTDIR/bench_gpu.py,
# OUTDIR/call_overhead.py (a call's host time, split) and OUTDIR/tests/
# (the package's CUDA tests, for OUTDIR/tests/run.sh there).
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
rm -rf "$out/tdsl" "$out/tests"
mkdir -p "$out/tdsl" "$out/tests"
cp "$src"/python/tdsl/*.py "$out/tdsl/"
cp "$here/bench_gpu.py" "$here/call_overhead.py" "$out/"
# The Python package's CUDA tests, runnable there without tdslc or a C
# compiler: OUTDIR/tests/run.sh (tests/python/test_cuda.py with its kernels
# and the fake CUDA library prebuilt here).
cp "$src/tests/python/test_cuda.py" "$src/tests/python/conftest.py" \
  "$src/tests/python/cuda_kernels.tdsl" "$out/tests/"
if ! "$tdslc" "$src/tests/python/cuda_kernels.tdsl" --target="$target" "${opts[@]}" \
    --emit=so -o "$out/tests/cuda_kernels.so" 2>>"$log"; then
  echo "build.sh: tests/cuda_kernels.tdsl does not compile for $target (see $log)" >&2
fi
${CC:-cc} -shared -fPIC -O1 -o "$out/tests/fake_cuda.so" "$src/tests/python/fake_cuda.c" \
  -I "$src/runtime/include" || echo "build.sh: cannot build fake_cuda.so" >&2
cat >"$out/tests/run.sh" <<'EOS'
#!/usr/bin/env bash
# The tdsl package's CUDA tests on this machine ($PYTHON, default python3, with torch, numpy, pytest).
cd "$(dirname "$0")" || exit 1
export PYTHONPATH=$PWD/..${PYTHONPATH:+:$PYTHONPATH}
[ -f cuda_kernels.so ] && export TDSL_TEST_CUDA_SO=$PWD/cuda_kernels.so
[ -f fake_cuda.so ] && export TDSL_FAKE_CUDA_SO=$PWD/fake_cuda.so
exec "${PYTHON:-python3}" -m pytest -q -p no:cacheprovider -rs test_cuda.py "$@"
EOS
chmod +x "$out/tests/run.sh"
if [ ${#keep[@]} -eq 0 ]; then
  echo "build.sh: tdslc compiled none of the kernels for $target (see $log);" \
    "$out holds only the script and the package" >&2
  exit 1
fi
echo "build.sh: $out: ${#keep[@]} kernels in $lib.so ($(du -sh "$out" | cut -f1))"
