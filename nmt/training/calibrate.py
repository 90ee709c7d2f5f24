"""``train.precision: auto`` on a CPU with native bf16: choose by measurement, not by flags.

A CPU flag says bf16 products are native, not that a training step gets faster: on a
2-core Intel Xeon with AMX, bf16 was 0-17% faster than fp32 on the bench model (issue 30)
and about 10% slower on a 1.8M-parameter en->fr model (the widths of
configs/study_enfr_converged.yaml, 8,000 pieces; 2026-12-02), while on an AVX-512 EPYC it
was 1.6x faster. So ``auto`` times teacher-forced steps (forward and backward, no update)
of the configured model on real training batches in each precision, alternating, and
takes bf16 only when its median step takes at most ``MARGIN`` of fp32's. The answer is
cached per CPU, torch version, thread count, model config and batch size, so a run that
resumes, and every later run of the same shape, gets the same choice without measuring
again; an answer measured while other processes kept the CPUs busy is not cached.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from nmt.config.schema import TrainConfig
from nmt.data.batches import Batch, TrainingSet
from nmt.ops.files import write_atomic
from nmt.ops.precision import autocast, cpu_model_and_flags

MARGIN = 0.95  # bf16 must take at most 95% of fp32's step time: noise never picks it
ROUNDS = 6  # timed batches, each once in each precision, after one warm-up batch
CACHE_ENV = "NMT_CACHE_DIR"
# other processes' share of the CPUs while measuring above which the answer is not cached:
# a quick-start cached 5,196 / 3,817 ms a step measured beside other jobs, where an idle
# machine took 257 / 131, and every later run would have read those numbers
BUSY_SHARE = 0.25
BUSY_ENV = "NMT_CACHE_BUSY_SHARE"  # another limit; 1 caches whatever ran beside (the tests)
# /proc/stat counts in ticks of 10 ms: one tick in a window of a few milliseconds read as
# several CPUs busy, and a measurement that short (the tests' stand-ins) was not cached
MIN_WINDOW_S = 0.5

Step = Callable[[torch.dtype | None], None]  # one forward+backward in that autocast dtype


@dataclass(frozen=True)
class Calibration:
    """What ``auto`` chose and why.

    Attributes:
        choice: ``fp32`` or ``bf16``.
        fp32_s, bf16_s: median seconds per step (forward and backward) in each precision.
        cached: whether the numbers came from the cache rather than measured now.
        path: the cache file (None when it could not be read or written).
    """

    choice: Literal["fp32", "bf16"]
    fp32_s: float
    bf16_s: float
    cached: bool
    path: Path | None

    def describe(self) -> str:
        """One line for the training log."""
        how = f"cached in {self.path}" if self.cached else "measured now"
        return (
            f"train.precision=auto: {self.fp32_s * 1e3:.0f} ms/step fp32, "
            f"{self.bf16_s * 1e3:.0f} ms/step bf16 on this CPU ({how}); bf16 is taken "
            f"only when at least {(1 - MARGIN) * 100:.0f}% faster"
        )


def cache_path() -> Path:
    """``$NMT_CACHE_DIR/precision.json``, else ``$XDG_CACHE_HOME/nmt/...``, else
    ``~/.cache/nmt/precision.json``."""
    root = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or "~/.cache", "nmt"
    )
    return Path(root).expanduser() / "precision.json"  # a quoted "~/x" means home too


def calibration_key(
    model_config: dict[str, Any], batch_size: int, batch_multiple: int | None = None
) -> str:
    """A SHA-256 over what decides the answer: CPU model and flags, torch version, thread
    count, the model config, the batch size and ``train.batch_multiple`` (only when set,
    so that answers cached without it still count)."""
    cpu, flags = cpu_model_and_flags()
    what = {
        "cpu": cpu,
        "flags": sorted(flags),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "model": model_config,
        "batch_size": batch_size,
    }
    if batch_multiple is not None:
        what["batch_multiple"] = batch_multiple
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()


def calibration_batches(
    train_set: TrainingSet, train: TrainConfig, n: int = 1 + ROUNDS
) -> list[Batch]:
    """The first ``n`` training batches in a fixed shuffled order: shapes as varied as
    training meets them (empty for an empty training set)."""
    chunks = list(train_set.batches(train.batch_size, train.max_tokens, shuffle_seed=0))
    return [train_set.collate(c) for c in chunks[:n]]


def training_step(model: torch.nn.Module, batch: Batch, multiple: int | None = None) -> Step:
    """A :data:`Step` for ``model`` on ``batch`` (a :class:`nmt.data.batches.Batch` on the
    model's device): teacher-forced loss per target token, backward, gradients dropped;
    the batch padded as training pads it (``multiple``: ``train.batch_multiple``)."""
    device = next(model.parameters()).device

    def step(dtype: torch.dtype | None) -> None:
        with autocast(device, dtype):
            b = batch.for_stable_shapes(multiple)
            loss = model(b.src, b.src_len, b.tgt_in, b.tgt_out)
        (loss / batch.n_tokens).backward()
        model.zero_grad(set_to_none=True)

    return step


def measure(steps: Sequence[Step], clock: Callable[[], float] | None = None) -> tuple[float, float]:
    """Median seconds per step in fp32 and in bf16: ``steps[0]`` warms both up, then every
    other step (each its own batch) runs once in each precision, the order alternating.

    A new batch shape is new to oneDNN's bf16 kernels, which it builds on first use; one
    shape timed again and again hides that cost, and on an AMX Xeon picked bf16 for a model
    whose training was 10% slower in bf16. Random state is put back afterwards (dropout).

    Raises:
        ValueError: fewer than two steps.
    """
    if len(steps) < 2:
        raise ValueError("measure needs a warm-up step and at least one timed step")
    clock = clock or time.perf_counter
    times: dict[torch.dtype | None, list[float]] = {None: [], torch.bfloat16: []}
    with torch.random.fork_rng(devices=[]):
        for dtype in times:
            steps[0](dtype)
        for i, step in enumerate(steps[1:]):
            for dtype in (None, torch.bfloat16)[:: 1 if i % 2 == 0 else -1]:
                t0 = clock()
                step(dtype)
                times[dtype].append(clock() - t0)
    return statistics.median(times[None]), statistics.median(times[torch.bfloat16])


def read_cache(path: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """The cached answers in ``path`` (empty when there is none, or, with a warning through
    ``log``, when it cannot be read or is not a JSON object). Raises nothing."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except NotADirectoryError:  # the write that follows says so
        return {}
    except (OSError, ValueError) as e:
        log(f"warning: {path}: unreadable precision cache ({type(e).__name__}); measuring again")
        return {}
    if not isinstance(data, dict):
        log(f"warning: {path}: the precision cache is not a JSON object; measuring again")
        return {}
    return data


def cached_seconds(
    cache: dict[str, Any], key: str, names: Sequence[str], path: Path, log: Callable[[str], None]
) -> dict[str, float] | None:
    """The cached timings ``names`` of entry ``key``: each a finite positive number of
    seconds, else None (with a warning through ``log`` when the entry exists but holds
    something else: a hand-edited or damaged file is measured over, not trusted). Raises
    nothing."""
    hit = cache.get(key)
    if hit is None:
        return None
    try:  # a JSON true would read as 1.0 s
        got = {n: float(hit[n]) for n in names if not isinstance(hit[n], bool)}
    except (TypeError, KeyError, ValueError):
        got = {}
    if len(got) == len(names) and all(math.isfinite(v) and v > 0 for v in got.values()):
        return got
    log(f"warning: {path}: a malformed precision cache entry; measuring again")
    return None


@dataclass(frozen=True)
class CpuClock:
    """Seconds all the machine's CPUs were busy (/proc/stat), this process's CPU seconds and
    the wall clock, at one moment."""

    machine_busy: float
    own: float
    wall: float


def cpu_clock() -> CpuClock | None:
    """The clocks now; None where /proc/stat cannot be read (not Linux). Raises nothing."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            ticks = [int(v) for v in f.readline().split()[1:9]]
        # user nice system idle iowait irq softirq steal: all but idle and iowait are busy
        busy = (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return CpuClock(busy, time.process_time(), time.perf_counter())


def others_share(start: CpuClock | None) -> float | None:
    """The share (0-1) of the machine's CPUs that other processes kept busy since ``start``
    (:func:`cpu_clock`): their busy seconds over the wall seconds times the CPU count; None
    where unknown, or where the window is shorter than :data:`MIN_WINDOW_S`. Raises nothing."""
    end = cpu_clock()
    if start is None or end is None or end.wall - start.wall < MIN_WINDOW_S:
        return None
    others = (end.machine_busy - start.machine_busy) - (end.own - start.own)
    return min(1.0, max(0.0, others / ((end.wall - start.wall) * (os.cpu_count() or 1))))


def store_measured(
    path: Path, key: str, entry: dict[str, Any], start: CpuClock | None, log: Callable[[str], None]
) -> Path | None:
    """:func:`store` the answer of a measurement that began at ``start``, unless other
    processes kept more than :data:`BUSY_SHARE` of the CPUs busy meanwhile (or the share in
    ``$NMT_CACHE_BUSY_SHARE``): then the answer is this run's only (said through ``log``)
    and the next run measures again. Returns the
    cache path, or None when not cached. Raises nothing."""
    limit = BUSY_SHARE
    if os.environ.get(BUSY_ENV):
        try:
            limit = float(os.environ[BUSY_ENV])
        except ValueError:
            log(f"warning: {BUSY_ENV}={os.environ[BUSY_ENV]!r} is not a number; using {limit}")
    share = others_share(start)
    if share is not None and share > limit:
        log(
            f"note: other processes kept {share:.0%} of the CPUs busy while this measured: "
            "the answer is used for this run only, not cached"
        )
        return None
    return store(path, key, entry, log)


def store(path: Path, key: str, entry: dict[str, Any], log: Callable[[str], None]) -> Path | None:
    """Add ``entry`` under ``key`` to the cache in ``path``, read again just before the
    atomic write so that another process's answer written meanwhile is kept; ``path``, or
    None (with a warning through ``log``) when it cannot be written. Raises nothing."""
    cache = read_cache(path, lambda _: None)
    cache[key] = entry
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(cache, indent=1, sort_keys=True) + "\n")
    except FileExistsError:  # mkdir met a file where the folder should be
        log(f"warning: could not cache the precision choice: {path.parent} is not a directory")
        return None
    except OSError as e:
        log(f"warning: could not cache the precision choice in {path} ({e.strerror or e})")
        return None
    return path


def choose(
    steps: Sequence[Step], key: str, log: Callable[[str], None] = print, path: Path | None = None
) -> Calibration:
    """The cached answer for ``key``, else :func:`measure` ``steps`` and cache it.

    A cache that cannot be read is measured over (with a warning); one that cannot be
    written leaves the answer uncached (with a warning). Raises nothing of its own.
    """
    path = path or cache_path()
    hit = cached_seconds(read_cache(path, log), key, ("fp32_s", "bf16_s"), path, log)
    if hit is not None:
        fp32_s, bf16_s = hit["fp32_s"], hit["bf16_s"]
        cached = True
    else:
        start = cpu_clock()
        fp32_s, bf16_s = measure(steps)
        cached = False
        entry = {
            "fp32_s": fp32_s,
            "bf16_s": bf16_s,
            "cpu": cpu_model_and_flags()[0],
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        }
        path = store_measured(path, key, entry, start, log)
    choice: Literal["fp32", "bf16"] = "bf16" if bf16_s <= MARGIN * fp32_s else "fp32"
    return Calibration(choice, fp32_s, bf16_s, cached, path)
