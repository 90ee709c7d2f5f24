"""``nmt study``: train the study's models, several at once, then write its report.

Each model is an ordinary ``nmt train`` run (``runs/{run_prefix}_{attention}``), started as a
subprocess so several can train at once. Which models there are and whether each is reused,
resumed or trained is decided in nmt/study/plan.py; evaluation and the report are in
nmt/study/report.py.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from nmt.config.schema import StudyConfig
from nmt.ops.files import check_writable
from nmt.study.plan import REPORTABLE, PlannedRun, StudyError, missing_reason, plan
from nmt.study.report import write_report


def _start(run: PlannedRun, study: StudyConfig) -> subprocess.Popen:
    run.out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "nmt", "train", study.base_config, *run.overrides(study)]
    if run.action == "resume":
        cmd.append("--resume")
    log = open(run.out_dir / "train.log", "a", encoding="utf-8")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def train_all(
    study: StudyConfig, runs: list[PlannedRun], log: Callable[[str], None] = print
) -> None:
    """Train or resume every run that needs it, ``study.parallel`` at a time.

    Raises:
        StudyError: a training subprocess failed (names its log file).
    """
    pending = [r for r in runs if r.action not in REPORTABLE]
    for r in runs:
        if r.action == "reuse":
            log(f"{r.cfg.name}: finished run found in {r.out_dir}, reused")
        elif r.action == "archived":
            log(f"{r.cfg.name}: no run directory; reported from its {r.note}")
        elif r.action == "shipped":
            log(f"{r.cfg.name}: no run directory; reported from its model folder {r.source}")
    active: list[tuple[PlannedRun, subprocess.Popen]] = []
    try:
        while pending or active:
            while pending and len(active) < study.parallel:
                run = pending.pop(0)
                note = f" from {run.note}" if run.note else ""
                log(f"{run.cfg.name}: {run.action}{note} ({run.out_dir / 'train.log'})")
                active.append((run, _start(run, study)))
            time.sleep(2.0)
            for run, proc in list(active):
                if proc.poll() is None:
                    continue
                active.remove((run, proc))
                if proc.returncode != 0:
                    tail = (run.out_dir / "train.log").read_text(errors="replace")[-800:]
                    raise StudyError(
                        f"{run.cfg.name}: training failed (exit {proc.returncode});"
                        f" see {run.out_dir / 'train.log'}:\n{tail}"
                    )
                log(f"{run.cfg.name}: done")
    finally:
        for _run, proc in active:  # Ctrl-C: children got SIGINT too and save last.pt
            proc.wait()
    for i, r in enumerate(runs):
        if r.action not in ("archived", "shipped"):
            runs[i] = dataclasses.replace(r, action="reuse")


def run_study(
    study: StudyConfig,
    report_only: bool = False,
    log: Callable[[str], None] = print,
    allow_missing: bool = False,
) -> Path:
    """Plan, train what is missing, evaluate, and write the report; returns its path. With
    ``report_only`` nothing is trained; with ``allow_missing`` too, the report covers the
    models that can be reported (finished, archived or shipped) and lists the others at
    its top, where without it a missing model is an error.

    Raises:
        StudyError: ``report_only`` and a model is unfinished or missing (without
            ``allow_missing``), or no model at all can be reported; ``allow_missing``
            without ``report_only``; a ``report_dir`` that cannot be written (checked
            first).
        ConfigError, DataError, CheckpointError.
    """
    if allow_missing and not report_only:
        raise StudyError(
            "--allow-missing: only with --report-only (without it the study trains "
            "the missing models)"
        )
    try:  # checked before hours of training: the report is written at the end
        check_writable(Path(study.report_dir.format(name=study.name)), "report_dir", folder=True)
    except ValueError as e:
        raise StudyError(str(e)) from None
    runs = plan(study)
    if report_only and allow_missing:
        present = [r for r in runs if r.action in REPORTABLE]
        missing = [r for r in runs if r.action not in REPORTABLE]
        if not present:
            raise StudyError(
                "--report-only --allow-missing: no model of the study is finished, "
                "archived or shipped yet; train one first (nmt study without --report-only)"
            )
        for r in missing:
            log(f"{r.cfg.name}: {missing_reason(r)}; left out of the report")
        return write_report(study, present, log, missing)
    if report_only:
        absent = [r for r in runs if r.action == "train"]
        unfinished = [r for r in runs if r.action == "resume"]
        if absent or unfinished:
            why = (
                [
                    f"unfinished runs (resume them: nmt study without --report-only): "
                    f"{', '.join(r.cfg.name for r in unfinished)}"
                ]
                if unfinished
                else []
            )
            if absent:
                where = ", ".join(str(r.out_dir) for r in absent)
                why.append(
                    f"no run, no model folder and no archive for {where} (checkpoints "
                    "stay out of git; train them: nmt study without --report-only, or "
                    "report the others: --allow-missing)"
                )
            raise StudyError("--report-only: " + "; ".join(why))
    else:
        train_all(study, runs, log)
    return write_report(study, runs, log)
