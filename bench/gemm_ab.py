"""gemm_ab.py — matmul of tdsl libraries against torch (MKL for f32,
oneDNN for bf16, torch._int_mm for int8) and numpy (OpenBLAS, f32 only)
in one process, interleaved: for a noisy shared machine, where separate
runs of run.sh move single ratios by 2x.

usage: [SHAPES=MxKxN,...] [DTYPE=bf16|i8] python gemm_ab.py THREADS ROUNDS LIB.so[=name] ...
LIB.so: `tdslc mm.tdsl --emit=so -o LIB.so` of
    kernel matmul(a: f32[M, K], b: f32[K, P]) -> f32[M, P] { return a @ b }
(DTYPE=bf16: bf16 operands and output, as bench/kernels.tdsl's
matmul_bf16; DTYPE=i8: `tdslc bench/kernels.tdsl --kernel=matmul_i8
--emit=so`, int8 x int8 -> int32, whose results must equal
torch._int_mm's) built from any two commits (each library carries its own runtime and
thread pool, so they can be compared in one process).  Each round runs
every implementation for about MIN_S seconds after a GAP-second pause
(so that OpenMP spinners of the one before have gone to sleep), the order
reversed every other round; it prints per implementation the median wall
time per call, the median process CPU time per call (all threads), and
torch's time over it (wall medians, the median of per-round ratios, CPU).
Results are checked against torch first (bf16: within a few bf16 ulps
of the f32 product's scale, since both round once from f32 sums taken
in different orders; int8: equal).  Needs torch, numpy and the
python/ package (found next to this file).
"""
import os
import statistics
import sys

T = int(sys.argv[1])
R = int(sys.argv[2])
os.environ["OPENBLAS_NUM_THREADS"] = str(T)  # before numpy loads OpenBLAS
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import ab_util  # noqa: E402

libs = ab_util.load_libs(sys.argv[3:], T)
torch.set_num_threads(T)
shapes = [tuple(int(v) for v in s.split("x"))
          for s in os.environ.get("SHAPES", "1024x1024x1024,128x4096x4096,1024x3072x768").split(",")]
MIN_S = float(os.environ.get("MIN_S", "0.25"))
GAP = float(os.environ.get("GAP", "0.2"))
DTYPE = os.environ.get("DTYPE", "f32")
BF16, I8 = DTYPE == "bf16", DTYPE == "i8"
dt = torch.bfloat16 if BF16 else torch.float32
for (M, K, N) in shapes:
    torch.manual_seed(0)
    if I8:
        a = torch.randint(-128, 128, (M, K), dtype=torch.int8)
        b = torch.randint(-128, 128, (K, N), dtype=torch.int8)
        impls = [("torch", lambda o: torch._int_mm(a, b, out=o))]
        kname = [k for k in dir(libs[0][1]) if k.startswith("matmul_i8")][0] if libs else ""
        for name, m in libs:
            impls.append((name, (lambda f: lambda o: f(a, b, out=o))(getattr(m, kname))))
        ref = torch._int_mm(a, b)
    else:
        a, b = torch.randn(M, K).to(dt), torch.randn(K, N).to(dt)
        impls = [("torch", lambda o: torch.matmul(a, b, out=o))]
        if not BF16:
            an, bn = a.numpy(), b.numpy()
            impls.append(("numpy", lambda o: np.matmul(an, bn, out=o.numpy())))
        for name, m in libs:
            impls.append((name, (lambda mm: lambda o: mm.matmul(a, b, out=o))(m)))
        ref = torch.matmul(a.float(), b.float())
    outs = {}
    for name, f in impls:
        o = torch.empty(M, N, dtype=torch.int32 if I8 else dt)
        f(o)
        outs[name] = o
        if I8:
            assert torch.equal(o, ref), name
            continue
        err = (o.float() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
        assert err < (1e-2 if BF16 else 1e-4), (name, err)
    reps, wall, cpu = ab_util.interleave(impls, outs, R, MIN_S, GAP)
    gf = 2.0 * M * N * K / 1e9
    print("== %s %dx%dx%d threads=%d rounds=%d reps=%d load=%.2f" % (DTYPE, M, K, N, T, R, reps, os.getloadavg()[0]))
    tw, tc = statistics.median(wall["torch"]), statistics.median(cpu["torch"])
    for name, _ in impls:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        rr = statistics.median([wall["torch"][i] / wall[name][i] for i in range(R)])
        print("  %-10s wall %8.2f ms (%6.1f GF/s) min %8.2f  cpu %8.2f ms  torch/x: wall %5.2f per-round %5.2f cpu %5.2f"
              % (name, w * 1e3, gf / w, min(wall[name]) * 1e3, c * 1e3, tw / w, rr, tc / c))
    sys.stdout.flush()
