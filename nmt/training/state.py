"""What a training run carries between steps and across a resume: counters, random states,
and the stop flag that turns SIGINT/SIGTERM into a checkpoint."""

from __future__ import annotations

import random
import signal
from dataclasses import dataclass
from typing import Any

import torch


class TrainingError(RuntimeError):
    """Training cannot continue (e.g. a NaN loss); the message names the step."""


@dataclass
class TrainState:
    """Counters saved in every checkpoint so that ``--resume`` continues exactly."""

    # ``history`` (a list of validation records) was saved by older versions and never read:
    # :meth:`from_counters` drops it, so their checkpoints still resume

    step: int = 0
    epoch: int = 0  # epochs completed
    batch_in_epoch: int = 0  # batches of the current epoch already trained
    best_bleu: float = -1.0
    bad_epochs: int = 0
    elapsed_s: float = 0.0
    epoch_loss_sum: float = 0.0  # nats summed over the current epoch's batches so far
    epoch_tokens: int = 0
    skipped_batches: int = 0  # batches with a non-finite loss, when configured to skip
    last_valid_s: float = 0.0  # duration of the last validation, reserved from the budget
    interrupted: str | None = None  # SIGINT / SIGTERM when the run was stopped by a signal
    done: bool = False

    def best_bleu_text(self) -> str:
        """The best validation BLEU for messages ("32.10"), or "none yet" before the first
        validation (``best_bleu`` is then -1)."""
        return "none yet" if self.best_bleu < 0 else f"{self.best_bleu:.2f}"

    def patience_spent(self, patience: int | None) -> bool:
        """Whether early stopping ends the run here (:func:`patience_spent`)."""
        return patience_spent(self.bad_epochs, patience)

    @classmethod
    def from_counters(cls, counters: dict[str, Any]) -> TrainState:
        """The state stored as ``counters`` in a checkpoint, keys of older versions dropped.

        Raises:
            TypeError: a counter this version does not know (a foreign file).
        """
        return cls(**{k: v for k, v in counters.items() if k not in _RETIRED_COUNTERS})


_RETIRED_COUNTERS = ("history",)


def patience_spent(bad_epochs: int, patience: int | None) -> bool:
    """Whether ``bad_epochs`` validations in a row without a BLEU gain reach ``patience``
    (``train.patience``; None: no early stopping). The one rule for the training loop and
    for ``nmt study``, which must know whether a finished run stopped early."""
    return patience is not None and bad_epochs >= patience


def rng_state() -> dict[str, Any]:
    """The torch, Python and (when present) CUDA random states, for a checkpoint."""
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the states saved by :func:`rng_state` (CUDA's only where CUDA is present)."""
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class StopFlag:
    """Turns SIGINT/SIGTERM into a flag checked between batches (a checkpoint is saved)."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopFlag:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread
                pass
        return self

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.signal is not None:  # second Ctrl-C: give up at once
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
