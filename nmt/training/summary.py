"""A finished run's ``summary.json``: its name, best validation BLEU, epochs, steps, minutes
and parameters, and the command, CPU, threads and training precision it ran with.

``nmt train`` writes it on rank 0 after the training loop; the study report, ``nmt serve``
(the validation BLEU beside a model) and ``nmt export`` (the model card) read it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from nmt.config.schema import Config
from nmt.ops.files import write_atomic
from nmt.ops.precision import autocast_dtype, cpu_model_and_flags
from nmt.training.state import TrainState


def write_summary(
    path: Path,
    cfg: Config,
    state: TrainState,
    *,
    parameters: int,
    device: torch.device,
    command: str,
) -> None:
    """Write the summary of the run of ``cfg`` that ended in ``state`` to ``path``
    (atomically, indented JSON). ``parameters`` is the model's parameter count, ``device``
    the one it trained on (which, with ``train.precision``, gives the precision recorded)
    and ``command`` the command line that ran it (``nmt train ...``).

    Raises:
        OSError: the file cannot be written.
    """
    write_atomic(
        path,
        json.dumps(
            {
                "name": cfg.name,
                "best_val_bleu": state.best_bleu,
                "epochs": state.epoch,
                "steps": state.step,
                "elapsed_min": round(state.elapsed_s / 60, 2),
                "parameters": parameters,
                # what a model card says of the run (nmt export): the machine, threads, precision
                "command": command,
                "cpu": cpu_model_and_flags()[0],
                "threads": torch.get_num_threads(),
                "precision": str(
                    autocast_dtype(cfg.train.precision, device) or torch.float32
                ).removeprefix("torch."),
            },
            indent=2,
        ),
    )
