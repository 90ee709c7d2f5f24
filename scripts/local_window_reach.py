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
checkpoint's ``model.local_window`` unless ``--window`` is given; a model without local
attention never used its ``local_window``, and the output says that D is the config's
default then). With ``--weights`` it
also reads the checkpoint's attention by teacher forcing the reference (as ``nmt heads``)
and gives the share of target words whose most attended source word is a reference-linked
one, by the offset of their nearest reference link: whether a model aligns worse where
the aligned word is far from t. Any attention type works, so a global model is the control;
the fixed-vector model (attention ``none``) has no weights and is refused.

``--centres`` (``local_m`` and ``local_p`` checkpoints) records the window centre p_t the
model uses at each target step while teacher forcing the reference, and compares it with
the aligned source piece: for each target word with reference links, the signed distance
from p_t (at the word's first piece) to the nearest piece of a linked source word, against
the same distance from t. ``local_p`` predicts p_t (Luong et al. 2015, eq. 9); the question
is whether its prediction is closer to the reference alignment than local_m's p_t = t.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nmt.analysis.heads_alignment import (  # noqa: E402
    forced_weights,
    head_links,
    load_reference,
    reference_path,
)
from nmt.config.schema import LOCAL_KINDS  # noqa: E402
from nmt.data.batches import Example, collate  # noqa: E402
from nmt.data.corpus import DataError, read_split  # noqa: E402
from nmt.data.longsets import join_consecutive  # noqa: E402
from nmt.data.vocab import EOS  # noqa: E402
from nmt.evaluation.alignment import AlignmentError, piece_words  # noqa: E402
from nmt.inference.translator import Translator  # noqa: E402
from nmt.model.attention import LocalAttention  # noqa: E402
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


def recorded_centres(model, src_vocab, tgt_vocab, source: str, reference: str) -> list[float]:
    """The window centres p_t (source pieces, one per target step t = 0..T-1, the step
    that predicts target piece t) that ``model``'s local attention uses while teacher
    forcing ``reference`` on ``source``; the source is encoded as ``nmt translate`` does.

    Raises:
        ValueError: the model's attention is not ``local_m`` or ``local_p``.
    """
    scorer = getattr(model.decoder, "scorer", None)
    if not isinstance(scorer, LocalAttention):
        kind = getattr(scorer, "kind", type(scorer).__name__)
        raise ValueError(
            f"--centres: the model's attention is {kind}; a window centre "
            "exists only for local_m and local_p"
        )
    seen: list[torch.Tensor] = []
    predict = scorer.centre

    def recording(query: torch.Tensor, mask: torch.Tensor, t: int) -> torch.Tensor:
        p = predict(query, mask, t)
        seen.append(p)
        return p

    src_ids = Translator(model, src_vocab, tgt_vocab).encode(source).ids
    batch = collate([Example(src_ids + [EOS], tgt_vocab.encode(reference), 0)])
    scorer.centre = recording  # type: ignore[method-assign]
    try:
        with torch.no_grad():
            model.eval().attention_weights(batch.src, batch.src_len, batch.tgt_in)
    finally:
        del scorer.centre  # the class's method again
    return [float(p[0]) for p in seen]


def centre_errors(
    centres: list[float], src: list[list[int]], tgt: list[list[int]], links
) -> list[tuple[int, float, float]]:
    """For each target word j with reference links (source word i, target word j):
    (t, e_model, e_t), with t its first target piece, e_model = p_t minus the nearest
    piece of a linked source word and e_t the same for t itself (capped at the last
    source position, as local_m does); positive: the centre is ahead of the alignment.
    ``centres``: :func:`recorded_centres`; ``src``/``tgt``: :func:`word_positions` (the
    source's end-of-sentence piece, if counted, is the position after the last word).
    Raises IndexError for a link past the words given."""
    linked: dict[int, list[int]] = {}
    for i, j in links:
        linked.setdefault(j, []).extend(src[i])
    last = max(p for w in src for p in w) + 1  # local_m's cap: the final </s> piece
    out = []
    for j, pieces in sorted(linked.items()):
        t = tgt[j][0]
        near = [c - min(pieces, key=lambda q, c=c: abs(q - c)) for c in (centres[t], min(t, last))]
        out.append((t, near[0], near[1]))
    return out


def print_centres(m, src: list[str], tgt: list[str], ref: list, window: int) -> None:
    """The ``--centres`` report: signed and absolute centre error of the model and of t,
    and the share of words whose nearest linked piece lies within D of the centre, by
    target position. Raises ValueError for a model without local attention."""
    rows = []
    for s, t, links in zip(src, tgt, ref, strict=True):
        sp = [m.src_vocab.id_to_piece(x) for x in m.src_vocab.encode(s)]
        tp = [m.tgt_vocab.id_to_piece(x) for x in m.tgt_vocab.encode(t)]
        sw, tw = word_positions(sp), word_positions(tp)
        if len(sw) != len(s.split()) or len(tw) != len(t.split()) or not links:
            continue
        p = recorded_centres(m.model, m.src_vocab, m.tgt_vocab, s, t)
        rows += centre_errors(p, sw, tw, links)
    r = np.array(rows)
    print(
        f"window centre against the nearest linked source piece, {len(r)} target words "
        "(error = centre - aligned piece; positive: ahead):"
    )
    print("  target pieces | words | model: mean error, mean |error|, within D | t: the same")
    for lo, hi in ((0, 9), (10, 19), (20, 39), (40, 10**6)):
        sel = r[(r[:, 0] >= lo) & (r[:, 0] <= hi)]
        if not len(sel):
            continue
        span = f"{lo}-{hi}" if hi < 10**6 else f"{lo}+"
        cols = [
            f"{sel[:, k].mean():+.1f}, {np.abs(sel[:, k]).mean():.1f}, "
            f"{(np.abs(sel[:, k]) <= window).mean():.1%}"
            for k in (1, 2)
        ]
        print(f"  {span:>13} | {len(sel):>5} | {cols[0]} | {cols[1]}")


def window_of(attention: str, local_window: int, given: int | None) -> tuple[int, str]:
    """D in pieces, and a line for the output when D is not the model's own window: a
    model without local attention has none, so D is then the config's
    ``model.local_window`` default, which the model never used. ``given``: ``--window``."""
    if given is not None:
        return given, ""
    if attention in LOCAL_KINDS:
        return local_window, ""
    return local_window, (
        f"(attention {attention} has no window of its own: D = {local_window} is the config's "
        "model.local_window default, unused by this model; --window D sets it)"
    )


def read_set(a: argparse.Namespace):
    """The checkpoint, the (joined) sources and references, their reference links, and
    how many captions the join left over.

    Raises:
        CheckpointError, DataError, AlignmentError, OSError: what cannot be read (named);
        ValueError: a ``_joined`` split, ``--join`` larger than the split, ``--weights``
            for a checkpoint without attention, or ``--centres`` for a checkpoint without
            local attention.
    """
    if a.split.endswith("_joined"):
        raise ValueError(
            f"--split {a.split}: give the plain split and --join K (the reference alignment "
            "is per caption; joining it is this script's work)"
        )
    m = load_checkpoint(a.checkpoint, "cpu")
    if getattr(a, "weights", False) and m.cfg.model.attention == "none":
        raise ValueError(
            f"--weights: {a.checkpoint} has attention none; attention weights exist only "
            "for a model with attention (the fixed-vector model reads one vector c)"
        )
    if getattr(a, "centres", False) and m.cfg.model.attention not in LOCAL_KINDS:
        raise ValueError(
            f"--centres: {a.checkpoint} has attention {m.cfg.model.attention}; a window "
            "centre exists only for local_m and local_p"
        )
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
    ap.add_argument(
        "--centres", action="store_true", help="also the window centre against the alignment"
    )
    a = ap.parse_args()
    if a.join < 1:
        ap.error(f"--join must be at least 1, got {a.join}")
    if a.window is not None and a.window < 0:
        ap.error(f"--window must be at least 0 pieces, got {a.window}")
    try:
        m, src, tgt, ref, left = read_set(a)
    except ValueError as e:  # an option that does not fit the checkpoint or the split
        ap.exit(2, f"local_window_reach.py: error: {e}\n")  # as argparse's, without usage
    except (CheckpointError, AlignmentError, DataError, OSError) as e:
        sys.exit(f"local_window_reach.py: error: {e}")
    window, whence = window_of(m.cfg.model.attention, m.cfg.model.local_window, a.window)
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
    if whence:
        print(whence)
    print(f"source pieces per target piece (a ratio), mean over lines: {np.mean(ratios):.2f}")
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
    if a.centres:
        print_centres(m, src, tgt, ref, window)


if __name__ == "__main__":
    main()
