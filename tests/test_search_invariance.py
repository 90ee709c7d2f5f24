"""A sentence's n-best list does not depend on the batch it is decoded in, in fp32 and in
bf16 search, for every attention type: texts identical, scores within 1e-5 nats (found
2026-12-05: bf16 n-best scores moved by up to 1e-2 nats with the batch). The bf16 search
ranks its finished hypotheses by scores recomputed in fp32 (nmt/inference/rescore.py)."""

import pytest
import torch
from test_search import _batch, _trained

from nmt.config.schema import ATTENTION_TYPES
from nmt.inference.search import beam_search, greedy
from nmt.ops.precision import autocast

ORDER = {"additive": "bahdanau", "none": "bahdanau"}  # the others: luong


def _decode(model, src, src_len, K, dtype):
    with autocast(torch.device("cpu"), dtype):
        if K == 1:
            return [[h] for h in greedy(model, src, src_len)]
        return beam_search(model, src, src_len, beam_size=K, n_best=K, length_penalty="gnmt")


def _same(a, b):
    assert [(h.tokens, h.complete) for h in a] == [(h.tokens, h.complete) for h in b]
    for x, y in zip(a, b, strict=True):
        assert abs(x.score - y.score) <= 1e-5 and abs(x.log_prob - y.log_prob) <= 1e-5


@pytest.mark.parametrize("dtype", [None, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("attention", ATTENTION_TYPES)
def test_a_sentence_alone_and_in_any_batch_gets_the_same_n_best(toy_vocabs, attention, dtype):
    model = _trained(toy_vocabs, attention, ORDER.get(attention, "luong"))
    batch = _batch(*toy_vocabs)
    B = batch.src.size(0)
    for K in (1, 3):
        full = _decode(model, batch.src, batch.src_len, K, dtype)
        # the batch reversed and with the first sentence twice: other neighbours and rows
        order = [0, *reversed(range(B))]
        mixed = _decode(model, batch.src[order], batch.src_len[order], K, dtype)
        for i, n in enumerate(batch.src_len.tolist()):
            alone = _decode(model, batch.src[i : i + 1, :n], batch.src_len[i : i + 1], K, dtype)[0]
            _same(alone, full[i])
            _same(alone, mixed[order.index(i)])
            _same(alone, mixed[0] if i == 0 else alone)


def test_bf16_search_scores_are_fp32_scores_of_its_texts(toy_vocabs):
    """The scores a bf16 search returns are those fp32 gives the same texts."""
    model = _trained(toy_vocabs, "additive", "bahdanau")
    batch = _batch(*toy_vocabs)
    bf16 = _decode(model, batch.src, batch.src_len, 3, torch.bfloat16)
    fp32 = _decode(model, batch.src, batch.src_len, 3, None)
    for a, b in zip(bf16, fp32, strict=True):
        by_text = {tuple(h.tokens): h for h in b}
        for h in a:
            if tuple(h.tokens) in by_text:
                assert h.log_prob == pytest.approx(by_text[tuple(h.tokens)].log_prob, abs=1e-5)


def _count_fp32_passes(monkeypatch) -> list[int]:
    """Record each call of the fp32 forced pass that rescoring runs."""
    import nmt.inference.search as search

    calls: list[int] = []
    real = search.fp32_log_probs

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(search, "fp32_log_probs", counted)
    return calls


@pytest.mark.parametrize("K", [1, 3])
def test_rescore_false_keeps_the_texts_and_skips_the_fp32_pass(toy_vocabs, monkeypatch, K):
    """Without rescoring a bf16 search returns the same one-best texts, and runs no fp32
    forced pass (the pass that cost bf16 search half its speed, issue 48)."""
    model = _trained(toy_vocabs, "additive", "bahdanau")
    batch = _batch(*toy_vocabs)
    calls = _count_fp32_passes(monkeypatch)
    with autocast(torch.device("cpu"), torch.bfloat16):
        if K == 1:
            fast = greedy(model, batch.src, batch.src_len, rescore=False)
            exact = greedy(model, batch.src, batch.src_len)
        else:
            fast = [h[0] for h in beam_search(model, batch.src, batch.src_len, K, rescore=False)]
            exact = [h[0] for h in beam_search(model, batch.src, batch.src_len, K)]
    assert len(calls) == 1  # the default (rescore=True) call only
    assert [h.tokens for h in fast] == [h.tokens for h in exact]
    assert [h.log_prob for h in fast] != [h.log_prob for h in exact]  # bf16's own totals


@pytest.mark.parametrize("n_best", [1, 2])
def test_translator_rescores_only_an_n_best_list(toy_vocabs, monkeypatch, n_best):
    """A bf16 Translator pays the fp32 pass only where scores are shown and can reorder the
    list (n_best > 1); a one-best's text does not depend on it."""
    from nmt.inference.translate import Decoding
    from nmt.inference.translator import Translator

    model = _trained(toy_vocabs, "additive", "bahdanau")
    calls = _count_fp32_passes(monkeypatch)
    src_vocab, tgt_vocab = toy_vocabs
    dec = Decoding(beam_size=2, n_best=n_best, precision="bf16")
    Translator(model, src_vocab, tgt_vocab, dec).translate(["a b c", "d e"])
    assert len(calls) == (n_best > 1)
