"""The concrete case of issue 49, chosen by a rule rather than by eye: per-head heatmaps of
one test sentence whose heads relate to the reference alignment as the heads do over the
whole test set.

Each head's links (its most attended source word per target word, read by teacher forcing
the reference; nmt/analysis/heads_alignment.py) fall on a reference-linked source word, on
the word right after one, right before one, or elsewhere (nmt/evaluation/alignment.py:
relations). Over the test set every head has its shares of the four. The sentence shown is
the one, among those with ``--min-links`` to ``--max-links`` counted links, whose per-head
shares are nearest the test set's (the sum over heads of the L1 distance): a typical
sentence for every head at once, not the most striking one.

    python scripts/head_case.py runs/deen_conv_multihead-4h_s2/best.pt \\
        --out results/heads_deen_converged_aer/case_multihead-4h_s2

writes ``case.png`` (one panel per head over source and target words: the weights in
grey, the reference links outlined, the head's own links dotted) and ``case.json`` (the
sentence, its shares and the test set's).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
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
from nmt.evaluation.alignment import (  # noqa: E402
    RELATIONS,
    AlignmentError,
    relations,
    word_attention,
)
from nmt.model.checkpoint import CheckpointError, load_checkpoint  # noqa: E402


def typical(counts: np.ndarray, min_links: int, max_links: int) -> tuple[int, np.ndarray]:
    """The row of ``counts`` (N, heads, 4) nearest the corpus shares, and those shares
    (heads, 4). Rows are compared by the sum over heads of the L1 distance between their
    own shares and the corpus's; only rows with ``min_links``-``max_links`` links per head.

    Raises:
        ValueError: no row has that many links.
    """
    corpus = counts.sum(0) / counts.sum((0, 2))[:, None]  # (heads, 4)
    links = counts.sum(2)[:, 0]  # (N,) every head has one link per linked target word
    ok = np.flatnonzero((links >= min_links) & (links <= max_links))
    if ok.size == 0:
        raise ValueError(f"no sentence with {min_links}-{max_links} counted links")
    shares = counts[ok] / links[ok, None, None]
    dist = np.abs(shares - corpus[None]).sum((1, 2))
    return int(ok[dist.argmin()]), corpus


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--split", default="test_2016_flickr")
    ap.add_argument("--alignments", type=Path, default=REPO / "data/alignments")
    ap.add_argument("--data-path", help="the corpus folder (default: the checkpoint's)")
    ap.add_argument("--min-links", type=int, default=9)
    ap.add_argument("--max-links", type=int, default=14)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    if not 1 <= a.min_links <= a.max_links:
        ap.error(f"need 1 <= --min-links <= --max-links, got {a.min_links} and {a.max_links}")
    try:
        run(a)
    except (CheckpointError, AlignmentError, DataError, ValueError) as e:
        sys.exit(f"head_case.py: error: {e}")


def run(a: argparse.Namespace) -> None:
    """Choose the sentence and write ``case.png`` and ``case.json`` (see the module
    docstring).

    Raises:
        CheckpointError, DataError, AlignmentError: a checkpoint, corpus or reference
            alignment that cannot be used (named); ValueError: a model without attention,
            or no sentence with that many links.
    """
    m = load_checkpoint(a.checkpoint, "cpu")
    if m.cfg.model.attention == "none":
        raise ValueError(f"{a.checkpoint}: a fixed-vector model (attention none) has no heads")
    data = m.cfg.data
    if a.data_path:
        data = dataclasses.replace(data, path=a.data_path)
    pairs = read_split(data, a.split)
    src = [p.src for p in pairs]
    tgt = [p.tgt for p in pairs]
    path = reference_path(a.alignments, a.split, data.src_lang, data.tgt_lang)
    if not path.is_file():
        raise AlignmentError(
            f"{path}: no reference alignment (scripts/align_multi30k.py writes it)"
        )
    ref = load_reference(path, src, tgt, None)
    weights = forced_weights(m.model, m.src_vocab, m.tgt_vocab, src, tgt)
    kept = sorted(weights)
    heads = [n for n, _ in head_links(*weights[kept[0]]) if n != "mean"]
    counts = np.array(
        [
            [relations(links, ref[i]) for n, links in head_links(*weights[i]) if n != "mean"]
            for i in kept
        ]
    )  # (N, heads, 4)
    row, corpus = typical(counts, a.min_links, a.max_links)
    i = kept[row]
    w, sp, tp = weights[i]

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sw, tw = src[i].split(), tgt[i].split()
    own = dict(head_links(w, sp, tp))
    fig, axes = plt.subplots(
        1, len(heads), figsize=(max(3.2 * len(heads), 8.0), 0.32 * len(tw) + 2.2), squeeze=False
    )
    for k, (ax, name) in enumerate(zip(axes[0], heads, strict=True)):
        wa = word_attention(w[k].numpy().astype(np.float64), sp, tp)  # (J, I)
        ax.imshow(wa, cmap="Greys", vmin=0, vmax=1, aspect="auto")
        for s_i, t_j in ref[i]:
            ax.add_patch(
                plt.Rectangle((s_i - 0.5, t_j - 0.5), 1, 1, fill=False, ec="tab:red", lw=1.4)
            )
        for s_i, t_j in own[name]:
            ax.plot(s_i, t_j, "o", ms=3.5, color="tab:blue")
        c = counts[row, k] / counts[row, k].sum()
        ax.set_title(
            f"head {name}\n"
            + " / ".join(f"{r} {v:.0%}" for r, v in zip(RELATIONS, c, strict=True))
            + "\ntest set: "
            + " / ".join(f"{v:.0%}" for v in corpus[k]),
            fontsize=7,
        )
        ax.set_xticks(range(len(sw)), sw, rotation=90, fontsize=7)
        ax.set_yticks(range(len(tw)), tw if k == 0 else [""] * len(tw), fontsize=7)
    fig.suptitle(
        f"{a.checkpoint} on {a.split} line {i + 1} (nearest the test set's per-head shares): "
        "red boxes = reference links, blue dots = the head's links",
        fontsize=8,
    )
    fig.tight_layout()
    a.out.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out / "case.png", dpi=130)
    record = {
        "checkpoint": str(a.checkpoint),
        "split": a.split,
        "line": i + 1,
        "source": src[i],
        "reference": tgt[i],
        "reference_alignment": str(path),
        "relations": list(RELATIONS),
        "sentence_shares": (counts[row] / counts[row].sum(1, keepdims=True)).round(4).tolist(),
        "test_set_shares": corpus.round(4).tolist(),
        "heads": heads,
        "sentences_scored": len(kept),
        "rule": f"nearest (sum over heads of L1) among sentences with "
        f"{a.min_links}-{a.max_links} counted links",
        "command": " ".join(sys.argv),
    }
    (a.out / "case.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"line {i + 1}: {src[i]}\n  -> {a.out}/case.png")


if __name__ == "__main__":
    main()
