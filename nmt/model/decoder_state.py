"""What a decoder step reads and returns: the encoder's results read at every step
(:class:`Memory`), the recurrent state carried between steps (:class:`DecoderState`) and
one step's output (:class:`StepOutput`). Memory and state select rows
(``index_select``), so that search can reorder, expand and drop sentences and beams;
nmt/model/decoder.py computes the steps."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nmt.ops.step_matmul import StepWeights


@dataclass
class Memory:
    """Per-sentence encoder results the decoder reads at every step.

    Attributes:
        memory: (B, S, M). keys: (B, S, *) precomputed scorer keys, or None for ``none``.
        mask: (B, S). fixed_context: (B, M) for ``none``, else None.
        weights: the batch's :class:`StepWeights`, shared by all rows.
    """

    memory: torch.Tensor
    keys: torch.Tensor | None
    mask: torch.Tensor
    fixed_context: torch.Tensor | None
    weights: StepWeights

    def index_select(self, idx: torch.Tensor) -> Memory:
        """Rows ``idx`` (K,) of every per-sentence tensor (for beam search reordering)."""

        def pick(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.index_select(0, idx)

        return Memory(
            self.memory.index_select(0, idx),
            pick(self.keys),
            self.mask.index_select(0, idx),
            pick(self.fixed_context),
            self.weights,
        )


@dataclass
class DecoderState:
    """Recurrent state. hidden: (L, B, D). feed: (B, O) last attentional vector (luong).
    t: the target position (0-based) of the next step, shared by every row (local_m's
    window centre)."""

    hidden: torch.Tensor
    feed: torch.Tensor | None
    t: int = 0

    def index_select(self, idx: torch.Tensor) -> DecoderState:
        """Rows ``idx`` (K,) of the state: hidden (L, K, D), feed (K, O)."""
        return DecoderState(
            self.hidden.index_select(1, idx),
            None if self.feed is None else self.feed.index_select(0, idx),
            self.t,
        )


@dataclass
class StepOutput:
    """pre_output: (B, O) input to the generator. attention: (B, S) weights, or None;
    for ``multihead`` the mean over heads, with each head's weights in heads (B, h, S)."""

    pre_output: torch.Tensor
    state: DecoderState
    attention: torch.Tensor | None
    heads: torch.Tensor | None = None
