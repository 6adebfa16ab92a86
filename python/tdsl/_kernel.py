"""A compiled library (Module) and its kernels (Kernel), called through
ctypes.

The library is what `tdslc --emit=so` writes: its kernels are listed by
`tdsl_so_kernel_count()` / `tdsl_so_kernel_info(i)`, each a
`tdsl_kernel_info` (docs/abi.md) that gives the parameters, results,
dtypes, dims and layouts; nothing is read from the header.

A call borrows each tensor argument's DLTensor (_dlpack.borrow, no copy),
converts scalars to their C types, and passes everything to the kernel's
C entry, which makes every check (§7.4); a non-zero return becomes a
KernelError with the runtime's message.  Calls on plain PyTorch tensors
(and NumPy arrays, for CPU kernels) take the direct path instead (see
"the direct path" below): the same descriptors written from the tensors'
metadata into a buffer the kernel keeps, without DLPack capsules, a few
µs per call instead of tens.  Results not given with `out=`
are sized by a shape query (outputs with data == NULL), allocated with
the strides the query gives (channels-last results stay channels-last),
as PyTorch tensors when every tensor argument is one, else NumPy arrays,
and filled by a second call.

A CUDA kernel (its info's device_type is kDLCUDA) takes tensors whose
`__dlpack_device__()` is (kDLCUDA, id), all on one device.  Before the
call the library's stream (tdsl_cuda_set_stream, per thread) is set to
PyTorch's current stream on that device, the same stream is passed to
each producer's `__dlpack__(stream=...)` (so its pending work on the
tensor comes first), and the kernel is enqueued on it without
synchronizing.  Its results are PyTorch CUDA tensors on that device.
"""

import ctypes
import operator
import re
import struct
import sys

import numpy as np

from . import _dlpack as dl
from ._errors import KernelError, KernelIndexError

DTYPES = {(dl.DL_BOOL, 8): "bool", (dl.DL_INT, 8): "i8", (dl.DL_UINT, 8): "u8",
          (dl.DL_INT, 16): "i16", (dl.DL_INT, 32): "i32", (dl.DL_INT, 64): "i64",
          (dl.DL_FLOAT, 16): "f16", (dl.DL_BFLOAT, 16): "bf16",
          (dl.DL_FLOAT, 32): "f32", (dl.DL_FLOAT, 64): "f64"}
# NumPy has no bfloat16: bf16 travels as its uint16 bits, as in `tdslc run`.
NUMPY = {"bool": np.bool_, "i8": np.int8, "u8": np.uint8, "i16": np.int16,
         "i32": np.int32, "i64": np.int64, "f16": np.float16, "bf16": np.uint16,
         "f32": np.float32, "f64": np.float64}
TORCH = {"bool": "bool", "i8": "int8", "u8": "uint8", "i16": "int16",
         "i32": "int32", "i64": "int64", "f16": "float16", "bf16": "bfloat16",
         "f32": "float32", "f64": "float64"}
CTYPES = {"bool": ctypes.c_bool, "i8": ctypes.c_int8, "u8": ctypes.c_uint8,
          "i16": ctypes.c_int16, "i32": ctypes.c_int32, "i64": ctypes.c_int64,
          "f16": ctypes.c_uint16, "bf16": ctypes.c_uint16,
          "f32": ctypes.c_float, "f64": ctypes.c_double}
LAYOUTS = ["contiguous", "channels_last", "strided"]
TDSL_E_DEVICE = -4
TDSL_E_INDEX = -17
DEVICE_NAMES = {dl.DL_CPU: "cpu", dl.DL_CUDA: "cuda", 3: "cuda_host", 4: "opencl",
                7: "vulkan", 8: "metal", 10: "rocm", 13: "cuda_managed"}


def device_text(dev):
    name = DEVICE_NAMES.get(dev[0], "device type %d" % dev[0])
    return name if dev[0] == dl.DL_CPU else "%s:%d" % (name, dev[1])


class _ParamInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("is_tensor", ctypes.c_int),
                ("dtype", dl.DLDataType), ("ndim", ctypes.c_int),
                ("dims", ctypes.POINTER(ctypes.c_char_p)), ("layout", ctypes.c_int)]


class _KernelInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("nparams", ctypes.c_int),
                ("params", ctypes.POINTER(_ParamInfo)), ("nresults", ctypes.c_int),
                ("results", ctypes.POINTER(_ParamInfo)), ("device_type", ctypes.c_int),
                ("scratch_bytes", ctypes.c_int64), ("scratch_expr", ctypes.c_char_p)]


class Param:
    """One parameter or result, from tdsl_param_info."""

    def __init__(self, p):
        self.name = p.name.decode()
        self.is_tensor = bool(p.is_tensor)
        self.dtype = DTYPES[(p.dtype.code, p.dtype.bits)]
        self.ndim = p.ndim
        self.dims = [p.dims[i].decode() for i in range(p.ndim)]
        self.layout = LAYOUTS[p.layout]

    def as_dict(self):
        d = {"name": self.name, "kind": "tensor" if self.is_tensor else "scalar",
             "dtype": self.dtype}
        if self.is_tensor:
            d["shape"] = list(self.dims)
            d["layout"] = self.layout
        return d

    def __str__(self):
        if not self.is_tensor:
            return self.dtype
        lay = "" if self.layout == "contiguous" else " " + self.layout
        return "%s[%s]%s" % (self.dtype, ", ".join(self.dims), lay)


def _bf16_bits(v):
    u = int(np.array(v, np.float32).view(np.uint32))
    if v != v:
        return 0x7FC0
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def _scalar(value, p, kernel):
    """value as the C argument of scalar parameter p."""
    if hasattr(value, "item") and not isinstance(value, (bool, int, float)):
        value = value.item()  # NumPy scalars, 0-dim arrays and tensors

    def where():
        return "%s(): argument '%s' (%s)" % (kernel, p.name, p.dtype)
    if p.dtype == "bool":
        if not isinstance(value, bool):
            raise TypeError("%s expects a bool, got %s" % (where(), type(value).__name__))
        return value
    if p.dtype[0] in "iu":
        if isinstance(value, float):
            raise TypeError("%s expects an integer, got float %r" % (where(), value))
        v = operator.index(value)
        info = np.iinfo(NUMPY[p.dtype])
        if not info.min <= v <= info.max:
            raise OverflowError("%s: %d is out of range [%d, %d]"
                                % (where(), v, info.min, info.max))
        return v
    if not isinstance(value, (bool, int, float)):
        raise TypeError("%s expects a number, got %s" % (where(), type(value).__name__))
    v = float(value)
    if p.dtype == "f16":
        return int(np.array(v, np.float16).view(np.uint16))
    if p.dtype == "bf16":
        return _bf16_bits(v)
    return v


def _framework(obj):
    return type(obj).__module__.split(".")[0]


def _torch():
    """PyTorch, or None when it cannot be imported."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def _borrow_as(obj, p, kernel, device=None, stream=None):
    """The DLTensor of obj for tensor parameter or result p.  device: the
    (kDLCUDA, id) of a CUDA kernel's call (a Python number then becomes a
    0-dim PyTorch tensor on it), else None; stream: what to pass to
    `__dlpack__(stream=)` for CUDA tensors."""
    if isinstance(obj, (bool, int, float)):
        if device is not None:
            torch = _torch()
            if torch is None:
                raise TypeError("%s(): argument '%s': a Python number for a tensor "
                                "parameter of a CUDA kernel needs PyTorch; pass a "
                                "CUDA tensor" % (kernel, p.name))
            obj = torch.tensor(obj, dtype=getattr(torch, TORCH[p.dtype]),
                               device="cuda:%d" % device[1])
            return dl.borrow(obj, stream)
        if p.dtype == "bf16":
            b = dl.describe_numpy(np.array(_bf16_bits(float(obj)), np.uint16), dl.DL_BFLOAT)
        else:
            b = dl.describe_numpy(np.array(obj, NUMPY[p.dtype]))
        return b
    b = dl.borrow(obj, stream if device is not None else None)
    t = b.tensor.dtype
    if p.dtype == "bf16" and (t.code, t.bits) == (dl.DL_UINT, 16) and \
            _framework(obj) == "numpy":
        t.code = dl.DL_BFLOAT  # NumPy's stand-in for bf16: its bits
    return b


def _numpy_empty(shape, strides, dtype):
    dt = np.dtype(dtype)
    if any(n == 0 for n in shape):
        return np.empty(shape, dt)
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    return np.ndarray(shape, dt, buffer=np.empty(extent, dt),
                      strides=[s * dt.itemsize for s in strides])


def _torch_empty(shape, strides, dtype):
    import torch
    return torch.empty_strided(shape, strides, dtype=getattr(torch, TORCH[dtype]))


def _cuda_empty(shape, strides, dtype, device_id):
    """A PyTorch CUDA tensor for a CUDA kernel's result."""
    torch = _torch()
    if torch is None:
        raise RuntimeError("a CUDA kernel's results are allocated as PyTorch CUDA "
                           "tensors, and PyTorch cannot be imported: install "
                           "PyTorch with CUDA, or pass the results with out=")
    dev = _CUDA_DEVICES.get(device_id)
    if dev is None:
        dev = _CUDA_DEVICES[device_id] = torch.device("cuda", device_id)
    return torch.empty_strided(shape, strides, dtype=getattr(torch, TORCH[dtype]),
                               device=dev)


_CUDA_DEVICES = {}  # device id -> torch.device (cheaper than parsing "cuda:N")


_STREAM_OF = []  # [function device_id -> handle], found on the first call


def _find_stream_of():
    torch = _torch()
    if torch is None or not torch.cuda.is_available():
        return lambda device_id: 0
    # The raw handle without making a torch.cuda.Stream object (what
    # torch.cuda.current_stream(d).cuda_stream gives, a few µs cheaper).
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda device_id: torch.cuda.current_stream(device_id).cuda_stream


def _cuda_stream(device_id):
    """PyTorch's current stream on the device, as a CUstream handle (an
    int; 0 is the legacy default stream); 0 without PyTorch or CUDA."""
    if not _STREAM_OF:
        _STREAM_OF.append(_find_stream_of())
    return _STREAM_OF[0](device_id)


# ---- the direct path: PyTorch tensors described without DLPack -----------
#
# A call whose tensors are all plain PyTorch tensors (torch.Tensor or
# nn.Parameter, strided, of a tdsl dtype, of the parameter's rank, on the
# kernel's kind of device) skips DLPack: each DLTensor is written from the
# tensor's own metadata (data_ptr(), which includes the storage offset,
# shape, stride(), dtype, device) into a buffer the kernel keeps for it,
# with one struct.pack_into per call, and the C entry gets the buffer's
# addresses.  The descriptors are the ones the tensors' `__dlpack__()`
# would give (byte_offset 0, bool as kDLBool); the tensors stay referenced
# by the caller's arguments during the call, and a buffer serves one call
# at a time (taken from the kernel's pool, given back after), so threads
# calling one kernel each get their own.  For CUDA no `__dlpack__(stream=)`
# is needed: the kernel runs on PyTorch's current stream of the tensors'
# device, the stream PyTorch orders its own work on those tensors on, so
# there is nothing to synchronize across streams (what the protocol's
# stream argument exists for; PyTorch's exporter does nothing either when
# the consumer's stream is its current one).  For CPU kernels NumPy arrays
# (exactly np.ndarray, native byte order, byte strides a multiple of the
# item size; uint16 for a bf16 parameter) are described the same way,
# from arr.ctypes.data, shape and strides.  Anything else (other
# producers, Python numbers for tensors, a wrong rank or device, a scalar
# that needs more than a type check, an error from the C entry) goes the
# general path below, which then gives the same result, or raises the same
# error, as it always did.

_GENERAL = object()      # the direct path's "take the general path"
_DESC = "QiiiBBHQQQ"     # a DLTensor: data, device, ndim, dtype, shape, strides, byte_offset
_DESC_BYTES = struct.calcsize("=" + _DESC)
assert _DESC_BYTES == ctypes.sizeof(dl.DLTensor)
_TORCH_INFO = []         # [(tensor types, {torch dtype: (code, bits)}, torch.strided, hip)]


def _torch_info():
    """What the direct path needs of PyTorch; None until PyTorch is
    imported (then no argument can be a PyTorch tensor)."""
    if _TORCH_INFO:
        return _TORCH_INFO[0]
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "Tensor") or not hasattr(torch, "nn"):
        return None
    dtypes = {getattr(torch, TORCH[name]): ck for ck, name in DTYPES.items()}
    _TORCH_INFO.append((frozenset((torch.Tensor, torch.nn.Parameter)), dtypes,
                        torch.strided, bool(getattr(torch.version, "hip", None))))
    return _TORCH_INFO[0]


_NO_TORCH = (frozenset(), {}, None, False)
# NumPy dtypes (native byte order) as DLPack's (code, bits); uint16 is a bf16
# parameter's stand-in (its bits), as on the general path.
_NUMPY_DL = {np.dtype(NUMPY[name]): ck for ck, name in DTYPES.items() if name != "bf16"}
_U16 = np.dtype(np.uint16)


def _numpy_desc(v, n, bf16, vals, arrays):
    """Appends NumPy array v's DLTensor (a tensor of rank n; bf16: its
    parameter is bf16) to vals; False when the general path must take it
    (another rank or dtype, strides not a multiple of the element size)."""
    dt = _NUMPY_DL.get(v.dtype)
    if dt is None:
        if not bf16 or v.dtype != _U16:
            return False
        dt = (dl.DL_BFLOAT, 16)
    shape = v.shape
    if len(shape) != n:
        return False
    size = v.itemsize
    strides = [s // size for s in v.strides]
    for s, b in zip(strides, v.strides):
        if s * size != b:
            return False
    sa, ta = arrays
    vals += (v.ctypes.data, dl.DL_CPU, 0, n, dt[0], dt[1], 1, sa, ta, 0)
    vals += shape
    vals += strides
    return True


def _torch_desc(v, n, cuda, dev, dtypes, strided, vals, arrays):
    """Appends PyTorch tensor v's DLTensor (a tensor of rank n of a CUDA
    kernel when cuda, whose tensors so far are on device dev, -1 for
    none yet) to vals; returns the device, or None when the general path
    must take it (another rank, dtype, layout or device)."""
    dt = dtypes.get(v.dtype)
    if dt is None or v.layout is not strided:
        return None
    shape = v.shape
    if len(shape) != n:
        return None
    if cuda:
        if not v.is_cuda:
            return None
        g = v.get_device()
        if g != dev:
            if dev >= 0:
                return None
            dev = g
    elif not v.is_cpu:
        return None
    sa, ta = arrays
    vals += (v.data_ptr(), dl.DL_CUDA if cuda else dl.DL_CPU, dev, n, dt[0], dt[1], 1, sa, ta, 0)
    vals += shape
    vals += v.stride()
    return dev


class _Descriptors:
    """One call's DLTensors (laid out as Kernel._dlayout says) and the C
    arguments pointing at them (scalars filled in per call)."""

    def __init__(self, size, offsets, ranks, cargs):
        self.buf = ctypes.create_string_buffer(size)
        base = ctypes.addressof(self.buf)
        # per tensor: (shape address, strides address)
        self.arrays = [(base + o + _DESC_BYTES, base + o + _DESC_BYTES + 8 * n)
                       for o, n in zip(offsets, ranks)]
        self.addresses = [base + o for o in offsets]
        self.cargs = list(cargs)


class Kernel:
    """A compiled kernel: call it with its parameters (positional or by
    name) and optionally `out=` (one array, or a tuple for several
    results); returns its result, or a tuple of them."""

    def __init__(self, module, fn, info):
        self._module = module
        self._fn = fn
        self.name = info.name.decode()
        self.params = [Param(info.params[i]) for i in range(info.nparams)]
        self.results = [Param(info.results[i]) for i in range(info.nresults)]
        symbols = []
        for p in self.params + self.results:
            for d in p.dims:
                for s in re.findall(r"[A-Za-z_]\w*", d):
                    if s not in symbols:
                        symbols.append(s)
        self.info = {
            "name": self.name,
            "params": [p.as_dict() for p in self.params],
            "results": [p.as_dict() for p in self.results],
            "symbols": symbols,
            "scratch_bytes": info.scratch_bytes if info.scratch_bytes >= 0
            else info.scratch_expr.decode(),
            "device": "cpu" if info.device_type == dl.DL_CPU else "cuda",
        }
        self.device_type = info.device_type
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p if p.is_tensor else CTYPES[p.dtype]
                       for p in self.params] + [ctypes.c_void_p] * len(self.results)
        self.__doc__ = self.signature
        self._direct_setup(module)

    # ---- the direct path (see the comment above _Descriptors) ----------

    def _direct_setup(self, module):
        self._nparams = len(self.params)
        self._cuda = self.device_type == dl.DL_CUDA
        lib = getattr(module, "_lib", None)
        self._set_stream_c = getattr(lib, "tdsl_cuda_set_stream", None) if self._cuda else None
        tensors = [p for p in self.params if p.is_tensor] + self.results
        fmt, offsets, off = "=", [], 0
        for p in tensors:
            fmt += _DESC + "q" * (2 * p.ndim)
            offsets.append(off)
            off += _DESC_BYTES + 16 * p.ndim
        self._dstruct = struct.Struct(fmt)
        self._dlayout = (max(off, 8), offsets, [p.ndim for p in tensors])
        self._dpool = []
        # per parameter: (index, True, rank, bf16?) for a tensor, (index, False,
        # param, quick check) for a scalar: "f" a float type, "b" bool, (lo, hi)
        # an integer type, None (f16, bf16) always _scalar
        plan = []
        for i, p in enumerate(self.params):
            if p.is_tensor:
                plan.append((i, True, p.ndim, p.dtype == "bf16"))
            elif p.dtype in ("f32", "f64"):
                plan.append((i, False, p, "f"))
            elif p.dtype == "bool":
                plan.append((i, False, p, "b"))
            elif p.dtype[0] in "iu":
                info = np.iinfo(NUMPY[p.dtype])
                plan.append((i, False, p, (int(info.min), int(info.max))))
            else:
                plan.append((i, False, p, None))
        self._dplan = plan
        codes = {v: k for k, v in DTYPES.items()}
        # per result: (rank, dtype code, bits, dtype, offset of shape, of strides)
        self._dres = [(r.ndim, codes[r.dtype][0], codes[r.dtype][1], r.dtype,
                       o + _DESC_BYTES, o + _DESC_BYTES + 8 * r.ndim)
                      for r, o in zip(self.results, offsets[len(offsets) - len(self.results):])]
        self._dints = [struct.Struct("=%dq" % r.ndim) for r in self.results]

    def _descriptors(self):
        size, offsets, ranks = self._dlayout
        cargs = [None] * (self._nparams + len(self.results))
        d = _Descriptors(size, offsets, ranks, cargs)
        j = 0
        for i, tensor, _, _ in self._dplan:
            if tensor:
                d.cargs[i] = d.addresses[j]
                j += 1
        for k in range(len(self.results)):
            d.cargs[self._nparams + k] = d.addresses[j + k]
        return d

    def _call_direct(self, values, out):
        """The call through the direct path; _GENERAL when it does not
        apply (or the C entry refuses it: the general path then raises)."""
        info = (_TORCH_INFO[0] if _TORCH_INFO else _torch_info()) or _NO_TORCH
        types, dtypes, strided, hip = info
        cuda = self._cuda
        if cuda and hip:
            return _GENERAL
        if out is None:
            outs = None
        else:
            outs = out if type(out) is tuple or type(out) is list else (out,)
            if len(outs) != len(self.results):
                return _GENERAL
        pool = self._dpool
        try:
            d = pool.pop()
        except IndexError:
            d = self._descriptors()
        try:
            devtype = dl.DL_CUDA if cuda else dl.DL_CPU
            cargs, arrays = d.cargs, d.arrays
            vals = []
            dev = -1 if cuda else 0
            j = 0
            numpy = False  # a NumPy argument: NumPy results
            for i, tensor, n, quick in self._dplan:
                v = values[i]
                if tensor:
                    if type(v) not in types:
                        if cuda or type(v) is not np.ndarray or \
                                not _numpy_desc(v, n, quick, vals, arrays[j]):
                            return _GENERAL
                        numpy = True
                        j += 1
                        continue
                    dev = _torch_desc(v, n, cuda, dev, dtypes, strided, vals, arrays[j])
                    if dev is None:
                        return _GENERAL
                    j += 1
                else:
                    t = type(v)
                    if quick == "f" and t is float:
                        cargs[i] = v
                    elif quick == "b" and t is bool:
                        cargs[i] = v
                    elif type(quick) is tuple and t is int and quick[0] <= v <= quick[1]:
                        cargs[i] = v
                    else:
                        try:
                            cargs[i] = _scalar(v, n, self.name)
                        except Exception:
                            return _GENERAL
            if outs is None:
                if j == 0 or dev < 0:
                    return _GENERAL  # numbers only: NumPy results (CPU), or no device
                # the shape query: the results' descriptors with data NULL
                query = list(vals)
                for k, (n, code, bits, _, _, _) in enumerate(self._dres):
                    sa, ta = arrays[j + k]
                    query += (0, devtype, dev, n, code, bits, 1, sa, ta, 0)
                    query += (0,) * (2 * n)
                self._dstruct.pack_into(d.buf, 0, *query)
                if self._fn(*cargs) != 0:
                    return _GENERAL
                outs = []
                for (n, _, _, dtype, so, to), ints in zip(self._dres, self._dints):
                    shape = ints.unpack_from(d.buf, so)
                    strides = ints.unpack_from(d.buf, to)
                    outs.append(_cuda_empty(shape, strides, dtype, dev) if cuda
                                else _numpy_empty(shape, strides, NUMPY[dtype]) if numpy
                                else _torch_empty(shape, strides, dtype))
            for k, v in enumerate(outs):
                n = self._dres[k][0]
                if type(v) not in types:
                    if cuda or type(v) is not np.ndarray or \
                            not _numpy_desc(v, n, self._dres[k][3] == "bf16", vals,
                                            arrays[j + k]):
                        return _GENERAL
                    continue
                dev = _torch_desc(v, n, cuda, dev, dtypes, strided, vals, arrays[j + k])
                if dev is None:
                    return _GENERAL
            self._dstruct.pack_into(d.buf, 0, *vals)
            if cuda and self._set_stream_c(_cuda_stream(dev)) != 0:
                return _GENERAL
            if self._fn(*cargs) != 0:
                return _GENERAL
        finally:
            pool.append(d)
        if out is not None:
            return out
        return outs[0] if len(outs) == 1 else tuple(outs)

    @property
    def signature(self):
        ps = ", ".join("%s: %s" % (p.name, p) for p in self.params)
        rs = ", ".join(str(r) for r in self.results)
        return "%s(%s) -> %s" % (self.name, ps,
                                 rs if len(self.results) == 1 else "(%s)" % rs)

    def __repr__(self):
        return "<tdsl kernel %s>" % self.signature

    def _bind(self, args, kwargs):
        if len(args) > len(self.params):
            raise TypeError("%s() takes %d arguments but %d were given"
                            % (self.name, len(self.params), len(args)))
        values = list(args) + [None] * (len(self.params) - len(args))
        given = [True] * len(args) + [False] * (len(self.params) - len(args))
        names = [p.name for p in self.params]
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError("%s() got an unexpected keyword argument '%s'"
                                % (self.name, k))
            i = names.index(k)
            if given[i]:
                raise TypeError("%s() got multiple values for argument '%s'"
                                % (self.name, k))
            values[i], given[i] = v, True
        missing = [n for n, g in zip(names, given) if not g]
        if missing:
            raise TypeError("%s() missing argument%s: %s" % (
                self.name, "s" if len(missing) > 1 else "", ", ".join(missing)))
        return values

    def _error(self, rc, message, hint=""):
        lib = self._module._lib
        cls = KernelIndexError if rc == TDSL_E_INDEX else KernelError
        return cls(self.name, rc, lib.tdsl_strerror(rc).decode(), message, hint)

    def _check(self, rc):
        if rc != 0:
            hint = ""
            if rc == TDSL_E_DEVICE:
                hint = self._device_hint()
            raise self._error(rc, self._module._lib.tdsl_last_error().decode(), hint)

    def _device_hint(self):
        if self.device_type == dl.DL_CUDA:
            return ("kernel %s was compiled for CUDA: pass CUDA tensors, all on one "
                    "device (e.g. x.cuda())" % self.name)
        target = self._module.target
        return ("kernel %s was compiled for the CPU%s: pass CPU tensors "
                "(e.g. x.cpu()), or compile with target=\"cuda\""
                % (self.name, " (target %s)" % target if target else ""))

    def _cpu_only(self, b, name):
        """A CPU kernel checks each descriptor once exported (cheaper than
        asking each argument first; the C entry would refuse it too, in
        fewer words)."""
        dev = b.tensor.device
        if dev.device_type != dl.DL_CPU:
            raise self._error(TDSL_E_DEVICE, "kernel %s: argument '%s': expected device "
                              "cpu, got %s" % (self.name, name, device_text(
                                  (dev.device_type, dev.device_id))), self._device_hint())

    def _call_device(self, values, outs):
        """Checks where the tensor arguments of a CUDA kernel live, before
        anything is exported; returns their (kDLCUDA, id)."""
        args = [(p.name, v) for p, v in zip(self.params, values)
                if p.is_tensor and not isinstance(v, (bool, int, float))]
        args += [(r.name, o) for r, o in zip(self.results, outs or [])
                 if not isinstance(o, (bool, int, float))]
        found = None
        for name, v in args:
            dev = dl.device_of(v)
            if dev[0] != dl.DL_CUDA:
                raise self._error(TDSL_E_DEVICE, "kernel %s: argument '%s': expected "
                                  "device cuda, got %s" % (self.name, name, device_text(dev)),
                                  self._device_hint())
            if found is not None and dev != found[1]:
                raise self._error(TDSL_E_DEVICE, "kernel %s: argument '%s': on %s, "
                                  "but argument '%s' is on %s: all tensors of a "
                                  "CUDA kernel must be on one device" % (
                                      self.name, name, device_text(dev), found[0],
                                      device_text(found[1])))
            if found is None:
                found = (name, dev)
        if found is None:  # no tensor argument: PyTorch's current device
            torch = _torch()
            idx = torch.cuda.current_device() if torch and torch.cuda.is_available() else 0
            return (dl.DL_CUDA, idx)
        return found[1]

    def _allocate(self, cargs, torch_out, device=None):
        """Results sized by a shape query, allocated with its strides
        (device: a CUDA kernel's (kDLCUDA, id), else None)."""
        query = []
        qdev = dl.DLDevice(*(device or (dl.DL_CPU, 0)))
        for r in self.results:
            n = max(r.ndim, 1)
            shape, strides = (ctypes.c_int64 * n)(), (ctypes.c_int64 * n)()
            code, bits = next(k for k, v in DTYPES.items() if v == r.dtype)
            t = dl.DLTensor(None, qdev, r.ndim,
                            dl.DLDataType(code, bits, 1),
                            ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                            ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)), 0)
            query.append((t, shape, strides))
        self._check(self._fn(*cargs, *[ctypes.addressof(q[0]) for q in query]))
        if device is not None:
            return [_cuda_empty(list(shape[:r.ndim]), list(strides[:r.ndim]), r.dtype,
                                device[1])
                    for r, (_, shape, strides) in zip(self.results, query)]
        empty = _torch_empty if torch_out else _numpy_empty
        return [empty(list(shape[:r.ndim]), list(strides[:r.ndim]),
                      r.dtype if torch_out else NUMPY[r.dtype])
                for r, (_, shape, strides) in zip(self.results, query)]

    def _prepare(self, args, kwargs, out):
        """(C arguments, borrowed descriptors, results) of a call; the
        caller releases the descriptors (also done here on failure)."""
        return self._prepare_values(self._bind(args, kwargs), out)

    def _prepare_values(self, values, out):
        outs = None
        if out is not None:
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(outs) != len(self.results):
                raise TypeError("%s() has %d result%s but out= gives %d"
                                % (self.name, len(self.results),
                                   "s" if len(self.results) > 1 else "", len(outs)))
        cuda = self.device_type == dl.DL_CUDA
        device = self._call_device(values, outs) if cuda else None
        stream = None
        if cuda:
            handle = _cuda_stream(device[1])
            self._module._set_stream(handle)
            stream = handle if handle else 1  # DLPack: 1 is the legacy default stream
        borrowed, cargs, frameworks = [], [], set()
        try:
            for p, v in zip(self.params, values):
                if p.is_tensor:
                    b = _borrow_as(v, p, self.name, device, stream)
                    borrowed.append(b)
                    if not cuda:
                        self._cpu_only(b, p.name)
                    cargs.append(b.address)
                    if not isinstance(v, (bool, int, float)):
                        frameworks.add(_framework(v))
                else:
                    cargs.append(_scalar(v, p, self.name))
            if out is None:
                outs = self._allocate(cargs, frameworks == {"torch"}, device)
            for r, o in zip(self.results, outs):
                if isinstance(o, (bool, int, float)):
                    raise TypeError("%s(): out= takes arrays, not numbers" % self.name)
                b = _borrow_as(o, r, self.name, device, stream)
                borrowed.append(b)
                if not cuda:
                    self._cpu_only(b, r.name)
                cargs.append(b.address)
        except BaseException:
            for b in borrowed:
                b.release()
            raise
        return cargs, borrowed, outs

    def __call__(self, *args, out=None, **kwargs):
        if kwargs:
            values = self._bind(args, kwargs)
        elif len(args) == self._nparams:
            values = args
        else:  # the general path raises the TypeError
            return self._call_general(self._bind(args, kwargs), out)
        r = self._call_direct(values, out)
        if r is not _GENERAL:
            return r
        return self._call_general(values, out)

    def _call_general(self, values, out):
        """A call through DLPack (any producer)."""
        cargs, borrowed, outs = self._prepare_values(values, out)
        try:
            self._check(self._fn(*cargs))
        finally:
            for b in borrowed:
                b.release()
        if out is not None:
            return out
        return outs[0] if len(outs) == 1 else tuple(outs)

    def bind(self, *args, out=None, **kwargs):
        """A call prepared once, to repeat without the per-call work of
        Python (binding, DLPack exports, shape query; for CUDA, setting the
        library's stream to PyTorch's current one, once, now: each call
        then runs on the library's stream of the calling thread as it is
        at that call): returns a BoundCall whose `()` runs the C entry on
        the same descriptors and `.results` the results.  For benchmarks and tight loops: the
        arguments must keep their storage (no resize) while it is used;
        `.release()` (or `with`) gives the descriptors back."""
        cargs, borrowed, outs = self._prepare(args, kwargs, out)
        return BoundCall(self, cargs, borrowed, outs)


class BoundCall:
    """Kernel.bind()'s result."""

    def __init__(self, kernel, cargs, borrowed, outs):
        self._kernel = kernel
        self._cargs = cargs
        self._borrowed = borrowed
        self.results = outs[0] if len(outs) == 1 else tuple(outs)

    def __call__(self):
        if self._borrowed is None:
            raise ValueError("%s: this bound call was released" % self._kernel.name)
        self._kernel._check(self._kernel._fn(*self._cargs))
        return self.results

    def release(self):
        borrowed, self._borrowed = self._borrowed, None
        for b in borrowed or []:
            b.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
