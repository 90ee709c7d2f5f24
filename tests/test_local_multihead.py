"""Local attention (Luong et al. 2015, sec. 3.2), multi-head attention in the GRU decoder,
the head analysis of ``nmt heads``, and the textbook reason for 1/sqrt(d_k)."""

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nmt.analysis.heads import SentenceHeads, analyse, head_weights_of
from nmt.config.load import load_config, load_study_config
from nmt.config.schema import LOCAL_KINDS, ConfigError
from nmt.data.batches import collate, encode_pairs
from nmt.data.corpus import Pair
from nmt.inference.search import beam_search, greedy
from nmt.model.attention import GlobalScorer, LocalAttention, masked_softmax
from nmt.model.attention_factory import build_scorer
from nmt.model.multihead import MultiHeadAttention, scaled_dot_product_attention

from conftest import TOY_PAIRS, tiny_model


def _scorer(kind: str, query_dim: int, memory_dim: int, attn_dim: int) -> GlobalScorer:
    """The global scorer ``kind`` (never ``none``) that a local attention scores with."""
    scorer = build_scorer(kind, query_dim, memory_dim, attn_dim)
    assert scorer is not None, kind
    return scorer


REPO = Path(__file__).resolve().parents[1]


def _memory(B=3, S=12, M=8, D=8, lengths=(12, 9, 3)):
    torch.manual_seed(0)
    mask = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]
    return torch.randn(B, D), torch.randn(B, S, M), mask


@pytest.mark.parametrize("kind", LOCAL_KINDS)
@pytest.mark.parametrize("score", ["general", "additive", "dot"])
def test_local_weights_are_exactly_zero_outside_the_window_and_on_padding(kind, score):
    query, memory, mask = _memory()
    att = LocalAttention(kind, _scorer(score, 8, 8, 6), query_dim=8, window=2, predictor_dim=6)
    for t in (0, 4, 20):
        _, w, _ = att.read(query, att.precompute(memory), memory, mask, t)
        p = att.centre(query, mask, t)
        s = torch.arange(memory.size(1)).float()
        outside = ((s[None, :] - p[:, None]).abs() > 2) | ~mask
        assert torch.equal(w[outside], torch.zeros(int(outside.sum())))
        assert (w[~outside] > 0).all()  # every real position inside the window is read


def test_local_m_centre_is_the_target_position_clamped_to_the_source():
    query, memory, mask = _memory()
    att = LocalAttention("local_m", _scorer("dot", 8, 8, 6), 8, 2, 6)
    assert att.centre(query, mask, 1).tolist() == [1.0, 1.0, 1.0]
    assert att.centre(query, mask, 5).tolist() == [5.0, 5.0, 2.0]  # third source: 3 pieces
    _, w, _ = att.read(query, memory, memory, mask, 1)
    # local-m: plain softmax of the scores over positions 0..3 (p_t = 1, D = 2)
    scores = torch.bmm(memory, query.unsqueeze(2)).squeeze(2)
    window = mask & (torch.arange(12)[None, :] <= 3)
    assert torch.allclose(w, masked_softmax(scores, window), atol=1e-6)
    assert torch.allclose(w.sum(-1), torch.ones(3), atol=1e-6)


def test_local_p_applies_the_gaussian_as_the_paper_defines():
    query, memory, mask = _memory()
    D = 4
    att = LocalAttention("local_p", _scorer("general", 8, 8, 6), 8, D, 5)
    keys = att.precompute(memory)
    _, w, _ = att.read(query, keys, memory, mask, 0)
    # eq. 9: p_t = S * sigmoid(v_p^T tanh(W_p h_t)), S the sentence's own source length
    S = mask.sum(-1).float()
    p = S * torch.sigmoid(att.v_p(torch.tanh(att.W_p(query)))).squeeze(-1)
    assert ((p >= 0) & (p <= S)).all()
    # eq. 10: a_t(s) = align(h_t, h_s) * exp(-(s - p_t)^2 / (2 sigma^2)), sigma = D / 2,
    # align = softmax of the general score over the window
    s = torch.arange(12).float()
    window = mask & ((s[None, :] - p[:, None]).abs() <= D)
    align = masked_softmax(torch.bmm(keys, query.unsqueeze(2)).squeeze(2), window)
    gauss = torch.exp(-((s[None, :] - p[:, None]) ** 2) / (2 * (D / 2) ** 2))
    assert torch.allclose(w, align * gauss, atol=1e-6)
    assert (w.sum(-1) <= 1 + 1e-6).all() and (w.sum(-1) < 1).any()
    # the Gaussian is differentiable in p_t: the position predictor learns
    w.sum().backward()
    assert att.v_p.weight.grad is not None
    assert att.v_p.weight.grad.abs().sum() > 0


def test_multihead_with_one_head_is_single_head_scaled_dot_product_attention():
    query, memory, mask = _memory(D=6)
    mha = MultiHeadAttention(8, 1, query_dim=6)
    context, weights = mha.read_heads(query, mha.precompute(memory), mask)
    out, ref_w = scaled_dot_product_attention(
        mha.W_q(query).unsqueeze(1), mha.W_k(memory), mha.W_v(memory), mask.unsqueeze(1)
    )
    assert weights.shape == (3, 1, 12)
    assert torch.allclose(weights[:, 0], ref_w[:, 0], atol=1e-6)
    assert torch.allclose(context, mha.W_o(out[:, 0]), atol=1e-6)


def test_multihead_split_and_merge_equal_heads_computed_one_by_one():
    query, memory, mask = _memory(D=6)
    h, d = 4, 8
    mha = MultiHeadAttention(d, h, query_dim=6)
    context, weights = mha.read_heads(query, mha.precompute(memory), mask)
    q, k, v = mha.W_q(query), mha.W_k(memory), mha.W_v(memory)
    blocks = []
    for i in range(h):
        cols = slice(i * d // h, (i + 1) * d // h)
        out, w = scaled_dot_product_attention(
            q[:, None, cols], k[..., cols], v[..., cols], mask.unsqueeze(1)
        )
        assert torch.allclose(weights[:, i], w[:, 0], atol=1e-6)
        blocks.append(out[:, 0])
    assert torch.allclose(context, mha.W_o(torch.cat(blocks, -1)), atol=1e-6)


def test_multihead_weights_per_head_are_masked_and_each_sums_to_one():
    query, memory, mask = _memory(D=6)
    mha = MultiHeadAttention(8, 4, query_dim=6)
    _, weights = mha.read_heads(query, mha.precompute(memory), mask)  # (B, h, S)
    pad = ~mask[:, None, :].expand_as(weights)
    assert torch.equal(weights[pad], torch.zeros(int(pad.sum())))
    assert torch.allclose(weights.sum(-1), torch.ones(3, 4), atol=1e-6)
    # heads differ: they have their own projections
    assert not torch.allclose(weights[:, 0], weights[:, 1])


def test_model_head_weights_shape_per_head_masking_and_equal_size_for_every_h(toy_vocabs):
    src_vocab, tgt_vocab = toy_vocabs
    batch = collate(encode_pairs([Pair(s, t, "") for s, t in TOY_PAIRS], src_vocab, tgt_vocab))
    B, T = batch.tgt_in.shape
    S = batch.src.size(1)
    sizes = set()
    for h in (1, 2, 4):
        model = tiny_model(src_vocab, tgt_vocab, attention="multihead", heads=h).eval()
        sizes.add(sum(p.numel() for p in model.parameters()))
        with torch.no_grad():
            per_head = model.head_weights(batch.src, batch.src_len, batch.tgt_in)
            mean = model.attention_weights(batch.src, batch.src_len, batch.tgt_in)
        assert per_head.shape == (B, h, T, S)
        pad = (batch.src == 0)[:, None, None, :].expand_as(per_head)
        assert torch.equal(per_head[pad], torch.zeros(int(pad.sum())))
        assert torch.allclose(per_head.sum(-1), torch.ones(B, h, T), atol=1e-5)
        assert torch.allclose(mean, per_head.mean(1), atol=1e-6)
    assert len(sizes) == 1  # the total size does not depend on the number of heads
    assert tiny_model(src_vocab, tgt_vocab, attention="additive").decoder.scorer is not None


@pytest.mark.parametrize("attention", ["local_m", "local_p", "multihead"])
def test_beam_one_is_greedy_and_batching_does_not_change_output(toy_vocabs, attention):
    src_vocab, tgt_vocab = toy_vocabs
    model = tiny_model(src_vocab, tgt_vocab, attention=attention, local_window=2).eval()
    batch = collate(encode_pairs([Pair(s, t, "") for s, t in TOY_PAIRS], src_vocab, tgt_vocab))
    g = greedy(model, batch.src, batch.src_len)
    b = beam_search(model, batch.src, batch.src_len, beam_size=1)
    assert [h.tokens for h in g] == [h[0].tokens for h in b]
    n = int(batch.src_len[-1])
    alone = beam_search(model, batch.src[-1:, :n], batch.src_len[-1:], beam_size=3)
    batched = beam_search(model, batch.src, batch.src_len, beam_size=3)
    assert alone[0][0].tokens == batched[-1][0].tokens


@pytest.mark.parametrize("d_k", [16, 64, 256, 1024])
def test_dot_product_of_unit_variance_vectors_has_variance_d_k_and_scaling_brings_it_to_one(d_k):
    # Vaswani et al. (2017), footnote 4: q.k = sum of d_k products of unit variance
    g = torch.Generator().manual_seed(d_k)
    q = torch.randn(20000, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(20000, d_k, generator=g, dtype=torch.float64)
    dot = (q * k).sum(-1)
    assert abs(dot.var().item() / d_k - 1) < 0.05
    assert abs((dot / math.sqrt(d_k)).var().item() - 1) < 0.05
    assert abs(dot.mean().item()) < 4 * math.sqrt(d_k / 20000)


def test_config_checks_heads_window_and_local_score():
    base = REPO / "configs/multi30k_deen_additive.yaml"
    with pytest.raises(ConfigError, match="model.heads"):
        load_config(base, ["model.attention=multihead", "model.heads=3"])
    with pytest.raises(ConfigError, match="model.local_window"):
        load_config(base, ["model.attention=local_p", "model.local_window=0"])
    with pytest.raises(ConfigError, match="model.local_score"):
        load_config(
            base, ["model.attention=local_m", "model.local_score=dot", "model.dec_hidden=256"]
        )
    with pytest.raises(ConfigError, match="model.local_score"):
        load_config(base, ["model.attention=local_m", "model.local_score=cosine"])
    cfg = load_config(base, ["model.attention=local_p", "model.local_score=additive"])
    assert cfg.model.attention == "local_p"
    # heads and window are checked only where used: an odd memory size is fine elsewhere
    cfg = load_config(base, ["model.enc_hidden=33", "model.dec_hidden=66"])
    assert cfg.model.heads == 4 and cfg.model.attention == "additive"


def test_study_plans_local_multihead_and_head_count_runs(tmp_path):
    BASE = "base_config: configs/multi30k_deen_additive.yaml\n"
    study = tmp_path / "s.yaml"
    study.write_text(
        "base_config: configs/multi30k_deen_additive.yaml\n"
        "run_prefix: t\nattentions: [none, local_p, multihead]\n"
        f"overrides: ['train.out_dir={tmp_path}/{{name}}']\nhead_counts: [1]\n"
    )
    from nmt.study.plan import plan

    runs = plan(load_study_config(study))
    assert [r.label for r in runs] == ["none", "local_p", "multihead", "multihead-1h"]
    assert runs[-1].cfg.model.heads == 1 and runs[2].cfg.model.heads == 4
    assert runs[-1].cfg.name == "t_multihead-1h"
    study.write_text("attentions: [none]\nhead_counts: [0]\n")
    with pytest.raises(ConfigError, match="head_counts"):
        load_study_config(study)
    from nmt.study.plan import StudyError

    study.write_text(BASE + "attentions: [none, multihead]\nhead_counts: [4]\n")
    with pytest.raises(StudyError, match="multihead-4h and multihead would be the same model"):
        plan(load_study_config(study))
    study.write_text(BASE + "attentions: [none]\nhead_counts: [3]\n")
    with pytest.raises(ConfigError, match="head_counts: 3: .*model.heads"):
        plan(load_study_config(study))


def test_head_statistics_on_hand_made_weights():
    # head 1 always on the source end, head 2 on the diagonal
    S, T = 5, 5
    w = torch.zeros(2, T, S)
    w[0, :, S - 1] = 1.0
    w[1, torch.arange(T), torch.arange(T)] = 1.0
    sent = SentenceHeads(0, "a b , c", "x", ["▁a", "▁b", "▁,", "▁c", "</s>"], ["x"] * T, w)
    a = analyse([sent], "m", "multihead")
    one, two = a.stats
    assert one.final_share == 1.0 and two.final_share == pytest.approx(1 / 5)
    assert two.diagonal_distance == 0.0 and one.diagonal_distance == pytest.approx(2.0)
    assert one.diagonal_offset == pytest.approx(2.0) and two.diagonal_offset == 0.0
    assert two.punctuation_share == pytest.approx(1 / 5) and one.punctuation_share == 0.0
    assert one.entropy == pytest.approx(0.0, abs=1e-6)
    assert one.uniform_entropy == pytest.approx(math.log(5))
    assert a.agreement[0][1] == pytest.approx(1 / 5) and a.agreement[0][0] == 1.0


def test_head_weights_of_a_model_match_its_greedy_search(toy_vocabs):
    src_vocab, tgt_vocab = toy_vocabs
    model = tiny_model(src_vocab, tgt_vocab, attention="multihead", heads=2).eval()
    sources = [s for s, _ in TOY_PAIRS]
    sents = head_weights_of(model, src_vocab, tgt_vocab, sources + [""])
    assert len(sents) == len(sources)  # the empty line is skipped
    batch = collate(encode_pairs([Pair(s, "", "") for s in sources], src_vocab, tgt_vocab))
    hyps = greedy(model, batch.src, batch.src_len)
    for sent, hyp, n in zip(sents, hyps, batch.src_len.tolist(), strict=True):
        assert sent.weights.shape == (2, len(sent.tgt_pieces), n)
        assert hyp.attention is not None
        rows = hyp.attention.size(0)  # greedy's (mean) attention, EOS row when produced
        assert torch.allclose(sent.weights.mean(0)[:rows], hyp.attention, atol=1e-5)
    none = tiny_model(src_vocab, tgt_vocab, attention="none")
    with pytest.raises(ValueError, match="fixed-vector"):
        head_weights_of(none, src_vocab, tgt_vocab, sources)


@pytest.mark.slow
def test_nmt_heads_end_to_end_and_its_errors(tmp_path):
    from conftest import MULTI30K

    if not (MULTI30K / "train.de.gz").exists():
        pytest.skip(f"Multi30k not found at {MULTI30K}")
    from test_cli import TINY

    from conftest import nmt_here

    def nmt(*args):
        return subprocess.run(
            [sys.executable, "-m", "nmt", *map(str, args)],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=600,
        )

    runs = {}
    for name, extra in [
        ("mh", ["model.attention=multihead", "model.heads=2"]),
        ("lp", ["model.attention=local_p"]),
    ]:
        r = nmt(
            "train",
            "configs/multi30k_deen_additive.yaml",
            *TINY,
            "train.max_epochs=1",
            f"data.path={MULTI30K}",
            *extra,
            f"name={name}",
            f"train.out_dir={tmp_path}/{{name}}",
        )
        assert r.returncode == 0, r.stderr
        runs[name] = tmp_path / name / "best.pt"
    # the fixed-vector model is only refused here, so an untrained one serves: mh's
    # vocabularies and config with attention none, never a training of its own
    import dataclasses

    from nmt.model.checkpoint import load_checkpoint, make_payload, save_atomic
    from nmt.model.seq2seq import build_model

    mh = load_checkpoint(runs["mh"])
    cfg = dataclasses.replace(mh.cfg, model=dataclasses.replace(mh.cfg.model, attention="none"))
    fixed = build_model(cfg.model, len(mh.src_vocab), len(mh.tgt_vocab))
    runs["fixed"] = tmp_path / "fixed" / "best.pt"
    save_atomic(make_payload(cfg, fixed, mh.src_vocab, mh.tgt_vocab), runs["fixed"])
    out = tmp_path / "heads"
    # a reference alignment of the split (the diagonal), as scripts/align_multi30k.py names it
    import gzip

    with (
        gzip.open(MULTI30K / "test_2016_flickr.de.gz", "rt") as f,
        gzip.open(MULTI30K / "test_2016_flickr.en.gz", "rt") as g,
    ):
        diag = [
            " ".join(f"{i}-{i}" for i in range(min(len(s.split()), len(t.split()))))
            for s, t in zip(f, g, strict=True)
        ]
    (tmp_path / "align").mkdir()
    (tmp_path / "align" / "test_2016_flickr.de-en.gdfa").write_text("\n".join(diag) + "\n")
    r = nmt(
        "heads",
        runs["mh"],
        "--compare",
        runs["lp"],
        "--max-sentences",
        30,
        "--maps",
        1,
        "--out",
        out,
        "--alignments",
        tmp_path / "align",
    )
    assert r.returncode == 0, r.stderr
    md = (out / "heads.md").read_text()
    assert "## Agreement with reference word alignments" in md
    assert "| mh (2 heads) | mean |" in md and "| lp | 1 |" in md and "paired on the same" in md
    # decoding a full test set takes minutes on CPU: each model says so before it starts
    assert f"{runs['mh']}: decoding 30 sentences of test_2016_flickr" in r.stderr
    assert f"{runs['lp']}: decoding 30 sentences" in r.stderr
    md = (out / "heads.md").read_text()
    assert "| mh (2 heads) | 2 |" in md and "| lp | 1 |" in md
    assert (out / "heads_1.png").stat().st_size > 1000
    (out / "heads_mine.png").write_bytes(b"a user's file")
    r = nmt("heads", runs["mh"], "--max-sentences", 5, "--maps", 0, "--join", 2, "--out", out)
    assert r.returncode == 0 and not list(out.glob("heads_[0-9]*.png"))  # no stale maps
    assert (out / "heads_mine.png").exists()  # and nothing else removed
    assert "joined 2 at a time, 5 sentences" in (out / "heads.md").read_text()
    r = nmt(
        "heads",
        runs["mh"],
        "--max-sentences",
        5,
        "--maps",
        0,
        "--join",
        2,
        "--out",
        out,
        "--alignments",
        tmp_path / "align",
    )
    assert r.returncode == 0 and "| mh (2 heads) | 2 |" in (out / "heads.md").read_text()
    # the named joined split (k = 1..5) is scored against its captions' alignments too
    joined = tmp_path / "heads_joined"
    r = nmt_here(
        "heads",
        runs["mh"],
        "--split",
        "test_2016_flickr_joined",
        "--max-sentences",
        5,
        "--maps",
        0,
        "--out",
        joined,
        "--alignments",
        tmp_path / "align",
    )
    assert r.returncode == 0, r.stderr
    assert "## Agreement with reference word alignments" in (joined / "heads.md").read_text()
    r = nmt_here("heads", runs["mh"], "--split", "test_2016_flickr_joined", "--join", 2)
    assert r.returncode == 2 and "--split test_2016_flickr --join 2" in r.stderr
    # the refusals, in this process (each python -m nmt pays torch's import again); a bad
    # reference file or --out is refused before any decoding, and the report there is kept
    report = (out / "heads.md").read_text()
    (tmp_path / "align" / "test_2016_flickr.de-en.gdfa").write_text("0-0\n")
    r = nmt_here(
        "heads", runs["mh"], "--max-sentences", 5, "--out", out, "--alignments", tmp_path / "align"
    )
    assert r.returncode == 2 and "1 lines for a test set of 1000 pairs" in r.stderr
    assert "decoding" not in r.stderr and (out / "heads.md").read_text() == report
    r = nmt_here("heads", runs["mh"], "--out", "/proc/nmt_heads_out")
    assert r.returncode == 2 and "--out /proc/nmt_heads_out: cannot write in /proc" in r.stderr
    assert "decoding" not in r.stderr
    r = nmt_here(
        "heads", runs["mh"], "--compare", runs["fixed"], "--max-sentences", 5, "--out", out
    )
    assert r.returncode == 2 and "fixed-vector" in r.stderr and "fixed/best.pt" in r.stderr
    r = nmt_here("heads", runs["mh"], "--sentence", " ", "--out", out)
    assert r.returncode == 2 and "--sentence" in r.stderr
    r = nmt_here("heads", runs["mh"], "--out", out / "heads.md")
    assert r.returncode == 2 and "--out" in r.stderr
    r = nmt_here("heads", tmp_path / "missing.pt", "--out", out)
    assert r.returncode == 2 and "missing.pt" in r.stderr


def test_attention_memory_grows_with_n_q_times_n_kv():
    # the O(n_q n_kv) memory of the textbook, measured by the allocation of one call; time
    # is measured by `python benchmarks/attention_cost.py` but never asserted (benchmarks only)
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "attention_cost.py"
    spec = importlib.util.spec_from_file_location("attention_cost", path)
    assert spec is not None and spec.loader is not None, path
    attention_cost = importlib.util.module_from_spec(spec)
    sys.modules["attention_cost"] = attention_cost  # dataclasses look their module up there
    spec.loader.exec_module(attention_cost)
    measure = attention_cost.measure

    rows = [measure(n, 32, 16, batch=2, heads=2, min_run_time=0.01) for n in (32, 64, 128)]
    per_cell = [r.allocated_bytes / r.cells for r in rows]
    assert max(per_cell) / min(per_cell) < 1.1  # bytes per score cell stay constant
    assert rows[2].allocated_bytes > 3.5 * rows[0].allocated_bytes
    kv = [measure(32, n, 16, batch=2, heads=2, min_run_time=0.01) for n in (64, 256)]
    assert kv[1].allocated_bytes > 3 * kv[0].allocated_bytes
