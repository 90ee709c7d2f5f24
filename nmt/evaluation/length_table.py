"""BLEU and chrF by source-length bucket, every system on the same resamples: the rows
(:class:`BucketRow`, with 95% bootstrap intervals, length ratio, brevity penalty, the share
of over-long hypotheses and the paired BLEU delta against a baseline) and their Markdown
table. The bootstrap and its definitions are nmt/evaluation/bootstrap.py's. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import BLEU

from nmt.evaluation.bootstrap import (
    Interval,
    PairedResult,
    bucket_indices,
    check_counts,
    metric_named,
    paired_result,
    percentile_interval,
    resample,
    sentence_stats,
)
from nmt.evaluation.metrics import bucket_label


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
    check_counts(n_samples, refs, {"sources": sources, **lists})
    names = ([baseline] if baseline is not None else []) + [s for s in systems if s != baseline]
    bleu = BLEU()  # = metric_named("bleu"), typed as BLEU for its BLEUScore below
    metrics = {"bleu": bleu, "chrf": metric_named("chrf")}
    # Per-sentence statistics once per system; a bucket is a row slice of them.
    stats = {
        (s, m): sentence_stats(metric, systems[s], refs)
        for s in names
        for m, metric in metrics.items()
    }
    lengths = np.array([len(s.split()) for s in sources])
    rows = []
    for (lo, hi), idx in zip(buckets, bucket_indices(sources, buckets), strict=True):
        scored = (
            {
                (s, m): resample(metric, stats[s, m][idx], n_samples, seed)
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
                paired = paired_result(scored[baseline, "bleu"], scored[s, "bleu"])
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
                    bleu=percentile_interval(scored[s, "bleu"]) if idx else None,
                    chrf=percentile_interval(scored[s, "chrf"]) if idx else None,
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
