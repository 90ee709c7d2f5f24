"""The model card (README.md) of an exported model folder: the Hugging Face Hub's YAML front
matter, then how the model was trained, its test scores with their signatures, BLEU by
source length on the joined test sets, and how to use it. Every number comes from the
folder's results.json (nmt/commands/export.py), measured on the folder's own weights."""

from __future__ import annotations

from typing import Any

import yaml

from nmt.data.longsets import JOINED_KS, JOINED_SUFFIX

LANGUAGES = {"de": "German", "en": "English", "fr": "French", "cs": "Czech"}


def _lang(code: str) -> str:
    return LANGUAGES.get(code, code)


def front_matter(results: dict[str, Any], config: dict[str, Any], tests: list[str]) -> str:
    """The Hub's YAML front matter: language, license, library, tags, datasets and a
    ``model-index`` with BLEU and chrF of each test split."""
    data = config.get("data", {})
    src, tgt = data.get("src_lang", "?"), data.get("tgt_lang", "?")
    dataset = data.get("hf_name") or "multi30k"
    attention = results.get("attention", "?")
    metrics_of = []
    for split in tests:
        t = results["test"].get(split)
        if t is None:
            continue
        metrics_of.append(
            {
                "task": {"type": "translation", "name": f"Translation {src}-{tgt}"},
                "dataset": {"type": dataset, "name": f"Multi30k {split}", "split": split},
                "metrics": [
                    {
                        "type": "bleu",
                        "value": round(t["bleu"], 2),
                        "name": "BLEU (cased sacreBLEU)",
                    },
                    {
                        "type": "bleu",
                        "value": round(t["bleu_papers"], 2),
                        "name": "BLEU (lowercased, Moses-tokenized, as the papers)",
                    },
                    {"type": "chrf", "value": round(t["chrf"], 2), "name": "chrF"},
                ],
            }
        )
    head = {
        "language": [src, tgt],
        "license": "mit",
        "library_name": "nmt",
        "pipeline_tag": "translation",
        "tags": ["translation", "gru", "encoder-decoder", f"attention-{attention}"],
        "datasets": [dataset],
        "model-index": [{"name": results.get("name", "nmt-model"), "results": metrics_of}],
    }
    return "---\n" + yaml.safe_dump(head, sort_keys=False, allow_unicode=True) + "---\n"


def _scores_table(results: dict[str, Any], tests: list[str]) -> list[str]:
    rows = [
        "| test set | sentences | BLEU | BLEU (papers') | chrF | translations |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for split in tests:
        t = results["test"].get(split)
        if t:
            rows.append(
                f"| {split} | {t['n_sentences']} | {t['bleu']:.2f} | "
                f"{t['bleu_papers']:.2f} | {t['chrf']:.2f} | `{t['hypotheses']}` |"
            )
    first = next((results["test"][s] for s in tests if s in results["test"]), None)
    if first:
        rows += [
            "",
            f"- BLEU signature: `{first['signature']}`",
            f"- papers' BLEU signature: `{first['papers_signature']}`",
            f"- chrF signature: `{first['chrf_signature']}`",
        ]
    return rows


def _by_length(results: dict[str, Any], tests: list[str]) -> list[str]:
    joined = [(s + JOINED_SUFFIX, results["other"].get(s + JOINED_SUFFIX)) for s in tests]
    joined = [(n, j) for n, j in joined if j]
    if not joined:
        return []
    ks = ", ".join(map(str, JOINED_KS))
    rows = [
        "## BLEU by source length",
        "",
        f"On each test set joined k = {ks} consecutive captions at a time (nmt's "
        "`{split}_joined`, nmt/data/longsets.py): the captions of a block are translated "
        "on their own, so the joined reference is still exact, and sources run past 60 "
        "words. Sentences per bucket in brackets.",
        "",
        "| source words | " + " | ".join(n for n, _ in joined) + " |",
        "|---|" + "---:|" * len(joined),
    ]
    labels = [(b["min_len"], b["max_len"]) for b in joined[0][1]["buckets"]]
    for i, (lo, hi) in enumerate(labels):
        cells = []
        for _, j in joined:
            b = j["buckets"][i]
            cells.append("-" if b["bleu"] is None else f"{b['bleu']:.2f} ({b['n']})")
        rows.append(f"| {lo}-{hi if hi is not None else ''} | " + " | ".join(cells) + " |")
    rows += [
        "",
        "Corpus BLEU of the joined sets: "
        + ", ".join(f"{n} {j['bleu']:.2f}" for n, j in joined)
        + ".",
    ]
    return rows


def _training(results: dict[str, Any], config: dict[str, Any]) -> list[str]:
    t = results.get("training", {})
    train = config.get("train", {})

    def shown(value: Any, unit: str = "") -> str:
        return "not recorded by the run" if value is None else f"{value}{unit}"

    command = (
        t.get("command")
        or "nmt train config.yaml (this folder's config.yaml is the run's resolved config)"
    )
    return [
        "## How it was trained",
        "",
        f"- command: `{command}`",
        "- config: `config.yaml` (resolved: every setting, defaults included)",
        f"- parameters: {results.get('parameters'):,}",
        f"- epochs: {shown(t.get('epochs'))} ({shown(t.get('steps'))} steps, "
        f"{t.get('validations', 0)} validations; at most {train.get('max_epochs')} epochs, "
        f"patience {train.get('patience')})",
        f"- wall clock: {shown(t.get('wall_clock_min'), ' min')}",
        f"- CPU: {shown(t.get('cpu'))}; threads: {shown(t.get('threads'))}",
        f"- training precision: {shown(t.get('precision'))}",
        f"- best validation score: {shown(t.get('best_val_bleu'))} (the run's selection "
        "score; `valid_log.jsonl` holds every validation)",
    ]


def model_card(results: dict[str, Any], config: dict[str, Any], tests: list[str]) -> str:
    """README.md of the folder (Markdown with the Hub's front matter)."""
    data = config.get("data", {})
    src, tgt = data.get("src_lang", "?"), data.get("tgt_lang", "?")
    name = results.get("name", "model")
    dtype_rows = ", ".join(f"{k} {v:.2f}" for k, v in results["dtype_test_bleu"].items())
    val = results["other"].get(data.get("valid_split", "val"))
    lines = [
        f"# {name}: {_lang(src)} → {_lang(tgt)}, GRU encoder-decoder, "
        f"`{results.get('attention')}` attention",
        "",
        f"Trained with nmt on Multi30k ({src}→{tgt}). Every number below"
        "  was measured on the files of this folder (`nmt export`), with "
        f"{results['search']}; the translations behind each are stored beside it.",
        "",
        "## Test scores",
        "",
        *_scores_table(results, tests),
        "",
        *_by_length(results, tests),
        "",
        *_training(results, config),
        "",
        "## Weights",
        "",
        f"`model.safetensors` holds the weights in {results['weights_dtype']} (computation "
        f"is in fp32): the smallest precision whose test BLEU on {tests[0]} stays within "
        f"{results['bleu_tolerance']} of the checkpoint's. Test BLEU by precision: "
        f"{dtype_rows}.",
        "",
    ]
    if val:
        lines += [
            f"Validation ({data.get('valid_split', 'val')}): BLEU {val['bleu']:.2f}, "
            f"chrF {val['chrf']:.2f} (`{val['hypotheses']}`).",
            "",
        ]
    lines += [
        "## How to use it",
        "",
        "```sh",
        f"nmt translate FOLDER -i sources.{src} > translations.{tgt}   # or a shipped name, "
        "or hf://ORG/NAME",
        "nmt evaluate FOLDER --split test_2016_flickr_joined "
        "--buckets 1-10,11-20,21-30,31-40,41-50,51-60,61-",
        "nmt serve --model FOLDER",
        "```",
        "",
        "`manifest.json` lists each file's SHA-256; nmt refuses a folder with a missing or "
        "altered file.",
        "",
        "## Files",
        "",
        "- `model.safetensors`, `config.yaml`, `source.spm.model`, `target.spm.model`: the model",
        "- `results.json`: every score above, with signatures and BLEU by length",
        "- `*.hyp.*.gz`: the translations scored, one line per source line",
        "- `valid_log.jsonl`: the run's validation log",
        "",
    ]
    return front_matter(results, config, tests) + "\n" + "\n".join(lines)
