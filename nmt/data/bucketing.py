"""Which pairs form a batch: sorted by length, cut greedily under a sentence and a token
limit, optionally trimmed to a multiple of some sentences, then shuffled.

The same rule twice: :func:`make_batches` over a list of examples, and :func:`token_batches`
over two numpy arrays of lengths (for the memory-mapped store of nmt/data/store.py, where
no Python object per pair exists).

**Trimming** (``train.batch_trim``, CPU bf16 training): a batch about to close with B >= N
sentences keeps the largest multiple of N and gives the other B mod N to the next batch, so
that B takes a handful of values. On a CPU, oneDNN builds a kernel for every matrix shape,
and the decoder's per-step products have B rows: 45-222 sentences a batch at ``max_tokens``
2,000 made 67 values of B in 70 steps and 1,583 distinct shapes in 160; trimmed to a
multiple of 32 (with ``train.batch_multiple`` 8), 482 (results/speed/2026-12-08-zen5-trim/).
No pair is dropped or duplicated, no dummy rows are added; batches are smaller on average
(about 17% at N = 32).
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np


class _Pair(Protocol):
    """An encoded pair (nmt.data.batches.Example): its source and target piece ids."""

    @property
    def src(self) -> list[int]: ...

    @property
    def tgt(self) -> list[int]: ...


P = TypeVar("P", bound=_Pair)


def trimmed_count(n: int, trim: int | None) -> int:
    """How many of a closing batch's ``n`` sentences it keeps: the largest multiple of
    ``trim`` not above ``n`` where ``n`` >= ``trim``, else all (None: all)."""
    return n - n % trim if trim and n >= trim else n


def _width(e: _Pair) -> int:
    """Padded tokens a pair takes in its batch's longer side: source or target + EOS."""
    return max(len(e.src), len(e.tgt) + 1)


def _fits(n: int, width: int, batch_size: int, max_tokens: int | None) -> bool:
    return n <= batch_size and (max_tokens is None or n * width <= max_tokens)


def make_batches(
    examples: list[P],
    batch_size: int,
    *,
    max_tokens: int | None = None,
    shuffle_seed: int | None = None,
    trim: int | None = None,
) -> list[list[P]]:
    """Group examples of similar length into batches.

    Examples are sorted by (source, target) length, so each batch wastes little padding;
    with ``shuffle_seed`` the sort breaks ties randomly and the batch order is shuffled,
    deterministically for a given seed. A batch holds at most ``batch_size`` sentences
    and, if ``max_tokens`` is set, at most that many padded source or target tokens (a
    single longer pair is a batch of its own). With ``trim`` a batch closing with at
    least ``trim`` sentences keeps a multiple of ``trim`` and the rest start the next one
    (module docstring); they form a batch of their own where the next pair does not fit
    beside them.
    """
    rng = random.Random(shuffle_seed)
    keyed = [
        (len(e.src), len(e.tgt), rng.random() if shuffle_seed is not None else 0.0, e)
        for e in examples
    ]
    keyed.sort(key=lambda k: k[:3])
    batches: list[list[P]] = []
    current: list[P] = []
    longest = 0
    for _s, _t, _r, e in keyed:
        width = _width(e)
        if current and not _fits(len(current) + 1, max(longest, width), batch_size, max_tokens):
            kept = trimmed_count(len(current), trim)
            batches.append(current[:kept])
            current = current[kept:]
            longest = max((_width(x) for x in current), default=0)
            if current and not _fits(len(current) + 1, max(longest, width), batch_size, max_tokens):
                batches.append(current)
                current, longest = [], 0
        current.append(e)
        longest = max(longest, width)
    if current:
        batches.append(current)
    if shuffle_seed is not None:
        rng.shuffle(batches)
    return batches


@dataclass(frozen=True, eq=False)
class IndexBatches(Sequence):
    """An epoch's batches as row ids (of a training store): batch ``i`` is
    ``order[starts[i]:ends[i]]``. Slicing gives another ``IndexBatches`` over the same
    ``order`` (no copy), so DDP's ``batches[rank::world]`` and resume's
    ``batches[done:]`` cost nothing.

    Attributes:
        order: (N,) row ids, int32 or int64, batch after batch in length order.
        starts, ends: (n_batches,) int64 bounds into ``order``, in the epoch's batch order.
    """

    order: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i):  # int -> (B,) row ids; slice -> IndexBatches
        if isinstance(i, slice):
            return IndexBatches(self.order, self.starts[i], self.ends[i])
        return self.order[self.starts[i] : self.ends[i]]

    def __iter__(self) -> Iterator[np.ndarray]:
        for a, b in zip(self.starts.tolist(), self.ends.tolist(), strict=True):
            yield self.order[a:b]


def token_batches(
    src_len: np.ndarray,
    tgt_len: np.ndarray,
    batch_size: int,
    *,
    max_tokens: int | None = None,
    shuffle_seed: int | None = None,
    trim: int | None = None,
) -> IndexBatches:
    """The rule of :func:`make_batches` on length arrays: sort by (source length,
    target length), ties broken randomly with ``shuffle_seed`` (kept in split order
    without), cut greedily into batches of at most ``batch_size`` pairs and, with
    ``max_tokens``, at most that many padded tokens (a batch of B pairs takes
    ``B * max(src_len, tgt_len + 1)``; a single longer pair is a batch of its own),
    with ``trim`` trimmed as make_batches trims, then shuffle the batch order. Without a
    seed the batches equal make_batches'; with one they follow the same rule with numpy's
    generator, deterministic for a seed.

    Args:
        src_len: (N,) source lengths in pieces, EOS included.
        tgt_len: (N,) target lengths in pieces, without EOS.
    """
    n = len(src_len)
    rng = np.random.default_rng(shuffle_seed) if shuffle_seed is not None else None
    keys = (tgt_len, src_len) if rng is None else (rng.random(n), tgt_len, src_len)
    order = np.lexsort(keys)  # stable: ties keep split order, as Python's sort
    order = order.astype(np.int32) if n < 2**31 else order
    s, t = src_len[order], tgt_len[order]
    # pairs of equal lengths are interchangeable for the greedy rule, so it walks runs of
    # them (a few thousand) rather than pairs (millions)
    change = np.flatnonzero((s[1:] != s[:-1]) | (t[1:] != t[:-1])) + 1
    run_starts = np.concatenate(([0], change)).astype(np.int64)
    run_ends = np.concatenate((change, [n])).astype(np.int64)
    widths = np.maximum(s[run_starts], t[run_starts] + 1) if n else np.zeros(0, np.int64)
    starts: list[int] = []
    run_at, run_end, run_width = run_starts.tolist(), run_ends.tolist(), widths.tolist()
    count = longest = i = at = 0
    while i < len(run_width):  # with no pairs (n == 0) one empty run [0, 0) and no width
        end, width = run_end[i], run_width[i]
        if at >= end:
            i += 1
            continue
        wider = max(longest, width)
        cap = batch_size if max_tokens is None else min(batch_size, max_tokens // wider)
        if count == 0:  # a new batch takes its first pair even over max_tokens
            take = min(end - at, max(cap, 1))
            starts.append(at)
        elif count >= cap:
            back = count - trimmed_count(count, trim)
            if back:  # the batch ends at a multiple of trim: its last pairs start the next
                at -= back
                i = bisect.bisect_right(run_at, at) - 1
            count, longest = 0, 0
            continue
        else:
            take = min(end - at, cap - count)
        count, longest, at = count + take, wider, at + take
    bounds = np.array(starts + [n], dtype=np.int64)
    first, last = bounds[:-1], bounds[1:]
    if rng is not None:
        perm = rng.permutation(len(first))
        first, last = first[perm], last[perm]
    return IndexBatches(order, first, last)
