"""tdsl: compile tensor kernels with tdslc and call them on NumPy arrays
and PyTorch tensors (CPU, or CUDA for target="cuda").

    import numpy as np, tdsl
    m = tdsl.compile("kernel f(x: f32[N], a: f32) -> f32[N] { return x * a }")
    y = m.f(np.arange(4, dtype=np.float32), 2.0)

`compile()` runs `tdslc --emit=so,report-json` once per source text,
options and compiler (cached on disk, see _compiler.py) and loads the
library; `load()` loads a library `tdslc --emit=so` wrote elsewhere (no
tdslc needed).  The module's attributes are its kernels (Kernel,
_kernel.py).  Needs NumPy; PyTorch only to pass or get PyTorch tensors
(and for the results of CUDA kernels).
"""

import ctypes
import json
import os
import re

from . import _compiler
from ._errors import CompileError, KernelError, KernelIndexError, TdslError
from ._kernel import Kernel

__all__ = ["compile", "load", "Module", "Kernel", "TdslError", "CompileError",
           "KernelError", "KernelIndexError", "find_tdslc", "cache_dir"]
__version__ = "0.1.0"

find_tdslc = _compiler.find_tdslc
cache_dir = _compiler.cache_dir

_TARGETS = ("host", "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "cuda")
_CUDA_TARGET = re.compile(r"cuda:sm_[0-9]+a?$")


class Module:
    """A library of compiled kernels: its kernels as attributes (and in
    `kernels`), `report` (the optimization report, spec §11, as Python
    objects, or None when there is none), `source` (the program text, or
    None), `path` (the shared library), `from_cache` (whether compile()
    found it already built), `target` (compile()'s target, or None for
    load()), `device` ("cpu" or "cuda": where its kernels run)."""

    def __init__(self, path, source=None, report=None, from_cache=False, target=None):
        self.path = path
        self.from_cache = from_cache
        self.source = source
        self.report = report
        self.target = target
        try:
            lib = ctypes.CDLL(self.path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as e:
            raise TdslError("cannot load %s: %s" % (path, e)) from None
        for sym in ("tdsl_so_kernel_count", "tdsl_so_kernel_info",
                    "tdsl_last_error", "tdsl_strerror"):
            if not hasattr(lib, sym):
                raise TdslError("%s is not a library tdslc --emit=so wrote: it has "
                                "no %s" % (path, sym))
        lib.tdsl_last_error.restype = ctypes.c_char_p
        lib.tdsl_last_error.argtypes = []
        lib.tdsl_strerror.restype = ctypes.c_char_p
        lib.tdsl_strerror.argtypes = [ctypes.c_int]
        lib.tdsl_so_kernel_count.restype = ctypes.c_int
        lib.tdsl_so_kernel_info.restype = ctypes.c_void_p
        lib.tdsl_so_kernel_info.argtypes = [ctypes.c_int]
        if hasattr(lib, "tdsl_cuda_set_stream"):
            lib.tdsl_cuda_set_stream.restype = ctypes.c_int
            lib.tdsl_cuda_set_stream.argtypes = [ctypes.c_void_p]
            lib.tdsl_cuda_get_stream.restype = ctypes.c_void_p
            lib.tdsl_cuda_get_stream.argtypes = []
            lib.tdsl_cuda_synchronize.restype = ctypes.c_int
            lib.tdsl_cuda_synchronize.argtypes = []
        self._lib = lib
        self.kernels = {}
        from ._kernel import _KernelInfo
        for i in range(lib.tdsl_so_kernel_count()):
            info = _KernelInfo.from_address(lib.tdsl_so_kernel_info(i))
            name = info.name.decode()
            self.kernels[name] = Kernel(self, getattr(lib, name), info)
        cuda = any(k.info["device"] == "cuda" for k in self.kernels.values())
        self.device = "cuda" if cuda else "cpu"
        if cuda and not hasattr(lib, "tdsl_cuda_set_stream"):
            raise TdslError("%s has CUDA kernels but no tdsl_cuda_set_stream: "
                            "not a library tdslc --emit=so wrote" % path)

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

    def _cuda_call(self, fn, *args):
        if not hasattr(self._lib, "tdsl_cuda_set_stream"):
            raise TdslError("%s has no CUDA kernels" % self.path)
        rc = getattr(self._lib, fn)(*args)
        if rc != 0:
            raise KernelError(fn, rc, self._lib.tdsl_strerror(rc).decode(),
                              self._lib.tdsl_last_error().decode())

    def _set_stream(self, handle):
        self._cuda_call("tdsl_cuda_set_stream", ctypes.c_void_p(handle or None))

    def set_stream(self, stream):
        """The stream this library's CUDA kernels are enqueued on, for the
        calling thread: a CUstream handle (int), an object with
        `.cuda_stream` (torch.cuda.Stream), or None (the legacy default
        stream).  Kernel calls set it themselves, to PyTorch's current
        stream; this is for calls from C through the same library."""
        self._set_stream(getattr(stream, "cuda_stream", stream) or 0)

    def get_stream(self):
        """The calling thread's stream of this library (an int handle; 0 is
        the legacy default stream)."""
        if not hasattr(self._lib, "tdsl_cuda_get_stream"):
            raise TdslError("%s has no CUDA kernels" % self.path)
        return self._lib.tdsl_cuda_get_stream() or 0

    def synchronize(self):
        """Waits for the work this library enqueued on the calling thread's
        stream (tdsl_cuda_synchronize)."""
        self._cuda_call("tdsl_cuda_synchronize")


def _read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load(path):
    """Loads a library that `tdslc FILE.tdsl --emit=so -o PATH` wrote (any
    target), without tdslc.  `report` is read from PATH's stem +
    `.report.json` when that file sits beside it (what `--emit=so,report-json
    -o STEM` writes), else None; `source` likewise from STEM.tdsl."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.isfile(path):
        raise TdslError("cannot load %s: no such file" % path)
    stem = path[:-3] if path.endswith(".so") else path
    report = source = None
    if os.path.isfile(stem + ".report.json"):
        report = _read_json(stem + ".report.json")
    if os.path.isfile(stem + ".tdsl"):
        with open(stem + ".tdsl", encoding="utf-8") as f:
            source = f.read()
    return Module(path, source, report)


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
    it.  target: host, x86-64, x86-64-v2, -v3, -v4, cuda, cuda:sm_NN;
    opt: 0..3 (tdslc's -O); kernels: names to compile (default all).  The
    library is cached on disk by content (source, options, compiler).
    Raises CompileError with tdslc's diagnostics when the program has
    errors."""
    if not isinstance(target, str) or (target not in _TARGETS and
                                       not _CUDA_TARGET.match(target)):
        raise ValueError("target must be one of %s or cuda:sm_NN, got %r"
                         % (", ".join(_TARGETS), target))
    if opt not in (0, 1, 2, 3) or isinstance(opt, bool):
        raise ValueError("opt must be 0, 1, 2 or 3, got %r" % (opt,))
    if isinstance(kernels, str):
        kernels = [kernels]
    source, path = _read_source(path_or_source)
    entry, cached = _compiler.build(source, path, target, opt,
                                    list(kernels) if kernels else None)
    with open(os.path.join(entry, "source.tdsl"), encoding="utf-8") as f:
        text = f.read()
    return Module(os.path.join(entry, "kernels.so"), text,
                  _read_json(os.path.join(entry, "kernels.report.json")), cached, target)
