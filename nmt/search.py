"""Decoding: greedy search over ``model.encode`` / ``model.step``; the search knows
nothing about what the decoder state holds."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nmt.vocab import BOS, EOS


@dataclass
class Hypothesis:
    """One decoded sentence.

    Attributes:
        tokens: target ids without BOS/EOS.
        score: total log-probability (nats) including EOS when it was produced.
        attention: (len(tokens) + 1, S_real) attention weights per output step (EOS row
            included when produced), or None for the fixed-vector model.
    """

    tokens: list[int]
    score: float
    attention: torch.Tensor | None


def max_output_length(src_len: torch.Tensor, ratio: float, extra: int = 10) -> torch.Tensor:
    """Per-sentence limit on generated pieces: ``ratio * src_len + extra``; (B,) -> (B,)."""
    return (src_len.float() * ratio).long() + extra


@torch.no_grad()
def greedy(model, src: torch.Tensor, src_len: torch.Tensor, max_ratio: float = 2.0
           ) -> list[Hypothesis]:
    """Batched greedy search: pick the most probable piece at each step.

    Args:
        model: has ``encode(src, src_len)`` and ``step(prev, state, mem)``.
        src: (B, S) source ids. src_len: (B,) lengths.
        max_ratio: output length limit is ``max_ratio * src_len + 10``.

    Returns:
        B hypotheses in input order.
    """
    B, S = src.shape
    mem, state = model.encode(src, src_len)
    limits = max_output_length(src_len, max_ratio).to(src.device)
    prev = torch.full((B,), BOS, dtype=torch.long, device=src.device)
    finished = torch.zeros(B, dtype=torch.bool, device=src.device)
    tokens, scores, attns = [], torch.zeros(B, device=src.device), []
    for t in range(int(limits.max())):
        logp, state, attn = model.step(prev, state, mem)  # (B, V)
        best_logp, best = logp.max(dim=-1)
        scores += best_logp.masked_fill(finished, 0.0)
        best = best.masked_fill(finished, EOS)
        tokens.append(best)
        if attn is not None:
            attns.append(attn)
        finished |= (best == EOS) | (t + 1 >= limits)
        prev = best
        if bool(finished.all()):
            break
    out = torch.stack(tokens, dim=1).tolist()  # (B, T)
    attn_all = torch.stack(attns, dim=1).cpu() if attns else None  # (B, T, S)
    hyps = []
    for b in range(B):
        seq = out[b]
        n = seq.index(EOS) if EOS in seq else min(len(seq), int(limits[b]))
        rows = min(n + 1, len(seq))
        a = None if attn_all is None else attn_all[b, :rows, : int(src_len[b])]
        hyps.append(Hypothesis(seq[:n], float(scores[b]), a))
    return hyps
