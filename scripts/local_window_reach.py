"""How many reference alignment links a ``local_m`` window can reach (issue 49).

``local_m`` (Luong et al. 2015, sec. 3.2) attends only to the source pieces
``[t - D, t + D]`` around the target position ``t``. Where source and target differ in
length, the aligned source piece drifts away from ``t`` along the sentence; once it is more
than D pieces away, no weight can fall on it. This script counts, for a test set read with
a checkpoint's own vocabularies, the reference links (the statistical aligner's,
scripts/align_multi30k.py) that lie outside the window at every piece of the target word,
and the distribution of the offset ``j - t`` (first source piece of the word minus first
target piece), on single captions and joined ones:

    python scripts/local_window_reach.py runs/deen_conv_local_m/best.pt [--join 4]

The count reads no weights: it depends only on the pieces, the links and D (the
checkpoint's ``model.local_window`` unless ``--window`` is given). With ``--weights`` it
also reads the checkpoint's attention by teacher forcing the reference (as ``nmt heads``)
and gives the share of target words whose most attended source word is a reference-linked
one, by the offset of their nearest reference link: whether a model aligns worse where
the aligned word is far from t. Any attention type works, so a global model is the control.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nmt.analysis.heads_alignment import (  # noqa: E402
    forced_weights,
    head_links,
    load_reference,
    reference_path,
)
from nmt.data.corpus import DataError, read_split  # noqa: E402
from nmt.data.longsets import join_consecutive  # noqa: E402
from nmt.evaluation.alignment import AlignmentError, piece_words  # noqa: E402
from nmt.model.checkpoint import CheckpointError, load_checkpoint  # noqa: E402


def word_positions(pieces: list[str]) -> list[list[int]]:
    """The 0-based piece positions of each whitespace word of ``pieces``."""
    out: list[list[int]] = []
    for pos, w in enumerate(piece_words(pieces)):
        if w == len(out):
            out.append([])
        out[w].append(pos)
    return out


def reach(
    links: frozenset[tuple[int, int]], src: list[list[int]], tgt: list[list[int]], window: int
) -> tuple[int, list[int]]:
    """The links (source word i, target word j) out of reach (no target piece of word j
    within ``window`` pieces of a source piece of word i) and each link's offset
    ``src[i][0] - tgt[j][0]`` in pieces; ``src``/``tgt``: :func:`word_positions`. Raises
    IndexError for a link past the words given."""
    out, offsets = 0, []
    for i, j in links:
        near = min(abs(s - t) for s in src[i] for t in tgt[j])
        out += near > window
        offsets.append(src[i][0] - tgt[j][0])
    return out, offsets


BUCKETS = ((0, 2), (3, 5), (6, 10), (11, 10**6))


def aligned_by_offset(m, src: list[str], tgt: list[str], ref: list) -> list[tuple[int, int]]:
    """(aligned, counted) target words per :data:`BUCKETS` of |offset| (pieces) of the
    nearest reference link, the model's link being its most attended source word (head
    mean), read by teacher forcing the references (``m``: a loaded checkpoint; ``ref``: one
    alignment per line of ``src``). Target words without a reference link are not counted.
    Raises nothing beyond what the model's forward pass raises."""
    weights = forced_weights(m.model, m.src_vocab, m.tgt_vocab, src, tgt)
    tally = [[0, 0] for _ in BUCKETS]
    for n, (w, sp, tp) in weights.items():
        own = dict(head_links(w, sp, tp))
        links = own.get("mean", own["1"])
        sw, tw = word_positions(sp[:-1]), word_positions(tp[:-1])
        linked: dict[int, set[int]] = {}
        for i, j in ref[n]:
            linked.setdefault(j, set()).add(i)
        for i, j in links:
            if j not in linked:
                continue
            off = min(abs(sw[r][0] - tw[j][0]) for r in linked[j])
            b = next(k for k, (lo, hi) in enumerate(BUCKETS) if lo <= off <= hi)
            tally[b][0] += i in linked[j]
            tally[b][1] += 1
    return [(a, c) for a, c in tally]  # tuples, not the mutable tallies


def read_set(a: argparse.Namespace):
    """The checkpoint, the (joined) sources and references, their reference links, and
    how many captions the join left over.

    Raises:
        CheckpointError, DataError, AlignmentError, OSError: what cannot be read (named);
        ValueError: a ``_joined`` split, or ``--join`` larger than the split.
    """
    if a.split.endswith("_joined"):
        raise ValueError(
            f"--split {a.split}: give the plain split and --join K (the reference alignment "
            "is per caption; joining it is this script's work)"
        )
    m = load_checkpoint(a.checkpoint, "cpu")
    d = m.cfg.data
    if a.data_path:
        d = dataclasses.replace(d, path=a.data_path)
    pairs = read_split(d, a.split)
    src, tgt = [p.src for p in pairs], [p.tgt for p in pairs]
    if a.join > len(src):
        raise ValueError(f"--join {a.join}: {a.split} has only {len(src)} captions")
    path = reference_path(a.alignments, a.split, d.src_lang, d.tgt_lang)
    ref = load_reference(path, src, tgt, a.join if a.join > 1 else None)
    left = len(src) % a.join
    if a.join > 1:
        joined = join_consecutive(src, tgt, a.join)
        src, tgt = joined.sources, joined.references
    return m, src, tgt, ref, left


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", type=Path, help="a checkpoint (.pt) or an exported model folder")
    ap.add_argument("--split", default="test_2016_flickr", help="a plain test split")
    ap.add_argument("--join", type=int, default=1, help="captions joined per line (1: none)")
    ap.add_argument("--window", type=int, help="D (default: the checkpoint's local_window)")
    ap.add_argument("--data-path", help="the corpus folder (default: the checkpoint's)")
    ap.add_argument(
        "--alignments",
        type=Path,
        default=REPO / "data/alignments",
        help="the folder of scripts/align_multi30k.py's {split}.{src}-{tgt}.gdfa files "
        "(default: data/alignments of this repository, which is not in git)",
    )
    ap.add_argument("--weights", action="store_true", help="also the aligned share by offset")
    a = ap.parse_args()
    if a.join < 1:
        ap.error(f"--join must be at least 1, got {a.join}")
    if a.window is not None and a.window < 0:
        ap.error(f"--window must be at least 0 pieces, got {a.window}")
    try:
        m, src, tgt, ref, left = read_set(a)
    except (CheckpointError, AlignmentError, DataError, OSError, ValueError) as e:
        sys.exit(f"local_window_reach.py: error: {e}")
    window = a.window if a.window is not None else m.cfg.model.local_window
    total = outside = 0
    offsets: list[int] = []
    ratios = []
    for s, t, links in zip(src, tgt, ref, strict=True):
        sp = [m.src_vocab.id_to_piece(x) for x in m.src_vocab.encode(s)]
        tp = [m.tgt_vocab.id_to_piece(x) for x in m.tgt_vocab.encode(t)]
        n_out, offs = reach(links, word_positions(sp), word_positions(tp), window)
        total, outside = total + len(links), outside + n_out
        offsets += offs
        ratios.append(len(sp) / len(tp))
    o = np.abs(np.array(offsets))
    head = f"{a.split}, joined {a.join} at a time: {len(src)} lines"
    if left:
        head += f" (the last {left} caption(s), fewer than {a.join}, left out)"
    print(f"{head}, {total} reference links, D = {window}")
    print(f"source/target pieces per line: mean {np.mean(ratios):.2f}")
    p90 = np.percentile(o, 90)
    print(f"|offset| (pieces): mean {o.mean():.1f}, 90th percentile {p90:.0f}, max {o.max()}")
    share = f"{outside} ({outside / total:.1%})"
    print(f"links out of the window's reach (no piece pair within D): {share}")
    if a.weights:
        print(
            "target words whose most attended source word is reference-linked, by the |offset| "
            "of their nearest reference link (first pieces):"
        )
        tally = aligned_by_offset(m, src, tgt, ref)
        words = sum(n for _, n in tally)
        for (lo, hi), (k, n) in zip(BUCKETS, tally, strict=True):
            span = f"{lo}-{hi}" if hi < 10**6 else f"{lo}+"
            print(f"  {span:>5} pieces: {k / max(n, 1):.1%} of {n} ({n / words:.1%} of the words)")


if __name__ == "__main__":
    main()
