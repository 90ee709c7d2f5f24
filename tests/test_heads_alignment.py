"""``nmt heads``' agreement with reference word alignments (nmt/analysis/heads_alignment.py)."""

from pathlib import Path

import torch

from nmt.analysis.heads_alignment import forced_weights, format_alignment, model_alignment
from nmt.evaluation.alignment import parse_pharaoh

from conftest import TOY_PAIRS, tiny_model

SRC = ["▁a", "▁b", "c", "</s>"]  # words: a, bc
TGT = ["▁x", "▁y", "</s>"]  # words: x, y


def test_each_head_and_the_head_mean_against_a_hand_made_reference():
    w = torch.tensor(
        [
            [
                [0.9, 0.05, 0.05, 0.0],  # head 1: x -> a, y -> bc (the reference)
                [0.05, 0.9, 0.05, 0.0],
                [0.0, 0.0, 0.0, 1.0],
            ],
            [
                [0.2, 0.2, 0.6, 0.0],  # head 2: x -> bc, y -> a (both wrong)
                [0.6, 0.2, 0.2, 0.0],
                [0.0, 0.0, 0.0, 1.0],
            ],
        ]
    )  # (h, T, S)
    # mean: x: a 0.55, bc 0.45 -> a; y: a 0.325, bc 0.675 -> bc: the reference again
    ref = [parse_pharaoh("0-0 1-1")]
    m = model_alignment("toy", {0: (w, SRC, TGT)}, ref, n_samples=20)
    rows = {r.head: r for r in m.rows}
    assert set(rows) == {"1", "2", "mean"}
    assert (rows["1"].precision, rows["1"].recall, rows["1"].aer) == (1.0, 1.0, 0.0)
    assert (rows["2"].precision, rows["2"].recall, rows["2"].aer) == (0.0, 0.0, 1.0)
    assert rows["mean"].aer == 0.0 and m.stats.tolist() == [[2, 2, 2]]
    # head 2: x (ref a, word 0) -> word 1, the next one; y (ref word 1) -> word 0, previous
    assert rows["1"].relations == {"aligned": 1.0, "next": 0.0, "previous": 0.0, "elsewhere": 0.0}
    assert rows["2"].relations == {"aligned": 0.0, "next": 0.5, "previous": 0.5, "elsewhere": 0.0}
    one = model_alignment("one", {0: (w[1:], SRC, TGT)}, ref, n_samples=20)
    assert [r.head for r in one.rows] == ["1"] and one.rows[0].aer == 1.0
    md = "\n".join(format_alignment([m, one], "toy set", Path("ref.gdfa"), n_samples=20))
    assert "| toy | mean | 100.0% | 100.0% | 0.0% [0.0%, 0.0%] | 1 (0) |" in md
    assert "| one | +100.0% [+100.0%, +100.0%] | 1.000 | 1 |" in md
    # p = 1 for a model that aligns worse: the line above the table says which way p reads
    assert "not lower than toy's (one-sided: near 0 it aligns better, near 1 worse)" in md
    assert "| toy | 2 | 0.0% | 50.0% | 50.0% | 0.0% |" in md


def test_forced_weights_are_read_on_the_reference_for_every_head(toy_vocabs):
    src_vocab, tgt_vocab = toy_vocabs
    model = tiny_model(src_vocab, tgt_vocab, attention="multihead", heads=2).eval()
    sources, refs = [s for s, _ in TOY_PAIRS], [t for _, t in TOY_PAIRS]
    got = forced_weights(model, src_vocab, tgt_vocab, sources, refs, batch_size=3)
    assert got  # the toy pieces keep the words
    for i, (w, sp, tp) in got.items():
        assert w.shape == (2, len(tp), len(sp)) and sp[-1] == tp[-1] == "</s>"
        assert tp[:-1] == [tgt_vocab.id_to_piece(x) for x in tgt_vocab.encode(refs[i])]
        assert torch.allclose(w.sum(-1), torch.ones(2, len(tp)), atol=1e-5)
    diagonal = [
        frozenset((j, j) for j in range(min(len(s.split()), len(r.split()))))
        for s, r in zip(sources, refs, strict=True)
    ]
    m = model_alignment("toy", got, diagonal, n_samples=20)
    assert m.sentences == len(got) and m.skipped == len(sources) - len(got)
    assert all(0.0 <= r.aer <= 1.0 and r.aer_low <= r.aer <= r.aer_high for r in m.rows)


def test_find_reference_joins_the_captions_links_and_names_a_bad_directory(tmp_path):
    """The reference of a joined set (a ``_joined`` split: k = 1, 2) is its captions' links
    shifted by the words before them; a file given for the folder is named."""
    import pytest

    from nmt.analysis.heads_alignment import find_reference
    from nmt.evaluation.alignment import AlignmentError

    captions = (["a b", "c"], ["x y", "z"])
    (tmp_path / "t.de-en.gdfa").write_text("0-0 1-1\n0-0\n")
    found = find_reference(tmp_path, "t", ("de", "en"), captions, (1, 2), 3)
    assert found is not None
    path, links = found
    assert path == tmp_path / "t.de-en.gdfa"
    # k = 1: each caption; k = 2: "a b c" / "x y z", the second caption's link moved by 2
    assert links == [{(0, 0), (1, 1)}, {(0, 0)}, {(0, 0), (1, 1), (2, 2)}]
    assert find_reference(tmp_path, "other", ("de", "en"), captions, None, 2) is None
    with pytest.raises(AlignmentError, match="--alignments .*t.de-en.gdfa: not a directory"):
        find_reference(tmp_path / "t.de-en.gdfa", "t", ("de", "en"), captions, None, 2)
