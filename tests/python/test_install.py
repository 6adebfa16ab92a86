# test_install.py — the package as a user gets it: the README's Python
# set-up command (a fresh virtual environment with the system's packages,
# `pip install --no-build-isolation --no-deps ./python`, offline) run in a
# scratch copy of the source tree whose build/ is this build, then the
# README's Python example run unchanged with that environment's python,
# with neither TDSLC nor a tdslc on PATH: the installed package finds the
# compiler in the build tree it was installed from.
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR


def readme_python_section():
    text = open(os.path.join(SOURCE_DIR, "README.md"), encoding="utf-8").read()
    m = re.search(r"^## Python\n(.*?)(?=^## )", text, re.S | re.M)
    assert m, "README.md has no '## Python' section"
    sec = m.group(1)
    setup = re.search(r"```sh\n(.*?)```", sec, re.S)
    example = re.search(r"```python\n(.*?)```", sec, re.S)
    assert setup and example, "the Python section needs a sh and a python block"
    return setup.group(1).strip(), example.group(1)


def clean_env(tmp, extra_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TDSLC", "PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join([extra_path, "/usr/bin", "/bin"])
    env["TDSL_CACHE_DIR"] = str(tmp / "cache")
    env["HOME"] = str(tmp)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tdslc = os.environ.get("TDSLC")
    if not tdslc:
        pytest.skip("TDSLC is not set (run through ctest or tests/python/run.sh)")
    py = os.environ.get("TDSL_PYTHON", sys.executable)
    r = subprocess.run([py, "-c", "import ensurepip, setuptools"], capture_output=True)
    if r.returncode:
        pytest.skip("%s lacks venv/ensurepip or setuptools (Debian 12: python3-venv "
                    "python3-setuptools)" % py)
    tmp = tmp_path_factory.mktemp("install")
    tree = tmp / "tree"
    shutil.copytree(os.path.join(SOURCE_DIR, "python"), tree / "python",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    os.symlink(os.path.dirname(os.path.abspath(tdslc)), tree / "build")
    bindir = tmp / "bin"  # `python3` in the set-up command is this python
    bindir.mkdir()
    os.symlink(py, bindir / "python3")
    env = clean_env(tmp, str(bindir))
    assert shutil.which("tdslc", path=env["PATH"]) is None, "a tdslc on PATH would hide the test"
    setup, example = readme_python_section()
    env_pip = dict(env, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    r = subprocess.run(["bash", "-c", setup], cwd=tree, env=env_pip,
                       capture_output=True, text=True)
    assert r.returncode == 0, "README set-up failed:\n%s\n%s" % (r.stdout, r.stderr)
    return tree, env, example


def test_pip_install_in_fresh_venv(installed):
    tree, env, _ = installed
    vpy = str(tree / "venv" / "bin" / "python")
    code = ("import tdsl, importlib.metadata as md, numpy as np\n"
            "print(tdsl.__file__)\n"
            "print(tdsl.find_tdslc())\n"
            "print(md.requires('tdsl'))\n"
            "m = tdsl.compile('kernel f(x: i64[N]) -> i64[N] { return x * 3 }')\n"
            "print(m.f(np.arange(4)).tolist())\n")
    r = subprocess.run([vpy, "-c", code], cwd=str(tree.parent), env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    where, tdslc, requires, result = r.stdout.splitlines()
    assert where.startswith(str(tree / "venv")), where
    assert tdslc == str(tree / "build" / "tdslc")
    assert "numpy" in requires and ">=1.22" in requires, requires
    assert result == "[0, 3, 6, 9]"


def test_readme_example_runs(installed):
    tree, env, example = installed
    assert len(example.strip().splitlines()) <= 5
    r = subprocess.run([str(tree / "venv" / "bin" / "python"), "-c", example], cwd=tree,
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, "README example failed:\n%s\n%s" % (r.stdout, r.stderr)
    assert r.stdout.strip(), "the README example printed nothing"
