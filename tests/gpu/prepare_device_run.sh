#!/usr/bin/env bash
# prepare_device_run.sh — everything a GPU machine (libcuda.so.1, python3
# with numpy and torch; no compiler, no LLVM, no network) needs to check
# and measure the CUDA backend in one command, built here into one
# directory of plain files:
#   tests/gpu/prepare_device_run.sh [OUT] [--target cuda:sm_NN]
# OUT (default build/device-run) then holds
#   gpu_exec, cases.tar.gz    the PyTorch differential cases (gpu_exec build;
#                             run.sh unpacks them)
#   preprocess_cuda           the GPU example (examples/preprocess_cuda.c)
#   bench/                    bench/gpu/build.sh's directory (bench_gpu.py)
#   run.sh                    runs the three, each under a time limit,
#                             logging to OUT/logs/
# Carry OUT (it stays well under 64 MiB) and run `OUT/run.sh` there (from
# the repository root on the device tool: `bash build/device-run/run.sh`).
# Needs a configured build in build/ (cmake -S . -B build).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/device-run}
[[ $# -gt 0 ]] && shift
target=cuda:sm_90
while [[ $# -gt 0 ]]; do
  case $1 in
    --target=*) target=${1#--target=}; shift ;;
    --target) target=$2; shift 2 ;;
    *) echo "prepare_device_run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
cmake --build build -j"$(nproc)" --target tdslc gpu_exec preprocess_cuda >/dev/null
rm -rf "$out"
mkdir -p "$out/logs"
cp build/tests/gpu/gpu_exec "$out/"
build/tests/gpu/gpu_exec build "$out/cases" --target="$target" --jobs "$(nproc)" >"$out/logs/build.txt" 2>&1 ||
  { echo "prepare_device_run.sh: some cases did not build (see $out/logs/build.txt)" >&2; }
# The cases' objects (embedded PTX; -O0 builds make tens of MiB) travel
# packed: the whole directory must stay under the 64 MiB a run carries.
tar czf "$out/cases.tar.gz" -C "$out" cases && rm -rf "$out/cases"
cp build/examples/preprocess_cuda "$out/"
bash bench/gpu/build.sh "$out/bench" --target "$target" >"$out/logs/bench-build.txt" 2>&1
cat >"$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs on the GPU machine: the example, the differential cases, the
# benchmark.  Logs go to logs/ beside this script; a summary to stdout.
cd "$(dirname "$0")" || exit 2
[[ -d cases ]] || tar xzf cases.tar.gz || exit 2
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== example preprocess_cuda"
timeout 60 ./preprocess_cuda 2>&1 | tee logs/example.txt | tail -3
echo "== differential cases"
timeout "${CASES_SECONDS:-150}" ./gpu_exec run cases --device cuda --jobs "${JOBS:-8}" >logs/cases.txt 2>&1
echo "exit $?"; grep -E "FAIL|passed" logs/cases.txt | tail -25
echo "== benchmark"
(cd bench && timeout "${BENCH_SECONDS:-200}" python3 bench_gpu.py --time-limit "${BENCH_LIMIT:-150}") >logs/bench.txt 2>&1
echo "exit $?"; tail -40 logs/bench.txt
RUN
chmod +x "$out/run.sh"
du -sh "$out"
