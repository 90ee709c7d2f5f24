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
import os
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from nmt.config.schema import Config
from nmt.data.batches import Example, ExampleSet, TrainingSet
from nmt.data.noise import drop_words, step_generator
from nmt.data.vocab import Vocab
from nmt.model.checkpoint import make_payload, new_run_id, run_id_of, save_atomic
from nmt.model.rundir import BEST, LAST, LOG, STEP_GLOB, step_name
from nmt.model.seq2seq import Seq2Seq
from nmt.ops.files import append_line
from nmt.ops.precision import autocast
from nmt.ops.primitive_cache import cap_primitive_caches
from nmt.training.ddp import check_ranks_agree, from_rank0, setup_device, teardown, wrapped
from nmt.training.precision_choice import training_precision
from nmt.training.progress import EpochProgress
from nmt.training.schedule import Schedule
from nmt.training.state import StopFlag, TrainingError, TrainState, restore_train_state, train_state
from nmt.training.validation import Validate, validate_and_log


class Trainer:
    """Holds one run's model, optimizer, schedule and counters; :meth:`run` trains.

    Per-epoch batch order depends only on the seed and the epoch number, and the random
    state is saved with every checkpoint, so a resumed run repeats the uninterrupted one.
    """

    def __init__(
        self,
        cfg: Config,
        model: Seq2Seq,
        src_vocab: Vocab,
        tgt_vocab: Vocab,
        *,
        train_set: TrainingSet | list[Example],
        valid_examples: list[Example],
        validate: Validate,
        log: Callable[[str], None],
    ):
        self.cfg, self.t, self.model = cfg, cfg.train, model
        self.vocabs = (src_vocab, tgt_vocab)
        self.train_set: TrainingSet = (
            ExampleSet(train_set) if isinstance(train_set, list) else train_set
        )
        self.valid_examples = valid_examples
        self.validate, self.log = validate, log
        self.out = cfg.out_dir()
        self.out.mkdir(parents=True, exist_ok=True)
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        # before the run's first bf16 product, which is when oneDNN and ideep read the caps
        cap_primitive_caches(trimmed=self.t.batch_trim is not None)
        self.device = setup_device(self.t.device, self.world)
        self.net = wrapped(model.to(self.device), self.world, self.device)
        # fused: one kernel for the whole update instead of ~10 elementwise passes per tensor
        self.optimizer = torch.optim.Adam(model.parameters(), lr=self.t.lr, fused=True)
        self.amp_dtype = training_precision(
            cfg, model, self.train_set, self.device, shared=self._shared, log=log
        )
        # fp16's narrow range needs loss scaling; bf16 has fp32's range and needs none
        self.scaler = torch.amp.GradScaler("cuda") if self.amp_dtype == torch.float16 else None
        on_cpu_autocast = self.amp_dtype is not None and self.device.type == "cpu"
        self.batch_trim = self.t.batch_trim if on_cpu_autocast else None  # else no effect
        self.schedule = Schedule(self.optimizer, self.t)
        self.state = TrainState()
        self.run_id = new_run_id()  # every checkpoint of this run carries it (averaging)
        self.started = time.monotonic()
        self.batches_per_epoch = 1  # set by each epoch; for the fractional-epoch log

    def restore(self, payload: dict[str, Any], path: Path) -> None:
        """Continue from a checkpoint payload written by :meth:`save` (already checked by
        :func:`nmt.model.checkpoint.read_payload`), read from ``path``; the run keeps its
        run id (a checkpoint older than run ids gives the run a new one).

        Raises:
            CheckpointError: the weights, optimizer state, random state or counters do not
                fit this run (a damaged or foreign file).
        """
        self.state = restore_train_state(
            payload, path, self.model, self.optimizer, self.schedule, self.scaler
        )
        self.run_id = run_id_of(payload) or self.run_id
        self.state.interrupted = None
        self.started = time.monotonic() - self.state.elapsed_s
        st = self.state
        self.log(st.resumed_text())
        if st.done and self._budget_left():
            # a finished run whose budget was extended on --resume (max_epochs, ...)
            st.done = False
            self.log("the run had finished; continuing with the extended budget")
        elif st.done:
            self.log(
                "the run has finished and its budget is spent: nothing to do (extend it "
                "with e.g. train.max_steps=N, train.max_epochs=N or train.max_minutes=M)"
            )

    def _budget_left(self) -> bool:
        """Whether epochs, minutes and patience all allow more training."""
        st, t = self.state, self.t
        return (
            st.epoch < t.max_epochs
            and not self.out_of_time()
            and (t.max_steps is None or st.step < t.max_steps)
            and not st.patience_spent(t.patience)
        )

    def save(self, name: str) -> None:
        """Write a resumable checkpoint ``{out_dir}/{name}`` (rank 0 only)."""
        if self.rank != 0:
            return
        self.state.elapsed_s = time.monotonic() - self.started
        ts = train_state(self.optimizer, self.schedule, self.scaler, self.state)
        save_atomic(
            make_payload(self.cfg, self.model, *self.vocabs, train_state=ts, run_id=self.run_id),
            self.out / name,
        )

    def _shared(self, value: float) -> float:
        """Rank 0's ``value`` on every rank (:func:`nmt.training.ddp.from_rank0`). Every
        decision taken from validation or the clock goes through here, so that all ranks
        take it together and keep identical weights."""
        return from_rank0(value, self.world, self.device)

    def _out_of_time_shared(self) -> bool:
        return bool(self._shared(float(self.out_of_time())))

    def out_of_time(self) -> bool:
        """True when the rest of the budget is needed for the final validation."""
        return (
            self.t.max_minutes is not None
            and time.monotonic() - self.started + self.state.last_valid_s
            >= self.t.max_minutes * 60.0
        )

    def _epochs_done(self) -> float:
        """Completed epochs, with the fraction of the current one."""
        return self.state.epoch + self.state.batch_in_epoch / max(self.batches_per_epoch, 1)

    def _batches(self) -> Sequence[Any]:
        batches = self.train_set.batches(
            self.t.batch_size,
            self.t.max_tokens,
            shuffle_seed=self.t.seed * 100_003 + self.state.epoch,
            trim=self.batch_trim,
        )
        if self.world > 1:
            batches = batches[: len(batches) // self.world * self.world][self.rank :: self.world]
        return batches

    def train_step(self, chunk: Any) -> int:
        """One teacher-forced step on one batch, an item of the training set's ``batches``
        (``train.batch_multiple`` pads it under CPU autocast; forward, label-smoothed loss
        per target token, backward, clipping, Adam, LR schedule); returns its ``n_tokens``.

        Raises:
            TrainingError: the loss is NaN or infinite and ``train.on_nonfinite_loss`` is stop.
        """
        st, t = self.state, self.t
        batch = self.train_set.collate(chunk)
        if self.cfg.model.word_dropout:  # off: no draw at all, so runs stay bit-identical
            batch = drop_words(
                batch,
                self.cfg.model.word_dropout,
                target=self.cfg.model.word_dropout_target,
                generator=step_generator(t.seed, st.step, self.rank),
            )
        batch = batch.to(self.device)
        with autocast(self.device, self.amp_dtype):
            batch = batch.for_stable_shapes(t.batch_multiple)  # oneDNN: few shapes
            loss_sum = self.net(
                batch.src,
                batch.src_len,
                batch.tgt_in,
                batch.tgt_out,
                label_smoothing=t.label_smoothing,
            )  # fp32
        n_tok = batch.n_tokens
        loss = loss_sum / n_tok
        self.optimizer.zero_grad(set_to_none=True)
        if not torch.isfinite(loss):
            if t.on_nonfinite_loss == "stop":
                raise TrainingError(
                    f"loss is {loss.item()} at step {st.step + 1} (epoch {st.epoch + 1}, batch "
                    f"{st.batch_in_epoch + 1}); nothing was saved over {self.out / 'last.pt'}. "
                    "Try a lower train.lr, or train.on_nonfinite_loss=skip."
                )
            st.skipped_batches += 1
            self.log(
                f"warning: skipped batch {st.batch_in_epoch + 1} of epoch {st.epoch + 1}: "
                f"loss is {loss.item()}"
            )
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

    def _epoch(self, stop: StopFlag) -> bool:
        """Train the rest of the current epoch; False when interrupted by a signal."""
        st, t = self.state, self.t
        batches = self._batches()
        self.batches_per_epoch = len(batches)
        self.net.train()
        bar = EpochProgress(
            len(batches),
            st.batch_in_epoch,
            st.epoch,
            show=bool(t.progress and self.rank == 0),
            log=self.log,
        )
        for chunk in batches[st.batch_in_epoch :]:
            n_tok = self.train_step(chunk)
            bar.update(n_tok, st.batch_in_epoch, st.epoch_loss_sum / max(st.epoch_tokens, 1))
            if stop.signal is not None:
                bar.close()
                st.interrupted = stop.signal
                self.save(LAST)
                self.log(
                    f"{stop.signal} received at step {st.step}: saved "
                    f"{self.out / 'last.pt'}; continue with --resume"
                )
                return False
            if self._out_of_time_shared() or (t.max_steps is not None and st.step >= t.max_steps):
                break
            if (
                t.valid_every_steps
                and st.step % t.valid_every_steps == 0
                and st.batch_in_epoch < len(batches)
            ):
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
        record = validate_and_log(
            self.cfg,
            self.model,
            net=self.net,
            valid_examples=self.valid_examples,
            validate=self.validate,
            device=self.device,
            state=st,
            train_loss=train_loss,
            started=self.started,
            rank=self.rank,
            log=self.log,
            epochs_done=self._epochs_done(),
            shared=self._shared,
        )
        st.last_valid_s = self._shared(time.monotonic() - began)
        record["lr"] = self.optimizer.param_groups[0]["lr"]
        record["run_id"] = self.run_id  # a record of another run is told apart (rundir.py)
        if self.rank == 0:
            append_line(self.out / LOG, json.dumps(record))
        self.schedule.after_validation(float(record.get("val_bleu", -1.0)))
        if record["improved"]:
            self.save(BEST)
        elif st.patience_spent(t.patience):
            self.log(f"early stopping: no val BLEU gain for {t.patience} validations")
            st.done = True
        if self._out_of_time_shared():
            self.log(f"time budget of {t.max_minutes} min reached")
            st.done = True
        if st.epoch >= t.max_epochs:
            st.done = True
        if t.max_steps is not None and st.step >= t.max_steps:
            self.log(f"step budget of {t.max_steps} step{'' if t.max_steps == 1 else 's'} reached")
            st.done = True
        st.done = bool(self._shared(float(st.done)))  # rank 0's decision, on every rank
        # step_N.pt before last.pt: a kill between them leaves last.pt at the previous
        # validation, so --resume trains step N again and writes both (the other order
        # would resume a finished run whose step_N.pt is missing for good)
        if t.keep_checkpoints and self.rank == 0:
            self.save(step_name(st.step))
        self.save(LAST)
        self._prune_steps()

    def _prune_steps(self) -> None:
        """Delete the ``step_*.pt`` beyond the newest ``train.keep_checkpoints``."""
        keep = self.t.keep_checkpoints
        if keep and self.rank == 0:
            for old in sorted(self.out.glob(STEP_GLOB))[:-keep]:
                old.unlink()

    def run(self) -> TrainState:
        """Train until the epoch or time budget, early stopping, or a signal."""
        if self.state.done:  # resumed with its budget spent: record the config it now has
            self.save(LAST)
            self._prune_steps()  # a kill between last.pt and the pruning left one more
        with StopFlag() as stop:
            while not self.state.done and self.state.epoch < self.t.max_epochs:
                if not self._epoch(stop):
                    break
        if self.world > 1 and dist.is_initialized():
            check_ranks_agree(
                self.model,
                self.optimizer.param_groups[0]["lr"],
                self.state.step,
                self.world,
                self.device,
                self.log,
            )
            # the DDP wrapper's reducer holds the process group: free it while the group
            # is alive, not at interpreter exit, where gloo's threads may abort the process
            self.net = self.model
            teardown(self.rank, self.world)
        return self.state


def train(
    cfg: Config,
    model: Seq2Seq,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    train_set: TrainingSet | list[Example],
    valid_examples: list[Example],
    validate: Validate,
    resume: dict[str, Any] | None = None,
    resume_path: Path | None = None,
    log: Callable[[str], None] = print,
) -> TrainState:
    """Train ``model`` until the epoch/time budget or early stopping; returns the counters.

    Args:
        train_set: the training pairs, a list of examples or any :class:`TrainingSet`
            (e.g. the memory-mapped store of nmt/data/store.py).
        validate: called with the model in eval mode at every validation (each epoch, and
            every ``train.valid_every_steps`` steps); returns a dict with ``bleu`` (0-100).
        resume: a checkpoint payload whose ``train_state`` is continued (with its run id).
        resume_path: the file ``resume`` was read from, for messages (default
            ``{out_dir}/last.pt``).

    Raises:
        TrainingError: a NaN or infinite loss (names the step); nothing is saved over
            the last good checkpoint.
        CheckpointError: a checkpoint cannot be written (e.g. disk full).
    """
    trainer = Trainer(
        cfg,
        model,
        src_vocab,
        tgt_vocab,
        train_set=train_set,
        valid_examples=valid_examples,
        validate=validate,
        log=log,
    )
    if resume is not None:
        trainer.restore(resume, resume_path or cfg.out_dir() / LAST)
    else:
        torch.manual_seed(cfg.train.seed)
        random.seed(cfg.train.seed)
    return trainer.run()
