"""The study report's attention heatmaps: each attention model's weights on chosen and
sampled test sentences, and on joined long sentences beside every model's output (a model
that keeps its alignment moves down the diagonal across the caption boundaries)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from nmt.config.schema import StudyConfig
from nmt.evaluation.plots import plot_attention
from nmt.inference.translate import Decoding
from nmt.inference.translator import Translator
from nmt.model.checkpoint import Loaded
from nmt.study.decode import TestSet, decode
from nmt.study.plan import PlannedRun


def heatmap_section(
    study: StudyConfig,
    runs: list[PlannedRun],
    models: dict[str, Loaded | None],
    first: TestSet,
    out: Path,
    decodings: dict[str, Decoding],
) -> list[str]:
    """Draw attention for the chosen and sampled sentences; returns Markdown lines."""
    candidates = [s for s in first.sources if 8 <= len(s.split()) <= 20]
    sampled = random.Random(study.bootstrap_seed).sample(
        candidates, min(study.sampled_heatmaps, len(candidates))
    )
    lines = []
    for i, sentence in enumerate([*study.heatmap_sentences, *sampled]):
        for run in runs:
            loaded = models[run.label]
            if run.attention == "none" or loaded is None:  # no attention, or no checkpoint
                continue
            tr = Translator.from_loaded(loaded, decoding=decodings[run.label]).translate(
                [sentence]
            )[0]
            if tr.attention is None:
                continue
            name = f"attention_{i + 1}_{run.label}.png"
            plot_attention(
                tr.src_pieces,
                tr.tgt_pieces,
                tr.attention,
                out / name,
                f"{run.label}: {tr.text[:60]}",
            )
            lines.append(
                f"**{run.label}**, source: {sentence}  \nhypothesis: {tr.text}\n\n"
                f"![attention {run.label} {i + 1}]({name})\n"
            )
    archived = [r.label for r in runs if r.attention != "none" and models[r.label] is None]
    if archived:  # their checkpoints are gone, so their attention cannot be drawn again
        lines.append(
            f"No heatmaps of {', '.join(archived)}: reported from the study's "
            "archive, which keeps translations and records but no checkpoint "
            "(attention weights need the model).\n"
        )
    return lines


def long_heatmap_section(
    study: StudyConfig,
    runs: list[PlannedRun],
    models: dict[str, Loaded | None],
    joined: TestSet | None,
    out: Path,
    decodings: dict[str, Decoding],
    log: Callable[[str], None],
    digests: dict[str, str],
) -> list[str]:
    """Attention on joined test sentences of ``long_heatmap_words`` source words, one
    heatmap per attention model, with every model's output (the fixed-vector model's too)
    and the reference beside it; returns Markdown lines."""
    if joined is None or study.long_heatmaps == 0:
        return []
    lo, hi = study.long_heatmap_words
    candidates = [i for i, s in enumerate(joined.sources) if lo <= len(s.split()) <= hi]
    chosen = sorted(
        random.Random(study.bootstrap_seed).sample(
            candidates, min(study.long_heatmaps, len(candidates))
        )
    )
    lines = [
        "## Alignment on long input\n",
        f"Joined test sentences of {lo}-{hi} source words (chosen with seed "
        f"{study.bootstrap_seed}); each caption boundary is where one caption's final "
        "period is followed by the next caption. A model that keeps its alignment "
        "moves down the diagonal across the boundaries; one that loses it smears or "
        "stops.\n",
    ]
    for n, i in enumerate(chosen, 1):
        sentence = joined.sources[i]
        lines += [
            f"### Long sentence {n} ({len(sentence.split())} source words)\n",
            f"source: {sentence}  \nreference: {joined.references[i]}\n",
        ]
        for run in runs:
            loaded = models[run.label]
            if loaded is None:  # archived: its output from its archived translations
                text = decode(run, None, joined, decodings[run.label], log, digests[run.label])[i]
                lines.append(
                    f"- **{run.label}** ({len(text.split())} words): {text}"
                    + (
                        ""
                        if run.attention == "none"
                        else " (archived run: no checkpoint, no attention drawn)"
                    )
                )
                continue
            tr = Translator.from_loaded(loaded, decoding=decodings[run.label]).translate(
                [sentence]
            )[0]
            lines.append(f"- **{run.label}** ({len(tr.text.split())} words): {tr.text}")
            if tr.attention is not None:
                name = f"long_attention_{n}_{run.label}.png"
                plot_attention(
                    tr.src_pieces,
                    tr.tgt_pieces,
                    tr.attention,
                    out / name,
                    f"{run.label}, {len(sentence.split())}-word joined source",
                )
                lines.append(f"\n  ![attention {run.label} on long sentence {n}]({name})\n")
        lines.append("")
    return lines
