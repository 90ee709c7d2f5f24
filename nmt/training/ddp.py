"""The end of a DistributedDataParallel run (torchrun): the check that every rank holds the
same weights, and the teardown of the process group, one rank after another."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist

from nmt.training.state import TrainingError

_DOWN = "nmt/process-group-down/{}"


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
