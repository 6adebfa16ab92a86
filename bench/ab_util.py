"""ab_util.py — what the interleaved A/B scripts (gemm_ab.py, conv_ab.py,
math_ab.py) share: loading tdsl libraries from the command line, and the
interleaved timing loop.  Needs the python/ package (found next to this
file); used only by those scripts."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import tdsl  # noqa: E402


def load_libs(args, threads):
    """[(name, module)] for arguments LIB.so[=name], each set to `threads`."""
    libs = []
    for arg in args:
        path, _, name = arg.partition("=")
        m = tdsl.load(path)
        m.set_num_threads(threads)
        libs.append((name or os.path.basename(path), m))
    return libs


def interleave(impls, outs, rounds, min_s, gap=0.0):
    """Times every (name, f) of impls, f(out) writing outs[name], for
    `rounds` rounds of about min_s seconds each (the repetitions sized
    from one call of the first), after a `gap`-second pause (so that the
    spinning threads of the one before have gone to sleep), the order
    reversed every other round.  Returns (reps, wall, cpu): per name the
    list of per-round wall and process CPU seconds per call."""
    t0 = time.perf_counter()
    impls[0][1](outs[impls[0][0]])
    reps = max(3, int(min_s / max(time.perf_counter() - t0, 1e-6)))
    wall = {n: [] for n, _ in impls}
    cpu = {n: [] for n, _ in impls}
    for r in range(rounds):
        for name, f in (impls if r % 2 == 0 else impls[::-1]):
            if gap:
                time.sleep(gap)
            o = outs[name]
            f(o)
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(reps):
                f(o)
            t1, c1 = time.perf_counter(), time.process_time()
            wall[name].append((t1 - t0) / reps)
            cpu[name].append((c1 - c0) / reps)
    return reps, wall, cpu
