#!/usr/bin/env bash
# Builds tdsl and runs every test: the suite (ctest), the suite again under
# AddressSanitizer + UBSan, and a short libFuzzer run over the front end
# and the .npy reader.  FUZZ_SECONDS (default 60) sets the fuzzing time per
# target; FUZZ_SECONDS=0 skips fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

echo "== build and test (release)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTDSL_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== build and test (ASan + UBSan)"
CC=clang-19 cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTDSL_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"

secs=${FUZZ_SECONDS:-60}
if [ "$secs" -gt 0 ]; then
  echo "== fuzz ($secs s per target)"
  CC=clang-19 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTDSL_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
  cmake --build build-fuzz -j"$jobs" --target fuzz_frontend fuzz_npy
  for t in frontend npy; do
    corpus=$(mktemp -d)
    cp tests/fuzz/corpus_$t/* "$corpus"/ 2>/dev/null || true
    ./build-fuzz/fuzz_$t -max_total_time="$secs" -max_len=4096 -print_final_stats=0 \
      "$corpus" 2>&1 | tail -n 3
    rm -rf "$corpus"
  done
fi
echo "== all tests passed"
