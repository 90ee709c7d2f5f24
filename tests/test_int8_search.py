"""``search.precision: int8``: int8 step products on a fixed input grid (nmt/ops/int8.py)
through fbgemm or oneDNN on the CPU; the option validates, is refused off the CPU, and
searches as fp32 does on most sentences of a tiny trained model."""

import pytest
import torch
import torch.nn.functional as F
from test_search import _batch, _trained
from test_search_invariance import ORDER, _decode

from nmt.config.load import from_dict
from nmt.config.schema import ATTENTION_TYPES, ConfigError
from nmt.inference.search import beam_search, greedy
from nmt.inference.translate import Decoding
from nmt.inference.translator import translate_lines
from nmt.ops.int8 import ENGINES, Int8Weight, int8_enabled, int8_engine
from nmt.ops.precision import PrecisionError, autocast, autocast_dtype, search_dtype

from conftest import TOY_PAIRS, tiny_model

CPU = torch.device("cpu")


def test_int8_is_a_search_precision_of_the_cpu_only():
    assert search_dtype("int8", CPU) is torch.qint8
    with pytest.raises(PrecisionError, match=r"--precision: int8 runs on a CPU only"):
        search_dtype("int8", torch.device("cuda"), "--precision")
    with pytest.raises(PrecisionError, match=r"train.precision: unknown precision 'int8'"):
        autocast_dtype("int8", CPU)  # training has no int8
    assert from_dict({"search": {"precision": "int8"}}).search.precision == "int8"
    assert Decoding(precision="int8").on(CPU).precision == "int8"
    with pytest.raises(ConfigError, match=r"train.precision: 'int8' is not one of"):
        from_dict({"train": {"precision": "int8"}})
    with pytest.raises(ConfigError, match=r"search.precision: 'int4' is not one of"):
        from_dict({"search": {"precision": "int4"}})


def test_autocast_of_int8_turns_int8_products_on_for_the_block():
    assert not int8_enabled()
    with autocast(CPU, torch.qint8):
        assert int8_enabled()
    assert not int8_enabled()


@pytest.mark.parametrize("engine", ENGINES)
def test_int8_weight_product_is_close_to_fp32(engine):
    torch.manual_seed(0)
    w, b, x = torch.randn(300, 64) * 0.1, torch.randn(300), torch.rand(7, 64) * 2 - 1
    w[3] = 0.0  # an all-zero row keeps a usable scale
    exact = F.linear(x, w, b)
    got = Int8Weight(w, engine=engine).addmm(b, x)
    assert got.shape == (7, 300) and got.dtype == torch.float32
    assert (got - exact).abs().max() < 0.03 * exact.abs().max()
    assert torch.allclose(Int8Weight(w, engine=engine).addmm(None, x)[:, 3], torch.zeros(7))
    # inputs up to a larger bound, on a coarser grid
    wide = Int8Weight(w, 3.0, engine).addmm(b, 3 * x)
    assert (wide - F.linear(3 * x, w, b)).abs().max() < 0.1


@pytest.mark.parametrize("engine", ENGINES)
def test_int8_product_of_a_row_does_not_depend_on_the_batch(engine):
    """The fixed input grid: a row's result alone and among others is bit for bit equal
    (torch's dynamic quantization takes its grid from the whole batch)."""
    torch.manual_seed(0)
    w, x = torch.randn(500, 32), torch.rand(40, 32) * 2 - 1
    q = Int8Weight(w, engine=engine)
    both = q.addmm(None, x)
    assert torch.equal(q.addmm(None, x[3:4]), both[3:4])
    assert torch.equal(q.addmm(None, x[[3, 0]] * torch.tensor([[1.0], [0.01]]))[0], both[3])


def test_the_two_libraries_sum_the_same_int8_products():
    """fbgemm and oneDNN take the same int8 weights and input grid: their outputs differ
    only in the rounding of the fp32 scaling, far below one step of the grid (0.016 times
    a weight), so an engine that rounded its inputs or weights otherwise would show."""
    torch.manual_seed(0)
    w, b, x = torch.randn(1536, 512) * 0.05, torch.randn(1536), torch.rand(64, 512) * 2 - 1
    a = Int8Weight(w, engine="fbgemm").addmm(b, x)
    o = Int8Weight(w, engine="onednn").addmm(b, x)
    assert (a - o).abs().max() < 1e-4


def test_the_int8_library_comes_from_the_environment_and_is_checked(monkeypatch, toy_vocabs):
    monkeypatch.delenv("NMT_INT8_ENGINE", raising=False)
    assert int8_engine() == "fbgemm" and Int8Weight(torch.ones(2, 2)).engine == "fbgemm"
    monkeypatch.setenv("NMT_INT8_ENGINE", "onednn")
    assert Int8Weight(torch.ones(2, 2)).engine == "onednn"
    monkeypatch.setenv("NMT_INT8_ENGINE", " ONEDNN")
    assert int8_engine() == "onednn"
    monkeypatch.setenv("NMT_INT8_ENGINE", "")
    assert int8_engine() == "fbgemm"
    monkeypatch.setenv("NMT_INT8_ENGINE", "MKL")
    with pytest.raises(ValueError, match=r"NMT_INT8_ENGINE='MKL': must be one of fbgemm, onednn"):
        int8_engine()
    with pytest.raises(ValueError, match=r"int8 engine 'mkl'"):
        Int8Weight(torch.ones(2, 2), engine="mkl")
    # a model's packed weights follow the variable (the cache keys on the library)
    model = _trained(toy_vocabs, "additive", "bahdanau")
    batch = _batch(*toy_vocabs)
    for engine in ("fbgemm", "onednn", "fbgemm"):
        monkeypatch.setenv("NMT_INT8_ENGINE", engine)
        with torch.inference_mode(), autocast(CPU, torch.qint8):
            mem, _ = model.encode(batch.src, batch.src_len)
        assert mem.weights.int8 is not None
        assert {q.engine for q in mem.weights.int8.values()} == {engine}


@pytest.mark.parametrize("attention", ["additive", "multihead", "none"])
def test_a_onednn_int8_search_of_a_sentence_does_not_depend_on_its_batch(
    toy_vocabs, attention, monkeypatch
):
    """The batch invariance below, with oneDNN's products (which pick their kernel by the
    number of rows), and the same texts as fbgemm's."""
    model = _trained(toy_vocabs, attention, ORDER.get(attention, "luong"))
    batch = _batch(*toy_vocabs)
    monkeypatch.setenv("NMT_INT8_ENGINE", "fbgemm")
    fbgemm = _decode(model, batch.src, batch.src_len, 3, torch.qint8)
    monkeypatch.setenv("NMT_INT8_ENGINE", "onednn")
    full = _decode(model, batch.src, batch.src_len, 3, torch.qint8)
    assert [[h.tokens for h in n] for n in full] == [[h.tokens for h in n] for n in fbgemm]
    for i, n in enumerate(batch.src_len.tolist()):
        alone = _decode(model, batch.src[i : i + 1, :n], batch.src_len[i : i + 1], 3, torch.qint8)
        _close(alone[0], full[i])


@pytest.mark.parametrize(
    ("attention", "order"), [("additive", "bahdanau"), ("dot", "luong"), ("multihead", "cgru")]
)
def test_int8_search_agrees_with_fp32_on_most_sentences(toy_vocabs, attention, order):
    model = _trained(toy_vocabs, attention, order)
    batch = _batch(*toy_vocabs)
    fp32_g = greedy(model, batch.src, batch.src_len)
    fp32_b = beam_search(model, batch.src, batch.src_len, beam_size=3)
    with autocast(CPU, torch.qint8):
        int8_g = greedy(model, batch.src, batch.src_len)
        int8_b = beam_search(model, batch.src, batch.src_len, beam_size=3)
    assert not int8_enabled()
    for fp32, int8 in ((fp32_g, int8_g), ([n[0] for n in fp32_b], [n[0] for n in int8_b])):
        same = [a.tokens == b.tokens for a, b in zip(fp32, int8, strict=True)]
        # most: the tiny model's beams that run to the length limit (log P near -70) are
        # near-ties that int8 rounding can reorder
        assert sum(same) > len(same) / 2
        for a, b, eq in zip(fp32, int8, same, strict=True):
            if eq:  # the same text, a score near fp32's (int8's own, not rescored)
                assert b.log_prob == pytest.approx(a.log_prob, rel=0.02, abs=0.02)


def test_int8_translate_runs_through_the_translator(toy_vocabs):
    model = _trained(toy_vocabs, "additive", "bahdanau")
    src_v, tgt_v = toy_vocabs
    lines = [s for s, _ in TOY_PAIRS]
    fp32 = translate_lines(model, src_v, tgt_v, lines, decoding=Decoding(beam_size=3))
    int8 = translate_lines(
        model, src_v, tgt_v, lines, decoding=Decoding(beam_size=3, precision="int8")
    )
    assert sum(a.text == b.text for a, b in zip(fp32, int8, strict=True)) > len(lines) / 2
    assert all(p.dtype == torch.float32 for p in model.parameters())


@pytest.mark.parametrize("attention", ATTENTION_TYPES)
def test_an_int8_search_of_a_sentence_does_not_depend_on_its_batch(toy_vocabs, attention):
    """As tests/test_search_invariance.py for fp32 and bf16, without any rescoring: the
    int8 products of a row depend on that row alone (nmt/ops/int8.py). Texts are the
    same; scores within 2e-3 nats, not fp32's 1e-5: the fp32 parts of a step (attention)
    differ with the batch in the last bit, which can move an input across a rounding
    boundary of the int8 grid (measured: up to 7e-4 nats)."""
    model = _trained(toy_vocabs, attention, ORDER.get(attention, "luong"))
    batch = _batch(*toy_vocabs)
    B = batch.src.size(0)
    for K in (1, 3):
        full = _decode(model, batch.src, batch.src_len, K, torch.qint8)
        order = [0, *reversed(range(B))]
        mixed = _decode(model, batch.src[order], batch.src_len[order], K, torch.qint8)
        for i, n in enumerate(batch.src_len.tolist()):
            src, src_len = batch.src[i : i + 1, :n], batch.src_len[i : i + 1]
            alone = _decode(model, src, src_len, K, torch.qint8)[0]
            _close(alone, full[i])
            _close(alone, mixed[order.index(i)])


def _close(a, b):
    assert [(h.tokens, h.complete) for h in a] == [(h.tokens, h.complete) for h in b]
    for x, y in zip(a, b, strict=True):
        assert abs(x.score - y.score) <= 2e-3 and abs(x.log_prob - y.log_prob) <= 2e-3


@pytest.mark.parametrize("dtype", [torch.qint8, torch.bfloat16])
def test_search_step_says_where_each_rows_largest_are_and_beam_agrees_without_it(
    toy_vocabs, dtype, monkeypatch
):
    """A reduced-precision ``search_step`` returns ``step``'s log-probabilities and the
    columns of each row's largest (KnownTop): the leading ``lead`` of them are the row's
    top values; fp32 says nothing. Beam and greedy search reading them find the same
    hypotheses, scores and attention as searches that read every row themselves."""
    model = _trained(toy_vocabs, "additive", "bahdanau")
    batch = _batch(*toy_vocabs)
    prev = torch.full((batch.src.size(0),), 2)
    with torch.inference_mode():
        mem, state = model.encode(batch.src, batch.src_len)
        assert model.search_step(prev, state, mem)[3] is None  # fp32
        with autocast(CPU, dtype):
            mem, state = model.encode(batch.src, batch.src_len)
            logp, _, _ = model.step(prev, state, mem)
            logp2, _, _, known = model.search_step(prev, state, mem)
    assert torch.equal(logp, logp2)
    assert known is not None and bool((known.lead >= 1).all())
    for row, cols, lead in zip(logp, known.cols, known.lead.tolist(), strict=True):
        assert torch.equal(row[cols[:lead]], row.topk(lead).values)
    with autocast(CPU, dtype):
        told = beam_search(model, batch.src, batch.src_len, beam_size=4, n_best=2, rescore=False)
        greedy_told = greedy(model, batch.src, batch.src_len, rescore=False)
        step = model.search_step  # the same log-probabilities, without saying where

        def unknowing(prev, state, mem, beam_size=5):
            return (*step(prev, state, mem, beam_size=beam_size)[:3], None)

        monkeypatch.setattr(model, "search_step", unknowing)
        searched = beam_search(
            model, batch.src, batch.src_len, beam_size=4, n_best=2, rescore=False
        )
        greedy_searched = greedy(model, batch.src, batch.src_len, rescore=False)
    for g, h in zip(greedy_told, greedy_searched, strict=True):
        assert (g.tokens, g.log_prob, g.token_logprobs) == (h.tokens, h.log_prob, h.token_logprobs)
    for a, b in zip(told, searched, strict=True):
        assert [(h.tokens, h.score, h.log_prob) for h in a] == [
            (h.tokens, h.score, h.log_prob) for h in b
        ]
        for x, y in zip(a, b, strict=True):
            assert x.attention is not None and y.attention is not None
            assert torch.equal(x.attention, y.attention)


def test_a_recomputed_logit_that_falls_below_one_left_outside_is_not_in_the_lead(toy_vocabs):
    """A piece that only the rounding put among the EXACT_TOP (its fp32 logit is the row's
    lowest) is recomputed, falls behind a rounded logit left outside, and so ends the
    lead: the leading columns stay the row's largest log-probabilities."""
    from nmt.model.seq2seq import EXACT_TOP

    model = tiny_model(*toy_vocabs).eval()
    torch.manual_seed(1)
    pre = torch.tanh(torch.randn(2, model.generator.in_features))
    with torch.inference_mode():
        exact = model.generator(pre)
        j = int(exact[0].argmin())
        rounded = exact.clone()
        rounded[0, j] = exact[0].max() + 5  # looks best, is worst
        logp, known = model._exact_top(rounded, pre)
    assert known is not None
    assert known.lead.tolist() == [EXACT_TOP - 1, EXACT_TOP]
    assert int(known.cols[0, EXACT_TOP - 1]) == j
    for row, cols, lead in zip(logp, known.cols, known.lead.tolist(), strict=True):
        assert torch.equal(row[cols[:lead]], row.topk(lead).values)


def _count_row_reads(monkeypatch) -> list[torch.Tensor]:
    """Each row block that greedy search reads again (nmt.inference.search.row_max)."""
    from nmt.inference import search

    reads: list[torch.Tensor] = []

    def row_max(x: torch.Tensor):
        reads.append(x)
        return x.max(-1)

    monkeypatch.setattr(search, "row_max", row_max)
    return reads


def test_greedy_steps_recompute_fewer_logits_and_beam_1_still_picks_greedys_pieces(
    toy_vocabs, monkeypatch
):
    """A reduced-precision step of greedy search (beam 1) recomputes GREEDY_EXACT_TOP logits
    a row, beam search's EXACT_TOP; greedy takes a row's piece from them wherever the first
    leads the row and beats the second (lead 1 is enough), so it reads no row again, and
    beam 1 picks greedy's pieces."""
    from nmt.model.seq2seq import EXACT_TOP, GREEDY_EXACT_TOP, exact_top_for

    assert (exact_top_for(1), exact_top_for(2), exact_top_for(5)) == (4, EXACT_TOP, EXACT_TOP)
    model, batch = _trained(toy_vocabs, "additive", "bahdanau"), _batch(*toy_vocabs)
    prev = torch.full((batch.src.size(0),), 2)
    with torch.inference_mode(), autocast(CPU, torch.qint8):
        mem, state = model.encode(batch.src, batch.src_len)
        known = {k: model.search_step(prev, state, mem, beam_size=k)[3] for k in (1, 5)}
        assert known[1] is not None and known[5] is not None
        assert (known[1].cols.size(1), known[5].cols.size(1)) == (GREEDY_EXACT_TOP, EXACT_TOP)
        read_again = _count_row_reads(monkeypatch)
        g = greedy(model, batch.src, batch.src_len)
        (b1,) = zip(*beam_search(model, batch.src, batch.src_len, beam_size=1), strict=True)
    assert read_again == []  # the tiny model's rows all lead with one certain maximum
    assert [h.tokens for h in g] == [h.tokens for h in b1]


def test_greedy_takes_a_row_whose_first_recomputed_column_alone_leads_from_it(monkeypatch):
    """lead 1 and a first column above the second: the row's only maximum, taken from the
    known columns without reading the row; a tie between the first two falls back to
    reading the row (the lowest id, as max gives)."""
    from nmt.inference import search
    from nmt.ops.topk import KnownTop

    read_again = _count_row_reads(monkeypatch)
    logp = torch.tensor([[0.0, -1.0, -3.0, -2.0], [-1.0, -1.0, -5.0, -4.0]]).log_softmax(-1)
    cols, lead = torch.tensor([[0, 1], [0, 1]]), torch.tensor([1, 1])
    best_lp, best = search._most_probable(logp[:1], KnownTop(cols[:1], lead[:1]))
    assert best.tolist() == [0] and torch.equal(best_lp, logp[:1, 0]) and read_again == []
    best_lp, best = search._most_probable(logp, KnownTop(cols, lead))
    assert best.tolist() == [0, 0] and torch.equal(best_lp, logp.max(-1).values)
    assert len(read_again) == 1
    search._most_probable(logp[:1], KnownTop(cols[:1], torch.tensor([0])))  # leads nothing
    assert len(read_again) == 2


def test_a_report_names_the_int8_library_where_it_is_not_the_default(monkeypatch):
    monkeypatch.delenv("NMT_INT8_ENGINE", raising=False)
    assert Decoding(precision="int8").describe().endswith(", int8 matrix products")
    monkeypatch.setenv("NMT_INT8_ENGINE", "onednn")
    assert Decoding(precision="int8").describe().endswith("int8 matrix products (onednn)")
    assert Decoding(precision="fp32").describe().endswith("fp32 matrix products")
