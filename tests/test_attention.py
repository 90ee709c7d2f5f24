"""Alignment scorers and masked softmax of the recurrent decoder."""

import pytest
import torch

from nmt.config.schema import SCORE_KINDS
from nmt.model.attention import attend, masked_softmax
from nmt.model.attention_factory import build_scorer

KINDS = list(SCORE_KINDS)


def _inputs(B=3, S=7, D=8):
    torch.manual_seed(0)
    memory = torch.randn(B, S, D)
    query = torch.randn(B, D)
    lengths = torch.tensor([S, 4, 1])
    mask = torch.arange(S)[None, :] < lengths[:, None]
    return query, memory, mask


def test_masked_softmax_textbook_example():
    scores = torch.tensor([[1.8, 2.6, -1.0, 0.4]])
    w = masked_softmax(scores, torch.ones(1, 4, dtype=torch.bool))
    assert torch.allclose(w, torch.tensor([[0.283, 0.630, 0.017, 0.070]]), atol=1e-3)


def test_masked_softmax_padding_is_exactly_zero_and_empty_row_is_zero():
    scores = torch.randn(2, 5)
    mask = torch.tensor([[True, True, False, False, False], [False] * 5])
    w = masked_softmax(scores, mask)
    assert torch.equal(w[0, 2:], torch.zeros(3))
    assert torch.allclose(w[0].sum(), torch.tensor(1.0))
    assert torch.equal(w[1], torch.zeros(5))


@pytest.mark.parametrize("mask_shape", [(40, 6, 11), (40, 1, 11)])
def test_masked_softmax_without_gradient_equals_the_training_path(mask_shape):
    # the search path's 4 calls against the guarded training path's 9: the same bits,
    # empty rows (all positions masked) included, and no gradient needed for it
    torch.manual_seed(1)
    scores = torch.randn(40, 6, 11)
    mask = torch.rand(mask_shape) > 0.5
    mask[0] = False  # rows with no real position
    trained = masked_softmax(scores.clone().requires_grad_(True), mask)
    with torch.no_grad():
        searched = masked_softmax(scores.clone(), mask)
    assert torch.equal(trained.detach(), searched)
    assert torch.equal(searched[0], torch.zeros(6, 11))
    trained.sum().backward()  # the training path keeps its finite gradients


@pytest.mark.parametrize("kind", KINDS)
def test_weights_are_a_distribution_and_context_is_inside_value_range(kind):
    query, memory, mask = _inputs()
    scorer = build_scorer(kind, 8, 8, 6)
    assert scorer is not None
    context, weights = attend(scorer, query, scorer.precompute(memory), memory, mask)
    assert weights.shape == (3, 7) and context.shape == (3, 8)
    assert (weights >= 0).all()
    assert torch.allclose(weights.sum(-1), torch.ones(3), atol=1e-6)
    assert (weights[~mask] == 0).all()
    for b in range(3):
        real = memory[b][mask[b]]
        assert (context[b] >= real.min(0).values - 1e-6).all()
        assert (context[b] <= real.max(0).values + 1e-6).all()


@pytest.mark.parametrize("kind", KINDS)
def test_values_under_padding_do_not_change_the_context(kind):
    query, memory, mask = _inputs()
    scorer = build_scorer(kind, 8, 8, 6)
    assert scorer is not None
    context, _ = attend(scorer, query, scorer.precompute(memory), memory, mask)
    noisy = memory.clone()
    noisy[~mask] = 1e4 * torch.randn(int((~mask).sum()), 8)
    context2, _ = attend(scorer, query, scorer.precompute(noisy), noisy, mask)
    assert torch.equal(context, context2)


def test_scaled_dot_divides_by_sqrt_dk():
    query, memory, mask = _inputs()
    dot, scaled = build_scorer("dot", 8, 8, 1), build_scorer("scaled_dot", 8, 8, 1)
    assert dot is not None and scaled is not None
    assert torch.allclose(dot(query, memory) / 8**0.5, scaled(query, memory))


def test_dot_with_mismatched_sizes_is_an_error():
    with pytest.raises(ValueError, match="dot"):
        build_scorer("dot", 8, 16, 4)
    assert build_scorer("none", 8, 16, 4) is None


def test_fast_tanh_matches_torch_tanh_in_value_and_gradient():
    from nmt.model.attention import tanh_

    g = torch.Generator().manual_seed(0)
    base = torch.cat(
        [
            torch.randn(2000, generator=g) * 4,
            torch.linspace(-1e-4, 1e-4, 101),
            torch.tensor([0.0, 30.0, -30.0, 100.0, -100.0]),
        ]
    )
    with torch.no_grad():
        assert torch.allclose(tanh_(base.clone()), torch.tanh(base), rtol=0, atol=3e-7)
    leaf = base.clone().requires_grad_()
    x = leaf * 1.0  # the scorer's (keys + W q): a temporary, overwritten in place
    y = tanh_(x)
    assert y.data_ptr() == x.data_ptr()
    (grad,) = torch.autograd.grad(y.sum(), leaf)
    ref_leaf = base.clone().requires_grad_()
    (ref,) = torch.autograd.grad(torch.tanh(ref_leaf).sum(), ref_leaf)
    # 1 - y^2 near |y| = 1 carries y's absolute error (~1e-7), as torch.tanh's own does
    assert torch.allclose(grad, ref, rtol=1e-5, atol=1e-6)
    assert torch.equal(leaf.detach(), base)


def test_the_in_place_tanh_equals_torch_tanh_with_its_gradient():
    from nmt.model.attention import tanh_

    torch.manual_seed(0)
    x = (3 * torch.randn(4, 5, 6)).requires_grad_()
    ref = torch.tanh(x)
    ref.sum().backward()
    assert x.grad is not None
    ref_grad, x.grad = x.grad.clone(), None
    out = tanh_(x.clone())  # the scorer passes a temporary it does not need again
    out.sum().backward()
    assert x.grad is not None
    assert torch.allclose(out, ref, atol=1e-6) and torch.allclose(x.grad, ref_grad, atol=1e-6)
    with torch.no_grad():
        y = x.detach().clone()
        assert torch.allclose(tanh_(y), ref, atol=1e-6) and y.data_ptr() == tanh_(y).data_ptr()
