#!/usr/bin/env python3
"""Generates PyTorch reference data for the differential tests.

Each `cases/*.tdsl` file holds ordinary tdsl kernels. A kernel body is
(almost) Python, so this script evaluates it with PyTorch itself: the
kernel header is parsed for parameter types, random inputs are made for
them, the body runs with tdsl's names bound to their torch equivalents,
and inputs and outputs are saved as .npy files next to a manifest that
tests/unit/test_pytorch.c replays through the reference interpreter.
The suite never needs PyTorch; only regenerating the data does:

    python3 -m venv venv && venv/bin/pip install torch numpy
    venv/bin/python tests/pytorch/gen.py [cases/X.tdsl ...]

Annotations, as comments on the lines before a kernel:
    # @sizes N=3 C=4      values of size symbols (default: 2..5, seeded)
    # @range x 0.1 5      uniform floats in [lo, hi) for parameter x; for an
                          integer parameter random ints in [lo, hi) (index
                          tensors: `# @range idx -5 5` with negatives)
    # @tol reduce         tolerance class: elementwise (default) | reduce
    # @error              PyTorch must raise: tdsl must reject it too
    # @scalar alpha 0.5   value of a scalar parameter (default random)
    # @special x          float parameter x starts with SPECIAL's values
                          (+-0, +-inf, NaN, tiny, huge), in row-major order
    # @opt O0             compiled replays (test_exec) also build the kernel
                          at -O0 (manifest file written "f.tdsl@O0")
"""
import hashlib
import math
import os
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")

DT = {
    "bool": torch.bool, "i8": torch.int8, "u8": torch.uint8,
    "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
    "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
    "f64": torch.float64,
}


def _clamp(x, min=None, max=None):
    return torch.clamp(x, min=min, max=max)


def _with_number(fn):
    """maximum/minimum as tdsl's spec (4.3) has them: a Python number for
    either operand, promoting as in `a + b` (torch.maximum itself takes
    tensors only), by making the number a 0-dim tensor of the result type."""
    def call(a, b):
        if not isinstance(a, torch.Tensor):
            a = torch.tensor(a, dtype=torch.result_type(b, a))
        if not isinstance(b, torch.Tensor):
            b = torch.tensor(b, dtype=torch.result_type(a, b))
        return fn(a, b)
    return call


def _half(fn):
    """fn as PyTorch 2 computes it for f16 on the CPU: torch 1.13 has no
    CPU f16 kernel for many functions (tan, asin, log2, atan2, hypot,
    the activations...; and no bf16 mish), where PyTorch 2 computes them
    in f32 (its "opmath" type) and rounds once; this does the same when
    1.13 raises."""
    def call(*a, **kw):
        ts = [x for x in a if isinstance(x, torch.Tensor)]
        try:
            return fn(*a, **kw)
        except RuntimeError as e:
            if "not implemented for 'Half'" not in str(e) and \
               "not implemented for 'BFloat16'" not in str(e):
                raise
        half = (torch.float16, torch.bfloat16)
        want = ts[0].dtype if len(ts) == 1 else torch.result_type(ts[0], ts[1])
        a = [x.float() if isinstance(x, torch.Tensor) and x.dtype in half else x for x in a]
        kw = {k: (v.float() if isinstance(v, torch.Tensor) and v.dtype in half else v)
              for k, v in kw.items()}
        r = fn(*a, **kw)
        return r.to(want) if want in half and r.is_floating_point() else r
    return call


def _exact_mod(fn):
    """fmod and remainder of floats as PyTorch's scalar path (and C's fmod)
    give them: torch 1.13's vectorized f32 fmod is not exact when |a / b|
    overflows (fmod(3e38, 0.5) gives NaN, where its scalar path gives 0).
    fmod's result is exact, so computing in f64 and rounding back is the
    exact value."""
    def call(a, b):
        r = _half(fn)(a, b)
        if r.is_floating_point() and r.dtype != torch.float64:
            a2 = a.double() if isinstance(a, torch.Tensor) else a
            b2 = b.double() if isinstance(b, torch.Tensor) else b
            r = fn(a2, b2).to(r.dtype)
        return r
    return call


def _gelu(x, approximate="none"):
    return F.gelu(x, approximate=approximate)


def _pad(x, pad, mode="constant", value=None):
    """F.pad as PyTorch 2 has it: torch 1.13 lacks CPU reflect/replicate
    kernels for integer and half dtypes (data movement: padded in f64 and
    converted back, exact) and circular padding of unbatched inputs (added
    in PyTorch 2: padded with a batch dim of 1)."""
    if mode == "circular" and x.dim() == len(pad) // 2 + 1:
        return F.pad(x.unsqueeze(0), pad, mode=mode).squeeze(0)
    try:
        return F.pad(x, pad, mode=mode, value=value)
    except RuntimeError as e:
        if "not implemented for" not in str(e) or x.dtype == torch.bool:
            raise
    return F.pad(x.double(), pad, mode=mode).to(x.dtype)


def _interpolate(x, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
    """F.interpolate; f16 and bf16 as PyTorch 2 computes them on the CPU:
    in f32 (their op-math type), rounded once, where torch 1.13 has no
    kernel, and for bf16 linear and cubic modes, which torch 1.13
    accumulates in bf16 (errors of tens of ulps)."""
    kw = dict(size=size, scale_factor=scale_factor, mode=mode, align_corners=align_corners,
              recompute_scale_factor=recompute_scale_factor)
    if x.dtype == torch.bfloat16 and mode in ("linear", "bilinear", "bicubic"):
        return F.interpolate(x.float(), **kw).to(x.dtype)
    try:
        return F.interpolate(x, **kw)
    except RuntimeError as e:
        if "not implemented for 'Half'" not in str(e) and \
           "not implemented for 'BFloat16'" not in str(e):
            raise
    return F.interpolate(x.float(), **kw).to(x.dtype)


def _layer_norm(x, shape, weight=None, bias=None, eps=1e-5):
    if isinstance(shape, int):  # tdsl also accepts one int, as nn.LayerNorm does
        shape = [shape]
    return F.layer_norm(x, shape, weight, bias, eps)



def _opmath_norm(fn):
    """A normalization of a half input as PyTorch 2's CPU kernels compute
    it: in f32 (the opmath type; parameters may be f32 beside a half
    input), the result rounded once to the input's dtype.  torch 1.13 has
    no CPU f16 batch_norm or group_norm, and its bf16 group_norm rounds the
    per-channel scale to bf16 (errors of several bf16 ulps)."""
    half = (torch.float16, torch.bfloat16)

    def call(x, *a, **kw):
        if x.dtype not in half:
            return fn(x, *a, **kw)
        up = lambda v: v.float() if isinstance(v, torch.Tensor) and v.dtype in half else v
        return fn(up(x), *[up(v) for v in a], **{k: up(v) for k, v in kw.items()}).to(x.dtype)
    return call


def _rms_norm(x, normalized_shape, weight=None, eps=None):
    """F.rms_norm (PyTorch 2.4+; torch 1.13 lacks it), written from PyTorch's
    composite implementation (aten/src/ATen/native/layer_norm.cpp,
    rms_norm_symint): the input in its opmath type (f32 for half types),
    x * rsqrt(mean(x^2 over the normalized dims) + eps) cast back to the
    input's dtype, then times weight (promoting).  eps None is the opmath
    type's machine epsilon; a given eps is stored in the input's dtype first
    (the kernel's scalar_t eps_val).  Shape checks as _check_layer_norm_inputs."""
    if isinstance(normalized_shape, int):
        normalized_shape = [normalized_shape]
    ns = list(normalized_shape)
    if not ns:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional")
    if weight is not None and list(weight.shape) != ns:
        raise RuntimeError("Expected weight to be of same shape as normalized_shape")
    if list(x.shape[x.dim() - len(ns):]) != ns or len(ns) > x.dim():
        raise RuntimeError("Given normalized_shape, expected input with shape [*, ...]")
    if not x.is_floating_point():
        raise RuntimeError("rms_norm not implemented for integer inputs")
    opmath = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    if eps is None:
        eps = torch.finfo(opmath).eps
    else:
        eps = torch.tensor(eps, dtype=x.dtype).item()
    dims = [x.dim() - 1 - i for i in range(len(ns))]
    xu = x.to(opmath)
    r = torch.rsqrt(xu.pow(2).mean(dims, keepdim=True) + eps)
    y = (xu * r).type_as(x)
    return y * weight if weight is not None else y


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
          scale=None, enable_gqa=False):
    """F.scaled_dot_product_attention (PyTorch 2.0+; torch 1.13 lacks it),
    written from PyTorch's documented math reference: softmax(q @ k^T *
    scale + bias) @ v, scale 1/sqrt(E) by default, a bool mask (or the
    lower-triangular ones(L, S).tril() of is_causal) keeping where true
    (-inf elsewhere), a float mask added (in place, as the math kernel:
    it must broadcast to the scores); half inputs computed in f32 and the
    result rounded once (_scaled_dot_product_attention_math).  Input
    checks as validate_sdpa_input."""
    if query.dtype != key.dtype or query.dtype != value.dtype:
        raise RuntimeError("Expected query, key, and value to have the same dtype")
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError("Expected query, key, and value to all be at least 2 dimensional")
    if attn_mask is not None and attn_mask.dtype not in (torch.bool, torch.float32, query.dtype):
        raise RuntimeError("Expected attn_mask dtype to be bool or float or to match query dtype")
    if is_causal and attn_mask is not None:
        raise RuntimeError("Explicit attn_mask should not be set when is_causal=True")
    if dropout_p != 0.0 or enable_gqa:
        raise NotImplementedError("the reference has no dropout and no GQA")
    dt = query.dtype
    up = (lambda t: t.float()) if dt in (torch.float16, torch.bfloat16) else (lambda t: t)
    q, k, v = up(query), up(key), up(value)
    L, S = q.size(-2), k.size(-2)
    s = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    attn = q @ k.transpose(-2, -1) * s
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool).tril(diagonal=0)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn.masked_fill_(attn_mask.logical_not(), float("-inf"))
        else:
            attn.add_(attn_mask)
    return (torch.softmax(attn, dim=-1) @ v).to(dt)

def _tensor(data, dtype=None):
    return torch.tensor(data, dtype=dtype)


def _full(shape, value, dtype=None):
    return torch.full(list(shape) if isinstance(shape, (list, tuple)) else [shape], value, dtype=dtype)


def _zeros(*shape, dtype=torch.float32):
    if len(shape) >= 1 and isinstance(shape[-1], torch.dtype):
        dtype, shape = shape[-1], shape[:-1]
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = shape[0]
    return torch.zeros(*shape, dtype=dtype)


def _ones(*shape, dtype=torch.float32):
    if len(shape) >= 1 and isinstance(shape[-1], torch.dtype):
        dtype, shape = shape[-1], shape[:-1]
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = shape[0]
    return torch.ones(*shape, dtype=dtype)


def _full_any(shape, value, dtype=None):
    return _full(shape, value, dtype)


def _arange(*a, dtype=None, step=None):
    if step is not None:
        a = a + (step,)
    if len(a) >= 2 and isinstance(a[-1], torch.dtype):
        dtype, a = a[-1], a[:-1]
    return torch.arange(*a, dtype=dtype)


def _contiguous_patch():
    orig = torch.Tensor.contiguous

    def contiguous(self, fmt=None, memory_format=None):
        fmt = fmt if fmt is not None else memory_format
        if fmt is None:
            return orig(self)
        return orig(self, memory_format=fmt)
    torch.Tensor.contiguous = contiguous


_contiguous_patch()


def _to_patch():
    orig = torch.Tensor.to

    def to(self, *a, **kw):
        if len(a) == 1 and isinstance(a[0], torch.memory_format):
            return orig(self, memory_format=a[0])
        return orig(self, *a, **kw)
    torch.Tensor.to = to


_to_patch()

ENV = {
    **DT,
    "true": True, "false": False,
    "contiguous": torch.contiguous_format,
    "channels_last": torch.channels_last,
    "abs": torch.abs, "neg": torch.neg, "exp": torch.exp, "log": torch.log,
    "log1p": torch.log1p, "expm1": torch.expm1, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu,
    "gelu": _gelu, "silu": F.silu, "erf": torch.erf, "floor": torch.floor,
    "ceil": torch.ceil, "round": torch.round, "sign": torch.sign,
    "reciprocal": torch.reciprocal, "logical_not": torch.logical_not,
    "maximum": _with_number(torch.maximum),
    "minimum": _with_number(torch.minimum), "pow": torch.pow,
    "where": torch.where, "clamp": _clamp,
    "sum": torch.sum, "mean": torch.mean, "amax": torch.amax,
    "amin": torch.amin, "prod": torch.prod, "argmax": torch.argmax,
    "argmin": torch.argmin, "softmax": torch.softmax,
    "log_softmax": torch.log_softmax, "layer_norm": _layer_norm,
    "matmul": torch.matmul, "conv2d": F.conv2d,
    "max_pool2d": F.max_pool2d, "avg_pool2d": F.avg_pool2d,
    "adaptive_avg_pool2d": F.adaptive_avg_pool2d,
    "tensor": _tensor, "zeros": _zeros, "ones": _ones, "full": _full_any,
    "arange": _arange,
    "tan": _half(torch.tan), "asin": _half(torch.asin), "acos": _half(torch.acos),
    "atan": _half(torch.atan), "sinh": _half(torch.sinh), "cosh": _half(torch.cosh),
    "asinh": _half(torch.asinh), "acosh": _half(torch.acosh),
    "atanh": _half(torch.atanh), "exp2": _half(torch.exp2), "log2": _half(torch.log2),
    "log10": _half(torch.log10), "trunc": _half(torch.trunc), "frac": _half(torch.frac),
    "atan2": _half(torch.atan2),
    "softplus": _half(F.softplus), "leaky_relu": _half(F.leaky_relu), "elu": _half(F.elu),
    "hardtanh": _half(F.hardtanh), "hardswish": _half(F.hardswish),
    "hardsigmoid": _half(F.hardsigmoid), "mish": _half(F.mish),
    "isnan": torch.isnan, "isinf": torch.isinf, "isfinite": torch.isfinite,
    "nan_to_num": torch.nan_to_num,
    "hypot": _half(torch.hypot), "fmod": _exact_mod(torch.fmod),
    "remainder": _exact_mod(torch.remainder), "copysign": _half(torch.copysign),
    "logaddexp": _half(torch.logaddexp), "lerp": _half(torch.lerp),
    # indexing by tensors (spec 4.5a)
    "index_select": torch.index_select, "gather": torch.gather,
    "take_along_dim": torch.take_along_dim, "embedding": F.embedding, "flip": torch.flip,
    "inf": math.inf, "nan": math.nan,
    "cat": torch.cat, "concat": torch.concat, "concatenate": getattr(torch, "concatenate", torch.concat),
    "stack": torch.stack, "split": torch.split, "chunk": torch.chunk,
    "unbind": torch.unbind, "roll": torch.roll, "tile": torch.tile,
    "tril": torch.tril, "triu": torch.triu, "masked_fill": torch.masked_fill,
    "linear": _half(F.linear), "addmm": _half(torch.addmm), "bmm": _half(torch.bmm),
    "baddbmm": _half(torch.baddbmm), "einsum": _half(torch.einsum),
    "conv1d": _half(F.conv1d), "batch_norm": _opmath_norm(F.batch_norm),
    "group_norm": _opmath_norm(F.group_norm), "rms_norm": _rms_norm,
    "scaled_dot_product_attention": _sdpa,
    # resizing (spec 4.5a): pad, interpolate, conv_transpose2d
    "pad": _pad, "interpolate": _interpolate, "conv_transpose2d": F.conv_transpose2d,
}



def _var_corr(name):
    """var/std/var_mean/std_mean as PyTorch 2 has them: torch 1.13 takes
    only an int correction= and only with dim=; otherwise a correction is
    PyTorch 2's formula sum((x - mean)^2) / max(0, N - correction),
    computed here in f64."""
    fn = getattr(torch, name)

    def call(x, *a, correction=None, **kw):
        dim = a[0] if a else kw.get("dim")
        if correction is None or (isinstance(correction, int) and dim is not None):
            if correction is not None:
                kw["correction"] = correction
            return fn(x, *a, **kw)
        keepdim = kw.get("keepdim", False)
        dims = list(range(x.dim())) if dim is None else \
            ([dim] if isinstance(dim, int) else list(dim))
        xd = x.double()
        mean = xd.mean(dims, keepdim=True)
        n = 1
        for d in dims:
            n *= x.shape[d]
        v = ((xd - mean) ** 2).sum(dims, keepdim=keepdim) / max(0.0, n - correction)
        if name.startswith("std"):
            v = v.sqrt()
        if name.endswith("_mean"):
            m = mean if keepdim else mean.reshape(v.shape)
            return v.to(x.dtype), m.to(x.dtype)
        return v.to(x.dtype)
    return call


def _any_all(fn):
    """any/all with a list of dims, as PyTorch 2.2+ takes them (torch 1.13
    reduces one dim at a time): the dims one after another, last first."""
    def call(x, dim=None, keepdim=False):
        if dim is None:
            return fn(x)
        if isinstance(dim, int):
            return fn(x, dim, keepdim=keepdim)
        if not dim:
            return fn(x)
        for d in sorted((d % x.dim() for d in dim), reverse=True):
            x = fn(x, d, keepdim=keepdim)
        return x
    return call


ENV.update({
    "var": _var_corr("var"), "std": _var_corr("std"),
    "var_mean": _var_corr("var_mean"), "std_mean": _var_corr("std_mean"),
    "logsumexp": _half(torch.logsumexp), "norm": _half(torch.norm),
    "any": _any_all(torch.any), "all": _any_all(torch.all),
    "count_nonzero": torch.count_nonzero,
    "cumsum": _half(torch.cumsum), "cumprod": _half(torch.cumprod),
    "logcumsumexp": _half(torch.logcumsumexp),
})


def _stats_patch():
    """x.var() ... as the functions above; x.cumsum() ... for f16/bf16
    (torch 1.13 has no CPU half kernel; PyTorch 2 accumulates in f32)."""
    for name in ("var", "std"):
        setattr(torch.Tensor, name, ENV[name])
    torch.Tensor.any = _any_all(torch.Tensor.any)
    torch.Tensor.all = _any_all(torch.Tensor.all)
    torch.Tensor.logsumexp = _half(torch.Tensor.logsumexp)
    torch.Tensor.norm = _half(torch.Tensor.norm)
    for name in ("cumsum", "cumprod", "logcumsumexp"):
        setattr(torch.Tensor, name, _half(getattr(torch.Tensor, name)))


_stats_patch()

def _method_patch():
    """x.tan() and friends as the functions above (f16 through _half)."""
    for name in ("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
                 "atanh", "exp2", "log2", "log10", "trunc", "frac", "atan2", "hypot",
                 "fmod", "remainder", "copysign", "logaddexp", "lerp", "addmm", "bmm",
                 "baddbmm"):
        setattr(torch.Tensor, name, _half(getattr(torch.Tensor, name)))
    torch.Tensor.fmod = _exact_mod(torch.fmod)
    torch.Tensor.remainder = _exact_mod(torch.remainder)


_method_patch()

# @special: +-0, +-inf, NaN, small and large magnitudes (beyond f16's and
# f32's range at the end: they round to inf in those dtypes).
SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0,
           1e-7, -1e-7, 0.99999, -0.99999, 1.0001, 88.5, -88.5, 1e4, -1e4, 1e9, -1e9,
           3e38, -3e38]

HEADER = re.compile(r"kernel\s+(\w+)\s*\((.*?)\)\s*->\s*(.*?)\{", re.S)
PARAM = re.compile(r"(\w+)\s*:\s*(\w+)(?:\s*\[([^\]]*)\])?\s*(\w+)?")


def parse_kernels(text):
    """Yields (name, params, annotations, body) for each kernel."""
    pos = 0
    while True:
        m = HEADER.search(text, pos)
        if not m:
            return
        ann = []
        before = text[:m.start()].rstrip("\n").split("\n")
        for line in reversed(before):
            s = line.strip()
            if s.startswith("# @"):
                ann.append(s[3:].split())
            elif s.startswith("#") or not s:
                continue
            else:
                break
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        params = []
        for p in split_top(m.group(2)):
            pm = PARAM.fullmatch(p.strip())
            dims = None
            if pm.group(3) is not None:
                dims = [d.strip() for d in pm.group(3).split(",") if d.strip()]
            params.append((pm.group(1), pm.group(2), dims, pm.group(4)))
        yield m.group(1), params, ann, text[m.end():i - 1]
        pos = i


def m_results(text, name):
    """The declared result types of kernel `name` as (dtype, [dims])."""
    m = re.search(r"kernel\s+" + name + r"\s*\(.*?\)\s*->\s*(.*?)\{", text, re.S)
    res = m.group(1).strip()
    if res.startswith("("):
        res = res[1:res.rindex(")")]
    out = []
    for r in split_top(res):
        rm = re.fullmatch(r"\s*(\w+)\s*(?:\[([^\]]*)\])?\s*\w*\s*", r)
        dims = [d.strip() for d in (rm.group(2) or "").split(",") if d.strip()]
        out.append((rm.group(1), dims))
    return out


def check_results(rel, name, decl, rets, sizes):
    """The kernel's declared results must match what PyTorch returned."""
    if len(decl) != len(rets):
        sys.exit(f"{rel}:{name}: declares {len(decl)} results, returns {len(rets)}")
    for i, ((dt, dims), r) in enumerate(zip(decl, rets)):
        want = [eval(d, {}, dict(sizes)) for d in dims]
        if DT[dt] != r.dtype or list(r.shape) != want:
            sys.exit(f"{rel}:{name}: result {i} is {r.dtype}{list(r.shape)}, declared {dt}{want}")


def split_top(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


def make_input(rng, dtype, shape, rangespec):
    t = DT[dtype]
    if dtype == "bool":
        return torch.from_numpy(rng.random(shape) < 0.5)
    if t.is_floating_point:
        lo, hi = rangespec if rangespec else (-3.0, 3.0)
        a = rng.uniform(lo, hi, size=shape)
        return torch.from_numpy(a).to(t)
    lo, hi = (0, 256) if dtype == "u8" else (-9, 10)
    if rangespec:
        lo, hi = int(rangespec[0]), int(rangespec[1])
    a = rng.integers(lo, hi, size=shape)
    if not rangespec:
        a[a == 0] = 1  # keep // and % away from PyTorch's integer ZeroDivisionError
    return torch.from_numpy(a).to(t)


def to_numpy(t):
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(np.uint16)
    return t.detach().contiguous().numpy()


def run_case(path, rel, out_lines):
    text = open(path).read()
    stem = os.path.basename(path)[:-5]
    for name, params, ann, body in parse_kernels(text):
        seed = int(hashlib.sha1((rel + name).encode()).hexdigest()[:8], 16)
        rng = np.random.default_rng(seed)
        sizes, ranges, tol, error, scalars = {}, {}, "elementwise", False, {}
        special, opts = set(), []
        for a in ann:
            if a[0] == "sizes":
                sizes.update({k: int(v) for k, v in (kv.split("=") for kv in a[1:])})
            elif a[0] == "range":
                ranges[a[1]] = (float(a[2]), float(a[3]))
            elif a[0] == "tol":
                tol = a[1]
            elif a[0] == "error":
                error = True
            elif a[0] == "scalar":
                scalars[a[1]] = a[2]
            elif a[0] == "special":
                special.update(a[1:])
            elif a[0] == "opt":
                opts += a[1:]
        env = dict(ENV)
        inputs, args = [], []
        for pname, dtype, dims, layout in params:
            if dims is None:  # scalar parameter
                if pname in scalars:
                    v = scalars[pname]
                elif DT[dtype].is_floating_point:
                    v = repr(round(float(rng.uniform(-2, 2)), 3))
                elif dtype == "bool":
                    v = "true"
                else:
                    v = str(int(rng.integers(1, 5)))
                pyv = {"true": True, "false": False}.get(v)
                if pyv is None:
                    pyv = float(v) if DT[dtype].is_floating_point else int(v)
                env[pname] = torch.tensor(pyv, dtype=DT[dtype])
                inputs.append(f"{pname}={v}")
                continue
            shape = []
            for d in dims:
                if re.fullmatch(r"\d+", d):
                    shape.append(int(d))
                else:
                    if d not in sizes:
                        sizes[d] = int(rng.integers(2, 6))
                    shape.append(sizes[d])
            t = make_input(rng, dtype, shape, ranges.get(pname))
            if pname in special:
                flat = t.reshape(-1).to(torch.float64)
                n = min(len(SPECIAL), flat.numel())
                flat[:n] = torch.tensor(SPECIAL[:n], dtype=torch.float64)
                t = flat.to(t.dtype).reshape(t.shape)
            if layout == "channels_last":
                t = t.contiguous(memory_format=torch.channels_last)
            env[pname] = t
            fname = f"{stem}.{name}.{pname}.npy"
            np.save(os.path.join(DATA, fname), to_numpy(t))
            inputs.append(f"{pname}=data/{fname}")
        env.update(sizes)
        src = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", body))
        src = re.sub(r"\breturn\b", "__ret__ =", src)
        fn = "\n".join(l.strip() for l in src.split("\n"))
        try:
            exec(fn, env)
            rets = env["__ret__"]
            if not isinstance(rets, tuple):
                rets = (rets,)
            raised = None
        except Exception as e:  # PyTorch rejected the program
            raised = e
        if error:
            if raised is None:
                sys.exit(f"{rel}:{name}: marked @error but PyTorch accepted it")
            out_lines.append(f"{rel} {name} error " + " ".join(inputs))
            continue
        if raised is not None:
            sys.exit(f"{rel}:{name}: PyTorch raised {raised!r}")
        check_results(rel, name, m_results(text, name), rets, sizes)
        outs = []
        for i, r in enumerate(rets):
            fname = f"{stem}.{name}.out{i}.npy"
            np.save(os.path.join(DATA, fname), to_numpy(r))
            outs.append(f"out{i}=data/{fname}")
        for f in [rel] + [f"{rel}@{o}" for o in opts]:
            out_lines.append(f"{f} {name} {tol} " + " ".join(inputs) + " -- " + " ".join(outs))


def main():
    """No arguments: regenerates everything.  With case files (such as
    cases/fn_math.tdsl): regenerates only their data and manifest lines,
    keeping the rest (made by whatever PyTorch version made them)."""
    os.makedirs(DATA, exist_ok=True)
    only = {os.path.relpath(os.path.abspath(a), HERE) for a in sys.argv[1:]}
    old = {}
    if only:
        with open(os.path.join(HERE, "manifest.txt")) as fp:
            for line in fp:
                if line.strip() and not line.startswith("#"):
                    old.setdefault(line.split()[0].split("@")[0], []).append(line.rstrip("\n"))
    for f in os.listdir(DATA):
        if not only or any(f.startswith(os.path.basename(o)[:-5] + ".") for o in only):
            os.remove(os.path.join(DATA, f))
    lines = []
    for d, rel in (("cases", "cases"), ("../../examples", "../../examples")):
        for f in sorted(os.listdir(os.path.join(HERE, d))):
            if not f.endswith(".tdsl"):
                continue
            if only and f"{rel}/{f}" not in only:
                lines += old.get(f"{rel}/{f}", [])
                continue
            run_case(os.path.join(HERE, d, f), f"{rel}/{f}", lines)
    with open(os.path.join(HERE, "manifest.txt"), "w") as fp:
        fp.write("# generated by gen.py: file kernel tol inputs -- outputs\n")
        fp.write("\n".join(lines) + "\n")
    print(f"{len(lines)} kernels")


if __name__ == "__main__":
    main()
