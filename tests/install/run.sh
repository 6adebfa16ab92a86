#!/usr/bin/env bash
# tests/install/run.sh — checks the install tree of spec §10 end to end.
#
# Usage: run.sh BUILD_DIR SOURCE_DIR CC [EXTRA_FLAGS]
#   BUILD_DIR   a built tdsl build tree (cmake --install runs on it)
#   SOURCE_DIR  the tdsl source tree (its examples/ is configured)
#   CC          the C compiler for the external project and pkg-config test
#   EXTRA_FLAGS compile+link flags the build used that the installed
#               static runtime needs (sanitizers), may be empty
# Installs into a temporary prefix, checks the layout, configures
# examples/ as a separate project with find_package(tdsl) against that
# prefix, builds it (tdslc runs from the prefix) and runs its tests, then
# compiles and runs a small program with `pkg-config --cflags --libs tdsl`,
# and links a shared library with the installed tdslc's --emit=so (which
# must find the runtime under the prefix's lib/).
# Prints one line per step; exits 0 when all pass, 1 at the first failure.
set -u

build=${1:?build dir}
src=${2:?source dir}
cc=${3:?C compiler}
extra=${4:-}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdsl-install.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() {
  echo "FAIL: $*"
  [ -f "$tmp/log" ] && tail -n 40 "$tmp/log"
  exit 1
}
step() { echo "ok: $*"; }

cmake --install "$build" --prefix "$prefix" >"$tmp/log" 2>&1 ||
  fail "cmake --install $build --prefix $prefix"
for f in bin/tdslc include/tdsl/runtime.h lib/libtdsl_runtime.a \
  lib/pkgconfig/tdsl.pc lib/cmake/tdsl/tdslConfig.cmake \
  lib/cmake/tdsl/tdslConfigVersion.cmake lib/cmake/tdsl/tdslFunctions.cmake; do
  [ -f "$prefix/$f" ] || fail "install tree lacks $f"
done
[ -x "$prefix/bin/tdslc" ] || fail "bin/tdslc is not executable"
"$prefix/bin/tdslc" --version >"$tmp/log" 2>&1 || fail "installed tdslc --version"
step "install layout under a temporary prefix"

# The examples as an external project, seeing only the prefix.
ex=$tmp/examples-build
cmake -S "$src/examples" -B "$ex" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$extra" \
  -DCMAKE_EXE_LINKER_FLAGS="$extra" >"$tmp/log" 2>&1 ||
  fail "configure examples/ against the prefix"
grep -q "tdsl_DIR:PATH=$prefix/lib/cmake/tdsl" "$ex/CMakeCache.txt" ||
  fail "find_package(tdsl) did not use $prefix/lib/cmake/tdsl"
cmake --build "$ex" -j2 --verbose >"$tmp/log" 2>&1 ||
  fail "build examples/ against the prefix"
grep -q "$prefix/bin/tdslc" "$tmp/log" ||
  fail "the examples build did not run the installed tdslc"
step "examples/ configured and built with find_package(tdsl)"
ctest --test-dir "$ex" --output-on-failure >"$tmp/log" 2>&1 ||
  fail "examples built against the prefix"
ntests=$(grep -c 'Test *#[0-9]*: example_.* Passed' "$tmp/log")
[ "$ntests" -ge 1 ] || fail "no example test ran"
step "$ntests example program(s) passed"

# pkg-config: the flags alone must be enough to build and run a program.
cat >"$tmp/hello.c" <<'EOF'
#include <stdio.h>
#include <tdsl/runtime.h>
int main(void) {
  int n = tdsl_get_num_threads();
  printf("tdsl runtime: %d threads, f32 is %zu bytes\n", n,
         tdsl_dtype_size(TDSL_F32));
  return n >= 1 && tdsl_dtype_size(TDSL_F32) == 4 ? 0 : 1;
}
EOF
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs tdsl) ||
  fail "pkg-config --cflags --libs tdsl"
case "$flags" in
  *-ltdsl_runtime*) ;;
  *) fail "pkg-config gave no -ltdsl_runtime: $flags" ;;
esac
# shellcheck disable=SC2086 # the flags are a word list
"$cc" $extra "$tmp/hello.c" -o "$tmp/hello" $flags >"$tmp/log" 2>&1 ||
  fail "compile with pkg-config flags: $flags"
"$tmp/hello" >"$tmp/log" 2>&1 || fail "run the pkg-config program"
step "pkg-config program: $(cat "$tmp/log")"

# --emit=so from the prefix: the runtime comes from $prefix/lib.
printf 'kernel twice(x: f32[N]) -> f32[N] {\n  return x * 2\n}\n' >"$tmp/twice.tdsl"
(unset TDSL_RUNTIME_LIB; CC="$cc $extra" "$prefix/bin/tdslc" "$tmp/twice.tdsl" \
  --emit=so -o "$tmp/libtwice.so") >"$tmp/log" 2>&1 ||
  fail "installed tdslc --emit=so"
nm -D --defined-only "$tmp/libtwice.so" 2>/dev/null |
  grep -q ' T tdsl_last_error$' || fail "libtwice.so lacks the runtime"
step "installed tdslc --emit=so linked the prefix's runtime"
echo "install_tree: OK"
