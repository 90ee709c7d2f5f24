"""Evaluate a finished recipe run the way the README's results table reports it.

1. Average the run's last N kept checkpoints (``train.keep_checkpoints``) into
   ``RUN/averaged.pt`` with ``nmt average``.
2. On the validation split, decode ``best.pt`` and ``averaged.pt`` greedily and with beam
   search for each length-penalty alpha; pick the checkpoint and alpha with the highest
   validation BLEU under beam search. The test sets are never used for choosing.
3. Decode every test split with the chosen checkpoint, greedy and beam, and write the
   JSON and printed tables to ``results/{NAME}_*``, plus ``results/{NAME}_summary.json``
   with the choice, the scores, the epochs and the training minutes.

Usage::

    python scripts/recipe_eval.py runs/recipe_deen deen_recipe [--beam 5] [--alphas 0.6,1.0,1.4] [--average 5]

Every number comes from ``nmt evaluate`` (sacreBLEU, with signatures in the JSON).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NMT = [sys.executable, "-m", "nmt"]


def run_nmt(args: list[str], text_out: Path | None = None) -> None:
    """Run one ``nmt`` command from the repository root; tee its output to ``text_out``."""
    proc = subprocess.run(NMT + args, cwd=ROOT, capture_output=True, text=True)
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"nmt {' '.join(args)} failed with exit code {proc.returncode}")
    if text_out is not None:
        text_out.write_text(proc.stdout, encoding="utf-8")


def evaluate(ckpts: list[Path], split: str, beam: int, alpha: float, stem: Path) -> list[dict]:
    """``nmt evaluate`` on ``ckpts``; writes ``{stem}.json`` and ``{stem}.txt`` and returns
    the JSON records (one per checkpoint)."""
    # Not Path.with_suffix: a stem such as "..._alpha0.6" would lose its ".6".
    json_out, text_out = Path(f"{stem}.json"), Path(f"{stem}.txt")
    run_nmt(["evaluate", *map(str, ckpts), "--split", split,
             "--beam", str(beam), "--alpha", str(alpha), "--json", str(json_out)], text_out=text_out)
    return json.loads(json_out.read_text(encoding="utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="run directory with best.pt and step_*.pt")
    parser.add_argument("name", help="prefix of the files written under results/")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--alphas", default="0.6,1.0,1.4", help="comma-separated GNMT alphas to try on val")
    parser.add_argument("--average", type=int, default=5, help="average the last N kept checkpoints (0: off)")
    parser.add_argument("--valid-split", default="val")
    parser.add_argument("--test-splits", default="test_2016_flickr,test_2017_flickr")
    args = parser.parse_args()

    run = args.run
    if not (run / "best.pt").is_file():
        raise SystemExit(f"{run}/best.pt not found: is {run} a finished training run?")
    results = ROOT / "results"
    results.mkdir(exist_ok=True)
    candidates = [run / "best.pt"]
    if args.average and sorted(run.glob("step_*.pt")):
        run_nmt(["average", str(run), "--last", str(args.average), "-o", str(run / "averaged.pt")])
        candidates.append(run / "averaged.pt")

    alphas = [float(a) for a in args.alphas.split(",")]
    val_rows = []
    greedy = evaluate(candidates, args.valid_split, 1, 0.0, results / f"{args.name}_{args.valid_split}_beam1")
    for rec in greedy:
        val_rows.append({"checkpoint": rec["checkpoint"], "beam": 1, "alpha": None, "bleu": rec["bleu"]})
    for alpha in alphas:
        recs = evaluate(candidates, args.valid_split, args.beam, alpha,
                        results / f"{args.name}_{args.valid_split}_beam{args.beam}_alpha{alpha:g}")
        for rec in recs:
            val_rows.append({"checkpoint": rec["checkpoint"], "beam": args.beam, "alpha": alpha, "bleu": rec["bleu"]})
    chosen = max((r for r in val_rows if r["beam"] == args.beam), key=lambda r: r["bleu"])
    ckpt = Path(chosen["checkpoint"])
    print(f"chosen on {args.valid_split}: {ckpt} beam {args.beam} alpha {chosen['alpha']} "
          f"(val BLEU {chosen['bleu']:.2f})")

    tests = {}
    for split in args.test_splits.split(","):
        g = evaluate([ckpt], split, 1, 0.0, results / f"{args.name}_{split}_beam1")[0]
        b = evaluate([ckpt], split, args.beam, chosen["alpha"], results / f"{args.name}_{split}_beam{args.beam}")[0]
        tests[split] = {
            "greedy_bleu": g["bleu"], "beam_bleu": b["bleu"], "beam_gain": b["bleu"] - g["bleu"],
            "beam_chrf": b["chrf"], "beam_bleu_lowercase": b["bleu_lowercase"],
            "signature": b["signature"], "chrf_signature": b["chrf_signature"],
            "lowercase_signature": b["lowercase_signature"],
        }
    log = [json.loads(line) for line in (run / "valid_log.jsonl").read_text().splitlines() if line.strip()]
    summary = {
        "run": str(run), "chosen_checkpoint": str(ckpt), "beam": args.beam, "alpha": chosen["alpha"],
        "epochs": log[-1]["epoch"] if log else None,
        "training_minutes": round(log[-1]["elapsed_s"] / 60, 1) if log else None,
        "best_val_bleu_greedy_during_training": max((r["val_bleu"] for r in log), default=None),
        "val_selection": val_rows, "test": tests,
    }
    out = results / f"{args.name}_summary.json"
    out.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary["test"], indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
