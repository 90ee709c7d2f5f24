"""The study report's section on one test set: every model's BLEU and chrF on the whole
set and by source length with bootstrap intervals, the length plot (and the paper's Figure
2), where BLEU falls, the drop from short to long sources, and with a beam the greedy
search beside it (:func:`length_section`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from nmt.config.buckets import parse_buckets
from nmt.config.schema import StudyConfig
from nmt.data.digest import lines_sha256
from nmt.evaluation.bootstrap import bucket_drop
from nmt.evaluation.length_table import BucketRow, format_markdown, study_table
from nmt.evaluation.metrics import score
from nmt.evaluation.plots import curves_from_rows, plot_bleu_by_length
from nmt.inference.translate import Decoding
from nmt.model.checkpoint import Loaded
from nmt.study.decode import TestSet, decode, greedy_decoding
from nmt.study.plan import PlannedRun


def _falloff(rows: list[BucketRow], system: str) -> str:
    """BLEU in the first and the last well-filled bucket, and the drop between them."""
    mine = [r for r in rows if r.system == system and r.bleu is not None and not r.too_few]
    if len(mine) < 2:
        return f"{system}: fewer than two buckets with enough sentences"
    first, last = mine[0], mine[-1]
    assert first.bleu is not None and last.bleu is not None  # filtered above
    drop = first.bleu.score - last.bleu.score
    rel = 100 * drop / first.bleu.score if first.bleu.score else 0.0
    return (
        f"{system}: {first.bleu.score:.1f} BLEU at {first.label} words -> "
        f"{last.bleu.score:.1f} at {last.label} words ({-drop:+.1f} points, {-rel:+.0f}%)"
    )


def _figure2(
    study: StudyConfig, runs: list[PlannedRun], rows: list[BucketRow], ts: TestSet, out: Path
) -> list[str]:
    """Bahdanau et al. (2015), Figure 2: BLEU against source length for the models of the
    training-length axis (``cap_attentions`` at each cap and at the main cap), 95% bands."""
    axis = [
        r.label
        for r in runs
        if r.attention in study.cap_attentions
        and r.heads is None
        and r.seed is None
        and (r.cap is not None or study.extra_caps)
    ]
    if not study.extra_caps or len(axis) < 2:
        return []
    name = f"figure2_{ts.name}.png"
    main_cap = runs[0].cfg.data.max_train_words
    plot_bleu_by_length(
        curves_from_rows([r for r in rows if r.system in axis]),
        out / name,
        f"{ts.name}: BLEU by source length\n"  # one line is cut at 10 pt
        f"-{'/-'.join(map(str, study.extra_caps))} (dashed) and -{main_cap} "
        "models, 95% bootstrap CI",
        dashed=[r.label for r in runs if r.cap is not None],
    )
    return [
        f"The paper's Figure 2 on this set (models `-N` trained on pairs of at most N "
        f"words; the others on at most {main_cap}):\n",
        f"![Figure 2: {ts.name}]({name})\n",
    ]


def length_section(
    study: StudyConfig,
    runs: list[PlannedRun],
    ts: TestSet,
    *,
    models: dict[str, Loaded | None],
    decodings: dict[str, Decoding],
    digests: dict[str, str],
    buckets: tuple[tuple[int, int | None], ...],
    log: Callable[[str], None],
    out: Path,
) -> tuple[list[str], dict[str, Any]]:
    """The report's section on test set ``ts``: every run decoded with its entry of
    ``decodings`` (:func:`nmt.study.decode.decode`, with ``models``, ``digests`` and
    ``log``), scored on the whole set and by source length in ``buckets``, the length plot
    (and Figure 2) written under ``out``, the falloff, the drop table and, with a beam, the
    greedy search beside it. Returns the Markdown lines and the set's record for
    results.json (its ``drops`` empty when a drop bucket has no sentence). Raises
    CheckpointError, DataError as :func:`nmt.study.decode.decode`."""
    # a partial report may lack the baseline: no deltas then (the top of the report says so)
    baseline = study.baseline if any(r.label == study.baseline for r in runs) else None
    kw: dict[str, Any] = dict(
        baseline=baseline,
        min_bucket=study.min_bucket,
        n_samples=study.n_samples,
        seed=study.bootstrap_seed,
    )
    systems = {
        r.label: decode(r, models[r.label], ts, decodings[r.label], log, digests[r.label])
        for r in runs
    }
    overall = study_table(systems, ts.references, ts.sources, ((1, None),), **kw)
    rows = study_table(systems, ts.references, ts.sources, buckets, **kw)
    plot = f"bleu_by_length_{ts.name}.png"
    plot_bleu_by_length(
        curves_from_rows(rows),
        out / plot,
        f"{study.name}: {ts.name} (95% bootstrap CI)",
        dashed=[r.label for r in runs if r.cap is not None],
    )
    sig = score(systems[runs[0].label], ts.references, ts.sources, ((1, None),))
    drops = _drops(study, systems, ts)
    md = [
        f"## {ts.name}\n",
        f"{len(ts.sources)} sentences; {ts.note}.\n",
        f"BLEU signature: `{sig.signature}`  \nchrF signature: `{sig.chrf_signature}`\n",
        f"Intervals and p-values: bootstrap resampling of the sentences, "
        f"{study.n_samples} resamples, seed {study.bootstrap_seed} (`n_samples`, "
        "`bootstrap_seed` in the study config).\n",
        "Whole set:\n",
        format_markdown(overall),
        "\nBy source length (words):\n",
        format_markdown(rows),
        "",
        f"![BLEU by source length]({plot})\n",
    ]
    md += _figure2(study, runs, rows, ts, out)
    md += [f"Where BLEU falls (first to last bucket with at least {study.min_bucket} sentences):\n"]
    md += [f"- {_falloff(rows, r.label)}" for r in runs] + [""]
    record: dict[str, Any] = {
        "overall": [asdict(r) for r in overall],
        "buckets": [asdict(r) for r in rows],
        "drops": drops,
        "signature": sig.signature,
        "chrf_signature": sig.chrf_signature,
        "sources_sha256": lines_sha256(ts.sources),
    }
    if drops:
        md += drop_table(study, drops)
    if study.beam_size > 1:
        md_g, record["greedy"] = _greedy_section(study, runs, models, ts, log, digests, baseline)
        md += md_g
    return md, record


def _greedy_section(
    study: StudyConfig,
    runs: list[PlannedRun],
    models: dict[str, Loaded | None],
    ts: TestSet,
    log: Callable[[str], None],
    digests: dict[str, str],
    baseline: str | None,
) -> tuple[list[str], dict]:
    """The same set decoded greedily: BLEU by length and the drop table (deltas against
    ``baseline``, none when it is None)."""
    systems = {
        r.label: decode(r, models[r.label], ts, greedy_decoding(r.cfg), log, digests[r.label])
        for r in runs
    }
    rows = study_table(
        systems,
        ts.references,
        ts.sources,
        parse_buckets(study.buckets),
        baseline=baseline,
        min_bucket=study.min_bucket,
        n_samples=study.n_samples,
        seed=study.bootstrap_seed,
    )
    drops = _drops(study, systems, ts)
    md = [
        f"Greedy search on {ts.name}, beside the beam (by source length):\n",
        format_markdown(rows),
        "",
    ] + (drop_table(study, drops) if drops else [])
    return md, {"buckets": [asdict(r) for r in rows], "drops": drops}


def _drops(study: StudyConfig, systems: dict[str, list[str]], ts: TestSet) -> list[dict]:
    """Per system: BLEU on the first and second of ``study.drop_buckets`` and the drop
    between them with its bootstrap interval (empty when a bucket has no sentence)."""
    (a, b) = parse_buckets(study.drop_buckets)
    out = []
    for name, hyps in systems.items():
        d = bucket_drop(
            hyps, ts.references, ts.sources, a, b, study.n_samples, study.bootstrap_seed
        )
        if d is None:
            return []
        first = study_table(
            {name: hyps},
            ts.references,
            ts.sources,
            (a, b),
            baseline=None,
            n_samples=study.n_samples,
            seed=study.bootstrap_seed,
        )
        out.append(
            {
                "system": name,
                "buckets": [r.label for r in first],
                "n": [r.n for r in first],
                "bleu": [asdict(r.bleu) if r.bleu is not None else None for r in first],
                "len_ratio": [r.len_ratio for r in first],
                "drop": asdict(d),
            }
        )
    return out


def drop_table(study: StudyConfig, drops: list[dict]) -> list[str]:
    """Markdown lines: per model, BLEU in the shortest and the longest bucket of ``drops``
    (0-100, with 95% bootstrap intervals and sentence counts), the hypothesis/reference
    length ratio there, and the drop between them with the interval of the difference
    (``study.n_samples`` resamples, seed ``study.bootstrap_seed``). ``drops`` must be
    non-empty (IndexError otherwise); every entry names the same two buckets."""
    la, lb = drops[0]["buckets"]
    lines = [
        f"BLEU at {la} against {lb} source words, per model: the drop is "
        f"BLEU({la}) − BLEU({lb}), with the 95% interval of the difference of the two "
        f"independently resampled buckets ({study.n_samples} resamples, seed "
        f"{study.bootstrap_seed}).\n",
        f"| System | BLEU {la} [95% CI] (n) | BLEU {lb} [95% CI] (n) | hyp/ref length {lb} "
        "| drop [95% CI] |",
        "|---|---|---|---:|---|",
    ]
    for d in drops:
        (x, y), (nx, ny) = d["bleu"], d["n"]
        dr = d["drop"]
        lines.append(
            f"| {d['system']} | {x['score']:.1f} [{x['low']:.1f}, {x['high']:.1f}] ({nx}) "
            f"| {y['score']:.1f} [{y['low']:.1f}, {y['high']:.1f}] ({ny}) "
            f"| {d['len_ratio'][1]:.2f} "
            f"| {dr['delta']:.1f} [{dr['low']:.1f}, {dr['high']:.1f}] |"
        )
    return lines + [""]
