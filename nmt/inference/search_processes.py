"""CPU search in worker processes, one thread each: a Translator's batches searched by
processes of their own instead of threads of this one.

Why processes: a search step is a hundred-odd small torch calls around a few matrix
products, and every call takes the interpreter lock to dispatch. Two search threads of
one process wait for each other's Python between kernels, and the shorter the kernels
the more: with int8 products two forked processes searched 1.20-1.44x (greedy) and
1.06-1.22x (beam 5) as fast as two threads, fp32 no faster
(results/speed/2026-12-07-noamx-processes/). Each process runs on one thread, so
``workers`` processes use ``workers`` cores, whatever torch's thread count (which sets the
default number of workers).

Why a fork server, not a fork of this process: a fork inherits the state of every thread
of the parent, and torch's are not fork-safe. Forked after OpenMP had run on two threads,
a child hung at its first parallel region on two; in CI, forked from a test worker where
MKL had run on several threads, both children spun forever in MKL's memory manager
(``mm_account_ptr_by_tid``). The fork server is a fresh process that has imported this
module and nothing has run in; it forks the workers, which receive the model once,
pickled (its tensors through shared memory). Where the platform has no ``forkserver``
start method (Windows) the Translator refuses ``processes`` with
:class:`ProcessSearchError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import resource
import signal
import threading
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import torch

from nmt.inference.hypothesis import Hypothesis

# What a worker searches with, set by _child_start in each worker. (model, search function)
_CHILD: tuple[Any, Callable[..., list[list[Hypothesis]]]] | None = None


class ProcessSearchError(ValueError):
    """Process workers asked for where they cannot run (one-line message naming the option)."""


def check_processes(device: torch.device) -> None:
    """Raise :class:`ProcessSearchError` where search processes cannot run: off the CPU,
    or without the ``forkserver`` start method (Linux, macOS)."""
    if device.type != "cpu":
        raise ProcessSearchError(f"--processes: search processes are for the CPU, not {device}")
    if "forkserver" not in multiprocessing.get_all_start_methods():
        raise ProcessSearchError("--processes needs the 'forkserver' start method (Linux, macOS)")


def model_key(model: torch.nn.Module) -> tuple:
    """What a forked copy of ``model`` depends on: its identity and every parameter's
    storage and version counter (an optimizer step or load_state_dict moves one). Raises
    nothing."""
    return (id(model), tuple((p.data_ptr(), p._version) for p in model.parameters()))


class SearchProcesses:
    """``workers`` processes of one torch thread each, searching batches of one model.

    The children are started at construction with ``model`` as it is then; :meth:`matches`
    says whether the model has changed since (the Translator then starts new ones). They
    live until :meth:`close` or until this object is freed, and keep their caches warm
    across calls. A child ignores Ctrl-C: the parent stops the search.

    Args:
        model: the :class:`nmt.model.seq2seq.Seq2Seq` (or ensemble) in eval mode.
        search: ``search(model, src (B, S), src_len (B,), decoding) -> n-best lists``, the
            same function the threads run.
        workers: processes, at least 2.

    Raises:
        what pickling ``model`` or ``search`` raises (``search`` must be a module-level
        function).
    """

    def __init__(self, model: Any, search: Callable[..., list[list[Hypothesis]]], workers: int):
        self.key, self.n, self.closed = model_key(model), workers, False
        self.peak_mib: dict[int, float] = {}  # each child's peak RSS so far, by process id
        ctx = multiprocessing.get_context("forkserver")
        # the server imports torch and nmt once, ignoring SIGINT from the start (see
        # forkserver_preload.py); each worker forked from it starts ready
        ctx.set_forkserver_preload(["nmt.inference.forkserver_preload"])
        self._pool = ProcessPoolExecutor(
            workers, mp_context=ctx, initializer=_child_start, initargs=(model, search)
        )
        self._finalizer = weakref.finalize(self, self._pool.shutdown, wait=False)
        try:
            # a Ctrl-C while a child was forked but not yet in the pool's table left that
            # child to the interpreter's exit, where it found its queues' semaphores gone
            # and printed a traceback: it waits until every child is in, a second or two
            with _sigint_deferred():
                _start_all(self._pool, workers)
        except BaseException:
            self.close(kill=True, wait=True)
            raise

    def matches(self, model: Any) -> bool:
        """Whether the children are running and were started from ``model`` as it is now."""
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

    def close(self, kill: bool = False, wait: bool = False) -> None:
        """Stop the children: those searching finish their batch first, or with ``kill``
        are terminated (SIGTERM) at once; with ``wait`` return once they have exited (a
        Ctrl-C while waiting terminates them; after a kill, at most 5 s for each). Idempotent."""
        if wait and not kill and not self.closed:
            try:
                self._pool.shutdown(wait=True, cancel_futures=True)
            except BaseException:
                self.close(kill=True)
                raise
            self._finalizer.detach()
            self.closed = True
            return
        if kill:
            children = list((getattr(self._pool, "_processes", None) or {}).values())
            # terminate_workers is Python 3.14's; before it the executor's own table
            terminate = getattr(self._pool, "terminate_workers", None)
            if terminate is not None:
                terminate()
            else:
                for child in children:
                    child.terminate()
            if wait:
                for child in children:
                    child.join(timeout=5)
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


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Within this block a SIGINT is noted, not raised; KeyboardInterrupt comes at its end.
    Only in the main thread with Python's default SIGINT handler (elsewhere signals cannot
    be handled, or the handler is someone else's); an exception from the block wins."""
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    noted: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if noted:
        raise KeyboardInterrupt


def _start_all(pool: ProcessPoolExecutor, workers: int) -> None:
    """Start all ``workers`` of ``pool`` now and wait until each has run its initializer
    (with the forkserver start method the pool starts them on demand). Raises what a
    child's start raises."""
    for future in [pool.submit(_child_ready) for _ in range(workers)]:
        future.result()


def _child_start(model: Any, search: Callable[..., list[list[Hypothesis]]]) -> None:
    """In each child: one torch thread, Ctrl-C left to the parent, the model kept."""
    global _CHILD
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    with torch.no_grad():
        # the model arrives in shared memory (small pages, mapped from /dev/shm); a private
        # copy searched faster (results/speed/2026-12-07-noamx-forkserver/)
        for t in [*model.parameters(), *model.buffers()]:
            t.data = t.data.clone()
    _CHILD = (model.eval(), search)


def _child_ready() -> bool:
    return _CHILD is not None


def _child_search(
    job: tuple[np.ndarray, np.ndarray, Any],
) -> tuple[int, float, list[list[Hypothesis]]]:
    """In a child: search one batch with the inherited model; returns the child's process
    id, its peak RSS so far (MiB; Linux counts ru_maxrss in KiB) and the n-best lists,
    attention as numpy."""
    assert _CHILD is not None, "a search process runs only as a worker of SearchProcesses"
    model, search = _CHILD
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
