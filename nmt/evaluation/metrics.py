"""Translation metrics: detokenized sacreBLEU BLEU and chrF with signatures, BLEU by length.

Corpus BLEU and chrF (0-100), BLEU bucketed by source length in words, and the
side-by-side table ``nmt evaluate`` prints. No torch here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sacrebleu.metrics import BLEU, CHRF

DEFAULT_BUCKETS: tuple[tuple[int, int | None], ...] = ((1, 10), (11, 20), (21, 30), (31, None))


@dataclass
class BucketScore:
    """BLEU (0-100) of the sentences whose source has ``min_len``..``max_len`` words."""

    min_len: int
    max_len: int | None  # None: no upper bound
    n: int
    bleu: float | None  # None when the bucket is empty


@dataclass
class Scores:
    """Corpus scores of one system on one test set (BLEU and chrF are 0-100)."""

    bleu: float
    chrf: float
    signature: str
    chrf_signature: str
    buckets: list[BucketScore]
    # lowercased BLEU (13a tokenization), only to compare with papers that report it
    bleu_lowercase: float | None = None
    lowercase_signature: str | None = None
    n_sentences: int = 0
    # hypothesis/reference length ratio (13a tokens) and BLEU's brevity penalty (0-1]
    len_ratio: float | None = None
    brevity_penalty: float | None = None

    def to_json(self) -> dict:
        """Plain dict for ``--json`` (BLEU and chrF 0-100)."""
        return asdict(self)


def bucket_label(lo: int, hi: int | None) -> str:
    """``"11-20"``, or ``"31+"`` when the bucket has no upper bound."""
    return f"{lo}+" if hi is None else f"{lo}-{hi}"


def score(hypotheses: list[str], references: list[str], sources: list[str],
          buckets: tuple[tuple[int, int | None], ...] = DEFAULT_BUCKETS) -> Scores:
    """Corpus BLEU and chrF of detokenized ``hypotheses`` against ``references``, and
    BLEU per bucket of source length (whitespace words of the source sentence).

    Raises:
        ValueError: the three lists differ in length.
    """
    if not len(hypotheses) == len(references) == len(sources):
        raise ValueError(f"{len(hypotheses)} hypotheses, {len(references)} references and "
                         f"{len(sources)} sources: counts must match")
    bleu, chrf, bleu_lc = BLEU(), CHRF(), BLEU(lowercase=True)
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    lc = bleu_lc.corpus_score(hypotheses, [references])
    lengths = [len(s.split()) for s in sources]
    per_bucket = []
    for lo, hi in buckets:
        idx = [i for i, n in enumerate(lengths) if n >= lo and (hi is None or n <= hi)]
        value = None
        if idx:
            value = BLEU().corpus_score([hypotheses[i] for i in idx],
                                        [[references[i] for i in idx]]).score
        per_bucket.append(BucketScore(lo, hi, len(idx), value))
    return Scores(b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()),
                  per_bucket, lc.score, str(bleu_lc.get_signature()), len(hypotheses),
                  b.sys_len / b.ref_len if b.ref_len else None, b.bp)


def format_table(names: list[str], results: list[Scores]) -> str:
    """Side-by-side table: one column per system, rows BLEU, chrF and each bucket."""
    width = max([14] + [len(n) + 2 for n in names])
    head = f"{'':<24}" + "".join(f"{n:>{width}}" for n in names)
    rows = [head, "-" * len(head)]
    rows.append(f"{'BLEU':<24}" + "".join(f"{r.bleu:>{width}.2f}" for r in results))
    rows.append(f"{'chrF':<24}" + "".join(f"{r.chrf:>{width}.2f}" for r in results))
    rows.append(f"{'BLEU lowercased':<24}"
                + "".join(f"{r.bleu_lowercase:>{width}.2f}" for r in results))
    for k, bucket in enumerate(results[0].buckets):
        label = f"BLEU {bucket_label(bucket.min_len, bucket.max_len)} (n={bucket.n})"
        cells = []
        for r in results:
            v = r.buckets[k].bleu
            cells.append(f"{'-' if v is None else format(v, '.2f'):>{width}}")
        rows.append(f"{label:<24}" + "".join(cells))
    outside = results[0].n_sentences - sum(b.n for b in results[0].buckets)
    if outside:
        rows.append(f"({outside} sentences fall in no bucket)")
    rows.append("")
    rows.append(f"BLEU signature: {results[0].signature}")
    rows.append(f"chrF signature: {results[0].chrf_signature}")
    rows.append("lowercased BLEU (for comparison with papers only): "
                f"{results[0].lowercase_signature}")
    return "\n".join(rows)
