"""CPU search in worker processes, one thread each: a Translator's batches searched by
forked copies of the process instead of threads of it.

Why processes: a search step is a hundred-odd small torch calls around a few matrix
products, and every call takes the interpreter lock to dispatch. Two search threads of
one process wait for each other's Python between kernels, and the shorter the kernels
the more: with int8 products two forked processes searched 1.20-1.44x (greedy) and
1.06-1.22x (beam 5) as fast as two threads, fp32 no faster
(results/speed/2026-12-07-noamx-processes/). A forked process shares the parent's
weights copy-on-write and runs without the lock of the other.

Why one thread each: a process forked after OpenMP has run with several threads hangs at
its own first parallel region with more than one (GNU libgomp keeps the parent's thread
pool, whose threads do not exist in the child); at one thread torch never opens a
parallel region. So ``workers`` processes use ``workers`` cores, whatever torch's thread
count (which sets the default number of workers).

Linux (``fork``) only: where the platform has no ``fork`` start method the Translator
refuses ``processes`` with :class:`ProcessSearchError`.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import resource
import signal
import weakref
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import torch

from nmt.inference.hypothesis import Hypothesis

# What a forked worker searches with: set in the parent just before the fork (the child
# inherits it); never pickled. (model, search function, model key)
_CHILD: tuple[Any, Callable[..., list[list[Hypothesis]]], tuple] | None = None


class ProcessSearchError(ValueError):
    """Process workers asked for where they cannot run (one-line message naming the option)."""


def check_processes(device: torch.device) -> None:
    """Raise :class:`ProcessSearchError` unless search processes can run here: on a CPU,
    with the ``fork`` start method. (Each runs on one thread whatever the thread count:
    module docstring.)"""
    if device.type != "cpu":
        raise ProcessSearchError(f"--processes: search processes are for the CPU, not {device}")
    if "fork" not in multiprocessing.get_all_start_methods():
        raise ProcessSearchError("--processes needs the 'fork' start method (Linux)")


def model_key(model: torch.nn.Module) -> tuple:
    """What a forked copy of ``model`` depends on: its identity and every parameter's
    storage and version counter (an optimizer step or load_state_dict moves one)."""
    return (id(model), tuple((p.data_ptr(), p._version) for p in model.parameters()))


class SearchProcesses:
    """``workers`` forked processes of one torch thread each, searching batches of one model.

    The children are forked at construction with ``model`` as it is then; :meth:`matches`
    says whether the model has changed since (the Translator then starts new ones). They
    live until :meth:`close` or until this object is freed, and keep their caches warm
    across calls. A child ignores Ctrl-C: the parent stops the search.

    Args:
        model: the :class:`nmt.model.seq2seq.Seq2Seq` (or ensemble) in eval mode.
        search: ``search(model, src (B, S), src_len (B,), decoding) -> n-best lists``, the
            same function the threads run.
        workers: processes, at least 2.
    """

    def __init__(self, model: Any, search: Callable[..., list[list[Hypothesis]]], workers: int):
        global _CHILD
        self.key, self.n, self.closed = model_key(model), workers, False
        self.peak_mib: dict[int, float] = {}  # each child's peak RSS so far, by process id
        _CHILD = (model, search, self.key)
        try:
            self._pool = ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("fork"), initializer=_child_start
            )
            # forks every worker now, while _CHILD names this model (fork: all at once)
            list(self._pool.map(_child_ready, range(workers)))
        finally:
            _CHILD = None
        self._finalizer = weakref.finalize(self, self._pool.shutdown, wait=False)

    def matches(self, model: Any) -> bool:
        """Whether the children are running and were forked from ``model`` as it is now."""
        return not self.closed and self.key == model_key(model)

    def search(self, batches: list[tuple[torch.Tensor, torch.Tensor]], decoding: Any):
        """n-best lists for each ``(src (B, S), src_len (B,))`` of ``batches``, in order,
        as the search function returns them; each batch goes to the next free process.

        Raises:
            what the search raises in the child (re-raised here), or
            concurrent.futures.process.BrokenProcessPool when a child died.
        """
        jobs = [(src.numpy(), src_len.numpy(), decoding) for src, src_len in batches]
        # submitted one by one, not map(): map's iterator cancels the futures left when it is
        # dropped, and Python 3.11's pool then fails on them as it reports dead children
        futures = [self._pool.submit(_child_search, job) for job in jobs]
        try:
            found = []
            for future in futures:
                pid, peak_mib, nbest = future.result()
                self.peak_mib[pid] = peak_mib
                found.append(_from_wire(nbest))
            return found
        except BaseException:
            # Ctrl-C or an error: stop the children now. Left to finish their batch, a
            # second Ctrl-C during the interpreter's exit interrupted the pool's shutdown and
            # the exit then waited on idle children forever.
            self.close(kill=True)
            raise

    def close(self, kill: bool = False) -> None:
        """Stop the children: those searching finish their batch first, or with ``kill``
        are terminated (SIGTERM) at once. Idempotent."""
        if kill:
            # terminate_workers is Python 3.14's; before it the executor's own table
            terminate = getattr(self._pool, "terminate_workers", None)
            if terminate is not None:
                terminate()
            else:
                for child in list((getattr(self._pool, "_processes", None) or {}).values()):
                    child.terminate()
        # after a kill the pool marks what was left as failed itself: cancelling it too made
        # Python 3.11's pool raise InvalidStateError in its own thread
        self._pool.shutdown(wait=False, cancel_futures=not kill)
        self._finalizer.detach()
        self.closed = True


def reuse_or_fork(
    forks: SearchProcesses | None,
    model: Any,
    search: Callable[..., list[list[Hypothesis]]],
    workers: int,
) -> SearchProcesses:
    """``forks`` where they are ``workers`` processes forked from ``model`` as it is now;
    else new ones (``forks`` closed first). Raises what :class:`SearchProcesses` raises."""
    if forks is not None and forks.matches(model) and forks.n == workers:
        return forks
    if forks is not None:
        forks.close()
    return SearchProcesses(model, search, workers)


def _child_start() -> None:
    """In each child: one torch thread, and Ctrl-C left to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)


def _child_ready(_: int) -> bool:
    return _CHILD is not None


def _child_search(
    job: tuple[np.ndarray, np.ndarray, Any],
) -> tuple[int, float, list[list[Hypothesis]]]:
    """In a child: search one batch with the inherited model; returns the child's process
    id, its peak RSS so far (MiB; Linux counts ru_maxrss in KiB) and the n-best lists,
    attention as numpy."""
    assert _CHILD is not None, "a search process runs only in a fork of SearchProcesses"
    model, search, _ = _CHILD
    src, src_len, decoding = job
    with torch.inference_mode():
        nbest = search(model, torch.from_numpy(src), torch.from_numpy(src_len), decoding)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return os.getpid(), peak_mib, [[_to_wire(h) for h in hyps] for hyps in nbest]


def _to_wire(h: Hypothesis) -> Hypothesis:
    # numpy arrays pickle by value; torch tensors through multiprocessing go to shared
    # memory one file descriptor each, thousands per call
    att = None if h.attention is None else h.attention.numpy()
    return dataclasses.replace(h, attention=att)  # type: ignore[arg-type]


def _from_wire(nbest: list[list[Hypothesis]]) -> list[list[Hypothesis]]:
    return [
        [
            h
            if h.attention is None
            else dataclasses.replace(h, attention=torch.from_numpy(h.attention))
            for h in hyps
        ]
        for hyps in nbest
    ]
