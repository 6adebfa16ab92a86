#!/usr/bin/env python3
"""blocks.py — the example blocks of examples/blocks/ against PyTorch eager
(and torch.compile where the interpreter's torch has it), in one run.

Needs: torch and numpy, and tdslc (the tdsl Python package finds it as
docs/python.md says: $TDSLC, PATH, or the source tree's build/tdslc).
Benchmark-only: nothing in the build or the tests imports this.

Prints one table: block, shape, tdsl -O2 per call, PyTorch eager,
torch.compile (inductor, "-" where unavailable), and tdsl ÷ the faster peer
as a speed ratio (> 1: tdsl is faster); the decoder rows also say tokens
per second (batch × sequence / time). Threads: tdsl's pool and torch both
get --threads (default 2). Timing: a warm-up call, then the median of
--runs runs of at least --min-ms milliseconds each.

Usage: PYTHONPATH=python bench/.venv/bin/python bench/blocks.py [--threads N]
"""
import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "blocks"))

import torch  # noqa: E402

import blocks_torch as bt  # noqa: E402
import tdsl  # noqa: E402


def per_call(fn, runs, min_ms):
    fn()
    n, t0 = 1, time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-6)
    n = max(1, int(min_ms / 1e3 / one))
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t0) / n)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--min-ms", type=float, default=300)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    compiled = hasattr(torch, "compile")
    rows = [
        ("llama_block", "batch 1, seq 128", bt.llama_block, bt.llama_inputs(1, 128), 128),
        ("llama_block", "batch 8, seq 128", bt.llama_block, bt.llama_inputs(8, 128), 1024),
        ("unet_up", "[1,128,32,32] -> [1,64,64,64]", bt.unet_up, bt.unet_inputs(1, 32, 32), 0),
        ("mbv3_block", "[8,24,56,56] channels-last", bt.mbv3_block, bt.mbv3_inputs(8, 56, 56), 0),
    ]
    print("| block | shape | tdsl -O2 | PyTorch eager | torch.compile | tdsl speed ÷ best peer |")
    print("|---|---|---|---|---|---|")
    for name, shape, ref, args, tokens in rows:
        m = tdsl.compile(bt.source(name), opt=2)
        m.set_num_threads(a.threads)
        call = getattr(m, name).bind(**args)
        t_tdsl = per_call(call, a.runs, a.min_ms)
        call.release()
        with torch.no_grad():
            t_eager = per_call(lambda: ref(**args), a.runs, a.min_ms)
            t_comp = None
            if compiled:
                cref = torch.compile(ref)
                t_comp = per_call(lambda: cref(**args), a.runs, a.min_ms)
        best = min(t for t in (t_eager, t_comp) if t is not None)

        def fmt(t):
            if t is None:
                return "-"
            s = f"{t * 1e3:.2f} ms"
            return s + (f" ({tokens / t:,.0f} tok/s)" if tokens else "")
        print(f"| {name} | {shape} | {fmt(t_tdsl)} | {fmt(t_eager)} | "
              f"{fmt(t_comp)} | {best / t_tdsl:.2f} |", flush=True)


if __name__ == "__main__":
    main()
