"""The encoder-decoder model: encoder, decoder and generator composed, and the one factory.

:func:`build_model` is the only place where configuration becomes modules.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Literal, cast, overload

import torch
import torch.nn.functional as F
from torch import nn

from nmt.config.schema import ModelConfig
from nmt.data.vocab import PAD
from nmt.model.cgru import CGRUDecoder
from nmt.model.decoder import Decoder
from nmt.model.decoder_state import DecoderState, Memory
from nmt.model.encoder import Encoder
from nmt.model.loss import summed_cross_entropy
from nmt.ops.int8 import int8_enabled, int8_engine
from nmt.ops.precision import HALF_DTYPES, at_least_fp32
from nmt.ops.shapes import pad_rows, rounded_rows, stable_rows_wanted
from nmt.ops.step_matmul import StepWeights, step_addmm
from nmt.ops.topk import KnownTop, top_k

# reduced-precision search steps recompute this many log-probabilities per row in fp32;
# beam search ranks the 2K + 1 best pieces of each beam (11 for beam 5)
EXACT_TOP = 16
# greedy search (and beam 1) needs only each row's largest: finding 4 + 1 instead of
# 16 + 1 took half the time of the top k (0.13 against 0.24 ms, 64 rows of 7,931)
GREEDY_EXACT_TOP = 4


def exact_top_for(beam_size: int) -> int:
    """How many logits per row a reduced-precision step of a search with ``beam_size``
    recomputes in fp32: :data:`GREEDY_EXACT_TOP` for greedy search (beam 1, which must pick
    the same pieces), else :data:`EXACT_TOP`."""
    return GREEDY_EXACT_TOP if beam_size <= 1 else EXACT_TOP


# per model: (its parameters' addresses and versions, its step weights' int8 copies);
# weak, so that a freed model frees its packed weights (Seq2Seq._int8_weights)
_INT8_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class Seq2Seq(nn.Module):
    """RNN encoder-decoder with attention (Bahdanau et al. 2015; Luong et al. 2015).

    Use :meth:`loss` for training (teacher forcing), :meth:`encode` and :meth:`step` for
    search, :meth:`attention_weights` to inspect alignments.
    """

    def __init__(self, encoder: Encoder, decoder: Decoder, generator: nn.Linear):
        super().__init__()
        self.encoder, self.decoder, self.generator = encoder, decoder, generator

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> tuple[Memory, DecoderState]:
        """For search: (B, S) source ids and (B,) lengths -> decoder memory (with the
        output layer's weight among its step weights) and initial state."""
        mem, state = self.decoder.start(self.encoder(src, src_len), self.generator.weight)
        if int8_enabled():  # search.precision: int8 (nmt/ops/int8.py)
            mem = dataclasses.replace(mem, weights=self._int8_weights(mem.weights))
        return mem, state

    def _int8_weights(self, weights: StepWeights) -> StepWeights:
        """``weights`` with int8 copies of those :meth:`Decoder.int8_bounds` allows
        (:meth:`StepWeights.with_int8`), packed once per model and parameter values: kept
        in ``_INT8_CACHE`` until a parameter changes (its version counter moves, as an
        optimizer step or load_state_dict moves it), the int8 library changes
        (``NMT_INT8_ENGINE``) or the model is freed. Raises ValueError for an unknown
        library (:func:`nmt.ops.int8.int8_engine`)."""
        engine = int8_engine()
        key = (engine, *((p.data_ptr(), p._version) for p in self.parameters()))
        hit = _INT8_CACHE.get(self)
        if hit is not None and hit[0] == key:
            return dataclasses.replace(weights, int8=hit[1])
        # GRU outputs lie in [-1, 1]; residual layers add each layer's input to its output
        layers = self.encoder.layers
        memory_bound = 1.0 if layers is None else float(len(layers))
        packed = weights.with_int8(self.decoder.int8_bounds(memory_bound))
        _INT8_CACHE[self] = (key, packed.int8)
        return packed

    @overload
    def step(
        self,
        prev: torch.Tensor,
        state: DecoderState,
        mem: Memory,
        with_heads: Literal[False] = False,
    ) -> tuple[torch.Tensor, DecoderState, torch.Tensor | None]: ...

    @overload
    def step(
        self, prev: torch.Tensor, state: DecoderState, mem: Memory, with_heads: Literal[True]
    ) -> tuple[torch.Tensor, DecoderState, torch.Tensor | None, torch.Tensor | None]: ...

    def step(
        self, prev: torch.Tensor, state: DecoderState, mem: Memory, with_heads: bool = False
    ) -> tuple:
        """One search step: (B,) previous ids -> log-probabilities (B, V) in fp32 (fp64 for
        a float64 model), new state, attention weights (B, S) or None for the fixed-vector
        model (for ``multihead`` the mean over heads); with ``with_heads`` also the
        per-head weights (B, h, S) of a ``multihead`` model, else None: what forced
        decoding (nmt/serve/forced.py) reads, the weights the search saw.

        Under bf16/fp16 autocast (``search.precision``) the matrix products run in the
        lower precision, and the log-probabilities of each row's ``EXACT_TOP`` most
        probable pieces, the ones a search can pick, are recomputed from fp32 logits
        (:meth:`exact_top_log_probs`). In an int8 search (``search.precision: int8``,
        :meth:`encode` under :func:`nmt.ops.int8.int8_products`) the step weights' products
        run in int8 and the same recomputation applies.
        """
        out = self.decoder.step(prev, state, mem)
        logp = self._log_probs(out.pre_output, mem.weights, known=False)[0]
        if with_heads:
            return logp, out.state, out.attention, out.heads
        return logp, out.state, out.attention

    def search_step(
        self, prev: torch.Tensor, state: DecoderState, mem: Memory, beam_size: int | None = None
    ) -> tuple[torch.Tensor, DecoderState, torch.Tensor | None, KnownTop | None]:
        """:meth:`step` for greedy and beam search: the same log-probabilities (B, V),
        state and attention weights (B, S) or None, and, from a reduced-precision step,
        where each row's largest log-probabilities are (:class:`nmt.ops.topk.KnownTop`, from
        :meth:`exact_top_log_probs`' own search of the row), so that the search need not
        read the row again; None from an fp32 step. ``beam_size``: the search's (1: greedy),
        which sets how many logits per row a reduced-precision step recomputes in fp32
        (:func:`exact_top_for`; None: :data:`EXACT_TOP`). Raises nothing."""
        out = self.decoder.step(prev, state, mem)
        exact = EXACT_TOP if beam_size is None else exact_top_for(beam_size)
        logp, known = self._log_probs(out.pre_output, mem.weights, known=True, exact=exact)
        return logp, out.state, out.attention, known

    def _log_probs(
        self, pre_output: torch.Tensor, w: StepWeights, *, known: bool, exact: int = EXACT_TOP
    ) -> tuple[torch.Tensor, KnownTop | None]:
        """A step's log-probabilities (B, V) from its pre-outputs (B, O), and with ``known``
        where a reduced-precision step found each row's largest (None in fp32, or without
        ``known``: :meth:`step`'s callers do not read it); ``exact``: as in
        :meth:`search_step`."""
        if w.int8 is not None:  # int8 logits find the candidates; fp32 ranks them
            logits = w.addmm("generator", self.generator.bias, pre_output)
            return self._exact_top(logits, pre_output, known=known, count=exact)
        # Seq2Seq.start passes the generator's weight for search steps
        logits = self.step_logits(pre_output, cast(torch.Tensor, w.generator))
        if logits.dtype not in HALF_DTYPES:  # fp32, or fp64 for a float64 model
            return F.log_softmax(logits, dim=-1), None
        return self._exact_top(logits, pre_output, known=known, count=exact)

    def step_logits(self, pre_output: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """The generator's logits (B, V) for one search step's pre-outputs (B, O), the same
        numbers as ``self.generator(pre_output)``, in the GEMM orientation that is faster
        for few rows (:func:`nmt.ops.step_matmul.step_addmm`): the output layer is the largest
        matrix of a search step. ``weight``: the generator's (V, O) weight as the batch's
        :class:`nmt.ops.step_matmul.StepWeights` hold it (cast once under autocast; :meth:`encode`
        puts it there)."""
        return step_addmm(self.generator.bias, pre_output, weight)

    def exact_top_log_probs(self, logits: torch.Tensor, pre_output: torch.Tensor) -> torch.Tensor:
        """fp32 log-probabilities (B, V) from a reduced-precision step's logits (B, V).

        A bf16 logit is rounded to 8 significant bits (steps of 1/16 at logits of 8-16),
        enough to find the candidates but not to rank them: near-equal pieces would tie,
        and beam totals would drift from fp32's. The ``EXACT_TOP`` largest logits of each
        row are recomputed in fp32 from ``pre_output`` (B, O) and the generator's fp32
        weight, the rest keep their rounded values; log_softmax then runs in fp32 over the
        whole row. Only the log-normaliser still sees rounding, in the probability mass
        outside the top ``EXACT_TOP``. Raises nothing.
        """
        return self._exact_top(logits, pre_output, known=False)[0]

    def _exact_top(
        self,
        logits: torch.Tensor,
        pre_output: torch.Tensor,
        *,
        known: bool = True,
        count: int = EXACT_TOP,
    ) -> tuple[torch.Tensor, KnownTop | None]:
        """:meth:`exact_top_log_probs`, and with ``known`` the recomputed columns of each
        row in order of their fp32 logit (:class:`KnownTop`; else None): the leading ones
        whose fp32 logit exceeds every rounded logit left outside are certainly the row's
        largest log-probabilities (log_softmax keeps the order of a row). ``count``: how
        many logits per row are recomputed (:func:`exact_top_for`)."""
        g = self.generator
        V = logits.size(-1)
        m = min(count, V)
        with torch.autocast(logits.device.type, enabled=False):
            # one more than recomputed: the largest rounded logit left outside
            rounded, top = top_k(logits, min(m + 1, V))  # (B, m + 1)
            top = top[:, :m]
            w = g.weight.index_select(0, top.reshape(-1)).view(*top.shape, -1)  # (B, m, O)
            # (B, 1, O) @ (B, O, m): batched like this MKL runs it 10x faster than as
            # (B, m, O) @ (B, O, 1)
            exact = torch.matmul(at_least_fp32(pre_output).unsqueeze(1), w.transpose(1, 2))
            exact = exact.squeeze(1)
            if g.bias is not None:
                exact += g.bias[top]
            logp = F.log_softmax(at_least_fp32(logits).scatter_(1, top, exact), dim=-1)
            if not known:
                return logp, None
            exact, order = exact.sort(dim=-1, descending=True)
            if m < V:
                lead = (exact > at_least_fp32(rounded[:, m:])).sum(dim=1)  # (B,)
            else:  # every logit of the row was recomputed
                lead = torch.full_like(top[:, 0], m)
            return logp, KnownTop(top.gather(1, order), lead)

    def logits(
        self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher-forced logits (B, T, V) and attention weights (B, T, S) or None."""
        mem, state = self.decoder.start(self.encoder(src, src_len))
        pre, attn, _ = self.decoder.unroll(tgt_in, state, mem)
        return self.generator(pre), attn

    def forward(
        self,
        src: torch.Tensor,
        src_len: torch.Tensor,
        tgt_in: torch.Tensor,
        tgt_out: torch.Tensor,
        label_smoothing: float = 0.0,
    ) -> torch.Tensor:
        """Summed cross-entropy in nats over real target tokens (PAD ignored).

        Args:
            src: (B, S). src_len: (B,). tgt_in, tgt_out: (B, T).

        Returns:
            scalar: total loss; divide by the number of target tokens for nats/token.
        """
        mem, state = self.decoder.start(self.encoder(src, src_len))
        pre, _, _ = self.decoder.unroll(tgt_in, state, mem, keep_attention=False)
        # the output layer, the largest matrix product, only for the N real target tokens:
        # padding rows would cost its three GEMMs for a loss of zero
        # (results/speed/2026-12-01-b/ab_real_rows.txt)
        target = tgt_out.reshape(-1)
        rows = (target != PAD).nonzero().squeeze(1)  # (N,)
        gold = target.index_select(0, rows)  # (N,)
        if stable_rows_wanted(pre.device):
            # oneDNN builds a primitive per row count (nmt/ops/shapes.py): round N up with
            # copies of a real row whose target is PAD, so they add zero loss and gradient
            n = rounded_rows(rows.numel())
            rows = torch.cat([rows, rows[:1].expand(n - rows.numel())])
            gold = pad_rows(gold[:, None], n).squeeze(1)  # PAD is 0
        logits = self.generator(pre.reshape(-1, pre.size(-1)).index_select(0, rows))  # (N', V)
        # nothing reads the logits after the loss: its gradient may take their memory
        return summed_cross_entropy(logits, gold, label_smoothing, overwrite_logits=True)

    def attention_weights(
        self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor
    ) -> torch.Tensor | None:
        """Teacher-forced attention weights (B, T, S); None for the fixed-vector model.
        For ``multihead`` the mean over heads (see :meth:`head_weights`)."""
        return self.logits(src, src_len, tgt_in)[1]

    def head_weights(
        self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor
    ) -> torch.Tensor | None:
        """Teacher-forced per-head attention weights (B, h, T, S) of a ``multihead``
        model (each head's row sums to 1 over real source positions); None otherwise."""
        mem, state = self.encode(src, src_len)
        return self.decoder.unroll(tgt_in, state, mem)[2]


def build_model(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> Seq2Seq:
    """The only place a :class:`ModelConfig` becomes modules. With ``tie_embeddings`` the
    generator's (V, O) weight is the target embedding's parameter itself (Press & Wolf
    2017; Inan et al. 2017): one tensor under two state_dict names, whose gradient
    is the sum of both uses, and which load_state_dict fills in place, so it stays shared.
    The shared matrix starts as N(0, 1/O), the padding row 0 (fairseq's embedding
    initialisation): nn.Embedding's N(0, 1) would give logits of variance O and an initial
    loss far above log V.

    Raises:
        ValueError: a setting the modules refuse (from :class:`Encoder`, :class:`Decoder` or
            the attention factory: e.g. ``enc_residual`` with one encoder layer, an unknown
            attention or score).
    """
    encoder = Encoder(
        src_vocab_size,
        cfg.emb_dim,
        cfg.enc_hidden,
        cfg.enc_layers,
        cfg.dropout,
        residual=cfg.enc_residual,
    )
    decoder_class = CGRUDecoder if cfg.step_order == "cgru" else Decoder
    decoder = decoder_class(
        tgt_vocab_size,
        cfg.emb_dim,
        cfg.dec_hidden,
        cfg.dec_layers,
        2 * cfg.enc_hidden,
        cfg.attention,
        cfg.step_order,
        cfg.attn_dim,
        cfg.output_dim,
        cfg.dropout,
        local_score=cfg.local_score,
        window=cfg.local_window,
        heads=cfg.heads,
        attention_bias=cfg.attention_bias,
    )
    generator = nn.Linear(cfg.output_dim, tgt_vocab_size, bias=cfg.output_bias)
    if cfg.tie_embeddings:
        with torch.no_grad():
            nn.init.normal_(decoder.embed.weight, 0.0, cfg.output_dim**-0.5)
            decoder.embed.weight[PAD].zero_()
        generator.weight = decoder.embed.weight
    return Seq2Seq(encoder, decoder, generator)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
