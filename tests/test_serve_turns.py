"""The batchers' search turns (nmt/serve/batcher.py), with the search replaced by a fake:
a batch is taken when its turn comes, so jobs that arrive while another model searches
join it; a turn waits for the clients the previous search answered; turns are first come
first served."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="nmt serve needs the serve extra: pip install -e '.[serve]'")

import nmt.serve.batcher as serve_batcher
from nmt.serve.batcher import Batcher, Job, Turns


def model_job(model: str) -> Job:
    """A one-line job for ``model`` (a stand-in for :class:`nmt.serve.decode.Prepared`)."""
    prepared: Any = SimpleNamespace(model=model, decoding="beam 5", prefix=[], sources=["x"])
    return Job(prepared, [None], 0, time.monotonic() + 60)


GATE = threading.Event()


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(model, jobs) of every fake search, in order; a search of model "a" waits for
    ``GATE`` (set by default)."""
    done: list[tuple[str, int]] = []

    def fake(jobs: list[Any], threads: int, shared: bool = False) -> list[dict[str, Any]]:
        model = jobs[0][0].model
        if model == "a":
            assert GATE.wait(30)
        done.append((model, len(jobs)))
        return [{"model": model} for _ in jobs]

    monkeypatch.setattr(serve_batcher, "run_jobs", fake)
    GATE.set()
    return done


def test_jobs_that_arrive_while_another_model_searches_join_one_batch(
    searches: list[tuple[str, int]],
) -> None:
    turns = Turns()
    a = Batcher(1, max_batch=32, wait_s=0, turns=turns, return_wait_s=0)
    b = Batcher(1, max_batch=32, wait_s=0, turns=turns, return_wait_s=0)
    GATE.clear()
    first = a.submit(model_job("a"))
    time.sleep(0.2)  # a's search is running (held at the gate)
    late = []
    for _ in range(3):  # b's jobs arrive one by one while a searches
        late.append(b.submit(model_job("b")))
        time.sleep(0.1)
    GATE.set()
    first.result(30)
    for f in late:
        f.result(30)
    assert searches == [("a", 1), ("b", 3)]


def test_a_turn_waits_for_the_client_the_previous_search_answered(
    searches: list[tuple[str, int]],
) -> None:
    turns = Turns()
    a = Batcher(1, max_batch=32, wait_s=0, turns=turns, return_wait_s=30)
    b = Batcher(1, max_batch=32, wait_s=0, turns=turns, return_wait_s=30)
    GATE.clear()
    answered = model_job("a")  # a request of one job: answered by a's search
    waiting = model_job("b")
    returned: list[Any] = []

    def client_returns(_: Any) -> None:  # the answered client sends its next request
        def later() -> None:
            time.sleep(0.2)
            returned.append(b.submit(model_job("b")))

        threading.Thread(target=later).start()

    answered.future.add_done_callback(client_returns)
    a.submit(answered)
    time.sleep(0.2)
    b.submit(waiting)  # queued behind a's turn
    GATE.set()
    waiting.future.result(30)
    assert searches == [("a", 1), ("b", 2)]  # the returning client joined b's batch
    returned[0].result(30)


def test_no_wait_when_the_previous_search_answered_nobody(
    searches: list[tuple[str, int]],
) -> None:
    turns = Turns()
    a = Batcher(1, max_batch=32, wait_s=0, turns=turns, return_wait_s=30)
    b = Batcher(1, max_batch=32, wait_s=0, turns=turns, return_wait_s=30)
    ja, jb = model_job("a"), model_job("b")
    ja.request = jb.request = [ja, jb]  # one request to both models
    a.submit(ja)
    b.submit(jb)
    # a's search answers nobody (the request waits for b); b's search answers it and the
    # next turn, of nobody, waits for nothing: the test ends well before 30 s
    ja.future.result(30)
    jb.future.result(5)
    assert sorted(searches) == [("a", 1), ("b", 1)]


def test_turns_are_first_come_first_served() -> None:
    turns, order = Turns(), []
    hold = threading.Event()

    def first() -> None:
        with turns.turn():
            hold.wait(30)
            order.append(0)

    def nth(k: int) -> None:
        with turns.turn():
            order.append(k)

    threads = [threading.Thread(target=first)]
    threads[0].start()
    time.sleep(0.1)
    for k in (1, 2, 3):
        threads.append(threading.Thread(target=nth, args=(k,)))
        threads[-1].start()
        time.sleep(0.1)  # each queued before the next
    hold.set()
    for t in threads:
        t.join(30)
    assert order == [0, 1, 2, 3]


def test_two_slots_let_one_model_search_while_another_does(
    searches: list[tuple[str, int]],
) -> None:
    turns = Turns(2)
    a = Batcher(1, wait_s=0, turns=turns, return_wait_s=0, shared=True)
    b = Batcher(1, wait_s=0, turns=turns, return_wait_s=0, shared=True)
    GATE.clear()
    first = a.submit(model_job("a"))
    time.sleep(0.2)  # a's search is running (held at the gate)
    b.submit(model_job("b")).result(30)  # answered while a still searches
    assert searches == [("b", 1)] and turns.running == 1
    GATE.set()
    first.result(30)
    assert searches == [("b", 1), ("a", 1)]


def test_a_turn_waits_for_a_free_slot() -> None:
    turns, inside = Turns(2), []
    hold = threading.Event()

    def search(k: int) -> None:
        with turns.turn():
            inside.append(k)
            hold.wait(30)

    threads = [threading.Thread(target=search, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
        time.sleep(0.1)
    assert inside == [0, 1] and turns.running == 2  # the third waits
    hold.set()
    for t in threads:
        t.join(30)
    assert inside == [0, 1, 2] and turns.running == 0
    with pytest.raises(ValueError, match="slots must be >= 1"):
        Turns(0)


@pytest.mark.parametrize(
    ("threads", "models", "workers", "said"),
    [
        (2, 2, 1, ["searches: 2 at once (one per model), 1 thread(s) each"]),
        (2, 1, 1, ["searches: one at a time on 2 thread(s)"]),
        (3, 2, 1, ["1 thread(s) each", "warning: 1 of --threads 3 left out"]),
        (2, 2, 2, ["warning: --workers 2 x 2 searching thread(s) = 4 threads on 2 cores"]),
    ],
)
def test_the_start_up_line_says_how_the_threads_are_used(
    threads: int, models: int, workers: int, said: list[str]
) -> None:
    from nmt.serve.registry import Registry
    from nmt.serve.server import _thread_plan

    cpu = SimpleNamespace(translator=SimpleNamespace(device=SimpleNamespace(type="cpu")))
    entries: Any = [SimpleNamespace(id=f"m{k}", **vars(cpu)) for k in range(models)]
    line = _thread_plan(Registry(entries, threads), workers, cores=2)
    assert all(s in line for s in said), line
    assert ("warning" in line) == any("warning" in s for s in said)
