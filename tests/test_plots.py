"""PNG figures: BLEU by length and attention heatmaps."""

import numpy as np
import pytest
import torch

from nmt.evaluation.length_table import study_table
from nmt.evaluation.plots import LengthPoint, curves_from_rows, plot_attention, plot_bleu_by_length


def assert_small_png(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert 1000 < len(data) < 1 << 20


def test_bleu_by_length_plot(tmp_path):
    curves = {
        "none": [
            LengthPoint("1-10", 6.0, 400, 30.0, 28.0, 32.0),
            LengthPoint("11-20", 15.0, 300, 22.0, 20.0, 24.0),
            LengthPoint("21-30", 25.0, 12, 10.0, 5.0, 15.0, too_few=True),
            LengthPoint("31+", 35.0, 0, None),
        ],
        "additive": [
            LengthPoint("1-10", 6.0, 400, 33.0, 31.0, 35.0),
            LengthPoint("11-20", 15.0, 300, 31.0, 29.0, 33.0),
            LengthPoint("21-30", 25.0, 12, 29.0, None, None, too_few=True),
        ],
    }
    path = plot_bleu_by_length(curves, tmp_path / "new" / "dir" / "bleu.png", "BLEU by length")
    assert_small_png(path)


def test_curves_from_study_rows(tmp_path):
    refs = ["a b c d", "e f g h i j k l m n o p", "a b c", "x y z w v"] * 5
    rows = study_table(
        {"none": refs, "dot": refs},
        refs,
        refs,
        ((1, 4), (5, 10), (11, None), (20, None)),
        n_samples=20,
    )
    curves = curves_from_rows(rows)
    assert list(curves) == ["none", "dot"]
    assert [p.n for p in curves["dot"]] == [10, 5, 5, 0]
    assert curves["dot"][0].x == pytest.approx(3.5) and curves["dot"][0].too_few
    assert curves["dot"][3].bleu is None
    assert_small_png(plot_bleu_by_length(curves, tmp_path / "b.png", "t"))


def test_attention_heatmap(tmp_path):
    src = ["▁ein", "▁mann", "▁läuft", "▁.", "</s>"]
    tgt = ["▁a", "▁man", "▁runs", "▁.", "</s>"]
    w = torch.softmax(torch.randn(5, 5), dim=-1)
    assert_small_png(plot_attention(src, tgt, w, tmp_path / "att" / "a.png", "attention"))
    long_src = [f"▁w{i}" for i in range(90)]
    long_w = np.full((70, 90), 1 / 90)
    path = plot_attention(long_src, long_src[:70], long_w, tmp_path / "long.png", "long")
    assert_small_png(path)


def test_attention_shape_mismatch_raises(tmp_path):
    with pytest.raises(ValueError, match="shape"):
        plot_attention(["a", "b"], ["x"], np.ones((2, 1)), tmp_path / "bad.png", "t")
    with pytest.raises(ValueError, match="shape"):
        plot_attention(["a", "b"], ["x"], np.ones(2), tmp_path / "bad.png", "t")
    assert not (tmp_path / "bad.png").exists()
