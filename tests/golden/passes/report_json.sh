#!/usr/bin/env bash
# report_json.sh TDSLC DIR — the JSON report of DIR/copies.tdsl is valid
# JSON (python3 -m json.tool) with spec §11's keys, and the text report
# names every decision as file:line:col: pass: kind; choose-layout's
# decisions in DIR/layout_conv.tdsl name the cost model's row of the
# target (cpu by default, cuda with --target=cuda:sm_90).  Without python3
# the JSON check is skipped with a message (the key check still runs).
set -u
unset TDSL_COSTS # the built-in cost rows (a calibrated file would change the decisions)
tdslc=$1
case $tdslc in /*) ;; */*) tdslc=$PWD/$tdslc ;; esac
cd "$2" || exit 2
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$tdslc" copies.tdsl --emit=report-json -o - >"$tmp/r.json" 2>"$tmp/err" ||
  fail "tdslc --emit=report-json exited $?: $(cat "$tmp/err")"
for key in '"file": "copies.tdsl"' '"target": "host"' '"kernels": [' \
           '"name": "copies"' '"decisions": [' '"pass": "eliminate-copies"' \
           '"kind": "removed"' '"kind": "kept"' '"line": 4' '"col": 27' \
           '"bytes": "96*N"' '"bytes_moved": {"before": ' \
           '"loop_nests": {"before": ' '"scratch_bytes": ' \
           '"passes": [{"name": "fold-views"'; do
  grep -qF "$key" "$tmp/r.json" || fail "report lacks $key"
done
if command -v python3 >/dev/null; then
  python3 -m json.tool "$tmp/r.json" >/dev/null || fail "report is not valid JSON"
  python3 - "$tmp/r.json" <<'PY' || fail "report structure"
import json, sys
r = json.load(open(sys.argv[1]))
assert set(r) == {"file", "target", "kernels"}, r.keys()
k = r["kernels"][0]
assert set(k) == {"name", "decisions", "bytes_moved", "loop_nests",
                  "scratch_bytes", "passes"}, k.keys()
for d in k["decisions"]:
    assert set(d) == {"pass", "kind", "line", "col", "message", "bytes"}, d
    assert isinstance(d["line"], int) and isinstance(d["message"], str)
    assert isinstance(d["bytes"], (int, str))
assert k["loop_nests"]["after"] <= k["loop_nests"]["before"]
assert [p["name"] for p in k["passes"]][:2] == ["fold-views", "eliminate-copies"]
PY
else
  echo "python3 not found: skipping the JSON syntax check"
fi

# -O0 runs no pass: no decisions, no pass times.
"$tdslc" copies.tdsl --emit=report-json -o - -O0 >"$tmp/r0.json" ||
  fail "-O0 report"
grep -qF '"decisions": []' "$tmp/r0.json" || fail "-O0 report has decisions"

# The text report, via --report=PATH beside the object file's emits.
"$tdslc" copies.tdsl --emit=ir -o "$tmp/c.o" --report="$tmp/c.txt" ||
  fail "--report=PATH"
grep -qF 'copies.tdsl:4:27: eliminate-copies: removed: ' "$tmp/c.txt" ||
  fail "text report lacks the removed copy"
grep -qF 'loop nests:' "$tmp/c.txt" || fail "text report lacks loop nests"
# --disable-pass keeps the copies.
"$tdslc" copies.tdsl --emit=report -o - --disable-pass=eliminate-copies \
  >"$tmp/d.txt" || fail "--disable-pass"
grep -q 'eliminate-copies: removed' "$tmp/d.txt" && fail "disabled pass ran"
# The cost model's row follows --target (passes/costs.c): the same
# program's layout decisions name the numbers that weighed them.
"$tdslc" layout_conv.tdsl --emit=report -o - >"$tmp/lc.txt" || fail "layout report"
[[ $(grep -c 'choose-layout: layout: .*; cost model cpu (built-in): 22 GB/s, 55 GFLOP/s$' "$tmp/lc.txt") == 3 ]] ||
  fail "the host report's layout decisions do not name the cpu row: $(grep 'layout:' "$tmp/lc.txt")"
"$tdslc" layout_conv.tdsl --emit=report -o - --target=cuda:sm_90 >"$tmp/lg.txt" ||
  fail "layout report for cuda:sm_90"
[[ $(grep -c 'choose-layout: layout: .*; cost model cuda (built-in): 3000 GB/s, 50000 GFLOP/s$' "$tmp/lg.txt") == 3 ]] ||
  fail "the cuda report's layout decisions do not name the cuda row: $(grep 'layout:' "$tmp/lg.txt")"
grep -q 'cost model cpu' "$tmp/lg.txt" && fail "the cuda report names the cpu row"
grep -qF '(target cuda:sm_90)' "$tmp/lg.txt" || fail "the cuda report's heading"
# Each layout decision's JSON object carries both estimates, the choice and
# the row with its source (built-in, or the cost file of --costs).
printf 'tdsl-costs 1\nfamily cpu\nbw_gbs 11\n' >"$tmp/my.costs"
"$tdslc" layout_conv.tdsl --emit=report-json -o - >"$tmp/l.json" || fail "layout JSON"
"$tdslc" layout_conv.tdsl --emit=report-json -o - --costs="$tmp/my.costs" >"$tmp/lm.json" ||
  fail "layout JSON with --costs"
[[ $(grep -c '"chose": "[a-z_]*", "cost_model": {"row": "cpu", "source": "built-in", "bw_gbs": 22, "gflops": 55}' "$tmp/l.json") == 3 ]] ||
  fail "the layout decisions' JSON lacks the built-in row"
[[ $(grep -cF "\"source\": \"$tmp/my.costs\", \"bw_gbs\": 11, \"gflops\": 55}" "$tmp/lm.json") == 3 ]] ||
  fail "the layout decisions' JSON lacks the cost file"
if command -v python3 >/dev/null; then
  python3 - "$tmp/l.json" <<'PY' || fail "layout decision structure"
import json, sys
r = json.load(open(sys.argv[1]))
ds = [d for k in r["kernels"] for d in k["decisions"] if d["kind"] == "layout"]
assert len(ds) == 3, ds
for d in ds:
    e = d["estimates"]
    assert set(e) == {"channels_last", "nchw"}, e
    for v in e.values():
        assert set(v) == {"bytes", "ms"} and v["ms"] > 0 and v["bytes"] > 0, v
    assert d["chose"] in ("channels_last", "nchw")
    assert d["cost_model"]["source"] == "built-in"
PY
fi
echo "report checks passed"
