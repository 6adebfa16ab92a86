#!/usr/bin/env bash
# run.sh — golden tests: tests/golden/run.sh TDSLC GOLDEN_DIR
#
# For each X.tdsl in GOLDEN_DIR (run there, with the bare file name, so
# messages read `X.tdsl:line:col: ...`):
#   X.err exists: `TDSLC X.tdsl --emit=ir -o /dev/null` must exit 1 with
#                 stderr byte-equal to X.err;
#   else X.ir:    `TDSLC X.tdsl --emit=ir -o - -O0` must exit 0 with stdout
#                 byte-equal to X.ir (the IR as sema made it);
#   X.PASS.ir:    (any number, besides or instead of the above) `TDSLC
#                 X.tdsl --emit=ir -o /dev/null --dump-after=PASS
#                 --target=x86-64` must exit 0 with stderr (the kernels'
#                 IR after PASS at -O2) byte-equal to X.PASS.ir (x86-64:
#                 its variants' vector widths differ, so choose-layout
#                 weighs as on any host, not with the host's 512-bit
#                 costs);
#   X.loops:      (besides or instead of the above) `TDSLC X.tdsl
#                 --emit=loops -o -` must exit 0 with stdout (the loop form
#                 at -O2) byte-equal to X.loops; X.O0.loops likewise at -O0
#                 (any -ON); X.cuda.loops and X.cuda.ON.loops likewise with
#                 --target=cuda (the CUDA backend's schedules);
#   neither:      a failure (say which output it should have).
# UPDATE=1 rewrites the expected file from the actual output (and creates
# X.err or X.ir from the exit status when neither exists) as long as the
# exit status is right.  Prints a diff per failure, then `N passed, M
# failed`; exits 1 if anything failed.
set -u

if [[ $# -ne 2 ]]; then
  echo "usage: $0 TDSLC GOLDEN_DIR" >&2
  exit 2
fi
tdslc=$1
dir=$2
case $tdslc in /*) ;; */*) tdslc=$PWD/$tdslc ;; esac
cd "$dir" || exit 2
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
update=${UPDATE:-0}
timeout_cmd=()
command -v timeout >/dev/null && timeout_cmd=(timeout 60)

passed=0
failed=0

fail() {
  echo "FAIL: $1"
  failed=$((failed + 1))
}

# check NAME KIND EXPECTED ACTUAL STATUS WANT_STATUS
check() {
  local name=$1 expected=$2 actual=$3 status=$4 want=$5
  if [[ $status -ne $want ]]; then
    fail "$name: exit status $status, expected $want"
    sed 's/^/  | /' "$tmp/err" | head -20
    return
  fi
  if [[ -e $expected ]] && cmp -s "$expected" "$actual"; then
    passed=$((passed + 1))
    return
  fi
  if [[ $update == 1 ]]; then
    cp "$actual" "$expected"
    echo "updated $expected"
    passed=$((passed + 1))
    return
  fi
  fail "$name: output differs from $expected"
  diff -u "$expected" "$actual" | sed 's/^/  /'
}

shopt -s nullglob
for src in *.tdsl; do
  base=${src%.tdsl}
  dumps=0
  for want in "$base".*.ir; do
    pass=${want#"$base".}
    pass=${pass%.ir}
    dumps=1
    "${timeout_cmd[@]}" "$tdslc" "$src" --emit=ir -o /dev/null \
      --dump-after="$pass" --target=x86-64 >/dev/null 2>"$tmp/out"
    status=$?
    cp "$tmp/out" "$tmp/err"
    check "$src after $pass" "$want" "$tmp/out" "$status" 0
  done
  for want in "$base".loops "$base".O[0-3].loops "$base".cuda.loops \
              "$base".cuda.O[0-3].loops; do
    [[ -e $want ]] || continue
    level=${want#"$base"}
    level=${level%.loops}
    target=
    if [[ $level == .cuda* ]]; then
      target=cuda
      level=${level#.cuda}
    fi
    level=${level#.}
    dumps=1
    "${timeout_cmd[@]}" "$tdslc" "$src" --emit=loops -o - ${level:+-$level} \
      ${target:+--target=$target} >"$tmp/out" 2>"$tmp/err"
    check "$src loops${level:+ at -$level}${target:+ for $target}" "$want" \
      "$tmp/out" $? 0
  done
  if [[ $dumps == 1 && ! -e $base.err && ! -e $base.ir ]]; then
    continue
  elif [[ -e $base.err ]]; then
    "${timeout_cmd[@]}" "$tdslc" "$src" --emit=ir -o /dev/null \
      >/dev/null 2>"$tmp/err"
    check "$src" "$base.err" "$tmp/err" $? 1
  elif [[ -e $base.ir ]]; then
    "${timeout_cmd[@]}" "$tdslc" "$src" --emit=ir -o - -O0 \
      >"$tmp/out" 2>"$tmp/err"
    check "$src" "$base.ir" "$tmp/out" $? 0
  elif [[ $update == 1 ]]; then
    "${timeout_cmd[@]}" "$tdslc" "$src" --emit=ir -o - -O0 \
      >"$tmp/out" 2>"$tmp/err"
    status=$?
    if [[ $status -eq 0 ]]; then
      check "$src" "$base.ir" "$tmp/out" 0 0
    else
      check "$src" "$base.err" "$tmp/err" "$status" 1
    fi
  else
    fail "$src: no $base.err or $base.ir (create one, or run with UPDATE=1)"
  fi
done

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
