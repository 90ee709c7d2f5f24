"""Validation during training: the loss on the validation set, the caller's BLEU, and the
best-score and patience bookkeeping that early stopping reads.

BLEU comes in through the ``validate`` callable, so training knows nothing of search."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch

from nmt.config.schema import Config
from nmt.data.batches import Example, collate
from nmt.data.bucketing import make_batches
from nmt.model.seq2seq import Seq2Seq
from nmt.training.state import TrainState

# ``validate(model)`` returns at least ``{"bleu": float}``; every key is logged as ``val_<key>``
Validate = Callable[[Seq2Seq], dict[str, Any]]


@torch.no_grad()
def validation_loss(
    model: Seq2Seq, examples: list[Example], batch_size: int, device: torch.device
) -> float:
    """Mean cross-entropy in nats per target token over ``examples`` (no dropout)."""
    model.eval()
    total, tokens = 0.0, 0
    for chunk in make_batches(examples, batch_size):
        batch = collate(chunk).to(device)
        total += float(model(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out))
        tokens += batch.n_tokens
    return total / max(tokens, 1)


def validate_and_log(
    cfg: Config,
    model: Seq2Seq,
    *,
    net: torch.nn.Module,
    valid_examples: list[Example],
    validate: Validate,
    device: torch.device,
    state: TrainState,
    train_loss: float,
    started: float,
    rank: int,
    log: Callable[[str], None],
    epochs_done: float,
    shared: Callable[[float], float] = lambda x: x,
) -> dict[str, Any]:
    """Validation loss, perplexity and BLEU; updates best score and patience counters.

    Rank 0 validates; ``shared`` gives its BLEU to every rank, so the best score, patience
    and the LR schedule are decided once and agree on all ranks."""
    record: dict[str, Any] = {
        "epoch": state.epoch,
        "epochs_done": round(epochs_done, 3),
        "step": state.step,
        "train_loss": round(train_loss, 6),
    }
    if rank == 0:
        val_loss = validation_loss(model, valid_examples, cfg.train.batch_size, device)
        model.eval()
        scores = validate(model)
        record.update(
            val_loss=round(val_loss, 6),
            val_ppl=round(math.exp(min(val_loss, 50)), 3),
            **{f"val_{k}": v for k, v in scores.items()},
        )
    bleu = shared(float(record.get("val_bleu", -1.0)))
    record["val_bleu"] = bleu  # rank 0's score, on every rank
    improved = bleu > state.best_bleu
    if improved:
        state.best_bleu, state.bad_epochs = bleu, 0
    else:
        state.bad_epochs += 1
    state.elapsed_s = time.monotonic() - started
    record.update(elapsed_s=round(state.elapsed_s, 1), best_bleu=state.best_bleu, improved=improved)
    if rank == 0:
        part = epochs_done - math.floor(epochs_done)
        # mid-epoch (a max_minutes stop, valid_every) the loss averages this epoch's part
        # only, later in training than the whole epochs before it; say so, or it reads as a jump
        over = f" (this epoch's first {part:.2f})" if 0.005 <= part <= 0.995 else ""
        log(
            f"{epochs_done:.2f} epochs, step {state.step}: train loss {train_loss:.3f}{over} | "
            f"val loss {record['val_loss']:.3f} ppl {record['val_ppl']:.2f} BLEU {bleu:.2f} "
            f"(best {state.best_bleu:.2f}) | {state.elapsed_s / 60:.1f} min"
        )
    net.train()
    return record
