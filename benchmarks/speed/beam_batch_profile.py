"""CPU time of beam search at ``nmt serve``'s shape: batches of 8 single-sentence
requests, beam 5, one torch thread; and where that time goes.

  python benchmarks/speed/beam_batch_profile.py [--models M ...] [--lines 64] [--batch 8]
      [--beam 5] [--rounds 3] [--profile] [--precision fp32|bf16|int8]

The first ``--lines`` sources of test_2016_flickr (``$NMT_MULTI30K``, default
/work/shared/data/multi30k) are batched in file order, as a server batches whatever
arrives (no length sorting), and searched with each model's own length penalty and alpha.
The number is CPU seconds (``time.process_time``) per sentence, the best of ``--rounds``
passes: on a machine shared with other work, CPU time, not wall clock, is what a change
moves. ``--profile`` adds a torch.profiler table of one pass (self CPU time per op,
grouped as matrix products, GRU/elementwise, topk/sort, indexing and the rest) and the
top functions of a cProfile of one pass (the Python side).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import gzip
import io
import os
import pstats
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[2]


def code_root() -> Path:
    """Where ``nmt`` is imported from: ``--code DIR`` (an A/B's other version, e.g. a
    ``git archive`` of main), else this checkout; read before the imports below."""
    if "--code" in sys.argv:
        return Path(sys.argv[sys.argv.index("--code") + 1]).resolve()
    return ROOT


sys.path.insert(0, str(code_root()))

from nmt.data.batches import Example, collate
from nmt.data.vocab import EOS
from nmt.inference.search import beam_search
from nmt.inference.translate import Decoding, search_precision
from nmt.inference.translator import Translator

GROUPS = {
    "matrix products": ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear"),
    "topk / sort": ("aten::topk", "aten::sort", "aten::amax", "aten::max"),
    "index / gather / cat": (
        "aten::index_select",
        "aten::index",
        "aten::gather",
        "aten::cat",
        "aten::index_put_",
        "aten::scatter_",
        "aten::nonzero",
        "aten::repeat_interleave",
    ),
    "softmax / log_softmax": ("aten::_log_softmax", "aten::_softmax", "aten::log_softmax"),
}


def sources(n: int) -> list[str]:
    data = Path(os.environ.get("NMT_MULTI30K", "/work/shared/data/multi30k"))
    with gzip.open(data / "test_2016_flickr.de.gz", "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for _, line in zip(range(n), f, strict=False)]


def batches(tr: Translator, lines: list[str], size: int) -> list:
    ex = [Example(tr.encode(line).ids + [EOS], [], i) for i, line in enumerate(lines)]
    return [collate(ex[i : i + size]) for i in range(0, len(ex), size)]


def one_pass(tr: Translator, bs: list, decoding: Decoding) -> list:
    out = []
    with search_precision(decoding, torch.device("cpu")):
        for b in bs:
            out.extend(
                beam_search(
                    tr.model,
                    b.src,
                    b.src_len,
                    beam_size=decoding.beam_size,
                    alpha=decoding.alpha,
                    length_penalty=decoding.length_penalty,
                    max_ratio=decoding.max_ratio,
                )
            )
    return out


def group_of(key: str) -> str:
    for g, names in GROUPS.items():
        if key in names:
            return g
    return "elementwise / other ops"


def op_table(tr: Translator, bs: list, decoding: Decoding) -> None:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.process_time()
        one_pass(tr, bs, decoding)
        cpu = time.process_time() - t0
    events = prof.key_averages()
    ops = [e for e in events if e.key.startswith("aten::")]
    total_ops = sum(e.self_cpu_time_total for e in ops) / 1e6
    groups: collections.Counter = collections.Counter()
    for e in ops:
        groups[group_of(e.key)] += e.self_cpu_time_total / 1e6
    print(f"  profiled pass: {cpu:.3f} s CPU, aten ops' self time {total_ops:.3f} s")
    for g, s in groups.most_common():
        print(f"    {g:28s} {s:7.3f} s")
    print("    top ops (self CPU s, calls):")
    for e in sorted(ops, key=lambda e: -e.self_cpu_time_total)[:15]:
        print(f"      {e.key:32s} {e.self_cpu_time_total / 1e6:7.3f} {e.count:7d}")


def py_table(tr: Translator, bs: list, decoding: Decoding) -> None:
    # timed in CPU seconds: wall time on a shared machine counts the other processes' turns
    pr = cProfile.Profile(time.process_time)
    pr.enable()
    one_pass(tr, bs, decoding)
    pr.disable()
    for key, n in (("tottime", 25), ("cumulative", 30)):
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats(key).print_stats(n)
        print(f"  cProfile (CPU s), by {key}:")
        print("\n".join("    " + line for line in s.getvalue().splitlines()[4:] if line))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["models/deen-additive", "models/deen-none"])
    ap.add_argument("--lines", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--code", help="import nmt from this folder (default: this checkout)")
    ap.add_argument("--dump", help="save every hypothesis of the last round to this file")
    args = ap.parse_args()
    torch.set_num_threads(1)
    lines = sources(args.lines)
    dumps: dict[str, list] = {}
    for path in args.models:
        tr = Translator.from_paths([ROOT / path], "cpu", beam_size=args.beam)
        tr.model.eval()
        decoding = Decoding.from_config(
            tr.loaded.cfg, beam_size=args.beam, precision=args.precision
        ).on(torch.device("cpu"))
        bs = batches(tr, lines, args.batch)
        one_pass(tr, bs[:1], decoding)  # warm-up: oneDNN primitives, caches
        times = []
        for _ in range(args.rounds):
            t0 = time.process_time()
            out = one_pass(tr, bs, decoding)
            times.append((time.process_time() - t0) / len(lines))
        if args.dump:
            dumps[path] = [[_plain(h) for h in nbest] for nbest in out]
        print(
            f"{code_root().name}:{path}: batch {args.batch}, beam {args.beam}, {decoding.precision}, "
            f"{len(lines)} lines: CPU ms/sentence best {1e3 * min(times):.2f} "
            f"(rounds: {', '.join(f'{1e3 * t:.2f}' for t in times)})"
        )
        if args.profile:
            op_table(tr, bs, decoding)
            py_table(tr, bs, decoding)
    if args.dump:
        torch.save(dumps, args.dump)


def _plain(h) -> dict:
    """A hypothesis as plain values, for an exact comparison of two versions' outputs."""
    return {
        "tokens": h.tokens,
        "score": h.score,
        "log_prob": h.log_prob,
        "complete": h.complete,
        "token_logprobs": h.token_logprobs,
        "attention": h.attention,
    }


if __name__ == "__main__":
    main()
