"""Training precision: fp32, or bf16/fp16 autocast where the hardware computes it natively.

Autocast (torch.autocast) runs matrix multiplies in the lower precision and keeps the
master weights, optimizer state and loss in fp32. bf16 matrix multiplies are native on
CPUs with AVX512_BF16 (about twice the fp32 peak: results/speed/2026-12-01-f/
matmul_peaks.txt), more with AMX-BF16, and on CUDA
devices of compute capability 8.0+; elsewhere they are emulated and slower than fp32, so
``auto`` chooses fp32 there. fp16 needs loss scaling and is offered on CUDA only.
"""

from __future__ import annotations

import platform
from pathlib import Path

import torch

from nmt.config.schema import PRECISIONS, SEARCH_PRECISIONS, ComputePrecision, SearchPrecision
from nmt.ops.int8 import int8_products

NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")  # x86 AVX-512/AMX; Arm "bf16"


class PrecisionError(ValueError):
    """A precision the device cannot use; the message names the option."""


def check_int8_device(device: torch.device, option: str) -> None:
    """Raise :class:`PrecisionError` naming ``option`` unless ``device``
    is a CPU: fbgemm's int8 products run on x86 CPUs only."""
    if device.type != "cpu":
        raise PrecisionError(
            f"{option}: int8 runs on a CPU only (this run uses {device}); "
            "use fp32, bf16, fp16 or auto"
        )


def cpu_model_and_flags() -> tuple[str, set[str]]:
    """(CPU model name, instruction-set flags) from /proc/cpuinfo (Linux), else what
    :mod:`platform` knows and no flags."""
    try:
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return platform.processor() or platform.machine(), set()
    fields: dict[str, str] = {}
    for line in lines:
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or platform.machine()
    return name, set((fields.get("flags") or fields.get("Features") or "").split())


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` multiplies bf16 matrices natively (CPU flags avx512_bf16,
    amx_bf16 or Arm's bf16; CUDA: ``torch.cuda.is_bf16_supported()``)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return bool(set(NATIVE_BF16_FLAGS) & cpu_model_and_flags()[1])


def autocast_dtype(
    precision: str,
    device: torch.device,
    option: str = "train.precision",
    instead: str = "bf16, fp32 or auto",
) -> torch.dtype | None:
    """The autocast dtype for ``precision`` on ``device``; None means plain fp32.

    ``auto`` is bf16 where :func:`native_bf16`, else fp32. ``bf16`` is honoured everywhere
    (emulated, and slow, without native support). ``fp16`` is CUDA only: the message
    offers ``instead``, the values ``option`` could take on this device.

    Raises:
        PrecisionError: an unknown precision, or fp16 on a CPU; the message names ``option``.
    """
    if precision not in PRECISIONS:
        raise PrecisionError(
            f"{option}: unknown precision {precision!r}; expected one of {', '.join(PRECISIONS)}"
        )
    if precision == "auto":
        return torch.bfloat16 if native_bf16(device) else None
    if precision == "fp16" and device.type != "cuda":
        raise PrecisionError(
            f"{option}: fp16 needs a CUDA device (this run uses {device}); use {instead}"
        )
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def search_dtype(
    precision: str, device: torch.device, option: str = "search.precision"
) -> torch.dtype | None:
    """The autocast dtype for search (``search.precision``); None means plain fp32.

    As :func:`autocast_dtype`, except that ``auto`` is fp32 on a CPU: which precision
    searches fastest there depends on the CPU, the model and the beam (a search step's
    products have few rows, where oneDNN's bf16 path can cost more per call than fp32), so
    the commands measure it before they get here
    (:func:`nmt.inference.search_choice.choose_search_precision`); what reaches this
    function as ``auto`` on a CPU (validation during training, a bare Translator) is fp32.

    ``int8`` (CPU only) gives ``torch.qint8``: not an autocast dtype but the marker that
    :func:`autocast` turns into :func:`nmt.ops.int8.int8_products`.

    Raises:
        PrecisionError: as :func:`autocast_dtype`, or int8 on a device other than a CPU;
            the message names ``option``.
    """
    if precision not in SEARCH_PRECISIONS:
        raise PrecisionError(
            f"{option}: unknown precision {precision!r}; "
            f"expected one of {', '.join(SEARCH_PRECISIONS)}"
        )
    if precision == "int8":
        check_int8_device(device, option)
        return torch.qint8
    if precision == "auto" and device.type != "cuda":
        return None
    return autocast_dtype(precision, device, option, "fp32, bf16, int8 or auto")


def precision_name(dtype: torch.dtype | None) -> SearchPrecision:
    """``fp32``, ``bf16``, ``fp16`` or ``int8`` for an :func:`autocast_dtype` or
    :func:`search_dtype` result (None is fp32). Raises KeyError for any other dtype."""
    names: dict[torch.dtype | None, ComputePrecision | SearchPrecision] = {
        None: "fp32",
        torch.bfloat16: "bf16",
        torch.float16: "fp16",
        torch.qint8: "int8",
    }
    return names[dtype]


def autocast(device: torch.device, dtype: torch.dtype | None):
    """``torch.autocast`` for ``dtype`` on ``device``; a no-op context for fp32 (None);
    :func:`nmt.ops.int8.int8_products` for ``torch.qint8`` (:func:`search_dtype`'s int8)."""
    if dtype == torch.qint8:
        return int8_products()
    return torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None)


HALF_DTYPES = (torch.bfloat16, torch.float16)


def at_least_fp32(t: torch.Tensor) -> torch.Tensor:
    """``t`` in fp32 when it is bf16/fp16, else ``t`` itself (fp32 and fp64 keep their
    dtype: a float64 model, as gradcheck uses, must compute in float64 throughout).

    Args:
        t: a tensor of any shape, e.g. a step's scores (B, S) or logits (B, V).

    Returns:
        a tensor of the same shape and values. Raises nothing.
    """
    return t.float() if t.dtype in HALF_DTYPES else t


def cast_for_autocast(t: torch.Tensor) -> torch.Tensor:
    """``t`` in the autocast dtype where autocast is on for its device, else ``t`` itself.

    For a tensor that a loop reads at every step (the decoder's weight views, the encoder
    memory). Autocast (torch.amp, "CPU Ops that can autocast to bfloat16") casts a
    parameter once per autocast region and caches the copy, but any other fp32 tensor
    again at every op that reads it, forward and backward. Cast here once, the gradients
    of all the loop's uses add up in the autocast dtype before one conversion back, as they
    do for the parameters autocast caches.

    Args:
        t: a tensor of any shape, e.g. W_hh^T (D, 3D) or the memory (B, S, M).

    Returns:
        a tensor of the same shape: a differentiable bf16/fp16 copy under autocast, else
        ``t`` (integer tensors, and everything outside autocast). Raises nothing.
    """
    dev = t.device.type
    if t.is_floating_point() and torch.is_autocast_enabled(dev):
        return t.to(torch.get_autocast_dtype(dev))
    return t
