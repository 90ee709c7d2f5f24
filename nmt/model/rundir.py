"""The run directory (``train.out_dir``): which files a training run leaves there, and
which checkpoint ``--resume`` continues, with which config (:func:`start_run`).

A directory is reused only by ``--resume``, and only from its own files. A run writes
``last.pt``, ``best.pt``, ``step_*.pt`` (``train.keep_checkpoints``), ``valid_log.jsonl``
and ``summary.json``; a fresh run in a directory holding any of these (or any other
``*.pt``) is refused, since it would replace ``best.pt``, delete the old ``step_*.pt``
and append to the old log. ``config.yaml``, ``train.log`` and the ``data/`` store are not
the run's results and do not count.

``--resume`` continues ``last.pt``. When that file is gone but the run's other checkpoints
are there, it continues the latest of ``best.pt`` and ``step_*.pt`` that holds training
state, with a warning. Either way the validation records of ``valid_log.jsonl`` after the
checkpoint's step (validations whose checkpoint was lost) are moved to
``valid_log.set_aside.jsonl``, so the log holds one history and nothing is deleted. A
directory with records but no checkpoint at all (a run killed during its first checkpoint
write) resumes from step 0: every record is set aside, and ``summary.json`` (if any) is
renamed ``summary.set_aside.json``.

Every start removes the run's stale temporary files (``.NAME.XXXXXXXX.tmp`` of
:func:`nmt.ops.files.atomic_open`, left by a kill during a write), so a kill costs at
most the work since the last checkpoint and no disk. Every checkpoint and validation
record carries the run id; :func:`check_run_ids` refuses a directory whose files come
from two runs (a ``best.pt`` copied in from elsewhere).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

from nmt.config.differences import describe_differences, resume_conflicts
from nmt.config.schema import RESUME_ADJUSTABLE, Config, ConfigError
from nmt.model.checkpoint import CheckpointError, read_payload, run_id_of, stored_config
from nmt.ops.files import write_atomic
from nmt.ops.validlog import read_valid_log as read_valid_log  # torch-free: run_state.sh

LAST, BEST, LOG, SUMMARY = "last.pt", "best.pt", "valid_log.jsonl", "summary.json"
AVERAGED = "averaged.pt"  # written by nmt select
SET_ASIDE, SUMMARY_SET_ASIDE = "valid_log.set_aside.jsonl", "summary.set_aside.json"
# a temporary file of atomic_open (tempfile.mkstemp: 8 characters of [a-z0-9_])
_TMP = re.compile(r"\.(.+)\.[a-z0-9_]{8}\.tmp")
STEP_GLOB = "step_*.pt"  # the kept checkpoints of step_name
_STEP = re.compile(r"step_(\d+)\.pt")
# the checkpoint payload a run continues, its file, and the config it continues with
Resumed = tuple[dict, Path, Config]


def step_name(step: int) -> str:
    """The file name of the checkpoint kept at ``step`` (``train.keep_checkpoints``)."""
    return f"step_{step:08d}.pt"


def is_run_checkpoint(name: str) -> bool:
    """Whether ``name`` is one of the checkpoint names a training run writes."""
    return name in (LAST, BEST) or _STEP.fullmatch(name) is not None


def run_files(out: Path) -> list[str]:
    """The names of the files in ``out`` that a training run left there (checkpoints,
    validation log, summary), sorted; empty when ``out`` is new or holds none."""
    if not out.is_dir():
        return []
    return sorted(
        p.name
        for p in out.iterdir()
        if p.is_file() and (p.suffix == ".pt" or p.name in (LOG, SUMMARY))
    )


def listed(names: list[str], at_most: int = 6) -> str:
    """File names for a one-line message: the first ``at_most``, then how many more."""
    more = f" and {len(names) - at_most} more" if len(names) > at_most else ""
    return ", ".join(names[:at_most]) + more


def refuse_reuse(out: Path) -> None:
    """Check that a fresh (not resumed) run may write into ``out``.

    Raises:
        CheckpointError: ``out`` holds files of an earlier run (they are named).
    """
    found = run_files(out)
    if found:
        # advise --resume only where it works (a checkpoint to continue, or records only)
        resumable = restarts_from_scratch(out) or any(p.name != AVERAGED for p in out.glob("*.pt"))
        advice = "pass --resume to continue that run, or " if resumable else ""
        raise CheckpointError(
            f"{out} holds files of an earlier run ({listed(found)}); a fresh run would "
            f"replace or mix with them: {advice}choose another name / train.out_dir"
        )


def restarts_from_scratch(out: Path) -> bool:
    """Whether ``--resume`` of ``out`` starts from step 0: the directory holds a run's
    records (``valid_log.jsonl``, ``summary.json``) but no checkpoint at all, as a run
    killed during its first checkpoint write leaves it."""
    found = run_files(out)
    return bool(found) and not any(name.endswith(".pt") for name in found)


def set_aside_everything(out: Path) -> str:
    """Set aside the records of a run that has no checkpoint (see
    :func:`restarts_from_scratch`), so that it starts again from step 0; returns the
    warning that says so.

    Raises:
        OSError: a file cannot be read or moved.
    """
    moved = [set_aside_records_after(out, -1)]
    if (out / SUMMARY).is_file():
        os.replace(out / SUMMARY, out / SUMMARY_SET_ASIDE)
        moved.append(f"moved {out / SUMMARY} to {out / SUMMARY_SET_ASIDE}")
    notes = "".join(f"; {m.removeprefix('warning: ')}" for m in moved if m)
    return (
        f"warning: {out} has no checkpoint (the run was stopped before its first one "
        f"was written): resuming from step 0{notes}"
    )


def remove_stale_temporaries(out: Path) -> str | None:
    """Remove the temporary files that a killed write left in ``out`` and its ``data/``
    store (``.NAME.XXXXXXXX.tmp``, see :func:`nmt.ops.files.atomic_open`); returns a note
    naming how many and their size, or None when there were none. Called when a run
    starts, before it writes (a run directory has one writer at a time).

    Raises:
        OSError: a file cannot be removed.
    """
    stale = sorted(
        p
        for d in (out, out / "data")
        if d.is_dir()
        for p in d.iterdir()
        if p.is_file() and _TMP.fullmatch(p.name)
    )
    if not stale:
        return None
    size = sum(p.stat().st_size for p in stale)
    for p in stale:
        p.unlink(missing_ok=True)
    return (
        f"removed {len(stale)} temporary file(s) of an interrupted write from {out} "
        f"({size:,} bytes): {listed([p.name for p in stale])}"
    )


def _counters_step(path: Path) -> int | None:
    """The step of a checkpoint with training state; None when it has none."""
    ts = read_payload(path).get("train_state")
    return None if ts is None else int(ts["counters"].get("step", 0))


def resume_source(out: Path) -> tuple[Path | None, str | None]:
    """The checkpoint ``--resume`` continues in ``out``, and a warning when it is not
    ``last.pt``: ``(last.pt, None)``, or the latest of ``best.pt`` and ``step_*.pt`` with
    training state, or ``(None, None)`` when there is none.

    Raises:
        CheckpointError: a checkpoint that must be read to choose is unreadable.
    """
    if (out / LAST).exists():
        return out / LAST, None
    candidates: list[tuple[int, Path]] = []
    steps = sorted(
        (int(m.group(1)), p) for p in out.glob(STEP_GLOB) if (m := _STEP.fullmatch(p.name))
    )
    if steps:  # the newest kept checkpoint; every one of them has training state
        candidates.append(steps[-1])
    if (out / BEST).is_file() and (step := _counters_step(out / BEST)) is not None:
        candidates.append((step, out / BEST))
    if not candidates:
        return None, None
    # on a tie best.pt and step_N.pt were saved at the same validation: either will do
    step, path = max(candidates, key=lambda c: c[0])
    return path, (
        f"warning: {out / LAST} is missing; resuming from {path}, the latest "
        f"checkpoint of this run (step {step}); what was trained after it is "
        "trained again"
    )


def nothing_to_resume(out: Path) -> CheckpointError:
    """The error of ``--resume`` when :func:`resume_source` found no checkpoint: a new
    run, or one whose checkpoints are gone (then a fresh run would be refused too)."""
    found = run_files(out)
    if not found:
        return CheckpointError(
            f"--resume: nothing to resume, {out / LAST} does not exist "
            "(this run has not started; drop --resume)"
        )
    return CheckpointError(
        f"--resume: nothing to resume in {out}: no {LAST}, {BEST} or "
        f"step_*.pt with training state, only {listed(found)}; choose "
        "another name / train.out_dir for a new run"
    )


def set_aside_records_after(out: Path, step: int) -> str | None:
    """Move the records of ``{out}/valid_log.jsonl`` after ``step`` (validations of a part
    of the run whose checkpoint is lost) to ``valid_log.set_aside.jsonl``, so that the
    resumed run's records do not follow them; returns a note saying so, or None when
    there were none. The log is replaced atomically.

    Raises:
        OSError: the log cannot be read or written.
    """
    log = out / LOG
    if not log.is_file():
        return None
    keep: list[str] = []
    later: list[str] = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True):
        try:
            record_step = json.loads(line).get("step")
        except (ValueError, AttributeError):
            # a torn last line (a kill during its append) goes with the lost records;
            # any other line that is not a record of nmt's is left where it is
            record_step = step + 1 if not line.endswith("\n") else None
        line = line if line.endswith("\n") else line + "\n"
        (later if isinstance(record_step, int) and record_step > step else keep).append(line)
    if not later:
        return None
    with open(out / SET_ASIDE, "a", encoding="utf-8") as f:
        f.writelines(later)
    write_atomic(log, "".join(keep))
    return (
        f"warning: moved {len(later)} validation record(s) after step {step} from {log} "
        f"to {out / SET_ASIDE}: their checkpoint is gone"
    )


def _run_ids(out: Path) -> list[tuple[Path, str, str]]:
    """(file, where in it, run id) of every checkpoint (``last.pt``, ``best.pt``,
    ``step_*.pt``, ``averaged.pt``) and validation record of ``out`` that carries a run
    id; files written before nmt stored run ids carry none and are left out."""
    found: list[tuple[Path, str, str]] = []
    for number, record in enumerate(read_valid_log(out / LOG), start=1):
        if isinstance(record.get("run_id"), str):
            found.append((out / LOG, f", record {number},", record["run_id"]))
    names = sorted(
        p.name for p in out.glob("*.pt") if is_run_checkpoint(p.name) or p.name == AVERAGED
    )
    # last.pt first: the run that --resume continues is the one the others must match
    for name in sorted(names, key=lambda n: n != LAST):
        run_id = run_id_of(read_payload(out / name))
        if run_id is not None:
            found.append((out / name, "", run_id))
    return found


def check_run_ids(out: Path) -> None:
    """Refuse a run directory whose checkpoints and validation records come from more than
    one training run (e.g. another run's ``best.pt`` copied in): choosing, averaging or
    resuming would mix them and report one run's history for the other's weights.

    Raises:
        CheckpointError: names the first file of another run, both run ids and the file
            the others agree with; or a file that cannot be read.
    """
    found = _run_ids(out)
    if not found:
        return
    # the run of most files is this run; on a tie, last.pt's (the run --resume continues)
    counts: dict[str, int] = {}
    for _, _, run_id in found:
        counts[run_id] = counts.get(run_id, 0) + 1
    last = next((r for p, _, r in found if p.name == LAST), None)
    ours = max(counts, key=lambda r: (counts[r], r == last))
    witness = next((p, at) for p, at, r in found if r == ours)
    for path, at, run_id in found:
        if run_id != ours:
            raise CheckpointError(
                f"{path}{at.rstrip(',')} belongs to another training run (run id "
                f"{run_id[:8]}) than {witness[0]}{witness[1].rstrip(',')} (run id {ours[:8]}) "
                f"and the other files of {out}; move it out of {out} (or restore this run's "
                "own copy) and run again"
            )


def start_run(
    cfg: Config, out: Path, *, resume: bool, rank: int, log: Callable[[str], None]
) -> tuple[Config, Resumed | None]:
    """Make ``out`` ready for the run of ``cfg``: its stale temporary files removed, then
    a fresh run refused over an earlier run's files (:func:`refuse_reuse`), or with
    ``resume`` the checkpoint to continue found (:func:`_resumed`), or every record set
    aside when there is none (:func:`restarts_from_scratch`). Only rank 0 changes files.

    Returns:
        (the config to train with: the resumed one when resuming, else ``cfg``; the
        resumed checkpoint, None for a run from step 0).

    Raises:
        CheckpointError, ConfigError: as :func:`refuse_reuse` and :func:`_resumed`.
    """
    if rank == 0 and (note := remove_stale_temporaries(out)):
        log(note)
    resumed = _resumed(cfg, out, rank, log) if resume else None
    if resumed is not None:
        cfg = resumed[2]
    elif not resume:
        refuse_reuse(out)
    elif rank == 0:  # --resume of a run killed before its first checkpoint: from step 0
        log(set_aside_everything(out))
    return cfg, resumed


def _resume_config(stored: Config, given: Config, path, log: Callable[[str], None]) -> Config:
    """The configuration a resumed run continues with: the given one, when it differs from
    the stored one only in keys that extend or budget the run (``RESUME_ADJUSTABLE``; each
    change is logged), so a finished run can be extended.

    Raises:
        ConfigError: another key differs; the message names every such key with both values.
    """
    changes = resume_conflicts(stored, given)
    if changes.conflicts:
        raise ConfigError(
            f"{path}: --resume with a configuration that differs from the one "
            f"the run was trained with "
            f"({describe_differences(changes.conflicts, 'stored', 'given')}); "
            f"only {', '.join(RESUME_ADJUSTABLE)} may change on resume"
        )
    for key, a, b in changes.changed:
        log(f"resume: {key} changed from {a!r} to {b!r}")
    return given


def _resumed(
    cfg: Config, out: Path, rank: int, log: Callable[[str], None]
) -> tuple[dict, Path, Config] | None:
    """The checkpoint ``--resume`` continues (payload, file, the config to continue
    with), after the run's records after it are set aside; None when the directory has
    records but no checkpoint (:func:`restarts_from_scratch`: the run starts from step 0).

    Raises:
        CheckpointError: nothing to resume, a checkpoint without training state, or files
            of two runs (:func:`check_run_ids`). ConfigError: see :func:`_resume_config`.
    """
    source, warning = resume_source(out)
    if source is None:
        if restarts_from_scratch(out):
            return None
        raise nothing_to_resume(out)
    check_run_ids(out)
    payload = read_payload(source)
    cfg = _resume_config(stored_config(payload, source), cfg, source, log)
    if payload.get("train_state") is None:
        raise CheckpointError(f"{source}: has no training state to resume")
    if warning:
        log(warning)
    if rank == 0:
        note = set_aside_records_after(out, int(payload["train_state"]["counters"].get("step", 0)))
        if note:
            log(note)
    return payload, source, cfg
