"""A DistributedDataParallel run (torchrun): each rank's device and the process group set
up, rank 0's decisions given to every rank, and at the end the check that every rank holds
the same weights and the teardown of the process group, one rank after another."""

from __future__ import annotations

import os
from collections.abc import Callable

import torch
import torch.distributed as dist

from nmt.ops.device import pick_device
from nmt.training.state import TrainingError

_DOWN = "nmt/process-group-down/{}"


def setup_device(spec: str, world: int) -> torch.device:
    """The device this process trains on: ``train.device``'s (``spec``); under torchrun
    (``world`` > 1) a CUDA rank takes its own GPU (``LOCAL_RANK``), and the process group
    is initialised here unless it is already (nccl on CUDA, gloo on a CPU).

    Raises:
        nmt.ops.device.DeviceError: as :func:`nmt.ops.device.pick_device`.
    """
    device = pick_device(spec)
    if world > 1:
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return device


def wrapped(model: torch.nn.Module, world: int, device: torch.device) -> torch.nn.Module:
    """``model`` (already on ``device``) in DistributedDataParallel under torchrun
    (``world`` > 1), which averages the gradients of the ranks; ``model`` itself on one
    process."""
    if world == 1:
        return model
    ids = [device.index] if device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)


def from_rank0(value: float, world: int, device: torch.device) -> float:
    """Rank 0's ``value`` on every rank (a broadcast: every rank calls it); ``value``
    itself on one process (``world`` 1). Raises nothing of its own."""
    if world == 1:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.broadcast(t, 0)
    return float(t.item())


def check_ranks_agree(
    model: torch.nn.Module,
    lr: float,
    step: int,
    world: int,
    device: torch.device,
    log: Callable[[str], None],
) -> None:
    """Compare a checksum of ``model``'s weights, the learning rate and the step across the
    ``world`` ranks (a collective: every rank calls it); logs that they agree.

    Each rank contributes one float64 tensor of shape ``(3,)`` on ``device``: the sum over
    parameters ``i`` of ``(i + 1) * sum(p_i)`` (the weight keeps a swap of two tensors from
    cancelling out), ``lr``, and ``step``; they are gathered into ``world`` such tensors.

    Raises:
        TrainingError: on every rank, when any rank differs (each rank's values named).
    """
    with torch.no_grad():
        total = sum(p.double().sum() * (i + 1) for i, p in enumerate(model.parameters()))
    mine = torch.tensor([float(total), lr, float(step)], dtype=torch.float64, device=device)
    gathered = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    if any(not torch.equal(g, gathered[0]) for g in gathered):
        raise TrainingError(
            "ranks disagree at the end of training (weights checksum, lr, "
            f"step per rank: {[g.tolist() for g in gathered]})"
        )
    log(f"ranks agree: identical weights, learning rate and step on {world} ranks")


def teardown(rank: int, world: int) -> None:
    """Destroy the default process group on each rank in turn, rank 0 first, handing the
    turn on through the rendezvous store (a collective: every rank calls it).

    Why in turn: when the ranks tear gloo down at one time, a peer's sockets may close while
    this rank's connections are being freed, and gloo then aborts the process ("terminate
    called without an active exception", exit -6) after a run that finished. Rank 0 leaves
    last, because without torchrun its process may be the one that hosts the store.
    """
    dist.barrier()  # rank 0 may still be writing checkpoints
    try:
        store = dist.distributed_c10d._get_default_store()
    except (AttributeError, RuntimeError, ValueError):  # a torch without it: tear down at once
        dist.destroy_process_group()
        return
    if rank > 0:
        store.wait([_DOWN.format(rank - 1)])
    dist.destroy_process_group()
    store.set(_DOWN.format(rank), "1")
    if rank == 0 and world > 1:
        store.wait([_DOWN.format(world - 1)])
