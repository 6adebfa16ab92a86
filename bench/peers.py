#!/usr/bin/env python3
"""peers.py — the workloads of bench/kernels.tdsl in the peers a user
would pick instead of tdsl: PyTorch eager, torch.compile (Inductor), JAX
(XLA, peers_jax.py), Halide with its autoschedulers (peers_halide.py) and
numpy.

Needs: numpy, and any of torch, jax, halide (bench/requirements.txt); a
missing one makes its rows say "unsupported". Benchmark-only: nothing in
the build or the tests imports this.
Produces: on stdout the line format of bench.c (run.sh merges both):
    NAME IMPL TIME_MS RATE UNIT - -
with IMPL torch, torch-compile, jax, halide or numpy, RATE in GB/s (bytes
of every input read and every output written once, as bench.c counts
them) or GFLOP/s.

Each peer gets its fastest honest variant: torch-compile is Inductor
(torch.compile, default mode, fullgraph, static shapes) of the eager
computation writing into an
output allocated once (`out.copy_(f())` inside the compiled function,
which Inductor turns into kernels storing straight into `out`); its
compile time is excluded. jax is jax.jit with inputs on the device and
block_until_ready. halide is the fastest of the Adams2019, Mullapudi2016
and Li2018 autoschedulers realizing into an output allocated once.

Usage: peers.py [--threads N] [--check DIR] [NAME ...]
--check DIR: instead of timing, reads DIR/NAME_I.npy written by bench_tdsl
(BENCH_DUMP=DIR), recomputes each output from the same inputs in torch
float64, and prints "# check NAME: ok|MISMATCH, error/scale E" where E is
max|tdsl - ref| / max|ref| (a norm-wise error: 1e-4 and above is flagged).
Threads: torch.set_num_threads(N); numpy's BLAS gets OMP/OPENBLAS/MKL
_NUM_THREADS=N, set here before numpy is imported. Timing as bench.c: a
warm-up call, a sizing call, then $BENCH_RUNS (5) runs of at least
$BENCH_MIN_RUN_MS (200) ms; the median per-call time is printed.

Every workload returns a result in the layout the tdsl kernel writes
(contiguous unless the kernel declares channels_last), so a torch
expression whose natural result is strided gets the same .contiguous()
copy the tdsl kernel has to make (preprocess). numpy has no convolution:
its conv rows are im2col per image (a strided window view copied into a
matrix) times the weights in OpenBLAS. For the conv workloads torch is
also timed in both memory formats (IMPL torch-nchw and torch-nhwc: input
and weight in that format), for run.sh's layout table.
"""
import argparse
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int,
                   default=int(os.environ.get("THREADS", "2")))
    p.add_argument("--check", metavar="DIR",
                   help="compare bench_tdsl's BENCH_DUMP files instead of timing")
    p.add_argument("names", nargs="*")
    return p.parse_args()


ARGS = parse_args()
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "HL_NUM_THREADS"):
    os.environ[_var] = str(ARGS.threads)
# XLA's CPU client sizes its pools from the cores it may run on.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true "
                      f"intra_op_parallelism_threads={ARGS.threads}")

try:
    import numpy as np
except ImportError:  # reported per row
    np = None
try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers_halide  # noqa: E402  (after the thread variables above)
import peers_jax  # noqa: E402

IMPLS = ["torch", "torch-compile", "jax", "halide", "numpy"]


def torch_compiled(eager):
    """torch.compile of an eager torch callable, writing into an output
    allocated once with the eager result's shape, strides and dtype."""
    ref = eager()
    out = torch.empty_strided(ref.shape, ref.stride(), dtype=ref.dtype)

    def into_out():
        return out.copy_(eager())
    fn = torch.compile(into_out, fullgraph=True, dynamic=False)
    fn()
    return fn


def env_int(name, default):
    try:
        return max(1, int(os.environ.get(name, default)))
    except ValueError:
        return default


def time_median(fn):
    """Median seconds per call of fn(), timed as bench.c does."""
    fn()
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    min_run = env_int("BENCH_MIN_RUN_MS", 200) * 1e-3
    runs = min(env_int("BENCH_RUNS", 5), 31)
    reps = int(min_run / once) + 1 if once > 0 else 1000
    per_call = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        per_call.append((time.perf_counter() - start) / reps)
    per_call.sort()
    return per_call[len(per_call) // 2]


# ---- inputs: same shapes and value ranges as bench.c (not the same bits) --

def rand_f32(rng, shape, positive=False):
    x = rng.random(shape, dtype=np.float32)
    return x + np.float32(0.5) if positive else x * np.float32(2) - np.float32(1)


def conv_flops(n, o, oh, ow, c, kh, kw):
    return 2.0 * n * o * oh * ow * c * kh * kw


# ---- numpy versions ---------------------------------------------------------

def np_dw_conv(x, w, pad):
    """Depthwise conv2d (groups = channels) of x [N, C, H, W] held as NHWC
    memory by w [C, 1, KH, KW], stride 1: per tap, a shifted window of the
    padded input times that tap's per-channel weights. Returns NHWC memory."""
    n, c, h, wd = x.shape
    _, _, kh, kw = w.shape
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    xl = np.ascontiguousarray(x.transpose(0, 2, 3, 1))  # setup only
    taps = np.ascontiguousarray(w[:, 0].transpose(1, 2, 0))  # [KH, KW, C]

    def run():
        xp = np.pad(xl, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
        out = np.zeros((n, oh, ow, c), np.float32)
        for ky in range(kh):
            for kx in range(kw):
                out += xp[:, ky:ky + oh, kx:kx + ow, :] * taps[ky, kx]
        return out
    return run


def np_im2col_conv(x, w, stride, pad, channels_last):
    """conv2d of x [N, C, H, W] (or NHWC memory when channels_last) by
    w [O, C, KH, KW]: per image, a window view copied into a matrix and one
    OpenBLAS matmul. Returns NCHW, or NHWC memory when channels_last."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    win = np.lib.stride_tricks.sliding_window_view
    if channels_last:
        xl = np.ascontiguousarray(x.transpose(0, 2, 3, 1))  # setup only
        wm = np.ascontiguousarray(w.reshape(o, c * kh * kw).T)

        def run():
            out = np.empty((n, oh, ow, o), np.float32)
            for i in range(n):
                xp = np.pad(xl[i], ((pad, pad), (pad, pad), (0, 0)))
                cols = win(xp, (kh, kw), axis=(0, 1))[::stride, ::stride]
                np.matmul(cols.reshape(oh * ow, c * kh * kw), wm,
                          out=out[i].reshape(oh * ow, o))
            return out
        return run
    wm = w.reshape(o, c * kh * kw)

    def run():
        out = np.empty((n, o, oh, ow), np.float32)
        for i in range(n):
            xp = np.pad(x[i], ((0, 0), (pad, pad), (pad, pad)))
            cols = win(xp, (kh, kw), axis=(1, 2))[:, ::stride, ::stride]
            cols = cols.transpose(0, 3, 4, 1, 2).reshape(c * kh * kw, oh * ow)
            np.matmul(wm, cols, out=out[i].reshape(o, oh * ow))
        return out
    return run


def np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + np.float32(eps)) * g + b


# ---- the workloads: name -> (bytes, flops, {impl: make_fn}) ----------------
# Each make_fn builds its inputs and returns the zero-argument call to time.

def workloads(rng):
    f32 = 4
    ew_shape = (32, 64, 56, 56)
    ew_n = 32 * 64 * 56 * 56
    pp_n = 32 * 224 * 224 * 3
    sm_n = 4096 * 1024
    ln_n = 8192 * 1024

    def ew(impl):
        x = rand_f32(rng, ew_shape)
        a = rand_f32(rng, (64,), True)
        b = rand_f32(rng, (64,))
        if impl == "numpy":
            av, bv = a.reshape(1, 64, 1, 1), b.reshape(1, 64, 1, 1)
            return lambda: np.maximum((x * av + bv) * np.float32(0.5) - bv, 0) / av
        xt, at, bt = map(torch.from_numpy, (x, a, b))
        av, bv = at.view(1, 64, 1, 1), bt.view(1, 64, 1, 1)
        return lambda: torch.relu((xt * av + bv) * 0.5 - bv) / av

    def pre(impl):
        frames = rng.integers(0, 256, (32, 224, 224, 3), dtype=np.uint8)
        mean = rand_f32(rng, (3,), True)
        std = rand_f32(rng, (3,), True)
        if impl == "numpy":
            m, s = mean.reshape(1, 3, 1, 1), std.reshape(1, 3, 1, 1)
            return lambda: np.ascontiguousarray(
                (frames.transpose(0, 3, 1, 2).astype(np.float32) / np.float32(255) - m) / s)
        ft, mt, st = map(torch.from_numpy, (frames, mean, std))
        return lambda: ((ft.permute(0, 3, 1, 2).to(torch.float32) / 255.0
                         - mt.view(1, 3, 1, 1)) / st[:, None, None]).contiguous()

    def perm(impl):
        x = rand_f32(rng, ew_shape)
        if impl == "numpy":
            return lambda: np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        xt = torch.from_numpy(x)
        return lambda: xt.permute(0, 2, 3, 1).contiguous()

    def softmax(impl):
        x = rand_f32(rng, (4096, 1024))
        if impl == "numpy":
            return lambda: np_softmax(x)
        xt = torch.from_numpy(x)
        return lambda: torch.softmax(xt, dim=-1)

    def matmul(impl):
        a = rand_f32(rng, (1024, 1024))
        b = rand_f32(rng, (1024, 1024))
        if impl == "numpy":
            return lambda: a @ b
        at, bt = torch.from_numpy(a), torch.from_numpy(b)
        return lambda: at @ bt

    def conv(x_shape, w_shape, stride, pad, channels_last):
        def make(impl):
            x = rand_f32(rng, x_shape)
            w = rand_f32(rng, w_shape)
            if impl == "numpy":
                return np_im2col_conv(x, w, stride, pad, channels_last)
            xt, wt = torch.from_numpy(x), torch.from_numpy(w)
            # torch-nchw / torch-nhwc: both layouts, whatever the kernel's
            # (x and w in that memory format; the result follows x).
            if impl == "torch-nhwc" or (impl == "torch" and channels_last):
                xt = xt.contiguous(memory_format=torch.channels_last)
                if impl == "torch-nhwc":
                    wt = wt.contiguous(memory_format=torch.channels_last)
            return lambda: F.conv2d(xt, wt, stride=stride, padding=pad)
        return make

    def matmul_bias_relu(impl):
        a = rand_f32(rng, (1024, 1024))
        b = rand_f32(rng, (1024, 1024))
        c = rand_f32(rng, (1024,))
        if impl == "numpy":
            return lambda: np.maximum(a @ b + c, 0)
        at, bt, ct = map(torch.from_numpy, (a, b, c))
        return lambda: torch.relu(at @ bt + ct)

    def matmul_prologue(impl):
        a = rand_f32(rng, (1024, 1024))
        b = rand_f32(rng, (1024, 1024))
        if impl == "numpy":
            return lambda: np.maximum(a, 0) @ b
        at, bt = map(torch.from_numpy, (a, b))
        return lambda: torch.relu(at) @ bt

    def conv_bias_relu(impl):
        x = rand_f32(rng, (32, 64, 56, 56))
        w = rand_f32(rng, (64, 64, 3, 3))
        c = rand_f32(rng, (64,))
        if impl == "numpy":
            cv, run = c.reshape(1, 64, 1, 1), np_im2col_conv(x, w, 1, 1, False)
            return lambda: np.maximum(run() + cv, 0)
        xt, wt, ct = map(torch.from_numpy, (x, w, c))
        if impl == "torch-nhwc":
            xt = xt.contiguous(memory_format=torch.channels_last)
            wt = wt.contiguous(memory_format=torch.channels_last)
        cv = ct.view(1, 64, 1, 1)
        return lambda: torch.relu(F.conv2d(xt, wt, padding=1) + cv)

    def layer_norm(impl):
        x = rand_f32(rng, (8192, 1024))
        g = rand_f32(rng, (1024,), True)
        b = rand_f32(rng, (1024,))
        if impl == "numpy":
            return lambda: np_layer_norm(x, g, b)
        xt, gt, bt = map(torch.from_numpy, (x, g, b))
        return lambda: F.layer_norm(xt, (1024,), gt, bt)

    def sum_all(impl):
        x = rand_f32(rng, (32 << 20,))
        if impl == "numpy":
            return lambda: x.sum()
        xt = torch.from_numpy(x)
        return lambda: xt.sum()

    def mse(impl):
        a = rand_f32(rng, (4096, 4096))
        b = rand_f32(rng, (4096, 4096))
        if impl == "numpy":
            return lambda: ((a - b) ** 2).mean()
        at, bt = map(torch.from_numpy, (a, b))
        return lambda: ((at - bt) ** 2).mean()

    def channel_mean(impl):
        x = rand_f32(rng, (3, 8294400))
        if impl == "numpy":
            return lambda: x.mean(1)
        xt = torch.from_numpy(x)
        return lambda: xt.mean(1)

    def col_sum(impl):
        x = rand_f32(rng, (8 << 20, 4))
        if impl == "numpy":
            return lambda: x.sum(0)
        xt = torch.from_numpy(x)
        return lambda: xt.sum(0)

    def gelu_tanh(impl):
        x = rand_f32(rng, (4096, 4096))
        if impl == "numpy":
            return None  # numpy has no erf
        xt = torch.from_numpy(x)
        return lambda: torch.tanh(F.gelu(xt))

    def rope(impl):
        x, y, t = (rand_f32(rng, (4096, 1024)) for _ in range(3))
        if impl == "numpy":
            return lambda: x * np.cos(t) + y * np.sin(t)
        xt, yt, tt = map(torch.from_numpy, (x, y, t))
        return lambda: xt * torch.cos(tt) + yt * torch.sin(tt)

    def pow_atan2(impl):
        x, y = rand_f32(rng, (4096, 1024), True), rand_f32(rng, (4096, 1024))
        if impl == "numpy":
            return lambda: np.power(x, y) + np.arctan2(y, x)
        xt, yt = map(torch.from_numpy, (x, y))
        return lambda: torch.pow(xt, yt) + torch.atan2(yt, xt)

    def rmsnorm_hand(impl):
        x = rand_f32(rng, (8192, 1024))
        w = rand_f32(rng, (1024,), True)
        if impl == "numpy":
            return lambda: x / np.sqrt((x * x).mean(axis=-1, keepdims=True)
                                       + np.float32(1e-6)) * w
        xt, wt = map(torch.from_numpy, (x, w))
        return lambda: xt * torch.rsqrt((xt * xt).mean(-1, keepdim=True) + 1e-6) * wt

    def layernorm_hand(impl):
        x = rand_f32(rng, (8192, 1024))
        g = rand_f32(rng, (1024,), True)
        b = rand_f32(rng, (1024,))
        if impl == "numpy":
            return lambda: np_layer_norm(x, g, b)
        xt, gt, bt = map(torch.from_numpy, (x, g, b))

        def run():
            d = xt - xt.mean(-1, keepdim=True)
            return d * torch.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5) * gt + bt
        return run

    def softmax_hand(impl):
        x = rand_f32(rng, (sm_n // 1024, 1024))
        if impl == "numpy":
            return lambda: np_softmax(x)
        xt = torch.from_numpy(x)

        def run():
            e = torch.exp(xt - xt.amax(-1, keepdim=True))
            return e / e.sum(-1, keepdim=True)
        return run

    def gemm(m, k, n, nt):
        """x [m, k] @ w (w [k, n], or w [n, k] transposed when nt), into a
        preallocated output (torch: out=)."""
        def make(impl):
            x = rand_f32(rng, (m, k))
            w = rand_f32(rng, (n, k) if nt else (k, n))
            if impl == "numpy":
                o = np.empty((m, n), np.float32)
                wv = w.T if nt else w
                return lambda: np.matmul(x, wv, out=o)
            xt, wt = torch.from_numpy(x), torch.from_numpy(w)
            wt = wt.T if nt else wt
            o = torch.empty(m, n)
            return lambda: torch.matmul(xt, wt, out=o)
        return make

    def matvec(impl):
        a = rand_f32(rng, (4096, 4096))
        v = rand_f32(rng, (4096,))
        if impl == "numpy":
            o = np.empty(4096, np.float32)
            return lambda: np.matmul(a, v, out=o)
        at, vt, o = torch.from_numpy(a), torch.from_numpy(v), torch.empty(4096)
        return lambda: torch.matmul(at, vt, out=o)

    def gemm_bytes(m, k, n):
        return (m * k + k * n + m * n) * f32

    def conv_dw(impl):
        x = rand_f32(rng, (8, 96, 56, 56))
        w = rand_f32(rng, (96, 1, 3, 3))
        if impl == "numpy":
            return np_dw_conv(x, w, 1)
        xt, wt = torch.from_numpy(x), torch.from_numpy(w)
        if impl != "torch-nchw":  # the kernel's layout: channels-last
            xt = xt.contiguous(memory_format=torch.channels_last)
            if impl == "torch-nhwc":
                wt = wt.contiguous(memory_format=torch.channels_last)
        return lambda: F.conv2d(xt, wt, padding=1, groups=96)

    def matmul_lowp(m, k, n, bf16):
        """bf16: torch.matmul on bf16 tensors (oneDNN, f32 accumulation;
        on CPUs without AVX512-BF16 PyTorch's slow reference loop), and
        torch-f32: the same through an f32 matmul, (a.float() @
        b.float()).bfloat16(), the faster choice there (a raw line, not in
        the table); int8: torch._int_mm (int8 x int8 -> int32).  numpy
        has neither."""
        def make(impl):
            if impl not in ("torch", "torch-f32") or (impl == "torch-f32" and not bf16):
                return None
            if bf16:
                a = torch.from_numpy(rand_f32(rng, (m, k))).to(torch.bfloat16)
                b = torch.from_numpy(rand_f32(rng, (k, n))).to(torch.bfloat16)
                if impl == "torch-f32":
                    return lambda: (a.float() @ b.float()).bfloat16()
                return lambda: a @ b
            a = torch.from_numpy(rng.integers(-128, 128, (m, k), dtype=np.int8))
            b = torch.from_numpy(rng.integers(-128, 128, (k, n), dtype=np.int8))
            if not hasattr(torch, "_int_mm"):
                return lambda: (a.to(torch.int32) @ b.to(torch.int32))
            return lambda: torch._int_mm(a, b)
        return make

    def conv_lowp(bf16):
        """conv3x3_nhwc's layer in low precision, channels-last: bf16
        (F.conv2d on bf16 tensors: oneDNN, f32 accumulation; on CPUs
        without AVX512-BF16 a slow reference path) and torch-f32, the same
        through an f32 conv, (x.float() conv w.float()).bfloat16() (a raw
        line, not in the table); int8: F.conv2d(x.to(int32),
        w.to(int32)), the kernel's own definition (PyTorch has no int8 x
        int8 -> int32 conv but its quantized engines, whose requantized
        u8 results are another computation).  numpy has neither."""
        def make(impl):
            if impl not in ("torch", "torch-f32") or (impl == "torch-f32" and not bf16):
                return None
            cl = torch.channels_last
            if bf16:
                x = torch.from_numpy(rand_f32(rng, (32, 64, 56, 56))).to(torch.bfloat16)
                w = torch.from_numpy(rand_f32(rng, (64, 64, 3, 3))).to(torch.bfloat16)
                x = x.contiguous(memory_format=cl)
                if impl == "torch-f32":
                    return lambda: F.conv2d(x.float(), w.float(), padding=1).bfloat16()
                return lambda: F.conv2d(x, w, padding=1)
            x = torch.from_numpy(rng.integers(-128, 128, (32, 64, 56, 56), dtype=np.int8))
            w = torch.from_numpy(rng.integers(-128, 128, (64, 64, 3, 3), dtype=np.int8))
            x = x.contiguous(memory_format=cl)
            return lambda: F.conv2d(x.to(torch.int32), w.to(torch.int32), padding=1)
        return make

    conv_bytes = (2 * ew_n + 64 * 64 * 9) * f32
    return [
        ("ew_chain", (2 * ew_n + 128) * f32, 0, ew),
        ("preprocess", pp_n + (pp_n + 6) * f32, 0, pre),
        ("permute_copy", 2 * ew_n * f32, 0, perm),
        ("softmax_last", 2 * sm_n * f32, 0, softmax),
        ("matmul", 3 * 1024 * 1024 * f32, 2.0 * 1024 ** 3, matmul),
        ("conv3x3_nchw", conv_bytes, conv_flops(32, 64, 56, 56, 64, 3, 3),
         conv((32, 64, 56, 56), (64, 64, 3, 3), 1, 1, False)),
        ("conv3x3_nhwc", conv_bytes, conv_flops(32, 64, 56, 56, 64, 3, 3),
         conv((32, 64, 56, 56), (64, 64, 3, 3), 1, 1, True)),
        ("conv1x1", (2 * ew_n + 64 * 64) * f32,
         conv_flops(32, 64, 56, 56, 64, 1, 1),
         conv((32, 64, 56, 56), (64, 64, 1, 1), 1, 0, False)),
        ("conv1x1_nhwc", (2 * ew_n + 64 * 64) * f32,
         conv_flops(32, 64, 56, 56, 64, 1, 1),
         conv((32, 64, 56, 56), (64, 64, 1, 1), 1, 0, True)),
        ("conv7x7s2", (32 * 3 * 224 * 224 + 64 * 3 * 49 + 32 * 64 * 112 * 112) * f32,
         conv_flops(32, 64, 112, 112, 3, 7, 7),
         conv((32, 3, 224, 224), (64, 3, 7, 7), 2, 3, False)),
        ("layer_norm_last", (2 * ln_n + 2048) * f32, 0, layer_norm),
        ("matmul_bias_relu", (3 * 1024 * 1024 + 1024) * f32, 2.0 * 1024 ** 3,
         matmul_bias_relu),
        ("conv_bias_relu", conv_bytes + 64 * f32, conv_flops(32, 64, 56, 56, 64, 3, 3),
         conv_bias_relu),
        ("matmul_prologue", 3 * 1024 * 1024 * f32, 2.0 * 1024 ** 3, matmul_prologue),
        ("sum_all", ((32 << 20) + 1) * f32, 0, sum_all),
        ("mse", (2 * 4096 * 4096 + 1) * f32, 0, mse),
        ("channel_mean", (3 * 8294400 + 3) * f32, 0, channel_mean),
        ("col_sum", ((8 << 20) * 4 + 4) * f32, 0, col_sum),
        ("gelu_tanh", 2 * 4096 * 4096 * f32, 0, gelu_tanh),
        ("rmsnorm_hand", (2 * ln_n + 1024) * f32, 0, rmsnorm_hand),
        ("layernorm_hand", (2 * ln_n + 2048) * f32, 0, layernorm_hand),
        ("softmax_hand", 2 * sm_n * f32, 0, softmax_hand),
        ("gemm_m1_4k", gemm_bytes(1, 4096, 4096), 0, gemm(1, 4096, 4096, False)),
        ("linear_m1_4k", gemm_bytes(1, 4096, 4096), 0, gemm(1, 4096, 4096, True)),
        ("matvec_4k", (4096 * 4096 + 2 * 4096) * f32, 0, matvec),
        ("gemm_m8_768", gemm_bytes(8, 768, 3072), 0, gemm(8, 768, 3072, False)),
        ("linear_m8_3072", gemm_bytes(8, 3072, 768), 0, gemm(8, 3072, 768, True)),
        ("gemm_m128_4k", gemm_bytes(128, 4096, 4096), 2.0 * 128 * 4096 * 4096,
         gemm(128, 4096, 4096, False)),
        ("linear_m128_768", gemm_bytes(128, 768, 3072), 2.0 * 128 * 768 * 3072,
         gemm(128, 768, 3072, True)),
        ("gemm_m1024_3072", gemm_bytes(1024, 3072, 768), 2.0 * 1024 * 3072 * 768,
         gemm(1024, 3072, 768, False)),
        ("conv_dw3x3_nhwc", (2 * 8 * 96 * 56 * 56 + 96 * 9) * f32,
         conv_flops(8, 96, 56, 56, 1, 3, 3), conv_dw),
        ("matmul_bf16", 3 * 1024 * 1024 * 2, 2.0 * 1024 ** 3,
         matmul_lowp(1024, 1024, 1024, True)),
        ("matmul_i8", 1024 * 1024 * (1 + 1 + 4), 2.0 * 1024 ** 3,
         matmul_lowp(1024, 1024, 1024, False)),
        ("matmul_bf16_layer", (2 * 128 * 3072 + 3072 * 3072) * 2, 2.0 * 128 * 3072 * 3072,
         matmul_lowp(128, 3072, 3072, True)),
        ("matmul_i8_layer", 128 * 3072 * 5 + 3072 * 3072, 2.0 * 128 * 3072 * 3072,
         matmul_lowp(128, 3072, 3072, False)),
        ("conv3x3_bf16_nhwc", (2 * ew_n + 64 * 64 * 9) * 2, conv_flops(32, 64, 56, 56, 64, 3, 3),
         conv_lowp(True)),
        ("conv3x3_i8_nhwc", ew_n * 5 + 64 * 64 * 9, conv_flops(32, 64, 56, 56, 64, 3, 3),
         conv_lowp(False)),
        ("conv3x3_7x7_nhwc", (2 * 8 * 512 * 49 + 512 * 512 * 9) * f32,
         conv_flops(8, 512, 7, 7, 512, 3, 3),
         conv((8, 512, 7, 7), (512, 512, 3, 3), 1, 1, True)),
        ("rope", 4 * 4096 * 1024 * f32, 0, rope),
        ("pow_atan2", 3 * 4096 * 1024 * f32, 0, pow_atan2),
    ]


def report(name, impl, secs, nbytes, flops):
    if flops:
        rate, unit = flops / secs * 1e-9, "GFLOP/s"
    else:
        rate, unit = nbytes / secs * 1e-9, "GB/s"
    print(f"{name:<16} {impl} {secs * 1e3:10.3f} {rate:9.2f} {unit:<7} - -",
          flush=True)


# ---- --check: tdsl's dumped results against torch float64 ------------------

def check_refs():
    """name -> function of the dumped inputs (float64 torch tensors, NHWC
    where the kernel takes channels-last) giving the output as dumped."""
    def nchw(t):
        return t.permute(0, 3, 1, 2)

    def nhwc(t):
        return t.permute(0, 2, 3, 1)
    return {
        "ew_chain": lambda x, a, b: torch.relu(
            (x * a.view(1, -1, 1, 1) + b.view(1, -1, 1, 1)) * 0.5
            - b.view(1, -1, 1, 1)) / a.view(1, -1, 1, 1),
        "preprocess": lambda f, m, s: (nchw(f) / 255.0 - m.view(1, 3, 1, 1))
        / s.view(1, 3, 1, 1),
        "permute_copy": nhwc,
        "softmax_last": lambda x: torch.softmax(x, dim=-1),
        "matmul": lambda a, b: a @ b,
        "conv3x3_nchw": lambda x, w: F.conv2d(x, w, padding=1),
        "conv3x3_nhwc": lambda x, w: nhwc(F.conv2d(nchw(x), w, padding=1)),
        "conv1x1": lambda x, w: F.conv2d(x, w),
        "conv1x1_nhwc": lambda x, w: nhwc(F.conv2d(nchw(x), w)),
        "conv7x7s2": lambda x, w: F.conv2d(x, w, stride=2, padding=3),
        "layer_norm_last": lambda x, g, b: F.layer_norm(x, (x.shape[-1],), g, b),
        "matmul_bias_relu": lambda a, b, c: torch.relu(a @ b + c),
        "conv_bias_relu": lambda x, w, c: torch.relu(F.conv2d(x, w, padding=1)
                                                     + c.view(1, -1, 1, 1)),
        "matmul_prologue": lambda a, b: torch.relu(a) @ b,
        "sum_all": lambda x: x.sum(),
        "mse": lambda a, b: ((a - b) ** 2).mean(),
        "channel_mean": lambda x: x.mean(1),
        "col_sum": lambda x: x.sum(0),
        "gelu_tanh": lambda x: torch.tanh(F.gelu(x)),
        "rmsnorm_hand": lambda x, w: x * torch.rsqrt((x * x).mean(-1, keepdim=True)
                                                     + 1e-6) * w,
        "layernorm_hand": lambda x, g, b: F.layer_norm(x, (x.shape[-1],), g, b, 1e-5),
        "softmax_hand": lambda x: torch.softmax(x, dim=-1),
        "gemm_m1_4k": lambda a, b: a @ b,
        "linear_m1_4k": lambda x, w: x @ w.T,
        "matvec_4k": lambda a, v: a @ v,
        "gemm_m8_768": lambda a, b: a @ b,
        "linear_m8_3072": lambda x, w: x @ w.T,
        "gemm_m128_4k": lambda a, b: a @ b,
        "linear_m128_768": lambda x, w: x @ w.T,
        "gemm_m1024_3072": lambda a, b: a @ b,
        "conv_dw3x3_nhwc": lambda x, w: nhwc(F.conv2d(nchw(x), w, padding=1,
                                                      groups=w.shape[0])),
        "matmul_i8": lambda a, b: a @ b,  # exact in float64 (|sums| < 2^53)
        "matmul_i8_layer": lambda a, b: a @ b,
        "conv3x3_i8_nhwc": lambda x, w: nhwc(F.conv2d(nchw(x), w, padding=1)),  # exact
        "conv3x3_7x7_nhwc": lambda x, w: nhwc(F.conv2d(nchw(x), w, padding=1)),
        "rope": lambda x, y, t: x * torch.cos(t) + y * torch.sin(t),
        "pow_atan2": lambda x, y: torch.pow(x, y) + torch.atan2(y, x),
    }


def check(directory):
    if np is None or torch is None:
        print("# check: needs numpy and torch")
        return 1
    status = 0
    for name, ref in check_refs().items():
        if ARGS.names and name not in ARGS.names:
            continue
        nin = ref.__code__.co_argcount
        paths = [os.path.join(directory, f"{name}_{i}.npy") for i in range(nin + 1)]
        if not all(os.path.exists(p) for p in paths):
            continue
        ins = [torch.from_numpy(np.load(p)).to(torch.float64) for p in paths[:nin]]
        got = torch.from_numpy(np.load(paths[nin])).to(torch.float64)
        want = ref(*ins)
        scale = max(want.abs().max().item(), 1e-30)
        err = (got - want).abs().max().item() / scale
        ok = tuple(got.shape) == tuple(want.shape) and err < 1e-4
        status |= not ok
        print(f"# check {name}: {'ok' if ok else 'MISMATCH'}, error/scale {err:.2e}",
              flush=True)
    return status


def main():
    if ARGS.check:
        return check(ARGS.check)
    if np is None:
        for impl in ("torch", "numpy"):
            print(f"# {impl}: numpy is not installed (see bench/README.md)")
        return 0
    if torch is not None:
        torch.set_num_threads(ARGS.threads)
    rng = np.random.default_rng(0x5EED)
    versions = [f"numpy {np.__version__}"]
    for what, v in (("torch", torch and torch.__version__),
                    ("jax", peers_jax.version()), ("halide", peers_halide.version())):
        versions.append(f"{what} {v}" if v else f"{what} not installed")
    print(f"# peers: {ARGS.threads} threads; " + ", ".join(versions))
    for name, nbytes, flops, make in workloads(rng):
        if ARGS.names and name not in ARGS.names:
            continue
        impls = list(IMPLS)
        if name.startswith("conv"):  # the layout table's torch columns
            impls += ["torch-nchw", "torch-nhwc"]
        if name.startswith(("matmul_bf16", "conv3x3_bf16")):  # bf16 through f32
            impls += ["torch-f32"]
        for impl in impls:
            if impl.startswith("torch") and torch is None:
                print(f"{name:<16} {impl} unsupported")
                continue
            try:
                if impl == "torch-compile":
                    fn = torch_compiled(make("torch"))
                elif impl == "jax":
                    fn = peers_jax.make(name, rng)
                elif impl == "halide":
                    fn = peers_halide.make(name, rng, ARGS.threads)
                else:
                    fn = make(impl)
            except Exception as e:  # a peer that cannot compile a workload
                print(f"# {impl} {name}: {type(e).__name__}: "
                      f"{str(e).splitlines()[0][:160] if str(e) else ''}")
                print(f"{name:<16} {impl} failed")
                continue
            if fn is None:
                print(f"{name:<16} {impl} unsupported")
                continue
            report(name, impl, time_median(fn), nbytes, flops)
            del fn
    return 0


if __name__ == "__main__":
    sys.exit(main())
