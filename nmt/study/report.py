"""Study report: decode every test set with every model, score by length, write Markdown.

BLEU/chrF by source length with bootstrap intervals, the drop from short to long sources
and the length plots, in one Markdown file with the sections of nmt/study/models.py,
training_section.py and heatmaps.py.
"""

from __future__ import annotations

import json
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
from nmt.model.checkpoint import Loaded
from nmt.study.archive import archive_records
from nmt.study.decode import (
    TestSet,
    decode,
    greedy_decoding,
    load_models,
    load_test_sets,
    report_decodings,
)
from nmt.study.heatmaps import heatmap_section, long_heatmap_section
from nmt.study.models import runs_section
from nmt.study.plan import PlannedRun, missing_reason
from nmt.study.training_section import training_data_section


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


def _missing_section(
    study: StudyConfig, runs: list[PlannedRun], missing: list[PlannedRun]
) -> list[str]:
    """The note at the top of a partial report (``--allow-missing``): which models are not
    in it yet and why, and what that leaves out."""
    if not missing:
        return []
    baseline = (
        ""
        if any(r.label == study.baseline for r in runs)
        else (
            f" The baseline `{study.baseline}` is among them, so the tables have no ΔBLEU column."
        )
    )
    return [
        "## Missing models (partial report)\n",
        f"{len(missing)} of {len(runs) + len(missing)} models of the study are not in this "
        f"report yet (`nmt study --report-only --allow-missing`); every table, plot and "
        f"interval below covers only the {len(runs)} that are.{baseline}\n",
        *[f"- {r.label} (`{r.cfg.name}`): {missing_reason(r)}" for r in missing],
        "",
    ]


def write_report(
    study: StudyConfig,
    runs: list[PlannedRun],
    log: Callable[[str], None],
    missing: list[PlannedRun] | None = None,
) -> Path:
    """Evaluate every run and write ``{report_dir}/report.md`` plus plots and results.json;
    ``missing``: the study's models left out (a partial report, listed at its top).

    Raises:
        CheckpointError, DataError: a run's ``best.pt`` or a test split cannot be read.
    """
    missing = missing or []
    out = Path(study.report_dir.format(name=study.name))
    out.mkdir(parents=True, exist_ok=True)
    models, digests = load_models(runs)
    for r in runs:
        # a shipped run's records are in its folder, in git: only its translations are
        # archived (by decode), so a later session decodes nothing again
        if r.archive is not None and r.action not in ("archived", "shipped"):
            archive_records(r.archive, r.out_dir, digests[r.label])
    test_sets = load_test_sets(study, runs[0].cfg, log)
    buckets = parse_buckets(study.buckets)
    decodings, alpha_choice = report_decodings(study, runs, models, log, digests)
    search = (
        "greedy search"
        if study.beam_size == 1
        else f"beam search, beam {study.beam_size}, GNMT length penalty with each model's "
        "alpha chosen on the validation score among " + ", ".join(f"{a:g}" for a in study.alphas)
    )
    boot = (
        f"Intervals and p-values: bootstrap resampling of the sentences, "
        f"{study.n_samples} resamples, seed {study.bootstrap_seed} (`n_samples`, "
        "`bootstrap_seed` in the study config).\n"
    )
    md = [
        f"# Length study: {study.name}\n",
        f"Decoding: {search}; fp32 matrix products"
        + ("; greedy search beside it under each test set." if study.beam_size > 1 else ".")
        + "\n",
    ]
    md += _missing_section(study, runs, missing)
    md += runs_section(study, runs, alpha_choice)
    if any(r.cfg.data.train_join_ks for r in runs):
        md += training_data_section(study, runs, models, out)
    results: dict = {
        "study": asdict(study),
        "decoding": search,
        "alpha_choice": alpha_choice,
        "missing": [r.cfg.name for r in missing],
        "test_sets": {},
    }
    dashed = [r.label for r in runs if r.cap is not None]
    headline: list[str] = []
    # a partial report may lack the baseline: no deltas then (the top of the report says so)
    baseline = study.baseline if any(r.label == study.baseline for r in runs) else None
    kw: dict[str, Any] = dict(
        baseline=baseline,
        min_bucket=study.min_bucket,
        n_samples=study.n_samples,
        seed=study.bootstrap_seed,
    )
    for ts in test_sets:
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
            dashed=dashed,
        )
        sig = score(systems[runs[0].label], ts.references, ts.sources, ((1, None),))
        drops = _drops(study, systems, ts)
        md += [
            f"## {ts.name}\n",
            f"{len(ts.sources)} sentences; {ts.note}.\n",
            f"BLEU signature: `{sig.signature}`  \nchrF signature: `{sig.chrf_signature}`\n",
            boot,
            "Whole set:\n",
            format_markdown(overall),
            "\nBy source length (words):\n",
            format_markdown(rows),
            "",
            f"![BLEU by source length]({plot})\n",
        ]
        md += _figure2(study, runs, rows, ts, out)
        md += [
            f"Where BLEU falls (first to last bucket with at least {study.min_bucket} sentences):\n"
        ]
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
            table = _drop_table(study, drops)
            md += table
            if ts.name.endswith("_joined") and not headline:
                headline = table
        if study.beam_size > 1:
            md_g, record["greedy"] = _greedy_section(
                study, runs, models, ts, log, digests, baseline
            )
            md += md_g
        results["test_sets"][ts.name] = record
    if headline:
        i = md.index("## Models\n")
        md[i:i] = [
            f"## Headline: BLEU lost from short to long sources ({search}, joined test set)\n",
            *headline,
        ]
    md += [
        "## Attention heatmaps\n",
        "Rows: target pieces; columns: source pieces; white = weight 1.\n",
    ]
    md += heatmap_section(study, runs, models, test_sets[0], out, decodings, digests)
    joined = next((t for t in test_sets if t.name.endswith("_joined")), None)
    md += long_heatmap_section(study, runs, models, joined, out, decodings, log, digests)
    md += [_DEFINITIONS.format(n_samples=study.n_samples, seed=study.bootstrap_seed, search=search)]
    (out / "report.md").write_text("\n".join(md), encoding="utf-8")
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    log(f"wrote {out / 'report.md'}")
    return out / "report.md"


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
    ] + (_drop_table(study, drops) if drops else [])
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


def _drop_table(study: StudyConfig, drops: list[dict]) -> list[str]:
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


_DEFINITIONS = """## How to read the numbers

- BLEU and chrF are sacreBLEU corpus scores (0-100) on detokenized, cased text; buckets
  count whitespace words of the source sentence; decoding: {search}.
- `[low, high]`: 95% percentile interval from bootstrap resampling of the sentences of
  the bucket: {n_samples} resamples, seed {seed}.
- `hyp/ref length`: hypothesis length over reference length (BLEU's 13a tokens, summed
  over the bucket); `BP`: BLEU's brevity penalty, exp(1 − 1/ratio) below ratio 1, else 1.
  BLEU is the brevity penalty times the n-gram precisions, so a low BLEU with BP near 1 is
  wrong content, and a low BLEU with a low BP is (at least partly) output that is too short.
- `hyp > 1.5× ref`: the share of sentences whose hypothesis has more than 1.5 times the
  words of its reference, the signature of a decoder caught in a repetition loop; a
  bucket's length ratio can look normal while a part of its sentences loop and another
  part stop early.
- `ΔBLEU vs none (p)`: paired bootstrap (Koehn 2004) on the same resamples; p is the
  fraction of resamples in which the model is *not* better than the fixed-vector model,
  so p < 0.05 means better with 95% confidence.
- `(n<30)`: too few sentences in the bucket to trust its score; shown, not hidden.
"""
