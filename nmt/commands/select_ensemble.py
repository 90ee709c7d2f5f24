"""``nmt select RUN RUN ...``: choose each run's checkpoint on the validation split, then
the length penalty of their ensemble, then score the test splits with the ensemble.

1. Before any decoding: the runs' ``best.pt`` files must be distinct and share one source
   and one target vocabulary (an ensemble averages distributions over one target
   vocabulary), and every split must be readable.
2. Each run is chosen as ``nmt select RUN`` chooses it (nmt/commands/select.py): best or
   averaged checkpoint and alpha on val, then its own test scores, so that each member's
   score stands beside the ensemble's.
3. The ensemble of the chosen checkpoints (the mean of their probabilities at each search
   step, nmt/inference/ensemble.py) is decoded on val with beam search for each alpha; the
   alpha with the highest val BLEU is kept and the test splits are scored with it. The
   test sets are never used for choosing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from nmt.commands.select import (
    SelectError,
    SelectOptions,
    decode_scores,
    grid_edge,
    no_best_checkpoint,
    score_tests,
    select,
)
from nmt.inference.ensemble import load_ensemble
from nmt.model.checkpoint import also_as
from nmt.model.rundir import BEST, check_run_ids


def check_runs(runs: list[Path]) -> None:
    """Fail before decoding when the runs cannot form an ensemble.

    Raises:
        SelectError: fewer than two runs, one run directory twice, or a run without
            ``best.pt``.
        CheckpointError: two ``best.pt`` with identical contents, or with another source
            or target vocabulary (the message names both files).
    """
    if len(runs) < 2:
        raise SelectError(f"an ensemble needs at least two runs, got {len(runs)}")
    seen: dict[Path, Path] = {}
    for run in runs:
        key = run.resolve()
        if key in seen:
            raise SelectError(f"{run} is given twice{also_as(seen[key], run)}: an ensemble of "
                              "a model with itself is that model")
        seen[key] = run
        if not (run / BEST).is_file():
            raise no_best_checkpoint(run)
        check_run_ids(run)  # each run's files are its own
    load_ensemble([run / BEST for run in runs])  # vocabularies and duplicates, on the CPU


def select_ensemble(runs: list[Path], opts: SelectOptions = SelectOptions(),
                    log: Callable[[str], None] = print) -> dict[str, Any]:
    """Choose every run on ``opts.valid_split``, then the ensemble's alpha there; score
    ``opts.test_splits`` with each member and with the ensemble.

    Returns:
        ``{"members": [the summary of :func:`nmt.commands.select.select` per run],
        "ensemble": {"checkpoints", "checkpoints_sha256", "beam", "alpha",
        "val_selection": [{"alpha", "bleu"}], "test": {split: scores}}}``.

    Raises:
        SelectError, CheckpointError, DataError, ConfigError: as :func:`check_runs` and
            :func:`nmt.commands.select.select`, before any decoding.
    """
    opts.check()
    check_runs(runs)
    members: list[dict[str, Any]] = []
    for run in runs:
        log(f"member {len(members) + 1} of {len(runs)}: {run}")
        members.append(select(run, opts, log))
    ckpts = [Path(m["chosen_checkpoint"]) for m in members]
    rows = []
    for alpha in opts.alphas:
        log(f"{opts.valid_split}: ensemble of {len(ckpts)}, beam {opts.beam}, alpha {alpha:g}")
        r = decode_scores(ckpts, opts, opts.valid_split, opts.beam, alpha, ensemble=True)[0]
        rows.append({"alpha": alpha, "bleu": r["bleu"]})
    chosen = max(rows, key=lambda r: r["bleu"])
    log(f"chosen on {opts.valid_split}: ensemble alpha {chosen['alpha']:g} "
        f"(val BLEU {chosen['bleu']:.2f})")
    if edge := grid_edge(chosen["alpha"], opts.alphas):
        log(edge)
    return {"members": members,
            "ensemble": {"checkpoints": [str(p) for p in ckpts],
                         "checkpoints_sha256": [m["chosen_checkpoint_sha256"] for m in members],
                         "beam": opts.beam, "alpha": chosen["alpha"], "val_selection": rows,
                         "test": score_tests(ckpts, opts, chosen["alpha"], ensemble=True)}}
