"""Running tdslc and the on-disk cache of compiled libraries.

tdslc is `$TDSLC`, else `tdslc` on PATH, else the build tree beside the
package's source (`SOURCE/build/tdslc`: the source this package sits in,
or the one an installed copy was built from, recorded in _origin.py).

A compilation is cached under `$TDSL_CACHE_DIR`, else
`$XDG_CACHE_HOME/tdsl`, else `~/.cache/tdsl`, in a directory named by the
SHA-256 of the source text, the options (target, opt, kernels), tdslc's
`--version` and the identity of the tdslc file (path, size, mtime), so a
rebuilt compiler compiles again.  An entry holds `kernels.so`,
`kernels.report.json` and `source.tdsl`; it is built in a temporary
directory and renamed into place, so a present entry is complete.
"""

import hashlib
import os
import shutil
import subprocess
import tempfile

from ._errors import CompileError

CACHE_VERSION = "1"
_versions = {}  # (path, size, mtime_ns) -> `tdslc --version` output


def _source_dirs():
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    dirs = [here]
    try:
        from . import _origin
        dirs.append(_origin.SOURCE_DIR)
    except ImportError:
        pass
    return dirs


def find_tdslc():
    """The tdslc to run; raises CompileError when there is none."""
    env = os.environ.get("TDSLC")
    if env:
        path = shutil.which(env)
        if not path:
            raise CompileError("TDSLC names %r, which is not an executable" % env)
        return os.path.abspath(path)  # tdslc runs in the cache directory
    path = shutil.which("tdslc")
    if path:
        return os.path.abspath(path)
    for d in _source_dirs():
        cand = os.path.join(d, "build", "tdslc")
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    raise CompileError("cannot find tdslc: set TDSLC to its path, put it on "
                       "PATH, or build the tdsl source tree into build/")


def _identity(tdslc):
    st = os.stat(tdslc)
    return (os.path.realpath(tdslc), st.st_size, st.st_mtime_ns)


def compiler_version(tdslc):
    ident = _identity(tdslc)
    if ident not in _versions:
        r = subprocess.run([tdslc, "--version"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise CompileError("%s --version failed: %s" % (tdslc, r.stderr.strip()))
        _versions[ident] = r.stdout.strip()
    return _versions[ident]


def cache_dir():
    d = os.environ.get("TDSL_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
            os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "tdsl")
    return d


def cache_key(source, tdslc, target, opt, kernels):
    h = hashlib.sha256()
    ident = _identity(tdslc)
    parts = ["tdsl-cache", CACHE_VERSION, compiler_version(tdslc), ident[0],
             str(ident[1]), str(ident[2]), target, str(opt),
             ",".join(sorted(kernels or []))]
    costs = os.environ.get("TDSL_COSTS")  # tdslc weighs its passes with it
    if costs:
        try:
            with open(costs, "rb") as f:
                parts += ["costs", costs, hashlib.sha256(f.read()).hexdigest()]
        except OSError:  # tdslc will say so
            parts += ["costs", costs, "unreadable"]
    for p in parts:
        h.update(p.encode() + b"\0")
    h.update(source)
    return h.hexdigest()


def build(source, path, target, opt, kernels):
    """Compiles source (bytes; path: its file, or None for text) and
    returns (entry directory, True when it came from the cache)."""
    tdslc = find_tdslc()
    root = cache_dir()
    entry = os.path.join(root, cache_key(source, tdslc, target, opt, kernels))
    if os.path.isfile(os.path.join(entry, "kernels.so")):
        return entry, True
    os.makedirs(root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="tmp-", dir=root)
    try:
        with open(os.path.join(tmp, "source.tdsl"), "wb") as f:
            f.write(source)
        src = os.path.abspath(path) if path else "source.tdsl"
        cmd = [tdslc, src, "--emit=so,report-json", "-o", "kernels",
               "--target=" + target, "-O%d" % opt]
        cmd += ["--kernel=" + k for k in kernels or []]
        r = subprocess.run(cmd, cwd=tmp, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise CompileError("tdslc failed (exit status %d):\n%s"
                               % (r.returncode, r.stderr.rstrip()),
                               returncode=r.returncode, diagnostics=r.stderr)
        try:
            os.rename(tmp, entry)
        except OSError:
            if not os.path.isfile(os.path.join(entry, "kernels.so")):
                raise
            # another process got there first: its entry is as good
            shutil.rmtree(tmp, ignore_errors=True)
        tmp = None
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return entry, False
