"""The study report's attention heatmaps: each attention model's weights on chosen and
sampled test sentences, and on joined long sentences beside every model's output (a model
that keeps its alignment moves down the diagonal across the caption boundaries).

A heatmap needs the model, so when the study keeps an archive (nmt/study/archive.py) each
one drawn is also kept there, ``{archive}/heatmaps/{file}.png`` with ``{file}.json`` (its
key: the checkpoint's SHA-256, the source sentence, the decoding; and the hypothesis), and
a run reported from its archive, without a checkpoint, shows the archived heatmap when its
key matches what the report asks for.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nmt.config.schema import StudyConfig
from nmt.evaluation.plots import plot_attention
from nmt.inference.translate import Decoding
from nmt.inference.translator import Translator
from nmt.model.checkpoint import Loaded
from nmt.ops.files import write_atomic
from nmt.study.decode import TestSet, decode
from nmt.study.plan import PlannedRun

HEATMAPS = "heatmaps"  # the archive's folder of heatmaps


def _key(sha256: str, sentence: str, decoding: Decoding) -> dict[str, Any]:
    """What an archived heatmap must have been drawn from to stand for this one."""
    return {
        "checkpoint_sha256": sha256,
        "source": sentence,
        "decoding": dataclasses.asdict(decoding),
    }


def _keep(run: PlannedRun, png: Path, key: dict[str, Any], text: str) -> None:
    """Copy a heatmap just drawn into the run's archive with its key and hypothesis (no-op
    without an archive, and for a shipped run: its folder, in git, draws it again).
    Raises OSError."""
    if run.archive is None or run.action == "shipped":
        return
    where = run.archive / HEATMAPS
    where.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(png, where / png.name)
    write_atomic(
        where / f"{png.stem}.json", json.dumps({"key": key, "hypothesis": text}, indent=1) + "\n"
    )


def _archived(run: PlannedRun, name: str, key: dict[str, Any], out: Path) -> str | None:
    """The hypothesis of the archived heatmap ``name`` of ``run``, copied into ``out``,
    when one was kept under exactly ``key``; else None (nothing is copied)."""
    if run.archive is None:
        return None
    where = run.archive / HEATMAPS
    try:
        record = json.loads((where / f"{Path(name).stem}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("key") != key:
        return None
    if not (where / name).is_file():
        return None
    shutil.copyfile(where / name, out / name)
    return str(record.get("hypothesis", ""))


def heatmap_section(
    study: StudyConfig,
    runs: list[PlannedRun],
    models: dict[str, Loaded | None],
    first: TestSet,
    out: Path,
    decodings: dict[str, Decoding],
    digests: dict[str, str],
) -> list[str]:
    """Draw attention for the chosen and sampled sentences (from the archive for a run
    without a checkpoint, where kept); returns Markdown lines."""
    candidates = [s for s in first.sources if 8 <= len(s.split()) <= 20]
    sampled = random.Random(study.bootstrap_seed).sample(
        candidates, min(study.sampled_heatmaps, len(candidates))
    )
    lines, lacking = [], []
    for i, sentence in enumerate([*study.heatmap_sentences, *sampled]):
        for run in runs:
            loaded = models[run.label]
            if run.attention == "none":
                continue
            name = f"attention_{i + 1}_{run.label}.png"
            key = _key(digests[run.label], sentence, decodings[run.label])
            if loaded is None:  # no checkpoint: the heatmap kept when it had one
                text = _archived(run, name, key, out)
                if text is None:
                    lacking.append(run.label)
                    continue
                note = " (archived heatmap, drawn when the run still had its checkpoint)"
            else:
                tr = Translator.from_loaded(loaded, decoding=decodings[run.label]).translate(
                    [sentence]
                )[0]
                if tr.attention is None:
                    continue
                plot_attention(
                    tr.src_pieces,
                    tr.tgt_pieces,
                    tr.attention,
                    out / name,
                    f"{run.label}: {tr.text[:60]}",
                )
                _keep(run, out / name, key, tr.text)
                text, note = tr.text, ""
            lines.append(
                f"**{run.label}**, source: {sentence}  \nhypothesis: {text}{note}\n\n"
                f"![attention {run.label} {i + 1}]({name})\n"
            )
    lacking = list(dict.fromkeys(lacking))
    if lacking:  # their checkpoints are gone, so their attention cannot be drawn again
        lines.append(
            f"No heatmaps of {', '.join(lacking)}: reported from the study's "
            "archive, which keeps translations and records but no checkpoint "
            "(attention weights need the model), and no heatmap of these sentences "
            "was archived with it.\n"
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
            name = f"long_attention_{n}_{run.label}.png"
            key = _key(digests[run.label], sentence, decodings[run.label])
            if loaded is None:  # archived: its output from its archived translations
                text = decode(run, None, joined, decodings[run.label], log, digests[run.label])[i]
                lines.append(f"- **{run.label}** ({len(text.split())} words): {text}")
                if run.attention == "none":
                    continue
                if _archived(run, name, key, out) is None:
                    lines[-1] += " (archived run: no checkpoint, no attention drawn)"
                else:
                    lines.append(
                        f"\n  ![attention {run.label} on long sentence {n}]({name}) "
                        "(archived heatmap, drawn when the run still had its checkpoint)\n"
                    )
                continue
            tr = Translator.from_loaded(loaded, decoding=decodings[run.label]).translate(
                [sentence]
            )[0]
            lines.append(f"- **{run.label}** ({len(tr.text.split())} words): {tr.text}")
            if tr.attention is not None:
                plot_attention(
                    tr.src_pieces,
                    tr.tgt_pieces,
                    tr.attention,
                    out / name,
                    f"{run.label}, {len(sentence.split())}-word joined source",
                )
                _keep(run, out / name, key, tr.text)
                lines.append(f"\n  ![attention {run.label} on long sentence {n}]({name})\n")
        lines.append("")
    return lines
