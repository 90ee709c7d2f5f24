"""The training loop: teacher forcing, Adam, gradient clipping, validation every epoch,
best checkpoint by validation BLEU, early stopping, wall-clock budget, exact resume.

Validation BLEU comes in through the ``validate`` callable, so this module knows nothing
about search or evaluation. Under ``torchrun`` (``WORLD_SIZE`` > 1) the model is wrapped in
DistributedDataParallel, each rank takes every ``world``-th batch, and rank 0 validates and
writes checkpoints.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from tqdm import tqdm

from nmt.checkpoint import make_payload, save_atomic
from nmt.config import Config
from nmt.data import Example, collate, make_batches
from nmt.model import Seq2Seq
from nmt.vocab import Vocab


class TrainingError(RuntimeError):
    """Training cannot continue (e.g. a NaN loss); the message names the step."""


@dataclass
class TrainState:
    """Counters saved in every checkpoint so that ``--resume`` continues exactly."""

    step: int = 0
    epoch: int = 0  # epochs completed
    batch_in_epoch: int = 0  # batches of the current epoch already trained
    best_bleu: float = -1.0
    bad_epochs: int = 0
    elapsed_s: float = 0.0
    epoch_loss_sum: float = 0.0  # nats summed over the current epoch's batches so far
    epoch_tokens: int = 0
    skipped_batches: int = 0  # batches with a non-finite loss, when configured to skip
    interrupted: str | None = None  # SIGINT / SIGTERM when the run was stopped by a signal
    done: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)


def pick_device(name: str) -> torch.device:
    """``auto`` is CUDA when present, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class _StopFlag:
    """Turns SIGINT/SIGTERM into a flag checked between batches (a checkpoint is saved)."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> "_StopFlag":
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


@torch.no_grad()
def validation_loss(model: Seq2Seq, examples: list[Example], batch_size: int,
                    device: torch.device) -> float:
    """Mean cross-entropy in nats per target token over ``examples`` (no dropout)."""
    model.eval()
    total, tokens = 0.0, 0
    for chunk in make_batches(examples, batch_size):
        batch = collate(chunk).to(device)
        total += float(model(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out))
        tokens += batch.n_tokens
    return total / max(tokens, 1)


Validate = Callable[[Seq2Seq], dict[str, Any]]


def train(
    cfg: Config,
    model: Seq2Seq,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    train_examples: list[Example],
    valid_examples: list[Example],
    validate: Validate,
    resume: dict[str, Any] | None = None,
    log: Callable[[str], None] = print,
) -> TrainState:
    """Train ``model`` until the epoch/time budget or early stopping; returns the counters.

    Args:
        validate: called with the model in eval mode after each epoch; returns a dict
            with at least ``bleu`` (0-100).
        resume: a checkpoint payload whose ``train_state`` is continued.

    Raises:
        TrainingError: a NaN or infinite loss (names the step); nothing is saved over
            the last good checkpoint.
    """
    t = cfg.train
    out = cfg.out_dir()
    out.mkdir(parents=True, exist_ok=True)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    device = pick_device(t.device)
    if world > 1:
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    model.to(device)
    net = model
    if world > 1:
        net = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.Adam(model.parameters(), lr=t.lr)
    state = TrainState()
    if resume is not None:
        model.load_state_dict(resume["model"])
        ts = resume["train_state"]
        optimizer.load_state_dict(ts["optimizer"])
        _set_rng_state(ts["rng"])
        state = TrainState(**ts["counters"])
        state.interrupted = None
        log(f"resumed at epoch {state.epoch + 1}, batch {state.batch_in_epoch}, step {state.step}")
    else:
        torch.manual_seed(t.seed)
        random.seed(t.seed)
    log_path = out / "valid_log.jsonl"
    started = time.monotonic() - state.elapsed_s
    budget_s = None if t.max_minutes is None else t.max_minutes * 60.0

    def save(name: str) -> None:
        if rank != 0:
            return
        state.elapsed_s = time.monotonic() - started
        ts = {"optimizer": optimizer.state_dict(), "rng": _rng_state(),
              "counters": state.__dict__.copy()}
        save_atomic(make_payload(cfg, model, src_vocab, tgt_vocab, ts), out / name)

    def out_of_time() -> bool:
        return budget_s is not None and time.monotonic() - started >= budget_s

    with _StopFlag() as stop:
        while not state.done and state.epoch < t.max_epochs:
            batches = make_batches(train_examples, t.batch_size, t.max_tokens,
                                   shuffle_seed=t.seed * 100_003 + state.epoch)
            if world > 1:
                batches = batches[: len(batches) // world * world][rank::world]
            net.train()
            bar = tqdm(total=len(batches), initial=state.batch_in_epoch,
                       desc=f"epoch {state.epoch + 1}", disable=None if t.progress and rank == 0 else True,
                       dynamic_ncols=True, leave=False)
            text_progress = t.progress and rank == 0 and bar.disable
            tick, tick_tok = time.monotonic(), 0
            for chunk in batches[state.batch_in_epoch:]:
                batch = collate(chunk).to(device)
                loss_sum = net(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out,
                               label_smoothing=t.label_smoothing)
                n_tok = batch.n_tokens
                loss = loss_sum / n_tok
                optimizer.zero_grad(set_to_none=True)
                if not torch.isfinite(loss):
                    if t.on_nonfinite_loss == "stop":
                        raise TrainingError(
                            f"loss is {float(loss)} at step {state.step + 1} (epoch "
                            f"{state.epoch + 1}, batch {state.batch_in_epoch + 1}); nothing was "
                            f"saved over {out / 'last.pt'}. Try a lower train.lr, or "
                            "train.on_nonfinite_loss=skip.")
                    state.skipped_batches += 1
                    log(f"warning: skipped batch {state.batch_in_epoch + 1} of epoch "
                        f"{state.epoch + 1}: loss is {float(loss)}")
                else:
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), t.clip_norm)
                    optimizer.step()
                    state.epoch_loss_sum += loss_sum.item()
                    state.epoch_tokens += n_tok
                state.step += 1
                state.batch_in_epoch += 1
                tick_tok += n_tok
                tok_s = tick_tok / max(time.monotonic() - tick, 1e-9)
                mean_loss = state.epoch_loss_sum / max(state.epoch_tokens, 1)
                bar.update(1)
                bar.set_postfix(loss=f"{mean_loss:.3f}", tok_s=f"{tok_s:.0f}")
                if text_progress and state.batch_in_epoch % 200 == 0:
                    log(f"epoch {state.epoch + 1} batch {state.batch_in_epoch}/{len(batches)}: "
                        f"loss {mean_loss:.3f} nats/token, {tok_s:.0f} target tokens/s")
                if stop.signal is not None:
                    bar.close()
                    state.interrupted = stop.signal
                    save("last.pt")
                    log(f"{stop.signal} received at step {state.step}: saved {out / 'last.pt'}; "
                        "continue with --resume")
                    return state
                if out_of_time():
                    break
            bar.close()
            train_loss = state.epoch_loss_sum / max(state.epoch_tokens, 1)
            if state.batch_in_epoch >= len(batches):
                state.epoch += 1
                state.batch_in_epoch, state.epoch_loss_sum, state.epoch_tokens = 0, 0.0, 0
            record = _validate_and_log(cfg, model, net, valid_examples, validate, device, state,
                                       train_loss, started, rank, log)
            if rank == 0:
                with open(log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(record) + "\n")
            if record["improved"]:
                save("best.pt")
            elif t.patience is not None and state.bad_epochs >= t.patience:
                log(f"early stopping: no val BLEU gain for {t.patience} epochs")
                state.done = True
            if out_of_time():
                log(f"time budget of {t.max_minutes} min reached")
                state.done = True
            if state.epoch >= t.max_epochs:
                state.done = True
            if world > 1:
                flag = torch.tensor([int(state.done)], device=device)
                dist.broadcast(flag, 0)
                state.done = bool(flag.item())
            save("last.pt")
    if world > 1 and dist.is_initialized():
        dist.destroy_process_group()
    return state


def _validate_and_log(cfg: Config, model: Seq2Seq, net: torch.nn.Module,
                      valid_examples: list[Example], validate: Validate,
                      device: torch.device, state: TrainState, train_loss: float,
                      started: float, rank: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Validation loss, perplexity and BLEU; updates best score and patience counters."""
    record: dict[str, Any] = {"epoch": state.epoch, "step": state.step,
                              "train_loss": round(train_loss, 6)}
    if rank == 0:
        val_loss = validation_loss(model, valid_examples, cfg.train.batch_size, device)
        model.eval()
        scores = validate(model)
        record.update(val_loss=round(val_loss, 6), val_ppl=round(math.exp(min(val_loss, 50)), 3),
                      **{f"val_{k}": v for k, v in scores.items()})
    bleu = float(record.get("val_bleu", -1.0))
    improved = rank == 0 and bleu > state.best_bleu
    if improved:
        state.best_bleu, state.bad_epochs = bleu, 0
    else:
        state.bad_epochs += 1
    state.elapsed_s = time.monotonic() - started
    record.update(elapsed_s=round(state.elapsed_s, 1), best_bleu=state.best_bleu,
                  improved=improved)
    if rank == 0:
        log(f"epoch {state.epoch} step {state.step}: train loss {train_loss:.3f} | val loss "
            f"{record['val_loss']:.3f} ppl {record['val_ppl']:.2f} BLEU {bleu:.2f} "
            f"(best {state.best_bleu:.2f}) | {state.elapsed_s / 60:.1f} min")
    net.train()
    return record
