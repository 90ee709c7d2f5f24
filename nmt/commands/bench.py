"""``nmt bench``: training and decoding speed of a config or a checkpoint, with the quality
of that output, the model's FLOPs and the machine's matmul peak, measured in one run
(what each number means: nmt/analysis/bench.py; the table: nmt/analysis/bench_table.py).

Numbers depend on the machine and on what else runs on it; speed targets belong here,
never in the test suite.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from nmt.analysis.bench import measure_decoding, measure_training
from nmt.analysis.bench_options import BenchOptions, Subject, decode_split, training_batches
from nmt.analysis.bench_table import threads_text
from nmt.config.load import load_config
from nmt.data.corpus import DataError
from nmt.data.stored import stored_corpus
from nmt.data.training_data import build_vocabs, training_pairs
from nmt.model.checkpoint import load_checkpoint
from nmt.model.footprint import check_fits
from nmt.model.seq2seq import build_model, count_parameters
from nmt.ops.device import pick_device
from nmt.ops.machine import PEAK_SHAPE, machine_info, matmul_peak_gflop_s
from nmt.ops.precision import autocast_dtype, search_dtype
from nmt.ops.primitive_cache import cap_primitive_caches


def load_subject(opts: BenchOptions, log: Callable[[str], None]) -> Subject:
    """The checkpoint's model and vocabularies, or a config's fresh model with
    SentencePiece trained on its training data (as ``nmt train`` would), on the CPU.

    Raises:
        CheckpointError, ConfigError, DataError: the file, config or corpus is unusable.
    """
    if opts.source.suffix not in (".yaml", ".yml"):  # a .pt checkpoint or a model folder
        loaded = load_checkpoint(opts.source, "cpu")
        data = stored_corpus(loaded.cfg.data, opts.data_path)
        train = None if opts.skip_train else training_pairs(data)[1]
        return Subject(
            "checkpoint", loaded.cfg, loaded.model, loaded.src_vocab, loaded.tgt_vocab, data, train
        )
    cfg = load_config(opts.source, list(opts.overrides))
    data = cfg.data if opts.data_path is None else stored_corpus(cfg.data, opts.data_path)
    raw, train, _ = training_pairs(data)
    if not train:
        raise DataError(f"{opts.source}: no training pairs in split {data.train_split!r}")
    log(f"building the {cfg.subwords.vocab_size}-piece vocabulary on {len(raw)} training pairs")
    src_vocab, tgt_vocab = build_vocabs(cfg, [p for p in raw if p.src and p.tgt], log)
    check_fits(
        cfg.model,
        len(src_vocab),
        len(tgt_vocab),
        torch.device("cpu"),
        training=False,
        where=str(opts.source),
    )
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model, len(src_vocab), len(tgt_vocab))
    return Subject("config", cfg, model, src_vocab, tgt_vocab, data, train)


def run_bench(opts: BenchOptions, log: Callable[[str], None] = lambda _msg: None) -> dict[str, Any]:
    """Everything the module docstring lists, as one JSON-ready dict (see
    :func:`format_table`); sections skipped with ``skip_train`` / ``skip_decode`` are None.

    Raises:
        BenchError, CheckpointError, ConfigError, DataError, DeviceError: bad input, before
            anything is measured.
    """
    opts.check()
    device = pick_device(opts.device, "--device")
    if opts.precision is not None:
        autocast_dtype(opts.precision, device, "--precision")  # refused before any work
    if opts.decode_precision is not None:
        search_dtype(opts.decode_precision, device, "--decode-precision")
    subject = load_subject(opts, log)
    threads = opts.threads or subject.cfg.train.threads
    if threads:
        torch.set_num_threads(threads)
    sources, references = ([], []) if opts.skip_decode else decode_split(subject, opts)
    batches = None if opts.skip_train else training_batches(subject, opts)
    if batches is not None:  # a training measurement: the caps a training run sets, before
        # the peak's bf16 product makes the libraries read them
        cap_primitive_caches(trimmed=subject.cfg.train.batch_trim is not None)
    subject.model.to(device)
    machine = machine_info(device)
    log(f"matmul peak on {machine['device_name']}, {threads_text(machine['torch_threads'])}")
    peaks: dict[str, float | None] = {"fp32": matmul_peak_gflop_s(device, torch.float32)}
    bf16 = machine["cpu_bf16"] if device.type == "cpu" else torch.cuda.is_bf16_supported()
    peaks["bf16"] = matmul_peak_gflop_s(device, torch.bfloat16) if bf16 else None
    result: dict[str, Any] = {
        "source": str(opts.source),
        "kind": subject.kind,
        "name": subject.cfg.name,
        "attention": subject.cfg.model.attention,
        "parameters": count_parameters(subject.model),
        "machine": machine,
        "matmul_peak_gflop_s": {
            "shape": "({0}x{1})@({1}x{2})".format(*PEAK_SHAPE),
            **{k: None if v is None else round(v, 1) for k, v in peaks.items()},
        },
        "decode": None,
        "train": None,
    }
    if not opts.skip_decode:
        log(f"decoding {len(sources)} sentences of {opts.split}: greedy and beam {opts.beam}")
        result["decode"] = measure_decoding(subject, sources, references, opts, device)
    if batches is not None:
        log(
            f"training: {opts.warmup} warm-up steps, {opts.train_steps} timed steps, then a "
            f"{opts.train_seconds:g} s window"
        )
        result["train"] = measure_training(subject, batches, opts, device, peaks)
    return result
