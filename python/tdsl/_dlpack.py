"""DLPack structures and the consumer side of the protocol, with ctypes.

`borrow(obj)` takes a `DLManagedTensor` from `obj.__dlpack__()`: it
reads the pointer out of the capsule (named "dltensor"), renames the
capsule "used_dltensor" (so the producer's capsule destructor no longer
frees it) and calls the tensor's deleter in `Borrowed.release()`.

Two dtypes need help with older producers: NumPy (< 1.25) and PyTorch
(< 2.0) refuse to export bool, so a bool array is exported as its uint8
view and the descriptor's type code set to kDLBool; and read-only NumPy
arrays (which NumPy refuses to export) are described directly from the
array, still without copying.
"""

import ctypes
import sys

# DLDataTypeCode
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT, DL_BOOL = 0, 1, 2, 4, 6
DL_CPU, DL_CUDA = 1, 2


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor)))]

_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_set_name = ctypes.pythonapi.PyCapsule_SetName
_set_name.restype = ctypes.c_int
_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]

# PyCapsule_SetName keeps the pointer: the bytes must live as long as the
# process (a module constant does).
_DLTENSOR = b"dltensor"
_USED = b"used_dltensor"


class Borrowed:
    """A DLTensor the kernel may read or write; `release()` once done."""

    def __init__(self, address, keep, managed=None):
        self.address = address      # of the DLTensor
        self.tensor = DLTensor.from_address(address)
        self._keep = keep           # objects the descriptor points into
        self._managed = managed     # POINTER(DLManagedTensor) to delete

    def release(self):
        m, self._managed = self._managed, None
        if m is not None and m.contents.deleter:
            m.contents.deleter(m)
        self._keep = None


def _framework(obj):
    return type(obj).__module__.split(".")[0]


def is_bool(obj):
    dt = getattr(obj, "dtype", None)
    kind = getattr(dt, "kind", None)  # NumPy's dtypes (str() of one is slow)
    if isinstance(kind, str):
        return kind == "b"
    return str(dt) in ("bool", "torch.bool")


def _from_capsule(capsule, keep):
    if not _is_valid(capsule, _DLTENSOR):
        raise TypeError("__dlpack__() did not return an unused 'dltensor' capsule")
    address = _get_pointer(capsule, _DLTENSOR)
    if _set_name(capsule, _USED) != 0:
        raise RuntimeError("cannot mark the DLPack capsule as used")
    managed = ctypes.cast(address, ctypes.POINTER(DLManagedTensor))
    return Borrowed(address, keep, managed)


def describe_numpy(arr, code=None):
    """A DLTensor pointing into NumPy array arr (no copy); code overrides
    the type code (kDLBool, kDLBfloat)."""
    kinds = {"b": DL_BOOL, "i": DL_INT, "u": DL_UINT, "f": DL_FLOAT}
    if arr.dtype.kind not in kinds or arr.dtype.byteorder == ">":
        raise TypeError("cannot pass a NumPy array of dtype %s" % arr.dtype)
    nd = arr.ndim
    shape = (ctypes.c_int64 * max(nd, 1))(*arr.shape)
    strides = (ctypes.c_int64 * max(nd, 1))(*[s // arr.itemsize for s in arr.strides])
    if any(s % arr.itemsize for s in arr.strides):
        raise TypeError("cannot pass a NumPy array whose strides are not "
                        "multiples of its element size")
    t = DLTensor()
    t.data = arr.ctypes.data if arr.size else None
    t.device = DLDevice(DL_CPU, 0)
    t.ndim = nd
    t.dtype = DLDataType(kinds[arr.dtype.kind] if code is None else code,
                         arr.itemsize * 8, 1)
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    return Borrowed(ctypes.addressof(t), (arr, shape, strides, t))


def device_of(obj):
    """(device_type, device_id) of a tensor argument: its
    `__dlpack_device__()`, else (kDLCPU, 0) (NumPy arrays of any version,
    Python numbers)."""
    if _framework(obj) == "torch":  # the same answer, without the wrapper's cost
        d = obj.device
        if d.type == "cpu":
            return (DL_CPU, 0)
        if d.type == "cuda" and not sys.modules["torch"].version.hip:
            return (DL_CUDA, d.index)
    f = getattr(obj, "__dlpack_device__", None)
    if f is None:
        return (DL_CPU, 0)
    dev = f()
    return (int(dev[0]), int(dev[1]))


def borrow(obj, stream=None):
    """The DLTensor of obj (anything with __dlpack__, or a NumPy array).
    stream: for a CUDA tensor, the consumer's stream as the DLPack
    protocol passes it (`__dlpack__(stream=...)`: 1 the legacy default
    stream, else a CUstream handle); the producer makes that stream wait
    for its pending work on the tensor.  None for CPU tensors."""
    fw = _framework(obj)
    if fw == "torch" and getattr(obj, "requires_grad", False):
        obj = obj.detach()
    if is_bool(obj) and hasattr(obj, "view"):
        # Older NumPy and PyTorch export no bool: take the uint8 view.
        import numpy as np
        view = obj.view(np.uint8) if fw == "numpy" else obj.view(__import__("torch").uint8)
        b = borrow(view, stream)
        b.tensor.dtype.code = DL_BOOL
        return b
    if fw == "numpy" and (not obj.flags.writeable or not hasattr(obj, "__dlpack__")):
        return describe_numpy(obj)
    if not hasattr(obj, "__dlpack__"):
        raise TypeError("expected a tensor with __dlpack__ (NumPy >= 1.22, "
                        "PyTorch, ...), got %s" % type(obj).__name__)
    if stream is None:
        return _from_capsule(obj.__dlpack__(), obj)
    return _from_capsule(obj.__dlpack__(stream=stream), obj)
