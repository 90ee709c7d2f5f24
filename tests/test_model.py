"""The encoder-decoder: shapes, padding invariance, and that it can learn."""

import dataclasses
import pathlib

import pytest
import torch

from nmt.data.batches import collate, encode_pairs
from nmt.data.corpus import Pair
from nmt.inference.search import greedy
from nmt.model.seq2seq import build_model

from conftest import TOY_PAIRS, tiny_model

ATTENTIONS = ["additive", "dot", "general", "scaled_dot", "none"]


def _batch(src_vocab, tgt_vocab, pairs=TOY_PAIRS):
    examples = encode_pairs([Pair(s, t, "") for s, t in pairs], src_vocab, tgt_vocab)
    return collate(examples)


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("order", ["bahdanau", "luong"])
def test_attention_weights_shape_and_padding(toy_vocabs, attention, order):
    model = tiny_model(*toy_vocabs, attention=attention, step_order=order).eval()
    batch = _batch(*toy_vocabs)
    B, T = batch.tgt_in.shape
    S = batch.src.size(1)
    weights = model.attention_weights(batch.src, batch.src_len, batch.tgt_in)
    if attention == "none":
        assert weights is None
        return
    assert weights.shape == (B, T, S)
    pad = (batch.src == 0)[:, None, :].expand(B, T, S)
    assert (weights[pad] == 0).all()
    assert torch.allclose(weights.sum(-1), torch.ones(B, T), atol=1e-5)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_sentence_alone_equals_sentence_in_padded_batch(toy_vocabs, attention):
    model = tiny_model(*toy_vocabs, attention=attention).eval()
    batch = _batch(*toy_vocabs)
    with torch.no_grad():
        batched, _ = model.logits(batch.src, batch.src_len, batch.tgt_in)
        shortest = int(batch.src_len.argmin())
        n, m = int(batch.src_len[shortest]), int((batch.tgt_in[shortest] != 0).sum())
        alone, _ = model.logits(
            batch.src[shortest : shortest + 1, :n],
            batch.src_len[shortest : shortest + 1],
            batch.tgt_in[shortest : shortest + 1, :m],
        )
    assert n < batch.src.size(1)  # the sentence really was padded in the batch
    assert torch.allclose(alone[0], batched[shortest, :m], atol=1e-5)
    hyp_batch = greedy(model, batch.src, batch.src_len)[shortest]
    hyp_alone = greedy(
        model, batch.src[shortest : shortest + 1, :n], batch.src_len[shortest : shortest + 1]
    )[0]
    assert hyp_batch.tokens == hyp_alone.tokens


@pytest.mark.parametrize(
    "attention,order", [("additive", "bahdanau"), ("dot", "luong"), ("none", "bahdanau")]
)
def test_model_overfits_a_handful_of_pairs(toy_vocabs, attention, order):
    src_vocab, tgt_vocab = toy_vocabs
    model = tiny_model(
        src_vocab,
        tgt_vocab,
        attention=attention,
        step_order=order,
        emb_dim=32,
        enc_hidden=32,
        dec_hidden=64,
        output_dim=32,
    )
    batch = _batch(src_vocab, tgt_vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()
    for _ in range(150):
        loss = model(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out) / batch.n_tokens
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    hyps = greedy(model, batch.src, batch.src_len)
    assert [tgt_vocab.decode(h.tokens) for h in hyps] == [t for _, t in TOY_PAIRS]


def test_fixed_vector_model_has_no_scorer_and_same_size_as_additive(toy_vocabs):
    from nmt.model.seq2seq import count_parameters

    none = tiny_model(*toy_vocabs, attention="none", attn_dim=16, enc_hidden=16)
    additive = tiny_model(*toy_vocabs, attention="additive", attn_dim=16, enc_hidden=16)
    assert none.decoder.scorer is None
    # the fixed-vector model's c = tanh(V h) replaces the scorer; counts stay comparable
    n_additive = count_parameters(additive)
    assert abs(count_parameters(none) - n_additive) < 0.05 * n_additive


def test_greedy_stops_at_length_limit(toy_vocabs):
    model = tiny_model(*toy_vocabs).eval()
    batch = _batch(*toy_vocabs)
    hyps = greedy(model, batch.src, batch.src_len, max_ratio=0.0)
    assert all(len(h.tokens) <= 10 for h in hyps)


def test_tied_embeddings_share_one_matrix(toy_vocabs):
    model = tiny_model(*toy_vocabs, tie_embeddings=True, output_dim=16, emb_dim=16)
    assert model.generator.weight is model.decoder.embed.weight
    untied = tiny_model(*toy_vocabs, output_dim=16, emb_dim=16)
    from nmt.model.seq2seq import count_parameters

    assert count_parameters(untied) - count_parameters(model) == model.generator.weight.numel()


def test_label_smoothed_loss_mixes_nll_with_uniform_and_ignores_padding(toy_vocabs):
    # Szegedy et al. 2016, sec. 7: target distribution (1 - eps) * one-hot + eps / V.
    model = tiny_model(*toy_vocabs).eval()
    batch = _batch(*toy_vocabs)
    eps = 0.1
    with torch.no_grad():
        logits, _ = model.logits(batch.src, batch.src_len, batch.tgt_in)
        logp = torch.log_softmax(logits, -1)
        real = batch.tgt_out != 0
        nll = -logp.gather(-1, batch.tgt_out.unsqueeze(-1)).squeeze(-1)[real].sum()
        uniform = -logp.mean(-1)[real].sum()
        plain = model(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out)
        smoothed = model(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out, label_smoothing=eps)
    assert torch.allclose(plain, nll, rtol=1e-5)
    assert torch.allclose(smoothed, (1 - eps) * nll + eps * uniform, rtol=1e-5)
    assert not torch.allclose(smoothed, plain)


def test_loss_on_real_rows_has_the_gradients_of_the_loss_on_every_row(toy_vocabs):
    # forward() runs the output layer on the real target tokens only; padding rows
    # contribute nothing, so every parameter's gradient must equal the all-rows loss's
    model = tiny_model(*toy_vocabs).eval()
    batch = _batch(*toy_vocabs)
    assert (batch.tgt_out == 0).any()  # the batch has padding to skip
    model(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out).backward()
    fast = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    logits, _ = model.logits(batch.src, batch.src_len, batch.tgt_in)
    torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=0, reduction="sum"
    ).backward()
    for name, p in model.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(fast[name], p.grad, rtol=1e-4, atol=1e-6, msg=name)
    assert fast.keys() == {n for n, p in model.named_parameters() if p.grad is not None}


def test_reference_config_has_joey_nmts_parameter_count_without_the_two_biases():
    # Joey NMT's RNN model with the reference settings has 12,262,912 parameters: the same
    # weight matrices, no generator bias (V) and no bias on the additive scorer's keys (A)
    from nmt.config.load import load_config
    from nmt.model.seq2seq import count_parameters

    cfg = load_config(pathlib.Path(__file__).parent.parent / "configs" / "bench_reference.yaml")
    model = build_model(cfg.model, 8000, 8000)
    assert model.generator.bias is None and model.decoder.scorer.U.bias is None
    assert count_parameters(model) == 12_262_912
    with_biases = build_model(
        dataclasses.replace(cfg.model, output_bias=True, attention_bias=True), 8000, 8000
    )
    assert count_parameters(with_biases) == 12_262_912 + 8000 + 512


def test_model_without_biases_decodes_as_its_teacher_forced_logits(toy_vocabs):
    # the search step's generator path without a bias must score as the training path
    model = tiny_model(*toy_vocabs, output_bias=False, attention_bias=False).eval()
    batch = _batch(*toy_vocabs)
    with torch.no_grad():
        logits, _ = model.logits(batch.src, batch.src_len, batch.tgt_in)
        mem, state = model.encode(batch.src, batch.src_len)
        logp, _, _ = model.step(batch.tgt_in[:, 0], state, mem)
    torch.testing.assert_close(logp, torch.log_softmax(logits[:, 0], -1), rtol=1e-5, atol=1e-5)
    model(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out).backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("rows", [1, 7, 64, 161])
@pytest.mark.parametrize("flip_rows", [0, 160, None])  # never, the AVX2 policy, this CPU's
def test_step_addmm_equals_addmm_in_both_orientations(rows, flip_rows):
    from nmt.ops.step_matmul import step_addmm

    g = torch.Generator().manual_seed(rows)
    weight = torch.randn(96, 40, generator=g)  # (N, K) as nn.Linear stores it
    x = torch.randn(rows, 40, generator=g)
    for base in (torch.randn(96, generator=g), torch.randn(rows, 96, generator=g), None):
        ref = x @ weight.t() if base is None else torch.addmm(base, x, weight.t())
        with torch.inference_mode():  # the search path: flipped up to flip_rows rows
            out = step_addmm(base, x, weight, flip_rows=flip_rows)
        assert out.shape == (rows, 96) and out.is_contiguous()
        assert torch.allclose(out, ref, atol=1e-5)
        assert torch.allclose(step_addmm(base, x, weight, flip_rows=flip_rows), ref, atol=1e-6)


def test_default_flip_rows_follows_the_cpu_flags(monkeypatch):
    import nmt.ops.step_matmul as sm

    for flags, expected in ((["avx2", "avx512f"], 0), (["avx2"], 160)):
        sm.default_flip_rows.cache_clear()
        monkeypatch.setattr(sm, "cpu_model_and_flags", lambda f=flags: ("cpu", f))
        assert sm.default_flip_rows() == expected
    sm.default_flip_rows.cache_clear()


def test_step_returns_the_per_head_weights_only_when_asked(toy_vocabs):
    """Seq2Seq.step: three values by default; with ``with_heads`` the per-head weights of a
    multihead model too, whose mean is the attention it returns (serve's forced decoding)."""
    from nmt.data.vocab import BOS

    model = tiny_model(*toy_vocabs, attention="multihead").eval()
    src = torch.tensor([[5, 6, 7, 2]])
    mem, state = model.encode(src, torch.tensor([4]))
    prev = torch.tensor([BOS])
    with torch.no_grad():
        logp, _, attn = model.step(prev, state, mem)
        logp2, _, attn2, heads = model.step(prev, state, mem, with_heads=True)
    assert torch.equal(logp, logp2) and torch.equal(attn, attn2)
    assert heads.dim() == 3 and heads.size(0) == 1 and heads.size(2) == 4
    torch.testing.assert_close(heads.mean(1), attn)
