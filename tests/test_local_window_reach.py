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
    assert "attention additive has no window of its own: D = 10" in r.stdout
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


def test_centre_errors_measure_the_centre_against_the_nearest_linked_piece() -> None:
    centre_errors = _script().centre_errors
    src = [[0], [1, 2], [3], [4]]  # four source words, the second in two pieces
    tgt = [[0], [1], [2]]
    # target word 0 -> source word 0; word 1 -> words 1 and 3 (pieces 1, 2, 4); word 2: none
    links = frozenset({(0, 0), (1, 1), (3, 1)})
    rows = centre_errors([2.5, 3.5, 9.0, 0.0], src, tgt, links)
    # word 0 (t = 0): centre 2.5 is 2.5 ahead of piece 0, t itself on it
    # word 1 (t = 1): centre 3.5 is nearest to piece 4 (-0.5), t = 1 sits on piece 1
    assert rows == [(0, 2.5, 0.0), (1, -0.5, 0.0)]
    # a target position past the source end is capped at the final piece, as local_m does
    far = centre_errors([0.0] * 12, [[0], [1]], [[0]] * 1 + [[10]], frozenset({(1, 1)}))
    assert far == [(10, -1.0, 1.0)]


@pytest.mark.parametrize("attention", ["local_m", "local_p", "additive"])
def test_recorded_centres_are_the_windows_the_model_used(toy_vocabs, attention: str) -> None:
    from conftest import tiny_model

    src_vocab, tgt_vocab = toy_vocabs
    model = tiny_model(src_vocab, tgt_vocab, attention=attention, local_window=2)
    source, reference = "zwei hunde spielen im schnee .", "two dogs play in the snow ."
    record = _script().recorded_centres
    if attention == "additive":
        with pytest.raises(ValueError, match="--centres: the model's attention is"):
            record(model, src_vocab, tgt_vocab, source, reference)
        return
    centres = record(model, src_vocab, tgt_vocab, source, reference)
    S = len(src_vocab.encode(source)) + 1  # with </s>
    assert len(centres) == len(tgt_vocab.encode(reference)) + 1  # one per step, BOS first
    if attention == "local_m":
        assert centres == [float(min(t, S - 1)) for t in range(len(centres))]
    else:
        assert all(0.0 <= p <= S for p in centres) and len(set(centres)) > 1
    assert "centre" not in vars(model.decoder.scorer)  # the recording is removed again


def test_centres_of_a_global_model_are_refused_before_any_work(multi30k: Path) -> None:
    model = REPO / "models" / "deen-additive"
    r = subprocess.run(
        [sys.executable, str(SCRIPT), str(model), "--centres", "--data-path", str(multi30k)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr  # as the other option errors
    assert "has attention additive; a window centre exists only for local_m" in r.stderr
    assert r.stdout == ""  # refused before the reach was counted


def test_weights_of_a_fixed_vector_model_are_refused_in_one_line_before_any_work(
    tmp_path: Path,
) -> None:
    """``--weights`` on attention ``none`` used to count the reach, then fail in
    forced_weights with a traceback; the corpus given does not exist, so any work past the
    checkpoint would fail differently."""
    model = REPO / "models" / "deen-none"
    r = subprocess.run(
        [sys.executable, str(SCRIPT), str(model), "--weights", "--data-path", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        f"local_window_reach.py: error: --weights: {model} has attention none; attention "
        "weights exist only for a model with attention (the fixed-vector model reads one "
        "vector c)"
    ]
    assert r.stdout == ""


def test_d_of_a_model_without_a_window_of_its_own_is_said_to_be_the_default() -> None:
    window_of = _script().window_of
    assert window_of("local_m", 10, None) == (10, "")  # the model's own window
    assert window_of("local_p", 10, 4) == (4, "") and window_of("additive", 10, 4) == (4, "")
    d, line = window_of("additive", 10, None)
    assert d == 10
    assert "attention additive has no window of its own: D = 10 is the config's" in line
    assert "--window D sets it" in line
