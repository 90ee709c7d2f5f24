"""``nmt evaluate``: decode a test set with one or more checkpoints and score them side by side.

Corpus BLEU, chrF, BLEU by source length, the papers' BLEU (lowercased, Moses-tokenized)
and the sacreBLEU signatures; the decoding and scoring are nmt/inference/scoring.py, the
metrics nmt/evaluation/metrics.py. With ``--ensemble`` the checkpoints are also decoded as
one ensemble (nmt/inference/ensemble.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nmt.evaluation.metrics import format_table
from nmt.inference.scoring import Scored, score_checkpoints


@dataclass
class Report:
    """What ``nmt evaluate`` prints (``table``) and writes with ``--json`` (``json``)."""

    table: str
    json: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)  # printed on stderr (e.g. cut input)


def _table(systems: list[Scored], ensemble: list[Path] | None) -> Iterator[str]:
    """One side-by-side table per test set and language pair: checkpoints of different
    pairs are scored on different sources and references, so their BLEU, length buckets
    and signatures would otherwise sit in one table under the first system's header."""
    groups = [
        (s.label, s.record["src_lang"], s.record["tgt_lang"], len(s.references)) for s in systems
    ]
    for group in dict.fromkeys(groups):
        part = [s for s, g in zip(systems, groups, strict=True) if g == group]
        label, src_lang, tgt_lang, size = group
        pair = f", {src_lang}→{tgt_lang}" if len(set(groups)) > 1 else ""
        text = f"test set: {label} ({size} sentences{pair})\n"
        text += "".join(f"decoding of {s.name}: {s.record['search']}\n" for s in part)
        if ensemble and any("ensemble" in s.record for s in part):
            text += (
                f"ensemble of {len(ensemble)}: {', '.join(map(str, ensemble))} "
                "(mean of the models' probabilities at each step)\n"
            )
        yield text + format_table([s.name for s in part], [s.scores for s in part])


def _examples(s: Scored, n: int) -> list[str]:
    """``n`` source, reference and hypothesis triples spread over the test set."""
    lines = []
    for i in range(min(n, len(s.sources))):
        k = i * max(len(s.sources) // max(n, 1), 1)
        lines += [
            f"[{s.name}] SRC: {s.sources[k]}",
            f"[{s.name}] REF: {s.references[k]}",
            f"[{s.name}] HYP: {s.hypotheses[k]}",
            "",
        ]
    return lines


def evaluate_checkpoints(
    checkpoints: list[Path], *, n_examples: int = 0, ensemble: bool = False, **options: Any
) -> Report:
    """Score ``checkpoints`` (and with ``ensemble`` their ensemble) as
    :func:`nmt.inference.scoring.score_checkpoints` does with ``options`` (split, src, ref,
    buckets, batch_size, data_path, beam_size, alpha, length_penalty, device, workers,
    precision, members), and print ``n_examples`` translations of each.

    Raises:
        as :func:`nmt.inference.scoring.score_checkpoints`.
    """
    warnings: list[str] = []
    systems = score_checkpoints(checkpoints, ensemble=ensemble, warn=warnings.append, **options)
    table = "\n\n".join(_table(systems, checkpoints if ensemble else None))
    examples = [line for s in systems for line in _examples(s, n_examples)]
    if examples:
        table += "\n\nexample translations:\n" + "\n".join(examples)
    return Report(table, [s.record for s in systems], warnings)
