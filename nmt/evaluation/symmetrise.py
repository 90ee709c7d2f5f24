"""Symmetrising two directional word alignments, and mapping token links back to words.

A directional aligner (IBM models, fast_align, eflomal) links each word of one side to at
most one word of the other, so each direction alone misses many-to-one links. The usual
remedy (Och & Ney 2003; Koehn, Och & Marcu 2003, "Statistical Phrase-Based Translation")
starts from the intersection of both directions (precise) and grows toward their union
(complete): :func:`grow_diag_final_and`, the heuristic Moses uses by default.

Links are (i, j) pairs: source word i, target word j, 0-based. No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence

Links = frozenset[tuple[int, int]]
_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def grow_diag_final_and(forward: Links, backward: Links) -> Links:
    """grow-diag-final-and of a source->target and a target->source alignment (both given
    as (source i, target j) links), as in Moses' ``symal`` and fast_align's ``atools``:

    1. start from the intersection;
    2. grow-diag: repeatedly add a union link that neighbours (8 directions) a current
       link when its source word or its target word is still unaligned, until none is added;
    3. final-and: add the remaining links of the forward, then of the backward alignment
       whose source word and target word are both unaligned.
    """
    union = forward | backward
    links = set(forward & backward)
    src_done = {i for i, _ in links}
    tgt_done = {j for _, j in links}
    grew = True
    while grew:
        grew = False
        for i, j in sorted(links):
            for di, dj in _NEIGHBOURS:
                p = (i + di, j + dj)
                if p in union and p not in links and (p[0] not in src_done or p[1] not in tgt_done):
                    links.add(p)
                    src_done.add(p[0])
                    tgt_done.add(p[1])
                    grew = True
    for directional in (forward, backward):
        for i, j in sorted(directional):
            if i not in src_done and j not in tgt_done:
                links.add((i, j))
                src_done.add(i)
                tgt_done.add(j)
    return frozenset(links)


def intersection(forward: Links, backward: Links) -> Links:
    """Links both directions agree on (high precision, low recall)."""
    return forward & backward


def tokens_to_words(
    links: Links,
    src_word_of: Sequence[int],
    tgt_word_of: Sequence[int],
    src_split: Sequence[bool],
    tgt_split: Sequence[bool],
) -> Links:
    """Token links -> whitespace-word links. ``*_word_of[t]`` is token t's word; ``*_split[t]``
    is True for a punctuation token split off a word that has letters or digits too: its
    links are dropped (otherwise "Fluss." - "river." would also link through the two
    full stops whatever the words), so such punctuation is aligned only through its word.
    A word linked through several of its tokens gets one link."""
    return frozenset(
        (src_word_of[i], tgt_word_of[j]) for i, j in links if not src_split[i] and not tgt_split[j]
    )
