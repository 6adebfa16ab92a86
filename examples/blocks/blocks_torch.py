"""The example blocks' computations in PyTorch, and inputs for them.

Each function computes with torch what the kernel of the same name in
this folder computes, written as a PyTorch model would (torch.nn.functional).
PyTorch releases before 2.0 lack F.scaled_dot_product_attention and those
before 2.4 lack F.rms_norm: then the documented formula stands in.

Used by tests/python/test_blocks.py (tdsl against PyTorch) and by
bench/blocks.py (the benchmark)."""
import math
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def source(name):
    return os.path.join(HERE, name + ".tdsl")


def rms_norm(x, shape, weight, eps):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, shape, weight, eps)
    dims = tuple(range(-len(shape), 0))
    return x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps) * weight


def sdpa_causal(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = q.size(-2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    keep = torch.ones(s, s, dtype=torch.bool).tril()
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), -1) @ v


def rotate_half(t):
    t1, t2 = t.chunk(2, dim=-1)
    return torch.cat([-t2, t1], dim=-1)


def llama_block(tokens, emb, wq, wk, wv, wo, w_gate, w_up, w_down, norm1,
                norm2, cos, sin):
    b, s = tokens.shape
    x = F.embedding(tokens, emb)
    h = rms_norm(x, [512], norm1, 1e-6)
    q = F.linear(h, wq).view(b, s, 8, 64).transpose(1, 2)
    k = F.linear(h, wk).view(b, s, 8, 64).transpose(1, 2)
    v = F.linear(h, wv).view(b, s, 8, 64).transpose(1, 2)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    a = sdpa_causal(q, k, v)
    x = x + F.linear(a.transpose(1, 2).reshape(b, s, 512), wo)
    h = rms_norm(x, [512], norm2, 1e-6)
    return x + F.linear(F.silu(F.linear(h, w_gate)) * F.linear(h, w_up), w_down)


def llama_inputs(batch, seq, vocab=1000, seed=0):
    g = torch.Generator().manual_seed(seed)

    def w(*shape):
        return torch.randn(*shape, generator=g) / math.sqrt(shape[-1])

    inv = 1.0 / 10000 ** (torch.arange(0, 64, 2, dtype=torch.float32) / 64)
    ang = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
    ang = torch.cat([ang, ang], dim=-1)
    return dict(
        tokens=torch.randint(0, vocab, (batch, seq), generator=g),
        emb=torch.randn(vocab, 512, generator=g),
        wq=w(512, 512), wk=w(512, 512), wv=w(512, 512), wo=w(512, 512),
        w_gate=w(1408, 512), w_up=w(1408, 512), w_down=w(512, 1408),
        norm1=1 + 0.1 * torch.randn(512, generator=g),
        norm2=1 + 0.1 * torch.randn(512, generator=g),
        cos=ang.cos(), sin=ang.sin())


def unet_up(x, skip, w, b, gn_w, gn_b):
    u = F.interpolate(x, size=skip.shape[-2:], mode="bilinear", align_corners=False)
    y = F.conv2d(torch.cat([u, skip], dim=1), w, b, padding=1)
    return F.silu(F.group_norm(y, 8, gn_w, gn_b))


def unet_inputs(n, h, w, seed=0, skip_hw=None):
    g = torch.Generator().manual_seed(seed)
    sh, sw = skip_hw or (2 * h, 2 * w)
    return dict(
        x=torch.randn(n, 128, h, w, generator=g),
        skip=torch.randn(n, 64, sh, sw, generator=g),
        w=torch.randn(64, 192, 3, 3, generator=g) / math.sqrt(192 * 9),
        b=0.1 * torch.randn(64, generator=g),
        gn_w=1 + 0.1 * torch.randn(64, generator=g),
        gn_b=0.1 * torch.randn(64, generator=g))


def mbv3_block(x, w_exp, m1, v1, g1, b1, w_dw, m2, v2, g2, b2, w_se1, b_se1,
               w_se2, b_se2, w_proj, m3, v3, g3, b3):
    y = F.hardswish(F.batch_norm(F.conv2d(x, w_exp), m1, v1, g1, b1))
    y = F.hardswish(F.batch_norm(F.conv2d(y, w_dw, padding=1, groups=96),
                                 m2, v2, g2, b2))
    s = F.adaptive_avg_pool2d(y, 1)
    s = F.hardsigmoid(F.conv2d(F.relu(F.conv2d(s, w_se1, b_se1)), w_se2, b_se2))
    y = F.batch_norm(F.conv2d(y * s, w_proj), m3, v3, g3, b3)
    return x + y


def mbv3_inputs(n, h, w, seed=0):
    g = torch.Generator().manual_seed(seed)

    def bn(c):
        return [0.1 * torch.randn(c, generator=g),
                0.5 + torch.rand(c, generator=g),
                1 + 0.1 * torch.randn(c, generator=g),
                0.1 * torch.randn(c, generator=g)]

    def conv(o, i, k=1):
        return torch.randn(o, i, k, k, generator=g) / math.sqrt(i * k * k)

    x = torch.randn(n, 24, h, w, generator=g).contiguous(
        memory_format=torch.channels_last)
    m1, v1, g1, b1 = bn(96)
    m2, v2, g2, b2 = bn(96)
    m3, v3, g3, b3 = bn(24)
    return dict(x=x, w_exp=conv(96, 24), m1=m1, v1=v1, g1=g1, b1=b1,
                w_dw=conv(96, 1, 3), m2=m2, v2=v2, g2=g2, b2=b2,
                w_se1=conv(24, 96), b_se1=0.1 * torch.randn(24, generator=g),
                w_se2=conv(96, 24), b_se2=0.1 * torch.randn(96, generator=g),
                w_proj=conv(24, 96), m3=m3, v3=v3, g3=g3, b3=b3)
