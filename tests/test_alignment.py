"""Alignment precision, recall and AER, pieces to words, joined-set offsets, symmetrisation."""

import numpy as np
import pytest

from nmt.data.longsets import long_sentence_set
from nmt.evaluation.alignment import (
    AlignmentError,
    aer_interval,
    attention_links,
    count_matrix,
    format_pharaoh,
    join_alignments,
    long_alignments,
    paired_aer,
    parse_pharaoh,
    piece_words,
    read_pharaoh,
    relations,
    score,
    word_attention,
)
from nmt.evaluation.symmetrise import grow_diag_final_and, intersection, tokens_to_words


def test_precision_recall_aer_of_a_hand_made_alignment():
    # sentence 1: A = {0-0, 1-1, 2-1}, S = {0-0, 1-1, 2-2}: 2 of 3 right both ways
    # sentence 2: A = {0-0},           S = {0-0, 1-1}:        1 of 1 predicted, 1 of 2 sure
    # corpus: |A| = 4, |S| = 5, |A ∩ S| = 3: P = 3/4, R = 3/5, AER = 1 - 6/9 = 1/3
    pred = [parse_pharaoh("0-0 1-1 2-1"), parse_pharaoh("0-0")]
    ref = [parse_pharaoh("0-0 1-1 2-2"), parse_pharaoh("1-1 0-0")]
    s = score(pred, ref)
    assert s.precision == pytest.approx(0.75) and s.recall == pytest.approx(0.6)
    assert s.aer == pytest.approx(1 / 3) and (s.links, s.reference_links) == (4, 5)
    assert score(ref, ref).aer == 0.0 and score([frozenset()], [ref[0]]).aer == 1.0


def test_relations_place_each_link_against_the_reference_of_its_target_word():
    # reference: target 0 <- source 1; target 1 <- sources 2 and 3; target 2 unlinked
    ref = parse_pharaoh("1-0 2-1 3-1")
    assert relations(parse_pharaoh("1-0 3-1"), ref) == (2, 0, 0, 0)
    assert relations(parse_pharaoh("2-0 4-1"), ref) == (0, 2, 0, 0)  # one word after
    assert relations(parse_pharaoh("0-0 1-1"), ref) == (0, 0, 2, 0)  # one word before
    assert relations(parse_pharaoh("5-0 0-1 4-2"), ref) == (0, 0, 0, 2)  # 4-2 not counted


def test_pharaoh_round_trip_and_errors(tmp_path):
    links = parse_pharaoh("2-1 0-0 1-2")
    assert links == {(0, 0), (2, 1), (1, 2)} and format_pharaoh(links) == "0-0 2-1 1-2"
    with pytest.raises(AlignmentError, match="x.gdfa, line 2: .*'1:2'"):
        path = tmp_path / "x.gdfa"
        path.write_text("0-0\n1:2\n")
        read_pharaoh(path)
    # a digit int() refuses, and bytes that are not UTF-8: named by file and line too
    path.write_text("0-0\n0-\u00b2\n", encoding="utf-8")
    with pytest.raises(AlignmentError, match="x.gdfa, line 2: .*'0-\u00b2'"):
        read_pharaoh(path)
    path.write_bytes(b"0-0\n1-1\n\xe1\x00-1\n")
    with pytest.raises(AlignmentError, match="x.gdfa, line 3: not UTF-8 text"):
        read_pharaoh(path)


def test_pieces_map_to_whitespace_words():
    assert piece_words(["▁Ein", "▁Hund", "e", "."]) == [0, 1, 1, 1]
    assert piece_words(["Ein", "▁Hund"]) == [0, 1]  # the first piece starts a word anyway
    assert piece_words([]) == []


def test_word_attention_sums_source_pieces_and_averages_target_pieces():
    src = ["▁a", "b", "▁c", "</s>"]  # words: ab, c
    tgt = ["▁x", "y", "▁z", "</s>"]  # words: xy, z
    w = np.array(
        [
            [0.3, 0.3, 0.4, 0.0],  # x: ab 0.6, c 0.4
            [0.0, 0.1, 0.8, 0.1],  # y: ab 0.1, c 0.8
            [0.2, 0.2, 0.1, 0.5],  # z: ab 0.4, c 0.1 (</s> left out)
            [0.0, 0.0, 0.0, 1.0],
        ]
    )  # </s> row skipped
    wa = word_attention(w, src, tgt)
    np.testing.assert_allclose(wa, [[0.35, 0.6], [0.4, 0.1]])
    # xy: mean (0.35, 0.6) -> c, though its first piece x looks at ab; z -> ab despite </s>
    assert attention_links(w, src, tgt) == {(1, 0), (0, 1)}
    with pytest.raises(AlignmentError, match="shape"):
        word_attention(w[:, :3], src, tgt)


def test_joined_alignment_is_the_captions_alignment_with_word_offsets():
    src = ["ein mann", "eine frau singt", "zwei hunde", "ein kind"]
    ref = ["a man", "a woman sings", "two dogs", "a kid"]
    al = [parse_pharaoh(x) for x in ("0-0 1-1", "0-0 1-1 2-2", "0-0 1-1", "1-1")]
    j2 = join_alignments(al, src, ref, 2)
    # block 2: "zwei hunde ein kind" / "two dogs a kid": caption 4 shifted by 2 and 2
    assert j2 == [parse_pharaoh("0-0 1-1 2-2 3-3 4-4"), parse_pharaoh("0-0 1-1 3-3")]
    assert join_alignments(al, src, ref, 3) == [parse_pharaoh("0-0 1-1 2-2 3-3 4-4 5-5 6-6")]
    joined = long_sentence_set(src, ref, (1, 2))
    long = long_alignments(al, src, ref, (1, 2))
    assert len(long) == len(joined) and long[:4] == al and long[4:] == j2
    for a, s, r in zip(long, joined.sources, joined.references, strict=True):
        assert all(i < len(s.split()) and j < len(r.split()) for i, j in a)
    with pytest.raises(AlignmentError, match="counts must match"):
        join_alignments(al[:3], src, ref, 2)


def test_bootstrap_interval_holds_the_score_and_paired_delta_has_its_sign():
    rng = np.random.default_rng(0)
    ref = [frozenset((i, i) for i in range(n)) for n in rng.integers(3, 12, 60)]
    good = [frozenset(list(r)[:-1]) for r in ref]  # all but one link right
    bad = [frozenset((i + 1, i) for i, _ in r) for r in ref]  # every link off by one
    g, b = count_matrix(good, ref), count_matrix(bad, ref)
    iv = aer_interval(g, 200, 1)
    assert iv.low <= score(good, ref).aer <= iv.high
    pr = paired_aer(g, b, 200, 1)  # bad minus good: higher AER, never lower
    assert pr.delta == pytest.approx(1.0 - score(good, ref).aer) and pr.low > 0
    assert pr.p_value == 1.0 and paired_aer(b, g, 200, 1).p_value == 0.0


def test_grow_diag_final_and_by_hand():
    fwd = frozenset({(0, 0), (1, 1), (4, 3)})
    bwd = frozenset({(0, 0), (1, 1), (2, 1), (4, 4)})
    # intersection {0-0, 1-1}; grow: 2-1 neighbours 1-1 and source word 2 is unaligned
    # (4-3 and 4-4 neighbour no link); final-and: 4-3 (forward first: source 4 and target 3
    # both unaligned), then 4-4 cannot join (source 4 is aligned now)
    assert intersection(fwd, bwd) == {(0, 0), (1, 1)}
    assert grow_diag_final_and(fwd, bwd) == {(0, 0), (1, 1), (2, 1), (4, 3)}
    assert grow_diag_final_and(bwd, fwd) == {(0, 0), (1, 1), (2, 1), (4, 4)}


def test_token_links_map_to_words_without_split_off_punctuation():
    # source tokens: Hund . | -   target tokens: dog . | -
    links = frozenset({(0, 0), (1, 1), (2, 2)})
    words = tokens_to_words(links, [0, 0, 1], [0, 0, 1], [False, True, False], [False, True, False])
    assert words == {(0, 0), (1, 1)}


def test_align_multi30k_writes_its_record_beside_the_alignments_unless_told():
    """A user following results/alignments/README.md used to overwrite the committed
    results/alignments/de-en.json (and dirty git); only ``--record`` writes there now."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "align_multi30k.py"
    spec = importlib.util.spec_from_file_location("align_multi30k", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.parse_args([]).record == Path("data/alignments")
    assert script.parse_args(["--out", "mine"]).record == Path("mine")
    given = script.parse_args(["--out", "mine", "--record", "results/alignments"])
    assert (given.out, given.record) == (Path("mine"), Path("results/alignments"))
