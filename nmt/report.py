"""The study report: decode every test set with every model, bootstrap BLEU/chrF by source
length, draw the length plot and attention heatmaps, and write one Markdown file."""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch
import yaml

from nmt.bootstrap import BucketRow, format_markdown, study_table
from nmt.checkpoint import Loaded, load_checkpoint
from nmt.config import StudyConfig
from nmt.corpus import DataError, read_split
from nmt.evaluate import parse_buckets, score
from nmt.longsets import long_sentence_set
from nmt.plots import curves_from_rows, plot_attention, plot_bleu_by_length
from nmt.study import PlannedRun
from nmt.translate import Decoding, translate_lines


@dataclass
class TestSet:
    """Sources and references of one evaluation set; ``note`` says how it was built."""

    name: str
    sources: list[str]
    references: list[str]
    note: str


def load_test_sets(study: StudyConfig, loaded: Loaded, log: Callable[[str], None]) -> list[TestSet]:
    """The named test splits (a missing one is skipped with a note) and the joined set."""
    sets, by_name = [], {}
    for split in study.test_splits:
        try:
            pairs = read_split(loaded.cfg.data, split)
        except DataError as e:
            log(f"warning: test split {split} skipped: {e}")
            continue
        ts = TestSet(split, [p.src for p in pairs], [p.tgt for p in pairs], "as distributed")
        sets.append(ts)
        by_name[split] = ts
    if study.long_set_split:
        base = by_name.get(study.long_set_split)
        if base is None:
            base_pairs = read_split(loaded.cfg.data, study.long_set_split)
            base = TestSet(study.long_set_split, [p.src for p in base_pairs],
                           [p.tgt for p in base_pairs], "")
        joined = long_sentence_set(base.sources, base.references, study.join_ks)
        ks = ", ".join(map(str, study.join_ks))
        sets.append(TestSet(f"{study.long_set_split}_joined", joined.sources, joined.references,
                            f"{study.long_set_split} with k = {ks} consecutive pairs joined "
                            f"(source to source, reference to reference): {len(joined)} lines"))
    return sets


def _decode(run: PlannedRun, loaded: Loaded, ts: TestSet, log: Callable[[str], None]) -> list[str]:
    """Greedy translations, cached beside the checkpoint until best.pt changes."""
    cache = run.out_dir / "hyps" / f"{ts.name}.txt"
    best = run.out_dir / "best.pt"
    if cache.exists() and cache.stat().st_mtime >= best.stat().st_mtime:
        hyps = cache.read_text(encoding="utf-8").split("\n")[:-1]
        if len(hyps) == len(ts.sources):
            return hyps
    log(f"{run.cfg.name}: translating {ts.name} ({len(ts.sources)} sentences)")
    with torch.inference_mode():
        out = translate_lines(loaded.model, loaded.src_vocab, loaded.tgt_vocab, ts.sources,
                              decoding=Decoding(max_ratio=loaded.cfg.train.max_output_ratio))
    hyps = [" ".join(t.text.split()) for t in out]
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    return hyps


def _falloff(rows: list[BucketRow], system: str) -> str:
    """BLEU in the first and the last well-filled bucket, and the drop between them."""
    mine = [r for r in rows if r.system == system and r.bleu is not None and not r.too_few]
    if len(mine) < 2:
        return f"{system}: fewer than two buckets with enough sentences"
    first, last = mine[0], mine[-1]
    drop = first.bleu.score - last.bleu.score
    rel = 100 * drop / first.bleu.score if first.bleu.score else 0.0
    return (f"{system}: {first.bleu.score:.1f} BLEU at {first.label} words -> "
            f"{last.bleu.score:.1f} at {last.label} words ({-drop:+.1f} points, {-rel:+.0f}%)")


def _heatmaps(study: StudyConfig, runs: list[PlannedRun], models: dict[str, Loaded],
              first: TestSet, out: Path) -> list[str]:
    """Draw attention for the chosen and sampled sentences; returns Markdown lines."""
    candidates = [s for s in first.sources if 8 <= len(s.split()) <= 20]
    sampled = random.Random(study.bootstrap_seed).sample(
        candidates, min(study.sampled_heatmaps, len(candidates)))
    lines = []
    for i, sentence in enumerate([*study.heatmap_sentences, *sampled]):
        for run in runs:
            if run.attention == "none":
                continue
            loaded = models[run.attention]
            tr = translate_lines(loaded.model, loaded.src_vocab, loaded.tgt_vocab, [sentence])[0]
            if tr.attention is None:
                continue
            name = f"attention_{i + 1}_{run.attention}.png"
            plot_attention(tr.src_pieces, tr.tgt_pieces, tr.attention, out / name,
                           f"{run.attention}: {tr.text[:60]}")
            lines.append(f"**{run.attention}**, source: {sentence}  \nhypothesis: {tr.text}\n\n"
                         f"![attention {run.attention} {i + 1}]({name})\n")
    return lines


def write_report(study: StudyConfig, runs: list[PlannedRun], log: Callable[[str], None]) -> Path:
    """Evaluate every run and write ``{report_dir}/report.md`` plus plots and results.json."""
    out = Path(study.report_dir.format(name=study.name))
    out.mkdir(parents=True, exist_ok=True)
    models = {r.attention: load_checkpoint(r.out_dir / "best.pt") for r in runs}
    test_sets = load_test_sets(study, models[runs[0].attention], log)
    buckets = parse_buckets(study.buckets)
    md = [f"# Length study: {study.name}\n"]
    md += _runs_section(study, runs)
    results = {"study": asdict(study), "test_sets": {}}
    for ts in test_sets:
        systems = {r.attention: _decode(r, models[r.attention], ts, log) for r in runs}
        kw = dict(baseline=study.baseline, min_bucket=study.min_bucket,
                  n_samples=study.n_samples, seed=study.bootstrap_seed)
        overall = study_table(systems, ts.references, ts.sources, ((1, None),), **kw)
        rows = study_table(systems, ts.references, ts.sources, buckets, **kw)
        plot = f"bleu_by_length_{ts.name}.png"
        plot_bleu_by_length(curves_from_rows(rows), out / plot,
                            f"{study.name}: {ts.name} (95% bootstrap CI)")
        sig = score(systems[runs[0].attention], ts.references, ts.sources, ((1, None),))
        md += [f"## {ts.name}\n", f"{len(ts.sources)} sentences; {ts.note}.\n",
               f"BLEU signature: `{sig.signature}`  \nchrF signature: `{sig.chrf_signature}`\n",
               "Whole set:\n", format_markdown(overall), "\nBy source length (words):\n",
               format_markdown(rows), "", f"![BLEU by source length]({plot})\n",
               "Where BLEU falls (first to last bucket with at least "
               f"{study.min_bucket} sentences):\n"]
        md += [f"- {_falloff(rows, r.attention)}" for r in runs] + [""]
        results["test_sets"][ts.name] = {"overall": [asdict(r) for r in overall],
                                         "buckets": [asdict(r) for r in rows],
                                         "signature": sig.signature,
                                         "chrf_signature": sig.chrf_signature}
    md += ["## Attention heatmaps\n",
           "Rows: target pieces; columns: source pieces; white = weight 1.\n"]
    md += _heatmaps(study, runs, models, test_sets[0], out)
    md += [_DEFINITIONS]
    (out / "report.md").write_text("\n".join(md), encoding="utf-8")
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    log(f"wrote {out / 'report.md'}")
    return out / "report.md"


def _runs_section(study: StudyConfig, runs: list[PlannedRun]) -> list[str]:
    md = ["## Models\n", f"Base config `{study.base_config}` with overrides "
          f"`{' '.join(study.overrides) or '(none)'}`; only `model.attention` differs.\n",
          "| model | parameters | epochs | steps | wall-clock (min) | best val BLEU (greedy) |",
          "| --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        s = json.loads((r.out_dir / "summary.json").read_text())
        md.append(f"| {r.attention} | {s['parameters']:,} | {s['epochs']} | {s['steps']} | "
                  f"{s['elapsed_min']:.1f} | {s['best_val_bleu']:.2f} |")
    cfg = yaml.safe_dump(runs[0].cfg.to_dict(), sort_keys=False)
    md += ["", f"<details><summary>Resolved config of `{runs[0].cfg.name}`</summary>\n",
           f"```yaml\n{cfg}```\n</details>\n"]
    return md


_DEFINITIONS = """## How to read the numbers

- BLEU and chrF are sacreBLEU corpus scores (0-100) on detokenized, cased text; buckets
  count whitespace words of the source sentence; decoding is greedy.
- `[low, high]`: 95% percentile interval from bootstrap resampling of the sentences of
  the bucket (fixed seed).
- `ΔBLEU vs none (p)`: paired bootstrap (Koehn 2004) on the same resamples; p is the
  fraction of resamples in which the model is *not* better than the fixed-vector model,
  so p < 0.05 means better with 95% confidence.
- `(n<30)`: too few sentences in the bucket to trust its score; shown, not hidden.
"""
