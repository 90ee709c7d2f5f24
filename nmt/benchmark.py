"""Benchmark: training and decoding speed of a checkpoint's model on its own corpus.

Measures, on the device the run would use (CUDA when present):

* training throughput: target tokens per second over ``--train-steps`` teacher-forced
  Adam steps on shuffled, length-bucketed training batches of the checkpoint's
  ``train.batch_size`` / ``train.max_tokens`` (after ``--warmup`` untimed steps), and the
  implied minutes per Multi30k epoch;
* decoding speed: source sentences per second for greedy search and beam search on the
  first ``--sentences`` sentences of the validation split;
* peak memory: resident set size of this process (CPU) or peak CUDA memory, in MiB.

Decoding runs first, on the checkpoint's weights; the training steps then change the
in-memory copy only, never the file. Speed targets belong
here, not in the test suite: numbers depend on the machine and on what else runs on it.

Usage::

    python -m nmt.benchmark runs/recipe_deen/best.pt [--threads 2] [--train-steps 40]
        [--sentences 200] [--beam 5] [--json results/benchmark_cpu.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

from nmt.checkpoint import CheckpointError, load_checkpoint
from nmt.corpus import DataError, read_split
from nmt.data import encode_pairs, make_batches
from nmt.evaluate import stored_corpus
from nmt.pipeline import training_pairs
from nmt.train import Trainer, pick_device
from nmt.translate import decoding_from_config, translate_lines



def _fail(message: str) -> None:
    """Print ``message`` on stderr and exit with status 2 (bad input, as ``nmt`` does)."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def peak_memory_mib(device: torch.device) -> float:
    """Peak CUDA memory on ``device`` or the process's peak resident set size, in MiB."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def sync(device: torch.device) -> None:
    """Wait for queued CUDA work so wall-clock timings are real."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    """Command line: decoding speed, then training speed, then peak memory; see the module."""
    parser = argparse.ArgumentParser(prog="python -m nmt.benchmark",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.add_argument("--train-steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5, help="untimed training steps first")
    parser.add_argument("--sentences", type=int, default=200, help="validation sentences to decode")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--data-path", default=None, help="override the checkpoint's data.path")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    for name in ("train_steps", "sentences", "beam", "threads"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must be 0 or more")
    if args.json is not None and (args.json.is_dir() or not args.json.parent.is_dir()):
        parser.error(f"--json {args.json}: give a file in an existing directory")
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", args.device):
        parser.error(f"--device {args.device!r}: use auto, cpu, cuda or cuda:N")

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        device = pick_device(args.device, "--device")
        if device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("CUDA is not available on this machine")
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError, ValueError) as e:
        _fail(f"error: {e}" if str(e).startswith("--device") else
              f"error: --device {args.device}: {e}")
    try:
        loaded = load_checkpoint(args.checkpoint, device)
        cfg = loaded.cfg
        data_cfg = stored_corpus(cfg.data, args.data_path)
        _, train_pairs, _ = training_pairs(data_cfg)  # the epoch the run trained on
        val_pairs = read_split(data_cfg, cfg.data.valid_split, limit=args.sentences)
    except (CheckpointError, DataError) as e:
        _fail(f"error: {e}")

    model, t = loaded.model, cfg.train
    examples = encode_pairs(train_pairs, loaded.src_vocab, loaded.tgt_vocab)
    batches = make_batches(examples, t.batch_size, t.max_tokens, shuffle_seed=t.seed)
    needed = args.warmup + args.train_steps
    if len(batches) < needed:
        _fail(f"error: only {len(batches)} training batches, --warmup + --train-steps "
                         f"asks for {needed}")
    epoch_tokens = sum(len(e.tgt) + 1 for e in examples)

    # Decoding first, on the checkpoint's own weights (training below changes them).
    model.eval()
    lines = [p.src for p in val_pairs]
    decode = {}
    for beam in sorted({1, args.beam}):
        decoding = decoding_from_config(cfg, beam_size=beam)
        with torch.no_grad():  # untimed warm-up: first-call allocation and CUDA start-up
            translate_lines(model, loaded.src_vocab, loaded.tgt_vocab, lines[:8], decoding=decoding)
            sync(device)
            start = time.perf_counter()
            translate_lines(model, loaded.src_vocab, loaded.tgt_vocab, lines, decoding=decoding)
            sync(device)
        decode["greedy" if beam == 1 else f"beam{beam}"] = len(lines) / (time.perf_counter() - start)

    # The training loop's own step (optimizer, clipping, schedule, label smoothing); its
    # out_dir is a scratch directory because nothing is saved.
    with tempfile.TemporaryDirectory() as scratch:
        train_cfg = dataclasses.replace(t, out_dir=scratch, device=str(device))
        trainer = Trainer(dataclasses.replace(cfg, train=train_cfg), model, loaded.src_vocab,
                          loaded.tgt_vocab, [], [], lambda _model: {}, log=lambda _msg: None)
        model.train()
        tokens, start = 0, 0.0
        for i, chunk in enumerate(batches[:needed]):
            if i == args.warmup:
                sync(device)
                start, tokens = time.perf_counter(), 0
            tokens += trainer.train_step(chunk)
        sync(device)
    train_tok_s = tokens / (time.perf_counter() - start)

    result = {
        "checkpoint": str(args.checkpoint),
        "device": str(device) if device.type != "cuda" else torch.cuda.get_device_name(device),
        "cpu": f"{platform.machine()}, {os.cpu_count()} logical cores",
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "train_target_tokens_per_s": round(train_tok_s, 1),
        "train_minutes_per_epoch_without_validation": round(epoch_tokens / train_tok_s / 60, 2),
        "decode_sentences_per_s": {k: round(v, 2) for k, v in decode.items()},
        "peak_memory_mib": round(peak_memory_mib(device), 1),
    }
    print(json.dumps(result, indent=1))
    if args.json is not None:
        try:
            args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        except OSError as e:
            _fail(f"error: --json {args.json}: {e.strerror or e}")
        print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
