"""What ``nmt select`` is made of: its options, the checkpoints it compares (``best.pt``
and the average of the last kept ones), the decoding and scoring of a split with a given
beam and alpha (the validation rows it chooses from among them), the training summary of a
run's log, the test scores of a choice, and the warning when the chosen alpha is at
the edge of the grid tried. The choosing itself is nmt/commands/select.py."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmt.config.schema import SearchConfig
from nmt.data.corpus import read_split
from nmt.data.stored import stored_corpus
from nmt.inference.scoring import score_checkpoints
from nmt.model.average import average_checkpoints
from nmt.model.checkpoint import read_payload, save_atomic, stored_config
from nmt.model.rundir import BEST, STEP_GLOB


class SelectError(ValueError):
    """A bad option or run directory; the message names it."""


def no_best_checkpoint(run: Path) -> SelectError:
    """The error for a run without ``best.pt``; a checkpoint file given in place of its run
    directory (``runs/x/best.pt``) is told so, not sent looking for ``best.pt/best.pt``."""
    if run.is_file():
        return SelectError(
            f"{run} is a file: give the run directory that holds {BEST} "
            f"({run.parent}), not a checkpoint"
        )
    return SelectError(f"{run / BEST} not found: is {run} a finished training run?")


@dataclass(frozen=True)
class SelectOptions:
    """What ``nmt select`` tries; see the module docstring."""

    beam: int = SearchConfig.beam_size
    alphas: tuple[float, ...] = (0.6, 1.0, 1.4)
    average: int = 5  # average the last N kept checkpoints; 0: best.pt only
    valid_split: str = "val"
    test_splits: tuple[str, ...] = ("test_2016_flickr", "test_2017_flickr")
    data_path: str | None = None
    device: str = "auto"
    batch_size: int = 64

    def check(self) -> None:
        """Raises SelectError naming the option that cannot work."""
        if self.beam < 2:
            raise SelectError("--beam must be at least 2 (greedy search is always decoded too)")
        if self.average < 0:
            raise SelectError("--average must be 0 (off) or more")
        if not self.alphas:
            raise SelectError("--alphas is empty")
        if not self.test_splits:
            raise SelectError("--test-splits is empty")
        if self.valid_split in self.test_splits:
            raise SelectError(
                f"--valid-split {self.valid_split} is also a test split: choosing "
                "on it would overstate the test score"
            )


def parse_alphas(text: str) -> tuple[float, ...]:
    """``"0.6,1.0"`` -> ``(0.6, 1.0)``.

    Raises:
        SelectError: an entry is not a finite number >= 0 (named).
    """
    alphas = []
    for part in text.split(","):
        try:
            alpha = float(part)
        except ValueError:
            raise SelectError(
                f"--alphas: {part!r} is not a number (give e.g. 0.6,1.0,1.4)"
            ) from None
        if not math.isfinite(alpha) or alpha < 0:
            raise SelectError(f"--alphas: {part!r} must be a finite number >= 0")
        alphas.append(alpha)
    return tuple(alphas)


def grid_edge(alpha: float, alphas: tuple[float, ...]) -> str | None:
    """A warning when the chosen ``alpha`` is the largest of two or more tried: val BLEU
    may still rise beyond the grid, so the choice is the grid's limit, not val's optimum.
    The smallest is no such limit when it is 0 (no length penalty)."""
    if len(set(alphas)) < 2:
        return None
    if alpha == max(alphas):
        side, wider = "largest", f"{alpha:g},{alpha + 0.4:g},{alpha + 0.8:g}"
    elif alpha == min(alphas) and alpha > 0:
        side, wider = "smallest", f"0,{alpha / 2:g},{alpha:g}"
    else:
        return None
    return (
        f"warning: alpha {alpha:g} is the {side} of --alphas "
        f"{','.join(f'{a:g}' for a in alphas)}: val BLEU may be higher beyond it; "
        f"try --alphas {wider} (still chosen on val only)"
    )


def check_splits(best: Path, splits: list[str], data_path: str | None) -> None:
    """Fail now, not after an hour of decoding, when a split cannot be read."""
    payload = read_payload(best)
    data = stored_corpus(stored_config(payload, best).data, data_path)
    for split in splits:
        read_split(data, split, limit=1)


def candidate_checkpoints(
    run: Path, average: int, log: Callable[[str], None]
) -> tuple[list[Path], list[str]]:
    """best.pt, and averaged.pt made from the last ``average`` kept checkpoints."""
    kept = sorted(run.glob(STEP_GLOB))[-average:] if average else []
    if average and not kept:
        log(f"note: {run} has no step_*.pt (train.keep_checkpoints), so only best.pt is compared")
        return [run / BEST], []
    if len(kept) < average:
        log(f"note: {run} keeps only {len(kept)} step_*.pt, fewer than --average {average}")
    if not kept:
        return [run / BEST], []
    save_atomic(average_checkpoints(kept), run / "averaged.pt")
    log(f"averaged {', '.join(p.name for p in kept)} into {run / 'averaged.pt'}")
    return [run / BEST, run / "averaged.pt"], [p.name for p in kept]


def decode_scores(
    ckpts: list[Path],
    opts: SelectOptions,
    split: str,
    beam: int,
    alpha: float,
    ensemble: bool = False,
) -> list[dict[str, Any]]:
    """``nmt evaluate``'s JSON records for ``ckpts`` on ``split`` (beam 1: greedy), or with
    ``ensemble`` the one record of their ensemble. Raises as
    :func:`nmt.inference.scoring.score_checkpoints`."""
    return [
        s.record
        for s in score_checkpoints(
            ckpts,
            split=split,
            data_path=opts.data_path,
            beam_size=beam,
            alpha=alpha,
            device=opts.device,
            batch_size=opts.batch_size,
            ensemble=ensemble,
            members=not ensemble,
        )
    ]


def validation_rows(
    candidates: list[Path], opts: SelectOptions, log: Callable[[str], None]
) -> list[dict[str, Any]]:
    """The rows ``nmt select`` chooses from: each of ``candidates`` decoded on
    ``opts.valid_split`` greedily (``beam`` 1, ``alpha`` None), then with beam ``opts.beam``
    at each of ``opts.alphas`` (announced through ``log``), as ``{"checkpoint", "beam",
    "alpha", "bleu", "checkpoint_sha256"}``. Raises as :func:`decode_scores`."""
    rows = [
        {
            "checkpoint": str(Path(r["checkpoint"])),
            "beam": 1,
            "alpha": None,
            "bleu": r["bleu"],
            "checkpoint_sha256": r["checkpoint_sha256"],
        }
        for r in decode_scores(candidates, opts, opts.valid_split, 1, 0.0)
    ]
    for alpha in opts.alphas:
        log(f"{opts.valid_split}: beam {opts.beam}, alpha {alpha:g}")
        rows += [
            {
                "checkpoint": r["checkpoint"],
                "beam": opts.beam,
                "alpha": alpha,
                "bleu": r["bleu"],
                "checkpoint_sha256": r["checkpoint_sha256"],
            }
            for r in decode_scores(candidates, opts, opts.valid_split, opts.beam, alpha)
        ]
    return rows


def training_summary(log_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What a run's ``valid_log.jsonl`` rows (:func:`nmt.ops.validlog.read_valid_log`) tell
    of its training, for ``nmt select``'s summary: ``epochs``, ``training_minutes`` (None
    without a numeric ``elapsed_s``) and ``best_val_bleu_greedy_during_training`` (None
    without rows)."""
    last = log_rows[-1] if log_rows else {}
    return {
        "epochs": last.get("epochs_done", last.get("epoch")),
        "training_minutes": (
            round(last["elapsed_s"] / 60, 1)
            if isinstance(last.get("elapsed_s"), (int, float))
            else None
        ),
        "best_val_bleu_greedy_during_training": max(
            (r["val_bleu"] for r in log_rows), default=None
        ),
    }


def score_tests(
    ckpts: list[Path], opts: SelectOptions, alpha: float, ensemble: bool = False
) -> dict[str, dict[str, Any]]:
    """Per test split: BLEU and chrF greedy and with beam ``opts.beam`` at ``alpha``, the
    papers' BLEU, and the signatures; of ``ckpts[0]`` alone, or of the ensemble of
    ``ckpts``. Raises as :func:`decode_scores`."""
    tests = {}
    for split in opts.test_splits:
        g = decode_scores(ckpts, opts, split, 1, 0.0, ensemble)[0]
        b = decode_scores(ckpts, opts, split, opts.beam, alpha, ensemble)[0]
        tests[split] = {
            "greedy_bleu": g["bleu"],
            "beam_bleu": b["bleu"],
            "beam_gain": round(b["bleu"] - g["bleu"], 2),
            "greedy_chrf": g["chrf"],
            "beam_chrf": b["chrf"],
            "signature": b["signature"],
            "chrf_signature": b["chrf_signature"],
            "greedy_bleu_papers": g["bleu_papers"],
            "beam_bleu_papers": b["bleu_papers"],
            "papers_signature": b["papers_signature"],
            "search": b["search"],
        }
    return tests
