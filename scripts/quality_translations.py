"""The translations behind a quality ensemble's test scores (issue 47), committed and re-scored.

Usage (from the repository root, after ``bash scripts/quality.sh DIRECTION N``):

    .venv/bin/python scripts/quality_translations.py DIRECTION [--data DIR]
        [--summary results/quality/DIRECTION.json] [--out results/quality/DIRECTION_translations]

``nmt select`` scores each member and the ensemble on the test sets but keeps no output. This
decodes every test set of the summary again, exactly as it was scored there (the same
checkpoints, checked by SHA-256, the same beam, alpha and search precision), with ``nmt
translate``, writes ``{out}/{system}.{split}.hyp.{tgt}.gz`` (system: ``s1``, ``s2``, ...
and ``ensemble``), and registers each file in results/hypotheses.json with the JSON paths of
its cased BLEU, chrF and papers' BLEU, so tests/test_committed_scores.py re-scores them
against the summary. Test sets whose source is not in ``--data`` (test_2017_mscoco, unless
the directory holds it) are skipped and named.

Errors (exit 1, one line): no summary, a checkpoint that is gone or is not the one the
summary scored, a translation with another number of lines than its source, no test set's
source found in ``--data`` (nothing written).
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

from nmt.data.digest import file_sha256

REGISTRY = Path("results/hypotheses.json")


class System(NamedTuple):
    """One scored system of a summary: a member (``s1``, ...) or the ensemble."""

    label: str  # the file name's prefix
    prefix: str  # where its record sits in the summary's JSON (``members/0``, ``ensemble``)
    checkpoints: list[str]
    digests: list[str]  # the SHA-256 the summary recorded, one per checkpoint
    record: dict[str, Any]  # beam, alpha and per test set its scores


def systems(summary: dict[str, Any]) -> list[System]:
    """Every member and the ensemble, in the summary's order."""
    out = [
        System(
            f"s{i}",
            f"members/{i - 1}",
            [m["chosen_checkpoint"]],
            [m["chosen_checkpoint_sha256"]],
            m,
        )
        for i, m in enumerate(summary["members"], 1)
    ]
    if summary.get("ensemble"):
        e = summary["ensemble"]
        out.append(System("ensemble", "ensemble", e["checkpoints"], e["checkpoints_sha256"], e))
    return out


def precision_of(search: str) -> str:
    """The search precision a summary's ``search`` text names (``bf16 matrix products``)."""
    for p in ("bf16", "fp16", "int8"):
        if f"{p} matrix products" in search:
            return p
    return "fp32"


def translate(
    nmt: str, checkpoints: list[str], src: Path, beam: int, alpha: float, precision: str
) -> list[str]:
    """One hypothesis per line of the gzip'd ``src``, decoded by ``nmt translate``."""
    with gzip.open(src, "rt", encoding="utf-8") as f:
        text = f.read()
    cmd = [nmt, "translate", *checkpoints, "--beam", str(beam), "--alpha", str(alpha)]
    cmd += ["--precision", precision]
    r = subprocess.run(cmd, input=text, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} failed: {r.stderr.strip()[-500:]}")
    lines = r.stdout.split("\n")[:-1]
    if len(lines) != text.count("\n"):
        raise SystemExit(f"error: {src} has {text.count(chr(10))} lines, the output {len(lines)}")
    return lines


def entry(hyp: Path, split: str, src: str, tgt: str, scores: Path, prefix: str) -> dict:
    """The results/hypotheses.json entry that re-scores ``hyp`` against ``scores``."""
    at = f"{prefix}/test/{split}"
    return {
        "hypotheses": str(hyp),
        "split": split,
        "src_lang": src,
        "tgt_lang": tgt,
        "scores": str(scores),
        "checks": [
            {"metric": "bleu", "value": f"{at}/beam_bleu", "signature": f"{at}/signature"},
            {"metric": "chrf", "value": f"{at}/beam_chrf", "signature": f"{at}/chrf_signature"},
            {
                "metric": "papers",
                "value": f"{at}/beam_bleu_papers",
                "signature": f"{at}/papers_signature",
            },
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("direction", choices=["deen", "ende", "enfr"])
    ap.add_argument("--data", type=Path, default=Path("../shared/data/multi30k"))
    ap.add_argument("--summary", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--nmt", default=".venv/bin/nmt")
    args = ap.parse_args()
    src, tgt = args.direction[:2], args.direction[2:]
    summary_path = args.summary or Path(f"results/quality/{args.direction}.json")
    out = args.out or Path(f"results/quality/{args.direction}_translations")
    if not summary_path.is_file():
        sys.exit(f"error: {summary_path}: no such summary (run scripts/quality.sh first)")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    registry = json.loads(REGISTRY.read_text(encoding="utf-8"))
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    for label, prefix, checkpoints, digests, record in systems(summary):
        for ck, want in zip(checkpoints, digests, strict=True):
            if not Path(ck).is_file():
                sys.exit(f"error: {ck}: checkpoint not found (the summary scored it)")
            if file_sha256(ck) != want:
                sys.exit(f"error: {ck}: not the checkpoint {summary_path} scored (SHA-256 differs)")
        for split, scored in record["test"].items():
            source = args.data / f"{split}.{src}.gz"
            if not source.is_file():
                print(f"{label} {split}: skipped, {source} not found", file=sys.stderr)
                continue
            precision = precision_of(scored.get("search", ""))
            lines = translate(
                args.nmt, checkpoints, source, record["beam"], record["alpha"], precision
            )
            hyp = out / f"{label}.{split}.hyp.{tgt}.gz"
            hyp.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), mtime=0))
            files = [f for f in registry["files"] if f["hypotheses"] != str(hyp)]
            registry["files"] = [*files, entry(hyp, split, src, tgt, summary_path, prefix)]
            written += 1
            print(f"{hyp}: {len(lines)} lines (beam {record['beam']}, alpha {record['alpha']})")
    if not written:
        sys.exit(f"error: no test set's source found in {args.data}; nothing written (--data)")
    REGISTRY.write_text(json.dumps(registry, indent=1, ensure_ascii=False) + "\n", "utf-8")


if __name__ == "__main__":
    main()
