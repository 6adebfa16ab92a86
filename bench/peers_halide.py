"""peers_halide.py — the workloads of bench/kernels.tdsl as Halide pipelines,
scheduled by Halide's autoschedulers.

Needs: halide (the PyPI package `halide`, with its autoscheduler plugins;
bench/requirements.txt). Used by: peers.py, IMPL "halide". Benchmark-only.

Each entry of PIPELINES maps a benchmark name to a builder(rng) that
returns (output Func, [(ImageParam, numpy input)], numpy output array).
make() builds the pipeline once per autoscheduler (Adams2019, Mullapudi2016
and Li2018, each with parallelism = the thread count) in a child process
that JIT-compiles it and times one call (cut off after $HALIDE_PROBE_S seconds, default 60:
some schedules of the convolutions run for minutes), then builds the
fastest one in this process; the output array is allocated
once and every call realizes into it (a preallocated output). Estimates
are the real sizes. Numpy arrays map to Halide buffers with their axes
reversed (Halide's first dimension is numpy's last, the contiguous one),
so the functions below index innermost-first. Thread count: HL_NUM_THREADS,
which peers.py sets before importing this module.
"""
import os
import time

import numpy as np

try:
    import halide as hl
except ImportError:  # the rows then say "unsupported"
    hl = None

AUTOSCHEDULERS = ("Adams2019", "Mullapudi2016", "Li2018")


def _f32(rng, shape, positive=False):
    x = rng.random(shape, dtype=np.float32)
    return x + np.float32(0.5) if positive else x * np.float32(2) - np.float32(1)


def _param(arr, name):
    t = hl.UInt(8) if arr.dtype == np.uint8 else hl.Float(32)
    p = hl.ImageParam(t, arr.ndim, name)
    p.set_estimates([(0, n) for n in reversed(arr.shape)])
    return p


def _vars(n):
    return [hl.Var(f"v{i}") for i in range(n)]


def _ew(rng):
    xa, aa, ba = _f32(rng, (32, 64, 56, 56)), _f32(rng, (64,), True), _f32(rng, (64,))
    x, a, b = _param(xa, "x"), _param(aa, "a"), _param(ba, "b")
    w, h, c, n = _vars(4)
    f = hl.Func("ew_chain")
    f[w, h, c, n] = hl.max((x[w, h, c, n] * a[c] + b[c]) * 0.5 - b[c], 0.0) / a[c]
    return f, [(x, xa), (a, aa), (b, ba)], np.empty_like(xa)


def _preprocess(rng):
    fa = rng.integers(0, 256, (32, 224, 224, 3), dtype=np.uint8)
    ma, sa = _f32(rng, (3,), True), _f32(rng, (3,), True)
    fr, m, s = _param(fa, "frames"), _param(ma, "mean"), _param(sa, "std")
    w, h, c, n = _vars(4)
    f = hl.Func("preprocess")
    f[w, h, c, n] = (hl.cast(hl.Float(32), fr[c, w, h, n]) / 255.0 - m[c]) / s[c]
    return f, [(fr, fa), (m, ma), (s, sa)], np.empty((32, 3, 224, 224), np.float32)


def _permute(rng):
    xa = _f32(rng, (32, 64, 56, 56))
    x = _param(xa, "x")
    c, w, h, n = _vars(4)
    f = hl.Func("permute_copy")
    f[c, w, h, n] = x[w, h, c, n]
    return f, [(x, xa)], np.empty((32, 56, 56, 64), np.float32)


def _softmax(rng):
    xa = _f32(rng, (4096, 1024))
    x = _param(xa, "x")
    k, m = _vars(2)
    r = hl.RDom([(0, 1024)])
    mx, e, s, f = hl.Func("mx"), hl.Func("e"), hl.Func("s"), hl.Func("softmax")
    mx[m] = hl.maximum(x[r.x, m])
    e[k, m] = hl.exp(x[k, m] - mx[m])
    s[m] = hl.sum(e[r.x, m])
    f[k, m] = e[k, m] / s[m]
    return f, [(x, xa)], np.empty_like(xa)


def _norm(rng, hand_rms=False):
    xa = _f32(rng, (8192, 1024))
    x = _param(xa, "x")
    ga = _f32(rng, (1024,), True)
    g = _param(ga, "g")
    k, m = _vars(2)
    r = hl.RDom([(0, 1024)])
    f = hl.Func("norm")
    if hand_rms:
        ms = hl.Func("ms")
        ms[m] = hl.sum(x[r.x, m] * x[r.x, m]) / 1024.0
        f[k, m] = x[k, m] * (1.0 / hl.sqrt(ms[m] + hl.f32(1e-6))) * g[k]
        return f, [(x, xa), (g, ga)], np.empty_like(xa)
    ba = _f32(rng, (1024,))
    b = _param(ba, "b")
    mean, var = hl.Func("mean"), hl.Func("var")
    mean[m] = hl.sum(x[r.x, m]) / 1024.0
    var[m] = hl.sum((x[r.x, m] - mean[m]) * (x[r.x, m] - mean[m])) / 1024.0
    f[k, m] = (x[k, m] - mean[m]) * (1.0 / hl.sqrt(var[m] + hl.f32(1e-5))) * g[k] + b[k]
    return f, [(x, xa), (g, ga), (b, ba)], np.empty_like(xa)


def _matmul(rng, bias=False, prologue=False, m=1024, k=1024, n=1024, nt=False):
    """a [m, k] @ b, b [k, n], or b [n, k] transposed when nt (a Linear's
    weight); n == 0: b is a vector [k] (a matrix-vector product)."""
    aa = _f32(rng, (m, k))
    ba = _f32(rng, (k,) if n == 0 else (n, k) if nt else (k, n))
    a, b = _param(aa, "a"), _param(ba, "b")
    j, i = _vars(2)
    r = hl.RDom([(0, k)])
    mm, f = hl.Func("mm"), hl.Func("matmul")
    av = hl.max(a[r.x, i], 0.0) if prologue else a[r.x, i]
    if n == 0:
        mm[i] = 0.0
        mm[i] += av * b[r.x]
        f[i] = mm[i]
        return f, [(a, aa), (b, ba)], np.empty((m,), np.float32)
    mm[j, i] = 0.0
    mm[j, i] += av * (b[r.x, j] if nt else b[j, r.x])
    ins = [(a, aa), (b, ba)]
    if bias:
        ca = _f32(rng, (1024,))
        c = _param(ca, "c")
        f[j, i] = hl.max(mm[j, i] + c[j], 0.0)
        ins.append((c, ca))
    else:
        f[j, i] = mm[j, i]
    return f, ins, np.empty((m, n), np.float32)


def _conv(x_shape, w_shape, stride, pad, nhwc, bias_relu=False):
    def build(rng):
        n_, c_, h_, w_ = x_shape
        o_, _, kh, kw = w_shape
        oh, ow = (h_ + 2 * pad - kh) // stride + 1, (w_ + 2 * pad - kw) // stride + 1
        xa = _f32(rng, x_shape)
        if nhwc:
            xa = np.ascontiguousarray(xa.transpose(0, 2, 3, 1))
        wa = _f32(rng, w_shape)
        x, wt = _param(xa, "x"), _param(wa, "w")
        bounds = [(0, c_), (0, w_), (0, h_), (0, n_)] if nhwc else \
            [(0, w_), (0, h_), (0, c_), (0, n_)]
        xp = hl.BoundaryConditions.constant_exterior(x, 0.0, bounds)
        r = hl.RDom([(0, kw), (0, kh), (0, c_)])
        xx, yy, o, n = _vars(4)
        acc, f = hl.Func("acc"), hl.Func("conv")
        ix, iy = xx * stride + r.x - pad, yy * stride + r.y - pad
        src = xp[r.z, ix, iy, n] if nhwc else xp[ix, iy, r.z, n]
        acc[xx, yy, o, n] = 0.0
        acc[xx, yy, o, n] += src * wt[r.x, r.y, r.z, o]
        ins = [(x, xa), (wt, wa)]
        if bias_relu:
            ca = _f32(rng, (o_,))
            c = _param(ca, "c")
            val = hl.max(acc[xx, yy, o, n] + c[o], 0.0)
            ins.append((c, ca))
        else:
            val = acc[xx, yy, o, n]
        if nhwc:  # output NHWC: Halide dims (o, x, y, n)
            f[o, xx, yy, n] = val
            out = np.empty((n_, oh, ow, o_), np.float32)
        else:
            f[xx, yy, o, n] = val
            out = np.empty((n_, o_, oh, ow), np.float32)
        return f, ins, out
    return build


def _sum(rng, mse=False):
    f = hl.Func("total")
    if mse:
        aa, ba = _f32(rng, (4096, 4096)), _f32(rng, (4096, 4096))
        a, b = _param(aa, "a"), _param(ba, "b")
        r = hl.RDom([(0, 4096), (0, 4096)])
        d = a[r.x, r.y] - b[r.x, r.y]
        f[()] = hl.sum(d * d) / float(4096 * 4096)
        return f, [(a, aa), (b, ba)], np.empty((), np.float32)
    xa = _f32(rng, (32 << 20,))
    x = _param(xa, "x")
    r = hl.RDom([(0, 32 << 20)])
    f[()] = hl.sum(x[r.x])
    return f, [(x, xa)], np.empty((), np.float32)


EW = (32, 64, 56, 56)
PIPELINES = {
    "ew_chain": _ew,
    "preprocess": _preprocess,
    "permute_copy": _permute,
    "softmax_last": _softmax,
    "matmul": _matmul,
    "conv3x3_nchw": _conv(EW, (64, 64, 3, 3), 1, 1, False),
    "conv3x3_nhwc": _conv(EW, (64, 64, 3, 3), 1, 1, True),
    "conv1x1": _conv(EW, (64, 64, 1, 1), 1, 0, False),
    "conv7x7s2": _conv((32, 3, 224, 224), (64, 3, 7, 7), 2, 3, False),
    "layer_norm_last": _norm,
    "matmul_bias_relu": lambda rng: _matmul(rng, bias=True),
    "conv_bias_relu": _conv(EW, (64, 64, 3, 3), 1, 1, False, bias_relu=True),
    "matmul_prologue": lambda rng: _matmul(rng, prologue=True),
    "sum_all": _sum,
    "mse": lambda rng: _sum(rng, mse=True),
    "rmsnorm_hand": lambda rng: _norm(rng, hand_rms=True),
    "layernorm_hand": _norm,
    "softmax_hand": _softmax,
    "gemm_m1_4k": lambda rng: _matmul(rng, m=1, k=4096, n=4096),
    "linear_m1_4k": lambda rng: _matmul(rng, m=1, k=4096, n=4096, nt=True),
    "matvec_4k": lambda rng: _matmul(rng, m=4096, k=4096, n=0),
    "gemm_m8_768": lambda rng: _matmul(rng, m=8, k=768, n=3072),
    "linear_m8_3072": lambda rng: _matmul(rng, m=8, k=3072, n=768, nt=True),
    "gemm_m128_4k": lambda rng: _matmul(rng, m=128, k=4096, n=4096),
    "linear_m128_768": lambda rng: _matmul(rng, m=128, k=768, n=3072, nt=True),
    "gemm_m1024_3072": lambda rng: _matmul(rng, m=1024, k=3072, n=768),
    "conv3x3_7x7_nhwc": _conv((8, 512, 7, 7), (512, 512, 3, 3), 1, 1, True),
}


def version():
    if hl is None:
        return None
    try:
        from importlib.metadata import version as pkg_version
        return pkg_version("halide")
    except Exception:
        return "?"


def _plugin_path(plugin):
    """The autoscheduler's library: the wheel keeps them in halide/lib64,
    which is not on the loader's path."""
    import glob
    here = os.path.dirname(hl.__file__)
    found = glob.glob(os.path.join(here, "lib*", f"lib{plugin}.so"))
    return found[0] if found else plugin


def _compiled(name, rng, scheduler, threads):
    f, ins, out = PIPELINES[name](rng)
    f.set_estimates([(0, n) for n in reversed(out.shape)])
    p = hl.Pipeline(f)
    target = hl.get_jit_target_from_environment()
    p.apply_autoscheduler(target, hl.AutoschedulerParams(
        scheduler, {"parallelism": str(threads)}))
    p.compile_jit(target)
    bufs = [hl.Buffer(arr) for _, arr in ins]  # views of the arrays: keep both
    for (param, _), buf in zip(ins, bufs):
        param.set(buf)
    ob = hl.Buffer(out)

    def run(keep=(ins, bufs, out)):
        p.realize(ob)
    return run


_loaded = set()


def _load(scheduler):
    plugin = "autoschedule_" + scheduler.lower()
    if plugin not in _loaded:
        hl.load_plugin(_plugin_path(plugin))
        _loaded.add(plugin)


def _probe(name, scheduler, threads):
    """Seconds of one call of `name` under `scheduler` (after a warm-up),
    measured in a child process so that a schedule that runs for minutes
    can be cut off (PROBE_TIMEOUT_S)."""
    import subprocess
    import sys
    try:
        r = subprocess.run([sys.executable, __file__, name, scheduler, str(threads)],
                           capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"over {PROBE_TIMEOUT_S} s to schedule, compile and run twice")
    if r.returncode != 0:
        raise RuntimeError((r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1])
    return float(r.stdout.split()[-1])


PROBE_TIMEOUT_S = int(os.environ.get("HALIDE_PROBE_S", "60"))


def make(name, rng, threads, log=print):
    """A callable running workload `name` with the fastest of Halide's
    autoschedulers (which one is logged), or None if halide is missing or
    the workload has no Halide version."""
    if hl is None or name not in PIPELINES:
        return None
    best = None
    for s in AUTOSCHEDULERS:
        try:
            t = _probe(name, s, threads)
        except Exception as e:  # an autoscheduler that fails on a pipeline
            log(f"# halide {name}: {s} failed: {str(e)[:120]}", flush=True)
            continue
        log(f"# halide {name}: {s} {t * 1e3:.1f} ms a call", flush=True)
        if best is None or t < best[0]:
            best = (t, s)
    if best is None:
        return None
    log(f"# halide {name}: fastest autoscheduler {best[1]}", flush=True)
    _load(best[1])
    return _compiled(name, rng, best[1], threads)


if __name__ == "__main__":  # the probe: NAME SCHEDULER THREADS
    import sys
    _name, _sched, _threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    _load(_sched)
    _fn = _compiled(_name, np.random.default_rng(0), _sched, _threads)
    _fn()
    _t0 = time.perf_counter()
    _fn()
    print(time.perf_counter() - _t0)
