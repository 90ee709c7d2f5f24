"""Study report: decode every test set with every model, score by length, write Markdown.

BLEU/chrF by source length with bootstrap intervals, the length plot and attention
heatmaps, in one Markdown file.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from nmt.config.buckets import parse_buckets
from nmt.config.schema import StudyConfig
from nmt.data.digest import lines_sha256
from nmt.data.training_data import training_pairs
from nmt.evaluation.bootstrap import BucketRow, bucket_drop, format_markdown, study_table
from nmt.evaluation.metrics import bucket_label, score
from nmt.evaluation.plots import (
    curves_from_rows,
    plot_attention,
    plot_bleu_by_length,
    plot_length_histogram,
)
from nmt.inference.translate import Decoding
from nmt.inference.translator import Translator
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
from nmt.study.models import runs_section
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


def _heatmaps(
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


def _long_heatmaps(
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


def _training_data_section(
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
    md = [
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


def write_report(study: StudyConfig, runs: list[PlannedRun], log: Callable[[str], None]) -> Path:
    """Evaluate every run and write ``{report_dir}/report.md`` plus plots and results.json.

    Raises:
        CheckpointError, DataError: a run's ``best.pt`` or a test split cannot be read.
    """
    out = Path(study.report_dir.format(name=study.name))
    out.mkdir(parents=True, exist_ok=True)
    models, digests = load_models(runs)
    for r in runs:
        if r.archive is not None and r.action != "archived":
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
    md += runs_section(study, runs, alpha_choice)
    if any(r.cfg.data.train_join_ks for r in runs):
        md += _training_data_section(study, runs, models, out)
    results: dict = {
        "study": asdict(study),
        "decoding": search,
        "alpha_choice": alpha_choice,
        "test_sets": {},
    }
    dashed = [r.label for r in runs if r.cap is not None]
    headline: list[str] = []
    kw: dict[str, Any] = dict(
        baseline=study.baseline,
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
            md_g, record["greedy"] = _greedy_section(study, runs, models, ts, log, digests)
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
    md += _heatmaps(study, runs, models, test_sets[0], out, decodings)
    joined = next((t for t in test_sets if t.name.endswith("_joined")), None)
    md += _long_heatmaps(study, runs, models, joined, out, decodings, log, digests)
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
) -> tuple[list[str], dict]:
    """The same set decoded greedily: BLEU by length and the drop table."""
    systems = {
        r.label: decode(r, models[r.label], ts, greedy_decoding(r.cfg), log, digests[r.label])
        for r in runs
    }
    rows = study_table(
        systems,
        ts.references,
        ts.sources,
        parse_buckets(study.buckets),
        baseline=study.baseline,
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
