"""``nmt heads`` as a user meets it: the AER table on the terminal, the reference alignment
folder found from another directory, a given ``--alignments`` that cannot be used refused,
every ``--compare`` checkpoint checked before any decoding, and help text whose lines are
whole. On the shipped models and a three-caption test set of one's own (seconds)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from nmt.analysis.heads_alignment import find_reference
from nmt.data import stored

from conftest import nmt_here, write_split

REPO = Path(__file__).resolve().parents[1]
ADDITIVE, NONE = REPO / "models" / "deen-additive", REPO / "models" / "deen-none"
SRC = ["Ein Hund läuft .", "Zwei Männer spielen Fußball .", "Eine Frau liest ein Buch ."]
TGT = ["A dog runs .", "Two men play soccer .", "A woman reads a book ."]


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Path, Path]:
    """(corpus folder with test_2016_flickr, the project root's data/alignments folder
    holding its diagonal reference alignment); the root is tmp_path/root."""
    data = tmp_path / "corpus"
    write_split(data, "test_2016_flickr", "de", SRC)
    write_split(data, "test_2016_flickr", "en", TGT)
    align = tmp_path / "root" / "data" / "alignments"
    align.mkdir(parents=True)
    diagonal = [" ".join(f"{i}-{i}" for i in range(len(s.split()))) for s in SRC]
    (align / "test_2016_flickr.de-en.gdfa").write_text("\n".join(diagonal) + "\n")
    return data, align


def test_the_aer_table_is_printed_with_alignments_found_from_the_project_root(
    corpus: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from elsewhere, the default data/alignments is the project root's (as for nmt
    serve); the per-head (and per compare model) rows of heads.md are printed too."""
    data, _ = corpus
    monkeypatch.setattr(stored, "PROJECT_ROOT", tmp_path / "root")
    elsewhere, out = tmp_path / "elsewhere", tmp_path / "out"
    elsewhere.mkdir()
    options = ["--data-path", data, "--maps", 0, "--out", out]
    r = nmt_here("heads", ADDITIVE, "--compare", ADDITIVE, *options, cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    assert "left out" not in r.stderr
    md = (out / "heads.md").read_text()
    rows = [line for line in md.splitlines() if line.endswith("| 3 (0) |")]  # P, R, AER [CI]
    assert len(rows) == 2  # the model and its compare model, one head each
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"Agreement with the reference alignment {tmp_path / 'root'}")
    assert "| model | head | precision | recall | AER [95% CI] | sentences (skipped) |" in lines
    assert all(row in lines for row in rows)
    assert any(line.startswith("| model | ΔAER [95% CI] |") for line in lines)  # paired
    assert lines[-1] == f"report: {out / 'heads.md'}"


def test_a_given_alignments_folder_that_cannot_be_used_is_an_error_before_decoding(
    corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    data, align = corpus
    nowhere = tmp_path / "nowhere"
    r = nmt_here("heads", ADDITIVE, "--data-path", data, "--alignments", nowhere)
    assert r.returncode == 2 and "decoding" not in r.stderr
    assert r.stderr.strip() == (
        f"error: --alignments {nowhere}: no such directory (scripts/align_multi30k.py "
        "--out DIR writes one)"
    )
    src, ref = tmp_path / "mine.de", tmp_path / "mine.en"
    src.write_text("\n".join(SRC) + "\n")
    ref.write_text("\n".join(TGT) + "\n")
    r = nmt_here("heads", ADDITIVE, "--src", src, "--ref", ref, "--alignments", align)
    assert r.returncode == 2 and "decoding" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert f"--alignments {align}: AER needs --split" in r.stderr


def test_the_default_alignments_folder_missing_or_without_a_split_is_a_note(
    tmp_path: Path,
) -> None:
    captions = (SRC, TGT)
    heard: list[str] = []
    found = find_reference(
        tmp_path / "none", "t", ("de", "en"), captions, None, 3, given=False, log=heard.append
    )
    assert found is None and "alignment precision, recall and AER left out" in heard[-1]
    found = find_reference(
        tmp_path, None, ("de", "en"), captions, None, 3, given=False, log=heard.append
    )
    assert found is None and "left out: AER needs --split" in heard[-1]


def test_a_compare_model_without_attention_is_refused_before_any_decoding(
    corpus: tuple[Path, Path],
) -> None:
    """It used to fail only after the main model had decoded the whole test set."""
    data, _ = corpus
    r = nmt_here("heads", ADDITIVE, "--compare", NONE, "--data-path", data, "--maps", 0)
    assert r.returncode == 2 and "decoding" not in r.stderr
    assert f"--compare {NONE}: the fixed-vector model (attention: none)" in r.stderr
    r = nmt_here("heads", ADDITIVE, "--compare", NONE.parent / "missing", "--data-path", data)
    assert r.returncode == 2 and "decoding" not in r.stderr and "missing" in r.stderr


def test_every_commands_help_is_one_paragraph_or_paragraphs_of_one_line() -> None:
    """typer (rich) joins the lines of a command's first help paragraph but keeps the
    line breaks of the later ones, so a docstring wrapped at 92 columns printed as broken
    lines ("...punctuation,\\nagreement ... reference\\nword alignment")."""
    from nmt.cli.app import app

    for command in app.registered_commands:
        assert command.callback is not None
        text = inspect.cleandoc(command.help or command.callback.__doc__ or "")
        for paragraph in text.split("\n\n")[1:]:
            assert "\n" not in paragraph, (command.callback.__name__, paragraph)
