"""The study report's Models section: one row per trained model from its summary.json,
the validation choice of alpha, and the resolved config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from nmt.config.schema import LOCAL_KINDS, StudyConfig
from nmt.study.plan import PlannedRun, StudyError
from nmt.study.shipped import ShippedError, folder_summary


def run_summary(path: Path) -> dict[str, Any]:
    """A run's ``summary.json`` (written by ``nmt train``).

    Raises:
        StudyError: unreadable, not JSON, or a key the report needs is missing (names the
            file).
    """
    keys = ("parameters", "epochs", "steps", "elapsed_min", "best_val_bleu")
    try:
        s = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StudyError(
            f"{path}: not found; nmt train writes it when a run ends, so this "
            "run has not finished (rerun the study to train it)"
        ) from None
    except (OSError, ValueError) as e:
        raise StudyError(
            f"{path}: unreadable run summary (expected the JSON object nmt train writes): {e}"
        ) from None
    missing = [k for k in keys if not isinstance(s, dict) or k not in s]
    if missing:
        raise StudyError(f"{path}: run summary lacks {', '.join(missing)}")
    return s


def summary_of(run: PlannedRun) -> dict[str, Any]:
    """The training record of ``run``: its ``summary.json`` (run directory or archive), or
    for a shipped run its model folder's ``results.json`` (:func:`folder_summary`).

    Raises:
        StudyError: the record is unreadable or incomplete (names the file).
    """
    if run.action == "shipped" and run.source is not None:
        try:
            return folder_summary(run.source)
        except ShippedError as e:
            raise StudyError(str(e)) from None
    return run_summary(run.records / "summary.json")


def source_of(run: PlannedRun) -> str:
    """Where the report's model comes from, for the Models table: its run directory, the
    study's archive (no checkpoint) or a model folder (with the precision of its weights)."""
    if run.action == "shipped" and run.source is not None:
        dtype = folder_summary(run.source)["weights_dtype"]
        return f"from {run.source}" + ("" if dtype == "fp32" else f" ({dtype} weights)")
    if run.action == "archived":
        return f"archive {run.archive} (no checkpoint)"
    return f"run {run.out_dir}"


def _attention_name(m) -> str:
    """``additive``, ``local_p (general, D=10)``, ``multihead (4 heads)``."""
    if m.attention in LOCAL_KINDS:
        return f"{m.attention} ({m.local_score}, D={m.local_window})"
    if m.attention == "multihead":
        return f"multihead ({m.heads} head{'s' if m.heads != 1 else ''})"
    return m.attention


def runs_section(
    study: StudyConfig, runs: list[PlannedRun], alpha_choice: dict[str, dict] | None = None
) -> list[str]:
    """Markdown lines of the Models section for ``runs`` (their ``summary.json`` files).

    Raises:
        StudyError: a run's summary is unreadable or incomplete (names the file).
    """
    caps = sorted({r.cfg.data.max_train_words or 0 for r in runs})
    what = (
        "only `model.attention` differs"
        if len(caps) == 1
        else "models differ only in `model.attention`, and models named `-N` were trained "
        "with `data.max_train_words=N` (the paper's RNNsearch-30/-50 axis); the others "
        f"with the cap of the overrides ({runs[0].cfg.data.max_train_words} words)"
    )
    if any(r.cfg.model.attention == "multihead" for r in runs):
        heads = sorted({r.cfg.model.heads for r in runs if r.cfg.model.attention == "multihead"})
        what += (
            f"; `multihead` has `model.heads` heads ({', '.join(map(str, heads))}; a "
            "model named `-Nh` has N), every head count with the same parameters"
        )
    if any(r.cfg.model.attention in LOCAL_KINDS for r in runs):
        m = next(r.cfg.model for r in runs if r.cfg.model.attention in LOCAL_KINDS)
        what += (
            f"; `local_m`/`local_p` score with `{m.local_score}` over a window of "
            f"D = {m.local_window} source pieces on each side"
        )
    md = [
        "## Models\n",
        f"Base config `{study.base_config}` with overrides "
        f"`{' '.join(study.overrides) or '(none)'}`; {what}.\n",
        "| model | training cap (words) | parameters | epochs | steps "
        "| wall-clock (min) | best val score (greedy) | attention | source |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        s = summary_of(r)
        md.append(
            f"| {r.label} | {r.cfg.data.max_train_words} | {s['parameters']:,} | "
            f"{s['epochs']} | {s['steps']} | {s['elapsed_min']:.1f} | "
            f"{s['best_val_bleu']:.2f} | {_attention_name(r.cfg.model)} | {source_of(r)} |"
        )
    if any(r.action == "shipped" for r in runs):
        md.append(
            "\nA model `from` a folder is an exported model folder (`model_folders` of the "
            "study; `nmt export`): decoded from its weights as stored there, its training "
            "record from the folder's `results.json` (wall-clock: the run's summary, or "
            "its last validation's time when the export found no summary)."
        )
    for label, c in (alpha_choice or {}).items():
        tried = ", ".join(f"{a}: {v:.2f}" for a, v in c["val_score_by_alpha"].items())
        md.append(f"- {label}: alpha {c['alpha']:g} chosen on the validation score ({tried})")
    if runs[0].cfg.data.valid_join_ks:
        md.append(
            "\nBest val score: mean of the BLEU on the validation split and on the "
            "validation split joined as configured (each run's `valid_log.jsonl` has both)."
        )
    cfg = yaml.safe_dump(runs[0].cfg.to_dict(), sort_keys=False)
    md += [
        "",
        f"<details><summary>Resolved config of `{runs[0].cfg.name}`</summary>\n",
        f"```yaml\n{cfg}```\n</details>\n",
    ]
    return md
