"""What a training run carries between steps and across a resume: counters, random states,
the ``train_state`` every checkpoint holds (written, and restored on ``--resume``), and the
stop flag that turns SIGINT/SIGTERM into a checkpoint."""

from __future__ import annotations

import random
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt.model.checkpoint import CheckpointError, weights_mismatch
from nmt.training.schedule import Schedule


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

    def resumed_text(self) -> str:
        """Where a resumed run continues, for the log: step, epochs and batches done,
        minutes trained, best validation BLEU."""
        return (
            f"resumed at step {self.step}: {self.epoch} epoch(s) and {self.batch_in_epoch} "
            f"batch(es) of epoch {self.epoch + 1} done, {self.elapsed_s / 60:.1f} min trained, "
            f"best val BLEU {self.best_bleu_text()}"
        )

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


def train_state(
    optimizer: torch.optim.Optimizer,
    schedule: Schedule,
    scaler: torch.amp.GradScaler | None,
    state: TrainState,
) -> dict[str, Any]:
    """The ``train_state`` of a checkpoint (:func:`nmt.model.checkpoint.make_payload`): the
    optimizer's and schedule's states, the random states, the counters of ``state`` and,
    under fp16, the GradScaler's; :func:`restore_train_state` reads it back."""
    ts = {
        "optimizer": optimizer.state_dict(),
        "schedule": schedule.state_dict(),
        "rng": rng_state(),
        "counters": state.__dict__.copy(),
    }
    if scaler is not None:
        ts["grad_scaler"] = scaler.state_dict()
    return ts


def restore_train_state(
    payload: dict[str, Any],
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    schedule: Schedule,
    scaler: torch.amp.GradScaler | None,
) -> TrainState:
    """Load a checked checkpoint payload (read from ``path``, for messages) into ``model``,
    ``optimizer``, ``schedule``, ``scaler`` and the random states; returns its counters.

    Raises:
        CheckpointError: the weights, optimizer state, random state or counters do not fit
            this run (a damaged or foreign file); the message names ``path``.
    """
    ts = payload["train_state"]
    why = weights_mismatch(model, payload["model"])
    if why:
        raise CheckpointError(f"{path}: cannot resume: {why}")
    try:
        model.load_state_dict(payload["model"])
        optimizer.load_state_dict(ts["optimizer"])
        schedule.load_state_dict(ts.get("schedule"))
        if scaler is not None and ts.get("grad_scaler"):
            scaler.load_state_dict(ts["grad_scaler"])
        set_rng_state(ts["rng"])
        return TrainState.from_counters(ts["counters"])
    except (RuntimeError, ValueError, TypeError, KeyError) as e:
        why = str(e).strip().splitlines()[0][:200]
        raise CheckpointError(
            f"{path}: cannot resume from this checkpoint ({type(e).__name__}: {why})"
        ) from None


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
