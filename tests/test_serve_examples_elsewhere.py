"""``nmt serve`` started outside the project (``cd /tmp && nmt serve``): the example
sentences come from the corpus the models were trained on, whose relative ``data.path``
(``../shared/data/multi30k`` for the shipped models) is relative to the project root, not
to the current directory; where it is nowhere, the page and the log say what is missing
and which option fixes it (nmt/data/stored.py, nmt/serve/testsets.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nmt.config.schema import DataConfig
from nmt.serve import testsets
from nmt.serve.testsets import SetDefinition, served_corpus

from conftest import TOY_PAIRS, write_split

SPLITS = ("test_2016_flickr",)


def _sets(data: DataConfig | None, note: str | None) -> testsets.TestSets:
    # as testsets.TestSets: a bare TestSets here would be collected by pytest as a test class
    return testsets.TestSets(data, [SetDefinition(s, s) for s in SPLITS], note=note)


def test_examples_from_the_project_root_when_served_from_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    for lang, k in (("de", 0), ("en", 1)):
        write_split(project / "corpus", SPLITS[0], lang, [p[k] for p in TOY_PAIRS], gz=True)
    elsewhere.mkdir()
    monkeypatch.setattr("nmt.data.stored.PROJECT_ROOT", project)
    monkeypatch.chdir(elsewhere)
    data, note = served_corpus(DataConfig(path="corpus", test_splits=SPLITS), None)
    assert note is None and data is not None
    index = _sets(data, note).index()
    assert [s["name"] for s in index["sets"]] == list(SPLITS) and index["notes"] == []
    ex = _sets(data, note).examples(SPLITS[0], None, 0, 2)["examples"]
    assert [e["source"] for e in ex] == [p[0] for p in TOY_PAIRS[:2]]


def test_no_corpus_anywhere_says_what_is_missing_and_what_to_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("nmt.data.stored.PROJECT_ROOT", tmp_path / "project")
    monkeypatch.chdir(tmp_path)
    data, note = served_corpus(DataConfig(test_splits=SPLITS), None)
    assert data is None and note is not None
    assert "directory you trained in" not in note  # the old hint: wrong for shipped models
    assert "'../shared/data/multi30k'" in note and str(tmp_path / "project") in note
    assert "pass --data-path DIR" in note and "data/README.md" in note
    assert "--src/--ref" not in note  # nmt serve has no such options
    # the page's /api/testsets carries the same note (app.js shows it under Examples)
    assert _sets(data, note).index() == {"sets": [], "notes": [note, f"{SPLITS[0]}: {note}"]}
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    _, note = served_corpus(DataConfig(test_splits=SPLITS), None)  # run from the root itself
    assert note is not None and "nor from the project root" not in note
