"""Cross-request batching for ``nmt serve``: per model, a queue of translate jobs and a
thread that gathers the lines of concurrent requests into one search.

The engines translation is served with batch concurrent requests this way: Triton's
dynamic batcher (``max_queue_delay_microseconds``), Ray Serve's ``@serve.batch``
(``max_batch_size``, ``batch_wait_timeout_s``), CTranslate2's buffered wrapper. Here a
:class:`Batcher` waits at most ``wait_s`` after the first job arrives, or until
``max_batch`` lines of jobs with the same decoding and forced prefix are waiting, then
searches them in one batch sorted by source length (:func:`nmt.serve.decode.run_jobs`).
The batchers of one server search in turn (:class:`Turns`: one search at a time, or one
per model at once, each on its own share of the CPU threads), and a batch is taken when
its turn comes: jobs that arrived while it waited join it, and the turn waits briefly for
the clients that the previous search answered (``return_wait_s``).

A job is dropped, never searched, when its client went away or its deadline passed while
it waited; its future then holds :class:`Dropped` or :class:`DeadlineExceeded`. A job
already being searched runs to its end (one search of many requests cannot be cut for
one of them), and the route answers 503 if the deadline passed meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from nmt.serve.decode import Prepared, run_jobs
from nmt.serve.limits import ApiError


@dataclass(frozen=True)
class Batching:
    """How translate requests are batched and bounded (``nmt serve`` options).

    Attributes:
        max_batch: source lines per search at most (``--max-batch``); 1 searches every
            request alone, as nmt serve did before batching.
        wait_ms: how long the first waiting job waits for others (``--batch-wait-ms``).
        timeout_s: a request not answered this many seconds after it was queued (queue
            time counted) is answered 503 (``--timeout``).
        return_wait_ms: how long a search turn waits, at most, for the clients the
            previous search answered to send their next request (``--return-wait-ms``;
            0: never). Clients that send one request after another (a page, a script, the
            load test) then share one batch instead of splitting into groups that
            alternate between the models' searches.
    """

    max_batch: int = 32
    wait_ms: float = 5.0
    timeout_s: float = 60.0
    return_wait_ms: float = 10.0


class DeadlineExceeded(Exception):
    """A job's deadline passed before its search started."""


class Dropped(Exception):
    """A job whose client went away before its search started."""


@dataclass(eq=False)
class Job:
    """One model's share of one translate request.

    Attributes:
        prepared: the request checked against the model (:func:`nmt.serve.decode.prepare`).
        references: one per line, or None. top_k: alternatives per step.
        deadline: ``time.monotonic()`` seconds after which it is not searched.
        enqueued: when it was submitted (``time.monotonic()``).
        future: the model's answer (the JSON of ``ModelResult``), or the exception.
        cancelled: set when the client went away; read by the batcher before the search.
        request: every job of its request (one per model), itself included; empty: the
            request is this job alone. The request is answered once all are done.
    """

    prepared: Prepared
    references: list[str | None]
    top_k: int
    deadline: float
    enqueued: float = field(default_factory=time.monotonic)
    future: Future[dict[str, Any]] = field(default_factory=Future)
    cancelled: bool = False
    request: list[Job] = field(default_factory=list, repr=False)

    @property
    def answered(self) -> bool:
        """Whether every job of its request is done (the request can be answered)."""
        return all(j.future.done() for j in self.request or [self])

    @property
    def key(self) -> tuple[Any, ...]:
        """What a batch's jobs share: the decoding and the forced prefix."""
        return (self.prepared.decoding, tuple(self.prepared.prefix))

    @property
    def lines(self) -> int:
        """Source lines of the job."""
        return len(self.prepared.sources)


class Turns:
    """Turns at searching, first come first served, shared by the batchers of one server.

    At most ``slots`` searches run at once (one per model at most: a model's batcher
    searches one batch at a time); each takes its batch only once its turn has come, so
    the batch holds every job that arrived while it waited. With two models, one slot and
    closed-loop clients, a batch taken before the wait held about half of them (the
    clients split into two groups that alternate). FIFO, unlike ``threading.Lock``, so
    that a busy model cannot keep the turn from another one.

    Raises:
        ValueError: ``slots`` < 1.
    """

    def __init__(self, slots: int = 1) -> None:
        if slots < 1:
            raise ValueError(f"search slots must be >= 1, got {slots}")
        self.slots = slots
        self._cv = threading.Condition()
        self._waiting: deque[object] = deque()
        self._running = 0
        # set by a batcher when its search ends: when it ended (time.monotonic()) and how
        # many requests it answered
        self.ended, self.answered = 0.0, 0

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Wait for this thread's turn and a free slot; hold the slot inside the block."""
        me = object()
        with self._cv:
            self._waiting.append(me)
            while self._waiting[0] is not me or self._running >= self.slots:
                self._cv.wait()
            self._waiting.popleft()
            self._running += 1
            self._cv.notify_all()  # the next in line may take another free slot
        try:
            yield
        finally:
            with self._cv:
                self._running -= 1
                self._cv.notify_all()

    @property
    def running(self) -> int:
        """Searches running now."""
        with self._cv:
            return self._running


class Batcher:
    """The queue and the batching thread of one model.

    Args:
        threads: torch CPU threads of every search. shared: whether searches of other
            batchers at the same thread count may run at the same time (``turns`` with
            more than one slot). max_batch: lines per search at most
            (a larger job runs alone, whole). wait_s: how long the first waiting job waits
            for others (seconds; 0 searches what is there at once).
        observe: called after each search with (lines, queue seconds of each job, search
            seconds); the server's metrics.
        turns: the search turns shared with the server's other batchers (default: its own).
        return_wait_s: how long a turn waits at most for the clients the previous search
            (of any model) answered to send their next job here (:class:`Batching`).

    Raises:
        ValueError: ``max_batch`` < 1, ``wait_s`` < 0 or ``return_wait_s`` < 0.
    """

    def __init__(
        self,
        threads: int,
        max_batch: int = 32,
        wait_s: float = 0.005,
        observe: Callable[[int, list[float], float], None] | None = None,
        turns: Turns | None = None,
        return_wait_s: float = 0.01,
        shared: bool = False,
    ):
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if wait_s < 0 or return_wait_s < 0:
            raise ValueError(f"batch waits must be >= 0, got {wait_s} and {return_wait_s}")
        self.threads, self.max_batch, self.wait_s = threads, max_batch, wait_s
        self.return_wait_s, self.shared = return_wait_s, shared
        self.observe = observe
        self.turns = turns or Turns()
        self._pending: deque[Job] = deque()
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, job: Job) -> Future[dict[str, Any]]:
        """Queue ``job`` (the thread starts with the first one); its future answers."""
        with self._cv:
            self._pending.append(job)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, daemon=True, name="nmt-serve-batcher"
                )
                self._thread.start()
            self._cv.notify()
        return job.future

    def depth(self) -> int:
        """Jobs waiting (not yet searched)."""
        with self._cv:
            return len(self._pending)

    def _ready_lines(self, key: tuple[Any, ...]) -> int:
        return sum(j.lines for j in self._pending if j.key == key)

    def _wait_for_batch(self) -> None:
        """Wait for a job, then for others like it (``wait_s`` from the first one's
        arrival, or ``max_batch`` lines). Called with the lock held."""
        while not self._pending:
            self._cv.wait()
        first = self._pending[0]
        until = first.enqueued + self.wait_s
        while self._ready_lines(first.key) < self.max_batch:
            left = until - time.monotonic()
            if left <= 0:
                break
            self._cv.wait(left)

    def _wait_for_return(self) -> None:
        """At the start of a turn: wait, until ``return_wait_s`` after the previous search
        ended, for as many jobs to arrive after it ended as it answered requests (those
        clients' next requests), or for ``max_batch`` lines. A client that sends its next
        request when its answer comes then joins this batch rather than the next one. No
        wait when the previous search answered nobody (a request waits for another model)
        or its clients are back already, as with a single client. Called with the lock
        held, jobs waiting."""
        since, expect = self.turns.ended, self.turns.answered
        if not expect or self.return_wait_s <= 0:
            return
        until = since + self.return_wait_s
        key = self._pending[0].key
        while self._ready_lines(key) < self.max_batch:
            if sum(j.enqueued > since for j in self._pending) >= expect:
                return
            left = until - time.monotonic()
            if left <= 0:
                return
            self._cv.wait(left)

    def _take(self) -> list[Job]:
        """Remove and return the batch, FIFO: the first job and those like it that fit in
        ``max_batch`` lines. Called with the lock held, jobs waiting."""
        first = self._pending[0]
        batch: list[Job] = []
        lines = 0
        for j in list(self._pending):
            if j.key != first.key:
                continue
            if batch and lines + j.lines > self.max_batch:
                break
            batch.append(j)
            lines += j.lines
            self._pending.remove(j)
        return batch

    def _loop(self) -> None:
        while True:
            with self._cv:
                self._wait_for_batch()
            with self.turns.turn():  # the batch is taken late: what came meanwhile joins it
                with self._cv:
                    self._wait_for_return()
                    batch = self._take()
                try:
                    self._search(batch)
                finally:
                    self.turns.ended = time.monotonic()
                    self.turns.answered = sum(j.answered for j in batch)

    def _search(self, batch: list[Job]) -> None:
        """Drop the jobs cancelled or past their deadline, search the others, answer."""
        live = []
        now = time.monotonic()
        for j in batch:  # dropped before their search starts
            if j.cancelled:
                j.future.set_exception(Dropped("the client went away"))
            elif now > j.deadline:
                j.future.set_exception(
                    DeadlineExceeded(
                        f"waited {now - j.enqueued:.3f} s, past the request's deadline"
                    )
                )
            else:
                live.append(j)
        if not live:
            return
        start = time.monotonic()
        try:
            answers = run_jobs(
                [(j.prepared, j.references, j.top_k) for j in live], self.threads, self.shared
            )
        except Exception as e:  # every job of the batch answers the error (500)
            for j in live:
                j.future.set_exception(e)
            return
        searched = time.monotonic() - start
        for j, a in zip(live, answers, strict=True):
            j.future.set_result(a)
        if self.observe is not None:
            self.observe(sum(j.lines for j in live), [start - j.enqueued for j in live], searched)


async def wait_for_jobs(
    jobs: list[Job], request: Any, deadline: float, timeout_s: float
) -> list[dict[str, Any]]:
    """The answers of a request's jobs, in order, checking every 50 ms whether its client
    is still connected and whether ``deadline`` (``time.monotonic()``) has passed.

    Raises:
        ApiError: 503 ``timeout`` past the deadline (the jobs not yet searched are
            dropped), 499 ``client_disconnected`` when the client went away (likewise).
        Exception: the error of a failed search (answered 500).
    """
    waits = [asyncio.wrap_future(j.future) for j in jobs]
    for w in waits:  # read every outcome, so that none is logged as never retrieved
        w.add_done_callback(lambda f: f.cancelled() or f.exception())
    try:
        while True:
            pending = [w for w in waits if not w.done()]
            left = deadline - time.monotonic()
            if not pending or left <= 0:
                break
            await asyncio.wait(pending, timeout=min(left, 0.05))
            if any(not w.done() for w in waits) and await request.is_disconnected():
                raise ApiError(499, "client_disconnected", "the client went away")
        failed = [e for w in waits if w.done() and (e := w.exception()) is not None]
        if time.monotonic() > deadline or any(isinstance(e, DeadlineExceeded) for e in failed):
            raise ApiError(
                503,
                "timeout",
                f"the request was not answered within the "
                f"server's --timeout of {timeout_s:g} s (queue time counted); "
                "try again later",
                timeout_s=timeout_s,
            )
        if failed:
            raise failed[0]
        return [w.result() for w in waits]
    finally:
        for j in jobs:  # the ones still waiting are dropped before their search
            j.cancelled = True
