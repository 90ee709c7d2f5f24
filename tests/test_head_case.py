"""scripts/head_case.py's rule for the concrete case: the sentence whose per-head shares of
aligned / next / previous / elsewhere links are nearest the test set's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "head_case.py"


def _typical():  # the script is not a module of the package
    spec = importlib.util.spec_from_file_location("head_case", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.typical


def test_the_typical_sentence_is_the_nearest_to_the_test_set_shares() -> None:
    typical = _typical()
    # 2 heads; test set: head 1 mostly aligned, head 2 mostly next
    counts = np.array(
        [
            [[10, 0, 0, 0], [0, 10, 0, 0]],  # 10 links, both heads pure
            [[7, 1, 1, 1], [1, 7, 1, 1]],  # 10 links, near the test set
            [[0, 0, 0, 10], [0, 0, 0, 10]],  # 10 links, both elsewhere
            [[3, 0, 0, 0], [0, 3, 0, 0]],  # too short
        ]
    )
    row, corpus = typical(counts, 5, 12)
    assert row == 1
    assert corpus.shape == (2, 4) and np.allclose(corpus.sum(1), 1.0)
    assert corpus[0, 0] == pytest.approx(20 / 33)
    with pytest.raises(ValueError, match="no sentence with 20-30"):
        typical(counts, 20, 30)
