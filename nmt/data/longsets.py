"""A deterministic long-sentence test set built by joining consecutive test pairs.

Why: Bahdanau et al. (2015, "Neural Machine Translation by Jointly Learning to Align and
Translate", Fig. 2) show BLEU against source length up to 60 words, where the fixed-vector
encoder-decoder collapses and the attention model holds up. Multi30k image captions are
short: a source rarely passes 30 words (the 2016 test set averages about 12), so a bucket
above 30 words is nearly empty and says nothing. Joining neighbouring caption pairs gives
long inputs whose reference is still exactly right, because each caption is translated on
its own and the captions of one block do not depend on each other.

Construction: for a block size ``k``, lines ``0..k-1`` become joined line 0, lines
``k..2k-1`` joined line 1, and so on (non-overlapping blocks starting at line 0); a trailing
block of fewer than ``k`` lines is dropped so every joined line is built from exactly ``k``
pairs. Sources are joined to sources and references to references, each part stripped and
the parts separated by a single space (an empty part adds nothing). ``k = 1`` is the
original set. :func:`long_sentence_set` concatenates the sets for several ``k``
(default 1, 2, 3, 4), so on Multi30k the source lengths run from a few words to 60 and
beyond, and every length bucket has enough sentences for a confidence interval.

No randomness: the same input lines always give the same set, so scores from different
runs and different models are comparable line by line. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass

# ``{split}_joined``: a named split (nmt evaluate --split test_2016_flickr_joined) that is
# ``split`` joined k = 1..5 at a time, the converged study's ``join_ks``
# (configs/study_deen_converged.yaml), so its BLEU by length is the study report's
JOINED_SUFFIX = "_joined"
JOINED_KS = (1, 2, 3, 4, 5)


def joined_base(split: str) -> str | None:
    """The split that ``split`` joins (``test_2016_flickr`` for
    ``test_2016_flickr_joined``), or None when ``split`` is not a joined split's name."""
    base = split.removesuffix(JOINED_SUFFIX)
    return base if base != split and base else None


@dataclass
class JoinedSet:
    """A test set of joined pairs.

    Attributes:
        sources: joined source lines.
        references: joined reference lines, aligned with ``sources``.
        k: per line, how many original pairs were joined to make it.
        start: per line, the index of the first original pair in its block (lines
            ``start..start+k-1`` of the input).
        name: short description, e.g. ``"joined-k2"`` or ``"long-k1,2,3,4"``.
    """

    sources: list[str]
    references: list[str]
    k: list[int]
    start: list[int]
    name: str

    def __len__(self) -> int:
        return len(self.sources)


def _join(parts: list[str]) -> str:
    # Strip each part so a trailing newline or space in a file cannot double the separator.
    return " ".join(p.strip() for p in parts if p.strip())


def join_consecutive(sources: list[str], references: list[str], k: int) -> JoinedSet:
    """Join each block of ``k`` consecutive pairs into one pair (see the module docstring).

    Returns ``len(sources) // k`` lines; line ``j`` joins input lines ``j*k .. j*k+k-1``.

    Raises:
        ValueError: ``k < 1``, or ``sources`` and ``references`` differ in length.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if len(sources) != len(references):
        raise ValueError(
            f"{len(sources)} sources but {len(references)} references: counts must match"
        )
    starts = list(range(0, len(sources) - k + 1, k))
    return JoinedSet(
        sources=[_join(sources[i : i + k]) for i in starts],
        references=[_join(references[i : i + k]) for i in starts],
        k=[k] * len(starts),
        start=starts,
        name=f"joined-k{k}",
    )


def long_sentence_set(
    sources: list[str], references: list[str], ks: tuple[int, ...] = (1, 2, 3, 4)
) -> JoinedSet:
    """The sets from :func:`join_consecutive` for each ``k`` in ``ks``, concatenated in
    that order; ``sum(len(sources) // k for k in ks)`` lines.

    Raises:
        ValueError: ``ks`` is empty, some ``k < 1``, or the lists differ in length.
    """
    if not ks:
        raise ValueError("ks must name at least one block size")
    parts = [join_consecutive(sources, references, k) for k in ks]
    return JoinedSet(
        sources=[s for p in parts for s in p.sources],
        references=[r for p in parts for r in p.references],
        k=[k for p in parts for k in p.k],
        start=[i for p in parts for i in p.start],
        name="long-k" + ",".join(str(k) for k in ks),
    )
