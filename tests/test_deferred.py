"""Deferred weight gradients (nmt/ops/weight_grads.py): the decoder's step weights get, as one
product after the loop, the gradients autograd would have summed step by step."""

import pytest
import torch

from nmt.config.schema import ATTENTION_TYPES
from nmt.ops.weight_grads import defer_weight_grads, deferred_linear

from conftest import tiny_model


def _grad(t: torch.Tensor) -> torch.Tensor:
    """``t.grad``, which a backward pass through ``t`` must have set."""
    assert t.grad is not None
    return t.grad


ATTENTIONS = list(ATTENTION_TYPES)


def _grads(model, src, src_len, tgt, defer: bool, monkeypatch, bf16: bool = False):
    model.decoder.defer_weight_grads = defer
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = model(src, src_len, tgt[:, :-1], tgt[:, 1:])
    loss.backward()
    return loss.item(), {
        n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None
    }


def _inputs(toy_vocabs, B=4, S=6, T=7):
    src_v, tgt_v = toy_vocabs
    torch.manual_seed(3)
    src = torch.randint(4, len(src_v), (B, S))
    src_len = torch.tensor([S, S - 1, 3, S][:B])
    src[2, 3:] = 0
    src[1, S - 1 :] = 0
    tgt = torch.randint(4, len(tgt_v), (B, T + 1))
    tgt[2, 4:] = 0  # a shorter target: padding rows in the loss
    return src, src_len, tgt


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("order", ["luong", "bahdanau"])
def test_deferred_gradients_equal_autograds_for_every_decoder(
    toy_vocabs, monkeypatch, attention, order
):
    model = tiny_model(
        *toy_vocabs,
        attention=attention,
        step_order=order,
        dec_layers=2 if attention == "additive" else 1,
    ).train()
    src, src_len, tgt = _inputs(toy_vocabs)
    loss0, now = _grads(model, src, src_len, tgt, False, monkeypatch)
    loss1, deferred = _grads(model, src, src_len, tgt, True, monkeypatch)
    assert loss0 == loss1
    assert set(now) == set(deferred)
    for name, g in now.items():
        assert torch.allclose(deferred[name], g, rtol=1e-5, atol=1e-7), name
    # the step weights really took the deferred path: their gradients are not zero
    cell = dict(model.named_parameters())
    assert deferred["decoder.cells.0.weight_hh"].abs().sum() > 0
    assert cell["decoder.cells.0.weight_hh"].grad is not None


@pytest.mark.parametrize("order", ["luong", "bahdanau"])
def test_deferred_gradients_under_bf16_autocast_stay_close(toy_vocabs, monkeypatch, order):
    model = tiny_model(*toy_vocabs, step_order=order).train()
    src, src_len, tgt = _inputs(toy_vocabs)
    _, now = _grads(model, src, src_len, tgt, False, monkeypatch, bf16=True)
    _, deferred = _grads(model, src, src_len, tgt, True, monkeypatch, bf16=True)
    g0 = torch.cat([now[n].flatten() for n in sorted(now)])
    g1 = torch.cat([deferred[n].flatten() for n in sorted(now)])
    assert (g1 - g0).norm() <= 0.02 * g0.norm()  # bf16 sums in another order
    for name in ("decoder.cells.0.weight_hh", "decoder.pre_output.weight"):
        assert deferred[name].dtype == torch.float32  # master weights stay fp32


def test_a_retained_graph_backpropagated_twice_accumulates_twice(toy_vocabs, monkeypatch):
    """The pending pairs are used up by each backward pass, so a second pass over a retained
    graph adds the same gradients again rather than double or none."""
    model = tiny_model(*toy_vocabs).train()
    src, src_len, tgt = _inputs(toy_vocabs)
    model.decoder.defer_weight_grads = True
    loss = model(src, src_len, tgt[:, :-1], tgt[:, 1:])
    loss.backward(retain_graph=True)
    once = model.decoder.cells[0].weight_hh.grad.clone()
    loss.backward()
    assert torch.allclose(model.decoder.cells[0].weight_hh.grad, 2 * once, rtol=1e-5)


def test_deferred_linear_is_addmm_with_one_weight_gradient_for_all_steps():
    torch.manual_seed(0)
    w = torch.randn(5, 3, requires_grad=True)
    b = torch.randn(5, requires_grad=True)
    h0 = torch.randn(2, 3, requires_grad=True)
    (wd,), (pending,), (h,) = defer_weight_grads([w], [h0])
    assert not wd.requires_grad
    x, outs = h, []
    for _ in range(4):
        x = torch.tanh(deferred_linear(b, x, wd, pending))[:, :3]
        outs.append(x)
    torch.stack(outs).sum().backward()
    got = [_grad(t).clone() for t in (w, b, h0)]
    assert pending == []  # used up by the backward pass
    for t in (w, b, h0):
        t.grad = None
    x, outs = h0, []
    for _ in range(4):
        x = torch.tanh(torch.addmm(b, x, w.t()))[:, :3]
        outs.append(x)
    torch.stack(outs).sum().backward()
    for g, t in zip(got, (w, b, h0), strict=True):
        assert torch.allclose(g, _grad(t), atol=1e-6)


def test_search_and_no_grad_decoding_do_not_defer(toy_vocabs):
    model = tiny_model(*toy_vocabs).eval()
    src, src_len, tgt = _inputs(toy_vocabs)
    mem, state = model.decoder.start(model.encoder(src, src_len))
    with torch.no_grad():
        model.decoder.unroll(tgt[:, :-1], state, mem)
    assert mem.weights.pending is None


def _toy_loop(w, b, h0, steps=3):
    (wd,), (pending,), (h,) = defer_weight_grads([w], [h0])
    x = h
    for _ in range(steps):
        x = torch.tanh(deferred_linear(b, x, wd, pending))[:, :3]
    return x.sum(), pending


def test_a_partial_backward_pass_leaves_no_pairs_behind(toy_vocabs, monkeypatch):
    """A pass that reaches the steps but not the collecting node (here the embedding's
    gradient alone) must not leave pairs that a later pass over the retained graph would
    add again, nor keep the graph alive through them."""
    torch.manual_seed(0)
    w, b = torch.randn(5, 3, requires_grad=True), torch.randn(5, requires_grad=True)
    h0 = torch.randn(2, 3, requires_grad=True)
    loss, pending = _toy_loop(w, b, h0)
    torch.autograd.grad(loss, [b], retain_graph=True)
    assert pending == []
    model = tiny_model(*toy_vocabs).train()
    src, src_len, tgt = _inputs(toy_vocabs)
    grads = {}
    for defer in (False, True):
        model.decoder.defer_weight_grads = defer
        model.zero_grad()
        loss = model(src, src_len, tgt[:, :-1], tgt[:, 1:])
        torch.autograd.grad(loss, [model.decoder.embed.weight], retain_graph=True)
        loss.backward()
        grads[defer] = model.decoder.cells[0].weight_hh.grad.clone()
    assert torch.allclose(grads[True], grads[False], rtol=1e-5, atol=1e-7)


def test_second_derivatives_through_deferred_weights_raise():
    torch.manual_seed(0)
    w, b = torch.randn(5, 3, requires_grad=True), torch.randn(5, requires_grad=True)
    h0 = torch.randn(2, 3, requires_grad=True)
    loss, _ = _toy_loop(w, b, h0)
    (gw,) = torch.autograd.grad(loss, [w], create_graph=True)
    with pytest.raises(RuntimeError):
        torch.autograd.grad(gw.pow(2).sum(), [w])
