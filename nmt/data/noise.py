"""Training-only noise on the input: subword sampling and word dropout.

Subword regularisation (Kudo 2018, "Subword Regularization: Improving Neural Network
Translation Models with Multiple Subword Candidates"): :class:`SampledExampleSet` segments
the training split again at the start of every epoch, sampling each sentence's pieces from
SentencePiece (``subwords.sampling_alpha``, ``subwords.nbest_size``, targets too with
``subwords.sample_target``). Once per epoch rather than per batch, because the batches are
cut by length: the epoch's lengths are known before it is bucketed, so batches keep their
size and token limits. The samples are a function of the epoch's shuffle seed (train.seed and
the epoch number), so a run and any resume of it, mid-epoch included, see the same ones;
nothing needs saving in a checkpoint. Only ``data.store: memory`` keeps the text needed for
this (nmt/config/noise.py refuses the arrow store).

Word dropout (Sennrich et al. 2016, "Edinburgh Neural Machine Translation Systems for WMT
16"; Gal & Ghahramani 2016, "A Theoretically Grounded Application of Dropout in Recurrent
Neural Networks"): :func:`drop_words` replaces a random fraction of a batch's source pieces
(and, optionally, decoder input pieces) by UNK, each position drawn on its own (Gal &
Ghahramani drop word types, every occurrence at once), with a generator
seeded by :func:`step_generator` from (train.seed, step, rank): again reproducible on resume,
and the torch generator that draws dropout masks is not touched.

Validation, test and decoding never pass here: they encode with :meth:`Vocab.encode`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from nmt.config.schema import SubwordConfig
from nmt.data.batches import Batch, Example, collate, encode_pairs
from nmt.data.bucketing import make_batches
from nmt.data.corpus import Pair
from nmt.data.vocab import BOS, EOS, PAD, UNK, Vocab


def derived_seed(*parts: int, bits: int = 32) -> int:
    """A seed in ``[0, 2^bits - 2]`` mixed from the integers ``parts`` by numpy's
    SeedSequence; never ``2^32 - 1``, which SentencePiece reads as "no seed"."""
    words = [p % 2**63 for p in parts]
    state = np.random.SeedSequence(words).generate_state(1, np.uint64 if bits > 32 else np.uint32)
    return int(state[0]) % (2**bits - 1)


@dataclass(frozen=True)
class Sampling:
    """How a training epoch samples segmentations (see :meth:`Vocab.sample_batch`)."""

    alpha: float
    nbest_size: int
    target: bool  # the targets too, not only the sources

    @classmethod
    def from_config(cls, s: SubwordConfig) -> Sampling | None:
        """The sampling ``subwords`` asks for, or None when ``sampling_alpha`` is off."""
        if not s.sampling_alpha:
            return None
        return cls(s.sampling_alpha, s.nbest_size, s.sample_target)


class SampledExampleSet:
    """The in-memory training set (a :class:`nmt.data.batches.TrainingSet`) whose
    segmentation is sampled again for every epoch's :meth:`batches`.

    Args:
        pairs: the training pairs, already filtered (both sides non-empty).
        src_vocab, tgt_vocab: the run's SentencePiece models.
        sampling: what to sample.
    """

    def __init__(
        self, pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab, sampling: Sampling
    ):
        self.sources = [p.src for p in pairs]
        self.targets = [p.tgt for p in pairs]
        self.vocabs = (src_vocab, tgt_vocab)
        self.sampling = sampling
        # the one best segmentation: the unsampled targets, and the token counts
        self.fixed = encode_pairs(list(pairs), src_vocab, tgt_vocab)

    def __len__(self) -> int:
        return len(self.sources)

    def examples(self, seed: int) -> list[Example]:
        """Every pair with a segmentation sampled under ``seed`` (an epoch's shuffle seed):
        sources always, targets when ``sampling.target``; equal seeds give equal examples.

        Raises:
            ValueError: SentencePiece refuses ``alpha`` or ``nbest_size``
                (:meth:`nmt.data.vocab.Vocab.sample_batch`).
        """
        a, n = self.sampling.alpha, self.sampling.nbest_size
        src = self.vocabs[0].sample_batch(
            self.sources, alpha=a, nbest_size=n, seed=derived_seed(seed, 0)
        )
        tgt = (
            self.vocabs[1].sample_batch(
                self.targets, alpha=a, nbest_size=n, seed=derived_seed(seed, 1)
            )
            if self.sampling.target
            else [e.tgt for e in self.fixed]
        )
        return [Example(s + [EOS], t, i) for i, (s, t) in enumerate(zip(src, tgt, strict=True))]

    def batches(
        self,
        batch_size: int,
        max_tokens: int | None,
        shuffle_seed: int | None,
        trim: int | None = None,
    ) -> list[list[Example]]:
        """:func:`make_batches` of :meth:`examples` sampled under ``shuffle_seed`` (0 when
        None), bucketed by the sampled lengths (``trim``: make_batches' trimming)."""
        return make_batches(
            self.examples(shuffle_seed or 0),
            batch_size,
            max_tokens=max_tokens,
            shuffle_seed=shuffle_seed,
            trim=trim,
        )

    def collate(self, batch: list[Example]) -> Batch:
        """:func:`collate` of one batch."""
        return collate(batch)

    def token_counts(self) -> tuple[int, int]:
        """(source, target) pieces of the one best segmentation, each sentence with its EOS
        (a sampled epoch has a few more)."""
        return (sum(len(e.src) for e in self.fixed), sum(len(e.tgt) + 1 for e in self.fixed))


def step_generator(seed: int, step: int, rank: int = 0) -> torch.Generator:
    """A CPU generator for one training step's word dropout, seeded from (train.seed,
    step, rank): the same on a resumed run, different on each torchrun rank."""
    return torch.Generator().manual_seed(derived_seed(seed, step, rank, bits=64))


def drop_words(batch: Batch, p: float, *, target: bool, generator: torch.Generator) -> Batch:
    """``batch`` with each real source piece replaced by UNK with probability ``p``, and
    with ``target`` each decoder input piece too; PAD, BOS and EOS stay, and so does
    ``tgt_out``: the model still predicts the true words.

    Args:
        batch: src (B, S), tgt_in (B, T) on the CPU.
        p: in [0, 1).
        generator: draws the (B, S) and, with ``target``, (B, T) uniforms.
    """
    src = _drop(batch.src, p, generator)
    tgt_in = _drop(batch.tgt_in, p, generator) if target else batch.tgt_in
    return Batch(src, batch.src_len, tgt_in, batch.tgt_out, batch.index)


def _drop(ids: torch.Tensor, p: float, generator: torch.Generator) -> torch.Tensor:
    """(B, L) ids with each one that is not PAD, BOS or EOS turned into UNK with
    probability ``p``."""
    real = (ids != PAD) & (ids != BOS) & (ids != EOS)
    hit = torch.rand(ids.shape, generator=generator) < p
    return torch.where(real & hit, torch.full_like(ids, UNK), ids)
