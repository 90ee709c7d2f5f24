"""An epoch's progress where a person sees it: a tqdm bar on a terminal; where stderr is no
terminal (a log file, a pipe), a text line every ``TEXT_EVERY`` batches instead, and also after
the first batch and whenever ``TEXT_SECONDS`` pass without one (on a slow or busy machine 50
batches can take minutes, and a silent log looks hung); nothing on ranks other than 0, or with
``train.progress`` off."""

from __future__ import annotations

import time
from collections.abc import Callable

from tqdm import tqdm

TEXT_EVERY = 50  # batches between two text lines
TEXT_SECONDS = 60.0  # the longest silence between two text lines, in seconds


class EpochProgress:
    """The progress of one epoch of ``total`` batches, ``done`` of them trained before (a
    resumed epoch). ``show``: ``train.progress`` on this process (rank 0)."""

    def __init__(
        self, total: int, done: int, epoch: int, *, show: bool, log: Callable[[str], None]
    ):
        self.bar = tqdm(
            total=total,
            initial=done,
            desc=f"epoch {epoch + 1}",
            disable=None if show else True,  # None: off where stderr is no terminal
            dynamic_ncols=True,
            leave=False,
        )
        self.text = show and self.bar.disable
        self.total, self.epoch, self.log = total, epoch, log
        self.tick, self.tokens = time.monotonic(), 0
        self.last_text: float | None = None  # when the last text line was written

    def update(self, n_tokens: int, batch_in_epoch: int, mean_loss: float) -> None:
        """One more batch of ``n_tokens`` target tokens; ``batch_in_epoch`` batches are done
        and ``mean_loss`` (nats per target token) is the epoch's so far."""
        self.tokens += n_tokens
        now = time.monotonic()
        tok_s = self.tokens / max(now - self.tick, 1e-9)
        self.bar.update(1)
        self.bar.set_postfix(loss=f"{mean_loss:.3f}", tok_s=f"{tok_s:.0f}")
        due = (
            self.last_text is None
            or batch_in_epoch % TEXT_EVERY == 0
            or now - self.last_text >= TEXT_SECONDS
        )
        if self.text and due:
            self.last_text = now
            self.log(
                f"epoch {self.epoch + 1} batch {batch_in_epoch}/{self.total}: loss "
                f"{mean_loss:.3f} nats/token, {tok_s:.0f} target tokens/s"
            )

    def close(self) -> None:
        """Remove the bar (it is not left on the terminal)."""
        self.bar.close()
