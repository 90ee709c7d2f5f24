"""Training precision: the choice of autocast dtype, bf16 training steps, bad options."""

from __future__ import annotations

import shutil
from typing import Any, cast

import pytest
import torch

import nmt.ops.precision as precision
from nmt.config.schema import ATTENTION_TYPES, Config, Precision, TrainConfig
from nmt.data.batches import encode_pairs
from nmt.data.corpus import Pair
from nmt.ops.precision import PrecisionError, autocast, autocast_dtype, search_dtype
from nmt.training.loop import Trainer

from conftest import REPO, TOY_PAIRS, bare_trainer, nmt_here, tiny_model

CPU = torch.device("cpu")


def test_auto_is_bf16_only_where_the_cpu_has_native_bf16(monkeypatch):
    monkeypatch.setattr(precision, "cpu_model_and_flags", lambda: ("x", {"avx2", "avx512f"}))
    assert autocast_dtype("auto", CPU) is None
    monkeypatch.setattr(precision, "cpu_model_and_flags", lambda: ("x", {"avx512_bf16"}))
    assert autocast_dtype("auto", CPU) is torch.bfloat16
    monkeypatch.setattr(precision, "cpu_model_and_flags", lambda: ("x", {"amx_bf16"}))
    assert autocast_dtype("auto", CPU) is torch.bfloat16
    assert autocast_dtype("fp32", CPU) is None
    assert autocast_dtype("bf16", CPU) is torch.bfloat16


def test_search_auto_is_fp32_on_a_cpu_even_with_native_bf16(monkeypatch):
    """bf16 search measured slower on an AMX Xeon (results/speed/2026-12-06-amx/): auto
    searches in fp32 on every CPU; bf16 asked for by name is honoured, bad names refused."""
    monkeypatch.setattr(precision, "cpu_model_and_flags", lambda: ("x", {"amx_bf16"}))
    assert autocast_dtype("auto", CPU) is torch.bfloat16  # training's auto is unchanged
    assert search_dtype("auto", CPU) is None
    assert search_dtype("bf16", CPU) is torch.bfloat16
    with pytest.raises(PrecisionError, match=r"search.precision: fp16 needs a CUDA device"):
        search_dtype("fp16", CPU)
    with pytest.raises(PrecisionError, match=r"search.precision: unknown precision 'x'"):
        search_dtype("x", CPU)


def test_fp16_on_cpu_and_unknown_names_are_refused_naming_the_option():
    with pytest.raises(PrecisionError, match=r"train.precision: fp16 needs a CUDA device"):
        autocast_dtype("fp16", CPU)
    with pytest.raises(PrecisionError, match=r"--precision: unknown precision 'fp8'"):
        autocast_dtype("fp8", CPU, option="--precision")


def test_autocast_runs_matmuls_in_bf16_and_is_a_no_op_for_fp32():
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    with autocast(CPU, torch.bfloat16):
        assert torch.mm(a, b).dtype == torch.bfloat16
    with autocast(CPU, None):
        assert torch.mm(a, b).dtype == torch.float32


def _train(tmp_path, toy_vocabs, prec: Precision, steps: int = 60) -> tuple[Trainer, list[float]]:
    """Train a tiny model on the toy pairs for ``steps`` full-batch steps; the per-step
    summed losses."""
    src_v, tgt_v = toy_vocabs
    cfg = Config(
        train=TrainConfig(out_dir=str(tmp_path / prec), device="cpu", precision=prec, lr=0.01)
    )
    tr = bare_trainer(cfg, (src_v, tgt_v))
    examples = encode_pairs([Pair(s, t, "toy") for s, t in TOY_PAIRS], src_v, tgt_v)
    losses = []
    for _ in range(steps):
        tr.train_step(examples)
        losses.append(tr.state.epoch_loss_sum)
        tr.state.epoch_loss_sum = 0.0
    return tr, losses


@pytest.mark.slow
def test_bf16_training_keeps_fp32_weights_and_learns_like_fp32(tmp_path, toy_vocabs):
    tr, bf16 = _train(tmp_path, toy_vocabs, "bf16")
    assert tr.amp_dtype is torch.bfloat16
    assert all(p.dtype == torch.float32 for p in tr.model.parameters())
    _, fp32 = _train(tmp_path, toy_vocabs, "fp32")
    assert all(torch.isfinite(torch.tensor(bf16)))
    assert fp32[-1] < 0.3 * fp32[0] and bf16[-1] < 0.3 * bf16[0]
    assert abs(bf16[-1] - fp32[-1]) < 0.25 * fp32[-1] + 1.0


def test_bf16_loss_is_close_to_fp32(toy_vocabs):
    src_v, tgt_v = toy_vocabs
    model = tiny_model(src_v, tgt_v).eval()
    examples = encode_pairs([Pair(s, t, "toy") for s, t in TOY_PAIRS], src_v, tgt_v)
    from nmt.data.batches import collate

    b = collate(examples)
    with torch.no_grad():
        full = model(b.src, b.src_len, b.tgt_in, b.tgt_out)
        with autocast(CPU, torch.bfloat16):
            half = model(b.src, b.src_len, b.tgt_in, b.tgt_out)
    assert half.dtype == torch.float32
    assert abs(float(half) - float(full)) < 0.02 * float(full)


@pytest.mark.slow
@pytest.mark.parametrize("key", ["train.precision", "search.precision"])
def test_train_refuses_fp16_on_cpu_before_any_work(tmp_path, key):
    """search.precision too: unchecked, it failed at the first validation, after an epoch."""
    cases = REPO.parent / "shared" / "cases"
    if not (cases / "nmt_toy.yaml").exists() or torch.cuda.is_available():
        pytest.skip("needs shared/cases and a machine without CUDA")
    shutil.copy(cases / "nmt_toy.yaml", tmp_path / "toy.yaml")
    r = nmt_here("train", "toy.yaml", f"{key}=fp16", cwd=tmp_path)  # a refusal: in-process
    assert r.returncode == 2, r.stderr
    assert f"{key}: fp16 needs a CUDA device" in r.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_bf16_without_native_support_is_warned_about(tmp_path, toy_vocabs, monkeypatch):
    import nmt.training.precision_choice

    messages: list[str] = []
    src_v, tgt_v = toy_vocabs
    for native in (False, True):
        monkeypatch.setattr(
            nmt.training.precision_choice, "native_bf16", lambda _device, n=native: n
        )
        cfg = Config(train=TrainConfig(out_dir=str(tmp_path), device="cpu", precision="bf16"))
        bare_trainer(cfg, (src_v, tgt_v), log=messages.append)
        warned = [m for m in messages if m.startswith("warning: train.precision=bf16")]
        assert len(warned) == 1  # once, for the emulated case only


class _CastCounter(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts fp32 -> bf16 casts of tensors with at least ``min_numel`` elements."""

    def __init__(self, min_numel: int):
        super().__init__()
        self.min_numel, self.casts = min_numel, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        # with autograd a cast reaches the dispatcher as _to_copy, under inference_mode as to
        to = (
            kwargs.get("dtype")
            if func is torch.ops.aten._to_copy.default
            else (args[1] if func is torch.ops.aten.to.dtype else None)
        )
        if (
            to == torch.bfloat16
            and args[0].dtype == torch.float32
            and args[0].numel() >= self.min_numel
        ):
            self.casts += 1
        return func(*args, **kwargs)


@pytest.mark.parametrize("step_order", ["luong", "bahdanau"])
def test_bf16_casts_weights_and_memory_once_per_batch_not_per_step(toy_vocabs, step_order):
    """Autocast caches casts of parameters only: the decoder's per-step weight views and the
    encoder memory are cast once per batch, so the number of weight-sized casts must not
    grow with the target length, and the gradients stay close to fp32's."""
    src_v, tgt_v = toy_vocabs
    model = tiny_model(src_v, tgt_v, step_order=step_order)
    D = model.decoder.hidden
    src = torch.randint(4, len(src_v), (3, 5))
    src_len = torch.tensor([5, 4, 3])
    counts, grads = [], {}
    for T in (3, 9):
        tgt = torch.randint(4, len(tgt_v), (3, T + 1))
        mode = _CastCounter(min_numel=D * D)  # W_hh^T is (D, 3D); activations are smaller
        with mode, autocast(CPU, torch.bfloat16):
            loss = model(src, src_len, tgt[:, :-1], tgt[:, 1:])
        counts.append(mode.casts)
        if T == 9:
            loss.backward()
            grads["bf16"] = [p.grad.clone() for p in model.parameters()]
            model.zero_grad()
            model(src, src_len, tgt[:, :-1], tgt[:, 1:]).backward()
            grads["fp32"] = [p.grad.clone() for p in model.parameters()]
    assert counts[0] == counts[1] > 0
    g16, g32 = (torch.cat([g.flatten() for g in grads[k]]) for k in ("bf16", "fp32"))
    assert (g16 - g32).norm() <= 0.03 * g32.norm()  # bf16 has 8 significant bits


@pytest.mark.parametrize("step_order", ["luong", "bahdanau"])
def test_bf16_search_casts_weights_once_per_batch_and_scores_the_top_in_fp32(
    toy_vocabs, step_order
):
    """Under bf16 search the step weights (generator included) are cast in ``encode``,
    never at a step; the top EXACT_TOP log-probabilities of each row are fp32 numbers
    (no bf16 ties among them) within 0.05 nats of the fp32 step's."""
    from nmt.model.seq2seq import EXACT_TOP

    src_v, tgt_v = toy_vocabs
    model = tiny_model(src_v, tgt_v, step_order=step_order).eval()
    V, O = model.generator.weight.shape  # noqa: E741 (O: output size, the model's notation)
    src = torch.randint(4, len(src_v), (3, 5))
    src_len = torch.tensor([5, 4, 3])
    prev = torch.full((3,), 2)
    with torch.inference_mode():
        mem32, st32 = model.encode(src, src_len)
        ref, _, _ = model.step(prev, st32, mem32)
        with autocast(CPU, torch.bfloat16):
            at_encode = _CastCounter(min_numel=V * O)  # the generator's weight at least
            with at_encode:
                mem, state = model.encode(src, src_len)
            at_steps = _CastCounter(min_numel=V * O)
            with at_steps:
                for _ in range(3):
                    logp, state, _ = model.step(prev, state, mem)
    assert at_encode.casts > 0 and at_steps.casts == 0
    assert logp.dtype == torch.float32 and logp.shape == ref.shape
    m = min(EXACT_TOP, logp.size(1))
    torch.manual_seed(0)
    with torch.inference_mode(), autocast(CPU, torch.bfloat16):
        mem, state = model.encode(src, src_len)
        logp, _, _ = model.step(prev, state, mem)
    top = logp.topk(m, dim=-1)
    assert (top.indices == ref.topk(m, dim=-1).indices).float().mean() > 0.8
    assert torch.allclose(top.values, ref.gather(1, top.indices), atol=0.05)
    # fp32 values: a bf16 logit has 8 significant bits, a recomputed one has 24
    assert (top.values.to(torch.bfloat16).float() != top.values).any()


def test_search_precision_is_resolved_and_checked_naming_the_option():
    from nmt.inference.translate import Decoding

    assert Decoding(precision="fp32").on(CPU).precision == "fp32"
    assert Decoding(precision="auto").on(CPU).precision == "fp32"  # search's auto on a CPU
    assert Decoding(beam_size=5, precision="bf16").describe().endswith(", bf16 matrix products")
    assert Decoding(beam_size=1, precision="fp32").on(CPU, "x").describe() == (
        "greedy search, fp32 matrix products"
    )
    with pytest.raises(PrecisionError, match="--precision: fp16 needs a CUDA device"):
        Decoding(precision="fp16").on(CPU, "--precision")
    with pytest.raises(PrecisionError, match="search.precision: unknown precision 'int4'"):
        Decoding(precision=cast(Any, "int4")).on(CPU)  # not a Precision: the check under test


def test_bf16_search_keeps_beam_1_equal_to_greedy(toy_vocabs):
    from test_search import MODELS, _batch, _trained

    from nmt.inference.search import beam_search, greedy

    for attention, order in MODELS[:2]:
        model, batch = _trained(toy_vocabs, attention, order), _batch(*toy_vocabs)
        with autocast(CPU, torch.bfloat16):
            g = greedy(model, batch.src, batch.src_len)
            out = beam_search(model, batch.src, batch.src_len, beam_size=1, length_penalty="none")
        assert [h.tokens for h in g] == [b.tokens for (b,) in out]
        assert any(h.tokens for h in g)


@pytest.mark.parametrize("attention", ATTENTION_TYPES)
@pytest.mark.parametrize("order", ["luong", "bahdanau"])
def test_every_attention_searches_with_bf16_matrix_products(toy_vocabs, attention, order):
    """Each scorer reads bf16 memory under search autocast (the additive one keeps fp32
    keys); greedy and beam search return one translation per line and fp32 scores."""
    from nmt.inference.translate import Decoding
    from nmt.inference.translator import translate_lines

    src_v, tgt_v = toy_vocabs
    model = tiny_model(src_v, tgt_v, attention=attention, step_order=order)
    lines = [p[0] for p in TOY_PAIRS]
    for beam in (1, 3):
        out = translate_lines(
            model,
            src_v,
            tgt_v,
            lines,
            batch_size=4,
            decoding=Decoding(beam_size=beam, precision="bf16"),
        )
        assert len(out) == len(lines)
        assert all(isinstance(t.score, float) and t.score <= 0 for t in out)
        assert (out[0].attention is None) == (attention == "none")
