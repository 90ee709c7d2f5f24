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

    python -m nmt.commands.select runs/recipe_deen recipe_deen [--beam 5] [--alphas 0.6,1.0,1.4]
        [--average 5] [--data-path DIR]

Run it from the directory the training ran in (the checkpoint stores a relative
``data.path``), or pass ``--data-path``. Every number comes from ``nmt evaluate``
(sacreBLEU, with signatures in the JSON).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

from nmt.model.checkpoint import CheckpointError, read_payload
from nmt.config.schema import ConfigError
from nmt.config.load import from_dict
from nmt.data.corpus import DataError, read_split
from nmt.commands.evaluate import stored_corpus

ROOT = Path(__file__).resolve().parent.parent  # the repository: results/ is written there
NMT = [sys.executable, "-m", "nmt"]



def _fail(message: str) -> None:
    """Print ``message`` on stderr and exit with status 2 (bad input, as ``nmt`` does)."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def run_nmt(args: list[str], text_out: Path | None = None) -> None:
    """Run one ``nmt`` command from the current directory; tee its output to ``text_out``."""
    proc = subprocess.run(NMT + args, capture_output=True, text=True)
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        _fail(f"nmt {' '.join(args)} failed with exit code {proc.returncode}")
    if text_out is not None:
        text_out.write_text(proc.stdout, encoding="utf-8")


def evaluate(ckpts: list[Path], split: str, beam: int, alpha: float, stem: Path,
             data_path: str | None) -> list[dict]:
    """``nmt evaluate`` on ``ckpts``; writes ``{stem}.json`` and ``{stem}.txt`` and returns
    the JSON records (one per checkpoint)."""
    # Not Path.with_suffix: a stem such as "..._alpha0.6" would lose its ".6".
    json_out, text_out = Path(f"{stem}.json"), Path(f"{stem}.txt")
    extra = [] if data_path is None else ["--data-path", data_path]
    run_nmt(["evaluate", *map(str, ckpts), "--split", split, "--beam", str(beam),
             "--alpha", str(alpha), "--json", str(json_out), *extra], text_out=text_out)
    return json.loads(json_out.read_text(encoding="utf-8"))


def parse_alphas(text: str) -> list[float]:
    """``"0.6,1.0"`` -> ``[0.6, 1.0]``; raises ValueError naming the bad entry."""
    alphas = []
    for part in text.split(","):
        try:
            alpha = float(part)
        except ValueError:
            raise ValueError(f"--alphas: {part!r} is not a number (give e.g. 0.6,1.0,1.4)") from None
        if not math.isfinite(alpha) or alpha < 0:
            raise ValueError(f"--alphas: {part!r} must be a finite number >= 0")
        alphas.append(alpha)
    return alphas


def check_splits(best: Path, splits: list[str], data_path: str | None) -> None:
    """Fail now, not after an hour of decoding, if a split cannot be read.

    Raises:
        SystemExit: ``best`` is not a readable checkpoint, or a split or the corpus is missing.
    """
    try:
        data = stored_corpus(from_dict(read_payload(best)["config"]).data, data_path)
        for split in splits:
            read_split(data, split, limit=1)
    except (CheckpointError, ConfigError, DataError, OSError) as e:
        _fail(f"error: {e}")


def relative(path: Path) -> str:
    """``path`` relative to the current directory when it lies below it (for portable JSON)."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def main() -> None:
    """Command line: average, choose on the validation split, score the test splits."""
    parser = argparse.ArgumentParser(prog="python -m nmt.commands.select",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="run directory with best.pt and step_*.pt")
    parser.add_argument("name", help="prefix of the files written under results/")
    parser.add_argument("--beam", type=int, default=5, help="beam size (at least 2)")
    parser.add_argument("--alphas", default="0.6,1.0,1.4", help="comma-separated GNMT alphas to try on val")
    parser.add_argument("--average", type=int, default=5, help="average the last N kept checkpoints (0: off)")
    parser.add_argument("--valid-split", default="val", help="split used to choose checkpoint and alpha")
    parser.add_argument("--test-splits", default="test_2016_flickr,test_2017_flickr")
    parser.add_argument("--data-path", default=None, help="override the checkpoint's data.path")
    args = parser.parse_args()
    if args.beam < 2:
        parser.error("--beam must be at least 2 (greedy search is always decoded too)")
    if args.average < 0:
        parser.error("--average must be 0 (off) or more")
    try:
        alphas = parse_alphas(args.alphas)
    except ValueError as e:
        parser.error(str(e))
    test_splits = [s for s in args.test_splits.split(",") if s]
    if not test_splits:
        parser.error("--test-splits is empty")
    if args.valid_split in test_splits:
        parser.error(f"--valid-split {args.valid_split} is also a test split: choosing on it "
                     "would overstate the test score")

    run = args.run
    if not (run / "best.pt").is_file():
        _fail(f"error: {run}/best.pt not found: is {run} a finished training run?")
    check_splits(run / "best.pt", [args.valid_split, *test_splits], args.data_path)
    results = ROOT / "results"
    results.mkdir(exist_ok=True)
    candidates = [run / "best.pt"]
    kept = sorted(run.glob("step_*.pt"))[-args.average:] if args.average else []
    if args.average and not kept:
        print(f"note: {run} has no step_*.pt (train.keep_checkpoints), so only best.pt is compared")
    elif len(kept) < args.average:
        print(f"note: {run} keeps only {len(kept)} step_*.pt, fewer than --average {args.average}")
    if kept:
        run_nmt(["average", *map(str, kept), "-o", str(run / "averaged.pt")])
        candidates.append(run / "averaged.pt")

    def stem(split: str, beam: int, alpha: float | None = None) -> Path:
        suffix = "" if alpha is None else f"_alpha{alpha:g}"
        return results / f"{args.name}_{split}_beam{beam}{suffix}"

    val_rows = []
    for rec in evaluate(candidates, args.valid_split, 1, 0.0, stem(args.valid_split, 1), args.data_path):
        val_rows.append({"checkpoint": relative(Path(rec["checkpoint"])), "beam": 1, "alpha": None,
                         "bleu": rec["bleu"]})
    for alpha in alphas:
        recs = evaluate(candidates, args.valid_split, args.beam, alpha,
                        stem(args.valid_split, args.beam, alpha), args.data_path)
        for rec in recs:
            val_rows.append({"checkpoint": relative(Path(rec["checkpoint"])), "beam": args.beam,
                             "alpha": alpha, "bleu": rec["bleu"]})
    chosen = max((r for r in val_rows if r["alpha"] is not None), key=lambda r: r["bleu"])
    ckpt = Path(chosen["checkpoint"])
    print(f"chosen on {args.valid_split}: {ckpt} beam {args.beam} alpha {chosen['alpha']} "
          f"(val BLEU {chosen['bleu']:.2f})")

    tests = {}
    for split in test_splits:
        g = evaluate([ckpt], split, 1, 0.0, stem(split, 1), args.data_path)[0]
        b = evaluate([ckpt], split, args.beam, chosen["alpha"],
                     stem(split, args.beam, chosen["alpha"]), args.data_path)[0]
        tests[split] = {
            "greedy_bleu": g["bleu"], "beam_bleu": b["bleu"], "beam_gain": b["bleu"] - g["bleu"],
            "greedy_chrf": g["chrf"], "beam_chrf": b["chrf"],
            "beam_bleu_lowercase": b["bleu_lowercase"], "signature": b["signature"],
            "chrf_signature": b["chrf_signature"], "lowercase_signature": b["lowercase_signature"],
        }
    log_file = run / "valid_log.jsonl"
    log = ([json.loads(line) for line in log_file.read_text(encoding="utf-8").splitlines() if line.strip()]
           if log_file.is_file() else [])
    summary = {
        "run": relative(run), "chosen_checkpoint": str(ckpt), "beam": args.beam, "alpha": chosen["alpha"],
        "epochs": log[-1].get("epochs_done", log[-1]["epoch"]) if log else None,
        "averaged_from": [p.name for p in kept],
        "training_minutes": round(log[-1]["elapsed_s"] / 60, 1) if log else None,
        "best_val_bleu_greedy_during_training": max((r["val_bleu"] for r in log), default=None),
        "val_selection": val_rows, "test": tests,
    }
    out = results / f"{args.name}_summary.json"
    out.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary["test"], indent=1))
    print(f"wrote {relative(out)}")


if __name__ == "__main__":
    main()
