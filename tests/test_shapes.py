"""Rounded row counts for oneDNN (nmt/ops/shapes.py): the bf16 training step's products get
few shapes, and the added rows change neither the loss nor any gradient."""

import pytest
import torch
from test_deferred import _grads, _inputs

import nmt.ops.shapes as shapes
from nmt.ops.shapes import pad_rows, rounded_rows, stable_rows_wanted

from conftest import tiny_model


def test_rounded_rows_rounds_up_to_the_multiple():
    assert [rounded_rows(n, 64) for n in (0, 1, 63, 64, 65, 1999)] == [0, 64, 64, 64, 128, 2048]
    assert rounded_rows(5, 1) == 5
    with pytest.raises(ValueError, match="multiple >= 1"):
        rounded_rows(5, 0)
    with pytest.raises(ValueError, match="n >= 0"):
        rounded_rows(-1, 8)


def test_pad_rows_appends_zero_rows_only():
    x = torch.arange(6.0).view(3, 2)
    y = pad_rows(x, 5)
    assert y.shape == (5, 2) and torch.equal(y[:3], x) and not y[3:].any()
    assert pad_rows(x, 3) is x


def test_stable_rows_are_wanted_only_under_cpu_autocast():
    cpu = torch.device("cpu")
    assert not stable_rows_wanted(cpu)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert stable_rows_wanted(cpu)
        assert not stable_rows_wanted(torch.device("cuda"))


@pytest.mark.parametrize("defer", [False, True])
def test_padded_rows_leave_bf16_loss_and_gradients_unchanged(toy_vocabs, monkeypatch, defer):
    """The output layer's rows and the deferred weight gradients' rows rounded up to 64
    against not rounded (multiple 1): the same loss, and gradients equal up to bf16's
    summation order."""
    src, src_len, tgt = _inputs(toy_vocabs)
    runs = {}
    for multiple in (1, 64):
        monkeypatch.setattr(shapes, "ROW_MULTIPLE", multiple)
        model = tiny_model(*toy_vocabs).train()
        seen: list[int] = []
        model.generator.register_forward_hook(
            lambda m, args, out, seen=seen: seen.append(args[0].size(0))
        )
        runs[multiple] = _grads(model, src, src_len, tgt, defer, monkeypatch, bf16=True)
        real = int((tgt[:, 1:] != 0).sum())
        assert seen == [real if multiple == 1 else 64]  # the output layer's rows
    (loss1, g1), (loss64, g64) = runs[1], runs[64]
    assert loss64 == pytest.approx(loss1, rel=1e-6)
    assert set(g1) == set(g64)
    for name, g in g1.items():
        assert torch.allclose(g64[name], g, rtol=1e-2, atol=1e-4), name
