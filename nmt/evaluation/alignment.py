"""Agreement of attention with reference word alignments: precision, recall and AER.

Reference alignments are Pharaoh files (one line per sentence pair, ``i-j`` pairs of
0-based whitespace-word indices: source word i, target word j), as written by
scripts/align_multi30k.py from a statistical aligner. They have only *sure* links, so the
possible links P equal the sure links S, and Och & Ney's (2003, "A Systematic Comparison
of Various Statistical Alignment Models", Sec. 5) measures for a predicted alignment A are

    precision = |A ∩ P| / |A|,   recall = |A ∩ S| / |S|,
    AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|) = 1 - 2 |A ∩ S| / (|A| + |S|)

i.e. AER is 1 - F1 here. Corpus scores sum the three counts over sentences first (as
Och & Ney do), so long sentences weigh more. All values are fractions in [0, 1].

Attention to words (:func:`attention_links`): the model attends over SentencePiece
pieces. A piece starting with "▁" starts a new whitespace word (the first piece always
starts word 0), so pieces map to words exactly when SentencePiece kept the text's
whitespace. A source word's weight is the **sum** of its pieces' weights (its share of the
distribution); a target word's distribution is the **mean** of its pieces' rows, so a word
split into several pieces counts once and every piece of it has a say (the first piece
alone would ignore what the model looks at while it finishes the word). Each target word
is then linked to its most attended source word. The final ``</s>`` is no word: its
target row is skipped, and its source column is left out of the argmax (a head's weight
parked on ``</s>`` is reported separately as its share on ``</s>``).

Joined long-sentence sets (nmt/data/longsets.py) get their alignment from the captions'
alignments (:func:`join_alignments`): a joined line's alignment is the concatenation of
its captions', each shifted by the words of the captions before it on either side.

No torch here (numpy only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nmt.evaluation.bootstrap import Interval, PairedResult, bootstrap_sums, paired_bootstrap_sums

Alignment = frozenset[tuple[int, int]]  # (source word i, target word j) links
WORD_START = "\u2581"


class AlignmentError(ValueError):
    """A malformed Pharaoh file or mismatched inputs; the message names the file and line."""


def parse_pharaoh(line: str, where: str = "alignment") -> Alignment:
    """The links of one Pharaoh line, ``"0-0 1-2 2-1"`` -> {(0, 0), (1, 2), (2, 1)}.

    Raises:
        AlignmentError: a token that is not ``i-j`` with non-negative integers (``where``
            names the file and line).
    """
    links = set()
    for tok in line.split():
        i, sep, j = tok.partition("-")
        # isdigit() alone takes '²' and other digits that int() refuses
        if not sep or not (i.isascii() and i.isdigit() and j.isascii() and j.isdigit()):
            raise AlignmentError(f"{where}: expected i-j pairs of word indices, got {tok!r}")
        links.add((int(i), int(j)))
    return frozenset(links)


def format_pharaoh(links: Alignment) -> str:
    """One Pharaoh line, links sorted by target then source word (fast_align's order)."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links, key=lambda x: (x[1], x[0])))


def read_pharaoh(path: Path) -> list[Alignment]:
    """Every line of the Pharaoh file ``path``.

    Raises:
        AlignmentError: unreadable file or a malformed line (named).
    """
    try:
        data = path.read_bytes()
    except OSError as e:
        raise AlignmentError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise AlignmentError(
            f"{path}, line {line}: not UTF-8 text (a Pharaoh file holds i-j pairs of word indices)"
        ) from None
    return [parse_pharaoh(line, f"{path}, line {n}") for n, line in enumerate(text.splitlines(), 1)]


def check_bounds(links: Alignment, n_src: int, n_tgt: int, where: str) -> None:
    """Raise AlignmentError unless every link lies inside an n_src x n_tgt sentence pair."""
    bad = [(i, j) for i, j in links if i >= n_src or j >= n_tgt]
    if bad:
        i, j = bad[0]
        raise AlignmentError(
            f"{where}: link {i}-{j} outside the pair of {n_src} source and "
            f"{n_tgt} target words (alignment of another corpus?)"
        )


def join_alignments(
    alignments: Sequence[Alignment], sources: Sequence[str], targets: Sequence[str], k: int
) -> list[Alignment]:
    """Alignments of :func:`nmt.data.longsets.join_consecutive`'s lines: block ``b`` joins
    pairs ``b*k .. b*k+k-1``; each caption's links are shifted by the whitespace words of
    the captions before it in the block (source side for i, target side for j).

    Raises:
        AlignmentError: ``k < 1`` or the three lists differ in length.
    """
    if k < 1:
        raise AlignmentError(f"k must be at least 1, got {k}")
    if not len(alignments) == len(sources) == len(targets):
        raise AlignmentError(
            f"{len(alignments)} alignments for {len(sources)} sources and "
            f"{len(targets)} targets: counts must match"
        )
    out = []
    for start in range(0, len(sources) - k + 1, k):
        links: set[tuple[int, int]] = set()
        di = dj = 0
        for n in range(start, start + k):
            links.update((i + di, j + dj) for i, j in alignments[n])
            di, dj = di + len(sources[n].split()), dj + len(targets[n].split())
        out.append(frozenset(links))
    return out


def long_alignments(
    alignments: Sequence[Alignment],
    sources: Sequence[str],
    targets: Sequence[str],
    ks: Sequence[int],
) -> list[Alignment]:
    """:func:`join_alignments` for each k in ``ks``, concatenated in that order (the line
    order of :func:`nmt.data.longsets.long_sentence_set`)."""
    return [a for k in ks for a in join_alignments(alignments, sources, targets, k)]


def piece_words(pieces: Sequence[str]) -> list[int]:
    """The 0-based whitespace-word index of each piece (see the module docstring):
    ``["▁Ein", "▁Hund", "e", "."]`` -> ``[0, 1, 1, 1]``."""
    words, w = [], -1
    for n, p in enumerate(pieces):
        if n == 0 or p.startswith(WORD_START):
            w += 1
        words.append(w)
    return words


def word_attention(
    weights: np.ndarray, src_pieces: Sequence[str], tgt_pieces: Sequence[str]
) -> np.ndarray:
    """(J, I) attention of J target words over I source words: source pieces summed into
    words, target rows averaged over a word's pieces; the final ``</s>`` on both sides left
    out (``weights`` is (T, S) with T = len(tgt_pieces), S = len(src_pieces), both ending
    in ``</s>``).

    Raises:
        AlignmentError: shapes that do not match the pieces.
    """
    T, S = weights.shape
    if (T, S) != (len(tgt_pieces), len(src_pieces)):
        raise AlignmentError(
            f"weights of shape {(T, S)} for {len(tgt_pieces)} target and "
            f"{len(src_pieces)} source pieces"
        )
    src_w, tgt_w = piece_words(src_pieces[:-1]), piece_words(tgt_pieces[:-1])
    n_src = src_w[-1] + 1 if src_w else 0  # I source words
    n_tgt = tgt_w[-1] + 1 if tgt_w else 0  # J target words
    to_src = np.zeros((S - 1, n_src))  # (S-1, I) one-hot: piece -> word
    to_src[np.arange(S - 1), src_w] = 1.0
    to_tgt = np.zeros((n_tgt, T - 1))  # (J, T-1) row-normalised: word -> mean of its pieces
    to_tgt[tgt_w, np.arange(T - 1)] = 1.0
    to_tgt /= np.maximum(to_tgt.sum(axis=1, keepdims=True), 1.0)
    return to_tgt @ weights[:-1, :-1] @ to_src  # (J, I)


def attention_links(
    weights: np.ndarray, src_pieces: Sequence[str], tgt_pieces: Sequence[str]
) -> Alignment:
    """One link per target word, to its most attended source word (ties: the first);
    see :func:`word_attention`. Empty when either side has no word."""
    w = word_attention(weights, src_pieces, tgt_pieces)  # (J, I)
    if w.size == 0:
        return frozenset()
    return frozenset((int(i), j) for j, i in enumerate(w.argmax(axis=1)))


RELATIONS = ("aligned", "next", "previous", "elsewhere")


def relations(predicted: Alignment, reference: Alignment) -> tuple[int, int, int, int]:
    """Where each predicted link (i, j) falls against the reference links of its target
    word j, counted in :data:`RELATIONS` order: on a reference-linked source word
    ("aligned"), on the word right after one ("next": i - 1 is linked), right before one
    ("previous": i + 1 is linked, i - 1 not), or elsewhere. Links of target words with no
    reference link are not counted. A head that reads the source word after the one being
    translated (the word that comes next, as in Luong et al. 2015's predictive alignment)
    shows as "next"; links are (source word, target word), as :func:`attention_links`."""
    linked: dict[int, set[int]] = {}
    for i, j in reference:
        linked.setdefault(j, set()).add(i)
    c = [0, 0, 0, 0]
    for i, j in predicted:
        r = linked.get(j)
        if not r:
            continue
        c[0 if i in r else 1 if i - 1 in r else 2 if i + 1 in r else 3] += 1
    return c[0], c[1], c[2], c[3]


def counts(predicted: Alignment, reference: Alignment) -> tuple[int, int, int]:
    """(|A|, |S|, |A ∩ S|) of one sentence: the sufficient statistics of the scores."""
    return len(predicted), len(reference), len(predicted & reference)


@dataclass
class AlignmentScore:
    """Corpus precision, recall and AER (fractions in [0, 1]; S = P, module docstring)."""

    precision: float
    recall: float
    aer: float
    links: int  # |A|, predicted links
    reference_links: int  # |S|


def _prf(sums: np.ndarray) -> tuple[float, float, float]:
    a, s, both = (float(x) for x in sums)
    p = both / a if a else 0.0
    r = both / s if s else 0.0
    return p, r, (1.0 - 2.0 * both / (a + s) if a + s else 0.0)


def _aer(sums: np.ndarray) -> float:
    return _prf(sums)[2]


def score(predicted: Sequence[Alignment], reference: Sequence[Alignment]) -> AlignmentScore:
    """Corpus precision, recall and AER of ``predicted`` against ``reference``.

    Raises:
        AlignmentError: the lists differ in length.
    """
    stats = count_matrix(predicted, reference)
    p, r, aer = _prf(stats.sum(axis=0))
    return AlignmentScore(p, r, aer, int(stats[:, 0].sum()), int(stats[:, 1].sum()))


def count_matrix(predicted: Sequence[Alignment], reference: Sequence[Alignment]) -> np.ndarray:
    """(N, 3) per-sentence :func:`counts`.

    Raises:
        AlignmentError: the lists differ in length.
    """
    if len(predicted) != len(reference):
        raise AlignmentError(
            f"{len(predicted)} predicted alignments but {len(reference)} "
            "reference alignments: counts must match"
        )
    rows = [counts(a, s) for a, s in zip(predicted, reference, strict=True)]
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), 3)


def aer_interval(stats: np.ndarray, n_samples: int = 1000, seed: int = 12345) -> Interval:
    """AER of the (N, 3) :func:`count_matrix` with its 95% bootstrap percentile interval
    (sentences resampled; nmt/evaluation/bootstrap.py)."""
    return bootstrap_sums(stats, _aer, n_samples, seed)


def paired_aer(
    baseline: np.ndarray, system: np.ndarray, n_samples: int = 1000, seed: int = 12345
) -> PairedResult:
    """AER of ``system`` minus ``baseline`` (both (N, 3) over the same sentences) on the same
    resamples; ``p_value``: the share of resamples where the system's AER is not lower."""
    score_fn: Callable[[np.ndarray], float] = _aer
    return paired_bootstrap_sums(
        baseline, system, score_fn, n_samples, seed, higher_is_better=False
    )
