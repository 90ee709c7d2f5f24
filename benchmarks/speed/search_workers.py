"""Where two search workers lose time: the shipped models/deen-additive translating the first
1,000 test_2016_flickr sources (Translator, batches of 64), timed over several passes after a
warm-up; results/speed/2026-12-07-zen5-search-passes/ section 3.

  python benchmarks/speed/search_workers.py alone PRECISION [--pair] [--beam K]
      one worker on one thread, wall seconds of each pass; --pair starts two such processes
      at once (each prints its own line): what two cores give two independent searches
  python benchmarks/speed/search_workers.py workers PRECISION threads|processes [--beam K]
      two workers on two threads, as `nmt translate` runs them (threads of this process, or
      search processes), each pass's seconds split into the search and the rest (reading,
      SentencePiece, batching before; detokenising after)
  python benchmarks/speed/search_workers.py rowmax
      in-process A/B, fp32 greedy, one thread: a row's maximum through block maxima
      (nmt.ops.topk.row_max) against torch's max, eight passes each, alternating; CPU
      seconds and whether the outputs are the same

NMT_MULTI30K names the corpus directory (default ../shared/data/multi30k from the checkout).
Timings only on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
MODEL = ROOT / "models/deen-additive"


def _sources(n: int = 1000) -> list[str]:
    data = Path(os.environ.get("NMT_MULTI30K", ROOT.parent / "shared/data/multi30k"))
    with gzip.open(data / "test_2016_flickr.de.gz", "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for _, line in zip(range(n), f, strict=False)]


def alone(precision: str, beam: int, passes: int = 5) -> None:
    """One worker on one thread: each pass's wall seconds."""
    import torch

    from nmt.inference.translator import Translator

    lines = _sources()
    tr = Translator.from_checkpoint(
        MODEL, precision=precision, beam_size=beam, workers=1, threads=1
    )
    with torch.inference_mode():
        tr.translate(lines[:128])
        times = []
        for _ in range(passes):
            start = time.perf_counter()
            tr.translate(lines)
            times.append(time.perf_counter() - start)
    print(
        f"alone {precision} beam {beam} pid {os.getpid()}: " + " ".join(f"{t:.3f}" for t in times)
    )


def workers(precision: str, mode: str, beam: int, passes: int = 5) -> None:
    """Two workers (threads or search processes): each pass's seconds, its search and the rest."""
    import torch

    from nmt.inference.translator import Translator

    lines = _sources()
    tr = Translator.from_checkpoint(
        MODEL,
        precision=precision,
        beam_size=beam,
        workers=2,
        threads=2,
        processes=mode == "processes",
    )
    searched: list[float] = []
    in_parallel = tr._in_parallel

    def timed(*args, **kwargs):
        start = time.perf_counter()
        out = in_parallel(*args, **kwargs)
        searched.append(time.perf_counter() - start)
        return out

    tr._in_parallel = timed  # type: ignore[method-assign]
    with torch.inference_mode():
        tr.translate(lines[:256])
        for _ in range(passes):
            start = time.perf_counter()
            tr.translate(lines)
            total = time.perf_counter() - start
            print(
                f"workers {precision} {mode} beam {beam}: total {total:.3f} s, "
                f"search {searched[-1]:.3f}, rest {total - searched[-1]:.3f}"
            )
    tr.close()


def rowmax(rounds: int = 8) -> None:
    """fp32 greedy with row_max and with torch's max, alternating passes, CPU seconds."""
    import torch

    import nmt.inference.search as search
    from nmt.inference.translator import Translator

    torch.set_num_threads(1)
    lines = _sources()
    tr = Translator.from_checkpoint(MODEL, precision="fp32", beam_size=1, workers=1, threads=1)
    variants = {"row_max": search.row_max, "max": lambda x: x.max(dim=-1)}
    times: dict[str, list[float]] = {k: [] for k in variants}
    texts: dict[str, list[str]] = {}
    with torch.inference_mode():
        tr.translate(lines[:128])
        for r in range(rounds):
            for name in list(variants) if r % 2 == 0 else list(variants)[::-1]:
                search.row_max = variants[name]
                start = time.process_time()
                out = tr.translate(lines)
                times[name].append(time.process_time() - start)
                texts[name] = [t.text for t in out]
    search.row_max = variants["row_max"]
    for name, t in times.items():
        print(
            f"{name}: median {statistics.median(t):.3f} CPU s ({' '.join(f'{x:.3f}' for x in t)})"
        )
    print("outputs identical:", texts["row_max"] == texts["max"])


def main() -> None:
    """Command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    a = sub.add_parser("alone")
    a.add_argument("precision", choices=["fp32", "bf16", "int8"])
    a.add_argument("--pair", action="store_true")
    a.add_argument("--beam", type=int, default=1)
    w = sub.add_parser("workers")
    w.add_argument("precision", choices=["fp32", "bf16", "int8"])
    w.add_argument("how", choices=["threads", "processes"])
    w.add_argument("--beam", type=int, default=1)
    sub.add_parser("rowmax")
    args = ap.parse_args()
    if args.mode == "alone" and args.pair:
        cmd = [sys.executable, __file__, "alone", args.precision, "--beam", str(args.beam)]
        for p in [subprocess.Popen(cmd) for _ in range(2)]:
            p.wait()
    elif args.mode == "alone":
        alone(args.precision, args.beam)
    elif args.mode == "workers":
        workers(args.precision, args.how, args.beam)
    else:
        rowmax()


if __name__ == "__main__":
    main()
