"""Bootstrap confidence intervals and paired significance tests; the BLEU drop between two
source-length buckets. The table of every bucket and system is nmt/evaluation/length_table.py.

Scores are sacreBLEU corpus BLEU and chrF (0-100, default settings, as in
:func:`nmt.evaluation.metrics.score`). Resampling follows Koehn (2004, "Statistical Significance
Tests for Machine Translation Evaluation"): draw ``len(test set)`` sentences with
replacement, score the drawn corpus, repeat ``n_samples`` times.

Efficiency: corpus BLEU and chrF are functions of sums of per-sentence sufficient
statistics (n-gram matches and totals, lengths). Those are extracted once per system with
sacreBLEU; a resample is then a vector of draw counts per sentence, so its statistics are one
matrix product (``counts @ stats``) and only the final formula runs per resample. The
resampled score is exactly what sacreBLEU's ``corpus_score`` would give for the drawn
sentences.

Definitions used throughout:

* **Confidence interval**: the 2.5th and 97.5th percentiles (numpy's linear interpolation)
  of the resampled scores, a 95% percentile interval. The point estimate is the score of
  the whole (bucket of the) test set, not the mean of the resamples.
* **Paired test**: both systems are scored on the *same* resampled sentences. ``delta`` is
  system minus baseline on the whole set; its interval is the percentile interval of the
  resampled differences; ``p_value`` is the fraction of resamples in which the system is
  *not better* than the baseline (difference <= 0; ties count against the system). This
  is Koehn's one-sided test: "better with 95% confidence" means ``p_value < 0.05``. A
  system identical to the baseline ties on every resample and gets ``p_value == 1``.
  sacreBLEU's ``--paired-bs`` (a port of Moses' bootstrap-hypothesis-difference-
  significance.pl) differs: it is two-sided on ``|sys - base|``, shifts the resampled
  absolute differences to mean zero, and reports ``(#{shifted > observed} + 1) /
  (n_samples + 1)``. We follow Koehn, because the study asks a directional question
  (does attention beat no attention?) and the definition can be stated in one sentence.

Fixed seeds (numpy ``default_rng(seed)``) make every result deterministic. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from sacrebleu.metrics import BLEU, CHRF

MetricName = Literal["bleu", "chrf"]
_CHUNK = 256  # resamples per matrix product; bounds memory at _CHUNK * N counts


@dataclass
class Interval:
    """A corpus score (0-100) with its 95% bootstrap percentile interval."""

    score: float
    low: float
    high: float


@dataclass
class PairedResult:
    """Paired bootstrap comparison of a system with a baseline (BLEU or chrF points).

    Attributes:
        delta: system minus baseline score on the whole set.
        low, high: 95% percentile interval of the resampled differences.
        p_value: fraction of resamples where the system is not better (difference <= 0).
        n_samples: number of resamples, so ``p_value == 0`` reads as ``< 1/n_samples``.
    """

    delta: float
    low: float
    high: float
    p_value: float
    n_samples: int


@dataclass
class Resampled:
    """A score on the whole set and its ``n_samples`` resampled values."""

    score: float
    samples: np.ndarray  # (n_samples,)


def bucket_indices(
    sources: list[str], buckets: tuple[tuple[int, int | None], ...]
) -> list[list[int]]:
    """For each ``(lo, hi)`` bucket, the indices of the sources with ``lo..hi`` whitespace
    words (``hi`` None: no upper bound), in input order."""
    lengths = [len(s.split()) for s in sources]
    return [
        [i for i, n in enumerate(lengths) if n >= lo and (hi is None or n <= hi)]
        for lo, hi in buckets
    ]


def metric_named(name: str) -> BLEU | CHRF:
    """sacreBLEU's BLEU or chrF (default settings) for ``"bleu"`` or ``"chrf"``.

    Raises:
        ValueError: any other name.
    """
    match name:
        case "bleu":
            return BLEU()
        case "chrf":
            return CHRF()
    raise ValueError(f"metric must be 'bleu' or 'chrf', got {name!r}")


def sentence_stats(metric: BLEU | CHRF, hyps: list[str], refs: list[str]) -> np.ndarray:
    """(N, d) per-sentence sufficient statistics (integer counts, stored as float64)."""
    stats = metric._extract_corpus_statistics(hyps, [refs])
    return np.asarray(stats, dtype=np.float64).reshape(len(hyps), -1)


def _draw_counts(n: int, n_samples: int, seed: int):
    """Yield (C, n) matrices of how often each sentence is drawn, C <= _CHUNK resamples
    at a time, ``n_samples`` rows in all; the same seed gives the same draws."""
    rng = np.random.default_rng(seed)
    for start in range(0, n_samples, _CHUNK):
        c = min(_CHUNK, n_samples - start)
        idx = rng.integers(0, n, size=(c, n))  # (C, n) drawn sentence indices
        flat = (np.arange(c)[:, None] * n + idx).ravel()
        yield np.bincount(flat, minlength=c * n).reshape(c, n).astype(np.float64)


def resample(metric: BLEU | CHRF, stats: np.ndarray, n_samples: int, seed: int) -> Resampled:
    """Score of ``stats`` (N, d) summed, and of each of ``n_samples`` resamples."""
    score = metric._compute_score_from_stats(stats.sum(0)).score
    samples = [
        metric._compute_score_from_stats(row).score
        for counts in _draw_counts(len(stats), n_samples, seed)
        for row in counts @ stats
    ]  # (C, d) summed statistics per resample
    return Resampled(score, np.asarray(samples))


def percentile_interval(r: Resampled) -> Interval:
    """The whole-set score of ``r`` with the 2.5th and 97.5th percentiles of its resamples."""
    low, high = np.percentile(r.samples, [2.5, 97.5])
    return Interval(float(r.score), float(low), float(high))


def paired_result(base: Resampled, system: Resampled) -> PairedResult:
    """``system`` minus ``base`` with its interval and one-sided p-value (module docstring);
    both must come from the same draws (same seed, same sentences)."""
    diffs = system.samples - base.samples  # (n_samples,)
    low, high = np.percentile(diffs, [2.5, 97.5])
    return PairedResult(
        float(system.score - base.score),
        float(low),
        float(high),
        float(np.mean(diffs <= 0)),
        len(diffs),
    )


def check_counts(n_samples: int, refs: list[str], lists: dict[str, list[str]]) -> None:
    """Raise ValueError unless ``n_samples`` >= 1 and every list in ``lists`` is as long as
    a non-empty ``refs`` (the message names the list)."""
    if n_samples < 1:
        raise ValueError(f"n_samples must be at least 1, got {n_samples}")
    if not refs:
        raise ValueError("cannot bootstrap an empty test set")
    for name, h in lists.items():
        if len(h) != len(refs):
            raise ValueError(f"{len(h)} {name} but {len(refs)} references: counts must match")


def bootstrap_ci(
    hyps: list[str],
    refs: list[str],
    n_samples: int = 1000,
    seed: int = 12345,
    metric: MetricName = "bleu",
) -> Interval:
    """Corpus BLEU or chrF (0-100) of ``hyps`` with a 95% bootstrap percentile interval.

    Raises:
        ValueError: empty or mismatched lists, ``n_samples < 1``, unknown ``metric``.
    """
    check_counts(n_samples, refs, {"hypotheses": hyps})
    m = metric_named(metric)
    return percentile_interval(resample(m, sentence_stats(m, hyps, refs), n_samples, seed))


def paired_bootstrap(
    baseline_hyps: list[str],
    system_hyps: list[str],
    refs: list[str],
    n_samples: int = 1000,
    seed: int = 12345,
    metric: MetricName = "bleu",
) -> PairedResult:
    """Koehn (2004) paired bootstrap: system minus baseline, with the one-sided p-value
    defined in the module docstring (fraction of resamples where system <= baseline).

    Raises:
        ValueError: empty or mismatched lists, ``n_samples < 1``, unknown ``metric``.
    """
    check_counts(
        n_samples, refs, {"baseline hypotheses": baseline_hyps, "system hypotheses": system_hyps}
    )
    m = metric_named(metric)
    base = resample(m, sentence_stats(m, baseline_hyps, refs), n_samples, seed)
    system = resample(m, sentence_stats(m, system_hyps, refs), n_samples, seed)
    return paired_result(base, system)


def bucket_drop(
    hyps: list[str],
    refs: list[str],
    sources: list[str],
    high_bucket: tuple[int, int | None],
    low_bucket: tuple[int, int | None],
    n_samples: int = 1000,
    seed: int = 12345,
) -> PairedResult | None:
    """How much BLEU one system loses from one source-length bucket to another: BLEU on
    ``high_bucket`` (e.g. 1-10 words) minus BLEU on ``low_bucket`` (e.g. 51-60 words).

    The two buckets hold different sentences, so they are resampled independently (seeds
    ``seed`` and ``seed + 1``) and the interval is the 95% percentile interval of the
    differences of the resampled scores; ``p_value`` is the fraction of resamples in which
    the first bucket does *not* score higher (no drop). None when a bucket is empty.

    Raises:
        ValueError: mismatched or empty lists, ``n_samples < 1``.
    """
    check_counts(n_samples, refs, {"hypotheses": hyps, "sources": sources})
    m = metric_named("bleu")
    stats = sentence_stats(m, hyps, refs)
    first, second = bucket_indices(sources, (high_bucket, low_bucket))
    if not first or not second:
        return None
    a = resample(m, stats[first], n_samples, seed)
    b = resample(m, stats[second], n_samples, seed + 1)
    return paired_result(b, a)  # a - b: the drop


def bootstrap_sums(
    stats: np.ndarray, score_fn, n_samples: int = 1000, seed: int = 12345
) -> Interval:
    """A corpus score that is a function of summed per-sentence statistics (``score_fn``
    of a (d,) sum, e.g. AER from link counts) with its 95% percentile interval over
    ``n_samples`` resamples of the N rows of ``stats`` (N, d).

    Raises:
        ValueError: no rows, ``n_samples < 1``.
    """
    return percentile_interval(_resample_sums(stats, score_fn, n_samples, seed))


def paired_bootstrap_sums(
    baseline: np.ndarray,
    system: np.ndarray,
    score_fn,
    n_samples: int = 1000,
    seed: int = 12345,
    *,
    higher_is_better: bool = True,
) -> PairedResult:
    """:func:`bootstrap_sums` of two systems on the same resamples of the same N sentences:
    system minus baseline; ``p_value`` counts resamples where the system is not better
    (with ``higher_is_better=False``, where its score is not lower).

    Raises:
        ValueError: different row counts, no rows, ``n_samples < 1``.
    """
    if len(baseline) != len(system):
        raise ValueError(
            f"{len(system)} system rows but {len(baseline)} baseline rows: counts must match"
        )
    base = _resample_sums(baseline, score_fn, n_samples, seed)
    sys_ = _resample_sums(system, score_fn, n_samples, seed)
    result = paired_result(base, sys_)
    if not higher_is_better:
        result.p_value = float(np.mean(sys_.samples - base.samples >= 0))
    return result


def _resample_sums(stats: np.ndarray, score_fn, n_samples: int, seed: int) -> Resampled:
    if n_samples < 1:
        raise ValueError(f"n_samples must be at least 1, got {n_samples}")
    if len(stats) == 0:
        raise ValueError("cannot bootstrap an empty test set")
    samples = [
        score_fn(row)
        for counts in _draw_counts(len(stats), n_samples, seed)
        for row in counts @ stats
    ]  # (C, d) summed statistics per resample
    return Resampled(score_fn(stats.sum(0)), np.asarray(samples))
