#!/usr/bin/env bash
# report_html.sh TDSLC SRCDIR — --emit=report-html renders in a real
# browser: each page is loaded by headless Chromium (--dump-dom, after its
# scripts ran) and check_dom.py compares what the browser shows with the
# text report of the same file.  Needs chromium (or $TDSL_CHROMIUM) and
# python3; without either it exits 77, which ctest reports as skipped.
set -u
tdslc=$1 src=$2
case $tdslc in /*) ;; */*) tdslc=$PWD/$tdslc ;; esac
chromium=${TDSL_CHROMIUM:-}
if [ -z "$chromium" ]; then
  for c in chromium chromium-browser google-chrome; do
    command -v "$c" >/dev/null && { chromium=$c; break; }
  done
fi
if [ -z "$chromium" ]; then
  echo "SKIP: no chromium found (apt-get install chromium, or set TDSL_CHROMIUM)"
  exit 77
fi
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 77; }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# FILE OPTIONS...: the text report and the page of FILE, the page as
# Chromium shows it after its scripts ran, and the comparison.
check() {
  local f=$1 name
  shift
  name=$(basename "$f" .tdsl)$*
  name=${name// /}
  (cd "$src" && "$tdslc" "$f" --emit=report -o - "$@") >"$tmp/$name.txt" ||
    fail "$f: the text report: exit $?"
  (cd "$src" && "$tdslc" "$f" --emit=report-html -o - "$@") >"$tmp/$name.html" ||
    fail "$f: --emit=report-html: exit $?"
  # A fresh profile per page; --no-sandbox: CI and containers run as root.
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu \
    --no-first-run --user-data-dir="$tmp/profile-$name" \
    --enable-logging=stderr --v=0 --dump-dom "file://$tmp/$name.html" \
    >"$tmp/$name.dom" 2>"$tmp/$name.log" ||
    fail "$f: chromium exited $?: $(tail -5 "$tmp/$name.log")"
  if grep -F 'CONSOLE' "$tmp/$name.log" | grep -qiE 'uncaught|error'; then
    fail "$f: script errors: $(grep -F CONSOLE "$tmp/$name.log")"
  fi
  python3 "$src/tests/html/check_dom.py" "$tmp/$name.txt" "$tmp/$name.html" \
    "$tmp/$name.dom" "$src/$f" || fail "$f $*: the page differs from the text report"
  echo "ok: $f $*"
}

check examples/conv_block.tdsl
check tests/golden/passes/copies.tdsl
check tests/html/escape.tdsl
check tests/html/escape.tdsl -O0
echo "report-html checks passed"
