"""What a search returns and how it is ranked: :class:`Hypothesis` (one decoded sentence),
the length penalties that normalise its log-probability (:func:`length_penalty_divisor`),
and the n-best order (:func:`rank`). Greedy and beam search (nmt/inference/search.py),
forced decoding and ``nmt serve`` share them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nmt.config.schema import LENGTH_PENALTIES, SearchConfig

_SEARCH = SearchConfig()  # the default alpha, as `nmt translate` decodes


@dataclass
class Hypothesis:
    """One decoded sentence.

    Attributes:
        tokens: target ids without BOS/EOS.
        score: the score used for ranking: ``log_prob`` normalised by the length penalty
            (beam search); equal to ``log_prob`` for greedy.
        attention: (len(tokens) + 1, S_real) attention weights per output step (EOS row
            included when produced, else len(tokens) rows), or None for the fixed-vector model.
        log_prob: total log-probability (nats) including EOS when it was produced.
        complete: False when the search reached the length limit before choosing EOS.
            Such a hypothesis is completed with EOS in place of its last piece (the piece
            at the limit is EOS, whatever its probability) and scored with that EOS term,
            as forced decoding scores the same pieces and EOS; it is ranked after every
            complete hypothesis and returned only when fewer than ``n_best`` complete
            ones were found.
        token_logprobs: per output step (the EOS step included, forced or chosen) the
            log-probability in nats of the piece taken, as the search computed it (fp32);
            ``log_prob`` is their sum in fp64. None where the search did not keep them, or
            where its numbers were replaced by an fp32 rescoring (autocast).
    """

    tokens: list[int]
    score: float
    attention: torch.Tensor | None
    log_prob: float | None = None
    complete: bool = True
    token_logprobs: list[float] | None = None


def length_penalty_divisor(length, kind: str, alpha: float = _SEARCH.alpha):
    """Divisor lp(Y) of the total log-probability; works on numbers or (B,) tensors.

    ``length`` = |Y|, the generated pieces including EOS when produced.

    * ``gnmt``: Wu et al. 2016 ("Google's NMT system"), eq. 14:
      lp(Y) = (5 + |Y|)^alpha / (5 + 1)^alpha.
    * ``average``: lp(Y) = |Y| (plain length normalisation).
    * ``none``: lp(Y) = 1 (raw log-probability).

    Raises:
        ValueError: unknown ``kind``.
    """
    match kind:
        case "gnmt":
            return (5 + length) ** alpha / (5 + 1) ** alpha
        case "average":
            return length
        case "none":
            return 1.0
    raise ValueError(f"length_penalty: unknown option {kind!r}; expected one of {LENGTH_PENALTIES}")


def normalised_score(log_prob, length, kind: str, alpha: float = _SEARCH.alpha):
    """Ranking score ``log P(Y) / lp(Y)`` (see :func:`length_penalty_divisor`)."""
    return log_prob / length_penalty_divisor(length, kind, alpha)


def rank(hyps: list[Hypothesis]) -> list[Hypothesis]:
    """``hyps`` in n-best order: complete hypotheses by score (best first), then those cut
    at the length limit by score; equal scores keep their order. Raises nothing."""
    return sorted(hyps, key=lambda h: (not h.complete, -h.score))
