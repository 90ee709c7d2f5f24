"""The long-sentence test set: joining blocks of consecutive pairs."""

import pytest

from nmt.data.longsets import join_consecutive, long_sentence_set

SRC = ["ein mann .", "eine frau singt .", "zwei hunde ", "ein kind isst .", "die katze ."]
REF = ["a man .", "a woman sings .", "two dogs", "a child eats .", "the cat ."]


def test_k2_on_five_lines_joins_two_blocks_and_drops_the_tail():
    s = join_consecutive(SRC, REF, 2)
    assert s.sources == ["ein mann . eine frau singt .", "zwei hunde ein kind isst ."]
    assert s.references == ["a man . a woman sings .", "two dogs a child eats ."]
    assert s.k == [2, 2] and s.start == [0, 2] and s.name == "joined-k2" and len(s) == 2


def test_lengths_add_up_and_k1_is_the_original_set():
    for k in (1, 2, 3):
        s = join_consecutive(SRC, REF, k)
        for j, line in enumerate(s.sources):
            block = SRC[s.start[j] : s.start[j] + k]
            assert len(line.split()) == sum(len(x.split()) for x in block)
        assert len(s) == len(SRC) // k
    assert join_consecutive(SRC, REF, 1).references == REF


def test_long_sentence_set_concatenates_each_k():
    src = [f"w{i} " * (i % 7 + 1) for i in range(23)]
    ref = [f"r{i}" for i in range(23)]
    s = long_sentence_set(src, ref)
    assert len(s) == len(s.references) == len(s.k) == sum(23 // k for k in (1, 2, 3, 4))
    assert s.k == [1] * 23 + [2] * 11 + [3] * 7 + [4] * 5
    assert s.name == "long-k1,2,3,4"
    assert s.references[23] == "r0 r1" and s.references[-1] == "r16 r17 r18 r19"
    assert long_sentence_set(src, ref, ks=(3,)).sources == join_consecutive(src, ref, 3).sources


def test_bad_k_and_mismatched_lengths_raise():
    with pytest.raises(ValueError, match="k must be"):
        join_consecutive(SRC, REF, 0)
    with pytest.raises(ValueError, match="counts must match"):
        join_consecutive(SRC, REF[:-1], 2)
    with pytest.raises(ValueError):
        long_sentence_set(SRC, REF, ks=())
    with pytest.raises(ValueError):
        long_sentence_set(SRC, REF, ks=(1, -1))
