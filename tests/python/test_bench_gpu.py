# test_bench_gpu.py — bench/gpu's logic (not its speed): build.sh --target
# host writes a self-contained directory, and bench_gpu.py --device cpu
# runs a few workloads from it with PyTorch CPU tensors, checks tdsl's
# results and writes the JSON; call_overhead.py --device cpu runs from it
# too.  The GPU run itself is bench/README.md's.
import json
import os
import subprocess
import sys


SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_gpu_bench_dry_run(tdslc, tmp_path):
    out = tmp_path / "gpubench"
    env = dict(os.environ, TDSLC=tdslc)
    subprocess.run(["bash", os.path.join(SOURCE_DIR, "bench", "gpu", "build.sh"), str(out),
                    "--target", "host"], check=True, env=env)
    names = set(os.listdir(out))
    assert {"kernels_host.so", "kernels_host.report.json", "build.txt", "tdsl",
            "bench_gpu.py", "call_overhead.py"} <= names
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    assert size < 5 << 20
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # its own tdsl copy
    r = subprocess.run([os.environ.get("TDSL_PYTHON", sys.executable), "bench_gpu.py",
                        "--device", "cpu", "--only", "ew_chain,softmax,matmul 1024,sum",
                        "--runs", "2", "--json", str(tmp_path / "r.json")],
                       cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout
    assert "| workload | tdsl ms |" in r.stdout and "MISMATCH" not in r.stdout
    res = json.load(open(tmp_path / "r.json"))
    rows = {row["workload"]: row for row in res["rows"]}
    assert set(rows) == {"ew_chain", "softmax [4096,1024]", "matmul 1024³", "sum 32M"}
    for row in rows.values():
        assert row["check"]["ok"], row
        assert row["tdsl"]["ms"] > 0 and row["eager"]["ms"] > 0 and row["copy"]["ms"] > 0
    assert rows["matmul 1024³"]["flops"] == 2.0 * 32 ** 3
    r = subprocess.run([os.environ.get("TDSL_PYTHON", sys.executable), "call_overhead.py",
                        "--device", "cpu", "--only", "ew_chain,softmax_last", "--runs", "2",
                        "--iters", "20", "--json", str(tmp_path / "o.json")],
                       cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout
    res = json.load(open(tmp_path / "o.json"))
    assert [row["kernel"] for row in res["rows"]] == ["ew_chain", "softmax_last"]
    for row in res["rows"]:
        us = row["us"]
        assert set(us) == {"tdsl out=", "tdsl general", "tdsl alloc", "bound", "eager",
                           "copy_", "python"}
        assert all(us[k] > 0 for k in us if k != "python")
