"""A run's training precision, chosen once when training starts: ``train.precision``
resolved for the device (``auto`` on a native-bf16 CPU measured by nmt/training/calibrate.py),
and logged with the search precision of validation, and a warning where bf16 is emulated."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from nmt.config.schema import Config
from nmt.data.batches import TrainingSet
from nmt.model.seq2seq import Seq2Seq
from nmt.ops.precision import autocast_dtype, native_bf16, precision_name, search_dtype
from nmt.training.calibrate import calibration_batches, calibration_key, choose, training_step


def training_precision(
    cfg: Config,
    model: Seq2Seq,
    train_set: TrainingSet,
    device: torch.device,
    *,
    shared: Callable[[float], float],
    log: Callable[[str], None],
) -> torch.dtype | None:
    """The autocast dtype of the training steps (None: fp32), logged.

    A native-bf16 CPU's ``auto`` times a few training steps of ``model`` (on ``device``) on
    batches of ``train_set`` in each precision (or reads the cached answer); ``shared``
    gives rank 0's choice to every rank under torchrun, so all ranks train alike.

    Raises:
        nmt.ops.precision.PrecisionError: ``train.precision`` or ``search.precision``
            unknown, or fp16 on a CPU (the message names the option).
    """
    t = cfg.train
    dtype = autocast_dtype(t.precision, device)
    why = f"train.precision={t.precision}"
    auto_cpu = t.precision == "auto" and device.type == "cpu"
    batches = calibration_batches(train_set, t) if auto_cpu and dtype is not None else []
    if len(batches) > 1:
        cal = choose(
            [training_step(model, b.to(device), t.batch_multiple) for b in batches],
            calibration_key(dataclasses.asdict(cfg.model), t.batch_size, t.batch_multiple),
            log,
        )
        dtype = torch.bfloat16 if shared(float(cal.choice == "bf16")) else None
        why = cal.describe()
    log(f"training precision: {precision_name(dtype)} ({why})")
    search = search_dtype(cfg.search.precision, device)
    later = (
        "; evaluate and translate measure auto on a CPU"
        if cfg.search.precision == "auto" and device.type == "cpu"
        else ", evaluate, translate"
    )
    log(
        f"search precision (validation{later}): {precision_name(search)} "
        f"(search.precision={cfg.search.precision})"
    )
    if dtype == torch.bfloat16 and not native_bf16(device):
        log(
            "warning: train.precision=bf16 on a device without native bf16 matrix "
            "multiplies: emulated, and far slower than fp32 (about 20x on an AVX2 CPU); "
            "train.precision=auto chooses fp32 here"
        )
    return dtype
