#!/usr/bin/env bash
# run.sh — builds and runs the benchmarks, prints one side-by-side table.
#
# Needs: cmake, a C compiler, flex/bison, LLVM (as the main build does);
# for the peer columns a Python with torch and numpy: $PYTHON, else
# bench/.venv/bin/python (python3 -m venv bench/.venv &&
# bench/.venv/bin/pip install -r bench/requirements.txt), else python3 if
# it has numpy; without one the peer columns are "-".
# Produces: on stdout the raw lines of bench_tdsl and peers.py, then the
# table  benchmark | tdsl | tdsl -O0 | O2/O0 speedup | memcpy | torch |
# numpy | tdsl/memcpy | tdsl/torch, a table of the conv kernels' layouts
# (choose-layout's pick against --layout=nchw and --layout=nhwc builds),
# a table of the epilogue kernels fused against unfused, a table of the
# hand-written normalizations with and without row groups and against
# the built-in ops, and a table of
# tdslc compile times of examples/*.tdsl (median of 5).
# Build outputs go to bench/build/ (git-ignored).
#
# Environment:
#   THREADS=N     threads for tdsl, torch and numpy's BLAS (default 2)
#   BUILD_DIR=D   an existing build of the project to use (it is built, not
#                 reconfigured); default: a Release build in bench/build/tdsl
#   PYTHON=P      interpreter for peers.py (e.g. /work/venv/bin/python)
#   BENCH_RUNS, BENCH_MIN_RUN_MS   timing (bench.c and peers.py read them)
#   ONLY="a b"    run only these benchmarks
#   CHECK=1       also check tdsl's results against torch float64 on the same
#                 inputs (bench_tdsl dumps them as .npy into bench/build/dump,
#                 about 1 GB, removed afterwards); a mismatch fails the run
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
threads="${THREADS:-2}"
out="$here/build"
jobs="$(nproc 2>/dev/null || echo 2)"
mkdir -p "$out"

log() { printf '== %s\n' "$*" >&2; }

# ---- 1. the project: Release build, installed into bench/build/prefix ----
if [[ -n "${BUILD_DIR:-}" ]]; then
  tdsl_build="$(cd "$BUILD_DIR" && pwd)"
  log "using the project build in $tdsl_build"
else
  tdsl_build="$out/tdsl"
  log "configuring a Release build of tdsl in $tdsl_build"
  cmake -S "$root" -B "$tdsl_build" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_TESTING=OFF -DTDSL_BUILD_EXAMPLES=OFF >"$out/tdsl-configure.log"
fi
cmake --build "$tdsl_build" -j"$jobs" --target tdslc tdsl_runtime \
  >"$out/tdsl-build.log" || { cat "$out/tdsl-build.log" >&2; exit 1; }
cmake --install "$tdsl_build" --prefix "$out/prefix" >"$out/tdsl-install.log"
tdslc="$out/prefix/bin/tdslc"

# ---- 2. the bench program (probes which kernels tdslc compiles) ----------
log "configuring bench in $out/bench"
cmake -S "$here" -B "$out/bench" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$out/prefix" >"$out/bench-configure.log" ||
  { cat "$out/bench-configure.log" >&2; exit 1; }
cmake --build "$out/bench" -j"$jobs" >"$out/bench-build.log" ||
  { cat "$out/bench-build.log" >&2; exit 1; }

# ---- 3. run tdsl and the peers with the same thread count ----------------
# Benchmark by benchmark, tdsl then its peers, so that the two sides of a
# ratio are measured close together in time (the machine may be shared),
# and in one process per benchmark: a kernel that crashes costs its row.
status=0
dump=""
if [[ "${CHECK:-0}" == 1 ]]; then
  dump="$out/dump"
  rm -rf "$dump" && mkdir -p "$dump"
fi
python="${PYTHON:-}"
if [[ -z "$python" && -x "$here/.venv/bin/python" ]]; then
  python="$here/.venv/bin/python"
fi
if [[ -z "$python" ]] && python3 -c 'import numpy' 2>/dev/null; then
  python=python3
fi
if [[ -n "$python" ]]; then
  log "bench_tdsl and peers.py ($python), $threads threads"
else
  log "bench_tdsl, $threads threads; no Python with numpy: peer columns" \
    "left empty (see bench/README.md)"
fi
load_before="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
: >"$out/tdsl.txt"
: >"$out/peers.txt"
for name in $("$out/bench/bench_tdsl" --list); do
  if [[ -n "${ONLY:-}" && " $ONLY " != *" $name "* ]]; then
    continue
  fi
  rc=0
  BENCH_DUMP="$dump" "$out/bench/bench_tdsl" "$threads" "$name" \
    >"$out/one.txt" || rc=$?
  if [[ $rc -ne 0 ]]; then
    status=1
    grep -q "^$name " "$out/one.txt" || echo "$name tdsl failed" >>"$out/one.txt"
  fi
  grep -v '^# tdsl bench' "$out/one.txt" | tee -a "$out/tdsl.txt"
  if [[ -n "$python" ]]; then
    "$python" "$here/peers.py" --threads "$threads" "$name" |
      grep -v '^# peers' | tee -a "$out/peers.txt" || status=1
  fi
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"

# ---- 4. the side-by-side table -------------------------------------------
# Ratios: tdsl/memcpy = memcpy time / tdsl time for the same bytes (1.00 is
# memcpy speed); tdsl/torch = torch time / tdsl time (above 1: tdsl faster).
echo
echo "tdsl benchmarks, $threads threads, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n)," \
  "$(nproc 2>/dev/null || echo '?') cores, load average $load_before before, $load_after after"
awk '
  function cell(t, r, u) { return sprintf("%.2f ms %.1f %s", t, r, u) }
  $1 ~ /^#/ { if ($0 ~ /not supported yet/) notes[++nn] = $0; next }
  NF >= 2 {
    if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
    key = $1 SUBSEP $2
    if ($3 == "unsupported" || $3 == "failed") { state[key] = $3; next }
    tm[key] = $3; rate[key] = $4; unit[key] = $5
    if ($2 == "tdsl") { mc[$1] = $6; ratio[$1] = $7 }
  }
  END {
    fmt = "| %-15s | %-26s | %-26s | %-13s | %-9s | %-26s | %-26s | %-11s | %-10s |\n"
    printf fmt, "benchmark", "tdsl", "tdsl -O0", "O2/O0 speedup", "memcpy",
           "torch", "numpy", "tdsl/memcpy", "tdsl/torch"
    printf "|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", "-----------------",
           "----------------------------", "----------------------------",
           "---------------", "-----------",
           "----------------------------", "----------------------------",
           "-------------", "------------"
    for (i = 1; i <= n; i++) {
      b = order[i]
      split("tdsl torch numpy tdsl-O0", impls, " ")
      for (j = 1; j <= 4; j++) {
        k = b SUBSEP impls[j]
        if (k in tm) c[j] = cell(tm[k], rate[k], unit[k])
        else if (!(k in state)) c[j] = "-"
        else if (state[k] == "unsupported" && j == 1) c[j] = "not supported yet"
        else c[j] = state[k]
      }
      t = b SUBSEP "tdsl"; p = b SUBSEP "torch"
      m = (b in mc) ? sprintf("%.2f ms", mc[b]) : "-"
      r1 = (b in ratio) ? ratio[b] : "-"
      r2 = (t in tm && p in tm) ? sprintf("%.2f", tm[p] / tm[t]) : "-"
      z = b SUBSEP "tdsl-O0"
      r3 = (t in tm && z in tm) ? sprintf("%.2f", tm[z] / tm[t]) : "-"
      printf fmt, b, c[1], c[4], r3, m, c[2], c[3], r1, r2
    }
    for (i = 1; i <= nn; i++) print notes[i]
  }' "$out/tdsl.txt" "$out/peers.txt"

# ---- 4'. every peer: tdsl against PyTorch eager, torch.compile, JAX,
# Halide (its fastest autoscheduler) and numpy; best = the fastest peer,
# tdsl/best = its time / tdsl's time (above 1.00: tdsl is faster).
echo
echo "tdsl against every peer (times; tdsl/best = best peer's time / tdsl's time)"
awk '
  $1 ~ /^#/ || NF < 3 { next }
  {
    if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
    if ($3 ~ /^[0-9.]+$/) tm[$1 SUBSEP $2] = $3; else state[$1 SUBSEP $2] = $3
  }
  END {
    split("torch torch-compile jax halide numpy", ps, " ")
    fmt = "| %-16s | %-10s | %-10s | %-13s | %-10s | %-10s | %-10s | %-24s | %-9s |\n"
    printf fmt, "benchmark", "tdsl", "torch", "torch.compile", "jax", "halide", "numpy",
           "best peer", "tdsl/best"
    printf "|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", "------------------", "------------",
           "------------", "---------------", "------------", "------------",
           "------------", "--------------------------", "-----------"
    for (i = 1; i <= n; i++) {
      b = order[i]; t = b SUBSEP "tdsl"
      if (!(t in tm) && !(t in state)) continue
      best = ""; bt = 0
      for (j = 1; j <= 5; j++) {
        k = b SUBSEP ps[j]
        c[j] = (k in tm) ? sprintf("%.2f ms", tm[k]) : (k in state) ? state[k] : "-"
        if ((k in tm) && (best == "" || tm[k] < bt)) { best = ps[j]; bt = tm[k] }
      }
      ct = (t in tm) ? sprintf("%.2f ms", tm[t]) : state[t]
      bp = best == "" ? "-" : sprintf("%s %.2f ms", best, bt)
      r = (best != "" && (t in tm)) ? sprintf("%.2f", bt / tm[t]) : "-"
      printf fmt, b, ct, c[1], c[2], c[3], c[4], c[5], bp, r
    }
  }' "$out/tdsl.txt" "$out/peers.txt"

# ---- 4a. epilogues: the GEMM kernels with bias + relu fused into the GEMM
# (tdsl) against the same build without pass fuse (tdsl-noepi: the GEMM
# writes its output, a second nest adds the bias and applies relu); and
# matmul_prologue, relu(a) @ b with relu evaluated while packing a
# (tdsl-noepi: relu written to scratch, then packed).
echo
echo "GEMM epilogues (tdsl -O2 against tdsl-noepi = --disable-pass=fuse)"
awk '
  NF >= 3 && $3 ~ /^[0-9.]+$/ { tm[$1 SUBSEP $2] = $3 }
  END {
    fmt = "| %-17s | %-10s | %-11s | %-14s | %-10s | %-10s |\n"
    printf fmt, "benchmark", "tdsl", "tdsl-noepi", "fused speedup", "torch", "tdsl/torch"
    printf "|%s|%s|%s|%s|%s|%s|\n", "-------------------", "------------",
           "-------------", "----------------", "------------", "------------"
    split("matmul_bias_relu conv_bias_relu matmul_prologue", bs, " ")
    for (i = 1; i <= 3; i++) {
      b = bs[i]; t = b SUBSEP "tdsl"; u = b SUBSEP "tdsl-noepi"; p = b SUBSEP "torch"
      if (!(t in tm)) continue
      printf fmt, b, sprintf("%.2f ms", tm[t]),
             (u in tm) ? sprintf("%.2f ms", tm[u]) : "-",
             (u in tm) ? sprintf("%.2f", tm[u] / tm[t]) : "-",
             (p in tm) ? sprintf("%.2f ms", tm[p]) : "-",
             (p in tm) ? sprintf("%.2f", tm[p] / tm[t]) : "-"
    }
  }' "$out/tdsl.txt" "$out/peers.txt"

# ---- 4a'. row groups: the hand-written normalizations (tdsl) against the
# same build without pass row-group (tdsl-nogroup: each reduction and its
# readers as separate passes over memory) and against the built-in op on
# the same shape (rmsnorm_hand and layernorm_hand: layer_norm_last,
# softmax_hand: softmax_last).
echo
echo "Row groups (hand-written normalizations: tdsl -O2 against tdsl-nogroup = --disable-pass=row-group and the built-in op)"
awk '
  NF >= 3 && $3 ~ /^[0-9.]+$/ { tm[$1 SUBSEP $2] = $3 }
  END {
    fmt = "| %-15s | %-10s | %-12s | %-14s | %-16s | %-13s | %-10s | %-10s |\n"
    printf fmt, "benchmark", "tdsl", "tdsl-nogroup", "group speedup", "built-in",
           "hand/built-in", "torch", "tdsl/torch"
    printf "|%s|%s|%s|%s|%s|%s|%s|%s|\n", "-----------------", "------------",
           "--------------", "----------------", "------------------", "---------------",
           "------------", "------------"
    split("rmsnorm_hand layernorm_hand softmax_hand", bs, " ")
    split("layer_norm_last layer_norm_last softmax_last", bi, " ")
    for (i = 1; i <= 3; i++) {
      b = bs[i]; t = b SUBSEP "tdsl"; u = b SUBSEP "tdsl-nogroup"; p = b SUBSEP "torch"
      q = bi[i] SUBSEP "tdsl"
      if (!(t in tm)) continue
      printf fmt, b, sprintf("%.2f ms", tm[t]),
             (u in tm) ? sprintf("%.2f ms", tm[u]) : "-",
             (u in tm) ? sprintf("%.2f", tm[u] / tm[t]) : "-",
             (q in tm) ? sprintf("%.2f ms %s", tm[q], bi[i] == "softmax_last" ? "softmax" : "layer_norm") : "-",
             (q in tm) ? sprintf("%.2f", tm[t] / tm[q]) : "-",
             (p in tm) ? sprintf("%.2f ms", tm[p]) : "-",
             (p in tm) ? sprintf("%.2f", tm[p] / tm[t]) : "-"
    }
  }' "$out/tdsl.txt" "$out/peers.txt"

# ---- 4b. conv layouts: choose-layout's pick against both forced ones -----
# auto = the main (-O2, --layout=auto) build; its choice comes from
# bench/build/bench/probe/K.report.json (tdslc --emit=report-json). "auto
# >= other": auto's time <= the time of the layout it did not choose
# (ratio other/auto in brackets: below 1.00 auto lost). torch best: the
# faster of torch-nchw and torch-nhwc, and which one it was.
echo
echo "conv2d layouts (tdsl -O2; auto is the default --layout=auto build)"
for j in "$out"/bench/probe/*.report.json; do
  [[ -e "$j" ]] || continue
  k="$(basename "$j" .report.json)"
  choice="$(grep -o '"pass": "choose-layout"[^}]*chose [A-Za-z-]*' "$j" |
    head -n1 | sed 's/.* chose //')"
  echo "$k choice ${choice:-?}"
done >"$out/layouts.txt"
awk '
  $2 == "choice" { ch[$1] = $3; next }
  $1 ~ /^#/ || NF < 3 || $3 == "unsupported" || $3 == "failed" { next }
  { tm[$1 SUBSEP $2] = $3 }
  END {
    fmt = "| %-13s | %-13s | %-10s | %-10s | %-10s | %-16s | %-18s |\n"
    printf fmt, "conv case", "auto chose", "auto", "nchw", "nhwc",
           "auto >= other", "torch eager best"
    printf "|%s|%s|%s|%s|%s|%s|%s|\n", "---------------", "---------------",
           "------------", "------------", "------------", "------------------",
           "--------------------"
    ncs = split("conv3x3_nchw conv3x3_nhwc conv1x1 conv1x1_nhwc conv7x7s2 conv_dw3x3_nhwc", cs, " ")
    for (i = 1; i <= ncs; i++) {
      b = cs[i]
      c = (b in ch) ? ch[b] : "?"
      a = b SUBSEP "tdsl"; x = b SUBSEP "tdsl-nchw"; y = b SUBSEP "tdsl-nhwc"
      ta = (a in tm) ? sprintf("%.2f ms", tm[a]) : "-"
      tx = (x in tm) ? sprintf("%.2f ms", tm[x]) : "-"
      ty = (y in tm) ? sprintf("%.2f ms", tm[y]) : "-"
      o = c == "NCHW" ? y : c == "channels-last" ? x : ""
      v = (a in tm && o in tm) ? sprintf("%s (%.2f)", tm[a] <= tm[o] ? "yes" : "no",
                                         tm[o] / tm[a]) : "-"
      p = b SUBSEP "torch-nchw"; q = b SUBSEP "torch-nhwc"
      if (p in tm && q in tm)
        tb = tm[p] <= tm[q] ? sprintf("%.2f ms nchw", tm[p]) : sprintf("%.2f ms nhwc", tm[q])
      else tb = "-"
      printf fmt, b, c, ta, tx, ty, v, tb
    }
  }' "$out/layouts.txt" "$out/tdsl.txt" "$out/peers.txt"

# ---- 5. optional: tdsl's results against torch on the same inputs -------
if [[ -n "$dump" ]]; then
  echo
  if [[ -n "$python" ]]; then
    echo "correctness (max |tdsl - torch float64| / max |torch float64|, flagged at 1e-4)"
    # shellcheck disable=SC2086
    "$python" "$here/peers.py" --check "$dump" ${ONLY:-} || status=1
  else
    echo "correctness: skipped, no Python with numpy and torch"
  fi
  rm -rf "$dump"
fi

# ---- 6. compile time of each example -------------------------------------
echo
echo "tdslc compile time (tdslc examples/X.tdsl -O2 -o X.o, median of 5)"
printf '| %-16s | %-17s |\n' "example" "compile"
printf '|%s|%s|\n' "------------------" "-------------------"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for src in "$root"/examples/*.tdsl; do
  name="$(basename "$src" .tdsl)"
  times=()
  why=""
  for _ in 1 2 3 4 5; do
    t0=$EPOCHREALTIME
    if ! "$tdslc" "$src" -O2 -o "$tmp/$name.o" 2>"$tmp/err"; then
      why="$(head -n1 "$tmp/err")"
      break
    fi
    t1=$EPOCHREALTIME
    times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) * 1000 }')")
  done
  if [[ -n "$why" ]]; then
    printf '| %-16s | %-17s |\n' "$name" "not supported yet"
    echo "#   $name: $why"
  else
    med="$(printf '%s\n' "${times[@]}" | sort -g | sed -n 3p)"
    printf '| %-16s | %-17s |\n' "$name" "$med ms"
  fi
done
exit "$status"
