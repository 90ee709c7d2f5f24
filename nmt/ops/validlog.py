"""A run's validation log (``valid_log.jsonl``), read without torch: the shell scripts
(scripts/run_state.sh) ask where a run stands a few times per model, and importing torch
for that costs seconds of CPU each time, where reading the JSON costs milliseconds.

:func:`read_valid_log` is the one reader: ``nmt select``, ``nmt export`` and the run
directory's resume logic (nmt/model/rundir.py) use it too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class CheckpointError(RuntimeError):
    """A checkpoint or another file of a run directory cannot be read or written; the
    message names the file. (Defined here, free of torch, so that the validation log's
    reader raises it without importing the model; nmt.model.checkpoint re-exports it.)"""


def read_valid_log(path: Path) -> list[dict[str, Any]]:
    """The validation records of a run's ``valid_log.jsonl``, one dict per non-blank line
    (``step``, ``val_bleu``, ``elapsed_s``, ...); ``[]`` when the file does not exist.

    Raises:
        CheckpointError: the file cannot be read, or a line is not a JSON object with an
            integer ``step`` and a numeric ``val_bleu`` (names the file and line number).
    """
    if not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path}: unreadable validation log: {e}") from None
    records: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as e:
            raise CheckpointError(
                f"{path}, line {number}: not a JSON record ({e}); the "
                "log is damaged: restore it or remove that line"
            ) from None
        if (
            not isinstance(record, dict)
            or not isinstance(record.get("step"), int)
            or not isinstance(record.get("val_bleu"), (int, float))
        ):
            raise CheckpointError(
                f"{path}, line {number}: not a validation record (expected "
                'an object with an integer "step" and a number "val_bleu")'
            )
        records.append(record)
    return records
