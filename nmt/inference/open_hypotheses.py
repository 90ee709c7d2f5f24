"""The open hypotheses of beam search (:func:`nmt.inference.search.beam_search`): per flat
row its total log-probability, its pieces, each piece's own log-probability and, for an
attention model, its attention weights so far; extended and selected as the search goes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class OpenHypotheses:
    """Open hypotheses as N flat rows (N = B*K, or B*2K for candidates).

    log_prob: (N,) totals. tokens: (N, t) pieces so far. attention: (N, t, S) or None.
    step_lp: (N, t) fp32 log-probability of each piece taken.
    """

    log_prob: torch.Tensor
    tokens: torch.Tensor
    attention: torch.Tensor | None
    step_lp: torch.Tensor

    def extend(
        self,
        rows: torch.Tensor,
        log_prob: torch.Tensor,
        tokens: torch.Tensor,
        step_attn: torch.Tensor | None,
        step_lp: torch.Tensor,
    ) -> OpenHypotheses:
        """Children: parents ``rows`` (N',) followed by ``tokens`` (N',) with totals
        ``log_prob`` (N',) and the pieces' own log-probabilities ``step_lp`` (N',);
        ``step_attn`` (N, S) is this step's attention of every parent."""
        toks = torch.cat([self.tokens.index_select(0, rows), tokens[:, None]], dim=1)  # (N', t+1)
        lps = torch.cat([self.step_lp.index_select(0, rows), step_lp[:, None]], dim=1)
        if step_attn is None:
            return OpenHypotheses(log_prob, toks, None, lps)
        old = self.attention
        if old is None:
            old = step_attn.new_empty(self.tokens.size(0), 0, step_attn.size(1))
        att = torch.cat([old.index_select(0, rows), step_attn.index_select(0, rows)[:, None]], 1)
        return OpenHypotheses(log_prob, toks, att, lps)  # att: (N', t+1, S)

    def select(self, rows: torch.Tensor) -> OpenHypotheses:
        """Rows ``rows`` (N,) of every open-hypothesis tensor."""
        attention = None if self.attention is None else self.attention.index_select(0, rows)
        return OpenHypotheses(
            self.log_prob.index_select(0, rows),
            self.tokens.index_select(0, rows),
            attention,
            self.step_lp.index_select(0, rows),
        )
