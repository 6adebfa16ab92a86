#!/usr/bin/env bash
# ptxas.sh — every test kernel's PTX goes through ptxas:
#   tests/gpu/ptxas.sh TDSLC [SOURCE_DIR]
#
# Files: tests/pytorch/cases/*.tdsl (not err_*), examples/*.tdsl, and
# every tests/golden/**/*.tdsl that tdslc accepts for the host (those it
# rejects with exit 1 there are diagnostics tests and are skipped).  Each
# file is compiled with `--target=cuda:sm_80 --emit=ptx` and
# `--target=cuda:sm_90 --emit=ptx`, at -O0 and -O2, and the PTX assembled
# with `ptxas -arch=sm_80` / `-arch=sm_90`.  Any tdslc or ptxas failure
# fails the test (its command and stderr are printed).  Jobs run 2 at a
# time ($JOBS).  ptxas comes from PATH or /usr/local/cuda/bin; without
# it: "ptxas.sh: skipped: ptxas not found", exit 77.
set -u

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 TDSLC [SOURCE_DIR]" >&2
  exit 2
fi
tdslc=$1
case $tdslc in /*) ;; */*) tdslc=$PWD/$tdslc ;; esac
src=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
ptxas=$(command -v ptxas || true)
[[ -z $ptxas && -x /usr/local/cuda/bin/ptxas ]] && ptxas=/usr/local/cuda/bin/ptxas
if [[ -z $ptxas ]]; then
  echo "ptxas.sh: skipped: ptxas not found"
  exit 77
fi
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2

# One job: "FILE SM OPT"; a failure leaves $tmp/fail.N with the report.
job() {
  local file=$1 sm=$2 opt=$3 n=$4 out=$tmp/$4
  local cmd=("$tdslc" "$file" "--target=cuda:sm_$sm" --emit=ptx "-$opt" -o "$out.ptx")
  if ! "${cmd[@]}" > "$out.err" 2>&1; then
    { echo "FAIL tdslc: ${cmd[*]}"; cat "$out.err"; } > "$tmp/fail.$n"
    return
  fi
  cmd=("$ptxas" "-arch=sm_$sm" "$out.ptx" -o "$out.cubin")
  if ! "${cmd[@]}" > "$out.err" 2>&1; then
    { echo "FAIL ptxas: ${cmd[*]}  (from $file -$opt)"; cat "$out.err"; } > "$tmp/fail.$n"
  fi
  rm -f "$out.ptx" "$out.cubin" "$out.err"
}
export -f job
export tdslc ptxas tmp

files=()
for f in tests/pytorch/cases/*.tdsl examples/*.tdsl; do
  case ${f##*/} in err_*) ;; *) files+=("$f") ;; esac
done
skipped=0
while IFS= read -r f; do
  "$tdslc" "$f" --emit=obj -o "$tmp/host.o" > /dev/null 2>&1
  rc=$?
  if [[ $rc == 1 ]]; then
    skipped=$((skipped + 1))
  else
    files+=("$f") # any other failure shows up in the CUDA jobs
  fi
done < <(find tests/golden -name '*.tdsl' | sort)

n=0
for f in "${files[@]}"; do
  for sm in 80 90; do
    for opt in O0 O2; do
      printf '%s %s %s %d\n' "$f" "$sm" "$opt" "$n"
      n=$((n + 1))
    done
  done
done > "$tmp/jobs"
xargs -P "${JOBS:-2}" -L 1 bash -c 'job "$@"' _ < "$tmp/jobs"

failed=0
for ((i = 0; i < n; i++)); do
  [[ -f $tmp/fail.$i ]] && cat "$tmp/fail.$i" && failed=$((failed + 1))
done
echo "ptxas.sh: $((n - failed)) passed, $failed failed (${#files[@]} files, sm_80 and sm_90," \
     "-O0 and -O2; $skipped golden files rejected for the host)"
[[ $failed == 0 ]]
