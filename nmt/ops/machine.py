"""The machine a benchmark runs on: CPU model and flags, measured matmul peak, peak memory.

Used by ``nmt bench`` (nmt/commands/bench.py): the peak is measured in the same run and with the
same threads as the model, so the fraction of it a model reaches compares like with like.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Any

import torch

from nmt.ops.precision import NATIVE_BF16_FLAGS, cpu_model_and_flags
from nmt.ops.primitive_cache import primitive_cache_capacities

PEAK_SHAPE = (512, 512, 4096)  # torch.mm of (n x k) @ (k x m)


def machine_info(device: torch.device) -> dict[str, Any]:
    """CPU model, logical cores, AVX-512 / bf16 flags, torch version and threads, device, and
    the capacities of the bf16 kernel caches (:mod:`nmt.ops.primitive_cache`)."""
    name, flags = cpu_model_and_flags()
    return {
        "cpu": name,
        "logical_cores": os.cpu_count(),
        "avx512f": "avx512f" in flags,
        "avx512_bf16": "avx512_bf16" in flags,
        "amx_bf16": "amx_bf16" in flags,
        "cpu_bf16": bool(set(NATIVE_BF16_FLAGS) & flags),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else name,
        "primitive_caches": primitive_cache_capacities(),
    }


def sync(device: torch.device) -> None:
    """Wait for queued CUDA work, so that wall-clock timings are real."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_peak_gflop_s(
    device: torch.device, dtype: torch.dtype, repeats: int = 5, min_seconds: float = 0.1
) -> float:
    """Best GFLOP/s (10^9 FLOP/s, 2 FLOPs per multiply-add) of ``torch.mm`` of
    (512x512)@(512x4096) in ``dtype`` on ``device``, with torch's current threads: the best
    of ``repeats`` timings of as many products as take ``min_seconds``."""
    n, k, m = PEAK_SHAPE
    a = torch.randn(n, k, device=device).to(dtype)
    b = torch.randn(k, m, device=device).to(dtype)
    out = torch.empty(n, m, device=device, dtype=dtype)

    def seconds_per_product(count: int) -> float:
        sync(device)
        start = time.perf_counter()
        for _ in range(count):
            torch.mm(a, b, out=out)
        sync(device)
        return (time.perf_counter() - start) / count

    seconds_per_product(2)  # warm-up
    count = max(1, int(min_seconds / max(seconds_per_product(1), 1e-9)))
    best = min(seconds_per_product(count) for _ in range(repeats))
    return 2 * n * k * m / best / 1e9


def reset_peak_memory(device: torch.device) -> None:
    """Start a new peak: CUDA's peak statistics, or the process's VmHWM on Linux."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass  # not Linux, or not allowed: the peak then covers the process so far


def peak_memory_mib(device: torch.device) -> float:
    """Peak since :func:`reset_peak_memory`, in MiB: CUDA max allocated, else the
    resident set size (VmHWM), else the process's peak RSS (``ru_maxrss``)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
