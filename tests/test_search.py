"""Greedy and beam search: a stub model with a hand-made transition table whose best
sequence is known, beam 1 equals greedy, n-best order, stopping, length penalties, and a
sentence alone equals the same sentence inside a padded batch."""

import math
from dataclasses import dataclass

import pytest
import torch

from nmt.config.schema import LENGTH_PENALTIES
from nmt.data.batches import collate, encode_pairs
from nmt.data.corpus import Pair
from nmt.data.vocab import BOS, EOS
from nmt.inference.hypothesis import Hypothesis, length_penalty_divisor, normalised_score
from nmt.inference.search import beam_search, greedy, max_output_length

from conftest import TOY_PAIRS, tiny_model

A, B_, C, D = 4, 5, 6, 7  # stub target pieces after the specials PAD UNK BOS EOS
V = 8


# --- a stub model: log-probabilities from a table keyed by (previous piece, step) ---


@dataclass
class StubMemory:
    src_len: torch.Tensor  # (B,)

    def index_select(self, idx: torch.Tensor) -> "StubMemory":
        return StubMemory(self.src_len.index_select(0, idx))


@dataclass
class StubState:
    t: torch.Tensor  # (B,) steps taken so far

    def index_select(self, idx: torch.Tensor) -> "StubState":
        return StubState(self.t.index_select(0, idx))


class TableModel:
    """``dist(prev, t) -> {piece: probability}``; unlisted pieces get 1e-9 (renormalised)."""

    def __init__(self, dist):
        self.dist, self.calls = dist, 0

    def encode(self, src, src_len):
        return StubMemory(src_len.clone()), StubState(torch.zeros(src.size(0), dtype=torch.long))

    def _row(self, prev: int, t: int) -> torch.Tensor:
        p = torch.full((V,), 1e-9, dtype=torch.float64)
        for tok, prob in self.dist(prev, t).items():
            p[tok] = prob
        return (p / p.sum()).log().float()  # (V,)

    def step(self, prev, state, mem):
        self.calls += 1
        rows = [self._row(p, t) for p, t in zip(prev.tolist(), state.t.tolist(), strict=True)]
        return torch.stack(rows), StubState(state.t + 1), None  # (B, V)


def _stub_src(lengths):
    """(B, S) dummy source ids padded with 0, and (B,) lengths."""
    src = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for b, n in enumerate(lengths):
        src[b, :n] = A
    return src, torch.tensor(lengths)


def _greedy_trap(prev, t):
    """Greedy takes A (0.6) then EOS (0.5): P = 0.30. The best is B EOS: 0.4 * 0.9 = 0.36."""
    return {
        BOS: {A: 0.6, B_: 0.4},
        A: {EOS: 0.5, A: 0.3, B_: 0.2},
        B_: {EOS: 0.9, A: 0.05, B_: 0.05},
    }.get(prev, {EOS: 1.0})


def test_beam_finds_the_sequence_greedy_misses():
    src, src_len = _stub_src([3])
    g = greedy(TableModel(_greedy_trap), src, src_len)[0]
    assert g.tokens == [A]
    assert g.log_prob == pytest.approx(math.log(0.6 * 0.5), abs=1e-6)
    assert g.score == g.log_prob and g.attention is None
    for K in (2, 3):
        model = TableModel(_greedy_trap)
        hyps = beam_search(model, src, src_len, beam_size=K, length_penalty="none", n_best=2)[0]
        assert [h.tokens for h in hyps] == [[B_], [A]]
        assert hyps[0].log_prob == pytest.approx(math.log(0.4 * 0.9), abs=1e-6)
        assert hyps[1].log_prob == pytest.approx(math.log(0.6 * 0.5), abs=1e-6)
        assert hyps[0].score == hyps[0].log_prob and hyps[0].attention is None
        assert model.calls == 2  # K=3: the bound stops it (open A A has only 0.18 left)
    assert beam_search(TableModel(_greedy_trap), src, src_len, beam_size=1)[0][0].tokens == [A]


def _short_or_long(prev, t):
    """EOS at once: P = 0.4, |Y| = 1. A EOS: P = 0.36, |Y| = 2."""
    return {BOS: {A: 0.6, EOS: 0.4}, A: {EOS: 0.6, A: 0.2, B_: 0.2}}.get(prev, {EOS: 1.0})


@pytest.mark.parametrize(
    "penalty,alpha,best",
    [("none", 0.6, []), ("gnmt", 0.0, []), ("average", 0.6, [A]), ("gnmt", 1.0, [A])],
)
def test_length_penalty_decides_between_short_and_long(penalty, alpha, best):
    # none: log .4 = -0.92 > log .36 = -1.02; average: -1.02/2 = -0.51 > -0.92;
    # gnmt alpha=1: -1.02 / (7/6) = -0.88 > -0.92 / 1
    src, src_len = _stub_src([2])
    hyps = beam_search(
        TableModel(_short_or_long),
        src,
        src_len,
        beam_size=2,
        alpha=alpha,
        length_penalty=penalty,
        n_best=2,
    )[0]
    assert hyps[0].tokens == best
    for h in hyps:  # |Y| counts EOS; the second best may be longer (A B EOS under average)
        assert h.score == pytest.approx(
            normalised_score(h.log_prob, len(h.tokens) + 1, penalty, alpha)
        )


def test_stops_at_eos_after_k_pieces():
    k = 4

    def certain_eos(prev, t):
        return {EOS: 1.0} if t >= k else {A: 0.5, B_: 0.3, C: 0.2}

    src, src_len = _stub_src([5, 2])
    for K in (1, 3):
        model = TableModel(certain_eos)
        out = beam_search(model, src, src_len, beam_size=K, n_best=K)
        assert model.calls == k + 1  # no step after every beam took its EOS
        assert all(len(h.tokens) == k for hyps in out for h in hyps)
        assert out[0][0].tokens == [A] * k
    assert [h.tokens for h in greedy(TableModel(certain_eos), src, src_len)] == [[A] * k] * 2


@pytest.mark.parametrize("K", [1, 2])
def test_stops_at_length_limit_without_eos(K):
    def never_eos(prev, t):
        return {A: 0.25, B_: 0.25, C: 0.25, D: 0.25}

    src, src_len = _stub_src([1, 4])
    limits = max_output_length(src_len, 1.5).tolist()
    assert limits == [11, 16]
    model = TableModel(never_eos)
    out = beam_search(model, src, src_len, beam_size=K, max_ratio=1.5, n_best=K)
    assert model.calls == 16
    p_eos = 1e-9 / (1 + 4e-9)  # TableModel's floor, renormalised
    for hyps, limit in zip(out, limits, strict=True):
        # cut at the limit: completed with EOS in place of the last piece, scored with it
        assert len(hyps) == K and all(len(h.tokens) == limit - 1 for h in hyps)
        assert hyps[0].log_prob == pytest.approx(
            (limit - 1) * math.log(0.25) + math.log(p_eos), abs=1e-4
        )
    g = greedy(TableModel(never_eos), src, src_len, max_ratio=1.5)
    assert [len(h.tokens) for h in g] == [n - 1 for n in limits]
    assert [h.log_prob for h in g] == pytest.approx([h[0].log_prob for h in out], abs=1e-4)
    assert not any(h.complete for hyps in out for h in hyps) and not any(h.complete for h in g)


def test_length_penalty_formulas():
    # gnmt (Wu et al. 2016, eq. 14): ((5 + |Y|) / 6) ** alpha
    assert length_penalty_divisor(7, "gnmt", 1.0) == pytest.approx(2.0)  # 12 / 6
    assert length_penalty_divisor(19, "gnmt", 0.5) == pytest.approx(2.0)  # sqrt(24 / 6)
    assert length_penalty_divisor(1, "gnmt", 0.6) == pytest.approx(1.0)  # (6 / 6) ** a
    assert normalised_score(-3.0, 7, "gnmt", 1.0) == pytest.approx(-1.5)
    assert normalised_score(-4.0, 19, "gnmt", 0.5) == pytest.approx(-2.0)
    assert normalised_score(-6.0, 3, "average") == pytest.approx(-2.0)
    assert normalised_score(-6.0, 3, "none") == pytest.approx(-6.0)
    lengths = torch.tensor([1.0, 7.0, 19.0])
    assert torch.allclose(
        length_penalty_divisor(lengths, "gnmt", 1.0), torch.tensor([1.0, 2.0, 4.0])
    )


@pytest.mark.parametrize(
    "kwargs,option",
    [
        (dict(length_penalty="wu"), "length_penalty"),
        (dict(beam_size=0), "beam_size"),
        (dict(beam_size=2, n_best=0), "n_best"),
        (dict(beam_size=2, n_best=3), "n_best"),
        (dict(alpha=-0.1), "alpha"),
    ],
)
def test_bad_options_raise(kwargs, option):
    src, src_len = _stub_src([2])
    with pytest.raises(ValueError, match=option):
        beam_search(TableModel(_greedy_trap), src, src_len, **kwargs)
    with pytest.raises(ValueError, match="length_penalty"):
        length_penalty_divisor(3, "wu", 0.6)


# --- a real tiny model, briefly trained so that some sentences stop at EOS ---


def _batch(src_vocab, tgt_vocab):
    return collate(encode_pairs([Pair(s, t, "") for s, t in TOY_PAIRS], src_vocab, tgt_vocab))


_TRAINED: dict = {}


def _trained(vocabs, attention, order):
    """A tiny model after 20 Adam steps on the toy pairs (cached for this module)."""
    if (attention, order) not in _TRAINED:
        model = tiny_model(*vocabs, attention=attention, step_order=order)
        batch = _batch(*vocabs)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(20):
            loss = model(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out) / batch.n_tokens
            opt.zero_grad()
            loss.backward()
            opt.step()
        _TRAINED[attention, order] = model.eval()
    return _TRAINED[attention, order]


MODELS = [
    ("additive", "bahdanau"),
    ("dot", "luong"),
    ("general", "bahdanau"),
    ("scaled_dot", "luong"),
    ("none", "bahdanau"),
]


@pytest.mark.parametrize("attention,order", MODELS)
def test_beam_one_equals_greedy(toy_vocabs, attention, order):
    model, batch = _trained(toy_vocabs, attention, order), _batch(*toy_vocabs)
    limits = max_output_length(batch.src_len, 2.0).tolist()
    g = greedy(model, batch.src, batch.src_len)
    assert any(len(h.tokens) < lim for h, lim in zip(g, limits, strict=True))  # some stopped at EOS
    for penalty in LENGTH_PENALTIES:
        out = beam_search(model, batch.src, batch.src_len, beam_size=1, length_penalty=penalty)
        for gh, (bh,) in zip(g, out, strict=True):
            assert bh.tokens == gh.tokens
            assert bh.log_prob == pytest.approx(gh.log_prob, abs=1e-5)
            if attention == "none":
                assert bh.attention is None and gh.attention is None
            else:
                assert bh.attention is not None and gh.attention is not None
                assert bh.attention.shape == gh.attention.shape
                assert torch.allclose(bh.attention, gh.attention, atol=1e-6)


@pytest.mark.parametrize("penalty", LENGTH_PENALTIES)
def test_n_best_sorted_distinct_and_scored(toy_vocabs, penalty):
    model, batch = _trained(toy_vocabs, "additive", "bahdanau"), _batch(*toy_vocabs)
    out = beam_search(
        model, batch.src, batch.src_len, beam_size=5, n_best=5, length_penalty=penalty
    )
    assert len(out) == batch.src.size(0)
    for hyps, n_src in zip(out, batch.src_len.tolist(), strict=True):
        assert len(hyps) == 5
        order = [(not h.complete, -h.score) for h in hyps]  # complete ones first, then by score
        assert order == sorted(order)
        assert len({tuple(h.tokens) for h in hyps}) == 5
        for h in hyps:
            assert h.attention is not None
            steps = h.attention.size(0)  # |Y|: tokens, plus the EOS row when produced
            assert steps in (len(h.tokens), len(h.tokens) + 1)
            assert h.attention.size(1) == n_src
            assert h.score == pytest.approx(normalised_score(h.log_prob, steps, penalty, 0.6))


@pytest.mark.parametrize(
    "attention,order", [("additive", "bahdanau"), ("dot", "luong"), ("none", "bahdanau")]
)
def test_batched_beam_equals_each_sentence_alone(toy_vocabs, attention, order):
    model, batch = _trained(toy_vocabs, attention, order), _batch(*toy_vocabs)
    batched = beam_search(model, batch.src, batch.src_len, beam_size=3, n_best=3)
    for i, n in enumerate(batch.src_len.tolist()):
        alone = beam_search(
            model, batch.src[i : i + 1, :n], batch.src_len[i : i + 1], beam_size=3, n_best=3
        )[0]
        assert [h.tokens for h in alone] == [h.tokens for h in batched[i]]
        assert [h.log_prob for h in alone] == pytest.approx(
            [h.log_prob for h in batched[i]], abs=1e-4
        )
    assert any(n < batch.src.size(1) for n in batch.src_len.tolist())  # padding was there


def test_hypothesis_log_prob_defaults_to_none():
    assert Hypothesis([A], -1.0, None).log_prob is None


# --- NMT-15: stop only when nothing better can come, for every length penalty ---

E_ = 8
V9 = 9
# Markov on the last piece (shared/cases/NMT-15/step_table.json); EOS's own row must never
# be used by a correct search.
MARKOV = {
    BOS: {A: 0.55, B_: 0.30, EOS: 0.15},
    A: {EOS: 0.60, C: 0.40},
    B_: {D: 0.90, EOS: 0.10},
    C: {EOS: 1.0},
    D: {E_: 0.90, EOS: 0.10},
    E_: {EOS: 1.0},
    EOS: {EOS: 0.5, A: 0.5},
}
LIMIT = 5


class MarkovModel:
    def encode(self, src, src_len):
        return StubMemory(src_len.clone()), StubState(torch.zeros(src.size(0), dtype=torch.long))

    def step(self, prev, state, mem):
        rows = torch.full((prev.size(0), V9), float("-inf"), dtype=torch.float64)
        for r, p in enumerate(prev.tolist()):
            for tok, prob in MARKOV.get(p, {}).items():
                rows[r, tok] = math.log(prob)
        return rows, StubState(state.t + 1), None


def _exhaustive(kind, alpha):
    """Every hypothesis ending in EOS within LIMIT pieces, as (tokens, score), best first."""
    out = []

    def walk(prefix, last, lp):
        if len(prefix) >= LIMIT:
            return
        for tok, p in MARKOV[last].items():
            if tok == EOS:
                n = len(prefix) + 1
                out.append((prefix, normalised_score(lp + math.log(p), n, kind, alpha)))
            else:
                walk(prefix + [tok], tok, lp + math.log(p))

    walk([], BOS, 0.0)
    return sorted(out, key=lambda x: -x[1])


@pytest.mark.parametrize(
    "kind, alpha", [("average", 0.6), ("gnmt", 1.0), ("gnmt", 0.6), ("none", 0.6)]
)
@pytest.mark.parametrize("K", [2, 3, 6])
def test_beam_matches_the_exhaustive_best_under_every_length_penalty(monkeypatch, kind, alpha, K):
    import nmt.inference.search as search

    monkeypatch.setattr(
        search,
        "max_output_length",
        lambda src_len, ratio, extra=10: torch.full_like(src_len, LIMIT),
    )
    src, src_len = _stub_src([2])
    ref = _exhaustive(kind, alpha)
    out = beam_search(
        MarkovModel(), src, src_len, beam_size=K, length_penalty=kind, alpha=alpha, n_best=2
    )[0]
    assert out[0].tokens == ref[0][0]
    assert out[0].score == pytest.approx(ref[0][1], abs=1e-6)
    if K == 6:  # a beam as wide as the tree: the whole n-best list is exact
        assert [(h.tokens, round(h.score, 6)) for h in out] == [
            (t, round(sc, 6)) for t, sc in ref[:2]
        ]
    # every returned hypothesis is scored by the same rule as the best one
    for h in out:
        assert h.complete
        assert h.score == pytest.approx(
            normalised_score(h.log_prob, len(h.tokens) + 1, kind, alpha), abs=1e-9
        )


def test_average_penalty_beam2_no_longer_stops_at_k_finished(monkeypatch):
    """The NMT-15 input: "done at K finished" returned `a c` (-0.5047); `b d e` (-0.3537)
    was still open and is the exhaustive best."""
    import nmt.inference.search as search

    monkeypatch.setattr(
        search,
        "max_output_length",
        lambda src_len, ratio, extra=10: torch.full_like(src_len, LIMIT),
    )
    src, src_len = _stub_src([2])
    out = beam_search(MarkovModel(), src, src_len, beam_size=2, length_penalty="average", n_best=2)[
        0
    ]
    assert [h.tokens for h in out] == [[B_, D, E_], [A, C]]
    assert out[0].score == pytest.approx(math.log(0.3 * 0.9 * 0.9) / 4, abs=1e-6)


def test_hypotheses_cut_at_the_limit_are_flagged_and_ranked_by_the_same_rule():
    def never_eos(prev, t):
        return {A: 0.5, B_: 0.5}

    src, src_len = _stub_src([1])
    out = beam_search(
        TableModel(never_eos),
        src,
        src_len,
        beam_size=3,
        n_best=3,
        length_penalty="average",
        max_ratio=1.0,
    )[0]
    limit = int(max_output_length(src_len, 1.0)[0])
    assert all(not h.complete and len(h.tokens) == limit - 1 for h in out)
    for h in out:  # |Y| counts the EOS that completed it
        assert h.score == pytest.approx(normalised_score(h.log_prob, limit, "average"))
        assert h.attention is None or h.attention.size(0) == limit
    assert [h.score for h in out] == sorted((h.score for h in out), reverse=True)


# Markov on the last piece: the hypothesis that never ends, A A A (P = 0.729 at the limit
# of 3), has a far higher log P than any complete one (B EOS: 0.1, A A EOS: 0.081)
RUN_ON = {BOS: {A: 0.9, B_: 0.1}, A: {A: 0.9, EOS: 0.1}, B_: {EOS: 1.0}}


class RunOnModel(MarkovModel):
    def step(self, prev, state, mem):
        rows = torch.full((prev.size(0), V9), float("-inf"), dtype=torch.float64)
        for r, p in enumerate(prev.tolist()):
            for tok, prob in RUN_ON.get(p, {}).items():
                rows[r, tok] = math.log(prob)
        return rows, StubState(state.t + 1), None


@pytest.mark.parametrize("kind", LENGTH_PENALTIES)
def test_n_best_lists_hold_translations_before_hypotheses_cut_at_the_limit(monkeypatch, kind):
    import nmt.inference.search as search

    monkeypatch.setattr(
        search, "max_output_length", lambda src_len, ratio, extra=10: torch.full_like(src_len, 3)
    )
    src, src_len = _stub_src([2])

    def ranked(complete):  # (tokens, P incl. EOS) best first under the penalty in use
        return [
            t
            for t, p in sorted(
                complete, key=lambda c: -normalised_score(math.log(c[1]), len(c[0]) + 1, kind, 0.6)
            )
        ]

    # beam 2 finds B EOS and A A EOS; the cut A A A, though it scores best, is not listed
    two = beam_search(RunOnModel(), src, src_len, beam_size=2, n_best=2, length_penalty=kind)[0]
    assert [h.tokens for h in two] == ranked([([B_], 0.1), ([A, A], 0.081)])
    assert all(h.complete for h in two)
    one = beam_search(RunOnModel(), src, src_len, beam_size=2, n_best=1, length_penalty=kind)[0]
    assert one[0].complete and one[0].tokens == two[0].tokens
    # at a limit of 3, beam 4's open A A ends with an EOS it would choose anyway: three
    # complete hypotheses, nothing cut
    four = beam_search(RunOnModel(), src, src_len, beam_size=4, n_best=4, length_penalty=kind)[0]
    assert [h.tokens for h in four] == ranked([([B_], 0.1), ([A], 0.09), ([A, A], 0.081)])
    assert all(h.complete for h in four)


@pytest.mark.parametrize("kind", LENGTH_PENALTIES)
@pytest.mark.parametrize("K", [1, 2])
def test_a_hypothesis_cut_at_the_limit_is_completed_with_eos_and_scored_with_it(
    monkeypatch, kind, K
):
    """At a limit of 2, A's best piece is A (0.9), not EOS (0.1): A is cut, completed with
    EOS and scored with it (log 0.9 + log 0.1), ranked after the complete B EOS (beam 2),
    and greedy's (beam 1's) only hypothesis."""
    import nmt.inference.search as search

    monkeypatch.setattr(
        search, "max_output_length", lambda src_len, ratio, extra=10: torch.full_like(src_len, 2)
    )
    src, src_len = _stub_src([2])
    hyps = beam_search(RunOnModel(), src, src_len, beam_size=K, n_best=K, length_penalty=kind)[0]
    if K == 1:
        (g,) = greedy(RunOnModel(), src, src_len)
        assert (g.tokens, g.complete) == ([A], False)
        assert g.log_prob == pytest.approx(math.log(0.9 * 0.1), abs=1e-12)
        assert [h.tokens for h in hyps] == [g.tokens]
    else:
        assert [h.tokens for h in hyps] == [[B_], [A]]
    cut = hyps[-1]
    assert (cut.tokens, cut.complete) == ([A], False)
    assert cut.log_prob == pytest.approx(math.log(0.9 * 0.1), abs=1e-12)
    assert cut.score == pytest.approx(normalised_score(cut.log_prob, 2, kind, 0.6), abs=1e-12)
    assert all(h.complete for h in hyps[:-1])


@pytest.mark.parametrize("K", [1, 3])
def test_scores_of_complete_and_cut_hypotheses_agree_with_forced_decoding(
    toy_vocabs, K, monkeypatch
):
    import nmt.inference.search as search
    from nmt.serve.forced import forced_pass

    # limits as long as the sources: some hypotheses end within them, some are cut
    monkeypatch.setattr(search, "max_output_length", lambda src_len, ratio, extra=10: src_len // 2)
    model, batch = _trained(toy_vocabs, "additive", "bahdanau"), _batch(*toy_vocabs)
    if K == 1:
        nbest = [[h] for h in greedy(model, batch.src, batch.src_len)]
    else:
        nbest = beam_search(
            model, batch.src, batch.src_len, beam_size=K, n_best=K, length_penalty="average"
        )
    kinds = set()
    for i, hyps in enumerate(nbest):
        n = int(batch.src_len[i])
        targets = [h.tokens + [EOS] for h in hyps]  # a cut one is completed with EOS
        for h, t, f in zip(
            hyps, targets, forced_pass(model, batch.src[i, :n].tolist(), targets), strict=True
        ):
            kinds.add(h.complete)
            assert h.log_prob == pytest.approx(sum(f.token_logprobs), abs=1e-4)
            want = (
                sum(f.token_logprobs)
                if K == 1
                else normalised_score(sum(f.token_logprobs), len(t), "average")
            )
            assert h.score == pytest.approx(want, abs=1e-4)
    assert kinds == {True, False}  # both kinds were checked


def _rows_per_step(model, monkeypatch) -> list[int]:
    """Record how many rows each ``model.step`` or ``model.search_step`` (beam search's)
    call computes."""
    rows: list[int] = []
    for name in ("step", "search_step"):
        step = getattr(model, name)

        def counting(prev, state, mem, step=step, **kwargs):
            rows.append(prev.size(0))
            return step(prev, state, mem, **kwargs)

        monkeypatch.setattr(model, name, counting)
    return rows


@pytest.mark.parametrize(
    "attention,order",
    [("additive", "bahdanau"), ("multihead", "luong"), ("local_p", "luong"), ("none", "bahdanau")],
)
def test_greedy_drops_finished_sentences_and_equals_each_sentence_alone(
    toy_vocabs, attention, order, monkeypatch
):
    model, batch = _trained(toy_vocabs, attention, order), _batch(*toy_vocabs)
    B = batch.src.size(0)
    rows = _rows_per_step(model, monkeypatch)
    batched = greedy(model, batch.src, batch.src_len)
    limits = max_output_length(batch.src_len, 2.0).tolist()
    # steps per sentence: its pieces, plus the step that produced EOS (forced at the limit)
    steps = [len(h.tokens) + 1 for h in batched]
    assert all(n <= lim for n, lim in zip(steps, limits, strict=True))
    # a step computes only the sentences that have not yet produced EOS or hit the limit
    assert rows[0] == B
    assert rows == [sum(n > t for n in steps) for t in range(len(rows))]
    assert rows[-1] < B
    for i, n in enumerate(batch.src_len.tolist()):
        (alone,) = greedy(model, batch.src[i : i + 1, :n], batch.src_len[i : i + 1])
        assert alone.tokens == batched[i].tokens
        assert alone.log_prob == pytest.approx(batched[i].log_prob, abs=1e-4)
        if alone.attention is not None:
            together = batched[i].attention
            assert together is not None
            assert torch.allclose(alone.attention, together, atol=1e-5)


def test_beam_steps_once_per_sentence_first_and_drops_finished_sentences(toy_vocabs, monkeypatch):
    model, batch = _trained(toy_vocabs, "additive", "bahdanau"), _batch(*toy_vocabs)
    B, K = batch.src.size(0), 4
    rows = _rows_per_step(model, monkeypatch)
    beam_search(model, batch.src, batch.src_len, beam_size=K)
    assert rows[0] == B  # the K equal starts are stepped once
    assert rows[1] == B * K
    assert all(r % K == 0 for r in rows[1:])
    assert rows[-1] < B * K  # sentences that were done left the batch
    assert rows[1:] == sorted(rows[1:], reverse=True)


def test_beam_one_equals_greedy_on_exact_ties():
    # four pieces share the best log-probability at every step: both searches take the
    # lowest piece id (torch.max's rule), whatever order topk returns equal values in
    # (found by a fresh-user check on a barely trained model)
    def dist(prev, t):
        return {EOS: 1.0} if t >= 3 else {D: 0.25, C: 0.25, B_: 0.25, A: 0.25}

    src, src_len = _stub_src([4, 2])
    g = greedy(TableModel(dist), src, src_len)
    b = beam_search(TableModel(dist), src, src_len, beam_size=1)
    assert [h.tokens for h in g] == [[A, A, A]] * 2
    assert [nb[0].tokens for nb in b] == [h.tokens for h in g]


def test_most_probable_reads_known_columns_only_when_they_name_a_single_maximum():
    from nmt.inference.search import _most_probable
    from nmt.ops.topk import KnownTop

    logp = torch.tensor([[-3.0, -1.0, -2.0, -1.0], [-0.5, -4.0, -2.0, -3.0]])
    ref = logp.max(dim=-1)
    # row 0 ties at ids 1 and 3: max's rule (the lowest id) whatever order they are known in
    tied = KnownTop(torch.tensor([[3, 1], [0, 2]]), torch.tensor([2, 2]))
    for known in (None, tied, KnownTop(torch.tensor([[1, 2], [0, 2]]), torch.tensor([1, 2]))):
        lp, best = _most_probable(logp, known)
        assert best.tolist() == ref.indices.tolist() == [1, 0]
        assert torch.equal(lp, ref.values)
    # a single maximum in every row, led by two: read from the columns, not the rows
    logp2 = logp.clone()
    logp2[0, 3] = -1.5
    claimed = KnownTop(torch.tensor([[2, 0], [3, 1]]), torch.tensor([2, 2]))  # wrong on purpose
    lp, best = _most_probable(logp2, claimed)
    assert best.tolist() == [2, 3] and lp.tolist() == [-2.0, -3.0]
