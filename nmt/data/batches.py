"""Data for the model: from sentence pairs to padded batches of piece ids.

Which pairs go together in a batch is nmt/data/bucketing.py's rule.

Conventions: ``src = x1..xn EOS``, ``tgt_in = BOS y1..ym``, ``tgt_out = y1..ym EOS``;
PAD is 0 and masks are True on real tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F

from nmt.data.bucketing import make_batches
from nmt.data.corpus import Pair
from nmt.data.vocab import BOS, EOS, PAD, Vocab
from nmt.ops.shapes import SOURCE_MULTIPLE, rounded_rows, stable_rows_wanted


@dataclass(frozen=True)
class Example:
    """One encoded pair; ``index`` is its position in the split (to restore order)."""

    src: list[int]
    tgt: list[int]
    index: int


@dataclass
class Batch:
    """Padded tensors for one batch.

    Attributes:
        src: (B, S) source ids ending in EOS, PAD-padded.
        src_len: (B,) true source lengths (int64, on CPU for packing).
        tgt_in: (B, T) BOS y1..ym, PAD-padded.
        tgt_out: (B, T) y1..ym EOS, PAD-padded.
        index: (B,) positions of the examples in their split.
    """

    src: torch.Tensor
    src_len: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    index: torch.Tensor

    def to(self, device: torch.device) -> Batch:
        """The same batch with its id tensors on ``device`` (lengths stay on CPU for packing)."""
        return Batch(
            self.src.to(device),
            self.src_len,
            self.tgt_in.to(device),
            self.tgt_out.to(device),
            self.index,
        )

    def padded(self, multiple: int) -> Batch:
        """This batch with B rounded up to a multiple of ``multiple`` and S to one of
        :data:`nmt.ops.shapes.SOURCE_MULTIPLE`, for few oneDNN shapes (``train.batch_multiple``).

        The added pairs have source ``EOS`` (length 1; their encoder and decoder rows
        depend on nothing else), ``tgt_in`` and ``tgt_out`` all PAD and index -1; the added
        source columns are PAD, outside every ``src_len``. So the loss sums, ``n_tokens``
        and every gradient are those of the batch as it was, up to summation order; only
        dropout draws differ (their masks have the padded shape).

        Returns:
            src (B', S'), src_len (B',), tgt_in and tgt_out (B', T), index (B'), with
            B' = B rounded up and S' = S rounded up; ``self`` when both are already
            multiples.

        Raises:
            ValueError: ``multiple`` below 1.
        """
        (b, s), t = self.src.shape, self.tgt_in.size(1)
        rows, width = rounded_rows(b, multiple), rounded_rows(s, SOURCE_MULTIPLE)
        if (rows, width) == (b, s):
            return self
        src = F.pad(self.src, (0, width - s, 0, rows - b), value=PAD)
        src[b:, 0] = EOS
        extra = rows - b
        return Batch(
            src,
            torch.cat([self.src_len, self.src_len.new_ones(extra)]),
            torch.cat([self.tgt_in, self.tgt_in.new_full((extra, t), PAD)]),
            torch.cat([self.tgt_out, self.tgt_out.new_full((extra, t), PAD)]),
            torch.cat([self.index, self.index.new_full((extra,), -1)]),
        )

    def for_stable_shapes(self, multiple: int | None) -> Batch:
        """:meth:`padded` (``train.batch_multiple``) where stable_rows_wanted (a CPU under
        autocast: call it inside autocast), else ``self``; for training and calibration."""
        if multiple and stable_rows_wanted(self.src.device):
            return self.padded(multiple)
        return self

    @property
    def n_tokens(self) -> int:
        """Number of real target tokens (loss denominator)."""
        return int((self.tgt_out != PAD).sum())


@dataclass(frozen=True)
class FilterStats:
    """What :func:`filter_training_pairs` dropped, for the log."""

    kept: int
    empty: int
    too_long: int
    # where the skipped pairs came from ("file:line" or "dataset[split][i]"), in order
    skipped: tuple[str, ...] = ()
    # how many skipped pairs there are when ``skipped`` names only the first few (a
    # streamed corpus keeps no unbounded list); None: ``skipped`` names all of them
    n_skipped: int | None = None

    @property
    def skipped_count(self) -> int:
        """The number of skipped pairs ``skipped`` stands for."""
        return len(self.skipped) if self.n_skipped is None else self.n_skipped


def skip_reason(src: str, tgt: str, max_words: int | None) -> str | None:
    """Why a training pair is dropped: ``"empty"`` (a side is empty), ``"too_long"`` (more
    than ``max_words`` whitespace words on a side), or None when it is kept."""
    if not src or not tgt:
        return "empty"
    if max_words is not None and (len(src.split()) > max_words or len(tgt.split()) > max_words):
        return "too_long"
    return None


def filter_training_pairs(
    pairs: list[Pair], max_words: int | None
) -> tuple[list[Pair], FilterStats]:
    """Drop pairs with an empty side or more than ``max_words`` words on a side
    (:func:`skip_reason`).

    Training data only: evaluation splits are never filtered.
    """
    kept, empty, too_long, skipped = [], 0, 0, []
    for p in pairs:
        why = skip_reason(p.src, p.tgt, max_words)
        if why == "empty":
            empty += 1
            skipped.append(f"{p.origin} (empty side)")
        elif why == "too_long":
            too_long += 1
            if "joined)" not in p.origin:  # joined pairs over the cap are by design
                skipped.append(f"{p.origin} (over {max_words} words)")
        else:
            kept.append(p)
    return kept, FilterStats(len(kept), empty, too_long, tuple(skipped))


def evenly_spaced(n: int, m: int | None) -> list[int]:
    """``min(n, m)`` indices spread evenly over ``range(n)`` (all of them when ``m`` is None).

    Deterministic: index ``i`` of the result is ``floor(i * n / m)``, so the choice depends
    on ``n`` and ``m`` only.
    """
    if m is None or m >= n:
        return list(range(n))
    return [i * n // m for i in range(m)]


def add_joined_pairs(
    pairs: list[Pair], ks: tuple[int, ...], per_k: int | None = None
) -> list[Pair]:
    """``pairs`` plus, for each k, blocks of k consecutive pairs joined into one pair
    (source to source, target to target; see :mod:`nmt.data.longsets`).

    Each k contributes the ``len(pairs) // k`` non-overlapping blocks, or, with ``per_k``,
    at most that many of them, evenly spaced through the split (:func:`evenly_spaced`).
    A joined pair's ``origin`` names its first line and how many lines were joined.
    """
    from nmt.data.longsets import join_consecutive

    out = list(pairs)
    for k in ks:
        joined = join_consecutive([p.src for p in pairs], [p.tgt for p in pairs], k)
        for j in evenly_spaced(len(joined), per_k):
            i = joined.start[j]
            out.append(
                Pair(
                    joined.sources[j], joined.references[j], f"{pairs[i].origin} (+{k - 1} joined)"
                )
            )
    return out


def encode_pairs(
    pairs: list[Pair], src_vocab: Vocab, tgt_vocab: Vocab, max_src_pieces: int | None = None
) -> list[Example]:
    """Encode pairs to piece ids; sources longer than ``max_src_pieces`` are cut."""
    examples = []
    for i, p in enumerate(pairs):
        src = src_vocab.encode(p.src)
        if max_src_pieces is not None:
            src = src[:max_src_pieces]
        examples.append(Example(src + [EOS], tgt_vocab.encode(p.tgt), i))
    return examples


def collate(examples: list[Example]) -> Batch:
    """Pad a list of examples into a :class:`Batch`."""
    B = len(examples)
    S = max(len(e.src) for e in examples)
    T = max(len(e.tgt) for e in examples) + 1
    # numpy rows, one torch tensor each: a torch.tensor per row cost 14 ms for 1,000 sentences
    src, tgt_in, tgt_out = (np.full((B, n), PAD, dtype=np.int64) for n in (S, T, T))
    tgt_in[:, 0] = BOS
    for b, e in enumerate(examples):
        n = len(e.tgt)
        src[b, : len(e.src)], tgt_in[b, 1 : n + 1], tgt_out[b, :n] = e.src, e.tgt, e.tgt
        tgt_out[b, n] = EOS
    src_len = np.array([len(e.src) for e in examples], dtype=np.int64)
    index = np.array([e.index for e in examples], dtype=np.int64)
    return Batch(*(torch.from_numpy(a) for a in (src, src_len, tgt_in, tgt_out, index)))


class TrainingSet(Protocol):
    """What the training loop needs of its training data, whichever store holds it: the
    batches of an epoch (a sequence of opaque items, sliceable for DDP and resume) and
    the padded tensors of one of them."""

    def __len__(self) -> int:
        """Number of training pairs."""
        ...

    def batches(
        self,
        batch_size: int,
        max_tokens: int | None,
        shuffle_seed: int | None,
        trim: int | None = None,
    ) -> Sequence[Any]:
        """The epoch's batches by the rule of :func:`nmt.data.bucketing.make_batches`
        (``trim``: its trimming), deterministic for a seed."""
        ...

    def collate(self, batch: Any) -> Batch:
        """The padded tensors of one item of :meth:`batches`."""
        ...

    def token_counts(self) -> tuple[int, int]:
        """(source, target) pieces in the set, each sentence with its EOS."""
        ...


@dataclass(frozen=True)
class ExampleSet:
    """The in-memory training set: a list of :class:`Example` (``data.store: memory``)."""

    examples: list[Example]

    def __len__(self) -> int:
        return len(self.examples)

    def batches(
        self,
        batch_size: int,
        max_tokens: int | None,
        shuffle_seed: int | None,
        trim: int | None = None,
    ) -> list[list[Example]]:
        """:func:`nmt.data.bucketing.make_batches` of the examples."""
        return make_batches(
            self.examples, batch_size, max_tokens=max_tokens, shuffle_seed=shuffle_seed, trim=trim
        )

    def collate(self, batch: list[Example]) -> Batch:
        """:func:`collate` of one batch."""
        return collate(batch)

    def token_counts(self) -> tuple[int, int]:
        """(source, target) pieces, each sentence with its EOS."""
        return (sum(len(e.src) for e in self.examples), sum(len(e.tgt) + 1 for e in self.examples))
