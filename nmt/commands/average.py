"""``nmt average``: the weights of a run's checkpoints averaged into one checkpoint
(:mod:`nmt.model.average` checks that they are of one run)."""

from __future__ import annotations

from pathlib import Path

from nmt.model.average import average_checkpoints, check_output
from nmt.model.checkpoint import CheckpointError, save_atomic


def average(inputs: list[Path], output: Path, last: int | None = None) -> list[Path]:
    """Average ``inputs`` (checkpoint files, or run directories whose ``step_*.pt`` files
    are used, in name order), only the ``last`` N of them when given, into ``output``
    (written atomically).

    Returns:
        the checkpoints averaged, in order.

    Raises:
        nmt.model.checkpoint.CheckpointError: fewer than ``last`` checkpoints, or none;
            as :func:`nmt.model.average.check_output` and
            :func:`nmt.model.average.average_checkpoints`.
        OSError: ``output`` cannot be written.
    """
    named = ", ".join(map(str, inputs))
    paths: list[Path] = []
    for p in inputs:
        paths += sorted(p.glob("step_*.pt")) if p.is_dir() else [p]
    if last is not None:
        if len(paths) < last:
            raise CheckpointError(
                f"--last {last}: only {len(paths)} checkpoint(s) found in {named} (a run "
                "keeps step_*.pt checkpoints when trained with train.keep_checkpoints=N)"
            )
        paths = paths[-last:]
    if not paths:
        raise CheckpointError(
            f"no step_*.pt checkpoints in {named} (train with train.keep_checkpoints=N)"
        )
    check_output(paths, output)
    save_atomic(average_checkpoints(paths), output)
    return paths
