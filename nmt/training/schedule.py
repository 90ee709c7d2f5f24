"""Learning-rate schedules: constant, plateau, and warm-up then decay.

They are built from torch's own schedulers, so their state is saved and restored with the
checkpoint.
"""

from __future__ import annotations

import math

import torch

from nmt.config.schema import TrainConfig


class Schedule:
    """One interface over the configured schedule.

    * ``constant``: the learning rate never changes.
    * ``plateau``: ``ReduceLROnPlateau`` on validation BLEU (mode max): multiply by
      ``lr_decay`` after ``lr_patience`` validations without a gain, never below ``min_lr``.
    * ``warmup_decay``: linear warm-up to ``lr`` over ``warmup_steps``, then inverse
      square-root decay ``lr * sqrt(warmup_steps / step)`` (Vaswani et al. 2017, eq. 3,
      rescaled so the peak is ``lr``), floored at ``min_lr``.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, cfg: TrainConfig):
        self.kind = cfg.lr_schedule
        self.scheduler: (
            torch.optim.lr_scheduler.ReduceLROnPlateau | torch.optim.lr_scheduler.LambdaLR | None
        ) = None
        if self.kind == "plateau":
            self.scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
                optimizer,
                mode="max",
                factor=cfg.lr_decay,
                patience=cfg.lr_patience - 1,
                min_lr=cfg.min_lr,
            )
        elif self.kind == "warmup_decay":
            floor = cfg.min_lr / cfg.lr
            w = cfg.warmup_steps
            self.scheduler = torch.optim.lr_scheduler.LambdaLR(
                optimizer, lambda step: max(floor, min((step + 1) / w, math.sqrt(w / (step + 1))))
            )

    def after_step(self) -> None:
        """Call after every optimizer step."""
        if isinstance(self.scheduler, torch.optim.lr_scheduler.LambdaLR):  # warmup_decay
            self.scheduler.step()

    def after_validation(self, bleu: float) -> None:
        """Call after every validation with its BLEU."""
        if isinstance(self.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):  # plateau
            self.scheduler.step(bleu)

    def state_dict(self) -> dict | None:
        """The torch scheduler's state for the checkpoint (None for constant)."""
        return None if self.scheduler is None else self.scheduler.state_dict()

    def load_state_dict(self, state: dict | None) -> None:
        """Restore :meth:`state_dict` output on resume."""
        if self.scheduler is not None and state is not None:
            self.scheduler.load_state_dict(state)
