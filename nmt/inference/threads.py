"""The process-wide decoding lock and torch's CPU thread count.

torch's intra-op thread count is one per process, and a search's floats depend on it
(matrix products split their sums by thread). So every translation in a process holds
:data:`DECODING` with the count it decodes on:

- **exclusive** (every :class:`~nmt.inference.translator.Translator` call, the serve
  page's forced passes and reference alignments): alone in the process;
- **shared** (``nmt serve``'s concurrent searches, one per model): together with other
  shared holders of the same count, each search in its own Python thread on its own core;
  torch's kernels release the GIL, so two one-thread searches run on two cores at once
  (CTranslate2's ``inter_threads``; a search step's matrices are too small for two cores
  to run one step much faster than one).

Both wait for the other kind to finish. An exclusive holder that is waiting keeps new
shared holders out, so a steady stream of searches cannot starve it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch


class ThreadCountLock:
    """A readers-writer lock that also sets torch's CPU thread count for its holders.

    The first holder sets ``torch.set_num_threads(n)``; the last one restores the count it
    found. Shared holders run together only at the same ``n``.
    """

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._holders = 0  # shared holders inside, or 1 exclusive
        self._exclusive = False
        self._count = 0  # the thread count of the holders inside
        self._restore = 0  # the count the first holder found
        self._exclusive_waiting = 0

    def _enter(self, n: int) -> None:
        if self._holders == 0:
            self._restore = torch.get_num_threads()
            if n != self._restore:
                torch.set_num_threads(n)
            self._count = n
        self._holders += 1

    def _leave(self) -> None:
        with self._cv:
            self._holders -= 1
            if self._holders == 0:
                self._exclusive = False
                if torch.get_num_threads() != self._restore:
                    torch.set_num_threads(self._restore)
            self._cv.notify_all()

    @contextmanager
    def hold(self, n: int, shared: bool = False) -> Iterator[None]:
        """Inside the block: torch on ``n`` CPU threads, and the lock held (alone, or
        with other ``shared`` holders at the same ``n``).

        Raises:
            ValueError: ``n`` < 1.
        """
        if n < 1:
            raise ValueError(f"torch CPU threads must be >= 1, got {n}")
        with self._cv:
            if shared:
                while (
                    self._exclusive
                    or self._exclusive_waiting
                    or (self._holders and self._count != n)
                ):
                    self._cv.wait()
            else:
                self._exclusive_waiting += 1
                try:
                    while self._holders:
                        self._cv.wait()
                finally:
                    self._exclusive_waiting -= 1
                self._exclusive = True
            self._enter(n)
        try:
            yield
        finally:
            self._leave()

    @property
    def holders(self) -> int:
        """Holders inside now (shared ones, or 1 exclusive)."""
        with self._cv:
            return self._holders


DECODING = ThreadCountLock()


@contextmanager
def fixed_torch_threads(n: int, shared: bool = False) -> Iterator[None]:
    """The process-wide decoding lock held, and torch's CPU threads set to ``n``, inside
    the block (restored after it): what :meth:`Translator.translate` holds around its
    searches, for callers that search themselves (``nmt serve``). ``shared``: other
    shared callers at the same ``n`` may search at the same time (each answer is the same
    as alone: a one-thread kernel's floats do not depend on other threads).

    Raises:
        ValueError: ``n`` < 1.
    """
    with DECODING.hold(n, shared):
        yield
