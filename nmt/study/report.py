"""Study report: decode every test set with every model, score by length, write Markdown.

BLEU/chrF by source length with bootstrap intervals, the drop from short to long sources
and the length plots, in one Markdown file with the sections of nmt/study/models.py,
training_section.py, length_section.py and heatmaps.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from nmt.config.buckets import parse_buckets
from nmt.config.schema import StudyConfig
from nmt.study.archive import archive_records
from nmt.study.decode import load_models, load_test_sets, report_decodings
from nmt.study.heatmaps import heatmap_section, long_heatmap_section
from nmt.study.length_section import drop_table, length_section
from nmt.study.models import runs_section
from nmt.study.plan import PlannedRun, missing_reason
from nmt.study.training_section import training_data_section


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


def _search_description(study: StudyConfig) -> str:
    """The report's search in one phrase (its header, results.json's ``decoding``, the
    headline and the definitions): greedy search when ``study.beam_size`` is 1, else beam
    search with each model's alpha chosen on validation among ``study.alphas``."""
    return (
        "greedy search"
        if study.beam_size == 1
        else f"beam search, beam {study.beam_size}, GNMT length penalty with each model's "
        "alpha chosen on the validation score among " + ", ".join(f"{a:g}" for a in study.alphas)
    )


def _title(study: StudyConfig, search: str) -> list[str]:
    """The report's first lines: its title and its decoding (``search``, as
    :func:`_search_description` gives it)."""
    return [
        f"# Length study: {study.name}\n",
        f"Decoding: {search}; fp32 matrix products"
        + ("; greedy search beside it under each test set." if study.beam_size > 1 else ".")
        + "\n",
    ]


def _archive_runs(runs: list[PlannedRun], digests: dict[str, str]) -> None:
    """Copy the records of each of ``runs`` that has an archive into it
    (:func:`nmt.study.archive.archive_records`; ``digests``: each checkpoint's SHA-256 by
    label); runs reported from the archive or from a shipped folder are skipped. Raises
    OSError."""
    for r in runs:
        # a shipped run's records are in its folder, in git: only its translations are
        # archived (by decode), so a later session decodes nothing again
        if r.archive is not None and r.action not in ("archived", "shipped"):
            archive_records(r.archive, r.out_dir, digests[r.label])


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
    _archive_runs(runs, digests)
    test_sets = load_test_sets(study, runs[0].cfg, log)
    buckets = parse_buckets(study.buckets)
    decodings, alpha_choice = report_decodings(study, runs, models, log, digests)
    search = _search_description(study)
    md = _title(study, search) + _missing_section(study, runs, missing)
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
    headline: list[str] = []
    for ts in test_sets:
        md_ts, record = length_section(
            study,
            runs,
            ts,
            models=models,
            decodings=decodings,
            digests=digests,
            buckets=buckets,
            log=log,
            out=out,
        )
        md += md_ts
        if record["drops"] and ts.name.endswith("_joined") and not headline:
            headline = drop_table(study, record["drops"])
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
