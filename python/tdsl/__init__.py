"""tdsl: compile tensor kernels with tdslc and call them on NumPy arrays
and PyTorch tensors.

    import numpy as np, tdsl
    m = tdsl.compile("kernel f(x: f32[N], a: f32) -> f32[N] { return x * a }")
    y = m.f(np.arange(4, dtype=np.float32), 2.0)

`compile()` runs `tdslc --emit=so,report-json` once per source text,
options and compiler (cached on disk, see _compiler.py) and loads the
library; the module's attributes are its kernels (Kernel, _kernel.py).
Needs NumPy; PyTorch only to pass or get PyTorch tensors.
"""

import ctypes
import json
import os

from . import _compiler
from ._errors import CompileError, KernelError, TdslError
from ._kernel import Kernel

__all__ = ["compile", "Module", "Kernel", "TdslError", "CompileError",
           "KernelError", "find_tdslc", "cache_dir"]
__version__ = "0.1.0"

find_tdslc = _compiler.find_tdslc
cache_dir = _compiler.cache_dir

_TARGETS = ("host", "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4")


class Module:
    """A compiled .tdsl file: its kernels as attributes (and in
    `kernels`), `report` (the optimization report, spec §11, as Python
    objects), `source` (the program text), `path` (the shared library),
    `from_cache` (whether this compile() found it already built)."""

    def __init__(self, entry, from_cache):
        self.path = os.path.join(entry, "kernels.so")
        self.from_cache = from_cache
        with open(os.path.join(entry, "source.tdsl"), encoding="utf-8") as f:
            self.source = f.read()
        with open(os.path.join(entry, "kernels.report.json"), encoding="utf-8") as f:
            self.report = json.load(f)
        lib = ctypes.CDLL(self.path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        lib.tdsl_last_error.restype = ctypes.c_char_p
        lib.tdsl_last_error.argtypes = []
        lib.tdsl_strerror.restype = ctypes.c_char_p
        lib.tdsl_strerror.argtypes = [ctypes.c_int]
        lib.tdsl_so_kernel_count.restype = ctypes.c_int
        lib.tdsl_so_kernel_info.restype = ctypes.c_void_p
        lib.tdsl_so_kernel_info.argtypes = [ctypes.c_int]
        self._lib = lib
        self.kernels = {}
        from ._kernel import _KernelInfo
        for i in range(lib.tdsl_so_kernel_count()):
            info = _KernelInfo.from_address(lib.tdsl_so_kernel_info(i))
            name = info.name.decode()
            self.kernels[name] = Kernel(self, getattr(lib, name), info)

    def __getattr__(self, name):
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError("tdsl module has no kernel or attribute '%s'" % name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.kernels))

    def __repr__(self):
        return "<tdsl module %s: %s>" % (self.path, ", ".join(self.kernels))

    def set_num_threads(self, n):
        """Threads of this library's pool (n <= 0: $TDSL_NUM_THREADS or
        all cores)."""
        self._lib.tdsl_set_num_threads(ctypes.c_int(n))

    def get_num_threads(self):
        return self._lib.tdsl_get_num_threads()


def _read_source(path_or_source):
    """(source bytes, file path or None)."""
    if isinstance(path_or_source, bytes):
        return path_or_source, None
    if isinstance(path_or_source, os.PathLike) or (
            isinstance(path_or_source, str) and "\n" not in path_or_source and
            (path_or_source.endswith(".tdsl") or os.path.isfile(path_or_source))):
        path = os.fspath(path_or_source)
        with open(path, "rb") as f:
            return f.read(), path
    if isinstance(path_or_source, str):
        return path_or_source.encode("utf-8"), None
    raise TypeError("compile() takes a path or source text, got %s"
                    % type(path_or_source).__name__)


def compile(path_or_source, target="host", opt=2, kernels=None):
    """Compiles a .tdsl file (a path) or source text with tdslc and loads
    it.  target: host, x86-64, x86-64-v2, -v3, -v4; opt: 0..3 (tdslc's
    -O); kernels: names to compile (default all).  The library is cached
    on disk by content (source, options, compiler).  Raises CompileError
    with tdslc's diagnostics when the program has errors."""
    if target not in _TARGETS:
        raise ValueError("target must be one of %s, got %r" % (", ".join(_TARGETS), target))
    if opt not in (0, 1, 2, 3) or isinstance(opt, bool):
        raise ValueError("opt must be 0, 1, 2 or 3, got %r" % (opt,))
    if isinstance(kernels, str):
        kernels = [kernels]
    source, path = _read_source(path_or_source)
    entry, cached = _compiler.build(source, path, target, opt,
                                    list(kernels) if kernels else None)
    return Module(entry, cached)
