"""The process-wide decoding lock (nmt/inference/threads.py): shared holders at one thread
count run together, an exclusive holder runs alone, and torch's thread count is set for
the holders and restored after them."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from nmt.inference.threads import ThreadCountLock


def _hold(
    lock: ThreadCountLock, n: int, shared: bool, log: list[str], tag: str, release: threading.Event
) -> threading.Thread:
    def run() -> None:
        with lock.hold(n, shared):
            log.append(f"{tag} in {torch.get_num_threads()}")
            release.wait(30)
            log.append(f"{tag} out")  # still inside: the next holder's "in" comes after

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.15)
    return t


def test_shared_holders_at_one_count_run_together_and_the_count_is_restored() -> None:
    lock, go = ThreadCountLock(), threading.Event()
    log: list[str] = []
    before = torch.get_num_threads()
    n = 1 if before != 1 else 2
    ts = [_hold(lock, n, True, log, t, go) for t in "ab"]
    assert log == [f"a in {n}", f"b in {n}"] and lock.holders == 2
    go.set()
    for t in ts:
        t.join(30)
    assert lock.holders == 0 and torch.get_num_threads() == before


def test_an_exclusive_holder_waits_for_the_shared_ones_and_keeps_new_ones_out() -> None:
    lock = ThreadCountLock()
    log: list[str] = []
    first, second, third = threading.Event(), threading.Event(), threading.Event()
    a = _hold(lock, 1, True, log, "a", first)
    x = _hold(lock, 1, False, log, "x", second)  # waits for a
    b = _hold(lock, 1, True, log, "b", third)  # waits behind x, though a shares its count
    assert log == ["a in 1"]
    first.set()
    a.join(30)
    time.sleep(0.1)
    assert log == ["a in 1", "a out", "x in 1"]
    second.set()
    x.join(30)
    third.set()
    b.join(30)
    assert log[3:] == ["x out", "b in 1", "b out"]


def test_shared_holders_at_another_count_wait() -> None:
    lock = ThreadCountLock()
    log: list[str] = []
    first, second = threading.Event(), threading.Event()
    a = _hold(lock, 1, True, log, "a", first)
    b = _hold(lock, 2, True, log, "b", second)
    assert log == ["a in 1"]
    first.set()
    a.join(30)
    second.set()
    b.join(30)
    assert log == ["a in 1", "a out", "b in 2", "b out"]
    with pytest.raises(ValueError, match="threads must be >= 1"):
        with lock.hold(0):
            pass
