#!/usr/bin/env python3
"""Differential fuzzer: random tdsl programs, run by tdslc and by PyTorch.

Needs PyTorch and numpy (the venv of gen.py) and a built tdslc. Each
program is a kernel of a few statements mixing views, copies, broadcasting
elementwise math over all ten dtypes, reductions, normalizations, matmul,
conv2d, conv_transpose2d, pooling, pad, interpolate, factories, indexing by tensors, joins (cat, stack, split, chunk, unbind,
roll, repeat, tile, tril, triu, masked_fill) and the layers (linear, einsum, bmm, conv1d,
batch_norm, group_norm, rms_norm, attention), over parameters with literal or symbolic
sizes and contiguous, channels_last or strided layouts. Statements are
built one at a time and evaluated with PyTorch (through gen.py's ENV) as
they are generated, so most are valid; some deliberately are not, and a
program whose last statement PyTorch rejects must be rejected by tdslc
with exit status 1 and a diagnostic.

    venv/bin/python tests/pytorch/fuzz_programs.py --tdslc build/tdslc \
        --count 500 --seed 1 --keep /tmp/fuzz_fail

Prints a summary by class (value mismatch, dtype/shape mismatch, tdsl
rejects what PyTorch accepts, tdsl accepts what PyTorch rejects,
crash/ICE/timeout) and keeps every failing program (kernel, inputs, a
shell line to rerun it, the expected outputs) under --keep.

With --compiled, every program that `tdslc run` evaluates correctly is
also compiled by the CPU backend (`tdslc k.tdsl --kernel=k -O2`, a
fraction --o0-fraction at -O0, 15% each at -O1 and -O3), linked with a generated shim calling k and
the runtime sources into k.so, and run by tests/tools/run_kernel (built as
build/tests/run_kernel) on the same inputs, as declared and in one more
storage layout; its outputs must match PyTorch's under the same
tolerances, and programs PyTorch rejects must not compile. Classes c-*:
c-tdslc (the backend fails), c-unsupported, c-cc (the header or link
fails), c-kernel-error (an error code), c-crash, c-memory (an input
modified or a write outside an output), c-shape, c-value.

    venv/bin/python tests/pytorch/fuzz_programs.py --tdslc build/tdslc \
        --compiled --count 500 --seed 1

Avoided on purpose (spec differences, not bugs): float->int casts of
out-of-range or NaN values, integer division by zero, negative integer
powers, size symbols equal to 0 or 1 (symbols are 7, 11 or 13, never a
product of literal dims).  A quarter of float inputs are multiples of 0.5
and quantize statements divide by 3, 0.3, 60 ... before rounding, so that
a rewrite changing a rounded result shows.
"""
import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402  (ENV, DT, make_input, to_numpy)

warnings.filterwarnings("ignore")
torch.set_num_threads(1)

DTYPES = list(gen.DT)
# --big: primes as symbol values (never a product of literal dims) and
# larger literal dims, so compiled code takes its parallel, vectorized and
# tiled paths; MAX_NUMEL bounds every value.
SYM_VALUES = [7, 11, 13]
LIT_DIMS = [1, 2, 3, 4, 5, 2, 3]
MAX_NUMEL = 20000
# --compiled: results sometimes declared channels_last or strided.
RESULT_LAYOUTS = False
FLOATS = ["f16", "bf16", "f32", "f64"]
INTS = ["i8", "u8", "i16", "i32", "i64"]
NAME_OF = {v: k for k, v in gen.DT.items()}
REDUCE_OPS = ("sum", "mean", "amax", "amin", "prod", "argmax", "argmin",
              "var", "std", "logsumexp", "norm", "cumsum", "cumprod", "logcumsumexp",
              "softmax", "log_softmax", "layer_norm", "matmul", "@",
              "conv2d", "pool2d", "linear", "addmm", "bmm", "einsum",
              "conv1d", "batch_norm", "group_norm", "rms_norm",
              "scaled_dot_product_attention", "interpolate", "conv_transpose2d")
UNARY_F = ["abs", "neg", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt",
           "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "silu", "erf",
           "floor", "ceil", "round", "sign", "reciprocal", "logical_not",
           "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
           "atanh", "exp2", "log2", "log10", "trunc", "frac", "isnan", "isinf",
           "isfinite", "nan_to_num", "softplus", "leaky_relu", "elu", "hardtanh",
           "hardswish", "hardsigmoid", "mish"]
# torch.nn.functional only: no tensor method
FUNC_ONLY = ("gelu", "silu", "softplus", "leaky_relu", "elu", "hardtanh", "hardswish",
             "hardsigmoid", "mish")
BIN_OPS = ["+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", "<=",
           ">", ">=", "&", "|", "^"]


def to_cl(t):
    """Channels-last strides exactly as spec section 3 declares them,
    (H*W*C, 1, W*C, C) even for size-1 dims: .contiguous(channels_last)
    would keep row-major strides when C == 1 or H == W == 1."""
    return t.to(memory_format=torch.channels_last)


class _SafeDims(list):
    """Sizes indexed by possibly out-of-range dims (deliberate errors)."""

    def __getitem__(self, d):
        if isinstance(d, int) and not -len(self) <= d < len(self):
            return 6
        return list.__getitem__(self, d)


class Var:
    def __init__(self, name, val):
        self.name, self.val = name, val


class Gen:
    """Builds one program; every statement is evaluated with torch."""

    def __init__(self, rng):
        self.r = rng
        self.env = dict(gen.ENV)
        self.sizes = {}
        self.params = []   # (name, dtype, dims tokens or None, layout)
        self.vars = []     # Var: tensors usable as operands
        self.stmts = []
        self.error = None  # the torch exception of a rejected last stmt
        self.nrng = np.random.default_rng(rng.randrange(1 << 30))

    # ---- helpers ---------------------------------------------------------
    def tok(self, v):
        """A dim value as source: a symbol when it is one's value."""
        for k, s in self.sizes.items():
            if s == v:
                return k
        return str(v)

    def dims_src(self, shape):
        return ", ".join(self.tok(v) for v in shape)

    def pick(self, pred=lambda v: True):
        c = [v for v in self.vars if isinstance(v.val, torch.Tensor) and pred(v.val)]
        return self.r.choice(c) if c else None

    def dim(self, n, allow_bad=True):
        """A dim index for rank n, sometimes negative, rarely out of range."""
        if n == 0 or (allow_bad and self.r.random() < 0.03):
            return self.r.choice([n, -n - 1, 0])
        d = self.r.randrange(n)
        return d - n if self.r.random() < 0.4 else d

    # ---- parameters ------------------------------------------------------
    def make_params(self):
        nsym = self.r.choice([0, 0, 1, 2])
        names = self.r.sample(["N", "C", "H", "W"], nsym)
        vals = self.r.sample(SYM_VALUES, nsym)
        symset = dict(zip(names, vals))
        for i in range(self.r.randint(1, 3)):
            dt = self.r.choice(DTYPES + ["f32", "f32", "f64", "i64"])
            kind = self.r.random()
            pname = f"p{i}"
            if kind < 0.12:  # scalar
                if dt in FLOATS:
                    v = repr(round(self.r.uniform(-2, 2), 3))
                elif dt == "bool":
                    v = self.r.choice(["true", "false"])
                else:
                    v = str(self.r.randint(1, 4))
                pyv = {"true": True, "false": False}.get(v)
                if pyv is None:
                    pyv = float(v) if dt in FLOATS else int(v)
                self.params.append((pname, dt, None, None, v))
                self.env[pname] = torch.tensor(pyv, dtype=gen.DT[dt])
                self.vars.append(Var(pname, self.env[pname]))
                continue
            rank = self.r.choice([0, 1, 2, 2, 3, 3, 4, 4])
            for _ in range(20):
                dims = [self.r.choice(list(symset)) if symset and self.r.random() < 0.4
                        else str(self.r.choice(LIT_DIMS)) for _ in range(rank)]
                if np.prod([symset.get(d) or int(d) for d in dims]) <= MAX_NUMEL:
                    break
            else:
                dims = ["1"] * rank
            for d in dims:
                if d in symset:
                    self.sizes[d] = symset[d]
            layout = None
            if rank == 4 and self.r.random() < 0.4:
                layout = "channels_last"
            elif rank >= 1 and self.r.random() < 0.12:
                layout = "strided"
            shape = [int(d) if d.isdigit() else symset[d] for d in dims]
            t = gen.make_input(self.nrng, dt, shape or [1], None).reshape(shape)
            if t.dtype.is_floating_point:  # a quarter on multiples of 0.5: ties, quotients beside integers
                halves = torch.from_numpy(np.asarray(self.nrng.integers(-6, 7, size=shape) / 2))
                pick = torch.from_numpy(np.asarray(self.nrng.random(shape) < 0.25))
                t = torch.where(pick, halves.to(t.dtype), t)
            if layout == "channels_last":
                t = to_cl(t)
            self.params.append((pname, dt, dims, layout, t))
            self.env[pname] = t
            self.vars.append(Var(pname, t))
        self.env.update(self.sizes)

    # ---- statement generators -------------------------------------------
    def g_view(self):
        v = self.pick(lambda t: t.dim() > 0)
        if not v:
            return None
        s = list(v.val.shape)
        op = self.r.choice(["view", "reshape"])
        kind = self.r.random()
        if kind < 0.3 and len(s) >= 2:  # merge adjacent dims
            i = self.r.randrange(len(s) - 1)
            merged = " * ".join(self.tok(x) for x in s[i:i + 2])
            new = [self.tok(x) for x in s[:i]] + [merged] + [self.tok(x) for x in s[i + 2:]]
        elif kind < 0.6:  # split a dim
            i = self.r.randrange(len(s))
            f = [a for a in (2, 3, 5) if s[i] % a == 0]
            a = self.r.choice(f) if f else 1
            new = [self.tok(x) for x in s[:i]] + [str(a), self.tok(s[i] // a)] + [self.tok(x) for x in s[i + 1:]]
        elif kind < 0.75:
            new = ["-1"]
        elif kind < 0.85:  # deliberately wrong numel
            new = [str(v.val.numel() + 1)]
        else:
            new = [self.tok(x) for x in s]
            self.r.shuffle(new)
        if len(new) > 1 and self.r.random() < 0.3:
            new[self.r.randrange(len(new))] = "-1"
        args = ", ".join(new)
        if self.r.random() < 0.2:
            args = "[" + args + "]"
        return f"{v.name}.{op}({args})"

    def g_permute(self):
        v = self.pick(lambda t: t.dim() > 0)
        if not v:
            return None
        n = v.val.dim()
        k = self.r.random()
        if k < 0.35:
            p = list(range(n))
            self.r.shuffle(p)
            if self.r.random() < 0.05 and n:
                p[0] = p[-1]
            p = [x - n if self.r.random() < 0.3 else x for x in p]
            return f"{v.name}.permute({', '.join(map(str, p))})"
        if k < 0.65:
            return f"{v.name}.transpose({self.dim(n)}, {self.dim(n)})"
        return v.name + self.r.choice([".t()", ".T", ".mT"])

    def g_index(self):
        v = self.pick(lambda t: t.dim() > 0)
        if not v:
            return None
        s = list(v.val.shape)
        items, d = [], 0
        ell = False
        while d < len(s) and self.r.random() < 0.8:
            k = self.r.random()
            if k < 0.2:
                i = self.r.randrange(-s[d], s[d]) if s[d] else 0
                if self.r.random() < 0.03:
                    i = s[d]
                items.append(str(i))
                d += 1
            elif k < 0.65:
                def b():
                    x = self.r.randint(-s[d] - 2, s[d] + 2)
                    if self.r.random() < 0.15 and self.tok(s[d]) != str(s[d]):
                        return self.tok(s[d]) + self.r.choice(["", " - 1", " - 2"])
                    return str(x)
                a = b() if self.r.random() < 0.6 else ""
                e = b() if self.r.random() < 0.6 else ""
                st = str(self.r.choice([1, 2, 3])) if self.r.random() < 0.5 else ""
                if self.r.random() < 0.02:
                    st = "-1"
                items.append(f"{a}:{e}" + (f":{st}" if st else ""))
                d += 1
            elif k < 0.8:
                items.append("None")
            elif k < 0.88 and not ell:
                items.append("...")
                ell = True
                d = len(s) - self.r.randint(0, len(s) - d)
            else:
                items.append(":")
                d += 1
        if not items:
            items = [":"]
        return f"{v.name}[{', '.join(items)}]"

    def g_gather(self):
        """Indexing by tensors with indices computed in range in the kernel
        (index_select, x[..., idx] with negatives, gather, flip); now and
        then a dim out of range or repeated, which both must reject."""
        v = self.pick(lambda t: t.dim() > 0)
        if not v:
            return None
        s, n = list(v.val.shape), v.val.dim()
        d = self.r.randrange(n)
        dd = d - n if self.r.random() < 0.3 else d
        size = self.tok(s[d])
        idx = f"(arange({self.r.randint(1, 5)}) * {self.r.randint(1, 3)} + {self.r.randint(0, 4)}) % ({size})"
        k = self.r.choice(["index_select", "adv", "gather", "flip"])
        if k == "index_select":
            if self.r.random() < 0.03:
                dd = n
            return f"{v.name}.index_select({dd}, {idx})"
        if k == "adv":
            return f"{v.name}[{':, ' * d}{idx} - ({size})]"
        if k == "gather":
            shape = [self.tok(x) for x in s]
            shape[d] = "1"
            return (f"{v.name}.gather({dd}, ({idx})[:1].reshape({', '.join(['1'] * n)})"
                    f".expand({', '.join(shape)}))")
        dims = [dd] if self.r.random() < 0.5 else [dd, self.dim(n)]
        return f"{v.name}.flip({', '.join(map(str, dims))})"

    def g_misc_view(self):
        v = self.pick()
        if not v:
            return None
        s, n = list(v.val.shape), v.val.dim()
        s = _SafeDims(s)
        k = self.r.choice(["select", "narrow", "expand", "expand_as",
                           "unsqueeze", "squeeze", "flatten", "unflatten",
                           "diagonal", "unfold"])
        if k == "select" and n:
            d = self.dim(n)
            return f"{v.name}.select({d}, {self.r.randint(-3, 3)})"
        if k == "narrow" and n:
            d = self.r.randrange(n)
            st = self.r.randint(-s[d], max(s[d] - 1, 0))
            ln = self.r.randint(0, max(s[d] - (st % max(s[d], 1)), 0))
            if self.r.random() < 0.05:
                ln += 1
            return f"{v.name}.narrow({d}, {st}, {ln})"
        if k == "expand":
            new = [self.tok(x) if x != 1 else str(self.r.choice([1, 2, 3])) for x in s]
            new = ["-1" if self.r.random() < 0.2 and x != "1" else x for x in new]
            lead = [str(self.r.choice([1, 2, 3])) for _ in range(self.r.choice([0, 0, 1, 2]))]
            if self.r.random() < 0.05 and new:
                new[0] = "4"
            return f"{v.name}.expand({', '.join(lead + new) or ''})"
        if k == "expand_as":
            o = self.pick()
            return f"{v.name}.expand_as({o.name})"
        if k == "unsqueeze":
            return f"{v.name}.unsqueeze({self.r.randint(-n - 1, n)})"
        if k == "squeeze":
            if n and self.r.random() < 0.6:
                return f"{v.name}.squeeze({self.dim(n)})"
            return f"{v.name}.squeeze()"
        if k == "flatten":
            if n and self.r.random() < 0.7:
                a, b = sorted([self.dim(n), self.dim(n)], key=lambda x: x % max(n, 1))
                return f"{v.name}.flatten({a}, {b})"
            return f"{v.name}.flatten()"
        if k == "unflatten" and n:
            d = self.dim(n)
            sz = s[d] if -n <= d < n else 6
            f = [a for a in (2, 3, 5) if sz % a == 0]
            a = self.r.choice(f) if f else 1
            parts = [str(a), self.r.choice([self.tok(sz // a), "-1"])]
            return f"{v.name}.unflatten({d}, [{', '.join(parts)}])"
        if k == "diagonal" and n >= 2:
            return f"{v.name}.diagonal({self.r.randint(-2, 2)}, {self.dim(n)}, {self.dim(n)})"
        if k == "unfold" and n:
            d = self.dim(n)
            size = self.r.randint(1, max(s[d], 1) + (1 if self.r.random() < 0.05 else 0))
            return f"{v.name}.unfold({d}, {size}, {self.r.randint(1, 3)})"
        return None

    def g_copy(self):
        v = self.pick()
        if not v:
            return None
        k = self.r.random()
        if k < 0.25:
            return f"{v.name}.contiguous()"
        if k < 0.4:
            return f"{v.name}.contiguous(channels_last)"
        if k < 0.55:
            return f"{v.name}.clone()"
        if k < 0.62:
            return f"{v.name}.to(channels_last)"
        dt = self.r.choice(DTYPES)
        t = v.val
        if t.dtype.is_floating_point and not gen.DT[dt].is_floating_point and dt != "bool":
            if torch.isnan(t).any() or torch.isinf(t).any():
                return None
            lim = {"u8": (0, 200), "i8": (-100, 100)}.get(dt, (-1000, 1000))
            return f"{v.name}.clamp({lim[0]}, {lim[1]}).to({dt})"
        return f"{v.name}.to({dt})"

    def operand(self, like=None):
        """A second operand: a tensor, a literal, a scalar or a symbol."""
        k = self.r.random()
        if k < 0.6:
            o = self.pick()
            if o is not None:
                return o.name, o.val
        if k < 0.75:
            x = self.r.choice(["2", "3", "0.5", "-1.5", "true", "1"])
            return x, eval(x, self.env)
        if k < 0.85 and self.sizes:
            s = self.r.choice(list(self.sizes))
            return s, self.sizes[s]
        o = self.pick()
        return (o.name, o.val) if o else ("2", 2)

    def g_binary(self):
        a = self.pick()
        if not a:
            return None
        bs, bv = self.operand()
        op = self.r.choice(BIN_OPS)
        at = a.val.dtype
        bt = bv.dtype if isinstance(bv, torch.Tensor) else None
        isint = lambda t: t is not None and not t.is_floating_point
        if op in ("//", "%"):
            if isint(at) and (bt is None and isinstance(bv, (int, bool)) or isint(bt)):
                bs = f"({bs} * {bs} + 1)" if not isinstance(bv, (int, bool)) else "3"
        if op == "**":
            if not (bt is not None and bt.is_floating_point) and not at.is_floating_point:
                bs = self.r.choice(["2", "0", "1"])
            elif at.is_floating_point:
                a2 = f"{a.name}.abs()"
                if self.r.random() < 0.5:
                    return f"{a2} ** {bs}"
        if self.r.random() < 0.5:
            return f"{a.name} {op} {bs}"
        return f"{bs} {op} {a.name}" if op not in ("//", "%", "**") else f"{a.name} {op} {bs}"

    def g_quantize(self):
        """Quantization and bucketing: a quotient by a divisor that is not a
        power of two, rounded, floored or compared (IEEE division is
        correctly rounded; a multiply by the reciprocal is not)."""
        a = self.pick(lambda t: t.dtype in (torch.float32, torch.float64) or
                      (not t.dtype.is_floating_point and t.dtype != torch.bool))
        if not a:
            return None
        d = self.r.choice(["60", "3", "0.3", "7", "255", "1.5", "0.1", "10"])
        k = self.r.randrange(5)
        if k == 4:
            return f"{a.name} / {d} * {d} == {a.name}"
        if k == 3:
            return f"({a.name} * 30 / {d}).round()"
        return f"({a.name} / {d}).{['round', 'floor', 'ceil'][k]}()"

    def g_func(self):
        a = self.pick()
        if not a:
            return None
        k = self.r.random()
        if k < 0.45:
            f = self.r.choice(UNARY_F)
            if f == "gelu" and self.r.random() < 0.3:
                return f'gelu({a.name}, approximate="tanh")'
            if f in FUNC_ONLY:
                return f"{f}({a.name})"
            return f"{a.name}.{f}()" if self.r.random() < 0.4 else f"{f}({a.name})"
        bs, _ = self.operand()
        if k < 0.5:  # fmod/remainder left out: integer division by zero
            f = self.r.choice(["atan2", "hypot", "copysign", "logaddexp"])
            return f"{f}({a.name}, {bs})"
        if k < 0.6:
            return f"{self.r.choice(['maximum', 'minimum'])}({a.name}, {bs})"
        if k < 0.75:
            c = self.pick(lambda t: t.dtype == torch.bool) or a
            cs = c.name if c.val.dtype == torch.bool else f"{c.name} > 0"
            return f"where({cs}, {a.name}, {bs})"
        if k < 0.88:
            lo = self.r.choice(["None", "-1", "0.5", "0", "-200", "300", bs])
            hi = self.r.choice(["None", "2", "3.5", "1000", "-300", bs])
            return f"clamp({a.name}, {lo}, {hi})"
        if k < 0.94:
            return f"~{a.name}"
        return f"-{a.name}"

    def g_reduce(self):
        a = self.pick()
        if not a:
            return None
        n = a.val.dim()
        f = self.r.choice(["sum", "mean", "amax", "amin", "prod", "argmax", "argmin"])
        args = []
        if n and self.r.random() < 0.7:
            if f in ("argmax", "argmin", "prod") or self.r.random() < 0.5:
                args.append(f"dim={self.dim(n)}" if self.r.random() < 0.5 else str(self.dim(n)))
            else:
                ds = [self.dim(n) for _ in range(self.r.randint(1, min(n, 3)))]
                args.append(f"dim=[{', '.join(map(str, ds))}]")
            if self.r.random() < 0.4:
                args.append("keepdim=true")
        if f == "prod" and a.val.numel() > 40:
            return None  # huge products overflow: inf vs nan by order
        if f in ("amax", "amin") and not args and self.r.random() < 0.7:
            return None  # torch.amax needs dim=() for all; avoid ambiguity
        if self.r.random() < 0.5:
            return f"{a.name}.{f}({', '.join(args)})"
        return f"{f}({', '.join([a.name] + args)})"

    def g_stats(self):
        """var/std/var_mean/logsumexp/norm/any/all/count_nonzero (torch 1.13:
        any/all take one dim, correction= needs dim=)."""
        a = self.pick()
        if not a:
            return None
        n = a.val.dim()
        f = self.r.choice(["var", "std", "var_mean", "logsumexp", "norm", "any", "all",
                           "count_nonzero"])
        args = []
        if n and (f == "logsumexp" or self.r.random() < 0.7):
            if f in ("any", "all") or self.r.random() < 0.5:
                args.append(str(self.dim(n)))
            else:
                ds = [self.dim(n) for _ in range(self.r.randint(1, min(n, 3)))]
                args.append(f"dim=[{', '.join(map(str, ds))}]")
            if f == "norm":
                args.insert(0, self.r.choice(["2", "1", "1e999", "0", "3", "\"fro\""]))
            if f in ("var", "std", "var_mean") and self.r.random() < 0.5:
                args.append(f"correction={self.r.randint(0, 2)}")
            if f != "count_nonzero" and self.r.random() < 0.4:
                args.append("keepdim=true")
        elif f == "logsumexp":
            return None
        call = f"{f}({', '.join([a.name] + args)})"
        if f == "var_mean":
            return call + f"[{self.r.randint(0, 1)}]"
        if f not in ("var_mean", "count_nonzero") and self.r.random() < 0.5:
            return f"{a.name}.{f}({', '.join(args)})"
        return call

    def g_scan(self):
        """cumsum/cumprod/logcumsumexp along one dim."""
        a = self.pick(lambda t: t.dim() > 0)
        if not a:
            return None
        f = self.r.choice(["cumsum", "cumprod", "logcumsumexp"])
        d = self.dim(a.val.dim())
        if f == "cumprod" and a.val.numel() > 40:
            return None  # huge products overflow: inf vs nan by order
        if self.r.random() < 0.5:
            return f"{a.name}.{f}({d})"
        return f"{f}({a.name}, {d})"

    def g_norm(self):
        a = self.pick(lambda t: t.dim() > 0)
        if not a:
            return None
        n = a.val.dim()
        k = self.r.random()
        if k < 0.6:
            f = self.r.choice(["softmax", "log_softmax"])
            return f"{f}({a.name}, {self.dim(n)})" if self.r.random() < 0.5 else f"{f}({a.name}, dim={self.dim(n)})"
        s = list(a.val.shape)
        m = self.r.randint(1, n)
        ns = [self.tok(x) for x in s[n - m:]]
        if self.r.random() < 0.05:
            ns[0] = "9"
        w = self.pick(lambda t: list(t.shape) == s[n - m:])
        extra = ""
        if w is not None and self.r.random() < 0.6:
            extra = f", {w.name}, {w.name}"
        return f"layer_norm({a.name}, [{', '.join(ns)}]{extra})"

    def g_rowstat(self):
        """A statistic over trailing dims broadcast back over them (pass
        row-group's row groups): x - x.mean/amax/amin(dims, keepdim), or an
        RMS normalization x * rsqrt((x * x).mean(dims, keepdim) + eps)."""
        a = self.pick(lambda t: t.dim() > 1 and t.dtype.is_floating_point)
        if not a:
            return None
        n = a.val.dim()
        m = self.r.randint(1, min(2, n - 1))
        ds = ", ".join(str(d - n if self.r.random() < 0.35 else d) for d in range(n - m, n))
        if self.r.random() < 0.3:
            return (f"{a.name} * rsqrt(({a.name} * {a.name}).mean(dim=[{ds}], keepdim=true)"
                    f" + 1e-5)")
        f = self.r.choice(["mean", "amax", "amin"])
        return f"{a.name} - {a.name}.{f}(dim=[{ds}], keepdim=true)"

    def g_matmul(self):
        a = self.pick(lambda t: t.dim() > 0)
        if not a:
            return None
        s = list(a.val.shape)
        b = self.pick(lambda t: t.dim() > 0 and (t.shape[-2 if t.dim() > 1 else 0] == s[-1]))
        if b is None or self.r.random() < 0.1:
            b = self.pick(lambda t: t.dim() > 0)
        return f"{a.name} @ {b.name}" if self.r.random() < 0.6 else f"matmul({a.name}, {b.name})"

    def g_conv(self):
        x = self.pick(lambda t: t.dim() == 4)
        if not x:
            return None
        s = list(x.val.shape)
        g = self.r.choice([1, 1, 2, 3])
        if s[1] % g:
            g = 1
        kh, kw = self.r.randint(1, 3), self.r.randint(1, 3)
        o = g * self.r.randint(1, 2)
        dt = NAME_OF[x.val.dtype]
        if self.r.random() < 0.15:
            dt = self.r.choice(DTYPES)
        wname = self.new_weight(dt, [o, s[1] // g, kh, kw])
        args = [x.name, wname]
        if self.r.random() < 0.4:
            args.append(self.new_weight(dt, [o]))
        opts = {"stride": [1, 2, "[1, 2]"], "padding": [0, 1, "[1, 0]"],
                "dilation": [1, 2]}
        for key, vals in opts.items():
            if self.r.random() < 0.4:
                args.append(f"{key}={self.r.choice(vals)}")
        if g > 1 or self.r.random() < 0.05:
            args.append(f"groups={g if self.r.random() > 0.05 else 2}")
        return f"conv2d({', '.join(args)})"

    def g_convt(self):
        """conv_transpose2d: by output phases up to 16 of them, a stride of
        more (5 x 4) zero-inserted; output_padding not below both the
        stride and the dilation is rejected by both."""
        x = self.pick(lambda t: t.dim() in (3, 4))
        if not x:
            return None
        s = list(x.val.shape)
        c = s[-3]
        g = self.r.choice([1, 1, 2, 3])
        if c % g:
            g = 1
        kh, kw = self.r.randint(1, 4), self.r.randint(1, 4)
        dt = NAME_OF[x.val.dtype]
        if dt not in ("f16", "bf16", "f32", "f64", "i64"):
            return None  # PyTorch's CPU kernel has no other integer types (tdsl computes them)
        if self.r.random() < 0.1:
            dt = self.r.choice(DTYPES)
        og = self.r.randint(1, 2)
        args = [x.name, self.new_weight(dt, [c, og, kh, kw])]
        if self.r.random() < 0.4:
            nb = og * g if self.r.random() < 0.9 else og * g + 1
            args.append(f"bias={self.new_weight(dt, [nb])}")
        opts = {"stride": [1, 2, 3, "[2, 1]", "[3, 2]", "[1, 4]", "[5, 4]"],
                "padding": [0, 1, 2, "[3, 1]"], "output_padding": [0, 1, "[1, 0]", 2],
                "dilation": [1, 2, "[1, 3]"]}
        for key, vals in opts.items():
            if self.r.random() < 0.5:
                args.append(f"{key}={self.r.choice(vals)}")
        if g > 1:
            args.append(f"groups={g}")
        return f"conv_transpose2d({', '.join(args)})"

    def g_layer(self):
        """The layers of frontend/sema_layers.c, mostly with operands that
        fit (a weight made for the picked value), sometimes a dtype that
        does not."""
        a = self.pick(lambda t: t.dim() > 0)
        if not a:
            return None
        s, n = list(a.val.shape), a.val.dim()
        dt = NAME_OF[a.val.dtype]
        if self.r.random() < 0.1:
            dt = self.r.choice(DTYPES)
        k = self.r.randrange(8)
        if k == 0:
            o = self.r.randint(1, 4)
            args = [a.name, self.new_weight(dt, [o, s[-1]])]
            if self.r.random() < 0.5:
                args.append(self.new_weight(dt, [o]))
            return f"linear({', '.join(args)})"
        if k == 1:
            if n >= 2 and self.r.random() < 0.5:
                w = self.new_weight(dt, [self.r.randint(1, 4), s[-1]])
                return f'einsum("...ij,kj->...ik", {a.name}, {w})'
            lab = "abcdefgh"[:n]
            out = self.r.sample(lab, self.r.randint(0, n))
            return f'einsum("{lab}->{"".join(out)}", {a.name})'
        if k == 2 and n == 3:
            b = self.new_weight(dt, [s[0], s[2], self.r.randint(1, 4)])
            return f"bmm({a.name}, {b})"
        if k == 3 and n == 3:
            g = self.r.choice([1, 1, 2])
            if s[1] % g:
                g = 1
            o = g * self.r.randint(1, 2)
            w = self.new_weight(dt, [o, s[1] // g, self.r.randint(1, 3)])
            pad = self.r.choice(["0", "1", '"same"'])
            return f"conv1d({a.name}, {w}, padding={pad}, groups={g})"
        if n < 2:
            return None
        if k == 4:
            m, v = self.new_weight(dt, [s[1]]), self.new_weight(dt, [s[1]])
            extra = f", {self.new_weight(dt, [s[1]])}" if self.r.random() < 0.5 else ""
            return f"batch_norm({a.name}, {m}, {v}.abs() + 0.5{extra})"
        if k == 5:
            g = self.r.choice([d for d in (1, 2, 3, s[1]) if d and s[1] % d == 0] or [1])
            extra = f", {self.new_weight(dt, [s[1]])}" if self.r.random() < 0.5 else ""
            return f"group_norm({a.name}, {g}{extra})"
        if k == 6:
            m = self.r.randint(1, min(n, 2))
            ns = ", ".join(self.tok(x) for x in s[n - m:])
            extra = f", {self.new_weight(dt, s[n - m:])}" if self.r.random() < 0.5 else ""
            return f"rms_norm({a.name}, [{ns}]{extra})"
        if k == 7:
            sl = self.r.randint(1, 4)
            kk = self.new_weight(dt, s[:-2] + [sl, s[-1]])
            vv = self.new_weight(dt, s[:-2] + [sl, self.r.randint(1, 4)])
            causal = ", is_causal=true" if self.r.random() < 0.3 else ""
            return f"scaled_dot_product_attention({a.name}, {kk}, {vv}{causal})"
        return None

    def new_weight(self, dt, shape):
        name = f"p{len(self.params)}"
        t = gen.make_input(self.nrng, dt, shape, None)
        layout = None
        if len(shape) == 4 and self.r.random() < 0.3:
            layout = "channels_last"
            t = to_cl(t)
        self.params.append((name, dt, [self.tok(x) for x in shape], layout, t))
        self.env[name] = t
        return name

    def g_pool(self):
        x = self.pick(lambda t: t.dim() in (3, 4))
        if not x:
            return None
        f = self.r.choice(["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"])
        if f == "adaptive_avg_pool2d":
            return f"{f}({x.name}, 1)"
        k = self.r.choice([1, 2, 3, "[2, 1]"])
        args = [x.name, str(k)]
        if self.r.random() < 0.4:
            args.append(f"stride={self.r.choice([1, 2, '[1, 2]'])}")
        if self.r.random() < 0.3:
            args.append(f"padding={self.r.choice([0, 1])}")
        return f"{f}({', '.join(args)})"

    def g_resize(self):
        """pad and interpolate (decompositions into computed indexing)."""
        if self.r.random() < 0.6:
            x = self.pick(lambda t: t.dim() > 0)
            if not x:
                return None
            mode = self.r.choice(["constant", "constant", "reflect", "replicate", "circular"])
            k = self.r.randint(1, min(3, x.val.dim()))
            if mode != "constant":
                k = max(1, min(k, x.val.dim() - 1))
            pads = []
            for i in range(k):
                size = x.val.shape[-1 - i]
                lo = -1 if mode == "constant" else 0
                hi = max(0, size - 1) if mode == "reflect" else 3
                pads += [self.r.randint(lo, hi), self.r.randint(lo, hi)]
            args = f"{x.name}, [{', '.join(map(str, pads))}]"
            if mode != "constant" or self.r.random() < 0.3:
                args += f', mode="{mode}"'
            if mode == "constant" and self.r.random() < 0.4:
                args += f", value={self.r.choice(['1.5', '-2', '0'])}"
            return f"pad({args})"
        x = self.pick(lambda t: 3 <= t.dim() <= 5)
        if not x:
            return None
        mode = self.r.choice({3: ["nearest", "nearest-exact", "linear"],
                              4: ["nearest", "nearest-exact", "bilinear", "bicubic"],
                              5: ["nearest", "nearest-exact"]}[x.val.dim()])
        if self.r.random() < 0.5:
            args = f"{x.name}, scale_factor={self.r.choice(['2', '1.5', '0.5', '3.0'])}"
        else:
            sz = [str(self.r.randint(1, 6)) for _ in range(x.val.dim() - 2)]
            args = f"{x.name}, size=[{', '.join(sz)}]"
        args += f', mode="{mode}"'
        if mode in ("linear", "bilinear", "bicubic") and self.r.random() < 0.5:
            args += f", align_corners={self.r.choice(['true', 'false'])}"
        return f"interpolate({args})"

    def g_factory(self):
        k = self.r.random()
        sym = list(self.sizes)
        # at least one size: gen.py's zeros/ones helpers mishandle []
        d = [self.r.choice([str(self.r.randint(1, 4))] + sym) for _ in range(self.r.randint(1, 3))]
        dt = self.r.choice(DTYPES)
        if k < 0.25:
            return f"{self.r.choice(['zeros', 'ones'])}([{', '.join(d)}], {dt})"
        if k < 0.45:
            val = self.r.choice(["2", "1.5", "-3", "true"])
            if val in ("1.5", "-3") and dt in ("bool", "u8"):
                dt = "f32"
            return f"full([{', '.join(d)}], {val}, {dt})"
        if k < 0.7:
            a = self.r.randint(-3, 3)
            b = a + self.r.randint(1, 8)
            st = self.r.choice([1, 2, 3])
            if self.r.random() < 0.5:
                return f"arange({b})"
            return f"arange({a}, {b}, {st})"
        n = self.r.randint(1, 3)
        m = self.r.randint(1, 3)
        fl = self.r.random() < 0.5
        rows = ["[" + ", ".join(str(self.r.randint(-5, 5)) + (".5" if fl else "") for _ in range(m)) + "]" for _ in range(n)]
        return f"tensor([{', '.join(rows)}])"

    def g_join(self):
        """cat/stack of values that fit, a piece of split/chunk/unbind
        (split by an int needs a literal size: the number of pieces of a
        symbolic one is not known at compile time), roll, repeat/tile, tril/triu, masked_fill."""
        a = self.pick(lambda t: t.dim() > 0)
        if not a:
            return None
        t, n = a.val, a.val.dim()
        d = self.dim(n)
        k = self.r.random()
        wd = d if -n <= d < n else 0
        if k < 0.3:
            fits = [v for v in self.vars if isinstance(v.val, torch.Tensor) and v.val.dim() == n and
                    all(i == wd % n or v.val.shape[i] == t.shape[i] for i in range(n))]
            others = self.r.sample(fits, min(len(fits), self.r.randint(1, 2)))
            names = ", ".join([a.name] + [o.name for o in others])
            if self.r.random() < 0.3:
                same = [o.name for o in others if o.val.shape == t.shape]
                return f"stack([{', '.join([a.name] + same)}], {self.dim(n + 1)})"
            fn = self.r.choice(["cat", "cat", "concat"])
            return f"{fn}([{names}], {d})" if self.r.random() < 0.6 else f"{fn}(({names},), dim={d})"
        size = t.shape[wd]
        literal = size not in self.sizes.values()
        if k < 0.5 and size > 0:
            c = self.r.randint(1, 4)
            if self.r.random() < 0.5 or not literal:  # symbols (7, 11, 13) chunk into c
                pieces = -(-size // -(-size // c))
                return f"{a.name}.chunk({c}, {d})[{self.r.randrange(pieces)}]"
            pieces = -(-size // c)
            return f"split({a.name}, {c}, {d})[{self.r.randrange(pieces)}]"
        if k < 0.55 and literal and 0 < size <= 8:
            return f"{a.name}.unbind({d})[{self.r.randrange(size)}]"
        if k < 0.7:
            sh = self.r.choice([1, -1, 2, -3, 5])
            return f"{a.name}.roll({sh}, {d})" if self.r.random() < 0.7 else f"{a.name}.roll({sh})"
        if k < 0.8:
            reps = [self.r.choice([1, 1, 2, 3]) for _ in range(n + self.r.choice([0, 0, 1]))]
            if self.r.random() < 0.5:
                return f"{a.name}.repeat({', '.join(map(str, reps))})"
            return f"{a.name}.tile(({', '.join(map(str, reps[:self.r.randint(1, len(reps))]))},))"
        if k < 0.9:
            return f"{a.name}.{self.r.choice(['tril', 'triu'])}({self.r.choice([0, 0, 1, -1, 2])})"
        b = self.pick()
        value = self.r.choice(["0", "-1.5", "2", "true", "-inf", "nan"])
        if b is not None and b.val.dtype == torch.bool:
            return f"{a.name}.masked_fill({b.name}, {value})"
        return f"{a.name}.masked_fill({a.name} > 0, {value})"

    GENS = [("g_view", 3), ("g_permute", 2), ("g_index", 3), ("g_misc_view", 4),
            ("g_copy", 2), ("g_binary", 5), ("g_quantize", 1), ("g_func", 4), ("g_reduce", 2),
            ("g_norm", 1), ("g_matmul", 1), ("g_conv", 1), ("g_convt", 1), ("g_pool", 1),
            ("g_factory", 1), ("g_gather", 2), ("g_join", 2), ("g_stats", 1), ("g_scan", 1),
            ("g_layer", 2), ("g_rowstat", 1), ("g_resize", 1)]

    def statement(self, allow_error):
        names = [g for g, w in self.GENS for _ in range(w)]
        for attempt in range(30):
            nparams = len(self.params)
            expr = getattr(self, self.r.choice(names))()
            if expr is None:
                del self.params[nparams:]
                continue
            try:
                val = eval(expr, self.env)
            except Exception as e:  # torch rejects it
                if allow_error:
                    self.stmts.append(f"e = {expr}")
                    self.error = e
                    return
                del self.params[nparams:]
                continue
            if allow_error and attempt < 29:  # hunting for a rejected one
                del self.params[nparams:]
                continue
            if not isinstance(val, torch.Tensor) or val.numel() > MAX_NUMEL:
                del self.params[nparams:]
                continue
            if val.dtype in (torch.complex64, torch.complex128):
                del self.params[nparams:]
                continue
            name = f"v{len(self.stmts)}"
            self.stmts.append(f"{name} = {expr}")
            self.env[name] = val
            self.vars.append(Var(name, val))
            return

    def build(self):
        self.make_params()
        nstmt = self.r.randint(1, 6)
        want_err = self.r.random() < 0.35
        for i in range(nstmt):
            self.statement(allow_error=want_err and i == nstmt - 1)
            if self.error is not None:
                break
        outs = [v for v in self.vars if v.name.startswith("v")]
        if self.error is not None or not outs:
            tp = [n for n, _, dims, _, _ in self.params if dims is not None]
            if not tp:
                return False
            self.rets = [Var(tp[0], self.env[tp[0]])]
        else:
            self.rets = [outs[-1]] + self.r.sample(outs[:-1], min(len(outs) - 1, self.r.randint(0, 2)))
        return True

    # ---- rendering -------------------------------------------------------
    def param_src(self, concrete=False):
        out = []
        for name, dt, dims, layout, _ in self.params:
            if dims is not None and concrete:
                dims = [str(self.sizes.get(d, d)) for d in dims]
            if dims is None:
                out.append(f"{name}: {dt}")
            else:
                out.append(f"{name}: {dt}[{', '.join(dims)}]" + (f" {layout}" if layout else ""))
        return ", ".join(out)

    def render(self, decl, concrete=False):
        """The kernel; concrete: every size symbol replaced by its value."""
        body = "\n".join("  " + s for s in self.stmts)
        if concrete:
            for k, v in self.sizes.items():
                body = re.sub(r"\b%s\b" % k, str(v), body)
        ret = ", ".join(v.name for v in self.rets)
        res = decl[0] if len(decl) == 1 else "(" + ", ".join(decl) + ")"
        return f"kernel k({self.param_src(concrete)}) -> {res} {{\n{body}\n  return {ret}\n}}\n"


SHAPE_MSG = re.compile(r"return value (\d+) has shape \[(.*)\] but the result is declared")


def eval_dims(text, sizes):
    if not text.strip():
        return []
    env = dict(sizes)
    env.update(min=min, max=max)
    return list(eval("[" + text + "]", {}, env))


def load_npy(path, dtname):
    a = np.load(path)
    if dtname == "bf16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def close(got, want, tolclass, low=None):
    if got.dtype != want.dtype or list(got.shape) != list(want.shape):
        return False
    if not want.dtype.is_floating_point:
        return torch.equal(got, want)
    g, w = got.double(), want.double()
    prec = want.dtype
    if low is not None and torch.finfo(low).eps > torch.finfo(prec).eps:
        prec = low
    if prec == torch.float64:
        rt, at = 1e-10, 1e-12
    elif prec == torch.float32:
        rt, at = (1e-4, 1e-5) if tolclass == "reduce" else (1e-5, 1e-6)
    else:
        rt, at = 1e-2, 1e-2
    return bool(torch.isclose(g, w, rtol=rt, atol=at, equal_nan=True).all())


CTYPE = {"bool": "bool", "i8": "int8_t", "u8": "uint8_t", "i16": "int16_t",
         "i32": "int32_t", "i64": "int64_t", "f16": "uint16_t", "bf16": "uint16_t",
         "f32": "float", "f64": "double"}
SRC_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Compiled:
    """--compiled: the program compiled by tdslc (the CPU backend), linked
    with a generated shim and the runtime into k.so and run by
    tests/tools/run_kernel on the same inputs, as declared and in one more
    storage layout (byte offset, or `strided` arguments column-major)."""

    def __init__(self, tdslc, run_kernel, cc, o0_frac, rng):
        self.tdslc, self.run_kernel, self.cc = tdslc, run_kernel, cc
        self.o0_frac, self.r = o0_frac, rng
        self.counts = {"-O0": 0, "-O1": 0, "-O2": 0, "-O3": 0}
        self.rt = tempfile.mkdtemp(prefix="tdslrt")
        rtdir = os.path.join(SRC_DIR, "runtime")
        srcs = [os.path.join(rtdir, f) for f in sorted(os.listdir(rtdir)) if f.endswith(".c")]
        subprocess.run([cc, "-std=c17", "-O2", "-fPIC", "-D_POSIX_C_SOURCE=200809L",
                        "-I" + os.path.join(rtdir, "include"), "-I" + rtdir, "-c"] + srcs,
                       cwd=self.rt, check=True)
        self.rt_objs = [os.path.join(self.rt, f) for f in sorted(os.listdir(self.rt))]

    def shim(self, g, nres):
        """int tdsl_run_call(void *const *a): k with a[i] cast to its C
        type (scalars passed as pointers to their value)."""
        args = []
        for i, (name, dt, dims, _, _) in enumerate(g.params):
            args.append(f"(const DLTensor *)a[{i}]" if dims is not None else f"*(const {CTYPE[dt]} *)a[{i}]")
        args += [f"(DLTensor *)a[{len(g.params) + i}]" for i in range(nres)]
        return ("#include <stdbool.h>\n#include <stdint.h>\n#include \"k.h\"\n"
                "int tdsl_run_call(void *const *a);\n"
                f"int tdsl_run_call(void *const *a) {{ return k({', '.join(args)}); }}\n")

    def sh(self, cmd, wd, timeout=60):
        try:
            p = subprocess.run(cmd, cwd=wd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return 124, "timeout"
        return p.returncode, p.stderr + p.stdout

    def build(self, g, wd, opt, nres):
        """k.o and k.so; None, or the failure's (class, detail)."""
        rc, err = self.sh([self.tdslc, "k.tdsl", "--kernel=k", opt, "-o", "k.o"], wd)
        if rc != 0:
            cls = "c-unsupported" if "not supported by the CPU backend" in err else "c-tdslc"
            return cls, f"{opt}: tdslc rc={rc}: {err[-800:]}"
        with open(os.path.join(wd, "shim.c"), "w") as f:
            f.write(self.shim(g, nres))
        rc, err = self.sh([self.cc, "-std=c17", "-Wall", "-Werror", "-shared", "-fPIC",
                           "-I" + os.path.join(SRC_DIR, "runtime", "include"), "-I.",
                           "shim.c", "k.o"] + self.rt_objs + ["-o", "k.so", "-lm", "-lpthread"], wd)
        if rc != 0:
            return "c-cc", f"{opt}: {err[-800:]}"
        return None

    def command(self, g, wd, nres):
        cmd = [self.run_kernel, "--so=" + os.path.join(wd, "k.so"), "--kernel=k"]
        for name, dt, dims, _, t in g.params:
            cmd += ["--in", f"{name}={t}" if dims is None else f"{name}={os.path.join(wd, name + '.npy')}"]
        for i in range(nres):
            cmd += ["--out", os.path.join(wd, f"c_out{i}.npy")]
        return cmd

    def check_error(self, g, wd, nres):
        """A program PyTorch rejects must not compile (exit 1), or, when
        only a run-time check can tell, its kernel must return an error."""
        rc, err = self.sh([self.tdslc, "k.tdsl", "--kernel=k", "-o", "k.o"], wd)
        if rc == 1 and "error" in err:
            return "ok-error", ""
        if rc != 0:
            return "c-accepts-bad", f"tdslc rc={rc}: {err[-600:]}"
        fail = self.build(g, wd, "-O2", nres)
        if fail:
            return fail
        rc, err = self.sh(self.command(g, wd, nres) + ["--layout=plain"], wd, 30)
        if rc != 1 and "memory" not in repr(g.error):  # dead code need not allocate
            return "c-accepts-bad", f"compiled, and the kernel's run gave rc={rc}: {err[-600:]}"
        return "ok-error", ""

    def check(self, g, wd, vals, tolclass, low):
        u = self.r.random()  # every level: none may change a rounded result
        opt = "-O0" if u < self.o0_frac else "-O1" if u < self.o0_frac + 0.15 else \
            "-O3" if u < self.o0_frac + 0.3 else "-O2"
        self.counts[opt] += 1
        fail = self.build(g, wd, opt, len(vals))
        if fail:
            return fail
        base = self.command(g, wd, len(vals))
        for lay in ["plain", self.r.choice(["offset", "transposed"])]:
            rc, err = self.sh(base + ["--layout=" + lay], wd, 30)
            what = f"{opt} --layout={lay}"
            if rc == 1:
                return "c-kernel-error", f"{what}: {err[-600:]}"
            if rc == 4:
                return "c-memory", f"{what}: {err[-600:]}"
            if rc != 0:
                return "c-crash", f"{what}: rc={rc}: {err[-600:]}"
            for i, v in enumerate(vals):
                try:
                    got = load_npy(os.path.join(wd, f"c_out{i}.npy"), NAME_OF[v.dtype])
                except Exception as e:
                    return "c-crash", f"{what}: output {i} unreadable: {e}"
                want = v.contiguous()
                if list(got.shape) != list(want.shape):
                    return "c-shape", f"{what}: result {i}: got {list(got.shape)} want {list(want.shape)}"
                if not close(got, want, tolclass, low):
                    return "c-value", f"{what}: result {i} ({NAME_OF[v.dtype]}{list(v.shape)}, {tolclass}): got {got.flatten()[:8].tolist()} want {want.flatten()[:8].tolist()}"
        return "ok", ""


class Runner:
    def __init__(self, tdslc, keep, compiled=None):
        self.tdslc, self.keep = tdslc, keep
        self.compiled = compiled
        self.stats = {}
        self.nfail = 0

    def tdsl(self, wd, src, g, outs):
        path = os.path.join(wd, "k.tdsl")
        with open(path, "w") as f:
            f.write(src)
        cmd = [self.tdslc, "run", path, "--kernel=k"]
        for name, dt, dims, layout, t in g.params:
            if dims is None:
                cmd += ["--input", f"{name}={t}"]
            else:
                p = os.path.join(wd, f"{name}.npy")
                np.save(p, gen.to_numpy(t))
                cmd += ["--input", f"{name}={p}"]
        for i in range(outs):
            cmd += ["--output", f"out{i}={os.path.join(wd, f'out{i}.npy')}"]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            return cmd, 124, "timeout"
        return cmd, p.returncode, p.stderr + p.stdout

    def one(self, seed):
        g = Gen(random.Random(seed))
        if not g.build():
            return "skip", ""
        wd = tempfile.mkdtemp(prefix="tdslfz")
        try:
            cls, detail, src, cmd = self.check(g, wd)
            if cls not in ("ok", "ok-error", "skip", "unexpressible", "sym-limit"):
                self.save(seed, cls, detail, src, cmd, g, wd)
            return cls, detail
        finally:
            shutil.rmtree(wd, ignore_errors=True)

    def check(self, g, wd):
        r = self.check1(g, wd, False)
        if r[0] in ("rejects-good", "shape") and g.sizes:
            # A symbolic program may fail only for want of a proof; the
            # same program with literal sizes must then work.
            r2 = self.check1(g, wd, True)
            if r2[0] == "ok":
                return ("sym-limit",) + r[1:]
            return r2
        return r

    @staticmethod
    def tolerance(g):
        tolclass = "reduce" if any(op in s for s in g.stmts for op in REDUCE_OPS) else "elementwise"
        # A result is only as exact as the least precise float computed on
        # the way (f32 cos cast to f64 carries f32 rounding).
        fl = [v.dtype for v in g.env.values() if isinstance(v, torch.Tensor) and v.dtype.is_floating_point]
        low = None
        for dt in (torch.float16, torch.bfloat16, torch.float32):
            if dt in fl:
                low = dt
                break
        return tolclass, low

    @staticmethod
    def result_layout(g, v):
        if not RESULT_LAYOUTS or v.dim() == 0:
            return ""
        k = g.r.random()
        if v.dim() == 4 and k < 0.25:
            return " channels_last"
        return " strided" if k > 0.85 else ""

    def check1(self, g, wd, concrete):
        tolclass, low = self.tolerance(g)
        vals = [v.val for v in g.rets]
        if not hasattr(g, "res_layout"):
            g.res_layout = [self.result_layout(g, v) for v in vals]
        decl = []
        for i, v in enumerate(vals):
            dims = ", ".join(map(str, v.shape)) if concrete else g.dims_src(v.shape)
            decl.append(f"{NAME_OF[v.dtype]}[{dims}]{g.res_layout[i]}")
        src = g.render(decl, concrete)
        cmd, rc, err = self.tdsl(wd, src, g, len(vals))
        if rc not in (0, 1) or "Sanitizer" in err or "runtime error" in err:
            return "crash", f"rc={rc}: {err[-800:]}", src, cmd
        if g.error is not None:
            if rc == 1 and "error" in err:
                if self.compiled:
                    return self.compiled.check_error(g, wd, len(g.rets)) + (src, cmd)
                return "ok-error", "", src, cmd
            return "accepts-bad", f"torch: {g.error!r}", src, cmd
        # Fix up declared shapes with tdsl's own symbolic expressions.
        fixed = False
        for m in SHAPE_MSG.finditer(err):
            i, shp = int(m.group(1)), m.group(2)
            try:
                got = eval_dims(shp, g.sizes)
            except Exception:
                return "rejects-good", f"unparsable shape {shp}", src, cmd
            if got != list(vals[i].shape):
                return "shape", f"result {i}: tdsl [{shp}] = {got}, torch {list(vals[i].shape)}", src, cmd
            if "min(" in shp or "max(" in shp or "%" in shp:
                return "unexpressible", shp, src, cmd
            decl[i] = f"{NAME_OF[vals[i].dtype]}[{shp}]{g.res_layout[i]}"
            fixed = True
        if fixed:
            src = g.render(decl, concrete)
            cmd, rc, err = self.tdsl(wd, src, g, len(vals))
            if rc not in (0, 1) or "Sanitizer" in err or "runtime error" in err:
                return "crash", f"rc={rc}: {err[-800:]}", src, cmd
        if rc != 0:
            if "has dtype" in err and "declared" in err:
                return "dtype", err[:600], src, cmd
            if ".stride(" in err:  # view of a strided parameter: README
                return "sym-limit", err[:300], src, cmd
            return "rejects-good", err[:800], src, cmd
        for i, v in enumerate(vals):
            try:
                got = load_npy(os.path.join(wd, f"out{i}.npy"), NAME_OF[v.dtype])
            except Exception as e:
                return "crash", f"output {i} unreadable: {e}", src, cmd
            want = v.contiguous()
            if want.dtype == torch.bfloat16:
                pass
            if not close(got, want, tolclass, low):
                return "value", f"result {i} ({NAME_OF[v.dtype]}{list(v.shape)}, {tolclass}): got {got.flatten()[:8].tolist()} want {want.flatten()[:8].tolist()}", src, cmd
        if self.compiled:  # k.tdsl and the inputs are those just run
            return self.compiled.check(g, wd, vals, tolclass, low) + (src, cmd)
        return "ok", "", src, cmd

    def save(self, seed, cls, detail, src, cmd, g, wd):
        self.nfail += 1
        if not self.keep:
            return
        d = os.path.join(self.keep, f"{cls}-{seed}")
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(wd):
            shutil.copy(os.path.join(wd, f), d)
        with open(os.path.join(d, "k.tdsl"), "w") as f:
            f.write(src)
        with open(os.path.join(d, "info.txt"), "w") as f:
            f.write(f"class: {cls}\nseed: {seed}\nsizes: {g.sizes}\n{detail}\n")
            f.write(" ".join(c.replace(wd, d) for c in cmd) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tdslc", default=os.environ.get("TDSLC", "build/tdslc"))
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", default="/tmp/tdsl_fuzz_fail")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--compiled", action="store_true",
                    help="also compile each program tdslc runs correctly (-O0..-O3) "
                         "and run it with tests/tools/run_kernel")
    ap.add_argument("--run-kernel", help="run_kernel executable (default: tests/run_kernel beside tdslc)")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--o0-fraction", type=float, default=0.25)
    ap.add_argument("--big", action="store_true",
                    help="larger sizes (symbols 17..131, dims up to 32, values up to 300k elements)")
    args = ap.parse_args()
    if args.compiled:
        global RESULT_LAYOUTS
        RESULT_LAYOUTS = True
    if args.big:
        global SYM_VALUES, LIT_DIMS, MAX_NUMEL
        SYM_VALUES, LIT_DIMS, MAX_NUMEL = [17, 37, 67, 101, 131], [1, 2, 3, 5, 8, 16, 32], 300000
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    tdslc = os.path.abspath(args.tdslc)
    comp = None
    if args.compiled:
        rk = args.run_kernel or os.path.join(os.path.dirname(tdslc), "tests", "run_kernel")
        comp = Compiled(tdslc, os.path.abspath(rk), args.cc, args.o0_fraction,
                        random.Random(args.seed))
    run = Runner(tdslc, args.keep, comp)
    stats = {}
    for i in range(args.count):
        seed = args.seed * 1_000_003 + i
        cls, detail = run.one(seed)
        stats[cls] = stats.get(cls, 0) + 1
        if args.verbose and cls not in ("ok", "ok-error", "skip"):
            print(f"{seed}: {cls}: {detail[:300]}")
    print(f"{args.count} programs:", ", ".join(f"{k}={v}" for k, v in sorted(stats.items())))
    if comp:
        print("compiled and run:", ", ".join(f"{k} {v}" for k, v in comp.counts.items()))
        shutil.rmtree(comp.rt, ignore_errors=True)
    bad = sum(v for k, v in stats.items() if k not in ("ok", "ok-error", "skip", "unexpressible", "sym-limit"))
    if bad and args.keep:
        print(f"failing programs kept under {args.keep}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
