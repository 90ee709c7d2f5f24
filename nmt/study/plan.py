"""Study plan: the models a study compares and, for each, whether to reuse, resume or train it.

Each model is an ordinary ``nmt train`` run, ``runs/{run_prefix}_{label}``: the study's base
config with the study's overrides and the model's attention (and, on the extra axes, its
training-length cap, head count or seed). A finished run whose stored config equals the expected
one is reused, and so is one that early stopping ended when only its budget changed (a
larger ``train.max_epochs`` would not train it further); an unfinished one is resumed, a run
with a different config is an error. A run directory is judged by its own files, as ``nmt
train`` judges it (nmt/model/rundir.py): one whose ``last.pt`` is gone is resumed from its
latest checkpoint (``nmt train --resume`` warns), and one holding an earlier run's files but
no checkpoint to resume is an error, never trained over. A model with no run directory
whose run name is that of one of the study's ``model_folders`` (nmt/study/shipped.py) is
"shipped": decoded from the folder like a finished run, not trained. A model with neither a
run directory nor a folder, whose records and translations are in the study's
``archive_dir`` (nmt/study/archive.py), is "archived": reported from there, not trained
again. So a run directory comes first, then a model folder (it has the weights, so
heatmaps too), then the archive.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from nmt.config.differences import describe_differences, resume_conflicts
from nmt.config.load import load_config
from nmt.config.schema import Config, ConfigError, StudyConfig
from nmt.model.checkpoint import read_payload, stored_config
from nmt.model.rundir import BEST, listed, restarts_from_scratch, resume_source, run_files
from nmt.study.archive import ArchiveError, archived_sha256, run_archive
from nmt.study.shipped import ShippedError, check_shipped, read_model_folders
from nmt.training.state import patience_spent

# the actions of a model that the report can use without training it
REPORTABLE = ("reuse", "archived", "shipped")


class StudyError(RuntimeError):
    """A study run failed or conflicts with an existing run; the message names it."""


@dataclass
class PlannedRun:
    """One model of the study: its attention, full config and what must be done."""

    attention: str
    cfg: Config
    # "reuse" | "resume" | "train" | "archived" (records only, no checkpoint) | "shipped"
    # (an exported model folder, ``source``, instead of a run directory)
    action: str
    cap: int | None = None  # data.max_train_words of an extra training-length run
    heads: int | None = None  # model.heads of an extra multi-head run
    seed: int | None = None  # train.seed of an extra-seed run (seed_models x extra_seeds)
    note: str = ""  # why the action differs from the usual one, for the study's log
    archive: Path | None = None  # where its records and translations are kept in git
    archived_sha256: str | None = None  # its checkpoint's digest, when only archived
    source: Path | None = None  # the model folder of a shipped run

    @property
    def checkpoint(self) -> Path:
        """What its model is loaded from: the model folder of a shipped run, else the run
        directory's ``best.pt``."""
        if self.action == "shipped" and self.source is not None:
            return self.source
        return self.out_dir / BEST

    @property
    def records(self) -> Path:
        """Where ``summary.json`` and the logs are: the archive of an archived run, else
        the run directory."""
        if self.action == "archived" and self.archive is not None:
            return self.archive
        return self.out_dir

    @property
    def label(self) -> str:
        """The model's name in tables and plots: ``additive``, ``additive-30`` for a run
        of the training-length axis (Bahdanau et al.'s RNNsearch-30), ``multihead-1h`` for
        a multi-head run with another head count, ``multihead-4h_s2`` for a run of the
        seed axis."""
        return model_label(self.attention, self.cap, self.heads, self.seed)

    @property
    def out_dir(self) -> Path:
        """The run directory, ``runs/{run_prefix}_{attention}`` by default."""
        return self.cfg.out_dir()

    def overrides(self, study: StudyConfig) -> list[str]:
        """The ``key=value`` overrides that turn the base config into this run's config."""
        return run_overrides(study, self.attention, self.cap, self.heads, self.seed)


def missing_reason(run: PlannedRun) -> str:
    """Why ``run`` (action "train" or "resume") cannot be reported yet, in a few words."""
    if run.action == "resume":
        return f"unfinished run in {run.out_dir} (resume it: nmt study)"
    archive = f", no archive in {run.archive}" if run.archive is not None else ""
    return f"not trained yet (no run directory {run.out_dir}, no model folder{archive})"


def model_label(
    attention: str, cap: int | None = None, heads: int | None = None, seed: int | None = None
) -> str:
    """``attention``, ``attention-{cap}`` or ``attention-{heads}h``, then ``_s{seed}`` for
    a run of the seed axis."""
    if cap is not None:
        label = f"{attention}-{cap}"
    else:
        label = attention if heads is None else f"{attention}-{heads}h"
    return label if seed is None else f"{label}_s{seed}"


def run_overrides(
    study: StudyConfig,
    attention: str,
    cap: int | None,
    heads: int | None = None,
    seed: int | None = None,
) -> list[str]:
    """Study overrides, then the model's attention, name, ``data.max_train_words=cap``
    (the training-length axis), ``model.heads=heads`` (the head-count axis) and
    ``train.seed=seed`` (the seed axis)."""
    extra = [] if cap is None else [f"data.max_train_words={cap}"]
    extra += [] if heads is None else [f"model.heads={heads}"]
    extra += [] if seed is None else [f"train.seed={seed}"]
    return [
        *study.overrides,
        *extra,
        f"model.attention={attention}",
        f"name={study.run_prefix}_{model_label(attention, cap, heads, seed)}",
    ]


def plan(study: StudyConfig) -> list[PlannedRun]:
    """Decide for each model (every attention type, then the training-length axis:
    ``cap_attentions`` for each of ``extra_caps``, then ``multihead`` with each of
    ``head_counts``, then each of ``seed_models`` again with each of ``extra_seeds``)
    whether to reuse, resume or train it, or report it from its model folder or archive.

    Raises:
        StudyError: an existing run was trained with a different config, a run directory
            holds an earlier run's files but no checkpoint to resume from (named), or two
            models of the study would be the same model (e.g. a head count equal to the
            ``multihead`` model's own), a model folder is unreadable, holds no model of
            the study or was trained with another config (folder and key named).
        ConfigError: the base config or an override is invalid (a ``head_counts`` or
            ``extra_seeds`` entry is named), a ``seed_models`` entry that is no model of
            the study.
    """
    runs = []
    models = _models(study)
    try:
        folders = read_model_folders(study)
    except ShippedError as e:
        raise StudyError(str(e)) from None
    seen: dict[str, str] = {}
    for attention, cap, heads, seed in models:
        try:
            cfg = load_config(study.base_config, run_overrides(study, attention, cap, heads, seed))
        except ConfigError as e:
            if heads is None and seed is None:
                raise
            axis = f"extra_seeds: {seed}" if seed is not None else f"head_counts: {heads}"
            raise ConfigError(f"{axis}: {e}") from None
        label = model_label(attention, cap, heads, seed)
        same = dataclasses.replace(cfg, name="").to_dict()
        key = repr(same)
        if key in seen:
            raise StudyError(
                f"{label} and {seen[key]} would be the same model (their configs "
                "differ only in the name); remove one from the study"
            )
        seen[key] = label
        action, note = _action(cfg)
        archive, sha = run_archive(study, cfg.name), None
        shipped = folders.pop(cfg.name, None)
        if action == "train" and shipped is not None:
            try:
                check_shipped(shipped, cfg)
            except ShippedError as e:
                raise StudyError(str(e)) from None
            action, note = "shipped", f"from {shipped.folder}"
        elif action == "train" and archive is not None:
            try:
                sha = archived_sha256(archive, cfg)
            except ArchiveError as e:
                raise StudyError(str(e)) from None
            if sha is not None:
                action, note = "archived", f"records and translations in {archive}"
        source = shipped.folder if action == "shipped" and shipped else None
        runs.append(
            PlannedRun(attention, cfg, action, cap, heads, seed, note, archive, sha, source)
        )
    for name, unused in folders.items():
        raise StudyError(
            f"model_folders: {unused.folder} holds run {name!r}, which is no model of the "
            f"study (its runs: {', '.join(r.cfg.name for r in runs)})"
        )
    return runs


def _models(study: StudyConfig) -> list[tuple[str, int | None, int | None, int | None]]:
    """(attention, cap, heads, seed) of every model of the study, in :func:`plan`'s order.

    Raises:
        ConfigError: a ``seed_models`` entry names no model of the other axes.
    """
    models: list[tuple[str, int | None, int | None, int | None]] = [
        (a, None, None, None) for a in study.attentions
    ]
    models += [(a, cap, None, None) for cap in study.extra_caps for a in study.cap_attentions]
    models += [("multihead", None, h, None) for h in study.head_counts]
    by_label = {model_label(a, c, h): (a, c, h) for a, c, h, _ in models}
    for name in study.seed_models:
        if name not in by_label:
            raise ConfigError(
                f"seed_models: {name!r} is not a model of the study (its "
                f"models: {', '.join(by_label)})"
            )
    models += [(*by_label[name], s) for name in study.seed_models for s in study.extra_seeds]
    return models


def _action(cfg: Config) -> tuple[str, str]:
    """What to do with the run directory of ``cfg``, and a note when it is not the usual
    (see the module docstring).

    Raises:
        StudyError: see :func:`plan`.
    """
    out = cfg.out_dir()
    found = run_files(out)
    if not found:
        return "train", ""
    source, warning = resume_source(out)
    if source is None and restarts_from_scratch(out):
        return "resume", "no checkpoint yet (stopped before the first): from step 0"
    if source is None:
        raise StudyError(
            f"{out} holds files of an earlier run ({listed(found)}) but no "
            "checkpoint to resume from; delete the run or change run_prefix"
        )
    payload = read_payload(source)
    stored = stored_config(payload, source)
    changes = resume_conflicts(stored, cfg)
    if changes.conflicts:
        raise StudyError(
            f"{source} was trained with a different config "
            f"({describe_differences(changes.conflicts, 'run', 'study')}); "
            "delete the run or change run_prefix"
        )
    if warning:
        return "resume", f"{source.name}, since last.pt is missing"
    counters = (payload.get("train_state") or {}).get("counters", {})
    if counters.get("done") and not changes.changed:
        return "reuse", ""
    if counters.get("done") and _stopped_early(counters, cfg):
        # patience ended it, not the budget: a larger budget would not train another step
        return "reuse", "stopped early (patience), so a changed budget does not continue it"
    # a changed budget (steps, minutes, epochs...) resumes the run with the new one
    return "resume", ""


def _stopped_early(counters: dict[str, object], cfg: Config) -> bool:
    """Whether a finished run's validations without a gain reach ``cfg``'s patience."""
    bad = counters.get("bad_epochs")
    return isinstance(bad, int) and patience_spent(bad, cfg.train.patience)
