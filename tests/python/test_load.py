# test_load.py — tdsl.load() of libraries tdslc --emit=so wrote elsewhere
# (what a machine without tdslc uses), and compile()'s target argument.
import os
import subprocess

import numpy as np
import pytest
import torch

import tdsl
from tdsl import _dlpack as dl

SRC = """\
kernel axpy(x: f32[N], y: f32[N], a: f32) -> f32[N] {
  return x * a + y
}
kernel rowsum(x: f32[M, K]) -> f32[M] {
  return x.sum(1)
}
"""


def build_so(tdslc, tmp_path, emit="so", stem="k"):
    src = tmp_path / "k.tdsl"
    src.write_text(SRC)
    out = tmp_path / (stem + ".so" if emit == "so" else stem)
    subprocess.run([tdslc, str(src), "--emit=" + emit, "-o", str(out)], check=True)
    return tmp_path / (stem + ".so")


def test_load_works_like_compile(tdslc, tmp_path):
    path = build_so(tdslc, tmp_path)
    m = tdsl.load(str(path))
    assert m.path == str(path) and m.device == "cpu" and m.target is None
    assert m.report is None and not m.from_cache
    assert m.source == SRC  # k.tdsl sits beside k.so
    assert list(m.kernels) == ["axpy", "rowsum"]
    x, y = torch.randn(7), torch.randn(7)
    torch.testing.assert_close(m.axpy(x, y, 2.0), x * 2 + y)
    xn = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(m.rowsum(xn), xn.sum(1), rtol=1e-4, atol=1e-5)
    out = torch.empty(7)
    assert m.axpy(x, y, 1.0, out=out) is out
    torch.testing.assert_close(out, x + y)
    c = tdsl.compile(SRC)
    assert m.axpy.info == c.axpy.info
    assert m.rowsum.signature == c.rowsum.signature


def test_load_reads_the_report_beside_it(tdslc, tmp_path):
    path = build_so(tdslc, tmp_path, emit="so,report-json", stem="lib")
    assert path.is_file() and (tmp_path / "lib.report.json").is_file()
    m = tdsl.load(path)  # a pathlib.Path works too
    assert [k["name"] for k in m.report["kernels"]] == ["axpy", "rowsum"]


def test_load_errors(tdslc, tmp_path):
    with pytest.raises(tdsl.TdslError, match="no such file"):
        tdsl.load(tmp_path / "missing.so")
    (tmp_path / "junk.so").write_bytes(b"not an ELF file")
    with pytest.raises(tdsl.TdslError, match="cannot load"):
        tdsl.load(tmp_path / "junk.so")
    c = tmp_path / "other.c"
    c.write_text("int f(void) { return 1; }\n")
    cc = os.environ.get("CC", "cc").split()
    r = subprocess.run(cc + ["-shared", "-fPIC", "-o", str(tmp_path / "other.so"), str(c)])
    if r.returncode == 0:
        with pytest.raises(tdsl.TdslError, match="not a library tdslc"):
            tdsl.load(tmp_path / "other.so")


def test_compile_targets(tdslc):
    for bad in ("cuda:90", "sm_90", "cuda:sm_", "gpu", None):
        with pytest.raises(ValueError, match="target must be"):
            tdsl.compile(SRC, target=bad)
    a = tdsl.compile(SRC, target="host")
    b = tdsl.compile(SRC, target="x86-64-v2")
    assert a.path != b.path and a.target == "host" and b.target == "x86-64-v2"
    assert a.device == b.device == "cpu"


def test_cpu_kernel_refuses_cuda_tensors_with_a_hint(tdslc):
    m = tdsl.compile(SRC)

    class OnGpu:  # a NumPy array that exports itself as on cuda:1
        def __init__(self, a):
            self.a = a

        def __dlpack_device__(self):
            return (2, 1)

        def __dlpack__(self, stream=None):
            assert stream is None  # a CPU kernel passes no stream
            capsule = self.a.__dlpack__()
            t = dl.DLTensor.from_address(dl._get_pointer(capsule, b"dltensor"))
            t.device = dl.DLDevice(2, 1)
            return capsule

    x = torch.randn(4)
    with pytest.raises(tdsl.KernelError) as e:
        m.axpy(x, OnGpu(x.numpy()), 1.0)
    assert e.value.code == -4 and e.value.name == "TDSL_E_DEVICE"
    assert "argument 'y': expected device cpu, got cuda:1" in e.value.message
    assert "compiled for the CPU (target host)" in str(e.value)
    assert "x.cpu()" in str(e.value)


def test_bind_repeats_a_prepared_call(tdslc):
    m = tdsl.compile(SRC)
    x, y, out = torch.randn(9), torch.randn(9), torch.empty(9)
    with m.axpy.bind(x, y, 3.0, out=out) as call:
        assert call() is out
        torch.testing.assert_close(out, x * 3 + y)
        x.mul_(2)  # same storage, new values: the bound call sees them
        call()
        torch.testing.assert_close(out, x * 3 + y)
    with pytest.raises(ValueError, match="released"):
        call()
    call = m.rowsum.bind(np.ones((2, 5), np.float32))  # results allocated once
    np.testing.assert_array_equal(call(), [5, 5])
    call.release()
    with pytest.raises(tdsl.KernelError, match="TDSL_E_SYMBOL"):  # checked at bind()
        m.axpy.bind(x, torch.randn(4), 1.0)
