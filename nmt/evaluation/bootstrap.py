"""Bootstrap confidence intervals and paired significance tests, per source-length bucket.

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

from nmt.evaluation.metrics import bucket_label

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
class BucketRow:
    """One system on one source-length bucket.

    Attributes:
        min_len, max_len: the bucket, in source words (``max_len`` None: no upper bound).
        system: system name. baseline: name of the baseline it is compared with, or None.
        n: sentences in the bucket. mean_src_words: their mean source length (None if n=0).
        too_few: ``0 < n < min_bucket``; the scores are computed but unreliable.
        min_bucket: the threshold behind ``too_few``.
        bleu, chrf: scores with intervals, None when the bucket is empty.
        vs_baseline: paired BLEU comparison; None for the baseline and empty buckets.
        len_ratio: hypothesis/reference length in BLEU's 13a tokens, summed over the
            bucket (sacreBLEU's ``sys_len / ref_len``); None when the bucket is empty.
        over_long: fraction (0-1) of the bucket's sentences whose hypothesis has more than
            1.5 times as many words as its reference (the signature of repetition loops).
        brevity_penalty: BLEU's brevity penalty for the bucket, ``min(1, exp(1 - r/c))``
            (Papineni et al. 2002, sec. 2.2.2), as sacreBLEU computes it; 1 means not
            penalised, so BLEU below it with BP near 1 is wrong content, not short output.
    """

    min_len: int
    max_len: int | None
    system: str
    baseline: str | None
    n: int
    mean_src_words: float | None
    too_few: bool
    min_bucket: int
    bleu: Interval | None
    chrf: Interval | None
    vs_baseline: PairedResult | None
    len_ratio: float | None = None
    brevity_penalty: float | None = None
    over_long: float | None = None  # share of sentences whose hypothesis has > 1.5x the
    # reference's words: repetition loops, which a bucket's length ratio averages away

    @property
    def label(self) -> str:
        """The bucket as text, e.g. ``"11-20"`` or ``"31+"``."""
        return bucket_label(self.min_len, self.max_len)


@dataclass
class _Resampled:
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


def _metric(name: str) -> BLEU | CHRF:
    match name:
        case "bleu":
            return BLEU()
        case "chrf":
            return CHRF()
    raise ValueError(f"metric must be 'bleu' or 'chrf', got {name!r}")


def _sentence_stats(metric: BLEU | CHRF, hyps: list[str], refs: list[str]) -> np.ndarray:
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


def _resample(metric: BLEU | CHRF, stats: np.ndarray, n_samples: int, seed: int) -> _Resampled:
    """Score of ``stats`` (N, d) summed, and of each of ``n_samples`` resamples."""
    score = metric._compute_score_from_stats(stats.sum(0)).score
    samples = [
        metric._compute_score_from_stats(row).score
        for counts in _draw_counts(len(stats), n_samples, seed)
        for row in counts @ stats
    ]  # (C, d) summed statistics per resample
    return _Resampled(score, np.asarray(samples))


def _interval(r: _Resampled) -> Interval:
    low, high = np.percentile(r.samples, [2.5, 97.5])
    return Interval(float(r.score), float(low), float(high))


def _paired(base: _Resampled, system: _Resampled) -> PairedResult:
    """Both must come from the same draws (same seed, same sentences)."""
    diffs = system.samples - base.samples  # (n_samples,)
    low, high = np.percentile(diffs, [2.5, 97.5])
    return PairedResult(
        float(system.score - base.score),
        float(low),
        float(high),
        float(np.mean(diffs <= 0)),
        len(diffs),
    )


def _check(n_samples: int, refs: list[str], lists: dict[str, list[str]]) -> None:
    """Raise ValueError unless every list in ``lists`` is as long as a non-empty ``refs``."""
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
    _check(n_samples, refs, {"hypotheses": hyps})
    m = _metric(metric)
    return _interval(_resample(m, _sentence_stats(m, hyps, refs), n_samples, seed))


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
    _check(
        n_samples, refs, {"baseline hypotheses": baseline_hyps, "system hypotheses": system_hyps}
    )
    m = _metric(metric)
    base = _resample(m, _sentence_stats(m, baseline_hyps, refs), n_samples, seed)
    system = _resample(m, _sentence_stats(m, system_hyps, refs), n_samples, seed)
    return _paired(base, system)


def study_table(
    systems: dict[str, list[str]],
    refs: list[str],
    sources: list[str],
    buckets: tuple[tuple[int, int | None], ...],
    baseline: str | None = "none",
    min_bucket: int = 30,
    n_samples: int = 1000,
    seed: int = 12345,
) -> list[BucketRow]:
    """BLEU and chrF with intervals, and paired BLEU deltas against ``baseline``, for every
    bucket (outer loop, in order) and system (baseline first, then the dict order).

    Within a bucket every system is resampled with the same draws, so the paired test uses
    the same resample indices for both systems. Buckets with ``0 < n < min_bucket``
    sentences are still scored but flagged ``too_few``; empty buckets get None scores.
    Pass ``buckets=((1, None),)`` for the whole set; empty sources fall in no bucket.

    Raises:
        ValueError: no systems, a hypothesis list, ``refs`` and ``sources`` differ in
            length, ``baseline`` is not a system, ``min_bucket < 1`` or ``n_samples < 1``.
    """
    if not systems:
        raise ValueError("no systems to compare")
    if baseline is not None and baseline not in systems:
        raise ValueError(f"baseline {baseline!r} is not one of the systems {list(systems)}")
    if min_bucket < 1:
        raise ValueError(f"min_bucket must be at least 1, got {min_bucket}")
    lists = {f"hypotheses of {name!r}": hyps for name, hyps in systems.items()}
    _check(n_samples, refs, {"sources": sources, **lists})
    names = ([baseline] if baseline is not None else []) + [s for s in systems if s != baseline]
    bleu = BLEU()  # = _metric("bleu"), typed as BLEU for its BLEUScore below
    metrics = {"bleu": bleu, "chrf": _metric("chrf")}
    # Per-sentence statistics once per system; a bucket is a row slice of them.
    stats = {
        (s, m): _sentence_stats(metric, systems[s], refs)
        for s in names
        for m, metric in metrics.items()
    }
    lengths = np.array([len(s.split()) for s in sources])
    rows = []
    for (lo, hi), idx in zip(buckets, bucket_indices(sources, buckets), strict=True):
        scored = (
            {
                (s, m): _resample(metric, stats[s, m][idx], n_samples, seed)
                for s in names
                for m, metric in metrics.items()
            }
            if idx
            else {}
        )
        for s in names:
            whole = bleu._compute_score_from_stats(stats[s, "bleu"][idx].sum(0)) if idx else None
            paired = None
            if idx and baseline is not None and s != baseline:
                paired = _paired(scored[baseline, "bleu"], scored[s, "bleu"])
            rows.append(
                BucketRow(
                    min_len=lo,
                    max_len=hi,
                    system=s,
                    baseline=baseline,
                    n=len(idx),
                    mean_src_words=float(lengths[idx].mean()) if idx else None,
                    too_few=0 < len(idx) < min_bucket,
                    min_bucket=min_bucket,
                    bleu=_interval(scored[s, "bleu"]) if idx else None,
                    chrf=_interval(scored[s, "chrf"]) if idx else None,
                    vs_baseline=paired,
                    len_ratio=whole.sys_len / whole.ref_len if whole and whole.ref_len else None,
                    brevity_penalty=whole.bp if whole else None,
                    over_long=(
                        sum(len(systems[s][i].split()) > 1.5 * len(refs[i].split()) for i in idx)
                        / len(idx)
                    )
                    if idx
                    else None,
                )
            )
    return rows


def _cell(iv: Interval | None) -> str:
    return "–" if iv is None else f"{iv.score:.1f} [{iv.low:.1f}, {iv.high:.1f}]"


def _delta_cell(row: BucketRow) -> str:
    if row.n == 0:
        return "–"
    if row.vs_baseline is None:
        return "(baseline)" if row.system == row.baseline else ""
    d = row.vs_baseline
    # With n resamples the smallest non-zero p is 1/n, so 0 means "below 1/n", not "zero".
    p = f"p<{1 / d.n_samples:.2g}" if d.p_value == 0 else f"p={d.p_value:.3f}"
    return f"{d.delta:+.1f} ({p})"


def format_markdown(rows: list[BucketRow]) -> str:
    """A Markdown table, one line per row: bucket, system, n (with ``(n<30)`` when the
    bucket is too small), ``BLEU [low, high]``, ``chrF [low, high]``, the hypothesis/
    reference length ratio, BLEU's brevity penalty and the paired BLEU delta
    ``+5.2 (p=0.001)`` against the baseline. Empty buckets show ``–``."""
    baseline = next((r.baseline for r in rows if r.baseline is not None), None)
    delta_head = f"ΔBLEU vs {baseline} (p)" if baseline is not None else "ΔBLEU"
    lines = [
        f"| Source words | System | n | BLEU [95% CI] | chrF [95% CI] | hyp/ref length "
        f"| BP | hyp > 1.5× ref | {delta_head} |",
        "|---|---|---:|---|---|---:|---:|---:|---|",
    ]
    for r in rows:
        n = f"{r.n} (n<{r.min_bucket})" if r.too_few else str(r.n)
        ratio = "–" if r.len_ratio is None else f"{r.len_ratio:.2f}"
        bp = "–" if r.brevity_penalty is None else f"{r.brevity_penalty:.2f}"
        loops = "–" if r.over_long is None else f"{100 * r.over_long:.0f}%"
        lines.append(
            f"| {r.label} | {r.system} | {n} | {_cell(r.bleu)} | {_cell(r.chrf)} "
            f"| {ratio} | {bp} | {loops} | {_delta_cell(r)} |"
        )
    return "\n".join(lines)


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
    _check(n_samples, refs, {"hypotheses": hyps, "sources": sources})
    m = _metric("bleu")
    stats = _sentence_stats(m, hyps, refs)
    first, second = bucket_indices(sources, (high_bucket, low_bucket))
    if not first or not second:
        return None
    a = _resample(m, stats[first], n_samples, seed)
    b = _resample(m, stats[second], n_samples, seed + 1)
    return _paired(b, a)  # a - b: the drop


def bootstrap_sums(
    stats: np.ndarray, score_fn, n_samples: int = 1000, seed: int = 12345
) -> Interval:
    """A corpus score that is a function of summed per-sentence statistics (``score_fn``
    of a (d,) sum, e.g. AER from link counts) with its 95% percentile interval over
    ``n_samples`` resamples of the N rows of ``stats`` (N, d).

    Raises:
        ValueError: no rows, ``n_samples < 1``.
    """
    return _interval(_resample_sums(stats, score_fn, n_samples, seed))


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
    result = _paired(base, sys_)
    if not higher_is_better:
        result.p_value = float(np.mean(sys_.samples - base.samples >= 0))
    return result


def _resample_sums(stats: np.ndarray, score_fn, n_samples: int, seed: int) -> _Resampled:
    if n_samples < 1:
        raise ValueError(f"n_samples must be at least 1, got {n_samples}")
    if len(stats) == 0:
        raise ValueError("cannot bootstrap an empty test set")
    samples = [
        score_fn(row)
        for counts in _draw_counts(len(stats), n_samples, seed)
        for row in counts @ stats
    ]  # (C, d) summed statistics per resample
    return _Resampled(score_fn(stats.sum(0)), np.asarray(samples))
