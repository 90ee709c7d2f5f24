"""Translation metrics: detokenized sacreBLEU BLEU and chrF with signatures, BLEU by length.

Corpus BLEU and chrF (0-100), BLEU bucketed by source length in words, the papers' BLEU
(:func:`papers_bleu`: lowercased and Moses-tokenized, the number published Multi30k
results report) and the side-by-side table ``nmt evaluate`` prints. No torch here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from sacrebleu.metrics import BLEU, CHRF

DEFAULT_BUCKETS: tuple[tuple[int, int | None], ...] = ((1, 10), (11, 20), (21, 30), (31, None))
# the name of :func:`papers_bleu` in every report
PAPERS_LABEL = "BLEU papers (lc, Moses)"


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
    # the papers' BLEU (:func:`papers_bleu`), when the target language was given
    bleu_papers: float | None = None
    papers_signature: str | None = None

    def to_json(self) -> dict:
        """Plain dict for ``--json`` (BLEU and chrF 0-100)."""
        return asdict(self)


def bucket_label(lo: int, hi: int | None) -> str:
    """``"11-20"``, or ``"31+"`` when the bucket has no upper bound."""
    return f"{lo}+" if hi is None else f"{lo}-{hi}"


@lru_cache(maxsize=8)
def _moses(lang: str) -> Any:
    # sacremoses takes half a second to import: only when the papers' BLEU is asked for
    from sacremoses import MosesTokenizer

    return MosesTokenizer(lang=lang)


def moses_tokenize(lines: list[str], lang: str) -> list[str]:
    """Each line Moses-tokenized (sacremoses, ``tokenizer.perl -l lang -no-escape``:
    punctuation split off, ``&`` and quotes left as they are), case kept."""
    tok = _moses(lang)
    return [tok.tokenize(line, escape=False, return_str=True) for line in lines]


@lru_cache(maxsize=16)
def _tokenized_references(references: tuple[str, ...], lang: str) -> tuple[str, ...]:
    # nmt select and evaluate score one reference list against many systems: Moses
    # tokenizes it once (a tuple, so the cached value cannot be changed by a caller)
    return tuple(moses_tokenize(list(references), lang))


def papers_bleu(hypotheses: list[str], references: list[str], lang: str) -> tuple[float, str]:
    """BLEU (0-100) as published Multi30k results compute it, and its signature.

    Papers on Multi30k (e.g. the WMT16 multimodal task report, Specia et al. 2016) score
    lowercased, Moses-tokenized hypotheses against references prepared the same way, with
    MultEval (Clark et al. 2011), which takes the tokens as given. Here both sides are
    tokenized by :func:`moses_tokenize` (target language ``lang``), then lowercased and
    scored by sacreBLEU with ``tokenize="none"`` and ``lowercase=True``. Tokenizing
    before lowercasing is Moses' order: its non-breaking prefixes (``Mr.``) are case
    sensitive. The number is usually higher than cased detokenized sacreBLEU and is not
    comparable with it: nmt reports it only to set results beside published ones. The
    signature is sacreBLEU's with ``+moses-tok.LANG+lc`` appended.

    Raises:
        ValueError: the lists differ in length.
    """
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses and {len(references)} references: counts must match"
        )
    # force: the input is tokenized on purpose, so sacreBLEU's "forgot to detokenize"
    # warning (100 lines ending in " .") would be a false alarm; the signature is unchanged
    bleu = BLEU(tokenize="none", lowercase=True, force=True)
    result = bleu.corpus_score(
        moses_tokenize(hypotheses, lang), [list(_tokenized_references(tuple(references), lang))]
    )
    return result.score, f"{bleu.get_signature()}+moses-tok.{lang}+lc"


def score(
    hypotheses: list[str],
    references: list[str],
    sources: list[str],
    buckets: tuple[tuple[int, int | None], ...] = DEFAULT_BUCKETS,
    tgt_lang: str | None = None,
) -> Scores:
    """Corpus BLEU and chrF of detokenized ``hypotheses`` against ``references``, and
    BLEU per bucket of source length (whitespace words of the source sentence). With
    ``tgt_lang`` also the papers' BLEU (:func:`papers_bleu`) in that language.

    Raises:
        ValueError: the three lists differ in length.
    """
    if not len(hypotheses) == len(references) == len(sources):
        raise ValueError(
            f"{len(hypotheses)} hypotheses, {len(references)} references and "
            f"{len(sources)} sources: counts must match"
        )
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
            value = (
                BLEU()
                .corpus_score([hypotheses[i] for i in idx], [[references[i] for i in idx]])
                .score
            )
        per_bucket.append(BucketScore(lo, hi, len(idx), value))
    papers, papers_sig = (
        (None, None) if tgt_lang is None else papers_bleu(hypotheses, references, tgt_lang)
    )
    return Scores(
        b.score,
        c.score,
        str(bleu.get_signature()),
        str(chrf.get_signature()),
        per_bucket,
        lc.score,
        str(bleu_lc.get_signature()),
        len(hypotheses),
        b.sys_len / b.ref_len if b.ref_len else None,
        b.bp,
        papers,
        papers_sig,
    )


def format_table(names: list[str], results: list[Scores]) -> str:
    """Side-by-side table: one column per system, rows BLEU, chrF and each bucket."""
    width = max([14] + [len(n) + 2 for n in names])
    head = f"{'':<24}" + "".join(f"{n:>{width}}" for n in names)
    rows = [head, "-" * len(head)]
    rows.append(f"{'BLEU':<24}" + "".join(f"{r.bleu:>{width}.2f}" for r in results))
    rows.append(f"{'chrF':<24}" + "".join(f"{r.chrf:>{width}.2f}" for r in results))
    rows.append(
        f"{'BLEU lowercased':<24}" + "".join(f"{r.bleu_lowercase:>{width}.2f}" for r in results)
    )
    papers = any(r.bleu_papers is not None for r in results)
    if papers:
        rows.append(
            f"{PAPERS_LABEL:<24}"
            + "".join(
                f"{'-' if r.bleu_papers is None else format(r.bleu_papers, '.2f'):>{width}}"
                for r in results
            )
        )
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
    rows.append(
        f"lowercased BLEU (for comparison with papers only): {results[0].lowercase_signature}"
    )
    if papers:
        sig = next(r.papers_signature for r in results if r.papers_signature)
        rows.append(
            f"{PAPERS_LABEL} signature (lowercased, Moses-tokenized, as published "
            f"Multi30k numbers; not comparable with BLEU above): {sig}"
        )
    return "\n".join(rows)
