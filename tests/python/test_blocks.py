# test_blocks.py — the example blocks of examples/blocks/ (a LLaMA-style
# decoder block, a U-Net decoder step, a MobileNetV3 inverted residual)
# compiled by tdslc and run through the Python package on PyTorch tensors,
# against the same computation written in PyTorch
# (examples/blocks/blocks_torch.py), within spec §9's f32 tolerance for
# reductions, @ and conv — at -O2 and -O0.
import os
import sys

import pytest
import torch

import tdsl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "blocks"))
import blocks_torch as bt  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5

CASES = [
    ("llama_block", bt.llama_block, lambda: bt.llama_inputs(2, 12)),
    ("unet_up", bt.unet_up, lambda: bt.unet_inputs(2, 6, 5)),
    ("mbv3_block", bt.mbv3_block, lambda: bt.mbv3_inputs(2, 7, 9)),
]


@pytest.mark.parametrize("opt", [2, 0])
@pytest.mark.parametrize("name,ref,inputs", CASES, ids=[c[0] for c in CASES])
def test_block_matches_pytorch(tdslc, name, ref, inputs, opt):
    m = tdsl.compile(bt.source(name), opt=opt)
    args = inputs()
    want = ref(**{k: v.double() if v.is_floating_point() else v
                  for k, v in args.items()}).float()
    got = getattr(m, name)(**args)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)
    # the f32 PyTorch computation is within the same bound of the f64 one
    torch.testing.assert_close(ref(**args), want, rtol=RTOL, atol=ATOL)


def test_unet_upsamples_to_any_skip_size(tdslc):
    # a skip connection of odd size (an encoder that floored): bilinear
    # interpolation to 9x7 from 4x4, not a plain 2x
    m = tdsl.compile(bt.source("unet_up"))
    args = bt.unet_inputs(1, 4, 4, skip_hw=(9, 7))
    want = bt.unet_up(**{k: v.double() for k, v in args.items()}).float()
    got = m.unet_up(**args)
    assert got.shape == (1, 64, 9, 7)
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)
