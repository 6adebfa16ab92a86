# test_cuda.py — the Python package's CUDA path.
#
# Three tiers, so the logic is tested where there is neither a GPU nor a
# CUDA backend (CI) and the real thing runs where there are:
# - fake_cuda.c: a library shaped like `tdslc --target=cuda --emit=so`
#   output whose one kernel computes on the host; with "CUDA tensors"
#   (NumPy arrays whose DLPack export says kDLCUDA) it checks the device
#   checks, the stream handed to tdsl_cuda_set_stream and to
#   __dlpack__(stream=), result allocation on the device and out=;
# - tdslc --target=cuda (skipped while tdslc exits 2: "CUDA backend not
#   available"): compiling, kernel.info, device errors without a GPU;
# - with torch.cuda.is_available() too: kernels on PyTorch CUDA tensors
#   against PyTorch, on the default and on a side stream (compiled from
#   cuda_kernels.tdsl, or loaded from $TDSL_TEST_CUDA_SO on a GPU machine
#   without tdslc: bench/gpu/build.sh puts it, this file and a prebuilt
#   fake_cuda.so ($TDSL_FAKE_CUDA_SO) in OUTDIR/tests/, run by its run.sh).
import ctypes
import os
import subprocess

import numpy as np
import pytest
import torch

import tdsl
from tdsl import _dlpack as dl
from tdsl import _kernel

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))


class FakeCuda:
    """A NumPy array that exports itself as a tensor on cuda:ID and
    records the streams __dlpack__ was given."""

    def __init__(self, a, device_id=0):
        self.a = np.array(a, np.float32, order="C")  # 0-dim stays 0-dim
        self.device_id = device_id
        self.streams = []

    def __dlpack_device__(self):
        return (dl.DL_CUDA, self.device_id)

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        capsule = self.a.__dlpack__()
        m = dl.DLManagedTensor.from_address(dl._get_pointer(capsule, b"dltensor"))
        m.dl_tensor.device = dl.DLDevice(dl.DL_CUDA, self.device_id)
        return capsule


@pytest.fixture
def fake(tmp_path):
    """fake_cuda.c built here ($TDSL_FAKE_CUDA_SO: one built elsewhere, for
    a GPU machine without a C compiler), loaded afresh."""
    so = tmp_path / "fake_cuda.so"
    prebuilt = os.environ.get("TDSL_FAKE_CUDA_SO")
    if prebuilt:
        import shutil
        shutil.copy(prebuilt, so)
    else:
        cc = os.environ.get("CC", "cc").split()
        r = subprocess.run(cc + ["-shared", "-fPIC", "-O1", "-o", str(so),
                                 os.path.join(HERE, "fake_cuda.c"),
                                 "-I", os.path.join(SOURCE_DIR, "runtime", "include")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            pytest.skip("cannot build fake_cuda.c: " + r.stdout)
    m = tdsl.load(so)
    m._lib.fake_last_stream.restype = ctypes.c_void_p
    m._lib.fake_last_data.restype = ctypes.c_void_p
    return m


def test_fake_module_is_cuda(fake):
    assert fake.device == "cuda"
    assert fake.scale.info["device"] == "cuda"
    assert fake.report is None


def test_out_on_the_legacy_stream(fake):
    x, o = FakeCuda(np.arange(5)), FakeCuda(np.zeros(5))
    assert fake.scale(x, 2.0, out=o) is o
    np.testing.assert_array_equal(o.a, np.arange(5) * 2)
    # No CUDA in this PyTorch: the legacy default stream, which DLPack
    # spells 1 and tdsl_cuda_set_stream NULL.
    if not torch.cuda.is_available():
        assert x.streams == [1] and o.streams == [1]
        assert fake._lib.fake_last_stream() is None
        assert fake.get_stream() == 0


def test_torchs_current_stream_is_used(fake, monkeypatch):
    seen = []

    def stream(device_id):
        seen.append(device_id)
        return 0x5000 + device_id

    monkeypatch.setattr(_kernel, "_cuda_stream", stream)
    x, o = FakeCuda(np.ones(3), 2), FakeCuda(np.zeros(3), 2)
    fake.scale(x, 3.0, out=o)
    assert seen == [2]
    assert x.streams == [0x5002] and o.streams == [0x5002]
    assert fake._lib.fake_last_stream() == 0x5002
    assert fake.get_stream() == 0x5002
    fake.set_stream(None)
    assert fake.get_stream() == 0


def test_results_allocated_on_the_device(fake, monkeypatch):
    made = []

    def empty(shape, strides, dtype, device_id):
        made.append((shape, strides, dtype, device_id))
        return FakeCuda(np.empty(shape), device_id)

    monkeypatch.setattr(_kernel, "_cuda_empty", empty)
    monkeypatch.setattr(_kernel, "_cuda_stream", lambda device_id: 0)  # no cuda:1 here
    y = fake.scale(FakeCuda(np.arange(4), 1), 0.5)
    assert made == [([4], [1], "f32", 1)]
    assert isinstance(y, FakeCuda) and y.device_id == 1
    np.testing.assert_array_equal(y.a, np.arange(4) * 0.5)


def test_results_need_torch(fake, monkeypatch):
    monkeypatch.setattr(_kernel, "_torch", lambda: None)
    with pytest.raises(RuntimeError, match="PyTorch cannot be imported.*out="):
        fake.scale(FakeCuda(np.arange(4)), 0.5)
    o = FakeCuda(np.zeros(4))
    fake.scale(FakeCuda(np.arange(4)), 0.5, out=o)  # out= needs no torch
    np.testing.assert_array_equal(o.a, np.arange(4) * 0.5)


def test_cpu_tensors_to_a_cuda_kernel(fake):
    calls = fake._lib.fake_calls()
    for x in (np.ones(3, np.float32), torch.ones(3)):
        with pytest.raises(tdsl.KernelError) as e:
            fake.scale(x, 1.0)
        assert e.value.code == -4 and e.value.name == "TDSL_E_DEVICE"
        assert e.value.message == "kernel scale: argument 'x': expected device cuda, got cpu"
        assert "compiled for CUDA" in str(e.value) and "x.cuda()" in str(e.value)
    with pytest.raises(tdsl.KernelError, match="argument 'out0': expected device cuda"):
        fake.scale(FakeCuda(np.ones(3)), 1.0, out=np.zeros(3, np.float32))
    assert fake._lib.fake_calls() == calls  # refused before the call


def test_one_device_for_all(fake):
    with pytest.raises(tdsl.KernelError) as e:
        fake.scale(FakeCuda(np.ones(3), 0), 1.0, out=FakeCuda(np.zeros(3), 1))
    assert e.value.name == "TDSL_E_DEVICE"
    assert "argument 'out0': on cuda:1, but argument 'x' is on cuda:0" in e.value.message


needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason="torch.cuda.is_available() is False")


@needs_gpu
def test_torch_cuda_tensors_through_the_python_path(fake):
    """Real PyTorch CUDA tensors reach the (fake) kernel: their device
    pointers, PyTorch's current stream, results allocated on the device."""
    fake._lib.fake_set_touch(0)  # the fake kernel must not read device memory
    try:
        x = torch.arange(6, dtype=torch.float32, device="cuda")[1:]
        y = fake.scale(x, 2.0)
        assert y.device == x.device and y.shape == (5,) and y.stride() == (1,)
        assert fake._lib.fake_last_data() == x.data_ptr()  # storage offset included
        assert (fake._lib.fake_last_stream() or 0) == torch.cuda.current_stream().cuda_stream
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            out = torch.empty(5, device="cuda")
            assert fake.scale(x, 1.0, out=out) is out
        assert fake._lib.fake_last_stream() == s.cuda_stream
        assert fake.get_stream() == s.cuda_stream
        with torch.cuda.stream(s):
            with fake.scale.bind(x, 1.0) as call:
                fake.set_stream(None)
                assert call().device == x.device
        with fake.scale.bind(x, 1.0, out=out) as call:  # the default stream now
            call()
        assert (fake._lib.fake_last_stream() or 0) == torch.cuda.current_stream().cuda_stream
        with pytest.raises(tdsl.KernelError, match="argument 'out0': expected device cuda, got cpu"):
            fake.scale(x, 1.0, out=torch.empty(5))
        b = dl.borrow(x, stream=s.cuda_stream)
        assert (b.tensor.device.device_type, b.tensor.device.device_id) == (2, x.device.index)
        b.release()
    finally:
        fake._lib.fake_set_touch(1)


def test_synchronize(fake):
    n = fake._lib.fake_syncs()
    fake.synchronize()
    assert fake._lib.fake_syncs() == n + 1


# ---- the CUDA backend (skipped until tdslc has it) ------------------------

SRC_PATH = os.path.join(HERE, "cuda_kernels.tdsl")
with open(SRC_PATH, encoding="utf-8") as _f:
    SRC = _f.read()


@pytest.fixture(scope="module")
def cuda_backend(tmp_path_factory):
    tdslc = os.environ.get("TDSLC")
    if not tdslc:
        pytest.skip("TDSLC is not set (run through ctest or tests/python/run.sh)")
    d = tmp_path_factory.mktemp("probe")
    (d / "p.tdsl").write_text(SRC)
    r = subprocess.run([tdslc, str(d / "p.tdsl"), "--target=cuda", "--emit=so",
                        "-o", str(d / "p.so")], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if r.returncode == 2:
        pytest.skip("CUDA backend not available: " + r.stdout.strip())
    assert r.returncode == 0, r.stdout
    return tdslc


@pytest.fixture
def cm(cuda_backend):
    return tdsl.compile(SRC, target="cuda")


@pytest.fixture
def gm():
    """The CUDA module for the GPU tests: compiled here, or on a GPU machine
    without tdslc, loaded from $TDSL_TEST_CUDA_SO (built elsewhere with
    `tdslc tests/python/cuda_kernels.tdsl --target=cuda:sm_NN --emit=so -o X.so`)."""
    so = os.environ.get("TDSL_TEST_CUDA_SO")
    if so:
        return tdsl.load(so)
    tdslc = os.environ.get("TDSLC")
    if not tdslc:
        pytest.skip("neither TDSL_TEST_CUDA_SO nor TDSLC is set")
    r = subprocess.run([tdslc, SRC_PATH, "--target=cuda", "--emit=ptx", "-o", "-"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode == 2:
        pytest.skip("CUDA backend not available: " + r.stderr.strip())
    return tdsl.compile(SRC, target="cuda")


def test_cuda_compile(cm):
    assert cm.device == "cuda" and cm.target == "cuda"
    assert all(k.info["device"] == "cuda" for k in cm.kernels.values())
    assert cm.report["target"].startswith("cuda")
    with pytest.raises(tdsl.KernelError) as e:
        cm.total(torch.ones(4))
    assert e.value.name == "TDSL_E_DEVICE" and "compiled for CUDA" in str(e.value)


def test_cuda_compile_sm90_is_cached_apart(cm):
    m90 = tdsl.compile(SRC, target="cuda:sm_90")
    assert m90.path != cm.path and m90.device == "cuda"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_kernel_without_a_gpu(cm):
    with pytest.raises(tdsl.KernelError) as e:
        cm.total(FakeCuda(np.ones(4)), out=FakeCuda(np.zeros(())))
    assert e.value.name in ("TDSL_E_NO_DEVICE", "TDSL_E_CUDA"), str(e.value)


@needs_gpu
def test_cuda_kernels_against_torch(gm):
    cm = gm
    dev = torch.device("cuda", 0)
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(64, 96, device=dev, generator=g)
    y = torch.randn(96, device=dev, generator=g)
    r = cm.scale_add(x, y, 1.5)
    assert r.device == dev and r.dtype == torch.float32
    torch.testing.assert_close(r, x * 1.5 + y, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(cm.rowsoft(x), torch.softmax(x, -1), rtol=1e-4, atol=1e-5)
    a, b = torch.randn(65, 33, device=dev), torch.randn(33, 17, device=dev)
    torch.testing.assert_close(cm.mm(a, b), torch.mm(a, b), rtol=1e-4, atol=1e-5)
    t = torch.randn(2, 3, 5, 7, device=dev)
    n = cm.nhwc(t)
    assert n.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(n, torch.relu(t))
    v = torch.randn(100003, device=dev)
    torch.testing.assert_close(cm.total(v), v.sum(), rtol=1e-4, atol=1e-5)
    out = torch.empty_like(x)
    assert cm.scale_add(x, y, 2.0, out=out) is out
    torch.testing.assert_close(out, x * 2 + y, rtol=1e-5, atol=1e-6)
    with pytest.raises(tdsl.KernelError, match="expected device cuda, got cpu"):
        cm.scale_add(x, y.cpu(), 1.0)


@needs_gpu
def test_cuda_kernels_on_a_side_stream(gm):
    cm = gm
    s = torch.cuda.Stream()
    x = torch.randn(1024, 1024, device="cuda")
    y = torch.zeros(1024, device="cuda")
    with torch.cuda.stream(s):
        # Enqueued on s after the producer's work: no synchronization
        # in between, the values prove the order.
        x2 = x * 2
        r = cm.scale_add(x2, y, 0.5)
        assert cm.get_stream() == s.cuda_stream
        back = r.sum()
    s.synchronize()
    torch.testing.assert_close(back, x.sum(), rtol=1e-4, atol=1e-2)
    r2 = cm.scale_add(x, y, 1.0)  # back on the default stream
    assert cm.get_stream() == torch.cuda.current_stream().cuda_stream
    cm.synchronize()
    torch.testing.assert_close(r2, x)


@needs_gpu
def test_direct_path_on_cuda_tensors(gm, borrows):
    """PyTorch CUDA tensors take the direct path (no DLPack export), on
    PyTorch's current stream, and agree bit for bit with the general path;
    what the direct path refuses raises what the general path raises."""
    cm = gm
    n = borrows
    dev = torch.device("cuda", 0)
    x = torch.randn(65, 97, device=dev)[1:, :96]  # a storage offset, row stride 97
    xc = x.contiguous()
    y = torch.randn(96, device=dev)
    cases = [(cm.scale_add, (xc, y, 1.5)), (cm.scale_add, (xc, y, 2)), (cm.rowsoft, (xc,)),
             (cm.nhwc, (torch.randn(2, 3, 5, 7, device=dev),)),
             (cm.total, (torch.randn(1000, device=dev)[3:],)),
             (cm.mm, (torch.randn(33, 20, device=dev), torch.randn(20, 17, device=dev)))]
    s = torch.cuda.Stream()
    for stream in (torch.cuda.current_stream(), s):
        with torch.cuda.stream(stream):
            for k, args in cases:
                before = n[0]
                got = k(*args)
                assert n[0] == before, "%s took the general path" % k.name
                assert cm.get_stream() == torch.cuda.current_stream().cuda_stream
                want = k._call_general(args, None)
                assert got.device == want.device and got.stride() == want.stride()
                assert torch.equal(got, want), k.name
                out = torch.empty_like(want)
                before = n[0]
                assert k(*args, out=out) is out and n[0] == before
                assert torch.equal(out, want), k.name
        torch.cuda.synchronize()
    # refused: a CPU tensor, a second device or a wrong rank give the general path's error
    for args in ((xc, y.cpu(), 1.0), (xc[0], y, 1.0), (x, y, 1.0)):
        with pytest.raises(tdsl.KernelError) as e1:
            cm.scale_add(*args)
        with pytest.raises(tdsl.KernelError) as e2:
            cm.scale_add._call_general(args, None)
        assert str(e1.value) == str(e2.value)


def test_bind_sets_the_stream_once(fake, monkeypatch):
    monkeypatch.setattr(_kernel, "_cuda_stream", lambda device_id: 0x77)
    x, o = FakeCuda(np.arange(3)), FakeCuda(np.zeros(3))
    call = fake.scale.bind(x, 4.0, out=o)
    fake.set_stream(None)
    call()
    assert fake._lib.fake_last_stream() is None  # the stream current at the call
    np.testing.assert_array_equal(o.a, np.arange(3) * 4)
    assert x.streams == [0x77]  # exported once
    call.release()
