"""The training pipeline: config -> corpus -> SentencePiece -> examples -> model -> train.

``nmt train`` runs it; validation BLEU is computed by translating the validation split
(``search.valid_beam_size``: 1, greedy, by default) and handed to the training loop as a
callable.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import torch
import yaml

from nmt.config.schema import Config
from nmt.data.batches import ExampleSet, TrainingSet, encode_pairs
from nmt.data.corpus import DataError, Pair, read_split
from nmt.data.longsets import long_sentence_set
from nmt.data.noise import SampledExampleSet, Sampling
from nmt.data.splits import require_scorable
from nmt.data.store import filter_stats, open_or_prepare
from nmt.data.training_data import build_vocabs, log_filter, sample_vocab_trainer, training_pairs
from nmt.data.vocab import Vocab
from nmt.evaluation.metrics import score
from nmt.inference.translate import Decoding
from nmt.inference.translator import Translator
from nmt.model.checkpoint import vocabs_of
from nmt.model.footprint import check_fits
from nmt.model.rundir import Resumed, start_run
from nmt.model.seq2seq import build_model, count_parameters
from nmt.ops.device import pick_device
from nmt.ops.files import write_atomic
from nmt.ops.precision import autocast_dtype, search_dtype
from nmt.training.loop import train
from nmt.training.state import TrainState
from nmt.training.summary import write_summary
from nmt.training.validation import Validate

TrainingData = tuple[TrainingSet, list[Pair], Vocab, Vocab]  # train set, val pairs, vocabs


def _memory_training_set(
    cfg: Config, resumed: Resumed | None, log: Callable[[str], None]
) -> TrainingData:
    """Every training pair read, filtered and encoded into a list (``data.store: memory``);
    the vocabulary is the resumed checkpoint's or trained on the split."""
    d = cfg.data
    raw_train, train_pairs, stats = training_pairs(d)
    log_filter(d, stats, log)
    if not train_pairs:
        raise DataError(f"no training pairs left in split {d.train_split!r}")
    valid_pairs = read_split(d, d.valid_split, d.valid_limit)
    require_scorable(valid_pairs, d, d.valid_split, "data.valid_split")
    if resumed is not None:
        src_vocab, tgt_vocab = vocabs_of(*resumed[:2])
    else:  # joined pairs repeat sentences: the vocabulary sees each original pair once
        src_vocab, tgt_vocab = build_vocabs(cfg, [p for p in raw_train if p.src and p.tgt], log)
    sampling = Sampling.from_config(cfg.subwords)
    if sampling is None:
        return (
            ExampleSet(encode_pairs(train_pairs, src_vocab, tgt_vocab)),
            valid_pairs,
            src_vocab,
            tgt_vocab,
        )
    sides = "sources and targets" if sampling.target else "sources"
    log(
        f"subword sampling: every epoch samples the segmentation of the training {sides} "
        f"(alpha {sampling.alpha}, nbest_size {sampling.nbest_size}); validation and "
        "decoding keep the best one"
    )
    return (
        SampledExampleSet(train_pairs, src_vocab, tgt_vocab, sampling),
        valid_pairs,
        src_vocab,
        tgt_vocab,
    )


def _arrow_training_set(
    cfg: Config, resumed: Resumed | None, rank: int, log: Callable[[str], None]
) -> TrainingData:
    """The memory-mapped training store of ``{out_dir}/data/`` (``data.store: arrow``),
    reused when it matches and prepared by rank 0 otherwise (nmt/data/store.py)."""
    d, out = cfg.data, cfg.out_dir()
    valid_pairs = read_split(d, d.valid_split, d.valid_limit)  # small: fail before hours of work
    require_scorable(valid_pairs, d, d.valid_split, "data.valid_split")
    vocabs = vocabs_of(*resumed[:2]) if resumed is not None else None
    opened = open_or_prepare(
        cfg,
        out / "data",
        vocabs=vocabs,
        make_vocabs=sample_vocab_trainer(cfg, log),
        log=log,
        prepare=rank == 0,
    )
    log_filter(d, filter_stats(opened.manifest), log)
    if not len(opened.train_set):
        raise DataError(f"no training pairs left in split {d.train_split!r}")
    src_tok, tgt_tok = opened.train_set.token_counts()
    log(
        f"training store: {len(opened.train_set):,} pairs, {src_tok:,} source and {tgt_tok:,} "
        "target pieces, memory-mapped"
    )
    return opened.train_set, valid_pairs, opened.src_vocab, opened.tgt_vocab


def max_tokens_warning(cfg: Config, train_set: TrainingSet) -> str | None:
    """A warning when ``train.max_tokens`` is below the padded length of every training
    pair: each batch then holds one pair and ``train.batch_size`` cannot act (a batch
    takes its first pair even over the cap, so training still runs). None otherwise."""
    t = cfg.train
    if t.max_tokens is None or t.batch_size == 1 or len(train_set) < 2:
        return None
    batches = train_set.batches(t.batch_size, t.max_tokens, shuffle_seed=None)
    if any(len(b) > 1 for b in batches):
        return None
    return (
        f"warning: train.max_tokens={t.max_tokens} is below the padded length of every "
        f"training pair, so every batch holds a single pair and train.batch_size="
        f"{t.batch_size} cannot act; raise train.max_tokens (a batch of B pairs takes B "
        "times its longest side plus one) or leave it unset"
    )


def _silent(_msg: str) -> None:
    """The log of the ranks other than 0."""


def _validation_bleu(
    cfg: Config, valid_pairs: list[Pair], *, src_vocab: Vocab, tgt_vocab: Vocab
) -> Validate:
    """The training loop's ``validate(model)``: the first ``train.valid_max_sentences``
    pairs of ``valid_pairs`` (all when unset) translated with the
    ``search.valid_beam_size`` decoding and scored, ``{"bleu", "chrf"}``; with
    ``data.valid_join_ks`` their joined long pairs too, ``bleu`` then being the mean of
    both sets' BLEU beside ``bleu_plain``, ``bleu_joined``, ``chrf_joined`` and
    ``len_ratio_joined``. Built here, from inference and evaluation, so training knows
    neither; nothing is translated until it is called."""
    d = cfg.data
    val_src = [p.src for p in valid_pairs][: cfg.train.valid_max_sentences]
    val_ref = [p.tgt for p in valid_pairs][: cfg.train.valid_max_sentences]

    valid_decoding = Decoding.from_config(cfg, beam_size=cfg.search.valid_beam_size)

    joined_val = long_sentence_set(val_src, val_ref, d.valid_join_ks) if d.valid_join_ks else None

    def validate(model) -> dict:
        def bleu_chrf(src: list[str], ref: list[str]):
            translator = Translator(model, src_vocab, tgt_vocab, valid_decoding, batch_size=128)
            hyps = [t.text for t in translator.translate(src)]
            return score(hyps, ref, src, buckets=((1, None),))

        s = bleu_chrf(val_src, val_ref)
        if joined_val is None:
            return {"bleu": round(s.bleu, 2), "chrf": round(s.chrf, 2)}
        j = bleu_chrf(joined_val.sources, joined_val.references)
        # the selection score mixes both, so a model that stops early on long input loses
        return {
            "bleu": round((s.bleu + j.bleu) / 2, 2),
            "bleu_plain": round(s.bleu, 2),
            "chrf": round(s.chrf, 2),
            "bleu_joined": round(j.bleu, 2),
            "chrf_joined": round(j.chrf, 2),
            "len_ratio_joined": round(j.len_ratio or 0.0, 3),
        }

    return validate


def run_training(
    cfg: Config, resume: bool = False, log: Callable[[str], None] = print
) -> TrainState:
    """Train a model as configured; with ``resume`` continue ``{out_dir}/last.pt`` (or,
    when it is gone, the run's latest checkpoint, with a warning; see
    nmt/model/rundir.py). A fresh run never writes into a directory holding an earlier
    run's files.

    Raises:
        DataError, CheckpointError, ConfigError, TrainingError.
    """
    rank = int(os.environ.get("RANK", "0"))  # under torchrun only rank 0 talks and writes
    if rank != 0:
        log = _silent
    # an unavailable device or precision fails now, before any work (search's too: the
    # first validation would otherwise fail after a whole epoch)
    device = pick_device(cfg.train.device)
    autocast_dtype(cfg.train.precision, device)
    search_dtype(cfg.search.precision, device)
    out = cfg.out_dir()
    cfg, resumed = start_run(cfg, out, resume=resume, rank=rank, log=log)
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    if cfg.data.store == "arrow":
        train_set, valid_pairs, src_vocab, tgt_vocab = _arrow_training_set(cfg, resumed, rank, log)
    else:
        train_set, valid_pairs, src_vocab, tgt_vocab = _memory_training_set(cfg, resumed, log)
    log(f"vocabulary: {len(src_vocab)} source / {len(tgt_vocab)} target pieces")
    if warning := max_tokens_warning(cfg, train_set):
        log(warning)
    valid_ex = encode_pairs([p for p in valid_pairs if p.src and p.tgt], src_vocab, tgt_vocab)
    check_fits(
        cfg.model, len(src_vocab), len(tgt_vocab), device, training=True, where=f"run {cfg.name}"
    )  # before torch's allocator fails mid-build
    torch.manual_seed(cfg.train.seed)  # the initial weights depend on the seed only
    model = build_model(cfg.model, len(src_vocab), len(tgt_vocab))
    log(
        f"model: {cfg.model.attention} attention, {cfg.model.step_order} step order, "
        f"{count_parameters(model):,} parameters"
    )
    out.mkdir(parents=True, exist_ok=True)
    if rank == 0:
        write_atomic(out / "config.yaml", yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    validate = _validation_bleu(cfg, valid_pairs, src_vocab=src_vocab, tgt_vocab=tgt_vocab)
    state = train(
        cfg,
        model,
        src_vocab,
        tgt_vocab,
        train_set=train_set,
        valid_examples=valid_ex,
        validate=validate,
        resume=resumed[0] if resumed else None,
        resume_path=resumed[1] if resumed else None,
        log=log,
    )
    if rank != 0:
        return state
    write_summary(
        out / "summary.json",
        cfg,
        state,
        parameters=count_parameters(model),
        device=device,
        command="nmt " + " ".join(sys.argv[1:]),
    )
    return state


def undertrained_warning(cfg: Config, state: TrainState) -> str | None:
    """A warning when the time budget (``train.max_minutes``) ended the run before its first
    full epoch: such a model scores far below a trained one (from 0 to a third of it on the
    quick start, with the steps a busy CPU allows), which a reader of the scores alone would
    take for a broken tool. It names the best val BLEU so far. None otherwise."""
    minutes = cfg.train.max_minutes
    if (
        state.interrupted is not None
        or state.epoch > 0
        or minutes is None
        or state.elapsed_s < minutes * 60
    ):
        return None
    return (
        f"warning: the time budget (train.max_minutes={minutes:g}) ran out after "
        f"{state.step} steps, before one full epoch: this model is barely trained (val "
        f"BLEU {state.best_bleu_text()}) and scores far below a trained one. A busy or slow "
        "CPU gives fewer steps per minute; continue "
        "with --resume and a larger train.max_minutes"
    )
