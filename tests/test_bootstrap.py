"""Bootstrap intervals, the paired test and the per-bucket study table."""

import random
from typing import Any, cast

import pytest

from nmt.evaluation.bootstrap import bootstrap_ci, bucket_indices, paired_bootstrap
from nmt.evaluation.length_table import format_markdown, study_table
from nmt.evaluation.metrics import score

WORDS = (
    "a man woman dog child runs sings plays in the snow park street with red ball "
    "green big small near water jumps over"
).split()


def corpus(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14))) + " ." for _ in range(n)]


def degrade(refs: list[str], rate: float, seed: int = 1) -> list[str]:
    """Replace each word with a random one with probability ``rate``."""
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) if rng.random() < rate else w for w in r.split()) for r in refs
    ]


def test_bucket_indices_count_source_words():
    sources = ["a b", "a b c d e", "", "x " * 12, "y " * 40]
    assert bucket_indices(sources, ((1, 2), (3, 10), (11, None))) == [[0], [1], [3, 4]]
    assert bucket_indices(sources, ((50, None),)) == [[]]


def test_identical_hypotheses_give_100_with_zero_width_interval():
    refs = corpus(40)
    for metric in ("bleu", "chrf"):
        iv = bootstrap_ci(refs, refs, n_samples=200, metric=metric)
        assert iv.score == pytest.approx(100.0)
        assert iv.low == iv.high == iv.score


def test_interval_contains_the_estimate_matches_sacrebleu_and_narrows_with_more_data():
    refs = corpus(800)
    hyps = degrade(refs, 0.3)
    small = bootstrap_ci(hyps[:50], refs[:50], n_samples=200)
    large = bootstrap_ci(hyps, refs, n_samples=200)
    for iv in (small, large):
        assert iv.low < iv.score < iv.high
    assert large.score == pytest.approx(score(hyps, refs, refs).bleu)
    assert large.high - large.low < 0.6 * (small.high - small.low)
    chrf = bootstrap_ci(hyps, refs, n_samples=200, metric="chrf")
    assert chrf.score == pytest.approx(score(hyps, refs, refs).chrf)
    assert chrf.low < chrf.score < chrf.high


def test_results_are_deterministic_for_a_seed():
    refs = corpus(100)
    hyps = degrade(refs, 0.3)
    assert bootstrap_ci(hyps, refs, n_samples=200) == bootstrap_ci(hyps, refs, n_samples=200)
    assert bootstrap_ci(hyps, refs, n_samples=200, seed=1) != bootstrap_ci(
        hyps, refs, n_samples=200
    )
    base = degrade(refs, 0.4, seed=2)
    assert paired_bootstrap(base, hyps, refs, n_samples=200) == paired_bootstrap(
        base, hyps, refs, n_samples=200
    )


def test_paired_bootstrap_same_system_ties_and_better_system_wins():
    refs = corpus(200)
    base = degrade(refs, 0.5, seed=3)
    same = paired_bootstrap(base, list(base), refs, n_samples=200)
    assert (same.delta, same.low, same.high, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    better = paired_bootstrap(base, degrade(refs, 0.2, seed=4), refs, n_samples=200)
    assert better.delta > 5 and better.low > 0 and better.p_value < 0.05
    worse = paired_bootstrap(degrade(refs, 0.2, seed=4), base, refs, n_samples=200)
    assert worse.delta < 0 and worse.p_value > 0.95


def test_bad_inputs_raise():
    refs = corpus(5)
    with pytest.raises(ValueError, match="counts must match"):
        bootstrap_ci(refs[:4], refs)
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci([], [])
    with pytest.raises(ValueError, match="metric"):
        bootstrap_ci(refs, refs, metric=cast(Any, "ter"))  # not a metric: the check under test
    with pytest.raises(ValueError, match="baseline"):
        study_table({"dot": refs}, refs, refs, ((1, None),), baseline="none")


def test_study_table_flags_small_buckets_and_formats_markdown():
    refs = corpus(120, seed=5)
    sources = refs  # source length = reference length here; only the bucketing matters
    systems = {"additive": degrade(refs, 0.2, seed=6), "none": degrade(refs, 0.5, seed=7)}
    buckets = ((1, 8), (9, 13), (14, None), (40, None))
    rows = study_table(systems, refs, sources, buckets, min_bucket=30, n_samples=200)
    assert [(r.label, r.system) for r in rows[:2]] == [("1-8", "none"), ("1-8", "additive")]
    assert len(rows) == len(buckets) * 2
    counts = [len(i) for i in bucket_indices(sources, buckets)]
    assert [r.n for r in rows[::2]] == counts
    assert counts[3] == 0 and 0 < counts[2] < 30 and counts[0] >= 30
    for r in rows:
        assert r.too_few == (0 < r.n < 30)
        assert (r.bleu is None) == (r.chrf is None) == (r.n == 0)
        assert (r.vs_baseline is None) == (r.system == "none" or r.n == 0)
    small = [r for r in rows if r.too_few]
    assert small and all(r.bleu is not None for r in small)  # flagged, still computed
    idx = bucket_indices(sources, buckets)[0]
    b, vs = rows[1].bleu, rows[1].vs_baseline
    assert b is not None and vs is not None
    assert b.score == pytest.approx(
        bootstrap_ci([systems["additive"][i] for i in idx], [refs[i] for i in idx]).score
    )
    assert vs.delta > 0 and vs.p_value < 0.05

    text = format_markdown(rows)
    lines = text.splitlines()
    assert len(lines) == 2 + len(rows)
    assert lines[0].startswith("| Source words | System | n |") and "vs none" in lines[0]
    assert f"| {counts[2]} (n<30) |" in lines[2 + 4]
    assert "(baseline)" in lines[2]
    assert f"{b.score:.1f} [{b.low:.1f}, {b.high:.1f}]" in lines[3]
    assert f"{vs.delta:+.1f} (p" in lines[3]
    assert lines[-1].startswith("| 40+ | additive | 0 | – | – | – |")


def test_length_ratio_and_brevity_penalty_per_bucket_agree_with_sacrebleu():
    from sacrebleu.metrics import BLEU

    refs = corpus(80, seed=3)
    # "short" keeps the first half of each reference: BP < 1; "long" repeats a word: BP 1
    short = [" ".join(r.split()[: max(1, len(r.split()) // 2)]) for r in refs]
    long = [r + " the the" for r in refs]
    sources = refs
    buckets = ((1, 8), (9, None))
    rows = study_table(
        {"short": short, "long": long}, refs, sources, buckets, baseline="short", n_samples=20
    )
    for (lo, _hi), idx in zip(buckets, bucket_indices(sources, buckets), strict=True):
        for name, hyps in (("short", short), ("long", long)):
            row = next(r for r in rows if r.system == name and r.min_len == lo)
            ref_score = BLEU().corpus_score([hyps[i] for i in idx], [[refs[i] for i in idx]])
            assert row.len_ratio == pytest.approx(ref_score.sys_len / ref_score.ref_len)
            assert row.brevity_penalty == pytest.approx(ref_score.bp)
            assert row.bleu is not None and row.bleu.score == pytest.approx(ref_score.score)
    short_bps = [r.brevity_penalty for r in rows if r.system == "short"]
    assert all(bp is not None and bp < 0.8 for bp in short_bps)
    long_rows = [(r.brevity_penalty, r.len_ratio) for r in rows if r.system == "long"]
    assert all(bp == 1.0 and ratio is not None and ratio > 1 for bp, ratio in long_rows)
    line = format_markdown(rows).splitlines()[2]
    assert f"| {rows[0].len_ratio:.2f} | {rows[0].brevity_penalty:.2f} |" in line


def test_scores_carry_length_ratio_and_brevity_penalty():
    s = score(["a b c"], ["a b c d e"], ["x y z"])
    assert s.len_ratio == pytest.approx(3 / 5)
    assert s.brevity_penalty == pytest.approx(2.718281828 ** (1 - 5 / 3))


def test_bucket_drop_is_the_difference_of_the_two_bucket_scores():
    from nmt.evaluation.bootstrap import bucket_drop

    refs = corpus(200, seed=5)
    sources = refs
    # good on short sources, poor on long ones: a real drop
    hyps = [r if len(r.split()) <= 9 else " ".join(r.split()[::2]) for r in refs]
    d = bucket_drop(hyps, refs, sources, (1, 9), (10, None), n_samples=200)
    assert d is not None
    idx_short, idx_long = bucket_indices(sources, ((1, 9), (10, None)))
    short = score(
        [hyps[i] for i in idx_short], [refs[i] for i in idx_short], [sources[i] for i in idx_short]
    ).bleu
    long = score(
        [hyps[i] for i in idx_long], [refs[i] for i in idx_long], [sources[i] for i in idx_long]
    ).bleu
    assert d.delta == pytest.approx(short - long) and d.delta > 30
    assert d.low <= d.delta <= d.high and d.p_value == 0.0 and d.n_samples == 200
    flat = bucket_drop(refs, refs, sources, (1, 9), (10, None), n_samples=50)
    assert flat is not None
    assert flat.delta == pytest.approx(0.0) and flat.p_value == 1.0
    assert bucket_drop(refs, refs, sources, (1, 9), (500, None), n_samples=10) is None


@pytest.mark.parametrize("case", ["pair2", "same", "one"])
def test_bootstrap_matches_the_nmt35_reference(case):
    """shared/cases/NMT-35: corpus BLEU resampled with replacement, hypothesis and reference
    together; the intervals of the case's reference (B=1000) whatever the generator."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "shared" / "cases" / "NMT-35"
    if not root.is_dir():
        pytest.skip("shared/cases/NMT-35 not found")
    expected = json.loads((root / "expected.json").read_text())[case]
    hyps = (root / case / "hyp.en").read_text(encoding="utf-8").splitlines()
    refs = (root / case / "ref.en").read_text(encoding="utf-8").splitlines()
    iv = bootstrap_ci(hyps, refs, n_samples=1000, seed=12345)
    assert iv.score == pytest.approx(expected["corpus_bleu"])
    low, high = expected["percentile_95_ci_B1000_numpy_seed12345"]
    assert iv.low == pytest.approx(low, abs=1e-6) and iv.high == pytest.approx(high, abs=1e-6)
    # every resampled score is one the exact distribution allows
    from nmt.evaluation.bootstrap import metric_named, resample, sentence_stats

    m = metric_named("bleu")
    samples = resample(m, sentence_stats(m, hyps, refs), 200, 1).samples
    allowed = {round(float(k), 6) for k in expected["exact_distribution_of_one_resample"]}
    assert {round(float(x), 6) for x in samples} <= allowed


def test_over_long_share_counts_hypotheses_longer_than_one_and_a_half_references():
    refs = corpus(40, seed=9)
    looping = [r + " " + r if i % 4 == 0 else r for i, r in enumerate(refs)]  # 10 of 40 loop
    rows = study_table(
        {"ok": refs, "loop": looping}, refs, refs, ((1, None),), baseline="ok", n_samples=10
    )
    share = {r.system: r.over_long for r in rows}
    assert share == {"ok": 0.0, "loop": pytest.approx(10 / 40)}
    assert "| 25% |" in format_markdown(rows)
