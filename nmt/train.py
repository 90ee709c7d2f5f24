"""The training loop: teacher forcing, Adam, clipping, validation, early stopping, resume.

Validation every epoch, the best checkpoint by validation BLEU, early stopping, a
wall-clock budget and exact resume.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from tqdm import tqdm

from nmt.checkpoint import CheckpointError, make_payload, save_atomic, weights_mismatch
from nmt.config import Config
from nmt.data import Example, ExampleSet, TrainingSet, collate, make_batches
from nmt.model import Seq2Seq
from nmt.precision import autocast, autocast_dtype, native_bf16, precision_name
from nmt.schedule import Schedule
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
    last_valid_s: float = 0.0  # duration of the last validation, reserved from the budget
    interrupted: str | None = None  # SIGINT / SIGTERM when the run was stopped by a signal
    done: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)

    def best_bleu_text(self) -> str:
        """The best validation BLEU for messages ("32.10"), or "none yet" before the first
        validation (``best_bleu`` is then -1)."""
        return "none yet" if self.best_bleu < 0 else f"{self.best_bleu:.2f}"


class DeviceError(ValueError):
    """A requested device does not exist on this machine; the message names the option."""


def pick_device(name: str, option: str = "train.device") -> torch.device:
    """``auto`` is CUDA when present, else CPU; ``cpu``, ``cuda`` and ``cuda:N`` are checked.

    Raises:
        DeviceError: CUDA was asked for but is not available (or ``N`` is not a device),
            or ``name`` is not a device; the message names ``option``.
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise DeviceError(f"{option}: {name!r} is not a device; use auto, cpu, cuda or "
                          "cuda:N") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(f"{option}: CUDA requested ({name!r}) but not available on this "
                              f"machine (torch {torch.__version__}); use {option.split('=')[0]}"
                              f"{'=' if option.startswith('train.') else ' '}cpu or auto")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceError(f"{option}: {name!r} but this machine has "
                              f"{torch.cuda.device_count()} CUDA device(s)")
    elif device.type != "cpu":
        raise DeviceError(f"{option}: {name!r} is not supported; use auto, cpu, cuda or cuda:N")
    return device


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


class Trainer:
    """Holds one run's model, optimizer, schedule and counters; :meth:`run` trains.

    Per-epoch batch order depends only on the seed and the epoch number, and the random
    state is saved with every checkpoint, so a resumed run repeats the uninterrupted one.
    """

    def __init__(self, cfg: Config, model: Seq2Seq, src_vocab: Vocab, tgt_vocab: Vocab,
                 train_set: TrainingSet | list[Example], valid_examples: list[Example],
                 validate: Validate, log: Callable[[str], None]):
        self.cfg, self.t, self.model = cfg, cfg.train, model
        self.vocabs = (src_vocab, tgt_vocab)
        self.train_set: TrainingSet = (ExampleSet(train_set) if isinstance(train_set, list)
                                       else train_set)
        self.valid_examples = valid_examples
        self.validate, self.log = validate, log
        self.out = cfg.out_dir()
        self.out.mkdir(parents=True, exist_ok=True)
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.device = self._setup_device()
        model.to(self.device)
        self.net: torch.nn.Module = model
        if self.world > 1:
            self.net = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        # fused: one kernel for the whole update instead of ~10 elementwise passes per tensor
        self.optimizer = torch.optim.Adam(model.parameters(), lr=self.t.lr, fused=True)
        self.amp_dtype = autocast_dtype(self.t.precision, self.device)
        # fp16's narrow range needs loss scaling; bf16 has fp32's range and needs none
        self.scaler = (torch.amp.GradScaler("cuda") if self.amp_dtype == torch.float16
                       else None)
        log(f"training precision: {precision_name(self.amp_dtype)} "
            f"(train.precision={self.t.precision})")
        search = autocast_dtype(cfg.search.precision, self.device, "search.precision")
        log(f"search precision (validation, evaluate, translate): {precision_name(search)} "
            f"(search.precision={cfg.search.precision})")
        if self.amp_dtype == torch.bfloat16 and not native_bf16(self.device):
            log("warning: train.precision=bf16 on a device without native bf16 matrix "
                "multiplies: emulated, and far slower than fp32 (about 20x on an AVX2 CPU); "
                "train.precision=auto chooses fp32 here")
        self.schedule = Schedule(self.optimizer, self.t)
        self.state = TrainState()
        self.started = time.monotonic()
        self.batches_per_epoch = 1  # set by each epoch; for the fractional-epoch log

    def _setup_device(self) -> torch.device:
        device = pick_device(self.t.device)
        if self.world > 1:
            if device.type == "cuda":
                device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
                torch.cuda.set_device(device)
            if not dist.is_initialized():
                dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        return device

    def restore(self, payload: dict[str, Any]) -> None:
        """Continue from a checkpoint payload written by :meth:`save` (already checked by
        :func:`nmt.checkpoint.read_payload`).

        Raises:
            CheckpointError: the weights, optimizer state, random state or counters do not
                fit this run (a damaged or foreign file).
        """
        ts = payload["train_state"]
        why = weights_mismatch(self.model, payload["model"])
        if why:
            raise CheckpointError(f"{self.out / 'last.pt'}: cannot resume: {why}")
        try:
            self.model.load_state_dict(payload["model"])
            self.optimizer.load_state_dict(ts["optimizer"])
            self.schedule.load_state_dict(ts.get("schedule"))
            if self.scaler is not None and ts.get("grad_scaler"):
                self.scaler.load_state_dict(ts["grad_scaler"])
            _set_rng_state(ts["rng"])
            self.state = TrainState(**ts["counters"])
        except (RuntimeError, ValueError, TypeError, KeyError) as e:
            why = str(e).strip().splitlines()[0][:200]
            raise CheckpointError(f"{self.out / 'last.pt'}: cannot resume from this checkpoint "
                                  f"({type(e).__name__}: {why})") from None
        self.state.interrupted = None
        self.started = time.monotonic() - self.state.elapsed_s
        st = self.state
        self.log(f"resumed at step {st.step}: {st.epoch} epoch(s) and {st.batch_in_epoch} "
                 f"batch(es) of epoch {st.epoch + 1} done, {st.elapsed_s / 60:.1f} min trained, "
                 f"best val BLEU {st.best_bleu_text()}")
        if st.done and self._budget_left():
            # a finished run whose budget was extended on --resume (max_epochs, ...)
            st.done = False
            self.log("the run had finished; continuing with the extended budget")
        elif st.done:
            self.log("the run has finished and its budget is spent: nothing to do (extend it "
                     "with e.g. train.max_steps=N, train.max_epochs=N or train.max_minutes=M)")

    def _budget_left(self) -> bool:
        """Whether epochs, minutes and patience all allow more training."""
        st, t = self.state, self.t
        return (st.epoch < t.max_epochs and not self.out_of_time()
                and (t.max_steps is None or st.step < t.max_steps)
                and (t.patience is None or st.bad_epochs < t.patience))

    def save(self, name: str) -> None:
        """Write a resumable checkpoint ``{out_dir}/{name}`` (rank 0 only)."""
        if self.rank != 0:
            return
        self.state.elapsed_s = time.monotonic() - self.started
        ts = {"optimizer": self.optimizer.state_dict(), "schedule": self.schedule.state_dict(),
              "rng": _rng_state(), "counters": self.state.__dict__.copy()}
        if self.scaler is not None:
            ts["grad_scaler"] = self.scaler.state_dict()
        save_atomic(make_payload(self.cfg, self.model, *self.vocabs, ts), self.out / name)

    def _shared(self, value: float) -> float:
        """Rank 0's ``value``, on every rank (under torchrun); a no-op on one process.
        Every decision taken from validation or the clock goes through here, so that all
        ranks take it together and keep identical weights."""
        if self.world == 1:
            return value
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.broadcast(t, 0)
        return float(t.item())

    def _out_of_time_shared(self) -> bool:
        return bool(self._shared(float(self.out_of_time())))

    def out_of_time(self) -> bool:
        """True when the rest of the budget is needed for the final validation."""
        return (self.t.max_minutes is not None
                and time.monotonic() - self.started + self.state.last_valid_s
                >= self.t.max_minutes * 60.0)

    def _epochs_done(self) -> float:
        """Completed epochs, with the fraction of the current one."""
        return self.state.epoch + self.state.batch_in_epoch / max(self.batches_per_epoch, 1)

    def _batches(self) -> Sequence[Any]:
        batches = self.train_set.batches(self.t.batch_size, self.t.max_tokens,
                                         shuffle_seed=self.t.seed * 100_003 + self.state.epoch)
        if self.world > 1:
            batches = batches[: len(batches) // self.world * self.world][self.rank::self.world]
        return batches

    def train_step(self, chunk: Any) -> int:
        """One teacher-forced step on one batch, an item of the training set's ``batches``
        (forward, label-smoothed cross-entropy per target token, backward, gradient
        clipping, Adam, LR schedule); returns the batch's number of target tokens.

        Raises:
            TrainingError: the loss is NaN or infinite and ``train.on_nonfinite_loss`` is stop.
        """
        st, t = self.state, self.t
        batch = self.train_set.collate(chunk).to(self.device)
        with autocast(self.device, self.amp_dtype):
            loss_sum = self.net(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out,
                                label_smoothing=t.label_smoothing)  # fp32
        n_tok = batch.n_tokens
        loss = loss_sum / n_tok
        self.optimizer.zero_grad(set_to_none=True)
        if not torch.isfinite(loss):
            if t.on_nonfinite_loss == "stop":
                raise TrainingError(
                    f"loss is {loss.item()} at step {st.step + 1} (epoch {st.epoch + 1}, batch "
                    f"{st.batch_in_epoch + 1}); nothing was saved over {self.out / 'last.pt'}. "
                    "Try a lower train.lr, or train.on_nonfinite_loss=skip.")
            st.skipped_batches += 1
            self.log(f"warning: skipped batch {st.batch_in_epoch + 1} of epoch {st.epoch + 1}: "
                     f"loss is {loss.item()}")
        else:
            if self.scaler is None:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.clip_norm)
                self.optimizer.step()
            else:
                self.scaler.scale(loss).backward()
                self.scaler.unscale_(self.optimizer)  # clip the true gradients
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.clip_norm)
                self.scaler.step(self.optimizer)
                self.scaler.update()
            self.schedule.after_step()
            st.epoch_loss_sum += loss_sum.item()
            st.epoch_tokens += n_tok
        st.step += 1
        st.batch_in_epoch += 1
        return n_tok

    def _epoch(self, stop: _StopFlag) -> bool:
        """Train the rest of the current epoch; False when interrupted by a signal."""
        st, t = self.state, self.t
        batches = self._batches()
        self.batches_per_epoch = len(batches)
        self.net.train()
        bar = tqdm(total=len(batches), initial=st.batch_in_epoch, desc=f"epoch {st.epoch + 1}",
                   disable=None if t.progress and self.rank == 0 else True,
                   dynamic_ncols=True, leave=False)
        text_progress = t.progress and self.rank == 0 and bar.disable
        tick, tick_tok = time.monotonic(), 0
        for chunk in batches[st.batch_in_epoch:]:
            tick_tok += self.train_step(chunk)
            tok_s = tick_tok / max(time.monotonic() - tick, 1e-9)
            mean_loss = st.epoch_loss_sum / max(st.epoch_tokens, 1)
            bar.update(1)
            bar.set_postfix(loss=f"{mean_loss:.3f}", tok_s=f"{tok_s:.0f}")
            if text_progress and st.batch_in_epoch % 50 == 0:
                self.log(f"epoch {st.epoch + 1} batch {st.batch_in_epoch}/{len(batches)}: loss "
                         f"{mean_loss:.3f} nats/token, {tok_s:.0f} target tokens/s")
            if stop.signal is not None:
                bar.close()
                st.interrupted = stop.signal
                self.save("last.pt")
                self.log(f"{stop.signal} received at step {st.step}: saved "
                         f"{self.out / 'last.pt'}; continue with --resume")
                return False
            if self._out_of_time_shared() or (t.max_steps is not None
                                              and st.step >= t.max_steps):
                break
            if (t.valid_every_steps and st.step % t.valid_every_steps == 0
                    and st.batch_in_epoch < len(batches)):
                self._checkpoint_and_validate(st.epoch_loss_sum / max(st.epoch_tokens, 1))
                if st.done:
                    break
        bar.close()
        train_loss = st.epoch_loss_sum / max(st.epoch_tokens, 1)
        if st.batch_in_epoch >= len(batches):
            st.epoch += 1
            st.batch_in_epoch, st.epoch_loss_sum, st.epoch_tokens = 0, 0.0, 0
        if not st.done:
            self._checkpoint_and_validate(train_loss)
        return True

    def _checkpoint_and_validate(self, train_loss: float) -> None:
        """Validate, log, keep the best checkpoint, decide on stopping, save last.pt."""
        st, t = self.state, self.t
        began = time.monotonic()
        record = _validate_and_log(self.cfg, self.model, self.net, self.valid_examples,
                                   self.validate, self.device, st, train_loss, self.started,
                                   self.rank, self.log, self._epochs_done(), self._shared)
        st.last_valid_s = self._shared(time.monotonic() - began)
        record["lr"] = self.optimizer.param_groups[0]["lr"]
        if self.rank == 0:
            with open(self.out / "valid_log.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        self.schedule.after_validation(float(record.get("val_bleu", -1.0)))
        if record["improved"]:
            self.save("best.pt")
        elif t.patience is not None and st.bad_epochs >= t.patience:
            self.log(f"early stopping: no val BLEU gain for {t.patience} validations")
            st.done = True
        if self._out_of_time_shared():
            self.log(f"time budget of {t.max_minutes} min reached")
            st.done = True
        if st.epoch >= t.max_epochs:
            st.done = True
        if t.max_steps is not None and st.step >= t.max_steps:
            self.log(f"step budget of {t.max_steps} step{'' if t.max_steps == 1 else 's'} "
                     "reached")
            st.done = True
        if self.world > 1:
            flag = torch.tensor([int(st.done)], device=self.device)
            dist.broadcast(flag, 0)
            st.done = bool(flag.item())
        self.save("last.pt")
        if t.keep_checkpoints and self.rank == 0:
            self.save(f"step_{st.step:08d}.pt")
            for old in sorted(self.out.glob("step_*.pt"))[: -t.keep_checkpoints]:
                old.unlink()

    def _check_ranks_agree(self) -> None:
        """Compare a checksum of the weights and the learning rate across ranks; rank 0
        logs that they agree, or every rank raises TrainingError."""
        with torch.no_grad():
            total = sum(p.double().sum() * (i + 1) for i, p in
                        enumerate(self.model.parameters()))
        mine = torch.tensor([float(total), self.optimizer.param_groups[0]["lr"],
                             float(self.state.step)], dtype=torch.float64, device=self.device)
        gathered = [torch.zeros_like(mine) for _ in range(self.world)]
        dist.all_gather(gathered, mine)
        if any(not torch.equal(g, gathered[0]) for g in gathered):
            raise TrainingError("ranks disagree at the end of training (weights checksum, lr, "
                                f"step per rank: {[g.tolist() for g in gathered]})")
        self.log(f"ranks agree: identical weights, learning rate and step on {self.world} ranks")

    def run(self) -> TrainState:
        """Train until the epoch or time budget, early stopping, or a signal."""
        if self.state.done:  # resumed with its budget spent: record the config it now has
            self.save("last.pt")
        with _StopFlag() as stop:
            while not self.state.done and self.state.epoch < self.t.max_epochs:
                if not self._epoch(stop):
                    break
        if self.world > 1 and dist.is_initialized():
            self._check_ranks_agree()
            dist.barrier()  # rank 0 may still be writing; tearing down under it aborts gloo
            # the DDP wrapper's reducer holds the process group: free it while the group
            # is alive, not at interpreter exit, where gloo's threads may abort the process
            self.net = self.model
            dist.destroy_process_group()
        return self.state


def train(cfg: Config, model: Seq2Seq, src_vocab: Vocab, tgt_vocab: Vocab,
          train_set: TrainingSet | list[Example], valid_examples: list[Example],
          validate: Validate, resume: dict[str, Any] | None = None,
          log: Callable[[str], None] = print) -> TrainState:
    """Train ``model`` until the epoch/time budget or early stopping; returns the counters.

    Args:
        train_set: the training pairs, a list of examples or any :class:`TrainingSet`
            (e.g. the memory-mapped store of nmt/store.py).
        validate: called with the model in eval mode at every validation (each epoch, and
            every ``train.valid_every_steps`` steps); returns a dict with ``bleu`` (0-100).
        resume: a checkpoint payload whose ``train_state`` is continued.

    Raises:
        TrainingError: a NaN or infinite loss (names the step); nothing is saved over
            the last good checkpoint.
        CheckpointError: a checkpoint cannot be written (e.g. disk full).
    """
    trainer = Trainer(cfg, model, src_vocab, tgt_vocab, train_set, valid_examples,
                      validate, log)
    if resume is not None:
        trainer.restore(resume)
    else:
        torch.manual_seed(cfg.train.seed)
        random.seed(cfg.train.seed)
    return trainer.run()


def _validate_and_log(cfg: Config, model: Seq2Seq, net: torch.nn.Module,
                      valid_examples: list[Example], validate: Validate,
                      device: torch.device, state: TrainState, train_loss: float,
                      started: float, rank: int, log: Callable[[str], None],
                      epochs_done: float, shared: Callable[[float], float] = lambda x: x
                      ) -> dict[str, Any]:
    """Validation loss, perplexity and BLEU; updates best score and patience counters.

    Rank 0 validates; ``shared`` gives its BLEU to every rank, so the best score, patience
    and the LR schedule are decided once and agree on all ranks."""
    record: dict[str, Any] = {"epoch": state.epoch, "epochs_done": round(epochs_done, 3),
                              "step": state.step,
                              "train_loss": round(train_loss, 6)}
    if rank == 0:
        val_loss = validation_loss(model, valid_examples, cfg.train.batch_size, device)
        model.eval()
        scores = validate(model)
        record.update(val_loss=round(val_loss, 6), val_ppl=round(math.exp(min(val_loss, 50)), 3),
                      **{f"val_{k}": v for k, v in scores.items()})
    bleu = shared(float(record.get("val_bleu", -1.0)))
    record["val_bleu"] = bleu  # rank 0's score, on every rank
    improved = bleu > state.best_bleu
    if improved:
        state.best_bleu, state.bad_epochs = bleu, 0
    else:
        state.bad_epochs += 1
    state.elapsed_s = time.monotonic() - started
    record.update(elapsed_s=round(state.elapsed_s, 1), best_bleu=state.best_bleu,
                  improved=improved)
    if rank == 0:
        log(f"{epochs_done:.2f} epochs, step {state.step}: train loss {train_loss:.3f} | val loss "
            f"{record['val_loss']:.3f} ppl {record['val_ppl']:.2f} BLEU {bleu:.2f} "
            f"(best {state.best_bleu:.2f}) | {state.elapsed_s / 60:.1f} min")
    net.train()
    return record
