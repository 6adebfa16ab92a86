"""math_ab.py — the math layer's f32 functions of tdsl libraries against
torch eager and torch.compile in one process, interleaved: for a noisy
shared machine, where separate runs of run.sh move single ratios by 2x.

usage: [ONLY=sin,rope] python math_ab.py THREADS ROUNDS LIB.so[=name] ...
LIB.so: `tdslc math.tdsl --emit=so -o LIB.so` of the kernels below (KERNELS,
written to math.tdsl by `python math_ab.py --tdsl`), built from any two
commits (each library carries its own runtime, so they can be compared
in one process).  Each round runs every implementation for about MIN_S
seconds, the order reversed every other round; it prints per workload
and implementation the median process CPU time per call (all threads;
the most stable measure under load), the median wall time, and the
implementation's speed over torch's and torch.compile's (per-round CPU
time ratios, median).  Results are checked against torch in float64
first (max |x - ref| / max |ref|).  Needs torch and the python/ package
(found next to this file).
"""
import math
import os
import statistics
import sys

# name: (tdsl body, torch function, inputs); every input f32 [N] (rope:
# [M, K]); the inputs are drawn in each function's useful range.
N = 1 << 22
KERNELS = {
    "sin": ("x.sin()", lambda x: x.sin(), ["wide"]),
    "cos": ("x.cos()", lambda x: x.cos(), ["wide"]),
    "tan": ("x.tan()", lambda x: x.tan(), ["wide"]),
    "atan": ("x.atan()", lambda x: x.atan(), ["wide"]),
    "asin": ("x.asin()", lambda x: x.asin(), ["unit"]),
    "acos": ("x.acos()", lambda x: x.acos(), ["unit"]),
    "sinh": ("x.sinh()", lambda x: x.sinh(), ["mid"]),
    "cosh": ("x.cosh()", lambda x: x.cosh(), ["mid"]),
    "asinh": ("x.asinh()", lambda x: x.asinh(), ["wide"]),
    "acosh": ("x.acosh()", lambda x: x.acosh(), ["ge1"]),
    "atanh": ("x.atanh()", lambda x: x.atanh(), ["unit"]),
    "pow": ("x.pow(y)", lambda x, y: x.pow(y), ["pos", "mid"]),
    "atan2": ("x.atan2(y)", lambda x, y: x.atan2(y), ["wide", "wide"]),
    "tanh": ("x.tanh()", lambda x: x.tanh(), ["mid"]),
    "erf": ("x.erf()", lambda x: x.erf(), ["mid"]),
    "sigmoid": ("x.sigmoid()", lambda x: x.sigmoid(), ["wide"]),
    "silu": ("silu(x)", lambda x: torch.nn.functional.silu(x), ["wide"]),
    # the bench's gelu_tanh row: gelu's erf, then tanh
    "gelu_tanh": ("gelu(x).tanh()", lambda x: torch.nn.functional.gelu(x).tanh(), ["mid"]),
    # rotary embedding: angles position * 10000^(-2i/K), positions < M
    "rope": ("x * t.cos() + y * t.sin()", lambda x, y, t: x * t.cos() + y * t.sin(), ["wide", "wide", "angle"]),
}
M, K = 4096, 1024


def tdsl_source():
    out = []
    for name, (body, _, ins) in KERNELS.items():
        shape = "[M, K]" if name == "rope" else "[N]"
        args = ", ".join("%s: f32%s" % ("xyt"[i], shape) for i in range(len(ins)))
        out.append("kernel %s_f32(%s) -> f32%s {\n  return %s\n}\n" % (name, args, shape, body))
    return "\n".join(out)


if len(sys.argv) > 1 and sys.argv[1] == "--tdsl":
    sys.stdout.write(tdsl_source())
    sys.exit(0)

T = int(sys.argv[1])
R = int(sys.argv[2])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import ab_util  # noqa: E402

libs = ab_util.load_libs(sys.argv[3:], T)
torch.set_num_threads(T)
MIN_S = float(os.environ.get("MIN_S", "0.25"))
only = [s for s in os.environ.get("ONLY", "").split(",") if s]


def make(kind, shape, g):
    n = math.prod(shape)
    u = torch.rand(n, generator=g)
    if kind == "wide":
        v = (u * 2 - 1) * 10
    elif kind == "unit":
        v = u * 2 - 1
    elif kind == "mid":
        v = (u * 2 - 1) * 4
    elif kind == "pos":
        v = u * 4 + 0.01
    elif kind == "ge1":
        v = 1 + u * 20
    else:  # angle
        pos = torch.arange(shape[0], dtype=torch.float32)[:, None]
        inv = 10000.0 ** (-torch.arange(0, shape[1], dtype=torch.float32) / shape[1])
        return (pos * inv[None, :]).contiguous()
    return v.reshape(shape).contiguous()


for wname, (_, tf, kinds) in KERNELS.items():
    if only and wname not in only:
        continue
    shape = (M, K) if wname == "rope" else (N,)
    g = torch.Generator().manual_seed(0)
    ins = [make(k, shape, g) for k in kinds]
    compiled = torch.compile(tf)
    impls = [("torch", lambda o: torch.add(tf(*ins), 0, out=o)),
             ("compile", lambda o: o.copy_(compiled(*ins)))]
    for lname, m in libs:
        fn = getattr(m, wname + "_f32")
        impls.append((lname, (lambda f: lambda o: f(*ins, out=o))(fn)))
    ref = tf(*[i.double() for i in ins])
    outs = {}
    for name, f in impls:
        o = torch.empty(shape)
        f(o)
        outs[name] = o
        err = ((o.double() - ref).abs().max() / ref.abs().max()).item()
        assert err < 1e-5, (wname, name, err)
    reps, wall, cpu = ab_util.interleave(impls, outs, R, MIN_S, 0.0)
    print("== %s %s threads=%d rounds=%d reps=%d load=%.2f" % (wname, "x".join(map(str, shape)), T, R, reps,
                                                            os.getloadavg()[0]))
    for name, _ in impls:
        c, w = statistics.median(cpu[name]), statistics.median(wall[name])
        rt = statistics.median([cpu["torch"][i] / cpu[name][i] for i in range(R)])
        rc = statistics.median([cpu["compile"][i] / cpu[name][i] for i in range(R)])
        print("  %-10s cpu %8.2f ms  wall %8.2f ms  speed / torch %5.2f  / compile %5.2f" % (name, c * 1e3, w * 1e3, rt, rc))
    sys.stdout.flush()
