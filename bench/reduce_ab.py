"""reduce_ab.py — the long reductions to few outputs (sum_all, mse,
channel_mean of kernels.tdsl, and columns of a tall, narrow matrix:
x.sum(0) of [8M, 4] (col_sums, and with its width unknown: col_sums_dyn),
[8M, 3], x.mean(0) of [2M, 16], x.amax(0) of [8M, 4]) of tdsl
libraries against torch eager, torch.compile and JAX, and a torch copy
of the same bytes, in one process, interleaved: for a noisy shared
machine.

usage: [ONLY=sum_all,mse] python reduce_ab.py THREADS ROUNDS LIB.so[=name] ...
LIB.so: `tdslc reduce.tdsl --emit=so -o LIB.so` of the kernels below
(KERNELS, written to reduce.tdsl by `python reduce_ab.py --tdsl`), built
from any two commits (each library carries its own runtime).  Each round
runs every implementation for about MIN_S seconds, the order reversed
every other round; it prints per workload and implementation the median
wall time per call (a split over threads shows in wall time, not in CPU
time), the bandwidth over the inputs' bytes, and the first library's
speed over each implementation (per-round wall-time ratios, median).
"copy" is torch's `copy_` of half the bytes (read + write = the
workload's bytes, as bench.c's memcpy), at the same thread count.
Results are checked against torch in float64 first.  Needs torch, jax
and the python/ package (found next to this file).
"""
import os
import statistics
import sys

# name: (tdsl source, torch function, jax function, input shapes)
KERNELS = {
    "sum_all": ("kernel sum_all(x: f32[N]) -> f32[] {\n  return x.sum()\n}\n",
                lambda x: x.sum(), lambda x: x.sum(), [(32 << 20,)]),
    "mse": ("kernel mse(a: f32[M, K], b: f32[M, K]) -> f32[] {\n"
            "  return ((a - b) ** 2).mean()\n}\n",
            lambda a, b: ((a - b) ** 2).mean(), lambda a, b: ((a - b) ** 2).mean(),
            [(4096, 4096), (4096, 4096)]),
    "channel_mean": ("kernel channel_mean(x: f32[C, HW]) -> f32[C] {\n  return x.mean(1)\n}\n",
                     lambda x: x.mean(1), lambda x: x.mean(axis=1), [(3, 8294400)]),
    "col_sums": ("kernel col_sums(x: f32[N, 4]) -> f32[4] {\n  return x.sum(0)\n}\n",
                 lambda x: x.sum(0), lambda x: x.sum(axis=0), [(8 << 20, 4)]),
    "col_means16": ("kernel col_means16(x: f32[N, 16]) -> f32[16] {\n  return x.mean(0)\n}\n",
                    lambda x: x.mean(0), lambda x: x.mean(axis=0), [(2 << 20, 16)]),
    "col_sums3": ("kernel col_sums3(x: f32[N, 3]) -> f32[3] {\n  return x.sum(0)\n}\n",
                  lambda x: x.sum(0), lambda x: x.sum(axis=0), [(8 << 20, 3)]),
    "col_amax": ("kernel col_amax(x: f32[N, 4]) -> f32[4] {\n  return x.amax(0)\n}\n",
                 lambda x: x.amax(0), lambda x: x.max(axis=0), [(8 << 20, 4)]),
    "col_sums_dyn": ("kernel col_sums_dyn(x: f32[N, C]) -> f32[C] {\n  return x.sum(0)\n}\n",
                     lambda x: x.sum(0), lambda x: x.sum(axis=0), [(8 << 20, 4)]),
}

if len(sys.argv) > 1 and sys.argv[1] == "--tdsl":
    sys.stdout.write("\n".join(src for src, _, _, _ in KERNELS.values()))
    sys.exit(0)

T = int(sys.argv[1])
R = int(sys.argv[2])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import ab_util  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

libs = ab_util.load_libs(sys.argv[3:], T)
torch.set_num_threads(T)
MIN_S = float(os.environ.get("MIN_S", "0.3"))
only = [s for s in os.environ.get("ONLY", "").split(",") if s]
rng = np.random.default_rng(0)

for wname, (_, tf, jf, shapes) in KERNELS.items():
    if only and wname not in only:
        continue
    ins = [torch.from_numpy(rng.random(s, dtype=np.float32) * 2 - 1) for s in shapes]
    nbytes = sum(i.numel() for i in ins) * 4
    src = torch.rand(nbytes // 8)
    dst = torch.empty_like(src)
    compiled = torch.compile(tf)
    jfn = jax.jit(jf)
    jins = [jnp.asarray(i.numpy()) for i in ins]
    impls = [("torch", lambda: tf(*ins)), ("compile", lambda: compiled(*ins)),
             ("jax", lambda: jfn(*jins).block_until_ready()), ("copy", lambda: dst.copy_(src))]
    for lname, m in libs:
        impls.append((lname, (lambda f: lambda: f(*ins))(getattr(m, wname))))
    ref = tf(*[i.double() for i in ins])
    for name, f in impls:
        if name != "copy":
            got = torch.as_tensor(np.asarray(f())).double()
            err = ((got - ref).abs().max() / ref.abs().max()).item()
            assert err < 1e-5, (wname, name, err)
    timed = [(name, (lambda g: lambda o: g())(f)) for name, f in impls]
    reps, wall, _ = ab_util.interleave(timed, {n: None for n, _ in timed}, R, MIN_S, 0.0)
    first = libs[0][0]
    print("== %s %s threads=%d rounds=%d reps=%d load=%.2f" % (
        wname, " ".join("x".join(map(str, s)) for s in shapes), T, R, reps, os.getloadavg()[0]))
    for name, _ in impls:
        w = statistics.median(wall[name])
        sp = statistics.median([wall[name][i] / wall[first][i] for i in range(R)])
        print("  %-10s wall %8.3f ms  %6.1f GB/s  %s speed over it %5.2f" % (
            name, w * 1e3, nbytes / w * 1e-9, first, sp))
    sys.stdout.flush()
