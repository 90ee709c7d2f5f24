"""``nmt select RUN``: choose a finished run's checkpoint and length penalty on the
validation split, then score the test splits with that choice, the way docs/results.md
reports the recipes.

1. With ``average`` > 0, average the run's last N kept checkpoints (``step_*.pt``, kept
   with ``train.keep_checkpoints``) into ``RUN/averaged.pt``.
2. On the validation split, decode ``best.pt`` (and ``averaged.pt``) greedily and with beam
   search for each GNMT alpha; choose the checkpoint and alpha with the highest
   validation BLEU under beam search. The test sets are never used for choosing.
3. Decode every test split with the choice, greedy and beam (sacreBLEU signatures kept),
   scored also by the papers' BLEU (lowercased, Moses-tokenized; beside, not instead).

Everything runs in this process; nothing is written but ``averaged.pt`` and the JSON
the caller asks for.

``nmt select RUN RUN ...``: each run chosen as above, then the length penalty of their
ensemble on the validation split, then the test splits scored with the ensemble:

1. Before any decoding: the runs' ``best.pt`` files must be distinct and share one source
   and one target vocabulary (an ensemble averages distributions over one target
   vocabulary), and every split must be readable.
2. Each run is chosen as ``nmt select RUN`` chooses it (above): best or
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

from nmt.analysis.selection import (
    SelectError,
    SelectOptions,
    candidate_checkpoints,
    check_splits,
    decode_scores,
    grid_edge,
    no_best_checkpoint,
    score_tests,
    training_summary,
    validation_rows,
)
from nmt.inference.ensemble import load_ensemble
from nmt.model.duplicate_checkpoints import also_as
from nmt.model.rundir import BEST, LOG, check_run_ids, read_valid_log

DEFAULTS = SelectOptions()  # frozen: one shared instance is safe as a default


def select(
    run: Path, opts: SelectOptions = DEFAULTS, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Choose on ``opts.valid_split``, score ``opts.test_splits``; returns the summary
    (choice, validation rows, test BLEU/chrF greedy and beam with signatures, epochs and
    training minutes from the run's valid_log.jsonl).

    Raises:
        SelectError, CheckpointError, DataError, ConfigError: bad options or run (files
            of two training runs included, :func:`nmt.model.rundir.check_run_ids`), or a
            split that cannot be read (before any decoding).
    """
    opts.check()
    best = run / BEST
    if not best.is_file():
        raise no_best_checkpoint(run)
    check_run_ids(run)  # a best.pt copied in from another run would be reported as this one
    check_splits(best, [opts.valid_split, *opts.test_splits], opts.data_path)
    log_rows = read_valid_log(run / LOG)  # a damaged log fails here, before minutes of decoding
    candidates, averaged_from = candidate_checkpoints(run, opts.average, log)
    rows = validation_rows(candidates, opts, log)
    chosen = max((r for r in rows if r["alpha"] is not None), key=lambda r: r["bleu"])
    ckpt = Path(chosen["checkpoint"])
    log(
        f"chosen on {opts.valid_split}: {ckpt} beam {opts.beam} alpha {chosen['alpha']:g} "
        f"(val BLEU {chosen['bleu']:.2f})"
    )
    if edge := grid_edge(chosen["alpha"], opts.alphas):
        log(edge)
    tests = score_tests([ckpt], opts, chosen["alpha"])
    return {
        "run": str(run),
        "chosen_checkpoint": str(ckpt),
        "chosen_checkpoint_sha256": chosen["checkpoint_sha256"],
        "beam": opts.beam,
        "alpha": chosen["alpha"],
        "averaged_from": averaged_from,
        **training_summary(log_rows),
        "val_selection": rows,
        "test": tests,
    }


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
            raise SelectError(
                f"{run} is given twice{also_as(seen[key], run)}: an ensemble of "
                "a model with itself is that model"
            )
        seen[key] = run
        if not (run / BEST).is_file():
            raise no_best_checkpoint(run)
        check_run_ids(run)  # each run's files are its own
    load_ensemble([run / BEST for run in runs])  # vocabularies and duplicates, on the CPU


def select_ensemble(
    runs: list[Path], opts: SelectOptions = DEFAULTS, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Choose every run on ``opts.valid_split``, then the ensemble's alpha there; score
    ``opts.test_splits`` with each member and with the ensemble.

    Returns:
        ``{"members": [the summary of :func:`select` per run],
        "ensemble": {"checkpoints", "checkpoints_sha256", "beam", "alpha",
        "val_selection": [{"alpha", "bleu"}], "test": {split: scores}}}``.

    Raises:
        SelectError, CheckpointError, DataError, ConfigError: as :func:`check_runs` and
            :func:`select`, before any decoding.
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
    log(
        f"chosen on {opts.valid_split}: ensemble alpha {chosen['alpha']:g} "
        f"(val BLEU {chosen['bleu']:.2f})"
    )
    if edge := grid_edge(chosen["alpha"], opts.alphas):
        log(edge)
    return {
        "members": members,
        "ensemble": {
            "checkpoints": [str(p) for p in ckpts],
            "checkpoints_sha256": [m["chosen_checkpoint_sha256"] for m in members],
            "beam": opts.beam,
            "alpha": chosen["alpha"],
            "val_selection": rows,
            "test": score_tests(ckpts, opts, chosen["alpha"], ensemble=True),
        },
    }


def select_runs(
    runs: list[Path], opts: SelectOptions = DEFAULTS, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """``nmt select RUN...``: :func:`select` of one run, :func:`select_ensemble` of several."""
    if len(runs) == 1:
        return select(runs[0], opts, log)
    return select_ensemble(runs, opts, log)
