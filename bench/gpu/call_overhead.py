#!/usr/bin/env python3
"""call_overhead.py — the host time of one tdsl kernel call from Python,
split into its parts, against PyTorch's own per-op cost (bench/README.md,
"GPU": call overhead).

Run in the directory bench/gpu/build.sh wrote (kernels_cuda.so, the tdsl
package, this script), or from the source tree:

    python3 call_overhead.py                 # cuda:0
    python3 call_overhead.py --device cpu    # kernels_host.so, CPU tensors
    python3 call_overhead.py --so lib.so --iters 2000 --runs 9 --json out.json

Each workload is one of bench_gpu.py's kernels on tiny tensors (the
device's work is a few µs, so the host's part is what is measured).  Per
call, median of --runs batches of --iters back-to-back calls, the host
time (time.perf_counter around the batch, the device synchronized before
and after but not inside) of:
  tdsl out=      k(*args, out=o): the default path (for PyTorch tensors
                 the direct path: descriptors from the tensors' metadata)
  tdsl general   the same call through the general path (DLPack exports,
                 __dlpack__(stream=), the package's device checks): what
                 every call cost before the direct path
  tdsl alloc     k(*args): the shape query and a new result each call
  bound          Kernel.bind(...)(): the C entry and the launch alone
  eager          the same computation in PyTorch eager (out= where it has one)
  copy_          o.copy_(x): one PyTorch op of the smallest kind
The variants are interleaved batch by batch, so that a machine's drift
touches them alike; a row whose call did not take the direct path says
so.  On CUDA (without --only) two full-size reductions follow, timed in
batches of 1, 10 and 100 calls with a synchronization between batches.  "python" = tdsl out= minus bound: what Python adds
to the C entry.  On CUDA the kernels are enqueued on PyTorch's current
stream and the host time is that of enqueuing them (the device keeps up:
the tensors are tiny).
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (HERE, os.path.join(HERE, "..", "..", "python")):
    if os.path.isfile(os.path.join(_p, "tdsl", "__init__.py")):
        sys.path.insert(0, os.path.abspath(_p))
        break

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tdsl  # noqa: E402
from tdsl import _kernel  # noqa: E402


def workloads(dev):
    """(name, kernel, args, out, eager(out, *args)) on tiny tensors."""
    g = torch.Generator(device=dev).manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g, device=dev)

    x4 = randn(1, 8, 4, 4)
    a, b = randn(8).abs() + 0.5, randn(8)
    m = randn(8, 32)
    w, c = randn(32).abs() + 0.5, randn(32)
    frames = torch.randint(0, 256, (1, 4, 4, 3), generator=g, device=dev, dtype=torch.uint8)
    mean, std = randn(3).abs() + 0.5, randn(3).abs() + 0.5

    def ew(out, x, a, b):
        av, bv = a.view(1, -1, 1, 1), b.view(1, -1, 1, 1)
        return torch.div(torch.relu((x * av + bv) * 0.5 - bv), av, out=out)

    def pre(out, f, mean, std):
        x = f.permute(0, 3, 1, 2).float() / 255.0
        return torch.div(x - mean.view(1, 3, 1, 1), std.view(1, 3, 1, 1), out=out)

    return [
        ("ew_chain [1,8,4,4]", "ew_chain", [x4, a, b], torch.empty_like(x4), ew),
        ("preprocess [1,4,4,3]", "preprocess", [frames, mean, std],
         torch.empty(1, 3, 4, 4, device=dev), pre),
        ("permute_copy [1,8,4,4]", "permute_copy", [x4], torch.empty(1, 4, 4, 8, device=dev),
         lambda out, x: out.copy_(x.permute(0, 2, 3, 1))),
        ("softmax [8,32]", "softmax_last", [m], torch.empty_like(m),
         lambda out, x: torch.softmax(x, -1)),
        ("layer_norm [8,32]", "layer_norm_last", [m, w, c], torch.empty_like(m),
         lambda out, x, w, b: F.layer_norm(x, [x.shape[-1]], w, b)),
    ]


def measure(variants, iters, runs, sync, stat=statistics.median):
    """{name: µs per call (stat of the batches)} of the variants (name ->
    f), interleaved."""
    times = {name: [] for name in variants}
    for f in variants.values():  # warm-up
        for _ in range(max(10, iters // 10)):
            f()
    sync()
    for _ in range(runs):
        for name, f in variants.items():
            sync()
            t0 = time.perf_counter()
            for _ in range(iters):
                f()
            t1 = time.perf_counter()
            sync()
            times[name].append((t1 - t0) * 1e6 / iters)
    return {name: stat(v) for name, v in times.items()}


def batches(mod, dev, opts, sync):
    """Two full-size reductions (bench_gpu.py's mse and sum rows): host µs
    per call of k(*args, out=o) and of its bound call in batches of 1, 10
    and 100 calls with a synchronization between batches: a cost per batch
    (the synchronization's aftermath) shows as a per-call time falling with
    the batch size."""
    g = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn(4096, 4096, generator=g, device=dev)
    b = torch.randn(4096, 4096, generator=g, device=dev)
    x = torch.randn(32 << 20, generator=g, device=dev)
    print()
    print("full-size reductions: host µs per call by calls per batch (a sync between batches)")
    print("| call | 1 | 10 | 100 |")
    print("|---|---:|---:|---:|")
    for name, kname, args in (("mse [4096,4096]", "mse", (a, b)), ("sum 32M", "sum_all", (x,))):
        if kname not in mod.kernels:
            continue
        k = mod.kernels[kname]
        out = torch.empty_like(k(*args))
        bound = k.bind(*args, out=out)
        for label, f in (("%s out=" % name, lambda: k(*args, out=out)), ("%s bound" % name, bound)):
            row = []
            for n in (1, 10, 100):
                t = []
                for _ in range(max(3, opts.runs)):
                    sync()
                    t0 = time.perf_counter()
                    for _ in range(n):
                        f()
                    t.append((time.perf_counter() - t0) * 1e6 / n)
                sync()
                row.append(statistics.median(t))
            print("| %s | %s |" % (label, " | ".join("%.1f" % v for v in row)))
        bound.release()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    ap.add_argument("--so", help="the library (default: kernels_cuda.so, or kernels_host.so "
                                 "for --device cpu, beside this script)")
    ap.add_argument("--iters", type=int, default=1000, help="calls per batch (default 1000)")
    ap.add_argument("--runs", type=int, default=7, help="batches per variant (default 7)")
    ap.add_argument("--only", help="comma list of kernels")
    ap.add_argument("--min", action="store_true",
                    help="the fastest batch instead of the median (a busy machine)")
    ap.add_argument("--json", help="also write the results as JSON here")
    opts = ap.parse_args()
    dev = torch.device(opts.device)
    cuda = dev.type == "cuda"
    if cuda:
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(dev)
    so = opts.so or os.path.join(HERE, "kernels_cuda.so" if cuda else "kernels_host.so")
    mod = tdsl.load(so)

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    print("library: %s (%s); torch %s; python %s; device %s%s" % (
        so, mod.device, torch.__version__, sys.version.split()[0],
        torch.cuda.get_device_name(dev) if cuda else "cpu",
        "; PyTorch's current stream: %#x" % _kernel._cuda_stream(dev.index) if cuda else ""))
    # how often a call went the general path (DLPack) instead of the direct one
    general = [0]
    borrow = _kernel._borrow_as

    def counting(*a, **k):
        general[0] += 1
        return borrow(*a, **k)

    _kernel._borrow_as = counting
    cols = ["tdsl out=", "tdsl general", "tdsl alloc", "bound", "eager", "copy_"]
    print("host µs per call (%s of %d batches of %d calls)" % (
        "fastest" if opts.min else "median", opts.runs, opts.iters))
    print("| workload | %s | python |" % " | ".join(cols))
    print("|---|%s---:|" % ("---:|" * len(cols)))
    rows = []
    only = set(opts.only.split(",")) if opts.only else None
    for name, kname, args, out, eager in workloads(dev):
        if only and kname not in only:
            continue
        if kname not in mod.kernels:
            print("| %s | (no kernel %s in the library) |" % (name, kname))
            continue
        k = mod.kernels[kname]
        k(*args, out=out)  # first call: module load, checks
        before = general[0]
        k(*args, out=out)
        direct = general[0] == before
        bound = k.bind(*args, out=out)
        src = args[0] if args[0].dtype == out.dtype and args[0].numel() == out.numel() \
            else torch.empty_like(out)
        variants = {
            "tdsl out=": lambda: k(*args, out=out),
            "tdsl general": lambda: k._call_general(args, out),
            "tdsl alloc": lambda: k(*args),
            "bound": bound,
            "eager": lambda: eager(out, *args),
            "copy_": lambda: out.copy_(src.view(out.shape) if src.is_contiguous() else src),
        }
        try:
            r = measure(variants, opts.iters, opts.runs, sync, min if opts.min else statistics.median)
        finally:
            bound.release()
        r["python"] = r["tdsl out="] - r["bound"]
        rows.append({"workload": name, "kernel": kname, "us": r, "direct": direct})
        print("| %s%s | %s | %.1f |" % (name, "" if direct else " (general path!)",
                                       " | ".join("%.1f" % r[c] for c in cols), r["python"]))
    if cuda and not opts.only:
        batches(mod, dev, opts, sync)
    print("tdsl out= / tdsl general / tdsl alloc: a Python call (the direct path for PyTorch "
          "tensors / forced through DLPack / results allocated); bound: Kernel.bind()'s "
          "call, the C entry alone; python = tdsl out= - bound.")
    if opts.json:
        with open(opts.json, "w", encoding="utf-8") as f:
            json.dump({"device": str(dev), "torch": torch.__version__, "library": so,
                       "iters": opts.iters, "runs": opts.runs, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
