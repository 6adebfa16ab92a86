#!/usr/bin/env python3
"""bench_gpu.py — tdsl's CUDA kernels against PyTorch on the same GPU
(bench/README.md, "GPU").

Run in the directory bench/gpu/build.sh wrote (it holds kernels_cuda.so,
the tdsl package and this script):

    python3 bench_gpu.py                  # cuda:0, every workload
    python3 bench_gpu.py --only softmax,matmul --runs 20
    python3 bench_gpu.py --device cpu     # dry run: kernels_host.so (build.sh
                                          # --target host), CPU tensors, small sizes

For each workload, on tensors of one device: tdsl (tdsl.load, out=
preallocated, on PyTorch's current stream), PyTorch eager (out= where
PyTorch has it), torch.compile (default mode unless --compile-mode; the
compile time of all workloads together is bounded by --compile-budget
seconds, later ones report "n/a"), and a device-to-device copy
(`dst.copy_(src)`) moving as many bytes as the workload reads and writes.
Times are per call: CUDA events around a batch of back-to-back calls
(at least ~2 ms), after warm-up, median of --runs batches.  tdsl's result
(of a call that allocates it) is checked against PyTorch in float64 with
spec §9's tolerances; a mismatch is printed loudly (and eager's own error
beside it).  A kernel missing from the library, or one that fails, costs
only its row.  Prints a markdown table and writes the results as JSON
(--json, default bench_gpu.json; --print-json: also as the last line).
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (HERE, os.path.join(HERE, "..", "..", "python")):
    if os.path.isfile(os.path.join(_p, "tdsl", "__init__.py")):
        sys.path.insert(0, os.path.abspath(_p))
        break

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tdsl  # noqa: E402

EW = dict(rtol=1e-5, atol=1e-6)      # spec §9, f32 elementwise
RED = dict(rtol=1e-4, atol=1e-5)     # reductions, @, conv, normalizations
EXACT = dict(rtol=0.0, atol=0.0)     # data movement
LOWP = dict(rtol=1e-2, atol=1e-2)    # f16/bf16 results


class Workload:
    """name: the row; kernel: tdsl's kernel; make(dev, quick, gen) -> the
    arguments; fn(*args): the function in PyTorch (for torch.compile and,
    in float64, the reference); eager(out, *args): PyTorch eager with
    out= where it has one (default fn); flops(args) or None; tol."""

    def __init__(self, name, kernel, make, fn, eager=None, flops=None, tol=EW):
        self.name, self.kernel, self.make, self.fn = name, kernel, make, fn
        self.eager = eager or (lambda out, *a: fn(*a))
        self.flops, self.tol = flops, tol


def randn(gen, dev, *shape):
    return torch.randn(*shape, generator=gen, device=dev)


def positive(gen, dev, *shape):
    return torch.rand(*shape, generator=gen, device=dev) + 0.5


def _ew_chain(x, a, b):
    av, bv = a.view(1, -1, 1, 1), b.view(1, -1, 1, 1)
    return torch.relu((x * av + bv) * 0.5 - bv) / av


def _ew_chain_out(out, x, a, b):
    av, bv = a.view(1, -1, 1, 1), b.view(1, -1, 1, 1)
    return torch.div(torch.relu((x * av + bv) * 0.5 - bv), av, out=out)


def _preprocess(frames, mean, std):
    x = frames.permute(0, 3, 1, 2).to(mean.dtype) / 255.0
    return (x - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1)


def _preprocess_out(out, frames, mean, std):
    x = frames.permute(0, 3, 1, 2).to(mean.dtype) / 255.0
    return torch.div(x - mean.view(1, 3, 1, 1), std.view(1, 3, 1, 1), out=out)


def _softmax_out(out, x):
    try:
        return torch.softmax(x, -1, out=out)
    except TypeError:  # no out= overload in this PyTorch
        return torch.softmax(x, -1)


def _mm_bias_relu_out(out, a, b, c):
    return torch.addmm(c, a, b, out=out).relu_()


def _conv_flops(x, w, out_hw, stride=1):
    n, c = x.shape[0], x.shape[1]
    o, kh, kw = w.shape[0], w.shape[2], w.shape[3]
    return 2.0 * n * o * out_hw[0] * out_hw[1] * c * kh * kw


def _mm_flops(a, b, *rest):
    return 2.0 * a.shape[0] * a.shape[1] * b.shape[1]


def _cl(t):
    return t.contiguous(memory_format=torch.channels_last)


def workloads():
    """The CPU bench's workloads (bench.c) at its sizes, plus a 4096³
    matmul; quick: small sizes for the CPU dry run."""
    def nchw(q):
        return (2, 8, 16, 16) if q else (32, 64, 56, 56)

    def mat(q, m, k):
        return (m // 32, k // 32) if q else (m, k)

    W = Workload
    return [
        W("ew_chain", "ew_chain",
          lambda d, q, g: [randn(g, d, *nchw(q)), positive(g, d, nchw(q)[1]),
                           randn(g, d, nchw(q)[1])],
          _ew_chain, _ew_chain_out),
        W("preprocess", "preprocess",
          lambda d, q, g: [torch.randint(0, 256, (2, 32, 32, 3) if q else (32, 224, 224, 3),
                                         generator=g, device=d, dtype=torch.uint8),
                           positive(g, d, 3), positive(g, d, 3)],
          _preprocess, _preprocess_out),
        W("permute_copy", "permute_copy", lambda d, q, g: [randn(g, d, *nchw(q))],
          lambda x: x.permute(0, 2, 3, 1).contiguous(),
          lambda out, x: out.copy_(x.permute(0, 2, 3, 1)), tol=EXACT),
        W("softmax [4096,1024]", "softmax_last", lambda d, q, g: [randn(g, d, *mat(q, 4096, 1024))],
          lambda x: torch.softmax(x, -1), _softmax_out, tol=RED),
        W("layer_norm [8192,1024]", "layer_norm_last",
          lambda d, q, g: [randn(g, d, *mat(q, 8192, 1024)),
                           positive(g, d, mat(q, 8192, 1024)[1]),
                           randn(g, d, mat(q, 8192, 1024)[1])],
          lambda x, w, b: F.layer_norm(x, [x.shape[-1]], w, b), tol=RED),
        W("matmul 1024³", "matmul",
          lambda d, q, g: [randn(g, d, *mat(q, 1024, 1024)), randn(g, d, *mat(q, 1024, 1024))],
          torch.matmul, lambda out, a, b: torch.matmul(a, b, out=out), _mm_flops, RED),
        W("matmul 4096³", "matmul",
          lambda d, q, g: [randn(g, d, *mat(q, 4096, 4096)), randn(g, d, *mat(q, 4096, 4096))],
          torch.matmul, lambda out, a, b: torch.matmul(a, b, out=out), _mm_flops, RED),
        W("matmul+bias+relu 1024³", "matmul_bias_relu",
          lambda d, q, g: [randn(g, d, *mat(q, 1024, 1024)), randn(g, d, *mat(q, 1024, 1024)),
                           randn(g, d, mat(q, 1024, 1024)[1])],
          lambda a, b, c: torch.relu(a @ b + c), _mm_bias_relu_out, _mm_flops, RED),
        W("matmul_prologue 1024³", "matmul_prologue",
          lambda d, q, g: [randn(g, d, *mat(q, 1024, 1024)), randn(g, d, *mat(q, 1024, 1024))],
          lambda a, b: torch.relu(a) @ b, None, _mm_flops, RED),
        W("conv3x3 NCHW", "conv3x3_nchw",
          lambda d, q, g: [randn(g, d, *nchw(q)), randn(g, d, nchw(q)[1], nchw(q)[1], 3, 3) * 0.1],
          lambda x, w: F.conv2d(x, w, padding=1), None,
          lambda x, w: _conv_flops(x, w, x.shape[2:]), RED),
        W("conv3x3 channels-last", "conv3x3_nhwc",
          lambda d, q, g: [_cl(randn(g, d, *nchw(q))), randn(g, d, nchw(q)[1], nchw(q)[1], 3, 3) * 0.1],
          lambda x, w: F.conv2d(x, w, padding=1), None,
          lambda x, w: _conv_flops(x, w, x.shape[2:]), RED),
        W("conv1x1", "conv1x1",
          lambda d, q, g: [randn(g, d, *nchw(q)), randn(g, d, nchw(q)[1], nchw(q)[1], 1, 1) * 0.1],
          lambda x, w: F.conv2d(x, w), None,
          lambda x, w: _conv_flops(x, w, x.shape[2:]), RED),
        W("conv7x7 s2", "conv7x7s2",
          lambda d, q, g: [randn(g, d, 2 if q else 32, 3, 224, 224),
                           randn(g, d, 8 if q else 64, 3, 7, 7) * 0.1],
          lambda x, w: F.conv2d(x, w, stride=2, padding=3), None,
          lambda x, w: _conv_flops(x, w, (112, 112)), RED),
        W("conv3x3+bias+relu", "conv_bias_relu",
          lambda d, q, g: [randn(g, d, *nchw(q)), randn(g, d, nchw(q)[1], nchw(q)[1], 3, 3) * 0.1,
                           randn(g, d, nchw(q)[1])],
          lambda x, w, c: torch.relu(F.conv2d(x, w, padding=1) + c.view(1, -1, 1, 1)), None,
          lambda x, w, c: _conv_flops(x, w, x.shape[2:]), RED),
        W("sum 32M", "sum_all", lambda d, q, g: [randn(g, d, (1 << 16) if q else (32 << 20))],
          lambda x: x.sum(), lambda out, x: torch.sum(x, 0, out=out), tol=RED),
        W("mse [4096,4096]", "mse",
          lambda d, q, g: [randn(g, d, *mat(q, 4096, 4096)), randn(g, d, *mat(q, 4096, 4096))],
          lambda a, b: ((a - b) ** 2).mean(), tol=RED),
        W("gelu_tanh [4096,4096]", "gelu_tanh", lambda d, q, g: [randn(g, d, *mat(q, 4096, 4096))],
          lambda x: torch.tanh(F.gelu(x)), lambda out, x: torch.tanh(F.gelu(x), out=out)),
        # bf16 on tensor cores (cuda/gemm.c "tensor cores"; cuBLAS/cuDNN use them too)
        W("matmul bf16 1024³", "matmul_bf16",
          lambda d, q, g: [randn(g, d, *mat(q, 1024, 1024)).bfloat16(),
                           randn(g, d, *mat(q, 1024, 1024)).bfloat16()],
          torch.matmul, lambda out, a, b: torch.matmul(a, b, out=out), _mm_flops, LOWP),
        W("matmul bf16 4096³", "matmul_bf16",
          lambda d, q, g: [randn(g, d, *mat(q, 4096, 4096)).bfloat16(),
                           randn(g, d, *mat(q, 4096, 4096)).bfloat16()],
          torch.matmul, lambda out, a, b: torch.matmul(a, b, out=out), _mm_flops, LOWP),
        W("conv3x3 bf16 channels-last", "conv3x3_bf16_nhwc",
          lambda d, q, g: [_cl(randn(g, d, *((2, 64, 8, 8) if q else nchw(q)))).bfloat16(),
                           (randn(g, d, 64, 64, 3, 3) * 0.1).bfloat16()],
          lambda x, w: F.conv2d(x, w, padding=1), None,
          lambda x, w: _conv_flops(x, w, x.shape[2:]), LOWP),
    ]


# ---- timing -----------------------------------------------------------------

class Timer:
    def __init__(self, dev, runs, warmup, min_batch_ms):
        self.cuda = dev.type == "cuda"
        self.dev, self.runs, self.warmup, self.min_batch_ms = dev, runs, warmup, min_batch_ms

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.dev)

    def _batch(self, f, iters):
        """(device ms per call, host ms per call) of iters calls."""
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            h0 = time.perf_counter()
            for _ in range(iters):
                f()
            h1 = time.perf_counter()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / iters, (h1 - h0) * 1e3 / iters
        h0 = time.perf_counter()
        for _ in range(iters):
            f()
        h1 = time.perf_counter()
        return (h1 - h0) * 1e3 / iters, (h1 - h0) * 1e3 / iters

    def time(self, f):
        """{'ms': median per-call ms, 'host_ms': host time per call, 'iters',
        'runs'}.  Slow calls get fewer warm-ups and runs (a 2 s kernel: one
        warm-up, one run), so that a slow kernel cannot eat the time limit."""
        self.sync()
        first, _ = self._batch(f, 1)  # the first warm-up
        for _ in range(self.warmup - 1 if first < 100 else 0):
            f()
        self.sync()
        one, _ = self._batch(f, 1)
        iters = max(1, min(200, int(math.ceil(self.min_batch_ms / max(one, 1e-3)))))
        runs = self.runs if one < 200 else 1 if one > 2000 else max(3, self.runs // 3)
        ms, host = [], []
        for _ in range(runs):
            d, h = self._batch(f, iters)
            ms.append(d)
            host.append(h)
        return {"ms": statistics.median(ms), "host_ms": statistics.median(host),
                "iters": iters, "runs": runs}


# ---- checking ---------------------------------------------------------------

def _f64(args):
    return [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in args]


def compare(got, ref, tol):
    """(ok, max abs error, max abs error / max |ref|) of got against the
    float64 reference ref."""
    g = got.double()
    if g.shape != ref.shape:
        return False, float("inf"), float("inf")
    diff = (g - ref).abs()
    err = diff.max().item() if diff.numel() else 0.0
    scale = ref.abs().max().item() if ref.numel() else 0.0
    ok = bool(torch.allclose(g, ref, **tol)) and not math.isnan(err)
    return ok, err, err / scale if scale else err


LIKE_TORCH = 4.0  # "as accurate as PyTorch": max abs error within this factor of its


def check(got, eager_out, ref, w):
    """tdsl's result against the float64 reference: ok when within spec
    §9's tolerances; when PyTorch's own f32 result is outside them too (a
    long f32 sum, e.g. a K = 1024 matmul, has element errors beyond rtol
    1e-4 / atol 1e-5 near zero), ok when tdsl's max abs error is within
    LIKE_TORCH times PyTorch's.  Prints a mismatch loudly."""
    ok, err, rel = compare(got, ref, w.tol)
    eok, eerr, erel = compare(eager_out, ref, w.tol)
    like = not ok and not eok and err <= LIKE_TORCH * eerr
    res = {"ok": ok or like, "allclose": ok, "like_torch": like, "max_abs_err": err,
           "max_rel_err": rel, "eager": {"allclose": eok, "max_abs_err": eerr,
                                         "max_rel_err": erel}}
    if not res["ok"]:
        print("!!! MISMATCH %s (kernel %s): tdsl vs the float64 reference: max abs err %.3g, "
              "max err / max|ref| %.3g, outside rtol=%g atol=%g; PyTorch eager f32: %s "
              "(max abs err %.3g)"
              % (w.name, w.kernel, err, rel, w.tol["rtol"], w.tol["atol"],
                 "within" if eok else "also outside", eerr), flush=True)
    return res


# ---- one workload -----------------------------------------------------------

def short(e):
    s = "%s: %s" % (type(e).__name__, e)
    s = " ".join(s.split())
    return s if len(s) <= 300 else s[:297] + "..."


def run_workload(w, mod, refused, timer, dev, opts, state):
    r = {"workload": w.name, "kernel": w.kernel}
    gen = torch.Generator(device=dev).manual_seed(0)
    args = w.make(dev, opts.quick, gen)
    timer.sync()
    r["shapes"] = [list(a.shape) for a in args]
    ref = w.fn(*_f64(args))
    eager_out = w.fn(*args)  # sizes and strides of the result
    out_bytes = eager_out.numel() * eager_out.element_size()
    r["bytes"] = sum(a.numel() * a.element_size() for a in args) + out_bytes
    r["flops"] = w.flops(*args) if w.flops else None

    # tdsl
    k = mod.kernels.get(w.kernel) if mod else None
    if k is None:
        r["tdsl"] = "missing" + (": " + refused[w.kernel] if w.kernel in refused else
                                 " from the library" if mod else ": no library")
    else:
        try:
            got = k(*args)  # allocates its result: the call the check uses
            timer.sync()
            r["check"] = check(got, eager_out, ref, w)
            out = torch.empty_like(got)
            r["tdsl"] = timer.time(lambda: k(*args, out=out))
            if r["tdsl"]["ms"] > 20:
                r["tdsl_bound"] = "n/a (a slow kernel: Python's share is negligible)"
            elif hasattr(k, "bind"):  # the C entry alone, descriptors made once
                with k.bind(*args, out=out) as call:
                    r["tdsl_bound"] = timer.time(call)
        except Exception as e:  # noqa: BLE001 — a failing kernel costs its row
            r["tdsl"] = "failed: " + short(e)
            print("!!! %s: tdsl failed: %s" % (w.name, short(e)), flush=True)
            if opts.verbose:
                traceback.print_exc()

    # PyTorch eager, with out= where PyTorch has one (else without)
    try:
        eo = torch.empty_like(eager_out)
        eager = w.eager
        try:
            eager(eo, *args)
        except (TypeError, RuntimeError):
            eager = lambda out, *a: w.fn(*a)  # noqa: E731
            eager(eo, *args)
        r["eager"] = timer.time(lambda: eager(eo, *args))
        r["eager"]["out="] = eager is w.eager
    except Exception as e:  # noqa: BLE001
        r["eager"] = "failed: " + short(e)

    # torch.compile, within the compile budget
    r["compile"] = time_compiled(w, args, timer, opts, state)

    # a device-to-device copy of as many bytes, read + written
    n = max(1, r["bytes"] // 2 // 4)
    src = torch.empty(n, device=dev)
    dst = torch.empty_like(src)
    src.fill_(1.0)
    r["copy"] = timer.time(lambda: dst.copy_(src))
    return r


def time_compiled(w, args, timer, opts, state):
    if opts.no_compile:
        return "n/a (--no-compile)"
    if not hasattr(torch, "compile"):
        return "n/a (no torch.compile in torch %s)" % torch.__version__
    if state["compile_s"] >= opts.compile_budget:
        return "n/a (compile budget of %gs spent)" % opts.compile_budget
    t0 = time.perf_counter()
    try:
        cf = torch.compile(w.fn, mode=opts.compile_mode, dynamic=False)
        cf(*args)
        timer.sync()
        took = time.perf_counter() - t0
        state["compile_s"] += took
        res = timer.time(lambda: cf(*args))
        res["compile_s"] = took
        return res
    except Exception as e:  # noqa: BLE001
        state["compile_s"] += time.perf_counter() - t0
        return "n/a (%s)" % short(e)


# ---- output -----------------------------------------------------------------

def ms_of(x):
    return x["ms"] if isinstance(x, dict) else None


def fmt_ms(x):
    if isinstance(x, dict):
        return "%.4f" % x["ms"] if x["ms"] < 1 else "%.3f" % x["ms"]
    for word in ("n/a", "failed", "missing"):
        if str(x).startswith(word):
            return word
    return "-"


def num(x):
    return "%.0f" % x if x >= 100 else "%.3g" % x


def table(rows):
    lines = ["| workload | tdsl ms | tdsl bound ms | eager ms | compile ms | copy-BW ms "
             "| tdsl÷best peer | tdsl GB/s (of copy) | tdsl GFLOP/s | check |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        t = ms_of(r.get("tdsl"))
        peers = [m for m in (ms_of(r.get("eager")), ms_of(r.get("compile"))) if m]
        ratio = "%.2f" % (t / min(peers)) if t and peers else "-"
        c = ms_of(r.get("copy"))
        gbs = "-"
        if t:
            gbs = "%s (%.0f%%)" % (num(r["bytes"] / t / 1e6), 100.0 * c / t if c else 0)
        flops = num(r["flops"] / t / 1e6) if t and r.get("flops") else "-"
        check = "-"
        if "check" in r:
            c_ = r["check"]
            check = "ok" if c_["allclose"] else "ok≈torch (err %.2g vs %.2g)" % (
                c_["max_abs_err"], c_["eager"]["max_abs_err"]) if c_["like_torch"] else \
                "**MISMATCH** (err/max %.2g)" % c_["max_rel_err"]
        tcell = fmt_ms(r.get("tdsl"))
        if isinstance(r.get("tdsl"), dict) and r["tdsl"]["host_ms"] >= 0.9 * r["tdsl"]["ms"] \
                and r.get("device") == "cuda":
            tcell += "†"
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["workload"], tcell, fmt_ms(r.get("tdsl_bound")), fmt_ms(r.get("eager")), fmt_ms(r.get("compile")),
            fmt_ms(c and r["copy"]), ratio, gbs, flops, check))
    return "\n".join(lines)


def notes(rows):
    out = []
    for r in rows:
        for col in ("tdsl", "eager", "compile"):
            v = r.get(col)
            if isinstance(v, str) and not v.startswith("n/a (compile budget") \
                    and not v.startswith("n/a (--no") and not v.startswith("n/a (no torch.compile"):
                out.append("- %s, %s: %s" % (r["workload"], col, v))
    return out


def read_refused(so):
    """kernel -> tdslc's message, from build.sh's build.txt beside so."""
    refused = {}
    path = os.path.join(os.path.dirname(so), "build.txt")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("refused "):
                    name, _, msg = line[len("refused "):].partition(": ")
                    refused[name] = "tdslc refused it: " + msg.strip()
    return refused


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu (dry run)")
    ap.add_argument("--so", help="the library (default: kernels_cuda.so, or kernels_host.so "
                    "for --device cpu, beside this script)")
    ap.add_argument("--only", help="comma list: workloads whose name or kernel contains one")
    ap.add_argument("--runs", type=int, default=10, help="timed batches (median)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--min-batch-ms", type=float, default=2.0)
    ap.add_argument("--quick", action="store_true", help="small sizes (default for cpu)")
    ap.add_argument("--full", action="store_true", help="full sizes on cpu too")
    ap.add_argument("--compile-mode", default="default",
                    help="torch.compile mode (default, max-autotune-no-cudagraphs, ...)")
    ap.add_argument("--compile-budget", type=float, default=100.0,
                    help="seconds of torch.compile compilation in all; later rows: n/a")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--time-limit", type=float, default=200.0,
                    help="seconds; rows not started by then are skipped (default 200)")
    ap.add_argument("--tf32", action="store_true",
                    help="let PyTorch use TF32 (off by default: tdsl computes in f32)")
    ap.add_argument("--json", default="bench_gpu.json", help="where to write the results")
    ap.add_argument("--print-json", action="store_true", help="also print them, last")
    ap.add_argument("-v", "--verbose", action="store_true")
    opts = ap.parse_args()

    dev = torch.device(opts.device)
    opts.quick = opts.quick or (dev.type == "cpu" and not opts.full)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            sys.exit("bench_gpu.py: torch.cuda.is_available() is False (use --device cpu "
                     "for the dry run)")
        if dev.index is None:
            dev = torch.device("cuda", 0)
        torch.cuda.set_device(dev)
        torch.backends.cuda.matmul.allow_tf32 = opts.tf32
        torch.backends.cudnn.allow_tf32 = opts.tf32
    so = opts.so or os.path.join(HERE, "kernels_cuda.so" if dev.type == "cuda"
                                 else "kernels_host.so")
    refused = read_refused(so)
    mod = None
    try:
        mod = tdsl.load(so)
        print("library: %s (%s kernels: %s)" % (so, mod.device, ", ".join(mod.kernels)))
        if mod.device != dev.type:
            print("!!! %s holds %s kernels but the tensors are on %s: every tdsl call "
                  "will fail" % (so, mod.device, dev), flush=True)
    except Exception as e:  # noqa: BLE001
        print("!!! cannot load the library: %s" % short(e), flush=True)

    env = {"torch": torch.__version__, "python": platform.python_version(),
           "device": str(dev), "library": so, "quick": opts.quick,
           "compile_mode": opts.compile_mode, "tf32": opts.tf32}
    if dev.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(dev)
        env["cuda"] = torch.version.cuda
    build_txt = os.path.join(os.path.dirname(so), "build.txt")
    if os.path.isfile(build_txt):
        with open(build_txt, encoding="utf-8") as f:
            env["build"] = [l.strip("# \n") for l in f if l.startswith("#")]
    print("environment: %s" % json.dumps(env), flush=True)

    timer = Timer(dev, opts.runs, opts.warmup, opts.min_batch_ms)
    only = [s for s in (opts.only or "").split(",") if s]
    state = {"compile_s": 0.0}
    rows = []
    t_start = time.perf_counter()
    for w in workloads():
        if only and not any(s in w.name or s in w.kernel for s in only):
            continue
        t0 = time.perf_counter()
        if t0 - t_start > opts.time_limit:
            rows.append({"workload": w.name, "kernel": w.kernel, "device": dev.type,
                         "error": "skipped: --time-limit of %gs reached" % opts.time_limit})
            print("%-24s skipped (--time-limit)" % w.name, flush=True)
            continue
        try:
            r = run_workload(w, mod, refused, timer, dev, opts, state)
        except Exception as e:  # noqa: BLE001 — PyTorch itself failed: skip the row
            r = {"workload": w.name, "kernel": w.kernel, "error": short(e)}
            print("!!! %s: %s" % (w.name, short(e)), flush=True)
        r["device"] = dev.type
        r["wall_s"] = round(time.perf_counter() - t0, 2)
        rows.append(r)
        print("%-24s tdsl %-10s eager %-10s compile %-10s copy %-10s (%.1fs)" % (
            w.name, fmt_ms(r.get("tdsl")), fmt_ms(r.get("eager")), fmt_ms(r.get("compile")),
            fmt_ms(r.get("copy")), r["wall_s"]), flush=True)
        if dev.type == "cuda":
            torch.cuda.empty_cache()

    print()
    print("tdsl vs PyTorch on %s (%s), torch %s, times per call in ms (median of %d "
          "batches)" % (env.get("gpu", "cpu"), dev, torch.__version__, opts.runs))
    print()
    print(table([r for r in rows if "error" not in r]))
    print()
    print("tdsl bound: the same call through Kernel.bind() (DLPack, shape query and "
          "stream done once): the C entry and the launch without the Python per-call work. "
          "tdsl÷best peer: tdsl's time over the faster of eager and torch.compile (< 1: "
          "tdsl is faster). GB/s: bytes read + written (inputs + result, once) per "
          "tdsl call, and the copy's time as a share of tdsl's (100%%: as fast as a "
          "copy of as many bytes). check: ok = within spec §9's tolerances of "
          "PyTorch in float64; ok≈torch = outside them, as PyTorch's own f32 result is, "
          "with a max abs error within %gx PyTorch's. † tdsl's host time per call is ≥ 90%% of its "
          "device time: launch-bound (Python + ctypes), not kernel-bound." % LIKE_TORCH)
    extra = notes(rows) + ["- %s: %s" % (r["workload"], r["error"]) for r in rows if "error" in r]
    if extra:
        print()
        print("\n".join(extra))
    bad = [r["workload"] for r in rows if "check" in r and not r["check"]["ok"]]
    if bad:
        print()
        print("!!! MISMATCHES: %s" % ", ".join(bad))
    print("total %.1fs (torch.compile %.1fs)" % (time.perf_counter() - t_start, state["compile_s"]))
    result = {"environment": env, "rows": rows}
    try:
        with open(opts.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
        print("results: %s" % os.path.abspath(opts.json))
    except OSError as e:
        print("cannot write %s: %s" % (opts.json, e))
    if opts.print_json:
        print(json.dumps(result))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
