# test_direct.py — the direct path of a kernel call (_kernel.py): plain
# PyTorch tensors (and, for CPU kernels, NumPy arrays) described from
# their metadata, without DLPack.  Every call here is made twice, through
# the default path and forced through the general (DLPack) path, and the
# two must agree bit for bit: in results, in what they write to out=, and
# in the errors they raise (type and message).  A counter on the general
# path's borrowing says which path a call took.  Runs on CPU tensors (the
# CUDA side of the direct path is the same code plus the device id and
# the stream; test_cuda.py's GPU tests cover it where there is a GPU).
import threading

import numpy as np
import pytest
import torch

import tdsl

SRC = """\
kernel act(x: f32[N, 64], s: f32) -> f32[N, 64] {
  return gelu(x) * s
}
kernel nhwc(x: f32[N, C, H, W]) -> f32[N, C, H, W] channels_last {
  return x.contiguous(channels_last) * 2
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
kernel small(x: i8[N], y: u8[N], a: i8, b: u8, c: i16, d: i32) -> i32[N] {
  return x.to(i32) + y + a + b + c + d
}
kernel tr(x: f32[N, M] strided) -> f32[M, N] {
  return x.t().contiguous()
}
kernel total(x: f32[N], s: f32[]) -> f32[] {
  return x.sum() * s
}
kernel scalars(x: f32[N], a: f16, b: bf16, c: f64) -> f32[N] {
  return x * a + b + c
}
kernel add(x: f32[N, 3], y: f32[N, 3]) -> f32[N, 3] {
  return x + y
}
kernel big(x: f32[N]) -> f32[N] {
  return exp(x) * 0.5 + x
}
"""


@pytest.fixture(scope="module")
def m(tmp_path_factory):
    import os
    if not os.environ.get("TDSLC"):
        pytest.skip("TDSLC is not set (run through ctest or tests/python/run.sh)")
    os.environ.setdefault("TDSL_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    return tdsl.compile(SRC)


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def general(k, *args, out=None):
    return k._call_general(args, out)


def same(a, b):
    """Bitwise equal results (tensors, arrays or tuples of them), with the
    same type, dtype, shape and strides."""
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
        return
    assert type(a) is type(b)
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
        assert a.device == b.device
        assert torch.equal(a.view(torch.uint8) if a.dtype == torch.bool else a,
                           b.view(torch.uint8) if b.dtype == torch.bool else b) or \
            (a.is_floating_point() and torch.equal(a.isnan(), b.isnan()) and
             torch.equal(a.nan_to_num(), b.nan_to_num()))
    else:
        assert a.dtype == b.dtype and a.shape == b.shape and a.strides == b.strides
        np.testing.assert_array_equal(a, b)


def test_direct_results_match_the_general_path(m, borrows):
    x = rand(5, 64)
    f16, bf16 = rand(7, dtype=torch.float16), rand(7, dtype=torch.bfloat16, seed=1)
    ints = torch.randint(-100, 100, (4, 5), dtype=torch.int32)
    i8 = torch.randint(-50, 50, (6,), dtype=torch.int8)
    u8 = torch.randint(0, 200, (6,), dtype=torch.uint8)
    v = rand(9)
    calls = [
        (m.act, (x, 1.5)),
        (m.act, (x, 2)),                      # an int for a float scalar
        (m.act, (x, True)),                   # a bool for a float scalar
        (m.act, (x[1:], 0.5)),                # a storage offset
        (m.nhwc, (rand(2, 3, 4, 5),)),        # a channels_last result
        (m.mask, (v, 0.25)),                  # two results, one bool
        (m.sel, (v > 0, v, True)),            # a bool tensor and a bool scalar
        (m.sel, (v > 0, v, False)),
        (m.half, (f16, bf16)),
        (m.isum, (ints, -7)),
        (m.isum, (ints, 2 ** 62)),
        (m.small, (i8, u8, -128, 255, -300, 1 << 20)),
        (m.tr, (rand(4, 6).t(),)),            # a transposed view for a strided parameter
        (m.tr, (rand(4, 6)[:, ::2],)),
        (m.total, (v, torch.tensor(3.0))),    # a 0-dim tensor parameter
        (m.total, (rand(0), torch.tensor(3.0))),  # an empty tensor
        (m.act, (x.clone().requires_grad_(), 1.0)),
        (m.act, (torch.nn.Parameter(x.clone()), 1.0)),
        (m.scalars, (v, 1 + 2 ** -10, 1 + 2 ** -8, 0.25)),  # f16 and bf16 scalars
        (m.scalars, (v, np.float32(1.5), np.float64(2.0), np.int64(3))),
    ]
    for k, args in calls:
        n = borrows[0]
        got = k(*args)
        assert borrows[0] == n, "%s took the general path" % k.name
        same(got.detach() if isinstance(got, torch.Tensor) else got, general(k, *args))


def test_direct_out_matches_the_general_path(m, borrows):
    def direct(k, *args, out):
        n = borrows[0]
        r = k(*args, out=out)
        assert borrows[0] == n, "%s took the general path" % k.name
        return r

    x, y = rand(4, 3), rand(4, 3, seed=1)
    out1, out2 = torch.full((4, 3), 9.0), torch.full((4, 3), 9.0)
    assert direct(m.add, x, y, out=out1) is out1
    general(m.add, x, y, out=out2)
    same(out1, out2)
    # out= into a view (a storage offset) and a tuple for two results
    big1, big2 = torch.zeros(6, 3), torch.zeros(6, 3)
    o1, o2 = big1[1:5], big2[1:5]
    assert direct(m.add, x, y, out=o1) is o1
    general(m.add, x, y, out=o2)
    same(big1, big2)
    v = rand(10)
    outs = (torch.empty(10, dtype=torch.bool), torch.empty(10))
    assert direct(m.mask, v, 0.0, out=outs) is outs
    lst = list(outs)
    assert direct(m.mask, v, 0.0, out=lst) is lst
    same(outs, general(m.mask, v, 0.0))
    # keyword arguments bind first, then go the direct path
    n = borrows[0]
    x2 = rand(2, 64)
    got = m.act(s=2.0, x=x2)
    assert borrows[0] == n
    same(got, general(m.act, x2, 2.0))


def test_numpy_arrays_take_the_direct_path_too(m, borrows):
    """On CPU kernels NumPy arrays (native byte order, strides a multiple
    of the element size) are described directly as well: NumPy results."""
    x = rand(5, 64).numpy()
    v = rand(9).numpy()
    ro = v.copy()
    ro.setflags(write=False)
    ybits = rand(7, dtype=torch.bfloat16, seed=1).view(torch.int16).numpy().view(np.uint16)
    calls = [
        (m.act, (x, 1.5)),
        (m.act, (x[1:], 2)),
        (m.nhwc, (rand(2, 3, 4, 5).numpy(),)),            # NHWC strides in the result
        (m.mask, (v, 0.25)),
        (m.sel, (v > 0, v, True)),                         # bool arrays
        (m.half, (rand(7, dtype=torch.float16).numpy(), ybits)),  # bf16 as uint16 bits
        (m.isum, (np.arange(20, dtype=np.int32).reshape(4, 5), 3)),
        (m.tr, (rand(4, 6).numpy().T,)),
        (m.tr, (rand(4, 6).numpy()[:, ::2],)),
        (m.total, (ro, np.array(2.0, np.float32))),      # read-only, 0-dim
        (m.add, (rand(4, 3).numpy(), rand(4, 3))),        # mixed: NumPy results
    ]
    for k, args in calls:
        n = borrows[0]
        got = k(*args)
        assert borrows[0] == n, "%s took the general path" % k.name
        same(got, general(k, *args))
    out1, out2 = np.full((4, 3), 9.0, np.float32), np.full((4, 3), 9.0, np.float32)
    a, b = rand(4, 3).numpy(), rand(4, 3, seed=1).numpy()
    n = borrows[0]
    assert m.add(a, b, out=out1) is out1 and borrows[0] == n
    general(m.add, a, b, out=out2)
    same(out1, out2)
    # what goes the general path, with its outcome: a big-endian array, byte
    # strides that are not a multiple of the item size, a subclass, uint16
    # for a parameter that is not bf16
    odd = np.ndarray((4,), np.float32, buffer=np.zeros(16, np.uint8), strides=(3,))
    one = np.array(1.0, np.float32)
    for k, args in [(m.act, (x.astype(">f4"), 1.0)), (m.total, (odd, one)),
                    (m.total, (np.ma.masked_array(np.ones(4, np.float32)), one)),
                    (m.total, (np.zeros(4, np.uint16), one))]:
        n = borrows[0]
        r1 = outcome(lambda: k(*args))
        assert borrows[0] > n
        assert r1 == outcome(lambda: general(k, *args))


def outcome(f):
    try:
        r = f()
    except Exception as e:
        return type(e), str(e)
    return "ok", np.asarray(r).tolist()


def test_the_direct_path_reuses_its_buffer(m):
    x = rand(3, 64)
    for _ in range(20):
        m.act(x, 1.0)
    assert len(m.act._dpool) == 1


def errors(f):
    with pytest.raises(Exception) as e:
        f()
    return type(e.value), str(e.value)


@pytest.mark.parametrize("case", [
    "rank", "dtype", "shape", "layout", "symbol", "overlap", "out_count", "out_number",
    "scalar_type", "scalar_range", "f16_scalar", "meta", "sparse", "complex",
])
def test_refused_calls_raise_what_the_general_path_raises(m, case):
    x = rand(2, 64)
    calls = {
        "rank": (m.act, (rand(2, 64, 1), 1.0), None),
        "dtype": (m.act, (x.double(), 1.0), None),
        "shape": (m.act, (rand(2, 63), 1.0), None),
        "layout": (m.act, (rand(64, 2).t(), 1.0), None),
        "symbol": (m.add, (rand(2, 3), rand(4, 3)), None),
        "overlap": (m.add, (rand(2, 3), rand(2, 3)), "alias"),
        "out_count": (m.mask, (rand(4), 0.0), (torch.empty(4),)),
        "out_number": (m.add, (rand(2, 3), rand(2, 3)), 1.0),
        "scalar_type": (m.act, (x, "1"), None),
        "scalar_range": (m.isum, (torch.zeros(2, 2, dtype=torch.int32), 2 ** 63), None),
        "f16_scalar": (m.scalars, (rand(3), "x", 1.0, 1.0), None),
        "meta": (m.act, (torch.empty(2, 64, device="meta"), 1.0), None),
        "sparse": (m.add, (rand(2, 3).to_sparse(), rand(2, 3)), None),
        "complex": (m.add, (torch.zeros(2, 3, dtype=torch.complex64), rand(2, 3)), None),
    }
    k, args, out = calls[case]
    if out == "alias":
        out = args[0]
    if out is None:
        e1, e2 = errors(lambda: k(*args)), errors(lambda: general(k, *args))
    else:
        e1, e2 = errors(lambda: k(*args, out=out)), errors(lambda: general(k, *args, out=out))
    assert e1 == e2


def test_numbers_for_tensors_go_the_general_path(m, borrows):
    x = rand(5)
    same(m.total(x, 2.0), general(m.total, x, 2.0))  # a number for a tensor parameter
    assert borrows[0] > 0


def test_threads_share_a_kernel(m):
    """Calls from several threads at once (ctypes drops the GIL during the
    C call): each gets its own descriptors."""
    xs = [rand(200000, seed=i) for i in range(8)]
    want = [torch.exp(x) * 0.5 + x for x in xs]
    bad = []

    def work(i):
        for _ in range(10):
            got = m.big(xs[i])
            if not torch.allclose(got, want[i], rtol=1e-5, atol=1e-6):
                bad.append(i)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad
    assert 1 <= len(m.big._dpool) <= 8
