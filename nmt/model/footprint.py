"""What a model will need, known before it is built: its parameter count (the model
built on torch's ``meta`` device, which allocates nothing) and the memory to train or
load it, checked against the machine's memory.

A model too large for the machine is refused in one line naming the config keys that set
its size, instead of torch's allocator traceback after the corpus and vocabulary were
prepared (shared/cases NMT-44). The estimate is a lower bound: training needs, per fp32
parameter, the weights, their gradients and Adam's two moments (16 bytes), plus
activations that depend on the batch and are not counted; loading for translation needs
the weights twice for a moment (the checkpoint's copy and the model's, 8 bytes).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from nmt.config.schema import ModelConfig
from nmt.model.seq2seq import build_model

TRAIN_BYTES_PER_PARAMETER = 16  # fp32 weights, gradients, Adam's exp_avg and exp_avg_sq
LOAD_BYTES_PER_PARAMETER = 8  # the checkpoint's tensors and the model's, both fp32
SIZE_KEYS = (
    "emb_dim",
    "enc_hidden",
    "dec_hidden",
    "attn_dim",
    "output_dim",
    "enc_layers",
    "dec_layers",
)


class ResourceError(ValueError):
    """The machine cannot hold what the configuration asks for; the message names the
    keys, the parameter count, the memory needed and the memory there is."""


def parameter_count(cfg: ModelConfig, src_vocab: int, tgt_vocab: int) -> int:
    """The number of parameters :func:`nmt.model.seq2seq.build_model` makes for ``cfg``
    and these vocabulary sizes, counted on the ``meta`` device (nothing is allocated).

    Raises:
        ValueError: as ``build_model`` for an impossible configuration.
    """
    with torch.device("meta"):
        model = build_model(cfg, src_vocab, tgt_vocab)
    return sum(p.numel() for p in model.parameters())


def _cgroup_limit() -> int | None:
    """The memory limit of this process's cgroup (v2 or v1) in bytes; None when unset."""
    for name in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(name).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # v1 writes a huge number for "none"
            return int(text)
    return None


def machine_memory(device: torch.device) -> int | None:
    """The memory in bytes that ``device`` offers: a CUDA device's total memory, or the
    CPU's physical memory (capped by a container's cgroup limit); None when unknown."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    if device.type != "cpu":
        return None
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    limit = _cgroup_limit()
    return min(total, limit) if limit else total


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"


def check_fits(
    cfg: ModelConfig,
    src_vocab: int,
    tgt_vocab: int,
    device: torch.device,
    *,
    training: bool,
    where: str = "model",
) -> int:
    """Check that a model of ``cfg`` (with these vocabulary sizes) fits ``device``'s
    memory, to train (``training``) or to translate with; returns its parameter count.

    Raises:
        ResourceError: it cannot fit; one line naming ``where`` (a config file or a
            checkpoint), the size keys with their values, both vocabulary sizes, the
            parameter count, the memory needed and the machine's memory.
    """
    n = parameter_count(cfg, src_vocab, tgt_vocab)
    per = TRAIN_BYTES_PER_PARAMETER if training else LOAD_BYTES_PER_PARAMETER
    have = machine_memory(device)
    if have is None or n * per <= have:
        return n
    keys = ", ".join(f"model.{k}={getattr(cfg, k)}" for k in SIZE_KEYS)
    verb = "train" if training else "load"
    raise ResourceError(
        f"{where}: a model of {n:,} parameters ({keys}; vocabularies {src_vocab:,} and "
        f"{tgt_vocab:,} pieces) needs at least {_gib(n * per)} to {verb} ({per} bytes per "
        f"parameter) but this {device.type} has {_gib(have)}; lower those keys "
        "(model.emb_dim and model.output_dim multiply the vocabulary sizes)"
    )
