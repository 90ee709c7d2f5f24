"""``search.precision: auto`` on a CPU: choose the search's matrix products by measurement.

Which precision searches fastest depends on the CPU, the model's widths and the beam, and
the CPU flags do not tell: on a 2-core AMD EPYC with AVX-512 and avx512_bf16 the shipped
3.9M-parameter de->en model searched beam 5 at 426-442 sentences/s in bf16 and 445-461 in
int8 against 358-372 in fp32, but greedy faster in fp32 than in bf16 (2026-12-07,
results/speed/2026-12-07-noamx-search/); on a 2-core AMX Xeon bf16 greedy was 3x slower
than fp32 (results/speed/2026-12-06-amx/). So ``auto`` times the search itself (greedy, or
beam search at the beam in use) of one batch of made-up sources, in each precision this
CPU can run (fp32; bf16 where it is native; int8 where torch has fbgemm), alternating,
and takes the fastest only when its median is at most
:data:`nmt.training.calibrate.MARGIN` of fp32's. The answer is
cached beside training's (:func:`nmt.training.calibrate.cache_path`), per CPU, torch
version, thread count, parameter shapes, beam and batch size, unless other processes kept
the CPUs busy while it measured (:func:`nmt.training.calibrate.store_measured`).

bf16 and int8 change a search's output a little (BLEU within 0.2 of fp32 on the shipped
models; docs/precision.md); ``search.precision=fp32`` reproduces fp32 output exactly.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch

from nmt.config.schema import SearchPrecision
from nmt.data.batches import Example, collate
from nmt.data.vocab import EOS
from nmt.ops.int8 import ENGINES, int8_engine
from nmt.ops.precision import autocast, cpu_model_and_flags, native_bf16, search_dtype
from nmt.training.calibrate import (
    MARGIN,
    cache_path,
    cached_seconds,
    cpu_clock,
    read_cache,
    store_measured,
)

ROUNDS = 3  # timed rounds, each precision once per round, the order alternating
SOURCE_PIECES = (6, 30)  # shortest and longest made-up source, pieces (most of Multi30k's)


@dataclass(frozen=True)
class SearchShape:
    """What a measurement searched: ``beam`` (1: greedy), ``batch_size`` sentences a batch,
    on ``threads`` torch threads."""

    beam: int
    batch_size: int
    threads: int

    def __str__(self) -> str:
        search = "greedy search" if self.beam == 1 else f"beam {self.beam}"
        s = "s" if self.threads != 1 else ""
        per = "1 sentence" if self.batch_size == 1 else f"{self.batch_size} sentences"
        return f"{search}, {per} a batch, {self.threads} thread{s}"


@dataclass(frozen=True)
class SearchCalibration:
    """What ``auto`` chose for search and why.

    Attributes:
        choice: ``fp32``, ``bf16`` or ``int8``.
        seconds: median seconds per timing (a search of one batch of made-up sources,
            :func:`search_timing`) for each precision measured.
        cached: whether the numbers came from the cache rather than measured now.
        path: the cache file (None when it could not be written).
        shape: what was searched (None when nothing was measured: fp32 is all there is).
    """

    choice: SearchPrecision
    seconds: dict[str, float]
    cached: bool
    path: Path | None
    shape: SearchShape | None = None

    def describe(self) -> str:
        """One line for the log, e.g. ``search.precision=auto (beam 5, 64 sentences a batch,
        1 thread): 427.5 ms fp32, 346.3 ms bf16, 327.5 ms int8 a batch, measured now; int8
        taken ...``, with where the answer is cached and how to measure again."""
        if not self.seconds:
            return "search.precision=auto: fp32, the only precision measured on this CPU"
        times = ", ".join(f"{s * 1e3:.1f} ms {p}" for p, s in self.seconds.items())
        how = "read from the cache" if self.cached else "measured now"
        where = (
            f"; cached in {self.path} (delete it to measure again)" if self.path else ", not cached"
        )
        return (
            f"search.precision=auto ({self.shape}): {times} a batch, {how}; {self.choice} "
            f"taken (another precision only when at least {(1 - MARGIN) * 100:.0f}% faster "
            f"than fp32){where}"
        )


def candidates(device: torch.device) -> list[str]:
    """The precisions ``auto`` measures on ``device`` (a CPU): fp32, bf16 where its products
    are native (:func:`nmt.ops.precision.native_bf16`), int8 where torch has fbgemm."""
    out = ["fp32"]
    if native_bf16(device):
        out.append("bf16")
    if "fbgemm" in torch.backends.quantized.supported_engines:
        out.append("int8")
    return out


def search_timing(
    model: Any, src_vocab: int, batch_size: int, beam: int
) -> Callable[[str, int], None]:
    """One timing for :func:`measure`: ``run(precision, k)`` searches (greedy for ``beam``
    1, else beam search, no length penalty) batch ``k`` of ``batch_size`` made-up sources,
    in that precision, entered as a search enters it. Batch ``k`` holds source pieces drawn
    from the ``src_vocab`` pieces with seed ``k``, lengths :data:`SOURCE_PIECES` wide. A
    whole search, not a step: sentences end and leave the batch, and the few rows left at
    the end are where bf16 loses most. A new batch for every round: each has shapes new to
    oneDNN, which builds bf16 kernels per shape, as a file of real sentences does."""
    from nmt.inference.search import beam_search, greedy

    dev = next(model.parameters()).device
    lo, (shortest, longest) = EOS + 1, SOURCE_PIECES  # no special pieces

    def run(precision: str, k: int) -> None:
        gen = torch.Generator().manual_seed(k)
        lengths = torch.randint(shortest, longest + 1, (batch_size,), generator=gen).tolist()
        pieces = [
            torch.randint(lo, max(src_vocab, lo + 1), (n,), generator=gen).tolist() for n in lengths
        ]
        batch = collate([Example(p + [EOS], [], i) for i, p in enumerate(pieces)])
        src, src_len = batch.src.to(dev), batch.src_len
        with autocast(dev, search_dtype(precision, dev)), torch.inference_mode():
            if beam == 1:
                greedy(model, src, src_len, rescore=False)
            else:
                beam_search(model, src, src_len, beam, length_penalty="none", rescore=False)

    return run


def measure(
    timing: Callable[[str, int], None],
    precisions: list[str],
    rounds: int = ROUNDS,
    clock: Callable[[], float] | None = None,
) -> dict[str, float]:
    """Median seconds of ``timing(precision, k)`` in each of ``precisions``: batch 0 once
    untimed in each (int8 rounds its weights there), then ``rounds`` rounds on batches 1,
    2, ..., each precision once a round on that round's batch, in reverse order every other
    round.

    Raises:
        ValueError: ``rounds`` < 1 or no precisions.
    """
    if rounds < 1 or not precisions:
        raise ValueError("measure needs at least one round and one precision")
    clock = clock or time.perf_counter
    times: dict[str, list[float]] = {p: [] for p in precisions}
    for p in precisions:
        timing(p, 0)
    for r in range(rounds):
        for p in precisions[:: 1 if r % 2 == 0 else -1]:
            t0 = clock()
            timing(p, r + 1)
            times[p].append(clock() - t0)
    return {p: statistics.median(ts) for p, ts in times.items()}


def pick(seconds: dict[str, float]) -> SearchPrecision:
    """The fastest precision of ``seconds`` when it takes at most ``MARGIN`` of fp32's
    time, else ``fp32`` (noise never moves a search off fp32)."""
    best = min(seconds, key=lambda p: seconds[p])
    return cast(SearchPrecision, best) if seconds[best] <= MARGIN * seconds["fp32"] else "fp32"


def search_key(model: Any, precisions: list[str], batch_size: int, beam: int) -> str:
    """A SHA-256 over what decides the answer: CPU model and flags, torch version, thread
    count, the model's parameter shapes, the precisions measured, batch size and beam, and
    the int8 library where it is not the default (``NMT_INT8_ENGINE``, nmt/ops/int8.py).

    Raises:
        ValueError: an unknown ``NMT_INT8_ENGINE`` (:func:`nmt.ops.int8.int8_engine`).
    """
    cpu, flags = cpu_model_and_flags()
    what = {
        "what": "search",
        "entry": 2,  # the entry's layout: timings at its top level (not under "seconds")
        "cpu": cpu,
        "flags": sorted(flags),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "shapes": [[n, list(p.shape)] for n, p in model.named_parameters()],
        "precisions": precisions,
        "batch_size": batch_size,
        "beam": beam,
    }
    engine = int8_engine() if "int8" in precisions else ENGINES[0]
    if engine != ENGINES[0]:
        # another int8 library times differently; the default's keys stay as they were
        what["int8_engine"] = engine
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def choose_search_precision(
    model: Any,
    src_vocab: int,
    *,
    batch_size: int,
    beam: int,
    log: Callable[[str], None] | None = None,
    path: Path | None = None,
) -> SearchCalibration:
    """The cached answer for this CPU, model and search shape, else measure and cache it.
    Runs at torch's current thread count (the caller sets a search worker's share).

    Args:
        model: a Seq2Seq or Ensemble on a CPU, in eval mode. src_vocab: its size.
        batch_size: sentences per search batch. beam: the beam (1 for greedy search).
        log: where the line of a new measurement goes (default stderr); a cached answer
            is not logged.
        path: the cache file (default :func:`nmt.training.calibrate.cache_path`).

    Raises nothing of its own; a cache that cannot be read or written is warned about.
    """
    log = log or (lambda m: print(m, file=sys.stderr))
    path = path or cache_path()
    dev = next(model.parameters()).device
    precisions = candidates(dev)
    if precisions == ["fp32"]:
        return SearchCalibration("fp32", {}, False, None)
    key = search_key(model, precisions, batch_size, beam)
    shape = SearchShape(beam, batch_size, torch.get_num_threads())
    seconds = cached_seconds(read_cache(path, log), key, precisions, path, log)
    if seconds is not None:
        return SearchCalibration(pick(seconds), seconds, True, path, shape)
    start = cpu_clock()
    seconds = measure(search_timing(model, src_vocab, batch_size, beam), precisions)
    entry = {
        **seconds,
        "cpu": cpu_model_and_flags()[0],
        "torch": torch.__version__,
        "threads": shape.threads,
        "beam": beam,
        "batch_size": batch_size,
    }
    stored = store_measured(path, key, entry, start, log)
    cal = SearchCalibration(pick(seconds), seconds, False, stored, shape)
    log(cal.describe())
    return cal
