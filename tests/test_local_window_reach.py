"""scripts/local_window_reach.py: which reference links a local_m window of D pieces
around the target position can reach, on hand-made pieces where the answer is known."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import write_split

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "local_window_reach.py"


def _script():  # the script is not a module of the package
    spec = importlib.util.spec_from_file_location("local_window_reach", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_word_positions_group_the_pieces_of_each_word() -> None:
    pos = _script().word_positions(["\u2581Ein", "\u2581Hund", "e", ".", "\u2581bellt"])
    assert pos == [[0], [1, 2, 3], [4]]


def test_a_link_is_out_of_reach_only_when_every_piece_pair_is_more_than_d_apart() -> None:
    reach = _script().reach
    src = [[0], [1, 2], [12]]  # word 2 sits at source piece 12
    tgt = [[0], [1], [2]]
    # (source word, target word): (2, 0) is 12 pieces away, (1, 2) 0, (2, 2) 10
    out, offsets = reach(frozenset({(2, 0), (1, 2), (2, 2)}), src, tgt, 10)
    assert out == 1
    assert sorted(offsets) == [-1, 10, 12]
    out, _ = reach(frozenset({(2, 2)}), src, tgt, 9)  # D = 9: 10 pieces is outside
    assert out == 1


def _args(**kw):
    import argparse

    base = dict(
        checkpoint=REPO / "models" / "deen-additive",
        split="test_2016_flickr",
        join=1,
        data_path=None,
        alignments=REPO / "data" / "alignments",
    )
    return argparse.Namespace(**{**base, **kw})


def test_a_joined_split_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="give the plain split and --join K"):
        _script().read_set(_args(checkpoint=tmp_path / "none.pt", split="val_joined"))


def test_a_join_larger_than_the_split_is_refused_by_name(multi30k: Path) -> None:
    with pytest.raises(ValueError, match="--join 5000: test_2016_flickr has only 1000 captions"):
        _script().read_set(_args(join=5000, data_path=str(multi30k)))


@pytest.mark.parametrize(
    ("option", "message"),
    [("--join=0", "--join must be at least 1"), ("--window=-1", "--window must be at least 0")],
)
def test_bad_options_exit_2_with_one_line(option: str, message: str) -> None:
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "x.pt", option], capture_output=True, text=True, check=False
    )
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr


def test_data_path_and_alignments_point_both_scripts_at_a_corpus_of_ones_own(
    tmp_path: Path,
) -> None:
    """--data-path replaces the checkpoint's corpus folder (its config is frozen: the
    scripts must copy it, not assign to it), here a three-caption test set of one's own."""
    src = ["Ein Hund läuft .", "Zwei Männer spielen Fußball .", "Eine Frau liest ein Buch ."]
    tgt = ["A dog runs .", "Two men play soccer .", "A woman reads a book ."]
    data, align = tmp_path / "data", tmp_path / "align"
    write_split(data, "test_2016_flickr", "de", src)
    write_split(data, "test_2016_flickr", "en", tgt)
    align.mkdir()
    links = [
        " ".join(f"{i}-{i}" for i in range(min(len(s.split()), len(t.split()))))
        for s, t in zip(src, tgt, strict=True)
    ]
    (align / "test_2016_flickr.de-en.gdfa").write_text("\n".join(links) + "\n")
    common = ["--data-path", str(data), "--alignments", str(align)]
    model = str(REPO / "models" / "deen-additive")
    r = subprocess.run(
        [sys.executable, str(SCRIPT), model, *common],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert "3 lines, 15 reference links" in r.stdout  # 4 + 5 + 6 diagonal links
    assert "reach (no piece pair within D): 0 (0.0%)" in r.stdout
    case = REPO / "scripts" / "head_case.py"
    out = tmp_path / "case"
    r = subprocess.run(
        [sys.executable, str(case), model, *common, "--min-links", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert (out / "case.png").is_file() and (out / "case.json").is_file()
