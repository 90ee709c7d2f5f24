"""Where tensors live: ``auto`` (CUDA when present, else CPU), ``cpu``, ``cuda``, ``cuda:N``."""

from __future__ import annotations

import torch


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
        raise DeviceError(
            f"{option}: {name!r} is not a device; use auto, cpu, cuda or cuda:N"
        ) from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(
                f"{option}: CUDA requested ({name!r}) but not available on this "
                f"machine (torch {torch.__version__}); use {option.split('=')[0]}"
                f"{'=' if option.startswith('train.') else ' '}cpu or auto"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceError(
                f"{option}: {name!r} but this machine has "
                f"{torch.cuda.device_count()} CUDA device(s)"
            )
    elif device.type != "cpu":
        raise DeviceError(f"{option}: {name!r} is not supported; use auto, cpu, cuda or cuda:N")
    return device
