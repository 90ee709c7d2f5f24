"""Study reports served by ``nmt serve --study reports/NAME``: BLEU by source length for
every model of the study (``GET /api/studies/{name}``), from the report's
``results.json`` (written by :func:`nmt.study.report.write_report`).

Each bucket carries, per model, n, BLEU with its 95% bootstrap interval, chrF, the
length ratio and the brevity penalty, and the ids of the bucket's sentences: line
numbers of the served test set of the same name (``GET /api/examples``), which the
study's own test-set definition builds (:func:`definitions`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmt.config.load import load_config
from nmt.data.digest import lines_sha256
from nmt.evaluation.metrics import bucket_label
from nmt.serve.limits import not_found
from nmt.serve.testsets import SetDefinition, TestSet, TestSets, in_bucket

_ROW_KEYS = ("n", "mean_src_words", "too_few", "len_ratio", "brevity_penalty", "over_long")


class StudyError(ValueError):
    """A ``--study`` that is not a study report; the message names the file."""


@dataclass
class Study:
    """One study report: its name, folder, parsed ``results.json`` and translation
    direction (``de->en``; None when the study's config cannot be read)."""

    name: str
    folder: Path
    results: dict[str, Any]
    direction: str | None = None

    @property
    def config(self) -> dict[str, Any]:
        """The study's config as the report stored it."""
        return self.results.get("study") or {}


def load_study(folder: Path) -> Study:
    """A study report folder (or its results.json).

    Raises:
        StudyError: no readable results.json with ``test_sets``.
    """
    path = folder / "results.json" if folder.is_dir() else folder
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise StudyError(f"--study {folder}: cannot read {path}: {e}") from None
    if not isinstance(results, dict) or not isinstance(results.get("test_sets"), dict):
        raise StudyError(f"--study {folder}: {path} has no test_sets: not a study report")
    name = (results.get("study") or {}).get("name") or path.parent.name
    study = Study(str(name), path.parent, results)
    study.direction = _direction(study)
    return study


def _direction(study: Study) -> str | None:
    """``src->tgt`` of the study's ``base_config`` with its ``overrides`` (the report
    stores no direction of its own), the config's path taken from the current directory
    or from the repository above ``reports/NAME``; None when it cannot be read."""
    c = study.config
    base = c.get("base_config")
    if not isinstance(base, str):
        return None
    for root in (Path.cwd(), study.folder.parent.parent):
        path = Path(base) if Path(base).is_absolute() else root / base
        if path.is_file():
            try:
                data = load_config(path, [str(x) for x in c.get("overrides") or []]).data
            except (OSError, ValueError):  # ValueError: ConfigError too
                return None
            return f"{data.src_lang}->{data.tgt_lang}"
    return None


def definitions(study: Study) -> list[SetDefinition]:
    """The test sets the study decoded: its ``test_splits`` as distributed, and each
    long-set split joined with its ``join_ks`` as ``{split}_joined``."""
    c = study.config
    out = [SetDefinition(s, s) for s in c.get("test_splits") or []]
    ks = tuple(c.get("join_ks") or (1, 2, 3, 4))
    longs = [c.get("long_set_split"), *(c.get("long_set_splits") or [])]
    out += [SetDefinition(f"{s}_joined", s, ks) for s in dict.fromkeys(longs) if s]
    return out


def _ci(b: Any) -> dict[str, Any] | None:
    return None if not isinstance(b, dict) else {k: b.get(k) for k in ("score", "low", "high")}


def _test_set(name: str, record: dict[str, Any], ts: TestSet | str | None) -> dict[str, Any]:
    """One test set of the study: buckets with per-model rows and example ids."""
    buckets: dict[tuple[int, int | None], dict[str, Any]] = {}
    systems: list[str] = []
    for row in record.get("buckets") or []:
        key = (int(row["min_len"]), row.get("max_len"))
        b = buckets.setdefault(
            key, {"label": bucket_label(*key), "min_len": key[0], "max_len": key[1], "rows": {}}
        )
        system = str(row.get("system"))
        if system not in systems:
            systems.append(system)
        b["rows"][system] = {
            **{k: row.get(k) for k in _ROW_KEYS},
            "bleu": _ci(row.get("bleu")),
            "chrf": _ci(row.get("chrf")),
        }
    notes = []
    words = ts.words() if isinstance(ts, TestSet) else None
    if words is None:
        notes.append(
            f"no example ids: test set {name!r} "
            + ("is not served" if ts is None else f"cannot be read ({ts})")
        )
    elif (
        isinstance(ts, TestSet)
        and isinstance(record.get("sources_sha256"), str)
        and record["sources_sha256"] != lines_sha256(ts.sources)
    ):
        words = None  # line numbers of other lines would point at the wrong sentences
        notes.append(
            f"no example ids: the served test set {name!r} is not the one the study "
            "decoded (its source lines differ)"
        )
    for (lo, hi), b in buckets.items():
        ids = None if words is None else in_bucket(words, lo, hi)
        b["n"] = max((r["n"] or 0 for r in b["rows"].values()), default=0)
        b["example_ids"] = ids
        if ids is not None and len(ids) != b["n"]:
            notes.append(
                f"bucket {b['label']}: the served set has {len(ids)} lines, the "
                f"study counted {b['n']}: ids may not match the study's sentences"
            )
    return {
        "name": name,
        "signature": record.get("signature"),
        "chrf_signature": record.get("chrf_signature"),
        "systems": systems,
        "buckets": list(buckets.values()),
        "notes": notes,
    }


def check_unique(studies: list[Study]) -> list[Study]:
    """``studies``, unless two have one name (the API names them by it).

    Raises:
        StudyError: naming both folders.
    """
    seen: dict[str, Study] = {}
    for s in studies:
        if s.name in seen:
            other = seen[s.name].folder
            if other.resolve() == s.folder.resolve():
                raise StudyError(f"--study {s.folder} is given twice")
            raise StudyError(
                f"--study {s.folder} and --study {other}: both are named "
                f"{s.name!r} (results.json's study.name); serve one of them"
            )
        seen[s.name] = s
    return studies


class Studies:
    """The served studies by name.

    Raises:
        StudyError: two studies with one name.
    """

    def __init__(self, studies: list[Study], testsets: TestSets):
        self.studies: dict[str, Study] = {}
        for s in check_unique(studies):
            self.studies[s.name] = s
        self.testsets = testsets

    def names(self) -> list[dict[str, Any]]:
        """``GET /api/studies``: name, direction and test sets of each study."""
        return [
            {"name": s.name, "direction": s.direction, "test_sets": list(s.results["test_sets"])}
            for s in self.studies.values()
        ]

    def get(self, name: str) -> dict[str, Any]:
        """``GET /api/studies/{name}``.

        Raises:
            ApiError: 404 for an unknown study.
        """
        s = self.studies.get(name)
        if s is None:
            raise not_found("study", name, list(self.studies))
        return {
            "name": s.name,
            "direction": s.direction,
            "decoding": s.results.get("decoding"),
            "baseline": s.config.get("baseline"),
            "buckets": s.config.get("buckets"),
            "test_sets": [
                _test_set(n, rec, self.testsets.lookup(n))
                for n, rec in s.results["test_sets"].items()
            ],
        }
