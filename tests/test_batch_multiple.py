"""``train.batch_multiple`` (Batch.padded, nmt/ops/shapes.py): the training batch padded to
few shapes for oneDNN with dummy pairs and PAD columns that change neither the loss, nor
n_tokens, nor any gradient; applied only under CPU autocast; bad values refused."""

from __future__ import annotations

import pytest
import torch
from test_bench import REFERENCE, TINY, tiny_corpus  # noqa: F401 (a fixture)

import nmt.data.batches as batches
from nmt.analysis.bench_options import BenchOptions
from nmt.commands.bench import run_bench
from nmt.config.load import load_config
from nmt.config.schema import Config, ConfigError, TrainConfig
from nmt.data.batches import collate, encode_pairs
from nmt.data.corpus import Pair
from nmt.data.vocab import EOS, PAD
from nmt.model.seq2seq import Seq2Seq
from nmt.training.loop import Trainer

from conftest import TOY_PAIRS, bare_trainer, tiny_model


def _batch(toy_vocabs, n: int = 5):
    """The first ``n`` toy pairs as one batch (B = n, S and T their longest sides)."""
    pairs = [Pair(s, t, "toy") for s, t in TOY_PAIRS[:n]]
    return collate(encode_pairs(pairs, *toy_vocabs))


def _loss_and_grads(model, b) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss = model(b.src, b.src_len, b.tgt_in, b.tgt_out, label_smoothing=0.1)
    (loss / b.n_tokens).backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def test_padded_batch_has_the_promised_shapes_and_dummy_pairs(toy_vocabs):
    b = _batch(toy_vocabs)
    (B, S), T = b.src.shape, b.tgt_in.size(1)
    p = b.padded(8)
    assert p.src.shape == (8, -(-S // 8) * 8) and p.tgt_in.shape == p.tgt_out.shape == (8, T)
    assert torch.equal(p.src[:B, :S], b.src) and not p.src[:B, S:].any()
    assert p.src[B:, 0].eq(EOS).all() and not p.src[B:, 1:].any()  # PAD is 0
    assert p.src_len.tolist() == b.src_len.tolist() + [1] * (8 - B)
    assert p.tgt_in[B:].eq(PAD).all() and p.tgt_out[B:].eq(PAD).all()
    assert p.index.tolist() == b.index.tolist() + [-1] * (8 - B)
    assert p.n_tokens == b.n_tokens
    assert p.padded(8) is p and b.padded(1).src.size(0) == B
    with pytest.raises(ValueError, match="multiple >= 1"):
        b.padded(0)


@pytest.mark.parametrize("attention", ["additive", "dot", "multihead", "local_p", "none"])
def test_padding_leaves_loss_and_every_gradient_unchanged(toy_vocabs, attention):
    """fp32, dropout 0: the padded batch gives the loss and gradients of the unpadded one
    up to summation order (its products have more rows and columns)."""
    extra = {"heads": 2} if attention == "multihead" else {}
    b = _batch(toy_vocabs)
    model = tiny_model(*toy_vocabs, attention=attention, **extra).train()
    loss, grads = _loss_and_grads(model, b)
    loss_p, grads_p = _loss_and_grads(model, b.padded(8))
    torch.testing.assert_close(loss_p, loss, rtol=1e-6, atol=1e-6)
    assert grads.keys() == grads_p.keys() and all(g is not None for g in grads.values())
    for name, g in grads.items():
        torch.testing.assert_close(grads_p[name], g, rtol=1e-5, atol=1e-7, msg=name)


def test_a_dummy_pair_with_a_target_would_show(toy_vocabs):
    """The check above can fail: a padded row with one real target token changes the loss."""
    model = tiny_model(*toy_vocabs).train()
    b = _batch(toy_vocabs)
    p = b.padded(8)
    p.tgt_out[-1, 0] = EOS
    assert not torch.allclose(_loss_and_grads(model, p)[0], _loss_and_grads(model, b)[0])


def _trainer(tmp_path, toy_vocabs, multiple: int | None) -> Trainer:
    cfg = Config(
        train=TrainConfig(
            out_dir=str(tmp_path), device="cpu", precision="fp32", batch_multiple=multiple
        )
    )
    return bare_trainer(cfg, toy_vocabs)


def seen_shapes(monkeypatch) -> list[tuple[int, int]]:
    """(B, S) of every batch Seq2Seq.forward gets from now on."""
    seen: list[tuple[int, int]] = []
    forward = Seq2Seq.forward

    def spy(self, src, *args, **kwargs):
        seen.append(tuple(src.shape))
        return forward(self, src, *args, **kwargs)

    monkeypatch.setattr(Seq2Seq, "forward", spy)
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("wanted", [False, True])
def test_training_step_pads_only_where_stable_rows_are_wanted(
    tmp_path, toy_vocabs, monkeypatch, wanted
):
    """The step's B and S are multiples where stable_rows_wanted holds (forced here in
    fp32); elsewhere (fp32 as it is) the batch goes in as it was. n_tokens, the summed loss
    and the updated weights are those of the unpadded step either way."""
    monkeypatch.setattr(batches, "stable_rows_wanted", lambda _device: wanted)
    seen = seen_shapes(monkeypatch)
    examples = encode_pairs([Pair(s, t, "toy") for s, t in TOY_PAIRS[:5]], *toy_vocabs)
    runs = []
    for multiple in (None, 8):
        tr = _trainer(tmp_path / str(multiple), toy_vocabs, multiple)
        n_tok = tr.train_step(examples)
        runs.append((n_tok, tr.state.epoch_loss_sum, dict(tr.model.named_parameters())))
    (B, S) = collate(examples).src.shape
    assert seen[0] == (B, S)
    assert seen[1] == ((8, -(-S // 8) * 8) if wanted else (B, S))
    assert runs[1][0] == runs[0][0] and runs[1][1] == pytest.approx(runs[0][1], rel=1e-6)
    for name, w in runs[0][2].items():
        torch.testing.assert_close(runs[1][2][name], w, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("value", ["0", "-8"])
def test_a_bad_batch_multiple_is_refused_naming_the_option(value):
    with pytest.raises(ConfigError) as e:
        load_config(REFERENCE, [f"train.batch_multiple={value}"])
    assert "\n" not in str(e.value)
    assert str(e.value).endswith(f": train.batch_multiple: must be positive, got {value}")
    with pytest.raises(ConfigError, match="train.batch_multiple: expected an integer"):
        load_config(REFERENCE, ["train.batch_multiple=eight"])
    assert load_config(REFERENCE).train.batch_multiple is None  # off by default


def bench_bf16(corpus: str, override: str, train_steps: int) -> dict:
    """``nmt bench CONFIG OVERRIDE --precision bf16`` of the tiny model, training only: one
    warm-up step and ``train_steps`` timed, one thread; its result."""
    threads = torch.get_num_threads()
    opts = BenchOptions(
        REFERENCE,
        overrides=(*TINY, corpus, override),
        threads=1,
        warmup=1,
        train_steps=train_steps,
        train_seconds=0,
        skip_decode=True,
        precision="bf16",
    )
    try:
        return run_bench(opts)
    finally:
        torch.set_num_threads(threads)


def test_bench_passes_the_option_through(tiny_corpus, monkeypatch):  # noqa: F811
    """``nmt bench CONFIG train.batch_multiple=8 --precision bf16``: the training steps
    see padded batches and the JSON records the option."""
    seen = seen_shapes(monkeypatch)
    result = bench_bf16(tiny_corpus, "train.batch_multiple=8", 2)
    assert result["train"]["batch_multiple"] == 8
    assert len(seen) == 3 and all(b % 8 == 0 and s % 8 == 0 for b, s in seen), seen


def test_the_precision_calibration_cache_tells_the_option_apart():
    """A bf16/fp32 answer measured with padded batches is not reused without them; answers
    cached before the option existed still count when it is off."""
    from nmt.training.calibrate import calibration_key

    model = {"attention": "additive"}
    assert calibration_key(model, 64) == calibration_key(model, 64, None)
    assert calibration_key(model, 64, 8) not in (
        calibration_key(model, 64),
        calibration_key(model, 64, 16),
    )
