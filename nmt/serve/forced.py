"""Forced decoding for ``nmt serve``: what a model gives to target sequences it is made to
read, and searches that continue a forced target prefix.

* :func:`forced_pass` teacher-forces hypotheses on their source and returns, per target
  step, the log-probability of the piece taken (the per-token log-probabilities the
  searches do not keep), the attention weights (averaged over heads) and the per-head
  weights of a ``multihead`` model. It steps the model with the calls the searches make
  (``Seq2Seq.encode`` and ``Seq2Seq.step``, asked for the per-head weights too), so the
  weights are the ones the search saw, dropout being off.
* :func:`search_after_prefix` runs greedy or beam search (:mod:`nmt.inference.search`)
  from the state reached after a forced prefix: the model is wrapped so that its
  ``encode`` reads the prefix and its first ``step`` takes the prefix' last piece.

Callers hold :func:`nmt.inference.threads.fixed_torch_threads` and the decoding's
precision (:func:`nmt.inference.translate.search_precision`) around both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from nmt.data.vocab import BOS, EOS, PAD
from nmt.inference.hypothesis import Hypothesis
from nmt.inference.search import beam_search, greedy
from nmt.inference.translate import Decoding


@dataclass
class Forced:
    """What a model gives one target sequence of T pieces on a source of S pieces.

    Attributes:
        token_logprobs: (T,) ``log p(y_t | y_<t, x)`` in nats.
        attention: (T, S) fp32 weights, None for the fixed-vector model; for multihead
            the mean over heads.
        heads: (h, T, S) per-head weights of a multihead model, else None.
        top: per step the ``top_k`` most probable (piece id, log p), best first; empty
            lists when ``top_k`` is 0.
    """

    token_logprobs: list[float]
    attention: torch.Tensor | None
    heads: torch.Tensor | None
    top: list[list[tuple[int, float]]]


@torch.inference_mode()
def forced_pass(
    model: Any, src_ids: list[int], targets: list[list[int]], top_k: int = 0
) -> list[Forced]:
    """Teacher-force each of ``targets`` on one source, all in one batch
    (:func:`forced_pass_many` with the same source for every target).

    Args:
        model: a :class:`nmt.model.seq2seq.Seq2Seq` in eval mode.
        src_ids: the source ids with the final EOS (S,).
        targets: each a list of target ids as read (EOS last when the hypothesis ended);
            an empty list gives an empty :class:`Forced`.
        top_k: alternatives to keep per step (0: none).

    Returns:
        one :class:`Forced` per target, in order.
    """
    return forced_pass_many(model, [src_ids] * len(targets), targets, top_k)


@torch.inference_mode()
def forced_pass_many(
    model: Any, sources: list[list[int]], targets: list[list[int]], top_k: int = 0
) -> list[Forced]:
    """Teacher-force each target on its own source, all in one padded batch: what the
    server's batcher runs for the hypotheses of several requests at once.

    Args:
        model: a :class:`nmt.model.seq2seq.Seq2Seq` in eval mode.
        sources: per target its source ids with the final EOS (S_b,).
        targets: per row the target ids as read (EOS last when the hypothesis ended);
            an empty list gives an empty :class:`Forced`.
        top_k: alternatives to keep per step (0: none).

    Returns:
        one :class:`Forced` per target, in order; each one's attention is (T_b, S_b).

    Raises:
        ValueError: ``sources`` and ``targets`` of different lengths.
    """
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources for {len(targets)} targets")
    dev = next(model.parameters()).device
    B = len(targets)
    T = max((len(t) for t in targets), default=0)
    if B == 0 or T == 0:
        return [Forced([], None, None, []) for _ in targets]
    S = max(len(s) for s in sources)
    src = torch.full((B, S), PAD, dtype=torch.long)
    tgt = torch.full((B, T), EOS, dtype=torch.long)
    for b, (source, target) in enumerate(zip(sources, targets, strict=True)):
        src[b, : len(source)] = torch.tensor(source, dtype=torch.long)
        tgt[b, : len(target)] = torch.tensor(target, dtype=torch.long)
    src_len = torch.tensor([len(s) for s in sources], dtype=torch.long)
    src, tgt = src.to(dev), tgt.to(dev)
    mem, state = model.encode(src, src_len)
    prev = torch.full((B,), BOS, dtype=torch.long, device=dev)
    logps: list[torch.Tensor] = []
    attns: list[torch.Tensor] = []
    heads: list[torch.Tensor] = []
    tops: list[Any] = []
    for t in range(T):
        logp, state, attn, per_head = model.step(prev, state, mem, with_heads=True)
        logps.append(logp.gather(1, tgt[:, t : t + 1]).squeeze(1))  # (B,)
        if attn is not None:
            attns.append(attn.float())
        if per_head is not None:
            heads.append(per_head.float())
        if top_k:
            tops.append(logp.topk(min(top_k, logp.size(-1)), dim=-1))
        prev = tgt[:, t]
    lp = torch.stack(logps, dim=1).cpu()  # (B, T)
    att = torch.stack(attns, dim=1).cpu() if attns else None  # (B, T, S)
    hd = torch.stack(heads, dim=2).cpu() if heads else None  # (B, h, T, S)
    out = []
    for b, target in enumerate(targets):
        n, s = len(target), len(sources[b])
        top = [
            list(zip(tp.indices[b].tolist(), tp.values[b].tolist(), strict=True)) for tp in tops[:n]
        ]
        out.append(
            Forced(
                lp[b, :n].tolist(),
                None if att is None else att[b, :n, :s].clone(),
                None if hd is None else hd[b, :, :n, :s].clone(),
                top,
            )
        )
    return out


class _AfterPrefix:
    """A model as the searches see it after a forced prefix of n >= 1 pieces: ``encode``
    also reads BOS and the first n - 1 prefix pieces, and the first ``step`` takes the
    last prefix piece instead of BOS, so the search's first piece is the n+1-th. The
    state keeps its position (``DecoderState.t``), which local attention reads."""

    def __init__(self, model: Any, prefix: list[int]):
        self.model, self.prefix, self._first = model, prefix, False

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> tuple[Any, Any]:
        mem, state = self.model.encode(src, src_len)
        rows = src.size(0)
        for tok in [BOS, *self.prefix[:-1]]:
            prev = torch.full((rows,), tok, dtype=torch.long, device=src.device)
            _, state, _ = self.model.step(prev, state, mem)
        self._first = True
        return mem, state

    def step(self, prev: torch.Tensor, state: Any, mem: Any) -> Any:
        if self._first:
            self._first = False
            prev = torch.full_like(prev, self.prefix[-1])
        return self.model.step(prev, state, mem)


@torch.inference_mode()
def search_after_prefix(
    model: Any, src: torch.Tensor, src_len: torch.Tensor, decoding: Decoding, prefix: list[int]
) -> list[list[Hypothesis]]:
    """The n-best lists (best first) of a batch, every hypothesis starting with ``prefix``.

    Without a prefix this is the search ``nmt translate`` runs. With one, the search
    continues from the prefix' state; the length limit
    (:func:`nmt.inference.search.max_output_length`) counts continuation pieces, and the
    returned tokens are ``prefix + continuation``. Scores and order are the search's over
    the continuation; :mod:`nmt.serve.decode` rescores whole hypotheses.

    Args:
        src: (B, S) source ids (EOS included, PAD after). src_len: (B,) on the CPU.
        decoding: beam_size, n_best, length_penalty, alpha, max_ratio.
        prefix: target ids to force (no BOS/EOS); empty: none.

    Raises:
        ValueError: as :func:`nmt.inference.search.beam_search` (n_best > beam_size, ...).
    """
    searcher = _AfterPrefix(model, prefix) if prefix else model
    if decoding.beam_size == 1:
        if decoding.n_best != 1:
            raise ValueError(f"n_best must be 1 with greedy search, got {decoding.n_best}")
        nbest = [[h] for h in greedy(searcher, src, src_len, decoding.max_ratio)]
    else:
        nbest = beam_search(
            searcher,
            src,
            src_len,
            beam_size=decoding.beam_size,
            alpha=decoding.alpha,
            length_penalty=decoding.length_penalty,
            max_ratio=decoding.max_ratio,
            n_best=decoding.n_best,
        )
    if prefix:
        for hyps in nbest:
            for h in hyps:
                h.tokens = [*prefix, *h.tokens]
    return nbest
