"""sacreBLEU scoring, length buckets and the side-by-side table."""

import pytest

from nmt.config.buckets import parse_buckets
from nmt.evaluation.metrics import format_table, score


def test_parse_buckets():
    assert parse_buckets("1-10,11-20,21-30,31-") == ((1, 10), (11, 20), (21, 30), (31, None))
    assert parse_buckets("1-5, 6+") == ((1, 5), (6, None))
    for bad in ["", "a-b", "10-1", "1-10,5-20", "1-,5-9", "7", "0-5", "1-5,,6-"]:
        with pytest.raises(ValueError, match="--buckets"):
            parse_buckets(bad)


def test_perfect_hypotheses_score_100_and_buckets_count_source_words():
    sources = ["ein kurzer satz", " ".join(["wort"] * 15), " ".join(["wort"] * 40)]
    refs = [
        "a short sentence here",
        "a somewhat longer sentence with more words in it",
        "the longest sentence of all of them, with many many words",
    ]
    s = score(refs, refs, sources)
    assert s.bleu == pytest.approx(100.0)
    assert s.chrf == pytest.approx(100.0)
    assert [(b.min_len, b.max_len, b.n) for b in s.buckets] == [
        (1, 10, 1),
        (11, 20, 1),
        (21, 30, 0),
        (31, None, 1),
    ]
    assert s.buckets[2].bleu is None
    assert all(b.bleu == pytest.approx(100.0) for b in s.buckets if b.n)
    assert s.signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert s.lowercase_signature is not None
    assert s.bleu_lowercase == pytest.approx(100.0) and "case:lc" in s.lowercase_signature


def test_lowercased_bleu_ignores_case_only():
    s = score(["A MAN IS WALKING DOWN THE STREET ."], ["a man is walking down the street ."], ["x"])
    assert s.bleu < 10 and s.bleu_lowercase == pytest.approx(100.0)


def test_wrong_hypotheses_score_lower_and_counts_must_match():
    refs = ["a man is walking down the street", "two dogs play in the snow together"]
    s = score(["a cat", "one bird"], refs, ["x", "y"])
    assert s.bleu < 10
    with pytest.raises(ValueError, match="counts must match"):
        score(["a"], refs, ["x", "y"])


def test_table_has_one_column_per_system():
    refs = ["a b c d e", "f g h i j"]
    table = format_table(
        ["good", "bad"], [score(refs, refs, ["x", "y"]), score(["z", "z"], refs, ["x", "y"])]
    )
    header = table.splitlines()[0]
    assert "good" in header and "bad" in header
    assert "BLEU 1-10 (n=2)" in table and "signature" in table


def test_papers_bleu_is_lowercased_moses_tokenized_bleu():
    """A hypothesis that differs from its reference by case and by how punctuation is
    attached scores higher by the papers' BLEU than by cased detokenized sacreBLEU, and
    exactly what sacreBLEU gives on the strings tokenized and lowercased by hand."""
    from sacrebleu.metrics import BLEU

    from nmt.evaluation.metrics import papers_bleu

    hyps = ["a man isn't running, he's strolling.", "Two dogs play in the snow ."]
    refs = ["A man isn't running , he's walking .", "two dogs play in the snow."]
    value, signature = papers_bleu(hyps, refs, "en")
    # tokenizer.perl -l en: "isn't" -> "isn 't", "he's" -> "he 's", punctuation split off
    by_hand = (
        BLEU(tokenize="none")
        .corpus_score(
            ["a man isn 't running , he 's strolling .", "two dogs play in the snow ."],
            [["a man isn 't running , he 's walking .", "two dogs play in the snow ."]],
        )
        .score
    )
    assert value == pytest.approx(by_hand, abs=1e-9)
    s = score(hyps, refs, ["x", "y"], tgt_lang="en")
    assert s.bleu_papers == pytest.approx(by_hand, abs=1e-9) and s.bleu < value
    assert s.papers_signature == signature
    assert signature.startswith("nrefs:1|case:lc|eff:no|tok:none|")
    assert signature.endswith("+moses-tok.en+lc")
    # only where the target language is given: training's validation and the benches
    # score as before
    assert score(hyps, refs, ["x", "y"]).bleu_papers is None
    with pytest.raises(ValueError, match="counts must match"):
        papers_bleu(hyps, refs[:1], "en")


def test_papers_bleu_is_a_named_row_with_its_signature_in_the_table():
    refs = ["A man, in a red shirt.", "Two dogs."]
    hyps = ["a man , in a red shirt .", "two dogs ."]
    with_papers = format_table(["sys"], [score(hyps, refs, ["x", "y"], tgt_lang="en")])
    rows = with_papers.splitlines()
    row = next(r for r in rows if r.startswith("BLEU papers (lc, Moses)"))
    assert row.split()[-1] == "100.00"  # while cased sacreBLEU sees "A" and "a" differ
    assert float(rows[2].split()[-1]) < 100 and rows[2].startswith("BLEU ")
    sig = next(r for r in rows if r.startswith("BLEU papers (lc, Moses) signature"))
    assert "lowercased, Moses-tokenized" in sig and sig.endswith("+moses-tok.en+lc")
    assert "BLEU papers" not in format_table(["sys"], [score(hyps, refs, ["x", "y"])])
