"""Beam search at the length limit: a hypothesis cut there is completed with EOS and
scored with it, and flagged cut unless EOS was its own choice (see
:func:`nmt.inference.search.beam_search`)."""

from __future__ import annotations

import torch

from nmt.data.vocab import EOS


def ended_by_choice(
    rows: torch.Tensor, toks: torch.Tensor, at_limit: torch.Tensor, K: int
) -> torch.Tensor:
    """Which beams (n*K,) end with an EOS of their own choosing: their EOS extension is
    among the K best candidates of the step (``rows``, ``toks`` (n, 2K) from the
    search's candidate selection), as it would be finished anywhere else; beams of sentences not at
    their limit (``at_limit`` (n,)) count as such too. For K = 1: EOS is the most
    probable piece, as in greedy search."""
    chose = torch.zeros(rows.numel() // 2, dtype=torch.bool, device=rows.device)  # (n*K,)
    first = rows[:, :K][toks[:, :K] == EOS]
    chose[first] = True
    return chose | ~at_limit.repeat_interleave(K)


def only_eos(logp: torch.Tensor, at_limit: torch.Tensor, K: int) -> torch.Tensor:
    """``logp`` (n*K, V) with every piece but EOS at -inf in the beams of sentences at their
    length limit (``at_limit`` (n,)): a hypothesis cut there is completed with EOS and
    scored with its log-probability."""
    only = torch.full_like(logp, float("-inf"))
    only[:, EOS] = logp[:, EOS]
    return torch.where(at_limit.repeat_interleave(K)[:, None], only, logp)
