"""Tests for nmt.model.multihead (Vaswani et al. 2017, section 3.2)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.model.multihead import (
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_textbook_worked_example():
    # d_k = 4, so scores = q.k / 2; q = 1 makes each score k_i[0] / 2.
    scores = torch.tensor([1.8, 2.6, -1.0, 0.4])
    query = torch.tensor([[[1.0, 0.0, 0.0, 0.0]]])  # (1, 1, 4)
    key = torch.zeros(1, 4, 4)
    key[0, :, 0] = scores * math.sqrt(4)
    value = torch.eye(4).unsqueeze(0)
    out, weights = scaled_dot_product_attention(query, key, value)
    expected = torch.tensor([0.283, 0.630, 0.017, 0.070])
    assert torch.allclose(weights[0, 0], expected, atol=1e-3, rtol=0)
    # With one-hot values the output is the weight vector itself.
    assert torch.allclose(out[0, 0], expected, atol=1e-3, rtol=0)


def test_weights_nonnegative_and_rows_sum_to_one():
    g = _gen(1)
    q, k, v = (torch.randn(3, 2, 5, 8, generator=g) * 3 for _ in range(3))
    _, weights = scaled_dot_product_attention(q, k, v)
    assert weights.shape == (3, 2, 5, 5)
    assert (weights >= 0).all()
    assert torch.allclose(weights.sum(-1), torch.ones(3, 2, 5), atol=1e-6)


def test_output_within_value_range_over_unmasked_positions():
    g = _gen(2)
    q, k = torch.randn(2, 4, 6, generator=g), torch.randn(2, 7, 6, generator=g)
    v = torch.randn(2, 7, 3, generator=g)
    # Huge values on padding would break the bound if they leaked in.
    v[:, 5:] = 1e4
    mask = padding_mask(torch.tensor([5, 5]), 7)
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    lo = v[:, :5].min(dim=1, keepdim=True).values
    hi = v[:, :5].max(dim=1, keepdim=True).values
    assert (out >= lo - 1e-6).all() and (out <= hi + 1e-6).all()


def test_padded_values_do_not_change_output_and_get_zero_weight():
    g = _gen(3)
    q, k = torch.randn(2, 3, 4, generator=g), torch.randn(2, 6, 4, generator=g)
    v = torch.randn(2, 6, 5, generator=g)
    lengths = torch.tensor([6, 2])
    mask = padding_mask(lengths, 6)
    assert mask.shape == (2, 1, 6) and mask.dtype == torch.bool
    out1, w1 = scaled_dot_product_attention(q, k, v, mask)
    v2, k2 = v.clone(), k.clone()
    v2[1, 2:] = torch.randn(4, 5, generator=g) * 100
    k2[1, 2:] = torch.randn(4, 4, generator=g) * 100
    out2, w2 = scaled_dot_product_attention(q, k2, v2, mask)
    assert torch.equal(out1, out2)
    assert (w1[1, :, 2:] == 0).all() and (w2[1, :, 2:] == 0).all()
    assert (w1[0] > 0).all()


def test_causal_mask_zero_above_diagonal():
    m = causal_mask(4)
    assert m.dtype == torch.bool
    assert torch.equal(
        m, torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]).bool()
    )
    x = torch.randn(2, 4, 8, generator=_gen(4))
    _, weights = scaled_dot_product_attention(x, x, x, m)
    upper = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)
    assert (weights[:, upper] == 0).all()
    assert (weights[:, ~upper] > 0).all()
    assert torch.allclose(weights[:, 0, 0], torch.ones(2))


def test_fully_masked_row_gives_zeros_not_nan():
    q = torch.randn(1, 2, 4, generator=_gen(5), requires_grad=True)
    k, v = torch.randn(1, 3, 4), torch.randn(1, 3, 2)
    mask = torch.tensor([[[False, False, False], [True, False, True]]])
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert not torch.isnan(out).any() and not torch.isnan(weights).any()
    assert torch.equal(weights[0, 0], torch.zeros(3))
    assert torch.equal(out[0, 0], torch.zeros(2))
    assert torch.isclose(weights[0, 1].sum(), torch.tensor(1.0))
    out.sum().backward()
    assert q.grad is not None
    assert not torch.isnan(q.grad).any()


def test_mismatched_shapes_raise():
    with pytest.raises(ValueError, match="d_k"):
        scaled_dot_product_attention(
            torch.randn(1, 2, 4), torch.randn(1, 3, 5), torch.randn(1, 3, 4)
        )
    with pytest.raises(ValueError, match="length"):
        scaled_dot_product_attention(
            torch.randn(1, 2, 4), torch.randn(1, 3, 4), torch.randn(1, 2, 4)
        )


@pytest.mark.parametrize("num_heads", [1, 4])
def test_multihead_shapes(num_heads):
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=16, num_heads=num_heads)
    q, kv = torch.randn(3, 5, 16), torch.randn(3, 7, 16)
    out, weights = mha(q, kv, kv, padding_mask(torch.tensor([7, 3, 1]), 7))
    assert out.shape == (3, 5, 16)
    assert weights.shape == (3, num_heads, 5, 7)
    assert (weights[1, :, :, 3:] == 0).all() and (weights[2, :, :, 1:] == 0).all()
    assert torch.allclose(weights.sum(-1), torch.ones(3, num_heads, 5), atol=1e-6)
    # Self-attention with a (T, T) causal mask broadcasts over batch and heads.
    _, w_self = mha(q, q, q, causal_mask(5))
    assert w_self.shape == (3, num_heads, 5, 5)
    assert (w_self[..., torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)] == 0).all()


def test_multihead_padding_invariance():
    torch.manual_seed(1)
    mha = MultiHeadAttention(d_model=8, num_heads=2).eval()
    q, kv = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    mask = padding_mask(torch.tensor([5, 2]), 5)
    kv2 = kv.clone()
    kv2[1, 2:] = 50.0
    out1, _ = mha(q, kv, kv, mask)
    out2, _ = mha(q, kv2, kv2, mask)
    assert torch.allclose(out1, out2, atol=1e-6)


@pytest.mark.parametrize("d_model,num_heads", [(10, 3), (8, 0)])
def test_multihead_indivisible_raises(d_model, num_heads):
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(d_model, num_heads)


def test_matches_torch_sdpa_with_bool_mask():
    g = _gen(6)
    q = torch.randn(2, 3, 5, 8, generator=g)
    k = torch.randn(2, 3, 7, 8, generator=g)
    v = torch.randn(2, 3, 7, 6, generator=g)
    mask = torch.rand(2, 3, 5, 7, generator=g) > 0.5
    mask[..., 0] = True  # no fully masked rows: torch returns NaN there
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.allclose(out, ref, atol=1e-5, rtol=0)
    out_nomask, _ = scaled_dot_product_attention(q, k, v)
    assert torch.allclose(out_nomask, F.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=0)


@settings(max_examples=50, deadline=None)
@given(
    b=st.integers(1, 3),
    t=st.integers(1, 5),
    s=st.integers(1, 6),
    d=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_property_weights_sum_to_one_and_masked_are_zero(b, t, s, d, seed):
    g = _gen(seed)
    q, k = torch.randn(b, t, d, generator=g) * 5, torch.randn(b, s, d, generator=g) * 5
    v = torch.randn(b, s, 2, generator=g)
    mask = torch.rand(b, t, s, generator=g) > 0.5
    # Guarantee at least one True per row at a random column.
    col = torch.randint(0, s, (b, t, 1), generator=g)
    mask.scatter_(-1, col, True)
    _, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.allclose(weights.sum(-1), torch.ones(b, t), atol=1e-5)
    assert (weights[~mask] == 0).all()
    assert (weights >= 0).all()
