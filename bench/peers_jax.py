"""peers_jax.py — the workloads of bench/kernels.tdsl in JAX (XLA on the CPU).

Needs: jax (bench/requirements.txt; recent jax needs Python >= 3.12).
Used by: peers.py, IMPL "jax". Benchmark-only.

Each entry of WORKLOADS maps a benchmark name to (inputs, fn): inputs(rng)
gives numpy arrays (same shapes and value ranges as bench.c), fn is the
computation in jax.numpy / jax.lax. make() jit-compiles fn, moves the
inputs to the device once, runs it once to compile, and returns a
callable that runs it and waits for the result (block_until_ready).
Layouts follow the tdsl kernel's result: a channels-last conv takes NHWC
input and writes NHWC output (XLA's dimension numbers), NCHW otherwise.
XLA allocates each result itself (no preallocated output: jax.jit has no
`out=`; donating an input would consume it on every call).
"""
import numpy as np

try:
    import jax
    import jax.numpy as jnp
    from jax import lax
except ImportError:  # the rows then say "unsupported"
    jax = None


def _f32(rng, shape, positive=False):
    x = rng.random(shape, dtype=np.float32)
    return x + np.float32(0.5) if positive else x * np.float32(2) - np.float32(1)


def _conv(x, w, stride, pad, nhwc):
    dn = ("NHWC", "OIHW", "NHWC") if nhwc else ("NCHW", "OIHW", "NCHW")
    return lax.conv_general_dilated(x, w, (stride, stride), [(pad, pad), (pad, pad)],
                                    dimension_numbers=dn)


def _softmax(x):
    e = jnp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layer_norm(x, g, b, eps=1e-5):
    m = x.mean(axis=-1, keepdims=True)
    d = x - m
    v = (d * d).mean(axis=-1, keepdims=True)
    return d * lax.rsqrt(v + eps) * g + b


def _workloads():
    ew = (32, 64, 56, 56)
    mm = (1024, 1024)

    def conv(x_shape, w_shape, stride, pad, nhwc):
        def inputs(rng):
            x = _f32(rng, x_shape)
            if nhwc:
                x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
            return [x, _f32(rng, w_shape)]
        return inputs, lambda x, w: _conv(x, w, stride, pad, nhwc)

    def gemm(m, k, n, nt):  # x [m, k] @ w, w [k, n] or [n, k] transposed
        return (lambda r: [_f32(r, (m, k)), _f32(r, (n, k) if nt else (k, n))],
                (lambda x, w: x @ w.T) if nt else (lambda x, w: x @ w))

    def lowp(m, k, n, bf16):
        if bf16:
            return (lambda r: [_f32(r, (m, k)).astype(jnp.bfloat16),
                               _f32(r, (k, n)).astype(jnp.bfloat16)],
                    lambda a, b: a @ b)
        return (lambda r: [r.integers(-128, 128, (m, k), dtype=np.int8),
                           r.integers(-128, 128, (k, n), dtype=np.int8)],
                lambda a, b: lax.dot(a, b, preferred_element_type=jnp.int32))

    return {
        "gemm_m1_4k": gemm(1, 4096, 4096, False),
        "linear_m1_4k": gemm(1, 4096, 4096, True),
        "matvec_4k": (lambda r: [_f32(r, (4096, 4096)), _f32(r, (4096,))],
                      lambda a, v: a @ v),
        "gemm_m8_768": gemm(8, 768, 3072, False),
        "linear_m8_3072": gemm(8, 3072, 768, True),
        "gemm_m128_4k": gemm(128, 4096, 4096, False),
        "linear_m128_768": gemm(128, 768, 3072, True),
        "gemm_m1024_3072": gemm(1024, 3072, 768, False),
        "conv_dw3x3_nhwc": (
            lambda r: [np.ascontiguousarray(_f32(r, (8, 96, 56, 56)).transpose(0, 2, 3, 1)),
                       _f32(r, (96, 1, 3, 3))],
            lambda x, w: lax.conv_general_dilated(
                x, w, (1, 1), [(1, 1), (1, 1)], dimension_numbers=("NHWC", "OIHW", "NHWC"),
                feature_group_count=96)),
        "matmul_bf16": lowp(1024, 1024, 1024, True),
        "matmul_i8": lowp(1024, 1024, 1024, False),
        "matmul_bf16_layer": lowp(128, 3072, 3072, True),
        "matmul_i8_layer": lowp(128, 3072, 3072, False),
        "ew_chain": (
            lambda r: [_f32(r, ew), _f32(r, (64,), True), _f32(r, (64,))],
            lambda x, a, b: jnp.maximum(
                (x * a[:, None, None] + b[:, None, None]) * 0.5 - b[:, None, None], 0)
            / a[:, None, None]),
        "preprocess": (
            lambda r: [r.integers(0, 256, (32, 224, 224, 3), dtype=np.uint8),
                       _f32(r, (3,), True), _f32(r, (3,), True)],
            lambda f, m, s: (f.transpose(0, 3, 1, 2).astype(jnp.float32) / 255.0
                             - m[:, None, None]) / s[:, None, None]),
        "permute_copy": (lambda r: [_f32(r, ew)], lambda x: x.transpose(0, 2, 3, 1)),
        "softmax_last": (lambda r: [_f32(r, (4096, 1024))], _softmax),
        "matmul": (lambda r: [_f32(r, mm), _f32(r, mm)], lambda a, b: a @ b),
        "conv3x3_nchw": conv(ew, (64, 64, 3, 3), 1, 1, False),
        "conv3x3_nhwc": conv(ew, (64, 64, 3, 3), 1, 1, True),
        "conv1x1": conv(ew, (64, 64, 1, 1), 1, 0, False),
        "conv7x7s2": conv((32, 3, 224, 224), (64, 3, 7, 7), 2, 3, False),
        "layer_norm_last": (
            lambda r: [_f32(r, (8192, 1024)), _f32(r, (1024,), True), _f32(r, (1024,))],
            _layer_norm),
        "matmul_bias_relu": (
            lambda r: [_f32(r, mm), _f32(r, mm), _f32(r, (1024,))],
            lambda a, b, c: jnp.maximum(a @ b + c, 0)),
        "conv_bias_relu": (
            lambda r: [_f32(r, ew), _f32(r, (64, 64, 3, 3)), _f32(r, (64,))],
            lambda x, w, c: jnp.maximum(_conv(x, w, 1, 1, False) + c[:, None, None], 0)),
        "matmul_prologue": (lambda r: [_f32(r, mm), _f32(r, mm)],
                            lambda a, b: jnp.maximum(a, 0) @ b),
        "sum_all": (lambda r: [_f32(r, (32 << 20,))], lambda x: x.sum()),
        "mse": (lambda r: [_f32(r, (4096, 4096)), _f32(r, (4096, 4096))],
                lambda a, b: ((a - b) ** 2).mean()),
        "channel_mean": (lambda r: [_f32(r, (3, 8294400))], lambda x: x.mean(axis=1)),
        "col_sum": (lambda r: [_f32(r, (8 << 20, 4))], lambda x: x.sum(axis=0)),
        "gelu_tanh": (lambda r: [_f32(r, (4096, 4096))],
                      lambda x: jnp.tanh(jax.nn.gelu(x, approximate=False))),
        "rope": (lambda r: [_f32(r, (4096, 1024)), _f32(r, (4096, 1024)), _f32(r, (4096, 1024))],
                 lambda x, y, t: x * jnp.cos(t) + y * jnp.sin(t)),
        "pow_atan2": (lambda r: [_f32(r, (4096, 1024), True), _f32(r, (4096, 1024))],
                      lambda x, y: jnp.power(x, y) + jnp.arctan2(y, x)),
        "rmsnorm_hand": (
            lambda r: [_f32(r, (8192, 1024)), _f32(r, (1024,), True)],
            lambda x, w: x * lax.rsqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w),
        "layernorm_hand": (
            lambda r: [_f32(r, (8192, 1024)), _f32(r, (1024,), True), _f32(r, (1024,))],
            _layer_norm),
        "softmax_hand": (lambda r: [_f32(r, (4096, 1024))], _softmax),
        "conv3x3_bf16_nhwc": (
            lambda r: [np.ascontiguousarray(_f32(r, ew).transpose(0, 2, 3, 1)).astype(jnp.bfloat16),
                       _f32(r, (64, 64, 3, 3)).astype(jnp.bfloat16)],
            lambda x, w: lax.conv_general_dilated(
                x, w, (1, 1), [(1, 1), (1, 1)], dimension_numbers=("NHWC", "OIHW", "NHWC"))),
        "conv3x3_i8_nhwc": (
            lambda r: [r.integers(-128, 128, (32, 56, 56, 64), dtype=np.int8),
                       r.integers(-128, 128, (64, 64, 3, 3), dtype=np.int8)],
            lambda x, w: lax.conv_general_dilated(
                x, w, (1, 1), [(1, 1), (1, 1)], dimension_numbers=("NHWC", "OIHW", "NHWC"),
                preferred_element_type=jnp.int32)),
        "conv3x3_7x7_nhwc": conv((8, 512, 7, 7), (512, 512, 3, 3), 1, 1, True),
    }


WORKLOADS = _workloads() if jax is not None else {}


def version():
    return None if jax is None else jax.__version__


def make(name, rng):
    """A callable running workload `name` in XLA, or None if jax is missing
    or the workload has no JAX version."""
    if name not in WORKLOADS:
        return None
    inputs, fn = WORKLOADS[name]
    xs = [jax.device_put(a) for a in inputs(rng)]
    f = jax.jit(fn)
    f(*xs).block_until_ready()
    return lambda: f(*xs).block_until_ready()
