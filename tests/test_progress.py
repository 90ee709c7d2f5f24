"""The text progress lines written where stderr is no terminal (a log file)."""

from __future__ import annotations

import pytest

from nmt.training import progress
from nmt.training.progress import TEXT_EVERY, TEXT_SECONDS, EpochProgress


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(clock: Clock, lines: list[str], batches: range, step_s: float, bar: EpochProgress):
    for b in batches:
        clock.now += step_s
        bar.update(100, b, 2.5)


def test_first_batch_every_n_and_after_a_silence(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    lines: list[str] = []
    bar = EpochProgress(500, 0, 0, show=True, log=lines.append)
    assert bar.text, "under pytest stderr is captured, so the text lines are on"
    run(clock, lines, range(1, TEXT_EVERY + 1), 0.1, bar)
    # the first batch (nobody should wait 50 batches to see the run is alive), then batch 50
    assert [line.split(":")[0] for line in lines] == ["epoch 1 batch 1/500", "epoch 1 batch 50/500"]
    # a slow stretch: one line once TEXT_SECONDS pass, though no multiple of TEXT_EVERY is hit
    run(clock, lines, range(TEXT_EVERY + 1, TEXT_EVERY + 4), TEXT_SECONDS / 2 + 1, bar)
    assert lines[-1].startswith(f"epoch 1 batch {TEXT_EVERY + 2}/500")
    assert len(lines) == 3
    bar.close()


def test_no_text_lines_when_progress_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    lines: list[str] = []
    bar = EpochProgress(100, 0, 0, show=False, log=lines.append)
    run(clock, lines, range(1, 101), 1.0, bar)
    assert lines == []
    bar.close()
