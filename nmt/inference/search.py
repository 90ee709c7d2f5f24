"""Search: greedy and beam search over ``model.encode`` / ``model.step``.

Both searches know nothing about what the model state holds: they only call
``model.encode(src, src_len) -> (mem, state)``, ``model.step(prev, state, mem) ->
(log_probs (B, V), state, attention (B, S) or None)`` and ``index_select(idx)`` on the
memory and state; both call ``model.search_step(prev, state, mem, beam_size=K)`` instead
where a model has it (the same, and where a reduced-precision step found each row's
largest: :class:`nmt.ops.topk.KnownTop`, so that the search need not read the row again).
Beam size 1 gives exactly the greedy tokens. What they return (its ``Hypothesis``), the
length penalties and the n-best order are nmt/inference/hypothesis.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

from nmt.config.schema import LENGTH_PENALTIES, SearchConfig, TrainConfig
from nmt.data.vocab import BOS, EOS
from nmt.inference.hypothesis import Hypothesis, length_penalty_divisor, normalised_score, rank
from nmt.inference.open_hypotheses import OpenHypotheses
from nmt.inference.rescore import autocast_on, fp32_log_probs
from nmt.inference.search_limit import ended_by_choice, only_eos
from nmt.ops.precision import at_least_fp32
from nmt.ops.topk import KnownTop, row_max, top_k

# defaults of the config, so that a direct call decodes as `nmt translate` does
_SEARCH, _MAX_RATIO = SearchConfig(), TrainConfig().max_output_ratio


def max_output_length(src_len: torch.Tensor, ratio: float, extra: int = 10) -> torch.Tensor:
    """Per-sentence limit on generated pieces: ``ratio * src_len + extra``; (B,) -> (B,)."""
    return (src_len.float() * ratio).long() + extra


@torch.inference_mode()
def greedy(
    model,
    src: torch.Tensor,
    src_len: torch.Tensor,
    max_ratio: float = _MAX_RATIO,
    *,
    rescore: bool = True,
) -> list[Hypothesis]:
    """Batched greedy search: pick the most probable piece at each step.

    Sentences that have produced EOS leave the batch, so each step costs only the rows
    still running; no row's arithmetic depends on the others. At its length limit a row's
    piece is EOS (a cut hypothesis, ``complete=False``, scored with that EOS).

    Args:
        model: has ``encode(src, src_len)`` and ``step(prev, state, mem)``; mem and state
            have ``index_select(idx)``.
        src: (B, S) source ids. src_len: (B,) lengths.
        max_ratio: output length limit is ``max_ratio * src_len + 10``.
        rescore: under bf16/fp16 autocast, replace each hypothesis's log P and attention
            by fp32 values (:func:`_rescore`), which do not depend on the batch. False
            keeps the search's own: the same tokens, for half the time on a CPU.

    Returns:
        B hypotheses in input order; one cut at its length limit has ``complete=False``.
        Every ``log_prob`` includes the EOS term.
    """
    B, S = src.shape
    dev = src.device
    mem, state = model.encode(src, src_len)
    limits = max_output_length(src_len, max_ratio)  # (B,) on the CPU
    T = int(limits.max())
    tokens = torch.full((B, T), EOS, dtype=torch.long, device=dev)
    # (B,) totals summed in fp64: a total of ~30 fp32 terms rounded at each addition moves
    # by an ulp or two (1.5e-5 at 76 nats) with the rounding of its terms, which differs in
    # the last bit from batch to batch; summed in fp64 it moves by the terms' difference only
    scores = torch.zeros(B, dtype=torch.float64, device=dev)
    step_lp = torch.zeros(B, T, dtype=torch.float32, device=dev)  # (B, T) per piece taken
    attn_all = None  # (B, T, S), filled as rows run
    rows = torch.arange(B, device=dev)  # the batch rows still running
    row_limits = limits.to(dev)
    prev = torch.full((B,), BOS, dtype=torch.long, device=dev)
    cut = torch.zeros(B, dtype=torch.bool, device=dev)  # rows whose EOS was forced
    step = _stepper(model, 1)
    for t in range(T):
        logp, state, attn, known = step(prev, state, mem)  # (n, V), (n, S) or None
        best_logp, best = _most_probable(logp, known)
        last = t + 1 >= row_limits  # (n,) rows at their length limit: their piece is EOS
        if bool(last.any()):
            cut[rows[last & (best != EOS)]] = True
            best_logp = torch.where(last, logp[:, EOS], best_logp)
            best = best.masked_fill(last, EOS)
        tokens[rows, t] = best
        step_lp[rows, t] = best_logp.float()
        scores[rows] += best_logp.double()
        if attn is not None:
            if attn_all is None:
                attn_all = attn.new_zeros(B, T, S)
            attn_all[rows, t] = attn
        running = best != EOS
        if not bool(running.all()):
            if not bool(running.any()):
                break
            keep = running.nonzero().squeeze(1)
            rows, row_limits, best = rows[keep], row_limits[keep], best[keep]
            mem, state = mem.index_select(keep), state.index_select(keep)
        prev = best
    out, scores_l, cut_l, lp_l = tokens.tolist(), scores.tolist(), cut.tolist(), step_lp.tolist()
    limits_l, src_len_l = limits.tolist(), src_len.tolist()  # not two tensor reads a sentence
    attn_all = None if attn_all is None else attn_all.cpu()
    hyps = []
    for b in range(B):
        seq, limit = out[b], limits_l[b]
        n = seq.index(EOS) if EOS in seq[:limit] else limit  # limit only when limit is 0
        a = None if attn_all is None else attn_all[b, : n + 1, : src_len_l[b]].clone()
        hyps.append(
            Hypothesis(seq[:n], scores_l[b], a, scores_l[b], not cut_l[b], lp_l[b][: min(n + 1, T)])
        )
    if rescore and autocast_on(dev):  # bf16 scores depend on the batch: redo them in fp32
        _rescore(model, src, src_len, [[h] for h in hyps], "none", 0.0)
    return hyps


def _most_probable(logp: torch.Tensor, known: KnownTop | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's largest log-probability and its piece, (n,) and (n,), as
    ``logp.max(dim=-1)`` gives them (equal ones: the lowest id): from ``known`` where in every
    row its first column leads (``lead`` >= 1) and beats its second, so is the row's only
    maximum (``max`` over the row took 0.17 ms for 64 rows of 7,931 on one EPYC thread);
    else through block maxima (:func:`nmt.ops.topk.row_max`, the same answer)."""
    if known is not None and known.cols.size(1) >= 2:
        top2 = known.cols[:, :2]
        lp2 = logp.gather(1, top2)
        if bool(((known.lead >= 1) & (lp2[:, 0] > lp2[:, 1])).all()):
            return lp2[:, 0], top2[:, 0]
    return row_max(logp)


def _check_beam_options(beam_size: int, n_best: int, length_penalty: str, alpha: float):
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if n_best < 1 or n_best > beam_size:
        raise ValueError(f"n_best must be in 1..beam_size ({beam_size}), got {n_best}")
    if length_penalty not in LENGTH_PENALTIES:
        raise ValueError(
            f"length_penalty: unknown option {length_penalty!r}; expected one of {LENGTH_PENALTIES}"
        )
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0 (the length penalty must not shrink), got {alpha}")


def _candidates(
    logp: torch.Tensor, open_lp: torch.Tensor, K: int, known: KnownTop | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The 2K best one-piece extensions of each sentence's K beams, best first.

    Args:
        logp: (B*K, V) step log-probabilities. open_lp: (B*K,) totals so far.
        known: where the step found each row's largest log-probabilities, or None
            (:func:`nmt.ops.topk.top_k`).

    Returns:
        totals (B, 2K), parent rows in 0..B*K-1 (B, 2K), pieces (B, 2K). Every beam's 2K
        best pieces are taken first (exact: a global top-2K piece is in its beam's top 2K);
        the stable sort keeps beam order, then per-beam order, on equal totals, and within
        a beam equal log-probabilities go lower piece id first.
    """
    BK, V = logp.shape
    B, n1 = BK // K, min(2 * K, V)
    # Equal log-probabilities go lower piece id first, as torch.max breaks ties in greedy
    # search, so that beam 1 equals greedy on exact ties too. topk keeps equal values in
    # no set order, and where a tie straddles its cut it may keep any of them: such rows
    # (rare) take the n1 best from a stable sort of the whole row instead.
    m = min(n1 + 1, V)
    lp_m, tok_m = top_k(at_least_fp32(logp), m, known)  # (B*K, m)
    lp1, tok1 = lp_m[:, :n1], tok_m[:, :n1]
    if m > n1:
        straddle = (lp_m[:, n1 - 1] == lp_m[:, n1]).nonzero().squeeze(1)
        if straddle.numel():
            whole = at_least_fp32(logp.index_select(0, straddle)).sort(
                dim=-1, descending=True, stable=True
            )
            lp1, tok1 = lp1.clone(), tok1.clone()
            lp1[straddle], tok1[straddle] = whole.values[:, :n1], whole.indices[:, :n1]
    tok1, by_id = tok1.sort(dim=-1)
    lp1 = lp1.gather(-1, by_id)
    by_value = lp1.sort(dim=-1, descending=True, stable=True).indices
    lp1, tok1 = lp1.gather(-1, by_value), tok1.gather(-1, by_value)
    total = (open_lp[:, None] + lp1).view(B, K * n1)  # (B, K*n1)
    order = total.sort(dim=1, descending=True, stable=True).indices[:, : 2 * K]  # (B, 2K)
    rows = torch.arange(B, device=logp.device)[:, None] * K + order // n1  # (B, 2K)
    return total.gather(1, order), rows, tok1.view(B, K * n1).gather(1, order)


def _collect(
    finished: list[list[Hypothesis]],
    cands: OpenHypotheses,
    final: torch.Tensor,
    length: int,
    src_len: list[int],
    kind: str,
    alpha: float,
    cut: torch.Tensor | None = None,
):
    """Append the candidates marked in ``final`` (B, 2K) to ``finished`` (EOS stripped);
    ``cut`` (B, 2K) marks those whose EOS was forced at the length limit."""
    B, C = final.shape
    idx = final.view(-1).nonzero().squeeze(1)  # flat candidate rows
    if idx.numel() == 0:
        return
    toks, lps = cands.tokens[idx].tolist(), cands.log_prob[idx].tolist()
    steps = cands.step_lp[idx].tolist()
    forced = [False] * len(toks) if cut is None else cut.view(-1)[idx].tolist()
    atts = None if cands.attention is None else cands.attention[idx].cpu()
    for j, i in enumerate(idx.tolist()):
        b, seq = i // C, toks[j]
        complete = bool(seq) and seq[-1] == EOS and not forced[j]
        seq = seq[:-1] if seq and seq[-1] == EOS else seq
        att = None if atts is None else atts[j, :, : src_len[b]]
        score = normalised_score(lps[j], length, kind, alpha)
        finished[b].append(Hypothesis(seq, float(score), att, lps[j], complete, steps[j]))


def _is_done(hyps: list[Hypothesis], K: int, n_best: int, bound: float) -> bool:
    """Whether no open hypothesis can still enter a sentence's n-best list.

    ``bound`` is the best normalised score any open hypothesis can still reach (its log P
    can only fall, and lp(Y) only grows up to the length limit, so it is
    ``max(open log P) / lp(limit)`` for every length penalty). The sentence is done once
    it has ``n_best`` finished hypotheses and the ``n_best``-th best of them scores at
    least ``bound``. Beam size 1 is greedy search: done at its first finished hypothesis.
    (The OpenNMT-py / fairseq rule, "done at K finished", is wrong whenever the length
    penalty can reward a longer hypothesis: it returns a worse translation than one still
    open; shared/cases NMT-15.)
    """
    if K == 1:
        return len(hyps) >= 1
    if len(hyps) < n_best:
        return False
    return sorted((h.score for h in hyps), reverse=True)[n_best - 1] >= bound


def _stepper(model, beam_size: int) -> Callable[..., tuple]:
    """What a search with ``beam_size`` (1: greedy) calls each step, looked up once:
    ``model.search_step`` where the model has one (it may also say where each row's
    largest are: :class:`nmt.ops.topk.KnownTop`), else ``model.step`` with None for that."""
    search_step = getattr(model, "search_step", None)
    if search_step is not None:
        return partial(search_step, beam_size=beam_size)
    return lambda prev, state, mem: (*model.step(prev, state, mem), None)


@torch.inference_mode()
def beam_search(
    model,
    src: torch.Tensor,
    src_len: torch.Tensor,
    beam_size: int = _SEARCH.beam_size,
    alpha: float = _SEARCH.alpha,
    length_penalty: str = _SEARCH.length_penalty,
    max_ratio: float = _MAX_RATIO,
    n_best: int = 1,
    *,
    rescore: bool = True,
) -> list[list[Hypothesis]]:
    """Batched beam search over sentences and beams (one ``model.step`` on B*K rows a step).

    Each step every sentence takes the 2K best extensions of its K beams (ranked by total
    log-probability, all of one length); those ending in EOS among the first K are finished,
    the first K not ending in EOS stay open (fairseq). At the length limit
    ``max_output_length(src_len, max_ratio)`` every open hypothesis is completed with EOS
    (the only piece it may take there) and finished. Finished
    hypotheses are ranked by ``log P / lp`` (:func:`length_penalty_divisor`: ``gnmt`` is
    Wu et al. 2016 eq. 14, ``average`` divides by |Y|, ``none`` is raw log P).

    Stopping: a sentence is done at its length limit, or as soon as its n_best-th finished
    score is >= ``max(open log P) / lp(limit)``, a bound no open hypothesis can beat (log P
    only falls, lp only grows): so every returned hypothesis, in any n-best position, is
    the best the beam can still produce under the length penalty in use (see
    :func:`_is_done`; unlike the "K finished" rule of OpenNMT-py and fairseq). A hypothesis
    whose EOS was forced at the limit (EOS was not its beam's best piece there:
    ``complete=False``) is scored with that EOS, as forced decoding scores its pieces and
    EOS, and ranked after every complete one, so it is returned only when fewer than
    ``n_best`` complete hypotheses were found (n-best lists hold translations first).
    A sentence that is
    done leaves the batch (its K rows are no longer computed) and the loop stops when every
    sentence is done; the first step runs once per sentence, since its K starts are equal.
    Beam size 1 gives exactly greedy's tokens.

    Args:
        model: has ``encode(src, src_len) -> (mem, state)`` and ``step(prev (N,), state,
            mem) -> (log_probs (N, V), state, attention (N, S) or None)``; mem and state
            have ``index_select(idx)``.
        src: (B, S) source ids. src_len: (B,) lengths.
        beam_size: K. alpha: the gnmt exponent. length_penalty: gnmt | average | none.
        max_ratio: output length limit is ``max_ratio * src_len + 10``.
        n_best: hypotheses returned per sentence, 1..K.
        rescore: under bf16/fp16 autocast, replace the n-best hypotheses' log P, score and
            attention by fp32 values (:func:`_rescore`) and rank them by those, so that a
            sentence's list does not depend on the batch. False keeps the search's own
            numbers and order: with ``n_best`` 1 the same hypothesis, for a fraction of
            the time on a CPU (the rescoring is a second, fp32, decoder pass).

    Returns:
        per sentence (input order) its n_best hypotheses: complete ones first, best score
        first, then those cut at the length limit, best score first.

    Raises:
        ValueError: beam_size < 1, n_best outside 1..beam_size, unknown length_penalty,
            alpha < 0.
    """
    _check_beam_options(beam_size, n_best, length_penalty, alpha)
    B, S = src.shape
    assert src_len.shape == (B,), "src_len must be (B,)"
    K, dev = beam_size, src.device
    mem, state = model.encode(src, src_len)
    # totals in fp64, as greedy's: summed in fp32 they round differently with the batch
    start_lp = torch.full((B, K), float("-inf"), dtype=torch.float64, device=dev)
    start_lp[:, 0] = 0.0  # K copies of one start: only the first may be extended
    beams = OpenHypotheses(
        start_lp.view(-1),
        torch.empty(B * K, 0, dtype=torch.long, device=dev),
        None,
        torch.empty(B * K, 0, dtype=torch.float32, device=dev),
    )
    limits, lens = max_output_length(src_len, max_ratio).cpu(), src_len.tolist()
    lp_limit = length_penalty_divisor(limits.to(dev).float(), length_penalty, alpha)
    lp_limit = torch.as_tensor(lp_limit, dtype=torch.float, device=dev).expand(B)  # (B,)
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    sent = list(range(B))  # the sentences still searching; their rows are n*K in this order
    prev = torch.full((B,), BOS, dtype=torch.long, device=dev)
    step = _stepper(model, K)
    for t in range(int(limits.max())):
        n = len(sent)
        logp, state, attn, known = step(prev, state, mem)  # (n*K, V), (n*K, S)
        if t == 0:  # the K starts are one: step once per sentence, then copy to K rows
            expand = torch.arange(n, device=dev).repeat_interleave(K)  # (n*K,)
            mem, state, logp = mem.index_select(expand), state.index_select(expand), logp[expand]
            attn = None if attn is None else attn[expand]
            known = None if known is None else known.rows(expand)
        at_limit = t + 1 >= limits  # (n,) on the CPU
        cand_lp, rows, toks = _candidates(logp, beams.log_prob, K, known)  # (n, 2K) each
        chose_eos = None
        if bool(at_limit.any()):  # only EOS is left at the limit: every open beam ends
            chose_eos = ended_by_choice(rows, toks, at_limit.to(dev), K)
            logp = only_eos(logp, at_limit.to(dev), K)
            cand_lp, rows, toks = _candidates(logp, beams.log_prob, K)
        # each candidate's own piece log-probability: the value its total added
        piece_lp = at_least_fp32(logp)[rows.view(-1), toks.view(-1)].float()  # (n*2K,)
        cands = beams.extend(rows.view(-1), cand_lp.view(-1), toks.view(-1), attn, piece_lp)
        is_eos = toks == EOS
        keep = is_eos.int().sort(dim=1, stable=True).indices[:, :K]  # (n, K) open
        final = torch.zeros_like(is_eos)
        final[:, :K] = is_eos[:, :K]
        final &= cand_lp.isfinite()
        cut = None if chose_eos is None else ~chose_eos[rows]  # (n, 2K) EOS forced
        _collect([finished[b] for b in sent], cands, final, t + 1, lens, length_penalty, alpha, cut)
        pick = (torch.arange(n, device=dev)[:, None] * 2 * K + keep).view(-1)  # (n*K,)
        beams = cands.select(pick)
        state = state.index_select(rows.view(-1).index_select(0, pick))
        prev = beams.tokens[:, -1]
        bound = (beams.log_prob.view(n, K).max(dim=1).values / lp_limit).tolist()  # (n,)
        going = [
            i
            for i, b in enumerate(sent)
            if not (bool(at_limit[i]) or _is_done(finished[b], K, n_best, bound[i]))
        ]
        if not going:
            break
        if len(going) < n:  # finished sentences leave the batch: later steps skip their rows
            idx = torch.tensor(going, device=dev)
            row_idx = (idx[:, None] * K + torch.arange(K, device=dev)).view(-1)  # (n'*K,)
            beams, prev = beams.select(row_idx), prev[row_idx]
            mem, state = mem.index_select(row_idx), state.index_select(row_idx)
            sent = [sent[i] for i in going]
            cpu_idx = idx.cpu()
            limits, lp_limit = limits[cpu_idx], lp_limit[idx]
            lens = [lens[i] for i in going]
    nbest = [rank(f)[:n_best] for f in finished]
    if rescore and autocast_on(dev):  # bf16 scores depend on the batch: redo them in fp32
        _rescore(model, src, src_len, nbest, length_penalty, alpha)
        nbest = [rank(f) for f in nbest]
    return nbest


def _rescore(
    model,
    src: torch.Tensor,
    src_len: torch.Tensor,
    nbest: list[list[Hypothesis]],
    kind: str,
    alpha: float,
) -> None:
    """Replace in place the log P, score and attention of each hypothesis of ``nbest`` (per
    sentence of ``src`` (B, S)) by fp32 values (rescore.py); tokens and ``complete`` stay."""
    flat = [(b, h) for b, hyps in enumerate(nbest) for h in hyps]
    lps, atts = fp32_log_probs(
        model, src, src_len, [b for b, _ in flat], [h.tokens for _, h in flat]
    )
    for (_, h), lp, att in zip(flat, lps, atts, strict=True):
        h.log_prob, h.score = lp, float(normalised_score(lp, len(h.tokens) + 1, kind, alpha))
        h.token_logprobs = None  # the search's bf16 ones would not add up to log_prob
        h.attention = att if h.attention is not None else None
