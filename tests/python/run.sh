#!/usr/bin/env bash
# tests/python/run.sh — ctest 'python': the tdsl Python package's tests
# (tests/python/test_*.py) with pytest, against the build's tdslc.
#
# Usage: run.sh TDSLC SOURCE_DIR
# The interpreter is $TDSL_PYTHON, else the first of `python3` on PATH and
# /usr/bin/python3 that has numpy, torch and pytest.  Without one, prints
# why and exits 77 (ctest reports the test as skipped).  The package is
# imported from SOURCE_DIR/python; test_install.py installs it with pip
# into a fresh virtual environment too.
set -u
tdslc=${1:?tdslc}
src=${2:?source dir}

need='import numpy, torch, pytest, ctypes; assert tuple(map(int, numpy.__version__.split(".")[:2])) >= (1, 22)'
py=""
for cand in ${TDSL_PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "$need" >/dev/null 2>&1; then
    py=$(command -v "$cand")
    break
  fi
done
if [ -z "$py" ]; then
  echo "SKIP: no python3 with numpy >= 1.22, torch and pytest (Debian 12:" \
    "apt-get install python3-numpy python3-torch python3-pytest python3-venv" \
    "python3-setuptools; or set TDSL_PYTHON)"
  exit 77
fi
echo "python: $py"
export TDSLC=$tdslc TDSL_PYTHON=$py PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
cd "$src/tests/python" || exit 1
exec "$py" -m pytest -q -p no:cacheprovider -o addopts="" .
