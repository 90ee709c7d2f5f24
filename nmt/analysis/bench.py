"""What ``nmt bench`` measures (composed in nmt/commands/bench.py): training and decoding
speed of a config or a checkpoint, with the quality of that output, the model's FLOPs and
the machine's matmul peak, measured in one run.

``CONFIG`` (YAML, with ``key=value`` overrides as ``nmt train``) builds the vocabulary on
the config's training data and a fresh model (its BLEU is about 0: meaningful only for a
checkpoint); ``CHECKPOINT`` (``.pt``) uses its weights and vocabularies. Measured, in
this order, on the device a run would use:

1. the machine: CPU model and flags (AVX-512, bf16), torch version and threads, device;
   the matmul peak: best of several timings of ``torch.mm`` (512x512)@(512x4096) in fp32,
   and in bf16 where the CPU has bf16 instructions or on CUDA, with the same threads;
2. decoding (first, so a checkpoint's own weights are used): greedy and beam search
   sentences/s on the first ``sentences`` of a named split, in batches of ``batch_size``
   sentences, ``workers`` batches at once (:class:`nmt.inference.translator.Translator`; default
   one per CPU thread, each on one thread), after an untimed warm-up on 8 sentences, with
   the sacreBLEU score of that output;
3. training: ``warmup`` untimed steps of the real training step (:meth:`Trainer.train_step`:
   loss, backward, clipping, Adam) on shuffled, length-bucketed batches of the config's
   ``train.batch_size`` / ``train.max_tokens``, then ``train_steps`` timed steps, then as
   many steps as fit in a ``train_seconds`` wall-clock window (wrapping round the batches).
   Target tokens are target pieces + EOS, source tokens source pieces + EOS; padding is
   never counted. Padding fraction: padded positions / all positions of the timed batches.
   FLOPs are counted analytically (nmt/model/flops.py) for the real tokens of those batches;
   achieved GFLOP/s and its fraction of the measured fp32 (and bf16) peak follow;
4. peak memory of each phase: resident set size on CPU (Linux ``VmHWM``, reset at the
   start of the phase; elsewhere the process's peak so far), max allocated on CUDA.

Numbers depend on the machine and on what else runs on it; speed targets belong here,
never in the test suite.
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
import tempfile
import time
from typing import Any, cast

import torch

from nmt.analysis.bench_options import BenchOptions, Subject, training_batches
from nmt.config.schema import Precision
from nmt.data.batches import Example
from nmt.evaluation.metrics import score
from nmt.inference.translator import Translator, decode_workers, threads_per_worker
from nmt.model.flops import TokenCounts, forward_macs, training_flops, training_flops_by_term
from nmt.ops.int8 import int8_engine
from nmt.ops.machine import peak_memory_mib, reset_peak_memory, sync
from nmt.ops.precision import precision_name
from nmt.training.loop import Trainer


def _precision_record(precision: str, auto_note: str | None) -> dict[str, str]:
    """A decoding run's precision for the bench JSON: the precision searched in, the int8
    library where that is int8 (``NMT_INT8_ENGINE``, nmt/ops/int8.py), and with
    ``--decode-precision auto`` on a CPU what was measured and chosen (``auto_note``)."""
    record = {"precision": precision}
    if precision == "int8":
        record["int8_engine"] = int8_engine()
    if auto_note:
        record["precision_auto"] = auto_note
    return record


def measure_decoding(
    subject: Subject,
    sources: list[str],
    references: list[str],
    opts: BenchOptions,
    device: torch.device,
) -> dict[str, Any]:
    """Greedy and beam-``opts.beam`` sentences/s on ``sources`` (``opts.workers`` batches at
    once, each on its share of the CPU threads:
    :func:`nmt.inference.translator.decode_workers`), from the median of
    ``opts.search_passes`` timed passes (each pass's seconds in ``pass_seconds``), the mean
    output length in target pieces (EOS not counted; an untrained model runs to the length
    limit, which makes it slower than a trained one), the BLEU (0-100) and chrF of that
    output against ``references``, and the peak memory while decoding (MiB)."""
    reset_peak_memory(device)
    runs: dict[str, Any] = {}
    children: list[float] = []  # with --processes: the search processes' peak RSS, MiB
    for beam in sorted({1, opts.beam}):
        translator = Translator.from_loaded(
            subject,
            beam_size=beam,
            precision=opts.decode_precision,
            precision_option="--decode-precision",
            batch_size=opts.batch_size,
            workers=opts.workers,
            processes=opts.processes,
        )
        decoding = translator.decoding  # a beam over the vocabulary is capped to it
        with torch.inference_mode():
            # a full batch for each worker: search processes warm up one by one, and a
            # process warmed on small batches met the timed batches' sizes cold
            warm = opts.batch_size * (opts.workers or torch.get_num_threads())
            translator.translate(sources[:warm])
            passes, out = _timed_passes(translator, sources, opts.search_passes, device)
        seconds = statistics.median(passes)
        children = max(children, translator.search_process_peaks_mib())
        translator.close()
        s = score([t.text for t in out], references, sources, buckets=((1, None),))
        runs["greedy" if beam == 1 else f"beam{beam}"] = {
            "search": decoding.describe(),
            **_precision_record(decoding.precision, translator.auto_note),
            "seconds": round(seconds, 3),
            "sentences_per_s": round(len(sources) / seconds, 2),
            "pass_seconds": [round(p, 3) for p in passes],
            "output_pieces_per_sentence": round(
                sum(len([p for p in t.tgt_pieces if p != "</s>"]) for t in out) / len(sources), 2
            ),
            "bleu": round(s.bleu, 2),
            "chrf": round(s.chrf, 2),
            "bleu_signature": s.signature,
        }
    n_batches = -(-len(sources) // opts.batch_size)
    workers = decode_workers(device, n_batches, opts.workers)
    return {
        "split": opts.split,
        "sentences": len(sources),
        "batch_size": opts.batch_size,
        "workers": workers,
        "threads_per_worker": threads_per_worker(workers),
        "processes": opts.processes and workers > 1,
        "bleu_meaningful": subject.kind == "checkpoint",
        **runs,
        "peak_memory_mib": round(peak_memory_mib(device), 1),
        # the timed searches ran in processes only with more than one worker
        **(
            {"search_processes_peak_mib": [round(m, 1) for m in children]}
            if children and workers > 1
            else {}
        ),
    }


def _timed_passes(
    translator: Translator, sources: list[str], n: int, device: torch.device
) -> tuple[list[float], list[Any]]:
    """``n`` timed translations of ``sources``: each pass's wall-clock seconds and the last
    pass's output (one 0.4 s pass moved by a tenth from run to run: results/speed/
    2026-12-07-zen5-search-passes/). Raises what :meth:`Translator.translate` raises."""
    passes: list[float] = []
    out: list[Any] = []
    for _ in range(n):
        sync(device)
        start = time.perf_counter()
        out = translator.translate(sources)
        sync(device)
        passes.append(time.perf_counter() - start)
    return passes, out


def batch_work(chunk: list[Example]) -> tuple[TokenCounts, int, int]:
    """The real work of one batch and its padded sizes: (counts, B x S, B x T), with
    S and T the longest source (pieces + EOS) and target (pieces + EOS) of the batch."""
    src = [len(e.src) for e in chunk]
    tgt = [len(e.tgt) + 1 for e in chunk]
    counts = TokenCounts(sum(src), sum(tgt), sum(s * t for s, t in zip(src, tgt, strict=True)))
    return counts, len(chunk) * max(src), len(chunk) * max(tgt)


def _timed(
    trainer: Trainer,
    batches,
    device: torch.device,
    steps: int | None = None,
    seconds: float | None = None,
) -> tuple[float, list[list[Example]]]:
    """Train on ``batches`` until ``steps`` steps or ``seconds`` have passed; returns
    (wall-clock seconds, the batches trained on)."""
    done: list[list[Example]] = []
    sync(device)
    start = time.perf_counter()
    for chunk in batches:
        trainer.train_step(chunk)  # reads the loss, so CUDA work is waited for
        done.append(chunk)
        if (steps is not None and len(done) >= steps) or (
            seconds is not None and time.perf_counter() - start >= seconds
        ):
            break
    sync(device)
    return time.perf_counter() - start, done


def _phase(
    seconds: float, done: list[list[Example]], macs, peaks: dict[str, float | None]
) -> tuple[dict[str, Any], TokenCounts]:
    """Throughput of one timed phase: tokens/s, achieved GFLOP/s, fraction of each peak."""
    counts = sum((batch_work(c)[0] for c in done), TokenCounts(0, 0, 0))
    gflop_s = training_flops(macs, counts) / seconds / 1e9
    return {
        "steps": len(done),
        "seconds": round(seconds, 3),
        "target_tokens_per_s": round(counts.target_tokens / seconds, 1),
        "source_tokens_per_s": round(counts.source_tokens / seconds, 1),
        "achieved_gflop_s": round(gflop_s, 2),
        **{
            f"fraction_of_{k}_peak": None if v is None else round(gflop_s / v, 4)
            for k, v in peaks.items()
        },
    }, counts


def _bench_trainer(
    subject: Subject, opts: BenchOptions, device: torch.device, scratch: str
) -> Trainer:
    """A Trainer of ``subject``'s model in ``opts.precision`` (else the config's), writing
    nothing but into ``scratch``, with no data of its own: the bench feeds its batches."""
    t = subject.cfg.train
    # opts.precision was checked by autocast_dtype in run_bench, before any work
    precision = cast("Precision | None", opts.precision) or t.precision
    run_cfg = dataclasses.replace(
        subject.cfg,
        train=dataclasses.replace(t, out_dir=scratch, device=str(device), precision=precision),
    )
    return Trainer(
        run_cfg,
        subject.model,
        subject.src_vocab,
        subject.tgt_vocab,
        train_set=[],
        valid_examples=[],
        validate=lambda _model: {},
        log=lambda _msg: None,
    )


def measure_training(
    subject: Subject,
    batches: list[list[Example]],
    opts: BenchOptions,
    device: torch.device,
    peaks: dict[str, float | None],
) -> dict[str, Any]:
    """Training throughput over ``opts.train_steps`` steps and over an
    ``opts.train_seconds`` window after ``opts.warmup`` untimed steps, padding fraction,
    FLOPs per target token (training FLOPs, see nmt/model/flops.py) and peak memory (MiB).
    The model's weights change (in memory only)."""
    cfg, t = subject.cfg, subject.cfg.train
    macs = forward_macs(cfg.model, len(subject.tgt_vocab))
    reset_peak_memory(device)
    with tempfile.TemporaryDirectory() as scratch:  # Trainer wants an out_dir; nothing is saved
        trainer = _bench_trainer(subject, opts, device, scratch)
        if trainer.batch_trim is not None:  # bf16 on a CPU: the batches nmt train makes
            batches = training_batches(subject, opts, trim=trainer.batch_trim)
        torch.manual_seed(t.seed)
        subject.model.train()
        for chunk in batches[: opts.warmup]:
            trainer.train_step(chunk)
        first = opts.warmup + opts.train_steps
        fixed, counts = _phase(*_timed(trainer, batches[opts.warmup : first], device), macs, peaks)
        timed = batches[opts.warmup : first]
        window = None
        if opts.train_seconds > 0:
            rest = itertools.cycle(batches[first:] + batches[:first])
            seconds, done = _timed(trainer, rest, device, seconds=opts.train_seconds)
            window, more = _phase(seconds, done, macs, peaks)
            counts, timed = counts + more, timed + done
    work = [batch_work(c) for c in timed]
    src_positions, tgt_positions = sum(w[1] for w in work), sum(w[2] for w in work)
    per_term = training_flops_by_term(macs, counts)
    return {
        "precision": precision_name(trainer.amp_dtype),
        "warmup_steps": opts.warmup,
        "batches_available": len(batches),
        "batch_size": t.batch_size,
        "max_tokens": t.max_tokens,
        "batch_multiple": t.batch_multiple,  # CPU autocast only; not in padding_fraction
        "batch_trim": trainer.batch_trim,  # where applied (CPU autocast), else None
        "fixed_steps": fixed,
        "window_seconds_asked": opts.train_seconds,
        "window": window,
        "padding_fraction": {
            "source": round(1 - counts.source_tokens / src_positions, 4),
            "target": round(1 - counts.target_tokens / tgt_positions, 4),
        },
        "source_per_target_token": round(counts.source_tokens / counts.target_tokens, 4),
        "attended_positions_per_target_token": round(
            counts.attended_positions / counts.target_tokens, 3
        ),
        "flops_per_target_token": round(sum(per_term.values()) / counts.target_tokens),
        "flops_per_target_token_by_term": {
            k: round(v / counts.target_tokens) for k, v in per_term.items()
        },
        "peak_memory_mib": round(peak_memory_mib(device), 1),
    }
