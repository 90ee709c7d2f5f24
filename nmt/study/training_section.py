"""The study report's Training data section: what each training-length cap trains on
(pairs per joined k, words, target pieces of one epoch) and a histogram of the pairs by
source length."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from nmt.config.buckets import parse_buckets
from nmt.config.schema import DataConfig, StudyConfig
from nmt.data.training_data import training_pairs
from nmt.evaluation.metrics import bucket_label
from nmt.evaluation.plots import plot_length_histogram
from nmt.model.checkpoint import Loaded
from nmt.study.plan import PlannedRun


def _intro(d0: DataConfig) -> list[str]:
    """The section's heading, its paragraph on how the training and validation data of
    ``d0`` (the first run's data config) are built, and the header of the per-cap table:
    one ``k=`` column per joined k of ``d0.train_join_ks``, k=1 included."""
    return [
        "## Training data\n",
        f"Split `{d0.train_split}`, plus joined pairs for k = "
        f"{', '.join(map(str, d0.train_join_ks)) or '(none)'} consecutive pairs "
        f"(at most {d0.train_join_per_k or 'all'} per k, evenly spaced through the split); "
        "pairs over the cap (words, either side) are dropped. Every model with the same "
        "cap trains on exactly these pairs. Validation: "
        f"`{d0.valid_split}`"
        + (
            f" and `{d0.valid_split}` joined k = "
            f"{', '.join(map(str, d0.valid_join_ks))} at a time; the "
            "best checkpoint maximises the mean of the two BLEU scores"
            if d0.valid_join_ks
            else ""
        )
        + ".\n",
        "| cap (words) | models | pairs | "
        + " | ".join(f"k={k}" for k in (1, *d0.train_join_ks))
        + " | source words | target words | target pieces + EOS per epoch |",
        "|---|---|---:|" + "---:|" * (len(d0.train_join_ks) + 1) + "---:|---:|---:|",
    ]


def training_data_section(
    study: StudyConfig, runs: list[PlannedRun], models: dict[str, Loaded | None], out: Path
) -> list[str]:
    """What each training-length cap trains on: pairs per k, a length histogram and the
    tokens of one epoch (the same corpus for every model with the same cap)."""
    edges = parse_buckets(study.buckets)
    by_cap: dict[int | None, PlannedRun] = {}
    for r in runs:
        if models[r.label] is not None or r.cfg.data.max_train_words not in by_cap:
            by_cap.setdefault(r.cfg.data.max_train_words, r)  # one with a vocabulary
    d0 = runs[0].cfg.data
    md = _intro(d0)
    hist: dict[str, list[int]] = {}
    for cap, run in sorted(by_cap.items(), key=lambda kv: kv[0] or 10**9):
        _raw, kept, _stats = training_pairs(run.cfg.data)
        ks = Counter(
            1 + int(p.origin.rsplit("(+", 1)[1].split()[0]) if "joined)" in p.origin else 1
            for p in kept
        )
        loaded = models[run.label]
        pieces = (
            "n/a (no checkpoint)"
            if loaded is None
            else f"{sum(len(loaded.tgt_vocab.encode(p.tgt)) + 1 for p in kept):,}"
        )
        names = ", ".join(r.label for r in runs if r.cfg.data.max_train_words == cap)
        md.append(
            f"| {cap} | {names} | {len(kept):,} | "
            + " | ".join(f"{ks.get(k, 0):,}" for k in (1, *d0.train_join_ks))
            + f" | {sum(len(p.src.split()) for p in kept):,} | "
            f"{sum(len(p.tgt.split()) for p in kept):,} | {pieces} |"
        )
        lengths = Counter(len(p.src.split()) for p in kept)
        hist[f"cap {cap}"] = [
            sum(c for n, c in lengths.items() if n >= lo and (hi is None or n <= hi))
            for lo, hi in edges
        ]
    plot_length_histogram(
        hist,
        [bucket_label(lo, hi) for lo, hi in edges],
        out / "training_lengths.png",
        f"{study.name}: training pairs by source length",
    )
    md += [
        "",
        "Training pairs by source length (words):\n",
        "| cap | " + " | ".join(bucket_label(lo, hi) for lo, hi in edges) + " |",
        "|---|" + "---:|" * len(edges),
    ]
    md += [
        f"| {name} | " + " | ".join(f"{c:,}" for c in counts) + " |"
        for name, counts in hist.items()
    ]
    md += ["", "![training pairs by source length](training_lengths.png)\n"]
    return md
