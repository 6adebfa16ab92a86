# test_tdsl.py — the tdsl Python package against PyTorch: kernels called on
# NumPy arrays and PyTorch tensors (zero-copy through DLPack), results
# compared with PyTorch under spec §9's tolerances; results' framework,
# strides and out=; scalars; bool, f16 and bf16; the entry checks as
# exceptions with the runtime's message; compile errors; the disk cache;
# kernel.info, module.report and module.source.
import os
import stat
import sys

import numpy as np
import pytest
import torch

import tdsl

SRC = """\
kernel act(x: f32[N, 64], s: f32) -> f32[N, 64] {
  return gelu(x) * s
}
kernel nhwc(x: f32[N, C, H, W]) -> f32[N, C, H, W] channels_last {
  return x.contiguous(channels_last)
}
kernel mask(x: f32[N], t: f32) -> (bool[N], f32[N]) {
  m = x > t
  return m, where(m, x, 0.0)
}
kernel sel(m: bool[N], x: f32[N], neg: bool) -> f32[N] {
  return where(m, x, where(neg, -x, x * 0))
}
kernel half(x: f16[N], y: bf16[N]) -> (f16[N], bf16[N]) {
  return x * 2, y + 1
}
kernel isum(x: i32[N, M], k: i64) -> i64[N] {
  return x.sum(1) + k
}
kernel tr(x: f32[N, M] strided) -> f32[M, N] {
  return x.t().contiguous()
}
kernel total(x: f32[N], s: f32[]) -> f32[] {
  return x.sum() * s
}
kernel mlp(x: f32[N, 64], w1: f32[128, 64], b1: f32[128], w2: f32[10, 128], b2: f32[10]) -> (f32[N, 10], i64[N]) {
  h = gelu(x @ w1.T + b1)
  logits = h @ w2.t() + b2
  return softmax(logits, dim=-1), logits.argmax(1)
}
kernel flat(x: f32[N, C, H, W]) -> f32[N, C*H*W] {
  return x.reshape(N, C * H * W)
}
kernel add(x: f32[N, 3], y: f32[N, 3]) -> f32[N, 3] {
  return x + y
}
kernel scalars(x: f32[N], a: f16, b: bf16, c: f64, d: i8, e: u8) -> f32[N] {
  return x * a + b + c + d + e
}
kernel rows(x: f32[N, 3], idx: i64[M]) -> f32[M, 3] {
  return x.index_select(0, idx)
}
"""

F32 = dict(rtol=1e-5, atol=1e-6)
F32_RED = dict(rtol=1e-4, atol=1e-5)


@pytest.fixture
def m(tdslc):
    return tdsl.compile(SRC)


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


# ---- results against PyTorch ---------------------------------------------

def test_numpy_in_numpy_out(m):
    x = rand(5, 64)
    y = m.act(x.numpy(), 1.5)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == (5, 64)
    np.testing.assert_allclose(y, (torch.nn.functional.gelu(x) * 1.5).numpy(), **F32)


def test_torch_in_torch_out(m):
    x = rand(7, 64)
    y = m.act(x, 0.5)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32
    torch.testing.assert_close(y, torch.nn.functional.gelu(x) * 0.5, **F32)


def test_mixed_frameworks_give_numpy(m):
    x, y = rand(4, 3), rand(4, 3, seed=1)
    z = m.add(x, y.numpy())
    assert isinstance(z, np.ndarray)
    np.testing.assert_allclose(z, (x + y).numpy(), **F32)


def test_symbolic_result_sizes(m):
    x = rand(2, 3, 4, 5)
    y = m.flat(x)
    assert y.shape == (2, 60)
    torch.testing.assert_close(y, x.reshape(2, 60))
    assert m.flat(x.numpy()[:0]).shape == (0, 60)


def test_several_results_mlp(m):
    x, w1, b1 = rand(6, 64), rand(128, 64, seed=1) * 0.1, rand(128, seed=2)
    w2, b2 = rand(10, 128, seed=3) * 0.1, rand(10, seed=4)
    p, idx = m.mlp(x, w1, b1, w2, b2)
    logits = torch.nn.functional.gelu(x @ w1.T + b1) @ w2.t() + b2
    torch.testing.assert_close(p, torch.softmax(logits, dim=-1), **F32_RED)
    assert idx.dtype == torch.int64
    assert torch.equal(idx, logits.argmax(1))
    p2, idx2 = m.mlp(*(t.numpy() for t in (x, w1, b1, w2, b2)))
    np.testing.assert_allclose(p2, p.numpy(), **F32_RED)


def test_channels_last_result_keeps_its_strides(m):
    x = rand(2, 3, 4, 5)
    y = m.nhwc(x)
    assert y.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(y, x)
    yn = m.nhwc(x.numpy())
    assert yn.strides == tuple(4 * s for s in (60, 1, 15, 3))
    np.testing.assert_array_equal(yn, x.numpy())


def test_strided_parameter_and_views(m):
    base = rand(6, 8)
    for x in (base.t(), base[::2, 1:], base.t()[1:, ::3]):
        torch.testing.assert_close(m.tr(x), x.t().contiguous())
        xn = x.numpy()
        np.testing.assert_array_equal(m.tr(xn), xn.T)
    v = rand(10)
    torch.testing.assert_close(m.total(v[3:], 1.0), v[3:].sum(), **F32_RED)


def test_zero_dim_tensor_from_python_number(m):
    x = rand(9)
    y = m.total(x, 2.0)
    assert y.shape == ()
    torch.testing.assert_close(y, x.sum() * 2, **F32_RED)
    torch.testing.assert_close(m.total(x, torch.tensor(3.0)), x.sum() * 3, **F32_RED)


def test_bool_in_and_out(m):
    x = rand(11)
    b, v = m.mask(x, 0.25)
    assert b.dtype == torch.bool and torch.equal(b, x > 0.25)
    torch.testing.assert_close(v, torch.where(x > 0.25, x, torch.zeros(())))
    bn, _ = m.mask(x.numpy(), 0.25)
    assert bn.dtype == np.bool_ and np.array_equal(bn, x.numpy() > 0.25)
    for mk in (b, bn):
        for neg in (True, False):
            y = m.sel(mk, x if mk is b else x.numpy(), neg)
            want = torch.where(x > 0.25, x, -x if neg else x * 0)
            np.testing.assert_allclose(np.asarray(y), want.numpy())


def test_half_types(m):
    x, y = rand(8, dtype=torch.float16), rand(8, dtype=torch.bfloat16, seed=1)
    a, b = m.half(x, y)
    assert a.dtype == torch.float16 and b.dtype == torch.bfloat16
    torch.testing.assert_close(a, x * 2, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(b, y + 1, rtol=1e-2, atol=1e-2)
    # NumPy: f16 as itself, bf16 as its uint16 bits (as tdslc run does)
    ybits = y.view(torch.int16).numpy().view(np.uint16)
    an, bn = m.half(x.numpy(), ybits)
    assert an.dtype == np.float16 and bn.dtype == np.uint16
    np.testing.assert_array_equal(an, a.numpy())
    np.testing.assert_array_equal(bn.view(np.int16), b.view(torch.int16).numpy())


def test_integers_and_integer_scalars(m):
    x = torch.randint(-100, 100, (4, 5), dtype=torch.int32)
    y = m.isum(x, 7)
    assert y.dtype == torch.int64 and torch.equal(y, x.sum(1) + 7)
    assert np.array_equal(m.isum(x.numpy(), np.int64(-2)), (x.sum(1) - 2).numpy())
    with pytest.raises(TypeError, match="expects an integer"):
        m.isum(x, 1.5)
    with pytest.raises(OverflowError, match="out of range"):
        m.isum(x, 2 ** 63)


def test_scalar_types(m):
    x = rand(6)
    args = (1.5, 2.5, 0.25, -3, 200)
    want = x * torch.tensor(1.5, dtype=torch.float16) + torch.tensor(2.5, dtype=torch.bfloat16)
    want = want + torch.tensor(0.25, dtype=torch.float64) + torch.tensor(-3, dtype=torch.int8) \
        + torch.tensor(200, dtype=torch.uint8)
    torch.testing.assert_close(m.scalars(x, *args), want, **F32)
    # f16 and bf16 scalars are rounded to their type: 1 + 2**-8 is a bf16 tie
    y = m.scalars(np.ones(1, np.float32), 1 + 2 ** -10, 1 + 2 ** -8, 0, 0, 0)
    assert y.tolist() == [1 + 2 ** -10 + 1]
    with pytest.raises(OverflowError, match="'e' \\(u8\\).*256 is out of range"):
        m.scalars(x, 1, 1, 1, 1, 256)
    with pytest.raises(TypeError, match="expects a number"):
        m.scalars(x, "1", 1, 1, 1, 1)


def test_keyword_arguments_and_binding_errors(m):
    x = rand(3, 64)
    torch.testing.assert_close(m.act(s=2.0, x=x), torch.nn.functional.gelu(x) * 2, **F32)
    with pytest.raises(TypeError, match="missing argument: s"):
        m.act(x)
    with pytest.raises(TypeError, match="takes 2 arguments"):
        m.act(x, 1.0, 2.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'y'"):
        m.act(x, 1.0, y=1)
    with pytest.raises(TypeError, match="__dlpack__"):
        m.act([1.0, 2.0], 1.0)


def test_out_argument(m):
    x, y = rand(4, 3), rand(4, 3, seed=1)
    out = torch.empty(4, 3)
    assert m.add(x, y, out=out) is out
    torch.testing.assert_close(out, x + y)
    outn = np.empty((4, 3), np.float32)
    m.add(x.numpy(), y.numpy(), out=outn)
    np.testing.assert_allclose(outn, (x + y).numpy())
    b, v = np.empty(5, np.bool_), np.empty(5, np.float32)
    assert m.mask(np.arange(5, dtype=np.float32), 2.0, out=(b, v)) == (b, v)
    assert b.tolist() == [False, False, False, True, True]
    with pytest.raises(tdsl.KernelError, match="TDSL_E_SHAPE") as e:
        m.add(x, y, out=torch.empty(5, 3))
    assert "out0" in e.value.message
    with pytest.raises(tdsl.KernelError, match="TDSL_E_OVERLAP"):
        m.add(x, y, out=x)
    with pytest.raises(TypeError, match="2 results but out= gives 1"):
        m.mask(x[0], 0.0, out=b)


def test_read_only_numpy_and_grad_tensors(m):
    x = np.linspace(-1, 1, 64 * 2, dtype=np.float32).reshape(2, 64)
    x.setflags(write=False)
    ref = torch.nn.functional.gelu(torch.from_numpy(x.copy())).numpy()
    np.testing.assert_allclose(m.act(x, 1.0), ref, **F32)
    t = torch.from_numpy(x.copy()).requires_grad_()
    np.testing.assert_allclose(m.act(t, 1.0).numpy(), ref, **F32)


def test_zero_copy_and_capsules_released(m):
    x = np.zeros((3, 3), np.float32)
    out = np.empty((3, 3), np.float32)
    before = sys.getrefcount(x), sys.getrefcount(out)
    for _ in range(50):
        m.add(x, x, out=out)
    # each call's DLManagedTensor was deleted (it holds a reference)
    assert (sys.getrefcount(x), sys.getrefcount(out)) == before
    # the kernel wrote into the caller's memory: out aliases t's storage
    t = torch.zeros(3, 3)
    m.add(x, np.ones((3, 3), np.float32), out=t.numpy())
    assert float(t.sum()) == 9.0


# ---- the entry checks as exceptions ----------------------------------------

@pytest.mark.parametrize("args, name, code, fragment", [
    ((np.zeros((2, 64), np.float64), 1.0), "TDSL_E_DTYPE", -3,
     "argument 'x': expected dtype f32, got f64"),
    ((np.zeros((2, 64, 1), np.float32), 1.0), "TDSL_E_RANK", -2,
     "argument 'x': expected rank 2, got rank 3"),
    ((np.zeros((2, 63), np.float32), 1.0), "TDSL_E_SHAPE", -5,
     "argument 'x': dim 1: expected 64, got 63"),
    ((np.zeros((64, 2), np.float32).T, 1.0), "TDSL_E_LAYOUT", -8,
     "expected stride 1 for a contiguous tensor"),
])
def test_entry_check_errors(m, args, name, code, fragment):
    with pytest.raises(tdsl.KernelError) as e:
        m.act(*args)
    err = e.value
    assert isinstance(err, tdsl.TdslError)
    assert (err.name, err.code, err.kernel) == (name, code, "act")
    assert "kernel act" in err.message and fragment in err.message, err.message
    assert str(err) == "%s: %s" % (name, err.message)


def test_symbol_mismatch_and_torch_errors(m):
    with pytest.raises(tdsl.KernelError, match="TDSL_E_SYMBOL") as e:
        m.add(torch.zeros(2, 3), torch.zeros(4, 3))
    assert "N" in e.value.message
    with pytest.raises(tdsl.KernelError, match="TDSL_E_DTYPE"):
        m.add(torch.zeros(2, 3, dtype=torch.float64), torch.zeros(2, 3))


# ---- compiling, the cache, info and report ---------------------------------

def test_index_out_of_range(m):
    x = rand(5, 3)
    idx = torch.tensor([4, 0, 2])
    assert torch.equal(m.rows(x, idx), x.index_select(0, idx))
    out = torch.full((3, 3), 7.0)
    with pytest.raises(tdsl.KernelIndexError) as e:
        m.rows(x, torch.tensor([4, 5, 0]), out=out)
    err = e.value
    assert isinstance(err, IndexError) and isinstance(err, tdsl.KernelError)
    assert (err.name, err.code) == ("TDSL_E_INDEX", -17)
    assert err.message == ("kernel 'rows': index at 41:12: index 5 is out of range for "
                           "dim 0 of 'x' (size 5)"), err.message
    assert torch.equal(out, torch.full((3, 3), 7.0))  # nothing written


def test_compile_errors(tdslc):
    with pytest.raises(tdsl.CompileError) as e:
        tdsl.compile("kernel f(x: f32[3]) -> f32[3] {\n  return y\n}\n")
    assert e.value.returncode == 1
    assert "source.tdsl:2:" in e.value.diagnostics and "error:" in e.value.diagnostics
    with pytest.raises(ValueError, match="opt"):
        tdsl.compile(SRC, opt=4)
    with pytest.raises(ValueError, match="target"):
        tdsl.compile(SRC, target="arm")
    with pytest.raises(tdsl.CompileError, match="no kernel named 'nope'"):
        tdsl.compile(SRC, kernels=["nope"])


def _counting_tdslc(tmp_path, tdslc):
    """A tdslc wrapper that logs every compile (not --version)."""
    log = tmp_path / "compiles.log"
    w = tmp_path / "tdslc-wrapper"
    w.write_text('#!/bin/sh\n[ "$1" = --version ] || echo "$@" >> "%s"\nexec "%s" "$@"\n'
                 % (log, os.path.abspath(tdslc)))
    w.chmod(w.stat().st_mode | stat.S_IEXEC)
    return w, log


def test_disk_cache(tmp_path, tdslc, monkeypatch, cache):
    w, log = _counting_tdslc(tmp_path, tdslc)
    monkeypatch.setenv("TDSLC", str(w))
    a = tdsl.compile(SRC)
    assert not a.from_cache and log.read_text().count("\n") == 1
    b = tdsl.compile(SRC)
    assert b.from_cache and b.path == a.path
    assert log.read_text().count("\n") == 1, "a second compile ran tdslc again"
    assert os.path.dirname(a.path).startswith(str(cache))
    c = tdsl.compile(SRC, opt=0)
    d = tdsl.compile(SRC + "\n")
    assert not c.from_cache and not d.from_cache and log.read_text().count("\n") == 3
    x = rand(2, 3)
    torch.testing.assert_close(c.add(x, x), x + x)
    # a file compiles like its text, and hits the same entry
    p = tmp_path / "k.tdsl"
    p.write_text(SRC)
    e = tdsl.compile(p)
    assert e.from_cache and e.path == a.path
    # XDG_CACHE_HOME when TDSL_CACHE_DIR is unset
    monkeypatch.delenv("TDSL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tdsl.cache_dir() == str(tmp_path / "xdg" / "tdsl")
    f = tdsl.compile(SRC, kernels=["add"])
    assert f.path.startswith(str(tmp_path / "xdg" / "tdsl"))


def test_cache_key_follows_the_cost_file(tmp_path, tdslc, monkeypatch, cache):
    # TDSL_COSTS steers tdslc's passes: a library compiled under one cost
    # file is not reused under another (or none), and the report names it.
    w, log = _counting_tdslc(tmp_path, tdslc)
    monkeypatch.setenv("TDSLC", str(w))
    monkeypatch.delenv("TDSL_COSTS", raising=False)
    a = tdsl.compile(SRC)
    costs = tmp_path / "m.costs"
    costs.write_text("tdsl-costs 1\nfamily cpu\nbw_gbs 11\n")
    monkeypatch.setenv("TDSL_COSTS", str(costs))
    b = tdsl.compile(SRC)
    assert not b.from_cache and b.path != a.path
    assert tdsl.compile(SRC).from_cache
    costs.write_text("tdsl-costs 1\nfamily cpu\nbw_gbs 12\n")
    assert not tdsl.compile(SRC).from_cache
    assert log.read_text().count("\n") == 3


def test_info_report_source(m):
    info = m.act.info
    assert info["name"] == "act" and info["symbols"] == ["N"]
    assert info["params"] == [
        {"name": "x", "kind": "tensor", "dtype": "f32", "shape": ["N", "64"],
         "layout": "contiguous"},
        {"name": "s", "kind": "scalar", "dtype": "f32"}]
    assert info["results"] == [{"name": "out0", "kind": "tensor", "dtype": "f32",
                                "shape": ["N", "64"], "layout": "contiguous"}]
    assert info["scratch_bytes"] == 0 and info["device"] == "cpu"
    assert m.flat.info["symbols"] == ["N", "C", "H", "W"]
    assert m.flat.info["results"][0]["shape"] == ["N", "C*H*W"]
    assert m.nhwc.info["results"][0]["layout"] == "channels_last"
    assert m.act.signature == "act(x: f32[N, 64], s: f32) -> f32[N, 64]"
    assert m.source == SRC
    names = [k["name"] for k in m.report["kernels"]]
    assert names == list(m.kernels) and "act" in dir(m)
    fused = [d for d in m.report["kernels"][0]["decisions"] if d["pass"] == "fuse"]
    assert fused and all({"line", "col", "message"} <= set(d) for d in fused)
    with pytest.raises(AttributeError, match="no kernel"):
        m.nothing


def test_kernel_selection_and_threads(tdslc):
    m = tdsl.compile(SRC, kernels=["add", "tr"], opt=3, target="x86-64")
    assert list(m.kernels) == ["tr", "add"]  # file order
    m.set_num_threads(1)
    assert m.get_num_threads() == 1
    x = rand(1000, 3)
    torch.testing.assert_close(m.add(x, x), 2 * x)
    m.set_num_threads(0)


def test_examples_compile_from_path(tdslc):
    from conftest import SOURCE_DIR
    m = tdsl.compile(os.path.join(SOURCE_DIR, "examples", "mlp.tdsl"))
    assert m.kernels and m.report["kernels"]
    assert m.report["file"].endswith("mlp.tdsl")


def test_finding_tdslc(tmp_path, tdslc, monkeypatch):
    assert tdsl.find_tdslc() == os.path.abspath(tdslc)
    # PATH (an installed prefix's bin/) when TDSLC is unset
    bindir = tmp_path / "prefix" / "bin"
    bindir.mkdir(parents=True)
    os.symlink(os.path.abspath(tdslc), bindir / "tdslc")
    monkeypatch.delenv("TDSLC")
    monkeypatch.setenv("PATH", str(bindir))
    assert tdsl.find_tdslc() == str(bindir / "tdslc")
    monkeypatch.setenv("TDSLC", str(tmp_path / "missing"))
    with pytest.raises(tdsl.CompileError, match="TDSLC names"):
        tdsl.compile(SRC)


def test_calls_from_several_threads(m):
    from concurrent.futures import ThreadPoolExecutor

    def work(i):
        x = rand(3 + i, 3, seed=i)
        if i % 2:
            try:
                m.add(x, rand(3 + i, 4))
            except tdsl.KernelError as e:
                return e.message
            return "no error"
        torch.testing.assert_close(m.add(x, x), 2 * x)
        return "ok"

    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(work, range(16)))
    for i, g in enumerate(got):
        assert (g == "ok") if i % 2 == 0 else ("argument 'y': dim 1: expected 3, got 4" in g), g
