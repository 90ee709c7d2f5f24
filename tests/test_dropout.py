"""nmt/ops/dropout.py: the CPU dropout mask from 16-bit lanes of 64-bit draws."""

import math

import pytest
import torch

from nmt.ops.dropout import GRID, Dropout, dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.2, 0.5])
def test_each_lane_drops_with_probability_p(p):
    """Every one of the four 16-bit lanes of a draw must drop at rate p: a draw whose top
    bit were fixed (torch's default random_ range for int64) would keep its fourth lane."""
    torch.manual_seed(0)
    n = 1 << 20
    keep = keep_mask((n,), p, torch.device("cpu")).view(-1, 4).double()
    q = round(p * GRID) / GRID  # the grid's drop probability
    sigma = math.sqrt(q * (1 - q) / (n // 4))
    for lane in range(4):
        assert abs((1 - keep[:, lane].mean().item()) - q) < 5 * sigma, lane


def test_kept_elements_are_scaled_dropped_are_zero_and_the_gradient_matches():
    torch.manual_seed(1)
    x = (torch.rand(64, 33, 17, dtype=torch.float64) + 0.5).requires_grad_()
    y = dropout(x, 0.3)
    scale = GRID / (GRID - round(0.3 * GRID))
    kept = y != 0
    assert 0.6 < kept.double().mean().item() < 0.8
    torch.testing.assert_close(y[kept], x.detach()[kept] * scale, rtol=0, atol=0)
    g = torch.randn_like(x)
    y.backward(g)
    assert x.grad is not None and torch.equal(x.grad, g * kept * scale)


def test_the_expectation_of_the_output_is_the_input():
    torch.manual_seed(2)
    x = torch.ones(1 << 20, dtype=torch.float64)
    assert abs(dropout(x, 0.2).mean().item() - 1.0) < 5 * math.sqrt(0.25 / (1 << 20))


def test_same_seed_same_mask_and_dtype_kept():
    x = torch.randn(10, 50).bfloat16()
    torch.manual_seed(3)
    a = dropout(x, 0.2)
    torch.manual_seed(3)
    b = dropout(x, 0.2)
    assert torch.equal(a, b) and a.dtype == torch.bfloat16
    assert not torch.equal(a, dropout(x, 0.2))  # the generator moved on


def test_eval_mode_zero_and_one_and_bad_p():
    torch.manual_seed(4)
    x = torch.randn(4, 8)
    m = Dropout(0.5).eval()
    assert m(x) is x and dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))
    assert torch.equal(dropout(x, 1 - 1e-6), torch.zeros_like(x))  # 1 on the grid
    with pytest.raises(ValueError, match="dropout probability"):
        keep_mask((3,), 1.5, torch.device("cpu"))
    with pytest.raises(ValueError):
        Dropout(-0.1)
