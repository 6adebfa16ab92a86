"""peer_ab.py — workloads of bench/kernels.tdsl in tdsl libraries against
their peers (torch.compile, JAX, Halide) and a copy of the same bytes, in
one process, interleaved: for rows of run.sh whose ratio to the best peer
moves between runs (each run.sh row times one implementation after
another, minutes apart).

usage: [ONLY=ew_chain,rope] [HALIDE=Adams2019] python peer_ab.py THREADS ROUNDS LIB.so[=name] ...
LIB.so: `tdslc bench/kernels.tdsl --kernel=ew_chain --kernel=rope
--kernel=softmax_hand --kernel=matmul_prologue --emit=so -o LIB.so`, from
any number of commits (each library carries its own runtime).  Inputs
are bench.c's (shapes and value ranges); every implementation reads the
same arrays and writes an output allocated once where it can (tdsl,
torch.compile: `out.copy_(f())` compiled, which Inductor stores straight
into `out`; Halide: realize into a buffer; JAX allocates its result, as
jax.jit has no `out=`).  copy: torch's `copy_` of BYTES/2 into BYTES/2,
the workload's bytes as bench.c's memcpy column counts them (its 1 MiB
blocks stay below glibc's non-temporal threshold; torch's copy_ also
stores through the cache), timed by the same loop; NAME-mm: the
library's `matmul` kernel, if it has one (--kernel=matmul), on
matmul_prologue's inputs: the GEMM without its prologue.  Halide's
autoscheduler is $HALIDE (default: the fastest of peers_halide's, probed
in child processes as run.sh does).  Each round runs every implementation
for about MIN_S seconds after GAP seconds of sleep, the order reversed
every other round; it prints per implementation the median wall and
process CPU time per call, and the median over rounds of the best peer's
wall time over its own (above 1: faster than every peer in that round's
median; the same of process CPU time, the steadier measure on a loaded
machine, where a thread that loses its core stalls a parallel call),
with the load average.  Results are checked against torch in
float64 first.  Needs torch, numpy, jax and halide (a missing peer is
left out) and the python/ package (found next to this file).
"""
import os
import statistics
import sys

T = int(sys.argv[1])
R = int(sys.argv[2])
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "HL_NUM_THREADS"):
    os.environ[_var] = str(T)
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true "
                      f"intra_op_parallelism_threads={T}")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import ab_util  # noqa: E402
import peers_halide  # noqa: E402
import peers_jax  # noqa: E402

libs = ab_util.load_libs(sys.argv[3:], T)
torch.set_num_threads(T)
MIN_S = float(os.environ.get("MIN_S", "0.25"))
GAP = float(os.environ.get("GAP", "0.05"))
only = [s for s in os.environ.get("ONLY", "").split(",") if s]


def f32(rng, shape, positive=False):
    x = rng.random(shape, dtype=np.float32)
    return x + np.float32(0.5) if positive else x * np.float32(2) - np.float32(1)


def ew_ref(x, a, b):
    av, bv = a.view(1, -1, 1, 1), b.view(1, -1, 1, 1)
    return torch.relu((x * av + bv) * 0.5 - bv) / av


def softmax_ref(x):
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


# name: (inputs(rng), torch function, bytes as bench.c counts them)
EW = (32, 64, 56, 56)
WORKLOADS = {
    "ew_chain": (lambda r: [f32(r, EW), f32(r, (64,), True), f32(r, (64,))], ew_ref,
                 (2 * 32 * 64 * 56 * 56 + 128) * 4),
    "rope": (lambda r: [f32(r, (4096, 1024)) for _ in range(3)],
             lambda x, y, t: x * torch.cos(t) + y * torch.sin(t), 4 * 4096 * 1024 * 4),
    "softmax_hand": (lambda r: [f32(r, (4096, 1024))], softmax_ref, 2 * 4096 * 1024 * 4),
    "matmul_prologue": (lambda r: [f32(r, (1024, 1024)), f32(r, (1024, 1024))],
                        lambda a, b: torch.relu(a) @ b, 3 * 1024 * 1024 * 4),
}


def halide_fn(name, arrays, out):
    """Halide's pipeline for name on these arrays, realizing into out."""
    if peers_halide.hl is None or name not in peers_halide.PIPELINES:
        return None
    sched = os.environ.get("HALIDE")
    if not sched:
        best = None
        for s in peers_halide.AUTOSCHEDULERS:
            try:
                t = peers_halide._probe(name, s, T)
            except Exception:
                continue
            if best is None or t < best[0]:
                best = (t, s)
        if best is None:
            return None
        sched = best[1]
    peers_halide._load(sched)
    hl = peers_halide.hl
    f, ins, hout = peers_halide.PIPELINES[name](np.random.default_rng(0))
    f.set_estimates([(0, n) for n in reversed(hout.shape)])
    p = hl.Pipeline(f)
    target = hl.get_jit_target_from_environment()
    p.apply_autoscheduler(target, hl.AutoschedulerParams(sched, {"parallelism": str(T)}))
    p.compile_jit(target)
    bufs = [hl.Buffer(a) for a in arrays]
    for (param, _), buf in zip(ins, bufs):
        param.set(buf)
    ob = hl.Buffer(out)
    print("# halide %s: %s" % (name, sched))
    return lambda o, keep=(bufs, ob, arrays): p.realize(ob)


for wname, (make, tf, nbytes) in WORKLOADS.items():
    if only and wname not in only:
        continue
    arrays = make(np.random.default_rng(0x5EED))
    ins = [torch.from_numpy(a) for a in arrays]
    ref = tf(*[i.double() for i in ins])
    shape = tuple(ref.shape)
    cout = torch.empty(shape)
    compiled = torch.compile(lambda: cout.copy_(tf(*ins)), fullgraph=True, dynamic=False)
    impls = [("compile", lambda o: compiled())]
    outs = {"compile": cout}
    if peers_jax.jax is not None and wname in peers_jax.WORKLOADS:
        jfn = peers_jax.jax.jit(peers_jax.WORKLOADS[wname][1])
        jx = [peers_jax.jax.device_put(a) for a in arrays]
        jres = {}

        def jrun(o, jfn=jfn, jx=jx, jres=jres):
            jres["r"] = jfn(*jx).block_until_ready()
        impls.append(("jax", jrun))
        outs["jax"] = None
    hout = np.empty(shape, np.float32)
    hfn = halide_fn(wname, arrays, hout)
    if hfn:
        impls.append(("halide", hfn))
        outs["halide"] = torch.from_numpy(hout)
    peers = [n for n, _ in impls]
    half = nbytes // 8
    src, dst = torch.ones(half), torch.empty(half)
    impls.append(("copy", lambda o: dst.copy_(src)))
    outs["copy"] = dst
    for lname, m in libs:
        fn = getattr(m, wname)
        impls.append((lname, (lambda f: lambda o: f(*ins, out=o))(fn)))
        outs[lname] = torch.empty(shape)
        if wname == "matmul_prologue" and hasattr(m, "matmul"):  # the GEMM alone
            impls.append((lname + "-mm", (lambda f: lambda o: f(*ins, out=o))(m.matmul)))
            outs[lname + "-mm"] = torch.empty(shape)
    for name, f in impls:
        f(outs[name])
        if name == "copy" or name.endswith("-mm"):
            continue
        o = torch.from_numpy(np.asarray(jres["r"])) if name == "jax" else outs[name]
        err = ((o.double() - ref).abs().max() / ref.abs().max()).item()
        assert err < 1e-4, (wname, name, err)
    load0 = os.getloadavg()[0]
    reps, wall, cpu = ab_util.interleave(impls, outs, R, MIN_S, GAP)
    print("== %s threads=%d rounds=%d reps=%d load=%.2f..%.2f" % (wname, T, R, reps, load0,
                                                                os.getloadavg()[0]))
    for name, _ in impls:
        c, w = statistics.median(cpu[name]), statistics.median(wall[name])
        rb = statistics.median([min(wall[p][i] for p in peers) / wall[name][i] for i in range(R)])
        rc = statistics.median([min(cpu[p][i] for p in peers) / cpu[name][i] for i in range(R)])
        print("  %-8s wall %7.3f ms (%6.1f GB/s)  cpu %7.3f ms  best peer / this: wall %5.2f cpu %5.2f"
              % (name, w * 1e3, nbytes / w * 1e-9, c * 1e3, rb, rc))
    sys.stdout.flush()
