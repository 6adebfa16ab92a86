"""conv_ab.py — f32 conv2d of tdsl libraries against PyTorch eager (oneDNN)
in one process, interleaved: for a noisy shared machine, where separate
runs of run.sh move single conv ratios by 1.5x (bench/README.md).

usage: [CASES=nhwc,nchw,7x7] [N=..] [COMPILE=1] [DTYPE=bf16] python conv_ab.py THREADS ROUNDS LIB.so[=name] ...
LIB.so: `tdslc bench/kernels.tdsl --emit=so -o LIB.so` (it must hold the
kernels of the cases run), built from any
two commits (each library carries its own runtime and thread pool, so
they can be compared in one process).  The cases are the bench rows of
the same names:
  nhwc  conv3x3_nhwc [32,64,56,56] x [64,64,3,3], padding 1, channels-last;
        torch: F.conv2d on channels-last input and weight;
  nchw  conv3x3_nchw, the same in NCHW (tdsl's auto layout); torch: NCHW
        (its eager default) and channels-last;
  7x7   conv3x3_7x7_nhwc [8,512,7,7] x [512,512,3,3], channels-last;
  1x1   conv1x1 [32,64,56,56] x [64,64,1,1], NCHW; torch: NCHW and
        channels-last;
  1x1cl conv1x1_nhwc, the same channels-last; torch: channels-last;
  nchwbr conv_bias_relu, nchw's conv + a bias + relu (NCHW); torch: NCHW
        and channels-last, relu(conv2d(x, w) + c.view(1, O, 1, 1));
  convt4 convt4x4_s2, conv_transpose2d [8,64,56,56] x [64,32,4,4], stride
        2, padding 1, a bias (NCHW; a DCGAN/decoder upsampling);
  convt2 convt2x2_s2, conv_transpose2d [8,64,56,56] x [64,32,2,2], stride
        2 (NCHW; a U-Net upsampling).
DTYPE=bf16 runs the bf16 rows instead (input, weight and output bf16;
the case nhwc only: conv3x3_bf16_nhwc, torch on bf16 channels-last
tensors; results checked against f64 within bf16's rounding).
N overrides the batch of every case; COMPILE=1 adds torch.compile
(Inductor) of the torch row, writing into an output allocated once as
in peers.py.  Each round runs every
implementation for about MIN_S seconds after a GAP-second pause, the
order reversed every other round; it prints per implementation the
median wall time per call, the median process CPU time per call (all
threads), and torch's time over it (wall medians, the median of
per-round ratios with their range, CPU medians).  Results are checked
against torch first.  Needs torch and the python/ package (found next
to this file).
"""
import os
import statistics
import sys

T = int(sys.argv[1])
R = int(sys.argv[2])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import ab_util  # noqa: E402

libs = ab_util.load_libs(sys.argv[3:], T)
torch.set_num_threads(T)
MIN_S = float(os.environ.get("MIN_S", "0.3"))
GAP = float(os.environ.get("GAP", "0.2"))
CL = torch.channels_last
NCHW, CF = torch.contiguous_format, [("torch", torch.contiguous_format), ("torch-cl", CL)]
# case: kernel, [N, C, H, W], O, kernel size, tdsl's memory format, torch's formats
CASES = {"nhwc": ("conv3x3_nhwc", [32, 64, 56, 56], 64, 3, CL, [("torch", CL)]),
         "nchw": ("conv3x3_nchw", [32, 64, 56, 56], 64, 3, NCHW, CF),
         "7x7": ("conv3x3_7x7_nhwc", [8, 512, 7, 7], 512, 3, CL, [("torch", CL)]),
         "1x1": ("conv1x1", [32, 64, 56, 56], 64, 1, NCHW, CF),
         "1x1cl": ("conv1x1_nhwc", [32, 64, 56, 56], 64, 1, CL, [("torch", CL)]),
         "nchwbr": ("conv_bias_relu", [32, 64, 56, 56], 64, 3, NCHW, CF),
         "convt4": ("convt4x4_s2", [8, 64, 56, 56], 32, 4, NCHW, [("torch", NCHW)]),
         "convt2": ("convt2x2_s2", [8, 64, 56, 56], 32, 2, NCHW, [("torch", NCHW)])}
# conv_transpose2d cases: stride, padding, with a bias
CONVT = {"convt4": (2, 1, True), "convt2": (2, 0, False)}
BF16 = os.environ.get("DTYPE", "f32") == "bf16"
DT = torch.bfloat16 if BF16 else torch.float32
if BF16:
    CASES = {"nhwc": ("conv3x3_bf16_nhwc", [32, 64, 56, 56], 64, 3, CL, [("torch", CL)])}
for case in os.environ.get("CASES", "nhwc" if BF16 else "nhwc,nchw,7x7").split(","):
    kname, shape, O, ks, fmt, peers = CASES[case]
    pad = ks // 2
    convt = CONVT.get(case)
    if "N" in os.environ:
        shape = [int(os.environ["N"])] + shape[1:]
    torch.manual_seed(0)
    x = torch.randn(*shape).contiguous(memory_format=fmt)
    wshape = (shape[1], O, ks, ks) if convt else (O, shape[1], ks, ks)
    w = torch.randn(*wshape) * (2.0 / (ks * ks * shape[1])) ** 0.5
    x, w = x.to(DT), w.to(DT)
    bias = case == "nchwbr"
    c = torch.randn(O).to(DT)

    def tconv(x, w):  # the case's torch expression
        if convt:
            return F.conv_transpose2d(x, w, c.to(x.dtype) if convt[2] else None,
                                      stride=convt[0], padding=convt[1])
        y = F.conv2d(x, w, padding=pad)
        return torch.relu(y + c.view(1, O, 1, 1)) if bias else y
    impls = []
    for pname, pf in peers:
        xp, wp = x.contiguous(memory_format=pf), w.contiguous(memory_format=pf)
        # F.conv2d has no out=: torch allocates its result in each call
        impls.append((pname, (lambda xp, wp: lambda o: tconv(xp, wp))(xp, wp)))
    if os.environ.get("COMPILE"):  # Inductor, as peers.py builds it: into an output allocated once
        ci = torch.empty(tconv(x, w).shape, dtype=DT).contiguous(memory_format=fmt)
        cf = torch.compile(lambda: ci.copy_(tconv(x, w)), fullgraph=True, dynamic=False)
        impls.append(("inductor", lambda o: cf()))
    for name, m in libs:
        args = (x, w, c) if bias or (convt and convt[2]) else (x, w)
        impls.append((name, (lambda k, a: lambda o: k(*a, out=o))(getattr(m, kname), args)))
    ref = tconv(x.double(), w.double())
    outs = {}
    for name, f in impls:
        o = torch.empty(ref.shape, dtype=DT).contiguous(memory_format=fmt)
        r = f(o)
        if name.startswith("torch") or name == "inductor":
            o = r
        outs[name] = o
        err = (o.double() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
        assert err < (1e-2 if BF16 else 1e-4), (name, err)
    reps, wall, cpu = ab_util.interleave(impls, outs, R, MIN_S, GAP)
    N, C, H, W = shape
    gf = 2.0 * N * O * H * W * C * ks * ks / 1e9  # a transposed conv: per input pixel
    print("== %s %s %s threads=%d rounds=%d reps=%d load=%.2f"
          % (case, "bf16" if BF16 else "f32", shape, T, R, reps, os.getloadavg()[0]))
    tw, tc = statistics.median(wall["torch"]), statistics.median(cpu["torch"])
    for name, _ in impls:
        w_, c = statistics.median(wall[name]), statistics.median(cpu[name])
        rr = [wall["torch"][i] / wall[name][i] for i in range(R)]
        print("  %-10s wall %8.2f ms (%6.1f GF/s) min %8.2f  cpu %8.2f ms  torch/x: wall %5.2f"
              " per-round %5.2f (%4.2f-%4.2f) cpu %5.2f"
              % (name, w_ * 1e3, gf / w_, min(wall[name]) * 1e3, c * 1e3, tw / w_,
                 statistics.median(rr), min(rr), max(rr), tc / c))
    sys.stdout.flush()
